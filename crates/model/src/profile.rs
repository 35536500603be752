//! The YAML ceiling profile: hwceiling's public, versioned API.
//!
//! Sections and field names follow the spec's YAML schema (`platform`, `cpu_features`, `gpus`,
//! `nvme`, `bar1`, `gdrcopy`, `gds`, `host_ram`, `topology`, `ceilings`). Only measured values are
//! present: a path that did not run is absent from its section and listed under `waived` with its
//! reason. Every figure a section names is the median of a measurement listed under
//! `measurements` with its min, max, spread and repetition count.

use crate::long_tests::{absent_null_or, NvmeLongTests};
use crate::plan::{PathId, Waiver};
use crate::results::{Failure, Measurement};
use crate::topology::{
    CpuFeatures, Platform, PowerFeatures, PowerStateDescriptor, Routing, ToolStatus,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the profile format. Bump on any change that an older reader would misread;
/// adding an optional field does not need a bump.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Profile {
    pub schema_version: u32,
    pub provenance: Provenance,
    pub platform: Platform,
    pub cpu_features: CpuFeatures,
    /// Keyed `gpu0`, `gpu1`, … in PCI address order.
    #[serde(default)]
    pub gpus: BTreeMap<String, GpuProfile>,
    #[serde(default)]
    pub nvme: NvmeProfile,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bar1: BTreeMap<String, Bar1Profile>,
    #[serde(default)]
    pub gdrcopy: GdrcopyProfile,
    #[serde(default)]
    pub gds: GdsProfile,
    #[serde(default)]
    pub host_ram: HostRamProfile,
    #[serde(default)]
    pub topology: Routing,
    /// Flat map consumed by the efficiency evaluator: `efficiency = measured / ceilings[key]`.
    #[serde(default)]
    pub ceilings: BTreeMap<String, f64>,
    #[serde(default)]
    pub measurements: Vec<Measurement>,
    #[serde(default)]
    pub failures: Vec<Failure>,
    #[serde(default)]
    pub waived: Vec<Waiver>,
    #[serde(default)]
    pub tools: Vec<ToolStatus>,
    /// Things a reader must know (contention, unverified placement, degraded links, …).
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl Profile {
    pub fn measurement(&self, key: &str) -> Option<&Measurement> {
        self.measurements.iter().find(|m| m.key == key)
    }
    pub fn measurements_of(&self, path: PathId) -> impl Iterator<Item = &Measurement> {
        self.measurements.iter().filter(move |m| m.path == path)
    }
    pub fn waivers_of(&self, path: PathId) -> impl Iterator<Item = &Waiver> {
        self.waived.iter().filter(move |w| w.path == path)
    }
    /// The measurement whose median a profile field copied, if the field is one (a derived
    /// field — a penalty, a minimum of two paths, a knee — has none).
    pub fn source_of(&self, value: f64) -> Option<&Measurement> {
        self.measurements.iter().find(|m| m.gbps.median == value)
    }
}

/// Who made the profile, when, where and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct Provenance {
    pub tool: String,
    pub version: String,
    pub git_revision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// RFC 3339 with offset.
    pub started_at: String,
    pub finished_at: String,
    /// The date used in the file names (`YYYY-MM-DD`, local time at start).
    pub date: String,
    pub command_line: String,
    /// Every option that shaped the run, as `name: value`.
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    /// Driver/runtime versions and clocks recorded by the backends, as `name: value`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub environment: BTreeMap<String, String>,
    /// True when the run was interrupted: the profile holds the cases that finished.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// The spec's `gpus.gpuN` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct GpuProfile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_gen: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bar1_gib: Option<f64>,
    pub pci_bdf: String,
    /// Host bridge (root complex), e.g. `0000:40`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_index: Option<u32>,
    #[serde(default)]
    pub numa_node: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2d_4m_1stream_numa_local_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2d_peak_numa_local_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub d2h_peak_numa_local_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2d_4m_1stream_cross_numa_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2d_peak_cross_numa_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_numa_h2d_penalty_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub d2d_1stream_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub d2d_4stream_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplex_h2d_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplex_d2h_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplex_total_gbps: Option<f64>,
}

/// The spec's `nvme:` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct NvmeProfile {
    #[serde(default)]
    pub drives: Vec<NvmeDriveProfile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mdts_bytes: Option<u64>,
    /// `1_drive`, `4_drive`, … → GB/s.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub raw_read_gbps: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub raw_write_gbps: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_size_sweep_read_gbps: Option<IoSizeSweep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_size_sweep_write_gbps: Option<IoSizeSweep>,
    /// Drives that share a PCIe root complex: root (e.g. `0000:40`) → drive BDFs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub same_root_groups: BTreeMap<String, Vec<String>>,
    /// The drive BDFs (or target path) each drive count of the read sweep used: `1_drive` → BDFs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub read_drives_used: BTreeMap<String, Vec<String>>,
    /// As `read_drives_used`, for the write sweep.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub write_drives_used: BTreeMap<String, Vec<String>>,
    /// The spec's `dispatcher_cold_bottleneck_at_<N>drive`, per drive count (`4_drive` → `nvme`
    /// or `h2d`): which stage caps `min(NVMe aggregate, H2D)`. A string, so it lives here rather
    /// than in the numeric `ceilings` map.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dispatcher_cold_bottleneck: BTreeMap<String, String>,
    /// The spec's long drive tests (read cache, power states, gc-settle), per drive or
    /// `--target`, with every figure's statistics; absent unless `--nvme-long-tests` ran them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub long_tests: Vec<NvmeLongTests>,
}

/// `4kib: <GB/s>`, … plus the knee.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct IoSizeSweep {
    #[serde(flatten)]
    pub points: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimal_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct NvmeDriveProfile {
    #[serde(default)]
    pub bdf: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware_rev: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_tb: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mdts_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_gen: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_width: Option<u32>,
    #[serde(default)]
    pub numa_node: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vwc_enabled: Option<bool>,
    pub in_use: bool,
    /// `identify` or `sysfs`: where `mdts_bytes` came from (see the topology's NVMe drive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mdts_source: Option<String>,
    /// The kernel driver the drive is bound to (`nvme`, `vfio-pci`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// 4 KiB random-read latency at QD 1, 16 and 32 (average, p50, p99 per I/O), µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd1_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd1_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd1_p99_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd16_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd16_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd16_p99_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd32_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd32_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd32_p99_us: Option<f64>,
    /// Read-cache test: cold / hot 4 KiB QD1 read latency ≥ 1.5 (see `nvme.long_tests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_read_cache: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_speedup: Option<f64>,
    /// Read-cache test: median per-repetition average latency of the hot and cold reads, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_cache_hot_latency_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_cache_cold_latency_us: Option<f64>,
    /// gc-settle test: median write MB/s over the last third of its intervals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sustained_write_mbps: Option<f64>,
    /// gc-settle test: seconds after sustained writes until 4 KiB reads are back within 10 % of
    /// their baseline; null when they were not within the test's wait limit; absent when the
    /// test did not run.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "absent_null_or"
    )]
    #[schemars(with = "Option<u64>")]
    pub recommended_gc_settle_s: Option<Option<u64>>,
    /// Power-state test: the shortest idle gap after which the first read took more than twice
    /// the no-idle latency, s; null when no gap did; absent when the test did not run.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "absent_null_or"
    )]
    #[schemars(with = "Option<f64>")]
    pub power_state_transition_at_s: Option<Option<f64>>,
    /// Identify Controller's power state descriptors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub power_states: Vec<PowerStateDescriptor>,
    /// Identify Controller APSTA: autonomous power state transitions are supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apst_supported: Option<bool>,
    /// Get Features APST and Power Management, or why they could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_features: Option<PowerFeatures>,
}

/// The spec's `bar1.gpuN` entry (NVMe DMA → BAR1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct Bar1Profile {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub numa_local: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cross_numa: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct GdrcopyProfile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_to_bar1_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bar1_to_cpu_gbps: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct GdsProfile {
    pub available: bool,
    /// `gds` (nvidia_fs, true P2P DMA) or `compat` (POSIX bounce through host memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(
        default,
        rename = "1drive_gbps",
        skip_serializing_if = "Option::is_none"
    )]
    pub one_drive_gbps: Option<f64>,
    #[serde(
        default,
        rename = "4drive_gbps",
        skip_serializing_if = "Option::is_none"
    )]
    pub four_drive_gbps: Option<f64>,
}

/// The spec's `host_ram:` section. Figures are bytes copied per second (a copy of N bytes
/// counts N, not 2N), at the best thread count, at the largest size of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct HostRamProfile {
    /// Best same-node figure over all nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_numa_gbps: Option<f64>,
    /// Best cross-node figure over all node pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_numa_gbps: Option<f64>,
    /// Per source→destination node pair (`n0-n0`, `n0-n1`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pairs: BTreeMap<String, HostRamPair>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostRamPair {
    pub src_node: u32,
    pub dst_node: u32,
    pub cpu_node: u32,
    pub size_bytes: u64,
    /// Median at the best thread count.
    pub best_gbps: f64,
    pub best_threads: u32,
    /// The measurement that `best_gbps` comes from.
    pub key: String,
    /// Median at each thread count of the sweep, at `size_bytes`.
    pub sweep_gbps: BTreeMap<u32, f64>,
}
