//! NVIDIA GPUs among the PCI functions: model, link generation and width, BARs.

use hwc_model::topology::{Gpu, PciFunction};
use hwc_model::{pcie_gen_from_speed, GIB};

use crate::fsroot::FsRoot;
use crate::parse::parse_resource;
use crate::pci::PciDev;

const NVIDIA: &str = "0x10de";

/// Display (`0x0300xx`) or 3D (`0x0302xx`) controller made by NVIDIA.
pub fn is_nvidia_gpu(func: &PciFunction) -> bool {
    func.vendor.eq_ignore_ascii_case(NVIDIA)
        && (func.class.starts_with("0x0300") || func.class.starts_with("0x0302"))
}

/// The NVIDIA GPUs in BDF order (`pci` is sorted), numbered from 0.
pub(crate) fn gpus(fs: &FsRoot, pci: &[PciDev]) -> Vec<Gpu> {
    pci.iter()
        .filter(|dev| is_nvidia_gpu(&dev.func))
        .zip(0..)
        .map(|(dev, index)| gpu(fs, dev, index))
        .collect()
}

fn gpu(fs: &FsRoot, dev: &PciDev, index: u32) -> Gpu {
    let func = &dev.func;
    let link = func.link.unwrap_or_default();
    let bars = fs
        .read(dev.dir.join("resource"))
        .map(|t| parse_resource(&t))
        .unwrap_or_default();
    let bar1_bytes = bars
        .iter()
        .filter(|b| b.prefetchable)
        .map(|b| b.size_bytes)
        .max();
    Gpu {
        index,
        cuda_index: None,
        pci_bdf: func.bdf.clone(),
        model: driver_model(fs, &func.bdf),
        vendor: func.vendor.clone(),
        device: func.device.clone(),
        pcie_gen: link.current_speed_gts.and_then(pcie_gen_from_speed),
        pcie_width: link.current_width,
        pcie_max_gen: link.max_speed_gts.and_then(pcie_gen_from_speed),
        pcie_max_width: link.max_width,
        bar1_bytes,
        bar1_gib: bar1_bytes.map(|b| b as f64 / GIB as f64),
        bars,
        numa_node: func.numa_node,
        root: func.root.clone(),
        driver: func.driver.clone(),
        memory_bytes: None,
        l2_cache_bytes: None,
    }
}

/// The `Model:` line the NVIDIA driver writes in `/proc/driver/nvidia/gpus/<bdf>/information`.
fn driver_model(fs: &FsRoot, bdf: &str) -> Option<String> {
    let text = fs.read(format!("/proc/driver/nvidia/gpus/{bdf}/information"))?;
    let model = text
        .lines()
        .find_map(|line| line.strip_prefix("Model:"))?
        .trim();
    (!model.is_empty()).then(|| model.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn func(vendor: &str, class: &str) -> PciFunction {
        PciFunction {
            bdf: "0000:01:00.0".into(),
            class: class.into(),
            vendor: vendor.into(),
            device: "0x2335".into(),
            numa_node: None,
            numa_source: None,
            root: None,
            ..PciFunction::default()
        }
    }

    #[test]
    fn which_functions_are_gpus() {
        assert!(is_nvidia_gpu(&func("0x10de", "0x030200")));
        assert!(is_nvidia_gpu(&func("0x10DE", "0x030000")));
        assert!(!is_nvidia_gpu(&func("0x10de", "0x040300")), "HDMI audio");
        assert!(!is_nvidia_gpu(&func("0x1002", "0x030000")));
    }
}
