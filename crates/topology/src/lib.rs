//! Reads what a machine is made of — CPUs, caches, NUMA nodes, PCI functions, NVIDIA GPUs,
//! NVMe drives, the links between them and the tools the benchmarks need — from sysfs and
//! procfs under a filesystem root, into an [`hwc_model::Topology`].
//!
//! The root is `/` on a live machine or an extracted `/sys` + `/proc` snapshot in tests.
//! Detection never fails, never panics on missing or odd files and never needs root: whatever
//! the machine does not tell stays `None`, and nothing is guessed.

mod cpu;
mod fsroot;
mod gpu;
mod numa;
mod nvme;
mod parse;
mod pci;
pub mod pcie_config;
mod routing;
mod tools;

use std::ffi::OsString;
use std::path::PathBuf;

use hwc_model::topology::{Platform, Topology};

pub use cpu::zen_generation;
pub use gpu::is_nvidia_gpu;
pub use numa::{device_locality, node_of_cpus};
pub use nvme::{is_namespace_name, parse_mounts};
pub use parse::{
    decode_mount_path, meminfo_value, os_pretty_name, parse_cpulist, parse_cpumask, parse_hex,
    parse_link_speed, parse_resource, parse_size, short_hostname, IORESOURCE_MEM_64,
    IORESOURCE_PREFETCH, MAX_CPUS,
};
pub use pci::host_bridge;
pub use routing::relation;

use crate::fsroot::FsRoot;

/// Where detection reads from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sources {
    /// Filesystem root: `/` on the live machine, or an extracted snapshot.
    pub root: PathBuf,
    /// `PATH` to look for tools in (host paths).
    pub path_env: Option<OsString>,
    /// The user's `deps/` folder, where an SPDK build lives (host path).
    pub deps_dir: Option<PathBuf>,
    /// `LD_LIBRARY_PATH`, searched for libraries after the system directories (host paths).
    pub ld_library_path: Option<OsString>,
}

impl Sources {
    /// This machine, with the process's `PATH` and `LD_LIBRARY_PATH` and `./deps`.
    pub fn live() -> Self {
        Self {
            root: PathBuf::from("/"),
            path_env: std::env::var_os("PATH"),
            deps_dir: Some(PathBuf::from("deps")),
            ld_library_path: std::env::var_os("LD_LIBRARY_PATH"),
        }
    }

    /// A snapshot under `root`, with no environment of its own.
    pub fn fsroot(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            path_env: None,
            deps_dir: None,
            ld_library_path: None,
        }
    }
}

/// The NVMe controllers the kernel is still starting (a drive just reset, or put back on
/// `nvme`), by name: until they are live, their serials and namespaces are not known.
pub fn starting_nvme_controllers(src: &Sources) -> Vec<String> {
    nvme::starting(&FsRoot::new(&src.root))
}

/// Reads the whole topology. Never fails: what cannot be read is left unknown.
pub fn detect(src: &Sources) -> Topology {
    let fs = FsRoot::new(&src.root);
    let info = cpu::CpuInfo::read(&fs);
    let meminfo = fs.read("/proc/meminfo").unwrap_or_default();
    let mem_total = meminfo_value(&meminfo, "MemTotal").and_then(|kib| kib.checked_mul(1024));
    let online = cpu::online_cpus(&fs, &info);
    let numa = numa::nodes(&fs, &online, mem_total);
    let cpus = cpu::logical_cpus(&fs, &info, &online, &numa);
    let (sockets, cores) = cpu::sockets_and_cores(&cpus);
    let pci = pci::scan(&fs, &numa);
    let gpus = gpu::gpus(&fs, &pci);
    let nvme = nvme::drives(&fs, &pci);
    let pci: Vec<_> = pci.into_iter().map(|dev| dev.func).collect();
    Topology {
        platform: Platform {
            hostname: hostname(&fs),
            cpu: info.model_name(),
            cpu_vendor: info.vendor(),
            sockets,
            cores,
            threads: u32::try_from(cpus.len()).unwrap_or(u32::MAX),
            caches: cpu::caches(&fs, &online),
            numa_nodes: u32::try_from(numa.len()).unwrap_or(u32::MAX),
            numa,
            memory_bytes: mem_total,
            kernel: fs.text("/proc/sys/kernel/osrelease"),
            iommu_present: fs
                .exists("/sys/class/iommu")
                .then(|| !fs.names("/sys/class/iommu").is_empty()),
            iommu_options: fs
                .read("/proc/cmdline")
                .map(|c| iommu_options(&c))
                .unwrap_or_default(),
            os: ["/etc/os-release", "/usr/lib/os-release"]
                .iter()
                .find_map(|p| os_pretty_name(&fs.read(p)?)),
            cpus,
        },
        cpu_features: cpu::features(&info),
        topology: routing::routing(&gpus, &nvme, &pci),
        tools: tools::probe(&fs, src),
        gpus,
        nvme,
        pci,
    }
}

fn hostname(fs: &FsRoot) -> Option<String> {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| short_hostname(&fs.read(p)?))
}

/// The kernel command line's IOMMU options: `iommu=`, `iommu.*=`, `intel_iommu=`,
/// `amd_iommu=` and the like.
pub fn iommu_options(cmdline: &str) -> Vec<String> {
    cmdline
        .split_whitespace()
        .filter(|t| {
            let name = t.split('=').next().unwrap_or(t);
            name == "iommu" || name.starts_with("iommu.") || name.ends_with("_iommu")
        })
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn iommu_options_of_the_kernel_command_line() {
        let c = "BOOT_IMAGE=/vmlinuz root=/dev/vda1 intel_iommu=on iommu=pt iommu.strict=0 \
                 amd_iommu=off quiet noiommu_like=1";
        assert_eq!(
            super::iommu_options(c),
            [
                "intel_iommu=on",
                "iommu=pt",
                "iommu.strict=0",
                "amd_iommu=off"
            ]
        );
        assert!(super::iommu_options("quiet splash").is_empty());
    }
}
