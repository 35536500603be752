use super::*;
use hwc_model::topology::{Gpu, LinkTheory, Platform};
use hwc_model::{
    CeilingSource, CopyDirection, EngineId, GpuCopySpec, HostCopySpec, HostMemory, NvmePattern,
    NvmeSpec, NvmeTest, PathId, Placement, Spec, Stats, GIB, MIB,
};
use proptest::prelude::*;

fn stats(median: f64) -> Stats {
    Stats {
        median,
        min: median * 0.99,
        max: median * 1.01,
        spread_pct: 2.0,
        n: 20,
    }
}

/// A result of `key` (`<path>/<engine>/<cell>`), its engine and cell read from the key.
fn result(key: &str, path: PathId, spec: Spec, gbps: f64) -> CaseResult {
    let (engine, cell) = key
        .split_once('/')
        .and_then(|(_, rest)| rest.split_once('/'))
        .expect("a key of three parts");
    CaseResult {
        measurement: Measurement {
            key: key.into(),
            path,
            engine: EngineId::parse(engine).unwrap(),
            cell: cell.into(),
            spec,
            bytes_per_rep: 1 << 20,
            gbps: stats(gbps),
            cold_gbps: Some(gbps / 2.0),
            warmup: 3,
            latency_us: None,
            latency_p50_us: None,
            latency_p99_us: None,
            placement: Some(Placement {
                cpus: Some("0-3".into()),
                verified: true,
                detail: "ok".into(),
            }),
            cache_resident: false,
            contended: false,
            spread_limit_pct: None,
            evidence: Default::default(),
            notes: vec![],
        },
        samples_gbps: vec![gbps; 20],
        warmup_gbps: vec![gbps; 3],
        case_seconds: Some(1.0),
        phase_seconds: None,
        scheduling: None,
    }
}

fn host(src: u32, dst: u32, size: u64, threads: u32, gbps: f64, resident: bool) -> CaseResult {
    let mut r = result(
        &format!(
            "host_ram/host-memcpy/n{src}-n{dst}/{}/t{threads}",
            hwc_model::size_label(size)
        ),
        PathId::HostRam,
        Spec::HostCopy(HostCopySpec {
            size_bytes: size,
            threads,
            cpu_node: src,
            src_node: src,
            dst_node: dst,
        }),
        gbps,
    );
    r.measurement.cache_resident = resident;
    r
}

fn gpu_copy(path: PathId, node: Option<u32>, size: u64, streams: u32, gbps: f64) -> CaseResult {
    let spec = GpuCopySpec {
        gpu: "gpu0".into(),
        size_bytes: size,
        streams,
        host_memory: Some(HostMemory::Pinned),
        host_node: node,
        cpu_node: node,
        // A duplex case reports H2D unless a test says otherwise.
        direction: (path == PathId::Duplex).then_some(CopyDirection::H2d),
    };
    result(
        &format!("{path}/cuda-copy/gpu0/{node:?}/{size}/s{streams}"),
        path,
        Spec::GpuCopy(spec),
        gbps,
    )
}

/// The profile of the one-GPU topology from `results`, with no plan, drives or tools.
fn gpu_profile(results: &[CaseResult]) -> Profile {
    build(
        &topo_with_gpu(),
        &Plan::default(),
        results,
        &[],
        &[],
        &[],
        provenance(),
    )
}

fn h200(node: Option<u32>) -> Gpu {
    Gpu {
        index: 0,
        cuda_index: Some(0),
        pci_bdf: "0000:00:06.0".into(),
        model: Some("NVIDIA H200".into()),
        vendor: "0x10de".into(),
        device: "0x2335".into(),
        pcie_gen: Some(5),
        pcie_width: Some(16),
        pcie_max_gen: Some(5),
        pcie_max_width: Some(16),
        bar1_bytes: Some(256 << 30),
        bar1_gib: Some(256.0),
        bars: vec![],
        numa_node: node,
        root: Some("0000:00".into()),
        driver: Some("nvidia".into()),
        memory_bytes: None,
        l2_cache_bytes: Some(60 << 20),
    }
}

fn topo_with_gpu() -> Topology {
    let mut t = Topology {
        platform: Platform {
            hostname: Some("node7".into()),
            numa_nodes: 2,
            ..Platform::default()
        },
        ..Topology::default()
    };
    t.gpus.push(h200(Some(0)));
    t.topology.links.push(LinkTheory {
        device: "gpu0".into(),
        bdf: "0000:00:06.0".into(),
        gen: 5,
        width: 16,
        max_gen: Some(5),
        max_width: Some(16),
        theoretical_gbps: 63.015,
        max_theoretical_gbps: Some(63.015),
        degraded: false,
        basis: Default::default(),
        detected: None,
        min_mps_bytes: None,
        tlp_write_gbps: None,
        tlp_read_gbps: None,
    });
    t
}

fn provenance() -> Provenance {
    Provenance {
        tool: "hwceiling".into(),
        version: "0.1.0".into(),
        git_revision: "abc1234".into(),
        started_at: "2026-11-29T19:00:00+00:00".into(),
        finished_at: "2026-11-29T19:01:00+00:00".into(),
        date: "2026-11-29".into(),
        command_line: "hwceiling profile".into(),
        ..Provenance::default()
    }
}

/// The profile of `results` and `failures` alone: no topology, no plan, no run-time waivers.
fn of_results(results: &[CaseResult], failures: &[Failure]) -> Profile {
    build(
        &Topology::default(),
        &Plan::default(),
        results,
        &[],
        failures,
        &[],
        provenance(),
    )
}

#[test]
fn host_ram_takes_the_best_thread_count_at_the_largest_uncached_size() {
    let results = vec![
        host(0, 0, 4 * MIB, 1, 30.0, true), // cache figure: never the ceiling
        host(0, 0, 256 * MIB, 1, 10.9, false),
        host(0, 0, 256 * MIB, 2, 17.9, false),
        host(0, 0, 256 * MIB, 4, 34.7, false),
        host(0, 0, 64 * MIB, 4, 36.0, false),
        host(0, 1, 256 * MIB, 4, 21.0, false),
        host(1, 1, 256 * MIB, 4, 33.0, false),
    ];
    let p = of_results(&results, &[]);
    let pair = &p.host_ram.pairs["n0-n0"];
    assert_eq!(
        (pair.size_bytes, pair.best_threads, pair.best_gbps),
        (256 * MIB, 4, 34.7)
    );
    assert_eq!(pair.sweep_gbps.len(), 3);
    assert_eq!(pair.key, "host_ram/host-memcpy/n0-n0/256MiB/t4");
    assert_eq!(p.host_ram.same_numa_gbps, Some(34.7));
    assert_eq!(p.host_ram.cross_numa_gbps, Some(21.0));
    assert_eq!(p.ceilings["host_ram_same_numa_gbps"], 34.7);
    assert_eq!(p.ceilings["host_ram_cross_numa_gbps"], 21.0);
    assert!(!p
        .warnings
        .iter()
        .any(|w| w.message.contains("fits in cache")));
}

#[test]
fn host_ram_measured_only_at_cache_sizes_has_no_sustained_figure_and_says_so() {
    // `--host-sizes 4MiB`, or a run interrupted before its largest size.
    let results = vec![
        host(0, 0, 4 * MIB, 1, 30.0, true),
        host(0, 0, 16 * MIB, 2, 26.4, true),
        host(0, 1, 256 * MIB, 4, 21.0, false),
    ];
    let p = of_results(&results, &[]);
    assert!(!p.host_ram.pairs.contains_key("n0-n0"));
    assert_eq!(p.host_ram.same_numa_gbps, None);
    assert!(!p.ceilings.contains_key("host_ram_same_numa_gbps"));
    assert_eq!(p.ceilings["host_ram_cross_numa_gbps"], 21.0);
    let cached: Vec<&hwc_model::Warning> = p
        .warnings
        .iter()
        .filter(|w| matches!(w.kind, hwc_model::WarningKind::CacheOnly { .. }))
        .collect();
    assert_eq!(cached.len(), 1, "{cached:?}");
    assert_eq!(
        cached[0].kind,
        hwc_model::WarningKind::CacheOnly {
            src_node: 0,
            dst_node: 0
        }
    );
    assert!(cached[0]
        .message
        .starts_with("host RAM n0-n0: every size measured fits in cache"));
}

/// A GPU's H2D fields: 4 MiB one-stream and peak, NUMA-local, then the same cross-NUMA.
fn h2d_figures(g: &hwc_model::profile::GpuProfile) -> [Option<f64>; 4] {
    [
        g.h2d_4m_1stream_numa_local_gbps,
        g.h2d_peak_numa_local_gbps,
        g.h2d_4m_1stream_cross_numa_gbps,
        g.h2d_peak_cross_numa_gbps,
    ]
}

/// A D2D case's result on `gpu`.
fn d2d_copy(gpu: &str, size: u64, streams: u32, gbps: f64) -> CaseResult {
    result(
        &format!("d2d/cuda-copy/{gpu}/{size}/s{streams}"),
        PathId::D2d,
        d2d_spec(gpu, size, streams),
        gbps,
    )
}

fn d2d_spec(gpu: &str, size: u64, streams: u32) -> Spec {
    Spec::GpuCopy(GpuCopySpec {
        gpu: gpu.into(),
        size_bytes: size,
        streams,
        host_memory: None,
        host_node: None,
        cpu_node: None,
        direction: None,
    })
}

/// `c` as reporting direction `dir` of its duplex pair.
fn direction(c: &mut CaseResult, dir: &str) {
    if let Spec::GpuCopy(g) = &mut c.measurement.spec {
        g.direction = Some(if dir == "d2h" {
            CopyDirection::D2h
        } else {
            CopyDirection::H2d
        });
    }
}

#[test]
fn gpu_fields_follow_the_spec_and_only_measured_values_appear() {
    let results = vec![
        gpu_copy(PathId::H2d, Some(0), 4 * MIB, 1, 53.4),
        gpu_copy(PathId::H2d, Some(0), 256 * MIB, 1, 55.5),
        gpu_copy(PathId::H2d, Some(0), 256 * MIB, 4, 55.6),
        gpu_copy(PathId::H2d, Some(1), 4 * MIB, 1, 50.0),
        gpu_copy(PathId::H2d, Some(1), 256 * MIB, 1, 52.5),
        gpu_copy(PathId::D2h, Some(0), 256 * MIB, 1, 55.3),
    ];
    let p = gpu_profile(&results);
    let g = &p.gpus["gpu0"];
    assert_eq!(
        h2d_figures(g),
        [Some(53.4), Some(55.6), Some(50.0), Some(52.5)]
    );
    assert_eq!(g.d2h_peak_numa_local_gbps, Some(55.3));
    // Penalty compares one-stream peaks: 55.5 − 52.5.
    assert!((g.cross_numa_h2d_penalty_gbps.unwrap() - 3.0).abs() < 1e-9);
    assert_eq!(g.d2d_1stream_gbps, None, "no D2D measured: omitted");
    assert_eq!(p.ceilings["warm_gpu0_gbps"], 53.4);
    assert_eq!(p.ceilings["warm_gpu0_peak_gbps"], 55.6);
    assert!(!p.ceilings.contains_key("gpu_d2d_sustained_gbps"));
    let y = to_yaml(&p).unwrap();
    assert!(
        !y.contains("d2d_1stream_gbps"),
        "unmeasured fields are omitted"
    );
}

#[test]
fn duplex_sums_two_local_one_stream_halves_at_the_largest_size_measured_both_ways() {
    let duplex = |node: u32, size: u64, streams: u32, dir: &str, gbps: f64| {
        let mut c = gpu_copy(PathId::Duplex, Some(node), size, streams, gbps);
        c.measurement.key = format!("duplex/cuda-copy/gpu0/n{node}/{size}/s{streams}/{dir}");
        direction(&mut c, dir);
        c
    };
    let results = vec![
        duplex(0, 4 * MIB, 1, "h2d", 50.4),
        duplex(0, 4 * MIB, 1, "d2h", 48.3),
        // The largest local size has only one direction: not a pair.
        duplex(0, 256 * MIB, 1, "h2d", 50.1),
        // Larger, or faster, but not what the sum is of: cross-NUMA, or two streams a way.
        duplex(1, 1024 * MIB, 1, "h2d", 45.0),
        duplex(1, 1024 * MIB, 1, "d2h", 44.0),
        duplex(0, 1024 * MIB, 2, "h2d", 51.0),
        duplex(0, 1024 * MIB, 2, "d2h", 50.0),
    ];
    let p = gpu_profile(&results);
    let g = &p.gpus["gpu0"];
    assert_eq!(g.duplex_h2d_gbps, Some(50.4));
    assert_eq!(g.duplex_d2h_gbps, Some(48.3));
    assert!((g.duplex_total_gbps.unwrap() - 98.7).abs() < 1e-9);
    // With no local one-stream pair at all there is no duplex figure, not a mixed one.
    let p = gpu_profile(&results[3..]);
    assert_eq!(p.gpus["gpu0"].duplex_total_gbps, None);
}

#[test]
fn d2d_uses_the_largest_size_outside_l2() {
    let mk = |size: u64, streams: u32, gbps: f64, resident: bool| {
        let mut r = d2d_copy("gpu0", size, streams, gbps);
        r.measurement.cache_resident = resident;
        r
    };
    let results = vec![
        mk(8 * MIB, 1, 4100.0, true),
        mk(256 * MIB, 1, 2000.0, false),
        mk(1024 * MIB, 1, 2080.0, false),
        mk(1024 * MIB, 4, 2100.0, false),
    ];
    let p = gpu_profile(&results);
    assert_eq!(p.gpus["gpu0"].d2d_1stream_gbps, Some(2080.0));
    assert_eq!(p.gpus["gpu0"].d2d_4stream_gbps, Some(2100.0));
    assert_eq!(p.ceilings["gpu_d2d_sustained_gbps"], 2080.0);
}

#[test]
fn a_copy_faster_than_the_link_is_flagged_as_a_bug() {
    let results = vec![gpu_copy(PathId::H2d, Some(0), 256 * MIB, 1, 70.0)];
    let p = gpu_profile(&results);
    assert!(
        p.warnings
            .iter()
            .any(|w| w.message.contains("measurement bug")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn contention_and_failures_are_warned() {
    let mut r = host(0, 0, 256 * MIB, 1, 10.0, false);
    r.measurement.contended = true;
    let f = Failure {
        engine: None,
        key: "x".into(),
        path: PathId::HostRam,
        error: "boom".into(),
    };
    let p = of_results(&[r], &[f]);
    assert!(p.warnings.iter().any(|w| w
        .message
        .starts_with("1 measurement(s) ran while their CPUs were busy")));
    assert!(!p.warnings.iter().any(|w| w.message.contains("unsteady")));
    assert!(p
        .warnings
        .iter()
        .any(|w| w.message.contains("1 case(s) failed")));
}

#[test]
fn the_contention_warning_names_what_was_busy() {
    let busy = |results: &[CaseResult]| {
        let p = of_results(results, &[]);
        p.warnings
            .into_iter()
            .find(|w| w.message.contains("contended"))
            .unwrap()
    };
    let mut gpu = gpu_copy(PathId::H2d, Some(0), 256 * MIB, 1, 55.0);
    gpu.measurement.contended = true;
    let mut host_case = host(0, 0, 256 * MIB, 1, 10.0, false);
    host_case.measurement.contended = true;
    assert!(busy(std::slice::from_ref(&gpu))
        .message
        .starts_with("1 measurement(s) ran while their GPU was busy"));
    assert!(busy(&[gpu, host_case])
        .message
        .starts_with("2 measurement(s) ran while their CPUs or GPU were busy"));
}

#[test]
fn the_failure_warning_names_the_commonest_reasons_with_their_counts() {
    let f = |key: &str, error: &str| Failure {
        engine: None,
        key: key.into(),
        path: PathId::H2d,
        error: error.into(),
    };
    let mut failures = vec![f("a", "e1"), f("b", "refused: busy"), f("c", "e2")];
    failures.extend((0..3).map(|i| f(&format!("r{i}"), "refused: busy")));
    failures.push(f("d", "e3"));
    let p = of_results(&[], &failures);
    let w = p
        .warnings
        .iter()
        .find(|w| w.message.contains("failed"))
        .unwrap();
    assert_eq!(
        w.message,
        "7 case(s) failed; their figures are absent (4 × refused: busy; 1 × e1; 1 × e2; \
         1 with 1 other error(s); `failures` lists every case)"
    );
}

#[test]
fn figures_that_stayed_over_their_spread_limit_are_warned() {
    // stats() spreads 2 %: over a 1 % limit, within a 3 % one, and no limit is no warning.
    let held = |limit: Option<u32>| {
        let mut r = gpu_copy(PathId::H2d, Some(0), 4 * MIB, 1, 53.0);
        r.measurement.spread_limit_pct = limit;
        r
    };
    let warned = |results: &[CaseResult]| {
        gpu_profile(results)
            .warnings
            .into_iter()
            .filter(|w| w.message.contains("unsteady"))
            .collect::<Vec<_>>()
    };
    assert!(held(Some(1)).measurement.unsteady());
    assert!(!held(Some(3)).measurement.unsteady());
    assert!(!held(None).measurement.unsteady());
    let w = warned(&[held(Some(1)), held(Some(3)), held(None)]);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].message
            .starts_with("1 measurement(s) spread more than"),
        "{}",
        w[0]
    );
    assert!(warned(&[held(Some(3)), held(None)]).is_empty());
}

#[test]
fn yaml_round_trips_and_carries_the_header() {
    let results = vec![
        host(0, 0, 256 * MIB, 2, 17.9, false),
        gpu_copy(PathId::H2d, Some(0), 4 * MIB, 1, 53.4),
    ];
    let plan = Plan {
        cases: vec![],
        waived: vec![Waiver {
            engine: None,
            path: PathId::Gds,
            scope: None,
            covers: None,
            reason: "libcufile not found".into(),
            hint: Some("install nvidia-gds".into()),
        }],
    };
    let p = build(
        &topo_with_gpu(),
        &plan,
        &results,
        &[],
        &[],
        &[],
        provenance(),
    );
    let y = to_yaml(&p).unwrap();
    assert!(y.starts_with(
        "# Auto-generated by hwceiling 0.1.0 (abc1234)\n# Date: 2026-11-29\n# Node: node7\n"
    ));
    assert!(y.contains("schema_version: 2"));
    assert!(y.contains("h2d_4m_1stream_numa_local_gbps: 53.4"));
    let back = from_yaml(&y).unwrap();
    assert_eq!(back, p);
    // Any hostname (escape sequences, BEL, NUL, a newline) is written so that it reads back
    // exactly: escaped in the header comment, quoted in the field.
    let mut odd = p.clone();
    let host = "n\u{1b}]0;x\u{7}\u{0}\u{1b}[2J\n# pwned | x\u{9b}";
    odd.platform.hostname = Some(host.into());
    let y = to_yaml(&odd).unwrap();
    assert!(
        y.contains("# Node: n\\e]0;x\\u{7}\\u{0}\\e[2J\\n# pwned | x\\u{9b}\n"),
        "{y}"
    );
    assert_eq!(from_yaml(&y).unwrap(), odd);
}

#[test]
fn other_schema_versions_and_garbage_are_refused_clearly() {
    let e = from_yaml("schema_version: 99\n").unwrap_err().to_string();
    assert!(e.contains("newer than this hwceiling reads"), "{e}");
    let e = from_yaml("schema_version: 0\n").unwrap_err().to_string();
    assert!(e.contains("older"), "{e}");
    let e = from_yaml("platform: {}\n").unwrap_err().to_string();
    assert!(e.contains("no `schema_version`"), "{e}");
    let e = from_yaml("schema_version: 1\nplatform: [1, 2\n")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("not a valid hwceiling profile"), "{e}");
    let e = from_yaml("schema_version: one\n").unwrap_err().to_string();
    assert!(e.starts_with("not a valid hwceiling profile"), "{e}");
    assert!(!e.contains('\n'), "one line: {e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,200}") {
        let _ = from_yaml(&s);
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash(depth in 1usize..5000) {
        let s = format!("schema_version: 1\nplatform: {}{}", "[".repeat(depth), "]".repeat(depth));
        prop_assert!(from_yaml(&s).is_err());
    }
}

#[test]
fn gds_available_follows_detection_not_a_constant() {
    let tool = |name: &str, present: bool| hwc_model::topology::ToolStatus {
        name: name.into(),
        present,
        evidence: "test".into(),
        install_hint: None,
    };
    let mut t = topo_with_gpu();
    t.tools = vec![tool("libcufile", true), tool("nvidia_fs", true)];
    let p = build(&t, &Plan::default(), &[], &[], &[], &[], provenance());
    assert!(p.gds.available, "{:?}", p.gds);
    // Still nothing measured: no figure and no mode.
    assert_eq!(p.gds.one_drive_gbps, None);
    assert_eq!(p.gds.mode, None);
    t.tools = vec![tool("libcufile", false), tool("nvidia_fs", true)];
    let p = build(&t, &Plan::default(), &[], &[], &[], &[], provenance());
    assert!(!p.gds.available);
    // No GPU: no GDS, whatever the libraries.
    let t = Topology {
        tools: vec![tool("libcufile", true)],
        ..Topology::default()
    };
    let p = build(&t, &Plan::default(), &[], &[], &[], &[], provenance());
    assert!(!p.gds.available);
}

fn nvme_case(path: PathId, drives: &[&str], size: u64, qd: u32, gbps: f64) -> CaseResult {
    let dir = if path == PathId::NvmeRead {
        "nvme_read"
    } else {
        "nvme_write"
    };
    result(
        &format!(
            "{dir}/io-uring/{}drive/{}/qd{qd}",
            drives.len(),
            hwc_model::size_label(size)
        ),
        path,
        Spec::Nvme(NvmeSpec {
            test: NvmeTest::Sweep,
            block_bytes: size,
            queue_depth: qd,
            drives: drives.iter().map(|d| d.to_string()).collect(),
            target: false,
            pattern: NvmePattern::Sequential,
        }),
        gbps,
    )
}

/// Every path that yields a ceiling: H2D local and cross-NUMA, D2H, D2D, duplex, host RAM same-
/// and cross-node, NVMe reads and writes on one and two drives. Some figures are equal on
/// purpose (two H2D peaks, an NVMe read equal to an H2D figure), as real runs can have.
fn every_path() -> Profile {
    let (a, b) = ("0000:10:00.0", "0000:11:00.0");
    let (r, w) = (PathId::NvmeRead, PathId::NvmeWrite);
    let duplex = |dir: &str, gbps: f64| {
        let mut c = gpu_copy(PathId::Duplex, Some(0), 256 * MIB, 1, gbps);
        c.measurement.key = format!("duplex/cuda-copy/gpu0/{dir}");
        direction(&mut c, dir);
        c
    };
    let d2d = |streams: u32, gbps: f64| {
        result(
            &format!("d2d/cuda-copy/gpu0/1GiB/s{streams}"),
            PathId::D2d,
            d2d_spec("gpu0", 1024 * MIB, streams),
            gbps,
        )
    };
    let results = vec![
        gpu_copy(PathId::H2d, Some(0), 4 * MIB, 1, 53.4),
        gpu_copy(PathId::H2d, Some(0), 256 * MIB, 1, 55.6),
        gpu_copy(PathId::H2d, Some(0), 256 * MIB, 4, 55.6),
        gpu_copy(PathId::H2d, Some(1), 4 * MIB, 1, 50.0),
        gpu_copy(PathId::H2d, Some(1), 256 * MIB, 1, 52.6),
        gpu_copy(PathId::D2h, Some(0), 256 * MIB, 1, 55.3),
        d2d(1, 2080.0),
        d2d(4, 2100.0),
        duplex("h2d", 40.0),
        duplex("d2h", 38.0),
        host(0, 0, 256 * MIB, 4, 34.7, false),
        host(0, 1, 256 * MIB, 4, 21.0, false),
        nvme_case(r, &[a], 128 << 10, 32, 3.0),
        nvme_case(r, &[a], MIB, 16, 3.5),
        nvme_case(r, &[a], MIB, 32, 3.51),
        nvme_case(r, &[a, b], MIB, 32, 7.0),
        nvme_case(w, &[a], 128 << 10, 32, 2.0),
        nvme_case(w, &[a], MIB, 32, 2.9),
        nvme_case(w, &[a, b], MIB, 32, 5.6),
    ];
    let mut t = topo_with_gpu();
    for (i, bdf) in [a, b].into_iter().enumerate() {
        t.nvme.push(hwc_model::topology::NvmeDrive {
            name: format!("nvme{i}"),
            bdf: Some(bdf.into()),
            ..Default::default()
        });
    }
    build(&t, &Plan::default(), &results, &[], &[], &[], provenance())
}

#[test]
fn every_ceiling_says_where_it_comes_from() {
    let p = every_path();
    let expected = [
        "dispatcher_cold_1drive_gbps",
        "dispatcher_cold_2drive_gbps",
        "dispatcher_cold_crossover_drives",
        "gpu0_d2d_sustained_gbps",
        "gpu0_d2h_peak_gbps",
        "gpu_d2d_sustained_gbps",
        "host_ram_cross_numa_gbps",
        "host_ram_same_numa_gbps",
        "nvme_optimal_read_chunk_bytes",
        "nvme_optimal_write_chunk_bytes",
        "nvme_raw_1drive_read_gbps",
        "nvme_raw_1drive_write_gbps",
        "nvme_raw_2drive_read_gbps",
        "nvme_raw_2drive_write_gbps",
        "warm_gpu0_cross_numa_penalty_gbps",
        "warm_gpu0_gbps",
        "warm_gpu0_peak_gbps",
    ];
    assert_eq!(
        p.ceilings.keys().collect::<Vec<_>>(),
        expected,
        "the fixture has every path"
    );
    assert_eq!(
        p.ceiling_records.keys().collect::<Vec<_>>(),
        p.ceilings.keys().collect::<Vec<_>>(),
        "one record per ceiling"
    );
    for (key, record) in &p.ceiling_records {
        let value = p.ceilings[key];
        assert_eq!(record.value, value, "{key}");
        match record.source.as_ref().expect("a source") {
            CeilingSource::Measured { measurement } => {
                let m = p
                    .measurement(measurement)
                    .unwrap_or_else(|| panic!("{key}: {measurement} is not a measurement"));
                assert_eq!(m.gbps.median, value, "{key} is {measurement}'s median");
            }
            CeilingSource::Derived { derived, inputs } => {
                assert!(!derived.is_empty() && !derived.contains('\n'), "{key}");
                assert!(!inputs.is_empty(), "{key}: what it was derived from");
                for i in inputs {
                    assert!(p.measurement(i).is_some(), "{key}: {i}");
                }
            }
        }
    }
    let src = |k: &str| p.ceiling_records[k].source.clone().unwrap();
    let h2d = |node: u32, size: u64, s: u32| format!("h2d/cuda-copy/gpu0/Some({node})/{size}/s{s}");
    assert_eq!(
        src("warm_gpu0_gbps"),
        CeilingSource::measured(h2d(0, 4 * MIB, 1))
    );
    assert_eq!(
        src("warm_gpu0_peak_gbps"),
        CeilingSource::measured(h2d(0, 256 * MIB, 1)),
        "of two equal peaks, the first"
    );
    match src("warm_gpu0_cross_numa_penalty_gbps") {
        CeilingSource::Derived { inputs, .. } => {
            assert_eq!(inputs, [h2d(0, 256 * MIB, 1), h2d(1, 256 * MIB, 1)])
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        src("gpu_d2d_sustained_gbps"),
        CeilingSource::measured("d2d/cuda-copy/gpu0/1GiB/s1")
    );
    assert_eq!(
        src("host_ram_cross_numa_gbps"),
        CeilingSource::measured("host_ram/host-memcpy/n0-n1/256MiB/t4")
    );
    assert_eq!(
        src("nvme_raw_1drive_read_gbps"),
        CeilingSource::measured("nvme_read/io-uring/1drive/1MiB/qd32")
    );
    match src("dispatcher_cold_2drive_gbps") {
        CeilingSource::Derived { derived, inputs } => {
            assert!(derived.contains("NVMe bounds it"), "{derived}");
            assert_eq!(
                inputs,
                [
                    "nvme_read/io-uring/2drive/1MiB/qd32".into(),
                    h2d(0, 256 * MIB, 1)
                ]
            );
        }
        other => panic!("{other:?}"),
    }
    match src("nvme_optimal_read_chunk_bytes") {
        CeilingSource::Derived { derived, inputs } => {
            assert!(derived.contains("at QD 32"), "{derived}");
            assert_eq!(inputs.len(), 2, "the QD 32 sweep points: {inputs:?}");
        }
        other => panic!("{other:?}"),
    }
    // Through YAML and back, the sources resolve by key.
    let back = from_yaml(&to_yaml(&p).unwrap()).unwrap();
    assert_eq!(back.ceiling_records, p.ceiling_records);
    for key in p.ceilings.keys() {
        assert_ne!(
            back.ceiling_source(key),
            Some(hwc_model::CeilingOrigin::Unknown),
            "{key}"
        );
    }
}

fn streaming(mut r: CaseResult) -> CaseResult {
    r.measurement.key = r
        .measurement
        .key
        .replace("/host-memcpy/", "/host-streaming/");
    r.measurement.engine = EngineId::new("host-streaming");
    r
}

#[test]
fn host_ram_ceiling_is_the_better_engine_s_and_keeps_both_sweeps() {
    let results = vec![
        host(0, 0, GIB, 1, 9.0, false),
        host(0, 0, GIB, 16, 38.0, false),
        streaming(host(0, 0, GIB, 1, 9.5, false)),
        streaming(host(0, 0, GIB, 16, 64.0, false)),
        // A cache-resident streaming figure would be higher still: never the ceiling.
        streaming(host(0, 0, 4 * MIB, 16, 200.0, true)),
    ];
    let p = of_results(&results, &[]);
    let pair = &p.host_ram.pairs["n0-n0"];
    assert_eq!(pair.key, "host_ram/host-streaming/n0-n0/1GiB/t16");
    assert_eq!(pair.engine, EngineId::new("host-streaming"));
    assert_eq!((pair.best_threads, pair.best_gbps), (16, 64.0));
    // `sweep_gbps` is the best engine's sweep, not a mix of both.
    assert_eq!(
        pair.sweep_gbps,
        [(1, 9.5), (16, 64.0)].into_iter().collect()
    );
    assert_eq!(
        pair.engine_sweeps_gbps[&EngineId::new("host-memcpy")],
        [(1, 9.0), (16, 38.0)].into_iter().collect()
    );
    assert_eq!(pair.engine_sweeps_gbps.len(), 2);
    assert_eq!(p.ceilings["host_ram_same_numa_gbps"], 64.0);
    // Read back, the fields survive.
    let back = crate::from_yaml(&crate::to_yaml(&p).unwrap()).unwrap();
    assert_eq!(back.host_ram, p.host_ram);
}

/// `r` as measured on `gpu` (its key and parameters renamed).
fn on_gpu(mut r: CaseResult, gpu: &str) -> CaseResult {
    r.measurement.key = r.measurement.key.replacen("gpu0", gpu, 1);
    if let Spec::GpuCopy(g) = &mut r.measurement.spec {
        g.gpu = gpu.into();
    }
    r
}

/// The one-GPU topology with a second H200 (gpu1, `0000:00:07.0`) on `node`.
fn topo_with_two_gpus(node: u32) -> Topology {
    let mut t = topo_with_gpu();
    let mut second = h200(Some(node));
    second.index = 1;
    second.cuda_index = Some(1);
    second.pci_bdf = "0000:00:07.0".into();
    t.gpus.push(second);
    t
}

#[test]
fn two_gpus_on_two_nodes_each_get_their_own_local_and_cross_figures_and_ceilings() {
    let t = topo_with_two_gpus(1);
    // gpu0 sits on node 0, gpu1 on node 1: each one's node-0 copies are local to gpu0 and
    // cross-NUMA for gpu1, and the other way round.
    let results = vec![
        gpu_copy(PathId::H2d, Some(0), 4 * MIB, 1, 53.4),
        gpu_copy(PathId::H2d, Some(1), 4 * MIB, 1, 50.0),
        gpu_copy(PathId::H2d, Some(0), 256 * MIB, 1, 55.5),
        gpu_copy(PathId::H2d, Some(1), 256 * MIB, 1, 52.5),
        on_gpu(gpu_copy(PathId::H2d, Some(1), 4 * MIB, 1, 53.1), "gpu1"),
        on_gpu(gpu_copy(PathId::H2d, Some(0), 4 * MIB, 1, 49.0), "gpu1"),
        on_gpu(gpu_copy(PathId::H2d, Some(1), 256 * MIB, 1, 55.2), "gpu1"),
        on_gpu(gpu_copy(PathId::H2d, Some(0), 256 * MIB, 1, 51.0), "gpu1"),
    ];
    let p = build(&t, &Plan::default(), &results, &[], &[], &[], provenance());
    let (g0, g1) = (&p.gpus["gpu0"], &p.gpus["gpu1"]);
    assert_eq!(
        h2d_figures(g0),
        [Some(53.4), Some(55.5), Some(50.0), Some(52.5)]
    );
    assert_eq!(
        h2d_figures(g1),
        [Some(53.1), Some(55.2), Some(49.0), Some(51.0)]
    );
    assert!((g1.cross_numa_h2d_penalty_gbps.unwrap() - 4.2).abs() < 1e-9);
    assert_eq!(p.ceilings["warm_gpu0_gbps"], 53.4);
    assert_eq!(p.ceilings["warm_gpu1_gbps"], 53.1);
    assert_eq!(p.ceilings["warm_gpu1_peak_gbps"], 55.2);
    let y = to_yaml(&p).unwrap();
    assert!(y.contains("gpu1:"), "{y}");
}

#[test]
fn the_all_gpu_d2d_ceiling_is_the_slowest_gpus_and_absent_while_a_gpu_has_no_d2d_figure() {
    let t = topo_with_two_gpus(0);
    let both = [
        d2d_copy("gpu0", 1024 * MIB, 1, 2130.0),
        d2d_copy("gpu1", 1024 * MIB, 1, 2090.0),
    ];
    let p = build(&t, &Plan::default(), &both, &[], &[], &[], provenance());
    assert_eq!(p.ceilings["gpu0_d2d_sustained_gbps"], 2130.0);
    assert_eq!(p.ceilings["gpu1_d2d_sustained_gbps"], 2090.0);
    assert_eq!(p.ceilings["gpu_d2d_sustained_gbps"], 2090.0);
    match p.ceiling_source("gpu_d2d_sustained_gbps") {
        Some(hwc_model::CeilingOrigin::Measured(m)) => {
            assert_eq!(m.key, format!("d2d/cuda-copy/gpu1/{}/s1", 1024 * MIB))
        }
        other => panic!("{other:?}"),
    }
    // gpu1's D2D cases waived or failed: gpu0's figure is not what every GPU reaches.
    let p = build(
        &t,
        &Plan::default(),
        &both[..1],
        &[],
        &[],
        &[],
        provenance(),
    );
    assert_eq!(p.ceilings["gpu0_d2d_sustained_gbps"], 2130.0);
    assert!(!p.ceilings.contains_key("gpu_d2d_sustained_gbps"));
    assert!(!p.ceilings.contains_key("gpu1_d2d_sustained_gbps"));
}

fn gds_case(drives: &[&str], route: hwc_model::GdsRoute, size_mib: u64, gbps: f64) -> CaseResult {
    let spec = Spec::Gds(hwc_model::GdsSpec {
        gpu: "gpu0".into(),
        drives: drives.iter().map(|d| d.to_string()).collect(),
        target: false,
        block_bytes: size_mib << 20,
        queue_depth: 16,
        route,
        write: false,
        host_node: Some(0),
    });
    let key = format!(
        "gds/cufile/gpu0/{}drive/same-root/numa-local/{size_mib}MiB/qd16/{}",
        drives.len(),
        route.as_str()
    );
    result(&key, PathId::Gds, spec, gbps)
}

#[test]
fn a_gds_ceiling_comes_from_a_direct_mode_only_never_from_compat_or_the_bounce() {
    use hwc_model::GdsRoute::{Cufile, PosixBounce};
    let results = [
        gds_case(&["0000:11:00.0"], Cufile, 4, 5.0),
        gds_case(&["0000:11:00.0"], Cufile, 16, 6.5),
        // The bounce baseline is faster here: it is still not a GDS figure.
        gds_case(&["0000:11:00.0"], PosixBounce, 16, 9.0),
        gds_case(&["a", "b", "c", "d"], Cufile, 16, 24.0),
    ];
    let with_mode = |mode: &str| {
        let mut prov = provenance();
        prov.environment.insert(
            "gds.mode".into(),
            hwc_model::Setting::about(mode, "as the engine decided"),
        );
        build(
            &Topology::default(),
            &Plan::default(),
            &results,
            &[],
            &[],
            &[],
            prov,
        )
    };
    let p = with_mode("nvfs");
    assert_eq!(p.gds.mode.as_deref(), Some("nvfs"));
    assert_eq!(p.gds.one_drive_gbps, Some(6.5));
    assert_eq!(p.gds.four_drive_gbps, Some(24.0));
    let source = &p.ceiling_records["gds_1drive_gbps"];
    assert_eq!(p.ceilings["gds_1drive_gbps"], 6.5);
    assert!(
        format!("{source:?}").contains("16MiB/qd16/cufile"),
        "{source:?}"
    );
    assert_eq!(p.ceilings["gds_4drive_gbps"], 24.0);
    for mode in ["compat", "unavailable"] {
        let p = with_mode(mode);
        assert_eq!(p.gds.one_drive_gbps, None, "{mode}");
        assert_eq!(p.gds.four_drive_gbps, None, "{mode}");
        assert!(!p.ceilings.contains_key("gds_1drive_gbps"), "{mode}");
        // The figures stay, as measurements.
        assert_eq!(p.measurements_of(PathId::Gds).count(), 4);
    }
    assert_eq!(with_mode("compat").gds.mode.as_deref(), Some("compat"));
    assert_eq!(with_mode("unavailable").gds.mode, None);
}

fn bar_case(
    device: &hwc_model::BarDevice,
    k: usize,
    cross: bool,
    bar: bool,
    gbps: f64,
) -> CaseResult {
    let memory = if bar {
        hwc_model::DmaTarget::Bar
    } else {
        hwc_model::DmaTarget::HostRam
    };
    let spec = Spec::NvmeBar(hwc_model::NvmeBarSpec {
        device: device.clone(),
        memory,
        drives: (0..k)
            .map(|i| format!("0000:{:02x}:00.0", 0x11 + i))
            .collect(),
        block_bytes: 128 << 10,
        queue_depth: if k == 1 { 16 } else { 32 },
        poller_node: Some(u32::from(cross)),
        cross_numa: cross,
    });
    let key = format!(
        "nvme_bar1/spdk-native/{}/{k}drive/x/pollers-{}/{}",
        device.key(),
        if cross { "cross-numa" } else { "numa-local" },
        memory.as_str()
    );
    result(&key, PathId::NvmeBar1, spec, gbps)
}

#[test]
fn bar1_figures_give_the_specs_fields_and_p2p_ceilings_and_a_pci_bar_gives_none() {
    use hwc_model::BarDevice;
    let gpu = BarDevice::GpuBar1 {
        gpu: "gpu0".into(),
        bdf: "0000:40:00.0".into(),
    };
    let pci = BarDevice::PciBar {
        bdf: "0000:41:00.0".into(),
        resource: 2,
    };
    // The spec's A30 example: 1 drive no overhead, BAR1 flattening from 4 to 6 drives.
    let results = [
        bar_case(&gpu, 1, false, false, 4.3),
        bar_case(&gpu, 1, false, true, 4.3),
        bar_case(&gpu, 4, false, false, 24.0),
        bar_case(&gpu, 4, false, true, 20.0),
        bar_case(&gpu, 6, false, false, 35.0),
        bar_case(&gpu, 6, false, true, 20.5),
        bar_case(&gpu, 4, true, false, 20.0),
        bar_case(&gpu, 4, true, true, 15.0),
        bar_case(&pci, 1, false, false, 3.0),
        bar_case(&pci, 1, false, true, 2.4),
    ];
    let p = of_results(&results, &[]);
    let g = &p.bar1["gpu0"];
    assert_eq!(g.bdf.as_deref(), Some("0000:40:00.0"));
    assert_eq!(g.numa_local["bar1_4drive_gbps"], 20.0);
    assert_eq!(g.numa_local["host_ram_6drive_gbps"], 35.0);
    assert!((g.numa_local["overhead_4drive_pct"] - 100.0 / 6.0).abs() < 1e-9);
    assert_eq!(g.numa_local["overhead_1drive_pct"], 0.0);
    assert_eq!(g.cross_numa["bar1_4drive_gbps"], 15.0);
    assert_eq!(g.cross_numa["penalty_vs_local_pct"], 25.0);
    assert_eq!(g.saturated, Some(true), "20.0 → 20.5 gains 2.5 %");
    assert_eq!(p.ceilings["p2p_cold_1drive_gbps"], 4.3);
    assert_eq!(p.ceilings["p2p_cold_4drive_gpu0_gbps"], 20.0);
    assert_eq!(p.ceilings["p2p_cold_6drive_gbps"], 20.5);
    assert_eq!(p.ceilings["p2p_cold_4drive_gpu0_cross_numa_gbps"], 15.0);
    let r = &p.ceiling_records["p2p_cold_4drive_gpu0_cross_numa_gbps"];
    assert!(format!("{r:?}").contains("pollers-cross-numa/bar"), "{r:?}");
    // The stand-in: its own section, `bar_` keys, and no ceiling at all.
    let s = &p.pci_bar["pci-0000:41:00.0-bar2"];
    assert_eq!(s.numa_local["bar_1drive_gbps"], 2.4);
    assert!((s.numa_local["overhead_1drive_pct"] - 20.0).abs() < 1e-9);
    assert!(!s.numa_local.keys().any(|k| k.starts_with("bar1_")));
    assert_eq!(s.saturated, None);
    let p2p: Vec<&String> = p.ceilings.keys().filter(|k| k.starts_with("p2p")).collect();
    assert_eq!(p2p.len(), 9, "{p2p:?}");
    assert_eq!(p.ceilings["p2p_cold_gpu0_cross_numa_penalty_pct"], 25.0);
    // Saturated from 4 drives: 4 → 6 gained 2.5 %, under 5 % (a drive count, neither way better).
    assert_eq!(p.ceilings["p2p_cold_gpu0_saturated_drives"], 4.0);
    let r = &p.ceiling_records["p2p_cold_gpu0_saturated_drives"];
    assert_eq!(r.meta.unit, hwc_model::Unit::Drives);
    assert_eq!(r.meta.better, hwc_model::Better::Neither);
    let r = &p.ceiling_records["p2p_cold_gpu0_cross_numa_penalty_pct"];
    assert_eq!(r.meta.unit, hwc_model::Unit::Pct);
    assert_eq!(r.meta.better, hwc_model::Better::Lower);
    // It reads back.
    let back = crate::from_yaml(&crate::to_yaml(&p).unwrap()).unwrap();
    assert_eq!(back.bar1, p.bar1);
    assert_eq!(back.pci_bar, p.pci_bar);
}

#[test]
fn a_host_ram_figure_far_under_spdk_perf_warns_that_the_harness_may_add_overhead() {
    let pci = hwc_model::BarDevice::PciBar {
        bdf: "0000:41:00.0".into(),
        resource: 2,
    };
    let perf = |gbps: f64| {
        let spec = Spec::Nvme(hwc_model::NvmeSpec {
            test: hwc_model::NvmeTest::Sweep,
            block_bytes: 128 << 10,
            queue_depth: 16,
            drives: vec!["0000:11:00.0".into()],
            target: false,
            pattern: hwc_model::NvmePattern::Sequential,
        });
        result(
            "nvme_read/spdk-perf/1drive/128KiB/qd16",
            PathId::NvmeRead,
            spec,
            gbps,
        )
    };
    let warned = |perf_gbps: f64| {
        let results = [bar_case(&pci, 1, false, false, 3.0), perf(perf_gbps)];
        build(
            &Topology::default(),
            &Plan::default(),
            &results,
            &[],
            &[],
            &[],
            provenance(),
        )
        .warnings
        .iter()
        .any(|w| matches!(w.kind, hwc_model::WarningKind::HarnessOverhead { .. }))
    };
    assert!(!warned(3.5), "3.0 is 14 % under 3.5");
    assert!(warned(4.0), "3.0 is 25 % under 4.0");
}

#[test]
fn gdrcopy_fields_are_the_best_local_bandwidth_each_way_never_a_cross_numa_or_latency_case() {
    use hwc_model::CopyDirection::{D2h, H2d};
    let case = |direction, size: u64, cross: bool, latency: bool, gbps: f64| {
        let spec = Spec::Gdrcopy(hwc_model::GdrcopySpec {
            gpu: "gpu0".into(),
            direction,
            size_bytes: size,
            cpu_node: Some(u32::from(cross)),
            cross_numa: cross,
            latency,
        });
        let key = format!("gdrcopy/gdrcopy/gpu0/{direction:?}/{size}/{cross}/{latency}");
        result(&key, PathId::Gdrcopy, spec, gbps)
    };
    let results = [
        case(H2d, 64 << 20, false, false, 12.0),
        case(H2d, 16 << 20, false, false, 13.0),
        case(H2d, 16 << 20, true, false, 20.0),
        case(H2d, 8, false, true, 30.0),
        case(D2h, 16 << 20, false, false, 1.5),
    ];
    let p = of_results(&results, &[]);
    assert_eq!(p.gdrcopy.cpu_to_bar1_gbps, Some(13.0));
    assert_eq!(p.gdrcopy.bar1_to_cpu_gbps, Some(1.5));
    assert_eq!(p.ceilings["gdrcopy_cpu_to_bar1_gbps"], 13.0);
    let r = &p.ceiling_records["gdrcopy_bar1_to_cpu_gbps"];
    assert_eq!(r.meta.gpu.as_deref(), Some("gpu0"));
}

#[test]
fn a_copy_above_its_link_fails_and_one_above_the_tlp_limit_is_suspect() {
    let mut t = topo_with_gpu();
    let l = &mut t.topology.links[0];
    l.min_mps_bytes = Some(256);
    l.tlp_write_gbps = Some(57.61);
    l.tlp_read_gbps = Some(58.45);
    let results = [
        gpu_copy(PathId::H2d, Some(0), 256 * MIB, 1, 70.0),
        gpu_copy(PathId::H2d, Some(0), 4 * MIB, 1, 58.6),
        gpu_copy(PathId::D2h, Some(0), 256 * MIB, 1, 57.0),
    ];
    let p = build(&t, &Plan::default(), &results, &[], &[], &[], provenance());
    // Above the link: a failure with the reason, and no figure or ceiling from it.
    let over = &results[0].measurement.key;
    assert!(p.measurement(over).is_none());
    let f = p.failures.iter().find(|f| &f.key == over).unwrap();
    assert!(
        f.error
            .contains("above the link's theoretical 63.02 GB/s: this is a measurement bug"),
        "{}",
        f.error
    );
    assert_eq!(p.gpus["gpu0"].h2d_peak_numa_local_gbps, Some(58.6));
    // Above the TLP-adjusted limit for reads: kept, and flagged suspect.
    let suspect: Vec<_> = p
        .warnings
        .iter()
        .filter(|w| matches!(w.kind, hwc_model::WarningKind::AboveTlpLimit { .. }))
        .collect();
    assert_eq!(suspect.len(), 1, "{:?}", p.warnings);
    assert!(
        suspect[0]
            .message
            .contains("58.60 GB/s, above its link's TLP-adjusted limit of 58.45"),
        "{}",
        suspect[0].message
    );
    // D2H under its write limit: nothing said. Without an MPS read, no TLP verdict at all.
    let mut t = topo_with_gpu();
    t.topology.links[0].tlp_read_gbps = Some(58.45);
    let p = build(
        &t,
        &Plan::default(),
        &results[1..],
        &[],
        &[],
        &[],
        provenance(),
    );
    assert!(!p
        .warnings
        .iter()
        .any(|w| matches!(w.kind, hwc_model::WarningKind::AboveTlpLimit { .. })));
}

#[test]
fn measurements_that_saw_pcie_errors_are_counted_in_a_warning() {
    let mut r = gpu_copy(PathId::H2d, Some(0), 4 * MIB, 1, 53.0);
    r.measurement.evidence.link_errors = Some(vec![hwc_model::AerIncrease {
        bdf: "0000:00:06.0".into(),
        correctable: 3,
        nonfatal: 0,
        fatal: 0,
    }]);
    let p = gpu_profile(&[r, gpu_copy(PathId::D2h, Some(0), 4 * MIB, 1, 53.0)]);
    let w: Vec<_> = p
        .warnings
        .iter()
        .filter(|w| w.kind == hwc_model::WarningKind::LinkErrors { count: 1 })
        .collect();
    assert_eq!(w.len(), 1, "{:?}", p.warnings);
    assert!(w[0]
        .message
        .starts_with("1 measurement(s) ran while a device on their PCIe path reported errors"));
    // It reads back.
    assert_eq!(from_yaml(&to_yaml(&p).unwrap()).unwrap(), p);
}

#[test]
fn each_case_s_gpu_and_host_state_is_warned_of_where_it_went_wrong() {
    use hwc_model::{GpuCaseState, HostCaseState, LinkState, Range, WarningKind};
    let gen5 = LinkState { gen: 5, width: 16 };
    use hwc_model::ClockEvent;
    let state = |replays: u64, load: LinkState, events: &[ClockEvent]| GpuCaseState {
        samples: 4,
        sm_clock_mhz: Some(Range {
            min: 1755,
            max: 1980,
        }),
        link_under_load: Some(load),
        link_max: Some(gen5),
        pcie_replays: Some(replays),
        clock_events: events.to_vec(),
        ..Default::default()
    };
    let mut steady = gpu_copy(PathId::H2d, Some(0), 4 * MIB, 1, 53.0);
    // Sync boost is a setting, not a slowdown.
    steady.measurement.evidence.gpu_state = Some(state(0, gen5, &[ClockEvent::SyncBoost]));
    let mut replayed = gpu_copy(PathId::D2h, Some(0), 4 * MIB, 1, 53.0);
    replayed.measurement.evidence.gpu_state = Some(state(
        2,
        LinkState { gen: 4, width: 16 },
        &[ClockEvent::SwPowerCap],
    ));
    replayed.measurement.evidence.host_state = Some(HostCaseState {
        governors: vec!["performance".into()],
        changed: vec!["governor powersave → performance".into()],
        ..Default::default()
    });
    let p = gpu_profile(&[steady, replayed]);
    let kinds: Vec<&WarningKind> = p.warnings.iter().map(|w| &w.kind).collect();
    assert!(
        kinds.contains(&&WarningKind::LinkErrors { count: 1 }),
        "{kinds:?}"
    );
    assert!(kinds.contains(&&WarningKind::LinkDowntrainedUnderLoad { count: 1 }));
    assert!(kinds.contains(&&WarningKind::GpuClocksSlowed {
        count: 1,
        reasons: vec![ClockEvent::SwPowerCap]
    }));
    assert!(kinds.contains(&&WarningKind::HostSettingsChanged { count: 1 }));
    // The states read back.
    assert_eq!(from_yaml(&to_yaml(&p).unwrap()).unwrap(), p);
}

#[test]
fn bar1_saturates_at_the_first_count_past_which_drives_gain_under_5_pct() {
    use crate::bar::saturated_at;
    assert_eq!(saturated_at(&[(1, 4.3), (4, 20.0), (6, 20.5)]), Some(4));
    assert_eq!(saturated_at(&[(1, 4.3), (4, 4.4), (6, 30.0)]), Some(1));
    assert_eq!(saturated_at(&[(1, 4.3), (4, 17.0), (6, 25.0)]), None);
    assert_eq!(saturated_at(&[(1, 4.3)]), None);
}

fn hash(
    simd: hwc_model::SimdPath,
    variant: hwc_model::HashVariant,
    size: u64,
    t: u32,
    gbps: f64,
) -> CaseResult {
    // Blocks are placed (page-aligned); a working set is not.
    let offset = (size < 256 * MIB).then_some(0);
    hash_at(simd, variant, size, offset, t, gbps)
}

fn hash_at(
    simd: hwc_model::SimdPath,
    variant: hwc_model::HashVariant,
    size: u64,
    offset: Option<u32>,
    t: u32,
    gbps: f64,
) -> CaseResult {
    let mut r = result(
        &format!(
            "xxh3/xxh3/n0/{}/{}/{}/t{t}",
            simd.as_str(),
            variant.as_str(),
            hwc_model::xxh3::block_label(size, offset)
        ),
        PathId::Xxh3,
        Spec::Hash(hwc_model::HashSpec {
            variant,
            simd,
            size_bytes: size,
            threads: t,
            cpu_node: Some(0),
            offset_bytes: offset,
        }),
        gbps,
    );
    r.measurement.cache_resident = size < 256 * MIB;
    r
}

#[test]
fn xxh3_figures_fill_cpu_features_and_read_back_from_yaml() {
    use hwc_model::{HashVariant as V, SimdPath as S, TierBasis};
    let results = vec![
        hash(S::Scalar, V::Xxh3_64, 100 << 10, 1, 8.1),
        hash(S::Avx2, V::Xxh3_64, 100 << 10, 1, 31.0),
        hash(S::Avx2, V::Xxh3_128, 100 << 10, 1, 29.5),
        hash(S::Avx2, V::Xxh3_128, GIB, 2, 20.0),
        // xxhsum's alignment: a figure of its own, never the tier's.
        hash_at(S::Avx2, V::Xxh3_64, 100 << 10, Some(16), 1, 40.0),
    ];
    let mut topo = Topology::default();
    topo.cpu_features.xxh3_tier = "AVX-512".into();
    let p = build(
        &topo,
        &Plan::default(),
        &results,
        &[],
        &[],
        &[],
        provenance(),
    );
    let f = &p.cpu_features;
    assert_eq!(
        (f.xxh3_tier.as_str(), f.xxh3_tier_basis),
        ("AVX2", TierBasis::Measured)
    );
    assert_eq!(f.xxh3_throughput_gbps.len(), 5);
    assert_eq!(
        f.xxh3_throughput_gbps
            .iter()
            .map(|x| x.offset_bytes)
            .collect::<Vec<_>>(),
        [Some(0), Some(0), Some(16), Some(0), None],
        "AVX2 XXH3-64 at 100 KiB page-aligned, then at +16 B"
    );
    assert_eq!(
        f.xxh3_throughput_estimate.as_deref(),
        Some("31.0 GB/s measured (median of 20, spread 2.0 %), 1 thread, AVX2, XXH3-64, page-aligned 100 KiB blocks")
    );
    assert_eq!(f.certus_recommended_hash, "XXH3_128bits (AVX2 path)");
    assert!(
        p.ceilings.keys().all(|k| !k.contains("xxh3")),
        "a CPU figure, no ceiling"
    );
    let y = to_yaml(&p).unwrap();
    assert!(y.contains("xxh3_tier_basis: measured"), "{y}");
    assert!(y.contains("xxh3_throughput_gbps:"));
    assert_eq!(y.matches("offset_bytes: 16").count(), 2, "spec and figure");
    assert_eq!(
        y.matches("offset_bytes: 0").count(),
        2 * 3,
        "spec and figure"
    );
    assert_eq!(from_yaml(&y).unwrap(), p);
}

#[test]
fn a_profile_without_the_xxh3_fields_reads_as_inferred() {
    use hwc_model::TierBasis;
    let p = of_results(&[], &[]);
    let mut y = to_yaml(&p).unwrap();
    y = y.replace("  xxh3_tier_basis: inferred\n", "");
    assert!(!y.contains("xxh3_tier_basis"), "{y}");
    let back = from_yaml(&y).unwrap();
    assert_eq!(back.cpu_features.xxh3_tier_basis, TierBasis::Inferred);
    assert!(back.cpu_features.xxh3_throughput_gbps.is_empty());
    assert_eq!(back.cpu_features.xxh3_throughput_estimate, None);
}

#[test]
fn an_idle_gpu_link_read_downtrained_is_judged_at_its_reading_under_load_else_its_maximum() {
    use hwc_model::topology::LinkBasis;
    use hwc_model::{LinkState, Setting};
    // Detection read the idle GPU's Gen5 x16 link at Gen1 x16 (4 GB/s).
    let idle = || {
        let mut t = topo_with_gpu();
        let l = &t.topology.links[0];
        t.topology.links[0] = LinkTheory::new(
            &l.device,
            &l.bdf,
            LinkState { gen: 1, width: 16 },
            Some(5),
            Some(16),
            Some(256),
            LinkBasis::Detection,
        )
        .unwrap();
        t
    };
    assert!(idle().topology.links[0].degraded);
    let results = [
        gpu_copy(PathId::H2d, Some(0), 256 * MIB, 1, 55.0),
        gpu_copy(PathId::D2h, Some(0), 256 * MIB, 1, 56.0),
    ];
    // The warm-up's reading under load is the basis: no failure, no suspect figure.
    let mut prov = provenance();
    let gen5 = LinkState { gen: 5, width: 16 };
    prov.environment
        .insert("gpu0.pcie_link_load".into(), Setting::link(gen5));
    let p = build(&idle(), &Plan::default(), &results, &[], &[], &[], prov);
    let l = &p.topology.links[0];
    assert_eq!((l.gen, l.width, l.basis), (5, 16, LinkBasis::UnderLoad));
    assert_eq!(l.detected, Some(LinkState { gen: 1, width: 16 }));
    assert!(!l.degraded);
    assert!((l.theoretical_gbps - 63.015).abs() < 1e-3);
    assert!((l.tlp_read_gbps.unwrap() - 58.449).abs() < 1e-3);
    assert!(p.failures.is_empty(), "{:?}", p.failures);
    assert!(
        !p.warnings
            .iter()
            .any(|w| matches!(w.kind, hwc_model::WarningKind::AboveTlpLimit { .. })),
        "{:?}",
        p.warnings
    );
    assert_eq!(
        l.basis_note().as_deref(),
        Some("read under load; Gen1 x16 at detection")
    );
    let degraded = |p: &Profile| {
        p.warnings
            .iter()
            .filter_map(|w| match &w.kind {
                hwc_model::WarningKind::LinkDegraded { gen, width, .. } => Some((*gen, *width)),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    // Read at full speed under load: the idle reading warns of nothing.
    assert_eq!(degraded(&p), []);
    // A slower reading under load is the link the copies ran over, and is kept.
    let mut prov = provenance();
    let gen4 = LinkState { gen: 4, width: 16 };
    prov.environment
        .insert("gpu0.pcie_link_load".into(), Setting::link(gen4));
    let p = build(
        &idle(),
        &Plan::default(),
        &results[..1],
        &[],
        &[],
        &[],
        prov,
    );
    let l = &p.topology.links[0];
    assert_eq!((l.gen, l.degraded), (4, true));
    // No reading under load (no GPU case ran, or no NVML): its maximum, said so.
    let p = build(&idle(), &Plan::default(), &[], &[], &[], &[], provenance());
    let l = &p.topology.links[0];
    assert_eq!((l.gen, l.basis), (5, LinkBasis::Capable));
    assert_eq!(
        l.basis_note().as_deref(),
        Some("its maximum: not read under load; Gen1 x16 at detection")
    );
    // Unconfirmed under load, the reading at detection is still warned of.
    assert_eq!(degraded(&p), [(1, 16)]);
    // A link read at its maximum stays as detected, and says nothing more.
    let p = build(
        &topo_with_gpu(),
        &Plan::default(),
        &[],
        &[],
        &[],
        &[],
        provenance(),
    );
    let l = &p.topology.links[0];
    assert_eq!(
        (l.basis, l.detected, l.basis_note()),
        (LinkBasis::Detection, None, None)
    );
    // The profile reads back with both fields.
    let back = crate::from_yaml(&crate::to_yaml(&p).unwrap()).unwrap();
    assert_eq!(back.topology.links, p.topology.links);
}
