//! Room on the output folder's filesystem: a run is refused before it measures anything when the
//! files its plan will write cannot fit, rather than losing the run at its end.
//!
//! The size is an estimate, on the generous side: the raw record (topology, plan, and per case
//! its measurement plus every repetition's figure and, for host copies, each thread's scheduling
//! counters), held twice at the peak (the running record beside the raw record, or beside its
//! own next version while it is replaced), plus the profile, the report and the charts.

use hwc_model::{EngineDecl, NvmeTest, Plan, Spec, Topology};
use std::path::Path;

/// Per case, besides its repetitions: the measurement, its notes and evidence.
const CASE_BYTES: u64 = 2 << 10;
/// Per repetition: its figure in the raw record (pretty JSON, about 27 bytes measured).
const REP_BYTES: u64 = 32;
/// Per timed repetition of a host copy: the scheduling counters of the repetition, and per
/// thread (about 140 + 131 bytes a thread measured, on a 2-CPU host RAM run).
const SCHED_REP_BYTES: u64 = 200;
const SCHED_THREAD_BYTES: u64 = 160;
/// The charts: the topology picture, and per case a hardware engine measures its share of a
/// sweep chart (a chart of bandwidth against size is about 25 KiB, plus 0.5 KiB a point, and
/// holds several sizes; a tool-measuring engine's figures are not charted).
const CHART_FIXED_BYTES: u64 = 8 << 10;
const CHART_CASE_BYTES: u64 = 4 << 10;
/// Per case in the profile and the report together (about 1.5 KiB measured).
const RENDERED_CASE_BYTES: u64 = 2 << 10;
/// The profile's and the report's text besides their cases, and the provenance.
const FIXED_BYTES: u64 = 32 << 10;
/// A long drive test's records (latencies over time) in each of the raw record and profile.
const LONG_TEST_BYTES: u64 = 256 << 10;

/// About how many bytes a run of `plan` on `topo` writes to its output folder at most at once.
pub fn needed_bytes(plan: &Plan, topo: &Topology, engines: &[EngineDecl]) -> u64 {
    // The raw record's topology and plan, as it writes them.
    let json_len = |v: serde_json::Result<Vec<u8>>| v.map_or(0, |v| v.len() as u64);
    let base =
        json_len(serde_json::to_vec_pretty(topo)) + json_len(serde_json::to_vec_pretty(plan));
    let mut raw = base;
    let mut rendered = FIXED_BYTES + CHART_FIXED_BYTES + base / 2;
    for case in &plan.cases {
        let reps = u64::from(case.reps.warmup) + u64::from(case.reps.timed) + 1;
        let mut bytes = CASE_BYTES + reps * REP_BYTES;
        // The host engines record each repetition's scheduling counters (the null engine,
        // which plans host copies too and measures the tool, not hardware, does not).
        let hardware = engines.iter().any(|e| e.id == case.engine && e.hardware);
        if hardware {
            rendered += CHART_CASE_BYTES;
        }
        if let (Spec::HostCopy(h), true) = (&case.spec, hardware) {
            bytes += u64::from(case.reps.timed)
                * (SCHED_REP_BYTES + SCHED_THREAD_BYTES * u64::from(h.threads));
        }
        if let Spec::Nvme(n) = &case.spec {
            if !matches!(n.test, NvmeTest::Sweep | NvmeTest::Latency) {
                bytes += LONG_TEST_BYTES;
                rendered += LONG_TEST_BYTES;
            }
        }
        raw += bytes;
        rendered += RENDERED_CASE_BYTES;
    }
    // The running record and the raw record (or the running record's next version), then half
    // again for what the estimate misses, and a block per file. A full host RAM run on 2 CPUs
    // (12 cases) peaked at 1.04 MB: estimated at 1.6 MiB; a null-engine run (10 cases) at
    // 0.13 MB: estimated at 305 KiB.
    let peak = 2 * raw + rendered;
    peak + peak / 2 + 5 * (4 << 10)
}

/// Bytes free to this process on the filesystem holding `dir` (the blocks reserved for root
/// count for root).
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: statvfs is plain data; all-zero is a valid value of it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path that outlives the call; `st` is a valid, writable
    // statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let blocks = if crate::is_root() {
        st.f_bfree
    } else {
        st.f_bavail
    };
    // 64-bit here; fsblkcnt_t and c_ulong are 32-bit on some targets.
    #[allow(clippy::useless_conversion)]
    let bytes = u64::from(blocks).saturating_mul(u64::from(st.f_frsize));
    Ok(bytes)
}

/// Refuse a run whose files cannot fit in `dir` (one line, in the user's terms). A folder whose
/// free space cannot be read is not refused: the writes themselves will say.
pub fn check_room(
    dir: &Path,
    plan: &Plan,
    topo: &Topology,
    engines: &[EngineDecl],
) -> Result<(), String> {
    let Ok(free) = free_bytes(dir) else {
        return Ok(());
    };
    let needed = needed_bytes(plan, topo, engines);
    if free >= needed {
        return Ok(());
    }
    Err(format!(
        "not enough room in {}: {} free, and this run of {} case(s) writes up to about {} \
         (report, charts, profile, raw record and the running record); free some space, or write \
         elsewhere with -o DIR",
        dir.display(),
        human(free),
        plan.cases.len(),
        human(needed)
    ))
}

/// Bytes in KiB, MiB or GiB, one decimal.
fn human(b: u64) -> String {
    let b = b as f64;
    match b {
        _ if b >= f64::from(1u32 << 30) => format!("{:.1} GiB", b / f64::from(1u32 << 30)),
        _ if b >= f64::from(1u32 << 20) => format!("{:.1} MiB", b / f64::from(1u32 << 20)),
        _ => format!("{:.1} KiB", b / 1024.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_the_users_units() {
        assert_eq!(human(300 << 10), "300.0 KiB");
        assert_eq!(human(3 << 20), "3.0 MiB");
        assert_eq!(human(5 << 30), "5.0 GiB");
    }

    #[test]
    fn an_empty_plan_needs_little_and_a_folder_with_room_passes() {
        let n = needed_bytes(&Plan::default(), &Topology::default(), &[]);
        assert!(n < 128 << 10, "{n}");
        let d = tempfile::tempdir().unwrap();
        assert!(free_bytes(d.path()).unwrap() > 0);
        check_room(d.path(), &Plan::default(), &Topology::default(), &[]).unwrap();
    }
}
