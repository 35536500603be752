//! Handing NVMe drives to a userspace driver (SPDK's): which drives may go, binding them with
//! the hugepages their driver needs, all through the journal of `hwc-safety`, so every change
//! is put back on exit, error, signal or panic, or by `hwceiling restore` after a kill.
//!
//! A drive may go only if nothing on it can be lost and nothing uses it: the NVMe write gate's
//! data checks (mounted or swap, the root filesystem among them; partitioned; held by device
//! mapper or RAID; a filesystem, RAID, LVM or partition-table signature), no process holding
//! its nodes open, and the PCI checks of `hwc_safety::pci` (IOMMU, its group, the driver's
//! module).

use crate::SessionError;
use hwc_model::topology::NvmeDrive;
use hwc_model::Topology;
use hwc_safety::journal::{BindOutcome, BindStep, Journal};
use hwc_safety::pci::{bind_refusals, BindRequest};
use hwc_safety::{holders, hugepages, Live};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// What to bind, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindConfig {
    /// Drives named by serial, /dev path or BDF; `None`: every drive that may go.
    pub drives: Option<Vec<String>>,
    /// `vfio-pci` (default) or `uio_pci_generic`.
    pub driver: String,
    /// Consent to a driver without IOMMU protection.
    pub allow_no_iommu: bool,
    /// Hugepage memory to have free on each bound drive's NUMA node.
    pub hugepages_bytes_per_node: u64,
    /// Where hugetlbfs is mounted when none is (`/dev/hugepages`).
    pub hugetlbfs: PathBuf,
}

impl Default for BindConfig {
    fn default() -> Self {
        Self {
            drives: None,
            driver: hwc_safety::pci::VFIO_PCI.into(),
            allow_no_iommu: false,
            hugepages_bytes_per_node: 512 << 20,
            hugetlbfs: PathBuf::from("/dev/hugepages"),
        }
    }
}

/// A drive chosen to be bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub name: String,
    pub bdf: String,
    pub numa_node: Option<u32>,
}

/// The drives that may go, and every reason against each of the others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Choice {
    pub chosen: Vec<Chosen>,
    /// Drive label → every reason it may not go.
    pub refused: BTreeMap<String, Vec<String>>,
}

fn label(d: &NvmeDrive) -> String {
    format!(
        "{} (serial {}, {})",
        d.name,
        d.serial.as_deref().map(str::trim).unwrap_or("?"),
        d.bdf.as_deref().unwrap_or("no BDF")
    )
}

/// The device nodes of a drive a process could hold: the controller, its namespaces, their
/// partitions, and the generic character nodes.
fn nodes(d: &NvmeDrive) -> Vec<PathBuf> {
    let dev = Path::new("/dev");
    let mut v = vec![dev.join(&d.name)];
    for n in &d.namespaces {
        v.push(dev.join(&n.name));
        v.push(dev.join(n.name.replacen("nvme", "ng", 1)));
        if let Ok(entries) = std::fs::read_dir(Path::new("/sys/class/block").join(&n.name)) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(&n.name) {
                    v.push(dev.join(name));
                }
            }
        }
    }
    v
}

/// Every reason against binding `d` (empty: it may go). A drive already on the driver asked
/// for is the user's own doing and needs none of the checks.
fn refusals(sys: &Live, d: &NvmeDrive, req: BindRequest<'_>, also: &[String]) -> Vec<String> {
    let Some(bdf) = d.bdf.as_deref() else {
        return vec!["it has no PCI address (not a PCIe drive)".into()];
    };
    if d.driver.as_deref() == Some(req.driver) {
        return Vec::new();
    }
    let mut r: Vec<String> = hwc_bench_nvme::data_refusals(d)
        .iter()
        .map(ToString::to_string)
        .collect();
    r.extend(
        holders::open_by(&sys.proc, &nodes(d))
            .iter()
            .map(|h| format!("{h}")),
    );
    r.extend(
        bind_refusals(&sys.sys, bdf, req, also)
            .iter()
            .map(ToString::to_string),
    );
    r
}

/// Choose the drives to bind. Named drives that may not go are an error naming every reason;
/// without names, every drive that may go is chosen and the others are listed with theirs.
pub fn choose(topo: &Topology, cfg: &BindConfig) -> Result<Choice, SessionError> {
    let sys = Live::default();
    let req = BindRequest {
        driver: &cfg.driver,
        allow_no_iommu: cfg.allow_no_iommu,
    };
    let named: Vec<&NvmeDrive> = match &cfg.drives {
        Some(names) => {
            let mut v: Vec<&NvmeDrive> = Vec::new();
            for n in names {
                let d = hwc_bench_nvme::gate::select(topo, n)
                    .map_err(|e| SessionError::Refused(e.to_string()))?;
                if !v.iter().any(|x| x.name == d.name) {
                    v.push(d);
                }
            }
            v
        }
        None => topo.nvme.iter().collect(),
    };
    let also: Vec<String> = named.iter().filter_map(|d| d.bdf.clone()).collect();
    let mut choice = Choice::default();
    for d in named {
        let r = refusals(&sys, d, req, &also);
        if r.is_empty() {
            choice.chosen.push(Chosen {
                name: d.name.clone(),
                bdf: d.bdf.clone().unwrap_or_default(),
                numa_node: d.numa_node,
            });
        } else {
            choice.refused.insert(label(d), r);
        }
    }
    if cfg.drives.is_some() && !choice.refused.is_empty() {
        let why: Vec<String> = choice
            .refused
            .iter()
            .map(|(d, r)| format!("{d}: {}", r.join("; ")))
            .collect();
        return Err(SessionError::Refused(format!(
            "refused to hand to {}: {}",
            cfg.driver,
            why.join(" | ")
        )));
    }
    Ok(choice)
}

/// One step of binding, for progress (and for a test that signals between steps).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    Hugepages { node: Option<u32>, bytes: u64 },
    Drive { bdf: String, step: BindStep },
}

/// Drives bound, with the journal that restores them.
#[derive(Debug)]
pub struct Bound {
    pub journal: Journal,
    /// Each chosen drive and the driver it came from (`None`: it already was on the driver).
    pub drives: Vec<(Chosen, Option<Option<String>>)>,
}

/// Bind `choice`'s drives: hugepages on their nodes and hugetlbfs first, then each drive. On a
/// failure or `cancel`, everything done so far is restored before the error returns.
pub fn bind(
    choice: &Choice,
    cfg: &BindConfig,
    command: &str,
    on_progress: &mut dyn FnMut(&Progress),
    cancel: &AtomicBool,
) -> Result<Bound, SessionError> {
    let refused = |e: hwc_safety::JournalError| SessionError::Refused(e.to_string());
    let journal = Journal::open(
        &hwc_safety::journal::dir(),
        command,
        Box::new(Live::default()),
    )
    .map_err(refused)?;
    let stopped = || SessionError::Refused("interrupted while binding drives".into());
    let mut nodes: Vec<Option<u32>> = choice.chosen.iter().map(|c| c.numa_node).collect();
    nodes.sort();
    nodes.dedup();
    let pages = hugepages::pages_for(cfg.hugepages_bytes_per_node);
    if pages > 0 {
        for node in nodes {
            if cancel.load(Ordering::SeqCst) {
                return Err(restored(journal, stopped()));
            }
            on_progress(&Progress::Hugepages {
                node,
                bytes: cfg.hugepages_bytes_per_node,
            });
            if let Err(e) = journal.reserve_hugepages(node, hugepages::PAGE_KIB, pages) {
                return Err(restored(journal, refused(e)));
            }
        }
        if let Err(e) = journal.ensure_hugetlbfs(&cfg.hugetlbfs) {
            return Err(restored(journal, refused(e)));
        }
    }
    let mut drives = Vec::new();
    for c in &choice.chosen {
        if cancel.load(Ordering::SeqCst) {
            return Err(restored(journal, stopped()));
        }
        let out = journal.bind_driver(&c.bdf, &cfg.driver, &mut |step| {
            on_progress(&Progress::Drive {
                bdf: c.bdf.clone(),
                step,
            })
        });
        match out {
            Ok(BindOutcome::AlreadyBound) => drives.push((c.clone(), None)),
            Ok(BindOutcome::Moved { from }) => drives.push((c.clone(), Some(from))),
            Err(e) => return Err(restored(journal, refused(e))),
        }
    }
    if cancel.load(Ordering::SeqCst) {
        return Err(restored(journal, stopped()));
    }
    Ok(Bound { journal, drives })
}

/// Restore the journal after `err`; a restore failure is added to the error.
fn restored(journal: Journal, err: SessionError) -> SessionError {
    match journal.restore() {
        Ok(_) => err,
        Err(e) => SessionError::Refused(format!("{err}; and restoring failed: {e}")),
    }
}
