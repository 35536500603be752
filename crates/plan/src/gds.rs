//! Path 6 (NVMe → GPU, GPUDirect Storage): for every GPU, 1, 2 and 4 drives (fewer where the
//! machine has fewer), block sizes of 4, 8 and 16 MiB, queue depths 16 and 32, each cell read
//! by cuFile and by the POSIX bounce baseline (O_DIRECT `pread` into pinned host memory on the
//! GPU's node, then a copy to the GPU), side by side.
//!
//! Drives are paired with the GPU as the topology allows: the nearest group first (on the GPU's
//! root complex, then on its NUMA node), and, where the machine has one, a group of drives on
//! other root complexes; each cell's name says which (`same-root`, `cross-root` or `mixed-root`,
//! and `numa-local`, `cross-numa`, `numa-mixed` or `numa-unknown`). A `--target` file or block
//! device replaces the drives.
//!
//! Writes (GPU → NVMe, the same matrix, cells under `gpuN/write/…`) only on the drives the write
//! gate approved (`--allow-destructive-writes` with the drives named), or on a `--target` it lets
//! be written.

use crate::nvme::{drive_counts, drive_key};
use crate::{waive, Cell, Matrix, PlanOptions};
use hwc_model::topology::{Gpu, NvmeDrive};
use hwc_model::{size_label, CellKind, GdsRoute, GdsSpec, PathId, Reps, Spec, Topology, MIB};

/// The spec's block sizes for Path 6.
pub const GDS_SIZES: [u64; 3] = [4 * MIB, 8 * MIB, 16 * MIB];
/// Its queue depths (concurrent reads per drive).
pub const GDS_QUEUE_DEPTHS: [u32; 2] = [16, 32];
/// Its drive counts.
pub const GDS_DRIVE_COUNTS: [usize; 3] = [1, 2, 4];
/// Both routes, cuFile first.
pub const GDS_ROUTES: [GdsRoute; 2] = [GdsRoute::Cufile, GdsRoute::PosixBounce];

/// How a group of drives sits against a GPU: (root relation, NUMA relation).
pub fn pairing(gpu: &Gpu, drives: &[&NvmeDrive]) -> (&'static str, &'static str) {
    pairing_at(gpu.root.as_ref(), gpu.numa_node, drives)
}

/// How a group of drives sits against a device on root complex `root` and NUMA node `node`:
/// `same-root`, `cross-root`, `mixed-root` or `root-unknown`, and `numa-local`, `cross-numa`,
/// `numa-mixed` or `numa-unknown`.
pub fn pairing_at(
    root: Option<&String>,
    node: Option<u32>,
    drives: &[&NvmeDrive],
) -> (&'static str, &'static str) {
    let all_or_none = |f: &dyn Fn(&NvmeDrive) -> Option<bool>, yes, no, mixed, unknown| {
        let v: Vec<Option<bool>> = drives.iter().map(|d| f(d)).collect();
        if v.iter().any(Option::is_none) {
            unknown
        } else if v.iter().all(|x| *x == Some(true)) {
            yes
        } else if v.iter().all(|x| *x == Some(false)) {
            no
        } else {
            mixed
        }
    };
    let root = all_or_none(
        &|d| Some(root? == d.root.as_ref()?),
        "same-root",
        "cross-root",
        "mixed-root",
        "root-unknown",
    );
    let numa = all_or_none(
        &|d| Some(node? == d.numa_node?),
        "numa-local",
        "cross-numa",
        "numa-mixed",
        "numa-unknown",
    );
    (root, numa)
}

/// `drives` ordered nearest to `gpu` first (`near`: its root complex, then its NUMA node, then
/// the key) or farthest first (`!near`: other root complexes first, the NUMA node still
/// preferred among them).
fn ordered<'a>(gpu: &Gpu, drives: &[&'a NvmeDrive], near: bool) -> Vec<&'a NvmeDrive> {
    let mut v = drives.to_vec();
    v.sort_by_key(|d| {
        let same_root = gpu.root.is_some() && gpu.root == d.root;
        let same_node = gpu.numa_node.is_some() && gpu.numa_node == d.numa_node;
        (same_root != near, !same_node, drive_key(d))
    });
    v
}

fn cell(label: &str, spec: GdsSpec, reps: Reps) -> Cell {
    Cell {
        kind: CellKind::Sweep,
        name: format!(
            "{}/{label}/{}/qd{}/{}",
            spec.gpu,
            size_label(spec.block_bytes),
            spec.queue_depth,
            spec.route.as_str()
        ),
        spec: Spec::Gds(spec),
        reps,
    }
}

pub(crate) fn plan_gds(topo: &Topology, opts: &PlanOptions, p: &mut Matrix) {
    let path = PathId::Gds;
    if topo.gpus.is_empty() {
        return waive(p, path, None, "no NVIDIA GPU was detected".into(), None);
    }
    let o = &opts.nvme;
    let qds = o
        .queue_depths
        .clone()
        .unwrap_or_else(|| GDS_QUEUE_DEPTHS.to_vec());
    let sizes = o.sizes.clone().unwrap_or_else(|| GDS_SIZES.to_vec());
    let reps = opts.reps(1, 5);
    let push = |p: &mut Matrix, gpu: &Gpu, label: &str, drives: Vec<String>, target, write| {
        let label = if write {
            format!("write/{label}")
        } else {
            label.to_string()
        };
        for &size in &sizes {
            for &qd in &qds {
                for route in GDS_ROUTES {
                    let spec = GdsSpec {
                        gpu: gpu.name(),
                        drives: drives.clone(),
                        target,
                        block_bytes: size,
                        queue_depth: qd,
                        route,
                        write,
                        host_node: gpu.numa_node,
                    };
                    p.cells.push(cell(&label, spec, reps));
                }
            }
        }
    };
    if let Some((key, writable)) = &o.target {
        for gpu in &topo.gpus {
            push(p, gpu, "target", vec![key.clone()], true, false);
            if *writable {
                push(p, gpu, "target", vec![key.clone()], true, true);
            }
        }
        if !writable {
            waive(
                p,
                path,
                Some(format!("writes to {key}")),
                format!(
                    "{key} exists and was not created by hwceiling: writes need \
                     --allow-destructive-writes"
                ),
                None,
            );
        }
        return;
    }
    if topo.nvme.is_empty() {
        return waive(p, path, None, "no NVMe drives were detected".into(), None);
    }
    let usable: Vec<&NvmeDrive> = topo
        .nvme
        .iter()
        .filter(|d| o.selected.as_ref().is_none_or(|l| l.contains(&d.name)))
        .filter(|d| !d.namespaces.is_empty())
        .collect();
    if usable.is_empty() {
        return waive(
            p,
            path,
            None,
            "no selected drive has a namespace visible to the kernel".into(),
            Some("bind the drives to the nvme driver"),
        );
    }
    let writable: Vec<&NvmeDrive> = match &o.write_drives {
        Some(w) => usable
            .iter()
            .copied()
            .filter(|d| w.contains(&d.name))
            .collect(),
        None => Vec::new(),
    };
    for gpu in &topo.gpus {
        for (drives, write) in [(&usable, false), (&writable, true)] {
            for k in drive_counts(&GDS_DRIVE_COUNTS, drives.len().min(4)) {
                let mut labels = Vec::new();
                for near in [true, false] {
                    let group: Vec<&NvmeDrive> =
                        ordered(gpu, drives, near).into_iter().take(k).collect();
                    let (root, numa) = pairing(gpu, &group);
                    let label = format!("{k}drive/{root}/{numa}");
                    if labels.contains(&label) {
                        continue;
                    }
                    labels.push(label.clone());
                    let keys = group.into_iter().map(drive_key).collect();
                    push(p, gpu, &label, keys, false, write);
                }
            }
        }
    }
    if o.write_drives.is_none() {
        waive(
            p,
            path,
            Some("writes".into()),
            "read-only by default: GPU → NVMe writes destroy data, so they run only with \
             --allow-destructive-writes and each drive named"
                .into(),
            Some("--allow-destructive-writes --write-drives SERIAL|/dev/nvmeXnY|BDF"),
        );
    }
}

#[cfg(test)]
#[path = "gds_tests.rs"]
mod tests;
