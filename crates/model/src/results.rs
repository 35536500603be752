//! What a run measured: per case, the summary statistics and (in the raw JSON) every sample.

use crate::engine::EngineId;
use crate::plan::PathId;
use crate::spec::Spec;
use serde::{Deserialize, Serialize};

/// Summary of N timed repetitions (after warm-up). Values in the unit named by the field that
/// holds the `Stats` (e.g. `gbps`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// (max − min) / median × 100.
    pub spread_pct: f64,
    pub n: u32,
}

impl Stats {
    /// `n` repetitions that all read `median` but spread `spread_pct` (tests and fixtures).
    pub fn flat(median: f64, spread_pct: f64, n: u32) -> Stats {
        Stats {
            median,
            min: median,
            max: median,
            spread_pct,
            n,
        }
    }
}

/// Where a case's threads and buffers were, as requested and as verified after the fact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct Placement {
    /// CPUs the worker threads were pinned to (cpulist form, e.g. `0-3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// True when every buffer was checked to sit on its requested node.
    pub verified: bool,
    /// What was checked, or why it could not be.
    pub detail: String,
}

/// How a note begins that says a figure was measured at the fastest of several placements of
/// its copies in their buffers (the CUDA backend writes it, the report footnotes such figures).
pub const PLACEMENT_NOTE_PREFIX: &str = "copy placement:";

/// One measured case, as the profile keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Measurement {
    pub key: String,
    pub path: PathId,
    /// The engine that measured it.
    pub engine: EngineId,
    /// The cell of the path's matrix it measured (its case's [`crate::Case::cell`]).
    pub cell: String,
    pub spec: Spec,
    /// Bytes moved per repetition, as counted for `gbps` (bytes copied, not read + written).
    pub bytes_per_rep: u64,
    /// Throughput in GB/s (10⁹ B/s) over the timed repetitions.
    pub gbps: Stats,
    /// The very first repetition, before warm-up: a cold figure, never the throughput.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_gbps: Option<f64>,
    pub warmup: u32,
    /// Average latency of one operation in microseconds, where the path defines one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<Stats>,
    /// Median over the timed repetitions of each repetition's per-operation 50th percentile
    /// latency, in µs, where the path times every operation (NVMe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p50_us: Option<f64>,
    /// As `latency_p50_us`, for the 99th percentile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p99_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// The buffers fit in a cache: this is a cache figure, not memory bandwidth.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cache_resident: bool,
    /// Something else was using the device or CPUs while this case ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub contended: bool,
    /// The spread, in per cent, this case's repetitions were held to, where it had a limit
    /// (pinned H2D, D2H and duplex copies of 4 MiB or more: 1): a window of repetitions that
    /// spread more was timed again (at once, and once more after the other cases of its
    /// backend). A `gbps.spread_pct` above it means the window kept spread
    /// more (an unsteady figure: something on the machine varied the copies' speed); for a case
    /// timed alone no window stayed within it, for a duplex pair the window was kept for both
    /// figures; the notes list the windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_limit_pct: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Measurement {
    /// A measurement of `case` with these statistics, each byte moved counted once, and nothing
    /// else known (no cold figure, latency, placement or notes).
    pub fn of(case: &crate::Case, bytes_per_rep: u64, gbps: Stats) -> Measurement {
        Measurement {
            key: case.key.clone(),
            path: case.path,
            engine: case.engine.clone(),
            cell: case.cell.clone(),
            spec: case.spec.clone(),
            bytes_per_rep,
            gbps,
            cold_gbps: None,
            warmup: case.reps.warmup,
            latency_us: None,
            latency_p50_us: None,
            latency_p99_us: None,
            placement: None,
            cache_resident: false,
            contended: false,
            spread_limit_pct: None,
            notes: Vec::new(),
        }
    }

    /// The case's scheduling note (it begins with [`crate::SCHED_NOTE_PREFIX`]), if it has one.
    pub fn sched_note(&self) -> Option<&str> {
        self.notes
            .iter()
            .map(String::as_str)
            .find(|n| n.starts_with(crate::SCHED_NOTE_PREFIX))
    }

    /// Whether the figure spread more than the limit it was held to (see `spread_limit_pct`).
    pub fn unsteady(&self) -> bool {
        self.spread_limit_pct
            .is_some_and(|limit| self.gbps.spread_pct > f64::from(limit))
    }
}

/// A case whose run failed (a verification mismatch, an I/O error): it fails alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Failure {
    pub key: String,
    pub path: PathId,
    /// The engine that failed (absent where the case never reached one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineId>,
    pub error: String,
}

/// Failed cases that share one error, in the order the error first appeared.
#[derive(Debug, Clone, PartialEq)]
pub struct FailureGroup<'a> {
    pub error: &'a str,
    /// The cases' keys, in run order.
    pub keys: Vec<&'a str>,
}

/// `failures` grouped by their error text (an idle guard's refusal, say, is one error for every
/// case it refused), the most common first; equal counts keep the order they first appeared in.
pub fn failure_groups<'a>(
    failures: impl IntoIterator<Item = &'a Failure>,
) -> Vec<FailureGroup<'a>> {
    let mut groups: Vec<FailureGroup<'a>> = Vec::new();
    for f in failures {
        match groups.iter_mut().find(|g| g.error == f.error) {
            Some(g) => g.keys.push(&f.key),
            None => groups.push(FailureGroup {
                error: &f.error,
                keys: vec![&f.key],
            }),
        }
    }
    // Stable: equal counts keep their first-appearance order.
    groups.sort_by_key(|g| std::cmp::Reverse(g.keys.len()));
    groups
}

/// A measurement with every raw sample, for the JSON record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CaseResult {
    pub measurement: Measurement,
    /// Every timed repetition's throughput in GB/s, in run order.
    pub samples_gbps: Vec<f64>,
    /// Warm-up repetitions' throughput in GB/s (discarded from the statistics).
    pub warmup_gbps: Vec<f64>,
    /// Wall time of the whole case (preparation, cold run, warm-up, timed repetitions), seconds;
    /// for a case prepared again after its backend's other cases, both spans together; absent for a
    /// case timed in another case's repetitions (its time is in that case's). Raw files of builds
    /// before this field was optional hold 0 there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case_seconds: Option<f64>,
    /// Each timed repetition's scheduling evidence (host RAM cases: every copy thread's
    /// run-queue delay, involuntary switches and steal), in the order of `samples_gbps`; absent
    /// where the backend reads none, and in raw files of earlier builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<crate::sched::SchedEvidence>,
}

#[cfg(test)]
mod tests {
    use super::{failure_groups, Failure};
    use crate::PathId;

    fn failed(key: &str, error: &str) -> Failure {
        Failure {
            key: key.into(),
            path: PathId::H2d,
            engine: None,
            error: error.into(),
        }
    }

    #[test]
    fn failures_group_by_error_most_common_first_keys_in_run_order() {
        let fs = [
            failed("a", "mismatch"),
            failed("b", "refused"),
            failed("c", "refused"),
            failed("d", "io error"),
            failed("e", "refused"),
        ];
        let groups = failure_groups(&fs);
        let got: Vec<(&str, Vec<&str>)> =
            groups.iter().map(|g| (g.error, g.keys.clone())).collect();
        assert_eq!(
            got,
            [
                ("refused", vec!["b", "c", "e"]),
                ("mismatch", vec!["a"]),
                ("io error", vec!["d"]),
            ]
        );
        assert!(failure_groups(&[]).is_empty());
    }
}
