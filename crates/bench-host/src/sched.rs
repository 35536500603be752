//! Scheduling counters of the copy threads, read around each repetition (outside its timed
//! region): each thread's run-queue delay (`/proc/thread-self/schedstat`, read by the thread
//! itself) and involuntary context switches (`getrusage(RUSAGE_THREAD)`, by the thread itself),
//! and the steal time of every CPU (`/proc/stat`). The parsers are pure and take the files'
//! text; a counter that cannot be read is `None`, with a reason, never 0.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// How a reason for a missing run-queue delay begins.
const DELAY_MISSING: &str = "run-queue delay not available";
/// How a reason for missing steal begins.
const STEAL_MISSING: &str = "steal not available";
/// How a reason for missing involuntary switches begins.
const NIVCSW_MISSING: &str = "involuntary context switches not available";

/// A thread's run-queue delay in ns from the text of its `schedstat` (`<ns on the CPU> <ns
/// waiting on a run queue> <timeslices>`), or why it says none. A kernel that collects no
/// run-queue statistics prints `0 0 0`; a thread reading its own file has run at least once, so
/// a count of 0 timeslices means the same.
pub fn parse_run_delay(text: &str) -> Result<u64, String> {
    let fields: Vec<u64> = text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|_| format!("unexpected schedstat text `{}`", text.trim()))?;
    match fields[..] {
        [_, _, 0, ..] => Err("the kernel reports no timeslices (`0 0 0`): it keeps no \
                              run-queue statistics (sched_info off)"
            .to_string()),
        [_, delay_ns, _, ..] => Ok(delay_ns),
        _ => Err(format!("unexpected schedstat text `{}`", text.trim())),
    }
}

/// Steal ticks (`1/USER_HZ` s) from `/proc/stat` text: the machine's (`cpu` line) and each
/// CPU's (`cpuN`). A line without the steal column (the eighth number; kernels before 2.6.11)
/// has none.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StealTicks {
    pub machine: Option<u64>,
    pub per_cpu: BTreeMap<u32, u64>,
}

pub fn parse_steal(text: &str) -> StealTicks {
    let mut out = StealTicks::default();
    for (cpu, columns) in crate::idle::cpu_rows(text) {
        let Some(&steal) = columns.get(7) else {
            continue;
        };
        match cpu {
            None => out.machine = Some(steal),
            Some(cpu) => {
                out.per_cpu.insert(cpu, steal);
            }
        }
    }
    out
}

/// `after - before` where both were read and the counter did not go back (it never should:
/// a counter that did is not trusted, rather than read as 0).
pub fn delta(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    after?.checked_sub(before?)
}

/// Ticks as µs, for a tick of `1/clk_tck` s.
pub fn ticks_us(ticks: u64, clk_tck: u64) -> Option<u64> {
    (clk_tck > 0).then(|| ticks.saturating_mul(1_000_000) / clk_tck)
}

/// `sysconf(_SC_CLK_TCK)`: the ticks a second of `/proc/stat`'s counters (USER_HZ, 100 on
/// every Linux architecture but a few).
pub fn clk_tck() -> Option<u64> {
    // SAFETY: sysconf takes a constant name and touches no memory of ours.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(v).ok().filter(|&v| v > 0)
}

/// The calling thread's involuntary context switches so far (`getrusage(RUSAGE_THREAD)`).
fn thread_nivcsw() -> Result<u64, String> {
    // SAFETY: an all-zero rusage is a valid value of the plain C struct; getrusage writes it
    // and reads nothing else.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a live, writable rusage for the call.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    if rc != 0 {
        return Err(format!(
            "getrusage(RUSAGE_THREAD): {}",
            std::io::Error::last_os_error()
        ));
    }
    u64::try_from(ru.ru_nivcsw).map_err(|_| format!("getrusage: ru_nivcsw {}", ru.ru_nivcsw))
}

/// One thread's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThreadCounters {
    pub run_delay_ns: Option<u64>,
    pub nivcsw: Option<u64>,
}

/// Reads the counters of the thread that opened it: made and read on that thread only (its
/// `schedstat` is the opener's, through `thread-self`).
pub struct ThreadProbe {
    /// The thread's open `schedstat`, or why there is none.
    schedstat: Result<(File, PathBuf), String>,
    /// Why a counter could not be read, each once.
    why: BTreeSet<String>,
}

impl ThreadProbe {
    /// Open the calling thread's `schedstat` under `proc_root` (`/proc`): `thread-self/schedstat`,
    /// or `self/task/<tid>/schedstat` where the kernel has no `thread-self` (before 3.17).
    pub fn open(proc_root: &Path) -> Self {
        let self_path = proc_root.join("thread-self/schedstat");
        // SAFETY: gettid takes no arguments and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        let task_path = proc_root.join(format!("self/task/{tid}/schedstat"));
        // Reasons name the file without the thread id: every copy thread of a case meets the
        // same one, and the case's note says it once.
        let task_shown = proc_root.join("self/task/<tid>/schedstat");
        let schedstat = match File::open(&self_path) {
            Ok(f) => Ok((f, self_path)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match File::open(&task_path) {
                Ok(f) => Ok((f, task_path)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
                    "{DELAY_MISSING}: neither {} nor {} exists (the kernel needs \
                     CONFIG_SCHED_INFO, which schedstats or delay accounting turn on)",
                    self_path.display(),
                    task_shown.display()
                )),
                Err(e) => Err(format!("{DELAY_MISSING}: {}: {e}", task_shown.display())),
            },
            Err(e) => Err(format!("{DELAY_MISSING}: {}: {e}", self_path.display())),
        };
        let mut why = BTreeSet::new();
        if let Err(w) = &schedstat {
            why.insert(w.clone());
        }
        ThreadProbe { schedstat, why }
    }

    /// The counters now: two small reads, a few µs.
    pub fn read(&mut self) -> ThreadCounters {
        let run_delay_ns = match &self.schedstat {
            Ok((file, path)) => {
                let mut buf = [0u8; 128];
                let text = file
                    .read_at(&mut buf, 0)
                    .map_err(|e| format!("{DELAY_MISSING}: {}: {e}", path.display()))
                    .and_then(|n| {
                        std::str::from_utf8(&buf[..n])
                            .map(str::to_owned)
                            .map_err(|_| format!("{DELAY_MISSING}: {} is not text", path.display()))
                    });
                match text.and_then(|t| {
                    parse_run_delay(&t)
                        .map_err(|w| format!("{DELAY_MISSING}: {}: {w}", path.display()))
                }) {
                    Ok(ns) => Some(ns),
                    Err(w) => {
                        self.why.insert(w);
                        None
                    }
                }
            }
            Err(_) => None,
        };
        let nivcsw = match thread_nivcsw() {
            Ok(n) => Some(n),
            Err(w) => {
                self.why.insert(format!("{NIVCSW_MISSING}: {w}"));
                None
            }
        };
        ThreadCounters {
            run_delay_ns,
            nivcsw,
        }
    }

    /// Why a counter could not be read, so far.
    pub fn unavailable(&self) -> impl Iterator<Item = &String> {
        self.why.iter()
    }
}

/// Reads `/proc/stat`'s steal counters (on the timing thread, before and after a repetition).
pub struct StealProbe {
    path: PathBuf,
    /// One tick of the counters in µs (`None`: USER_HZ unknown).
    pub tick_us: Option<u64>,
    clk_tck: Option<u64>,
    why: BTreeSet<String>,
}

impl StealProbe {
    /// Steal from `<proc_root>/stat`, whose counters tick `clk_tck` times a second.
    pub fn new(proc_root: &Path, clk_tck: Option<u64>) -> Self {
        let mut why = BTreeSet::new();
        if clk_tck.is_none() {
            why.insert(format!(
                "{STEAL_MISSING}: sysconf(_SC_CLK_TCK) gave no tick rate to convert it with"
            ));
        }
        StealProbe {
            path: proc_root.join("stat"),
            tick_us: clk_tck.and_then(|c| ticks_us(1, c)),
            clk_tck,
            why,
        }
    }

    /// The steal ticks now (empty, with a reason, where the file cannot be read or has none).
    pub fn read(&mut self) -> StealTicks {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => {
                let t = parse_steal(&text);
                if t.machine.is_none() {
                    self.why.insert(format!(
                        "{STEAL_MISSING}: {} has no steal column (a kernel before 2.6.11)",
                        self.path.display()
                    ));
                }
                t
            }
            Err(e) => {
                self.why
                    .insert(format!("{STEAL_MISSING}: {}: {e}", self.path.display()));
                StealTicks::default()
            }
        }
    }

    /// µs of steal between two readings: the machine's, and `cpu`'s.
    pub fn machine_us(&self, a: &StealTicks, b: &StealTicks) -> Option<u64> {
        ticks_us(delta(a.machine, b.machine)?, self.clk_tck?)
    }

    pub fn cpu_us(&self, a: &StealTicks, b: &StealTicks, cpu: u32) -> Option<u64> {
        let d = delta(a.per_cpu.get(&cpu).copied(), b.per_cpu.get(&cpu).copied())?;
        ticks_us(d, self.clk_tck?)
    }

    pub fn unavailable(&self) -> impl Iterator<Item = &String> {
        self.why.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_queue_delay_is_schedstats_second_field_and_0_0_0_is_none() {
        assert_eq!(parse_run_delay("1573039 42 1\n"), Ok(42));
        assert_eq!(parse_run_delay("794154119 542421 25"), Ok(542_421));
        // A delay of 0 is a measured 0 when the thread has timeslices counted.
        assert_eq!(parse_run_delay("1573039 0 1\n"), Ok(0));
        let off = parse_run_delay("0 0 0\n").unwrap_err();
        assert!(off.contains("keeps no run-queue statistics"), "{off}");
        for bad in ["", "12 34", "a b c", "1 -2 3"] {
            let e = parse_run_delay(bad).unwrap_err();
            assert!(e.starts_with("unexpected schedstat text"), "{bad}: {e}");
        }
    }

    #[test]
    fn steal_is_the_eighth_number_of_the_cpu_lines() {
        let text = "cpu  2580326 0 638561 5599312 187130 0 11740 2937 0 0\n\
                    cpu0 1261306 0 292054 2911903 43540 0 2193 1443 0 0\n\
                    cpu1 1319019 0 346506 2687409 143589 0 9546 1494 0 0\n\
                    intr 12345 0 1\n\
                    ctxt 99\n";
        let t = parse_steal(text);
        assert_eq!(t.machine, Some(2937));
        assert_eq!(t.per_cpu, BTreeMap::from([(0, 1443), (1, 1494)]));
        // A kernel before the steal column: none, not 0.
        let old = parse_steal("cpu  1 2 3 4 5 6 7\ncpu0 1 2 3 4 5 6 7\n");
        assert_eq!(old, StealTicks::default());
        assert_eq!(parse_steal(""), StealTicks::default());
    }

    #[test]
    fn deltas_need_both_readings_and_a_counter_that_did_not_go_back() {
        assert_eq!(delta(Some(5), Some(9)), Some(4));
        assert_eq!(delta(Some(5), Some(5)), Some(0));
        assert_eq!(delta(None, Some(9)), None);
        assert_eq!(delta(Some(5), None), None);
        assert_eq!(delta(Some(9), Some(5)), None);
        assert_eq!(ticks_us(3, 100), Some(30_000));
        assert_eq!(ticks_us(1, 250), Some(4_000));
        assert_eq!(ticks_us(1, 0), None);
    }

    #[test]
    fn steal_is_converted_with_the_tick_rate_per_cpu_and_for_the_machine() {
        let dir = std::env::temp_dir().join(format!("hwc-steal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |steal0: u64, steal1: u64| {
            std::fs::write(
                dir.join("stat"),
                format!(
                    "cpu  1 0 1 1 0 0 0 {} 0 0\ncpu0 1 0 1 1 0 0 0 {steal0} 0 0\n\
                     cpu1 1 0 1 1 0 0 0 {steal1} 0 0\n",
                    steal0 + steal1
                ),
            )
            .unwrap();
        };
        let mut p = StealProbe::new(&dir, Some(100));
        assert_eq!(p.tick_us, Some(10_000));
        write(10, 20);
        let a = p.read();
        write(10, 23);
        let b = p.read();
        assert_eq!(p.machine_us(&a, &b), Some(30_000));
        assert_eq!(p.cpu_us(&a, &b, 0), Some(0));
        assert_eq!(p.cpu_us(&a, &b, 1), Some(30_000));
        assert_eq!(p.cpu_us(&a, &b, 7), None, "a CPU the file does not list");
        assert_eq!(p.unavailable().count(), 0);
        // The file gone: no steal, with why.
        std::fs::remove_file(dir.join("stat")).unwrap();
        let c = p.read();
        assert_eq!(p.machine_us(&b, &c), None);
        let why: Vec<&String> = p.unavailable().collect();
        assert!(
            why.len() == 1 && why[0].starts_with("steal not available: "),
            "{why:?}"
        );
        // No tick rate: nothing converted, with why.
        let q = StealProbe::new(&dir, None);
        assert_eq!(q.machine_us(&a, &b), None);
        assert!(q.unavailable().any(|w| w.contains("_SC_CLK_TCK")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_proc_without_schedstat_gives_no_delay_and_says_why() {
        let dir = std::env::temp_dir().join(format!("hwc-nosched-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut p = ThreadProbe::open(&dir);
        let c = p.read();
        assert_eq!(c.run_delay_ns, None);
        let why: Vec<&String> = p.unavailable().collect();
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(
            why[0].starts_with("run-queue delay not available: neither ")
                && why[0].contains("CONFIG_SCHED_INFO"),
            "{}",
            why[0]
        );
        // getrusage works on every Linux: switches are still read.
        assert!(c.nivcsw.is_some());
        // A kernel that keeps no statistics prints 0 0 0: no delay, with why.
        std::fs::create_dir_all(dir.join("thread-self")).unwrap();
        std::fs::write(dir.join("thread-self/schedstat"), "0 0 0\n").unwrap();
        let mut p = ThreadProbe::open(&dir);
        assert_eq!(p.read().run_delay_ns, None);
        assert!(p.unavailable().any(|w| w.contains("sched_info off")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn this_threads_own_counters_are_read_where_the_kernel_has_them() {
        if !Path::new("/proc/thread-self/schedstat").exists() {
            eprintln!("skipped: /proc/thread-self/schedstat is absent on this kernel");
            return;
        }
        let mut p = ThreadProbe::open(Path::new("/proc"));
        let a = p.read();
        let b = p.read();
        assert!(
            a.nivcsw.is_some() && a.run_delay_ns.is_some(),
            "{:?}",
            p.why
        );
        // Counters only grow.
        assert!(delta(a.run_delay_ns, b.run_delay_ns).is_some());
        assert!(delta(a.nivcsw, b.nivcsw).is_some());
    }
}
