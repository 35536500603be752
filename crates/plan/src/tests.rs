use super::*;
use hwc_model::topology::{LogicalCpu, Platform};
use proptest::prelude::*;

fn node(id: u32, cpus: std::ops::Range<u32>) -> NumaNode {
    NumaNode {
        id,
        cpus: cpus.collect(),
        memory_only: false,
        memory_bytes: None,
        distances: vec![],
    }
}

fn machine(nodes: Vec<NumaNode>) -> Topology {
    let cpus = nodes
        .iter()
        .flat_map(|n| {
            n.cpus.iter().map(move |&c| LogicalCpu {
                id: c,
                package: Some(n.id),
                core: Some(c),
                node: Some(n.id),
            })
        })
        .collect();
    Topology {
        platform: Platform {
            numa_nodes: nodes.len() as u32,
            numa: nodes,
            cpus,
            ..Platform::default()
        },
        ..Topology::default()
    }
}

pub(crate) fn gpu(index: u32, node: Option<u32>) -> Gpu {
    Gpu {
        index,
        cuda_index: None,
        pci_bdf: format!("0000:{:02x}:00.0", 0x40 * index + 1),
        model: Some("NVIDIA H200".into()),
        vendor: "0x10de".into(),
        device: "0x2335".into(),
        pcie_gen: Some(5),
        pcie_width: Some(16),
        pcie_max_gen: Some(5),
        pcie_max_width: Some(16),
        bar1_bytes: None,
        bar1_gib: None,
        bars: vec![],
        numa_node: node,
        root: None,
        driver: None,
        memory_bytes: None,
        l2_cache_bytes: None,
    }
}

fn with_tool(mut t: Topology, name: &str, present: bool) -> Topology {
    t.tools.push(ToolStatus {
        name: name.into(),
        present,
        evidence: if present {
            "/usr/lib/x".into()
        } else {
            "not found".into()
        },
        install_hint: (!present).then(|| format!("install {name}")),
    });
    t
}

/// An engine of `paths` measuring `cells`, as an engine crate declares it (the planner cannot
/// see the engine crates: they depend on it).
pub(crate) fn engine(
    id: &'static str,
    paths: &[PathId],
    cells: &[CellKind],
    needs: hwc_model::Needs,
) -> EngineStatus {
    EngineStatus {
        decl: hwc_model::EngineDecl {
            id: EngineId::new(id),
            title: id.into(),
            paths: paths.to_vec(),
            cells: cells.to_vec(),
            needs,
            hardware: true,
            default_on: true,
        },
        available: Ok(()),
    }
}

/// This build's engines, as their crates declare them.
pub(crate) fn this_builds_engines() -> Vec<EngineStatus> {
    use CellKind::*;
    let cuda = hwc_model::Needs {
        gpu: true,
        libraries: vec![hwc_model::Library {
            name: "libcuda".into(),
            install_hint: None,
        }],
        ..hwc_model::Needs::default()
    };
    vec![
        engine(
            "host-memcpy",
            &[PathId::HostRam],
            &[Sweep, Sustained],
            Default::default(),
        ),
        engine(
            "host-streaming",
            &[PathId::HostRam],
            &[Sustained],
            Default::default(),
        ),
        engine(
            "cuda-copy",
            &[PathId::H2d, PathId::D2h, PathId::Duplex, PathId::D2d],
            &[Sweep],
            cuda,
        ),
        engine(
            "io-uring",
            &[PathId::NvmeRead, PathId::NvmeWrite],
            &[Sweep, LongTest],
            Default::default(),
        ),
    ]
}

fn all_implemented() -> PlanOptions {
    PlanOptions {
        engines: this_builds_engines(),
        version: "0.1.0".into(),
        ..PlanOptions::default()
    }
}

#[test]
fn thread_sweep_doubles_and_ends_at_all_cpus() {
    assert_eq!(thread_sweep(1, None), vec![1]);
    assert_eq!(thread_sweep(2, Some(2)), vec![1, 2]);
    assert_eq!(thread_sweep(16, None), vec![1, 2, 4, 8, 16]);
    assert_eq!(thread_sweep(12, Some(6)), vec![1, 2, 4, 6, 8, 12]);
}

#[test]
fn host_sizes_leave_out_what_a_full_run_plans_and_they_do_not() {
    // No last-level cache known: the default sweep is the spec's four sizes.
    let t = machine(vec![node(0, 0..4), node(1, 4..8)]);
    assert_eq!(host_sizes(&t), HOST_RAM_SIZES.to_vec());
    let left_out = |sizes: &[u64]| host_sizes_left_out(&t, sizes);
    assert!(left_out(&HOST_RAM_SIZES).is_empty());
    // In another order, the same cases.
    assert!(left_out(&[256 * MIB, 4 * MIB, 64 * MIB, 16 * MIB]).is_empty());
    assert_eq!(left_out(&[4 * MIB, 256 * MIB]), ["16MiB", "64MiB"]);
    // A larger size moves the sustained cells (the streaming engine), and the ceiling, away from
    // 256 MiB.
    let mut more = HOST_RAM_SIZES.to_vec();
    more.push(GIB);
    assert_eq!(left_out(&more), ["256MiB sustained"]);
    // A covering list plans every case of the default plan.
    let cases = |sizes: Option<Vec<u64>>| -> Vec<String> {
        let o = PlanOptions {
            host_sizes: sizes,
            ..all_implemented()
        };
        plan(&t, &o).cases.into_iter().map(|c| c.key).collect()
    };
    let full = cases(None);
    let covering = cases(Some(vec![256 * MIB, 64 * MIB, 16 * MIB, 4 * MIB]));
    assert!(full.iter().all(|k| covering.contains(k)));
}

#[test]
fn the_default_thread_counts_are_every_nodes_sweep_together() {
    let t = machine(vec![node(0, 0..12), node(1, 12..18)]);
    // Node 0: 1, 2, 4, 8, 12; node 1: 1, 2, 4, 6.
    assert_eq!(default_host_threads(&t), vec![1, 2, 4, 6, 8, 12]);
    // And they are what a full plan runs.
    let p = plan(&t, &all_implemented());
    let mut planned: Vec<u32> = p
        .cases
        .iter()
        .filter_map(|c| c.spec.host_copy().map(|h| h.threads))
        .collect();
    planned.sort_unstable();
    planned.dedup();
    assert_eq!(planned, default_host_threads(&t));
}

#[test]
fn two_core_machine_plans_host_ram_only_and_waives_the_rest() {
    let t = machine(vec![node(0, 0..2)]);
    let p = plan(&t, &all_implemented());
    let keys: Vec<&str> = p.cases.iter().map(|c| c.key.as_str()).collect();
    // 4 sizes × 2 thread counts with memcpy, and the largest size again with streaming stores.
    assert_eq!(keys.len(), 10, "{keys:?}");
    assert!(keys.contains(&"host_ram/host-memcpy/n0-n0/4MiB/t1"));
    assert!(keys.contains(&"host_ram/host-memcpy/n0-n0/256MiB/t2"));
    assert!(keys.contains(&"host_ram/host-streaming/n0-n0/256MiB/t2"));
    let engine = |k: &str| p.cases.iter().find(|c| c.key == k).unwrap().engine.clone();
    assert_eq!(
        engine("host_ram/host-memcpy/n0-n0/4MiB/t1"),
        EngineId::new("host-memcpy")
    );
    assert_eq!(
        engine("host_ram/host-streaming/n0-n0/256MiB/t1"),
        EngineId::new("host-streaming")
    );
    // The two engines measure the same sustained cell.
    let spec = |k: &str| p.cases.iter().find(|c| c.key == k).unwrap().spec.clone();
    assert_eq!(
        spec("host_ram/host-memcpy/n0-n0/256MiB/t2"),
        spec("host_ram/host-streaming/n0-n0/256MiB/t2")
    );
    assert!(!keys.contains(&"host_ram/host-streaming/n0-n0/64MiB/t1"));
    for path in PathId::ALL.into_iter().filter(|&x| x != PathId::HostRam) {
        let w: Vec<_> = p.waivers_of(path).collect();
        assert!(!w.is_empty(), "{path} has no waiver");
        assert!(p.cases_of(path).next().is_none());
    }
    assert!(p
        .waivers_of(PathId::H2d)
        .any(|w| w.reason == "no NVIDIA GPU was detected"));
    assert!(p
        .waivers_of(PathId::HostRam)
        .any(|w| w.scope.as_deref() == Some("cross-NUMA")));
    let c = &p.cases[0];
    assert_eq!(
        c.reps,
        Reps {
            warmup: 20,
            timed: 200,
            retry_above_spread_pct: None,
            steady: Some(Steady {
                min_timed: 20,
                within_pct: HOST_STEADY_PCT
            })
        }
    );
    let big = p.cases.iter().find(|c| c.key.contains("256MiB")).unwrap();
    assert_eq!(
        big.reps,
        Reps {
            warmup: 5,
            timed: 50,
            retry_above_spread_pct: None,
            steady: Some(Steady {
                min_timed: 5,
                within_pct: HOST_STEADY_PCT
            })
        }
    );
    // The size added beyond the spec's when the cache is large gets fewer, longer repetitions.
    let mut large_cache = machine(vec![node(0, 0..4)]);
    large_cache.platform.caches = vec![hwc_model::topology::Cache {
        level: 3,
        kind: "Unified".into(),
        size_bytes: 300 * MIB,
        shared_by_cpus: None,
        instances: Some(1),
    }];
    let p = plan(&large_cache, &all_implemented());
    let beyond = p.cases.iter().find(|c| c.key.contains("/1GiB/")).unwrap();
    assert_eq!(
        beyond.reps,
        Reps {
            warmup: 2,
            timed: 12,
            retry_above_spread_pct: None,
            steady: Some(Steady {
                min_timed: 5,
                within_pct: HOST_STEADY_PCT
            })
        }
    );
}

#[test]
fn two_nodes_give_same_and_cross_pairs() {
    let t = machine(vec![node(0, 0..4), node(1, 4..8)]);
    let p = plan(&t, &all_implemented());
    for k in [
        "host_ram/host-memcpy/n0-n0/64MiB/t4",
        "host_ram/host-memcpy/n1-n1/64MiB/t4",
        "host_ram/host-memcpy/n0-n1/64MiB/t4",
    ] {
        assert!(p.cases.iter().any(|c| c.key == k), "missing {k}");
    }
    let cross = p
        .cases
        .iter()
        .find(|c| c.key == "host_ram/host-memcpy/n0-n1/4MiB/t2")
        .unwrap();
    let h = cross.spec.host_copy().unwrap();
    assert_eq!(h.cpu_node, 0);
    assert_eq!((h.src_node, h.dst_node), (0, 1));
    assert!(!p.waived.iter().any(|w| w.path == PathId::HostRam));
}

#[test]
fn a_large_last_level_cache_adds_a_sustained_size_beyond_it() {
    use hwc_model::topology::Cache;
    let mut t = machine(vec![node(0, 0..16)]);
    let l3 = |mib: u64| Cache {
        level: 3,
        kind: "Unified".into(),
        size_bytes: mib * MIB,
        shared_by_cpus: Some(16),
        instances: Some(1),
    };
    // 32 MiB L3: 256 MiB × 2 is 16 × the cache; the spec's sizes suffice.
    t.platform.caches = vec![l3(32)];
    assert_eq!(host_sizes(&t), HOST_RAM_SIZES.to_vec());
    // 300 MiB L3 (as on the H200 machine): 2 × size ≥ 4 × 300 MiB needs 1 GiB buffers.
    t.platform.caches = vec![l3(300)];
    assert_eq!(*host_sizes(&t).last().unwrap(), 1024 * MIB);
    let p = plan(&t, &all_implemented());
    assert!(p
        .cases
        .iter()
        .any(|c| c.key == "host_ram/host-memcpy/n0-n0/1GiB/t16"));
    // Not when both buffers would exceed an eighth of the memory.
    t.platform.memory_bytes = Some(8 << 30);
    assert_eq!(host_sizes(&t), HOST_RAM_SIZES.to_vec());
}

#[test]
fn memory_only_nodes_are_waived_not_measured() {
    let mut gpu_mem = node(2, 0..0);
    gpu_mem.memory_only = true;
    let t = machine(vec![node(0, 0..2), gpu_mem]);
    let p = plan(&t, &all_implemented());
    assert!(p.cases.iter().all(|c| !c.key.contains("n2")));
    assert!(p
        .waivers_of(PathId::HostRam)
        .any(|w| w.scope.as_deref() == Some("node 2") && w.reason.contains("memory-only")));
}

#[test]
fn gpu_without_libcuda_is_waived_with_the_tools_hint() {
    let mut t = machine(vec![node(0, 0..16)]);
    t.gpus.push(gpu(0, Some(0)));
    let t = with_tool(t, "libcuda", false);
    let p = plan(&t, &all_implemented());
    let w = p.waivers_of(PathId::H2d).next().unwrap();
    assert!(w.reason.starts_with("libcuda not found"), "{}", w.reason);
    assert_eq!(w.hint.as_deref(), Some("install libcuda"));
}

#[test]
fn one_gpu_one_node_plans_the_spec_matrix() {
    let mut t = machine(vec![node(0, 0..16)]);
    t.gpus.push(gpu(0, Some(0)));
    let t = with_tool(t, "libcuda", true);
    let p = plan(&t, &all_implemented());
    // H2D: 10 sizes × 4 streams local + 2 pageable sizes; no cross-NUMA on one node.
    assert_eq!(p.cases_of(PathId::H2d).count(), 42);
    assert_eq!(p.cases_of(PathId::D2h).count(), 42);
    assert_eq!(p.cases_of(PathId::Duplex).count(), 20);
    assert_eq!(p.cases_of(PathId::D2d).count(), 27);
    let c = p
        .cases
        .iter()
        .find(|c| c.key == "h2d/cuda-copy/gpu0/local/4MiB/s1")
        .unwrap();
    let g = c.spec.gpu_copy().unwrap();
    assert_eq!(g.host_node, Some(0));
    assert_eq!(g.cpu_node, Some(0));
    assert_eq!(g.host_memory, Some(HostMemory::Pinned));
    let d = p
        .cases
        .iter()
        .find(|c| c.key == "d2h/cuda-copy/gpu0/local-pageable/256MiB/s1")
        .unwrap();
    let g = d.spec.gpu_copy().unwrap();
    assert_eq!(
        (g.host_node, g.host_memory),
        (Some(0), Some(HostMemory::Pageable))
    );
    assert!(p
        .waivers_of(PathId::H2d)
        .any(|w| w.scope.as_deref() == Some("gpu0 cross-NUMA")));
    assert!(p
        .cases
        .iter()
        .any(|c| c.key == "duplex/cuda-copy/gpu0/local/256MiB/s1/d2h"));
    // Pinned copies over PCIe of 4 MiB or more are timed again when they spread over 1 %;
    // smaller, pageable and D2D copies once.
    for c in p.cases.iter().filter(|c| {
        matches!(
            c.path,
            PathId::H2d | PathId::D2h | PathId::Duplex | PathId::D2d
        )
    }) {
        let g = c.spec.gpu_copy().unwrap();
        let steady = c.path != PathId::D2d
            && g.host_memory == Some(HostMemory::Pinned)
            && g.size_bytes >= 4 * MIB;
        let want = steady.then_some(STEADY_SPREAD_PCT);
        assert_eq!(c.reps.retry_above_spread_pct, want, "{}", c.key);
        // Pinned and device copies: their calibration is their warm-up; pageable ones, whose
        // first repetition reads low, one more.
        let warmup = u32::from(g.host_memory == Some(HostMemory::Pageable));
        assert_eq!((c.reps.warmup, c.reps.timed), (warmup, 12), "{}", c.key);
        // Each may stop at 5 once steady: within its spread limit where it has one.
        let within = want.unwrap_or(GPU_STEADY_PCT);
        assert_eq!(
            c.reps.steady,
            Some(Steady {
                min_timed: GPU_MIN_TIMED,
                within_pct: within
            }),
            "{}",
            c.key
        );
    }
    // `--fixed-reps`: every case its full count.
    let fixed = plan(
        &t,
        &PlanOptions {
            fixed_reps: true,
            ..all_implemented()
        },
    );
    assert!(fixed.cases.iter().all(|c| c.reps.steady.is_none()));
    assert_eq!(fixed.cases.len(), p.cases.len());
    let steady = |k: &str| {
        let c = p.cases.iter().find(|c| c.key == k).unwrap();
        c.reps.retry_above_spread_pct.is_some()
    };
    assert!(steady("h2d/cuda-copy/gpu0/local/4MiB/s8"));
    assert!(steady("duplex/cuda-copy/gpu0/local/256MiB/s1/h2d"));
    assert!(!steady("d2h/cuda-copy/gpu0/local/2MiB/s1"));
    assert!(!steady("h2d/cuda-copy/gpu0/local-pageable/256MiB/s1"));
    assert!(!steady("d2d/cuda-copy/gpu0/256MiB/s1"));
}

#[test]
fn two_nodes_add_cross_numa_rows_at_one_stream() {
    let mut t = machine(vec![node(0, 0..8), node(1, 8..16)]);
    t.gpus.push(gpu(0, Some(1)));
    let t = with_tool(t, "libcuda", true);
    let p = plan(&t, &all_implemented());
    let c = p
        .cases
        .iter()
        .find(|c| c.key == "h2d/cuda-copy/gpu0/cross-n0/4MiB/s1")
        .unwrap();
    let g = c.spec.gpu_copy().unwrap();
    assert_eq!((g.host_node, g.cpu_node), (Some(0), Some(0)));
    assert!(!p
        .cases
        .iter()
        .any(|c| c.key == "h2d/cuda-copy/gpu0/cross-n0/4MiB/s4"));
    assert!(p
        .cases
        .iter()
        .any(|c| c.key == "h2d/cuda-copy/gpu0/local/4MiB/s8"));
}

#[test]
fn two_gpus_on_two_nodes_are_each_measured_from_their_own_node() {
    let mut t = machine(vec![node(0, 0..8), node(1, 8..16)]);
    t.gpus.push(gpu(0, Some(0)));
    t.gpus.push(gpu(1, Some(1)));
    let t = with_tool(t, "libcuda", true);
    let p = plan(&t, &all_implemented());
    // A case's GPU and its (host buffer, issuing thread) nodes.
    let placed = |k: String| {
        let c = p
            .cases
            .iter()
            .find(|c| c.key == k)
            .unwrap_or_else(|| panic!("no case {k}"));
        let n = c.spec.gpu_copy().unwrap();
        (Some(n.gpu.clone()), (n.host_node, n.cpu_node))
    };
    for (g, own, other) in [(0, 0, 1), (1, 1, 0)] {
        let gpu = format!("gpu{g}");
        let on = |nodes| (Some(gpu.clone()), nodes);
        let (own, other) = (Some(own), Some(other));
        // Local rows: host buffers and the issuing thread on the GPU's own node; cross rows
        // from the other; duplex on its own node, both ways; D2D on its own device.
        let rows = [
            (format!("h2d/cuda-copy/{gpu}/local/4MiB/s1"), (own, own)),
            (format!("d2h/cuda-copy/{gpu}/local/256MiB/s8"), (own, own)),
            (
                format!("h2d/cuda-copy/{gpu}/cross-n{}/4MiB/s1", g ^ 1),
                (other, other),
            ),
            (
                format!("duplex/cuda-copy/{gpu}/local/512KiB/s1/h2d"),
                (own, own),
            ),
            (format!("d2d/cuda-copy/{gpu}/1GiB/s4"), (None, None)),
        ];
        for (key, nodes) in rows {
            assert_eq!(placed(key.clone()), on(nodes), "{key}");
        }
        // The same matrix per GPU.
        let of = |path: PathId| {
            p.cases_of(path)
                .filter(|c| c.spec.gpu() == Some(gpu.as_str()))
                .count()
        };
        assert_eq!(
            (
                of(PathId::H2d),
                of(PathId::D2h),
                of(PathId::Duplex),
                of(PathId::D2d)
            ),
            (52, 52, 20, 27),
            "{gpu}"
        );
    }
    // Every key names one case.
    let mut keys: Vec<&str> = p.cases.iter().map(|c| c.key.as_str()).collect();
    keys.sort_unstable();
    let n = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), n);
}

#[test]
fn unknown_gpu_node_is_unplaced_and_says_so() {
    let mut t = machine(vec![node(0, 0..8), node(1, 8..16)]);
    t.gpus.push(gpu(0, None));
    let t = with_tool(t, "libcuda", true);
    let p = plan(&t, &all_implemented());
    let c = p
        .cases
        .iter()
        .find(|c| c.key == "h2d/cuda-copy/gpu0/unplaced/4MiB/s1")
        .unwrap();
    let g = c.spec.gpu_copy().unwrap();
    assert_eq!((g.host_node, g.cpu_node), (None, None));
    assert!(p
        .waivers_of(PathId::H2d)
        .any(|w| w.reason.contains("not reported by sysfs")));
}

#[test]
fn a_path_no_engine_measures_is_one_waiver_saying_so() {
    let mut t = machine(vec![node(0, 0..16)]);
    t.gpus.push(gpu(0, Some(0)));
    let t = with_tool(t, "libcuda", true);
    let opts = PlanOptions {
        engines: this_builds_engines()
            .into_iter()
            .filter(|e| e.decl.paths == [PathId::HostRam])
            .collect(),
        version: "0.1.0".into(),
        ..PlanOptions::default()
    };
    let p = plan(&t, &opts);
    assert!(p.cases.iter().all(|c| c.path == PathId::HostRam));
    for path in [PathId::H2d, PathId::Gdrcopy] {
        let w: Vec<_> = p.waivers_of(path).collect();
        assert_eq!(w.len(), 1, "{path}: {w:?}");
        assert!(
            w[0].reason.contains("no engine of this build of hwceiling")
                && w[0].reason.ends_with(&format!("measures {path}")),
            "{}",
            w[0].reason
        );
        assert_eq!(w[0].engine, None);
    }
}

#[test]
fn an_engine_that_probed_unusable_is_waived_for_its_paths_with_its_reason() {
    let mut t = machine(vec![node(0, 0..16)]);
    t.gpus.push(gpu(0, Some(0)));
    let t = with_tool(t, "libcuda", true);
    let mut opts = all_implemented();
    let cuda = opts
        .engines
        .iter_mut()
        .find(|e| e.decl.id.as_str() == "cuda-copy")
        .unwrap();
    cuda.available = Err((
        "cuInit failed: CUDA_ERROR_NO_DEVICE".into(),
        Some("check nvidia-smi".into()),
    ));
    let p = plan(&t, &opts);
    for path in [PathId::H2d, PathId::D2h, PathId::Duplex, PathId::D2d] {
        assert_eq!(p.cases_of(path).count(), 0);
        let w: Vec<_> = p.waivers_of(path).filter(|w| w.scope.is_none()).collect();
        assert_eq!(w.len(), 1, "{path}");
        assert_eq!(w[0].reason, "cuInit failed: CUDA_ERROR_NO_DEVICE");
        assert_eq!(w[0].engine, Some(EngineId::new("cuda-copy")));
    }
    assert!(p.cases_of(PathId::HostRam).count() > 0);
}

#[test]
fn an_engine_is_waived_from_what_it_declares_it_needs() {
    let t = machine(vec![node(0, 0..4)]);
    let t = with_tool(t, "libfoo", false);
    let needs = |libraries, root| hwc_model::Needs {
        libraries,
        root,
        ..hwc_model::Needs::default()
    };
    let foo = vec![hwc_model::Library {
        name: "libfoo".into(),
        install_hint: Some("apt-get install libfoo".into()),
    }];
    let cells = [CellKind::Sweep, CellKind::Sustained];
    let opts = PlanOptions {
        engines: vec![
            engine(
                "host-memcpy",
                &[PathId::HostRam],
                &cells,
                Default::default(),
            ),
            engine("needs-foo", &[PathId::HostRam], &cells, needs(foo, false)),
            engine(
                "needs-root",
                &[PathId::HostRam],
                &cells,
                needs(vec![], true),
            ),
        ],
        ..PlanOptions::default()
    };
    let p = plan(&t, &opts);
    let engines: BTreeSet<&str> = p.cases.iter().map(|c| c.engine.as_str()).collect();
    assert_eq!(engines, ["host-memcpy"].into());
    let why = |id: &str| {
        p.waived
            .iter()
            .find(|w| w.engine.as_ref().is_some_and(|e| e.as_str() == id))
            .unwrap_or_else(|| panic!("no waiver of {id}"))
    };
    assert!(why("needs-foo").reason.starts_with("libfoo not found"));
    assert_eq!(
        why("needs-foo").hint.as_deref(),
        Some("apt-get install libfoo")
    );
    assert_eq!(why("needs-root").reason, "engine needs-root needs root");
    // With root, it runs.
    let p = plan(&t, &PlanOptions { root: true, ..opts });
    assert!(p.cases.iter().any(|c| c.engine.as_str() == "needs-root"));
}

#[test]
fn engines_of_one_path_measure_the_same_cells_each_in_a_block_of_its_own() {
    let t = machine(vec![node(0, 0..2)]);
    let cells = [CellKind::Sweep, CellKind::Sustained];
    let opts = PlanOptions {
        engines: vec![
            engine("a", &[PathId::HostRam], &cells, Default::default()),
            engine("b", &[PathId::HostRam], &cells, Default::default()),
        ],
        ..PlanOptions::default()
    };
    let p = plan(&t, &opts);
    let order: Vec<&str> = p.cases.iter().map(|c| c.engine.as_str()).collect();
    let half = order.len() / 2;
    assert!(order[..half].iter().all(|e| *e == "a") && order[half..].iter().all(|e| *e == "b"));
    for (a, b) in p.cases[..half].iter().zip(&p.cases[half..]) {
        assert_eq!((&a.cell, &a.spec), (&b.cell, &b.spec));
        assert_eq!(a.key, format!("host_ram/a/{}", a.cell));
        assert_eq!(b.key, format!("host_ram/b/{}", b.cell));
    }
}

#[test]
fn an_engine_off_by_default_runs_only_when_named_and_a_selection_names_the_engines() {
    let t = machine(vec![node(0, 0..2)]);
    let mut opts = all_implemented();
    let mut off = engine(
        "null",
        &[PathId::HostRam],
        &[CellKind::Sweep, CellKind::Sustained],
        Default::default(),
    );
    off.decl.default_on = false;
    opts.engines.push(off);
    let engines = |o: &PlanOptions| -> BTreeSet<String> {
        plan(&t, o)
            .cases
            .iter()
            .map(|c| c.engine.to_string())
            .collect()
    };
    assert_eq!(
        engines(&opts),
        ["host-memcpy".to_string(), "host-streaming".into()].into()
    );
    opts.selected_engines = Some([EngineId::new("null")].into());
    assert_eq!(engines(&opts), ["null".to_string()].into());
    // A path none of the selected engines measures says so.
    let mut t2 = t.clone();
    t2.gpus.push(gpu(0, Some(0)));
    let t2 = with_tool(t2, "libcuda", true);
    let p = plan(&t2, &opts);
    let w: Vec<_> = p.waivers_of(PathId::H2d).collect();
    assert_eq!(w.len(), 1);
    assert_eq!(
        w[0].reason,
        "no engine selected measures h2d (its engines: cuda-copy)"
    );
}

#[test]
fn path_filter_and_overrides() {
    let t = machine(vec![node(0, 0..16)]);
    let opts = PlanOptions {
        paths: Some([PathId::HostRam].into_iter().collect()),
        host_threads: Some(vec![1, 16, 64]),
        host_sizes: Some(vec![MIB]),
        reps_divisor: Some(10),
        ..all_implemented()
    };
    let p = plan(&t, &opts);
    assert!(p.waived.iter().all(|w| w.path == PathId::HostRam));
    let keys: Vec<&str> = p.cases.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "host_ram/host-memcpy/n0-n0/1MiB/t1",
            "host_ram/host-memcpy/n0-n0/1MiB/t16",
            "host_ram/host-streaming/n0-n0/1MiB/t1",
            "host_ram/host-streaming/n0-n0/1MiB/t16"
        ]
    );
    assert_eq!(
        p.cases[0].reps,
        Reps {
            warmup: 2,
            timed: 20,
            retry_above_spread_pct: None,
            steady: None
        }
    );
    // Fewer repetitions keep a warm-up where the plan asks for one, and add none where it
    // asks for none (pinned GPU copies).
    let quick = PlanOptions {
        reps_divisor: Some(10),
        ..PlanOptions::default()
    };
    assert_eq!(quick.reps(0, 12).warmup, 0);
    assert_eq!(quick.reps(1, 12).warmup, 1);
    assert_eq!(quick.reps(20, 200).warmup, 2);
    // 64 threads on a 16-CPU node: waived with the node's CPU count, never dropped silently.
    let w: Vec<_> = p.waivers_of(PathId::HostRam).collect();
    assert!(
        w.iter()
            .any(|w| w.scope.as_deref() == Some("n0-n0, 64 threads")
                && w.reason.contains("node 0 has 16 CPUs")
                && w.hint.as_deref() == Some("--threads from 1 to 16 for node 0")),
        "{w:?}"
    );
}

#[test]
fn thread_counts_a_node_cannot_run_are_waived_per_pair_with_its_cpu_count() {
    // Node 0 has 2 CPUs, node 1 has 4: 3 threads run from node 1 only.
    let t = machine(vec![node(0, 0..2), node(1, 2..6)]);
    let opts = PlanOptions {
        paths: Some([PathId::HostRam].into_iter().collect()),
        host_threads: Some(vec![1, 3]),
        host_sizes: Some(vec![MIB]),
        ..all_implemented()
    };
    let p = plan(&t, &opts);
    let keys: Vec<&str> = p
        .cases
        .iter()
        .filter(|c| c.engine == EngineId::new("host-memcpy"))
        .map(|c| c.key.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "host_ram/host-memcpy/n0-n0/1MiB/t1",
            "host_ram/host-memcpy/n1-n1/1MiB/t1",
            "host_ram/host-memcpy/n1-n1/1MiB/t3",
            "host_ram/host-memcpy/n0-n1/1MiB/t1"
        ]
    );
    let scopes: Vec<(&str, &str)> = p
        .waivers_of(PathId::HostRam)
        .map(|w| (w.scope.as_deref().unwrap(), w.reason.as_str()))
        .collect();
    assert_eq!(
        scopes,
        [
            (
                "n0-n0, 3 threads",
                "node 0 has 2 CPUs: 3 copy threads need a CPU each (they are pinned one to a CPU)"
            ),
            (
                "cross-NUMA n0-n1, 3 threads",
                "node 0 has 2 CPUs: 3 copy threads need a CPU each (they are pinned one to a CPU)"
            ),
        ]
    );
    // Nothing runnable at all: every pair is waived, none silently empty.
    let opts = PlanOptions {
        host_threads: Some(vec![1000]),
        ..opts
    };
    let p = plan(&machine(vec![node(0, 0..2)]), &opts);
    assert_eq!(p.cases.len(), 0);
    let w: Vec<_> = p.waivers_of(PathId::HostRam).collect();
    assert!(
        w.iter()
            .any(|w| w.scope.as_deref() == Some("n0-n0, 1000 threads")),
        "{w:?}"
    );
    // A count of 0 (refused by the command line) is never planned as a 0-thread case either.
    let opts = PlanOptions {
        host_threads: Some(vec![0]),
        ..opts
    };
    let p = plan(&machine(vec![node(0, 0..2)]), &opts);
    assert_eq!(p.cases.len(), 0);
    assert!(p
        .waivers_of(PathId::HostRam)
        .any(|w| w.reason.contains("0 threads")));
}

#[test]
fn host_sizes_whose_buffers_exceed_half_a_nodes_memory_are_waived_with_the_figures() {
    let mut n0 = node(0, 0..2);
    n0.memory_bytes = Some(16 * GIB);
    let mut n1 = node(1, 2..4);
    n1.memory_bytes = Some(64 * GIB);
    let t = machine(vec![n0, n1]);
    let opts = PlanOptions {
        paths: Some([PathId::HostRam].into_iter().collect()),
        host_threads: Some(vec![1]),
        // 4 GiB: 8 GiB of buffers fits half of node 0's 16 GiB exactly; 5 GiB does not, but
        // does fit node 1's half, and one 5 GiB buffer on each side of a cross pair fits both.
        host_sizes: Some(vec![4 * GIB, 5 * GIB, 1000 * GIB]),
        ..all_implemented()
    };
    let p = plan(&t, &opts);
    let keys: Vec<&str> = p
        .cases
        .iter()
        .filter(|c| c.engine == EngineId::new("host-memcpy"))
        .map(|c| c.key.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "host_ram/host-memcpy/n0-n0/4GiB/t1",
            "host_ram/host-memcpy/n1-n1/4GiB/t1",
            "host_ram/host-memcpy/n1-n1/5GiB/t1",
            "host_ram/host-memcpy/n0-n1/4GiB/t1",
            "host_ram/host-memcpy/n0-n1/5GiB/t1",
        ]
    );
    // The streaming kernel goes with the largest size that runs on the pair.
    assert!(p
        .cases
        .iter()
        .any(|c| c.key == "host_ram/host-streaming/n0-n0/4GiB/t1"));
    let w: Vec<(&str, &str)> = p
        .waivers_of(PathId::HostRam)
        .map(|w| (w.scope.as_deref().unwrap(), w.reason.as_str()))
        .collect();
    assert_eq!(w.len(), 4, "{w:?}");
    assert_eq!(w[0].0, "n0-n0, 5GiB");
    assert_eq!(
        w[0].1,
        "the source and destination buffers of 5GiB would take 10.0 GiB of node 0's 16.0 GiB \
         of memory, more than half (the rest is left to the system and other processes)"
    );
    assert_eq!(w[1].0, "n0-n0, 1000GiB");
    assert_eq!(w[2].0, "n1-n1, 1000GiB");
    assert_eq!(w[3].0, "cross-NUMA n0-n1, 1000GiB");
    assert!(w[3]
        .1
        .starts_with("the source buffer of 1000GiB would take 1000.0 GiB of node 0's"));
    // Unknown memory is not guessed: nothing is waived for it.
    let p = plan(&machine(vec![node(0, 0..2)]), &opts);
    assert_eq!(
        p.waivers_of(PathId::HostRam).count(),
        1,
        "only the cross-NUMA one"
    );
    // One node without its own figure: the machine's memory is the node's.
    let mut t = machine(vec![node(0, 0..2)]);
    t.platform.memory_bytes = Some(24 * GIB);
    let p = plan(&t, &opts);
    let w: Vec<_> = p.waivers_of(PathId::HostRam).collect();
    assert!(
        w.iter()
            .any(|w| w.scope.as_deref() == Some("n0-n0, 1000GiB")
                && w.reason.contains("of node 0's 24.0 GiB")),
        "{w:?}"
    );
}

proptest! {
    #[test]
    fn keys_are_unique_and_the_plan_is_deterministic(
        node_cpus in proptest::collection::vec(1u32..9, 1..4),
        gpu_nodes in proptest::collection::vec(proptest::option::of(0u32..4), 0..3),
    ) {
        let mut next = 0;
        let nodes: Vec<NumaNode> = node_cpus.iter().enumerate().map(|(i, &n)| {
            let r = next..next + n;
            next += n;
            node(i as u32, r)
        }).collect();
        let count = nodes.len() as u32;
        let mut t = machine(nodes);
        for (i, n) in gpu_nodes.iter().enumerate() {
            t.gpus.push(gpu(i as u32, n.filter(|&x| x < count)));
        }
        let t = with_tool(t, "libcuda", true);
        let a = plan(&t, &all_implemented());
        let b = plan(&t, &all_implemented());
        prop_assert_eq!(&a, &b);
        let keys: BTreeSet<&str> = a.cases.iter().map(|c| c.key.as_str()).collect();
        prop_assert_eq!(keys.len(), a.cases.len());
        for path in PathId::ALL {
            prop_assert!(a.cases_of(path).next().is_some() || a.waivers_of(path).next().is_some(),
                "{} neither planned nor waived", path);
        }
    }
}
