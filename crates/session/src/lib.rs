//! One profiling run as a library, probe → plan → run → files: detect the machine, gate the
//! drives, probe every registered engine, plan, run every case and the phases the runner does
//! not drive (gc-settle), and write the report, profile and raw record, saving the running
//! record after each case. `hwceiling profile` calls it with the [`RunConfig`] its flags make;
//! `serve`'s child with the one its request became. This crate prints nothing: what the user
//! should be told comes back as values.
//!
//! ```text
//! let prepared = hwc_session::prepare(&config, &CANCEL)?;   // every refusal happens here
//! for n in &prepared.notes { eprintln!("note: {n}") }
//! let done = prepared.run(&mut progress_bar, &CANCEL)?;     // measures, writes the files
//! ```

pub mod bar;
pub mod bind;
pub mod check;
mod choices;
mod detect;
pub mod engines;
pub mod files;
mod host_state;
mod link_watch;
mod nvme;
mod record;
pub mod room;
pub mod spdk;

pub use check::check;
pub use detect::detect;
pub use files::{FileError, RunFiles};

use hwc_bench_nvme::GcSettleRunner;
use hwc_model::long_tests::NvmeLongTests;
use hwc_model::{
    CaseResult, EngineDecl, Failure, PathId, Plan, Profile, Provenance, RunConfig, Topology, Waiver,
};
use hwc_plan::PlanOptions;
use hwc_profile::RunRecord;
use hwc_runner::{CaseOutcome, Engine, Observer, RunOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Why a run could not start, or could not write its files.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The request cannot run as asked, on this machine; the message says why (in the flags'
    /// words).
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Files(#[from] FileError),
    /// The drives or the target refused (the write gate, a drive that is not there).
    #[error(transparent)]
    Nvme(#[from] hwc_bench_nvme::SetupError),
    #[error(transparent)]
    Profile(#[from] hwc_profile::ProfileError),
    #[error("serialising the raw record: {0}")]
    Json(serde_json::Error),
    /// The run's files could not be written (`cause`: why, with its own cause); what the
    /// running record on disk holds is said, not presumed.
    #[error("{cause}; no profile written: {}", held_text(partial, *held, *finished, *planned))]
    NotWritten {
        cause: String,
        partial: PathBuf,
        /// Cases in the running record on disk; None where there is none.
        held: Option<usize>,
        /// Cases that finished, and that the plan has.
        finished: usize,
        planned: usize,
    },
}

/// What the running record on disk holds, after the run's files could not be written.
fn held_text(partial: &Path, held: Option<usize>, finished: usize, planned: usize) -> String {
    match held {
        Some(n) if n >= finished => format!(
            "every case that finished ({n} of {planned}) is in {}",
            partial.display()
        ),
        Some(n) if n > 0 => format!(
            "{} holds only {n} of the {finished} cases that finished ({planned} planned); the \
             others' figures are only in the lines printed above",
            partial.display()
        ),
        _ => format!(
            "nothing of this run is on disk ({} could not be saved either); its figures are \
             only in the lines printed above",
            partial.display()
        ),
    }
}

/// A file error and its cause on one line (`cannot write X: No space left on device …`).
fn with_cause(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(c) = source {
        s.push_str(": ");
        s.push_str(&c.to_string());
        source = c.source();
    }
    s
}

/// What a run tells its caller as it goes, besides the runner's case events.
pub trait RunObserver: Observer {
    /// The running record could not be saved after a case (`error` set: the first failure, or
    /// one of another cause), or was saved again after failing (`error` None).
    fn record_save(&mut self, _save: &RecordSave) {}
}

impl RunObserver for hwc_runner::NoObserver {}

/// A change in whether the running record is being saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSave {
    pub path: PathBuf,
    /// Why the save failed, on one line with its cause; None: saved again.
    pub error: Option<String>,
    /// Cases in the record as it is on disk now (0: none).
    pub on_disk: usize,
    /// Cases finished so far, and planned.
    pub finished: usize,
    pub planned: usize,
}

/// A run probed and planned, with every refusal of its request behind it: nothing has been
/// measured or written yet.
pub struct Prepared {
    config: RunConfig,
    pub topology: Topology,
    pub plan: Plan,
    /// What the user should be told before the run starts.
    pub notes: Vec<String>,
    engines: Vec<Box<dyn Engine>>,
    declared: Vec<EngineDecl>,
    gc_settle: Option<GcSettleRunner>,
    left_out: nvme::LeftOutDrives,
    /// The build's revision, for the provenance.
    git_revision: String,
}

/// A finished run: its profile and the files it wrote.
pub struct RunDone {
    pub profile: Profile,
    pub files: RunFiles,
    /// How many charts were written into `files.charts` (none: no folder).
    pub charts: usize,
    /// Why no chart was drawn, where drawing one failed.
    pub charts_not_drawn: Option<String>,
}

impl RunDone {
    /// What a program that started the run is told it wrote.
    pub fn written(&self) -> hwc_model::RunWritten {
        hwc_model::RunWritten {
            profile: self.files.profile.clone(),
            report: self.files.report.clone(),
            raw: self.files.raw.clone(),
            interrupted: self.profile.provenance.interrupted,
        }
    }
}

fn plan_options(
    c: &RunConfig,
    engines: Vec<hwc_model::EngineStatus>,
    nvme: hwc_plan::NvmePlanOptions,
    bar: hwc_plan::bar::BarPlanOptions,
) -> PlanOptions {
    PlanOptions {
        paths: c.paths.as_ref().map(|p| p.iter().copied().collect()),
        engines,
        selected_engines: c.engines.as_ref().map(|e| e.iter().cloned().collect()),
        root: is_root(),
        host_threads: c.threads.clone(),
        host_sizes: c.host_sizes.clone(),
        reps_divisor: c.quick.then_some(10),
        fixed_reps: c.fixed_reps,
        version: VERSION.to_string(),
        nvme,
        bar,
    }
}

/// The report's links to `charts` in the folder `dir_name` beside it, and each chart's file
/// (name, contents) to write there.
pub fn chart_links<'c>(
    charts: &'c [hwc_charts::Chart],
    dir_name: &str,
) -> (Vec<hwc_report::ChartLink>, Vec<(String, &'c [u8])>) {
    let links = charts
        .iter()
        .map(|c| hwc_report::ChartLink {
            path: c.path,
            name: c.name.clone(),
            href: format!("{dir_name}/{}", c.file_name()),
        })
        .collect();
    let files = charts
        .iter()
        .map(|c| (c.file_name(), c.svg.as_bytes()))
        .collect();
    (links, files)
}

/// The run has root's rights.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The plan a run of `config` would measure, without measuring or writing anything: on this
/// machine (`fsroot` None: its engines probed, the drives resolved but not opened for writes),
/// or on a snapshot (with this build's engines, nothing probed).
pub fn plan_only(
    config: &RunConfig,
    fsroot: Option<&Path>,
    cancel: &'static AtomicBool,
) -> Result<(Plan, Vec<String>), SessionError> {
    check(config).map_err(SessionError::Refused)?;
    let mut topo = detect(fsroot)?;
    let wants = |p: PathId| config.wants(p);
    let status = match fsroot {
        Some(_) => engines::declarations()
            .into_iter()
            .map(|decl| hwc_model::EngineStatus {
                decl,
                available: Ok(()),
            })
            .collect(),
        None => engines::statuses(&mut topo, &wants, config.spdk_dir.as_deref()),
    };
    let nvme = nvme::prepare(config, &mut topo, fsroot.is_none(), cancel)?;
    let sys = fsroot.map_or_else(|| Path::new("/sys").to_path_buf(), |r| r.join("sys"));
    let bar = bar::options(&sys, &topo, config.p2p_bars.as_deref(), fsroot.is_none())
        .map_err(SessionError::Refused)?;
    let plan = hwc_plan::plan(&topo, &plan_options(config, status, nvme.plan, bar));
    Ok((plan, nvme.notes))
}

/// Check `config`, detect this machine, resolve and gate the drives, prove the output folder
/// writable, probe the engines and plan: every refusal comes here, before anything is measured
/// or written (bad input leaves nothing behind but, at most, the output folder it names).
/// `git_revision` is the build's, for the provenance.
pub fn prepare(
    config: &RunConfig,
    git_revision: &str,
    cancel: &'static AtomicBool,
) -> Result<Prepared, SessionError> {
    check(config).map_err(SessionError::Refused)?;
    // A run that was killed may have left drives bound to a userspace driver or hugepages
    // taken: nothing is measured until `hwceiling restore` has put them back.
    hwc_safety::journal::check_clear(&hwc_safety::journal::dir())
        .map_err(|e| SessionError::Refused(e.to_string()))?;
    let mut topo = detect(None)?;
    let nvme = nvme::prepare(config, &mut topo, true, cancel)?;
    let bar = bar::options(Path::new("/sys"), &topo, config.p2p_bars.as_deref(), true)
        .map_err(SessionError::Refused)?;
    files::ensure_writable(&config.output_dir)?;
    let wants = |p: PathId| config.wants(p);
    let gds_bytes = config
        .nvme_bytes
        .unwrap_or(hwc_engine_cufile::DEFAULT_BYTES_PER_DRIVE);
    let mut engines = engines::probe(&mut topo, &wants, gds_bytes);
    engines.push(
        hwc_bench_nvme::decl(),
        nvme.backend
            .map(|b| Box::new(b) as Box<dyn Engine>)
            .ok_or_else(|| ("the NVMe engine was not set up".to_string(), None)),
    );
    // After the kernel engine: its cases run first, on the drives' kernel driver.
    engines.push(
        hwc_engine_spdk::decl(),
        spdk::perf_engine(config, &topo, nvme.spdk.clone(), cancel),
    );
    #[cfg(feature = "spdk")]
    engines.push(
        hwc_engine_spdk::native::decl(),
        spdk::native_engine(config, &topo, nvme.spdk, cancel),
    );
    let declared = engines.declarations();
    let plan = hwc_plan::plan(&topo, &plan_options(config, engines.status, nvme.plan, bar));
    // A run whose files cannot fit is refused now, not lost at its end.
    room::check_room(&config.output_dir, &plan, &topo, &declared).map_err(SessionError::Refused)?;
    Ok(Prepared {
        config: config.clone(),
        topology: topo,
        plan,
        notes: nvme.notes,
        engines: engines.list,
        declared,
        gc_settle: nvme.gc_settle,
        left_out: nvme.left_out,
        git_revision: git_revision.to_string(),
    })
}

impl Prepared {
    /// Run every case, then the gc-settle phase, and write the run's files (all three or none;
    /// the running record, rewritten after each case, is removed once they are written).
    /// `observer` sees every case as it starts and ends; `cancel` stops the case in flight
    /// (the run then writes what finished, marked interrupted).
    pub fn run(
        self,
        observer: &mut dyn RunObserver,
        cancel: &'static AtomicBool,
    ) -> Result<RunDone, SessionError> {
        let Prepared {
            config,
            topology: topo,
            plan,
            engines: mut backends,
            declared,
            gc_settle,
            left_out,
            git_revision,
            ..
        } = self;
        let started = chrono::Local::now();
        let date = started.format("%Y-%m-%d").to_string();
        let files = RunFiles::choose(&config.output_dir, &date)?;
        let mut provenance = Provenance {
            tool: "hwceiling".into(),
            version: VERSION.into(),
            git_revision,
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
            options: choices::options_map(&config, &topo, &left_out),
            environment: Default::default(),
            interrupted: false,
            run: Some(config.run_choices(&choices::left_out(&config, &topo, &left_out))),
        };

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
            let json = serde_json::to_vec_pretty(&record)
                .map_err(|e| format!("cannot serialise the running record: {e}"))?;
            // A failure is told to the observer (the run goes on; the next case tries again).
            files::replace(&files.partial, &json).map_err(|e| with_cause(&e))
        };
        let planned = plan.cases.len();
        let mut recorder = record::Recorder::new(
            Box::new(save_partial),
            observer,
            files.partial.clone(),
            planned,
        )
        .with_watch(link_watch::LinkWatch::new(
            Path::new("/sys"),
            Path::new("/proc"),
            &topo,
        ));
        let options = RunOptions {
            allow_contended: config.allow_contended,
            wall_tolerance: Some(0.02),
        };
        // The gc-settle cases are a procedure of their own, run after the engines' cases.
        let mut gc_settle = gc_settle;
        let mut procedures: Vec<&mut dyn hwc_runner::Procedure> = gc_settle
            .iter_mut()
            .map(|g| g as &mut dyn hwc_runner::Procedure)
            .collect();
        let outcome = hwc_runner::run_with(
            &plan.cases,
            &mut backends,
            &mut procedures,
            &options,
            &mut recorder,
            cancel,
        );
        let on_disk = recorder.on_disk();
        let watched = recorder.take_watched();
        let link_errors = watched.link_errors;
        drop(recorder);
        let mut outcome = outcome;
        for r in &mut outcome.results {
            if let Some(rose) = link_errors.get(&r.measurement.key) {
                r.measurement.notes.push(format!(
                    "PCIe errors reported while it ran (AER counters rose): {}",
                    rose.iter()
                        .map(|a| format!(
                            "{} +{} correctable, +{} non-fatal, +{} fatal",
                            a.bdf, a.correctable, a.nonfatal, a.fatal
                        ))
                        .collect::<Vec<_>>()
                        .join("; ")
                ));
                r.measurement.evidence.link_errors = Some(rose.clone());
            }
            r.measurement.evidence.host_state = watched.host_state.get(&r.measurement.key).cloned();
        }

        provenance.finished_at = chrono::Local::now().to_rfc3339();
        provenance.interrupted = outcome.interrupted;
        provenance.environment = outcome.environment.clone();
        // Pinned GPU buffers (but those of small copies that search placement) and host RAM
        // copies both use transparent huge pages: a fact of the machine measured, recorded for
        // every run, not only GPU ones (`compare` lists it when two profiles differ).
        const THP: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
        if let Ok(thp) = std::fs::read_to_string(THP) {
            provenance
                .environment
                .insert("host.transparent_hugepage".into(), thp.trim().into());
        }
        // The CPU frequency governors and the hugepage pool the cases ran under (each case's
        // own in `evidence.host_state`), for `compare`'s list of settings that differ.
        let states: Vec<&hwc_model::HostCaseState> = outcome
            .results
            .iter()
            .filter_map(|r| r.measurement.evidence.host_state.as_ref())
            .collect();
        let mut governors: Vec<&str> = states
            .iter()
            .flat_map(|s| s.governors.iter().map(String::as_str))
            .collect();
        governors.sort_unstable();
        governors.dedup();
        if !governors.is_empty() {
            provenance
                .environment
                .insert("host.cpufreq_governor".into(), governors.join(",").into());
        }
        if let Some(total) = states.iter().find_map(|s| s.hugepages_total) {
            provenance
                .environment
                .insert("host.hugepages_total".into(), total.to_string().into());
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
        let gc_records = gc_settle
            .as_mut()
            .map(GcSettleRunner::take_records)
            .unwrap_or_default();
        hwc_profile::nvme::merge_long_tests(&mut profile.nvme, &gc_records);
        let finished = outcome.results.len() + outcome.waived.len() + outcome.failures.len();
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
        // The charts, linked from the report; a chart that cannot be drawn costs the run
        // nothing but its charts, and the run says so.
        let (charts, charts_not_drawn) = match hwc_charts::all(&profile) {
            Ok(c) => (c, None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        let (links, chart_files) = chart_links(&charts, &files.charts_name());
        let markdown = hwc_report::render_with_charts(&profile, &links);
        let json = serde_json::to_vec_pretty(&raw).map_err(SessionError::Json)?;
        // All three or none, the charts first (so the report's links resolve once it is
        // there). When they cannot be written, the whole record goes to the running
        // record's name (the files that were written are gone again, which may have made room);
        // failing that, the running record keeps what its last save held, and the error says
        // how much that is.
        let written = files::write_charts(&files.charts, &chart_files).and_then(|()| {
            files::write_all_new(&[
                (&files.raw, &json),
                (&files.profile, yaml.as_bytes()),
                (&files.report, markdown.as_bytes()),
            ])
            .inspect_err(|_| files::remove_charts(&files.charts, &chart_files))
        });
        if let Err(e) = written {
            let held = match files::replace(&files.partial, &json) {
                Ok(()) => Some(finished),
                Err(_) => on_disk.filter(|_| files.partial.is_file()),
            };
            return Err(SessionError::NotWritten {
                cause: with_cause(&e),
                partial: files.partial.clone(),
                held,
                finished,
                planned,
            });
        }
        std::fs::remove_file(&files.partial).ok();
        Ok(RunDone {
            profile,
            charts: chart_files.len(),
            charts_not_drawn,
            files,
        })
    }
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
