//! Summary statistics of benchmark repetitions: median, min, max, spread % and N.
//!
//! A figure is the median of the timed repetitions; spread is (max − min) / median × 100. Cold
//! and warm-up repetitions never enter these statistics (the runner keeps them apart).

use hwc_model::Stats;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error("no samples to summarise")]
    Empty,
    #[error("sample {index} is not a finite positive number ({value})")]
    NotFinite { index: usize, value: f64 },
}

/// Median of a sorted, non-empty slice (mean of the two middle values for an even count).
fn median_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Summarise samples that must all be finite and > 0 (throughputs, latencies).
pub fn summarize(samples: &[f64]) -> Result<Stats, StatsError> {
    if samples.is_empty() {
        return Err(StatsError::Empty);
    }
    if let Some((index, &value)) = samples
        .iter()
        .enumerate()
        .find(|(_, v)| !v.is_finite() || **v <= 0.0)
    {
        return Err(StatsError::NotFinite { index, value });
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = median_sorted(&sorted);
    let min = sorted[0];
    let max = sorted[sorted.len() - 1];
    Ok(Stats {
        median,
        min,
        max,
        spread_pct: (max - min) / median * 100.0,
        n: u32::try_from(samples.len()).unwrap_or(u32::MAX),
    })
}

/// The distribution-free confidence interval of the median of `samples` (any order): the
/// order statistics x₍ₖ₎ and x₍ₙ₊₁₋ₖ₎ with k the largest for which P(Bin(n, ½) < k) ≤ 2.5 %,
/// which covers the median with at least 95 % probability (Conover, *Practical Nonparametric
/// Statistics*, §3.2). Below 6 samples no k reaches 95 %: their min and max (93.75 % at 5).
/// `None` when empty.
pub fn median_ci(samples: &[f64]) -> Option<(f64, f64)> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    // P(B = 0) = ½ⁿ, then P(B = j) = P(B = j − 1) · (n − j + 1) / j; `below` is P(B < k).
    let (mut k, mut p, mut below) = (0usize, 0.5f64.powi(n as i32), 0.0f64);
    while k < n / 2 && below + p <= 0.025 {
        below += p;
        k += 1;
        p *= (n - k + 1) as f64 / k as f64;
    }
    let k = k.max(1);
    Some((sorted[k - 1], sorted[n - k]))
}

/// The width of [`median_ci`] in per cent of the median; `None` when empty or the median is
/// not positive.
pub fn median_ci_width_pct(samples: &[f64]) -> Option<f64> {
    let (lo, hi) = median_ci(samples)?;
    let median = summarize(samples).ok()?.median;
    Some((hi - lo) / median * 100.0)
}

/// Throughput in GB/s (10⁹ B/s) of `bytes` moved in `seconds`.
pub fn gbps(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / seconds / 1e9
}

/// The smallest x whose y reaches `fraction` of the largest y (the knee of a sweep).
/// `points` are (x, y); returns `None` when empty.
pub fn knee<X: Copy + Ord>(points: &[(X, f64)], fraction: f64) -> Option<X> {
    let peak = points.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    if !peak.is_finite() {
        return None;
    }
    points
        .iter()
        .filter(|p| p.1 >= fraction * peak)
        .map(|p| p.0)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn odd_and_even_medians() {
        let s = summarize(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert!((s.spread_pct - 100.0).abs() < 1e-12);
        let s = summarize(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.median, 2.5);
    }

    #[test]
    fn rejects_empty_and_bad_samples() {
        assert_eq!(summarize(&[]), Err(StatsError::Empty));
        assert!(matches!(
            summarize(&[1.0, f64::NAN]),
            Err(StatsError::NotFinite { index: 1, .. })
        ));
        assert!(matches!(
            summarize(&[0.0]),
            Err(StatsError::NotFinite { index: 0, .. })
        ));
    }

    #[test]
    fn gbps_is_decimal() {
        assert!((gbps(1_000_000_000, 1.0) - 1.0).abs() < 1e-12);
        assert!((gbps(256 << 20, 0.004837) - 55.496).abs() < 0.01);
    }

    #[test]
    fn knee_is_smallest_size_at_95_percent_of_peak() {
        let pts = [(4u64, 1.0), (16, 3.0), (64, 6.7), (128, 6.9), (256, 7.0)];
        assert_eq!(knee(&pts, 0.95), Some(64));
        assert_eq!(knee::<u64>(&[], 0.95), None);
    }

    proptest! {
        #[test]
        fn summary_is_ordered_and_permutation_invariant(
            mut v in proptest::collection::vec(1e-6f64..1e6, 1..64)
        ) {
            let a = summarize(&v).unwrap();
            prop_assert!(a.min <= a.median && a.median <= a.max);
            prop_assert!(a.spread_pct >= 0.0);
            prop_assert_eq!(a.n as usize, v.len());
            v.reverse();
            let b = summarize(&v).unwrap();
            prop_assert_eq!(a, b);
        }
    }

    #[test]
    fn the_median_interval_takes_order_statistics_by_the_binomial() {
        let v = |n: usize| (1..=n).map(|i| i as f64).collect::<Vec<_>>();
        // Below 6: min and max.
        assert_eq!(median_ci(&[3.0, 1.0, 2.0]), Some((1.0, 3.0)));
        assert_eq!(median_ci(&v(5)), Some((1.0, 5.0)));
        // 6–8: P(B < 1) = ½ⁿ ≤ 2.5 %, P(B < 2) > 2.5 %: still the extremes.
        assert_eq!(median_ci(&v(8)), Some((1.0, 8.0)));
        // 9: P(B < 2) = 10/512 ≈ 1.95 %: the second from each end.
        assert_eq!(median_ci(&v(9)), Some((2.0, 8.0)));
        // 12: P(B < 3) = 79/4096 ≈ 1.93 %, P(B < 4) ≈ 7.3 %.
        assert_eq!(median_ci(&v(12)), Some((3.0, 10.0)));
        // 200: the textbook ranks are 86 and 115 (normal approximation 100 ± 1.96 · √50).
        assert_eq!(median_ci(&v(200)), Some((86.0, 115.0)));
        assert_eq!(median_ci(&[]), None);
        // One outlier among 12 no longer widens the interval; it widens the spread.
        let mut s = vec![10.0; 11];
        s.push(20.0);
        assert_eq!(median_ci_width_pct(&s), Some(0.0));
        assert!(summarize(&s).unwrap().spread_pct > 99.0);
    }
}
