//! The run's open descriptors, shared by the runner's backend and the gc-settle runner, and the
//! check that stands between the write gate's approval and the first byte written.
//!
//! A write goes only to the very object the gate approved ([`Approved`]: hwceiling's own new
//! file, an existing file identified by device and inode, or a block device identified by its
//! device number). A descriptor for writing is opened once per run, with O_EXCL: on a block
//! device that is an exclusive claim, so the device cannot be mounted or assembled into RAID/LVM
//! while hwceiling holds it. The check runs on that held descriptor — it is still the approved
//! object, and (a block device) it is not mounted, partitioned or held and carries no signature —
//! before every case that writes, so nothing can change between the check and the writes.

use crate::backend::NvmeConfig;
use crate::device::{self, Kind};
use crate::engine::EngineError;
use crate::gate::{refusals, WriteRequest};
use hwc_runner::BenchError;
use std::collections::BTreeMap;
use std::fs::{File, Metadata};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What the write gate approved under a key, as it was when approved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approved {
    /// The `--target` path did not exist: hwceiling creates its own file there.
    OwnFile,
    /// An existing regular file (`--target` with `--allow-destructive-writes`): its device and
    /// inode.
    File { dev: u64, ino: u64 },
    /// A block device (a drive's namespace, or a `--target` device): its device number.
    BlockDevice { rdev: u64 },
}

impl Approved {
    /// The identity of what `meta` describes: a regular file or a block device.
    pub fn of(meta: &Metadata) -> Option<Approved> {
        if meta.file_type().is_block_device() {
            Some(Approved::BlockDevice { rdev: meta.rdev() })
        } else if meta.is_file() {
            Some(Approved::File {
                dev: meta.dev(),
                ino: meta.ino(),
            })
        } else {
            None
        }
    }

    fn describe(self) -> String {
        match self {
            Approved::OwnFile => "a file hwceiling creates".into(),
            Approved::File { dev, ino } => {
                format!("the regular file with inode {ino} on device {dev:#x}")
            }
            Approved::BlockDevice { rdev } => format!(
                "the block device {}:{}",
                libc::major(rdev),
                libc::minor(rdev)
            ),
        }
    }
}

/// An open descriptor, what it is and its size in bytes.
pub(crate) type Opened = (Arc<File>, Kind, u64);

/// The descriptors of one run, by (key, for writing).
#[derive(Default)]
struct Table {
    open: BTreeMap<(String, bool), Opened>,
    /// The file hwceiling created for `--target` (its name already removed): it serves reads and
    /// writes.
    scratch: Option<Opened>,
}

/// The run's descriptors, shared (cheaply cloned) between the backend and the gc-settle runner.
#[derive(Clone, Default)]
pub(crate) struct Descriptors(Arc<Mutex<Table>>);

impl Descriptors {
    /// Close every drive's descriptor (the target's own file stays): once the engine's cases
    /// are done, nothing of this process holds a drive another engine may hand to vfio-pci. A
    /// later case opens and checks anew.
    pub(crate) fn close_drives(&self) {
        if let Ok(mut t) = self.0.lock() {
            t.open.clear();
        }
    }

    /// A descriptor of a drive or the target, for reading or writing. For writing: only a key the
    /// gate approved, opened exclusively, and checked (see the module) every time it is asked
    /// for, right before a case writes.
    pub(crate) fn open(
        &self,
        cfg: &NvmeConfig,
        key: &str,
        write: bool,
    ) -> Result<Opened, BenchError> {
        let approved = if write {
            Some(*cfg.writable.get(key).ok_or_else(|| {
                BenchError::failed(format!(
                    "refused: {key} was not approved for writes by the safety gate"
                ))
            })?)
        } else {
            None
        };
        let mut table = self
            .0
            .lock()
            .map_err(|_| BenchError::failed("the descriptor table was poisoned by a panic"))?;
        let target = cfg.target.as_ref().filter(|t| t.key == key);
        if let Some(bytes) = target.and_then(|t| t.create_bytes) {
            if approved.is_some_and(|a| a != Approved::OwnFile) {
                return Err(BenchError::failed(format!(
                    "refused: {key} is hwceiling's own file but was approved as something else"
                )));
            }
            if let Some(f) = &table.scratch {
                return Ok(f.clone());
            }
            let path = &target.map(|t| t.path.clone()).unwrap_or_default();
            let f = device::create_scratch_file(path, bytes, cfg.cancel).map_err(open_error)?;
            let (k, s) = device::kind_and_size(path, &f).map_err(open_error)?;
            let opened = (Arc::new(f), k, s);
            table.scratch = Some(opened.clone());
            return Ok(opened);
        }
        let path: PathBuf = match target {
            Some(t) => t.path.clone(),
            None => cfg
                .drives
                .iter()
                .find(|d| d.key == key)
                .map(|d| d.device.clone())
                .ok_or_else(|| BenchError::failed(format!("drive {key} is not in this run")))?,
        };
        let slot = (key.to_string(), write);
        let opened = match table.open.remove(&slot) {
            Some(o) => o,
            None => {
                let f = device::open_direct(&path, write).map_err(open_error)?;
                let (k, s) = device::kind_and_size(&path, &f).map_err(open_error)?;
                if k == Kind::File && !write {
                    refuse_unwritten(&path, &f, s)?;
                }
                (Arc::new(f), k, s)
            }
        };
        if let Some(a) = approved {
            // A refused descriptor is not kept: its exclusive claim ends with the last case
            // that used it.
            check_before_write(&path, a, &opened.0)?;
        }
        table.open.insert(slot, opened.clone());
        Ok(opened)
    }
}

/// The descriptor `file`, opened for writing at `path`, is what the gate approved, and — a block
/// device — its live state still allows writing.
pub(crate) fn check_before_write(
    path: &Path,
    approved: Approved,
    file: &File,
) -> Result<(), BenchError> {
    let shown = path.display();
    let meta = file
        .metadata()
        .map_err(|e| BenchError::failed(format!("refused before writing to {shown}: {e}")))?;
    let now = Approved::of(&meta);
    if now != Some(approved) {
        return Err(BenchError::failed(format!(
            "refused before writing to {shown}: the safety gate approved {}, the path now opens {}",
            approved.describe(),
            now.map_or_else(|| "something else".to_string(), Approved::describe)
        )));
    }
    if let Approved::BlockDevice { rdev } = approved {
        let view = device::live_view(path);
        let mut why: Vec<String> = refusals(
            WriteRequest {
                allow_destructive_writes: true,
                named_explicitly: true,
            },
            &view,
        )
        .iter()
        .map(ToString::to_string)
        .collect();
        // The view must be of the held device (the path could have been pointed elsewhere).
        if !std::fs::metadata(path).is_ok_and(|m| m.rdev() == rdev) {
            why.push(format!("{shown} no longer names the device that is held"));
        }
        if !why.is_empty() {
            return Err(BenchError::failed(format!(
                "refused before writing to {shown}: {}",
                why.join("; ")
            )));
        }
    }
    Ok(())
}

/// An error opening a drive or target: not being allowed to is a reason the path cannot run
/// here (a waiver with its remedy); anything else fails the case.
/// A file target with holes or never-written extents would be read partly from nowhere (the
/// filesystem answers zeros without touching the device): such a case is waived, not measured.
fn refuse_unwritten(path: &Path, f: &File, size: u64) -> Result<(), BenchError> {
    let holes = device::unwritten_bytes(f, size).unwrap_or(0);
    if holes == 0 {
        return Ok(());
    }
    Err(BenchError::Unavailable {
        reason: format!(
            "{} has {holes} of its {size} bytes ({:.0} %) in holes or unwritten extents: \
             reading them returns zeros without touching the device, so the figure would not be \
             the device's",
            path.display(),
            holes as f64 * 100.0 / size.max(1) as f64
        ),
        hint: Some(
            "write the file in full first (e.g. dd if=/dev/urandom of=FILE bs=1M count=N \
             oflag=direct), or pass a path that does not exist: hwceiling then creates, fills \
             and removes one"
                .into(),
        ),
    })
}

pub(crate) fn open_error(e: device::DeviceError) -> BenchError {
    match &e {
        device::DeviceError::Open { cause, .. }
            if cause.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            BenchError::Unavailable {
                reason: e.to_string(),
                hint: Some(
                    "run as root, or give this user read access to the drive (the `disk` group)"
                        .into(),
                ),
            }
        }
        _ => BenchError::failed(e.to_string()),
    }
}

/// An engine error: a device smaller than one I/O is a reason the case cannot run here; anything
/// else fails it.
pub(crate) fn engine_error(e: EngineError) -> BenchError {
    match e {
        EngineError::TooSmall { .. } => BenchError::unavailable(e.to_string()),
        e => BenchError::failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_denied_is_a_waiver_and_other_errors_fail() {
        let open = |kind| device::DeviceError::Open {
            path: "/dev/nvme0n1".into(),
            mode: "",
            cause: std::io::Error::from(kind),
        };
        match open_error(open(std::io::ErrorKind::PermissionDenied)) {
            BenchError::Unavailable { reason, hint } => {
                assert!(reason.contains("/dev/nvme0n1"), "{reason}");
                assert!(hint.is_some_and(|h| h.contains("disk")));
            }
            other => panic!("expected a waiver, got {other:?}"),
        }
        assert!(matches!(
            open_error(open(std::io::ErrorKind::NotFound)),
            BenchError::Failed(_)
        ));
    }

    #[test]
    fn a_file_is_written_only_while_it_is_the_approved_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, [1u8; 4096]).unwrap();
        let approved = Approved::of(&std::fs::metadata(&path).unwrap()).unwrap();
        let f = File::options().read(true).write(true).open(&path).unwrap();
        check_before_write(&path, approved, &f).unwrap();
        // Another file renamed over the path: the new descriptor is not the approved file.
        let other = dir.path().join("other");
        std::fs::write(&other, [2u8; 4096]).unwrap();
        std::fs::rename(&other, &path).unwrap();
        let g = File::options().read(true).write(true).open(&path).unwrap();
        let e = check_before_write(&path, approved, &g)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the path now opens the regular file with inode"),
            "{e}"
        );
        // A file approved as a block device (or hwceiling's own file) is refused too.
        let e = check_before_write(&path, Approved::BlockDevice { rdev: 0 }, &g)
            .unwrap_err()
            .to_string();
        assert!(e.contains("approved the block device 0:0"), "{e}");
        assert!(check_before_write(&path, Approved::OwnFile, &g).is_err());
    }
}
