//! Snapshot of a full report from a fixed profile, and the rules a report must keep.

use super::*;
use hwc_model::topology::{Cache, CpuFeatures, Gpu, LinkTheory, NumaNode, Platform};
use hwc_model::{
    CaseResult, CellKind, CopyDirection, EngineDecl, GpuCopySpec, HostCopySpec, HostMemory,
    Measurement, Needs, NvmePattern, NvmeSpec, NvmeTest, Placement, Plan, Provenance, Topology,
    MIB,
};

/// A result of `key` (`<path>/<engine>/<cell>`), its engine and cell read from the key.
fn m(key: &str, path: PathId, spec: Spec, median: f64, resident: bool) -> CaseResult {
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
            gbps: Stats {
                median,
                min: median * 0.995,
                max: median * 1.005,
                spread_pct: 1.0,
                n: 20,
            },
            cold_gbps: Some(median * 0.5),
            warmup: 3,
            latency_us: None,
            latency_p50_us: None,
            latency_p99_us: None,
            placement: Some(Placement {
                cpus: Some("0".into()),
                verified: true,
                detail: "src on node 0 (256 pages checked); dst on node 0 (256 pages checked)"
                    .into(),
            }),
            cache_resident: resident,
            contended: false,
            spread_limit_pct: None,
            evidence: Default::default(),
            notes: vec![],
        },
        samples_gbps: vec![median; 20],
        warmup_gbps: vec![median; 3],
        case_seconds: Some(1.0),
        phase_seconds: None,
        scheduling: None,
    }
}

fn host(size: u64, t: u32, v: f64, resident: bool) -> CaseResult {
    m(
        &format!("host_ram/host-memcpy/n0-n0/{}/t{t}", size_label(size)),
        PathId::HostRam,
        Spec::HostCopy(HostCopySpec {
            size_bytes: size,
            threads: t,
            cpu_node: 0,
            src_node: 0,
            dst_node: 0,
        }),
        v,
        resident,
    )
}

/// The same case by the streaming engine.
fn streaming(mut r: CaseResult) -> CaseResult {
    let m = &mut r.measurement;
    m.key = m.key.replace("/host-memcpy/", "/host-streaming/");
    m.engine = EngineId::new("host-streaming");
    r
}

/// The engines of the fixture's run, as their crates declare them.
fn engines() -> Vec<EngineDecl> {
    let decl = |id: &'static str, title: &str, paths: Vec<PathId>, cells| EngineDecl {
        id: EngineId::new(id),
        title: title.into(),
        paths,
        cells,
        needs: Needs::default(),
        hardware: true,
        default_on: true,
    };
    use CellKind::*;
    vec![
        decl(
            "host-memcpy",
            "C library memcpy on pinned threads",
            vec![PathId::HostRam],
            vec![Sweep, Sustained],
        ),
        decl(
            "host-streaming",
            "streaming copy (AVX2 loads, non-temporal stores) on pinned threads",
            vec![PathId::HostRam],
            vec![Sustained],
        ),
        decl(
            "cuda-copy",
            "CUDA copy engine: cuMemcpyAsync behind a device-side latch, timed by events",
            vec![PathId::H2d, PathId::D2h, PathId::Duplex, PathId::D2d],
            vec![Sweep],
        ),
    ]
}

fn copy(path: PathId, size: u64, s: u32, v: f64) -> CaseResult {
    let spec = GpuCopySpec {
        gpu: "gpu0".into(),
        size_bytes: size,
        streams: s,
        host_memory: Some(HostMemory::Pinned),
        host_node: Some(0),
        cpu_node: Some(0),
        direction: (path == PathId::Duplex).then_some(CopyDirection::H2d),
    };
    let dir = path.as_str();
    m(
        &format!("{dir}/cuda-copy/gpu0/local/{}/s{s}", size_label(size)),
        path,
        Spec::GpuCopy(spec),
        v,
        false,
    )
}

/// The GPU copy spec of `r`, to edit.
fn gpu_spec(r: &mut CaseResult) -> &mut GpuCopySpec {
    match &mut r.measurement.spec {
        Spec::GpuCopy(g) => g,
        _ => panic!("not a GPU copy"),
    }
}

fn profile(with_gpu: bool) -> Profile {
    profile_with(with_gpu, |_| {})
}

/// The fixture profile, built from its results after `edit` has changed them.
fn profile_with(with_gpu: bool, edit: impl FnOnce(&mut Vec<CaseResult>)) -> Profile {
    let mut topo = Topology {
        platform: Platform {
            hostname: Some("h200-node".into()),
            cpu: Some("Example CPU @ 2.0GHz".into()),
            cpu_vendor: Some("GenuineIntel".into()),
            sockets: Some(1),
            cores: Some(2),
            threads: 2,
            caches: vec![Cache {
                level: 3,
                kind: "Unified".into(),
                size_bytes: 32 * MIB,
                shared_by_cpus: Some(2),
                instances: Some(1),
            }],
            numa_nodes: 1,
            numa: vec![NumaNode {
                id: 0,
                cpus: vec![0, 1],
                memory_only: false,
                memory_bytes: Some(24 << 30),
                distances: vec![10],
            }],
            memory_bytes: Some(24 << 30),
            kernel: Some("6.1.0".into()),
            iommu_present: Some(true),
            iommu_options: vec!["intel_iommu=on".into(), "iommu=pt".into()],
            os: Some("Debian GNU/Linux 12 (bookworm)".into()),
            cpus: vec![],
        },
        cpu_features: CpuFeatures {
            vendor: Some("GenuineIntel".into()),
            zen_label: "N/A (non-AMD)".into(),
            has_avx2: true,
            has_sse4_2: true,
            xxh3_tier: "AVX2".into(),
            certus_recommended_hash: "XXH3_128bits (AVX2 path)".into(),
            ..CpuFeatures::default()
        },
        ..Topology::default()
    };
    let mut results = vec![
        host(4 * MIB, 1, 14.2, true),
        host(4 * MIB, 2, 25.0, true),
        host(256 * MIB, 1, 10.9, false),
        host(256 * MIB, 2, 17.94, false),
        streaming(host(256 * MIB, 1, 12.5, false)),
        streaming(host(256 * MIB, 2, 24.1, false)),
    ];
    let mut plan = Plan::default();
    for (path, reason) in [
        (PathId::NvmeRead, "no NVMe drives were detected"),
        (PathId::NvmeWrite, "no NVMe drives were detected"),
        (PathId::Gdrcopy, "libgdrapi not found"),
        (PathId::Gds, "no NVMe drives were detected"),
        (PathId::NvmeBar1, "no NVMe drives were detected"),
    ] {
        plan.waived.push(Waiver {
            path,
            engine: None,
            scope: None,
            covers: None,
            reason: reason.into(),
            hint: None,
        });
    }
    plan.waived.push(Waiver {
        path: PathId::HostRam,
        engine: None,
        scope: Some("cross-NUMA".into()),
        covers: Some(hwc_model::Covers::CrossNuma),
        reason: "one NUMA node with CPUs: there is no cross-NUMA path".into(),
        hint: None,
    });
    if with_gpu {
        topo.gpus.push(Gpu {
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
            numa_node: Some(0),
            root: Some("0000:00".into()),
            driver: Some("nvidia".into()),
            memory_bytes: None,
            l2_cache_bytes: Some(60 * MIB),
        });
        topo.topology.links.push(LinkTheory {
            device: "gpu0".into(),
            bdf: "0000:00:06.0".into(),
            gen: 5,
            width: 16,
            max_gen: Some(5),
            max_width: Some(16),
            theoretical_gbps: 63.015_384_615_384_62,
            max_theoretical_gbps: Some(63.015_384_615_384_62),
            degraded: false,
            basis: Default::default(),
            detected: None,
            min_mps_bytes: Some(256),
            tlp_write_gbps: Some(57.614_066_153_846_51),
            tlp_read_gbps: Some(58.449_168_338_907_47),
        });
        // The H200 test machine's GPU, as its config space reads (topology's fixture).
        let gen5 = hwc_model::LinkState { gen: 5, width: 16 };
        topo.topology
            .pcie_paths
            .push(hwc_model::topology::PciePath {
                device: "gpu0".into(),
                hops: vec![hwc_model::topology::PcieHop {
                    bdf: "0000:00:06.0".into(),
                    config: hwc_model::pcie::PcieConfig {
                        readable_bytes: 4096,
                        port: Some(hwc_model::pcie::PortType::Endpoint),
                        mps_bytes: Some(256),
                        mps_capable_bytes: Some(256),
                        mrrs_bytes: Some(4096),
                        relaxed_ordering: Some(true),
                        extended_tags: Some(true),
                        tag10_requester: Some(false),
                        link_capable: Some(gen5),
                        link_current: Some(gen5),
                        acs: None,
                        aer: false,
                        unreadable: None,
                    },
                    iommu_domain: None,
                }],
            });
        results.extend([
            copy(PathId::H2d, 4 * MIB, 1, 53.4),
            copy(PathId::H2d, 256 * MIB, 1, 55.49),
            copy(PathId::H2d, 256 * MIB, 4, 55.51),
            copy(PathId::D2h, 256 * MIB, 1, 55.35),
        ]);
    } else {
        for path in [PathId::H2d, PathId::D2h, PathId::Duplex, PathId::D2d] {
            plan.waived.push(Waiver {
                path,
                engine: None,
                scope: None,
                covers: None,
                reason: "no NVIDIA GPU was detected".into(),
                hint: None,
            });
        }
    }
    let prov = Provenance {
        tool: "hwceiling".into(),
        version: "0.1.0".into(),
        git_revision: "abc1234".into(),
        started_at: "2026-11-29T19:00:00+00:00".into(),
        finished_at: "2026-11-29T19:00:12+00:00".into(),
        date: "2026-11-29".into(),
        command_line: "hwceiling profile".into(),
        ..Provenance::default()
    };
    edit(&mut results);
    hwc_profile::build(&topo, &plan, &results, &[], &[], &engines(), prov)
}

#[test]
fn cpu_only_report_snapshot() {
    insta::assert_snapshot!("cpu_only", render(&profile(false)));
}

#[test]
fn one_gpu_report_snapshot() {
    insta::assert_snapshot!("one_gpu", render(&profile(true)));
}

/// The one-GPU fixture's report in bytes when this budget was set, plus 10 %: a report that
/// grows past it (a footnote turned paragraph, a per-case line where a flag does) fails here, so
/// growth is a decision. Raise it deliberately, with what the new bytes carry.
const ONE_GPU_REPORT_BUDGET_BYTES: usize = 9_664 * 11 / 10;

#[test]
fn the_one_gpu_report_stays_within_its_byte_budget() {
    let md = render(&profile(true));
    assert!(
        md.len() <= ONE_GPU_REPORT_BUDGET_BYTES,
        "the one-GPU fixture's report is {} bytes, over its budget of {ONE_GPU_REPORT_BUDGET_BYTES}",
        md.len()
    );
    // Every measurement is still in Appendix A, with its median, spread and N.
    let p = profile(true);
    for m in &p.measurements {
        let (_, cells) = appendix_row(&md, &m.key);
        assert_eq!(
            cells["Median GB/s"],
            crate::gbps(m.gbps.median),
            "{cells:?}"
        );
        assert_eq!(cells["Min"], crate::gbps(m.gbps.min), "{cells:?}");
        assert_eq!(cells["Max"], crate::gbps(m.gbps.max), "{cells:?}");
        assert_eq!(cells["Spread %"], fixed(m.gbps.spread_pct, 1), "{cells:?}");
        assert_eq!(cells["N"], m.gbps.n.to_string(), "{cells:?}");
    }
}

#[test]
fn the_answer_comes_first_then_every_spec_section_in_order() {
    let r = render(&profile(false));
    let sections = [
        "## 7. Summary",
        "### Sub-table 1",
        "### Sub-table 2",
        "### Sub-table 3",
        "### Sub-table 4",
        "### Crossover comparison",
        "## 8. Observations and recommendations",
        "## 1. Platform",
        "### Topology",
        "## 2. CPU features",
        "## 3. NVMe device inspection",
        "## 4. PCIe theoretical bandwidth",
        "## 5. Data paths",
        "### Path 1",
        "### Path 2",
        "### Path 3",
        "### Path 4",
        "### Path 5",
        "### Path 6",
        "### Path 7",
        "### Path 8",
        "## 6. Topology routing matrix",
        "## Appendix A",
    ];
    let mut at = 0;
    for s in sections {
        let i = r[at..]
            .find(s)
            .unwrap_or_else(|| panic!("missing or out of order: {s}"));
        at += i + s.len();
    }
}

/// The section of `r` that starts at `start` and ends before `end`.
fn between<'a>(r: &'a str, start: &str, end: &str) -> &'a str {
    let a = r.find(start).unwrap_or_else(|| panic!("no {start}"));
    let b = a + r[a..]
        .find(end)
        .unwrap_or_else(|| panic!("no {end} after {start}"));
    &r[a..b]
}

#[test]
fn each_chart_is_linked_once_from_the_section_it_illustrates() {
    let p = profile(true);
    let link = |path: Option<PathId>, href: &str| ChartLink {
        path,
        name: href
            .rsplit('/')
            .next()
            .unwrap()
            .trim_end_matches(".svg")
            .into(),
        href: href.into(),
    };
    let charts = [
        link(None, "charts-x/topology.svg"),
        link(Some(PathId::H2d), "charts-x/h2d-gpu0.svg"),
        link(Some(PathId::H2d), "charts-x/h2d-gpu0-pageable.svg"),
        link(Some(PathId::Duplex), "charts-x/duplex-gpu0.svg"),
        link(Some(PathId::HostRam), "charts-x/host-ram.svg"),
        // Not a plain relative path: left out.
        link(Some(PathId::D2d), "/etc/passwd"),
        link(Some(PathId::D2d), "../d2d.svg"),
        link(Some(PathId::D2d), "charts-x/d2d gpu0.svg"),
        link(Some(PathId::D2d), "charts-x/d2d](x"),
        // A name is escaped for markdown: it cannot break the line.
        ChartLink {
            path: Some(PathId::D2d),
            name: "d2d *gpu0* | x".into(),
            href: "charts-x/d2d.svg".into(),
        },
    ];
    let r = render_with_charts(&p, &charts);
    let lines: Vec<&str> = r.lines().filter(|l| l.starts_with("Charts: ")).collect();
    assert_eq!(lines.len(), 5, "{lines:#?}");
    assert!(
        between(&r, "### Path 4", "### Path 5")
            .contains("Charts: [d2d \\*gpu0\\* \\| x](charts-x/d2d.svg)\n"),
        "{r}"
    );
    let platform = between(&r, "## 1. Platform", "## 2. CPU features");
    assert!(platform.contains("Charts: [topology](charts-x/topology.svg)\n"));
    let path3 = between(&r, "### Path 3", "### Path 4");
    // A section's charts on one line, named by their files, under its heading.
    let second = path3.split("\n\n").nth(1).unwrap();
    assert_eq!(
        second,
        "Charts: [h2d-gpu0](charts-x/h2d-gpu0.svg) · \
         [h2d-gpu0-pageable](charts-x/h2d-gpu0-pageable.svg)"
    );
    assert!(path3.contains("Charts: [duplex-gpu0](charts-x/duplex-gpu0.svg)\n"));
    let path7 = between(&r, "### Path 7", "### Path 8");
    assert!(path7.contains("Charts: [host-ram](charts-x/host-ram.svg)\n"));
    // Without charts, the report is what it was; the links add only their lines.
    let plain = render(&p);
    let without: String = r
        .split_inclusive('\n')
        .filter(|l| !l.starts_with("Charts: "))
        .collect();
    let squeeze = |s: &str| {
        let mut s = s.to_string();
        while s.contains("\n\n\n") {
            s = s.replace("\n\n\n", "\n\n");
        }
        s
    };
    assert!(
        squeeze(&without) == squeeze(&plain),
        "the links changed more than their lines"
    );
}

#[test]
fn waived_paths_show_a_reason_and_no_number() {
    let r = render(&profile(false));
    let path1 = &r[r.find("### Path 1").unwrap()..r.find("### Path 2").unwrap()];
    assert!(path1.contains("**Waived** — no NVMe drives were detected"));
    assert!(
        !path1.chars().any(|c| c.is_ascii_digit() && c != '1'),
        "{path1}"
    );
    let gds_row = r
        .lines()
        .find(|l| l.starts_with("| GDS NVMe → GPU"))
        .unwrap();
    assert!(
        gds_row.contains("| — |") && gds_row.contains("waived:"),
        "{gds_row}"
    );
}

#[test]
fn cache_rows_are_labelled_and_the_sustained_figure_is_not_a_cache_figure() {
    let r = render(&profile(false));
    assert!(r.contains("25.00 ±1.0 % *cache*"));
    // The cache row's 25.00 is higher than every sustained figure, and is not the ceiling.
    assert!(r.contains("best **24.10 GB/s at 2 thread(s)**, host-streaming"));
    let row = r
        .lines()
        .find(|l| l.starts_with("| Host RAM same-NUMA"))
        .unwrap();
    assert!(row.contains("24.10 (±1.0 %, N=20)"), "{row}");
}

#[test]
fn the_duplex_observation_claims_interference_only_when_the_figures_show_it() {
    let obs = |h2d: f64, d2h: f64| {
        let mut p = profile(true);
        let g = p.gpus.get_mut("gpu0").unwrap();
        g.h2d_peak_numa_local_gbps = Some(50.0);
        g.d2h_peak_numa_local_gbps = Some(50.0);
        g.duplex_h2d_gbps = Some(h2d);
        g.duplex_d2h_gbps = Some(d2h);
        g.duplex_total_gbps = Some(h2d + d2h);
        let r = render(&p);
        let s = &r[r.find("## 8.").unwrap()..r.find("## 1. Platform").unwrap()];
        s.lines()
            .find(|l| l.contains("duplex"))
            .unwrap_or_else(|| panic!("{s}"))
            .to_string()
    };
    // Both directions together move as much as the one-way peaks added: no interference.
    let line = obs(50.0, 50.0);
    assert!(!line.contains("interfere"), "{line}");
    assert!(line.contains("sum of"), "{line}");
    let line = obs(30.0, 30.0);
    assert!(line.contains("interfere"), "{line}");
    assert!(line.contains("sum of"), "{line}");
}

#[test]
fn the_duplex_observation_names_each_summed_median_with_its_spread_and_count() {
    // Two duplex sizes: the sum is taken at the largest, from its two measurements.
    let p = profile_with(true, |r| {
        r.extend([
            placed(PathId::Duplex, 4 * MIB, Some("h2d"), 50.5, false),
            placed(PathId::Duplex, 4 * MIB, Some("d2h"), 48.25, false),
            placed(PathId::Duplex, 256 * MIB, Some("h2d"), 43.36, false),
            placed(PathId::Duplex, 256 * MIB, Some("d2h"), 49.71, false),
        ]);
        let d2h = r
            .iter_mut()
            .find(|c| c.measurement.key == "duplex/cuda-copy/gpu0/local/256MiB/s1/d2h")
            .unwrap();
        d2h.measurement.gbps.spread_pct = 3.9;
        d2h.measurement.gbps.n = 12;
    });
    let duplex_line = |p: &Profile| line_starting(&render(p), "- gpu0 duplex moves").to_string();
    assert_eq!(
        duplex_line(&p),
        "- gpu0 duplex moves 93.07 GB/s in both directions together (sum of the two \
         directions' medians: H2D 43.36 (±1.0 %, N=20) at 256MiB × 1 stream, D2H 49.71 (±3.9 %, \
         N=12) at 256MiB × 1 stream), against 110.86 GB/s for the one-way peaks added (sum of \
         their medians: H2D 55.51 (±1.0 %, N=20) at 256MiB × 4 streams, D2H 55.35 (±1.0 %, \
         N=20) at 256MiB × 1 stream): H2D and D2H interfere on the link."
    );
    // A hand-set direction no measurement has is summed without inventing spreads for it.
    let mut q = p.clone();
    q.gpus.get_mut("gpu0").unwrap().duplex_h2d_gbps = Some(40.0);
    q.gpus.get_mut("gpu0").unwrap().duplex_total_gbps = Some(89.71);
    let line = duplex_line(&q);
    assert!(
        line.starts_with(
            "- gpu0 duplex moves 89.71 GB/s in both directions together (sum of the two \
             directions' medians), against 110.86 GB/s for the one-way peaks added (sum of \
             their medians: H2D 55.51"
        ),
        "{line}"
    );
    // Nor for a hand-set total that is not the two directions' sum.
    let mut q = p.clone();
    q.gpus.get_mut("gpu0").unwrap().duplex_total_gbps = Some(95.0);
    let line = duplex_line(&q);
    assert!(
        line.starts_with(
            "- gpu0 duplex moves 95.00 GB/s in both directions together (sum of the two \
             directions' medians), against"
        ),
        "{line}"
    );
    // Nor for a hand-set one-way peak.
    let mut q = p.clone();
    q.gpus.get_mut("gpu0").unwrap().d2h_peak_numa_local_gbps = Some(56.0);
    let line = duplex_line(&q);
    assert!(
        line.contains("against 111.51 GB/s for the one-way peaks added (sum of their medians):"),
        "{line}"
    );
}

#[test]
fn host_ram_best_figures_outside_the_tables_carry_their_spread_and_count() {
    let r = render(&profile(false));
    let sustained = r.lines().find(|l| l.starts_with("Sustained (")).unwrap();
    assert!(sustained.contains("±1.0 %, N=20"), "{sustained}");
    let obs = r
        .lines()
        .find(|l| l.starts_with("- Host RAM n0-n0"))
        .unwrap();
    // The best, the one-thread figure and memcpy's best are medians of their own measurements.
    assert_eq!(obs.matches("N=20").count(), 3, "{obs}");
    assert!(obs.contains("with `host-streaming`"), "{obs}");
    assert!(obs.contains("`host-memcpy` reaches 17.94 GB/s"), "{obs}");
    assert!(sustained.contains("streaming"), "{sustained}");
}

#[test]
fn each_host_engine_gets_its_own_table_in_the_run_s_order() {
    let full = render(&profile(false));
    // The header names the engines; their tables come in the sections.
    let r = &full[full.find("## 1. Platform").unwrap()..];
    let memcpy = r.find("`host-memcpy` — C library memcpy").unwrap();
    let streaming = r
        .find("`host-streaming` — streaming copy (AVX2 loads, non-temporal stores)")
        .unwrap();
    assert!(memcpy < streaming);
    // The streaming table holds only its own size; the memcpy one every size.
    let table = &r[streaming..r[streaming..].find("Sustained").unwrap() + streaming];
    assert!(
        table.contains("256MiB") && !table.contains("4MiB"),
        "{table}"
    );
}

#[test]
fn the_h2d_peak_observation_carries_its_spread_and_count() {
    let r = render(&profile(true));
    let obs = r
        .lines()
        .find(|l| l.starts_with("- gpu0 H2D peaks"))
        .unwrap();
    assert!(obs.contains("N=20"), "{obs}");
    assert!(obs.contains("computed from the link"), "{obs}");
}

#[test]
fn a_gpu_link_read_under_load_says_so_where_its_share_is_given() {
    let mut p = profile(true);
    let detected = hwc_model::LinkState { gen: 1, width: 16 };
    let l = &mut p.topology.links[0];
    *l = l.rebased(detected, Default::default());
    *l = l.rebased(
        hwc_model::LinkState { gen: 5, width: 16 },
        hwc_model::topology::LinkBasis::UnderLoad,
    );
    let r = render(&p);
    let obs = line_starting(&r, "- gpu0 H2D peaks");
    assert!(
        obs.contains(
            "Gen5 x16 link's theoretical 63.02 GB/s (read under load; Gen1 x16 at detection; \
             computed from the link"
        ),
        "{obs}"
    );
    let row = line_starting(&r, "| gpu0 | 0000:00:06.0 |");
    assert!(
        row.contains("| read under load; Gen1 x16 at detection |"),
        "{row}"
    );
}

/// `r` with its spread and repetition count set.
fn with_stats(mut r: CaseResult, spread_pct: f64, n: u32) -> CaseResult {
    r.measurement.gbps.spread_pct = spread_pct;
    r.measurement.gbps.n = n;
    r
}

fn line_starting<'a>(r: &'a str, start: &str) -> &'a str {
    r.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starts with {start:?}:\n{r}"))
}

/// The Appendix A row of the measurement keyed `key`: its group's heading, and each cell by
/// its column's name (a column the whole group shares is in the heading instead).
fn appendix_row(md: &str, key: &str) -> (String, BTreeMap<String, String>) {
    let a = &md[md.find("## Appendix A").expect("Appendix A")..];
    let a = &a[..a.find("## Appendix B").unwrap_or(a.len())];
    // The group: path, engine and the cell's first part; the row: the rest of the cell.
    let mut parts = key.splitn(4, '/');
    let (path, engine, first, cell) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let group = format!("`{path}/{engine}/{first}/`");
    let at = a
        .lines()
        .position(|l| l.starts_with(&group))
        .unwrap_or_else(|| panic!("no group {group}:\n{a}"));
    let lines: Vec<&str> = a.lines().skip(at).collect();
    let head: Vec<&str> = lines[2].split('|').collect();
    let row = lines
        .iter()
        .skip(4)
        .take_while(|l| l.starts_with('|'))
        .find(|l| l.starts_with(&format!("|{cell}|")))
        .unwrap_or_else(|| panic!("no row {cell} in {group}:\n{a}"));
    let cells = head
        .iter()
        .zip(row.split('|'))
        .map(|(h, c)| (h.to_string(), c.to_string()))
        .collect();
    (lines[0].to_string(), cells)
}

#[test]
fn gpu_rows_take_spread_and_count_from_the_measurement_the_ceiling_names() {
    // Each ceiling's measurement comes after another of the same GPU and path with the same
    // median and another spread: pageable host memory (no ceiling takes it), or four streams
    // where D2D's ceiling is the one-stream figure.
    let p = profile_with(true, |results| {
        let pageable = |path, v, spread| {
            let mut r = with_stats(copy(path, 256 * MIB, 4, v), spread, 5);
            r.measurement.key = r.measurement.key.replace("local", "pageable");
            gpu_spec(&mut r).host_memory = Some(HostMemory::Pageable);
            r
        };
        results.splice(
            0..0,
            [
                pageable(PathId::H2d, 55.51, 4.0),
                pageable(PathId::D2h, 55.35, 3.0),
                with_stats(copy(PathId::D2d, 1 << 30, 4, 2080.0), 6.0, 7),
            ],
        );
        results.push(with_stats(copy(PathId::D2d, 1 << 30, 1, 2080.0), 0.5, 12));
    });
    // The profile names the pinned / one-stream measurements.
    for (ceiling, source) in [
        ("warm_gpu0_peak_gbps", "h2d/cuda-copy/gpu0/local/256MiB/s4"),
        ("gpu0_d2h_peak_gbps", "d2h/cuda-copy/gpu0/local/256MiB/s1"),
        (
            "gpu0_d2d_sustained_gbps",
            "d2d/cuda-copy/gpu0/local/1GiB/s1",
        ),
    ] {
        assert_eq!(
            p.ceiling_records[ceiling].source,
            Some(hwc_model::CeilingSource::measured(source)),
            "{ceiling}"
        );
    }
    let r = render(&p);
    let h2d = line_starting(&r, "| Host → gpu0 H2D (NUMA-local, peak)");
    assert!(h2d.contains("| 55.51 (±1.0 %, N=20) |"), "{h2d}");
    let d2h = line_starting(&r, "| gpu0 → Host D2H (peak)");
    assert!(d2h.contains("| 55.35 (±1.0 %, N=20) |"), "{d2h}");
    let d2d = line_starting(&r, "| gpu0 D2D (1-stream sustained)");
    assert!(d2d.contains("| 2080.00 (±0.5 %, N=12) |"), "{d2d}");
    // The same H2D ceiling elsewhere in the summary carries the same spread.
    let warm = line_starting(&r, "| gpu0 | 55.51");
    assert!(warm.contains("55.51 (±1.0 %, N=20)"), "{warm}");
    let obs = line_starting(&r, "- gpu0 H2D peaks");
    assert!(obs.contains("55.51 (±1.0 %, N=20)"), "{obs}");
}

#[test]
fn the_cross_numa_row_takes_the_cross_numa_input_of_the_penalty() {
    // No penalty: the cross-NUMA one-stream peak equals the local one (55.49), with another
    // spread. The local measurement comes first.
    let p = profile_with(true, |results| {
        let mut r = with_stats(copy(PathId::H2d, 256 * MIB, 1, 55.49), 3.0, 9);
        r.measurement.key = "h2d/cuda-copy/gpu0/n1/256MiB/s1".into();
        (gpu_spec(&mut r).host_node, gpu_spec(&mut r).cpu_node) = (Some(1), Some(1));
        results.push(r);
    });
    assert_eq!(p.gpus["gpu0"].cross_numa_h2d_penalty_gbps, Some(0.0));
    let r = render(&p);
    let row = line_starting(&r, "| Host → gpu0 H2D (cross-NUMA, peak)");
    assert!(row.contains("| 55.49 (±3.0 %, N=9) |"), "{row}");
    assert!(
        row.contains("penalty vs local (1-stream peaks): 0.00 GB/s"),
        "{row}"
    );
}

#[test]
fn a_derived_gpu_ceiling_says_derived_even_when_a_median_matches() {
    let mut p = profile(true);
    p.ceiling_records
        .get_mut("warm_gpu0_peak_gbps")
        .unwrap()
        .source = Some(hwc_model::CeilingSource::derived("by hand", vec![]));
    let r = render(&p);
    let row = line_starting(&r, "| Host → gpu0 H2D (NUMA-local, peak)");
    assert!(row.contains("| 55.51 (derived) |"), "{row}");
    // The D2H ceiling still names its measurement.
    let d2h = line_starting(&r, "| gpu0 → Host D2H (peak)");
    assert!(d2h.contains("| 55.35 (±1.0 %, N=20) |"), "{d2h}");
}

#[test]
fn each_engines_table_is_titled_by_what_the_run_declared_of_it() {
    let mut p = profile(false);
    let t = line_starting(&render(&p), "`host-streaming` — ").to_string();
    assert_eq!(
        t,
        "`host-streaming` — streaming copy (AVX2 loads, non-temporal stores) on pinned threads:"
    );
    // An engine the profile does not declare is named by its id alone.
    p.engines.retain(|e| e.id.as_str() != "host-streaming");
    let t = line_starting(&render(&p), "`host-streaming` — ").to_string();
    assert_eq!(t, "`host-streaming` — host-streaming:");
}

#[test]
fn a_gpu_figure_whose_source_is_not_recorded_shows_no_spread() {
    // The cross-NUMA peak equals the local one-stream peak (55.49), as in the test above.
    let mut p = profile_with(true, |results| {
        let mut r = with_stats(copy(PathId::H2d, 256 * MIB, 1, 55.49), 3.0, 9);
        r.measurement.key = "h2d/cuda-copy/gpu0/n1/256MiB/s1".into();
        (gpu_spec(&mut r).host_node, gpu_spec(&mut r).cpu_node) = (Some(1), Some(1));
        results.push(r);
    });
    // The profile records sources but none for the H2D peak or the penalty, and names a D2H
    // measurement it does not hold; each figure still has a measurement of equal median.
    p.ceiling_records.remove("warm_gpu0_peak_gbps");
    p.ceiling_records
        .remove("warm_gpu0_cross_numa_penalty_gbps");
    p.ceiling_records
        .get_mut("gpu0_d2h_peak_gbps")
        .unwrap()
        .source = Some(hwc_model::CeilingSource::measured(
        "d2h/cuda-copy/gpu0/local/1GiB/s1",
    ));
    let r = render(&p);
    let h2d = line_starting(&r, "| Host → gpu0 H2D (NUMA-local, peak)");
    assert!(h2d.contains("| 55.51 (source not recorded) |"), "{h2d}");
    let cross = line_starting(&r, "| Host → gpu0 H2D (cross-NUMA, peak)");
    assert!(cross.contains("| 55.49 (source not recorded) |"), "{cross}");
    let d2h = line_starting(&r, "| gpu0 → Host D2H (peak)");
    assert!(d2h.contains("| 55.35 (source not recorded) |"), "{d2h}");
    let warm = line_starting(&r, "| gpu0 | 55.51");
    assert!(warm.contains("55.51 (source not recorded)"), "{warm}");
    let obs = line_starting(&r, "- gpu0 H2D peaks");
    assert!(obs.contains("55.51 (source not recorded) GB/s"), "{obs}");
    // The host RAM ceilings keep their named sources.
    let ram = line_starting(&r, "| Host RAM same-NUMA (sustained)");
    assert!(ram.contains("(±1.0 %, N=20)"), "{ram}");
}

#[test]
fn a_gpu_profile_without_ceiling_sources_keeps_the_equal_median_search() {
    let p = hwc_testkit::unsourced(profile(true));
    let r = render(&p);
    let h2d = line_starting(&r, "| Host → gpu0 H2D (NUMA-local, peak)");
    assert!(h2d.contains("| 55.51 (±1.0 %, N=20) |"), "{h2d}");
    let d2h = line_starting(&r, "| gpu0 → Host D2H (peak)");
    assert!(d2h.contains("| 55.35 (±1.0 %, N=20) |"), "{d2h}");
    assert!(!r.contains("source not recorded"), "{r}");
}

#[test]
fn gdrcopy_and_gds_figures_read_the_source_their_ceiling_names() {
    // Not measured by any backend yet: figures, measurements and ceilings set here as a
    // profile builder would write them. Ahead of each named measurement, one of the same path
    // and median with another spread.
    let named = |key: &str, path: PathId, v: f64, spread_pct: f64, n: u32| {
        let mut r = with_stats(copy(PathId::H2d, MIB, 1, v), spread_pct, n);
        r.measurement.key = key.into();
        r.measurement.path = path;
        r.measurement.spec = Spec::HostCopy(HostCopySpec {
            size_bytes: 1,
            threads: 1,
            cpu_node: 0,
            src_node: 0,
            dst_node: 0,
        });
        r.measurement
    };
    let mut p = profile(true);
    p.measurements.extend([
        named("gdrcopy/write/other", PathId::Gdrcopy, 12.0, 7.0, 3),
        named("gdrcopy/write", PathId::Gdrcopy, 12.0, 0.5, 10),
        named("gdrcopy/read/other", PathId::Gdrcopy, 1.5, 7.0, 3),
        named("gdrcopy/read", PathId::Gdrcopy, 1.5, 0.5, 10),
        named("gds/1drive/other", PathId::Gds, 3.2, 7.0, 3),
        named("gds/1drive", PathId::Gds, 3.2, 0.5, 10),
    ]);
    p.gdrcopy.cpu_to_bar1_gbps = Some(12.0);
    p.gdrcopy.bar1_to_cpu_gbps = Some(1.5);
    p.gds.one_drive_gbps = Some(3.2);
    for (key, v, source) in [
        ("gdrcopy_cpu_to_bar1_gbps", 12.0, "gdrcopy/write"),
        ("gdrcopy_bar1_to_cpu_gbps", 1.5, "gdrcopy/read"),
        ("gds_1drive_gbps", 3.2, "gds/1drive"),
    ] {
        p.ceilings.insert(key.into(), v);
        p = hwc_testkit::with_sources(p, &[(key, hwc_model::CeilingSource::measured(source))]);
    }
    let r = render(&p);
    for (row, cell) in [
        ("| GDRCopy CPU→BAR1 write", "| 12.00 (±0.5 %, N=10) |"),
        ("| GDRCopy CPU←BAR1 read", "| 1.50 (±0.5 %, N=10) |"),
        ("| GDS NVMe → GPU", "| 3.20 (±0.5 %, N=10) |"),
    ] {
        let line = line_starting(&r, row);
        assert!(line.contains(cell), "{line}");
    }
    // Without a ceiling of its own, a profile that records sources says so.
    p.ceilings.remove("gds_1drive_gbps");
    p.ceiling_records.remove("gds_1drive_gbps");
    let r = render(&p);
    let gds = line_starting(&r, "| GDS NVMe → GPU");
    assert!(gds.contains("| 3.20 (source not recorded) |"), "{gds}");
}

/// A duplex or D2D case of `size` on gpu0, with the CUDA backend's placement note when
/// `searched`.
fn placed(path: PathId, size: u64, direction: Option<&str>, v: f64, searched: bool) -> CaseResult {
    let mut r = copy(path, size, 1, v);
    let m = &mut r.measurement;
    if let Spec::GpuCopy(g) = &mut m.spec {
        g.direction = direction.map(|d| {
            if d == "d2h" {
                CopyDirection::D2h
            } else {
                CopyDirection::H2d
            }
        });
        if path == PathId::D2d {
            (g.host_memory, g.host_node, g.cpu_node) = (None, None, None);
        }
    }
    if let Some(d) = direction {
        m.key.push_str(&format!("/{d}"));
    }
    if path == PathId::D2d {
        m.key = format!("d2d/cuda-copy/gpu0/{}/s1", size_label(size));
        m.placement = None;
    }
    if searched {
        m.evidence.placement_search = Some(hwc_model::PlacementSearch {
            tried: 12,
            finalists: 3,
            fastest_over_slowest_pct: 1.5,
            chosen: "704/2688/1024".into(),
            detail: "12 placements of the copies in their buffers tried (offsets in KiB: D2H \
                     device source/H2D host source/D2H host destination)"
                .into(),
        });
    }
    r
}

/// The report's lines that footnote figures measured at the fastest placement.
fn placement_footnotes(md: &str) -> Vec<&str> {
    md.lines()
        .filter(|l| l.contains("fastest of several placements"))
        .collect()
}

#[test]
fn the_duplex_table_says_which_rows_were_measured_at_the_fastest_placement() {
    let p = profile_with(true, |r| {
        r.extend([
            placed(PathId::Duplex, 512 << 10, Some("h2d"), 37.4, true),
            placed(PathId::Duplex, 512 << 10, Some("d2h"), 37.44, true),
            placed(PathId::Duplex, 64 * MIB, Some("h2d"), 51.2, false),
            placed(PathId::Duplex, 64 * MIB, Some("d2h"), 51.3, false),
            placed(PathId::D2d, 2 * MIB, None, 898.2, true),
            placed(PathId::D2d, 256 * MIB, None, 2086.8, false),
        ]);
    });
    let md = render(&p);
    let notes = placement_footnotes(&md);
    // Only the searched sizes are named: the duplex one under the duplex table, the D2D one
    // under the D2D table (a D2D row is not a duplex row).
    assert_eq!(notes.len(), 2, "{md}");
    assert!(
        notes[0].starts_with("*512KiB*: measured at the fastest"),
        "{}",
        notes[0]
    );
    // The method is one link away (docs/gpu-method.md), the evidence in the profile.
    assert!(
        notes[0].ends_with("(`evidence.placement_search`; docs/gpu-method.md)."),
        "{}",
        notes[0]
    );
    let duplex_at = md.find("— duplex (H2D and D2H").unwrap();
    let note_at = md.find(notes[0]).unwrap();
    let path4_at = md.find("### Path 4").unwrap();
    assert!(duplex_at < note_at && note_at < path4_at, "{md}");
    assert_eq!(
        notes[1],
        "*D2D 1-stream at 2MiB*: measured at the fastest of several placements in their \
         buffers, tried first (`evidence.placement_search`; docs/gpu-method.md)."
    );
    let d2d_note_at = md.find(notes[1]).unwrap();
    let path7_at = md.find("### Path 7").unwrap_or(md.len());
    assert!(path4_at < d2d_note_at && d2d_note_at < path7_at, "{md}");
    // No note when no figure searched.
    let plain = render(&profile_with(true, |r| {
        r.push(placed(PathId::Duplex, 64 * MIB, Some("h2d"), 51.2, false))
    }));
    assert!(!plain.contains("fastest of several placements"), "{plain}");
}

#[test]
fn the_copy_table_says_which_one_way_rows_were_measured_at_the_fastest_placement() {
    let p = profile_with(true, |r| {
        r.extend([
            placed(PathId::D2h, 128 << 10, None, 31.2, true),
            placed(PathId::D2h, 2 * MIB, None, 52.9, true),
            placed(PathId::D2h, 4 * MIB, None, 54.2, false),
            placed(PathId::H2d, 128 << 10, None, 26.3, false),
            placed(PathId::Duplex, 512 << 10, Some("h2d"), 37.4, true),
        ]);
    });
    let md = render(&p);
    let notes = placement_footnotes(&md);
    assert_eq!(notes.len(), 2, "{md}");
    // Under the host ↔ GPU table: the searched one-way rows by column, sizes in order.
    assert!(
        notes[0].starts_with("*D2H 1-stream at 128KiB, 2MiB*: measured at the fastest"),
        "{}",
        notes[0]
    );
    assert!(notes[0].contains("`evidence.placement_search`"));
    let table_at = md.find("#### gpu0 — host memory local").unwrap();
    let note_at = md.find(notes[0]).unwrap();
    let duplex_at = md.find("— duplex (H2D and D2H").unwrap();
    assert!(table_at < note_at && note_at < duplex_at, "{md}");
    // Under the duplex table, its own.
    assert!(
        notes[1].starts_with("*512KiB*: measured at the fastest"),
        "{}",
        notes[1]
    );
}

#[test]
fn each_host_gpu_waiver_names_its_direction() {
    let mut p = profile(true);
    for path in [PathId::H2d, PathId::D2h] {
        p.waived.push(Waiver {
            path,
            engine: None,
            scope: Some("gpu0 cross-NUMA".into()),
            covers: Some(gpu_cross("gpu0")),
            reason: "one NUMA node with CPUs: there is no cross-NUMA placement".into(),
            hint: None,
        });
    }
    let md = render(&p);
    // H2D, D2H and duplex share Path 3: two waivers with the same scope and reason must
    // not read as one line printed twice.
    for dir in ["H2D", "D2H"] {
        let line = format!("- **Waived** — {dir}, gpu0 cross-NUMA: one NUMA node with CPUs");
        assert_eq!(md.matches(&line).count(), 1, "{dir}\n{md}");
    }
}

#[test]
fn copies_held_to_a_spread_say_so_and_mark_the_cells_that_stayed_over_it() {
    let held = |size: u64, spread_pct: f64| {
        let mut r = with_stats(copy(PathId::H2d, size, 1, 54.0), spread_pct, 12);
        r.measurement.spread_limit_pct = Some(1);
        r
    };
    let p = profile_with(true, |r| {
        r.retain(|c| c.measurement.path != PathId::H2d);
        r.extend([held(4 * MIB, 0.5), held(256 * MIB, 3.0)]);
    });
    let md = render(&p);
    assert!(
        md.contains("Copies of 4MiB or more here are held to a spread of 1 %"),
        "{md}"
    );
    let steady = line_starting(&md, "| 4MiB |");
    assert!(steady.contains("54.00 ±0.5 % |"), "{steady}");
    assert!(!steady.contains("unsteady"), "{steady}");
    let unsteady = line_starting(&md, "| 256MiB |");
    assert!(unsteady.contains("54.00 ±3.0 % *unsteady*"), "{unsteady}");
    // The rule in one sentence, its method one link away.
    assert!(
        md.contains(
            "held to a spread of 1 %: one that spread more was timed again and keeps its \
             steadiest window (docs/gpu-method.md); *unsteady*: that window still spread more."
        ),
        "{md}"
    );
    let (_, row) = appendix_row(&md, "h2d/cuda-copy/gpu0/local/256MiB/s1");
    assert!(row["Placement, flags"].ends_with("unsteady"), "{row:?}");
    assert!(md.contains("> **Warning:** 1 measurement(s) spread more than they are held to"));
    // Without limits there is no such line.
    assert!(!render(&profile(true)).contains("held to a spread"));
}

#[test]
fn node_memory_that_does_not_add_up_to_the_machines_is_noted_with_both_figures() {
    let mut p = profile(false);
    let r = render(&p);
    assert!(
        !r.contains("adds up to"),
        "24 GiB in the node and the machine: no note"
    );
    // The H200 VM: node 0's meminfo says 4.3 GiB of the machine's 125.9 GiB.
    p.platform.numa[0].memory_bytes = Some(4_550_128 << 10);
    p.platform.memory_bytes = Some(131_981_020 << 10);
    let r = render(&p);
    let at = r.find("| 0 | 0-1 | 4.3 GiB | 10 |").expect("node row");
    let note = &r[at..];
    assert!(
        note.contains("adds up to 4.3 GiB, the machine's (`/proc/meminfo`) to 125.9 GiB"),
        "{note}"
    );
    // A node whose memory is unknown: no sum to compare.
    p.platform.numa[0].memory_bytes = None;
    assert!(!render(&p).contains("adds up to"));
    // Within 10 %: no note.
    p.platform.numa[0].memory_bytes = Some(125_000_000 << 10);
    assert!(!render(&p).contains("adds up to"));
}

#[test]
fn an_absent_gpu_figure_gives_its_own_gpus_and_placements_waiver_not_another_ones() {
    let mut p = profile(true);
    p.gpus.insert("gpu1".into(), Default::default());
    let waiver = |scope: &str, covers: hwc_model::Covers, reason: &str| Waiver {
        engine: None,
        path: PathId::H2d,
        scope: Some(scope.into()),
        covers: Some(covers),
        reason: reason.into(),
        hint: None,
    };
    let case = |pinned: bool| hwc_model::Covers::Case {
        spec: Spec::GpuCopy(hwc_model::GpuCopySpec {
            gpu: "gpu1".into(),
            size_bytes: 4 * MIB,
            streams: 1,
            host_memory: Some(if pinned {
                hwc_model::HostMemory::Pinned
            } else {
                hwc_model::HostMemory::Pageable
            }),
            host_node: Some(0),
            cpu_node: Some(0),
            direction: None,
        }),
    };
    // As the plan writes them on a one-node, two-GPU machine, then what the run added: gpu1
    // busy for its local cases, and one pageable case of it out of memory.
    p.waived.extend([
        waiver(
            "gpu0 cross-NUMA",
            gpu_cross("gpu0"),
            "one NUMA node with CPUs: there is no cross-NUMA placement",
        ),
        waiver(
            "gpu1 cross-NUMA",
            gpu_cross("gpu1"),
            "one NUMA node with CPUs: there is no cross-NUMA placement",
        ),
        waiver(
            "h2d/cuda-copy/gpu1/local-pageable/4MiB/s1",
            case(false),
            "out of device memory",
        ),
        waiver(
            "h2d/cuda-copy/gpu1/local/4MiB/s1",
            case(true),
            "gpu1 is busy: another process uses it",
        ),
    ]);
    let md = render(&p);
    let row = |label: &str| table_row(&md, label);
    let local = row("Host → gpu1 H2D (NUMA-local, peak)");
    assert!(local.contains("waived: gpu1 is busy"), "{local}");
    let cross = row("Host → gpu1 H2D (cross-NUMA, peak)");
    assert!(cross.contains("waived: one NUMA node"), "{cross}");
    // No D2H waiver of gpu1 at all: not gpu0's, not an H2D one.
    let d2h = row("gpu1 → Host D2H (peak)");
    assert!(d2h.contains("not measured in this run"), "{d2h}");
    // The warm-path table names the same reason.
    let warm = row("gpu1");
    assert!(warm.contains("waived: gpu1 is busy"), "{warm}");
    // gpu0's local figure is measured, and its cross row keeps gpu0's own waiver.
    let cross0 = row("Host → gpu0 H2D (cross-NUMA, peak)");
    assert!(cross0.contains("waived: one NUMA node"), "{cross0}");
}

#[test]
fn the_cold_path_names_the_gpu_the_profile_took_its_ceiling_from_when_two_tie() {
    let mut p = profile(true);
    let gpu0 = p.gpus["gpu0"].clone();
    assert!(gpu0.h2d_peak_numa_local_gbps.is_some());
    p.gpus.insert("gpu1".into(), gpu0);
    p.nvme.raw_read_gbps.insert("1_drive".into(), 6.5);
    p.ceilings.insert("nvme_raw_1drive_read_gbps".into(), 6.5);
    let p = hwc_testkit::with_sources(
        p,
        &[(
            "nvme_raw_1drive_read_gbps",
            hwc_model::CeilingSource::derived("by hand", vec![]),
        )],
    );
    let md = render(&p);
    let table = &md[md.find("### Sub-table 3").unwrap()..md.find("### Sub-table 4").unwrap()];
    let row = table
        .lines()
        .find(|l| l.starts_with("| 1 |"))
        .unwrap_or_else(|| panic!("{table}"));
    // hwc_profile::nvme::best_h2d_gpu keeps the first of equals, as the ceilings do.
    assert!(row.starts_with("| 1 | gpu0 |"), "{row}");
}

#[test]
fn an_absent_figure_never_cites_a_waiver_scoped_to_something_else() {
    // No host RAM figure at all: the plan's one host RAM waiver is scoped cross-NUMA.
    let p = profile_with(false, |r| r.clear());
    let md = render(&p);
    let row = |label: &str| table_row(&md, label);
    let same = row("Host RAM same-NUMA (sustained)");
    assert!(same.contains("not measured in this run"), "{same}");
    let cross = row("Host RAM cross-NUMA (sustained)");
    assert!(cross.contains("waived: one NUMA node"), "{cross}");
    // A GPU without its H2D figures: the cold path does not give gpu0's cross-NUMA waiver.
    let mut p = profile_with(true, |r| r.retain(|c| c.measurement.path != PathId::H2d));
    p.waived.push(Waiver {
        engine: None,
        path: PathId::H2d,
        scope: Some("gpu0 cross-NUMA".into()),
        covers: Some(gpu_cross("gpu0")),
        reason: "one NUMA node with CPUs: there is no cross-NUMA placement".into(),
        hint: None,
    });
    let md = render(&p);
    let cold = &md[md.find("### Sub-table 3").unwrap()..md.find("### Sub-table 4").unwrap()];
    assert!(cold.contains("(not measured)"), "{cold}");
    assert!(!cold.contains("cross-NUMA"), "{cold}");
}

/// The markdown table row that begins with the cell `label`.
fn table_row(md: &str, label: &str) -> String {
    md.lines()
        .find(|l| l.starts_with(&format!("| {label} |")))
        .unwrap_or_else(|| panic!("no row {label}:\n{md}"))
        .to_string()
}

#[test]
fn failed_cases_are_grouped_by_error_in_their_path_section_the_observations_and_the_appendix() {
    let mut p = profile(true);
    let refused = "refused: gpu0 (0000:00:06.0) has 1 other compute process(es): pid 529";
    let failed = |key: String, path: PathId, error: &str| hwc_model::Failure {
        engine: None,
        key,
        path,
        error: error.into(),
    };
    p.failures = (0..6)
        .map(|i| {
            failed(
                format!("h2d/cuda-copy/gpu0/local/{i}MiB/s1"),
                PathId::H2d,
                refused,
            )
        })
        .chain([
            failed("d2d/cuda-copy/gpu0/1MiB/s1".into(), PathId::D2d, refused),
            failed(
                "d2h/cuda-copy/gpu0/local/1MiB/s1".into(),
                PathId::D2h,
                "data mismatch at byte 7",
            ),
        ])
        .collect();
    let r = render(&p);
    let section = |from: &str, to: &str| &r[r.find(from).unwrap()..r.find(to).unwrap()];
    // Path 3 keeps its figures and names its failures, one line per error, the commonest first.
    let path3 = section("### Path 3", "### Path 4");
    assert!(path3.contains("| 4MiB |"), "{path3}");
    let lines: Vec<&str> = path3
        .lines()
        .filter(|l| l.starts_with("- **Failed**"))
        .collect();
    assert_eq!(
        lines,
        [
            format!(
                "- **Failed** — 6 case(s), no figure: {refused} (`h2d/cuda-copy/gpu0/local/0MiB/s1` … \
                 `h2d/cuda-copy/gpu0/local/5MiB/s1`, all listed under Failed cases in Appendix A)"
            ),
            "- **Failed** — 1 case(s), no figure: data mismatch at byte 7 \
             (`d2h/cuda-copy/gpu0/local/1MiB/s1`)"
                .to_string(),
        ]
    );
    // A section whose every case failed says so, not that it was left out.
    let path4 = section("### Path 4", "### Path 5");
    assert!(
        path4.contains("Not measured in this run (every case planned failed).")
            && path4.contains(&format!(
                "- **Failed** — 1 case(s), no figure: {refused} (`d2d/cuda-copy/gpu0/1MiB/s1`)"
            )),
        "{path4}"
    );
    assert!(!section("### Path 7", "### Path 8").contains("Failed"));
    let obs = section("## 8. Observations", "## 1. Platform");
    assert!(
        obs.contains(&format!("- 7 case(s) failed and have no figure: {refused}")),
        "{obs}"
    );
    assert!(obs.contains("- 1 case(s) failed and have no figure: data mismatch at byte 7"));
    let appendix = &r[r.find("### Failed cases").unwrap()..];
    assert!(
        appendix.contains(&format!(
            "- {refused} — 7 case(s): `h2d/cuda-copy/gpu0/local/0MiB/s1`, `h2d/cuda-copy/gpu0/local/1MiB/s1`, \
         `h2d/cuda-copy/gpu0/local/2MiB/s1`, `h2d/cuda-copy/gpu0/local/3MiB/s1`, `h2d/cuda-copy/gpu0/local/4MiB/s1`, \
         `h2d/cuda-copy/gpu0/local/5MiB/s1`, `d2d/cuda-copy/gpu0/1MiB/s1`\n"
        )),
        "{appendix}"
    );
}

#[test]
fn host_ram_measured_only_at_cache_sizes_shows_no_sustained_figure() {
    let p = profile_with(false, |rs| rs.retain(|r| r.measurement.cache_resident));
    let r = render(&p);
    let path7 = &r[r.find("### Path 7").unwrap()..r.find("### Path 8").unwrap()];
    assert!(
        path7.contains("| 4MiB | 14.20 ±1.0 % *cache* | 25.00 ±1.0 % *cache* |"),
        "{path7}"
    );
    assert!(
        path7.contains("Sustained: none — every size measured here fits in cache"),
        "{path7}"
    );
    assert!(!path7.contains("best **"), "{path7}");
    let row = line_starting(&r, "| Host RAM same-NUMA (sustained) |");
    assert_eq!(
        row,
        "| Host RAM same-NUMA (sustained) | — | memory controller | no sustained figure: every \
         size measured fits in cache |"
    );
}

#[test]
fn nvme_summary_rows_of_a_target_run_say_a_target_gives_no_drive_ceiling() {
    let target = m(
        "nvme_read/io-uring/target/1MiB/qd16",
        PathId::NvmeRead,
        Spec::Nvme(NvmeSpec {
            test: NvmeTest::Sweep,
            block_bytes: MIB,
            queue_depth: 16,
            drives: vec!["/var/tmp/t".into()],
            target: true,
            pattern: NvmePattern::Sequential,
        }),
        2.5,
        false,
    );
    let mut p = profile_with(false, |rs| rs.push(target));
    // The plan's drive waiver is gone (a target was named); a long test's waiver, scoped to
    // that test, is never why a sweep figure is absent.
    p.waived.retain(|w| w.path != PathId::NvmeRead);
    p.waived.push(Waiver {
        path: PathId::NvmeRead,
        engine: None,
        scope: Some("read-cache".into()),
        covers: Some(hwc_model::Covers::NvmeTest {
            test: hwc_model::NvmeTest::ReadCache,
        }),
        reason: "not requested: the read-cache test runs with --nvme-long-tests".into(),
        hint: None,
    });
    let r = render(&p);
    for label in ["| NVMe → Host read |", "| Optimal read chunk size |"] {
        let row = line_starting(&r, label);
        assert!(
            row.ends_with("| measured on --target only (see the path's section): a target gives no drive ceiling |"),
            "{row}"
        );
    }
    // Without the target's figures the row says it was not measured, and still never names the
    // long test's waiver.
    p.measurements.clear();
    let r = render(&p);
    let row = line_starting(&r, "| NVMe → Host read |");
    assert!(row.ends_with("| not measured in this run |"), "{row}");
}

#[test]
fn the_repetitions_line_gives_the_range_of_counts_and_each_case_is_in_appendix_a() {
    let p = profile_with(false, |rs| {
        for r in rs.iter_mut() {
            if r.measurement.spec.size_bytes() == 4 * MIB {
                r.measurement.gbps.n = 200;
                r.measurement.warmup = 20;
            }
        }
    });
    let r = render(&p);
    let path7 = &r[r.find("### Path 7").unwrap()..r.find("### Path 8").unwrap()];
    assert!(
        path7.contains(
            "Cells: median GB/s ± spread; 20 to 200 timed repetitions after the cold one and 3 \
             to 20 warm-up (each case's: Appendix A)."
        ),
        "{path7}"
    );
    // Each case's count is in Appendix A.
    let (_, row) = appendix_row(&r, "host_ram/host-memcpy/n0-n0/4MiB/t1");
    assert_eq!((row["N"].as_str(), row["Warm-up"].as_str()), ("200", "20"));
    // One count for every cell: that count.
    let r = render(&profile(false));
    assert!(r.contains(
        "Cells: median GB/s ± spread; 20 timed repetitions after the cold one and 3 warm-up.\n"
    ));
    // No warm-up (pinned GPU copies, warmed by their calibration): no count of zero.
    let p = profile_with(false, |rs| {
        rs.iter_mut().for_each(|r| r.measurement.warmup = 0)
    });
    let r = render(&p);
    assert!(
        r.contains("Cells: median GB/s ± spread; 20 timed repetitions after the cold one.\n"),
        "{r}"
    );
}

#[test]
fn the_glibc_threshold_is_stated_under_path_7_when_recorded() {
    let mut p = profile(false);
    let r = render(&p);
    assert!(!r.contains("non-temporal stores and shorter ones"));
    p.provenance.environment.insert(
        "host.glibc_non_temporal_threshold".into(),
        hwc_model::Setting::bytes(
            190_316_544,
            "181.5 MiB: glibc's memcpy uses non-temporal stores for calls this long or longer",
        ),
    );
    let r = render(&p);
    let path7 = &r[r.find("### Path 7").unwrap()..r.find("### Path 8").unwrap()];
    assert!(
        path7.contains("glibc writes calls of 181.5 MiB or more with non-temporal stores"),
        "{path7}"
    );
}

/// A scheduling summary of `(disturbed, not_judged, of)` repetitions (none: nothing judged).
fn sched(counts: Option<(usize, usize, usize)>, detail: &str) -> hwc_model::SchedSummary {
    hwc_model::SchedSummary {
        counts: counts.map(|(disturbed, not_judged, of)| hwc_model::RepCounts {
            disturbed,
            not_judged,
            of,
        }),
        disturbed_above_pct: 1.0,
        detail: detail.into(),
    }
}

#[test]
fn a_case_with_repetitions_not_judged_is_not_counted_as_undisturbed() {
    let line = "0 of 12 repetitions disturbed (a thread off its CPU over 1 % of the \
                repetition), 3 not judged (a thread's run-queue delay missing); largest \
                run-queue delay 50 µs (rep 2, CPU 0: 0.04 % of it)";
    let p = profile_with(false, |rs| {
        rs[4].measurement.evidence.scheduling = Some(sched(Some((0, 3, 12)), line))
    });
    let md = render(&p);
    assert!(
        md.contains(
            "0 of 1 case(s) had a disturbed repetition; 1 had none among the repetitions that \
             could be judged, but not every one could (every counter in the raw JSON)."
        ),
        "{md}"
    );
    assert!(!md.contains("; 1 had none;"), "{md}");
}

#[test]
fn a_disturbed_host_case_is_flagged_in_its_cells_and_listed_in_appendix_c() {
    let line_a = "2 of 12 repetitions disturbed (a thread off its CPU over 1 % of the \
                  repetition); largest run-queue delay 3.00 ms (rep 4, CPU 2: 15 % of it); \
                  median 14.20 GB/s (13.90–14.50, N=2) disturbed against 16.80 GB/s \
                  (15.10–17.20, N=10) undisturbed; \
                  slowest repetition 4 (13.90 GB/s) disturbed";
    let line_b = "not available (run-queue delay not available: neither \
                  /proc/thread-self/schedstat nor /proc/self/task/7/schedstat exists)";
    let line_c = "0 of 12 repetitions disturbed (a thread off its CPU over 1 % of the \
                  repetition); largest run-queue delay 50 µs (rep 2, CPU 0: 0.04 % of it); \
                  slowest repetition 7 (12.00 GB/s) undisturbed";
    let p = profile_with(false, |rs| {
        rs[2].measurement.evidence.scheduling = Some(sched(Some((2, 0, 12)), line_a));
        rs[3]
            .measurement
            .notes
            .push("copy: C library memcpy".into());
        rs[3].measurement.evidence.scheduling = Some(sched(None, line_b));
        rs[4].measurement.evidence.scheduling = Some(sched(Some((0, 0, 12)), line_c));
    });
    let md = render(&p);
    // The rule in one sentence under the host tables, with the count.
    let head = md
        .find("*disturbed*: scheduling kept a copy thread off its CPU for over 1 % of a repetition")
        .expect("the scheduling rule");
    let para = md[head..].lines().next().unwrap();
    assert!(para.contains("(docs/usage.md)"), "{para}");
    assert!(
        para.ends_with(
            "1 of 3 case(s) had a disturbed repetition; 1 had none; for 1 the counters could \
             not be read (listed in Appendix C; every counter in the raw JSON)."
        ),
        "{para}"
    );
    // Inside the host RAM section, before the next path's.
    let host = md.find("### Path 7").unwrap();
    let next = md[host..].find("### Path 8").map(|i| host + i).unwrap();
    assert!(host < head && head < next, "{md}");
    // The disturbed case is flagged in its table cell and in Appendix A; the others are not.
    let section = &md[host..next];
    assert_eq!(section.matches("*disturbed*").count(), 2, "{section}");
    let (_, row) = appendix_row(&md, "host_ram/host-memcpy/n0-n0/256MiB/t1");
    assert!(
        row["Placement, flags"].ends_with("disturbed 2/12"),
        "{row:?}"
    );
    for key in [
        "host_ram/host-memcpy/n0-n0/256MiB/t2",
        "host_ram/host-streaming/n0-n0/256MiB/t1",
    ] {
        let (heading, row) = appendix_row(&md, key);
        assert!(
            !heading.contains("disturbed") && row.values().all(|c| !c.contains("disturbed")),
            "{row:?}"
        );
    }
    // Appendix C lists only the disturbed case, with its count; the counters' words stay in the
    // profile.
    let app = md
        .find("## Appendix C — cases scheduling disturbed")
        .expect("Appendix C");
    let listed: Vec<&str> = md[app..].lines().filter(|l| l.starts_with("- `")).collect();
    assert_eq!(
        listed,
        ["- `host_ram/host-memcpy/n0-n0/` — 256MiB/t1: 2 of 12"]
    );
    assert!(!md.contains(line_a) && !md.contains(line_c), "{md}");
    // Re-rendering from the YAML keeps it (the summaries are the record).
    let yaml = hwc_profile::to_yaml(&p).unwrap();
    let back = hwc_profile::from_yaml(&yaml).unwrap();
    assert_eq!(render(&back), md);
    // No scheduling summaries (a profile of an earlier build): no paragraph, no appendix.
    let plain = render(&profile(false));
    assert!(!plain.contains("*disturbed*") && !plain.contains("Appendix C"));
}

#[test]
fn an_option_recorded_empty_reads_none_not_a_blank_cell() {
    let mut p = profile(false);
    p.provenance
        .options
        .insert("threads_left_out".into(), String::new());
    p.provenance
        .options
        .insert("drives_left_out".into(), "nvme2".into());
    let md = render(&p);
    assert!(md.contains("| threads_left_out | (none) |"), "{md}");
    assert!(md.contains("| drives_left_out | nvme2 |"), "{md}");
}

/// A waiver's part: `gpu`'s cross-NUMA figures.
fn gpu_cross(gpu: &str) -> hwc_model::Covers {
    hwc_model::Covers::Gpu {
        gpu: gpu.into(),
        local: false,
        cross: true,
    }
}

#[test]
fn gds_puts_cufile_beside_the_bounce_per_drive_group_and_says_a_compat_mode_is_not_gpudirect() {
    let gds = |route: hwc_model::GdsRoute, size: u64, qd: u32, median: f64| {
        let spec = Spec::Gds(hwc_model::GdsSpec {
            gpu: "gpu0".into(),
            drives: vec!["/data/f.bin".into()],
            target: true,
            block_bytes: size,
            queue_depth: qd,
            route,
            write: false,
            host_node: Some(0),
        });
        let key = format!(
            "gds/cufile/gpu0/target/{}/qd{qd}/{}",
            size_label(size),
            route.as_str()
        );
        m(&key, PathId::Gds, spec, median, false)
    };
    use hwc_model::GdsRoute::{Cufile, PosixBounce};
    let mut p = profile_with(true, |r| {
        r.extend([
            gds(Cufile, 4 * MIB, 16, 1.5),
            gds(PosixBounce, 4 * MIB, 16, 2.0),
            gds(Cufile, 16 * MIB, 32, 1.9),
        ])
    });
    p.gds.mode = Some("compat".into());
    p.provenance.environment.insert(
        "gds.mode".into(),
        hwc_model::Setting::about("compat", "nvidia-fs 0.0"),
    );
    let r = render(&p);
    let at = r.find("### Path 6").unwrap();
    let section = &r[at..at + r[at..].find("\n### ").unwrap_or(r.len() - at)];
    assert!(section.contains("**compat** mode"), "{section}");
    assert!(section.contains("**not GPUDirect**"), "{section}");
    assert!(section.contains("Evidence: nvidia-fs 0.0."), "{section}");
    assert!(
        section.contains("#### gpu0 reads from /data/f.bin"),
        "{section}"
    );
    assert!(
        section.contains("| 4MiB | 16 | 1.50 ±1.0 % | 2.00 ±1.0 % | 75 % |"),
        "{section}"
    );
    assert!(
        section.contains("| 16MiB | 32 | 1.90 ±1.0 % | — | — |"),
        "{section}"
    );
}

#[test]
fn path_8_sub_table_4_and_the_crossover_render_from_bar_figures_and_a_pci_bar_is_no_gpu_ceiling() {
    use hwc_model::{BarDevice, DmaTarget, NvmeBarSpec};
    let drives = |k: usize| -> Vec<String> {
        (0..k)
            .map(|i| format!("0000:{:02x}:00.0", 0x11 + i))
            .collect()
    };
    let bar = |device: &BarDevice, k: usize, cross: bool, memory: DmaTarget, median: f64| {
        let spec = Spec::NvmeBar(NvmeBarSpec {
            device: device.clone(),
            memory,
            drives: drives(k),
            block_bytes: 128 << 10,
            queue_depth: if k == 1 { 16 } else { 32 },
            poller_node: Some(0),
            cross_numa: cross,
        });
        let key = format!(
            "nvme_bar1/spdk-native/{}/{k}drive/{}/{}",
            device.key(),
            if cross { "cross" } else { "local" },
            memory.as_str()
        );
        m(&key, PathId::NvmeBar1, spec, median, false)
    };
    let read = |k: usize, median: f64| {
        let spec = Spec::Nvme(NvmeSpec {
            test: NvmeTest::Sweep,
            block_bytes: 128 << 10,
            queue_depth: 32,
            drives: drives(k),
            target: false,
            pattern: NvmePattern::Sequential,
        });
        m(
            &format!("nvme_read/io-uring/{k}drive/128KiB/qd32"),
            PathId::NvmeRead,
            spec,
            median,
            false,
        )
    };
    let gpu = BarDevice::GpuBar1 {
        gpu: "gpu0".into(),
        bdf: "0000:40:00.0".into(),
    };
    let pci = BarDevice::PciBar {
        bdf: "0000:41:00.0".into(),
        resource: 2,
    };
    let p = profile_with(true, |r| {
        r.extend([
            read(1, 6.0),
            read(4, 24.0),
            bar(&gpu, 1, false, DmaTarget::HostRam, 6.0),
            bar(&gpu, 1, false, DmaTarget::Bar, 6.0),
            bar(&gpu, 4, false, DmaTarget::HostRam, 24.0),
            bar(&gpu, 4, false, DmaTarget::Bar, 20.0),
            bar(&gpu, 4, true, DmaTarget::Bar, 15.0),
            bar(&pci, 1, false, DmaTarget::HostRam, 3.0),
            bar(&pci, 1, false, DmaTarget::Bar, 99.0),
        ])
    });
    let r = render(&p);
    let path8 = &r[r.find("### Path 8").unwrap()..];
    let path8 = &path8[..path8.find("\n## ").unwrap()];
    assert!(
        path8.contains("#### Into gpu0 BAR1 (0000:40:00.0)"),
        "{path8}"
    );
    assert!(
        path8.contains("#### Into PCI BAR2 of 0000:41:00.0 (not a GPU)"),
        "{path8}"
    );
    assert!(path8.contains("not a GPU's figures"), "{path8}");
    let row = line_starting(path8, "| 4 | node 0 (local) |");
    assert!(row.contains("| 32 × 128KiB |"), "{row}");
    assert!(
        row.contains("| 16.7 % | 0000:11:00.0, 0000:12:00.0, 0000:13:00.0, 0000:14:00.0 |"),
        "{row}"
    );
    let sub4 = &r[r.find("### Sub-table 4").unwrap()..r.find("### Crossover").unwrap()];
    assert!(
        line_starting(sub4, "| 4 | gpu0 | 20.00").ends_with("| 16.7 % | NUMA-local |"),
        "{sub4}"
    );
    assert!(
        line_starting(sub4, "| 4 | gpu0 | 15.00").contains("cross-NUMA, 25.0 % under NUMA-local"),
        "{sub4}"
    );
    assert!(
        !sub4.contains("99.00"),
        "the stand-in is no GPU row: {sub4}"
    );
    assert!(sub4.contains("not a GPU figure"), "{sub4}");
    let cross = &r[r.find("### Crossover").unwrap()..];
    let cross = &cross[..cross.find("\n## ").unwrap()];
    assert!(
        cross.contains("| 1 | 6.00 | 6.00 | tie (within 2 %) |"),
        "{cross}"
    );
    assert!(
        cross.contains("| 4 | 24.00 | 20.00 | dispatcher |"),
        "{cross}"
    );
}

#[test]
fn gdrcopy_shows_each_direction_by_size_and_thread_node_and_the_small_copies_latency() {
    use hwc_model::CopyDirection::{D2h, H2d};
    let case = |dir, size: u64, node: u32, cross: bool, latency: bool, median: f64| {
        let spec = Spec::Gdrcopy(hwc_model::GdrcopySpec {
            gpu: "gpu0".into(),
            direction: dir,
            size_bytes: size,
            cpu_node: Some(node),
            cross_numa: cross,
            latency,
        });
        let mut r = m(
            &format!("gdrcopy/gdrcopy/gpu0/{dir:?}/{size}/{node}/{latency}"),
            PathId::Gdrcopy,
            spec,
            median,
            false,
        );
        if latency {
            r.measurement.latency_us = Some(hwc_model::Stats {
                median: 0.25,
                ..r.measurement.gbps
            });
        }
        r
    };
    let p = profile_with(true, |r| {
        r.extend([
            case(H2d, MIB, 0, false, false, 12.0),
            case(H2d, MIB, 1, true, false, 9.0),
            case(H2d, 64, 0, false, true, 0.3),
            case(D2h, MIB, 0, false, false, 1.2),
        ])
    });
    let r = render(&p);
    let s = &r[r.find("### Path 5").unwrap()..r.find("### Path 6").unwrap()];
    assert!(s.contains("#### gpu0: CPU → BAR1 stores"), "{s}");
    assert!(
        s.contains("| Size | thread on n0 (local) | thread on n1 (cross-NUMA) |"),
        "{s}"
    );
    assert!(s.contains("| 1MiB | 12.00 ±1.0 % | 9.00 ±1.0 % |"), "{s}");
    assert!(
        s.contains("| 64 B | 0.25 ±1.0 % | thread on n0 (local) |"),
        "{s}"
    );
    assert!(s.contains("#### gpu0: BAR1 → CPU loads"), "{s}");
    // The summary's GDRCopy rows are filled from the same figures.
    assert!(line_starting(&r, "| GDRCopy CPU→BAR1 write |").contains("12.00"));
}

#[test]
fn the_gpu_and_host_state_through_the_run_is_one_row_each() {
    use hwc_model::{GpuCaseState, HostCaseState, LinkState, Range};
    let gen5 = LinkState { gen: 5, width: 16 };
    let p = profile_with(true, |rs| {
        for (i, r) in rs
            .iter_mut()
            .filter(|r| r.measurement.spec.gpu().is_some())
            .enumerate()
        {
            r.measurement.evidence.gpu_state = Some(GpuCaseState {
                samples: 3,
                sm_clock_mhz: Some(Range {
                    min: 1980 - 10 * i as u32 % 50,
                    max: 1980,
                }),
                mem_clock_mhz: Some(Range {
                    min: 2619,
                    max: 2619,
                }),
                temperature_c: Some(Range { min: 35, max: 40 }),
                clock_events: if i == 1 {
                    vec![hwc_model::ClockEvent::SwPowerCap]
                } else {
                    vec![]
                },
                persistence_mode: Some(true),
                link_under_load: Some(if i == 2 {
                    LinkState { gen: 4, width: 16 }
                } else {
                    gen5
                }),
                link_max: Some(gen5),
                pcie_replays: Some(u64::from(i == 3)),
            });
        }
        rs[0].measurement.evidence.host_state = Some(HostCaseState {
            governors: vec!["performance".into()],
            cpu_mhz: Some(Range {
                min: 2400,
                max: 3100,
            }),
            thp: Some("madvise".into()),
            hugepages_total: Some(0),
            hugepages_free: Some(0),
            changed: vec![],
        });
    });
    let md = render(&p);
    let gpu = md
        .lines()
        .find(|l| l.starts_with("| gpu0 |") && l.contains("MHz"))
        .unwrap();
    assert_eq!(
        gpu,
        "| gpu0 | 4 | 1950–1980 MHz | 2619 MHz | 35–40 °C | sw_power_cap | Gen4 x16 / Gen5 x16 \
         (**below in 1 cases**) | 1 | on |"
    );
    let host = line_starting(&md, "| host |");
    assert_eq!(
        host,
        "| host | 1 | performance | 2400–3100 MHz | madvise | 0 pages | nothing |"
    );
}

fn hash_result(
    simd: hwc_model::SimdPath,
    variant: hwc_model::HashVariant,
    (size, offset): (u64, Option<u32>),
    t: u32,
    v: f64,
) -> CaseResult {
    m(
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
        v,
        size < 256 * MIB,
    )
}

#[test]
fn the_cpu_section_shows_the_measured_xxh3_table_and_names_a_path_not_measured() {
    use hwc_model::{HashVariant as V, SimdPath as S};
    let p = profile_with(false, |rs| {
        let k100 = 100 << 10;
        rs.push(hash_result(S::Scalar, V::Xxh3_64, (k100, Some(0)), 1, 7.25));
        rs.push(hash_result(S::Avx2, V::Xxh3_64, (k100, Some(0)), 1, 30.5));
        rs.push(hash_result(S::Avx2, V::Xxh3_64, (k100, Some(16)), 1, 26.5));
        rs.push(hash_result(S::Avx2, V::Xxh3_128, (k100, Some(0)), 1, 28.0));
        rs.push(hash_result(
            S::Avx2,
            V::Xxh3_128,
            (hwc_model::GIB, None),
            2,
            19.0,
        ));
    });
    let mut p = p;
    p.cpu_features.xxh3_paths = vec![S::Scalar, S::Sse2, S::Avx2];
    let r = render(&p);
    let cpu = &r[r.find("CPU features").unwrap()..];
    let cpu = &cpu[..cpu.find("\n## ").unwrap()];
    assert!(cpu.contains("xxh3 tier         AVX2 (measured)"), "{cpu}");
    let line = cpu
        .lines()
        .find(|l| l.starts_with("xxh3 throughput"))
        .unwrap();
    assert!(
        line.starts_with("xxh3 throughput   30.5 GB/s measured (median of ")
            && line.ends_with("%), 1 thread, AVX2, XXH3-64, page-aligned 100 KiB blocks"),
        "{line}"
    );
    // Every path and variant on 1 thread by block, then the swept path by thread count: each
    // figure once, with its spread.
    let t = |s: &str| -> Vec<String> { s.split(" | ").map(str::to_string).collect() };
    assert_eq!(
        t(line_starting(cpu, "| path |")),
        t("| path | hash | 100KiB+0B, 1 thread | 100KiB+16B, 1 thread |")
    );
    assert!(line_starting(cpu, "| Scalar | XXH3-64 | 7.25 ±").ends_with("% | — |"));
    let avx2 = line_starting(cpu, "| AVX2 | XXH3-64 | 30.50 ±");
    assert!(
        avx2.contains("% | 26.50 ±") && avx2.ends_with("% |"),
        "{avx2}"
    );
    assert!(line_starting(cpu, "| AVX2 | XXH3-128 | 28.00 ±").ends_with("% | — |"));
    assert!(cpu.contains("AVX2 over the thread sweep:"), "{cpu}");
    assert_eq!(
        t(line_starting(cpu, "| hash | block |")),
        t("| hash | block | 2 thr |")
    );
    assert!(line_starting(cpu, "| XXH3-128 | 1GiB (memory) | 19.00 ±").ends_with("% |"));
    assert_eq!(cpu.matches("19.00").count(), 1, "{cpu}");
    assert!(cpu.contains("Recommended hash: **XXH3_128bits (AVX2 path)**. Rule: XXH3-128 if"));
    assert!(
        cpu.contains("Not measured, though the flags allow them: SSE2"),
        "{cpu}"
    );
}

#[test]
fn appendix_b_lists_each_placement_once_and_appendix_a_names_each_measurements() {
    let p = profile_with(false, |rs| {
        let pl = rs[1].measurement.placement.as_mut().unwrap();
        pl.cpus = Some("0-1".into());
        pl.verified = false;
        pl.detail = "dst not checked".into();
        rs[2].measurement.placement = None;
    });
    let md = render(&p);
    let b = &md[md.find("## Appendix B").unwrap()..];
    let rows: Vec<&str> = b
        .lines()
        .filter(|l| l.starts_with("| P") && !l.starts_with("| Placement"))
        .collect();
    let others = p.measurements.len() - 2;
    assert_eq!(
        rows,
        [
            format!(
                "| P1 | 0 | {others} | src on node 0 (256 pages checked); dst on node 0 (256 \
                 pages checked) |"
            ),
            "| P2 | 0-1 | 1 | **not verified**: dst not checked |".to_string(),
        ],
        "{b}"
    );
    let flags = |i: usize| appendix_row(&md, &p.measurements[i].key).1["Placement, flags"].clone();
    assert_eq!(flags(0), "P1, cache");
    assert_eq!(flags(1), "P2, cache, placement unverified");
    assert_eq!(flags(2), "");
}

#[test]
fn placements_that_differ_only_in_their_cpus_are_numbered_in_a_run_and_share_a_row() {
    let p = profile_with(false, |rs| {
        // The first and third share a detail on different CPUs; the second's differs.
        let mut set = |i: usize, cpus: &str, detail: &str| {
            let pl = rs[i].measurement.placement.as_mut().unwrap();
            pl.cpus = Some(cpus.into());
            pl.detail = detail.into();
        };
        set(0, "0", "threads pinned");
        set(1, "0", "working set");
        set(2, "0-1", "threads pinned");
        for r in rs.iter_mut().skip(3) {
            r.measurement.placement = None;
        }
    });
    let md = render(&p);
    let b = &md[md.find("## Appendix B").unwrap()..];
    let rows: Vec<&str> = b.lines().filter(|l| l.starts_with("| P")).collect();
    assert_eq!(
        rows[1..],
        [
            "| P1–P2 | 0; 0-1 | 2 | threads pinned |",
            "| P3 | 0 | 1 | working set |"
        ],
        "{b}"
    );
    // Appendix A names each measurement's placement by its number in that order.
    let named = |i: usize| appendix_row(&md, &p.measurements[i].key).1["Placement, flags"].clone();
    assert!(named(0).starts_with("P1"), "{}", named(0));
    assert!(named(1).starts_with("P3"), "{}", named(1));
    assert!(named(2).starts_with("P2"), "{}", named(2));
}

#[test]
fn provenance_shows_a_settings_short_note_and_leaves_a_long_one_to_the_profile() {
    let mut p = profile(false);
    let long = "x".repeat(super::PROVENANCE_NOTE_MAX_CHARS + 1);
    p.provenance.environment.insert(
        "a.short".into(),
        hwc_model::Setting::about("1", "short note"),
    );
    p.provenance.environment.insert(
        "a.long".into(),
        hwc_model::Setting::about("2", long.clone()),
    );
    let md = render(&p);
    let prov = &md[md.find("## Provenance").unwrap()..];
    assert!(prov.contains("| a.short | 1 (short note) |"), "{prov}");
    assert!(
        prov.contains("| a.long | 2 (note in the profile) |"),
        "{prov}"
    );
    assert!(!prov.contains(&long));
    assert!(
        prov.contains("*note in the profile*: the setting's note is in `provenance.environment`")
    );
    // Without a long note, no footnote.
    assert!(!render(&profile(false)).contains("*note in the profile*"));
}

#[test]
fn a_waivers_remedy_is_listed_once_in_section_8_and_its_path_points_there() {
    let mut p = profile(true);
    let hint = "build and install the user library from https://github.com/NVIDIA/gdrcopy";
    for (path, scope) in [
        (PathId::Gdrcopy, None),
        (PathId::NvmeBar1, Some("gpu0 BAR1")),
    ] {
        p.waived.push(Waiver {
            path,
            engine: None,
            scope: scope.map(String::from),
            covers: None,
            reason: "GDRCopy's user library (libgdrapi.so.2) was not found".into(),
            hint: Some(hint.into()),
        });
    }
    let md = render(&p);
    assert_eq!(md.matches(hint).count(), 1, "{md}");
    let obs = between(&md, "## 8. Observations", "## 1. Platform");
    assert!(
        obs.contains(&format!("To measure gdrcopy, nvme_bar1: {hint}")),
        "{obs}"
    );
    let path5 = between(&md, "### Path 5", "### Path 6");
    assert!(
        path5.contains(
            "- **Waived** — GDRCopy's user library (libgdrapi.so.2) was not found (how to measure \
             it: §8)"
        ),
        "{path5}"
    );
    // The command line's text keeps the remedy.
    assert!(crate::waiver_text(&p.waived[p.waived.len() - 1]).ends_with(hint));
}
