//! PCI functions (`/sys/bus/pci/devices`): ids, driver, link, root complex and NUMA node.

use std::path::{Component, Path, PathBuf};

use hwc_model::topology::{NumaNode, PciFunction, PcieLink};

use crate::fsroot::FsRoot;
use crate::numa::device_locality;
use crate::parse::{parse_cpulist, parse_cpumask, parse_link_speed};
use crate::pcie_config::parse_config;

const PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// A PCI function and its resolved sysfs directory (`/sys/devices/pci0000:00/0000:00:06.0`).
#[derive(Debug, Clone)]
pub(crate) struct PciDev {
    pub(crate) dir: PathBuf,
    pub(crate) func: PciFunction,
}

/// Every PCI function, in BDF order. Entries without vendor, device and class are skipped.
pub(crate) fn scan(fs: &FsRoot, nodes: &[NumaNode]) -> Vec<PciDev> {
    fs.names(PCI_DEVICES)
        .into_iter()
        .filter_map(|bdf| read_function(fs, bdf, nodes))
        .collect()
}

fn read_function(fs: &FsRoot, bdf: String, nodes: &[NumaNode]) -> Option<PciDev> {
    let dir = fs.resolve(Path::new(PCI_DEVICES).join(&bdf))?;
    let attr = |name: &str| fs.text(dir.join(name));
    let local_cpus = attr("local_cpulist")
        .and_then(|t| parse_cpulist(&t))
        .or_else(|| attr("local_cpus").and_then(|t| parse_cpumask(&t)));
    let (numa_node, numa_source) = device_locality(
        fs.parse(dir.join("numa_node")),
        local_cpus.as_deref(),
        nodes,
    );
    let func = PciFunction {
        class: attr("class")?,
        vendor: attr("vendor")?,
        device: attr("device")?,
        numa_node,
        numa_source,
        root: host_bridge(&dir),
        link: link(fs, &dir),
        driver: fs.link_name(dir.join("driver")),
        parent: dir
            .parent()
            .and_then(|d| d.file_name()?.to_str())
            .filter(|n| is_bdf(n))
            .map(str::to_string),
        config: fs.bytes(dir.join("config"), 4096).map(|b| parse_config(&b)),
        iommu_group: fs
            .link_name(dir.join("iommu_group"))
            .and_then(|g| g.parse().ok()),
        iommu_domain: None,
        bdf,
    };
    let func = PciFunction {
        iommu_domain: func
            .iommu_group
            .and_then(|g| fs.text(format!("/sys/kernel/iommu_groups/{g}/type"))),
        ..func
    };
    Some(PciDev { dir, func })
}

/// `0000:00:06.0` form: domain, bus, device and function in hex.
fn is_bdf(s: &str) -> bool {
    let hex = |p: &str, n: usize| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit());
    let parts: Vec<&str> = s.split([':', '.']).collect();
    matches!(parts[..], [d, b, dev, f] if hex(d, 4) && hex(b, 2) && hex(dev, 2) && hex(f, 1))
}

/// The host bridge a resolved device path hangs under: `…/pci0000:40/…` → `0000:40`.
pub fn host_bridge(dir: &Path) -> Option<String> {
    dir.components().find_map(|c| {
        let Component::Normal(name) = c else {
            return None;
        };
        let bridge = name.to_str()?.strip_prefix("pci")?;
        let (domain, bus) = bridge.split_once(':')?;
        let hex = |s: &str| !s.is_empty() && s.chars().all(|ch| ch.is_ascii_hexdigit());
        (hex(domain) && hex(bus)).then(|| bridge.to_string())
    })
}

/// The link as sysfs reports it; `None` when it reports nothing (integrated endpoints).
fn link(fs: &FsRoot, dir: &Path) -> Option<PcieLink> {
    let speed = |name: &str| fs.text(dir.join(name)).and_then(|t| parse_link_speed(&t));
    let width = |name: &str| fs.parse::<u32>(dir.join(name)).filter(|&w| w > 0);
    let link = PcieLink {
        current_speed_gts: speed("current_link_speed"),
        current_width: width("current_link_width"),
        max_speed_gts: speed("max_link_speed"),
        max_width: width("max_link_width"),
    };
    (link != PcieLink::default()).then_some(link)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_bridges() {
        let p = Path::new("/sys/devices/pci0000:40/0000:40:03.0/0000:43:00.0");
        assert_eq!(host_bridge(p).as_deref(), Some("0000:40"));
        let vmd = Path::new("/sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:06.0");
        assert_eq!(host_bridge(vmd).as_deref(), Some("0000:00"));
        let acpi = Path::new("/sys/devices/LNXSYSTM:00/pci_bus/platform/pci0001:00/0001:00:00.0");
        assert_eq!(host_bridge(acpi).as_deref(), Some("0001:00"));
        assert_eq!(host_bridge(Path::new("/sys/devices/virtual/nvme")), None);
        assert_eq!(host_bridge(Path::new("/sys/devices/pci_bus")), None);
    }
}
