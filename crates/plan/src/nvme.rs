//! Paths 1 and 2 (NVMe sequential read/write sweeps) and Step 3's per-drive latency probes.
//!
//! Reads cover every drive with a namespace visible to the kernel (or those named with
//! `--drives`); writes cover only the drives the write gate approved. Drive counts 1, 2, 4, 6 and
//! all (writes: 1, 2, 4 and all), each a group that prefers drives of one root complex; every
//! case records the BDFs it uses. A `--target` file or block device replaces the drives.

use crate::{waive, PlanOptions};
use hwc_model::topology::NvmeDrive;
use hwc_model::{size_label, Case, CaseParams, PathId, Plan, Topology, KIB, MIB};
use std::collections::BTreeMap;

/// The spec's block sizes for Paths 1 and 2.
pub const NVME_SIZES: [u64; 10] = [
    4 * KIB,
    16 * KIB,
    64 * KIB,
    128 * KIB,
    256 * KIB,
    512 * KIB,
    MIB,
    2 * MIB,
    4 * MIB,
    8 * MIB,
];
/// The spec's queue depths.
pub const NVME_QUEUE_DEPTHS: [u32; 2] = [16, 32];
/// Drive counts of Path 1 (and Path 2 without 6).
pub const READ_DRIVE_COUNTS: [usize; 4] = [1, 2, 4, 6];
pub const WRITE_DRIVE_COUNTS: [usize; 3] = [1, 2, 4];
/// Step 3's latency probe: 4 KiB random reads at these queue depths.
pub const LATENCY_QUEUE_DEPTHS: [u32; 3] = [1, 16, 32];
pub const LATENCY_BLOCK: u64 = 4 * KIB;

/// What shapes the NVMe part of a plan besides the machine.
#[derive(Debug, Clone, Default)]
pub struct NvmePlanOptions {
    /// Block sizes instead of [`NVME_SIZES`] (`--nvme-sizes`).
    pub sizes: Option<Vec<u64>>,
    /// Queue depths instead of [`NVME_QUEUE_DEPTHS`] (`--queue-depths`).
    pub queue_depths: Option<Vec<u32>>,
    /// Drive names (`nvme0`) to measure (`--drives`); `None` = every drive.
    pub selected: Option<Vec<String>>,
    /// Drive names the write gate approved; `None` = writes were not asked for.
    pub write_drives: Option<Vec<String>>,
    /// `--target`: its key (path) and whether the gate lets it be written.
    pub target: Option<(String, bool)>,
}

/// The key under which cases name a drive: its BDF, or its controller name.
pub fn drive_key(d: &NvmeDrive) -> String {
    d.bdf.clone().unwrap_or_else(|| d.name.clone())
}

/// Drive counts to plan for `n` drives: the spec's counts below `n`, and `n` itself.
pub fn drive_counts(spec: &[usize], n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = spec.iter().copied().filter(|&k| k < n).collect();
    if n > 0 {
        v.push(n);
    }
    v
}

/// `k` drives that span as few root complexes as possible: the largest same-root group first
/// (ties: lowest BDF), then the next; drives in BDF order within a root. A drive with no known
/// root is a group of its own.
pub fn drive_group<'a>(drives: &[&'a NvmeDrive], k: usize) -> Vec<&'a NvmeDrive> {
    let mut roots: BTreeMap<String, Vec<&'a NvmeDrive>> = BTreeMap::new();
    for d in drives {
        let root = d
            .root
            .clone()
            .unwrap_or_else(|| format!("unknown:{}", drive_key(d)));
        roots.entry(root).or_default().push(d);
    }
    let mut groups: Vec<Vec<&'a NvmeDrive>> = roots.into_values().collect();
    for g in &mut groups {
        g.sort_by_key(|d| drive_key(d));
    }
    groups.sort_by(|a, b| {
        b.len()
            .cmp(&a.len())
            .then_with(|| drive_key(a[0]).cmp(&drive_key(b[0])))
    });
    groups.into_iter().flatten().take(k).collect()
}

/// Same-root groups: root complex → drive keys on it (drives with a known root only).
pub fn same_root_groups(drives: &[NvmeDrive]) -> BTreeMap<String, Vec<String>> {
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for d in drives {
        if let Some(r) = &d.root {
            m.entry(r.clone()).or_default().push(drive_key(d));
        }
    }
    for v in m.values_mut() {
        v.sort();
    }
    m
}

fn sweep_case(path: PathId, label: &str, size: u64, qd: u32, drives: Vec<String>) -> Case {
    Case {
        key: format!("{path}/{label}/{}/qd{qd}", size_label(size)),
        path,
        params: CaseParams {
            size_bytes: Some(size),
            queue_depth: Some(qd),
            drives,
            pattern: Some("sequential".into()),
            ..CaseParams::default()
        },
        reps: hwc_model::Reps {
            warmup: 1,
            timed: 5,
        },
    }
}

pub(crate) fn plan_nvme(path: PathId, topo: &Topology, opts: &PlanOptions, p: &mut Plan) {
    let o = &opts.nvme;
    let sizes = o.sizes.clone().unwrap_or_else(|| NVME_SIZES.to_vec());
    let qds = o
        .queue_depths
        .clone()
        .unwrap_or_else(|| NVME_QUEUE_DEPTHS.to_vec());
    let reps = opts.reps(1, 5);
    let write = path == PathId::NvmeWrite;
    if let Some((key, writable)) = &o.target {
        if write && !writable {
            waive(
                p,
                path,
                Some(key.clone()),
                format!(
                    "{key} exists and was not created by hwceiling: writes need --allow-destructive-writes"
                ),
                None,
            );
            return;
        }
        for &size in &sizes {
            for &qd in &qds {
                let mut c = sweep_case(path, "target", size, qd, vec![key.clone()]);
                c.reps = reps;
                p.cases.push(c);
            }
        }
        return;
    }
    if topo.nvme.is_empty() {
        waive(p, path, None, "no NVMe drives were detected".into(), None);
        return;
    }
    if write && o.write_drives.is_none() {
        waive(
            p,
            path,
            None,
            "read-only by default: writes destroy data, so they run only with \
             --allow-destructive-writes and each drive named with --drives"
                .into(),
            Some("--paths nvme_write --allow-destructive-writes --drives SERIAL|/dev/nvmeXnY|BDF"),
        );
        return;
    }
    let wanted = |d: &&NvmeDrive| {
        let list = if write {
            o.write_drives.as_ref()
        } else {
            o.selected.as_ref()
        };
        list.is_none_or(|l| l.contains(&d.name))
    };
    let mut usable: Vec<&NvmeDrive> = Vec::new();
    for d in topo.nvme.iter().filter(wanted) {
        if d.namespaces.is_empty() {
            waive(
                p,
                path,
                Some(d.name.clone()),
                format!(
                    "{} ({}) has no namespace visible to the kernel (driver: {}): the kernel \
                     io_uring route cannot reach it",
                    d.name,
                    d.bdf.as_deref().unwrap_or("no BDF"),
                    d.driver.as_deref().unwrap_or("none")
                ),
                Some("bind it to the nvme driver to measure it through the kernel"),
            );
        } else {
            usable.push(d);
        }
    }
    if usable.is_empty() {
        if !p.waived.iter().any(|w| w.path == path) {
            waive(p, path, None, "no selected drive is usable".into(), None);
        }
        return;
    }
    if !write {
        for d in &usable {
            for &qd in &LATENCY_QUEUE_DEPTHS {
                p.cases.push(Case {
                    key: format!("{path}/latency/{}/4KiB-random/qd{qd}", d.name),
                    path,
                    params: CaseParams {
                        size_bytes: Some(LATENCY_BLOCK),
                        queue_depth: Some(qd),
                        drives: vec![drive_key(d)],
                        pattern: Some("random".into()),
                        ..CaseParams::default()
                    },
                    reps,
                });
            }
        }
        waive(
            p,
            path,
            Some("inspection long tests".into()),
            "the spec's long drive tests (read cache, GC settle, power-state transitions; 10–30 \
             min per drive) are not built in this version"
                .into(),
            None,
        );
    }
    let spec: &[usize] = if write {
        &WRITE_DRIVE_COUNTS
    } else {
        &READ_DRIVE_COUNTS
    };
    for k in drive_counts(spec, usable.len()) {
        let group: Vec<String> = drive_group(&usable, k).into_iter().map(drive_key).collect();
        for &size in &sizes {
            for &qd in &qds {
                let mut c = sweep_case(path, &format!("{k}drive"), size, qd, group.clone());
                c.reps = reps;
                p.cases.push(c);
            }
        }
    }
}

#[cfg(test)]
#[path = "nvme_tests.rs"]
mod tests;
