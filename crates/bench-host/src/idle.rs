//! Host idle guard: how busy the CPUs a case will use were, from two `/proc/stat` samples.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::time::Duration;

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
/// first that does not parse. The idle guard and the steal counters both read them.
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

/// Two `/proc/stat` samples `window` apart.
pub fn sample(
    proc_root: &Path,
    window: Duration,
) -> io::Result<(BTreeMap<u32, Jiffies>, BTreeMap<u32, Jiffies>)> {
    let read = || std::fs::read_to_string(proc_root.join("stat")).map(|t| parse_proc_stat(&t));
    let a = read()?;
    std::thread::sleep(window);
    Ok((a, read()?))
}

/// The busiest CPU of every CPU in both samples, with its busy share (0–1); the lowest number
/// of equals. `None` when no CPU ticked.
pub fn busiest(a: &BTreeMap<u32, Jiffies>, b: &BTreeMap<u32, Jiffies>) -> Option<(u32, f64)> {
    b.keys()
        .filter(|c| a.contains_key(c))
        .filter(|c| b[c].1 > a[c].1)
        .map(|&c| (c, share_between(a, b, &[c])))
        .reduce(|x, y| if y.1 > x.1 { y } else { x })
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
    fn the_busiest_cpu_is_found_among_all() {
        let (a, b) = (parse_proc_stat(A), parse_proc_stat(B));
        assert_eq!(busiest(&a, &b), Some((0, 0.9)));
        // No tick between the samples: nothing to say.
        assert_eq!(busiest(&a, &a), None);
    }

    #[test]
    fn iowait_counts_as_idle() {
        let a = parse_proc_stat("cpu0 0 0 0 0 0 0 0 0\n");
        let b = parse_proc_stat("cpu0 0 0 0 50 50 0 0 0\n");
        assert_eq!(share_between(&a, &b, &[0]), 0.0);
    }
}
