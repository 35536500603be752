//! The runner: takes planned cases and the engines that can measure them, and owns the measurement
//! discipline — one cold repetition (kept, labelled cold; or the cold figure the engine timed
//! while preparing, [`Prepared::cold_gbps`]), warm-up, N timed repetitions (where a
//! case held to a spread exceeds it, a window of them timed again at once, and once more after its
//! engine's other cases: [`MAX_WINDOWS`] in all), statistics, a data check of the last
//! repetition once the timed ones have run (so that reading the data back, which pulls a host
//! destination into the CPU caches, never precedes a timed repetition), the guards (an engine's
//! idle check before a case, or its watch over the repetitions: [`Prepared::watch`]) — and
//! reports each finished case to an [`Observer`] at once, so an interrupted run keeps what it
//! measured. It never prints.
//!
//! A prepared case may time other planned cases in its own repetitions ([`Prepared::also`]:
//! the other direction of a duplex pair, which runs at the same time anyway); the runner then
//! files their figures with the lead's and does not run them again.
//!
//! An engine is one mechanism (host memcpy, CUDA copies, io_uring reads, …) behind [`Engine`].

use hwc_model::{
    Case, CaseResult, EngineId, Failure, Measurement, PathId, Placement, RepSched, SchedSources,
    Waiver,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

pub mod sched;

/// Why an engine could not measure a case.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BenchError {
    /// The case cannot run here (missing library, device, permission): it becomes a waiver.
    #[error("{reason}")]
    Unavailable {
        reason: String,
        hint: Option<String>,
    },
    /// The case ran and failed (I/O error, data mismatch): it fails alone.
    #[error("{0}")]
    Failed(String),
}

impl BenchError {
    pub fn unavailable(reason: impl Into<String>) -> Self {
        BenchError::Unavailable {
            reason: reason.into(),
            hint: None,
        }
    }
    pub fn failed(msg: impl Into<String>) -> Self {
        BenchError::Failed(msg.into())
    }
}

/// One timed repetition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rep {
    /// The engine's authoritative time for the repetition (e.g. CUDA events), in seconds.
    pub seconds: f64,
    /// A wall-clock cross-check, when the authoritative timer is not the wall clock.
    pub wall_seconds: Option<f64>,
}

/// Whether the resources a case uses are free.
#[derive(Debug, Clone, PartialEq)]
pub enum Idle {
    Idle,
    Busy(String),
}

/// One mechanism's measurement of one case, ready to repeat.
pub trait Prepared {
    /// Bytes one repetition moves, as counted for GB/s. For an engine whose repetitions run for
    /// a time rather than an amount ([`Prepared::last_bytes`]), what the profile records: read
    /// again once the repetitions have run.
    fn bytes_per_rep(&self) -> u64;
    /// The bytes the last repetition moved, for an engine whose repetitions run for a time
    /// rather than an amount (`spdk_nvme_perf -t`): its figure is these over the repetition's
    /// seconds. `None`: [`Prepared::bytes_per_rep`].
    fn last_bytes(&self) -> Option<u64> {
        None
    }
    /// Run one repetition.
    fn run_once(&mut self) -> Result<Rep, BenchError>;
    /// Check the data the last repetition moved (outside any timed region). The case's last
    /// step: the runner runs no repetition of this preparation after it.
    fn verify(&mut self) -> Result<(), BenchError>;
    /// The case's cold figures where its preparation already timed its first copies (a GPU
    /// copy's first calibration batch, whose same copies at the same K then warm it): the
    /// lead's first, then one for each of [`Prepared::also`], in GB/s. The runner then runs no
    /// cold repetition of its own; `None` (the default), or figures short of the members or
    /// not finite and positive: it does.
    fn cold_gbps(&self) -> Option<Vec<f64>> {
        None
    }
    /// Begin watching what else runs on the machine while the repetitions that follow do,
    /// where the engine watches (the host engines' CPU guard): called once a preparation is
    /// done, before its cold repetition.
    fn watch(&mut self) {}
    /// Why other work shared the machine with the repetitions since [`Prepared::watch`], where
    /// the engine watched: the case is then marked contended. Called after its last timed
    /// repetition, before the data check.
    fn busy_meanwhile(&mut self) -> Option<String> {
        None
    }
    /// Where threads and buffers were placed, as verified.
    fn placement(&self) -> Option<Placement> {
        None
    }
    /// True when the working set fits in a cache (the figure is then a cache figure).
    fn cache_resident(&self) -> bool {
        false
    }
    /// Average latency per operation in µs for the last repetition, where the path defines one.
    fn last_latency_us(&self) -> Option<f64> {
        None
    }
    /// The last repetition's per-operation 50th and 99th percentile latencies in µs, where the
    /// engine times every operation.
    fn last_latency_percentiles_us(&self) -> Option<(f64, f64)> {
        None
    }
    /// Anything the reader of this figure must know, in words (for people: nothing reads
    /// notes back; a fact other code needs is a typed field).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// The search over placements of the copies in their buffers that chose where the case is
    /// measured, where it ran one.
    fn placement_search(&self) -> Option<hwc_model::PlacementSearch> {
        None
    }
    /// The device's state while the case ran (a GPU's clocks, link and replay counter), read
    /// once its repetitions have finished.
    fn gpu_state(&self) -> Option<hwc_model::GpuCaseState> {
        None
    }
    /// The last repetition's scheduling counters (each thread's run-queue delay, involuntary
    /// switches and steal), where the engine reads them; the runner keeps those of the timed
    /// repetitions, judges each ([`sched::DISTURBED_ABOVE_PCT`]) and records a summary.
    fn last_sched(&self) -> Option<RepSched> {
        None
    }
    /// What [`Prepared::last_sched`] could not read, and why, and the steal counters' tick.
    fn sched_sources(&self) -> SchedSources {
        SchedSources::default()
    }
    /// Other planned cases whose figures these same repetitions give, each by a timer of its
    /// own (the other direction of a duplex pair, which runs at the same time anyway). The
    /// runner times them with this case where they are still to run, and skips them later.
    fn also(&self) -> Vec<Also> {
        Vec::new()
    }
    /// The last repetition's authoritative seconds for each of [`Prepared::also`], in order.
    fn last_also_seconds(&self) -> Vec<f64> {
        Vec::new()
    }
    /// What the reader of `also()[index]`'s figure must know (in place of [`Prepared::notes`]).
    fn also_notes(&self, _index: usize) -> Vec<String> {
        Vec::new()
    }
}

/// Another planned case whose figure a prepared case's repetitions also give.
#[derive(Debug, Clone, PartialEq)]
pub struct Also {
    /// That case's key.
    pub key: String,
    /// Bytes one repetition moves for it, as counted for its GB/s.
    pub bytes_per_rep: u64,
}

/// A measurement mechanism: one engine, given the cases planned for it ([`Case::engine`]).
pub trait Engine {
    /// The engine's id, as its cases name it.
    fn id(&self) -> EngineId;
    /// Allocate, place and pre-fault what `case` needs.
    fn prepare<'a>(&'a mut self, case: &Case) -> Result<Box<dyn Prepared + 'a>, BenchError>;
    /// The cases this engine will be given, in order, before the first: an engine may size
    /// what it keeps across cases (buffers) from them.
    fn expect(&mut self, _cases: &[&Case]) {}
    /// Check, before `case` is prepared, that the devices it uses are idle (engines that watch
    /// while the repetitions run instead use [`Prepared::watch`]).
    fn idle_check(&mut self, _case: &Case) -> Idle {
        Idle::Idle
    }
    /// Refuse a case when busy (true), or measure and mark it contended (false).
    fn refuse_when_busy(&self) -> bool {
        false
    }
    /// Versions, clocks and similar facts to record in the profile's provenance (read once
    /// the engine has finished).
    fn environment(&self) -> hwc_model::Environment {
        BTreeMap::new()
    }
    /// The engine's last case has run (or the run stopped): put back what it changed on the
    /// system for its cases (drives bound to a userspace driver), before the next engine's
    /// cases and the procedures run. Called once, for every engine given cases.
    fn finish(&mut self) {}
}

/// A procedure of steps of its own rather than timed repetitions (gc-settle now: sustained
/// writes, then reads until their latency settles; file setup, drive binding or BAR mapping
/// next): [`run_with`] runs the cases it takes after every engine's, under the same observer
/// and cancellation, each measured once.
pub trait Procedure {
    /// Whether `case` is one of its.
    fn takes(&self, case: &Case) -> bool;
    /// Run `case` whole; its result is the case's measurement.
    fn run(&mut self, case: &Case) -> Result<CaseResult, BenchError>;
}

/// Progress and results, as they happen.
///
/// Every case starts and then finishes; a case timed in an earlier case's repetitions
/// ([`Prepared::also`]) starts and finishes right after that case finishes. After an engine's
/// last case has finished, each of its cases that was to be timed again then comes back once
/// through [`Observer::case_retimed`], timed again or with a note saying why not.
pub trait Observer {
    fn case_started(&mut self, _index: usize, _total: usize, _case: &Case) {}
    fn case_finished(&mut self, _outcome: &CaseOutcome) {}
    /// A case that finished earlier (`index`: its index in the plan, as given to
    /// [`Observer::case_started`]) and was to be timed again after its engine's other cases
    /// (see [`run`]): this outcome replaces the one it finished with. `timed_again` is false
    /// where it was not (its `evidence.windows` says why).
    fn case_retimed(&mut self, _index: usize, _outcome: &CaseOutcome, _timed_again: bool) {}
}

/// An observer that does nothing.
pub struct NoObserver;
impl Observer for NoObserver {}

/// What became of one case.
#[derive(Debug, Clone, PartialEq)]
pub enum CaseOutcome {
    Measured(Box<CaseResult>),
    Waived(Box<Waiver>),
    Failed(Failure),
}

/// Options the runner applies to every case.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Measure busy resources anyway and mark the figures contended.
    pub allow_contended: bool,
    /// Relative disagreement between the authoritative timer and the wall clock above which a
    /// case is flagged (0.02 = 2 %).
    pub wall_tolerance: Option<f64>,
}

/// Everything a run produced.
#[derive(Debug, Clone, Default)]
pub struct RunOutcome {
    pub results: Vec<CaseResult>,
    pub waived: Vec<Waiver>,
    pub failures: Vec<Failure>,
    pub interrupted: bool,
    pub environment: hwc_model::Environment,
}

impl RunOutcome {
    /// File one case's outcome.
    pub fn record(&mut self, outcome: CaseOutcome) {
        match outcome {
            CaseOutcome::Measured(r) => self.results.push(*r),
            CaseOutcome::Waived(w) => self.waived.push(*w),
            CaseOutcome::Failed(f) => self.failures.push(f),
        }
    }
}

/// Run `cases` in order, each with the engine it names.
///
/// A case held to a spread ([`hwc_model::Reps::retry_above_spread_pct`]) whose
/// [`AT_ONCE_WINDOWS`] windows all spread past it is prepared and timed once more after the last
/// of its engine's other cases, when a spell of noise on the machine may have passed
/// ([`MAX_WINDOWS`] windows in all), and, where an engine's cases come together in the plan (as
/// hwceiling plans them), before another engine's cases can leave the machine in another
/// state (on the H200 machine, large duplex copies spread several times more right after the
/// host RAM cases than after the GPU ones); its outcome, already reported, is then replaced
/// ([`Observer::case_retimed`]). Once [`NOISY_STOP_AFTER`] cases in a row (a group timed
/// together counting once) timed there stayed past their limits, the machine is taken to be
/// still unsteady: the engine's other such cases keep the windows they have, and their `evidence.windows`
/// say why.
pub fn run(
    cases: &[Case],
    engines: &mut [Box<dyn Engine>],
    options: &RunOptions,
    observer: &mut dyn Observer,
    cancel: &AtomicBool,
) -> RunOutcome {
    run_with(cases, engines, &mut [], options, observer, cancel)
}

/// [`run`], with `procedures`: a case one of them takes runs after every engine's cases, in
/// plan order, through that procedure (reported to `observer` under its plan index as every
/// case is, and not started once `cancel` is set).
pub fn run_with(
    cases: &[Case],
    engines: &mut [Box<dyn Engine>],
    procedures: &mut [&mut dyn Procedure],
    options: &RunOptions,
    observer: &mut dyn Observer,
    cancel: &AtomicBool,
) -> RunOutcome {
    let mut out = RunOutcome::default();
    let total = cases.len();
    let by_procedure: Vec<Option<usize>> = cases
        .iter()
        .map(|c| procedures.iter().position(|p| p.takes(c)))
        .collect();
    let owner: Vec<Option<usize>> = cases
        .iter()
        .zip(&by_procedure)
        .map(|(c, p)| match p {
            Some(_) => None,
            None => engines.iter().position(|b| b.id() == c.engine),
        })
        .collect();
    for (i, engine) in engines.iter_mut().enumerate() {
        let mine: Vec<&Case> = cases
            .iter()
            .zip(&owner)
            .filter(|(_, o)| **o == Some(i))
            .map(|(c, _)| c)
            .collect();
        engine.expect(&mine);
    }
    // Cases timed with an earlier one (see `Prepared::also`).
    let mut done = vec![false; total];
    // Groups to time again after their engine's other cases, by engine.
    let mut later: Vec<Vec<Later>> = engines.iter().map(|_| Vec::new()).collect();
    let mut finished = vec![false; engines.len()];
    for (index, case) in cases.iter().enumerate() {
        if done[index] || by_procedure[index].is_some() {
            continue;
        }
        if cancel.load(Ordering::SeqCst) {
            out.interrupted = true;
            break;
        }
        observer.case_started(index, total, case);
        // Each outcome, with the plan index of a companion (reported as starting when it
        // finishes, after its lead).
        let outcomes: Vec<(Option<usize>, CaseOutcome)> = match owner[index] {
            None => vec![(
                None,
                waived(
                    case,
                    format!("engine {} is not in this run", case.engine),
                    None,
                ),
            )],
            Some(b) => {
                let pending: Vec<usize> = (index + 1..total)
                    .filter(|&j| !done[j] && owner[j] == Some(b))
                    .collect();
                let others: Vec<&Case> = pending.iter().map(|&j| &cases[j]).collect();
                let group = match time_group(case, &others, engines[b].as_mut(), options, cancel) {
                    Ok(timed) => {
                        let group = timed.outcomes(options);
                        if timed.unsteady() && !timed.cut_short {
                            // Filed next, lead first, each member a measurement.
                            let first = out.results.len();
                            let plan = timed
                                .members
                                .iter()
                                .map(|m| m.also.map_or(index, |(_, j)| pending[j]))
                                .collect();
                            let slots = (first..first + timed.members.len()).collect();
                            later[b].push(Later { timed, plan, slots });
                        }
                        group
                    }
                    Err(group) => *group,
                };
                let mut outcomes = vec![(None, group.lead)];
                for (o, outcome) in group.also {
                    done[pending[o]] = true;
                    outcomes.push((Some(pending[o]), outcome));
                }
                outcomes
            }
        };
        for (companion, outcome) in outcomes {
            if let Some(j) = companion {
                observer.case_started(j, total, &cases[j]);
            }
            observer.case_finished(&outcome);
            out.record(outcome);
        }
        // The engine's last case has run: time its unsteady ones again, then let it finish.
        if let Some(b) = owner[index] {
            let more = (index + 1..total).any(|j| !done[j] && owner[j] == Some(b));
            if !more && !later[b].is_empty() {
                let groups = std::mem::take(&mut later[b]);
                retime_all(
                    groups,
                    engines[b].as_mut(),
                    options,
                    observer,
                    &mut out,
                    cancel,
                );
            }
            if !more {
                engines[b].finish();
                finished[b] = true;
            }
        }
    }
    // An interrupted run: the engines that still had cases finish now, before any procedure.
    for (b, engine) in engines.iter_mut().enumerate() {
        if !finished[b] && owner.contains(&Some(b)) {
            engine.finish();
            finished[b] = true;
        }
    }
    for (index, case) in cases.iter().enumerate() {
        let Some(p) = by_procedure[index] else {
            continue;
        };
        if cancel.load(Ordering::SeqCst) {
            break;
        }
        observer.case_started(index, total, case);
        let outcome = match procedures[p].run(case) {
            Ok(r) => CaseOutcome::Measured(Box::new(r)),
            Err(e) => from_error(case, e),
        };
        observer.case_finished(&outcome);
        out.record(outcome);
    }
    if cancel.load(Ordering::SeqCst) {
        out.interrupted = true;
    }
    // An engine's settings shape the figures of the paths it measured (where it does not say
    // narrower itself); one that measured nothing in this run shaped nothing in it.
    for (b, engine) in engines.iter().enumerate() {
        let mut paths: Vec<PathId> = cases
            .iter()
            .zip(&owner)
            .filter(|(_, o)| **o == Some(b))
            .map(|(c, _)| c.path)
            .collect();
        if paths.is_empty() {
            continue;
        }
        paths.sort();
        paths.dedup();
        for (key, mut setting) in engine.environment() {
            if setting.shapes.is_empty() {
                setting.shapes = paths.clone();
            }
            out.environment.insert(key, setting);
        }
    }
    out
}

/// A group to time again after its engine's other cases.
struct Later<'c> {
    timed: Timed<'c>,
    /// Each member's index in the plan.
    plan: Vec<usize>,
    /// Each member's index in [`RunOutcome::results`].
    slots: Vec<usize>,
}

/// Time `groups` again, in order, on their engine, and file their new outcomes in place of
/// the old (see [`run`]). Each group's outcome comes back, timed again or, where it was not,
/// with a note saying why (an interrupt included).
fn retime_all(
    groups: Vec<Later>,
    engine: &mut dyn Engine,
    options: &RunOptions,
    observer: &mut dyn Observer,
    out: &mut RunOutcome,
    cancel: &AtomicBool,
) {
    // Groups in a row timed again that stayed past their limits.
    let mut misses = 0;
    for Later {
        mut timed,
        plan,
        slots,
    } in groups
    {
        let timed_again = if cancel.load(Ordering::SeqCst) {
            timed.not_again = Some("the run was interrupted first".into());
            false
        } else if misses >= NOISY_STOP_AFTER {
            timed.not_again = Some(format!(
                "the {NOISY_STOP_AFTER} timed again just before it (a duplex pair counting once) \
                 all stayed past their limits (the machine was still unsteady)"
            ));
            false
        } else {
            match retime(&mut timed, engine, cancel) {
                Ok(()) => {
                    misses = if timed.unsteady() { misses + 1 } else { 0 };
                    true
                }
                Err(_) if cancel.load(Ordering::SeqCst) => {
                    timed.not_again = Some("the run was interrupted while it was".into());
                    false
                }
                Err(why) => {
                    timed.not_again = Some(why);
                    false
                }
            }
        };
        let group = timed.outcomes(options);
        let outcomes = std::iter::once(group.lead).chain(group.also.into_iter().map(|(_, o)| o));
        for ((outcome, index), slot) in outcomes.zip(plan).zip(slots) {
            observer.case_retimed(index, &outcome, timed_again);
            if let (CaseOutcome::Measured(r), Some(filed)) = (outcome, out.results.get_mut(slot)) {
                *filed = *r;
            }
        }
    }
}

fn fail(case: &Case, error: impl Into<String>) -> CaseOutcome {
    CaseOutcome::Failed(Failure {
        key: case.key.clone(),
        path: case.path,
        engine: Some(case.engine.clone()),
        error: error.into(),
    })
}

/// An engine's error as the case's outcome: unavailable → waived with its reason, else failed.
pub fn from_error(case: &Case, e: BenchError) -> CaseOutcome {
    match e {
        BenchError::Unavailable { reason, hint } => waived(case, reason, hint),
        BenchError::Failed(msg) => fail(case, msg),
    }
}

/// One case waived when its engine came to run it.
fn waived(case: &Case, reason: String, hint: Option<String>) -> CaseOutcome {
    CaseOutcome::Waived(Box::new(Waiver {
        path: case.path,
        engine: Some(case.engine.clone()),
        scope: Some(case.key.clone()),
        covers: Some(hwc_model::Covers::Case {
            spec: case.spec.clone(),
        }),
        reason,
        hint,
    }))
}

fn throughput(bytes: u64, rep: &Rep) -> Result<f64, BenchError> {
    if !(rep.seconds.is_finite() && rep.seconds > 0.0) {
        return Err(BenchError::failed(format!(
            "engine returned a non-positive time ({} s)",
            rep.seconds
        )));
    }
    Ok(hwc_stats::gbps(bytes, rep.seconds))
}

/// Run one case: idle guard, prepare, cold repetition, warm-up, timed repetitions (up to
/// [`AT_ONCE_WINDOWS`] windows: a lone case has no other cases to be timed again after), data
/// check.
pub fn run_case(
    case: &Case,
    engine: &mut dyn Engine,
    options: &RunOptions,
    cancel: &AtomicBool,
) -> CaseOutcome {
    run_group(case, &[], engine, options, cancel).lead
}

/// What became of a case run with the later cases its repetitions also timed.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupOutcome {
    /// The lead case's.
    pub lead: CaseOutcome,
    /// Each companion's, with its index in the `others` given to [`run_group`].
    pub also: Vec<(usize, CaseOutcome)>,
}

impl GroupOutcome {
    fn lead_only(lead: CaseOutcome) -> Self {
        GroupOutcome {
            lead,
            also: Vec::new(),
        }
    }
}

/// One case of a group timed together: the lead, or another planned case its repetitions
/// also give a figure for ([`Prepared::also`]).
struct Member<'c> {
    case: &'c Case,
    bytes: u64,
    /// `None` for the lead; else the index into [`Prepared::also`] and into `others`.
    also: Option<(usize, usize)>,
}

/// Run `case` as [`run_case`] does, and with it those of `others` (planned cases not yet run,
/// served by the same engine) that the prepared case names in [`Prepared::also`]: their
/// figures come from the same repetitions, each by its own timer. A companion must ask for the
/// lead's warm-up and timed repetitions. Returns the lead's outcome and one for each companion
/// measured. Where the lead fails before its repetitions finish (a companion's timer failing
/// included), only its outcome comes back: the others are run on their own later.
pub fn run_group(
    case: &Case,
    others: &[&Case],
    engine: &mut dyn Engine,
    options: &RunOptions,
    cancel: &AtomicBool,
) -> GroupOutcome {
    match time_group(case, others, engine, options, cancel) {
        Ok(timed) => timed.outcomes(options),
        Err(group) => *group,
    }
}

/// What a prepared case said of itself, kept for the outcomes once it is gone.
struct Facts {
    placement: Option<Placement>,
    /// [`Prepared::placement_search`]: every member was timed at the placement it chose.
    placement_search: Option<hwc_model::PlacementSearch>,
    cache_resident: bool,
    /// The lead's notes ([`Prepared::notes`]).
    notes: Vec<String>,
    /// Each member's [`Prepared::also_notes`], by member index (none for the lead).
    also_notes: Vec<Vec<String>>,
    /// Each member's bytes a repetition, by member index (a preparation may size its
    /// repetitions anew).
    bytes: Vec<u64>,
    /// [`Prepared::sched_sources`].
    sched_sources: SchedSources,
    /// [`Prepared::gpu_state`].
    gpu_state: Option<hwc_model::GpuCaseState>,
}

impl Facts {
    /// `gpu_state`: [`Prepared::gpu_state`], read right after the last timed repetition (before
    /// the data check, while a GPU's link is still up); the rest once the check has run (an
    /// engine may verify its placement there).
    fn of(
        prepared: &dyn Prepared,
        members: &[Member],
        gpu_state: Option<hwc_model::GpuCaseState>,
    ) -> Self {
        Facts {
            placement: prepared.placement(),
            placement_search: prepared.placement_search(),
            cache_resident: prepared.cache_resident(),
            notes: prepared.notes(),
            also_notes: members
                .iter()
                .map(|m| {
                    m.also
                        .map_or_else(Vec::new, |(ai, _)| prepared.also_notes(ai))
                })
                .collect(),
            bytes: members
                .iter()
                .map(|m| match m.also {
                    None => prepared.bytes_per_rep(),
                    Some(_) => m.bytes,
                })
                .collect(),
            sched_sources: prepared.sched_sources(),
            gpu_state,
        }
    }
}

/// A group as timed so far: everything its outcomes are made of.
struct Timed<'c> {
    /// The engine's id ([`Engine::id`]).
    engine: EngineId,
    members: Vec<Member<'c>>,
    limits: Vec<Option<u32>>,
    /// The first preparation's cold repetition and warm-ups, by member.
    cold: Vec<f64>,
    warmups: Vec<Vec<f64>>,
    windows: Vec<Window>,
    /// What each preparation said, by [`Window::pass`].
    facts: Vec<Facts>,
    contended: bool,
    notes: Vec<String>,
    /// An interrupt stopped a window after an earlier one had finished.
    cut_short: bool,
    /// Why the group was not timed again after its engine's other cases, where it would have
    /// been.
    not_again: Option<String>,
    /// Seconds spent on the lead, every preparation's included.
    seconds: f64,
    /// Where the first preparation's time went.
    phases: hwc_model::PhaseSeconds,
}

/// Idle guard, prepare, cold repetition, warm-up, up to [`AT_ONCE_WINDOWS`] windows of timed
/// repetitions (the next only while every earlier one spread past a limit), then the data check
/// of the last repetition: a case whose data is wrong has no figure, whichever window it kept.
fn time_group<'c>(
    case: &'c Case,
    others: &[&'c Case],
    engine: &mut dyn Engine,
    options: &RunOptions,
    cancel: &AtomicBool,
) -> Result<Timed<'c>, Box<GroupOutcome>> {
    let started = std::time::Instant::now();
    let mut notes = Vec::new();
    let mut contended = false;
    let idle = engine.idle_check(case);
    let mut phases = hwc_model::PhaseSeconds {
        idle_check: started.elapsed().as_secs_f64(),
        ..Default::default()
    };
    if let Idle::Busy(why) = idle {
        if engine.refuse_when_busy() && !options.allow_contended {
            return Err(Box::new(GroupOutcome::lead_only(fail(
                case,
                format!("refused: {why} (rerun when idle, or pass --allow-contended)"),
            ))));
        }
        contended = true;
        notes.push(format!("contended: {why}"));
    }
    let lead_only = |e: BenchError| Box::new(GroupOutcome::lead_only(from_error(case, e)));
    let name = engine.id();
    let at = std::time::Instant::now();
    let mut prepared = engine.prepare(case).map_err(lead_only)?;
    phases.prepare = at.elapsed().as_secs_f64();
    let members = members_of(case, others, prepared.as_ref());
    prepared.watch();
    let at = std::time::Instant::now();
    let (cold, warmups) = warm(case, &members, prepared.as_mut()).map_err(lead_only)?;
    phases.cold_and_warmup = at.elapsed().as_secs_f64();
    let at = std::time::Instant::now();
    let limits: Vec<Option<u32>> = members
        .iter()
        .map(|m| m.case.reps.retry_above_spread_pct)
        .collect();
    let mut windows: Vec<Window> = Vec::with_capacity(1);
    let mut cut_short = false;
    loop {
        match time_window(case, &members, prepared.as_mut(), cancel, 0) {
            Ok(window) => windows.push(window),
            // An interrupt while being timed again keeps the windows already finished.
            Err(_) if cancel.load(Ordering::SeqCst) && !windows.is_empty() => {
                cut_short = true;
                break;
            }
            Err(outcome) => return Err(Box::new(GroupOutcome::lead_only(outcome))),
        }
        // Every earlier window spread more than a limit, or there would be no other. An
        // interrupt keeps the windows timed so far rather than starting another.
        let over = windows.last().is_some_and(|w| over_limit(w, &limits) > 1.0);
        if !(over && windows.len() < AT_ONCE_WINDOWS && !cancel.load(Ordering::SeqCst)) {
            break;
        }
    }
    phases.timed = at.elapsed().as_secs_f64();
    // The guard's time: an engine that watched may wait out the rest of its shortest stretch.
    let at = std::time::Instant::now();
    let busy = prepared.busy_meanwhile();
    phases.idle_check += at.elapsed().as_secs_f64();
    if let Some(why) = busy {
        contended = true;
        notes.push(format!("contended: {why}"));
    }
    let gpu_state = prepared.gpu_state();
    let at = std::time::Instant::now();
    prepared.verify().map_err(lead_only)?;
    phases.check = at.elapsed().as_secs_f64();
    let facts = vec![Facts::of(prepared.as_ref(), &members, gpu_state)];
    Ok(Timed {
        engine: name,
        members,
        limits,
        cold,
        warmups,
        windows,
        facts,
        contended,
        notes,
        cut_short,
        not_again: None,
        seconds: started.elapsed().as_secs_f64(),
        phases,
    })
}

/// The lead, then each of `others` that the prepared lead names in [`Prepared::also`] and that
/// asks for the lead's warm-up and timed repetitions (each taken once).
fn members_of<'c>(case: &'c Case, others: &[&'c Case], prepared: &dyn Prepared) -> Vec<Member<'c>> {
    let mut members = vec![Member {
        case,
        bytes: prepared.bytes_per_rep(),
        also: None,
    }];
    let same_reps = |c: &Case| {
        (c.reps.warmup, c.reps.timed, c.reps.steady)
            == (case.reps.warmup, case.reps.timed, case.reps.steady)
    };
    for (i, also) in prepared.also().into_iter().enumerate() {
        let taken = |j: usize| members.iter().any(|m| m.also.is_some_and(|(_, o)| o == j));
        let found = others
            .iter()
            .enumerate()
            .find(|(j, c)| c.key == also.key && c.key != case.key && same_reps(c) && !taken(*j));
        if let Some((j, other)) = found {
            members.push(Member {
                case: other,
                bytes: also.bytes_per_rep,
                also: Some((i, j)),
            });
        }
    }
    members
}

/// The cold repetition (or the cold figures the preparation timed: [`Prepared::cold_gbps`]),
/// then the warm-up: each member's cold figure and warm-up figures.
fn warm(
    case: &Case,
    members: &[Member],
    prepared: &mut dyn Prepared,
) -> Result<(Vec<f64>, Vec<Vec<f64>>), BenchError> {
    let timed_cold = prepared.cold_gbps().and_then(|c| {
        members
            .iter()
            .map(|m| {
                c.get(m.also.map_or(0, |(ai, _)| ai + 1))
                    .copied()
                    .filter(|g| g.is_finite() && *g > 0.0)
            })
            .collect::<Option<Vec<f64>>>()
    });
    let cold = match timed_cold {
        Some(cold) => cold,
        None => prepared
            .run_once()
            .and_then(|r| sample(members, prepared, &r))?,
    };
    let mut warmups: Vec<Vec<f64>> = vec![Vec::new(); members.len()];
    for _ in 0..case.reps.warmup {
        let rep = prepared.run_once()?;
        sample(members, prepared, &rep)?
            .into_iter()
            .zip(&mut warmups)
            .for_each(|(g, w)| w.push(g));
    }
    Ok((cold, warmups))
}

/// Time a group again after its engine's other cases: the idle guard, a new preparation (its
/// cold repetition and warm-up), windows until one holds every limit or there are
/// [`MAX_WINDOWS`], and the data check. Its windows join the group's only once all are timed;
/// an error says why they do not (the windows it had stand). The time spent counts in the
/// lead's seconds either way.
fn retime(timed: &mut Timed, engine: &mut dyn Engine, cancel: &AtomicBool) -> Result<(), String> {
    let started = std::time::Instant::now();
    let result = time_again(timed, engine, cancel);
    timed.seconds += started.elapsed().as_secs_f64();
    let (windows, facts) = result?;
    timed.windows.extend(windows);
    timed.facts.push(facts);
    Ok(())
}

/// The windows and facts of [`retime`]'s new preparation.
fn time_again(
    timed: &Timed,
    engine: &mut dyn Engine,
    cancel: &AtomicBool,
) -> Result<(Vec<Window>, Facts), String> {
    let case = timed.members[0].case;
    if let Idle::Busy(why) = engine.idle_check(case) {
        if !timed.contended {
            return Err(format!("busy then: {why}"));
        }
    }
    let companions: Vec<&Case> = timed.members[1..].iter().map(|m| m.case).collect();
    let failed = |e: BenchError| format!("its preparation or repetitions failed: {e}");
    let mut prepared = engine.prepare(case).map_err(failed)?;
    // The members in the first preparation's order (companion j is member j + 1), whatever
    // order this preparation names them in: each window's figures are by member index.
    let mut members = members_of(case, &companions, prepared.as_ref());
    members.sort_by_key(|m| m.also.map_or(0, |(_, j)| j + 1));
    let same = members.len() == timed.members.len()
        && members
            .iter()
            .enumerate()
            .all(|(mi, m)| m.also.map_or(mi == 0, |(_, j)| j + 1 == mi));
    if !same {
        return Err("prepared again, it no longer timed the same cases in its repetitions".into());
    }
    prepared.watch();
    warm(case, &members, prepared.as_mut()).map_err(failed)?;
    let pass = timed.facts.len();
    let mut windows = Vec::new();
    while timed.windows.len() + windows.len() < MAX_WINDOWS {
        let window =
            time_window(case, &members, prepared.as_mut(), cancel, pass).map_err(|outcome| {
                match outcome {
                    CaseOutcome::Failed(f) => format!("its repetitions failed: {}", f.error),
                    CaseOutcome::Waived(w) => format!("its repetitions failed: {}", w.reason),
                    CaseOutcome::Measured(_) => "its repetitions did not finish".to_string(),
                }
            })?;
        let over = over_limit(&window, &timed.limits) > 1.0;
        windows.push(window);
        if !over {
            break;
        }
    }
    if let Some(why) = prepared.busy_meanwhile() {
        if !timed.contended {
            return Err(format!("busy then: {why}"));
        }
    }
    let gpu_state = prepared.gpu_state();
    prepared
        .verify()
        .map_err(|e| format!("its data check failed: {e}"))?;
    Ok((windows, Facts::of(prepared.as_ref(), &members, gpu_state)))
}

impl Timed<'_> {
    /// The window kept.
    fn chosen(&self) -> usize {
        steadiest(&self.windows, &self.limits)
    }

    /// True when even the window kept spread past a limit.
    fn unsteady(&self) -> bool {
        over_limit(&self.windows[self.chosen()], &self.limits) > 1.0
    }

    /// The lead's outcome and each companion's, from the window kept.
    fn outcomes(&self, options: &RunOptions) -> GroupOutcome {
        let chosen = self.chosen();
        let window = &self.windows[chosen];
        let facts = &self.facts[window.pass];
        let outcome_of = |mi: usize, member: &Member| {
            let notes = self.notes.clone();
            let mut evidence = hwc_model::Evidence {
                placement_search: facts.placement_search.clone(),
                gpu_state: facts.gpu_state.clone(),
                ..Default::default()
            };
            if self.windows.len() > 1 || self.cut_short || self.not_again.is_some() {
                evidence.windows = Some(windows(self, mi, chosen));
            }
            let mut measurement = Measurement {
                key: member.case.key.clone(),
                path: member.case.path,
                engine: member.case.engine.clone(),
                cell: member.case.cell.clone(),
                spec: member.case.spec.clone(),
                bytes_per_rep: facts.bytes[mi],
                gbps: window.gbps[mi],
                cold_gbps: Some(self.cold[mi]),
                warmup: self.members[0].case.reps.warmup,
                latency_us: None,
                latency_p50_us: None,
                latency_p99_us: None,
                placement: facts.placement.clone(),
                cache_resident: facts.cache_resident,
                contended: self.contended,
                spread_limit_pct: self.limits[mi],
                evidence,
                notes,
            };
            if member.also.is_some() {
                measurement.notes.push(format!(
                    "timed in the same repetitions as {}, by a timer of its own (no wall-clock \
                     cross-check of its own: the wall clock times the lead's copies; this case's \
                     time is in that case's case_seconds)",
                    self.members[0].case.key
                ));
                measurement
                    .notes
                    .extend(facts.also_notes[mi].iter().cloned());
            } else {
                measurement.evidence.wall_clock_disagreement = options
                    .wall_tolerance
                    .and_then(|tol| wall_check(&measurement.gbps, &window.wall_gbps, tol));
                let summary = |v: &[f64]| hwc_stats::summarize(v).ok();
                measurement.latency_us = summary(&window.latencies);
                let p50: Vec<f64> = window.percentiles.iter().map(|p| p.0).collect();
                let p99: Vec<f64> = window.percentiles.iter().map(|p| p.1).collect();
                measurement.latency_p50_us = summary(&p50).map(|s| s.median);
                measurement.latency_p99_us = summary(&p99).map(|s| s.median);
                measurement.notes.extend(facts.notes.iter().cloned());
            }
            let samples_gbps = window.samples_gbps[mi].clone();
            // The lead's threads are the repetitions' threads: companions' figures come from
            // the same repetitions, and their notes say so.
            let scheduling = member
                .also
                .is_none()
                .then(|| scheduling(window, &facts.sched_sources))
                .flatten();
            measurement.evidence.scheduling = scheduling
                .as_ref()
                .map(|ev| sched::summary(ev, &samples_gbps));
            CaseOutcome::Measured(Box::new(CaseResult {
                measurement,
                samples_gbps,
                warmup_gbps: self.warmups[mi].clone(),
                case_seconds: member.also.is_none().then_some(self.seconds),
                phase_seconds: member.also.is_none().then_some(self.phases),
                scheduling,
            }))
        };
        // Member 0 is the lead; every other one a companion, with its index in `others`.
        let lead = outcome_of(0, &self.members[0]);
        let also = self
            .members
            .iter()
            .enumerate()
            .skip(1)
            .filter_map(|(mi, m)| m.also.map(|(_, j)| (j, outcome_of(mi, m))))
            .collect();
        GroupOutcome { lead, also }
    }
}

/// A window's scheduling evidence, where the engine read any in its repetitions (a
/// repetition it read nothing of is kept as such, and not judged).
fn scheduling(window: &Window, sources: &SchedSources) -> Option<hwc_model::SchedEvidence> {
    if window.sched.iter().all(|(_, s)| s.is_none()) {
        return None;
    }
    let reps = window
        .sched
        .iter()
        .map(|(seconds, s)| (*seconds, s.clone().unwrap_or_default()))
        .collect();
    Some(sched::evidence(reps, sources.clone()))
}

/// One repetition's throughput for each member: the lead's from the repetition's time, each
/// companion's from its own.
fn sample(members: &[Member], prepared: &dyn Prepared, rep: &Rep) -> Result<Vec<f64>, BenchError> {
    let also = if members.len() > 1 {
        prepared.last_also_seconds()
    } else {
        Vec::new()
    };
    members
        .iter()
        .map(|m| match m.also {
            None => throughput(prepared.last_bytes().unwrap_or(m.bytes), rep),
            Some((i, _)) => match also.get(i) {
                Some(&seconds) => throughput(
                    m.bytes,
                    &Rep {
                        seconds,
                        wall_seconds: None,
                    },
                )
                .map_err(|e| BenchError::failed(format!("{}: {e}", m.case.key))),
                None => Err(BenchError::failed(format!(
                    "the engine gave no time for {} in this repetition",
                    m.case.key
                ))),
            },
        })
        .collect()
}

/// How far a window's figures went past their limits: the largest spread / limit over the
/// members that have one (over 1: some figure spread more than its case allows; 0 when none
/// has a limit).
fn over_limit(window: &Window, limits: &[Option<u32>]) -> f64 {
    window
        .gbps
        .iter()
        .zip(limits)
        .filter_map(|(s, l)| {
            // A 0 % limit: any spread is past it (as Measurement::unsteady reads it).
            l.map(|l| match l {
                0 if s.spread_pct > 0.0 => f64::INFINITY,
                0 => 0.0,
                l => s.spread_pct / f64::from(l),
            })
        })
        .fold(0.0, f64::max)
}

/// Timed windows a case whose repetitions spread too much may take in all (see
/// [`hwc_model::Reps::retry_above_spread_pct`]): [`AT_ONCE_WINDOWS`] back to back, the rest
/// after the engine's other cases ([`run`]).
pub const MAX_WINDOWS: usize = 3;
/// Timed windows a case may take back to back: the second catches a blip of a moment; a spell
/// of seconds outlasts it, and the case is timed again after its engine's other cases, where on
/// the H200 test machine most such cases came within 1 % (evidence:
/// `tools/gpu-reference/README.md`).
pub const AT_ONCE_WINDOWS: usize = 2;
/// Cases in a row (a group timed together counting once) timed again after their engine's other
/// cases that stay past their limits, after which the others are not: the machine is still
/// unsteady, and timing them again would lengthen the run for little.
pub const NOISY_STOP_AFTER: usize = 4;

/// One window of a case's timed repetitions, with each member's figures by member index.
struct Window {
    samples_gbps: Vec<Vec<f64>>,
    gbps: Vec<hwc_model::Stats>,
    /// The lead's.
    latencies: Vec<f64>,
    /// The lead's.
    percentiles: Vec<(f64, f64)>,
    /// The lead's repetitions' throughput by the wall clock, where its timer is another.
    wall_gbps: Vec<f64>,
    /// Each repetition's time by the engine's timer and its scheduling counters, where the
    /// engine reads them ([`Prepared::last_sched`]).
    sched: Vec<(f64, Option<RepSched>)>,
    /// Which preparation of the case timed it: 0 the first, 1 the one after its engine's other
    /// cases.
    pass: usize,
}

/// Time `case.reps.timed` repetitions, or fewer where the case may stop once steady
/// ([`hwc_model::Reps::steady`]: every member's figures steady, see [`steady`]). An error, or
/// a cancel before the window is complete, is the case's outcome.
fn time_window(
    case: &Case,
    members: &[Member],
    prepared: &mut dyn Prepared,
    cancel: &AtomicBool,
    pass: usize,
) -> Result<Window, CaseOutcome> {
    let timed = case.reps.timed.max(1) as usize;
    let mut samples_gbps = vec![Vec::with_capacity(timed); members.len()];
    let mut latencies = Vec::new();
    let mut percentiles: Vec<(f64, f64)> = Vec::new();
    let mut wall_gbps = Vec::new();
    let mut sched = Vec::with_capacity(timed);
    for _ in 0..timed {
        if cancel.load(Ordering::SeqCst) {
            return Err(fail(case, "interrupted before its repetitions finished"));
        }
        let rep = prepared.run_once().map_err(|e| from_error(case, e))?;
        let gbps = sample(members, prepared, &rep).map_err(|e| from_error(case, e))?;
        gbps.into_iter()
            .zip(&mut samples_gbps)
            .for_each(|(g, s)| s.push(g));
        if let Some(wall) = rep.wall_seconds.filter(|w| w.is_finite() && *w > 0.0) {
            wall_gbps.push(hwc_stats::gbps(members[0].bytes, wall));
        }
        if let Some(l) = prepared.last_latency_us() {
            latencies.push(l);
        }
        if let Some(pct) = prepared.last_latency_percentiles_us() {
            percentiles.push(pct);
        }
        sched.push((rep.seconds, prepared.last_sched()));
        if case.reps.steady.is_some_and(|st| steady(&samples_gbps, st)) {
            break;
        }
    }
    let gbps = samples_gbps
        .iter()
        .map(|s| hwc_stats::summarize(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(case, e.to_string()))?;
    Ok(Window {
        samples_gbps,
        gbps,
        latencies,
        percentiles,
        wall_gbps,
        sched,
        pass,
    })
}

/// Whether a window may stop: it holds the floor of repetitions, and each member's median is
/// known within the case's limit ([`hwc_model::Steady`]).
fn steady(samples_gbps: &[Vec<f64>], st: hwc_model::Steady) -> bool {
    samples_gbps.iter().all(|s| {
        s.len() >= st.min_timed as usize
            && hwc_stats::median_ci_width_pct(s).is_some_and(|w| w <= f64::from(st.within_pct))
    })
}

/// The timer cross-check of a window: a note when the median of its repetitions by the wall
/// clock lies more than `tolerance` (0.02 = 2 %) from the median by the engine's timer. The
/// medians, like the figure itself: a timer that does not bracket the work shifts every
/// repetition, while one repetition whose wall span caught the host thread descheduled (a VM's
/// neighbour, an interrupt) is noise in the wall clock, not an error of the timer.
fn wall_check(
    timer: &hwc_model::Stats,
    wall_gbps: &[f64],
    tolerance: f64,
) -> Option<hwc_model::WallClockDisagreement> {
    let wall = hwc_stats::summarize(wall_gbps).ok()?;
    let apart = (wall.median - timer.median).abs() / timer.median;
    (apart > tolerance).then_some(hwc_model::WallClockDisagreement {
        wall_gbps: wall,
        apart_pct: apart * 100.0,
        tolerance_pct: tolerance * 100.0,
    })
}

/// The index of the window whose figures went least past their limits (see [`over_limit`]),
/// or, where no figure has a limit, whose widest spread was least (the first of equals).
fn steadiest(windows: &[Window], limits: &[Option<u32>]) -> usize {
    let widest = |w: &Window| w.gbps.iter().map(|s| s.spread_pct).fold(0.0, f64::max);
    let score = |w: &Window| {
        if limits.iter().any(Option::is_some) {
            over_limit(w, limits)
        } else {
            widest(w)
        }
    };
    windows
        .iter()
        .enumerate()
        .min_by(|a, b| score(a.1).total_cmp(&score(b.1)))
        .map_or(0, |(i, _)| i)
}

/// What member `mi` of a group timed in several windows (or not timed again where it would
/// have been) records of them; `chosen`: the window kept.
fn windows(timed: &Timed, mi: usize, chosen: usize) -> hwc_model::Windows {
    let windows = &timed.windows;
    let limit_pct = timed.limits[mi];
    let list = |f: fn(&hwc_model::Stats) -> f64| {
        windows
            .iter()
            .map(|w| format!("{:.2}", f(&w.gbps[mi])))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let first = &windows[0].gbps[mi];
    let why = match limit_pct {
        Some(l) if first.spread_pct > f64::from(l) => format!(
            "the first {} timed repetitions spread {:.2} %, more than the {l} % this case allows",
            first.n, first.spread_pct
        ),
        Some(l) => format!(
            "the first {} timed repetitions spread {:.2} %, within the {l} % this case allows, \
             but a figure timed in the same repetitions spread more than its case allows",
            first.n, first.spread_pct
        ),
        None => format!(
            "the first {} timed repetitions spread {:.2} %; a figure timed in the same \
             repetitions spread more than its case allows",
            first.n, first.spread_pct
        ),
    };
    let which = if windows[0].gbps.len() > 1 {
        "the one whose figures went least past their limits"
    } else {
        "the steadiest"
    };
    let n = windows.len();
    let plural = if n == 1 { "" } else { "s" };
    // The windows timed after the engine's other cases, by number.
    let at_end: Vec<String> = (1..=n)
        .filter(|&i| windows[i - 1].pass > 0)
        .map(|i| i.to_string())
        .collect();
    let later = format!(
        "after the run's other {} cases, the case prepared anew",
        timed.engine
    );
    let at_end = match at_end.len() {
        0 => String::new(),
        1 => format!(" (window {} {later})", at_end[0]),
        _ => format!(" (windows {} {later})", at_end.join(", ")),
    };
    let timing = if timed.cut_short {
        format!("the run was interrupted while the case was timed again, so {n} finished window{plural}")
    } else if n > 1 {
        format!("timed again, {n} windows in all{at_end}")
    } else {
        "one window".to_string()
    };
    let mut note = format!(
        "{why}: {timing} (medians {} GB/s; spreads {} %); the figure is window {}'s, {which}",
        list(|s| s.median),
        list(|s| s.spread_pct),
        chosen + 1
    );
    if let Some(reason) = &timed.not_again {
        note.push_str(&format!(
            "; it was not timed again after the run's other {} cases: {reason}",
            timed.engine
        ));
    }
    if let Some(l) = limit_pct.filter(|&l| windows[chosen].gbps[mi].spread_pct > f64::from(l)) {
        let held = windows
            .iter()
            .any(|w| w.gbps[mi].spread_pct <= f64::from(l));
        note.push_str(&if held {
            format!(
                "; the window kept, chosen for every figure timed in it, spread more than {l} % \
                 for this one (another window held it within {l} %): an unsteady figure"
            )
        } else {
            format!(
                "; no window stayed within {l} %: an unsteady figure (something on the machine \
                 varied the copies' speed while this case ran)"
            )
        });
    }
    hwc_model::Windows {
        timed: n as u32,
        kept: chosen as u32 + 1,
        medians_gbps: windows.iter().map(|w| w.gbps[mi].median).collect(),
        spreads_pct: windows.iter().map(|w| w.gbps[mi].spread_pct).collect(),
        cut_short: timed.cut_short,
        not_timed_again: timed.not_again.clone(),
        detail: note,
    }
}

#[cfg(test)]
mod tests;
