//! Scheduling evidence: which timed repetitions were disturbed by scheduling (a thread kept off
//! its CPU), and the one-line summary a case's notes carry. Pure: the backend reads the counters
//! ([`crate::Prepared::last_sched`]); this judges and words them.

use hwc_model::{RepCounts, RepEvidence, RepSched, SchedEvidence, SchedSources, SchedSummary};
use std::fmt::Write;

pub use hwc_model::sched::DISTURBED_ABOVE_PCT;

/// Whether a repetition of `seconds` was disturbed (see [`DISTURBED_ABOVE_PCT`]): a thread's
/// run-queue delay, or the steal on its CPU, over `above_pct` per cent of it. `Some(true)` as
/// soon as any reading is over; `Some(false)` only when every thread's run-queue delay was read
/// and none is (steal, counted in 10 ms ticks, cannot clear a repetition by itself, and is
/// absent on kernels without it); `None` otherwise (a thread's delay missing, never a guess).
pub fn disturbed(rep: &RepSched, seconds: f64, above_pct: f64) -> Option<bool> {
    let limit_ns = seconds * 1e9 * above_pct / 100.0;
    let over = |ns: Option<u64>| ns.is_some_and(|ns| ns as f64 > limit_ns);
    let any_over = rep
        .threads
        .iter()
        .any(|t| over(t.run_delay_ns) || over(t.steal_us.map(|us| us.saturating_mul(1000))));
    if any_over {
        return Some(true);
    }
    let all_read = !rep.threads.is_empty() && rep.threads.iter().all(|t| t.run_delay_ns.is_some());
    all_read.then_some(false)
}

/// A case's evidence from each timed repetition's (seconds, counters), in run order, with each
/// repetition judged by [`DISTURBED_ABOVE_PCT`].
pub fn evidence(reps: Vec<(f64, RepSched)>, sources: SchedSources) -> SchedEvidence {
    SchedEvidence {
        disturbed_above_pct: DISTURBED_ABOVE_PCT,
        steal_tick_us: sources.steal_tick_us,
        unavailable: sources.unavailable,
        reps: reps
            .into_iter()
            .map(|(seconds, sched)| RepEvidence {
                seconds,
                disturbed: disturbed(&sched, seconds, DISTURBED_ABOVE_PCT),
                sched,
            })
            .collect(),
    }
}

/// `850 ns`, `14 µs`, `3.2 µs`, `1.84 ms`.
fn duration_ns(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..10_000 => format!("{:.1} µs", ns as f64 / 1e3),
        10_000..1_000_000 => format!("{:.0} µs", ns as f64 / 1e3),
        _ => format!("{:.2} ms", ns as f64 / 1e6),
    }
}

/// Steal, a whole number of ticks: `10 ms` where it is a whole number of ms, else as
/// [`duration_ns`].
fn steal(us: u64) -> String {
    if us >= 1000 && us.is_multiple_of(1000) {
        format!("{} ms", us / 1000)
    } else {
        duration_ns(us.saturating_mul(1000))
    }
}

/// `12 %`, `0.4 %`, `0.03 %`: `ns` as a share of a repetition of `seconds`.
fn share(ns: u64, seconds: f64) -> String {
    let pct = ns as f64 / (seconds * 1e9) * 100.0;
    if pct >= 10.0 {
        format!("{pct:.0} %")
    } else if pct >= 0.1 {
        format!("{pct:.1} %")
    } else {
        format!("{pct:.2} %")
    }
}

/// The largest of `value(rep, thread)` over every repetition and thread that has one, with the
/// (0-based) repetition and the thread's CPU; the first of equals.
fn largest(
    ev: &SchedEvidence,
    value: impl Fn(&hwc_model::ThreadSched) -> Option<u64>,
) -> Option<(u64, usize, u32)> {
    let mut best: Option<(u64, usize, u32)> = None;
    for (i, rep) in ev.reps.iter().enumerate() {
        for t in &rep.sched.threads {
            if let Some(v) = value(t) {
                if best.is_none_or(|(b, _, _)| v > b) {
                    best = Some((v, i, t.cpu));
                }
            }
        }
    }
    best
}

/// `ns` as a share of a repetition of `seconds` (`12 % of it`); where `ns` is longer than the
/// repetition, no share over 100 % is printed but that, and `why` it can be.
fn of_rep(ns: u64, seconds: f64, why: &str) -> String {
    if ns as f64 > seconds * 1e9 {
        format!(
            "more than the repetition's {}: {why}",
            duration_ns((seconds * 1e9) as u64)
        )
    } else {
        format!("{} of it", share(ns, seconds))
    }
}

/// The summary of a case's evidence for its measurement: how many of its repetitions were disturbed and by what rule, the
/// largest run-queue delay, steal and involuntary switches and in which repetition, whether the
/// disturbed repetitions are the slow ones (their median against the others', where each group
/// has two or more), and why a counter is missing. `samples_gbps`: the same repetitions'
/// figures, in the same order.
pub fn summary(ev: &SchedEvidence, samples_gbps: &[f64]) -> SchedSummary {
    let n = ev.reps.len();
    let judged: Vec<usize> = (0..n).filter(|&i| ev.reps[i].disturbed.is_some()).collect();
    let why = if ev.unavailable.is_empty() {
        String::new()
    } else {
        format!("; {}", ev.unavailable.join("; "))
    };
    let switches = match largest(ev, |t| t.nivcsw) {
        Some((0, _, _)) => "; no involuntary context switches".to_string(),
        Some((k, i, cpu)) => format!(
            "; up to {k} involuntary context switch{} in a thread (rep {}, CPU {cpu})",
            if k == 1 { "" } else { "es" },
            i + 1
        ),
        None => String::new(),
    };
    if judged.is_empty() {
        let why = if ev.unavailable.is_empty() {
            "no repetition had every thread's run-queue delay read".to_string()
        } else {
            ev.unavailable.join("; ")
        };
        return SchedSummary {
            counts: None,
            disturbed_above_pct: ev.disturbed_above_pct,
            detail: format!("not available ({why}){switches}"),
        };
    }
    let hit: Vec<usize> = judged
        .iter()
        .copied()
        .filter(|&i| ev.reps[i].disturbed == Some(true))
        .collect();
    let calm: Vec<usize> = judged
        .iter()
        .copied()
        .filter(|&i| ev.reps[i].disturbed == Some(false))
        .collect();
    let counts = RepCounts {
        disturbed: hit.len(),
        not_judged: n - judged.len(),
        of: n,
    };
    let mut s = format!(
        "{} of {} repetitions disturbed (a thread off its CPU over {} % of the repetition)",
        counts.disturbed, counts.of, ev.disturbed_above_pct
    );
    if counts.not_judged > 0 {
        let _ = write!(
            s,
            ", {} not judged (a thread's run-queue delay missing)",
            counts.not_judged
        );
    }
    let seconds = |i: usize| ev.reps[i].seconds;
    match largest(ev, |t| t.run_delay_ns) {
        Some((0, _, _)) => s.push_str("; no run-queue delay"),
        Some((ns, i, cpu)) => {
            let _ = write!(
                s,
                "; largest run-queue delay {} (rep {}, CPU {cpu}: {})",
                duration_ns(ns),
                i + 1,
                of_rep(
                    ns,
                    seconds(i),
                    "a thread's counters bracket its wait for the start too"
                )
            );
        }
        None => {}
    }
    let tick = ev
        .steal_tick_us
        .map(|t| format!("{} ticks", steal(t)))
        .unwrap_or_default();
    let machine = ev
        .reps
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.sched.machine_steal_us.map(|us| (us, i)))
        .fold(None, |b: Option<(u64, usize)>, x| match b {
            Some(b) if b.0 >= x.0 => Some(b),
            _ => Some(x),
        });
    let machine_wide = match machine {
        Some((0, _)) | None => String::new(),
        Some((us, i)) => format!(", machine-wide up to {} (rep {})", steal(us), i + 1),
    };
    match largest(ev, |t| t.steal_us) {
        Some((0, _, _)) => {
            let where_ = if matches!(machine, Some((0, _))) {
                "on its CPUs or machine-wide"
            } else {
                "on its CPUs"
            };
            let tick = if tick.is_empty() {
                tick
            } else {
                format!(" ({tick})")
            };
            let _ = write!(s, "; 0 ticks of steal counted {where_}{tick}{machine_wide}");
        }
        Some((us, i, cpu)) => {
            let ns = us.saturating_mul(1000);
            let tick = if tick.is_empty() {
                tick
            } else {
                format!("; {tick}")
            };
            // A tick counted over a repetition shorter than a tick says steal was accounted
            // then, not how much of the repetition it took: no share over 100 % is printed.
            let of_it = of_rep(ns, seconds(i), "counted in whole ticks");
            let _ = write!(
                s,
                "; largest steal on a thread's CPU {} (rep {}, CPU {cpu}: {of_it}{tick}){machine_wide}",
                steal(us),
                i + 1,
            );
        }
        None => s.push_str(&machine_wide.replacen(", machine-wide", "; steal machine-wide", 1)),
    }
    s.push_str(&switches);
    if samples_gbps.len() == n {
        // Each group's median with its range and count, as every figure is printed.
        let median = |of: &[usize]| {
            let v: Vec<f64> = of.iter().map(|&i| samples_gbps[i]).collect();
            hwc_stats::summarize(&v)
                .map(|st| {
                    format!(
                        "{:.2} GB/s ({:.2}–{:.2}, N={})",
                        st.median,
                        st.min,
                        st.max,
                        of.len()
                    )
                })
                .ok()
        };
        match (
            hit.len() >= 2 && calm.len() >= 2,
            median(&hit),
            median(&calm),
        ) {
            (true, Some(a), Some(b)) => {
                let _ = write!(s, "; median {a} disturbed against {b} undisturbed");
            }
            // Nothing disturbed: nothing to compare, and nothing to say.
            _ if hit.is_empty() => {}
            _ => {
                let _ = write!(
                    s,
                    "; medians not compared ({} disturbed, {} undisturbed; 2 of each needed)",
                    hit.len(),
                    calm.len()
                );
            }
        }
        let slowest = samples_gbps
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, &g)| (i, g));
        if let Some((i, g)) = slowest {
            let verdict = match ev.reps[i].disturbed {
                Some(true) => "disturbed",
                Some(false) => "undisturbed",
                None => "not judged",
            };
            let _ = write!(s, "; slowest repetition {} ({g:.2} GB/s) {verdict}", i + 1);
        }
    }
    s.push_str(&why);
    SchedSummary {
        counts: Some(counts),
        disturbed_above_pct: ev.disturbed_above_pct,
        detail: s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hwc_model::ThreadSched;

    fn thread(cpu: u32, delay_ns: Option<u64>, steal_us: Option<u64>) -> ThreadSched {
        ThreadSched {
            cpu,
            run_delay_ns: delay_ns,
            nivcsw: delay_ns.map(|d| u64::from(d > 0)),
            steal_us,
        }
    }

    fn rep(threads: Vec<ThreadSched>, machine_steal_us: Option<u64>) -> RepSched {
        RepSched {
            threads,
            machine_steal_us,
        }
    }

    #[test]
    fn a_repetition_is_disturbed_past_one_per_cent_by_either_counter() {
        // 10 ms repetition: 1 % is 100 µs.
        let at = |delay, steal| disturbed(&rep(vec![thread(0, delay, steal)], None), 0.010, 1.0);
        assert_eq!(
            at(Some(100_000), Some(0)),
            Some(false),
            "exactly 1 % is not over"
        );
        assert_eq!(at(Some(100_001), Some(0)), Some(true));
        assert_eq!(at(Some(0), Some(101)), Some(true), "steal alone");
        assert_eq!(at(Some(0), Some(0)), Some(false));
        // Over by any reading is disturbed; undisturbed needs every thread's delay read (a
        // steal of 0 ticks clears nothing: a tick is 10 ms); nothing over and a delay missing:
        // not judged.
        assert_eq!(at(None, Some(0)), None);
        assert_eq!(at(None, Some(101)), Some(true));
        assert_eq!(at(Some(200_000), None), Some(true));
        assert_eq!(at(Some(0), None), Some(false));
        assert_eq!(at(None, None), None);
        let r = rep(
            vec![thread(0, Some(0), Some(0)), thread(5, None, Some(0))],
            None,
        );
        assert_eq!(
            disturbed(&r, 0.010, 1.0),
            None,
            "one thread's delay missing"
        );
        // Any thread of several.
        let r = rep(
            vec![thread(0, Some(0), Some(0)), thread(5, Some(150_000), None)],
            None,
        );
        assert_eq!(disturbed(&r, 0.010, 1.0), Some(true));
        // Machine-wide steal (other CPUs' included) does not judge by itself.
        let r = rep(vec![thread(0, Some(0), Some(0))], Some(40_000));
        assert_eq!(disturbed(&r, 0.010, 1.0), Some(false));
        assert_eq!(disturbed(&rep(vec![], Some(40_000)), 0.010, 1.0), None);
    }

    fn sources() -> SchedSources {
        SchedSources {
            steal_tick_us: Some(10_000),
            unavailable: vec![],
        }
    }

    #[test]
    fn the_note_counts_names_the_largest_and_compares_medians_when_both_groups_have_two() {
        // Four 20 ms repetitions: reps 2 and 4 disturbed (3 ms run-queue delay; 10 ms of steal).
        let reps = vec![
            (0.020, rep(vec![thread(0, Some(5_000), Some(0))], Some(0))),
            (
                0.020,
                rep(
                    vec![
                        thread(0, Some(0), Some(0)),
                        thread(3, Some(3_000_000), Some(0)),
                    ],
                    Some(0),
                ),
            ),
            (0.020, rep(vec![thread(0, Some(0), Some(0))], Some(0))),
            (
                0.020,
                rep(vec![thread(1, Some(0), Some(10_000))], Some(30_000)),
            ),
        ];
        let ev = evidence(reps, sources());
        let flags: Vec<Option<bool>> = ev.reps.iter().map(|r| r.disturbed).collect();
        assert_eq!(flags, [Some(false), Some(true), Some(false), Some(true)]);
        assert_eq!(
            summary(&ev, &[10.0, 7.0, 11.0, 8.0]).counts,
            Some(RepCounts {
                disturbed: 2,
                not_judged: 0,
                of: 4
            })
        );
        let note = note(&ev, &[10.0, 7.0, 11.0, 8.0]);
        assert_eq!(
            note,
            "2 of 4 repetitions disturbed (a thread off its CPU over 1 % of the \
             repetition); largest run-queue delay 3.00 ms (rep 2, CPU 3: 15 % \
             of it); largest steal on a thread's CPU 10 ms (rep 4, CPU 1: 50 % of it; 10 ms \
             ticks), machine-wide up to 30 ms (rep 4); up to 1 \
             involuntary context switch in a thread (rep 1, CPU 0); median 7.50 GB/s \
             (7.00–8.00, N=2) disturbed against 10.50 GB/s (10.00–11.00, N=2) undisturbed; \
             slowest repetition 2 (7.00 GB/s) disturbed"
        );
    }

    #[test]
    fn the_note_says_when_the_groups_are_too_small_to_compare() {
        let calm = |d| (0.010, rep(vec![thread(0, Some(d), Some(0))], Some(0)));
        let ev = evidence(vec![calm(2_000), calm(0), calm(500_000)], sources());
        let note = note(&ev, &[5.0, 6.0, 4.0]);
        assert!(note.starts_with("1 of 3 repetitions disturbed"), "{note}");
        assert!(
            note.contains("medians not compared (1 disturbed, 2 undisturbed; 2 of each needed)"),
            "{note}"
        );
        assert!(
            note.contains("largest run-queue delay 500 µs (rep 3"),
            "{note}"
        );
        assert!(
            note.contains("0 ticks of steal counted on its CPUs or machine-wide (10 ms ticks)"),
            "{note}"
        );
        assert!(!note.contains("machine-wide up to"), "{note}");
        assert!(
            note.ends_with("slowest repetition 3 (4.00 GB/s) disturbed"),
            "{note}"
        );
        // Nothing disturbed: still counted, no comparison of medians, the slowest judged.
        let ev = evidence(vec![calm(0), calm(1_000)], sources());
        let note = super::tests::note(&ev, &[5.0, 6.0]);
        assert!(note.starts_with("0 of 2 repetitions disturbed"), "{note}");
        assert!(note.contains("largest run-queue delay 1.0 µs (rep 2, CPU 0: 0.01 % of it)"));
        assert!(!note.contains("medians"), "{note}");
        assert!(note.ends_with("slowest repetition 1 (5.00 GB/s) undisturbed"));
    }

    #[test]
    fn a_counter_not_read_is_said_with_its_reason_never_as_zero() {
        let why = "run-queue delay not available: /proc/thread-self/schedstat is absent (a \
                   kernel without CONFIG_SCHED_INFO)";
        let src = SchedSources {
            steal_tick_us: Some(10_000),
            unavailable: vec![why.into()],
        };
        let r = |steal| {
            let mut t = thread(0, None, steal);
            t.nivcsw = Some(2);
            (0.010, rep(vec![t], Some(0)))
        };
        // Steal read as 0 ticks but no run-queue delay: nothing clears the repetitions, so
        // they are not judged (not "0 disturbed"); and nothing read at all the same: not
        // available, with why, and no count.
        for steal in [Some(0), None] {
            let ev = evidence(vec![r(steal), r(steal)], src.clone());
            assert!(ev.reps.iter().all(|r| r.disturbed.is_none()));
            assert_eq!(summary(&ev, &[5.0, 6.0]).counts, None, "nothing to count");
            let note = note(&ev, &[5.0, 6.0]);
            assert!(!note.contains("run-queue delay 0"), "{note}");
            assert!(!note.contains("disturbed"), "{note}");
            assert_eq!(
                note,
                format!(
                    "not available ({why}); up to 2 involuntary context switches \
                     in a thread (rep 1, CPU 0)"
                )
            );
        }
        let bare = evidence(
            vec![(0.010, rep(vec![thread(0, None, None)], None))],
            SchedSources::default(),
        );
        assert_eq!(
            note_of(&bare),
            "not available (no repetition had every thread's run-queue delay read)"
        );
    }

    #[test]
    fn a_tick_of_steal_over_a_short_repetition_is_not_printed_as_a_share() {
        // 0.2 ms repetitions, one 10 ms tick of steal on the thread's CPU in the second.
        let r = |steal_us| (0.000_2, rep(vec![thread(0, Some(0), Some(steal_us))], None));
        let ev = evidence(vec![r(0), r(10_000)], sources());
        assert_eq!(ev.reps[1].disturbed, Some(true));
        let note = note_of(&ev);
        assert!(
            note.contains(
                "largest steal on a thread's CPU 10 ms (rep 2, CPU 0: more than the \
                 repetition's 200 µs: counted in whole ticks"
            ),
            "{note}"
        );
        assert!(!note.contains("5000 %"), "{note}");
    }

    #[test]
    fn steal_elsewhere_on_the_machine_is_said_but_does_not_disturb() {
        let r = |machine| (0.010, rep(vec![thread(0, Some(0), Some(0))], Some(machine)));
        let ev = evidence(vec![r(0), r(20_000), r(10_000)], sources());
        assert!(ev.reps.iter().all(|r| r.disturbed == Some(false)));
        let note = note_of(&ev);
        assert!(
            note.contains(
                "; 0 ticks of steal counted on its CPUs (10 ms ticks), machine-wide up to 20 ms (rep 2);"
            ),
            "{note}"
        );
        // Only the machine's line read (no thread's): said, and nothing judged by it.
        let only = evidence(
            vec![(0.010, rep(vec![thread(0, Some(0), None)], Some(10_000)))],
            sources(),
        );
        let note = note_of(&only);
        assert!(
            note.contains("; no run-queue delay; steal machine-wide up to 10 ms (rep 1);"),
            "{note}"
        );
    }

    fn note_of(ev: &SchedEvidence) -> String {
        note(ev, &vec![1.0; ev.reps.len()])
    }

    /// The summary's line.
    fn note(ev: &SchedEvidence, samples_gbps: &[f64]) -> String {
        summary(ev, samples_gbps).detail
    }

    #[test]
    fn a_delay_longer_than_its_repetition_is_not_printed_as_a_share_over_100_per_cent() {
        // A thread slow to arm waits before the timed start, inside its own bracket.
        let ev = evidence(
            vec![(0.0001, rep(vec![thread(0, Some(2_500_000), None)], None))],
            SchedSources::default(),
        );
        let note = note_of(&ev);
        assert!(
            note.contains(
                "largest run-queue delay 2.50 ms (rep 1, CPU 0: more than the repetition's \
                 100 µs: a thread's counters bracket its wait for the start too)"
            ),
            "{note}"
        );
        assert!(!note.contains("% of it"), "{note}");
    }

    #[test]
    fn repetitions_not_judged_are_counted_apart() {
        let ev = evidence(
            vec![
                (0.010, rep(vec![thread(0, Some(0), None)], None)),
                (0.010, RepSched::default()),
            ],
            SchedSources::default(),
        );
        let note = note_of(&ev);
        assert!(
            note.contains("0 of 2 repetitions disturbed (a thread off"),
            "{note}"
        );
        assert!(
            note.contains(", 1 not judged (a thread's run-queue delay missing)"),
            "{note}"
        );
        assert!(note.ends_with("slowest repetition 1 (1.00 GB/s) undisturbed"));
    }

    #[test]
    fn durations_and_shares_read_at_a_glance() {
        assert_eq!(duration_ns(850), "850 ns");
        assert_eq!(duration_ns(3_200), "3.2 µs");
        assert_eq!(duration_ns(14_400), "14 µs");
        assert_eq!(duration_ns(1_840_000), "1.84 ms");
        assert_eq!(steal(10_000), "10 ms");
        assert_eq!(steal(2_500), "2.50 ms");
        assert_eq!(steal(0), "0 ns");
        assert_eq!(share(1_200_000, 0.010), "12 %");
        assert_eq!(share(40_000, 0.010), "0.4 %");
        assert_eq!(share(3_000, 0.010), "0.03 %");
    }
}
