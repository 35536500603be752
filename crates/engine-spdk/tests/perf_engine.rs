//! The spdk-perf engine against a stand-in `spdk_nvme_perf` (a script that logs its arguments and
//! prints a real capture of perf over PCIe in the VM test bed) and a binder that logs what it is
//! asked: the engine binds before its first perf, journals each perf's hugepage files, puts the
//! drives back when it finishes, and turns perf's Total line into the spec's GB/s.

use hwc_engine_spdk::perf::{self, args, check, cores_for, hugepages_per_node, locate};
use hwc_engine_spdk::{perf_output, Binder, BoundDrive, Finished, SpdkPerf, TcpTarget};
use hwc_model::{Case, NvmePattern, NvmeSpec, NvmeTest, PathId, Reps, Spec};
use hwc_runner::{run, CaseOutcome, Engine, NoObserver, RunOptions};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

const TWO_DRIVES: &str = include_str!("data/vm-pcie-read-2drives-q16-128k.stdout");
const A: &str = "0000:11:00.0";
const B: &str = "0000:21:00.0";

fn pci(bdf: &str) -> BoundDrive {
    BoundDrive {
        name: "nvme0".into(),
        bdf: bdf.into(),
        numa_node: Some(0),
        tcp: None,
    }
}

/// The subsystem of the TCP loopback captures.
fn tcp() -> BoundDrive {
    BoundDrive {
        tcp: Some(TcpTarget {
            addr: "127.0.0.1".into(),
            port: 4420,
            subnqn: "nqn.2016-06.io.spdk:cnode1".into(),
        }),
        ..pci("tcp0")
    }
}

fn spec(drives: &[&str], qd: u32, block: u64) -> NvmeSpec {
    NvmeSpec {
        test: NvmeTest::Sweep,
        block_bytes: block,
        queue_depth: qd,
        drives: drives.iter().map(|d| d.to_string()).collect(),
        target: false,
        pattern: NvmePattern::Sequential,
    }
}

fn executable(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn perf_is_found_where_the_spec_puts_it_on_path_or_only_under_spdk_dir() {
    let _turn = SCRIPTS.lock().unwrap_or_else(|e| e.into_inner());
    let t = tempfile::tempdir().unwrap();
    let cwd = t.path().join("repo");
    let on_path = t.path().join("usr/bin");
    std::fs::create_dir_all(&cwd).unwrap();
    let path_var = std::env::join_paths([&on_path]).unwrap();
    assert!(locate(None, &cwd, Some(&path_var)).is_err());
    executable(&on_path.join("spdk_nvme_perf"), "#!/bin/sh\n");
    assert_eq!(
        locate(None, &cwd, Some(&path_var)).unwrap(),
        on_path.join("spdk_nvme_perf")
    );
    // deps/ comes before PATH; deps/spdk-build before deps/spdk.
    let deps = cwd.join("deps/spdk/build/bin/spdk_nvme_perf");
    executable(&deps, "#!/bin/sh\n");
    assert_eq!(locate(None, &cwd, Some(&path_var)).unwrap(), deps);
    let build = cwd.join("deps/spdk-build/bin/spdk_nvme_perf");
    executable(&build, "#!/bin/sh\n");
    assert_eq!(locate(None, &cwd, Some(&path_var)).unwrap(), build);
    // A file that is not executable is not perf.
    std::fs::set_permissions(&build, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(locate(None, &cwd, Some(&path_var)).unwrap(), deps);
    // --spdk-dir is the only place looked at when given.
    let dir = t.path().join("spdk");
    let e = locate(Some(&dir), &cwd, Some(&path_var)).unwrap_err();
    assert!(e.contains("--spdk-dir") && e.contains("build/bin"), "{e}");
    executable(&dir.join("build/bin/spdk_nvme_perf"), "#!/bin/sh\n");
    assert_eq!(
        locate(Some(&dir), &cwd, None).unwrap(),
        dir.join("build/bin/spdk_nvme_perf")
    );
}

#[test]
fn each_drive_gets_a_core_of_its_own_node_away_from_cpu_0() {
    let nodes: BTreeMap<u32, Vec<u32>> = [(0, vec![0, 1, 2]), (1, vec![3, 4])].into();
    assert_eq!(
        cores_for(&[Some(0), Some(1), Some(0), Some(1)], &nodes),
        [2, 4, 1, 3]
    );
    // A node without CPUs left lends from another; a drive of no known node takes any.
    assert_eq!(
        cores_for(&[Some(1), Some(1), Some(1), None], &nodes),
        [4, 3, 2, 1]
    );
    // More drives than CPUs: shared.
    let one: BTreeMap<u32, Vec<u32>> = [(0, vec![0])].into();
    assert_eq!(cores_for(&[Some(0), Some(0)], &one), [0, 0]);
}

#[test]
fn perf_is_given_the_drives_in_core_order_one_core_each() {
    let s = spec(&[B, A], 32, 128 << 10);
    let a = args(PathId::NvmeRead, &s, &[(pci(B), 3), (pci(A), 1)], 3).unwrap();
    assert_eq!(
        a.join(" "),
        format!(
            "-q 32 -o 131072 -w read -t 3 -c 0xa -r trtype:PCIe traddr:{A} -r trtype:PCIe traddr:{B}"
        )
    );
    let w = args(PathId::NvmeWrite, &s, &[(pci(B), 3), (pci(A), 1)], 3).unwrap();
    assert!(w.join(" ").contains("-w write"));
    let mut latency = spec(&[A], 1, 4096);
    latency.test = NvmeTest::Latency;
    latency.pattern = NvmePattern::Random;
    let l = args(PathId::NvmeRead, &latency, &[(pci(A), 1)], 3).unwrap();
    assert!(l.join(" ").contains("-q 1 -o 4096 -w randread"));
    assert!(args(PathId::NvmeRead, &s, &[(pci(B), 1), (pci(A), 1)], 3).is_err());
    let mut gc = spec(&[A], 32, 128 << 10);
    gc.test = NvmeTest::GcSettle;
    assert!(args(PathId::NvmeWrite, &gc, &[(pci(A), 1)], 3).is_err());
}

#[test]
fn a_run_counts_only_when_every_drive_reported_from_its_core() {
    let out = perf_output::parse(TWO_DRIVES).unwrap();
    assert_eq!(check(&out, &[(pci(A), 0), (pci(B), 1)]), Ok(()));
    let e = check(&out, &[(pci(A), 1), (pci(B), 0)]).unwrap_err();
    assert!(e.contains("from core 0, not core 1"), "{e}");
    let e = check(&out, &[(pci(A), 0)]).unwrap_err();
    assert!(e.contains("2 namespaces for 1 drives"), "{e}");
    let e = check(&out, &[(pci(A), 0), (pci("0000:31:00.0"), 1)]).unwrap_err();
    assert!(e.contains("0000:31:00.0 completed no I/O"), "{e}");
}

#[test]
fn a_drive_over_tcp_is_named_by_its_subsystem() {
    let s = spec(&["tcp0"], 16, 128 << 10);
    let a = args(PathId::NvmeRead, &s, &[(tcp(), 1)], 3).unwrap();
    assert!(
        a.join(" ").ends_with(
            "-r trtype:TCP adrfam:IPv4 traddr:127.0.0.1 trsvcid:4420 \
             subnqn:nqn.2016-06.io.spdk:cnode1"
        ),
        "{a:?}"
    );
    let out = perf_output::parse(include_str!("data/tcp-read-1ns-q16-128k.stdout")).unwrap();
    let core = out.namespaces[0].core;
    assert_eq!(check(&out, &[(tcp(), core)]), Ok(()));
    // The same drive over PCIe, or another subsystem, is not what perf reported.
    assert!(check(&out, &[(pci("tcp0"), core)]).is_err());
    let mut other = tcp();
    other.tcp.as_mut().unwrap().subnqn = "nqn.2016-06.io.spdk:cnode2".into();
    let e = check(&out, &[(other, core)]).unwrap_err();
    assert!(e.contains("completed no I/O"), "{e}");
}

#[test]
fn hugepages_cover_the_largest_case_s_buffers_on_one_node() {
    let small = spec(&[A], 16, 128 << 10);
    let big = spec(&[A, B], 32, 8 << 20);
    // 16 × 128 KiB and the overhead, in whole 2 MiB pages.
    assert_eq!(hugepages_per_node(&[&small], &|_| None), (256 + 2) << 20);
    // 2 drives × 32 × 8 MiB on one node, plus the overhead.
    assert_eq!(
        hugepages_per_node(&[&small, &big], &|_| None),
        (512 + 256) << 20
    );
    let split = |d: &str| Some(u32::from(d == B));
    assert_eq!(hugepages_per_node(&[&big], &split), 512 << 20);
    assert_eq!(hugepages_per_node(&[], &split), 256 << 20);
}

/// What the binder was asked, in order.
#[derive(Default)]
struct Log(Mutex<Vec<String>>);

impl Log {
    fn push(&self, s: String) {
        self.0.lock().unwrap().push(s);
    }
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

struct FakeBinder {
    log: Arc<Log>,
    fail: Option<String>,
}

impl Binder for FakeBinder {
    fn bind(&mut self, hugepages: u64) -> Result<Vec<BoundDrive>, String> {
        self.log.push(format!("bind {} MiB", hugepages >> 20));
        if let Some(e) = &self.fail {
            return Err(e.clone());
        }
        Ok(vec![
            BoundDrive {
                name: "nvme0".into(),
                bdf: A.into(),
                numa_node: Some(0),
                tcp: None,
            },
            BoundDrive {
                name: "nvme1".into(),
                bdf: B.into(),
                numa_node: Some(1),
                tcp: None,
            },
        ])
    }
    fn record_files(&mut self, prefix: &str) -> Result<(), String> {
        let pid_ok = prefix
            .strip_prefix("spdk_pid")
            .is_some_and(|p| p.parse::<u32>().is_ok());
        self.log.push(format!("files {pid_ok}"));
        Ok(())
    }
    fn finish(&mut self) -> Result<Option<Finished>, String> {
        self.log.push("finish".into());
        Ok(Some(Finished {
            drivers: vec![(A.into(), "nvme".into()), (B.into(), "nvme".into())],
            how: "nvme0 is back on nvme; nvme1 is back on nvme".into(),
        }))
    }
}

/// Tests that write a script and run it take turns: a script being written while another test
/// forks can fail to run (ETXTBSY).
static SCRIPTS: Mutex<()> = Mutex::new(());

/// A stand-in perf that appends its arguments to `args.log` and prints `stdout`.
fn fake_perf(dir: &Path, stdout: &str) -> PathBuf {
    let out = dir.join("perf.stdout");
    std::fs::write(&out, stdout).unwrap();
    let perf = dir.join("spdk_nvme_perf");
    executable(
        &perf,
        &format!(
            "#!/bin/sh\necho \"$*\" >>'{}'\ncat '{}'\n",
            dir.join("args.log").display(),
            out.display()
        ),
    );
    perf
}

fn case(drives: &[&str]) -> Case {
    Case {
        key: format!("nvme_read/spdk-perf/{}drive/128KiB/qd16", drives.len()),
        path: PathId::NvmeRead,
        engine: perf::ENGINE,
        cell: format!("{}drive/128KiB/qd16", drives.len()),
        spec: Spec::Nvme(spec(drives, 16, 128 << 10)),
        reps: Reps {
            warmup: 1,
            timed: 3,
            retry_above_spread_pct: None,
            steady: None,
        },
    }
}

static NOT_CANCELLED: AtomicBool = AtomicBool::new(false);

fn engine(perf: PathBuf, log: &Arc<Log>, fail: Option<&str>) -> Box<dyn Engine> {
    let nodes: BTreeMap<u32, Vec<u32>> = [(0, vec![0]), (1, vec![1])].into();
    Box::new(SpdkPerf::new(
        perf,
        Box::new(FakeBinder {
            log: log.clone(),
            fail: fail.map(str::to_string),
        }),
        nodes,
        &NOT_CANCELLED,
    ))
}

#[test]
fn the_engine_binds_first_measures_perf_s_total_and_puts_the_drives_back() {
    let _turn = SCRIPTS.lock().unwrap_or_else(|e| e.into_inner());
    let t = tempfile::tempdir().unwrap();
    let perf = fake_perf(t.path(), TWO_DRIVES);
    let log = Arc::new(Log::default());
    let mut engines = vec![engine(perf, &log, None)];
    let out = run(
        &[case(&[A, B])],
        &mut engines,
        &RunOptions::default(),
        &mut NoObserver,
        &AtomicBool::new(false),
    );
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    let m = &out.results[0].measurement;
    // Total 2831.21 MiB/s, every repetition: the spec's GB/s = MiB/s × 1.048576 / 1000.
    let gbps = 2831.21 * 1.048576 / 1000.0;
    assert!((m.gbps.median - gbps).abs() < 1e-9, "{}", m.gbps.median);
    assert_eq!(m.gbps.n, 3);
    assert_eq!(
        m.bytes_per_rep,
        (2831.21f64 * 1_048_576.0 * 3.0).round() as u64
    );
    assert_eq!(m.latency_us.map(|l| l.median), Some(1411.82));
    let p = m.placement.as_ref().unwrap();
    assert!(p.verified, "{p:?}");
    assert_eq!(p.cpus.as_deref(), Some("0,1"));
    assert!(
        p.detail
            .contains("0000:21:00.0 (node 1) from core 1 (node 1)"),
        "{p:?}"
    );
    assert!(
        m.notes.iter().any(|n| n.contains("-c 0x3")),
        "{:?}",
        m.notes
    );
    // Bound once (16 × 128 KiB on each of 2 drives and the overhead), before the first of its 5
    // perf processes (cold, warm-up, 3 timed), each
    // one's hugepage files journaled; put back after the last.
    let mut want = vec!["bind 260 MiB".to_string()];
    want.extend(std::iter::repeat_n("files true".to_string(), 5));
    want.push("finish".into());
    assert_eq!(log.take(), want);
    let argv = std::fs::read_to_string(t.path().join("args.log")).unwrap();
    assert_eq!(argv.lines().count(), 5);
    assert!(argv.lines().all(|l| l
        == format!(
        "-q 16 -o 131072 -w read -t 3 -c 0x3 -r trtype:PCIe traddr:{A} -r trtype:PCIe traddr:{B}"
    )));
    assert_eq!(
        out.environment["spdk.drivers_at_end"].value,
        format!("{A}=nvme,{B}=nvme")
    );
}

#[test]
fn a_perf_run_that_attached_no_drive_fails_and_a_failed_bind_waives() {
    let _turn = SCRIPTS.lock().unwrap_or_else(|e| e.into_inner());
    let t = tempfile::tempdir().unwrap();
    // Perf exits 0 and prints no results when it cannot attach: a failure, not a figure.
    let perf = fake_perf(t.path(), "Initializing NVMe Controllers\n");
    let log = Arc::new(Log::default());
    let mut engines = vec![engine(perf.clone(), &log, None)];
    let out = run(
        &[case(&[A])],
        &mut engines,
        &RunOptions::default(),
        &mut NoObserver,
        &AtomicBool::new(false),
    );
    assert!(out.results.is_empty());
    assert!(
        out.failures[0].error.contains("no Total line"),
        "{:?}",
        out.failures
    );
    assert_eq!(log.take(), ["bind 258 MiB", "files true", "finish"]);
    // A drive perf reports from no core of its own is a failure too (the capture drove two).
    let perf = fake_perf(t.path(), TWO_DRIVES);
    let mut engines = vec![engine(perf.clone(), &log, None)];
    let out = run(
        &[case(&[A])],
        &mut engines,
        &RunOptions::default(),
        &mut NoObserver,
        &AtomicBool::new(false),
    );
    assert!(out.failures[0].error.contains("2 namespaces for 1 drives"));
    log.take();
    // Drives that cannot be bound: every case waived with why; nothing to put back.
    let mut engines = vec![engine(perf, &log, Some("nvme0 is mounted"))];
    let out = run(
        &[case(&[A]), case(&[A, B])],
        &mut engines,
        &RunOptions::default(),
        &mut NoObserver,
        &AtomicBool::new(false),
    );
    assert_eq!(out.waived.len(), 2);
    assert!(out.waived[0].reason.contains("nvme0 is mounted"));
    assert!(matches!(
        hwc_runner::run_case(
            &case(&[A]),
            engines[0].as_mut(),
            &RunOptions::default(),
            &NOT_CANCELLED
        ),
        CaseOutcome::Waived(_)
    ));
    engines[0].finish();
    // Bound once (the failure is kept), and never finished: nothing was changed.
    assert_eq!(log.take(), ["bind 260 MiB"]);
}

#[test]
fn a_failure_names_the_first_errors_perf_printed_where_the_cause_is() {
    let stderr = "\
[2026-12-06 00:14:57.034939] pci.c:1090:spdk_pci_device_claim: *ERROR*: could not open /var/tmp/spdk_pci_lock_0000:11:00.0
[2026-12-06 00:14:57.040522] nvme_pcie.c: 925:nvme_pcie_ctrlr_construct: *ERROR*: could not claim device 0000:11:00.0 (No such file or directory)
[2026-12-06 00:14:57.044428] nvme.c: 613:nvme_ctrlr_probe: *ERROR*: Failed to construct NVMe controller for SSD: 0000:11:00.0
[2026-12-06 00:14:57.045153] nvme.c: 827:nvme_dummy_attach_fail_cb: *ERROR*: Failed to attach nvme ctrlr
EAL: Driver cannot attach the device (0000:11:00.0)
EAL: Failed to attach device on primary process
[2026-12-06 00:14:57.277718] nvme.c: 883:spdk_nvme_probe_ext: *ERROR*: Create probe context failed

/opt/spdk/build/bin/spdk_nvme_perf: errors occurred
";
    let s = perf::stderr_summary(stderr);
    assert!(s.starts_with("[2026-12-06 00:14:57.034939] pci.c:1090:spdk_pci_device_claim: *ERROR*: could not open /var/tmp/spdk_pci_lock_0000:11:00.0 | "), "{s}");
    assert!(
        s.ends_with(" | /opt/spdk/build/bin/spdk_nvme_perf: errors occurred"),
        "{s}"
    );
    assert_eq!(s.matches(" | ").count(), 4, "{s}");
    assert_eq!(perf::stderr_summary("a\nb\n\nc\nd\n"), "b | c | d");
}
