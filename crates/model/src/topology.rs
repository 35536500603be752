//! What `detect` finds on a machine. Every field that the machine may not tell is an `Option`
//! and is omitted from YAML/JSON when unknown: a missing fact is never replaced by a guess.

use crate::setting::LinkState;
use serde::{Deserialize, Serialize};

/// Everything `hwceiling detect` reports, in the sections the spec's YAML profile names
/// (`platform`, `cpu_features`, `gpus`, `nvme`, `topology`) plus `pci` and `tools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct Topology {
    pub platform: Platform,
    pub cpu_features: CpuFeatures,
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    #[serde(default)]
    pub nvme: Vec<NvmeDrive>,
    #[serde(default)]
    pub topology: Routing,
    #[serde(default)]
    pub pci: Vec<PciFunction>,
    #[serde(default)]
    pub tools: Vec<ToolStatus>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct Platform {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// CPU model name (`model name` in /proc/cpuinfo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_vendor: Option<String>,
    /// Packages; absent when sysfs does not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<u32>,
    /// Physical cores (distinct (package, core_id) pairs); absent when sysfs does not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<u32>,
    /// Logical CPUs (hardware threads) online.
    pub threads: u32,
    #[serde(default)]
    pub caches: Vec<Cache>,
    /// Number of NUMA nodes that have CPUs or memory (the spec's `numa_nodes`).
    pub numa_nodes: u32,
    #[serde(default)]
    pub numa: Vec<NumaNode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// Whether an IOMMU is active (`/sys/class/iommu` has a unit); absent when sysfs does not
    /// tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iommu_present: Option<bool>,
    /// The kernel command line's options that set the IOMMU up (`intel_iommu=on`,
    /// `iommu=pt`, `iommu.strict=0`, …), in their order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub iommu_options: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// Logical CPUs with their package/core ids, in id order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<LogicalCpu>,
}

impl Platform {
    /// Bytes of last-level cache on the whole machine (size × instances of the highest-level
    /// data or unified cache), when the caches are known.
    pub fn llc_bytes(&self) -> Option<u64> {
        self.caches
            .iter()
            .filter(|c| c.kind != "Instruction")
            .max_by_key(|c| c.level)
            .map(|c| c.size_bytes * u64::from(c.instances.unwrap_or(1)))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogicalCpu {
    pub id: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cache {
    pub level: u32,
    /// `Data`, `Instruction` or `Unified`.
    pub kind: String,
    pub size_bytes: u64,
    /// How many logical CPUs share one instance of this cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_by_cpus: Option<u32>,
    /// How many instances exist on the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NumaNode {
    pub id: u32,
    /// CPU ids local to this node (empty for a memory-only node).
    #[serde(default)]
    pub cpus: Vec<u32>,
    /// True when the node has no CPUs (e.g. GPU or CXL memory exposed as a node).
    #[serde(default)]
    pub memory_only: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// SLIT distances to every node, in node order (`distance` in sysfs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distances: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct CpuFeatures {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    /// AMD Zen generation (1–5) from family/model; null on other vendors or unknown models.
    #[serde(default)]
    pub zen_generation: Option<u8>,
    pub zen_label: String,
    pub has_avx512: bool,
    pub has_avx512f: bool,
    pub has_avx512bw: bool,
    pub has_avx2: bool,
    pub has_sse4_2: bool,
    pub has_pclmulqdq: bool,
    pub has_aes: bool,
    /// The XXH3 code path of this machine: where `xxh3_tier_basis` is `measured`, the one
    /// whose XXH3 throughput measured fastest (1 thread, 64 KiB blocks); where it is `inferred`,
    /// the widest the flags allow. `AVX-512`, `AVX2`, `SSE2`, `NEON` or `Scalar`.
    pub xxh3_tier: String,
    /// How `xxh3_tier` was found; absent in profiles older than the hash path (`inferred`).
    #[serde(default)]
    pub xxh3_tier_basis: crate::xxh3::TierBasis,
    /// The XXH3 code paths the CPU flags allow (the hash path measures each); absent in older
    /// profiles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub xxh3_paths: Vec<crate::xxh3::SimdPath>,
    /// Every XXH3 figure measured: per code path, variant, block size and thread count.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub xxh3_throughput_gbps: Vec<crate::xxh3::Xxh3Figure>,
    /// The spec's estimate, from the measurement: the fastest 1-thread 64 KiB figure, with what
    /// it is (`41.2 GB/s measured (median of 12, spread 0.8 %), 1 thread, AVX-512, XXH3-64,
    /// 64 KiB`); absent when the hash path did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xxh3_throughput_estimate: Option<String>,
    /// The hash to use, by the rule `certus_recommended_hash_rule` states where it was chosen
    /// from measured figures; otherwise from the inferred tier.
    pub certus_recommended_hash: String,
    /// The rule the recommendation was chosen by, in words, with the figures it compared;
    /// absent when nothing was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certus_recommended_hash_rule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<u32>,
}

/// A PCIe link as sysfs reports it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct PcieLink {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_speed_gts: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_speed_gts: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_width: Option<u32>,
}

/// Where a device's NUMA node came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NumaSource {
    /// The device's `numa_node` attribute.
    Sysfs,
    /// `local_cpulist`/`local_cpus` matched exactly one node's CPUs.
    LocalCpus,
    /// The machine has one node with CPUs.
    SingleNode,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PciFunction {
    /// `0000:00:06.0` form.
    pub bdf: String,
    /// Class code, `0x030200` form.
    pub class: String,
    pub vendor: String,
    pub device: String,
    #[serde(default)]
    pub numa_node: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_source: Option<NumaSource>,
    /// Host bridge (root complex) from the real sysfs path, e.g. `0000:40`.
    #[serde(default)]
    pub root: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<PcieLink>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// The bridge above it (its parent in the sysfs device tree), where that is a PCI function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Its config space's facts (MPS, MRRS, tags, link, port type, ACS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<crate::pcie::PcieConfig>,
    /// Its IOMMU group and the group's domain type (`identity`, `DMA`, `DMA-FQ`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iommu_group: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iommu_domain: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bar {
    pub index: u32,
    pub size_bytes: u64,
    pub prefetchable: bool,
    pub is_64bit: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Gpu {
    /// Position among the machine's NVIDIA GPUs in PCI address order (`gpu0`, `gpu1`, …).
    pub index: u32,
    /// CUDA device ordinal, once a CUDA probe has matched it to this BDF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_index: Option<u32>,
    pub pci_bdf: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub vendor: String,
    pub device: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_gen: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_max_gen: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_max_width: Option<u32>,
    /// Largest prefetchable BAR (BAR1 on NVIDIA GPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bar1_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bar1_gib: Option<f64>,
    #[serde(default)]
    pub bars: Vec<Bar>,
    #[serde(default)]
    pub numa_node: Option<u32>,
    #[serde(default)]
    pub root: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_cache_bytes: Option<u64>,
}

impl Gpu {
    /// Its name in keys, links and profiles: `gpu` and its index (`gpu0`).
    pub fn name(&self) -> String {
        format!("gpu{}", self.index)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NvmeNamespace {
    /// Block device name, e.g. `nvme0n1`.
    pub name: String,
    /// The namespace's size (sysfs `size` × 512); absent when the kernel does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_block_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_hw_sectors_kb: Option<u32>,
    #[serde(default)]
    pub partitions: Vec<String>,
    #[serde(default)]
    pub holders: Vec<String>,
    /// Mount points of the namespace or any of its partitions.
    #[serde(default)]
    pub mounts: Vec<String>,
    /// Mounted, partitioned or held: never a write target.
    pub in_use: bool,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NvmeDrive {
    /// Controller name, e.g. `nvme0`.
    pub name: String,
    #[serde(default)]
    pub bdf: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware_rev: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    #[serde(default)]
    pub numa_node: Option<u32>,
    #[serde(default)]
    pub root: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_gen: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// The kernel controller's state (`/sys/class/nvme/<name>/state`): `live` when ready;
    /// `new`, `connecting` or `resetting` while it starts (after a reset or a rebind). Model,
    /// serial and firmware are read only from a live controller: before the kernel has read
    /// them it shows `(efault)` in their files. Absent for a function without a kernel
    /// controller (bound to `vfio-pci`, or to no driver).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller_state: Option<String>,
    #[serde(default)]
    pub namespaces: Vec<NvmeNamespace>,
    /// Any namespace in use.
    pub in_use: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_tb: Option<f64>,
    /// Maximum data transfer size in bytes: Identify Controller MDTS × the controller's minimum
    /// memory page size (`2^(12 + CAP.MPSMIN)`), or the kernel's `max_hw_sectors_kb` when the
    /// Identify command or CAP register cannot be read (see `mdts_source`). Absent when unknown
    /// or when the controller sets no limit (MDTS = 0, see `mdts_unlimited`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mdts_bytes: Option<u64>,
    /// Where `mdts_bytes` came from: `identify` (MDTS with CAP.MPSMIN), or `sysfs` (the kernel's
    /// `max_hw_sectors_kb`, which is MDTS capped by the driver's own limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mdts_source: Option<String>,
    /// True when Identify Controller reports MDTS = 0: the controller sets no transfer limit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mdts_unlimited: bool,
    /// Identify Controller VWC bit 0: a volatile write cache is present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vwc_present: Option<bool>,
    /// Identify Controller's power state descriptors (NPSS + 1 of them), in state order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub power_states: Vec<PowerStateDescriptor>,
    /// Identify Controller APSTA bit 0: the controller supports autonomous power state
    /// transitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apst_supported: Option<bool>,
    /// Get Features Autonomous Power State Transition (FID 0x0C) and Power Management (FID
    /// 0x02), as the controller answered, or why they could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_features: Option<PowerFeatures>,
}

impl NvmeDrive {
    /// The kernel controller is still starting (`new`, `connecting` or `resetting`): its
    /// identity and namespaces are not known yet.
    pub fn is_starting(&self) -> bool {
        self.controller_state
            .as_deref()
            .is_some_and(nvme_controller_starting)
    }
}

/// Whether a kernel NVMe controller state (`/sys/class/nvme/<name>/state`) is one it passes
/// through while starting: `new`, `connecting` or `resetting`.
pub fn nvme_controller_starting(state: &str) -> bool {
    matches!(state.trim(), "new" | "connecting" | "resetting")
}

/// One power state descriptor of Identify Controller (bytes 2048 + 32 × n).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PowerStateDescriptor {
    /// Power state number (0 = full power).
    pub state: u8,
    /// MP scaled by MXPS: the most the controller draws in this state, watts.
    pub max_power_w: f64,
    /// NOPS: the controller processes no I/O in this state.
    pub non_operational: bool,
    /// ENLAT: the time to enter this state, µs (0 = not reported).
    pub entry_latency_us: u32,
    /// EXLAT: the time to leave this state, µs (0 = not reported).
    pub exit_latency_us: u32,
}

/// The controller's power features, as read with Get Features.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct PowerFeatures {
    /// APSTE (dword 0 bit 0 of Get Features APST): autonomous transitions are enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apst_enabled: Option<bool>,
    /// The APST table's used entries: after `idle_ms` idle in `from_state`, the controller
    /// moves to `to_state`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apst_transitions: Vec<ApstTransition>,
    /// Get Features Power Management: the power state the controller is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_power_state: Option<u8>,
    /// `not readable: <reason>` for each feature that could not be read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_readable: Vec<String>,
}

/// One used entry of the APST table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApstTransition {
    pub from_state: u8,
    /// ITPS: the state moved to.
    pub to_state: u8,
    /// ITPT: idle time before the move, ms.
    pub idle_ms: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolStatus {
    /// Stable name: `libcuda`, `libnvidia-ml`, `libcufile`, `libgdrapi`, `gdrdrv`, `nvidia_fs`,
    /// `spdk_nvme_perf`, `vfio-pci`, `hugepages`.
    pub name: String,
    pub present: bool,
    /// What was looked at, and what was found there.
    pub evidence: String,
    /// How to get it, when missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_hint: Option<String>,
}

/// How data between a GPU and an NVMe drive travels.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema, PartialOrd, Ord,
)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// Same PCIe root complex: a direct PCIe path.
    SameRoot,
    /// Different root complexes on the same NUMA node: through the CPU's fabric.
    SameNuma,
    /// Different NUMA nodes: through the inter-socket link.
    CrossNuma,
    /// Not enough is known (a NUMA node or root missing).
    Unknown,
}

impl Relation {
    pub fn describe(self) -> &'static str {
        match self {
            Relation::SameRoot => "same root complex (direct PCIe)",
            Relation::SameNuma => "cross root complex, same NUMA node (CPU fabric)",
            Relation::CrossNuma => "cross NUMA (inter-socket link)",
            Relation::Unknown => "unknown (NUMA node or root complex not reported)",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Route {
    pub gpu: String,
    pub gpu_bdf: String,
    pub drive: String,
    #[serde(default)]
    pub drive_bdf: Option<String>,
    pub relation: Relation,
}

/// Theoretical bandwidth of one device's link: GT/s × lanes × encoding ÷ 8.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkTheory {
    /// `gpu0`, `nvme0`, …
    pub device: String,
    pub bdf: String,
    pub gen: u32,
    pub width: u32,
    pub max_gen: Option<u32>,
    pub max_width: Option<u32>,
    /// Per direction, at the link state `gen` × `width`.
    pub theoretical_gbps: f64,
    /// Per direction, at the maximum link state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_theoretical_gbps: Option<f64>,
    /// Running below its maximum generation or width (idle GPUs downtrain: read under load).
    pub degraded: bool,
    /// Where `gen` and `width` (and the limits computed from them) come from: the link as read
    /// at detection, or for a GPU as read under load (absent: at detection).
    #[serde(default, skip_serializing_if = "LinkBasis::is_detection")]
    pub basis: LinkBasis,
    /// The link as read at detection, where `basis` is another reading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detected: Option<LinkState>,
    /// The smallest Max Payload Size set on the way from the device to its root port (from
    /// config space; absent where it could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_mps_bytes: Option<u32>,
    /// The TLP-adjusted limit per direction at `gen` × `width` and `min_mps_bytes`: for the
    /// device's DMA writes (posted, 4-DW headers) and for data returned to its DMA reads
    /// (completions, 3-DW headers). A model of the wire (docs/pcie.md), not a measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tlp_write_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tlp_read_gbps: Option<f64>,
}

/// Where a [`LinkTheory`]'s link state was read.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum LinkBasis {
    /// From sysfs at detection (a GPU idle then may read a downtrained link).
    #[default]
    Detection,
    /// By NVML during the GPU's warm-up, with copies in flight: the link its copies ran over.
    UnderLoad,
    /// The link's maximum: it read slower at detection, and no reading under load was made.
    Capable,
}

impl LinkBasis {
    pub fn is_detection(&self) -> bool {
        *self == LinkBasis::Detection
    }
}

impl LinkTheory {
    /// The theory of `device`'s link at `link` (its generation and width), capable of
    /// `max_gen` × `max_width`, with its path's smallest MPS `min_mps_bytes`. None for a
    /// generation PCIe does not define.
    pub fn new(
        device: &str,
        bdf: &str,
        link: LinkState,
        max_gen: Option<u32>,
        max_width: Option<u32>,
        min_mps_bytes: Option<u32>,
        basis: LinkBasis,
    ) -> Option<LinkTheory> {
        let speed = crate::pcie_speed_of_gen(link.gen)?;
        let theoretical = crate::pcie_theoretical_gbps(speed, link.width);
        let below = |current: u32, max: Option<u32>| max.is_some_and(|m| current < m);
        let tlp = |write| {
            min_mps_bytes.map(|m| crate::pcie::tlp_limit_gbps(theoretical, speed, m, write))
        };
        Some(LinkTheory {
            device: device.to_string(),
            bdf: bdf.to_string(),
            gen: link.gen,
            width: link.width,
            max_gen,
            max_width,
            theoretical_gbps: theoretical,
            max_theoretical_gbps: max_gen
                .and_then(crate::pcie_speed_of_gen)
                .zip(max_width)
                .map(|(s, w)| crate::pcie_theoretical_gbps(s, w)),
            degraded: below(link.gen, max_gen) || below(link.width, max_width),
            basis,
            detected: None,
            min_mps_bytes,
            tlp_write_gbps: tlp(true),
            tlp_read_gbps: tlp(false),
        })
    }

    /// The same link's theory at another reading of its state (`link`, read as `basis` says),
    /// keeping the reading at detection in `detected`.
    pub fn rebased(&self, link: LinkState, basis: LinkBasis) -> LinkTheory {
        let (max_gen, max_width, mps) = (self.max_gen, self.max_width, self.min_mps_bytes);
        let Some(mut t) = LinkTheory::new(
            &self.device,
            &self.bdf,
            link,
            max_gen,
            max_width,
            mps,
            basis,
        ) else {
            return self.clone();
        };
        t.detected = match self.basis {
            LinkBasis::Detection => Some(self.state()),
            _ => self.detected,
        };
        t
    }

    /// Its generation and width.
    pub fn state(&self) -> LinkState {
        LinkState {
            gen: self.gen,
            width: self.width,
        }
    }

    /// Where its link state was read, in words, when not at detection (`read under load`, and
    /// what detection read where that differs).
    pub fn basis_note(&self) -> Option<String> {
        let at_detection = self
            .detected
            .filter(|d| *d != self.state())
            .map(|d| format!("Gen{} x{} at detection", d.gen, d.width));
        match self.basis {
            LinkBasis::Detection => None,
            LinkBasis::UnderLoad => Some(match at_detection {
                Some(d) => format!("read under load; {d}"),
                None => "read under load".into(),
            }),
            LinkBasis::Capable => Some(match at_detection {
                Some(d) => format!("its maximum: not read under load; {d}"),
                None => "its maximum: not read under load".into(),
            }),
        }
    }

    /// Its maximum generation and width, where both are known.
    pub fn capable(&self) -> Option<LinkState> {
        Some(LinkState {
            gen: self.max_gen?,
            width: self.max_width?,
        })
    }
}

/// One function on a device's way to its root port.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PcieHop {
    pub bdf: String,
    pub config: crate::pcie::PcieConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iommu_domain: Option<String>,
}

/// A GPU's or drive's PCIe path: the device first, then each bridge up to the root port.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PciePath {
    /// `gpu0`, `nvme0`, …
    pub device: String,
    pub hops: Vec<PcieHop>,
}

/// The spec's `topology:` section: routing between every GPU and every NVMe drive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct Routing {
    /// Drives on the same root complex as each GPU, keyed `gpu0`, `gpu1`, … (as BDFs).
    #[serde(default)]
    pub same_root_drives: std::collections::BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub routes: Vec<Route>,
    #[serde(default)]
    pub links: Vec<LinkTheory>,
    /// Each GPU's and drive's PCIe path with its config-space settings per hop.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pcie_paths: Vec<PciePath>,
}
