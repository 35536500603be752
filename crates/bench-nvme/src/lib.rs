//! NVMe through the kernel: Step 3's drive inspection (Identify Controller through the admin
//! ioctl), Paths 1 and 2 (sequential read/write sweeps with io_uring, O_DIRECT and registered,
//! NUMA-placed buffers, one pinned I/O thread per drive), and the write safety gate.
//!
//! [`setup`] turns what the command line asked for into the plan's NVMe options and a ready
//! [`NvmeBackend`]; it refuses — with every reason, before any byte is written — a write to a
//! device that is not named explicitly or may hold data.

pub mod backend;
pub mod descriptors;
pub mod device;
pub mod engine;
pub mod gate;
pub mod gc;
pub mod identify;
pub mod inspect;
pub mod signature;

pub use backend::{decl, DriveUnit, NvmeBackend, NvmeConfig, TargetUnit, ENGINE};
pub use descriptors::Approved;
pub use gc::{is_gc_settle, GcSettleRunner};
pub use inspect::inspect;

use gate::{drive_refusals, file_refusals, refusals, Refusal, SelectError, WriteRequest};
use hwc_model::Topology;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// Bytes per drive per repetition by default: the spec's ≥ 2 GiB, past the drive's cache.
pub const DEFAULT_BYTES_PER_DRIVE: u64 = 2 << 30;
/// Bytes per drive per 4 KiB random-read latency repetition.
pub const LATENCY_BYTES: u64 = 64 << 20;

/// What the command line asked of NVMe.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// `--drives`: serials, /dev paths, controller names or BDFs. Empty = every drive (reads).
    pub drives: Vec<String>,
    /// `--write-drives`: the drives writes go to, named as `drives` are. Empty = the drives of
    /// `drives` (writes need one or the other). Every drive named here must be read too: among
    /// `drives` when that names any.
    pub write_drives: Vec<String>,
    pub allow_destructive_writes: bool,
    /// `--target PATH`: measure this file or block device instead of the drives.
    pub target: Option<PathBuf>,
    /// The write path was selected (`--paths` names it, or no `--paths`).
    pub wants_write: bool,
    pub bytes_per_drive: u64,
}

/// What the planner and the backend need.
pub struct Setup {
    /// Drive names (`nvme0`, …) to measure; `None` = all.
    pub selected: Option<Vec<String>>,
    /// Drive names approved for writes; `None` = writes not asked for.
    pub write_drives: Option<Vec<String>>,
    /// The `--target`'s key (its path) and whether it may be written.
    pub target: Option<(String, bool)>,
    pub config: NvmeConfig,
}

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("--{flag}: {error}")]
    Select {
        flag: &'static str,
        error: SelectError,
    },
    #[error("refused to write to {device}: {}", reasons.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Refused {
        device: String,
        reasons: Vec<Refusal>,
    },
    #[error(
        "--allow-destructive-writes needs the drives named explicitly: --write-drives (or --drives) SERIAL|/dev/nvmeXnY|BDF, or --target PATH"
    )]
    NotNamed,
    #[error(
        "--write-drives names {drive} (`{named}`), which --drives leaves out: a drive written is also read, so name it in --drives too, or leave --drives out to read every drive"
    )]
    WriteNotRead { drive: String, named: String },
    #[error("--target {0}: {1}")]
    Target(String, String),
    #[error("--{flag} names {drive} twice (`{first}` and `{second}`): name each drive once")]
    SameDrive {
        flag: &'static str,
        drive: String,
        first: String,
        second: String,
    },
}

/// The key under which the plan names a drive: its BDF, or its controller name.
pub fn drive_key(d: &hwc_model::topology::NvmeDrive) -> String {
    d.bdf.clone().unwrap_or_else(|| d.name.clone())
}

/// CPUs of a NUMA node.
fn node_cpus(topo: &Topology, node: Option<u32>) -> Vec<u32> {
    node.and_then(|n| topo.platform.numa.iter().find(|x| x.id == n))
        .map(|n| n.cpus.clone())
        .unwrap_or_default()
}

/// Resolve the request against the machine: the drives, the target, and the write gate.
pub fn setup(
    topo: &Topology,
    req: &Request,
    cancel: &'static AtomicBool,
) -> Result<Setup, SetupError> {
    let named = resolve(topo, &req.drives, "drives")?;
    let mut write_named = resolve(topo, &req.write_drives, "write-drives")?;
    if !named.is_empty() {
        if let Some((i, d)) = write_named
            .iter()
            .enumerate()
            .find(|(_, d)| !named.contains(d))
        {
            return Err(SetupError::WriteNotRead {
                drive: d.clone(),
                named: req.write_drives[i].trim().to_string(),
            });
        }
    }
    if req.write_drives.is_empty() {
        write_named = named.clone();
    }
    let write_req = WriteRequest {
        allow_destructive_writes: req.allow_destructive_writes,
        named_explicitly: true,
    };
    let mut writable = BTreeMap::new();
    let mut target = None;
    let mut target_unit = None;
    if let Some(path) = &req.target {
        let key = path.display().to_string();
        let (approved, create) = target_access(path, req, write_req)?;
        let may_write = approved.is_some();
        if let Some(a) = approved {
            writable.insert(key.clone(), a);
        }
        let cpu_nodes: Vec<&hwc_model::topology::NumaNode> = topo
            .platform
            .numa
            .iter()
            .filter(|n| !n.cpus.is_empty())
            .collect();
        let node = match cpu_nodes.as_slice() {
            [only] => Some(only.id),
            _ => None,
        };
        target_unit = Some(TargetUnit {
            key: key.clone(),
            path: path.clone(),
            create_bytes: create.then_some(req.bytes_per_drive),
            node,
            cpus: node_cpus(topo, node),
        });
        target = Some((key, may_write));
    }
    let mut write_drives = None;
    if req.wants_write && req.allow_destructive_writes && req.target.is_none() {
        if write_named.is_empty() {
            return Err(SetupError::NotNamed);
        }
        for name in &write_named {
            let Some(d) = topo.nvme.iter().find(|d| &d.name == name) else {
                continue;
            };
            let views: Vec<gate::DeviceView> = d
                .namespaces
                .iter()
                .map(|n| device::live_view(&Path::new("/dev").join(&n.name)))
                .collect();
            let mut r = drive_refusals(write_req, d, &views);
            // What is written is the first namespace: the gate approves that very device.
            let first = d
                .namespaces
                .first()
                .map(|n| Path::new("/dev").join(&n.name));
            let approved = first
                .as_deref()
                .and_then(|p| std::fs::metadata(p).ok())
                .filter(|m| std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type()))
                .and_then(|m| Approved::of(&m));
            if r.is_empty() && approved.is_none() {
                r.push(Refusal::ProbeFailed(format!(
                    "{} is not a block device",
                    first.unwrap_or_default().display()
                )));
            }
            if !r.is_empty() {
                let label = format!(
                    "{} (serial {}, {})",
                    d.name,
                    d.serial.as_deref().map(str::trim).unwrap_or("?"),
                    d.bdf.as_deref().unwrap_or("no BDF")
                );
                return Err(SetupError::Refused {
                    device: label,
                    reasons: r,
                });
            }
            if let Some(a) = approved {
                writable.insert(drive_key(d), a);
            }
        }
        write_drives = Some(write_named);
    }
    let drives = topo
        .nvme
        .iter()
        .filter(|d| !d.namespaces.is_empty())
        .map(|d| DriveUnit {
            key: drive_key(d),
            device: Path::new("/dev").join(&d.namespaces[0].name),
            node: d.numa_node,
            cpus: node_cpus(topo, d.numa_node),
        })
        .collect();
    Ok(Setup {
        selected: (!named.is_empty()).then_some(named),
        write_drives,
        target,
        config: NvmeConfig {
            drives,
            target: target_unit,
            writable,
            bytes_per_drive: req.bytes_per_drive,
            latency_bytes: LATENCY_BYTES.min(req.bytes_per_drive),
            cancel,
        },
    })
}

/// The kernel names (`nvme0`, …) of the drives `names` name (`--{flag}`), in their order: each
/// must name one drive, and no drive may be named twice.
fn resolve(
    topo: &Topology,
    names: &[String],
    flag: &'static str,
) -> Result<Vec<String>, SetupError> {
    let mut resolved: Vec<String> = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let d = gate::select(topo, n).map_err(|error| SetupError::Select { flag, error })?;
        if let Some(j) = resolved.iter().position(|x| x == &d.name) {
            return Err(SetupError::SameDrive {
                flag,
                drive: d.name.clone(),
                first: names[j].trim().to_string(),
                second: names[i].trim().to_string(),
            });
        }
        resolved.push(d.name.clone());
    }
    Ok(resolved)
}

/// What the gate approves of a `--target` for writing (`None`: no writes), and whether
/// hwceiling creates it.
fn target_access(
    path: &Path,
    req: &Request,
    write_req: WriteRequest,
) -> Result<(Option<Approved>, bool), SetupError> {
    let shown = path.display().to_string();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A missing path under /dev is a device name mistyped, not a file to create there.
            if mistyped_device(path) {
                return Err(SetupError::Target(
                    shown,
                    "no such device (hwceiling creates a scratch file only outside /dev)".into(),
                ));
            }
            // hwceiling creates it: reads and writes touch only its own file. Whether it can is
            // checked now, before anything is measured or any output is written.
            creatable(path, req.bytes_per_drive).map_err(|why| SetupError::Target(shown, why))?;
            return Ok((req.wants_write.then_some(Approved::OwnFile), true));
        }
        Err(e) => return Err(SetupError::Target(shown, e.to_string())),
    };
    if let Some(why) = in_memory(path, &meta) {
        return Err(SetupError::Target(shown, why));
    }
    if std::os::unix::fs::FileTypeExt::is_block_device(&meta.file_type()) {
        if !(req.wants_write && req.allow_destructive_writes) {
            return Ok((None, false));
        }
        let view = device::live_view(path);
        let mut r = refusals(write_req, &view);
        if is_partition(path) {
            r.push(Refusal::Partitioned(vec![format!(
                "{shown} is itself a partition of a partitioned drive"
            )]));
        }
        if !r.is_empty() {
            return Err(SetupError::Refused {
                device: shown,
                reasons: r,
            });
        }
        Ok((Approved::of(&meta), false))
    } else if meta.is_file() {
        if !req.wants_write {
            return Ok((None, false));
        }
        let r = file_refusals(false, req.allow_destructive_writes);
        Ok((r.is_empty().then(|| Approved::of(&meta)).flatten(), false))
    } else {
        Err(SetupError::Target(
            shown,
            "neither a regular file nor a block device".into(),
        ))
    }
}

/// The folder a new file at `path` is created in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Whether a missing `path` would be created in `/dev` (but not `/dev/shm`), its folder resolved:
/// a device name mistyped, such as `/dev/nvme0n9`.
fn mistyped_device(path: &Path) -> bool {
    std::fs::canonicalize(folder_of(path))
        .is_ok_and(|f| f.starts_with("/dev") && !f.starts_with("/dev/shm"))
}

/// The memory-backed filesystem `path` lies on (`tmpfs`, which `/dev/shm` and devtmpfs are too,
/// or `ramfs`), where it does; `None` elsewhere or where `statfs` fails.
pub fn memory_filesystem(path: &Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs is plain data, for which all zeroes is a valid value.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: statfs(2) with a valid NUL-terminated path and a live struct to fill; the struct is
    // read only on success.
    if unsafe { libc::statfs(c.as_ptr(), &mut fs) } != 0 {
        return None;
    }
    // statfs(2)'s magic numbers, compared on their 32 bits: `f_type`'s width and sign differ by
    // architecture.
    const TMPFS_MAGIC: u64 = 0x0102_1994;
    const RAMFS_MAGIC: u64 = 0x8584_58f6;
    match fs.f_type as u64 & 0xffff_ffff {
        TMPFS_MAGIC => Some("tmpfs"),
        RAMFS_MAGIC => Some("ramfs"),
        _ => None,
    }
}

/// Why a target at `path` (existing, `meta`) would measure memory, not storage: a file on a
/// memory-backed filesystem, or a block device in memory ([`block_in_memory`]). A figure from it
/// would read as a storage ceiling.
fn in_memory(path: &Path, meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    if meta.is_file() {
        let fs = memory_filesystem(path)?;
        return Some(format!("it lies on {fs}, {IN_MEMORY}"));
    }
    if !meta.file_type().is_block_device() {
        return None;
    }
    let sys = PathBuf::from(format!(
        "/sys/dev/block/{}:{}",
        libc::major(meta.rdev()),
        libc::minor(meta.rdev())
    ));
    let name = std::fs::canonicalize(&sys).ok()?;
    let name = name.file_name()?.to_string_lossy();
    // A loop device's backing file, or its parent's for a partition of one. A file deleted
    // since reads `… (deleted)`: its folder tells where it lay.
    let backing = [
        sys.join("loop/backing_file"),
        sys.join("../loop/backing_file"),
    ]
    .iter()
    .find_map(|f| std::fs::read_to_string(f).ok())
    .map(|b| PathBuf::from(b.trim_end().trim_end_matches(" (deleted)")));
    let backing_fs = backing.as_deref().and_then(|b| {
        memory_filesystem(b)
            .or_else(|| memory_filesystem(b.parent()?))
            .map(|fs| (b, fs))
    });
    block_in_memory(&name, backing_fs)
}

/// How every refusal of a target in memory ends: why, and what to name instead.
const IN_MEMORY: &str = "in memory: its figures would be RAM's, not storage's; name a file on a \
                         drive's filesystem, or a block device";

/// Why the block device `name` holds memory, not storage: a RAM disk (`ram*`, `zram*`), or a loop
/// device whose backing file lies on a memory-backed filesystem (`backing`: the file and that
/// filesystem).
fn block_in_memory(name: &str, backing: Option<(&Path, &str)>) -> Option<String> {
    if name.starts_with("ram") || name.starts_with("zram") {
        return Some(format!("{name} is a RAM disk, {IN_MEMORY}"));
    }
    let (file, fs) = backing?;
    Some(format!(
        "{name} is backed by {}, which lies on {fs}, {IN_MEMORY}",
        file.display()
    ))
}

/// Why hwceiling cannot create `path` with `bytes` bytes (its folder is missing, not a folder, not
/// writable, on a memory-backed filesystem, or its filesystem has less free space), or `Ok` when
/// it can.
fn creatable(path: &Path, bytes: u64) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    let folder = folder_of(path);
    let shown = folder.display();
    match std::fs::metadata(folder) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(format!("{shown} is not a folder")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("its folder {shown} does not exist"))
        }
        Err(e) => return Err(format!("its folder {shown}: {e}")),
    }
    if let Some(fs) = memory_filesystem(folder) {
        return Err(format!("its folder {shown} lies on {fs}, {IN_MEMORY}"));
    }
    let c_folder = std::ffi::CString::new(folder.as_os_str().as_bytes())
        .map_err(|_| format!("{shown} holds a NUL byte"))?;
    // SAFETY: access(2) with a valid NUL-terminated path.
    if unsafe { libc::access(c_folder.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!("cannot create a file in {shown}: {e}"));
    }
    // SAFETY: statvfs is plain data, for which all zeroes is a valid value.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs(2) with a valid NUL-terminated path and a live struct to fill; the struct
    // is read only on success.
    if unsafe { libc::statvfs(c_folder.as_ptr(), &mut vfs) } == 0 {
        let free = vfs.f_bavail.saturating_mul(vfs.f_frsize);
        // The file is filled in whole 4 KiB pieces (see `device::create_scratch_file`).
        let need = bytes.div_ceil(4096).saturating_mul(4096);
        if free < need {
            let gib = |b: u64| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64);
            return Err(format!(
                "it would be created with {} (--nvme-bytes), but its filesystem has {} free",
                gib(need),
                gib(free)
            ));
        }
    }
    Ok(())
}

/// True when the block device at `path` is a partition (sysfs has a `partition` attribute).
fn is_partition(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).is_ok_and(|m| {
        let rdev = m.rdev();
        Path::new(&format!(
            "/sys/dev/block/{}:{}/partition",
            libc::major(rdev),
            libc::minor(rdev)
        ))
        .exists()
    })
}

/// Every reason the write gate gives against the data on `d`, as if it were named for writes
/// (mounted or swap, partitioned, held, signed, unreadable, no namespace visible): taking a
/// drive from the kernel for a userspace driver needs the same proof that nothing on it can be
/// lost.
pub fn data_refusals(d: &hwc_model::topology::NvmeDrive) -> Vec<Refusal> {
    let views: Vec<gate::DeviceView> = d
        .namespaces
        .iter()
        .map(|n| device::live_view(&Path::new("/dev").join(&n.name)))
        .collect();
    drive_refusals(
        WriteRequest {
            allow_destructive_writes: true,
            named_explicitly: true,
        },
        d,
        &views,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    static NEVER: AtomicBool = AtomicBool::new(false);

    fn req(target: Option<PathBuf>, write: bool, flag: bool) -> Request {
        Request {
            drives: Vec::new(),
            write_drives: Vec::new(),
            allow_destructive_writes: flag,
            target,
            wants_write: write,
            bytes_per_drive: 1 << 20,
        }
    }

    #[test]
    fn a_new_target_file_is_created_and_writable() {
        let dir = hwc_testkit::storage_tempdir();
        let path = dir.path().join("new");
        let s = setup(
            &Topology::default(),
            &req(Some(path.clone()), true, false),
            &NEVER,
        )
        .unwrap();
        assert_eq!(s.target, Some((path.display().to_string(), true)));
        let t = s.config.target.unwrap();
        assert_eq!(t.create_bytes, Some(1 << 20));
        assert_eq!(
            s.config.writable.get(&path.display().to_string()),
            Some(&Approved::OwnFile)
        );
        assert!(!path.exists(), "nothing is created before the run");
    }

    #[test]
    fn an_existing_file_is_written_only_with_the_flag() {
        let dir = hwc_testkit::storage_tempdir();
        let path = dir.path().join("data");
        std::fs::write(&path, vec![7u8; 8192]).unwrap();
        let topo = Topology::default();
        let s = setup(&topo, &req(Some(path.clone()), true, false), &NEVER).unwrap();
        assert!(!s.target.as_ref().unwrap().1);
        assert!(s.config.writable.is_empty());
        assert_eq!(s.config.target.unwrap().create_bytes, None);
        let s = setup(&topo, &req(Some(path.clone()), true, true), &NEVER).unwrap();
        assert!(s.target.unwrap().1);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(
            s.config.writable.get(&path.display().to_string()),
            Some(&Approved::File {
                dev: std::os::unix::fs::MetadataExt::dev(&meta),
                ino: std::os::unix::fs::MetadataExt::ino(&meta)
            }),
            "approved: this very file"
        );
        // Reads only: never writable, whatever the flag.
        let s = setup(&topo, &req(Some(path), false, true), &NEVER).unwrap();
        assert!(!s.target.unwrap().1);
    }

    #[test]
    fn writes_to_drives_need_them_named() {
        let e = setup(&Topology::default(), &req(None, true, true), &NEVER)
            .err()
            .unwrap();
        assert!(matches!(e, SetupError::NotNamed), "{e}");
        let mut r = req(None, true, true);
        r.drives = vec!["NOSUCHSERIAL".into()];
        let e = setup(&Topology::default(), &r, &NEVER).err().unwrap();
        assert!(e.to_string().contains("names no NVMe drive"), "{e}");
        // Without the flag, naming drives only selects what is read.
        let s = setup(&Topology::default(), &req(None, true, false), &NEVER).unwrap();
        assert!(s.write_drives.is_none() && s.selected.is_none());
    }

    #[test]
    fn a_new_target_needs_a_folder_it_can_be_created_in_with_room_for_it() {
        let dir = hwc_testkit::storage_tempdir();
        let setup_err = |path: PathBuf, bytes: u64| {
            let mut r = req(Some(path), false, false);
            r.bytes_per_drive = bytes;
            setup(&Topology::default(), &r, &NEVER)
                .err()
                .map(|e| e.to_string())
        };
        let missing = dir.path().join("no-such-dir").join("x");
        let e = setup_err(missing.clone(), 1 << 20).unwrap();
        assert_eq!(
            e,
            format!(
                "--target {}: its folder {} does not exist",
                missing.display(),
                dir.path().join("no-such-dir").display()
            )
        );
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        // A path through a file: the system says so (not a directory).
        let e = setup_err(file.join("x"), 1 << 20).unwrap();
        assert!(e.starts_with("--target "), "{e}");
        // More than the filesystem has free.
        let e = setup_err(dir.path().join("huge"), u64::MAX / 2).unwrap();
        assert!(e.contains("but its filesystem has"), "{e}");
        assert!(setup_err(dir.path().join("fine"), 1 << 20).is_none());
        assert!(
            !dir.path().join("fine").exists(),
            "nothing is created by the check"
        );
    }

    /// A machine of two drives, nvme90 (serial S0) and nvme91 (S1), numbered so that
    /// no machine running the tests has them in /dev (so the write gate, which looks at the device, refuses them).
    fn two_drives() -> Topology {
        let drive = |name: &str, serial: &str, bdf: &str| hwc_model::topology::NvmeDrive {
            name: name.into(),
            serial: Some(serial.into()),
            bdf: Some(bdf.into()),
            namespaces: vec![hwc_model::topology::NvmeNamespace {
                name: format!("{name}n1"),
                size_bytes: None,
                logical_block_size: None,
                max_hw_sectors_kb: None,
                partitions: vec![],
                holders: vec![],
                mounts: vec![],
                in_use: false,
            }],
            ..Default::default()
        };
        Topology {
            nvme: vec![
                drive("nvme90", "S0", "0000:41:00.0"),
                drive("nvme91", "S1", "0000:42:00.0"),
            ],
            ..Topology::default()
        }
    }

    #[test]
    fn write_drives_name_what_is_written_while_reads_keep_their_own_selection() {
        let topo = two_drives();
        let mut r = req(None, false, true);
        r.write_drives = vec!["S1".into()];
        // No write path asked for: the names are resolved, nothing is gated or written, and
        // reads cover every drive.
        let s = setup(&topo, &r, &NEVER).unwrap();
        assert!(s.selected.is_none() && s.write_drives.is_none());
        // Writes asked for: the gate looks at the drive --write-drives names, and only at it
        // (not being in this machine's /dev, it is refused).
        r.wants_write = true;
        let e = setup(&topo, &r, &NEVER).err().unwrap().to_string();
        assert!(
            e.starts_with("refused to write to nvme91 (serial S1, 0000:42:00.0)"),
            "{e}"
        );
        // With --drives, a drive written must be one read.
        r.drives = vec!["S0".into()];
        let e = setup(&topo, &r, &NEVER).err().unwrap().to_string();
        assert_eq!(
            e,
            "--write-drives names nvme91 (`S1`), which --drives leaves out: a drive written is \
             also read, so name it in --drives too, or leave --drives out to read every drive"
        );
        r.drives = vec!["S0".into(), "nvme91".into()];
        let e = setup(&topo, &r, &NEVER).err().unwrap().to_string();
        assert!(e.starts_with("refused to write to nvme91 "), "{e}");
        // Bad names say which flag named them.
        r.write_drives = vec!["S1".into(), "/dev/nvme91".into()];
        let e = setup(&topo, &r, &NEVER).err().unwrap().to_string();
        assert_eq!(
            e,
            "--write-drives names nvme91 twice (`S1` and `/dev/nvme91`): name each drive once"
        );
        r.write_drives = vec!["NOSUCH".into()];
        let e = setup(&topo, &r, &NEVER).err().unwrap().to_string();
        assert!(
            e.starts_with("--write-drives: ") && e.contains("names no NVMe drive"),
            "{e}"
        );
    }

    #[test]
    fn one_drive_named_twice_is_refused_naming_both() {
        let topo = two_drives();
        let mut r = req(None, false, false);
        r.drives = vec!["S1".into(), "nvme90".into(), "/dev/nvme91n1".into()];
        let e = setup(&topo, &r, &NEVER).err().unwrap().to_string();
        assert_eq!(
            e,
            "--drives names nvme91 twice (`S1` and `/dev/nvme91n1`): name each drive once"
        );
        r.drives = vec!["S1".into(), "0000:41:00.0".into()];
        let s = setup(&topo, &r, &NEVER).unwrap();
        assert_eq!(s.selected, Some(vec!["nvme91".into(), "nvme90".into()]));
    }

    /// The filesystem type `/proc/self/mounts` gives the mount at `at` (the last one mounted
    /// there), read without `statfs`.
    fn mount_type(at: &str) -> Option<String> {
        let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
        mounts
            .lines()
            .rev()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|f| f.get(1) == Some(&at))
            .and_then(|f| f.get(2).map(|t| t.to_string()))
    }

    #[test]
    fn memory_filesystems_are_told_from_storage() {
        assert_eq!(memory_filesystem(Path::new("/proc")), None);
        assert_eq!(memory_filesystem(Path::new("/no/such/folder")), None);
        match mount_type("/dev/shm").as_deref() {
            Some("tmpfs") => assert_eq!(memory_filesystem(Path::new("/dev/shm")), Some("tmpfs")),
            other => println!("SKIPPED: /dev/shm is {other:?} here, not tmpfs"),
        }
    }

    #[test]
    fn a_target_in_memory_is_refused_before_anything_is_created() {
        if mount_type("/dev/shm").as_deref() != Some("tmpfs") {
            println!("SKIPPED: no tmpfs at /dev/shm here");
            return;
        }
        let topo = Topology::default();
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let new = dir.path().join("new");
        let old = dir.path().join("old");
        std::fs::write(&old, [7u8; 4096]).unwrap();
        for (path, write, flag) in [(&new, false, false), (&new, true, true), (&old, true, true)] {
            let e = setup(&topo, &req(Some(path.clone()), write, flag), &NEVER)
                .err()
                .unwrap();
            assert!(matches!(e, SetupError::Target(..)), "{e}");
            assert!(e.to_string().contains("tmpfs, in memory"), "{e}");
        }
        assert!(!new.exists());
        assert_eq!(std::fs::read(&old).unwrap(), [7u8; 4096]);
        // The same file on storage is a target.
        let disk = hwc_testkit::storage_tempdir();
        assert!(setup(
            &topo,
            &req(Some(disk.path().join("new")), false, false),
            &NEVER
        )
        .is_ok());
    }

    #[test]
    fn a_missing_path_under_dev_is_a_mistyped_device_not_a_file_to_create() {
        let path = PathBuf::from("/dev/hwc-no-such-device");
        let e = setup(
            &Topology::default(),
            &req(Some(path.clone()), true, false),
            &NEVER,
        )
        .err()
        .unwrap();
        assert_eq!(
            e.to_string(),
            "--target /dev/hwc-no-such-device: no such device (hwceiling creates a scratch file \
             only outside /dev)"
        );
        assert!(!path.exists());
        // The folder is resolved: `..` out of /dev is not under it, a symlink into it is.
        assert!(!mistyped_device(Path::new("/dev/../var/tmp/x")));
        assert!(!mistyped_device(Path::new("/dev/shm/x")));
        assert!(mistyped_device(Path::new("/dev/./nvme0n9")));
        let dir = hwc_testkit::storage_tempdir();
        let link = dir.path().join("to-dev");
        std::os::unix::fs::symlink("/dev", &link).unwrap();
        assert!(mistyped_device(&link.join("nvme0n9")));
        assert!(!mistyped_device(&dir.path().join("new")));
    }

    #[test]
    fn a_character_device_in_memory_keeps_its_own_refusal() {
        // /dev/null lies on devtmpfs (tmpfs): refused as what it is, not as memory.
        let e = setup(
            &Topology::default(),
            &req(Some(PathBuf::from("/dev/null")), false, false),
            &NEVER,
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("neither a regular file"), "{e}");
    }

    #[test]
    fn ram_disks_and_loop_devices_over_memory_are_not_storage() {
        let shm = Path::new("/dev/shm/img");
        for name in ["ram0", "zram1"] {
            let why = block_in_memory(name, None).unwrap();
            assert!(why.starts_with(&format!("{name} is a RAM disk")), "{why}");
        }
        let why = block_in_memory("loop3", Some((shm, "tmpfs"))).unwrap();
        assert!(
            why.starts_with("loop3 is backed by /dev/shm/img, which lies on tmpfs"),
            "{why}"
        );
        // A loop device over a file on storage, and a drive, are storage.
        assert_eq!(block_in_memory("loop3", None), None);
        assert_eq!(block_in_memory("nvme0n1", None), None);
        assert_eq!(block_in_memory("vda", None), None);
    }

    #[test]
    fn a_directory_is_not_a_target() {
        // Wherever it lies: in memory too, a folder is refused as a folder.
        let dir = tempfile::tempdir().unwrap();
        let e = setup(
            &Topology::default(),
            &req(Some(dir.path().to_path_buf()), false, false),
            &NEVER,
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("neither a regular file"), "{e}");
    }
}
