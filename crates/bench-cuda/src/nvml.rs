//! What NVML tells about a GPU: the facts the topology needs, and samples of clocks, link and
//! load for the environment record and the idle guard.

use std::collections::BTreeMap;

use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::{Device, Nvml};

use crate::bdf::normalize_bdf;

/// NVML's facts about one GPU. A fact NVML would not give is `None`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NvmlFacts {
    /// NVML's index of the device (not necessarily the CUDA ordinal).
    pub index: u32,
    pub name: Option<String>,
    /// PCIe generation now; idle GPUs downtrain, so read it under load to know the link.
    pub link_gen_current: Option<u32>,
    pub link_width_current: Option<u32>,
    pub link_gen_max: Option<u32>,
    pub link_width_max: Option<u32>,
    pub bar1_total_bytes: Option<u64>,
    pub persistence_mode: Option<bool>,
    /// The device's NUMA node, where NVML knows it (often not in VMs: use sysfs then).
    pub numa_node: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    pub mem_clock_mhz: Option<u32>,
    pub max_sm_clock_mhz: Option<u32>,
    pub max_mem_clock_mhz: Option<u32>,
}

/// NVML's devices by normalised BDF.
pub fn index_by_bdf(nvml: &Nvml) -> BTreeMap<String, u32> {
    let count = nvml.device_count().unwrap_or(0);
    (0..count)
        .filter_map(|i| {
            let device = nvml.device_by_index(i).ok()?;
            let bdf = normalize_bdf(&device.pci_info().ok()?.bus_id)?;
            Some((bdf, i))
        })
        .collect()
}

/// Read the facts of the device at NVML index `index`.
pub fn facts(device: &Device<'_>, index: u32) -> NvmlFacts {
    NvmlFacts {
        index,
        name: device.name().ok(),
        link_gen_current: device.current_pcie_link_gen().ok(),
        link_width_current: device.current_pcie_link_width().ok(),
        link_gen_max: device.max_pcie_link_gen().ok(),
        link_width_max: device.max_pcie_link_width().ok(),
        bar1_total_bytes: device.bar1_memory_info().ok().map(|b| b.total),
        persistence_mode: device.is_in_persistent_mode().ok(),
        numa_node: device.numa_node_id().ok(),
        sm_clock_mhz: device.clock_info(Clock::SM).ok(),
        mem_clock_mhz: device.clock_info(Clock::Memory).ok(),
        max_sm_clock_mhz: device.max_clock_info(Clock::SM).ok(),
        max_mem_clock_mhz: device.max_clock_info(Clock::Memory).ok(),
    }
}

/// Clocks, link and performance state at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sample {
    pub sm_clock_mhz: Option<u32>,
    pub mem_clock_mhz: Option<u32>,
    pub link_gen: Option<u32>,
    pub link_width: Option<u32>,
    pub pstate: Option<String>,
}

pub fn sample(device: &Device<'_>) -> Sample {
    Sample {
        sm_clock_mhz: device.clock_info(Clock::SM).ok(),
        mem_clock_mhz: device.clock_info(Clock::Memory).ok(),
        link_gen: device.current_pcie_link_gen().ok(),
        link_width: device.current_pcie_link_width().ok(),
        pstate: device.performance_state().ok().map(|p| format!("{p:?}")),
    }
}

/// A link reading as a setting: `gen5 x16` with its typed link, or what is known of it (in
/// words only: a half-read link is no link to check).
pub fn link_setting(gen: Option<u32>, width: Option<u32>) -> Option<hwc_model::Setting> {
    match (gen, width) {
        (Some(gen), Some(width)) => Some(hwc_model::Setting::link(hwc_model::LinkState {
            gen,
            width,
        })),
        (Some(g), None) => Some(format!("gen{g}").into()),
        (None, Some(w)) => Some(format!("x{w}").into()),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::link_setting;

    #[test]
    fn link_settings() {
        let full = link_setting(Some(5), Some(16)).unwrap();
        assert_eq!(full.value, "gen5 x16");
        assert_eq!(full.link, Some(hwc_model::LinkState { gen: 5, width: 16 }));
        let half = link_setting(Some(4), None).unwrap();
        assert_eq!((half.value.as_str(), half.link), ("gen4", None));
        assert_eq!(link_setting(None, Some(8)).unwrap().value, "x8");
        assert_eq!(link_setting(None, None), None);
    }
}
