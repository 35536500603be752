//! Profiles of schema version 1 (the H200 test machine's, written by the build before the engine
//! axis) through the real binary: they report, compare (with each other and with the same figures
//! in the current schema) and qualify as they did.

use std::path::PathBuf;
use std::process::{Command, Output};

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../profile/tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hwceiling"))
        .args(args)
        .output()
        .expect("run hwceiling")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_version_1_profile_reports_with_its_engines_named() {
    let o = run(&["report", &fixture("v1-h200-a.yaml")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = stdout(&o);
    assert!(
        md.contains("`host_ram/host-streaming/n0-n0/1GiB/t16`"),
        "{md}"
    );
    let engines = md
        .lines()
        .find(|l| l.starts_with("Engines: "))
        .expect("engines named");
    assert!(
        engines.contains("`host-memcpy`") && engines.contains("`host-streaming`"),
        "{engines}"
    );
    assert!(md.contains("| 55.39 (±1.3 %, N=12) |"), "the H2D peak row");
}

#[test]
fn version_1_profiles_compare_with_each_other_and_with_the_current_schema() {
    let (a, b) = (fixture("v1-h200-a.yaml"), fixture("v1-h200-b.yaml"));
    let o = run(&["compare", &a, &b, "--format", "json"]);
    // 1: some figures of these two noisy runs moved more than the tolerance.
    assert!(matches!(o.status.code(), Some(0 | 1)), "{o:?}");
    let old: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = old["rows"].as_array().unwrap();
    assert!(
        rows.len() > 160,
        "every ceiling and measurement: {}",
        rows.len()
    );
    // The second profile written in the current schema compares exactly as it did.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(&b).unwrap();
    let v2 = hwc_profile::to_yaml(&hwc_profile::from_yaml(&text).unwrap()).unwrap();
    let b2 = dir.path().join("b2.yaml");
    std::fs::write(&b2, v2).unwrap();
    let o2 = run(&["compare", &a, b2.to_str().unwrap(), "--format", "json"]);
    assert_eq!(o2.status.code(), o.status.code());
    let new: serde_json::Value = serde_json::from_slice(&o2.stdout).unwrap();
    assert_eq!(new["rows"], old["rows"]);
}

#[test]
fn a_version_1_profile_qualifies_against_the_example_spec() {
    let spec =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/qualify-gpu-nvme-node.yaml");
    let o = run(&[
        "qualify",
        &fixture("v1-h200-a.yaml"),
        "--spec",
        spec.to_str().unwrap(),
    ]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("PASS  gpu0 H2D peak reaches 80 % of its link"),
        "{out}"
    );
}

/// `report -o FILE` writes the charts beside the file and links each of them; to standard
/// output the report has no links (there is no file to put charts beside).
#[test]
fn a_report_written_to_a_file_gets_its_charts_beside_it() {
    let d = tempfile::tempdir().unwrap();
    let md_path = d.path().join("h200.md");
    let o = run(&[
        "report",
        &fixture("v1-h200-a.yaml"),
        "-o",
        md_path.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(&md_path).unwrap();
    let svgs = hwc_testkit::names_in(&d.path().join("h200-charts"));
    for name in [
        "topology.svg",
        "h2d-gpu0-pinned-node0.svg",
        "duplex-gpu0-node0.svg",
    ] {
        assert!(svgs.iter().any(|n| n == name), "{svgs:?}");
    }
    for svg in &svgs {
        assert_eq!(
            md.matches(&format!("](h200-charts/{svg})")).count(),
            1,
            "{svg}"
        );
    }
    let stdout = stdout(&run(&["report", &fixture("v1-h200-a.yaml")]));
    assert!(!stdout.contains("Charts: "));
    // Nothing is written over: the same file again is refused, and no chart is touched.
    let o = run(&[
        "report",
        &fixture("v1-h200-a.yaml"),
        "-o",
        md_path.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
}
