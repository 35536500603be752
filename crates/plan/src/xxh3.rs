//! The CPU step's XXH3 hash throughput: every code path the CPU flags allow
//! (`cpu_features.xxh3_paths`), both variants, on one thread at a cache-resident block
//! (`xxhsum -b`'s 100 KB, page-aligned), a memory-resident working set and the same block at
//! `xxhsum -b`'s alignment (to compare with it); and the widest path at the first two over the
//! host-RAM thread sweep. Narrower paths only
//! scale the same way more slowly, and sweeping each of them would double the CPU step's time.
//! All on the first NUMA node with CPUs: a hash's speed is its core's and its local memory's,
//! and a machine's sockets carry the same CPU model.

use crate::{cpu_nodes, physical_cores, thread_sweep, waive, Cell, Matrix, PlanOptions};
use hwc_model::xxh3::{block_label, CACHE_BLOCK_BYTES, XXHSUM_OFFSET_BYTES};
use hwc_model::{size_label, CellKind, HashSpec, HashVariant, PathId, Spec, Topology, MIB};

/// The memory-resident working set where the last-level cache is unknown.
pub const XXH3_MEMORY_DEFAULT_BYTES: u64 = 256 * MIB;
/// The memory-resident working set is this many times the last-level cache (whole machine).
pub const XXH3_MEMORY_CACHE_MULTIPLE: u64 = 2;
/// It takes at most this share of the machine's memory (1/N).
pub const XXH3_MEMORY_SHARE_DIVISOR: u64 = 8;

/// The memory-resident working set on `topo`: [`XXH3_MEMORY_CACHE_MULTIPLE`] × the last-level
/// cache rounded up to a MiB, else [`XXH3_MEMORY_DEFAULT_BYTES`]; `Err(why)` where that is more
/// than [`XXH3_MEMORY_SHARE_DIVISOR`]'s share of the memory.
pub fn memory_bytes(topo: &Topology) -> Result<u64, String> {
    let want = topo
        .platform
        .llc_bytes()
        .map(|llc| (XXH3_MEMORY_CACHE_MULTIPLE * llc).next_multiple_of(MIB))
        .unwrap_or(XXH3_MEMORY_DEFAULT_BYTES);
    match topo.platform.memory_bytes {
        Some(m) if want > m / XXH3_MEMORY_SHARE_DIVISOR => Err(format!(
            "a memory-resident working set of {} (more than {XXH3_MEMORY_CACHE_MULTIPLE} × the \
             last-level cache) is more than 1/{XXH3_MEMORY_SHARE_DIVISOR} of the memory",
            size_label(want)
        )),
        _ => Ok(want),
    }
}

pub(crate) fn plan_xxh3(topo: &Topology, opts: &PlanOptions, m: &mut Matrix) {
    let Some(node) = cpu_nodes(topo).first().copied() else {
        waive(m, PathId::Xxh3, None, "no CPUs were detected".into(), None);
        return;
    };
    let paths = &topo.cpu_features.xxh3_paths;
    if paths.is_empty() {
        waive(
            m,
            PathId::Xxh3,
            None,
            "the CPU's flags were not read (no /proc/cpuinfo)".into(),
            None,
        );
        return;
    }
    let cpus = u32::try_from(node.cpus.len()).unwrap_or(u32::MAX);
    let threads: Vec<u32> = match &opts.host_threads {
        Some(asked) => asked
            .iter()
            .copied()
            .filter(|&t| t >= 1 && t <= cpus)
            .collect(),
        None => thread_sweep(cpus, physical_cores(topo, &node.cpus)),
    };
    let memory = match memory_bytes(topo) {
        Ok(b) => Some(b),
        Err(why) => {
            waive(m, PathId::Xxh3, Some("memory-resident".into()), why, None);
            None
        }
    };
    // (size, offset, thread counts of the widest path, repetitions): each count a cap, a case
    // stopping at 5 once its median is known within HOST_STEADY_PCT, as a host RAM case does
    // (see `Steady`): on noisy vCPUs a 100 KB block's 4 ms repetitions spread 5–70 %, and a
    // tighter bound only ran such cases to their cap.
    let mut sizes: Vec<(u64, Option<u32>, Vec<u32>, hwc_model::Reps)> = vec![
        (
            CACHE_BLOCK_BYTES,
            Some(0),
            threads.clone(),
            opts.adaptive_reps(3, 30, 5, crate::HOST_STEADY_PCT),
        ),
        (
            CACHE_BLOCK_BYTES,
            Some(XXHSUM_OFFSET_BYTES),
            vec![1],
            opts.adaptive_reps(3, 30, 5, crate::HOST_STEADY_PCT),
        ),
    ];
    if let Some(b) = memory {
        sizes.push((
            b,
            None,
            threads.clone(),
            opts.adaptive_reps(1, 8, 5, crate::HOST_STEADY_PCT),
        ));
    }
    let widest = paths.iter().copied().max();
    for &simd in paths {
        for variant in HashVariant::ALL {
            for (size, offset, threads, reps) in &sizes {
                let one = [1];
                let threads: &[u32] = if Some(simd) == widest { threads } else { &one };
                for &t in threads {
                    m.cells.push(Cell {
                        kind: CellKind::Sweep,
                        name: format!(
                            "n{}/{}/{}/{}/t{t}",
                            node.id,
                            simd.as_str(),
                            variant.as_str(),
                            block_label(*size, *offset)
                        ),
                        spec: Spec::Hash(HashSpec {
                            variant,
                            simd,
                            size_bytes: *size,
                            threads: t,
                            cpu_node: Some(node.id),
                            offset_bytes: *offset,
                        }),
                        reps: *reps,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix;
    use hwc_model::topology::{Cache, LogicalCpu, NumaNode, Platform};
    use hwc_model::{SimdPath, GIB};

    fn machine(cpus: u32, flags: &[&str], llc: Option<u64>) -> Topology {
        let mut t = Topology {
            platform: Platform {
                numa_nodes: 1,
                numa: vec![NumaNode {
                    id: 0,
                    cpus: (0..cpus).collect(),
                    memory_only: false,
                    memory_bytes: None,
                    distances: vec![],
                }],
                cpus: (0..cpus)
                    .map(|id| LogicalCpu {
                        id,
                        package: Some(0),
                        core: Some(id),
                        node: Some(0),
                    })
                    .collect(),
                caches: llc
                    .map(|size_bytes| Cache {
                        level: 3,
                        kind: "Unified".into(),
                        size_bytes,
                        shared_by_cpus: None,
                        instances: Some(1),
                    })
                    .into_iter()
                    .collect(),
                memory_bytes: Some(64 * GIB),
                ..Platform::default()
            },
            ..Topology::default()
        };
        t.cpu_features.xxh3_paths = SimdPath::allowed(&|f| flags.contains(&f));
        t
    }

    fn paths_planned(t: &Topology) -> Vec<SimdPath> {
        let mut v: Vec<SimdPath> = matrix(PathId::Xxh3, t, &PlanOptions::default())
            .cells
            .iter()
            .filter_map(|c| c.spec.hash().map(|h| h.simd))
            .collect();
        v.dedup();
        v
    }

    #[test]
    fn every_path_the_flags_allow_is_planned_and_no_other() {
        use SimdPath::*;
        let avx512 = machine(2, &["sse2", "avx2", "avx512f"], None);
        assert_eq!(paths_planned(&avx512), vec![Scalar, Sse2, Avx2, Avx512]);
        let avx2 = machine(2, &["sse2", "avx2"], None);
        assert_eq!(paths_planned(&avx2), vec![Scalar, Sse2, Avx2]);
        let arm = machine(2, &["asimd"], None);
        assert_eq!(paths_planned(&arm), vec![Scalar, Neon]);
        let bare = machine(2, &[], None);
        assert_eq!(paths_planned(&bare), vec![Scalar]);
    }

    #[test]
    fn sizes_and_threads_follow_the_cache_and_the_host_sweep() {
        let t = machine(4, &["sse2"], Some(260 * MIB));
        let m = matrix(PathId::Xxh3, &t, &PlanOptions::default());
        let names: Vec<&str> = m.cells.iter().map(|c| c.name.as_str()).collect();
        // 2 variants × (the widest path, SSE2: 100 KiB and the working set at 1, 2, 4 threads,
        // 100 KiB at xxhsum's alignment at 1; scalar: each block at 1 thread).
        assert_eq!(names.len(), 2 * ((3 + 3 + 1) + 3), "{names:?}");
        assert!(names.contains(&"n0/sse2/xxh3-128/100KiB+0B/t4"));
        assert!(names.contains(&"n0/scalar/xxh3-64/100KiB+0B/t1"));
        assert!(names.contains(&"n0/scalar/xxh3-64/100KiB+16B/t1"));
        assert!(names.contains(&"n0/sse2/xxh3-64/100KiB+16B/t1"));
        assert!(!names.contains(&"n0/scalar/xxh3-64/100KiB+0B/t2"));
        assert!(!names.contains(&"n0/sse2/xxh3-64/100KiB+16B/t2"));
        // Blocks are placed (an offset each); the working set is not (none).
        let offsets: Vec<Option<u32>> = m
            .cells
            .iter()
            .filter_map(|c| c.spec.hash())
            .map(|h| h.offset_bytes)
            .collect();
        let count = |o: Option<u32>| offsets.iter().filter(|&&x| x == o).count();
        assert_eq!(count(Some(XXHSUM_OFFSET_BYTES)), 4);
        assert_eq!(count(None), 2 * (3 + 1));
        assert_eq!(count(Some(0)), names.len() - 4 - 8);
        // Each may stop at 5 once its median is known within 5 %, as host RAM cases do;
        // --fixed-reps times every one to its cap.
        assert!(m.cells.iter().all(|c| c.reps.steady
            == Some(hwc_model::Steady {
                min_timed: 5,
                within_pct: crate::HOST_STEADY_PCT
            })));
        // 2 × 260 MiB.
        assert!(names.contains(&"n0/sse2/xxh3-64/520MiB/t2"), "{names:?}");
        assert_eq!(memory_bytes(&machine(1, &[], None)), Ok(256 * MIB));
        let mut small = machine(1, &[], Some(260 * MIB));
        small.platform.memory_bytes = Some(4 * GIB);
        assert!(memory_bytes(&small).is_err());
        let m = matrix(PathId::Xxh3, &small, &PlanOptions::default());
        assert_eq!(m.waived.len(), 1);
        assert_eq!(
            m.cells.len(),
            2 * 2,
            "100 KiB page-aligned and at xxhsum's alignment, 1 thread, both variants"
        );
        for c in &m.cells {
            assert_eq!(c.spec.check(PathId::Xxh3), Ok(()));
        }
    }
}
