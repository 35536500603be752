//! `hwceiling merge`: the write ceilings of an earlier write run of the same drives carried into
//! a read-only profile, once, marked with their run; anything else is one line and no file.

use hwc_model::{CarriedFrom, CeilingSource, Profile};
use std::path::Path;
use std::process::{Command, Output};

const OLDER: &str = "hardware_profile_2026-11-28.yaml";
const NEWER: &str = "hardware_profile_2026-11-29.yaml";
const WRITE_KEY: &str = "nvme_raw_1drive_write_gbps";
const MEASUREMENT: &str = "nvme_write/io-uring/1drive/1MiB/qd32";

fn merge(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hwceiling"))
        .current_dir(dir)
        .arg("merge")
        .args(args)
        .output()
        .expect("run hwceiling")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// A complete profile of node1 with drives of these serials; with `write_gbps`, a write run on
/// the first, whose one-drive write ceiling is the median of a measurement it holds.
fn put(dir: &Path, name: &str, finished_at: &str, serials: &[&str], write_gbps: Option<f64>) {
    let p = hwc_testkit::ceilings_profile("node1", finished_at, &[("warm_gpu0_peak_gbps", 55.0)]);
    let mut p = hwc_testkit::with_nvme(p, serials, write_gbps);
    if let Some(gbps) = write_gbps {
        let mut m = hwc_testkit::h2d_measurement(MEASUREMENT, gbps, 0.5, 10);
        m.path = hwc_model::PathId::NvmeWrite;
        p.measurements.push(m);
        p = hwc_testkit::with_sources(p, &[(WRITE_KEY, CeilingSource::measured(MEASUREMENT))]);
    }
    std::fs::write(dir.join(name), hwc_profile::to_yaml(&p).unwrap()).unwrap();
}

fn read(path: &Path) -> Profile {
    hwc_profile::read_profile(path).unwrap()
}

fn one_line_error(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(o));
    let e = stderr(o);
    assert_eq!(e.trim_end().lines().count(), 1, "not one line: {e}");
    assert!(e.contains(needle), "{e}");
}

#[test]
fn carries_the_write_ceilings_of_the_same_drives_marked_with_their_run() {
    let d = tempfile::tempdir().unwrap();
    put(
        d.path(),
        OLDER,
        "2026-11-28T10:00:00+00:00",
        &["S1", "S2"],
        Some(5.0),
    );
    put(
        d.path(),
        NEWER,
        "2026-11-29T10:00:00+00:00",
        &["S1", "S2"],
        None,
    );
    let o = merge(d.path(), &[NEWER, "--from", OLDER, "-o", "merged.yaml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("2 write ceiling(s) carried from hardware_profile_2026-11-28.yaml")
            && said.contains(WRITE_KEY),
        "{said}"
    );
    let (newer, merged) = (
        read(&d.path().join(NEWER)),
        read(&d.path().join("merged.yaml")),
    );
    let from = CarriedFrom {
        file: OLDER.into(),
        finished_at: "2026-11-28T10:00:00+00:00".into(),
        drives: vec!["S1".into()],
    };
    for key in [WRITE_KEY, "nvme_optimal_write_chunk_bytes"] {
        let r = merged.ceiling_record(key).unwrap();
        assert_eq!(r.carried_from.as_ref(), Some(&from), "{key}");
    }
    assert_eq!(merged.ceilings[WRITE_KEY], 5.0);
    // Its source reads in the merged file: the measurement came with it.
    match merged.ceiling_source(WRITE_KEY).unwrap() {
        hwc_model::CeilingOrigin::Measured(m) => assert_eq!(m.key, MEASUREMENT),
        other => panic!("{other:?}"),
    }
    // The newer run's own figures are as they were, not marked.
    for (k, v) in &newer.ceilings {
        assert_eq!(merged.ceilings[k], *v);
        assert_eq!(merged.ceiling_records[k].carried_from, None);
    }
    assert_eq!(merged.provenance, newer.provenance);

    // In place: PROFILE itself replaced by the merged profile.
    let o = merge(d.path(), &[NEWER, "--from", OLDER, "-o", NEWER]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read(&d.path().join(NEWER)), merged);
    // Merged again: it has write ceilings of its own now.
    let o = merge(d.path(), &[NEWER, "--from", OLDER, "-o", NEWER]);
    one_line_error(&o, "nothing to carry: the newer profile has write ceilings");
}

#[test]
fn other_drives_bad_input_or_an_existing_output_write_nothing() {
    let d = tempfile::tempdir().unwrap();
    put(
        d.path(),
        OLDER,
        "2026-11-28T10:00:00+00:00",
        &["S1"],
        Some(5.0),
    );
    put(d.path(), NEWER, "2026-11-29T10:00:00+00:00", &["S3"], None);
    let before = std::fs::read(d.path().join(NEWER)).unwrap();
    let o = merge(d.path(), &[NEWER, "--from", OLDER, "-o", "out.yaml"]);
    one_line_error(
        &o,
        "drive S1, which it wrote, is not among this run's drives",
    );
    let o = merge(d.path(), &[NEWER, "--from", OLDER, "-o", NEWER]);
    one_line_error(&o, "nothing written");
    assert_eq!(std::fs::read(d.path().join(NEWER)).unwrap(), before);

    std::fs::write(
        d.path().join("broken.yaml"),
        "schema_version: 2\nplatform: [oops\n",
    )
    .unwrap();
    for (args, needle) in [
        (["missing.yaml", "--from", OLDER], "missing.yaml"),
        ([NEWER, "--from", "missing.yaml"], "missing.yaml"),
        (["broken.yaml", "--from", OLDER], "broken.yaml"),
        // The older run read-only too: nothing to carry.
        (
            [NEWER, "--from", NEWER],
            "the older profile has no write ceilings",
        ),
    ] {
        let o = merge(d.path(), &[args[0], args[1], args[2], "-o", "out.yaml"]);
        one_line_error(&o, needle);
    }
    // A write run that finished after the read-only one is not carried back into it.
    put(
        d.path(),
        "later.yaml",
        "2026-11-30T10:00:00+00:00",
        &["S1"],
        Some(6.0),
    );
    put(d.path(), NEWER, "2026-11-29T10:00:00+00:00", &["S1"], None);
    let o = merge(d.path(), &[NEWER, "--from", "later.yaml", "-o", "out.yaml"]);
    one_line_error(
        &o,
        "later.yaml finished after hardware_profile_2026-11-29.yaml",
    );
    std::fs::remove_file(d.path().join("later.yaml")).unwrap();
    // An output that exists (and is not PROFILE) is never overwritten.
    std::fs::write(d.path().join("taken.yaml"), "mine").unwrap();
    let o = merge(d.path(), &[NEWER, "--from", OLDER, "-o", "taken.yaml"]);
    one_line_error(&o, "taken.yaml");
    assert_eq!(std::fs::read(d.path().join("taken.yaml")).unwrap(), b"mine");
    let mut left = hwc_testkit::names_in(d.path());
    left.retain(|n| n != "broken.yaml" && n != "taken.yaml");
    assert_eq!(left, [OLDER, NEWER]);
}
