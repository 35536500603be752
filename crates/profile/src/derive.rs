//! The spec's derived fields: which measurement each profile field comes from.

use hwc_model::profile::{GpuProfile, HostRamPair, HostRamProfile};
use hwc_model::topology::{Gpu, LinkBasis, LinkTheory};
use hwc_model::{CopyDirection, EngineId, Failure, GpuCopySpec, Measurement, PathId, MIB};
use std::collections::BTreeMap;

fn median(m: &Measurement) -> f64 {
    m.gbps.median
}

/// Host RAM: per node pair, the thread sweeps (one per engine) at the largest size that does
/// not fit in cache, the best thread count and engine; then the best same- and cross-node
/// figures. A pair whose every size fits in cache (`--host-sizes 4MiB`, or a run interrupted
/// before its largest size) has no sustained figure: a cache figure is not a memory ceiling.
pub fn host_ram(ms: &[Measurement]) -> HostRamProfile {
    let pairs = host_ram_pairs(ms);
    let best = |same: bool| best_pair(&pairs, same).map(|p| p.best_gbps);
    HostRamProfile {
        same_numa_gbps: best(true),
        cross_numa_gbps: best(false),
        pairs,
    }
}

/// The same-node (`same`) or cross-node pair with the best figure (the first of equals): the
/// one `same_numa_gbps` / `cross_numa_gbps` and their ceilings come from.
pub fn best_pair(pairs: &BTreeMap<String, HostRamPair>, same: bool) -> Option<&HostRamPair> {
    pairs
        .values()
        .filter(|p| (p.src_node == p.dst_node) == same)
        .reduce(|a, b| if b.best_gbps > a.best_gbps { b } else { a })
}

/// Per `n{src}-n{dst}` pair: the sweep and its best, at the sustained size.
pub fn host_ram_pairs(ms: &[Measurement]) -> BTreeMap<String, HostRamPair> {
    let mut groups: BTreeMap<(u32, u32, u32), Vec<&Measurement>> = BTreeMap::new();
    for m in ms.iter().filter(|m| m.path == PathId::HostRam) {
        if let Some(p) = m.spec.host_copy() {
            groups
                .entry((p.src_node, p.dst_node, p.cpu_node))
                .or_default()
                .push(m);
        }
    }
    let threads = |m: &Measurement| m.spec.host_copy().map_or(1, |p| p.threads);
    let mut out = BTreeMap::new();
    for ((src, dst, cpu), group) in groups {
        let size_of = |m: &&Measurement| m.spec.size_bytes();
        let Some(size) = group
            .iter()
            .filter(|m| !m.cache_resident)
            .map(size_of)
            .max()
        else {
            continue;
        };
        let at_size: Vec<&&Measurement> = group.iter().filter(|m| size_of(m) == size).collect();
        let mut sweeps: BTreeMap<EngineId, BTreeMap<u32, f64>> = BTreeMap::new();
        for m in &at_size {
            sweeps
                .entry(m.engine.clone())
                .or_default()
                .insert(threads(m), median(m));
        }
        let Some(best) = at_size
            .iter()
            .max_by(|a, b| median(a).total_cmp(&median(b)))
        else {
            continue;
        };
        let sweep = sweeps.get(&best.engine).cloned().unwrap_or_default();
        out.insert(
            format!("n{src}-n{dst}"),
            HostRamPair {
                src_node: src,
                dst_node: dst,
                cpu_node: cpu,
                size_bytes: size,
                best_gbps: median(best),
                best_threads: threads(best),
                key: best.key.clone(),
                engine: best.engine.clone(),
                sweep_gbps: sweep,
                engine_sweeps_gbps: sweeps,
            },
        );
    }
    out
}

fn of_gpu<'a, 'b>(
    ms: &'a [Measurement],
    gpu: &'b str,
    path: PathId,
) -> impl Iterator<Item = &'a Measurement> + 'b
where
    'a: 'b,
{
    ms.iter()
        .filter(move |m| m.path == path && m.spec.gpu() == Some(gpu))
}

fn copy(m: &Measurement) -> Option<&GpuCopySpec> {
    m.spec.gpu_copy()
}

fn host_node(m: &Measurement) -> Option<u32> {
    copy(m).and_then(|c| c.host_node)
}

fn streams(m: &Measurement) -> Option<u32> {
    copy(m).map(|c| c.streams)
}

fn pinned(m: &Measurement) -> bool {
    copy(m).is_some_and(|c| c.host_memory.is_some() && c.pinned())
}

fn size_streams(m: &Measurement, size: u64, n: u32) -> bool {
    m.spec.size_bytes() == size && streams(m) == Some(n)
}

/// The measurements the GPU's profile fields are the medians of: the one selection rule that
/// both the fields and their ceilings' sources follow. Cross-NUMA figures take the worst remote
/// node; the penalty compares one-stream peaks (like with like).
#[derive(Debug, Clone, Copy, Default)]
pub struct GpuPicks<'a> {
    pub h2d_4m_1stream_numa_local: Option<&'a Measurement>,
    pub h2d_peak_numa_local: Option<&'a Measurement>,
    /// The one-stream NUMA-local H2D peak: the local side of the cross-NUMA penalty.
    pub h2d_1stream_peak_numa_local: Option<&'a Measurement>,
    pub d2h_peak_numa_local: Option<&'a Measurement>,
    pub h2d_4m_1stream_cross_numa: Option<&'a Measurement>,
    pub h2d_peak_cross_numa: Option<&'a Measurement>,
    pub d2d_1stream: Option<&'a Measurement>,
    pub d2d_4stream: Option<&'a Measurement>,
    pub duplex_h2d: Option<&'a Measurement>,
    pub duplex_d2h: Option<&'a Measurement>,
}

/// The highest median (the first of equals).
fn best<'a>(it: impl Iterator<Item = &'a Measurement>) -> Option<&'a Measurement> {
    it.reduce(|a, b| if median(b) > median(a) { b } else { a })
}

/// The lowest median (the first of equals).
fn worst<'a>(it: impl Iterator<Item = &'a Measurement>) -> Option<&'a Measurement> {
    it.reduce(|a, b| if median(b) < median(a) { b } else { a })
}

/// The picks for GPU `name` (`gpu0`, …) on NUMA node `numa_node`.
pub fn gpu_picks<'a>(name: &str, numa_node: Option<u32>, ms: &'a [Measurement]) -> GpuPicks<'a> {
    let is_local = |m: &Measurement| pinned(m) && host_node(m) == numa_node;
    let is_cross = |m: &Measurement| {
        pinned(m) && numa_node.is_some() && host_node(m).is_some() && host_node(m) != numa_node
    };
    let h2d_local = || of_gpu(ms, name, PathId::H2d).filter(|m| is_local(m));
    let h2d_cross = || of_gpu(ms, name, PathId::H2d).filter(|m| is_cross(m));
    let one_stream = |m: &&Measurement| streams(m) == Some(1);

    let cross_nodes: Vec<u32> = {
        let mut v: Vec<u32> = h2d_cross().filter_map(host_node).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let worst_cross = |f: &dyn Fn(u32) -> Option<&'a Measurement>| {
        worst(cross_nodes.iter().filter_map(|&n| f(n)))
    };
    let cross_4m = worst_cross(&|n| {
        best(h2d_cross().filter(|m| host_node(m) == Some(n) && size_streams(m, 4 * MIB, 1)))
    });
    let cross_peak = worst_cross(&|n| {
        best(
            h2d_cross()
                .filter(|m| host_node(m) == Some(n))
                .filter(one_stream),
        )
    });

    // D2D: the largest size that does not fit in L2 (an HBM figure).
    let d2d = || of_gpu(ms, name, PathId::D2d).filter(|m| !m.cache_resident);
    let d2d_size = d2d().map(|m| m.spec.size_bytes()).max();
    let d2d_at =
        |s: u32| d2d_size.and_then(|size| best(d2d().filter(|m| size_streams(m, size, s))));

    // Duplex: NUMA-local pinned copies on one stream per direction (what the plan measures),
    // at the largest size measured in both directions: the two halves of a sum always come
    // from one kind of case, even in a profile that holds other duplex figures too.
    let duplex_cases =
        || of_gpu(ms, name, PathId::Duplex).filter(|m| is_local(m) && streams(m) == Some(1));
    let duplex = |dir: CopyDirection, size: u64| {
        best(duplex_cases().filter(|m| {
            copy(m).and_then(|c| c.direction) == Some(dir) && m.spec.size_bytes() == size
        }))
    };
    let (h2d, d2h) = (CopyDirection::H2d, CopyDirection::D2h);
    let duplex_size = duplex_cases()
        .map(|m| m.spec.size_bytes())
        .filter(|&s| duplex(h2d, s).is_some() && duplex(d2h, s).is_some())
        .max();
    let (dh, dd) = match duplex_size {
        Some(s) => (duplex(h2d, s), duplex(d2h, s)),
        None => (None, None),
    };

    GpuPicks {
        h2d_4m_1stream_numa_local: best(h2d_local().filter(|m| size_streams(m, 4 * MIB, 1))),
        h2d_peak_numa_local: best(h2d_local()),
        h2d_1stream_peak_numa_local: best(h2d_local().filter(one_stream)),
        d2h_peak_numa_local: best(of_gpu(ms, name, PathId::D2h).filter(|m| is_local(m))),
        h2d_4m_1stream_cross_numa: cross_4m,
        h2d_peak_cross_numa: cross_peak,
        d2d_1stream: d2d_at(1),
        d2d_4stream: d2d_at(4),
        duplex_h2d: dh,
        duplex_d2h: dd,
    }
}

/// The spec's `gpus.gpuN` fields from the GPU's measurements (see [`GpuPicks`]).
pub fn gpu_fields(g: &Gpu, ms: &[Measurement]) -> GpuProfile {
    let k = gpu_picks(&g.name(), g.numa_node, ms);
    let v = |m: Option<&Measurement>| m.map(median);
    let (dh, dd) = (v(k.duplex_h2d), v(k.duplex_d2h));
    GpuProfile {
        model: g.model.clone(),
        pcie_gen: g.pcie_gen,
        pcie_width: g.pcie_width,
        bar1_gib: g.bar1_gib,
        pci_bdf: g.pci_bdf.clone(),
        root: g.root.clone(),
        cuda_index: g.cuda_index,
        numa_node: g.numa_node,
        h2d_4m_1stream_numa_local_gbps: v(k.h2d_4m_1stream_numa_local),
        h2d_peak_numa_local_gbps: v(k.h2d_peak_numa_local),
        d2h_peak_numa_local_gbps: v(k.d2h_peak_numa_local),
        h2d_4m_1stream_cross_numa_gbps: v(k.h2d_4m_1stream_cross_numa),
        h2d_peak_cross_numa_gbps: v(k.h2d_peak_cross_numa),
        cross_numa_h2d_penalty_gbps: match (
            v(k.h2d_1stream_peak_numa_local),
            v(k.h2d_peak_cross_numa),
        ) {
            (Some(l), Some(c)) => Some(l - c),
            _ => None,
        },
        d2d_1stream_gbps: v(k.d2d_1stream),
        d2d_4stream_gbps: v(k.d2d_4stream),
        duplex_h2d_gbps: dh,
        duplex_d2h_gbps: dd,
        duplex_total_gbps: dh.zip(dd).map(|(a, b)| a + b),
    }
}

/// Each GPU's link as its copies ran over it, which the shares of the link and the TLP checks
/// use: as NVML read it under load in the GPU's warm-up (`gpuN.pcie_link_load`); else, where
/// detection read it below its maximum, the maximum (an idle GPU downtrains its link, so the
/// idle reading says nothing of the copies); else as detected. Drives' links stay as detected.
pub fn links_as_run(
    links: &[LinkTheory],
    gpus: &[Gpu],
    env: &hwc_model::Environment,
) -> Vec<LinkTheory> {
    links
        .iter()
        .map(|l| {
            if !gpus.iter().any(|g| g.name() == l.device) {
                return l.clone();
            }
            let loaded = env
                .get(&hwc_model::gpu_key(&l.device, hwc_model::PCIE_LINK_LOAD))
                .and_then(|s| s.link);
            match (loaded, l.capable()) {
                (Some(link), _) => l.rebased(link, LinkBasis::UnderLoad),
                (None, Some(max)) if l.degraded => l.rebased(max, LinkBasis::Capable),
                _ => l.clone(),
            }
        })
        .collect()
}

/// Each GPU copy against its link: one faster than the link can carry is a measurement bug,
/// and its case fails with that reason (a [`Failure`], so no ceiling comes from it); one above
/// the link's TLP-adjusted limit (H2D against the limit for DMA reads, D2H for DMA writes) is
/// kept and flagged suspect. Returns the measurements kept and the failures.
pub fn over_the_wire(
    gpus: &[Gpu],
    links: &[LinkTheory],
    ms: Vec<Measurement>,
    warnings: &mut Vec<hwc_model::Warning>,
) -> (Vec<Measurement>, Vec<Failure>) {
    let mut failed = Vec::new();
    let kept = ms
        .into_iter()
        .filter(|m| {
            let copy = matches!(m.path, PathId::H2d | PathId::D2h | PathId::Duplex);
            let Some(link) = gpus
                .iter()
                .map(|g| g.name())
                .find(|n| copy && m.spec.gpu() == Some(n.as_str()))
                .and_then(|n| links.iter().find(|l| l.device == n))
            else {
                return true;
            };
            let limit = link.max_theoretical_gbps.unwrap_or(link.theoretical_gbps);
            if m.gbps.median > limit {
                failed.push(Failure {
                    key: m.key.clone(),
                    path: m.path,
                    engine: Some(m.engine.clone()),
                    error: hwc_model::WarningKind::AboveLink {
                        key: m.key.clone(),
                        gbps: m.gbps.median,
                        link_gbps: limit,
                    }
                    .to_string(),
                });
                return false;
            }
            let tlp = match m.path {
                PathId::H2d => link.tlp_read_gbps,
                PathId::D2h => link.tlp_write_gbps,
                _ => None,
            };
            if let (Some(tlp), Some(mps)) = (tlp, link.min_mps_bytes) {
                if m.gbps.median > tlp {
                    warnings.push(
                        hwc_model::WarningKind::AboveTlpLimit {
                            key: m.key.clone(),
                            gbps: m.gbps.median,
                            tlp_gbps: tlp,
                            mps_bytes: mps,
                        }
                        .into(),
                    );
                }
            }
            true
        })
        .collect();
    (kept, failed)
}
