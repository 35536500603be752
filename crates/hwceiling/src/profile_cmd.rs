//! `hwceiling profile` (detect → plan → run → render → write) and `hwceiling report`.

use crate::cli::{ProfileArgs, ReportArgs};
use crate::output::{self, RunFiles};
use crate::progress::Progress;
use crate::{detect_cmd, engines, nvme_cmd, signals};
use anyhow::{Context, Result};
use hwc_model::long_tests::NvmeLongTests;
use hwc_model::profile::Completeness;
use hwc_model::{
    Case, CaseResult, Failure, Narrowing, PathId, Plan, Provenance, RunChoices, Selection,
    Topology, Waiver,
};
use hwc_plan::PlanOptions;
use hwc_profile::RunRecord;
use hwc_runner::{CaseOutcome, RunOptions};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

const VERSION: &str = env!("CARGO_PKG_VERSION");
const GIT_REVISION: &str = env!("HWCEILING_GIT_REVISION");

fn plan_options(
    a: &ProfileArgs,
    engines: Vec<hwc_model::EngineStatus>,
    nvme: hwc_plan::NvmePlanOptions,
) -> PlanOptions {
    PlanOptions {
        paths: a.paths.as_ref().map(|p| p.iter().copied().collect()),
        engines,
        selected_engines: a.engines.as_ref().map(|e| e.iter().cloned().collect()),
        root: nix_root(),
        host_threads: a.threads.clone(),
        host_sizes: a.host_sizes.clone(),
        reps_divisor: a.quick.then_some(10),
        version: VERSION.to_string(),
        nvme,
    }
}

/// Each selection the run was given (`--paths`, `--threads`, …), in flag order, with the values
/// as the run's case keys write them and what of the full run's plan on `topo` it leaves out
/// (`None` where that is not known: `--drives` when the NVMe paths were not planned; never for
/// `--paths` and `--target`, which [`hwc_model::Narrowing::judge`] decides alone). A sweep given
/// as a list leaves out the points of the full sweep it lacks, for host sizes the cells (`256MiB
/// sustained` when a larger size moves the sustained cells).
pub(crate) fn selections(
    a: &ProfileArgs,
    topo: &Topology,
    left_out: &nvme_cmd::LeftOutDrives,
) -> Vec<(Selection, Vec<String>, Option<Vec<String>>)> {
    let strings = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<String>>();
    let sweep = |given: &[u64], full: &[u64], show: fn(u64) -> String| {
        (
            strings(&mut given.iter().map(|&x| show(x))),
            Some(strings(
                &mut full.iter().filter(|p| !given.contains(p)).map(|&x| show(x)),
            )),
        )
    };
    let mut out = Vec::new();
    if let Some(p) = &a.paths {
        out.push((
            Selection::Paths,
            strings(&mut p.iter().map(|x| x.to_string())),
            None,
        ));
    }
    if let Some(named) = &a.engines {
        // The engines a full run measures with that the selection leaves out.
        let left: Vec<String> = engines::declarations()
            .into_iter()
            .filter(|d| d.default_on && !named.contains(&d.id))
            .map(|d| d.id.to_string())
            .collect();
        out.push((
            Selection::Engines,
            strings(&mut named.iter().map(|x| x.to_string())),
            Some(left),
        ));
    }
    if let Some(d) = &a.drives {
        out.push((Selection::Drives, d.clone(), left_out.read.clone()));
    }
    if let Some(t) = &a.target {
        out.push((Selection::Target, vec![t.display().to_string()], None));
    }
    let num = |x: u64| x.to_string();
    let widen = |v: &[u32]| v.iter().map(|&x| u64::from(x)).collect::<Vec<u64>>();
    if let Some(t) = &a.threads {
        let (given, left) = sweep(
            &widen(t),
            &widen(&hwc_plan::default_host_threads(topo)),
            num,
        );
        out.push((Selection::Threads, given, left));
    }
    if let Some(sizes) = &a.host_sizes {
        // Cases, not points: the largest size of a list also decides where the streaming
        // kernel and the sustained ceiling go.
        out.push((
            Selection::HostSizes,
            strings(&mut sizes.iter().map(|&b| hwc_model::size_label(b))),
            Some(hwc_plan::host_sizes_left_out(topo, sizes)),
        ));
    }
    if let Some(sizes) = &a.nvme_sizes {
        let (given, left) = sweep(sizes, &hwc_plan::NVME_SIZES, hwc_model::size_label);
        out.push((Selection::NvmeSizes, given, left));
    }
    if let Some(q) = &a.queue_depths {
        let (given, left) = sweep(&widen(q), &widen(&hwc_plan::NVME_QUEUE_DEPTHS), num);
        out.push((Selection::QueueDepths, given, left));
    }
    out
}

/// The run's own account of its completeness, for the provenance: `--quick`, and the
/// selections that narrow it below the full plan on `topo`.
pub(crate) fn run_choices(
    a: &ProfileArgs,
    topo: &Topology,
    left_out: &nvme_cmd::LeftOutDrives,
) -> RunChoices {
    RunChoices {
        quick: a.quick,
        narrowed_by: selections(a, topo, left_out)
            .into_iter()
            .filter_map(|(sel, given, left)| Narrowing::judge(sel, given, left))
            .collect(),
    }
}

/// Every option that shaped the run, for the provenance's record for people (the drives left
/// out: see [`nvme_cmd::LeftOutDrives`]); each selection with what it leaves out of the full
/// plan (`threads_left_out`, …; empty when it leaves out nothing). [`run_choices`] holds what
/// decides completeness, typed.
pub(crate) fn options_map(
    a: &ProfileArgs,
    topo: &Topology,
    left_out: &nvme_cmd::LeftOutDrives,
) -> BTreeMap<String, String> {
    let mut o = BTreeMap::new();
    o.insert("output_dir".into(), a.output_dir.display().to_string());
    for (sel, given, left) in selections(a, topo, left_out) {
        let key = sel.flag().trim_start_matches("--").replace('-', "_");
        o.insert(key.clone(), given.join(","));
        if let Some(left) = left {
            o.insert(format!("{key}_left_out"), left.join(","));
        }
    }
    o.insert("quick".into(), a.quick.to_string());
    o.insert("allow_contended".into(), a.allow_contended.to_string());
    nvme_cmd::options(a, left_out, &mut o);
    o
}

/// The run has root's rights.
pub(crate) fn nix_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub fn run(a: &ProfileArgs) -> Result<i32> {
    let mut topo = detect_cmd::detect(a.fsroot.as_deref())?;
    let wants = |p: PathId| a.paths.as_ref().is_none_or(|ps| ps.contains(&p));
    if a.dry_run {
        // A snapshot is not this machine: plan with this build's engines, probe nothing.
        let status = match a.fsroot {
            Some(_) => engines::declarations()
                .into_iter()
                .map(|decl| hwc_model::EngineStatus {
                    decl,
                    available: Ok(()),
                })
                .collect(),
            None => {
                let mut e = engines::probe(&mut topo, &wants);
                e.status.push(hwc_model::EngineStatus {
                    decl: hwc_bench_nvme::decl(),
                    available: Ok(()),
                });
                e.status
            }
        };
        let nvme = nvme_cmd::prepare(a, &mut topo, a.fsroot.is_none(), &signals::CANCEL)?;
        let plan = hwc_plan::plan(&topo, &plan_options(a, status, nvme.plan));
        print!("{}", render_plan(&plan));
        return Ok(0);
    }
    let started = chrono::Local::now();
    // Every refusal of the request comes before the output folder is made: bad input leaves
    // nothing behind.
    let nvme = nvme_cmd::prepare(a, &mut topo, true, &signals::CANCEL)?;
    output::ensure_writable(&a.output_dir)?;
    let date = started.format("%Y-%m-%d").to_string();
    let files = RunFiles::choose(&a.output_dir, &date)?;
    let gc_settle = nvme.gc_settle;
    let mut engines = engines::probe(&mut topo, &wants);
    engines.push(
        hwc_bench_nvme::decl(),
        nvme.backend
            .map(|b| Box::new(b) as Box<dyn hwc_runner::Engine>)
            .ok_or_else(|| ("the NVMe engine was not set up".to_string(), None)),
    );
    let declared = engines.declarations();
    let plan = hwc_plan::plan(&topo, &plan_options(a, engines.status, nvme.plan));
    let mut backends = engines.list;

    let mut provenance = Provenance {
        tool: "hwceiling".into(),
        version: VERSION.into(),
        git_revision: GIT_REVISION.into(),
        hostname: topo.platform.hostname.clone(),
        kernel: topo.platform.kernel.clone(),
        os: topo.platform.os.clone(),
        started_at: started.to_rfc3339(),
        finished_at: String::new(),
        date,
        // Lossy: an argument need not be UTF-8 (a folder name, say), and the record is text.
        command_line: std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" "),
        options: options_map(a, &topo, &nvme.left_out),
        environment: BTreeMap::new(),
        interrupted: false,
        run: Some(run_choices(a, &topo, &nvme.left_out)),
    };

    signals::install();
    let save_partial = |outcomes: &[CaseOutcome]| {
        let (results, waived, failures) = partition_outcomes(outcomes);
        let record = record(
            &provenance,
            &topo,
            &plan,
            results,
            failures,
            waived,
            Vec::new(),
        );
        if let Ok(json) = serde_json::to_vec_pretty(&record) {
            // Best effort: the final files are what matter; a failed update is retried next case.
            let _ = output::replace(&files.partial, &json);
        }
    };
    let mut progress = Progress::new(plan.cases.len(), Box::new(save_partial));
    let options = RunOptions {
        allow_contended: a.allow_contended,
        wall_tolerance: Some(0.02),
    };
    // The gc-settle cases are a protocol of their own: they run after the runner's cases.
    let (gc_cases, runner_cases): (Vec<Case>, Vec<Case>) = plan
        .cases
        .iter()
        .cloned()
        .partition(hwc_bench_nvme::is_gc_settle);
    let mut outcome = hwc_runner::run(
        &runner_cases,
        &mut backends,
        &options,
        &mut progress,
        &signals::CANCEL,
    );
    let gc_records = nvme_cmd::run_gc_settle(
        &gc_cases,
        gc_settle.as_ref(),
        &mut progress,
        &mut outcome,
        &signals::CANCEL,
    );
    progress.finish();
    drop(progress);

    provenance.finished_at = chrono::Local::now().to_rfc3339();
    provenance.interrupted = outcome.interrupted;
    provenance.environment = outcome.environment.clone();
    // Pinned GPU buffers (but those of small copies that search placement) and host RAM
    // copies both use transparent huge pages: a fact of the
    // machine measured (a real profile never has --fsroot), recorded for every run, not only
    // GPU ones (`compare` lists it when two profiles differ).
    const THP: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
    if let Ok(thp) = std::fs::read_to_string(THP) {
        provenance
            .environment
            .insert("host.transparent_hugepage".into(), thp.trim().into());
    }
    let mut profile = hwc_profile::build(
        &topo,
        &plan,
        &outcome.results,
        &outcome.waived,
        &outcome.failures,
        &declared,
        provenance.clone(),
    );
    hwc_profile::nvme::merge_long_tests(&mut profile.nvme, &gc_records);
    let raw = record(
        &provenance,
        &topo,
        &plan,
        outcome.results,
        outcome.failures,
        outcome.waived,
        profile.nvme.long_tests.clone(),
    );
    let yaml = hwc_profile::to_yaml(&profile)?;
    let markdown = hwc_report::render(&profile);
    let json = serde_json::to_vec_pretty(&raw).context("serialising the raw record")?;
    // All three or none; what was measured stays in the running record then, if it is there.
    output::write_all_new(&[
        (&files.raw, &json),
        (&files.profile, yaml.as_bytes()),
        (&files.report, markdown.as_bytes()),
    ])
    .map_err(|e| match files.partial.is_file() {
        true => e.context(format!(
            "no profile written; the cases measured are in {}",
            files.partial.display()
        )),
        false => e,
    })?;
    std::fs::remove_file(&files.partial).ok();
    if let Some(path) = &a.result_file {
        let written = hwc_model::RunWritten {
            profile: files.profile.clone(),
            report: files.report.clone(),
            raw: files.raw.clone(),
            interrupted: profile.provenance.interrupted,
        };
        let json = serde_json::to_vec(&written).context("serialising the result file")?;
        output::replace(path, &json)
            .with_context(|| format!("the run's files are written, but not {}", path.display()))?;
    }

    println!("{}", closing_summary(&profile, &files));
    Ok(if profile.provenance.interrupted {
        130
    } else {
        0
    })
}

fn partition_outcomes(outcomes: &[CaseOutcome]) -> (Vec<CaseResult>, Vec<Waiver>, Vec<Failure>) {
    let (mut r, mut w, mut f) = (Vec::new(), Vec::new(), Vec::new());
    for o in outcomes {
        match o {
            CaseOutcome::Measured(x) => r.push(x.as_ref().clone()),
            CaseOutcome::Waived(x) => w.push(x.as_ref().clone()),
            CaseOutcome::Failed(x) => f.push(x.clone()),
        }
    }
    (r, w, f)
}

fn record(
    provenance: &Provenance,
    topo: &Topology,
    plan: &Plan,
    results: Vec<CaseResult>,
    failures: Vec<Failure>,
    waived: Vec<Waiver>,
    nvme_long_tests: Vec<NvmeLongTests>,
) -> RunRecord {
    RunRecord {
        schema_version: hwc_model::SCHEMA_VERSION,
        provenance: provenance.clone(),
        topology: topo.clone(),
        plan: plan.clone(),
        results,
        failures,
        waived,
        nvme_long_tests,
    }
}

fn closing_summary(p: &hwc_model::Profile, files: &RunFiles) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} measured, {} waived, {} failed{}",
        p.measurements.len(),
        p.waived.len(),
        p.failures.len(),
        if p.provenance.interrupted {
            " (interrupted)"
        } else {
            ""
        }
    );
    for (k, v) in &p.ceilings {
        let _ = writeln!(s, "  {}", ceiling_line(p, k, *v));
    }
    for w in &p.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    if let Some(n) = not_served_over_full(p) {
        let _ = writeln!(s, "note: {n}");
    }
    let _ = writeln!(s, "report   {}", files.report.display());
    let _ = writeln!(s, "profile  {}", files.profile.display());
    let _ = write!(s, "raw      {}", files.raw.display());
    s
}

/// For a run that is not complete (`--quick`, interrupted, or narrowed by a selection): that
/// `hwceiling serve` keeps serving a complete profile of the folder over it.
fn not_served_over_full(p: &hwc_model::Profile) -> Option<String> {
    let c = Completeness::of(p);
    (!c.complete()).then(|| {
        format!(
            "this profile is of {}: `hwceiling serve` does not serve it in place of a complete \
             profile of the same folder (docs/serve.md)",
            c.describe()
        )
    })
}

/// One ceiling with where it comes from (by key, from the profile's `ceiling_records`): a
/// measurement's median with its spread and count, or how it was derived from measured medians
/// (penalties, min of two paths, knees, crossovers).
fn ceiling_line(p: &hwc_model::Profile, key: &str, value: f64) -> String {
    use hwc_model::CeilingOrigin;
    let counted = p
        .ceiling_record(key)
        .is_some_and(|r| r.meta.unit != hwc_model::Unit::Gbps);
    let shown = if counted {
        format!("{value:>12.0}")
    } else {
        format!("{value:>12.2}")
    };
    let source = match p.ceiling_source(key) {
        Some(CeilingOrigin::Measured(m)) => format!(
            "median, ±{:.1} %, N={} ({})",
            m.gbps.spread_pct, m.gbps.n, m.key
        ),
        Some(CeilingOrigin::Derived { how: Some(how), .. }) => format!("derived: {how}"),
        Some(CeilingOrigin::Derived { how: None, .. }) => {
            "derived from measured medians (see the report)".to_string()
        }
        Some(CeilingOrigin::Unknown) | None => {
            "source unknown (the profile's ceiling_records do not say)".to_string()
        }
    };
    format!("{key:<40} {shown}  {source}")
}

/// The plan as text: per path, its cases (with repetitions) or its waivers.
pub fn render_plan(plan: &Plan) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} case(s) planned, {} waiver(s)\n",
        plan.cases.len(),
        plan.waived.len()
    );
    for path in PathId::ALL {
        let cases: Vec<_> = plan.cases_of(path).collect();
        let waived: Vec<_> = plan.waivers_of(path).collect();
        if cases.is_empty() && waived.is_empty() {
            continue;
        }
        let _ = writeln!(s, "{} — {} case(s)", path.title(), cases.len());
        for c in cases {
            let _ = writeln!(
                s,
                "  {:<52} warm-up {:>3}, timed {:>3}",
                c.key, c.reps.warmup, c.reps.timed
            );
        }
        for w in waived {
            let _ = writeln!(s, "  waived: {}", hwc_report::waiver_text(w));
        }
    }
    s
}

pub fn report(a: &ReportArgs) -> Result<i32> {
    // Before any work: the output must not exist yet, whatever kind of file it would be.
    if let Some(path) = &a.output {
        output::check_new(path)?;
    }
    let profile = hwc_profile::read_profile(&a.profile)?;
    let md = hwc_report::render(&profile);
    match &a.output {
        Some(path) => write_report(path, &md)?,
        None => print!("{md}"),
    }
    Ok(0)
}

fn write_report(path: &Path, md: &str) -> Result<()> {
    output::write_new(path, md.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::{ceiling_line, not_served_over_full};
    use crate::engines::merge_cuda_facts;
    use hwc_model::CeilingSource;

    #[test]
    fn cuda_ordinals_are_matched_to_gpus_by_pci_address_not_by_order() {
        // sysfs lists gpu0 at 0000:41:00.0 and gpu1 at 0000:81:00.0; the driver enumerates
        // them the other way round (CUDA's default order is not the PCI order).
        let gpu = |index: u32, bdf: &str, node: u32| hwc_model::topology::Gpu {
            index,
            cuda_index: None,
            pci_bdf: bdf.into(),
            model: None,
            vendor: "0x10de".into(),
            device: "0x2335".into(),
            pcie_gen: None,
            pcie_width: None,
            pcie_max_gen: None,
            pcie_max_width: None,
            bar1_bytes: None,
            bar1_gib: None,
            bars: vec![],
            numa_node: Some(node),
            root: None,
            driver: None,
            memory_bytes: None,
            l2_cache_bytes: None,
        };
        let device = |ordinal: u32, bdf: &str, memory_bytes: u64| hwc_bench_cuda::CudaDevice {
            ordinal,
            pci_bdf: bdf.into(),
            name: "NVIDIA H200".into(),
            memory_bytes,
            l2_cache_bytes: 60 << 20,
            multiprocessors: 132,
            compute_capability: (9, 0),
            copy_engines: 3,
            nvml: None,
        };
        let mut topo = hwc_model::Topology {
            gpus: vec![gpu(0, "0000:41:00.0", 0), gpu(1, "0000:81:00.0", 1)],
            ..Default::default()
        };
        let probe = hwc_bench_cuda::CudaProbe {
            devices: vec![device(0, "0000:81:00.0", 2), device(1, "0000:41:00.0", 1)],
            driver_version: "580.159.04".into(),
            environment: Default::default(),
        };
        merge_cuda_facts(&mut topo, &probe);
        let facts: Vec<_> = topo
            .gpus
            .iter()
            .map(|g| (g.index, g.cuda_index, g.memory_bytes, g.numa_node))
            .collect();
        assert_eq!(
            facts,
            vec![
                (0, Some(1), Some(1), Some(0)),
                (1, Some(0), Some(2), Some(1))
            ]
        );
    }

    #[test]
    fn an_incomplete_run_is_told_serve_keeps_a_complete_profile_over_it() {
        let mut p = hwc_testkit::ceilings_profile("n", "2026-12-02T06:00:00+00:00", &[]);
        assert_eq!(not_served_over_full(&p), None, "a full run gets no note");
        let prov = &mut p.provenance;
        prov.options.insert("quick".into(), "true".into());
        prov.options.insert("paths".into(), "h2d".into());
        prov.interrupted = true;
        let n = not_served_over_full(&p).expect("a note");
        assert!(
            n.starts_with(
                "this profile is of an interrupted --quick run narrowed by --paths h2d: \
                 `hwceiling serve` does not serve it"
            ),
            "{n}"
        );
        let prov = &mut p.provenance;
        prov.options.insert("quick".into(), "false".into());
        prov.interrupted = false;
        let n = not_served_over_full(&p).expect("a note");
        assert!(
            n.starts_with("this profile is of a run narrowed by --paths h2d:"),
            "{n}"
        );
    }

    #[test]
    fn the_closing_summary_names_each_ceilings_source_by_key() {
        let mut p = hwc_testkit::ceilings_profile(
            "n",
            "2026-11-29T19:05:00+00:00",
            &[
                ("warm_gpu0_peak_gbps", 55.5),
                ("warm_gpu0_cross_numa_penalty_gbps", 55.5),
            ],
        );
        p.measurements.push(hwc_testkit::h2d_measurement(
            "h2d/cuda-copy/gpu0/local/4MiB/s1",
            55.5,
            0.5,
            12,
        ));
        p.measurements.push(hwc_testkit::h2d_measurement(
            "h2d/cuda-copy/gpu0/local/256MiB/s1",
            55.5,
            1.8,
            20,
        ));
        // Before ceiling sources (version 1): the first equal median, whatever the ceiling is.
        let old = ceiling_line(
            &hwc_testkit::unsourced(p.clone()),
            "warm_gpu0_peak_gbps",
            55.5,
        );
        assert!(
            old.ends_with("median, ±0.5 %, N=12 (h2d/cuda-copy/gpu0/local/4MiB/s1)"),
            "{old}"
        );
        let p = hwc_testkit::with_sources(
            p,
            &[
                (
                    "warm_gpu0_peak_gbps",
                    CeilingSource::measured("h2d/cuda-copy/gpu0/local/256MiB/s1"),
                ),
                (
                    "warm_gpu0_cross_numa_penalty_gbps",
                    CeilingSource::derived("local minus cross", vec![]),
                ),
            ],
        );
        let line = ceiling_line(&p, "warm_gpu0_peak_gbps", 55.5);
        assert!(
            line.ends_with("median, ±1.8 %, N=20 (h2d/cuda-copy/gpu0/local/256MiB/s1)"),
            "{line}"
        );
        let line = ceiling_line(&p, "warm_gpu0_cross_numa_penalty_gbps", 55.5);
        assert!(line.ends_with("  derived: local minus cross"), "{line}");
    }
}
