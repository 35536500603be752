//! The NVMe options of `profile` through the real binary, on files this test creates: a
//! `--target` that does not exist is created and leaves nothing behind (also when SIGINT stops
//! the run), an existing file is not written without the flag, and writes without named drives
//! are refused before anything runs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn hwceiling() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hwceiling"))
}

fn profile_yaml(dir: &Path) -> String {
    let name = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("hardware_profile_"))
        })
        .expect("a profile was written");
    std::fs::read_to_string(name).unwrap()
}

#[test]
fn a_created_target_is_measured_both_ways_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("scratch");
    let out = dir.path().join("out");
    let run = hwceiling()
        .args([
            "profile",
            "--paths",
            "nvme_read,nvme_write",
            "--nvme-sizes",
            "1MiB",
        ])
        .args(["--queue-depths", "16", "--nvme-bytes", "8MiB", "--target"])
        .arg(&target)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    if stderr.contains("O_DIRECT") {
        println!("SKIPPED: this filesystem refuses O_DIRECT: {stderr}");
        return;
    }
    assert!(run.status.success(), "{stderr}");
    assert!(!target.exists(), "the scratch file is gone");
    let y = profile_yaml(&out);
    assert!(y.contains("key: nvme_read/target/1MiB/qd16"), "{y}");
    assert!(y.contains("key: nvme_write/target/1MiB/qd16"), "{y}");
    assert!(
        !y.contains("raw_read_gbps"),
        "a file is not a drive ceiling"
    );
}

#[test]
fn an_existing_file_is_only_read_without_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("data");
    let data = vec![0x5au8; 4 << 20];
    std::fs::write(&target, &data).unwrap();
    let out = dir.path().join("out");
    let run = hwceiling()
        .args([
            "profile",
            "--paths",
            "nvme_read,nvme_write",
            "--nvme-sizes",
            "1MiB",
        ])
        .args(["--queue-depths", "16", "--target"])
        .arg(&target)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    if stderr.contains("O_DIRECT") {
        println!("SKIPPED: this filesystem refuses O_DIRECT: {stderr}");
        return;
    }
    assert!(run.status.success(), "{stderr}");
    let y = profile_yaml(&out);
    assert!(y.contains("key: nvme_read/target/1MiB/qd16"), "{y}");
    assert!(!y.contains("key: nvme_write/"), "{y}");
    assert!(y.contains("not created by hwceiling"), "{y}");
    assert_eq!(std::fs::read(&target).unwrap(), data, "untouched");
}

#[test]
fn writes_without_named_drives_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = hwceiling()
        .args([
            "profile",
            "--paths",
            "nvme_write",
            "--allow-destructive-writes",
            "-o",
        ])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    if !run.status.success() {
        assert!(stderr.contains("--drives"), "{stderr}");
    } else {
        // A machine with no NVMe drive has nothing to name: the path is waived.
        let y = profile_yaml(&dir.path().join("out"));
        assert!(y.contains("no NVMe drives were detected"), "{y}");
    }
    let run = hwceiling()
        .args([
            "profile",
            "--paths",
            "nvme_write",
            "--allow-destructive-writes",
        ])
        .args(["--drives", "NO-SUCH-SERIAL", "-o"])
        .arg(dir.path().join("out2"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&run.stderr).contains("names no NVMe drive"));
}

#[test]
fn sigint_stops_a_run_cleanly_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("scratch");
    let out = dir.path().join("out");
    // 4 KiB reads at QD 1 over 256 MiB: long enough to be interrupted mid-case.
    let mut child = hwceiling()
        .args(["profile", "--paths", "nvme_read", "--nvme-sizes", "4KiB"])
        .args(["--queue-depths", "1", "--nvme-bytes", "256MiB", "--target"])
        .arg(&target)
        .arg("-o")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the scratch file's name to come and go (created, then unlinked at once).
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) && !target.exists() {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: sending SIGINT to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    if status.code() == Some(1) {
        let mut e = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut e).unwrap();
        if e.contains("O_DIRECT") {
            println!("SKIPPED: this filesystem refuses O_DIRECT: {e}");
            return;
        }
        panic!("{e}");
    }
    assert!(!target.exists(), "nothing left behind");
    match status.code() {
        Some(130) => assert!(profile_yaml(&out).contains("interrupted: true")),
        // The run finished before the signal came: still nothing left behind.
        Some(0) => {}
        other => panic!("exit {other:?}"),
    }
}
