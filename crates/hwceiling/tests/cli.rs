//! End-to-end: the real binary on this machine and on the fsroot snapshots in ../shared.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hwceiling"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run hwceiling")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// The snapshots, extracted once for this test binary; `None` (and the test says it skipped)
/// where the project's shared folder is not beside this checkout (a fresh clone of the
/// repository alone).
fn fixtures() -> Option<&'static Path> {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/fsroot");
    if !src.is_dir() {
        eprintln!(
            "skipped: the /sys snapshots of the project's shared folder ({}) are not here",
            src.display()
        );
        return None;
    }
    Some(
        DIR.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            for name in ["h200-pcie-vm.tar.xz", "cpu-vm-2core.tar.xz"] {
                let stem = name.split('.').next().unwrap();
                let out = dir.path().join(stem);
                std::fs::create_dir_all(&out).unwrap();
                let st = Command::new("tar")
                    .arg("-xf")
                    .arg(src.join(name))
                    .arg("-C")
                    .arg(&out)
                    .status()
                    .unwrap();
                assert!(st.success(), "extracting {name}");
            }
            dir
        })
        .path(),
    )
}

fn one_line_error(o: &Output, code: i32, needle: &str) {
    assert_eq!(o.status.code(), Some(code), "stderr: {}", stderr(o));
    let e = stderr(o);
    assert_eq!(e.trim_end().lines().count(), 1, "not one line: {e}");
    assert!(e.contains(needle), "{e}");
}

#[test]
fn profile_writes_report_profile_and_raw_record_that_read_back() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("profiling");
    let result = out.path().join("result.json");
    let args = [
        "profile",
        "--output-dir",
        dir.to_str().unwrap(),
        "--result-file",
        result.to_str().unwrap(),
        "--paths",
        "host_ram",
        "--host-sizes",
        "1MiB",
        "--threads",
        "1",
        "--quick",
        "--allow-contended",
    ];
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    // The files it wrote, told to the program that asked (serve), as typed JSON.
    let written: hwc_model::RunWritten =
        serde_json::from_slice(&std::fs::read(&result).unwrap()).unwrap();
    assert!(written.profile.is_file() && written.report.is_file() && written.raw.is_file());
    assert!(!written.interrupted);
    let s = stdout(&o);
    // 1 MiB is a cache size on every machine: measured, but no sustained figure or ceiling
    // (the printed ceiling line's form is `ceiling_line`'s unit tests'), and the run says why.
    assert!(!s.contains("host_ram_same_numa_gbps"), "{s}");
    assert!(
        s.contains("warning: host RAM n0-n0: every size measured fits in cache"),
        "{s}"
    );
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    let charts: Vec<&String> = names.iter().filter(|n| n.starts_with("charts-")).collect();
    assert_eq!(
        names.len() - charts.len(),
        3,
        "exactly the three files, no partial or temp left: {names:?}"
    );
    // And the charts folder, with a host RAM chart per engine.
    assert_eq!(charts.len(), 1, "{names:?}");
    let svgs = hwc_testkit::names_in(&dir.join(charts[0]));
    for engine in ["host-memcpy", "host-streaming"] {
        assert!(
            svgs.iter()
                .any(|n| n.starts_with(&format!("host-ram-{engine}-"))),
            "{svgs:?}"
        );
    }
    let yaml_path = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "yaml"))
        .unwrap();
    let yaml = std::fs::read_to_string(&yaml_path).unwrap();
    let profile = hwc_profile::from_yaml(&yaml).expect("profile reads back");
    // memcpy and the streaming kernel, at the one size and thread count asked for.
    let keys: Vec<&str> = profile
        .measurements
        .iter()
        .map(|m| m.key.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "host_ram/host-memcpy/n0-n0/1MiB/t1",
            "host_ram/host-streaming/n0-n0/1MiB/t1"
        ]
    );
    for m in &profile.measurements {
        assert!(m.gbps.median > 0.0 && m.gbps.n >= 5 && m.cold_gbps.is_some());
    }
    // A host-only run records the transparent huge page setting too, where the kernel has it.
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok();
    assert_eq!(
        profile
            .provenance
            .environment
            .get("host.transparent_hugepage")
            .map(|s| s.value.as_str()),
        thp.as_deref().map(str::trim)
    );
    assert!(profile.host_ram.pairs.is_empty() && profile.ceilings.is_empty());
    assert!(profile.measurements.iter().all(|m| m.cache_resident));
    assert!(profile
        .waived
        .iter()
        .all(|w| w.path == hwc_model::PathId::HostRam));
    // `report` re-renders exactly the markdown `profile` wrote, but for the lines that link
    // the charts (to standard output it has no charts to link).
    let md_path = yaml_path
        .to_string_lossy()
        .replace("hardware_profile_", "hardware-ceiling-")
        .replace(".yaml", ".md");
    let written = std::fs::read_to_string(&md_path).unwrap();
    let o = run(&["report", yaml_path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(written.contains("\nCharts: ["));
    assert_eq!(stdout(&o), hwc_testkit::without_chart_links(&written));
    // A second run the same day gets distinct names and leaves the first untouched.
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("-2.yaml"), "{}", stdout(&o));
    assert_eq!(std::fs::read_to_string(&yaml_path).unwrap(), yaml);
}

#[test]
fn dry_run_on_the_h200_snapshot_plans_gpu_paths_and_waives_nvme() {
    let Some(fixtures) = fixtures() else {
        return;
    };
    let root = fixtures.join("h200-pcie-vm");
    let o = run(&["profile", "--dry-run", "--fsroot", root.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    assert!(s.contains("host_ram/host-memcpy/n0-n0/256MiB/t16"), "{s}");
    assert!(s.contains("no NVMe drives were detected"), "{s}");
    // The snapshot is not this machine: libcuda is looked for under the snapshot.
    assert!(s.contains("libcuda"), "{s}");
}

#[test]
fn detect_reads_snapshots_in_every_format() {
    let Some(fixtures) = fixtures() else {
        return;
    };
    let root = fixtures.join("h200-pcie-vm");
    let o = run(&[
        "detect",
        "--fsroot",
        root.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t: hwc_model::Topology = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(t.gpus.len(), 1);
    assert_eq!(t.gpus[0].pci_bdf, "0000:00:06.0");
    let o = run(&[
        "detect",
        "--fsroot",
        root.to_str().unwrap(),
        "--format",
        "yaml",
    ]);
    let y: hwc_model::Topology = serde_saphyr::from_str(&stdout(&o)).unwrap();
    assert_eq!(y, t);
    let o = run(&["detect", "--fsroot", root.to_str().unwrap()]);
    assert!(
        stdout(&o).contains("gpu0      0000:00:06.0 NVIDIA H200"),
        "{}",
        stdout(&o)
    );
    // The GPU's config space, read as root on the H200 machine, is in the snapshot: its MPS and
    // the TLP-adjusted limits at it.
    assert!(
        stdout(&o).contains(
            "link      gpu0 0000:00:06.0 Gen5 x16: 63.02 GB/s theoretical per direction; MPS 256 B \
             on its path: TLP-adjusted (a model) 57.61 GB/s DMA writes, 58.45 reads"
        ),
        "{}",
        stdout(&o)
    );
    assert_eq!(t.topology.pcie_paths[0].hops[0].config.mps_bytes, Some(256));
    let cpu = fixtures.join("cpu-vm-2core");
    let o = run(&["detect", "--fsroot", cpu.to_str().unwrap()]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("gpus      none"));
}

#[test]
fn detect_on_this_machine_never_fails() {
    let o = run(&["detect", "--format", "yaml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("platform:"));
}

#[test]
fn bad_input_gets_one_line_and_a_non_zero_exit() {
    one_line_error(
        &run(&["profile", "--paths", "nvram"]),
        2,
        "unknown path `nvram`",
    );
    one_line_error(&run(&["profile", "--host-sizes", "4TB"]), 2, "unknown unit");
    one_line_error(&run(&["profile", "--fsroot", "/"]), 2, "--dry-run");
    one_line_error(&run(&["frobnicate"]), 2, "unrecognized subcommand");
    one_line_error(
        &run(&["detect", "--fsroot", "/nonexistent"]),
        1,
        "not a filesystem root",
    );

    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let bad_dir = file.join("sub");
    one_line_error(
        &run(&[
            "profile",
            "-o",
            bad_dir.to_str().unwrap(),
            "--paths",
            "host_ram",
        ]),
        1,
        "cannot create output folder",
    );

    let bad = d.path().join("bad.yaml");
    std::fs::write(&bad, "schema_version: 1\nplatform: [\n").unwrap();
    one_line_error(
        &run(&["report", bad.to_str().unwrap()]),
        1,
        "not a valid hwceiling profile",
    );
    std::fs::write(&bad, "schema_version: 7\n").unwrap();
    one_line_error(
        &run(&["report", bad.to_str().unwrap()]),
        1,
        "newer than this hwceiling reads",
    );
    one_line_error(
        &run(&["report", "/nonexistent.yaml"]),
        1,
        "cannot read /nonexistent.yaml",
    );
}

/// `hwceiling ARGS` run in a new empty folder (the default `-o profiling` lands there), and what
/// the folder holds afterwards.
fn run_in_empty_folder(args: &[&str]) -> (Output, Vec<String>) {
    let d = tempfile::tempdir().unwrap();
    let o = bin()
        .args(args)
        .current_dir(d.path())
        .output()
        .expect("run hwceiling");
    let left: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    (o, left)
}

#[test]
fn values_no_machine_can_run_or_listed_twice_are_a_bad_command_line_creating_nothing() {
    for (args, needle) in [
        (
            &["--threads", "0"][..],
            "a thread count must be from 1 to 4096",
        ),
        (
            &["--threads", "1,4097"],
            "a thread count must be from 1 to 4096",
        ),
        (
            &["--queue-depths", "0"],
            "a queue depth must be from 1 to 4096",
        ),
        (
            &["--queue-depths", "100000"],
            "a queue depth must be from 1 to 4096",
        ),
        (&["--nvme-sizes", "1B"], "multiple of 512 bytes"),
        (&["--nvme-sizes", "1GiB"], "at most 256MiB"),
        (&["--nvme-bytes", "4KiB"], "at least 1MiB"),
        (&["--nvme-bytes", "4MiB"], "less than one 8MiB block"),
        (
            &["--nvme-sizes", "1MiB,1MiB"],
            "--nvme-sizes lists 1MiB twice",
        ),
        (
            &["--queue-depths", "16,16"],
            "--queue-depths lists 16 twice",
        ),
        (
            &["--host-sizes", "4MiB,4MiB"],
            "--host-sizes lists 4MiB twice",
        ),
        (&["--threads", "1,1"], "--threads lists 1 twice"),
        (&["--paths", "h2d,h2d"], "--paths lists h2d twice"),
        (&["--drives", "x,x"], "--drives lists `x` twice"),
    ] {
        let mut full = vec!["profile"];
        full.extend_from_slice(args);
        let (o, left) = run_in_empty_folder(&full);
        one_line_error(&o, 2, needle);
        assert!(left.is_empty(), "{args:?} left {left:?}");
    }
}

#[test]
fn a_drive_or_target_that_is_not_there_is_refused_before_anything_is_created() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("no-such-dir").join("x");
    let missing = missing.to_str().unwrap();
    // Named drives and targets are checked whatever --paths keeps; a drive named for SPDK is
    // refused under its own flag, with --drives or without.
    for (args, flag) in [
        (
            &["--paths", "nvme_read", "--drives", "NO-SUCH-SERIAL"][..],
            "--drives: ",
        ),
        (&["--drives", "/dev/nvme999n1"], "--drives: "),
        (
            &["--paths", "host_ram", "--drives", "NO-SUCH-SERIAL"],
            "--drives: ",
        ),
        (
            &["--paths", "host_ram", "--drives", "0000:fe:1f.7"],
            "--drives: ",
        ),
        (&["--spdk-drives", "NO-SUCH-SERIAL"], "--spdk-drives: "),
        (
            &["--paths", "nvme_read", "--spdk-drives", "/dev/nvme999n1"],
            "--spdk-drives: ",
        ),
    ] {
        let mut full = vec!["profile"];
        full.extend_from_slice(args);
        let (o, left) = run_in_empty_folder(&full);
        one_line_error(&o, 1, flag);
        assert!(
            stderr(&o).contains("names no NVMe drive here"),
            "{}",
            stderr(&o)
        );
        assert!(left.is_empty(), "{args:?} left {left:?}");
    }
    for paths in ["nvme_read", "host_ram"] {
        let (o, left) = run_in_empty_folder(&["profile", "--paths", paths, "--target", missing]);
        one_line_error(&o, 1, "no-such-dir does not exist");
        assert!(left.is_empty(), "{paths}: left {left:?}");
    }
    // A missing path under /dev is a mistyped device, not a file to create.
    let dev = "/dev/hwc-no-such-device";
    let (o, left) = run_in_empty_folder(&["profile", "--paths", "nvme_read", "--target", dev]);
    one_line_error(&o, 1, "no such device");
    assert!(left.is_empty() && !Path::new(dev).exists(), "left {left:?}");
    assert!(!d.path().join("no-such-dir").exists());
}

#[test]
fn thread_counts_and_sizes_a_node_cannot_run_are_waived_with_the_reason() {
    // The 2-CPU snapshot, whose node 0 has 5.0 GiB of memory.
    let Some(fixtures) = fixtures() else {
        return;
    };
    let root = fixtures.join("cpu-vm-2core");
    let o = run(&[
        "profile",
        "--dry-run",
        "--fsroot",
        root.to_str().unwrap(),
        "--paths",
        "host_ram",
        "--threads",
        "1,3",
        "--host-sizes",
        "4MiB,1000GiB",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    let cases: Vec<&str> = s
        .lines()
        .filter(|l| l.trim_start().starts_with("host_ram/"))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        cases,
        [
            "host_ram/host-memcpy/n0-n0/4MiB/t1",
            "host_ram/host-streaming/n0-n0/4MiB/t1"
        ]
    );
    assert!(
        s.contains("waived: n0-n0, 3 threads: node 0 has 2 CPUs: 3 copy threads need a CPU each"),
        "{s}"
    );
    assert!(
        s.contains(
            "waived: n0-n0, 1000GiB: the source and destination buffers of 1000GiB would take \
             2000.0 GiB of node 0's 5.0 GiB of memory"
        ),
        "{s}"
    );
}

#[test]
fn a_run_whose_thread_count_no_node_has_says_why_in_its_files() {
    // More threads than this machine has CPUs: nothing to measure, and the profile says why.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = (cpus + 1).to_string();
    let out = tempfile::tempdir().unwrap();
    let o = run(&[
        "profile",
        "-o",
        out.path().to_str().unwrap(),
        "--paths",
        "host_ram",
        "--threads",
        &threads,
        "--host-sizes",
        "1MiB",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("0 measured, "), "{}", stdout(&o));
    let yaml = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "yaml"))
        .unwrap();
    let profile = hwc_profile::from_yaml(&std::fs::read_to_string(yaml).unwrap()).unwrap();
    let scope = format!("n0-n0, {threads} threads");
    let w = profile
        .waived
        .iter()
        .find(|w| w.scope.as_deref() == Some(scope.as_str()))
        .unwrap_or_else(|| panic!("no waiver {scope}: {:?}", profile.waived));
    assert!(w.reason.contains("CPU"), "{}", w.reason);
}

#[test]
fn no_subcommand_says_one_is_required_and_lists_them() {
    let o = run(&[]);
    one_line_error(
        &o,
        2,
        "a subcommand is required: detect, profile, report, merge, serve",
    );
}

#[test]
fn engines_lists_every_engine_with_what_it_needs_and_whether_it_runs_here() {
    let o = run(&["engines", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let ids: Vec<&str> = listed.iter().map(|e| e["id"].as_str().unwrap()).collect();
    for id in ["host-memcpy", "host-streaming", "cuda-copy", "io-uring"] {
        assert!(ids.contains(&id), "{ids:?}");
    }
    let cuda = listed.iter().find(|e| e["id"] == "cuda-copy").unwrap();
    assert_eq!(cuda["needs"]["gpu"], true, "{cuda}");
    // Whether it can run here is the planner's judgement of this machine: with no GPU, why not.
    let gpu = Path::new("/proc/driver/nvidia/gpus").exists();
    assert_eq!(cuda["blocked"].is_null(), gpu, "{cuda}");
    let text = stdout(&run(&["engines"]));
    assert!(text.contains("host-memcpy  C library memcpy"), "{text}");
    assert!(text.contains("    here     "), "{text}");
}

#[test]
fn a_plan_narrowed_to_one_engine_waives_the_paths_only_others_measure() {
    let Some(fixtures) = fixtures() else {
        return;
    };
    let h200 = fixtures.join("h200-pcie-vm");
    let o = run(&[
        "profile",
        "--dry-run",
        "--fsroot",
        h200.to_str().unwrap(),
        "--engines",
        "host-memcpy",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let plan = stdout(&o);
    assert!(plan.contains("host_ram/host-memcpy/"), "{plan}");
    assert!(!plan.contains("host-streaming/"), "{plan}");
    assert!(
        plan.contains("no engine selected measures h2d (its engines: cuda-copy"),
        "{plan}"
    );
}

#[test]
fn a_run_configuration_is_the_whole_run_and_a_bad_one_is_one_line() {
    let d = tempfile::tempdir().unwrap();
    let config = d.path().join("run.json");
    let c = config.to_str().unwrap();
    // Beside the flags it replaces: a bad command line.
    let o = run(&["profile", "--run-config", c, "--quick"]);
    one_line_error(&o, 2, "--run-config holds the whole run");
    let o = run(&["profile", "--run-config", c]);
    one_line_error(&o, 1, "cannot read the run configuration");
    std::fs::write(&config, br#"{"output_dir":"x","thread":[1]}"#).unwrap();
    let o = run(&["profile", "--run-config", c]);
    one_line_error(&o, 1, "is not a run configuration: unknown field `thread`");
    // Checked as the flags are.
    let out = d.path().join("out");
    let bad = serde_json::json!({"output_dir": out, "threads": [0]});
    std::fs::write(&config, bad.to_string()).unwrap();
    let o = run(&["profile", "--run-config", c]);
    one_line_error(
        &o,
        1,
        "--threads: `0`: a thread count must be from 1 to 4096",
    );
    assert!(!out.exists(), "a refused run makes nothing");
}
