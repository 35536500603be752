//! The host CPU guard: what else ran while a case's repetitions did, from two `/proc/stat`
//! samples around them and the case's threads' own run-queue delay.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// (busy, total) jiffies of one CPU.
type Jiffies = (u64, u64);

/// Per-CPU (busy, total) jiffies from `/proc/stat` text. Busy excludes idle and iowait; guest
/// time is already inside user/nice and is not added twice.
pub fn parse_proc_stat(text: &str) -> BTreeMap<u32, Jiffies> {
    cpu_rows(text)
        .filter_map(|(cpu, v)| {
            let v = &v[..v.len().min(8)];
            if v.len() < 4 {
                return None;
            }
            let total: u64 = v.iter().sum();
            let idle = v[3] + v.get(4).copied().unwrap_or(0);
            Some((cpu?, (total - idle, total)))
        })
        .collect()
}

/// The `cpu` lines of a `/proc/stat`: the CPU (`None` for the machine-wide `cpu` line) and its
/// columns, in ticks (user, nice, system, idle, iowait, irq, softirq, steal, …), up to the
/// first that does not parse. The CPU guard and the steal counters both read them.
pub(crate) fn cpu_rows(text: &str) -> impl Iterator<Item = (Option<u32>, Vec<u64>)> + '_ {
    text.lines().filter_map(|line| {
        let mut f = line.split_whitespace();
        let label = f.next()?.strip_prefix("cpu")?;
        let cpu = if label.is_empty() {
            None
        } else {
            Some(label.parse::<u32>().ok()?)
        };
        let columns = f.map_while(|x| x.parse().ok()).collect();
        Some((cpu, columns))
    })
}

/// Per-CPU jiffies from `<proc_root>/stat`.
fn read(proc_root: &Path) -> io::Result<BTreeMap<u32, Jiffies>> {
    std::fs::read_to_string(proc_root.join("stat")).map(|t| parse_proc_stat(&t))
}

/// The busiest CPU in both samples other than `except`, with its busy share (0–1); the lowest
/// number of equals. `None` when no such CPU ticked.
pub fn busiest_outside(
    a: &BTreeMap<u32, Jiffies>,
    b: &BTreeMap<u32, Jiffies>,
    except: &[u32],
) -> Option<(u32, f64)> {
    b.keys()
        .filter(|c| a.contains_key(c) && !except.contains(c))
        .filter(|c| b[c].1 > a[c].1)
        .map(|&c| (c, share_between(a, b, &[c])))
        .reduce(|x, y| if y.1 > x.1 { y } else { x })
}

/// The shortest stretch the guard judges: 5 ticks of each CPU at the usual 100 Hz, so that one
/// stray tick is a fifth of a CPU's, never more than half.
pub const MIN_WINDOW: Duration = Duration::from_millis(50);

/// Watches the machine while a case's repetitions run: `/proc/stat` when they begin and when
/// they have ended (at least [`MIN_WINDOW`] apart: a short case waits out the rest), and the
/// run-queue delay its threads report. It replaces a look before the case, which cost every
/// case [`MIN_WINDOW`] and judged a stretch in which the case did not run.
pub struct CpuWatch {
    proc_root: PathBuf,
    /// The CPUs the case's threads are pinned to (its timing thread included).
    cpus: Vec<u32>,
    since: Option<(Instant, BTreeMap<u32, Jiffies>)>,
}

impl CpuWatch {
    pub fn new(proc_root: &Path, cpus: &[u32]) -> Self {
        CpuWatch {
            proc_root: proc_root.to_path_buf(),
            cpus: cpus.to_vec(),
            since: None,
        }
    }

    /// Begin: the first sample. Where `/proc/stat` cannot be read the guard cannot tell, and
    /// says nothing (the case's spread and scheduling counters still show contention).
    pub fn start(&mut self) {
        self.since = read(&self.proc_root).ok().map(|a| (Instant::now(), a));
    }

    /// Why the case ran beside other work, judged by [`busy_reason`] from the samples since
    /// [`CpuWatch::start`] and `waits`, what its threads waited for their CPUs meanwhile
    /// (`None` where they could not read it).
    pub fn verdict(&mut self, waits: Option<Waits>) -> Option<String> {
        let (t0, a) = self.since.take()?;
        if let Some(rest) = MIN_WINDOW.checked_sub(t0.elapsed()) {
            std::thread::sleep(rest);
        }
        let b = read(&self.proc_root).ok()?;
        busy_reason(&a, &b, &self.cpus, waits)
    }
}

/// How long a case's threads waited for their CPUs (runnable, but another task ran there: each
/// thread's `schedstat` run-queue delay) over the repetitions since the watch began.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Waits {
    /// The longest any one thread waited, in nanoseconds.
    pub worst_ns: u64,
    /// The repetitions' seconds, summed.
    pub rep_seconds: f64,
}

/// Waits per thread, by the thread's index, summed over repetitions; `None` once a thread could
/// not read its own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WaitTally {
    per_thread_ns: Option<Vec<u64>>,
    rep_seconds: f64,
}

impl WaitTally {
    /// An empty tally.
    pub fn new() -> Self {
        WaitTally {
            per_thread_ns: Some(Vec::new()),
            rep_seconds: 0.0,
        }
    }

    /// Add one repetition of `seconds`: each thread's wait during it, by index.
    pub fn add(&mut self, seconds: f64, waits: impl IntoIterator<Item = Option<u64>>) {
        self.rep_seconds += seconds;
        let Some(sums) = self.per_thread_ns.as_mut() else {
            return;
        };
        for (i, w) in waits.into_iter().enumerate() {
            let Some(ns) = w else {
                self.per_thread_ns = None;
                return;
            };
            if sums.len() <= i {
                sums.resize(i + 1, 0);
            }
            sums[i] = sums[i].saturating_add(ns);
        }
    }

    /// The worst thread's wait against the repetitions' time, where every thread read its own.
    pub fn waits(&self) -> Option<Waits> {
        let sums = self.per_thread_ns.as_ref()?;
        Some(Waits {
            worst_ns: sums.iter().copied().max().unwrap_or(0),
            rep_seconds: self.rep_seconds,
        })
    }
}

/// The share of the repetitions' time any one of the case's threads may wait for its CPU
/// (another task on it) before the case is marked contended: a repetition lasts as long as its
/// slowest thread.
pub const WAITED_THRESHOLD: f64 = 0.10;
/// Any single CPU outside the case busier than this while it ran marks it contended: more than
/// half of the window, so one stray tick (a fifth of a 50 ms window at 100 Hz) never does.
pub const ONE_CPU_BUSY: f64 = 0.5;

/// Why a case whose threads ran on `cpus` ran contended, from two `/proc/stat` samples around
/// its repetitions and `waits`, its threads' run-queue delay over them: one of its threads kept
/// off its CPU beyond [`WAITED_THRESHOLD`] of the repetitions' time (the case's own CPUs are
/// busy with its threads, so `/proc/stat` cannot tell another task there; a repetition lasts
/// as long as its slowest thread), or any CPU outside the case busier than [`ONE_CPU_BUSY`]
/// (another process streaming memory anywhere shares the memory with the case).
pub fn busy_reason(
    a: &BTreeMap<u32, Jiffies>,
    b: &BTreeMap<u32, Jiffies>,
    cpus: &[u32],
    waits: Option<Waits>,
) -> Option<String> {
    if let Some(w) = waits.filter(|w| w.rep_seconds > 0.0) {
        let share = w.worst_ns as f64 / 1e9 / w.rep_seconds;
        if share > WAITED_THRESHOLD {
            return Some(format!(
                "a thread of the case waited {:.0} % of its repetitions' time for its CPU (of \
                 {}): another task ran there",
                share * 100.0,
                hwc_model::cpulist::format(cpus)
            ));
        }
    }
    match busiest_outside(a, b, cpus) {
        Some((cpu, one)) if one > ONE_CPU_BUSY => Some(format!(
            "CPU {cpu} was {:.0} % busy while the case ran (work anywhere on the machine shares \
             its memory with the case)",
            one * 100.0
        )),
        _ => None,
    }
}

/// Busy share of `cpus` between two samples; CPUs missing from either sample are skipped.
pub fn share_between(a: &BTreeMap<u32, Jiffies>, b: &BTreeMap<u32, Jiffies>, cpus: &[u32]) -> f64 {
    let (mut busy, mut total) = (0u64, 0u64);
    for c in cpus {
        if let (Some(x), Some(y)) = (a.get(c), b.get(c)) {
            busy += y.0.saturating_sub(x.0);
            total += y.1.saturating_sub(x.1);
        }
    }
    if total == 0 {
        0.0
    } else {
        busy as f64 / total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0 0 0\ncpu1 5 0 5 50 0 0 0 0 0 0\nintr 1\n";
    const B: &str =
        "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 95 0 5 60 0 0 0 0 0 0\ncpu1 5 0 5 150 0 0 0 0 0 0\n";

    #[test]
    fn parses_per_cpu_lines_only() {
        let m = parse_proc_stat(A);
        assert_eq!(m.len(), 2);
        assert_eq!(m[&0], (10, 60));
    }

    #[test]
    fn busy_share_is_per_selected_cpu() {
        let (a, b) = (parse_proc_stat(A), parse_proc_stat(B));
        // cpu0: 90 busy of 100; cpu1: 0 of 100.
        assert!((share_between(&a, &b, &[0]) - 0.9).abs() < 1e-12);
        assert!((share_between(&a, &b, &[1]) - 0.0).abs() < 1e-12);
        assert!((share_between(&a, &b, &[0, 1]) - 0.45).abs() < 1e-12);
        assert_eq!(share_between(&a, &b, &[7]), 0.0);
    }

    #[test]
    fn the_busiest_cpu_is_found_outside_the_case() {
        let (a, b) = (parse_proc_stat(A), parse_proc_stat(B));
        assert_eq!(busiest_outside(&a, &b, &[]), Some((0, 0.9)));
        // The case's own CPU is left out: its threads keep it busy.
        assert_eq!(busiest_outside(&a, &b, &[0]), Some((1, 0.0)));
        // No tick between the samples: nothing to say.
        assert_eq!(busiest_outside(&a, &a, &[]), None);
    }

    #[test]
    fn a_tally_keeps_the_worst_thread_and_forgets_all_once_one_could_not_read() {
        let mut t = WaitTally::new();
        t.add(0.01, [Some(100), Some(2_000_000)]);
        t.add(0.01, [Some(300), Some(0)]);
        assert_eq!(
            t.waits(),
            Some(Waits {
                worst_ns: 2_000_000,
                rep_seconds: 0.02
            })
        );
        // The worst thread waited 10 % of the repetitions: at the threshold, not over it.
        let (a, b) = (parse_proc_stat(A), parse_proc_stat(A));
        assert_eq!(busy_reason(&a, &b, &[0, 1], t.waits()), None);
        t.add(0.0, [Some(1), Some(1)]);
        assert!(busy_reason(&a, &b, &[0, 1], t.waits())
            .unwrap()
            .starts_with("a thread of the case waited 10 % of its repetitions' time"));
        t.add(0.01, [Some(1), None]);
        assert_eq!(t.waits(), None);
        assert_eq!(WaitTally::new().waits().map(|w| w.worst_ns), Some(0));
    }

    #[test]
    fn a_watch_judges_the_stretch_it_watched_and_a_short_one_is_waited_out() {
        let dir = std::env::temp_dir().join(format!("hwc-watch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("stat"), A).unwrap();
        let mut w = CpuWatch::new(&dir, &[0]);
        // Not started: nothing to say.
        assert_eq!(w.verdict(None), None);
        w.start();
        // CPU 1, outside the case, busy 90 % while it ran (the samples as B has them, swapped).
        std::fs::write(
            dir.join("stat"),
            B.replace("cpu0 95 0 5 60", "cpu0 5 0 5 150")
                .replace("cpu1 5 0 5 150", "cpu1 95 0 5 60"),
        )
        .unwrap();
        let t0 = Instant::now();
        let why = w.verdict(None).unwrap();
        assert!(
            t0.elapsed() >= MIN_WINDOW / 2,
            "a short stretch is waited out"
        );
        assert!(
            why.starts_with("CPU 1 was 90 % busy while the case ran"),
            "{why}"
        );
        // CPU 0 busy: the case's own thread, not contention.
        std::fs::write(dir.join("stat"), A).unwrap();
        w.start();
        std::fs::write(dir.join("stat"), B).unwrap();
        assert_eq!(w.verdict(None), None);
        // Unreadable: the guard cannot tell.
        w.start();
        std::fs::remove_file(dir.join("stat")).unwrap();
        assert_eq!(
            w.verdict(Some(Waits {
                worst_ns: u64::MAX,
                rep_seconds: 1.0
            })),
            None
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn iowait_counts_as_idle() {
        let a = parse_proc_stat("cpu0 0 0 0 0 0 0 0 0\n");
        let b = parse_proc_stat("cpu0 0 0 0 50 50 0 0 0\n");
        assert_eq!(share_between(&a, &b, &[0]), 0.0);
    }
}
