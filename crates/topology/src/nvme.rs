//! NVMe controllers and their namespaces, with what makes a namespace unsafe to write to
//! (partitions, holders, mounts).
//!
//! Three sysfs shapes are handled: controllers under `/sys/class/nvme` with namespaces below
//! them or behind a multipath head (`/sys/block/nvme0n1/multipath/nvme0c0n1`); old kernels where
//! the namespace sits in the PCI function's `block/` directory; and NVMe functions without a
//! kernel controller (bound to `vfio-pci` for SPDK, or to no driver), which are named by BDF.

use std::path::{Path, PathBuf};

use hwc_model::pcie_gen_from_speed;
use hwc_model::topology::{nvme_controller_starting, NvmeDrive, NvmeNamespace};

use crate::fsroot::FsRoot;
use crate::parse::decode_mount_path;
use crate::pci::PciDev;

const CLASS_NVME: &str = "/sys/class/nvme";
const BLOCK_DIRS: [&str; 2] = ["/sys/class/block", "/sys/block"];
/// PCI class of NVM controllers (`0x010802` is NVM Express).
const NVM_CLASS: &str = "0x0108";
const SECTOR: u64 = 512;

/// A controller being assembled.
struct Controller<'a> {
    name: String,
    /// Its `/sys/class/nvme/<name>` directory, resolved, when the kernel has one.
    dir: Option<PathBuf>,
    pci: Option<&'a PciDev>,
    namespaces: Vec<NvmeNamespace>,
}

impl<'a> Controller<'a> {
    fn new(name: String, dir: Option<PathBuf>, pci: Option<&'a PciDev>) -> Self {
        Self {
            name,
            dir,
            pci,
            namespaces: Vec::new(),
        }
    }
}

/// Every NVMe controller, in name order.
pub(crate) fn drives(fs: &FsRoot, pci: &[PciDev]) -> Vec<NvmeDrive> {
    let mut ctrls = class_controllers(fs, pci);
    let mounts = Mounts::read(fs);
    for (name, dir) in namespace_dirs(fs) {
        let ns = namespace(fs, &name, &dir, &mounts);
        for i in owners(fs, &mut ctrls, pci, &name, &dir) {
            ctrls[i].namespaces.push(ns.clone());
        }
    }
    for dev in pci.iter().filter(|d| d.func.class.starts_with(NVM_CLASS)) {
        if position_by_pci(&ctrls, dev).is_none() {
            ctrls.push(Controller::new(dev.func.bdf.clone(), None, Some(dev)));
        }
    }
    let mut drives: Vec<NvmeDrive> = ctrls.into_iter().map(|c| drive(fs, c)).collect();
    drives.sort_by(|a, b| natural(&a.name, &b.name));
    drives
}

/// Kernel controllers that are still starting (see
/// [`hwc_model::topology::nvme_controller_starting`]), by name.
pub(crate) fn starting(fs: &FsRoot) -> Vec<String> {
    fs.names(CLASS_NVME)
        .into_iter()
        .filter(|name| {
            fs.text(Path::new(CLASS_NVME).join(name).join("state"))
                .is_some_and(|s| nvme_controller_starting(&s))
        })
        .collect()
}

/// Name order that puts `nvme2` before `nvme10` (names of one prefix differ only in digits).
fn natural(a: &str, b: &str) -> std::cmp::Ordering {
    (a.len(), a).cmp(&(b.len(), b))
}

fn class_controllers<'a>(fs: &FsRoot, pci: &'a [PciDev]) -> Vec<Controller<'a>> {
    fs.names(CLASS_NVME)
        .into_iter()
        .map(|name| {
            let dir = fs.resolve(Path::new(CLASS_NVME).join(&name));
            let device = dir.as_ref().and_then(|d| fs.resolve(d.join("device")));
            let pci = device.and_then(|d| pci.iter().find(|p| p.dir == d));
            Controller::new(name, dir, pci)
        })
        .collect()
}

/// `nvme<ctrl>n<ns>`: a namespace block device (not a partition, not a hidden multipath path
/// device `nvme0c0n1`).
pub fn is_namespace_name(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    name.strip_prefix("nvme")
        .and_then(|rest| rest.split_once('n'))
        .is_some_and(|(ctrl, ns)| digits(ctrl) && digits(ns))
}

/// Namespace block devices with their resolved directories, in name order.
fn namespace_dirs(fs: &FsRoot) -> Vec<(String, PathBuf)> {
    let mut names: Vec<String> = BLOCK_DIRS
        .iter()
        .flat_map(|dir| fs.names(dir))
        .filter(|name| is_namespace_name(name))
        .collect();
    names.sort_by(|a, b| natural(a, b));
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| {
            let dir = BLOCK_DIRS
                .iter()
                .map(|block| Path::new(block).join(&name))
                .find(|p| fs.exists(p))
                .and_then(|p| fs.resolve(p))?;
            Some((name, dir))
        })
        .collect()
}

/// Indices of the controllers a namespace belongs to: the one it sits under, else those its
/// multipath head lists, else the one of its PCI function (added when the kernel has no
/// controller directory: old kernels).
fn owners<'a>(
    fs: &FsRoot,
    ctrls: &mut Vec<Controller<'a>>,
    pci: &'a [PciDev],
    ns_name: &str,
    ns_dir: &Path,
) -> Vec<usize> {
    if let Some(i) = ns_dir.parent().and_then(|d| position_by_dir(ctrls, d)) {
        return vec![i];
    }
    let paths = multipath_owners(fs, ctrls, ns_dir);
    if !paths.is_empty() {
        return paths;
    }
    pci_owner(fs, ctrls, pci, ns_name, ns_dir)
        .into_iter()
        .collect()
}

fn position_by_dir(ctrls: &[Controller], dir: &Path) -> Option<usize> {
    ctrls.iter().position(|c| c.dir.as_deref() == Some(dir))
}

fn position_by_pci(ctrls: &[Controller], dev: &PciDev) -> Option<usize> {
    ctrls
        .iter()
        .position(|c| c.pci.is_some_and(|p| p.dir == dev.dir))
}

/// Controllers of a multipath head's path devices (`multipath/nvme0c0n1` lies under `nvme0`).
fn multipath_owners(fs: &FsRoot, ctrls: &[Controller], ns_dir: &Path) -> Vec<usize> {
    let multipath = ns_dir.join("multipath");
    fs.names(&multipath)
        .iter()
        .filter_map(|path| fs.resolve(multipath.join(path)))
        .filter_map(|path| position_by_dir(ctrls, path.parent()?))
        .collect()
}

/// The controller of the PCI function the namespace sits under, added if not known yet.
fn pci_owner<'a>(
    fs: &FsRoot,
    ctrls: &mut Vec<Controller<'a>>,
    pci: &'a [PciDev],
    ns_name: &str,
    ns_dir: &Path,
) -> Option<usize> {
    let dev = pci
        .iter()
        .filter(|p| ns_dir.starts_with(&p.dir))
        .max_by_key(|p| p.dir.components().count())?;
    if let Some(i) = position_by_pci(ctrls, dev) {
        return Some(i);
    }
    let name = pci_controller_name(fs, &dev.dir).unwrap_or_else(|| ns_prefix(ns_name));
    ctrls.push(Controller::new(name, None, Some(dev)));
    Some(ctrls.len() - 1)
}

/// The controller's name under its PCI function (`misc/nvme0` on old kernels, `nvme/nvme0`).
fn pci_controller_name(fs: &FsRoot, pci_dir: &Path) -> Option<String> {
    ["misc", "nvme"].iter().find_map(|sub| {
        fs.names(pci_dir.join(sub))
            .into_iter()
            .find(|n| n.starts_with("nvme"))
    })
}

/// `nvme0n1` → `nvme0`.
fn ns_prefix(ns_name: &str) -> String {
    ns_name
        .rfind('n')
        .map_or(ns_name, |i| &ns_name[..i])
        .to_string()
}

/// `/proc/mounts`: (device, mount point) pairs.
struct Mounts(Vec<(String, String)>);

impl Mounts {
    fn read(fs: &FsRoot) -> Self {
        Self(
            fs.read("/proc/mounts")
                .map(|text| parse_mounts(&text))
                .unwrap_or_default(),
        )
    }

    /// Mount points of `/dev/<device>`.
    fn of<'s>(&'s self, device: &str) -> impl Iterator<Item = String> + 's {
        let dev = format!("/dev/{device}");
        self.0
            .iter()
            .filter(move |(d, _)| *d == dev)
            .map(|(_, m)| m.clone())
    }
}

/// (device, mount point) pairs of a `/proc/mounts` text, escapes decoded.
pub fn parse_mounts(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let device = decode_mount_path(fields.next()?);
            Some((device, decode_mount_path(fields.next()?)))
        })
        .collect()
}

fn namespace(fs: &FsRoot, name: &str, dir: &Path, mounts: &Mounts) -> NvmeNamespace {
    let partitions: Vec<String> = fs
        .names(dir)
        .into_iter()
        .filter(|entry| fs.exists(dir.join(entry).join("partition")))
        .collect();
    let mut holders: Vec<String> = std::iter::once(dir.to_path_buf())
        .chain(partitions.iter().map(|p| dir.join(p)))
        .flat_map(|d| fs.names(d.join("holders")))
        .collect();
    holders.sort();
    holders.dedup();
    let mut mount_points: Vec<String> = std::iter::once(name)
        .chain(partitions.iter().map(String::as_str))
        .flat_map(|device| mounts.of(device))
        .collect();
    mount_points.sort();
    mount_points.dedup();
    NvmeNamespace {
        name: name.to_string(),
        size_bytes: fs
            .parse::<u64>(dir.join("size"))
            .and_then(|sectors| sectors.checked_mul(SECTOR)),
        logical_block_size: fs.parse(dir.join("queue/logical_block_size")),
        max_hw_sectors_kb: fs.parse(dir.join("queue/max_hw_sectors_kb")),
        in_use: !(partitions.is_empty() && holders.is_empty() && mount_points.is_empty()),
        partitions,
        holders,
        mounts: mount_points,
    }
}

fn drive(fs: &FsRoot, mut ctrl: Controller) -> NvmeDrive {
    let attr = |file: &str| ctrl.dir.as_ref().and_then(|d| fs.text(d.join(file)));
    let controller_state = attr("state");
    // A controller that is not live yet has no identity: its subsystem is not read, and the
    // kernel shows `(efault)` in the model, serial and firmware files, which must never name a
    // drive.
    let identity = |file: &str| {
        matches!(controller_state.as_deref(), None | Some("live"))
            .then(|| attr(file))
            .flatten()
    };
    let func = ctrl.pci.map(|p| &p.func);
    let link = func.and_then(|f| f.link).unwrap_or_default();
    ctrl.namespaces.sort_by(|a, b| natural(&a.name, &b.name));
    // Unknown when any namespace's size is: a partial sum would understate the drive.
    let capacity = (!ctrl.namespaces.is_empty())
        .then(|| {
            ctrl.namespaces
                .iter()
                .map(|n| n.size_bytes)
                .sum::<Option<u64>>()
        })
        .flatten();
    NvmeDrive {
        bdf: func.map(|f| f.bdf.clone()),
        model: identity("model"),
        serial: identity("serial"),
        firmware_rev: identity("firmware_rev"),
        transport: attr("transport"),
        numa_node: func.and_then(|f| f.numa_node),
        root: func.and_then(|f| f.root.clone()),
        pcie_gen: link.current_speed_gts.and_then(pcie_gen_from_speed),
        pcie_width: link.current_width,
        driver: func.and_then(|f| f.driver.clone()),
        controller_state,
        in_use: ctrl.namespaces.iter().any(|n| n.in_use),
        capacity_bytes: capacity,
        capacity_tb: capacity.map(|b| b as f64 / 1e12),
        // Identify facts (MDTS, VWC, power states) come from the NVMe backend's admin
        // commands, not sysfs.
        mdts_bytes: None,
        mdts_source: None,
        mdts_unlimited: false,
        vwc_present: None,
        namespaces: ctrl.namespaces,
        name: ctrl.name,
        power_states: Vec::new(),
        apst_supported: None,
        power_features: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names() {
        assert!(is_namespace_name("nvme0n1"));
        assert!(is_namespace_name("nvme12n34"));
        assert!(!is_namespace_name("nvme0n1p1"));
        assert!(!is_namespace_name("nvme0c0n1"));
        assert!(!is_namespace_name("nvme0"));
        assert!(!is_namespace_name("nvmen1"));
        assert!(!is_namespace_name("sda"));
        assert_eq!(ns_prefix("nvme3n12"), "nvme3");
    }

    #[test]
    fn mounts_decode_and_order() {
        let text = "/dev/nvme0n1p1 /mnt/fast\\040disk ext4 rw 0 0\nproc /proc proc rw 0 0\nbad\n";
        let mounts = parse_mounts(text);
        assert_eq!(
            mounts[0],
            ("/dev/nvme0n1p1".into(), "/mnt/fast disk".into())
        );
        assert_eq!(mounts.len(), 2);
        let m = Mounts(mounts);
        assert_eq!(
            m.of("nvme0n1p1").collect::<Vec<_>>(),
            vec!["/mnt/fast disk"]
        );
        assert_eq!(m.of("nvme0n1").count(), 0);
        let mut names = vec!["nvme10", "nvme2", "0000:01:00.0", "nvme1"];
        names.sort_by(|a, b| natural(a, b));
        assert_eq!(names, vec!["nvme1", "nvme2", "nvme10", "0000:01:00.0"]);
    }
}
