//! The journal of system changes: written (and fsynced) before each change, replayed backwards
//! to restore. See the crate docs for when it is restored.

use crate::system::System;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, TryLockError};

/// Where journals live unless a run is told otherwise.
pub const DEFAULT_DIR: &str = "/run/hwceiling";
/// The environment variable that moves the journal folder (tests, and machines whose `/run`
/// is elsewhere); every process of one machine must agree on it.
pub const DIR_ENV: &str = "HWCEILING_JOURNAL_DIR";
const JOURNAL: &str = "changes.json";
const LOCK: &str = "changes.lock";
/// The journal file's format; a build refuses formats it does not know rather than guess.
pub const FORMAT: u32 = 1;

/// One system change, with the state it replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// A PCI device moved from `driver_before` (and its `driver_override`) to `driver_after`.
    PciDriver {
        bdf: String,
        driver_before: Option<String>,
        override_before: Option<String>,
        driver_after: String,
    },
    /// `nr_hugepages` of one page size on one NUMA node (`None`: the machine's pool) was
    /// `before`.
    Hugepages {
        node: Option<u32>,
        page_kib: u64,
        before: u64,
    },
    /// A hugetlbfs was mounted at `target`; `created_dir`: its folder did not exist before.
    HugetlbfsMount { target: PathBuf, created_dir: bool },
    /// A child process may leave hugepage-backed files named `prefix*` in `dir` (DPDK's
    /// `--file-prefix`); restoring removes them, or the pages they hold stay taken.
    HugepageFiles { dir: PathBuf, prefix: String },
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::PciDriver {
                bdf,
                driver_before,
                driver_after,
                ..
            } => write!(
                f,
                "{bdf}: {} → {driver_after}",
                driver_before.as_deref().unwrap_or("no driver")
            ),
            Change::Hugepages {
                node,
                page_kib,
                before,
            } => match node {
                Some(n) => write!(f, "{page_kib} KiB hugepages on node {n}: were {before}"),
                None => write!(f, "{page_kib} KiB hugepages: were {before}"),
            },
            Change::HugetlbfsMount { target, .. } => {
                write!(f, "hugetlbfs mounted at {}", target.display())
            }
            Change::HugepageFiles { dir, prefix } => {
                write!(f, "hugepage files {}/{prefix}*", dir.display())
            }
        }
    }
}

/// The journal file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalFile {
    pub format: u32,
    /// The process that made the changes.
    pub pid: u32,
    pub started_unix_s: u64,
    /// The command line that made them, for the user who finds them.
    pub command: String,
    /// In the order they were made.
    pub changes: Vec<Change>,
}

/// What restoring one change did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    pub change: Change,
    /// False when the system already was as before (the change was recorded, then not made,
    /// or was restored earlier).
    pub acted: bool,
}

impl std::fmt::Display for Restored {
    /// What the system is like again: "0000:10:00.0 is back on nvme".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let was = if self.acted { "" } else { " (it already was)" };
        match &self.change {
            Change::PciDriver {
                bdf, driver_before, ..
            } => match driver_before {
                Some(d) => write!(f, "{bdf} is back on {d}{was}"),
                None => write!(f, "{bdf} has no driver again{was}"),
            },
            Change::Hugepages {
                node,
                page_kib,
                before,
            } => {
                let on = node.map(|n| format!(" on node {n}")).unwrap_or_default();
                write!(f, "{page_kib} KiB hugepages{on} are back to {before}{was}")
            }
            Change::HugetlbfsMount { target, .. } => {
                write!(f, "hugetlbfs at {} is unmounted{was}", target.display())
            }
            Change::HugepageFiles { dir, prefix } => {
                write!(
                    f,
                    "hugepage files {}/{prefix}* are removed{was}",
                    dir.display()
                )
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error(
        "an earlier run (pid {pid}: {command}) left {count} system change(s) unrestored in {}: \
         run `hwceiling restore` first", path.display()
    )]
    LeftOver {
        path: PathBuf,
        pid: u32,
        command: String,
        count: usize,
    },
    #[error(
        "another hwceiling process{} is changing this system now ({}); it restores its changes \
         as it exits", pid.map(|p| format!(" (pid {p})")).unwrap_or_default(), path.display()
    )]
    Busy { path: PathBuf, pid: Option<u32> },
    #[error("{}: {cause}", path.display())]
    Io { path: PathBuf, cause: io::Error },
    #[error("{} is not a journal this build reads ({cause})", path.display())]
    Unreadable { path: PathBuf, cause: String },
    #[error("this process already holds a journal of system changes")]
    AlreadyOpen,
    #[error("binding {bdf} to {driver} failed: {cause}")]
    Bind {
        bdf: String,
        driver: String,
        cause: String,
    },
    #[error("hugepages: {cause}")]
    Hugepages { cause: String },
    #[error("{} change(s) could not be restored and stay in {}: {}", failures.len(), path.display(),
        failures.iter().map(|(c, e)| format!("{c} ({e})")).collect::<Vec<_>>().join("; "))]
    RestoreFailed {
        path: PathBuf,
        failures: Vec<(Change, String)>,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> JournalError + '_ {
    move |cause| JournalError::Io {
        path: path.to_path_buf(),
        cause,
    }
}

struct Owned {
    dir: PathBuf,
    /// Held (flock) for as long as this process owns the journal.
    _lock: File,
    file: JournalFile,
    system: Box<dyn System>,
}

static OWNED: Mutex<Option<Owned>> = Mutex::new(None);

fn owned() -> MutexGuard<'static, Option<Owned>> {
    OWNED.lock().unwrap_or_else(|e| e.into_inner())
}

/// This process's journal, open until restored ([`Journal::restore`]) or left
/// ([`Journal::leave`]); dropping it restores.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
}

/// How a device came to be on the driver asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindOutcome {
    /// It already was (nothing recorded, nothing to restore).
    AlreadyBound,
    /// It was moved from this driver.
    Moved { from: Option<String> },
}

/// The steps of a bind, for a caller that reports progress (or a test that signals between
/// them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindStep {
    /// Recorded, and about to leave its driver.
    Recorded,
    /// Off its old driver, not yet on the new one.
    Unbound,
    /// On the new driver.
    Bound,
}

impl BindStep {
    pub fn as_str(self) -> &'static str {
        match self {
            BindStep::Recorded => "recorded",
            BindStep::Unbound => "unbound",
            BindStep::Bound => "bound",
        }
    }
}

/// The journal folder: `$HWCEILING_JOURNAL_DIR`, else [`DEFAULT_DIR`].
pub fn dir() -> PathBuf {
    std::env::var_os(DIR_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR))
}

fn lock_path(dir: &Path) -> PathBuf {
    dir.join(LOCK)
}

fn journal_path(dir: &Path) -> PathBuf {
    dir.join(JOURNAL)
}

/// Take the lock of `dir`'s journal without waiting; `Ok(None)` when another process holds it.
fn try_lock(dir: &Path) -> Result<Option<File>, JournalError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err(dir))?;
    let path = lock_path(dir);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(io_err(&path))?;
    // SAFETY: flock on a descriptor this function owns; no memory is passed.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Ok(None);
        }
        return Err(JournalError::Io { path, cause: e });
    }
    Ok(Some(f))
}

fn read_file(path: &Path) -> Result<Option<JournalFile>, JournalError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(JournalError::Io {
                path: path.to_path_buf(),
                cause: e,
            })
        }
    };
    let file: JournalFile = serde_json::from_str(&text).map_err(|e| JournalError::Unreadable {
        path: path.to_path_buf(),
        cause: e.to_string(),
    })?;
    if file.format != FORMAT {
        return Err(JournalError::Unreadable {
            path: path.to_path_buf(),
            cause: format!("format {}, this build reads {FORMAT}", file.format),
        });
    }
    Ok(Some(file))
}

/// Write `file` as `dir`'s journal: a temporary file, fsynced, renamed over the journal, and
/// the folder fsynced, so a crash leaves the old journal or the new one, never half of one.
fn persist(dir: &Path, file: &JournalFile) -> Result<(), JournalError> {
    let path = journal_path(dir);
    let tmp = dir.join(format!("{JOURNAL}.tmp"));
    let text = serde_json::to_string_pretty(file).expect("a journal serialises");
    let write = || -> io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        File::open(dir)?.sync_all()
    };
    write().map_err(io_err(&path))
}

fn remove_journal(dir: &Path) -> Result<(), JournalError> {
    let path = journal_path(dir);
    match std::fs::remove_file(&path) {
        Ok(()) => File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(dir)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(JournalError::Io { path, cause: e }),
    }
}

/// Refuse to go on while `dir` holds a journal: one left by a process that died
/// ([`JournalError::LeftOver`]) or one a live process owns ([`JournalError::Busy`]). A folder
/// this user may not read tells nothing, and is no reason to refuse (such a user cannot change
/// the system either).
pub fn check_clear(dir: &Path) -> Result<(), JournalError> {
    let path = journal_path(dir);
    match std::fs::metadata(&path) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Ok(()),
        Err(e) => return Err(JournalError::Io { path, cause: e }),
    }
    if let Some(o) = owned().as_ref() {
        if o.dir == dir {
            // This process's own journal.
            return Ok(());
        }
    }
    let file = read_file(&path)?;
    match try_lock(dir) {
        Ok(Some(_lock)) => match file {
            Some(f) => Err(JournalError::LeftOver {
                path,
                pid: f.pid,
                command: f.command,
                count: f.changes.len(),
            }),
            None => Ok(()),
        },
        Ok(None) => Err(JournalError::Busy {
            path,
            pid: file.map(|f| f.pid),
        }),
        Err(JournalError::Io { cause, .. }) if cause.kind() == io::ErrorKind::PermissionDenied => {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

impl Journal {
    /// Open this process's journal in `dir`, refusing while another process owns one there or a
    /// dead one's is left unrestored. Nothing is written until the first change.
    pub fn open(
        dir: &Path,
        command: &str,
        system: Box<dyn System>,
    ) -> Result<Journal, JournalError> {
        let mut slot = owned();
        if slot.is_some() {
            return Err(JournalError::AlreadyOpen);
        }
        let path = journal_path(dir);
        let Some(lock) = try_lock(dir)? else {
            return Err(JournalError::Busy {
                pid: read_file(&path).ok().flatten().map(|f| f.pid),
                path,
            });
        };
        if let Some(f) = read_file(&path)? {
            return Err(JournalError::LeftOver {
                path,
                pid: f.pid,
                command: f.command,
                count: f.changes.len(),
            });
        }
        let started_unix_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        *slot = Some(Owned {
            dir: dir.to_path_buf(),
            _lock: lock,
            file: JournalFile {
                format: FORMAT,
                pid: std::process::id(),
                started_unix_s,
                command: command.to_string(),
                changes: Vec::new(),
            },
            system,
        });
        Ok(Journal {
            dir: dir.to_path_buf(),
        })
    }

    /// The journal's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The changes recorded so far.
    pub fn changes(&self) -> Vec<Change> {
        owned()
            .as_ref()
            .map(|o| o.file.changes.clone())
            .unwrap_or_default()
    }

    /// Run `f` with the system and the journal locked: a restore from a signal waits for it.
    fn with<R>(&self, f: impl FnOnce(&mut Owned) -> R) -> R {
        let mut g = owned();
        let o = g
            .as_mut()
            .expect("the journal is open while its handle lives");
        f(o)
    }

    /// Read the system (a driver, a hugepage count) under the journal's lock.
    pub fn read<R>(&self, f: impl FnOnce(&dyn System) -> R) -> R {
        self.with(|o| f(o.system.as_ref()))
    }

    /// Record `change` (persisted before this returns).
    pub fn record(&self, change: Change) -> Result<(), JournalError> {
        self.with(|o| record(o, change))
    }

    /// Move `bdf` to `driver`, recording its driver and override first; on any failure the
    /// device is put back at once. `on_step` sees each step (a test sends signals there).
    pub fn bind_driver(
        &self,
        bdf: &str,
        driver: &str,
        on_step: &mut dyn FnMut(BindStep),
    ) -> Result<BindOutcome, JournalError> {
        let fail = |cause: String| JournalError::Bind {
            bdf: bdf.to_string(),
            driver: driver.to_string(),
            cause,
        };
        let (before, override_before) = self
            .with(|o| {
                let s = o.system.as_ref();
                Ok::<_, io::Error>((s.driver(bdf)?, s.driver_override(bdf)?))
            })
            .map_err(|e| fail(e.to_string()))?;
        if before.as_deref() == Some(driver) {
            return Ok(BindOutcome::AlreadyBound);
        }
        let change = Change::PciDriver {
            bdf: bdf.to_string(),
            driver_before: before.clone(),
            override_before,
            driver_after: driver.to_string(),
        };
        self.record(change.clone())?;
        on_step(BindStep::Recorded);
        let unbound = self.with(|o| {
            let s = o.system.as_ref();
            s.set_driver_override(bdf, Some(driver))?;
            s.unbind(bdf)
        });
        if let Err(e) = unbound {
            return Err(self.put_back(change, bdf, driver, e.to_string()));
        }
        on_step(BindStep::Unbound);
        let bound = self.with(|o| {
            let s = o.system.as_ref();
            s.probe(bdf)?;
            if s.driver(bdf)?.as_deref() != Some(driver) {
                // drivers_probe leaves a device alone whose driver does not claim it at once;
                // an explicit bind says why.
                s.bind(bdf, driver)?;
            }
            match s.driver(bdf)? {
                Some(d) if d == driver => Ok(()),
                other => Err(io::Error::other(format!(
                    "the kernel left it on {}",
                    other.as_deref().unwrap_or("no driver")
                ))),
            }
        });
        if let Err(e) = bound {
            return Err(self.put_back(change, bdf, driver, e.to_string()));
        }
        on_step(BindStep::Bound);
        Ok(BindOutcome::Moved { from: before })
    }

    /// Undo one bind at once after its step failed with `cause`; the error says both.
    fn put_back(&self, change: Change, bdf: &str, driver: &str, cause: String) -> JournalError {
        let cause = self.with(|o| match undo(o.system.as_ref(), &change) {
            Ok(_) => {
                o.file.changes.retain(|c| c != &change);
                match persist_or_remove(o) {
                    Ok(()) => cause,
                    Err(e) => format!("{cause}; and the journal could not be updated: {e}"),
                }
            }
            Err(e) => format!("{cause}; putting it back failed too ({e}): run `hwceiling restore`"),
        });
        JournalError::Bind {
            bdf: bdf.to_string(),
            driver: driver.to_string(),
            cause,
        }
    }

    /// Make sure `pages` free hugepages of `page_kib` KiB are on `node`, raising
    /// `nr_hugepages` by what is missing (recorded first). Fails, naming what the kernel
    /// gave, when it cannot find that many (fragmented or too little memory).
    pub fn reserve_hugepages(
        &self,
        node: Option<u32>,
        page_kib: u64,
        pages: u64,
    ) -> Result<(), JournalError> {
        let fail = |cause: String| JournalError::Hugepages { cause };
        let where_ = node.map(|n| format!(" on node {n}")).unwrap_or_default();
        let (nr, free) = self
            .read(|s| {
                Ok::<_, io::Error>((
                    s.nr_hugepages(node, page_kib)?,
                    s.free_hugepages(node, page_kib)?,
                ))
            })
            .map_err(|e| fail(e.to_string()))?;
        if free >= pages {
            return Ok(());
        }
        let want = nr + (pages - free);
        self.record(Change::Hugepages {
            node,
            page_kib,
            before: nr,
        })?;
        let got = self
            .read(|s| {
                s.set_nr_hugepages(node, page_kib, want)?;
                s.free_hugepages(node, page_kib)
            })
            .map_err(|e| fail(e.to_string()))?;
        if got < pages {
            return Err(fail(format!(
                "{pages} free {page_kib} KiB pages were needed{where_}, the kernel found {got}"
            )));
        }
        Ok(())
    }

    /// Mount a hugetlbfs at `target` unless one is there (recorded first).
    pub fn ensure_hugetlbfs(&self, target: &Path) -> Result<(), JournalError> {
        let fail = |e: io::Error| JournalError::Hugepages {
            cause: e.to_string(),
        };
        if self
            .read(|s| s.hugetlbfs_mounted_at(target))
            .map_err(fail)?
        {
            return Ok(());
        }
        let created_dir = !target.exists();
        self.record(Change::HugetlbfsMount {
            target: target.to_path_buf(),
            created_dir,
        })?;
        if created_dir {
            std::fs::create_dir_all(target).map_err(fail)?;
        }
        self.read(|s| s.mount_hugetlbfs(target)).map_err(fail)
    }

    /// Restore every change, newest first, and close the journal (its file removed). Changes
    /// that could not be restored stay in the file, and the error names them.
    pub fn restore(self) -> Result<Vec<Restored>, JournalError> {
        // Dropping the handle afterwards finds nothing left to restore.
        restore_owned().unwrap_or(Ok(Vec::new()))
    }

    /// Keep the changes (`--leave-bound`): the journal stays on disk for `hwceiling restore`,
    /// and this process lets it go.
    pub fn leave(self) -> Vec<Change> {
        owned().take().map(|o| o.file.changes).unwrap_or_default()
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        // An error has nowhere to go here: what was not restored stays in the journal, and the
        // next run refuses to start until `hwceiling restore` has restored it.
        let _ = restore_owned();
    }
}

fn record(o: &mut Owned, change: Change) -> Result<(), JournalError> {
    o.file.changes.push(change);
    if let Err(e) = persist(&o.dir, &o.file) {
        o.file.changes.pop();
        return Err(e);
    }
    Ok(())
}

fn persist_or_remove(o: &Owned) -> Result<(), JournalError> {
    if o.file.changes.is_empty() {
        remove_journal(&o.dir)
    } else {
        persist(&o.dir, &o.file)
    }
}

/// Restore this process's journal, if it holds one, waiting for a change in flight; the
/// journal is then closed. For the signal and panic paths and [`Journal::restore`].
pub fn restore_owned() -> Option<Result<Vec<Restored>, JournalError>> {
    let mut g = owned();
    let o = g.take()?;
    Some(restore_in(&o.dir, o.system.as_ref(), o.file))
}

/// [`restore_owned`] for a panic hook: it does not wait, since the panicking thread may hold
/// the lock itself (the journal's handle then restores as it unwinds).
pub fn try_restore_owned() -> Option<Result<Vec<Restored>, JournalError>> {
    let mut g = match OWNED.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(e)) => e.into_inner(),
        Err(TryLockError::WouldBlock) => return None,
    };
    let o = g.take()?;
    Some(restore_in(&o.dir, o.system.as_ref(), o.file))
}

/// Restore the journal a process that died left in `dir` (`hwceiling restore`). `Ok(None)`:
/// there was none. Refused while its owner lives.
pub fn restore_left_over(
    dir: &Path,
    system: &dyn System,
) -> Result<Option<(JournalFile, Vec<Restored>)>, JournalError> {
    let path = journal_path(dir);
    if !path.exists() {
        return Ok(None);
    }
    let Some(_lock) = try_lock(dir)? else {
        return Err(JournalError::Busy {
            pid: read_file(&path).ok().flatten().map(|f| f.pid),
            path,
        });
    };
    let Some(file) = read_file(&path)? else {
        return Ok(None);
    };
    let restored = restore_in(dir, system, file.clone())?;
    Ok(Some((file, restored)))
}

/// Undo `file`'s changes newest first; remove the journal when all are undone, else keep the
/// ones that failed in it.
fn restore_in(
    dir: &Path,
    system: &dyn System,
    mut file: JournalFile,
) -> Result<Vec<Restored>, JournalError> {
    let mut restored = Vec::new();
    let mut failures = Vec::new();
    for change in file.changes.iter().rev() {
        match undo(system, change) {
            Ok(acted) => restored.push(Restored {
                change: change.clone(),
                acted,
            }),
            Err(e) => failures.push((change.clone(), e)),
        }
    }
    if failures.is_empty() {
        remove_journal(dir)?;
        return Ok(restored);
    }
    file.changes
        .retain(|c| failures.iter().any(|(f, _)| f == c));
    persist(dir, &file)?;
    Err(JournalError::RestoreFailed {
        path: journal_path(dir),
        failures,
    })
}

/// Put one change back; `Ok(false)` when the system already was as before.
fn undo(s: &dyn System, change: &Change) -> Result<bool, String> {
    let e = |e: io::Error| e.to_string();
    match change {
        Change::PciDriver {
            bdf,
            driver_before,
            override_before,
            ..
        } => {
            let mut acted = false;
            if s.driver_override(bdf).map_err(e)? != *override_before {
                s.set_driver_override(bdf, override_before.as_deref())
                    .map_err(e)?;
                acted = true;
            }
            if s.driver(bdf).map_err(e)? != *driver_before {
                s.unbind(bdf).map_err(e)?;
                if let Some(d) = driver_before {
                    s.probe(bdf).map_err(e)?;
                    if s.driver(bdf).map_err(e)?.as_deref() != Some(d) {
                        s.bind(bdf, d).map_err(e)?;
                    }
                }
                acted = true;
                let now = s.driver(bdf).map_err(e)?;
                if now != *driver_before {
                    return Err(format!(
                        "it is on {} after the rebind, not {}",
                        now.as_deref().unwrap_or("no driver"),
                        driver_before.as_deref().unwrap_or("no driver")
                    ));
                }
            }
            Ok(acted)
        }
        Change::Hugepages {
            node,
            page_kib,
            before,
        } => {
            if s.nr_hugepages(*node, *page_kib).map_err(e)? == *before {
                return Ok(false);
            }
            s.set_nr_hugepages(*node, *page_kib, *before).map_err(e)?;
            Ok(true)
        }
        Change::HugetlbfsMount {
            target,
            created_dir,
        } => {
            let mut acted = false;
            if s.hugetlbfs_mounted_at(target).map_err(e)? {
                s.unmount(target).map_err(e)?;
                acted = true;
            }
            if *created_dir && target.is_dir() {
                std::fs::remove_dir(target)
                    .map_err(|err| format!("removing {}: {err}", target.display()))?;
                acted = true;
            }
            Ok(acted)
        }
        Change::HugepageFiles { dir, prefix } => {
            let entries = match std::fs::read_dir(dir) {
                Ok(d) => d,
                Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(false),
                Err(err) => return Err(format!("{}: {err}", dir.display())),
            };
            let mut acted = false;
            for entry in entries.flatten() {
                let name = entry.file_name();
                if name.to_string_lossy().starts_with(prefix.as_str())
                    && entry.file_type().map(|t| t.is_file()).unwrap_or(false)
                {
                    std::fs::remove_file(entry.path())
                        .map_err(|err| format!("{}: {err}", entry.path().display()))?;
                    acted = true;
                }
            }
            Ok(acted)
        }
    }
}
