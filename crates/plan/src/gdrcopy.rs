//! Path 5 (GDRCopy, CPU ↔ GPU BAR1): for every GPU, CPU → BAR1 writes and BAR1 → CPU reads
//! over a size sweep (gdrcopy's copybw), by one thread on the GPU's node and one on each other
//! node with CPUs, with host memory on the thread's node; and small copies from the GPU's node
//! (copylat), whose mean time per copy is the figure.

use crate::{cpu_nodes, waive, Cell, Matrix, PlanOptions};
use hwc_model::{
    size_label, CellKind, CopyDirection, GdrcopySpec, PathId, Spec, Topology, KIB, MIB,
};

/// The bandwidth sweep.
pub const GDRCOPY_SIZES: [u64; 5] = [4 * KIB, 64 * KIB, MIB, 16 * MIB, 64 * MIB];
/// The latency probes' sizes.
pub const GDRCOPY_LATENCY_SIZES: [u64; 4] = [8, 64, 512, 4 * KIB];
/// Writes (CPU → BAR1) first.
pub const GDRCOPY_DIRECTIONS: [CopyDirection; 2] = [CopyDirection::H2d, CopyDirection::D2h];

/// `cpu-to-bar1` / `bar1-to-cpu`.
pub fn direction_label(d: CopyDirection) -> &'static str {
    match d {
        CopyDirection::H2d => "cpu-to-bar1",
        CopyDirection::D2h => "bar1-to-cpu",
    }
}

pub(crate) fn plan_gdrcopy(topo: &Topology, opts: &PlanOptions, p: &mut Matrix) {
    let path = PathId::Gdrcopy;
    if topo.gpus.is_empty() {
        return waive(p, path, None, "no NVIDIA GPU was detected".into(), None);
    }
    let reps = opts.reps(2, 10);
    let nodes = cpu_nodes(topo);
    for gpu in &topo.gpus {
        let name = gpu.name();
        // The GPU's node first (or no placement where it is unknown), then the others.
        let mut places: Vec<(Option<u32>, bool)> = vec![(gpu.numa_node, false)];
        if let Some(g) = gpu.numa_node {
            places.extend(
                nodes
                    .iter()
                    .filter(|n| n.id != g)
                    .map(|n| (Some(n.id), true)),
            );
        }
        for direction in GDRCOPY_DIRECTIONS {
            for &(cpu_node, cross) in &places {
                let at = match (cpu_node, cross) {
                    (Some(n), true) => format!("cross-n{n}"),
                    (Some(_), false) => "local".into(),
                    (None, _) => "unplaced".into(),
                };
                let sizes: Vec<(u64, bool)> = GDRCOPY_SIZES
                    .iter()
                    .map(|&s| (s, false))
                    .chain(
                        (!cross)
                            .then_some(GDRCOPY_LATENCY_SIZES.iter().map(|&s| (s, true)))
                            .into_iter()
                            .flatten(),
                    )
                    .collect();
                for (size, latency) in sizes {
                    let spec = GdrcopySpec {
                        gpu: name.clone(),
                        direction,
                        size_bytes: size,
                        cpu_node,
                        cross_numa: cross,
                        latency,
                    };
                    p.cells.push(Cell {
                        kind: CellKind::Sweep,
                        name: format!(
                            "{name}/{}/{at}/{}{}",
                            direction_label(direction),
                            if size < KIB {
                                format!("{size}B")
                            } else {
                                size_label(size)
                            },
                            if latency { "/latency" } else { "" }
                        ),
                        spec: Spec::Gdrcopy(spec),
                        reps,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{engine, gpu};
    use crate::{plan, PlanOptions};
    use hwc_model::topology::{NumaNode, Platform};

    fn node(id: u32) -> NumaNode {
        NumaNode {
            id,
            cpus: vec![id * 2, id * 2 + 1],
            memory_only: false,
            memory_bytes: None,
            distances: vec![],
        }
    }

    #[test]
    fn each_gpu_sweeps_both_directions_local_and_cross_and_probes_latency_locally() {
        let t = Topology {
            platform: Platform {
                numa: vec![node(0), node(1)],
                ..Platform::default()
            },
            gpus: vec![gpu(0, Some(1))],
            ..Topology::default()
        };
        let o = PlanOptions {
            engines: vec![engine(
                "gdrcopy",
                &[PathId::Gdrcopy],
                &[CellKind::Sweep],
                Default::default(),
            )],
            version: "0.1.0".into(),
            paths: Some([PathId::Gdrcopy].into()),
            ..PlanOptions::default()
        };
        let p = plan(&t, &o);
        let cells: Vec<&str> = p.cases.iter().map(|c| c.cell.as_str()).collect();
        // 2 directions × (5 local + 4 latency + 5 cross).
        assert_eq!(cells.len(), 2 * (5 + 4 + 5), "{cells:?}");
        assert!(cells.contains(&"gpu0/cpu-to-bar1/local/64MiB"));
        assert!(cells.contains(&"gpu0/bar1-to-cpu/cross-n0/4KiB"));
        assert!(cells.contains(&"gpu0/cpu-to-bar1/local/8B/latency"));
        assert!(!cells
            .iter()
            .any(|c| c.contains("cross") && c.ends_with("latency")));
        for c in &p.cases {
            let s = c.spec.gdrcopy().unwrap();
            assert_eq!(s.cpu_node, Some(if s.cross_numa { 0 } else { 1 }));
        }
    }

    #[test]
    fn no_gpu_no_cells() {
        let mut m = Matrix::default();
        plan_gdrcopy(&Topology::default(), &PlanOptions::default(), &mut m);
        assert!(m.cells.is_empty());
        assert_eq!(m.waived[0].reason, "no NVIDIA GPU was detected");
    }
}
