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

/// How a figure came to be what it is, as typed facts beside the free-text `notes` (which are
/// for people: no code reads them back). Each part is absent where it does not apply.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Evidence {
    /// How the case's repetitions were scheduled (engines that read scheduling counters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<crate::sched::SchedSummary>,
    /// The figure was measured at the fastest of several placements of its copies in their
    /// buffers, tried first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_search: Option<PlacementSearch>,
    /// The case was timed in more than one window of repetitions (its first spread past its
    /// limit), or would have been.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<Windows>,
    /// The wall clock disagreed with the engine's own timer by more than the run's tolerance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_clock_disagreement: Option<WallClockDisagreement>,
    /// PCIe errors reported (AER counters that rose) on the case's paths while it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_errors: Option<Vec<AerIncrease>>,
    /// The GPU's state while the case's copies were in flight (NVML), for GPU copy cases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_state: Option<GpuCaseState>,
    /// The host's frequency and memory settings when the case started and finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_state: Option<HostCaseState>,
}

/// One of NVML's clock-event (throttle) reasons, but idle.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ClockEvent {
    ApplicationsClocksSetting,
    SwPowerCap,
    HwSlowdown,
    SyncBoost,
    SwThermalSlowdown,
    HwThermalSlowdown,
    HwPowerBrakeSlowdown,
    DisplayClockSetting,
}

impl ClockEvent {
    /// Its name in the profile (`sw_power_cap`).
    pub fn as_str(self) -> &'static str {
        match self {
            ClockEvent::ApplicationsClocksSetting => "applications_clocks_setting",
            ClockEvent::SwPowerCap => "sw_power_cap",
            ClockEvent::HwSlowdown => "hw_slowdown",
            ClockEvent::SyncBoost => "sync_boost",
            ClockEvent::SwThermalSlowdown => "sw_thermal_slowdown",
            ClockEvent::HwThermalSlowdown => "hw_thermal_slowdown",
            ClockEvent::HwPowerBrakeSlowdown => "hw_power_brake_slowdown",
            ClockEvent::DisplayClockSetting => "display_clock_setting",
        }
    }

    /// It slows the clocks (a power cap, a thermal or hardware slowdown); the others are
    /// settings.
    pub fn slows(self) -> bool {
        matches!(
            self,
            ClockEvent::SwPowerCap
                | ClockEvent::HwSlowdown
                | ClockEvent::SwThermalSlowdown
                | ClockEvent::HwThermalSlowdown
                | ClockEvent::HwPowerBrakeSlowdown
        )
    }
}

/// The smallest and largest of a reading over a case's samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Range {
    pub min: u32,
    pub max: u32,
}

impl Range {
    /// The range of `values`; `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = u32>) -> Option<Range> {
        values.into_iter().fold(None, |r, v| {
            Some(match r {
                None => Range { min: v, max: v },
                Some(r) => Range {
                    min: r.min.min(v),
                    max: r.max.max(v),
                },
            })
        })
    }
}

/// What NVML said of a GPU through a case: sampled with a batch of the case's copies in flight
/// before any timed repetition (its calibration's batch of K; older builds: its first batch;
/// NVML's reads share the link with the copies) and right
/// after its last timed repetition, and the PCIe replay counter read when the case was prepared
/// and when its repetitions had finished. A reading NVML would not give is absent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GpuCaseState {
    /// Samples taken.
    pub samples: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<Range>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_clock_mhz: Option<Range>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<Range>,
    /// Clock-event (throttle) reasons seen in any sample, each once; the idle reason is left
    /// out, since the copies kept the GPU busy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clock_events: Vec<ClockEvent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistence_mode: Option<bool>,
    /// The slowest link of the samples (generation and width each their lowest): the first
    /// with copies in flight, the second a moment after the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_under_load: Option<crate::LinkState>,
    /// The link the GPU is capable of (NVML's maximum generation and width).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_max: Option<crate::LinkState>,
    /// How far NVML's PCIe replay counter rose during the case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_replays: Option<u64>,
}

impl GpuCaseState {
    /// The clock-event reasons that slow the clocks (power cap, thermal and hardware
    /// slowdowns), of those seen; the others (application clocks, sync boost, display) are
    /// settings, not slowdowns.
    pub fn slowdowns(&self) -> Vec<ClockEvent> {
        self.clock_events
            .iter()
            .copied()
            .filter(|e| e.slows())
            .collect()
    }

    /// The link ran below its capable generation or width under load.
    pub fn downtrained(&self) -> bool {
        match (self.link_under_load, self.link_max) {
            (Some(l), Some(m)) => l.gen < m.gen || l.width < m.width,
            _ => false,
        }
    }
}

/// The host's settings that shape copies, as read when a case started and when it finished
/// (sysfs and `/proc/meminfo`); a setting that could not be read is absent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostCaseState {
    /// The cpufreq governors of the CPUs, each once (`performance`, `powersave`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub governors: Vec<String>,
    /// Current frequencies (`scaling_cur_freq`) over every CPU and both readings, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz: Option<Range>,
    /// Transparent huge pages: the mode selected in `enabled` (`always`, `madvise`, `never`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thp: Option<String>,
    /// `HugePages_Total` and `HugePages_Free` when the case finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepages_total: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepages_free: Option<u64>,
    /// A setting differed between the two readings (a governor, THP or the hugepage count):
    /// which, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
}

/// How far one function's AER counters rose during a case (sysfs `aer_dev_correctable`,
/// `aer_dev_nonfatal`, `aer_dev_fatal`: their `TOTAL_ERR_*` lines).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AerIncrease {
    pub bdf: String,
    pub correctable: u64,
    pub nonfatal: u64,
    pub fatal: u64,
}

impl Evidence {
    /// Nothing recorded.
    pub fn is_empty(&self) -> bool {
        *self == Evidence::default()
    }
}

/// A search over placements of a case's copies in their buffers (where the buffers lie changes
/// small copies: memory channels are mapped from physical addresses software does not choose).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlacementSearch {
    /// Placements tried, one batch of copies each.
    pub tried: u32,
    /// The fastest of them tried again, each over several batches.
    pub finalists: u32,
    /// The fastest single try over the slowest, in per cent.
    pub fastest_over_slowest_pct: f64,
    /// The placement measured at: each moved end's offset in its buffer, in KiB.
    pub chosen: String,
    /// Every placement and its rate, in words.
    pub detail: String,
}

/// The windows of repetitions a case was timed in, when there were several (or when it would
/// have been timed again and was not).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Windows {
    /// Windows timed.
    pub timed: u32,
    /// Which window's figure was kept, from 1.
    pub kept: u32,
    /// Each window's median, GB/s, in the order timed.
    pub medians_gbps: Vec<f64>,
    /// Each window's spread, per cent, in the order timed.
    pub spreads_pct: Vec<f64>,
    /// The run was interrupted while the case was timed again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut_short: bool,
    /// Why the case was not timed again after its engine's other cases, where it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_timed_again: Option<String>,
    /// The windows and the choice, in words.
    pub detail: String,
}

/// The wall clock against the engine's timer, where they disagreed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WallClockDisagreement {
    /// The median repetition's rate by the wall clock, with its spread and count.
    pub wall_gbps: Stats,
    /// How far apart the two medians were, per cent of the timer's.
    pub apart_pct: f64,
    /// The run's tolerance, per cent.
    pub tolerance_pct: f64,
}

impl std::fmt::Display for WallClockDisagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w = &self.wall_gbps;
        write!(
            f,
            "timer and wall clock disagree: by the wall clock the median repetition reads \
             {:.2} GB/s (min {:.2}, max {:.2}, N={}), {:.1} % apart from the timer's (tolerance \
             {:.1} %)",
            w.median, w.min, w.max, w.n, self.apart_pct, self.tolerance_pct
        )
    }
}

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
    /// The very first repetition, before warm-up (for GPU copies, the first batch of copies of
    /// the case's calibration, which the engine times): a cold figure, never the throughput.
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
    /// figures; `evidence.windows` lists the windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_limit_pct: Option<u32>,
    /// Typed facts of how the figure was obtained.
    #[serde(default, skip_serializing_if = "Evidence::is_empty")]
    pub evidence: Evidence,
    /// What a reader should know of how the figure was obtained, in words.
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
            evidence: Evidence::default(),
            notes: Vec::new(),
        }
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
    /// Where `case_seconds` went, for the first preparation (absent where `case_seconds` is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_seconds: Option<PhaseSeconds>,
    /// Each timed repetition's scheduling evidence (host RAM cases: every copy thread's
    /// run-queue delay, involuntary switches and steal), in the order of `samples_gbps`; absent
    /// where the backend reads none, and in raw files of earlier builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<crate::sched::SchedEvidence>,
}

/// Where a case's time went: the guard (an idle check before the case, or what a watch over
/// its repetitions waited after them), the engine's preparation (buffers, placement,
/// searches), the cold repetition and the warm-ups, the timed repetitions of every window, and
/// the data check after them, seconds. (Raw files of earlier builds checked the data after the
/// cold repetition, inside `cold_and_warmup`, and have no `check`.)
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhaseSeconds {
    pub idle_check: f64,
    pub prepare: f64,
    pub cold_and_warmup: f64,
    pub timed: f64,
    #[serde(default)]
    pub check: f64,
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
