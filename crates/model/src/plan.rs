//! The plan: every case of the spec's matrix with a stable key, and every path or case that
//! cannot run here, waived with its reason.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A data path of the spec (paths 1–8; path 9, routing, is derived and always present).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum PathId {
    /// Path 1: NVMe → host RAM sequential read.
    NvmeRead,
    /// Path 2: host RAM → NVMe sequential write.
    NvmeWrite,
    /// Path 3: pinned host → GPU copies.
    H2d,
    /// Path 3: GPU → pinned host copies.
    D2h,
    /// Path 3: H2D and D2H at the same time.
    Duplex,
    /// Path 4: GPU → GPU memory (same device).
    D2d,
    /// Path 5: CPU ↔ GPU BAR1 through GDRCopy.
    Gdrcopy,
    /// Path 6: NVMe → GPU through GPUDirect Storage (cuFile).
    Gds,
    /// Path 7: host RAM memcpy, same and cross NUMA.
    HostRam,
    /// Path 9 of the spec's numbering in Step 13: NVMe DMA → GPU BAR1.
    NvmeBar1,
}

impl PathId {
    pub const ALL: [PathId; 10] = [
        PathId::NvmeRead,
        PathId::NvmeWrite,
        PathId::H2d,
        PathId::D2h,
        PathId::Duplex,
        PathId::D2d,
        PathId::Gdrcopy,
        PathId::Gds,
        PathId::HostRam,
        PathId::NvmeBar1,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PathId::NvmeRead => "nvme_read",
            PathId::NvmeWrite => "nvme_write",
            PathId::H2d => "h2d",
            PathId::D2h => "d2h",
            PathId::Duplex => "duplex",
            PathId::D2d => "d2d",
            PathId::Gdrcopy => "gdrcopy",
            PathId::Gds => "gds",
            PathId::HostRam => "host_ram",
            PathId::NvmeBar1 => "nvme_bar1",
        }
    }

    /// Human title used in reports.
    pub fn title(self) -> &'static str {
        match self {
            PathId::NvmeRead => "NVMe → host RAM sequential read (Path 1)",
            PathId::NvmeWrite => "Host RAM → NVMe sequential write (Path 2)",
            PathId::H2d => "Host → GPU pinned copy, H2D (Path 3)",
            PathId::D2h => "GPU → host pinned copy, D2H (Path 3)",
            PathId::Duplex => "H2D and D2H at once, duplex (Path 3)",
            PathId::D2d => "GPU device-to-device copy, D2D (Path 4)",
            PathId::Gdrcopy => "GDRCopy CPU ↔ GPU BAR1 (Path 5)",
            PathId::Gds => "NVMe → GPU through GPUDirect Storage (Path 6)",
            PathId::HostRam => "Host RAM memcpy (Path 7)",
            PathId::NvmeBar1 => "NVMe DMA → GPU BAR1 (Path 8)",
        }
    }
}

impl fmt::Display for PathId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error for an unknown path name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPath(pub String);

impl fmt::Display for UnknownPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = PathId::ALL.iter().map(|p| p.as_str()).collect();
        write!(f, "unknown path `{}` (known: {})", self.0, names.join(", "))
    }
}

impl std::error::Error for UnknownPath {}

impl FromStr for PathId {
    type Err = UnknownPath;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase().replace('-', "_");
        PathId::ALL
            .iter()
            .copied()
            .find(|p| p.as_str() == t)
            .ok_or_else(|| UnknownPath(s.to_string()))
    }
}

/// The parameters of one case. Only the fields a path uses are set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct CaseParams {
    /// Bytes moved by one repetition (per buffer for copies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// Worker threads (host paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// NUMA node the worker threads run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_node: Option<u32>,
    /// NUMA node of the source buffer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_node: Option<u32>,
    /// NUMA node of the destination buffer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_node: Option<u32>,
    /// GPU (`gpu0`, …) for GPU paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// Concurrent streams (GPU paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<u32>,
    /// Direction measured, for cases that run two directions at once (duplex): `h2d`, `d2h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    /// How the host RAM path copies: `memcpy` (the C library's) or `streaming` (vector loads
    /// and non-temporal stores, the widest the CPU has); absent = `memcpy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_kernel: Option<String>,
    /// Host memory kind for GPU copies: `pinned`, `pageable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_memory: Option<String>,
    /// Queue depth (NVMe paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<u32>,
    /// Drive BDFs or names used (NVMe paths).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drives: Vec<String>,
    /// Access pattern (NVMe paths): `sequential` (the sweeps), `random` (latency probes, the
    /// read-cache test's cold reads), `hot` (the read-cache test's re-reads of a small region),
    /// `idle` (the power-state test: one read after an idle gap), `gc-settle`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Bytes from the device's start that the I/Os fall in (the read-cache test's hot region);
    /// absent = the whole device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region_bytes: Option<u64>,
    /// Idle time before each timed read, ms (the power-state test).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_ms: Option<u64>,
    /// How long the sustained writes of the gc-settle test run, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<u64>,
    /// The longest the gc-settle test waits for reads to settle after the writes, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle_max_s: Option<u64>,
}

impl CaseParams {
    /// The case's host memory is pinned: `pinned` in any letter case, or none named (a GPU copy
    /// case's default). One reading for the planner, the CUDA backend and the profile.
    pub fn pinned_host(&self) -> bool {
        self.host_memory
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case("pinned"))
    }

    /// The host RAM copy kernel, `memcpy` when the case names none (profiles written before
    /// the streaming kernel existed).
    pub fn copy_kernel_name(&self) -> &str {
        self.copy_kernel.as_deref().unwrap_or("memcpy")
    }
}

/// How many repetitions a case gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Reps {
    /// Untimed repetitions after the cold one, before timing starts.
    pub warmup: u32,
    /// Timed repetitions: the statistics' N.
    pub timed: u32,
    /// Where set: when the timed repetitions spread more than this many per cent, the runner
    /// times the case again, a second window of `timed` repetitions at once and, where that one
    /// spread more too, a third after the run's other cases of its backend (the case prepared anew:
    /// `hwc_runner::MAX_WINDOWS` windows in all), and keeps the steadiest window (the one of
    /// least spread), saying so in a note. Where not set, one window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_above_spread_pct: Option<u32>,
}

/// One benchmark case: a stable key and its parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Case {
    /// Stable across runs and machines of the same shape, e.g. `host_ram/n0-n0/256MiB/t4`.
    pub key: String,
    pub path: PathId,
    pub params: CaseParams,
    pub reps: Reps,
}

/// A path, or one scope of it, that will not run here, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Waiver {
    pub path: PathId,
    /// What part of the path is waived (`gpu0`, `cross-NUMA`, …); `None` = the whole path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    pub reason: String,
    /// What would make it run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// The full matrix for one machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct Plan {
    pub cases: Vec<Case>,
    pub waived: Vec<Waiver>,
}

impl Plan {
    pub fn cases_of(&self, path: PathId) -> impl Iterator<Item = &Case> {
        self.cases.iter().filter(move |c| c.path == path)
    }
    pub fn waivers_of(&self, path: PathId) -> impl Iterator<Item = &Waiver> {
        self.waived.iter().filter(move |w| w.path == path)
    }
}
