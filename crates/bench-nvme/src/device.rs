//! Opening what is measured — an NVMe namespace, a `--target` block device or file — with
//! O_DIRECT, its size, and what the live system says about a block device (mounts, swap,
//! partitions, holders, signatures) for the write gate.

use crate::gate::DeviceView;
use crate::signature;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// `_IOR(0x12, 114, size_t)`: the size of a block device in bytes.
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("cannot open {path} with O_DIRECT{mode}: {cause}")]
    Open {
        path: String,
        mode: &'static str,
        cause: std::io::Error,
    },
    #[error("cannot read the size of {path}: {cause}")]
    Size { path: String, cause: std::io::Error },
    #[error("{0} is neither a block device nor a regular file")]
    Kind(String),
    #[error("cannot prepare the target file {path}: {cause}")]
    Fill { path: String, cause: std::io::Error },
}

/// What a target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    BlockDevice,
    File,
}

/// Open `path` with O_DIRECT, read-only or read-write. For writing, also with O_EXCL: on a block
/// device that is an exclusive claim — refused (EBUSY) while the device is mounted or claimed by
/// MD, LVM or another exclusive opener, and while the descriptor is open, nothing can mount or
/// claim it. Linux ignores O_EXCL without O_CREAT on a regular file.
pub fn open_direct(path: &Path, write: bool) -> Result<File, DeviceError> {
    let flags = if write {
        libc::O_DIRECT | libc::O_EXCL
    } else {
        libc::O_DIRECT
    };
    OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(flags)
        .open(path)
        .map_err(|cause| DeviceError::Open {
            path: path.display().to_string(),
            mode: if write { " for writing" } else { "" },
            cause,
        })
}

/// Block device or regular file, and its size in bytes.
pub fn kind_and_size(path: &Path, file: &File) -> Result<(Kind, u64), DeviceError> {
    let meta = file.metadata().map_err(|cause| DeviceError::Size {
        path: path.display().to_string(),
        cause,
    })?;
    if meta.file_type().is_block_device() {
        let mut size: u64 = 0;
        // SAFETY: BLKGETSIZE64 writes one u64 through the pointer, which is valid and live.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut size) };
        if rc != 0 {
            return Err(DeviceError::Size {
                path: path.display().to_string(),
                cause: std::io::Error::last_os_error(),
            });
        }
        Ok((Kind::BlockDevice, size))
    } else if meta.is_file() {
        Ok((Kind::File, meta.len()))
    } else {
        Err(DeviceError::Kind(path.display().to_string()))
    }
}

/// Bytes of a regular file in holes — or, on filesystems that report them as holes (ext4, xfs,
/// btrfs), in allocated but never-written extents — from `SEEK_DATA`/`SEEK_HOLE`. Reading them
/// returns zeros without touching the device. 0 where the filesystem does not tell.
pub fn unwritten_bytes(file: &File, size: u64) -> std::io::Result<u64> {
    let fd = file.as_raw_fd();
    let seek = |from: u64, whence: libc::c_int| -> std::io::Result<Option<u64>> {
        let from = libc::off_t::try_from(from).map_err(std::io::Error::other)?;
        // SAFETY: lseek on our own open descriptor; it only moves the file offset (this
        // descriptor is used with positioned I/O only, which ignores the offset).
        let at = unsafe { libc::lseek(fd, from, whence) };
        if at >= 0 {
            return Ok(Some(at as u64));
        }
        let e = std::io::Error::last_os_error();
        // ENXIO: no data (SEEK_DATA) beyond `from`.
        if e.raw_os_error() == Some(libc::ENXIO) {
            Ok(None)
        } else {
            Err(e)
        }
    };
    let mut holes = 0u64;
    let mut at = 0u64;
    while at < size {
        let Some(data) = seek(at, libc::SEEK_DATA)? else {
            holes += size - at;
            break;
        };
        holes += data.min(size) - at;
        if data >= size {
            break;
        }
        at = seek(data, libc::SEEK_HOLE)?.unwrap_or(size).min(size);
    }
    Ok(holes)
}

/// Create `path` (it must not exist), remove its name at once — the open descriptor keeps the
/// data alive, and nothing is left behind however the process ends — and fill `size` bytes with
/// O_DIRECT writes, so reads find real blocks. Returns the read-write O_DIRECT descriptor. Stops
/// filling when `cancel` is set (SIGINT/SIGTERM), with an `Interrupted` error.
pub fn create_scratch_file(
    path: &Path,
    size: u64,
    cancel: &AtomicBool,
) -> Result<File, DeviceError> {
    let fill_err = |cause| DeviceError::Fill {
        path: path.display().to_string(),
        cause,
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(fill_err)?;
    std::fs::remove_file(path).map_err(fill_err)?;
    let chunk = 8usize << 20;
    let mut buf = hwc_numa::NumaBuffer::new(chunk, None, false)
        .map_err(|e| fill_err(std::io::Error::other(e.to_string())))?;
    crate::engine::fill_pattern(buf.as_mut_slice(), 0x5eed);
    let mut off = 0u64;
    while off < size {
        if cancel.load(Ordering::Relaxed) {
            return Err(fill_err(std::io::Error::from(
                std::io::ErrorKind::Interrupted,
            )));
        }
        let n = usize::try_from((size - off).min(chunk as u64)).unwrap_or(chunk);
        // O_DIRECT lengths must stay aligned: round the last piece up to 4 KiB.
        let n = n.div_ceil(4096) * 4096;
        std::os::unix::fs::FileExt::write_all_at(&file, &buf.as_slice()[..n], off)
            .map_err(fill_err)?;
        off += n as u64;
    }
    file.sync_all().map_err(fill_err)?;
    Ok(file)
}

/// `maj:min` of a device number.
fn dev_id(rdev: u64) -> String {
    format!("{}:{}", libc::major(rdev), libc::minor(rdev))
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|it| {
            it.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// What the live system says about the block device at `path`: mounts (by device number, from
/// `/proc/self/mountinfo`), active swap (`/proc/swaps`), partitions and holders (sysfs), and the
/// signature probe of its first and last MiB (reads only).
pub fn live_view(path: &Path) -> DeviceView {
    let device = path.display().to_string();
    let mut view = DeviceView {
        device: device.clone(),
        signatures: Ok(Vec::new()),
        ..DeviceView::default()
    };
    let rdev = match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_block_device() => m.rdev(),
        Ok(_) => {
            view.signatures = Err(format!("{device} is not a block device"));
            return view;
        }
        Err(e) => {
            view.signatures = Err(format!("{device}: {e}"));
            return view;
        }
    };
    let sys = PathBuf::from(format!("/sys/dev/block/{}", dev_id(rdev)));
    let sys = std::fs::canonicalize(&sys).unwrap_or(sys);
    view.partitions = names(&sys)
        .into_iter()
        .filter(|n| sys.join(n).join("partition").exists())
        .collect();
    let mut ids = vec![dev_id(rdev)];
    for p in &view.partitions {
        if let Ok(id) = std::fs::read_to_string(sys.join(p).join("dev")) {
            ids.push(id.trim().to_string());
        }
    }
    let mut holders: Vec<String> = std::iter::once(sys.clone())
        .chain(view.partitions.iter().map(|p| sys.join(p)))
        .flat_map(|d| names(&d.join("holders")))
        .collect();
    holders.sort();
    holders.dedup();
    view.holders = holders;
    if let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") {
        view.mounts = mounts_of(&text, &ids);
    }
    if let Ok(text) = std::fs::read_to_string("/proc/swaps") {
        for dev in text
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next())
        {
            if let Ok(m) = std::fs::metadata(dev) {
                if m.file_type().is_block_device() && ids.contains(&dev_id(m.rdev())) {
                    view.mounts.push(format!("swap ({dev})"));
                }
            }
        }
    }
    view.signatures = File::open(path)
        .and_then(|f| {
            let (_, size) = kind_and_size(path, &f).map_err(std::io::Error::other)?;
            signature::probe(&f, size)
        })
        .map_err(|e| e.to_string());
    view
}

/// Mount points in a `mountinfo` text whose device (`maj:min`, the third field) is one of `ids`.
pub fn mounts_of(mountinfo: &str, ids: &[String]) -> Vec<String> {
    let mut v: Vec<String> = mountinfo
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (id, point) = (f.get(2)?, f.get(4)?);
            ids.iter().any(|x| x == id).then(|| point.to_string())
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_matches_by_device_number() {
        let text = "22 1 259:1 / /data rw - ext4 /dev/nvme0n1p1 rw\n\
                    23 1 259:0 / /raw rw - xfs /dev/nvme0n1 rw\n\
                    24 1 8:1 / / rw - ext4 /dev/sda1 rw\n";
        assert_eq!(
            mounts_of(text, &["259:0".into(), "259:1".into()]),
            vec!["/data", "/raw"]
        );
        assert!(mounts_of(text, &["7:0".into()]).is_empty());
    }

    #[test]
    fn holes_and_unwritten_extents_are_counted_written_data_is_not() {
        use std::io::{Seek, SeekFrom, Write};
        let dir = tempfile::tempdir().unwrap();
        let mib = 1u64 << 20;
        // Written through: no holes.
        let mut full = File::create(dir.path().join("full")).unwrap();
        full.write_all(&vec![7u8; 4 << 20]).unwrap();
        full.sync_all().unwrap();
        assert_eq!(unwritten_bytes(&full, 4 * mib).unwrap(), 0);
        // 1 MiB written at 2 MiB of an 8 MiB sparse file: the rest is holes.
        let mut sparse = File::create(dir.path().join("sparse")).unwrap();
        sparse.set_len(8 * mib).unwrap();
        sparse.seek(SeekFrom::Start(2 * mib)).unwrap();
        sparse.write_all(&vec![1u8; 1 << 20]).unwrap();
        sparse.sync_all().unwrap();
        let holes = unwritten_bytes(&sparse, 8 * mib).unwrap();
        // A filesystem without SEEK_HOLE support reports none; every one that does sees 7 MiB
        // (allocation granularity may round the written part up a little).
        assert!(
            holes == 0 || (6 * mib..=7 * mib).contains(&holes),
            "{holes}"
        );
        if holes == 0 {
            eprintln!("SKIPPED: this filesystem does not report holes");
        }
    }

    #[test]
    fn a_scratch_file_leaves_no_name_behind_and_holds_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("scratch");
        let never = AtomicBool::new(false);
        match create_scratch_file(&path, 3 << 20, &never) {
            Ok(f) => {
                assert!(!path.exists(), "the name is removed at once");
                let (kind, size) = kind_and_size(&path, &f).unwrap();
                assert_eq!((kind, size), (Kind::File, 3 << 20));
            }
            // tmpfs and some overlay filesystems refuse O_DIRECT: nothing to test there.
            Err(e) => eprintln!("SKIPPED: {e}"),
        }
        assert!(
            create_scratch_file(dir.path(), 4096, &never).is_err(),
            "an existing path"
        );
        let cancelled = AtomicBool::new(true);
        let other = dir.path().join("cancelled");
        assert!(create_scratch_file(&other, 1 << 20, &cancelled).is_err());
        assert!(!other.exists(), "an interrupted fill leaves no name behind");
    }

    #[test]
    fn o_excl_without_o_creat_opens_a_regular_file_for_writing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        std::fs::write(&path, [1u8; 4096]).unwrap();
        match open_direct(&path, true) {
            // Twice: a regular file takes no exclusive claim.
            Ok(_f) => assert!(open_direct(&path, true).is_ok()),
            Err(e) => eprintln!("SKIPPED: {e}"),
        }
    }
}
