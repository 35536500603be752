//! The host settings that shape copies, read when each case starts and finishes: the cpufreq
//! governors and current frequencies of the CPUs, transparent huge pages, and the hugepage
//! pool. A machine without cpufreq (most VMs) has no governor or frequency to read, and the
//! state says nothing of them.

use hwc_model::{HostCaseState, Range};
use std::path::Path;

/// One reading.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Reading {
    governors: Vec<String>,
    cpu_mhz: Vec<u32>,
    thp: Option<String>,
    hugepages_total: Option<u64>,
    hugepages_free: Option<u64>,
}

/// Read the settings under `sys` (`/sys`) and `proc` (`/proc`).
pub(crate) fn read(sys: &Path, proc: &Path) -> Reading {
    let cpus = sys.join("devices/system/cpu");
    let mut governors = Vec::new();
    let mut cpu_mhz = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&cpus) {
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let is_cpu = name
                .strip_prefix("cpu")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if !is_cpu {
                continue;
            }
            let freq = e.path().join("cpufreq");
            if let Ok(g) = std::fs::read_to_string(freq.join("scaling_governor")) {
                governors.push(g.trim().to_string());
            }
            if let Some(khz) = std::fs::read_to_string(freq.join("scaling_cur_freq"))
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
            {
                cpu_mhz.push(u32::try_from(khz / 1000).unwrap_or(u32::MAX));
            }
        }
    }
    governors.sort();
    governors.dedup();
    let thp = std::fs::read_to_string(sys.join("kernel/mm/transparent_hugepage/enabled"))
        .ok()
        .and_then(|t| selected(&t));
    let meminfo = std::fs::read_to_string(proc.join("meminfo")).unwrap_or_default();
    let field = |name: &str| {
        meminfo.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            rest.split_whitespace().next()?.parse().ok()
        })
    };
    Reading {
        governors,
        cpu_mhz,
        thp,
        hugepages_total: field("HugePages_Total"),
        hugepages_free: field("HugePages_Free"),
    }
}

/// The bracketed choice of a sysfs mode file (`always [madvise] never` → `madvise`).
fn selected(text: &str) -> Option<String> {
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(text[start..end].to_string())
}

/// The case's state from its two readings: the settings as they were when it finished, the
/// frequencies over both, and what changed between them.
pub(crate) fn combine(start: &Reading, finish: &Reading) -> HostCaseState {
    let mut changed = Vec::new();
    if start.governors != finish.governors {
        changed.push(format!(
            "governor {} → {}",
            start.governors.join(","),
            finish.governors.join(",")
        ));
    }
    if start.thp != finish.thp {
        changed.push(format!(
            "transparent huge pages {} → {}",
            start.thp.as_deref().unwrap_or("?"),
            finish.thp.as_deref().unwrap_or("?")
        ));
    }
    if start.hugepages_total != finish.hugepages_total {
        let n = |v: Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
        changed.push(format!(
            "hugepages {} → {}",
            n(start.hugepages_total),
            n(finish.hugepages_total)
        ));
    }
    HostCaseState {
        governors: finish.governors.clone(),
        cpu_mhz: Range::of(start.cpu_mhz.iter().chain(&finish.cpu_mhz).copied()),
        thp: finish.thp.clone(),
        hugepages_total: finish.hugepages_total,
        hugepages_free: finish.hugepages_free,
        changed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(root: &Path, governor: &str, khz: [u64; 2], thp: &str, huge: u64) {
        for (i, f) in khz.iter().enumerate() {
            let d = root.join(format!("sys/devices/system/cpu/cpu{i}/cpufreq"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("scaling_governor"), format!("{governor}\n")).unwrap();
            std::fs::write(d.join("scaling_cur_freq"), format!("{f}\n")).unwrap();
        }
        // Not CPUs: skipped.
        std::fs::create_dir_all(root.join("sys/devices/system/cpu/cpufreq")).unwrap();
        std::fs::create_dir_all(root.join("sys/devices/system/cpu/cpuidle")).unwrap();
        let mm = root.join("sys/kernel/mm/transparent_hugepage");
        std::fs::create_dir_all(&mm).unwrap();
        std::fs::write(mm.join("enabled"), format!("{thp}\n")).unwrap();
        std::fs::create_dir_all(root.join("proc")).unwrap();
        std::fs::write(
            root.join("proc/meminfo"),
            format!("MemTotal: 1 kB\nHugePages_Total:    {huge}\nHugePages_Free:     3\n"),
        )
        .unwrap();
    }

    #[test]
    fn a_case_s_host_state_is_read_from_sysfs_and_meminfo_and_says_what_changed() {
        let d = tempfile::tempdir().unwrap();
        let (sys, proc) = (d.path().join("sys"), d.path().join("proc"));
        machine(
            d.path(),
            "performance",
            [3_000_000, 2_400_000],
            "always [madvise] never",
            8,
        );
        let a = read(&sys, &proc);
        assert_eq!(a.governors, ["performance"]);
        assert_eq!(a.thp.as_deref(), Some("madvise"));
        machine(
            d.path(),
            "powersave",
            [1_200_000, 2_400_000],
            "[always] madvise never",
            8,
        );
        let b = read(&sys, &proc);
        let s = combine(&a, &b);
        assert_eq!(s.governors, ["powersave"]);
        assert_eq!(
            s.cpu_mhz,
            Some(Range {
                min: 1200,
                max: 3000
            })
        );
        assert_eq!(s.thp.as_deref(), Some("always"));
        assert_eq!((s.hugepages_total, s.hugepages_free), (Some(8), Some(3)));
        assert_eq!(
            s.changed,
            [
                "governor performance → powersave",
                "transparent huge pages madvise → always"
            ]
        );
        // A machine without cpufreq or those files: nothing claimed.
        let bare = tempfile::tempdir().unwrap();
        let none = combine(
            &read(&bare.path().join("sys"), &bare.path().join("proc")),
            &read(&bare.path().join("sys"), &bare.path().join("proc")),
        );
        assert_eq!(none, HostCaseState::default());
    }
}
