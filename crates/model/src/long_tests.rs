//! The spec's long NVMe drive tests (Step 3, `inspect-nvme.py` without `--skip-gc`/`--skip-power`):
//! read cache, power-state transitions and garbage-collection settle. Their records, and the
//! rules that turn measured figures into the spec's fields — pure functions, so each rule is
//! tested on its own and documented once (docs/profile-schema.md).
//!
//! Every figure in these records is a median with its statistics ([`Stats`]); the derived
//! fields are arithmetic on those medians only.

use crate::results::Stats;
use crate::topology::PowerStateDescriptor;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// The spec's long drive tests (`inspect-nvme.py` without `--skip-gc`/`--skip-power`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum LongTest {
    /// Hot re-reads of a small region against random reads over the device (reads only).
    ReadCache,
    /// The first read after idle gaps of increasing length (reads only).
    PowerStates,
    /// Sustained writes, then reads until their latency settles (writes: needs the gate).
    GcSettle,
}

impl LongTest {
    pub const ALL: [LongTest; 3] = [
        LongTest::ReadCache,
        LongTest::PowerStates,
        LongTest::GcSettle,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LongTest::ReadCache => "read-cache",
            LongTest::PowerStates => "power-states",
            LongTest::GcSettle => "gc-settle",
        }
    }

    /// The path whose cases the test is part of (reads, or gc-settle's writes).
    pub fn path(self) -> crate::PathId {
        match self {
            LongTest::ReadCache | LongTest::PowerStates => crate::PathId::NvmeRead,
            LongTest::GcSettle => crate::PathId::NvmeWrite,
        }
    }
}

impl fmt::Display for LongTest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for LongTest {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase().replace('_', "-");
        LongTest::ALL
            .into_iter()
            .find(|x| x.as_str() == t)
            .ok_or_else(|| {
                format!(
                    "unknown NVMe long test `{s}` (known: read-cache, power-states, gc-settle, all)"
                )
            })
    }
}

/// The long tests asked for (`--nvme-long-tests`): those named, and those `all` brought in.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct LongTestRequest {
    /// Every test asked for.
    pub tests: BTreeSet<LongTest>,
    /// The ones named one by one: a test that cannot run with the paths chosen is an error for
    /// these, and quietly left out (with a note) when only `all` brought it in.
    pub named: BTreeSet<LongTest>,
}

/// `read-cache,power-states`, `all`: the long tests asked for (`--nvme-long-tests`).
pub fn parse_long_tests(s: &str) -> Result<LongTestRequest, String> {
    let mut r = LongTestRequest::default();
    let mut all = false;
    for item in s.split(',') {
        if item.trim().eq_ignore_ascii_case("all") {
            if std::mem::replace(&mut all, true) {
                return Err("lists all twice".into());
            }
            r.tests.extend(LongTest::ALL);
        } else {
            let t = item.parse()?;
            // `all` and a test by name is no repeat: the name makes the test required.
            if !r.named.insert(t) {
                return Err(format!("lists {} twice", item.trim()));
            }
            r.tests.insert(t);
        }
    }
    Ok(r)
}

/// The longest idle gap of the power-state test by default, s (the spec's 60 s).
pub const DEFAULT_IDLE_MAX_S: f64 = 60.0;
/// Sustained writes of the gc-settle test by default, s.
pub const DEFAULT_GC_WRITE_S: u64 = 600;
/// The longest the gc-settle test waits for reads to settle by default, s.
pub const DEFAULT_GC_SETTLE_MAX_S: u64 = 600;
/// The gc-settle test's writes: sequential 128 KiB at QD 32.
pub const GC_WRITE_BLOCK: u64 = 128 * crate::KIB;
pub const GC_WRITE_QUEUE_DEPTH: u32 = 32;

/// The idle gaps (ms) of the power-state test up to `max_s`: the spec's gaps, capped.
pub fn idle_gaps_ms(max_s: f64) -> Vec<u64> {
    IDLE_GAPS_MS
        .iter()
        .copied()
        .filter(|&ms| ms as f64 <= max_s * 1000.0 + 1e-6)
        .collect()
}

/// `0s`, `10ms`, `500ms`, `2s`: an idle gap in a case key.
pub fn gap_label(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// The read-cache test's hot region: 4 KiB reads at random offsets within the device's first
/// MiB, re-read after the warming pass (the runner's cold repetition and warm-up).
pub const READ_CACHE_HOT_REGION_BYTES: u64 = 1 << 20;
/// A drive has a read cache when cold reads take at least this many times as long as hot ones.
pub const READ_CACHE_SPEEDUP_THRESHOLD: f64 = 1.5;
/// The idle gaps of the power-state test, ms (the spec's 10 ms … 60 s), before the cap.
pub const IDLE_GAPS_MS: [u64; 10] = [
    10, 100, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 30_000, 60_000,
];
/// A power-state transition shows when the first read after an idle gap takes more than this
/// many times the no-idle baseline (and at least [`POWER_TRANSITION_MIN_EXCESS_US`] more): a
/// controller leaving a low-power state adds its exit latency, typically milliseconds against a
/// 4 KiB read's ~0.1 ms.
pub const POWER_TRANSITION_FACTOR: f64 = 2.0;
/// …and the first read must take at least this many µs more than the baseline. Without this
/// floor the factor alone fired on the host's own wake-up: a 4 KiB O_DIRECT read of a plain file
/// took 116 µs back to back and 250–313 µs after every gap from 10 ms to 2 s (2.1–2.7×, on the CI
/// VM), and a CPU leaving a deep C-state adds up to ~0.2 ms. A drive's non-operational power
/// states commonly report exit latencies (EXLAT) of a millisecond and more; a state that costs
/// less than 0.5 ms to leave is below what this test can tell from the host's noise.
pub const POWER_TRANSITION_MIN_EXCESS_US: f64 = 500.0;
/// gc-settle: writes and probes are paced in intervals of this length, seconds.
pub const GC_INTERVAL_S: f64 = 1.0;
/// gc-settle: reads settle when a probe's median latency is within this fraction above the
/// baseline's median.
pub const GC_SETTLE_TOLERANCE: f64 = 0.10;
/// gc-settle: 4 KiB QD1 random reads per latency probe.
pub const GC_PROBE_READS: u32 = 32;
/// gc-settle: probes of the baseline, one per interval, before the writes.
pub const GC_BASELINE_PROBES: u32 = 5;
/// A settle time this close above a whole second is that second (scheduling slack of the probe
/// loop, so a probe due at 3 s that starts at 3.0004 s recommends 3 s, not 4 s).
pub const GC_SCHEDULING_SLACK_S: f64 = 0.005;

/// cold median latency / hot median latency; `None` unless both are positive and finite.
pub fn cache_speedup(cold_median_us: f64, hot_median_us: f64) -> Option<f64> {
    let ok = |x: f64| x.is_finite() && x > 0.0;
    (ok(cold_median_us) && ok(hot_median_us)).then(|| cold_median_us / hot_median_us)
}

/// The spec's `has_read_cache`: speedup ≥ [`READ_CACHE_SPEEDUP_THRESHOLD`].
pub fn has_read_cache(speedup: f64) -> bool {
    speedup >= READ_CACHE_SPEEDUP_THRESHOLD
}

/// Whether a first-read median is a latency step over the baseline: above
/// [`POWER_TRANSITION_FACTOR`] × the baseline and at least [`POWER_TRANSITION_MIN_EXCESS_US`]
/// above it.
pub fn is_latency_step(baseline_median_us: f64, median_us: f64) -> bool {
    median_us > POWER_TRANSITION_FACTOR * baseline_median_us
        && median_us - baseline_median_us >= POWER_TRANSITION_MIN_EXCESS_US
}

/// The smallest idle gap (s, > 0) whose median first-read latency is a latency step over the
/// no-idle baseline's median ([`is_latency_step`]); `None` when none was. `gaps` are (idle gap
/// s, median µs) in any order.
pub fn transition_at(baseline_median_us: f64, gaps: &[(f64, f64)]) -> Option<f64> {
    gaps.iter()
        .filter(|(gap, median)| *gap > 0.0 && is_latency_step(baseline_median_us, *median))
        .map(|(gap, _)| *gap)
        .min_by(f64::total_cmp)
}

/// Whether a drive can move to another power state by itself when idle, from Identify:
/// `Some(false)` when it reports no APST support and no non-operational power state (then a
/// latency step after idle comes from the host, not from the drive), `Some(true)` when it
/// reports either, `None` when Identify was not read.
pub fn can_change_power_state_when_idle(
    apst_supported: Option<bool>,
    states: &[PowerStateDescriptor],
) -> Option<bool> {
    let non_operational = states.iter().any(|s| s.non_operational);
    match apst_supported {
        Some(apst) => Some(apst || non_operational),
        None if non_operational => Some(true),
        None => None,
    }
}

/// Whether a probe's median latency is back within [`GC_SETTLE_TOLERANCE`] of the baseline
/// (faster than the baseline counts as settled).
pub fn settled(baseline_median_us: f64, probe_median_us: f64) -> bool {
    probe_median_us <= (1.0 + GC_SETTLE_TOLERANCE) * baseline_median_us
}

/// The spec's `recommended_gc_settle_s`: the settle time rounded up to whole seconds (within
/// [`GC_SCHEDULING_SLACK_S`] of a whole second counts as that second).
pub fn recommended_settle_s(settled_at_s: f64) -> u64 {
    let s = (settled_at_s - GC_SCHEDULING_SLACK_S).max(0.0).ceil();
    // Finite, non-negative and rounded: the cast only saturates for absurd times.
    s as u64
}

/// The intervals `sustained_write_mbps` is the median of: the last third (rounded up), so the
/// drive's fresh-out-of-cache burst at the start is left out. Empty only when `intervals` is.
pub fn sustained_intervals(intervals: &[f64]) -> &[f64] {
    let n = intervals.len();
    &intervals[n - n.div_ceil(3)..]
}

/// Deserialise a field that is absent (`None`), `null` (`Some(None)`) or a value.
pub fn absent_null_or<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// The long tests' results for one drive (or `--target`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NvmeLongTests {
    /// The drive's BDF (its controller name without one), or the `--target` path.
    pub device: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_cache: Option<ReadCacheResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_states: Option<PowerStatesResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_settle: Option<GcSettleResult>,
}

/// Read cache: 4 KiB QD1 reads re-reading a small hot region against random reads over the
/// whole device (two measurements, `hot_key` and `cold_key`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReadCacheResult {
    pub hot_key: String,
    pub hot_region_bytes: u64,
    /// Per-repetition average latency of the hot reads, µs.
    pub hot_latency_us: Stats,
    pub cold_key: String,
    /// Per-repetition average latency of the cold reads, µs.
    pub cold_latency_us: Stats,
    /// `cold_latency_us.median / hot_latency_us.median`.
    pub cache_speedup: f64,
    /// `cache_speedup ≥ speedup_threshold`.
    pub has_read_cache: bool,
    pub speedup_threshold: f64,
}

/// Power states: the first 4 KiB read after idle gaps of increasing length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PowerStatesResult {
    /// The no-idle case (a read right after the previous one).
    pub baseline_key: String,
    pub baseline_latency_us: Stats,
    /// Every idle gap measured, shortest first.
    pub gaps: Vec<IdleGap>,
    pub transition_factor: f64,
    /// The least excess over the baseline's median a latency step needs, µs (absent in profiles
    /// written before the rule had it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_excess_us: Option<f64>,
    /// The smallest gap whose median latency exceeds `transition_factor` × the baseline's and
    /// the baseline's by at least `min_excess_us`; null when none did.
    #[serde(default)]
    pub latency_step_at_s: Option<f64>,
    /// From the drive's Identify: false when it reports no APST support and no non-operational
    /// power state (it cannot change power state by itself); absent when unknown (Identify not
    /// read, or a `--target`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drive_can_change_power_state: Option<bool>,
    /// `latency_step_at_s`, except null when `drive_can_change_power_state` is false.
    pub power_state_transition_at_s: Option<f64>,
}

/// One idle gap of the power-state test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IdleGap {
    pub idle_s: f64,
    pub key: String,
    /// The first read after the gap, µs, one per repetition.
    pub latency_us: Stats,
    /// `latency_us.median` / the baseline's median.
    pub vs_baseline: f64,
}

/// Garbage-collection settle: read latency before, sustained sequential writes, then read
/// latency every interval until it is back near the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GcSettleResult {
    /// The measurement of the sustained writes (`gbps` over the last third of the intervals).
    pub key: String,
    pub write_block_bytes: u64,
    pub write_queue_depth: u32,
    pub interval_s: f64,
    /// Per-read latency of 4 KiB QD1 random reads before writing, µs: `GC_BASELINE_PROBES`
    /// probes of `probe_reads` reads, one probe per interval.
    pub baseline_latency_us: Stats,
    pub probe_reads: u32,
    /// Every probe reads inside the device's first this many bytes, which are written once
    /// before the baseline (so no probe reads a block the drive never mapped: an unwritten or
    /// trimmed block is answered without reading flash). Absent in records made before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_region_bytes: Option<u64>,
    /// Write throughput of every interval in order, MB/s (10⁶ B/s).
    pub write_intervals_mbps: Vec<f64>,
    pub bytes_written: u64,
    /// Over the last third of the intervals, MB/s.
    pub sustained_write_mbps: Stats,
    pub settle_max_s: u64,
    /// Every probe after the writes stopped, until one settled or `settle_max_s` passed.
    pub settle_probes: Vec<SettleProbe>,
    /// When the first settled probe started, s after the last write completed; null when none
    /// did within `settle_max_s`.
    pub settled_at_s: Option<f64>,
    /// `settled_at_s` rounded up to whole seconds; null when not settled.
    pub recommended_gc_settle_s: Option<u64>,
}

/// One read-latency probe after the writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SettleProbe {
    /// When the probe started, s after the last write completed.
    pub at_s: f64,
    /// Per-read latency over the probe's reads, µs.
    pub latency_us: Stats,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn long_test_names_parse_and_all_means_every_one() {
        let all = parse_long_tests("all").unwrap();
        assert_eq!(all.tests.into_iter().collect::<Vec<_>>(), LongTest::ALL);
        assert!(all.named.is_empty());
        let two = parse_long_tests("power-states, READ_CACHE").unwrap();
        assert_eq!(
            two.tests.iter().copied().collect::<Vec<_>>(),
            [LongTest::ReadCache, LongTest::PowerStates]
        );
        assert_eq!(two.named, two.tests);
        let mixed = parse_long_tests("all,gc-settle").unwrap();
        assert_eq!(mixed.tests.len(), 3);
        assert_eq!(
            mixed.named.into_iter().collect::<Vec<_>>(),
            [LongTest::GcSettle]
        );
        let e = parse_long_tests("read-cache,smart").unwrap_err();
        assert!(e.contains("`smart`") && e.contains("gc-settle, all"), "{e}");
        assert!(parse_long_tests("").is_err());
        // A value listed twice is refused, as every list option's is; spellings of one test too.
        assert_eq!(parse_long_tests("all,all").unwrap_err(), "lists all twice");
        assert_eq!(
            parse_long_tests("read-cache,READ_CACHE").unwrap_err(),
            "lists READ_CACHE twice"
        );
        for t in LongTest::ALL {
            assert_eq!(t.as_str().parse::<LongTest>().unwrap(), t);
        }
    }

    #[test]
    fn idle_gaps_are_the_spec_gaps_up_to_the_cap() {
        assert_eq!(idle_gaps_ms(60.0), IDLE_GAPS_MS);
        assert_eq!(idle_gaps_ms(0.5), [10, 100, 500]);
        assert_eq!(idle_gaps_ms(3.0), [10, 100, 500, 1000, 2000]);
        assert!(idle_gaps_ms(0.005).is_empty());
        assert_eq!(
            [0, 10, 500, 1000, 60_000].map(gap_label),
            ["0s", "10ms", "500ms", "1s", "60s"]
        );
    }

    #[test]
    fn read_cache_rule() {
        assert_eq!(cache_speedup(150.0, 50.0), Some(3.0));
        assert!(has_read_cache(3.0) && has_read_cache(1.5) && !has_read_cache(1.49));
        assert_eq!(cache_speedup(150.0, 0.0), None);
        assert_eq!(cache_speedup(f64::NAN, 1.0), None);
    }

    #[test]
    fn transition_is_the_smallest_gap_above_the_factor_and_the_floor() {
        let gaps = [
            (1.0, 90.0),
            (0.1, 85.0),
            (5.0, 2500.0),
            (2.0, 601.0),
            (0.5, 590.0),
            (0.0, 9999.0),
        ];
        assert_eq!(
            transition_at(100.0, &gaps),
            Some(2.0),
            "601 > 2 × 100 and 501 µs above it; 590 is only 490 µs above"
        );
        assert_eq!(transition_at(100.0, &gaps[..2]), None);
        assert_eq!(
            transition_at(1000.0, &[(1.0, 2000.0)]),
            None,
            "exactly 2× is not above"
        );
        assert_eq!(transition_at(1000.0, &[(1.0, 2000.5)]), Some(1.0));
        // The plain-file case that fired before the floor: 116 µs, then 250–313 µs after gaps.
        let file = [(0.01, 313.0), (0.1, 283.7), (0.5, 263.1), (1.0, 257.3)];
        assert_eq!(transition_at(116.1, &file), None);
        assert_eq!(transition_at(100.0, &[(0.01, 600.0)]), Some(0.01));
        assert_eq!(transition_at(100.0, &[]), None);
    }

    #[test]
    fn a_drive_without_apst_and_non_operational_states_cannot_change_state_when_idle() {
        let ps = |state: u8, non_operational: bool| PowerStateDescriptor {
            state,
            max_power_w: 5.0,
            non_operational,
            entry_latency_us: 0,
            exit_latency_us: 0,
        };
        let qemu = [ps(0, false)];
        let client = [ps(0, false), ps(1, false), ps(2, true)];
        assert_eq!(
            can_change_power_state_when_idle(Some(false), &qemu),
            Some(false)
        );
        assert_eq!(
            can_change_power_state_when_idle(Some(true), &qemu),
            Some(true)
        );
        assert_eq!(
            can_change_power_state_when_idle(Some(false), &client),
            Some(true)
        );
        assert_eq!(can_change_power_state_when_idle(None, &client), Some(true));
        assert_eq!(can_change_power_state_when_idle(None, &[]), None);
    }

    #[test]
    fn settle_rules() {
        assert!(settled(100.0, 110.0) && settled(100.0, 50.0) && !settled(100.0, 110.5));
        assert_eq!(recommended_settle_s(0.0001), 0);
        assert_eq!(recommended_settle_s(3.0004), 3);
        assert_eq!(recommended_settle_s(3.2), 4);
        assert_eq!(recommended_settle_s(0.5), 1);
    }

    #[test]
    fn sustained_is_the_last_third_rounded_up() {
        let v: Vec<f64> = (1..=9).map(f64::from).collect();
        assert_eq!(sustained_intervals(&v), [7.0, 8.0, 9.0]);
        assert_eq!(sustained_intervals(&v[..4]), [3.0, 4.0]);
        assert_eq!(sustained_intervals(&v[..1]), [1.0]);
        assert!(sustained_intervals(&[]).is_empty());
    }

    #[test]
    fn an_unmeasured_field_is_absent_and_a_measured_none_is_null() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct T {
            #[serde(
                default,
                skip_serializing_if = "Option::is_none",
                deserialize_with = "absent_null_or"
            )]
            x: Option<Option<f64>>,
        }
        for (v, text) in [
            (None, "{}"),
            (Some(None), "{\"x\":null}"),
            (Some(Some(0.5)), "{\"x\":0.5}"),
        ] {
            let t = T { x: v };
            assert_eq!(serde_json::to_string(&t).unwrap(), text);
            assert_eq!(serde_json::from_str::<T>(text).unwrap(), t);
        }
        let y = serde_saphyr::to_string(&T { x: Some(None) }).unwrap();
        assert_eq!(
            serde_saphyr::from_str::<T>(&y).unwrap().x,
            Some(None),
            "{y}"
        );
    }

    proptest! {
        #[test]
        fn the_transition_gap_exceeds_the_factor_and_no_smaller_gap_does(
            base in 1.0f64..1000.0,
            gaps in proptest::collection::vec((0.0f64..100.0, 1.0f64..100_000.0), 0..12),
        ) {
            let step = |m: f64| m > POWER_TRANSITION_FACTOR * base && m - base >= POWER_TRANSITION_MIN_EXCESS_US;
            match transition_at(base, &gaps) {
                Some(t) => {
                    prop_assert!(t > 0.0);
                    prop_assert!(gaps.iter().any(|g| g.0 == t && step(g.1)));
                    prop_assert!(gaps.iter().filter(|g| g.0 > 0.0 && g.0 < t).all(|g| !step(g.1)));
                }
                None => prop_assert!(gaps.iter().filter(|g| g.0 > 0.0).all(|g| !step(g.1))),
            }
        }

        #[test]
        fn the_recommended_settle_is_the_time_rounded_up(t in 0.0f64..600.0) {
            let r = recommended_settle_s(t);
            prop_assert!(r as f64 + GC_SCHEDULING_SLACK_S >= t && (r as f64) < t + 1.0);
        }

        #[test]
        fn the_sustained_intervals_are_the_last_third(v in proptest::collection::vec(0.1f64..1e4, 1..200)) {
            let s = sustained_intervals(&v);
            prop_assert!(!s.is_empty());
            prop_assert!(3 * s.len() >= v.len() && 3 * (s.len() - 1) < v.len());
            prop_assert_eq!(s, &v[v.len() - s.len()..]);
        }

        #[test]
        fn speedup_is_the_ratio_of_medians(cold in 0.1f64..1e5, hot in 0.1f64..1e5) {
            let s = cache_speedup(cold, hot).unwrap();
            prop_assert!((s * hot - cold).abs() <= 1e-9 * cold);
        }
    }
}
