//! The spec's long NVMe drive tests (Step 3, `inspect-nvme.py` without `--skip-gc`/`--skip-power`):
//! read cache, power-state transitions and garbage-collection settle. Their records, and the
//! rules that turn measured figures into the spec's fields — pure functions, so each rule is
//! tested on its own and documented once (docs/profile-schema.md).
//!
//! Every figure in these records is a median with its statistics ([`Stats`]); the derived
//! fields are arithmetic on those medians only.

use crate::results::Stats;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// The spec's long drive tests (`inspect-nvme.py` without `--skip-gc`/`--skip-power`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

/// `read-cache,power-states`, `all`: the long tests asked for (`--nvme-long-tests`).
pub fn parse_long_tests(s: &str) -> Result<BTreeSet<LongTest>, String> {
    let mut set = BTreeSet::new();
    for item in s.split(',') {
        if item.trim().eq_ignore_ascii_case("all") {
            set.extend(LongTest::ALL);
        } else {
            set.insert(item.parse()?);
        }
    }
    Ok(set)
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
/// many times the no-idle baseline: a controller leaving a low-power state adds its exit
/// latency, typically milliseconds against a 4 KiB read's ~0.1 ms. A CPU waking from a deep
/// idle state also slows the first read (tens of µs), so the report shows the drive's APST
/// table beside the figures.
pub const POWER_TRANSITION_FACTOR: f64 = 2.0;
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

/// The smallest idle gap (s, > 0) whose median first-read latency exceeds
/// [`POWER_TRANSITION_FACTOR`] × the no-idle baseline's median; `None` when none did.
/// `gaps` are (idle gap s, median µs) in any order.
pub fn transition_at(baseline_median_us: f64, gaps: &[(f64, f64)]) -> Option<f64> {
    gaps.iter()
        .filter(|(gap, median)| {
            *gap > 0.0 && *median > POWER_TRANSITION_FACTOR * baseline_median_us
        })
        .map(|(gap, _)| *gap)
        .min_by(f64::total_cmp)
}

/// Whether a probe's median latency is back within [`GC_SETTLE_TOLERANCE`] of the baseline
/// (faster than the baseline counts as settled).
pub fn settled(baseline_median_us: f64, probe_median_us: f64) -> bool {
    probe_median_us <= (1.0 + GC_SETTLE_TOLERANCE) * baseline_median_us
}

/// The first probe (by time) that [`settled`]: its time after the last write, s.
pub fn settle_time(baseline_median_us: f64, probes: &[(f64, f64)]) -> Option<f64> {
    let mut sorted = probes.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    sorted
        .iter()
        .find(|(_, median)| settled(baseline_median_us, *median))
        .map(|(t, _)| *t)
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
    /// The smallest gap whose median latency exceeds `transition_factor` × the baseline's; null
    /// when none did.
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
        assert_eq!(all.into_iter().collect::<Vec<_>>(), LongTest::ALL);
        let two = parse_long_tests("power-states, READ_CACHE").unwrap();
        assert_eq!(
            two.into_iter().collect::<Vec<_>>(),
            [LongTest::ReadCache, LongTest::PowerStates]
        );
        let e = parse_long_tests("read-cache,smart").unwrap_err();
        assert!(e.contains("`smart`") && e.contains("gc-settle, all"), "{e}");
        assert!(parse_long_tests("").is_err());
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
    fn transition_is_the_smallest_gap_above_the_factor() {
        let gaps = [
            (1.0, 90.0),
            (0.1, 85.0),
            (5.0, 2500.0),
            (2.0, 201.0),
            (0.0, 999.0),
        ];
        assert_eq!(transition_at(100.0, &gaps), Some(2.0), "201 > 2 × 100");
        assert_eq!(transition_at(100.0, &gaps[..2]), None);
        assert_eq!(
            transition_at(100.0, &[(1.0, 200.0)]),
            None,
            "exactly 2× is not above"
        );
        assert_eq!(transition_at(100.0, &[]), None);
    }

    #[test]
    fn settle_rules() {
        assert!(settled(100.0, 110.0) && settled(100.0, 50.0) && !settled(100.0, 110.5));
        let probes = [(2.0, 105.0), (0.0, 400.0), (1.0, 150.0), (3.0, 500.0)];
        assert_eq!(
            settle_time(100.0, &probes),
            Some(2.0),
            "first in time, not in order given"
        );
        assert_eq!(settle_time(100.0, &probes[1..2]), None);
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
            match transition_at(base, &gaps) {
                Some(t) => {
                    prop_assert!(t > 0.0);
                    prop_assert!(gaps.iter().any(|g| g.0 == t && g.1 > POWER_TRANSITION_FACTOR * base));
                    prop_assert!(gaps.iter().filter(|g| g.0 > 0.0 && g.0 < t).all(|g| g.1 <= POWER_TRANSITION_FACTOR * base));
                }
                None => prop_assert!(gaps.iter().filter(|g| g.0 > 0.0).all(|g| g.1 <= POWER_TRANSITION_FACTOR * base)),
            }
        }

        #[test]
        fn the_settle_time_is_the_first_settled_probe(
            base in 1.0f64..1000.0,
            probes in proptest::collection::vec((0.0f64..600.0, 1.0f64..10_000.0), 0..40),
        ) {
            match settle_time(base, &probes) {
                Some(t) => {
                    prop_assert!(probes.iter().any(|p| p.0 == t && settled(base, p.1)));
                    prop_assert!(probes.iter().filter(|p| p.0 < t).all(|p| !settled(base, p.1)));
                    let r = recommended_settle_s(t);
                    prop_assert!(r as f64 + GC_SCHEDULING_SLACK_S >= t && (r as f64) < t + 1.0);
                }
                None => prop_assert!(probes.iter().all(|p| !settled(base, p.1))),
            }
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
