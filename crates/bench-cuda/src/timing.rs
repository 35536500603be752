//! How many back-to-back copies one repetition queues (K), chosen from a calibration run, and
//! how many such latched batches a repetition of a small copy that reads host memory gathers.

/// One repetition should last about this long: long enough that the event timer's resolution
/// (≈ 0.5 µs), the first copy's start latency and a stall of 100 µs elsewhere on the machine stay
/// below 0.5 % of it, short enough that a case of 1 + 12 repetitions (and the cold one and the
/// calibration batch) takes about 0.3 s: a one-GPU node's 131 copy runs are most of the
/// default profile's minute. Large copies keep it too: at 10 ms more of them spread over the
/// 1 % bar and were timed again, saving no time (docs/measurements.md, "Shorter repetitions for
/// large copies").
pub const TARGET_REP_SECONDS: f64 = 0.020;
/// Fewest copies per stream in one repetition, however large the buffers: one, where one
/// round of copies on all the case's streams already lasts the target (eight streams of
/// 256 MiB at 55 GB/s take 39 ms; two copies each took 78 ms a repetition, 1.2 s a case, to
/// no more accuracy: every copy of the round moves concurrently and the link stays full until
/// the last one ends).
pub const MIN_COPIES: u32 = 1;
/// Most copies per stream queued behind the latch in one repetition. The driver's command
/// queue is finite: past its capacity a launch blocks until the GPU drains it, which a latched
/// stream never does (on an H200 with driver 580 about 900 copies fit; calibration halves K
/// when the latch reports that it timed out). And deep queues measured lower for small D2H
/// copies there: 128 KiB D2H read 29.1–29.3 GB/s with 512 copies queued, 30.0–30.2 with 256
/// (plain CUDA with 256: 30.6–30.8), so small copies stop at 256, as nvbandwidth-style
/// references do.
pub const MAX_COPIES: u32 = 256;
/// Most latched batches of K copies one repetition gathers.
pub const MAX_BATCHES: u32 = 32;
/// Bytes per stream the calibration repetition aims to move.
pub const CALIBRATION_BYTES: u64 = 32 << 20;
/// Most copies per stream in the calibration repetition.
pub const MAX_CALIBRATION_COPIES: u32 = 256;

/// Copies per stream for the calibration repetition: about [`CALIBRATION_BYTES`] per stream,
/// at least [`MIN_COPIES`].
pub fn calibration_copies(size_bytes: u64) -> u32 {
    let k = CALIBRATION_BYTES.div_ceil(size_bytes.max(1));
    clamp_copies(k, MIN_COPIES, MAX_CALIBRATION_COPIES)
}

/// Copies per stream so that one repetition lasts about `target_seconds`, given the rate the
/// calibration measured over all streams (`bytes_per_second`) and the bytes one round of copies
/// moves (`bytes_per_round` = size × streams). Clamped to [`MIN_COPIES`]..=`max_copies`.
pub fn copies_per_rep(
    bytes_per_round: u64,
    bytes_per_second: f64,
    target_seconds: f64,
    max_copies: u32,
) -> u32 {
    let max_copies = max_copies.max(MIN_COPIES);
    if !(bytes_per_second.is_finite() && bytes_per_second > 0.0) || bytes_per_round == 0 {
        return max_copies;
    }
    let k = (target_seconds * bytes_per_second / bytes_per_round as f64).ceil();
    if !k.is_finite() || k >= f64::from(max_copies) {
        max_copies
    } else {
        // k is finite, non-negative and below max_copies here: the cast is exact.
        clamp_copies(k as u64, MIN_COPIES, max_copies)
    }
}

/// Latched batches per repetition for a copy that reads host memory whose batch of K copies
/// lasts `batch_seconds` (short of the target where K stopped at [`MAX_COPIES`], or at a count
/// a slower first calibration batch chose): the count whose copying lies nearest
/// `target_seconds` (so at least two thirds of it), at most `max_batches`, at least 1. Each
/// batch is queued behind its own latch and timed by its own events; the repetition's time is
/// the sum of their spans.
///
/// Why: small copies that read host memory run in spells. On an H200 (driver 580, in a VM) a
/// 128 KiB H2D copy read about 22.5 GB/s for 150 ms of back-to-back batches, then about 26,
/// and fell back for spells of 50–150 ms at other times; a repetition of one batch lasts
/// 1.3 ms, so a case's 12 repetitions (16 ms) sample one spell: over 16 cases in one process
/// their medians read 22.41–26.96 GB/s (standard deviation 1.20), while repetitions of 16
/// batches (about 20 ms of copying each) read 26.16–27.00 (0.23) in the same cases
/// (tools/gpu-reference/README.md). 512 KiB H2D and 128 KiB D2H medians repeated
/// as well either way (standard deviations 0.09–0.14 and 0.05), and D2H, which writes host
/// memory, ran flat (29.3–30.9 over 300 batches), so D2H copies are not batched.
pub fn batches_per_rep(batch_seconds: f64, target_seconds: f64, max_batches: u32) -> u32 {
    let max_batches = max_batches.max(1);
    if !(batch_seconds.is_finite() && batch_seconds > 0.0 && target_seconds.is_finite()) {
        return 1;
    }
    let m = (target_seconds / batch_seconds).round();
    if m >= f64::from(max_batches) {
        max_batches
    } else if m >= 1.0 {
        // m is finite, at least 1 and below max_batches here: the cast is exact.
        m as u32
    } else {
        1
    }
}

fn clamp_copies(k: u64, min: u32, max: u32) -> u32 {
    u32::try_from(k.clamp(u64::from(min), u64::from(max))).unwrap_or(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn large_pcie_copies_get_the_minimum() {
        // 256 MiB at 55 GB/s is 4.9 ms per copy: three copies reach 10 ms.
        assert_eq!(copies_per_rep(256 * MIB, 55e9, 0.010, MAX_COPIES), 3);
        // The default target: five copies, 24 ms.
        assert_eq!(
            copies_per_rep(256 * MIB, 55e9, TARGET_REP_SECONDS, MAX_COPIES),
            5
        );
        // Eight streams of 256 MiB share the link: one round (39 ms) outlasts the target.
        assert_eq!(copies_per_rep(8 * 256 * MIB, 55e9, 0.010, MAX_COPIES), 1);
        assert_eq!(
            copies_per_rep(8 * 256 * MIB, 55e9, TARGET_REP_SECONDS, MAX_COPIES),
            1
        );
        // Four: 19.5 ms a round, just short of the target: two copies each.
        assert_eq!(
            copies_per_rep(4 * 256 * MIB, 55e9, TARGET_REP_SECONDS, MAX_COPIES),
            2
        );
    }

    #[test]
    fn mid_sizes_fill_the_target() {
        // 4 MiB at 53 GB/s: 79 µs per copy, 127 copies for 10 ms.
        let k = copies_per_rep(4 * MIB, 53e9, 0.010, MAX_COPIES);
        assert_eq!(k, 127);
        let seconds = f64::from(k) * (4 * MIB) as f64 / 53e9;
        assert!((0.010..0.0101).contains(&seconds), "{seconds}");
        // D2D 256 MiB at 2 TB/s: 0.13 ms per copy.
        assert_eq!(copies_per_rep(256 * MIB, 2.0e12, 0.010, MAX_COPIES), 75);
    }

    #[test]
    fn small_copies_are_capped_by_the_queue() {
        // 128 KiB at 26 GB/s would need 1984 copies for 10 ms.
        assert_eq!(
            copies_per_rep(128 << 10, 26e9, 0.010, MAX_COPIES),
            MAX_COPIES
        );
        // 4 MiB at 53 GB/s would need 253 copies for the 20 ms target: 8 MiB would need the
        // same, 128 KiB far more; the cap wins.
        assert_eq!(
            copies_per_rep(4 * MIB, 53e9, TARGET_REP_SECONDS, MAX_COPIES),
            253
        );
        assert_eq!(
            copies_per_rep(2 * MIB, 53e9, TARGET_REP_SECONDS, MAX_COPIES),
            MAX_COPIES
        );
        // A lowered cap (after a latch timeout) is honoured, but never below the minimum.
        assert_eq!(copies_per_rep(128 << 10, 26e9, 0.010, 128), 128);
        assert_eq!(copies_per_rep(128 << 10, 26e9, 0.010, 0), MIN_COPIES);
    }

    #[test]
    fn nonsense_rates_fall_back_to_the_cap() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(copies_per_rep(MIB, rate, 0.010, 300), 300, "{rate}");
        }
        assert_eq!(copies_per_rep(0, 1e9, 0.010, 300), 300);
    }

    #[test]
    fn short_batches_are_gathered_into_a_repetition_of_the_target() {
        // 128 KiB H2D: 256 copies in 1.26 ms; 16 batches reach 20 ms.
        assert_eq!(
            batches_per_rep(0.00126, TARGET_REP_SECONDS, MAX_BATCHES),
            16
        );
        // 2 MiB: 10 ms a batch, two of them.
        assert_eq!(batches_per_rep(0.0100, TARGET_REP_SECONDS, MAX_BATCHES), 2);
        // The count nearest the target: 12 ms makes two (24 ms), 14 ms one.
        assert_eq!(batches_per_rep(0.012, TARGET_REP_SECONDS, MAX_BATCHES), 2);
        assert_eq!(batches_per_rep(0.014, TARGET_REP_SECONDS, MAX_BATCHES), 1);
        // A batch that (nearly) lasts the target is a repetition of its own: 256 copies of
        // 4 MiB at 54 GB/s last 19.9 ms.
        assert_eq!(batches_per_rep(0.0199, TARGET_REP_SECONDS, MAX_BATCHES), 1);
        assert_eq!(batches_per_rep(0.020, TARGET_REP_SECONDS, MAX_BATCHES), 1);
        assert_eq!(batches_per_rep(0.250, TARGET_REP_SECONDS, MAX_BATCHES), 1);
        // Very short batches stop at the cap.
        assert_eq!(
            batches_per_rep(0.0001, TARGET_REP_SECONDS, MAX_BATCHES),
            MAX_BATCHES
        );
        assert_eq!(batches_per_rep(0.0001, TARGET_REP_SECONDS, 0), 1);
        for nonsense in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(
                batches_per_rep(nonsense, TARGET_REP_SECONDS, MAX_BATCHES),
                1
            );
        }
        assert_eq!(batches_per_rep(0.001, f64::NAN, MAX_BATCHES), 1);
    }

    proptest::proptest! {
        /// Whatever a batch lasts, the repetition holds the count of batches whose copying
        /// lies nearest the target (within half a batch of it), unless the cap stops it.
        #[test]
        fn a_repetition_lies_within_half_a_batch_of_the_target(
            batch_us in 1u32..1_000_000,
            target_ms in 1u32..100,
            max_batches in 1u32..64,
        ) {
            let batch = f64::from(batch_us) * 1e-6;
            let target = f64::from(target_ms) * 1e-3;
            let m = batches_per_rep(batch, target, max_batches);
            proptest::prop_assert!((1..=max_batches).contains(&m));
            let held = f64::from(m) * batch;
            if m < max_batches && m > 1 {
                proptest::prop_assert!((held - target).abs() <= batch / 2.0 + 1e-12);
            }
            if m == 1 && max_batches > 1 {
                // One batch: two would lie farther from the target.
                proptest::prop_assert!(batch >= target / 1.5 - 1e-12);
            }
            if m == max_batches && m > 1 {
                // Stopped by the cap: never past the target by more than half a batch.
                proptest::prop_assert!(held <= target + batch / 2.0 + 1e-12);
            }
        }
    }

    #[test]
    fn calibration_moves_about_32_mib_per_stream() {
        assert_eq!(calibration_copies(128 << 10), MAX_CALIBRATION_COPIES);
        assert_eq!(calibration_copies(4 * MIB), 8);
        assert_eq!(calibration_copies(256 * MIB), MIN_COPIES);
        assert_eq!(calibration_copies(0), MAX_CALIBRATION_COPIES);
        assert_eq!(calibration_copies(3 * MIB), 11);
    }
}
