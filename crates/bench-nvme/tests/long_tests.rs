//! The long drive tests' machinery on a scratch file this test has hwceiling create (never a
//! disk of the machine): hot reads confined to their region, reads after idle gaps that really
//! wait, and the gc-settle protocol end to end — and its refusal to write a file the gate did
//! not approve. Prints `SKIPPED: …` where the temporary folder refuses O_DIRECT (tmpfs).

mod common;

use hwc_bench_nvme::{setup, NvmeBackend, Request};
use hwc_model::long_tests::{settled, GC_BASELINE_PROBES, GC_PROBE_READS};
use hwc_model::v1::CaseParams;
use hwc_model::{Case, PathId, Reps, Topology};
use hwc_runner::{run_case, CaseOutcome, RunOptions};
use std::path::Path;
use std::sync::atomic::AtomicBool;

static NEVER: AtomicBool = AtomicBool::new(false);

fn backend(target: &Path, write: bool, flag: bool) -> Option<NvmeBackend> {
    let s = setup(
        &Topology::default(),
        &Request {
            drives: Vec::new(),
            write_drives: Vec::new(),
            allow_destructive_writes: flag,
            target: Some(target.to_path_buf()),
            wants_write: write,
            bytes_per_drive: 4 << 20,
        },
        &NEVER,
    )
    .unwrap();
    Some(NvmeBackend::new(s.config))
}

/// A read case of the io_uring engine on `target`, its spec from version 1 style parameters.
fn read_case(key: &str, target: &Path, params: CaseParams, reps: Reps) -> Case {
    let params = CaseParams {
        size_bytes: Some(4096),
        queue_depth: Some(1),
        drives: vec![target.display().to_string()],
        ..params
    };
    Case {
        key: key.into(),
        path: PathId::NvmeRead,
        engine: hwc_bench_nvme::ENGINE,
        cell: key.into(),
        spec: params.spec(PathId::NvmeRead, key),
        reps,
    }
}

fn skipped(outcome: &CaseOutcome) -> bool {
    if let CaseOutcome::Failed(f) = outcome {
        if f.error.contains("O_DIRECT") || f.error.contains("Invalid argument") {
            println!("SKIPPED: this filesystem refuses O_DIRECT: {}", f.error);
            return true;
        }
    }
    false
}

#[test]
fn hot_reads_stay_in_their_region_and_idle_reads_wait_their_gap() {
    let dir = hwc_testkit::storage_tempdir();
    let target = dir.path().join("scratch");
    let mut b = backend(&target, false, false).unwrap();
    let reps = Reps {
        warmup: 1,
        timed: 3,
        retry_above_spread_pct: None,
        steady: None,
    };
    let hot = read_case(
        "nvme_read/io-uring/read-cache/target/hot",
        &target,
        CaseParams {
            pattern: Some("hot".into()),
            region_bytes: Some(1 << 20),
            ..CaseParams::default()
        },
        reps,
    );
    let outcome = run_case(&hot, &mut b, &RunOptions::default(), &NEVER);
    if skipped(&outcome) {
        return;
    }
    let CaseOutcome::Measured(r) = outcome else {
        panic!("{outcome:?}");
    };
    let m = &r.measurement;
    assert_eq!(m.latency_us.map(|s| s.n), Some(3));
    assert!(m.latency_us.unwrap().median > 0.0);
    assert!(
        m.notes.iter().any(|n| n.contains("first 1MiB")),
        "{:?}",
        m.notes
    );
    // The placement says how much of the I/O buffers huge pages back (4 KiB × QD 1 here).
    let placement = m
        .placement
        .as_ref()
        .map(|p| p.detail.clone())
        .unwrap_or_default();
    assert!(
        placement.contains("of 4KiB on transparent huge pages"),
        "{placement}"
    );

    // Reads after a 150 ms gap: four repetitions (cold + 3) wait at least 0.6 s in all, and
    // each timed repetition is the one read's latency, not the wait.
    let idle = read_case(
        "nvme_read/io-uring/power-states/target/idle-150ms",
        &target,
        CaseParams {
            pattern: Some("idle".into()),
            idle_ms: Some(150),
            ..CaseParams::default()
        },
        Reps {
            warmup: 0,
            timed: 3,
            retry_above_spread_pct: None,
            steady: None,
        },
    );
    let CaseOutcome::Measured(r) = run_case(&idle, &mut b, &RunOptions::default(), &NEVER) else {
        panic!("the idle case did not measure");
    };
    let waited = r.case_seconds.unwrap_or_default();
    assert!(waited >= 0.6, "waited only {waited} s");
    let lat = r.measurement.latency_us.unwrap();
    assert_eq!(lat.n, 3);
    assert!(lat.max < 150_000.0, "the gap was timed: {lat:?}");
    assert_eq!(r.measurement.bytes_per_rep, 4096);
}

#[test]
fn gc_settle_writes_in_intervals_then_probes_until_settled() {
    let dir = hwc_testkit::storage_tempdir();
    let target = dir.path().join("scratch");
    let b = backend(&target, true, false).unwrap();
    let key = target.display().to_string();
    let case = common::gc_case(&key, 3, 2);
    assert!(hwc_bench_nvme::is_gc_settle(&case));
    let (result, record) = match b.gc_settle_runner().run(&case) {
        Ok(x) => x,
        Err(e) if e.to_string().contains("O_DIRECT") => {
            println!("SKIPPED: this filesystem refuses O_DIRECT: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    assert_eq!(record.device, key);
    let gc = record.gc_settle.unwrap();
    assert_eq!(gc.write_intervals_mbps.len(), 3);
    assert!(gc.write_intervals_mbps.iter().all(|&m| m > 0.0));
    assert!(gc.bytes_written >= 3 * (128 << 10));
    assert_eq!(
        gc.sustained_write_mbps.n, 1,
        "the last third of 3 intervals"
    );
    assert_eq!(
        gc.sustained_write_mbps.median, gc.write_intervals_mbps[2],
        "the median of the last interval"
    );
    assert_eq!(
        gc.baseline_latency_us.n,
        GC_BASELINE_PROBES * GC_PROBE_READS
    );
    // The probes read a region written once before the baseline (the whole scratch file here).
    let region = gc.probe_region_bytes.unwrap();
    assert!(region > 0 && region <= 1 << 30, "{region}");
    assert!(
        result
            .measurement
            .notes
            .iter()
            .any(|n| n.contains("written once before the baseline")),
        "{:?}",
        result.measurement.notes
    );
    assert!(!gc.settle_probes.is_empty() && gc.settle_probes.len() <= 3);
    for (i, p) in gc.settle_probes.iter().enumerate() {
        assert_eq!(p.latency_us.n, GC_PROBE_READS);
        assert!(p.at_s >= i as f64, "probe {i} at {} s", p.at_s);
    }
    // The test stops at the first settled probe, and only there.
    let last = gc.settle_probes.last().unwrap();
    let before_last = &gc.settle_probes[..gc.settle_probes.len() - 1];
    assert!(before_last
        .iter()
        .all(|p| !settled(gc.baseline_latency_us.median, p.latency_us.median)));
    match gc.settled_at_s {
        Some(t) => {
            assert_eq!(t, last.at_s);
            let rec = gc.recommended_gc_settle_s.unwrap() as f64;
            assert!(rec + 0.005 >= t && rec < t + 1.0, "{rec} s for {t} s");
        }
        None => {
            assert_eq!(gc.settle_probes.len(), 3, "probes at 0, 1 and 2 s");
            assert_eq!(gc.recommended_gc_settle_s, None);
        }
    }
    let m = &result.measurement;
    assert_eq!(m.key, "nvme_write/io-uring/gc-settle/target");
    assert!((m.gbps.median * 1e3 - gc.sustained_write_mbps.median).abs() < 1e-9);
    assert_eq!(result.samples_gbps.len(), 1);
    assert_eq!(m.cold_gbps, Some(gc.write_intervals_mbps[0] / 1e3));
    assert_eq!(result.warmup_gbps.len(), 1);
}

#[test]
fn gc_settle_refuses_a_file_the_gate_did_not_approve() {
    let dir = hwc_testkit::storage_tempdir();
    let target = dir.path().join("data");
    let data = vec![0x5au8; 4 << 20];
    std::fs::write(&target, &data).unwrap();
    // Writes asked for, without --allow-destructive-writes: the gate does not approve.
    let b = backend(&target, true, false).unwrap();
    let case = common::gc_case(&target.display().to_string(), 1, 0);
    let e = b.gc_settle_runner().run(&case).unwrap_err().to_string();
    assert!(e.contains("not approved for writes"), "{e}");
    assert_eq!(std::fs::read(&target).unwrap(), data, "not a byte written");
}

#[test]
fn gc_settle_refuses_an_approved_file_replaced_since_the_gate() {
    let dir = hwc_testkit::storage_tempdir();
    let target = dir.path().join("data");
    std::fs::write(&target, vec![0x5au8; 4 << 20]).unwrap();
    // Approved with --allow-destructive-writes: this file, by device and inode.
    let b = backend(&target, true, true).unwrap();
    // Another file takes the path before the test writes.
    let other = dir.path().join("other");
    let data = vec![0xa5u8; 4 << 20];
    std::fs::write(&other, &data).unwrap();
    std::fs::rename(&other, &target).unwrap();
    let case = common::gc_case(&target.display().to_string(), 1, 0);
    let e = match b.gc_settle_runner().run(&case) {
        Err(e) if e.to_string().contains("O_DIRECT") => {
            println!("SKIPPED: this filesystem refuses O_DIRECT: {e}");
            return;
        }
        Err(e) => e.to_string(),
        Ok(_) => panic!("gc-settle wrote to a file the gate never saw"),
    };
    assert!(e.contains("the path now opens the regular file"), "{e}");
    assert_eq!(std::fs::read(&target).unwrap(), data, "not a byte written");
}
