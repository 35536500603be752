//! The NVMe options of `profile` through the real binary, on files this test creates: a
//! `--target` that does not exist is created and leaves nothing behind (also when SIGINT stops
//! the run), an existing file is not written without the flag, and writes without named drives
//! are refused before anything runs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn hwceiling() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hwceiling"))
}

/// The text of the run's output file in `dir` whose name starts with `prefix`.
fn output(dir: &Path, prefix: &str) -> String {
    let name = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .unwrap_or_else(|| panic!("no {prefix}* was written"));
    std::fs::read_to_string(name).unwrap()
}

fn profile_yaml(dir: &Path) -> String {
    output(dir, "hardware_profile_")
}

#[test]
fn a_created_target_is_measured_both_ways_and_removed() {
    let dir = hwc_testkit::storage_tempdir();
    let target = dir.path().join("scratch");
    let out = dir.path().join("out");
    let run = hwceiling()
        .args([
            "profile",
            "--paths",
            "nvme_read,nvme_write",
            "--nvme-sizes",
            "1MiB",
        ])
        .args(["--queue-depths", "16", "--nvme-bytes", "8MiB", "--target"])
        .arg(&target)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    if direct_io_refused(&stderr) {
        return;
    }
    assert!(run.status.success(), "{stderr}");
    assert!(!target.exists(), "the scratch file is gone");
    let y = profile_yaml(&out);
    assert!(
        y.contains("key: nvme_read/io-uring/target/1MiB/qd16"),
        "{y}"
    );
    assert!(
        y.contains("key: nvme_write/io-uring/target/1MiB/qd16"),
        "{y}"
    );
    assert!(
        !y.contains("raw_read_gbps"),
        "a file is not a drive ceiling"
    );
}

#[test]
fn an_existing_file_is_only_read_without_the_flag() {
    let dir = hwc_testkit::storage_tempdir();
    let target = dir.path().join("data");
    let data = vec![0x5au8; 4 << 20];
    std::fs::write(&target, &data).unwrap();
    let out = dir.path().join("out");
    let run = hwceiling()
        .args([
            "profile",
            "--paths",
            "nvme_read,nvme_write",
            "--nvme-sizes",
            "1MiB",
        ])
        .args(["--queue-depths", "16", "--target"])
        .arg(&target)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    if direct_io_refused(&stderr) {
        return;
    }
    assert!(run.status.success(), "{stderr}");
    let y = profile_yaml(&out);
    assert!(
        y.contains("key: nvme_read/io-uring/target/1MiB/qd16"),
        "{y}"
    );
    assert!(!y.contains("key: nvme_write/"), "{y}");
    assert!(y.contains("not created by hwceiling"), "{y}");
    assert_eq!(std::fs::read(&target).unwrap(), data, "untouched");
}

#[test]
fn writes_without_named_drives_are_refused_at_once() {
    let dir = hwc_testkit::storage_tempdir();
    let run = hwceiling()
        .args([
            "profile",
            "--paths",
            "nvme_write",
            "--allow-destructive-writes",
            "-o",
        ])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    if !run.status.success() {
        assert!(stderr.contains("--drives"), "{stderr}");
    } else {
        // A machine with no NVMe drive has nothing to name: the path is waived.
        let y = profile_yaml(&dir.path().join("out"));
        assert!(y.contains("no NVMe drives were detected"), "{y}");
    }
    let run = hwceiling()
        .args([
            "profile",
            "--paths",
            "nvme_write",
            "--allow-destructive-writes",
        ])
        .args(["--drives", "NO-SUCH-SERIAL", "-o"])
        .arg(dir.path().join("out2"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&run.stderr).contains("names no NVMe drive"));
    // Writes named apart from the reads: the names are checked as --drives' are, and the flag
    // that named them is the one the error names.
    let run = hwceiling()
        .args(["profile", "--allow-destructive-writes"])
        .args(["--write-drives", "NO-SUCH-SERIAL", "-o"])
        .arg(dir.path().join("out3"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("hwceiling: error: --write-drives: ")
            && stderr.contains("names no NVMe drive"),
        "{stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        !dir.path().join("out3").exists(),
        "refused before any output"
    );
    // Without the write flag it is a bad command line.
    let run = hwceiling()
        .args(["profile", "--write-drives", "S1", "-o"])
        .arg(dir.path().join("out4"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("--allow-destructive-writes"),
        "the error names the flag it needs"
    );
    assert!(!dir.path().join("out4").exists());
    // Drives named for writes while --paths leaves the writes out: an error, not a silent
    // read-only run.
    let run = hwceiling()
        .args([
            "profile",
            "--paths",
            "nvme_read",
            "--allow-destructive-writes",
        ])
        .args(["--write-drives", "S1", "-o"])
        .arg(dir.path().join("out5"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("add nvme_write to --paths"), "{stderr}");
    assert!(!dir.path().join("out5").exists());
}

#[test]
fn sigint_stops_a_run_cleanly_and_leaves_no_file() {
    let dir = hwc_testkit::storage_tempdir();
    let target = dir.path().join("scratch");
    let out = dir.path().join("out");
    // 4 KiB reads at QD 1 over 256 MiB: long enough to be interrupted mid-case.
    let mut child = hwceiling()
        .args(["profile", "--paths", "nvme_read", "--nvme-sizes", "4KiB"])
        .args(["--queue-depths", "1", "--nvme-bytes", "256MiB", "--target"])
        .arg(&target)
        .arg("-o")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the scratch file's name to come and go (created, then unlinked at once).
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) && !target.exists() {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: sending SIGINT to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    if status.code() == Some(1) {
        let mut e = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut e).unwrap();
        if direct_io_refused(&e) {
            return;
        }
        panic!("{e}");
    }
    assert!(!target.exists(), "nothing left behind");
    match status.code() {
        Some(130) => assert!(profile_yaml(&out).contains("interrupted: true")),
        // The run finished before the signal came: still nothing left behind.
        Some(0) => {}
        other => panic!("exit {other:?}"),
    }
}

fn raw_json(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&output(dir, "hardware_raw_")).unwrap()
}

fn report_md(dir: &Path) -> String {
    output(dir, "hardware-ceiling-")
}

#[test]
fn read_cache_and_power_states_run_on_a_target_with_tiny_knobs() {
    let dir = hwc_testkit::storage_tempdir();
    let target = dir.path().join("scratch");
    let out = dir.path().join("out");
    let run = hwceiling()
        .args(["profile", "--paths", "nvme_read", "--nvme-sizes", "1MiB"])
        .args(["--queue-depths", "16", "--nvme-bytes", "4MiB"])
        .args(["--nvme-long-tests", "read-cache,power-states"])
        .args(["--nvme-idle-max-s", "0.1", "--target"])
        .arg(&target)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    if direct_io_refused(&stderr) {
        return;
    }
    assert!(run.status.success(), "{stderr}");
    assert!(!target.exists(), "the scratch file is gone");
    let p = hwc_profile::from_yaml(&profile_yaml(&out)).unwrap();
    let key = target.display().to_string();
    let [t] = p.nvme.long_tests.as_slice() else {
        panic!("one device: {:?}", p.nvme.long_tests);
    };
    assert_eq!(t.device, key);
    let rc = t.read_cache.as_ref().expect("read-cache measured");
    assert_eq!((rc.hot_latency_us.n, rc.cold_latency_us.n), (5, 5));
    assert!(rc.hot_latency_us.median > 0.0 && rc.cold_latency_us.median > 0.0);
    assert_eq!(
        rc.cache_speedup,
        rc.cold_latency_us.median / rc.hot_latency_us.median
    );
    assert_eq!(rc.has_read_cache, rc.cache_speedup >= 1.5);
    assert_eq!(rc.hot_region_bytes, 1 << 20);
    let ps = t.power_states.as_ref().expect("power-states measured");
    assert_eq!(ps.baseline_latency_us.n, 10);
    let gaps: Vec<f64> = ps.gaps.iter().map(|g| g.idle_s).collect();
    assert_eq!(gaps, [0.01, 0.1], "capped at --nvme-idle-max-s 0.1");
    assert!(ps.gaps.iter().all(|g| g.latency_us.n == 3));
    // The rule, checked against the figures it was given: above 2× and 500 µs above the
    // baseline. A file's capability is unknown, so a step stands as the transition.
    let base = ps.baseline_latency_us.median;
    let expected = ps
        .gaps
        .iter()
        .find(|g| g.latency_us.median > 2.0 * base && g.latency_us.median - base >= 500.0)
        .map(|g| g.idle_s);
    assert_eq!(ps.latency_step_at_s, expected);
    assert_eq!(ps.drive_can_change_power_state, None);
    assert_eq!(ps.power_state_transition_at_s, expected);
    // Each figure is a measurement with its statistics.
    for k in [
        "nvme_read/io-uring/read-cache/target/hot",
        "nvme_read/io-uring/read-cache/target/cold",
        "nvme_read/io-uring/power-states/target/idle-0s",
        "nvme_read/io-uring/power-states/target/idle-100ms",
    ] {
        let m = p.measurement(k).unwrap_or_else(|| panic!("{k} missing"));
        assert!(m.latency_us.is_some(), "{k}");
    }
    assert!(
        p.nvme.drives.iter().all(|d| d.has_read_cache.is_none()),
        "a file is no drive"
    );
    assert!(
        p.waived
            .iter()
            .all(|w| w.scope.as_deref() != Some("read-cache")),
        "{:?}",
        p.waived
    );
    let raw = raw_json(&out);
    assert_eq!(raw["nvme_long_tests"][0]["device"], key.as_str());
    assert_eq!(
        raw["nvme_long_tests"][0]["power_states"]["gaps"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let md = report_md(&out);
    assert!(md.contains("### Long drive tests"), "{md}");
    assert!(md.contains("| 0.1 s |"), "{md}");
    assert!(md.contains("**Read cache.**"), "{md}");
}

#[test]
fn gc_settle_runs_on_a_created_target_and_is_waived_without_writes() {
    let dir = hwc_testkit::storage_tempdir();
    let target = dir.path().join("scratch");
    let out = dir.path().join("out");
    let run = hwceiling()
        .args(["profile", "--paths", "nvme_write", "--nvme-sizes", "1MiB"])
        .args(["--queue-depths", "16", "--nvme-bytes", "4MiB"])
        .args(["--nvme-long-tests", "gc-settle", "--nvme-gc-write-s", "3"])
        .args(["--nvme-gc-settle-max-s", "1", "--target"])
        .arg(&target)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    if direct_io_refused(&stderr) {
        return;
    }
    assert!(run.status.success(), "{stderr}");
    let p = hwc_profile::from_yaml(&profile_yaml(&out)).unwrap();
    let g = p.nvme.long_tests[0]
        .gc_settle
        .as_ref()
        .expect("gc-settle ran");
    assert_eq!(g.write_intervals_mbps.len(), 3);
    assert_eq!(g.sustained_write_mbps.n, 1);
    assert!(!g.settle_probes.is_empty() && g.settle_probes.len() <= 2);
    assert_eq!(
        g.recommended_gc_settle_s.is_some(),
        g.settled_at_s.is_some()
    );
    let m = p
        .measurement("nvme_write/io-uring/gc-settle/target")
        .unwrap();
    assert!((m.gbps.median * 1e3 - g.sustained_write_mbps.median).abs() < 1e-6);
    assert!(report_md(&out).contains("**GC settle — "));

    // An existing file without the flag: not written, gc-settle waived with the reason.
    let data = dir.path().join("data");
    std::fs::write(&data, vec![7u8; 4 << 20]).unwrap();
    let out = dir.path().join("out2");
    let run = hwceiling()
        .args(["profile", "--paths", "nvme_write", "--nvme-sizes", "1MiB"])
        .args(["--queue-depths", "16", "--nvme-long-tests", "gc-settle"])
        .arg("--target")
        .arg(&data)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let p = hwc_profile::from_yaml(&profile_yaml(&out)).unwrap();
    let w = p
        .waived
        .iter()
        .find(|w| w.scope.as_deref() == Some("gc-settle"))
        .unwrap();
    assert!(w.reason.contains("may not be written"), "{w:?}");
    assert!(p.nvme.long_tests.is_empty());
    assert_eq!(std::fs::read(&data).unwrap(), vec![7u8; 4 << 20]);
}

#[test]
fn long_test_options_are_checked_before_anything_runs() {
    let dir = hwc_testkit::storage_tempdir();
    let one_line = |run: &std::process::Output| {
        let e = String::from_utf8_lossy(&run.stderr).to_string();
        assert_eq!(e.trim_end().lines().count(), 1, "{e}");
        e
    };
    let run = hwceiling()
        .args(["profile", "--nvme-long-tests", "read-cache,smart", "-o"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(one_line(&run).contains("unknown NVMe long test `smart`"));
    let run = hwceiling()
        .args([
            "profile",
            "--nvme-idle-max-s",
            "0",
            "--nvme-long-tests",
            "all",
        ])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(one_line(&run).contains("0.01"));
    let run = hwceiling()
        .args([
            "profile",
            "--paths",
            "nvme_read",
            "--nvme-long-tests",
            "gc-settle",
        ])
        .arg("-o")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert!(one_line(&run).contains("add nvme_write to --paths"));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn the_dry_run_waives_long_tests_naming_the_flag() {
    let dir = hwc_testkit::storage_tempdir();
    let run = hwceiling()
        .args(["profile", "--dry-run", "--paths", "nvme_read,nvme_write"])
        .arg("--target")
        .arg(dir.path().join("absent"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        text.contains("waived: read-cache: not requested")
            && text.contains("--nvme-long-tests read-cache"),
        "{text}"
    );
    assert!(
        text.contains("waived: power-states: not requested"),
        "{text}"
    );
    assert!(text.contains("waived: gc-settle: not requested"), "{text}");
    let run = hwceiling()
        .args(["profile", "--dry-run", "--paths", "nvme_read"])
        .args([
            "--nvme-long-tests",
            "power-states",
            "--nvme-idle-max-s",
            "1",
        ])
        .arg("--target")
        .arg(dir.path().join("absent"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&run.stdout);
    for gap in ["0s", "10ms", "100ms", "500ms", "1s"] {
        assert!(
            text.contains(&format!(
                "nvme_read/io-uring/power-states/target/idle-{gap} "
            )),
            "{gap}: {text}"
        );
    }
    assert!(!text.contains("idle-2s"), "{text}");
}

#[test]
fn sigint_during_gc_settle_writes_stops_them_at_once_and_leaves_no_file() {
    let dir = hwc_testkit::storage_tempdir();
    let target = dir.path().join("scratch");
    let out = dir.path().join("out");
    // A minute of writes after about 5 s of baseline probes: the signal comes during the writes.
    let mut child = hwceiling()
        .args(["profile", "--paths", "nvme_write", "--nvme-sizes", "1MiB"])
        .args(["--queue-depths", "16", "--nvme-bytes", "4MiB"])
        .args(["--nvme-long-tests", "gc-settle", "--nvme-gc-write-s", "60"])
        .arg("--target")
        .arg(&target)
        .arg("-o")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(8));
    // SAFETY: sending SIGINT to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let signalled = Instant::now();
    let status = child.wait().unwrap();
    let stopped_s = signalled.elapsed().as_secs_f64();
    let mut e = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut e).unwrap();
    if status.code() == Some(1) && direct_io_refused(&e) {
        return;
    }
    assert_eq!(status.code(), Some(130), "{e}");
    assert!(stopped_s < 3.0, "took {stopped_s} s to stop after SIGINT");
    assert!(!target.exists(), "nothing left behind");
    let p = hwc_profile::from_yaml(&profile_yaml(&out)).unwrap();
    assert!(p.provenance.interrupted);
    let f = p
        .failures
        .iter()
        .find(|f| f.key == "nvme_write/io-uring/gc-settle/target")
        .unwrap_or_else(|| panic!("{:?}", p.failures));
    assert!(f.error.contains("interrupted"), "{}", f.error);
    assert!(p.nvme.long_tests.is_empty(), "no half-measured record");
}

#[test]
fn an_existing_target_with_unwritten_blocks_is_waived_not_measured() {
    let dir = hwc_testkit::storage_tempdir();
    let target = dir.path().join("sparse.img");
    // 8 MiB of which only the first MiB was ever written: the rest reads as zeros from
    // nowhere (a fallocated file looks the same to SEEK_DATA on ext4 and xfs).
    let f = std::fs::File::create(&target).unwrap();
    f.set_len(8 << 20).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &vec![3u8; 1 << 20], 0).unwrap();
    f.sync_all().unwrap();
    let out = dir.path().join("out");
    let run = hwceiling()
        .args(["profile", "--paths", "nvme_read", "--nvme-sizes", "1MiB"])
        .args(["--queue-depths", "16", "--nvme-bytes", "8MiB", "--target"])
        .arg(&target)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    if direct_io_refused(&stderr) {
        return;
    }
    assert!(run.status.success(), "{stderr}");
    let y = profile_yaml(&out);
    if !y.contains("holes or unwritten extents") {
        // Only a filesystem that does not report holes (SEEK_HOLE) gets here.
        println!("SKIPPED: this filesystem does not report holes");
        return;
    }
    assert!(y.contains("7340032 of its 8388608 bytes"), "{y}");
    assert!(
        !y.contains("key: nvme_read/io-uring/target/1MiB/qd16"),
        "measured anyway: {y}"
    );
    assert_eq!(
        std::fs::metadata(&target).unwrap().len(),
        8 << 20,
        "left as it was"
    );
}

/// True (and says SKIPPED) when the run failed because the test's filesystem refuses O_DIRECT.
fn direct_io_refused(stderr: &str) -> bool {
    let refused = stderr.contains("O_DIRECT");
    if refused {
        println!("SKIPPED: this filesystem refuses O_DIRECT: {stderr}");
    }
    refused
}
