//! What the user reads, through the real binary: errors in the user's terms (never a parser's
//! option names or debug output), naming the file or flag to change; and a run's progress where
//! stderr is not a terminal (CI logs, systemd).

use hwc_model::PathId;
use std::path::Path;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hwceiling"))
        .args(args)
        .output()
        .expect("run hwceiling")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// One line on stderr with exit `code`; it is returned.
fn one_line(o: &Output, code: i32) -> String {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "not one line: {e}");
    e.trim_end().to_string()
}

/// Words of the libraries, not the user's.
const LEAKS: [&str; 6] = [
    "DuplicateKeyPolicy",
    "Options",
    "budget breached",
    "Nodes {",
    "Some(",
    "..=",
];

fn no_leak(e: &str) {
    for w in LEAKS {
        assert!(!e.contains(w), "`{w}` in: {e}");
    }
}

#[test]
fn yaml_errors_say_what_is_wrong_in_the_users_words_and_name_the_file() {
    let d = tempfile::tempdir().unwrap();
    let dup = d.path().join("dup.yaml");
    std::fs::write(&dup, "schema_version: 1\nschema_version: 1\nwarnings: []\n").unwrap();
    let e = one_line(&run(&["report", s(&dup)]), 1);
    no_leak(&e);
    assert_eq!(
        e,
        format!(
            "hwceiling: error: {}: not a valid hwceiling profile: line 2 column 1: the key \
             `schema_version` appears twice in one mapping: keep one of them",
            s(&dup)
        )
    );

    let mut text = String::from("schema_version: 1\nwarnings: []\nx:\n");
    text.push_str(&" - 1\n".repeat(260_000));
    let big = d.path().join("big.yaml");
    std::fs::write(&big, text).unwrap();
    let e = one_line(&run(&["compare", s(&big), s(&big)]), 1);
    no_leak(&e);
    assert!(
        e.contains(&format!(
            "{}: not a valid hwceiling profile: line ",
            s(&big)
        )) && e.contains("too many values (over 250000) for an hwceiling file"),
        "{e}"
    );

    // A qualify spec is read with the same words.
    let p = hwc_testkit::ceilings_profile("n", "2026-11-29T10:05:00+00:00", &[("a_gbps", 1.0)]);
    let profile = d.path().join("p.yaml");
    std::fs::write(&profile, hwc_profile::to_yaml(&p).unwrap()).unwrap();
    let spec = d.path().join("spec.yaml");
    std::fs::write(&spec, "spec_version: 1\nspec_version: 1\nrules: []\n").unwrap();
    let e = one_line(&run(&["qualify", s(&profile), "--spec", s(&spec)]), 1);
    no_leak(&e);
    assert!(
        e.contains(s(&spec)) && e.contains("the key `spec_version` appears twice"),
        "{e}"
    );
}

#[test]
fn a_seconds_flag_out_of_range_names_the_flag_and_its_range() {
    for (flag, value, says) in [
        (
            "--nvme-gc-write-s",
            "1",
            "the gc-settle test's writes must last from 3 to 86400 seconds (a day)",
        ),
        (
            "--nvme-gc-settle-max-s",
            "90000",
            "the gc-settle test's wait for reads to settle must last from 0 to 86400 seconds",
        ),
    ] {
        let o = run(&[
            "profile",
            "--paths",
            "nvme_write",
            "--nvme-long-tests",
            "gc-settle",
            flag,
            value,
            "--dry-run",
        ]);
        let e = one_line(&o, 2);
        no_leak(&e);
        assert!(e.contains(flag) && e.contains(says), "{e}");
    }
}

#[test]
fn a_run_without_a_terminal_prints_one_line_per_finished_case_as_it_goes() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("p");
    // `output` pipes stderr: no terminal.
    let o = run(&["profile", "--engines", "null", "-o", s(&dir)]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    let cases: Vec<&str> = e.lines().filter(|l| l.starts_with('[')).collect();
    // One line per planned case, in the plan's order: host RAM, then the XXH3 cells of every
    // code path the CPU flags allow (how many of each depends on the machine's cache and CPU
    // count, so the plan in the raw record says).
    let raw = hwc_testkit::names_in(&dir)
        .into_iter()
        .find(|n| n.starts_with("hardware_raw_"))
        .expect("a raw record");
    let raw: hwc_profile::RunRecord =
        serde_json::from_slice(&std::fs::read(dir.join(raw)).unwrap()).unwrap();
    let count = |path: PathId| raw.plan.cases.iter().filter(|c| c.path == path).count();
    let (host, xxh3) = (count(PathId::HostRam), count(PathId::Xxh3));
    assert!(host >= 2 && xxh3 >= 6, "{:?}", raw.plan.cases);
    assert_eq!(cases.len(), raw.plan.cases.len(), "{e}");
    assert_eq!(cases.len(), host + xxh3, "{e}");
    let total = cases.len();
    for (i, line) in cases.iter().enumerate() {
        let path = if i < host { "host_ram" } else { "xxh3" };
        assert!(
            line.starts_with(&format!("[{}/{total}] {path}/null/", i + 1)),
            "{line}"
        );
        assert!(
            line.contains(" GB/s ±") && line.contains("(median, N="),
            "{line}"
        );
    }
}
