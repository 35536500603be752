//! The gate and the engine on a real block device: a loop device over an image file this test
//! creates (never one of the machine's disks). Needs root and `losetup`; prints `SKIPPED: …`
//! elsewhere.

mod common;

use hwc_bench_nvme::gate::Refusal;
use hwc_bench_nvme::{setup, NvmeBackend, Request, SetupError};
use hwc_model::{Case, PathId, Reps, Topology};
use hwc_runner::{run_case, CaseOutcome, RunOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;

static NEVER: AtomicBool = AtomicBool::new(false);

/// A loop device, detached when dropped (also when a test fails).
struct Loop(PathBuf);

impl Loop {
    fn attach(image: &Path) -> Option<Loop> {
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(image)
            .output()
            .ok()?;
        if !out.status.success() {
            println!(
                "SKIPPED: losetup failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        Some(Loop(PathBuf::from(
            String::from_utf8_lossy(&out.stdout).trim(),
        )))
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.0).status();
    }
}

fn image(dir: &Path, name: &str, ext4_magic: bool) -> PathBuf {
    let path = dir.join(name);
    let mut bytes = vec![0u8; 16 << 20];
    if ext4_magic {
        bytes[0x438] = 0x53;
        bytes[0x439] = 0xef;
    }
    std::fs::write(&path, bytes).unwrap();
    path
}

fn request(target: &Path) -> Request {
    Request {
        drives: Vec::new(),
        write_drives: Vec::new(),
        allow_destructive_writes: true,
        target: Some(target.to_path_buf()),
        wants_write: true,
        bytes_per_drive: 8 << 20,
    }
}

fn sha(path: &Path) -> Vec<u8> {
    Command::new("sha256sum").arg(path).output().unwrap().stdout
}

#[test]
fn a_loop_device_over_a_file_in_memory_is_not_a_target() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIPPED: loop devices need root");
        return;
    }
    if hwc_bench_nvme::memory_filesystem(Path::new("/dev/shm")) != Some("tmpfs") {
        println!("SKIPPED: no tmpfs at /dev/shm here");
        return;
    }
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let img = image(dir.path(), "ram.img", false);
    let Some(dev) = Loop::attach(&img) else {
        return;
    };
    let refused = |why: &str| {
        let err = setup(&Topology::default(), &request(&dev.0), &NEVER)
            .err()
            .unwrap_or_else(|| panic!("{why}: a loop device over tmpfs must be refused"));
        assert!(matches!(err, SetupError::Target(..)), "{err}");
        assert!(
            err.to_string().contains("which lies on tmpfs, in memory"),
            "{err}"
        );
    };
    refused("backing file present");
    // Its backing file deleted: the loop device still reads from memory.
    std::fs::remove_file(&img).unwrap();
    refused("backing file deleted");
}

#[test]
fn a_loop_device_with_a_filesystem_is_refused_and_a_blank_one_is_measured() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIPPED: loop devices need root");
        return;
    }
    let dir = hwc_testkit::storage_tempdir();
    let fs = image(dir.path(), "fs.img", true);
    let Some(dev) = Loop::attach(&fs) else {
        return;
    };
    let before = sha(&fs);
    let err = setup(&Topology::default(), &request(&dev.0), &NEVER)
        .err()
        .expect("a device with an ext4 signature must be refused");
    match &err {
        SetupError::Refused { reasons, .. } => assert!(
            reasons
                .iter()
                .any(|r| matches!(r, Refusal::Signatures(s) if s[0].kind == "ext2/3/4")),
            "{err}"
        ),
        other => panic!("unexpected: {other}"),
    }
    assert_eq!(before, sha(&fs), "not a byte written");

    // A blank device: approved, then read and written through io_uring with O_DIRECT.
    let blank = image(dir.path(), "blank.img", false);
    let Some(dev) = Loop::attach(&blank) else {
        return;
    };
    let s = setup(&Topology::default(), &request(&dev.0), &NEVER).unwrap();
    let key = dev.0.display().to_string();
    assert_eq!(s.target, Some((key.clone(), true)));
    let mut backend = NvmeBackend::new(s.config);
    for path in [PathId::NvmeRead, PathId::NvmeWrite] {
        let reps = Reps {
            warmup: 1,
            timed: 3,
            retry_above_spread_pct: None,
            steady: None,
        };
        let case = common::target_case(path, &key, 1 << 20, 16, reps);
        match run_case(&case, &mut backend, &RunOptions::default(), &NEVER) {
            CaseOutcome::Measured(r) => {
                assert_eq!(r.measurement.bytes_per_rep, 8 << 20);
                assert!(r.measurement.gbps.median > 0.0);
                assert!(r.measurement.latency_p99_us >= r.measurement.latency_p50_us);
            }
            other => panic!("{path}: {other:?}"),
        }
    }
    drop(backend);
    let written = std::fs::read(&blank).unwrap();
    assert!(
        written[..8 << 20].iter().any(|&b| b != 0),
        "the write pass wrote"
    );
}

/// A blank image in `dir` attached as a loop device; `None` (SKIPPED printed) without root or
/// losetup.
fn blank_loop(dir: &Path) -> Option<(PathBuf, Loop)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIPPED: loop devices need root");
        return None;
    }
    let blank = image(dir, "blank.img", false);
    let dev = Loop::attach(&blank)?;
    Some((blank, dev))
}

fn write_case(key: &str) -> Case {
    let reps = Reps {
        warmup: 0,
        timed: 1,
        retry_above_spread_pct: None,
        steady: None,
    };
    common::target_case(PathId::NvmeWrite, key, 1 << 20, 16, reps)
}

#[test]
fn a_device_being_written_is_held_exclusively_and_gc_settle_shares_the_hold() {
    let dir = hwc_testkit::storage_tempdir();
    let Some((_, dev)) = blank_loop(dir.path()) else {
        return;
    };
    let s = setup(&Topology::default(), &request(&dev.0), &NEVER).unwrap();
    let key = dev.0.display().to_string();
    let mut backend = NvmeBackend::new(s.config);
    let gc = backend.gc_settle_runner();
    assert!(matches!(
        run_case(
            &write_case(&key),
            &mut backend,
            &RunOptions::default(),
            &NEVER
        ),
        CaseOutcome::Measured(_)
    ));
    // Held: nothing else may claim it (mount, mkfs, MD and LVM open it exclusively).
    let busy = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_EXCL)
        .open(&dev.0)
        .unwrap_err();
    assert_eq!(busy.raw_os_error(), Some(libc::EBUSY), "{busy}");
    // gc-settle writes through the same held descriptor (a second exclusive open would fail).
    let (_, record) = gc.run(&common::gc_case(&key, 1, 0)).unwrap();
    assert!(record.gc_settle.unwrap().bytes_written > 0);
    drop(gc);
    drop(backend);
    let again = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_EXCL)
        .open(&dev.0);
    assert!(again.is_ok(), "released at the end of the run: {again:?}");
}

#[test]
fn a_file_swapped_for_a_link_to_a_drive_after_the_gate_is_not_written() {
    let dir = hwc_testkit::storage_tempdir();
    let Some((blank, dev)) = blank_loop(dir.path()) else {
        return;
    };
    let target = dir.path().join("data");
    std::fs::write(&target, vec![0x5au8; 8 << 20]).unwrap();
    // Approved as this file (the flag was given for it)…
    let s = setup(&Topology::default(), &request(&target), &NEVER).unwrap();
    let key = target.display().to_string();
    assert_eq!(s.target, Some((key.clone(), true)));
    let mut backend = NvmeBackend::new(s.config);
    let gc = backend.gc_settle_runner();
    // …then the path is made to point at a blank, unmounted block device.
    std::fs::remove_file(&target).unwrap();
    std::os::unix::fs::symlink(&dev.0, &target).unwrap();
    let before = sha(&blank);
    match run_case(
        &write_case(&key),
        &mut backend,
        &RunOptions::default(),
        &NEVER,
    ) {
        CaseOutcome::Failed(f) => assert!(
            f.error
                .contains("the safety gate approved the regular file"),
            "{}",
            f.error
        ),
        other => panic!("a write reached the swapped path: {other:?}"),
    }
    let e = gc
        .run(&common::gc_case(&key, 1, 0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("the path now opens the block device"), "{e}");
    assert_eq!(before, sha(&blank), "not a byte written to the device");
}
