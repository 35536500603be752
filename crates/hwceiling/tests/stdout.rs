//! Standard output that fails, through the real binary: a reader that went away (a pipe whose
//! read end is closed before the command starts, so every write gets EPIPE) ends output quietly
//! with the command's own exit status; `/dev/full` (ENOSPC) is one line on stderr and exit 1;
//! a profile whose files were written is not failed by its summary. Never a panic (exit 101).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Where standard output goes.
#[derive(Clone, Copy, Debug)]
enum Out {
    /// A pipe whose read end is already closed.
    ClosedPipe,
    /// `/dev/full`: every write fails with ENOSPC.
    Full,
}

fn run(args: &[&str], out: Out) -> Output {
    let stdout: Stdio = match out {
        Out::ClosedPipe => {
            let (reader, writer) = std::io::pipe().expect("pipe");
            drop(reader);
            writer.into()
        }
        Out::Full => std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full")
            .into(),
    };
    Command::new(env!("CARGO_BIN_EXE_hwceiling"))
        .args(args)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .expect("run hwceiling")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A reader that went away: the command's own status, and nothing on stderr.
fn quiet(args: &[&str], code: i32) {
    let o = run(args, Out::ClosedPipe);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
    assert_eq!(stderr(&o), "", "{args:?}");
}

/// Any other write error: exit 1 and one line naming standard output and the cause.
fn one_line(args: &[&str]) {
    let o = run(args, Out::Full);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "hwceiling: error: cannot write to standard output: No space left on device (os error 28)\n",
        "{args:?}"
    );
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A profile, a spec it passes and one it fails.
fn files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let p = hwc_testkit::ceilings_profile(
        "node",
        "2026-11-29T10:05:00+00:00",
        &[("warm_gpu0_gbps", 50.0)],
    );
    let profile = dir.join("good.yaml");
    std::fs::write(&profile, hwc_profile::to_yaml(&p).unwrap()).unwrap();
    let spec = |name: &str, min: u32| {
        let path = dir.join(name);
        let text =
            format!("spec_version: 1\nrules:\n  - path: warm_gpu0_gbps\n    min_gbps: {min}\n");
        std::fs::write(&path, text).unwrap();
        path
    };
    (profile, spec("pass.yaml", 1), spec("fail.yaml", 1000))
}

#[test]
fn every_printing_command_ends_quietly_with_its_own_status_when_its_reader_is_gone() {
    let d = tempfile::tempdir().unwrap();
    let (profile, pass, fail) = files(d.path());
    quiet(&["--version"], 0);
    quiet(&["profile", "--help"], 0);
    quiet(&["detect"], 0);
    quiet(&["detect", "--format", "json"], 0);
    quiet(&["engines"], 0);
    quiet(&["report", s(&profile)], 0);
    quiet(&["compare", s(&profile), s(&profile)], 0);
    quiet(
        &[
            "efficiency",
            "--profile",
            s(&profile),
            "--path",
            "warm_gpu0_gbps",
            "--measured-gbps",
            "25",
        ],
        0,
    );
    quiet(&["profile", "--engines", "null", "--dry-run"], 0);
    // In a CI pipe, qualify's verdict is its status still.
    quiet(&["qualify", s(&profile), "--spec", s(&pass)], 0);
    quiet(&["qualify", s(&profile), "--spec", s(&fail)], 1);
}

#[test]
fn every_printing_command_says_a_failed_write_to_standard_output_in_one_line() {
    let d = tempfile::tempdir().unwrap();
    let (profile, pass, _) = files(d.path());
    one_line(&["--help"]);
    one_line(&["detect"]);
    one_line(&["engines", "--format", "yaml"]);
    one_line(&["report", s(&profile)]);
    one_line(&["compare", s(&profile), s(&profile)]);
    one_line(&["qualify", s(&profile), "--spec", s(&pass)]);
    one_line(&["profile", "--engines", "null", "--dry-run"]);
}

#[test]
fn a_profile_whose_files_are_written_is_not_failed_by_its_summary() {
    for out in [Out::ClosedPipe, Out::Full] {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("p");
        let o = run(&["profile", "--engines", "null", "-o", s(&dir)], out);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{out:?}: {e}");
        let names = hwc_testkit::names_in(&dir);
        let files = names.iter().filter(|n| !n.starts_with("charts-")).count();
        assert_eq!(files, 3, "{out:?}: {names:?}");
        assert!(!e.contains("panicked"), "{e}");
        match out {
            // Gone: nothing to say.
            Out::ClosedPipe => assert!(!e.contains("standard output"), "{e}"),
            // Full: said, with where the files are.
            Out::Full => {
                let last = e.lines().last().unwrap_or_default();
                assert!(
                    last.starts_with(
                        "hwceiling: warning: cannot write to standard output: No space left"
                    ) && last.contains("the run's files are written")
                        && last.contains("hardware_profile_"),
                    "{e}"
                );
            }
        }
    }
}
