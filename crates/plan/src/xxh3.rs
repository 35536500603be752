//! The CPU step's XXH3 hash throughput: every code path the CPU flags allow
//! (`cpu_features.xxh3_paths`), both variants, a cache-resident block and a memory-resident
//! working set at each count of the host-RAM thread sweep, and `xxhsum -b`'s 100 KB block on
//! one thread (to compare with it).

use crate::{cpu_nodes, physical_cores, thread_sweep, waive, Cell, Matrix, PlanOptions};
use hwc_model::xxh3::{CACHE_BLOCK_BYTES, XXHSUM_BLOCK_BYTES};
use hwc_model::{size_label, CellKind, HashSpec, HashVariant, PathId, Spec, Topology, MIB};

/// The memory-resident working set where the last-level cache is unknown.
pub const XXH3_MEMORY_DEFAULT_BYTES: u64 = 256 * MIB;
/// The memory-resident working set is this many times the last-level cache (whole machine).
pub const XXH3_MEMORY_CACHE_MULTIPLE: u64 = 4;
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
    // (size, thread counts, repetitions)
    let mut sizes: Vec<(u64, Vec<u32>, hwc_model::Reps)> = vec![
        (CACHE_BLOCK_BYTES, threads.clone(), opts.reps(3, 30)),
        (XXHSUM_BLOCK_BYTES, vec![1], opts.reps(3, 30)),
    ];
    if let Some(b) = memory {
        sizes.push((b, threads.clone(), opts.reps(1, 8)));
    }
    for &simd in paths {
        for variant in HashVariant::ALL {
            for (size, threads, reps) in &sizes {
                for &t in threads {
                    m.cells.push(Cell {
                        kind: CellKind::Sweep,
                        name: format!(
                            "n{}/{}/{}/{}/t{t}",
                            node.id,
                            simd.as_str(),
                            variant.as_str(),
                            size_label(*size)
                        ),
                        spec: Spec::Hash(HashSpec {
                            variant,
                            simd,
                            size_bytes: *size,
                            threads: t,
                            cpu_node: Some(node.id),
                        }),
                        reps: *reps,
                    });
                }
            }
        }
    }
}
