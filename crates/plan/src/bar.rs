//! NVMe DMA → BAR (the spec's Step 13, its `dispatcher-p2p` cold path): SPDK pollers read drives
//! sequentially in 128 KiB commands straight into a device's BAR, and, back to back on the same
//! drives, into host RAM on the pollers' node as the baseline.
//!
//! Targets: each GPU's BAR1 (GDRCopy maps its memory; waived per GPU where it cannot), and each
//! PCI BAR the user named (`--p2p-bar BDF/N`, a stand-in whose figures are never a GPU's).
//! Per target: 1, 4, 6 and all drives (QD 16 for one drive, 32 for more, as the spec runs
//! them), nearest to the target first (its root complex, then its NUMA node), with pollers on
//! the target's node; and one cross-NUMA run (4 drives, or all where fewer) with the pollers on
//! another node. The drives are those handed to SPDK (`--spdk-drives`).

use crate::gds::pairing_at;
use crate::nvme::{drive_counts, drive_key};
use crate::{cpu_nodes, waive, Cell, Matrix, PlanOptions};
use hwc_model::topology::NvmeDrive;
use hwc_model::{BarDevice, CellKind, DmaTarget, NvmeBarSpec, PathId, Spec, Topology, KIB};

/// The spec's command size (at most a drive's MDTS: the engine refuses larger).
pub const BAR_BLOCK_BYTES: u64 = 128 * KIB;
/// The spec's drive counts; all drives besides.
pub const BAR_DRIVE_COUNTS: [usize; 3] = [1, 4, 6];
/// The drive count of the cross-NUMA run (all drives where fewer).
pub const BAR_CROSS_DRIVES: usize = 4;

/// The spec's queue depth for `drives` drives.
pub fn bar_queue_depth(drives: usize) -> u32 {
    if drives <= 1 {
        16
    } else {
        32
    }
}

/// A PCI BAR the user named that passed the BAR gate, and where it sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciBarTarget {
    pub bdf: String,
    pub resource: u32,
    pub size_bytes: u64,
    pub numa_node: Option<u32>,
    pub root: Option<String>,
}

/// What the NVMe → BAR plan needs besides the topology.
#[derive(Debug, Clone, Default)]
pub struct BarPlanOptions {
    /// PCI BARs named with `--p2p-bar` (after the gate).
    pub pci_bars: Vec<PciBarTarget>,
    /// Why no GPU's BAR1 can be mapped here (GDRCopy), with the fix; `None` where it can.
    pub gpu_bar1_blocked: Option<(String, Option<String>)>,
}

/// A target: its device, and where it sits.
struct Target {
    device: BarDevice,
    node: Option<u32>,
    root: Option<String>,
}

pub(crate) fn plan_bar(topo: &Topology, opts: &PlanOptions, p: &mut Matrix) {
    let path = PathId::NvmeBar1;
    let o = &opts.bar;
    let mut targets = Vec::new();
    for gpu in &topo.gpus {
        let name = gpu.name();
        match &o.gpu_bar1_blocked {
            Some((reason, hint)) => waive(
                p,
                path,
                Some(format!("{name} BAR1")),
                reason.clone(),
                hint.as_deref(),
            ),
            None => targets.push(Target {
                device: BarDevice::GpuBar1 {
                    gpu: name,
                    bdf: gpu.pci_bdf.clone(),
                },
                node: gpu.numa_node,
                root: gpu.root.clone(),
            }),
        }
    }
    for b in &o.pci_bars {
        targets.push(Target {
            device: BarDevice::PciBar {
                bdf: b.bdf.clone(),
                resource: b.resource,
            },
            node: b.numa_node,
            root: b.root.clone(),
        });
    }
    if targets.is_empty() {
        if topo.gpus.is_empty() {
            waive(
                p,
                path,
                None,
                "no NVIDIA GPU was detected, and no PCI BAR was named (--p2p-bar)".into(),
                Some("--p2p-bar BDF/N measures NVMe DMA into BAR N of another PCI device"),
            );
        }
        return;
    }
    // SPDK reads only drives handed to it; without any, every drive is planned and the engine's
    // waiver (--spdk-drives) says why none runs.
    let drives: Vec<&NvmeDrive> = topo
        .nvme
        .iter()
        .filter(|d| d.bdf.is_some())
        .filter(|d| {
            opts.nvme
                .bindable
                .as_ref()
                .is_none_or(|b| b.contains(&drive_key(d)))
        })
        .collect();
    if drives.is_empty() {
        return waive(
            p,
            path,
            None,
            "no NVMe drive on PCI was detected (or none of them was named with --spdk-drives)"
                .into(),
            None,
        );
    }
    let reps = opts.reps(2, 5);
    let nodes = cpu_nodes(topo);
    for t in &targets {
        let ordered = ordered(&t.root, t.node, &drives);
        let mut runs: Vec<(usize, Option<u32>, bool)> =
            drive_counts(&BAR_DRIVE_COUNTS, drives.len())
                .into_iter()
                .map(|k| (k, t.node, false))
                .collect();
        if let Some(other) = nodes.iter().find(|n| t.node.is_some_and(|g| g != n.id)) {
            runs.push((BAR_CROSS_DRIVES.min(drives.len()), Some(other.id), true));
        }
        for (k, poller_node, cross) in runs {
            let group = &ordered[..k];
            let (root, numa) = pairing_at(t.root.as_ref(), t.node, group);
            let pollers = if cross { "cross-numa" } else { "numa-local" };
            for memory in [DmaTarget::HostRam, DmaTarget::Bar] {
                let spec = NvmeBarSpec {
                    device: t.device.clone(),
                    memory,
                    drives: group.iter().map(|d| drive_key(d)).collect(),
                    block_bytes: BAR_BLOCK_BYTES,
                    queue_depth: bar_queue_depth(k),
                    poller_node,
                    cross_numa: cross,
                };
                p.cells.push(Cell {
                    kind: CellKind::Sweep,
                    name: format!(
                        "{}/{k}drive/{root}/{numa}/pollers-{pollers}/{}",
                        t.device.key(),
                        memory.as_str()
                    ),
                    spec: Spec::NvmeBar(spec),
                    reps,
                });
            }
        }
    }
}

/// `drives` nearest to a device at (`root`, `node`) first: its root complex, then its node, then
/// by key.
fn ordered<'a>(
    root: &Option<String>,
    node: Option<u32>,
    drives: &[&'a NvmeDrive],
) -> Vec<&'a NvmeDrive> {
    let mut v = drives.to_vec();
    v.sort_by_key(|d| {
        let same_root = root.is_some() && *root == d.root;
        let same_node = node.is_some() && node == d.numa_node;
        (!same_root, !same_node, drive_key(d))
    });
    v
}

#[cfg(test)]
#[path = "bar_tests.rs"]
mod tests;
