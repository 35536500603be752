//! End-to-end: every output path a user names (`qualify --junit`, `report -o`, `profile -o`)
//! through the real binary. Something there that is not a regular file is refused before any
//! work and nothing is created; a write that fails leaves no temp file behind.
//!
//! Failed writes are forced without root or a mount: the child runs under a small
//! `RLIMIT_FSIZE`, so a write past the limit fails with EFBIG ("File too large") exactly where a
//! full disk would fail with ENOSPC. The binary ignores `SIGXFSZ` itself (the default would kill
//! it mid-write); the child is started both with it ignored and with the default. Where the
//! tests run as root, a small tmpfs stands in for a full disk.

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
    limited(args, max_bytes, true)
}

/// Run with every regular file the child writes capped at `max_bytes`; `SIGXFSZ` ignored as the
/// child starts, or left at its default (which kills a process writing past the limit, as
/// `ulimit -f` in a shell does, unless the process ignores it itself).
fn limited(args: &[&str], max_bytes: u64, ignore_sigxfsz: bool) -> Output {
    let mut cmd = bin();
    cmd.args(args);
    // SAFETY: between fork and exec the closure only calls `signal` and `setrlimit`, both
    // async-signal-safe, and allocates nothing. An ignored signal stays ignored across exec, so
    // the binary gets EFBIG from a write past the limit instead of being killed by SIGXFSZ.
    unsafe {
        cmd.pre_exec(move || {
            let disposition = if ignore_sigxfsz {
                libc::SIG_IGN
            } else {
                libc::SIG_DFL
            };
            if libc::signal(libc::SIGXFSZ, disposition) == libc::SIG_ERR {
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

/// A failed run's last line is its error; the lines before it are its progress (`[i/N] …`) and
/// warnings.
fn last_line_error(o: &Output, needle: &str) -> String {
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(o));
    let e = stderr(o);
    let lines: Vec<&str> = e.lines().collect();
    let (last, before) = lines.split_last().expect("an error line");
    assert!(last.starts_with("hwceiling: error: "), "{e}");
    assert!(last.contains(needle), "{e}");
    for l in before {
        assert!(
            l.starts_with('[') || l.starts_with("hwceiling: warning: "),
            "not progress or a warning: {l}\n{e}"
        );
    }
    last.to_string()
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
    let e = last_line_error(&o, "File too large");
    assert!(
        e.contains("cannot write ") && e.contains("hardware_raw_") && !e.contains(".tmp-"),
        "{e}"
    );
    assert!(
        e.ends_with("its figures are only in the lines printed above"),
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
    let files = names.iter().filter(|n| !n.starts_with("charts-")).count();
    assert_eq!(files, 3, "{names:?}");
    // The command line is recorded, the byte that is not UTF-8 replaced.
    let profile = names.iter().find(|n| n.ends_with(".yaml")).unwrap();
    let p = hwc_profile::read_profile(&dir.join(profile)).unwrap();
    assert!(
        p.provenance.command_line.contains("nu\u{fffd}"),
        "{}",
        p.provenance.command_line
    );
}

#[test]
fn a_file_size_limit_fails_report_o_in_one_line_instead_of_killing_it() {
    // `ulimit -f` in a shell: SIGXFSZ at its default would kill the process mid-write, leaving
    // `.r.md.tmp-<pid>`. The binary ignores it, so the write fails, is said, and is cleaned up.
    let d = tempfile::tempdir().unwrap();
    let (profile, _) = profile_and_spec(d.path());
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let md = out.join("r.md");
    let o = limited(&["report", s(&profile), "-o", s(&md)], 100, false);
    let e = one_line_error(&o, "File too large");
    assert!(e.contains(&format!("cannot write {}", s(&md))), "{e}");
    assert!(names_in(&out).is_empty(), "{:?}", names_in(&out));
}

/// The cases a running (or raw) record holds.
fn cases_in_record(path: &Path) -> usize {
    let r: hwc_profile::RunRecord = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    r.results.len() + r.waived.len() + r.failures.len()
}

/// The number after `prefix` in `s`.
fn number_after(s: &str, prefix: &str) -> usize {
    let at = s
        .find(prefix)
        .unwrap_or_else(|| panic!("no `{prefix}` in {s}"))
        + prefix.len();
    s[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after `{prefix}` in {s}"))
}

#[test]
fn a_failed_save_of_the_running_record_is_told_at_once_and_the_error_counts_what_is_on_disk() {
    let d = tempfile::tempdir().unwrap();
    // How large the whole record of a null run is here (its topology is this machine's).
    let full = d.path().join("full");
    let o = run(&["profile", "--engines", "null", "-o", s(&full)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let raw = names_in(&full)
        .into_iter()
        .find(|n| n.starts_with("hardware_raw_"))
        .unwrap();
    let planned = cases_in_record(&full.join(&raw));
    let limit = std::fs::metadata(full.join(&raw)).unwrap().len() / 2;

    // Capped at half of that, the running record saves while it is small, then fails: as a disk
    // that fills during the run.
    let dir = d.path().join("p");
    let o = limited(
        &["profile", "--engines", "null", "-o", s(&dir)],
        limit,
        false,
    );
    let last = last_line_error(&o, "File too large");
    let e = stderr(&o);
    let lines: Vec<&str> = e.lines().collect();
    let warned = lines
        .iter()
        .position(|l| l.starts_with("hwceiling: warning: the running record was not saved"))
        .unwrap_or_else(|| panic!("no warning:\n{e}"));
    let warning = lines[warned];
    let after = number_after(warning, "after case ");
    assert!(after > 1 && after < planned, "{warning}");
    // At once: right after the case whose save failed, before the next case's line.
    assert!(
        lines[warned - 1].starts_with(&format!("[{after}/{planned}] ")),
        "{e}"
    );
    assert!(
        lines[warned + 1].starts_with(&format!("[{}/{planned}] ", after + 1)),
        "{e}"
    );
    assert!(
        warning.contains("File too large (os error 27)"),
        "{warning}"
    );
    let held = number_after(warning, "on disk holds ");
    assert_eq!(held, after - 1, "{warning}");
    // Said once for one cause, not after every case.
    assert_eq!(e.matches("hwceiling: warning:").count(), 1, "{e}");

    // The end says how many cases the record on disk holds, and it does hold them.
    let partial = raw.replace(".json", ".partial.json");
    assert!(
        last.contains(&format!(
            "no profile written: {} holds only {held} of the {planned} cases that finished",
            s(&dir.join(&partial))
        )),
        "{last}"
    );
    assert_eq!(names_in(&dir), std::slice::from_ref(&partial));
    assert_eq!(cases_in_record(&dir.join(&partial)), held);
}

/// A tmpfs of `size` mounted at a new folder of `parent`, unmounted when dropped; None (with the
/// reason printed) where this process cannot mount one.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(parent: &Path, size: &str) -> Option<Tmpfs> {
        use std::ffi::CString;
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            println!("SKIPPED: mounting a small tmpfs needs root");
            return None;
        }
        let dir = parent.join(format!("tmpfs-{size}"));
        std::fs::create_dir(&dir).unwrap();
        let target = CString::new(s(&dir)).unwrap();
        let options = CString::new(format!("size={size}")).unwrap();
        // SAFETY: every pointer is a NUL-terminated string that outlives the call.
        let r = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                options.as_ptr().cast(),
            )
        };
        if r != 0 {
            println!(
                "SKIPPED: cannot mount a tmpfs: {}",
                std::io::Error::last_os_error()
            );
            return None;
        }
        Some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let target = std::ffi::CString::new(s(&self.0)).unwrap();
        // SAFETY: a NUL-terminated path that outlives the call; MNT_DETACH cannot block on a
        // busy mount.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

#[test]
fn a_run_whose_files_cannot_fit_is_refused_before_it_measures() {
    let d = tempfile::tempdir().unwrap();
    let run_in = |dir: &Path| {
        run(&[
            "profile",
            "--engines",
            "null",
            "--paths",
            "host_ram",
            "-o",
            s(dir),
        ])
    };
    // With room for it (1 MiB), the run is not refused: the estimate is not wildly high. Its
    // plan (host RAM's cases: how many depends on this machine's last-level cache) is what the
    // refusal below counts.
    let Some(roomy) = Tmpfs::mount(d.path(), "1m") else {
        return;
    };
    let dir = roomy.0.join("p");
    let o = run_in(&dir);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let files: Vec<String> = names_in(&dir)
        .into_iter()
        .filter(|n| !n.starts_with("charts-"))
        .collect();
    assert_eq!(files.len(), 3, "{files:?}");
    let raw = files
        .iter()
        .find(|n| n.starts_with("hardware_raw_"))
        .unwrap();
    let raw: hwc_profile::RunRecord =
        serde_json::from_slice(&std::fs::read(dir.join(raw)).unwrap()).unwrap();
    let planned = raw.plan.cases.len();
    assert!(planned >= 8, "{planned}");
    drop(roomy);
    // The same run's files and running record take more than 128 KiB at their peak.
    let Some(small) = Tmpfs::mount(d.path(), "128k") else {
        return;
    };
    let dir = small.0.join("p");
    let o = run_in(&dir);
    let e = one_line_error(&o, "not enough room in ");
    assert!(
        e.contains(&format!("not enough room in {}: ", s(&dir)))
            && e.contains(&format!("this run of {planned} case(s) writes up to about"))
            && e.contains("-o DIR"),
        "{e}"
    );
    assert!(names_in(&dir).is_empty(), "{:?}", names_in(&dir));
}

/// The charts go into a folder named after the run, beside the report, and the report links
/// each of them by a relative path that resolves; a second run the same day gets its own folder.
#[test]
fn the_report_links_every_chart_written_beside_it() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("p");
    for n in 1..=2 {
        let o = run(&["profile", "--engines", "null", "-o", s(&dir)]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let names = names_in(&dir);
        let mut folders: Vec<&String> = names.iter().filter(|n| n.starts_with("charts-")).collect();
        // `charts-<date>` before `charts-<date>-2`.
        folders.sort_by_key(|f| f.len());
        let Some(charts) = folders.get(n - 1) else {
            // A machine whose NUMA nodes are not reported has no topology to draw, and a null
            // run no sweep.
            assert!(names.iter().all(|n| !n.starts_with("charts-")), "{names:?}");
            return;
        };
        // The run's report: its name carries the folder's date and number.
        let report = format!(
            "hardware-ceiling-{}.md",
            charts.strip_prefix("charts-").unwrap()
        );
        let md = std::fs::read_to_string(dir.join(&report)).unwrap();
        let svgs = names_in(&dir.join(charts));
        assert!(!svgs.is_empty());
        for svg in &svgs {
            let href = format!("]({charts}/{svg})");
            assert_eq!(md.matches(&href).count(), 1, "{href} in {report}");
            assert!(std::fs::read_to_string(dir.join(charts).join(svg))
                .unwrap()
                .starts_with("<svg"));
        }
        let links: usize = md
            .lines()
            .filter(|l| l.starts_with("Charts: "))
            .map(|l| l.matches("](").count())
            .sum();
        assert_eq!(
            links,
            svgs.len(),
            "each chart linked once, on its section's line"
        );
    }
}
