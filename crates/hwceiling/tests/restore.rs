//! A journal of system changes left by a run that died: every later run refuses to start,
//! naming `hwceiling restore`; `restore` puts the changes back (here the hugepage files a
//! killed child left, the one change that needs no root) and the next run goes ahead. A
//! journal whose owner still runs is not touched.

use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::process::{Command, Output};

fn run(journal: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hwceiling"))
        .env("HWCEILING_JOURNAL_DIR", journal)
        .args(args)
        .output()
        .expect("run hwceiling")
}

fn left_over(journal: &Path, huge: &Path) {
    std::fs::create_dir_all(journal).unwrap();
    std::fs::write(
        journal.join("changes.json"),
        format!(
            r#"{{"format":1,"pid":4000000,"started_unix_s":0,"command":"hwceiling profile --paths nvme_read","changes":[{{"kind":"hugepage_files","dir":"{}","prefix":"hwc_pid4000000"}}]}}"#,
            huge.display()
        ),
    )
    .unwrap();
}

#[test]
fn a_left_over_journal_blocks_runs_until_restore_puts_it_back() {
    let t = tempfile::tempdir().unwrap();
    let (journal, huge, out) = (
        t.path().join("j"),
        t.path().join("huge"),
        t.path().join("out"),
    );
    std::fs::create_dir_all(&huge).unwrap();
    std::fs::write(huge.join("hwc_pid4000000map_0"), b"x").unwrap();
    std::fs::write(huge.join("someone_elses"), b"x").unwrap();
    left_over(&journal, &huge);
    let out_s = out.to_str().unwrap();

    let o = run(&journal, &["profile", "--engines", "null", "-o", out_s]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("an earlier run (pid 4000000: hwceiling profile --paths nvme_read) left 1 system change(s) unrestored")
            && err.contains("run `hwceiling restore` first"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(!out.exists(), "a refused run writes nothing");

    let o = run(&journal, &["restore"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("/hwc_pid4000000* are removed"), "{text}");
    assert!(!huge.join("hwc_pid4000000map_0").exists());
    assert!(huge.join("someone_elses").exists());
    assert!(!journal.join("changes.json").exists());

    let o = run(&journal, &["restore"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("nothing to restore"));
    let o = run(&journal, &["profile", "--engines", "null", "-o", out_s]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_journal_whose_owner_lives_is_left_alone() {
    let t = tempfile::tempdir().unwrap();
    let (journal, huge) = (t.path().join("j"), t.path().join("huge"));
    std::fs::create_dir_all(&huge).unwrap();
    std::fs::write(huge.join("hwc_pid4000000map_0"), b"x").unwrap();
    left_over(&journal, &huge);
    // This test process plays the owner: it holds the journal's lock.
    let lock = std::fs::File::create(journal.join("changes.lock")).unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    for args in [
        &["restore"][..],
        &["profile", "--engines", "null", "-o", "/nonexistent/x"][..],
    ] {
        let o = run(&journal, args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("another hwceiling process (pid 4000000) is changing this system now"),
            "{err}"
        );
    }
    assert!(
        huge.join("hwc_pid4000000map_0").exists(),
        "not restored under its owner"
    );
}
