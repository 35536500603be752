//! End-to-end: every output path a user names (`qualify --junit`, `report -o`, `profile -o`)
//! through the real binary. Something there that is not a regular file is refused before any
//! work and nothing is created; a write that fails leaves no temp file behind.
//!
//! Failed writes are forced without root or a mount: the child runs under a small
//! `RLIMIT_FSIZE` with `SIGXFSZ` ignored, so a write past the limit fails with EFBIG ("File too
//! large") exactly where a full disk would fail with ENOSPC.

use hwc_testkit::{mkfifo, names_in};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hwceiling"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run hwceiling")
}

/// Run with every regular file the child writes capped at `max_bytes`.
fn run_with_file_size_limit(args: &[&str], max_bytes: u64) -> Output {
    let mut cmd = bin();
    cmd.args(args);
    // SAFETY: between fork and exec the closure only calls `signal` and `setrlimit`, both
    // async-signal-safe, and allocates nothing. An ignored signal stays ignored across exec, so
    // the binary gets EFBIG from a write past the limit instead of being killed by SIGXFSZ.
    unsafe {
        cmd.pre_exec(move || {
            if libc::signal(libc::SIGXFSZ, libc::SIG_IGN) == libc::SIG_ERR {
                return Err(std::io::Error::last_os_error());
            }
            let limit = libc::rlimit {
                rlim_cur: max_bytes,
                rlim_max: max_bytes,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().expect("run hwceiling")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn one_line_error(o: &Output, needle: &str) -> String {
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(o));
    let e = stderr(o);
    assert_eq!(e.trim_end().lines().count(), 1, "not one line: {e}");
    assert!(e.starts_with("hwceiling: error: "), "{e}");
    assert!(e.contains(needle), "{e}");
    e
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A good profile and a spec it passes, in `dir`.
fn profile_and_spec(dir: &Path) -> (PathBuf, PathBuf) {
    let p = hwc_testkit::ceilings_profile(
        "node",
        "2026-11-29T10:05:00+00:00",
        &[("warm_gpu0_gbps", 50.0)],
    );
    let profile = dir.join("good.yaml");
    std::fs::write(&profile, hwc_profile::to_yaml(&p).unwrap()).unwrap();
    let spec = dir.join("spec.yaml");
    std::fs::write(
        &spec,
        "spec_version: 1\nrules:\n  - path: warm_gpu0_gbps\n    min_gbps: 1\n",
    )
    .unwrap();
    (profile, spec)
}

/// An output folder holding, under the names `fifo.out`, `adir.out`, `link.out` and
/// `dangling.out`, each kind of entry that is not a regular file (a FIFO stands in for a device
/// node: both are refused by the same check, and tests never touch real devices). Returns each
/// with the words its error must hold.
fn not_regular_files(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    let target = dir.join("target.out");
    std::fs::write(&target, b"kept").unwrap();
    let fifo = dir.join("fifo.out");
    mkfifo(&fifo);
    let folder = dir.join("adir.out");
    std::fs::create_dir(&folder).unwrap();
    let link = dir.join("link.out");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let dangling = dir.join("dangling.out");
    std::os::unix::fs::symlink(dir.join("nowhere.out"), &dangling).unwrap();
    vec![
        (fifo, "is a FIFO (named pipe), not a regular file"),
        (folder, "is a directory, not a regular file"),
        (link, "is a symbolic link"),
        (dangling, "is a symbolic link"),
    ]
}

/// Each of `cases` (an output path in `out` and the words its error must hold), tried with
/// every argument list `tries` gives for it: refused with one line (the first naming the path),
/// nothing on stdout, the entry left as it was and nothing created beside it.
fn refused_untouched<'a>(
    out: &Path,
    cases: &'a [(PathBuf, &'static str)],
    tries: impl Fn(&'a str) -> Vec<Vec<&'a str>>,
) {
    let before = names_in(out);
    for (path, says) in cases {
        let kind = std::fs::symlink_metadata(path).unwrap().file_type();
        for (i, args) in tries(s(path)).iter().enumerate() {
            let o = run(args);
            let e = one_line_error(&o, says);
            if i == 0 {
                assert!(e.contains(s(path)), "{e}");
            }
            assert!(o.stdout.is_empty(), "refused before any output");
        }
        assert_eq!(std::fs::symlink_metadata(path).unwrap().file_type(), kind);
        assert_eq!(names_in(out), before, "nothing created beside it");
    }
}

#[test]
fn qualify_junit_refuses_a_fifo_directory_or_link_before_any_work() {
    let d = tempfile::tempdir().unwrap();
    let (profile, spec) = profile_and_spec(d.path());
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let cases = not_regular_files(&out);
    // The second try: before any work, a spec that does not exist is not even read.
    refused_untouched(&out, &cases, |path| {
        vec![
            vec!["qualify", s(&profile), "--spec", s(&spec), "--junit", path],
            vec![
                "qualify",
                s(&profile),
                "--spec",
                "/nonexistent-spec.yaml",
                "--junit",
                path,
            ],
        ]
    });
    assert_eq!(std::fs::read(out.join("target.out")).unwrap(), b"kept");
    assert!(names_in(&out.join("adir.out")).is_empty());
    // A missing folder is refused up front too.
    let o = run(&[
        "qualify",
        s(&profile),
        "--spec",
        s(&spec),
        "--junit",
        s(&d.path().join("missing/junit.xml")),
    ]);
    one_line_error(&o, "no folder");

    // A regular file is replaced, as before.
    let junit = out.join("junit.xml");
    std::fs::write(&junit, b"old").unwrap();
    let o = run(&[
        "qualify",
        s(&profile),
        "--spec",
        s(&spec),
        "--junit",
        s(&junit),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&junit)
        .unwrap()
        .contains("<testsuite"));
}

#[test]
fn report_output_refuses_anything_already_there_before_reading_the_profile() {
    let d = tempfile::tempdir().unwrap();
    let (profile, _) = profile_and_spec(d.path());
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let mut cases = not_regular_files(&out);
    cases.push((out.join("target.out"), "already exists"));
    // The second try: before reading the profile (one that does not exist).
    refused_untouched(&out, &cases, |path| {
        vec![
            vec!["report", s(&profile), "-o", path],
            vec!["report", "/nonexistent.yaml", "-o", path],
        ]
    });
    assert_eq!(std::fs::read(out.join("target.out")).unwrap(), b"kept");
}

#[test]
fn profile_output_folder_that_is_a_fifo_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("profiling");
    mkfifo(&fifo);
    let o = run(&["profile", "-o", s(&fifo), "--paths", "host_ram"]);
    let e = one_line_error(&o, "is a FIFO (named pipe), not a folder");
    assert!(e.contains(s(&fifo)), "{e}");
    assert_eq!(names_in(d.path()), ["profiling"]);
}

#[test]
fn failed_writes_of_report_and_junit_leave_no_temp_file() {
    let d = tempfile::tempdir().unwrap();
    let (profile, spec) = profile_and_spec(d.path());
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    // Both files are well over 100 bytes.
    let md = out.join("report.md");
    let o = run_with_file_size_limit(&["report", s(&profile), "-o", s(&md)], 100);
    let e = one_line_error(&o, "File too large");
    assert!(e.contains(&format!("cannot write {}", s(&md))), "{e}");
    assert!(names_in(&out).is_empty(), "{:?}", names_in(&out));

    let junit = out.join("junit.xml");
    let args = [
        "qualify",
        s(&profile),
        "--spec",
        s(&spec),
        "--junit",
        s(&junit),
    ];
    let o = run_with_file_size_limit(&args, 100);
    let e = one_line_error(&o, "File too large");
    assert!(e.contains(&format!("cannot write {}", s(&junit))), "{e}");
    assert!(names_in(&out).is_empty(), "{:?}", names_in(&out));
    // An existing JUnit file is left as it was.
    std::fs::write(&junit, b"old").unwrap();
    one_line_error(&run_with_file_size_limit(&args, 100), "File too large");
    assert_eq!(names_in(&out), ["junit.xml"]);
    assert_eq!(std::fs::read(&junit).unwrap(), b"old");
}

#[test]
fn a_profile_whose_files_cannot_be_written_leaves_no_temp_file() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("profiling");
    let args = [
        "profile",
        "-o",
        s(&dir),
        "--paths",
        "host_ram",
        "--host-sizes",
        "1MiB",
        "--threads",
        "1",
        "--quick",
        "--allow-contended",
    ];
    // The folder's write probe (2 bytes) fails: refused before measuring, the probe removed.
    let o = run_with_file_size_limit(&args, 1);
    one_line_error(&o, "is not writable");
    assert!(names_in(&dir).is_empty(), "{:?}", names_in(&dir));
    // The probe passes; every running record and the raw JSON (each far over 512 bytes) fail,
    // as on a full disk. The run ends with the raw record's error, and no temp file is left.
    let o = run_with_file_size_limit(&args, 512);
    let e = one_line_error(&o, "File too large");
    assert!(
        e.contains("cannot write ") && e.contains("hardware_raw_") && !e.contains(".tmp-"),
        "{e}"
    );
    assert!(names_in(&dir).is_empty(), "{:?}", names_in(&dir));
}

#[test]
fn a_profile_folder_named_in_bytes_that_are_not_utf8_is_written() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join(OsStr::from_bytes(b"nu\xff"));
    let o = bin()
        .arg("profile")
        .arg("-o")
        .arg(&dir)
        .args([
            "--paths",
            "host_ram",
            "--host-sizes",
            "1MiB",
            "--threads",
            "1",
        ])
        .args(["--quick", "--allow-contended"])
        .output()
        .expect("run hwceiling");
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let names = names_in(&dir);
    assert_eq!(names.len(), 3, "{names:?}");
    // The command line is recorded, the byte that is not UTF-8 replaced.
    let profile = names.iter().find(|n| n.ends_with(".yaml")).unwrap();
    let p = hwc_profile::read_profile(&dir.join(profile)).unwrap();
    assert!(
        p.provenance.command_line.contains("nu\u{fffd}"),
        "{}",
        p.provenance.command_line
    );
}
