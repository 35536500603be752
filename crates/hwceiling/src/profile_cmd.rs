//! `hwceiling profile`: its flags (or `--run-config`) become a run configuration that
//! `hwc_session` probes, plans, runs and writes; this prints the plan, the progress and the
//! closing summary. And `hwceiling report`.

use crate::cli::{ProfileArgs, ReportArgs};
use crate::out::{self, say};
use crate::progress::Progress;
use crate::signals;
use anyhow::{Context, Result};
use hwc_model::profile::Completeness;
use hwc_model::{PathId, Plan, RunConfig};
use hwc_session::{files, RunFiles};
use std::fmt::Write;
use std::path::{Path, PathBuf};

const GIT_REVISION: &str = env!("HWCEILING_GIT_REVISION");

/// The run asked for: from `--run-config`, or from the flags.
fn config(a: &ProfileArgs) -> Result<RunConfig> {
    match &a.run_config {
        None => Ok(a.config()),
        Some(path) => {
            let text = std::fs::read(path)
                .with_context(|| format!("cannot read the run configuration {}", path.display()))?;
            serde_json::from_slice(&text)
                .with_context(|| format!("{} is not a run configuration", path.display()))
        }
    }
}

pub fn run(a: &ProfileArgs) -> Result<i32> {
    let config = config(a)?;
    if a.dry_run {
        let (plan, notes) = hwc_session::plan_only(&config, a.fsroot.as_deref(), &signals::CANCEL)?;
        for n in notes {
            say!("note: {n}");
        }
        out::print(&render_plan(&plan))?;
        return Ok(0);
    }
    let prepared = hwc_session::prepare(&config, GIT_REVISION, &signals::CANCEL)?;
    for n in &prepared.notes {
        say!("note: {n}");
    }
    signals::install();
    let mut progress = Progress::new(prepared.plan.cases.len());
    let done = prepared.run(&mut progress, &signals::CANCEL)?;
    progress.finish();
    if let Some(path) = &a.result_file {
        let json = serde_json::to_vec(&done.written()).context("serialising the result file")?;
        files::replace(path, &json)
            .with_context(|| format!("the run's files are written, but not {}", path.display()))?;
    }
    // The files are written: a summary that cannot be printed is said, not a failed run.
    if let Some(why) = &done.charts_not_drawn {
        say!("hwceiling: warning: no chart drawn: {why}");
    }
    if let Err(e) = out::println(&closing_summary(&done.profile, &done.files, done.charts)) {
        say!(
            "hwceiling: warning: {e}; the run's files are written: {}",
            done.files.profile.display()
        );
    }
    Ok(if done.profile.provenance.interrupted {
        130
    } else {
        0
    })
}

fn closing_summary(p: &hwc_model::Profile, files: &RunFiles, charts: usize) -> String {
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
    if charts > 0 {
        let _ = writeln!(s, "charts   {} ({charts} SVG)", files.charts.display());
    }
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
    // Before any work: the output and its charts folder must not exist yet, whatever kind of
    // file they would be.
    let charts_dir = a.output.as_deref().map(charts_beside);
    if let (Some(path), Some(dir)) = (&a.output, &charts_dir) {
        files::check_new(path)?;
        files::check_new(dir)?;
    }
    let profile = hwc_profile::read_profile(&a.profile)?;
    let (Some(path), Some(dir)) = (&a.output, &charts_dir) else {
        // On standard output, no file to put charts beside: the report without links.
        out::print(&hwc_report::render(&profile))?;
        return Ok(0);
    };
    // Into a file: its charts into a folder beside it, linked, as `profile` writes them.
    let charts = hwc_charts::all(&profile)?;
    let dir_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (links, chart_files) = hwc_session::chart_links(&charts, &dir_name);
    let md = hwc_report::render_with_charts(&profile, &links);
    files::write_charts(dir, &chart_files)?;
    write_report(path, &md).inspect_err(|_| files::remove_charts(dir, &chart_files))?;
    Ok(0)
}

/// The charts folder of a report written to `path`: `<its name without .md>-charts` beside it.
fn charts_beside(path: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    path.with_file_name(format!("{stem}-charts"))
}

fn write_report(path: &Path, md: &str) -> Result<()> {
    Ok(files::write_new(path, md.as_bytes())?)
}

#[cfg(test)]
mod tests {
    use super::{ceiling_line, not_served_over_full};
    use hwc_model::CeilingSource;

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
