//! Paths 1 and 2 (NVMe sequential read/write sweeps), Step 3's per-drive latency probes and,
//! when asked for (`--nvme-long-tests`), the spec's long drive tests.
//!
//! Reads cover every drive with a namespace visible to the kernel (or those named with
//! `--drives`); writes cover only the drives the write gate approved. Drive counts 1, 2, 4, 6 and
//! all (writes: 1, 2, 4 and all), each a group that prefers drives of one root complex; every
//! case records the BDFs it uses. A `--target` file or block device replaces the drives.
//!
//! The long tests: `read-cache` and `power-states` read (cases of `nvme_read`), `gc-settle`
//! writes (a case of `nvme_write`, planned only where the write gate approved the drive).

use crate::{buffers_too_large, waive, waive_part, Cell, Matrix, PlanOptions};
use hwc_model::long_tests::{
    gap_label, idle_gaps_ms, LongTest, DEFAULT_GC_SETTLE_MAX_S, DEFAULT_GC_WRITE_S,
    DEFAULT_IDLE_MAX_S, GC_WRITE_BLOCK, GC_WRITE_QUEUE_DEPTH, READ_CACHE_HOT_REGION_BYTES,
};
use hwc_model::topology::NvmeDrive;
use hwc_model::{
    size_label, CellKind, Covers, NvmePattern, NvmeSpec, NvmeTest, PathId, Reps, Spec, Topology,
    KIB, MIB,
};
use std::collections::{BTreeMap, BTreeSet};

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

/// Timed repetitions (one read each) per idle gap, and of the no-idle baseline.
pub const POWER_GAP_REPS: Reps = Reps {
    warmup: 0,
    timed: 3,
    retry_above_spread_pct: None,
    steady: None,
};
pub const POWER_BASELINE_REPS: Reps = Reps {
    warmup: 2,
    timed: 10,
    retry_above_spread_pct: None,
    steady: None,
};
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
    /// The drives (their keys: [`drive_key`]) that engines of userspace drivers may hand to
    /// vfio-pci (`--spdk-drives`, after the bind gate); `None`: none may be.
    pub bindable: Option<Vec<String>>,
    /// The long drive tests asked for (`--nvme-long-tests`); empty = none (they are waived).
    pub long_tests: BTreeSet<LongTest>,
    /// The power-state test's longest idle gap, s (default [`DEFAULT_IDLE_MAX_S`]).
    pub idle_max_s: Option<f64>,
    /// The gc-settle test's sustained writes, s (default [`DEFAULT_GC_WRITE_S`]).
    pub gc_write_s: Option<u64>,
    /// The gc-settle test's longest wait for reads to settle, s (default
    /// [`DEFAULT_GC_SETTLE_MAX_S`]).
    pub gc_settle_max_s: Option<u64>,
}

impl NvmePlanOptions {
    fn wants(&self, t: LongTest) -> bool {
        self.long_tests.contains(&t)
    }
}

/// The read-only long tests of one drive or target (`label`: its name in keys; `key`: what the
/// cases name in `drives`), or their waivers when not asked for.
fn long_read_cases(
    p: &mut Matrix,
    o: &NvmePlanOptions,
    reps: Reps,
    (label, key, target): (&str, &str, bool),
) {
    let spec = |test: NvmeTest, pattern: NvmePattern| {
        Spec::Nvme(NvmeSpec {
            test,
            target,
            block_bytes: LATENCY_BLOCK,
            queue_depth: 1,
            drives: vec![key.to_string()],
            pattern,
        })
    };
    if o.wants(LongTest::ReadCache) {
        p.cells.push(Cell {
            kind: CellKind::LongTest,
            name: format!("read-cache/{label}/cold"),
            spec: spec(NvmeTest::ReadCache, NvmePattern::Random),
            reps,
        });
        p.cells.push(Cell {
            kind: CellKind::LongTest,
            name: format!("read-cache/{label}/hot"),
            spec: spec(
                NvmeTest::ReadCache,
                NvmePattern::Hot {
                    region_bytes: READ_CACHE_HOT_REGION_BYTES,
                },
            ),
            reps,
        });
    }
    if o.wants(LongTest::PowerStates) {
        let max_s = o.idle_max_s.unwrap_or(DEFAULT_IDLE_MAX_S);
        for ms in std::iter::once(0).chain(idle_gaps_ms(max_s)) {
            p.cells.push(Cell {
                kind: CellKind::LongTest,
                name: format!("power-states/{label}/idle-{}", gap_label(ms)),
                spec: spec(NvmeTest::PowerStates, NvmePattern::Idle { idle_ms: ms }),
                reps: if ms == 0 {
                    POWER_BASELINE_REPS
                } else {
                    POWER_GAP_REPS
                },
            });
        }
    }
}

/// Waivers of the read-only long tests that were not asked for.
fn long_read_waivers(p: &mut Matrix, o: &NvmePlanOptions) {
    let path = PathId::NvmeRead;
    if !o.wants(LongTest::ReadCache) {
        waive_part(
            p,
            path,
            Some(long_test(LongTest::ReadCache)),
            "not requested: the spec's read-cache test (hot re-reads against random reads, \
             about 20 s per drive) runs with --nvme-long-tests read-cache (or all)"
                .into(),
            None,
        );
    }
    if !o.wants(LongTest::PowerStates) {
        waive_part(
            p,
            path,
            Some(long_test(LongTest::PowerStates)),
            "not requested: the spec's power-state test (the first read after idle gaps of \
             10 ms to 60 s, about 9 min per drive) runs with --nvme-long-tests power-states (or \
             all)"
                .into(),
            Some("--nvme-idle-max-s caps the gaps"),
        );
    }
}

/// The gc-settle cell of one write-approved drive or target.
fn gc_settle_cell(o: &NvmePlanOptions, label: &str, key: &str, target: bool) -> Cell {
    let write_s = o.gc_write_s.unwrap_or(DEFAULT_GC_WRITE_S).max(1);
    // One-second intervals; the statistics are over the last third.
    let timed = u32::try_from(write_s.div_ceil(3)).unwrap_or(u32::MAX);
    let warmup = u32::try_from(write_s).unwrap_or(u32::MAX) - timed;
    Cell {
        kind: CellKind::LongTest,
        name: format!("gc-settle/{label}"),
        spec: Spec::Nvme(NvmeSpec {
            test: NvmeTest::GcSettle,
            target,
            block_bytes: GC_WRITE_BLOCK,
            queue_depth: GC_WRITE_QUEUE_DEPTH,
            drives: vec![key.to_string()],
            pattern: NvmePattern::GcSettle {
                duration_s: write_s,
                settle_max_s: o.gc_settle_max_s.unwrap_or(DEFAULT_GC_SETTLE_MAX_S),
            },
        }),
        reps: Reps {
            warmup,
            timed,
            retry_above_spread_pct: None,
            steady: None,
        },
    }
}

/// A long test as a waiver's part: its name, and typed.
fn long_test(t: LongTest) -> (String, Covers) {
    let test = match t {
        LongTest::ReadCache => NvmeTest::ReadCache,
        LongTest::PowerStates => NvmeTest::PowerStates,
        LongTest::GcSettle => NvmeTest::GcSettle,
    };
    (t.to_string(), Covers::NvmeTest { test })
}

/// The gc-settle waiver when it was not asked for, or asked for where nothing may be written.
fn gc_settle_waiver(p: &mut Matrix, o: &NvmePlanOptions, why_not_writable: Option<&str>) {
    let scope = Some(long_test(LongTest::GcSettle));
    if !o.wants(LongTest::GcSettle) {
        waive_part(
            p,
            PathId::NvmeWrite,
            scope,
            "not requested: the spec's gc-settle test writes (sustained writes, then reads until \
             they settle; about 20 min per drive) and runs only with --nvme-long-tests gc-settle, \
             --allow-destructive-writes and the drive named with --write-drives (or --drives)"
                .into(),
            Some("--nvme-long-tests gc-settle --allow-destructive-writes --write-drives SERIAL|/dev/nvmeXnY|BDF"),
        );
    } else if let Some(why) = why_not_writable {
        waive_part(
            p,
            PathId::NvmeWrite,
            scope,
            format!("gc-settle writes, and {why}"),
            Some("--allow-destructive-writes --write-drives SERIAL|/dev/nvmeXnY|BDF"),
        );
    }
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

fn sweep_cell(label: &str, size: u64, qd: u32, drives: Vec<String>, reps: Reps) -> Cell {
    Cell {
        kind: CellKind::Sweep,
        name: format!("{label}/{}/qd{qd}", size_label(size)),
        spec: Spec::Nvme(NvmeSpec {
            test: NvmeTest::Sweep,
            target: false,
            block_bytes: size,
            queue_depth: qd,
            drives,
            pattern: NvmePattern::Sequential,
        }),
        reps,
    }
}

/// The NVMe matrix of `path`, less the cases this machine cannot run, each waived with why: a
/// block size that is not a whole number of a drive's logical blocks (O_DIRECT refuses it), or
/// I/O buffers larger than their node's share of memory (see [`crate::BUFFER_SHARE_DIVISOR`]).
pub(crate) fn plan_nvme(path: PathId, topo: &Topology, opts: &PlanOptions, p: &mut Matrix) {
    let before = p.cells.len();
    plan_nvme_cells(path, topo, opts, p);
    let planned = p.cells.split_off(before);
    let mut scopes = BTreeSet::new();
    for cell in planned {
        match unrunnable(topo, path, &cell) {
            None => p.cells.push(cell),
            Some((scope, reason, hint)) => {
                if scopes.insert(scope.clone()) {
                    waive(p, path, Some(scope), reason, Some(&hint));
                }
            }
        }
    }
}

/// Why this machine cannot run an NVMe case: (waiver scope, reason, hint).
fn unrunnable(topo: &Topology, path: PathId, cell: &Cell) -> Option<(String, String, String)> {
    let spec = cell.spec.nvme()?;
    let size = spec.block_bytes;
    let qd = u64::from(spec.queue_depth.max(1));
    let drive = |key: &str| topo.nvme.iter().find(|d| drive_key(d) == key);
    for key in &spec.drives {
        let Some(d) = drive(key) else { continue };
        let Some(ns) = d.namespaces.first() else {
            continue;
        };
        let Some(lbs) = ns.logical_block_size.map(u64::from).filter(|&b| b > 0) else {
            continue;
        };
        if !size.is_multiple_of(lbs) {
            return Some((
                format!("{} I/O on {}", size_label(size), d.name),
                format!(
                    "{} has {lbs}-byte logical blocks: an O_DIRECT I/O of {} is not a whole \
                     number of them",
                    ns.name,
                    size_label(size)
                ),
                format!("--nvme-sizes in multiples of {lbs} bytes for {}", d.name),
            ));
        }
    }
    // Every drive's engine holds `qd` buffers of `size` bytes on the drive's node; a `--target`
    // is served from the only node with CPUs, when there is one (as hwc-bench-nvme places it).
    let cpu_nodes: Vec<u32> = topo
        .platform
        .numa
        .iter()
        .filter(|n| !n.cpus.is_empty())
        .map(|n| n.id)
        .collect();
    let target_node = match cpu_nodes.as_slice() {
        [only] => Some(*only),
        _ => None,
    };
    let mut per_node: BTreeMap<Option<u32>, u64> = BTreeMap::new();
    for key in &spec.drives {
        let node = drive(key).map_or(target_node, |d| d.numa_node);
        let need = per_node.entry(node).or_default();
        *need = need.saturating_add(qd.saturating_mul(size));
    }
    per_node.into_iter().find_map(|(node, need)| {
        let scope = format!("{path}/{}", cell.name);
        let what = format!(
            "the I/O buffers of {scope} (queue depth {qd} × {} per drive)",
            size_label(size)
        );
        buffers_too_large(topo, node, need, &what).map(|why| {
            (
                scope.clone(),
                why,
                "a smaller --nvme-sizes or --queue-depths".to_string(),
            )
        })
    })
}

fn plan_nvme_cells(path: PathId, topo: &Topology, opts: &PlanOptions, p: &mut Matrix) {
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
            gc_settle_waiver(p, o, Some("the target may not be written"));
            return;
        }
        for &size in &sizes {
            for &qd in &qds {
                let mut cell = sweep_cell("target", size, qd, vec![key.clone()], reps);
                if let Spec::Nvme(s) = &mut cell.spec {
                    s.target = true;
                }
                p.cells.push(cell);
            }
        }
        if write {
            if o.wants(LongTest::GcSettle) {
                p.cells.push(gc_settle_cell(o, "target", key, true));
            }
            gc_settle_waiver(p, o, None);
        } else {
            long_read_cases(p, o, reps, ("target", key, true));
            long_read_waivers(p, o);
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
             --allow-destructive-writes and each drive named with --write-drives (or --drives)"
                .into(),
            Some("--allow-destructive-writes --write-drives SERIAL|/dev/nvmeXnY|BDF"),
        );
        gc_settle_waiver(
            p,
            o,
            Some("writes were not allowed (--allow-destructive-writes with the drives named)"),
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
                p.cells.push(Cell {
                    kind: CellKind::Sweep,
                    name: format!("latency/{}/4KiB-random/qd{qd}", d.name),
                    spec: Spec::Nvme(NvmeSpec {
                        test: NvmeTest::Latency,
                        target: false,
                        block_bytes: LATENCY_BLOCK,
                        queue_depth: qd,
                        drives: vec![drive_key(d)],
                        pattern: NvmePattern::Random,
                    }),
                    reps,
                });
            }
        }
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
                let label = format!("{k}drive");
                p.cells
                    .push(sweep_cell(&label, size, qd, group.clone(), reps));
            }
        }
    }
    // The long tests last: an interrupted run keeps the sweeps.
    if write {
        if o.wants(LongTest::GcSettle) {
            for d in &usable {
                p.cells
                    .push(gc_settle_cell(o, &d.name, &drive_key(d), false));
            }
        }
        gc_settle_waiver(p, o, None);
    } else {
        for d in &usable {
            long_read_cases(p, o, reps, (&d.name, &drive_key(d), false));
        }
        long_read_waivers(p, o);
    }
}

#[cfg(test)]
#[path = "nvme_tests.rs"]
mod tests;
