//! The journal against an in-memory system that behaves as the kernel's PCI core does for
//! `driver_override`, `unbind`, `drivers_probe` and `bind`: every change is recorded before it
//! is made, a crash at any step leaves a journal that restores the machine, and restoring twice
//! changes nothing.

use hwc_safety::journal::{self, BindOutcome, BindStep, Change, JournalError};
use hwc_safety::{Journal, Pci, System};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// The journal is one per process: tests that open one take turns.
static SERIAL: Mutex<()> = Mutex::new(());
fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// (driver, driver_override, the driver whose id table matches)
type Device = (Option<String>, Option<String>, Option<String>);

#[derive(Debug, Clone, Default)]
struct State {
    /// bdf → (driver, override, the driver that claims it by id)
    devices: BTreeMap<String, Device>,
    /// drivers whose module is loaded
    drivers: Vec<String>,
    /// (node, kib) → (nr, free)
    huge: BTreeMap<(Option<u32>, u64), (u64, u64)>,
    /// pages the kernel can still find per node
    spare: u64,
    mounts: Vec<PathBuf>,
    /// refuse binds to this driver
    broken: Option<String>,
    ops: Vec<String>,
}

#[derive(Clone)]
struct Fake(Arc<Mutex<State>>);

impl Fake {
    fn new() -> Self {
        let mut s = State::default();
        s.devices.insert(
            "0000:10:00.0".into(),
            (Some("nvme".into()), None, Some("nvme".into())),
        );
        s.devices.insert(
            "0000:20:00.0".into(),
            (Some("nvme".into()), None, Some("nvme".into())),
        );
        s.drivers = vec!["nvme".into(), "vfio-pci".into()];
        s.huge.insert((Some(0), 2048), (0, 0));
        s.spare = 1000;
        Fake(Arc::new(Mutex::new(s)))
    }
    fn st(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap()
    }
    fn driver_of(&self, bdf: &str) -> Option<String> {
        self.st().devices[bdf].0.clone()
    }
}

impl Pci for Fake {
    fn driver(&self, bdf: &str) -> io::Result<Option<String>> {
        Ok(self
            .st()
            .devices
            .get(bdf)
            .ok_or(io::ErrorKind::NotFound)?
            .0
            .clone())
    }
    fn driver_override(&self, bdf: &str) -> io::Result<Option<String>> {
        Ok(self.st().devices[bdf].1.clone())
    }
    fn set_driver_override(&self, bdf: &str, d: Option<&str>) -> io::Result<()> {
        let mut s = self.st();
        s.ops.push(format!("override {bdf} {d:?}"));
        s.devices.get_mut(bdf).unwrap().1 = d.map(String::from);
        Ok(())
    }
    fn unbind(&self, bdf: &str) -> io::Result<()> {
        let mut s = self.st();
        s.ops.push(format!("unbind {bdf}"));
        s.devices.get_mut(bdf).unwrap().0 = None;
        Ok(())
    }
    fn probe(&self, bdf: &str) -> io::Result<()> {
        let mut s = self.st();
        s.ops.push(format!("probe {bdf}"));
        let broken = s.broken.clone();
        let drivers = s.drivers.clone();
        let dev = s.devices.get_mut(bdf).unwrap();
        if dev.0.is_none() {
            // The kernel's rule: an override decides; else the driver whose id table matches.
            let want = dev.1.clone().or(dev.2.clone());
            if let Some(w) = want {
                if drivers.contains(&w) && broken.as_deref() != Some(w.as_str()) {
                    dev.0 = Some(w);
                }
            }
        }
        Ok(())
    }
    fn bind(&self, bdf: &str, driver: &str) -> io::Result<()> {
        let mut s = self.st();
        s.ops.push(format!("bind {bdf} {driver}"));
        if s.broken.as_deref() == Some(driver) {
            return Err(io::Error::other("No such device"));
        }
        s.devices.get_mut(bdf).unwrap().0 = Some(driver.into());
        Ok(())
    }
}

impl System for Fake {
    fn nr_hugepages(&self, node: Option<u32>, kib: u64) -> io::Result<u64> {
        Ok(self.st().huge[&(node, kib)].0)
    }
    fn set_nr_hugepages(&self, node: Option<u32>, kib: u64, pages: u64) -> io::Result<()> {
        let mut s = self.st();
        let spare = s.spare;
        let e = s.huge.get_mut(&(node, kib)).unwrap();
        let used = e.0 - e.1;
        let n = pages.min(used + spare.min(pages));
        *e = (n, n - used);
        Ok(())
    }
    fn free_hugepages(&self, node: Option<u32>, kib: u64) -> io::Result<u64> {
        Ok(self.st().huge[&(node, kib)].1)
    }
    fn hugetlbfs_mounted_at(&self, t: &Path) -> io::Result<bool> {
        Ok(self.st().mounts.iter().any(|m| m == t))
    }
    fn mount_hugetlbfs(&self, t: &Path) -> io::Result<()> {
        self.st().mounts.push(t.into());
        Ok(())
    }
    fn unmount(&self, t: &Path) -> io::Result<()> {
        self.st().mounts.retain(|m| m != t);
        Ok(())
    }
}

const A: &str = "0000:10:00.0";
const B: &str = "0000:20:00.0";

fn read_journal(dir: &Path) -> Option<journal::JournalFile> {
    let text = std::fs::read_to_string(dir.join("changes.json")).ok()?;
    Some(serde_json::from_str(&text).unwrap())
}

#[test]
fn bind_records_first_then_restore_puts_everything_back_and_removes_the_journal() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::new();
    let j = Journal::open(dir.path(), "hwceiling test", Box::new(fake.clone())).unwrap();
    let mut steps = Vec::new();
    let seen = fake.clone();
    let jdir = dir.path().to_path_buf();
    let out = j
        .bind_driver(A, "vfio-pci", &mut |s| {
            // At every step the journal on disk already holds the change.
            let f = read_journal(&jdir).expect("journal written before the change");
            assert_eq!(f.changes.len(), 1);
            steps.push((s, seen.driver_of(A)));
        })
        .unwrap();
    assert_eq!(
        out,
        BindOutcome::Moved {
            from: Some("nvme".into())
        }
    );
    assert_eq!(
        steps,
        vec![
            (BindStep::Recorded, Some("nvme".into())),
            (BindStep::Unbound, None),
            (BindStep::Bound, Some("vfio-pci".into())),
        ]
    );
    assert_eq!(fake.driver_of(B).as_deref(), Some("nvme"));
    // Binding a device already on the driver records nothing.
    assert_eq!(
        j.bind_driver(A, "vfio-pci", &mut |_| {}).unwrap(),
        BindOutcome::AlreadyBound
    );
    j.reserve_hugepages(Some(0), 2048, 64).unwrap();
    j.ensure_hugetlbfs(&dir.path().join("huge")).unwrap();
    assert_eq!(read_journal(dir.path()).unwrap().changes.len(), 3);

    let restored = j.restore().unwrap();
    assert_eq!(restored.len(), 3);
    assert!(restored.iter().all(|r| r.acted));
    // Newest first.
    assert!(matches!(restored[0].change, Change::HugetlbfsMount { .. }));
    assert!(matches!(restored[2].change, Change::PciDriver { .. }));
    assert_eq!(fake.driver_of(A).as_deref(), Some("nvme"));
    assert_eq!(fake.st().devices[A].1, None, "override cleared");
    assert_eq!(fake.st().huge[&(Some(0), 2048)], (0, 0));
    assert!(fake.st().mounts.is_empty());
    assert!(
        !dir.path().join("huge").exists(),
        "the folder it made is gone"
    );
    assert!(read_journal(dir.path()).is_none(), "journal removed");
    // A new run may start.
    journal::check_clear(dir.path()).unwrap();
}

#[test]
fn a_crash_at_any_step_leaves_a_journal_that_restore_and_the_next_run_honour() {
    let _g = serial();
    for crash_at in [BindStep::Recorded, BindStep::Unbound, BindStep::Bound] {
        let dir = tempfile::tempdir().unwrap();
        let fake = Fake::new();
        let j = Journal::open(dir.path(), "hwceiling profile", Box::new(fake.clone())).unwrap();
        // Simulate SIGKILL at this step: snapshot the journal file and the system, then let
        // the process "die" without restoring (leave() drops ownership, keeps the file).
        let snapshot: Arc<Mutex<Option<(String, State)>>> = Arc::default();
        let snap = snapshot.clone();
        let jdir = dir.path().to_path_buf();
        let f2 = fake.clone();
        j.bind_driver(A, "vfio-pci", &mut |s| {
            if s == crash_at {
                let text = std::fs::read_to_string(jdir.join("changes.json")).unwrap();
                *snap.lock().unwrap() = Some((text, f2.st().clone()));
            }
        })
        .unwrap();
        let _ = j.leave();
        let (text, state) = snapshot.lock().unwrap().take().unwrap();
        std::fs::write(dir.path().join("changes.json"), text).unwrap();
        *fake.st() = state;

        // The next run refuses to start, naming the fix.
        let e = journal::check_clear(dir.path()).unwrap_err();
        assert!(matches!(e, JournalError::LeftOver { count: 1, .. }), "{e}");
        assert!(e.to_string().contains("hwceiling restore"), "{e}");
        let e = Journal::open(dir.path(), "x", Box::new(fake.clone())).unwrap_err();
        assert!(matches!(e, JournalError::LeftOver { .. }));

        // `hwceiling restore` puts the drive back, whatever step it died at.
        let (file, restored) = journal::restore_left_over(dir.path(), &fake)
            .unwrap()
            .unwrap();
        assert_eq!(file.command, "hwceiling profile");
        assert_eq!(restored.len(), 1);
        // Killed right after recording, nothing had changed yet.
        assert_eq!(
            restored[0].acted,
            crash_at != BindStep::Recorded,
            "at {crash_at:?}"
        );
        assert_eq!(
            fake.driver_of(A).as_deref(),
            Some("nvme"),
            "at {crash_at:?}"
        );
        assert_eq!(fake.st().devices[A].1, None);
        journal::check_clear(dir.path()).unwrap();
        // Restoring again finds nothing to do.
        assert!(journal::restore_left_over(dir.path(), &fake)
            .unwrap()
            .is_none());
    }
}

#[test]
fn a_bind_the_kernel_refuses_is_put_back_at_once() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::new();
    fake.st().broken = Some("vfio-pci".into());
    let j = Journal::open(dir.path(), "t", Box::new(fake.clone())).unwrap();
    let e = j.bind_driver(A, "vfio-pci", &mut |_| {}).unwrap_err();
    assert!(
        e.to_string()
            .contains("binding 0000:10:00.0 to vfio-pci failed"),
        "{e}"
    );
    assert_eq!(fake.driver_of(A).as_deref(), Some("nvme"));
    assert_eq!(fake.st().devices[A].1, None);
    assert!(
        j.changes().is_empty(),
        "the failed change is no longer pending"
    );
    assert!(read_journal(dir.path()).is_none());
    j.restore().unwrap();
}

#[test]
fn dropping_the_journal_restores_and_a_second_owner_is_refused() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::new();
    {
        let j = Journal::open(dir.path(), "t", Box::new(fake.clone())).unwrap();
        assert!(matches!(
            Journal::open(dir.path(), "t", Box::new(fake.clone())),
            Err(JournalError::AlreadyOpen)
        ));
        j.bind_driver(B, "vfio-pci", &mut |_| {}).unwrap();
        assert_eq!(fake.driver_of(B).as_deref(), Some("vfio-pci"));
        // A panic or an early return drops it.
    }
    assert_eq!(fake.driver_of(B).as_deref(), Some("nvme"));
    assert!(read_journal(dir.path()).is_none());
}

#[test]
fn restore_owned_is_what_the_signal_path_calls() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::new();
    let j = Journal::open(dir.path(), "t", Box::new(fake.clone())).unwrap();
    j.bind_driver(A, "vfio-pci", &mut |_| {}).unwrap();
    let r = journal::restore_owned().unwrap().unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(fake.driver_of(A).as_deref(), Some("nvme"));
    // Nothing left: the handle's own restore (or drop) is a no-op.
    assert!(journal::restore_owned().is_none());
    assert!(j.restore().unwrap().is_empty());
}

#[test]
fn hugepages_the_kernel_cannot_find_fail_and_are_restored() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::new();
    fake.st().spare = 10;
    let j = Journal::open(dir.path(), "t", Box::new(fake.clone())).unwrap();
    let e = j.reserve_hugepages(Some(0), 2048, 64).unwrap_err();
    assert!(
        e.to_string()
            .contains("64 free 2048 KiB pages were needed on node 0, the kernel found 10"),
        "{e}"
    );
    j.restore().unwrap();
    assert_eq!(fake.st().huge[&(Some(0), 2048)], (0, 0));
}

#[test]
fn a_failed_restore_keeps_what_failed_in_the_journal() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::new();
    let j = Journal::open(dir.path(), "t", Box::new(fake.clone())).unwrap();
    j.bind_driver(A, "vfio-pci", &mut |_| {}).unwrap();
    j.bind_driver(B, "vfio-pci", &mut |_| {}).unwrap();
    // nvme's module went away meanwhile: neither drive can go back.
    fake.st().drivers.retain(|d| d != "nvme");
    fake.st().broken = Some("nvme".into());
    let e = j.restore().unwrap_err();
    match &e {
        JournalError::RestoreFailed { failures, .. } => assert_eq!(failures.len(), 2),
        other => panic!("{other}"),
    }
    assert!(
        e.to_string().contains("0000:10:00.0: nvme → vfio-pci"),
        "{e}"
    );
    assert_eq!(read_journal(dir.path()).unwrap().changes.len(), 2);
    // Once the module is back, `hwceiling restore` finishes the job.
    fake.st().drivers.push("nvme".into());
    fake.st().broken = None;
    journal::restore_left_over(dir.path(), &fake)
        .unwrap()
        .unwrap();
    assert_eq!(fake.driver_of(A).as_deref(), Some("nvme"));
    assert_eq!(fake.driver_of(B).as_deref(), Some("nvme"));
}

#[test]
fn hugepage_files_of_a_killed_child_are_removed() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("hp");
    std::fs::create_dir(&huge).unwrap();
    std::fs::write(huge.join("hwc123map_0"), b"").unwrap();
    std::fs::write(huge.join("other_0"), b"").unwrap();
    let fake = Fake::new();
    let j = Journal::open(&dir.path().join("j"), "t", Box::new(fake)).unwrap();
    j.record(Change::HugepageFiles {
        dir: huge.clone(),
        prefix: "hwc123".into(),
    })
    .unwrap();
    j.restore().unwrap();
    assert!(!huge.join("hwc123map_0").exists());
    assert!(
        huge.join("other_0").exists(),
        "another program's file stays"
    );
}

#[test]
fn an_unknown_journal_format_is_refused_not_guessed() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("changes.json"),
        r#"{"format":9,"pid":1,"started_unix_s":0,"command":"x","changes":[]}"#,
    )
    .unwrap();
    let e = journal::check_clear(dir.path()).unwrap_err();
    assert!(
        e.to_string().contains("format 9, this build reads 1"),
        "{e}"
    );
}
