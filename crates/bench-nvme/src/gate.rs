//! The write safety gate: which drives a name on the command line means, and whether a device
//! may be written. Pure functions over the detected topology and a [`DeviceView`] (what sysfs,
//! the mount tables and the signature probe say about one block device), so every refusal
//! reason is tested without a drive.
//!
//! A write needs `--allow-destructive-writes` **and** the device named explicitly, and is refused
//! — before any byte is written — when the device is mounted or used as swap, has partitions or
//! holders (device mapper, MD RAID, bcache …), carries a known signature (see
//! [`crate::signature`]), cannot be inspected (a drive bound to `vfio-pci` has no visible
//! namespace), or the probe failed.

use crate::signature::Found;
use hwc_model::topology::NvmeDrive;
use hwc_model::Topology;

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `--allow-destructive-writes` was not given.
    FlagMissing,
    /// The device was not named explicitly (serial, /dev path or BDF).
    NotNamed,
    /// No namespace of the drive is visible to the kernel, so nothing about it can be checked.
    NoVisibleNamespace {
        driver: Option<String>,
    },
    Mounted(Vec<String>),
    Partitioned(Vec<String>),
    Held(Vec<String>),
    Signatures(Vec<Found>),
    /// The first/last MiB could not be read: nothing proves the device is blank.
    ProbeFailed(String),
    /// An existing regular file not created by hwceiling, without the flag.
    ForeignFile,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |v: &[String]| v.join(", ");
        match self {
            Refusal::FlagMissing => f.write_str("--allow-destructive-writes was not given"),
            Refusal::NotNamed => f.write_str(
                "the drive was not named explicitly (name it with --write-drives or --drives \
                 SERIAL|/dev/nvmeXnY|BDF)",
            ),
            Refusal::NoVisibleNamespace { driver } => write!(
                f,
                "no namespace is visible to the kernel (driver: {}), so it cannot be checked for data",
                driver.as_deref().unwrap_or("none")
            ),
            Refusal::Mounted(m) => write!(f, "it is mounted or in use as swap ({})", list(m)),
            Refusal::Partitioned(p) => write!(f, "it has partitions ({})", list(p)),
            Refusal::Held(h) => write!(f, "it is held by {}", list(h)),
            Refusal::Signatures(s) => {
                let s: Vec<String> = s.iter().map(Found::to_string).collect();
                write!(f, "it carries data: {}", s.join("; "))
            }
            Refusal::ProbeFailed(e) => write!(f, "its first and last MiB could not be read ({e})"),
            Refusal::ForeignFile => f.write_str(
                "it is an existing file that hwceiling did not create (pass --allow-destructive-writes \
                 to overwrite it, or name a path that does not exist)",
            ),
        }
    }
}

/// What the system says about one block device (a namespace or a `--target`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceView {
    /// `/dev/nvme0n1`, `/dev/loop0`.
    pub device: String,
    /// Mount points of it or its partitions, and `swap` when it or a partition is active swap.
    pub mounts: Vec<String>,
    pub partitions: Vec<String>,
    pub holders: Vec<String>,
    /// The signature probe's findings, or why it failed.
    pub signatures: Result<Vec<Found>, String>,
}

impl Default for DeviceView {
    /// A device nothing is known to use, whose probe found nothing.
    fn default() -> Self {
        Self {
            device: String::new(),
            mounts: Vec::new(),
            partitions: Vec::new(),
            holders: Vec::new(),
            signatures: Ok(Vec::new()),
        }
    }
}

/// How a write was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteRequest {
    pub allow_destructive_writes: bool,
    pub named_explicitly: bool,
}

/// Every reason to refuse writing to `dev`; empty = the write may go ahead.
pub fn refusals(req: WriteRequest, dev: &DeviceView) -> Vec<Refusal> {
    let mut r = Vec::new();
    if !req.allow_destructive_writes {
        r.push(Refusal::FlagMissing);
    }
    if !req.named_explicitly {
        r.push(Refusal::NotNamed);
    }
    if !dev.mounts.is_empty() {
        r.push(Refusal::Mounted(dev.mounts.clone()));
    }
    if !dev.partitions.is_empty() {
        r.push(Refusal::Partitioned(dev.partitions.clone()));
    }
    if !dev.holders.is_empty() {
        r.push(Refusal::Held(dev.holders.clone()));
    }
    match &dev.signatures {
        Ok(found) if !found.is_empty() => r.push(Refusal::Signatures(found.clone())),
        Ok(_) => {}
        Err(e) => r.push(Refusal::ProbeFailed(e.clone())),
    }
    r
}

/// Refusals for a drive: those of each namespace, or [`Refusal::NoVisibleNamespace`].
pub fn drive_refusals(req: WriteRequest, drive: &NvmeDrive, views: &[DeviceView]) -> Vec<Refusal> {
    if drive.namespaces.is_empty() || views.is_empty() {
        let mut r = refusals(
            req,
            &DeviceView {
                signatures: Ok(Vec::new()),
                ..DeviceView::default()
            },
        );
        r.push(Refusal::NoVisibleNamespace {
            driver: drive.driver.clone(),
        });
        return r;
    }
    let mut r: Vec<Refusal> = Vec::new();
    for v in views {
        for x in refusals(req, v) {
            if !r.contains(&x) {
                r.push(x);
            }
        }
    }
    r
}

/// A regular-file target may be written when hwceiling created it, or with the flag.
pub fn file_refusals(created_by_hwceiling: bool, allow_destructive_writes: bool) -> Vec<Refusal> {
    if created_by_hwceiling || allow_destructive_writes {
        Vec::new()
    } else {
        vec![Refusal::ForeignFile]
    }
}

/// A name the command line cannot resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("`{0}` names no NVMe drive here (known: {1})")]
    Unknown(String, String),
    #[error("`{0}` is a partition: name the whole namespace or drive")]
    Partition(String),
    #[error("`{0}` matches more than one drive ({1}): name it by /dev path or BDF")]
    Ambiguous(String, String),
    #[error(
        "`{name}` is not the first namespace of {drive}: hwceiling reads and writes a drive \
         through its first namespace, /dev/{first}; name the drive ({drive}, its serial or BDF) \
         or /dev/{first}, or measure that namespace alone with --target {device}"
    )]
    NotFirstNamespace {
        name: String,
        drive: String,
        first: String,
        /// The namespace's block device (`/dev/nvme1n2`).
        device: String,
    },
}

/// `0000:01:00.0` and `01:00.0` are the same function.
fn same_bdf(a: &str, b: &str) -> bool {
    let full = |s: &str| {
        if s.matches(':').count() == 1 {
            format!("0000:{s}")
        } else {
            s.to_string()
        }
    };
    full(a).eq_ignore_ascii_case(&full(b))
}

/// The drive a command-line name means: a serial number, `/dev/nvmeX`, `/dev/nvmeXnY` (or
/// without `/dev/`), or a PCI address.
pub fn select<'a>(topo: &'a Topology, name: &str) -> Result<&'a NvmeDrive, SelectError> {
    let bare = name.trim().trim_start_matches("/dev/");
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let is_namespace = |s: &str| {
        s.strip_prefix("nvme")
            .and_then(|rest| rest.split_once('n'))
            .is_some_and(|(c, n)| digits(c) && digits(n))
    };
    if bare
        .rsplit_once('p')
        .is_some_and(|(ns, p)| is_namespace(ns) && digits(p))
    {
        return Err(SelectError::Partition(name.to_string()));
    }
    let hits: Vec<&NvmeDrive> = topo
        .nvme
        .iter()
        .filter(|d| {
            d.name == bare
                || d.namespaces.iter().any(|n| n.name == bare)
                || d.bdf.as_deref().is_some_and(|b| same_bdf(b, bare))
                || d.serial.as_deref().map(str::trim) == Some(name.trim())
        })
        .collect();
    match hits.as_slice() {
        [one] => match one.namespaces.iter().position(|n| n.name == bare) {
            Some(i) if i > 0 => Err(SelectError::NotFirstNamespace {
                name: name.trim().to_string(),
                drive: one.name.clone(),
                first: one.namespaces[0].name.clone(),
                device: format!("/dev/{bare}"),
            }),
            _ => Ok(one),
        },
        [] => {
            let known: Vec<String> = topo
                .nvme
                .iter()
                .map(|d| {
                    let starting = match (d.is_starting(), &d.controller_state) {
                        (true, Some(state)) => format!(" (its controller is starting: {state})"),
                        _ => String::new(),
                    };
                    format!(
                        "{} serial {} at {}{starting}",
                        d.name,
                        d.serial.as_deref().map(str::trim).unwrap_or("?"),
                        d.bdf.as_deref().unwrap_or("?")
                    )
                })
                .collect();
            Err(SelectError::Unknown(
                name.to_string(),
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join("; ")
                },
            ))
        }
        many => Err(SelectError::Ambiguous(
            name.to_string(),
            many.iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hwc_model::topology::NvmeNamespace;

    fn ns(name: &str) -> NvmeNamespace {
        NvmeNamespace {
            name: name.into(),
            size_bytes: Some(64 << 20),
            logical_block_size: Some(512),
            max_hw_sectors_kb: None,
            partitions: vec![],
            holders: vec![],
            mounts: vec![],
            in_use: false,
        }
    }

    fn drive(name: &str, serial: &str, bdf: &str, namespaces: Vec<NvmeNamespace>) -> NvmeDrive {
        NvmeDrive {
            name: name.into(),
            bdf: Some(bdf.into()),
            model: Some("QEMU NVMe Ctrl".into()),
            serial: Some(format!("{serial:<20}")),
            transport: Some("pcie".into()),
            numa_node: Some(0),
            root: Some("0000:10".into()),
            driver: Some("nvme".into()),
            namespaces,
            ..NvmeDrive::default()
        }
    }

    fn topo() -> Topology {
        let mut part = ns("nvme1n1");
        part.partitions = vec!["nvme1n1p1".into()];
        let mut vfio = drive("0000:13:00.0", "VF1", "0000:13:00.0", vec![]);
        vfio.driver = Some("vfio-pci".into());
        Topology {
            nvme: vec![
                drive("nvme0", "HWCN0A", "0000:11:00.0", vec![ns("nvme0n1")]),
                drive("nvme1", "HWCPART", "0000:12:00.0", vec![part]),
                vfio,
            ],
            ..Topology::default()
        }
    }

    const OK: WriteRequest = WriteRequest {
        allow_destructive_writes: true,
        named_explicitly: true,
    };

    fn blank(dev: &str) -> DeviceView {
        DeviceView {
            device: dev.into(),
            signatures: Ok(vec![]),
            ..DeviceView::default()
        }
    }

    #[test]
    fn names_resolve_by_serial_path_controller_and_bdf() {
        let t = topo();
        for name in [
            "HWCN0A",
            "/dev/nvme0n1",
            "nvme0n1",
            "/dev/nvme0",
            "nvme0",
            "0000:11:00.0",
            "11:00.0",
        ] {
            assert_eq!(select(&t, name).unwrap().name, "nvme0", "{name}");
        }
        assert_eq!(
            select(&t, "0000:13:00.0").unwrap().driver.as_deref(),
            Some("vfio-pci")
        );
    }

    #[test]
    fn a_drive_whose_controller_is_starting_is_named_as_such_when_nothing_matches() {
        let mut t = topo();
        let mut starting = drive("nvme2", "", "0000:14:00.0", vec![]);
        starting.serial = None;
        starting.controller_state = Some("connecting".into());
        t.nvme.push(starting);
        let e = select(&t, "HWCN2A").unwrap_err().to_string();
        assert!(
            e.contains("nvme2 serial ? at 0000:14:00.0 (its controller is starting: connecting)"),
            "{e}"
        );
        assert!(!e.contains("nvme0 serial HWCN0A at 0000:11:00.0 ("), "{e}");
    }

    #[test]
    fn partitions_and_strangers_are_not_drives() {
        let t = topo();
        assert!(matches!(
            select(&t, "/dev/nvme1n1p1"),
            Err(SelectError::Partition(_))
        ));
        assert!(matches!(
            select(&t, "/dev/nvme0n1p3"),
            Err(SelectError::Partition(_))
        ));
        let e = select(&t, "/dev/sda").unwrap_err().to_string();
        assert!(
            e.contains("names no NVMe drive") && e.contains("HWCN0A"),
            "{e}"
        );
        assert!(
            matches!(select(&t, "HWCN0"), Err(SelectError::Unknown(..))),
            "no prefix match"
        );
    }

    #[test]
    fn a_namespace_other_than_the_first_is_refused_not_swapped_for_it() {
        let mut t = topo();
        t.nvme[0].namespaces.push(ns("nvme0n2"));
        assert_eq!(select(&t, "/dev/nvme0n1").unwrap().name, "nvme0");
        assert_eq!(select(&t, "HWCN0A").unwrap().name, "nvme0");
        for name in ["/dev/nvme0n2", "nvme0n2"] {
            assert_eq!(
                select(&t, name).unwrap_err().to_string(),
                format!(
                    "`{name}` is not the first namespace of nvme0: hwceiling reads and writes a \
                     drive through its first namespace, /dev/nvme0n1; name the drive (nvme0, its \
                     serial or BDF) or /dev/nvme0n1, or measure that namespace alone with \
                     --target /dev/nvme0n2"
                )
            );
        }
    }

    #[test]
    fn a_blank_named_device_with_the_flag_may_be_written() {
        assert!(refusals(OK, &blank("/dev/nvme0n1")).is_empty());
    }

    #[test]
    fn every_refusal_reason_is_reported() {
        let req = |flag, named| WriteRequest {
            allow_destructive_writes: flag,
            named_explicitly: named,
        };
        assert_eq!(
            refusals(req(false, true), &blank("d")),
            vec![Refusal::FlagMissing]
        );
        assert_eq!(
            refusals(req(true, false), &blank("d")),
            vec![Refusal::NotNamed]
        );
        let mut v = blank("d");
        v.mounts = vec!["/mnt".into()];
        assert_eq!(
            refusals(OK, &v),
            vec![Refusal::Mounted(vec!["/mnt".into()])]
        );
        let mut v = blank("d");
        v.partitions = vec!["nvme0n1p1".into()];
        assert_eq!(
            refusals(OK, &v),
            vec![Refusal::Partitioned(vec!["nvme0n1p1".into()])]
        );
        let mut v = blank("d");
        v.holders = vec!["dm-0".into()];
        assert_eq!(refusals(OK, &v), vec![Refusal::Held(vec!["dm-0".into()])]);
        let mut v = blank("d");
        let ext4 = Found {
            kind: "ext2/3/4",
            offset: 0x438,
        };
        v.signatures = Ok(vec![ext4.clone()]);
        let r = refusals(OK, &v);
        assert_eq!(r, vec![Refusal::Signatures(vec![ext4])]);
        assert!(r[0]
            .to_string()
            .contains("ext2/3/4 signature at byte 0x438"));
        let mut v = blank("d");
        v.signatures = Err("EIO".into());
        assert_eq!(refusals(OK, &v), vec![Refusal::ProbeFailed("EIO".into())]);
        // Everything at once: every reason, none hidden behind the first.
        let mut v = blank("d");
        v.mounts = vec!["swap".into()];
        v.holders = vec!["md0".into()];
        assert_eq!(refusals(req(false, false), &v).len(), 4);
    }

    #[test]
    fn a_drive_without_visible_namespaces_is_refused() {
        let t = topo();
        let r = drive_refusals(OK, &t.nvme[2], &[]);
        assert_eq!(
            r,
            vec![Refusal::NoVisibleNamespace {
                driver: Some("vfio-pci".into())
            }]
        );
        assert!(r[0].to_string().contains("vfio-pci"));
        let mut parted = blank("/dev/nvme1n1");
        parted.partitions = vec!["nvme1n1p1".into()];
        let r = drive_refusals(OK, &t.nvme[1], &[parted.clone(), parted]);
        assert_eq!(r.len(), 1, "duplicates are merged: {r:?}");
    }

    #[test]
    fn files_are_written_only_when_ours_or_with_the_flag() {
        assert!(file_refusals(true, false).is_empty());
        assert!(file_refusals(false, true).is_empty());
        assert_eq!(file_refusals(false, false), vec![Refusal::ForeignFile]);
    }
}
