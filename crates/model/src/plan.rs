//! The plan: every case of the spec's matrix with a stable key, and every path or case that
//! cannot run here, waived with its reason.

use crate::engine::EngineId;
use crate::spec::Spec;
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
    /// The CPU step's XXH3 hash throughput, per SIMD code path (not a data path: no ceiling).
    Xxh3,
}

impl PathId {
    pub const ALL: [PathId; 11] = [
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
        PathId::Xxh3,
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
            PathId::Xxh3 => "xxh3",
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
            PathId::Xxh3 => "XXH3 hash throughput (CPU step)",
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
    /// Where set, a window of repetitions stops before `timed` (then its cap) once it is steady
    /// (see [`Steady`]). Where not set, every window times `timed` repetitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<Steady>,
}

/// When a window of timed repetitions may stop before its cap ([`Reps::timed`]): once it holds
/// at least `min_timed` repetitions and the 95 % confidence interval of their median
/// (distribution-free, from order statistics: `hwc_stats::median_ci`; below 6 repetitions their
/// min and max) spans at most `within_pct` per cent of the median. At `min_timed` = 5 that is
/// their whole spread. Every timed repetition still enters the figure's statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Steady {
    /// The floor: timed repetitions before the window may stop.
    pub min_timed: u32,
    /// The widest the median's confidence interval may be, in per cent of the median.
    pub within_pct: u32,
}

/// One benchmark case: a path measured by an engine, with the engine's typed spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Case {
    /// Stable across runs and machines of the same shape: `<path>/<engine>/<cell>` (see
    /// [`case_key`]), e.g. `host_ram/host-memcpy/n0-n0/256MiB/t4`.
    pub key: String,
    pub path: PathId,
    pub engine: EngineId,
    /// The cell of the path's matrix (`gpu0/local/4MiB/s1`): the same for every engine that
    /// measures it.
    pub cell: String,
    pub spec: Spec,
    pub reps: Reps,
}

impl Case {
    /// The case of `cell` of `path`'s matrix measured by `engine`, keyed by [`case_key`].
    pub fn new(
        path: PathId,
        engine: EngineId,
        cell: impl Into<String>,
        spec: Spec,
        reps: Reps,
    ) -> Case {
        let cell = cell.into();
        Case {
            key: case_key(path, &engine, &cell),
            path,
            engine,
            cell,
            spec,
            reps,
        }
    }
}

/// A case's key: its path, its engine and its cell of the path's matrix
/// (`h2d/cuda-copy/gpu0/local/4MiB/s1`). Two engines measuring one cell differ in the engine
/// only.
pub fn case_key(path: PathId, engine: &EngineId, cell: &str) -> String {
    format!("{path}/{engine}/{cell}")
}

/// A cell as its matrix spells it, split at its first `/`: the first part with the `/` (`gpu0/`,
/// `n0-n0/`), and the rest (`local/4MiB/s1`); a cell of one part is all rest. For presentation
/// only (a report groups rows by it): nothing is inferred from the parts.
pub fn cell_parts(cell: &str) -> (&str, &str) {
    match cell.find('/') {
        Some(i) => cell.split_at(i + 1),
        None => ("", cell),
    }
}

/// The part of a path a waiver covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Covers {
    /// One GPU's figures with host memory NUMA-local to it (or unplaced: its node unknown),
    /// cross-NUMA, or both.
    Gpu {
        gpu: String,
        local: bool,
        cross: bool,
    },
    /// The path's cross-NUMA figures (host RAM on a machine of one node).
    CrossNuma,
    /// Host RAM copies between two nodes (at one size or thread count).
    HostPair { src_node: u32, dst_node: u32 },
    /// One of the long drive tests.
    NvmeTest { test: crate::NvmeTest },
    /// One planned case, waived when its engine came to run it.
    Case { spec: Spec },
    /// Another part (a node, a drive, an I/O size).
    Other,
}

/// A path, or one scope of it, that will not run here, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Waiver {
    pub path: PathId,
    /// The engine waived, where one engine of the path cannot run (`None`: the path, or the
    /// part `scope` names, whatever the engine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineId>,
    /// What part of the path is waived (`gpu0`, `cross-NUMA`, …), in words; `None` = the whole
    /// path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// What part of the path is waived, typed (what programs read; absent with `scope`: the
    /// whole path; absent beside a `scope` in profiles of builds before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covers: Option<Covers>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_splits_at_its_first_slash_and_the_key_joins_it_back() {
        assert_eq!(cell_parts("gpu0/local/4MiB/s1"), ("gpu0/", "local/4MiB/s1"));
        assert_eq!(cell_parts("whole"), ("", "whole"));
        let (first, rest) = cell_parts("n0-n0/1GiB/t2");
        let engine = EngineId::new("host-memcpy");
        assert_eq!(
            format!("{}{rest}", case_key(PathId::HostRam, &engine, first)),
            case_key(PathId::HostRam, &engine, "n0-n0/1GiB/t2")
        );
    }
}
