//! The CUDA backend through the runner on real GPUs: every GPU the driver lists, the
//! representative cases of each path, host buffers on the GPU's own NUMA node; with two GPUs or
//! more, also one run whose cases alternate between the first two. Where there is no GPU (CI)
//! it prints `SKIPPED: no CUDA device (<reason>)` and passes.
//!
//! Run on a GPU machine with `--nocapture` to see the figures.

use std::sync::atomic::AtomicBool;

use hwc_bench_cuda::{
    probe, CudaBackend, D2D_SEARCH_MAX_BYTES, D2D_SEARCH_PLACEMENTS, MAX_COPIES,
    PLACEMENT_SEARCH_MAX_BYTES, SEARCH_PLACEMENTS, TARGET_REP_SECONDS,
};
use hwc_model::v1::CaseParams;
use hwc_model::{
    pcie_speed_of_gen, pcie_theoretical_gbps, Case, GpuCopySpec, HostMemory, PathId, Reps,
};
use hwc_runner::{run_case, CaseOutcome, Engine, Idle, NoObserver, RunOptions};

const MIB: u64 = 1 << 20;

/// Batches per repetition and copies per stream per batch, from the CUDA backend's note
/// (`M batches of K copies per stream per repetition, …`, `K copies per stream per …` or
/// `1 copy per stream per …`).
fn batches_and_copies(notes: &[String]) -> (u64, u64) {
    let note = notes
        .iter()
        .find(|n| n.contains(" per stream per repetition"))
        .expect("a note on the copies per repetition");
    let words: Vec<&str> = note.split(' ').collect();
    let num = |i: usize| words[i].parse::<u64>().expect("a count");
    if words[1] == "batches" {
        (num(0), num(3))
    } else {
        (1, num(0))
    }
}

/// A case as the planner writes it (with its spread limit), with 10 timed repetitions; its
/// spec from version 1 style parameters (host buffers on `src_node`, or `dst_node` for D2H).
fn case(gpu: &str, name: &str, path: PathId, size: u64, streams: u32, extra: CaseParams) -> Case {
    let params = CaseParams {
        gpu: Some(gpu.into()),
        size_bytes: Some(size),
        streams: Some(streams),
        ..extra
    };
    let cell = format!("{name}/{gpu}/{size}/s{streams}");
    let spec = params.spec(path, &cell);
    let g = spec.gpu_copy().expect("a GPU copy").clone();
    Case {
        key: cell.clone(),
        path,
        engine: hwc_bench_cuda::ENGINE,
        cell,
        spec,
        reps: Reps {
            warmup: 2,
            timed: 10,
            retry_above_spread_pct: hwc_plan::gpu_copy_retry_limit(path, &g),
            steady: None,
        },
    }
}

/// The GPU copy spec of a case.
fn gs(c: &Case) -> &GpuCopySpec {
    c.spec.gpu_copy().expect("a GPU copy")
}

fn host(memory: &str, node: Option<u32>) -> CaseParams {
    CaseParams {
        host_memory: Some(memory.into()),
        src_node: node,
        dst_node: node,
        cpu_node: node,
        ..CaseParams::default()
    }
}

/// The NUMA node sysfs gives the GPU at `bdf`, else node 0 (a one-node machine's).
fn gpu_node(bdf: &str) -> u32 {
    std::fs::read_to_string(format!(
        "/sys/bus/pci/devices/{}/numa_node",
        bdf.to_lowercase()
    ))
    .ok()
    .and_then(|t| t.trim().parse::<u32>().ok())
    .unwrap_or(0)
}

/// The test's cases on `gpu`, host buffers on `node` (the GPU's own) unless unplaced.
fn cases_for(gpu: &str, node: u32) -> Vec<Case> {
    let mut v = Vec::new();
    for size in [128 << 10, 4 * MIB, 256 * MIB] {
        v.push(case(
            gpu,
            "h2d",
            PathId::H2d,
            size,
            1,
            host("pinned", Some(node)),
        ));
        v.push(case(
            gpu,
            "d2h",
            PathId::D2h,
            size,
            1,
            host("pinned", Some(node)),
        ));
    }
    v.push(case(
        gpu,
        "h2d",
        PathId::H2d,
        4 * MIB,
        4,
        host("pinned", Some(node)),
    ));
    v.push(case(
        gpu,
        "d2h",
        PathId::D2h,
        4 * MIB,
        4,
        host("pinned", None),
    ));
    // Small D2H on two streams: does not search placement (one stream does).
    v.push(case(
        gpu,
        "d2h",
        PathId::D2h,
        MIB,
        2,
        host("pinned", Some(node)),
    ));
    v.push(case(
        gpu,
        "h2d-pageable",
        PathId::H2d,
        4 * MIB,
        1,
        host("pageable", Some(node)),
    ));
    v.push(case(
        gpu,
        "d2h-pageable",
        PathId::D2h,
        4 * MIB,
        1,
        host("pageable", None),
    ));
    for dir in ["h2d", "d2h"] {
        for size in [512 << 10, 64 * MIB] {
            let params = CaseParams {
                direction: Some(dir.into()),
                ..host("pinned", Some(node))
            };
            v.push(case(
                gpu,
                &format!("duplex-{dir}"),
                PathId::Duplex,
                size,
                1,
                params,
            ));
        }
    }
    for (size, streams) in [(MIB, 2), (16 * MIB, 1), (256 * MIB, 1), (4 * MIB, 4)] {
        v.push(case(
            gpu,
            "d2d",
            PathId::D2d,
            size,
            streams,
            CaseParams::default(),
        ));
    }
    v
}

#[test]
fn copies_on_every_gpu() {
    let probe = match probe() {
        Ok(p) => p,
        Err(reason) => {
            println!("SKIPPED: no CUDA device ({reason})");
            return;
        }
    };
    println!("driver {}", probe.driver_version);
    for (k, v) in &probe.environment {
        println!("probe {k} = {v}");
    }
    for d in &probe.devices {
        println!("device {d:?}");
    }
    let gpus: Vec<(String, String)> = probe
        .devices
        .iter()
        .enumerate()
        .map(|(i, d)| (format!("gpu{i}"), d.pci_bdf.clone()))
        .collect();
    let mut backends: Vec<Box<dyn Engine>> = vec![Box::new(CudaBackend::new(&probe, &gpus))];
    let options = RunOptions {
        allow_contended: false,
        wall_tolerance: Some(0.02),
    };
    let cancel = AtomicBool::new(false);
    let mut problems = Vec::new();
    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>7} {:>3} {:>8}  notes",
        "case", "median", "min", "max", "spread%", "n", "cold"
    );
    for (gpu, device) in gpus.iter().map(|g| &g.0).zip(&probe.devices) {
        // Per duplex case: the case whose repetitions it was timed in, if another's, and
        // where it was measured.
        let mut duplex: Vec<(String, Option<String>, String, Vec<f64>)> = Vec::new();
        let node = gpu_node(&device.pci_bdf);
        let list = cases_for(gpu, node);
        assert_eq!(
            backends[0].idle_check(&list[0]),
            Idle::Idle,
            "{gpu} must be idle before the test"
        );
        let link_gbps = device.nvml.as_ref().and_then(|f| {
            Some(pcie_theoretical_gbps(
                pcie_speed_of_gen(f.link_gen_max?)?,
                f.link_width_max?,
            ))
        });
        // As a profile runs them: announced first (the pools size each buffer once), both
        // directions of a duplex size timed in the same repetitions.
        let out = hwc_runner::run(&list, &mut backends, &options, &mut NoObserver, &cancel);
        not_all_measured(gpu, &out, list.len(), &mut problems);
        for r in &out.results {
            let Some(c) = list.iter().find(|c| c.key == r.measurement.key) else {
                problems.push(format!("{}: not a case of the test", r.measurement.key));
                continue;
            };
            let m = &r.measurement;
            let g = &m.gbps;
            println!(
                "{:<34} {:>9.3} {:>9.3} {:>9.3} {:>7.2} {:>3} {:>8.3}  {}",
                c.key,
                g.median,
                g.min,
                g.max,
                g.spread_pct,
                g.n,
                m.cold_gbps.unwrap_or(f64::NAN),
                m.notes.join(" | ")
            );
            if let Some(p) = &m.placement {
                println!("{:<34} placement: {p:?}", "");
            }
            let pinned = gs(c).host_memory == Some(HostMemory::Pinned);
            let pcie = c.path != PathId::D2d;
            if pcie {
                if let Some(link) = link_gbps {
                    if g.max > link {
                        problems.push(format!(
                            "{}: {:.2} GB/s exceeds the link's {link:.2}",
                            c.key, g.max
                        ));
                    }
                }
            }
            // Every pinned copy that reads host memory (H2D, duplex) gathers about
            // 20 ms of copying per repetition (at least two thirds of it at the
            // calibration's rate; half is the bound here, the rate moving in spells):
            // small ones in several latched batches, as the note says; D2H and D2D
            // copies keep one batch a repetition. The note's counts are the bytes.
            let (batches, k) = batches_and_copies(&m.notes);
            let streams = u64::from(gs(c).streams);
            let size = gs(c).size_bytes;
            let reads_host = pinned && matches!(c.path, PathId::H2d | PathId::Duplex);
            if m.bytes_per_rep != batches * k * size * streams
                || k > u64::from(MAX_COPIES)
                || (batches > 1 && !reads_host)
            {
                problems.push(format!(
                    "{}: {batches} batches of {k} copies, {} bytes a repetition",
                    c.key, m.bytes_per_rep
                ));
            }
            if reads_host {
                let rep_seconds = m.bytes_per_rep as f64 / (g.median * 1e9);
                if rep_seconds < 0.5 * TARGET_REP_SECONDS {
                    problems.push(format!(
                        "{}: a repetition lasts {:.1} ms",
                        c.key,
                        rep_seconds * 1e3
                    ));
                }
            }
            // The case's spread limit reaches its measurement; a case timed in
            // several windows had a limit, and says whether a window kept to it.
            if m.spread_limit_pct != c.reps.retry_above_spread_pct {
                problems.push(format!("{}: spread limit not recorded", c.key));
            }
            if let Some(w) = m.evidence.windows.as_ref().filter(|w| w.timed > 1) {
                let n = &w.detail;
                println!("{:<34} {n}", "");
                let said_unsteady = n.contains("an unsteady figure");
                if c.reps.retry_above_spread_pct.is_none() || said_unsteady != m.unsteady() {
                    problems.push(format!("{}: windows note {n}", c.key));
                }
            }
            if pinned && gs(c).size_bytes >= 4 * MIB {
                if let Some(d) = &m.evidence.wall_clock_disagreement {
                    problems.push(format!("{}: {d}", c.key));
                }
                if g.median < 1.0 {
                    problems.push(format!("{}: implausible {:.3} GB/s", c.key, g.median));
                }
            }
            if gs(c).host_node == Some(node) && c.path != PathId::D2d {
                let verified = m.placement.as_ref().is_some_and(|p| p.verified);
                if !verified {
                    problems.push(format!("{}: node {node} placement not verified", c.key));
                }
            }
            // Small pinned one-stream duplex and D2H cases, and one-stream D2D
            // cases of up to 16 MiB, try the placements, then the 3 fastest again
            // (and their data check ran at the one measured); no other case does.
            let small = gs(c).size_bytes <= PLACEMENT_SEARCH_MAX_BYTES as u64
                && (gs(c).host_memory == Some(HostMemory::Pinned))
                && gs(c).streams == 1;
            let searched = match c.path {
                PathId::Duplex | PathId::D2h if small => Some(SEARCH_PLACEMENTS.len()),
                PathId::D2d
                    if gs(c).streams == 1 && gs(c).size_bytes <= D2D_SEARCH_MAX_BYTES as u64 =>
                {
                    Some(D2D_SEARCH_PLACEMENTS.len())
                }
                _ => None,
            };
            let search = m.evidence.placement_search.as_ref();
            let note = search.map(|s| s.detail.as_str());
            if c.path == PathId::Duplex {
                let at = search.map_or("", |s| s.chosen.as_str());
                let lead = m.notes.iter().find_map(|n| {
                    n.strip_prefix("timed in the same repetitions as ")
                        .and_then(|rest| rest.split(',').next())
                        .map(String::from)
                });
                duplex.push((c.key.clone(), lead, at.to_string(), r.samples_gbps.clone()));
            }
            match (searched, note) {
                (Some(k), Some(_))
                    if search.is_some_and(|s| s.tried as usize == k && s.finalists == 3) => {}
                (Some(_), n) => problems.push(format!("{}: placement note {n:?}", c.key)),
                (None, Some(n)) => {
                    problems.push(format!("{}: unexpected placement note {n}", c.key))
                }
                (None, None) => {}
            }
            // The host buffers' pages: small where the case searched, huge elsewhere.
            if gs(c).host_memory == Some(HostMemory::Pinned) {
                let want = if searched.is_some() {
                    "host buffers in small pages"
                } else {
                    "host buffers in transparent huge pages"
                };
                if !m.notes.iter().any(|n| n.starts_with(want)) {
                    problems.push(format!("{}: no note \"{want}\"", c.key));
                }
            }
            if c.path == PathId::D2d {
                let expect = hwc_bench_cuda::l2_resident(
                    gs(c).size_bytes,
                    gs(c).streams,
                    device.l2_cache_bytes,
                );
                if m.cache_resident != expect {
                    problems.push(format!("{}: cache_resident should be {expect}", c.key));
                }
            }
        }
        // Each duplex size ran once: the D2H case was timed in the H2D case's repetitions
        // (planned first), at the same placement (the 512 KiB pair searched, the 64 MiB one
        // did not), and with the same repetitions' bytes.
        for size in [512 << 10, 64 * MIB] {
            let key = |dir: &str| format!("duplex-{dir}/{gpu}/{size}/s1");
            let of = |k: &str| duplex.iter().find(|d| d.0 == k);
            // The D2H figure is its own flow's: its repetitions do not read as the H2D ones.
            match (of(&key("h2d")), of(&key("d2h"))) {
                (Some((_, None, a, ha)), Some((_, Some(lead), b, hb)))
                    if *lead == key("h2d")
                        && a == b
                        && (size > PLACEMENT_SEARCH_MAX_BYTES as u64) == a.is_empty()
                        && ha != hb => {}
                other => problems.push(format!("{gpu}: duplex {size} pair {other:?}")),
            }
        }
        // A GPU name the backend was not given is waived, not a crash.
        let stray = case("gpu99", "h2d", PathId::H2d, MIB, 1, host("pinned", None));
        assert!(matches!(
            run_case(&stray, backends[0].as_mut(), &options, &cancel),
            CaseOutcome::Waived(_)
        ));
    }
    if gpus.len() >= 2 {
        alternating(
            &gpus,
            &probe,
            &mut backends,
            &options,
            &cancel,
            &mut problems,
        );
    }
    for (k, v) in backends[0].environment() {
        println!("env {k} = {v}");
    }
    assert!(problems.is_empty(), "problems:\n{}", problems.join("\n"));
}

/// A problem for every case of a run that was waived or failed, and for a count short of `planned`.
fn not_all_measured(
    label: &str,
    out: &hwc_runner::RunOutcome,
    planned: usize,
    problems: &mut Vec<String>,
) {
    for w in &out.waived {
        problems.push(format!("{label}: {:?} waived: {}", w.scope, w.reason));
    }
    for f in &out.failures {
        problems.push(format!("{label}: {} failed: {}", f.key, f.error));
    }
    if out.results.len() != planned {
        problems.push(format!(
            "{label}: {} of {planned} cases measured",
            out.results.len()
        ));
    }
}

/// Several GPUs: one run whose cases alternate between the first two GPUs (each case binds its
/// GPU's context after the other's), duplex pairs included. Every case is measured, and each
/// duplex D2H figure was timed in its own GPU's H2D case's repetitions.
fn alternating(
    gpus: &[(String, String)],
    probe: &hwc_bench_cuda::CudaProbe,
    backends: &mut [Box<dyn Engine>],
    options: &RunOptions,
    cancel: &AtomicBool,
    problems: &mut Vec<String>,
) {
    let pair: Vec<(&str, u32)> = gpus[..2]
        .iter()
        .zip(&probe.devices)
        .map(|((g, _), d)| (g.as_str(), gpu_node(&d.pci_bdf)))
        .collect();
    let mut list = Vec::new();
    for (name, path, size, dir) in [
        ("alt-h2d", PathId::H2d, 4 * MIB, None),
        ("alt-d2h", PathId::D2h, 4 * MIB, None),
        ("alt-duplex-h2d", PathId::Duplex, 512 << 10, Some("h2d")),
        ("alt-duplex-d2h", PathId::Duplex, 512 << 10, Some("d2h")),
        ("alt-d2d", PathId::D2d, 16 * MIB, None),
    ] {
        for &(gpu, node) in &pair {
            let extra = match path {
                PathId::D2d => CaseParams::default(),
                _ => CaseParams {
                    direction: dir.map(String::from),
                    ..host("pinned", Some(node))
                },
            };
            list.push(case(gpu, name, path, size, 1, extra));
        }
    }
    let out = hwc_runner::run(&list, backends, options, &mut NoObserver, cancel);
    not_all_measured("alternating", &out, list.len(), problems);
    for r in &out.results {
        let m = &r.measurement;
        println!(
            "{:<34} {:>9.3} ±{:.2} % N={}",
            m.key, m.gbps.median, m.gbps.spread_pct, m.gbps.n
        );
        if let Some(gpu) = m.key.strip_prefix("alt-duplex-d2h/") {
            let lead = format!("timed in the same repetitions as alt-duplex-h2d/{gpu}");
            if !m.notes.iter().any(|n| n.starts_with(&lead)) {
                problems.push(format!("alternating: {} not timed with {lead}", m.key));
            }
        }
    }
}
