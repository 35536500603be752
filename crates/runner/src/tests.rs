//! The runner against a scripted backend (fio's "null engine" idea): deterministic times.

use super::*;
use hwc_model::{HostCopySpec, PathId, Reps, Spec};

struct Scripted {
    times: Vec<f64>,
    next: usize,
    busy: bool,
    refuse: bool,
    verify_ok: bool,
    unavailable: bool,
    /// Wall seconds per repetition, by the same index as `times` (none: no wall clock).
    walls: Vec<f64>,
    /// After this many repetitions (the cold one counted), set the flag.
    cancel_after: Option<(usize, std::sync::Arc<AtomicBool>)>,
    /// A lead's key, the key it names as timed with it (`Prepared::also`), and that case's
    /// seconds per repetition, by the same index as `times`.
    also: Option<(String, String, Vec<f64>)>,
    /// Keys of the cases prepared, in order (shared: the runner owns the backend).
    prepared: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// The key of the case whose data check fails.
    fail_verify_of: Option<String>,
    /// How many repetitions had run (the cold one counted) at each data check, in order.
    verified_after: std::sync::Arc<std::sync::Mutex<Vec<usize>>>,
    /// What the case's watch finds, by preparation (the n-th prepared case's; else nothing),
    /// and how many repetitions had run when each watch began and ended.
    busy_meanwhile: Vec<Option<String>>,
    /// How long the watch waits before its verdict.
    watch_wait: std::time::Duration,
    /// Cold figures the preparation timed itself (`Prepared::cold_gbps`).
    cold: Option<Vec<f64>>,
    watched: std::sync::Arc<std::sync::Mutex<Vec<(usize, usize)>>>,
    /// Preparations after this many fail.
    prepare_limit: Option<usize>,
    /// The engine it is.
    engine: EngineId,
    /// Bytes a repetition of the n-th preparation (by index; else 1 GB).
    bytes_by_prep: Vec<u64>,
    /// Scheduling counters per repetition, by the same index as `times` (none: not read).
    sched: Vec<Option<hwc_model::RepSched>>,
    sched_sources: hwc_model::SchedSources,
}

impl Scripted {
    fn new(times: &[f64]) -> Self {
        Scripted {
            times: times.to_vec(),
            next: 0,
            busy: false,
            refuse: false,
            verify_ok: true,
            unavailable: false,
            walls: Vec::new(),
            cancel_after: None,
            also: None,
            prepared: Default::default(),
            fail_verify_of: None,
            verified_after: Default::default(),
            busy_meanwhile: Vec::new(),
            watch_wait: std::time::Duration::ZERO,
            cold: None,
            watched: Default::default(),
            prepare_limit: None,
            engine: EngineId::new("scripted"),
            bytes_by_prep: Vec::new(),
            sched: Vec::new(),
            sched_sources: Default::default(),
        }
    }
}

struct ScriptedCase<'a>(&'a mut Scripted, String);

impl Prepared for ScriptedCase<'_> {
    fn bytes_per_rep(&self) -> u64 {
        let n = self.0.prepared.lock().map_or(1, |p| p.len());
        self.0
            .bytes_by_prep
            .get(n.saturating_sub(1))
            .copied()
            .unwrap_or(1_000_000_000)
    }
    fn run_once(&mut self) -> Result<Rep, BenchError> {
        let i = self.0.next % self.0.times.len();
        let t = self.0.times[i];
        self.0.next += 1;
        if let Some((n, flag)) = &self.0.cancel_after {
            if self.0.next >= *n {
                flag.store(true, Ordering::SeqCst);
            }
        }
        let wall = self.0.walls.get(i).copied();
        Ok(Rep {
            seconds: t,
            wall_seconds: wall,
        })
    }
    fn cold_gbps(&self) -> Option<Vec<f64>> {
        self.0.cold.clone()
    }
    /// Its `samples`: how many data checks had run when it was read.
    fn gpu_state(&self) -> Option<hwc_model::GpuCaseState> {
        let checks = self.0.verified_after.lock().map_or(0, |v| v.len());
        Some(hwc_model::GpuCaseState {
            samples: checks as u32,
            ..Default::default()
        })
    }
    fn watch(&mut self) {
        if let Ok(mut w) = self.0.watched.lock() {
            w.push((self.0.next, usize::MAX));
        }
    }
    fn busy_meanwhile(&mut self) -> Option<String> {
        std::thread::sleep(self.0.watch_wait);
        if let Ok(mut w) = self.0.watched.lock() {
            if let Some(last) = w.last_mut() {
                last.1 = self.0.next;
            }
        }
        let n = self.0.prepared.lock().map_or(1, |p| p.len());
        self.0
            .busy_meanwhile
            .get(n.saturating_sub(1))
            .cloned()
            .flatten()
    }
    fn verify(&mut self) -> Result<(), BenchError> {
        if let Ok(mut v) = self.0.verified_after.lock() {
            v.push(self.0.next);
        }
        if self.0.fail_verify_of.as_deref() == Some(self.1.as_str()) {
            return Err(BenchError::failed("data mismatch in the lead"));
        }
        if self.0.verify_ok {
            Ok(())
        } else {
            Err(BenchError::failed("data mismatch at byte 42"))
        }
    }
    fn also(&self) -> Vec<Also> {
        match &self.0.also {
            // The lead names its companion; other cases name none.
            Some((lead, key, _)) if *lead == self.1 => vec![Also {
                key: key.clone(),
                bytes_per_rep: 500_000_000,
            }],
            _ => Vec::new(),
        }
    }
    fn last_also_seconds(&self) -> Vec<f64> {
        match &self.0.also {
            Some((_, _, t)) => vec![t[(self.0.next - 1) % t.len()]],
            None => Vec::new(),
        }
    }
    fn also_notes(&self, index: usize) -> Vec<String> {
        vec![format!("companion note {index}")]
    }
    fn placement(&self) -> Option<Placement> {
        Some(Placement {
            cpus: Some("0".into()),
            verified: true,
            detail: format!("placed for {}", self.1),
        })
    }
    fn notes(&self) -> Vec<String> {
        vec!["lead note".into()]
    }
    fn last_sched(&self) -> Option<hwc_model::RepSched> {
        let i = (self.0.next - 1) % self.0.times.len();
        self.0.sched.get(i).cloned().flatten()
    }
    fn sched_sources(&self) -> hwc_model::SchedSources {
        self.0.sched_sources.clone()
    }
}

impl Engine for Scripted {
    fn id(&self) -> EngineId {
        self.engine.clone()
    }
    fn prepare<'a>(&'a mut self, case: &Case) -> Result<Box<dyn Prepared + 'a>, BenchError> {
        if self.unavailable {
            return Err(BenchError::Unavailable {
                reason: "no such device".into(),
                hint: Some("plug one in".into()),
            });
        }
        if let Ok(mut p) = self.prepared.lock() {
            if self.prepare_limit.is_some_and(|n| p.len() >= n) {
                return Err(BenchError::failed("out of pinned memory"));
            }
            p.push(case.key.clone());
        }
        Ok(Box::new(ScriptedCase(self, case.key.clone())))
    }
    fn idle_check(&mut self, _case: &Case) -> Idle {
        if self.busy {
            Idle::Busy("3 other processes".into())
        } else {
            Idle::Idle
        }
    }
    fn refuse_when_busy(&self) -> bool {
        self.refuse
    }
}

/// A case of `path` for the scripted engine; one of `gds` for an engine no run has.
fn case(path: PathId, warmup: u32, timed: u32) -> Case {
    let engine = if path == PathId::Gds {
        "absent"
    } else {
        "scripted"
    };
    Case {
        key: format!("{path}/test"),
        path,
        engine: EngineId::new(engine),
        cell: "test".into(),
        spec: Spec::HostCopy(HostCopySpec {
            size_bytes: 1,
            threads: 1,
            cpu_node: 0,
            src_node: 0,
            dst_node: 0,
        }),
        reps: Reps {
            warmup,
            timed,
            retry_above_spread_pct: None,
            steady: None,
        },
    }
}

fn run1(b: Scripted, c: Case, opts: RunOptions) -> RunOutcome {
    let mut backends: Vec<Box<dyn Engine>> = vec![Box::new(b)];
    run(
        &[c],
        &mut backends,
        &opts,
        &mut NoObserver,
        &AtomicBool::new(false),
    )
}

#[test]
fn cold_and_warmup_are_kept_apart_from_the_statistics() {
    // cold 4 s (0.25 GB/s), warm-up 2 s, then 1, 1, 0.5, 1, 1 s.
    let b = Scripted::new(&[4.0, 2.0, 1.0, 1.0, 0.5, 1.0, 1.0]);
    let out = run1(b, case(PathId::HostRam, 1, 5), RunOptions::default());
    let r = &out.results[0];
    assert_eq!(r.measurement.cold_gbps, Some(0.25));
    assert_eq!(r.warmup_gbps, vec![0.5]);
    assert_eq!(r.samples_gbps, vec![1.0, 1.0, 2.0, 1.0, 1.0]);
    let s = r.measurement.gbps;
    assert_eq!((s.median, s.min, s.max, s.n), (1.0, 1.0, 2.0, 5));
    assert!((s.spread_pct - 100.0).abs() < 1e-9);
    assert!(!r.measurement.contended);
}

#[test]
fn a_case_of_an_engine_not_in_the_run_is_waived_not_measured() {
    let b = Scripted::new(&[1.0]);
    let out = run1(b, case(PathId::Gds, 0, 3), RunOptions::default());
    assert!(out.results.is_empty());
    assert_eq!(out.waived.len(), 1);
    assert_eq!(out.waived[0].reason, "engine absent is not in this run");
    assert_eq!(out.waived[0].engine, Some(EngineId::new("absent")));
}

#[test]
fn unavailable_becomes_a_waiver_with_its_hint() {
    let mut b = Scripted::new(&[1.0]);
    b.unavailable = true;
    let out = run1(b, case(PathId::HostRam, 0, 3), RunOptions::default());
    assert_eq!(out.waived[0].reason, "no such device");
    assert_eq!(out.waived[0].hint.as_deref(), Some("plug one in"));
}

#[test]
fn a_failed_verification_fails_the_case_alone() {
    let mut b = Scripted::new(&[1.0]);
    b.verify_ok = false;
    let mut backends: Vec<Box<dyn Engine>> = vec![Box::new(b)];
    let out = run(
        &[case(PathId::HostRam, 0, 3), case(PathId::Gds, 0, 1)],
        &mut backends,
        &RunOptions::default(),
        &mut NoObserver,
        &AtomicBool::new(false),
    );
    assert_eq!(out.failures.len(), 1);
    assert!(out.failures[0].error.contains("mismatch"));
    assert_eq!(out.waived.len(), 1, "the next case still ran");
}

#[test]
fn the_data_is_checked_once_after_the_timed_repetitions_and_a_bad_check_leaves_no_figure() {
    // Cold, 2 warm-ups, 5 timed: the check reads the last timed repetition's data, so that
    // reading it back (a host destination into the CPU caches) precedes no timed repetition.
    let b = Scripted::new(&[1.0]);
    let checks = b.verified_after.clone();
    let out = run1(b, case(PathId::HostRam, 2, 5), RunOptions::default());
    assert_eq!(out.results.len(), 1);
    assert_eq!(*checks.lock().unwrap(), vec![8]);
    assert!(out.results[0].phase_seconds.is_some(), "phases are kept");
    // The GPU's state is read before the check, right after the last timed repetition.
    let state = out.results[0].measurement.evidence.gpu_state.as_ref();
    assert_eq!(state.map(|s| s.samples), Some(0));

    // Windows timed again at once: still one check, after the last of them.
    let b = Scripted::new(&[1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
    let checks = b.verified_after.clone();
    let mut c = case(PathId::HostRam, 0, 3);
    c.reps.retry_above_spread_pct = Some(1);
    let out = run1(b, c, RunOptions::default());
    assert_eq!(out.results.len(), 1);
    assert_eq!(
        *checks.lock().unwrap(),
        vec![7],
        "cold, then two windows of 3"
    );

    // Data that fails its check after good-looking repetitions: no figure, the case fails.
    let mut b = Scripted::new(&[1.0]);
    b.verify_ok = false;
    let checks = b.verified_after.clone();
    let out = run1(b, case(PathId::HostRam, 1, 5), RunOptions::default());
    assert!(out.results.is_empty());
    assert!(out.failures[0].error.contains("mismatch"));
    assert_eq!(*checks.lock().unwrap(), vec![7]);
}

#[test]
fn busy_is_refused_or_marked_contended() {
    let mut b = Scripted::new(&[1.0]);
    b.busy = true;
    b.refuse = true;
    let out = run1(b, case(PathId::HostRam, 0, 3), RunOptions::default());
    assert!(out.failures[0].error.contains("--allow-contended"));

    let mut b = Scripted::new(&[1.0]);
    b.busy = true;
    b.refuse = true;
    let opts = RunOptions {
        allow_contended: true,
        ..RunOptions::default()
    };
    let out = run1(b, case(PathId::HostRam, 0, 3), opts);
    let m = &out.results[0].measurement;
    assert!(m.contended);
    assert!(m.notes[0].contains("3 other processes"));
}

#[test]
fn a_cold_figure_the_preparation_timed_replaces_the_cold_repetition() {
    // No warm-up: the timed repetitions are the first the runner runs.
    let mut b = Scripted::new(&[1.0, 1.0, 2.0]);
    b.cold = Some(vec![0.8]);
    let watched = b.watched.clone();
    let out = run1(b, case(PathId::HostRam, 0, 3), RunOptions::default());
    let r = &out.results[0];
    assert_eq!(r.measurement.cold_gbps, Some(0.8));
    assert_eq!(r.samples_gbps, vec![1.0, 1.0, 0.5]);
    assert_eq!(*watched.lock().unwrap(), vec![(0, 3)]);

    // A companion takes its own cold figure, by its index in `also`.
    let mut b = paired(&[1.0; 4], &[0.5; 4]);
    b.cold = Some(vec![0.9, 0.7]);
    let (out, _) = run_all(b, &grouped_plan(3, None));
    assert_eq!(result(&out, "pair/h2d").measurement.cold_gbps, Some(0.9));
    assert_eq!(result(&out, "pair/d2h").measurement.cold_gbps, Some(0.7));

    // Figures short of the members, or not a rate: the runner times its own cold repetition.
    for cold in [
        vec![0.9],
        vec![0.9, f64::INFINITY],
        vec![f64::NAN, 0.7],
        vec![0.0, 0.7],
    ] {
        let mut b = paired(&[2.0, 1.0, 1.0, 1.0, 1.0], &[0.5; 5]);
        b.cold = Some(cold.clone());
        let (out, _) = run_all(b, &grouped_plan(3, None));
        let got = result(&out, "pair/h2d").measurement.cold_gbps;
        assert_eq!(got, Some(0.5), "{cold:?}");
    }
}

#[test]
fn other_work_while_the_repetitions_ran_marks_the_case_contended() {
    // The watch spans the cold repetition, the warm-up and the timed ones (1 + 1 + 3).
    let mut b = Scripted::new(&[1.0]);
    b.busy_meanwhile = vec![Some("CPU 12 was 100 % busy while the case ran".into())];
    let watched = b.watched.clone();
    let out = run1(b, case(PathId::HostRam, 1, 3), RunOptions::default());
    let m = &out.results[0].measurement;
    assert!(m.contended);
    assert!(m
        .notes
        .contains(&"contended: CPU 12 was 100 % busy while the case ran".to_string()));
    assert_eq!(*watched.lock().unwrap(), vec![(0, 5)]);

    // Nothing else ran: not contended. The time the watch waited counts as the guard's.
    let mut b = Scripted::new(&[1.0]);
    b.watch_wait = std::time::Duration::from_millis(30);
    let out = run1(b, case(PathId::HostRam, 1, 3), RunOptions::default());
    assert!(!out.results[0].measurement.contended);
    let phases = out.results[0].phase_seconds.unwrap();
    assert!(phases.idle_check >= 0.03, "{phases:?}");

    // Timed again after its engine's other cases, busy only then: the first windows stand.
    let mut b = Scripted::new(&[1.0, 1.0, 2.0, 1.0, 1.0, 3.0, 1.0]);
    b.busy_meanwhile = vec![
        None,
        None,
        Some("CPU 3 was 90 % busy while the case ran".into()),
    ];
    let mut c = case(PathId::HostRam, 0, 3);
    c.reps.retry_above_spread_pct = Some(1);
    let mut other = case(PathId::HostRam, 0, 3);
    other.key = "host_ram/other".into();
    let (out, prepared) = run_all(b, &[c, other]);
    assert_eq!(prepared.len(), 3, "{prepared:?}");
    let r = out
        .results
        .iter()
        .find(|r| r.measurement.key == "host_ram/test")
        .unwrap();
    assert!(!r.measurement.contended);
    let windows = r.measurement.evidence.windows.as_ref().unwrap();
    assert!(
        format!("{windows:?}").contains("busy then: CPU 3 was 90 % busy"),
        "{windows:?}"
    );
}

/// The wall clock's disagreement of a case of a cold and 3 timed repetitions of 1 s by the
/// timer, whose wall clock read `walls` (cold first), checked at 2 %.
fn timer_check(walls: [f64; 4]) -> Option<hwc_model::WallClockDisagreement> {
    let mut b = Scripted::new(&[1.0; 4]);
    b.walls = walls.to_vec();
    let opts = RunOptions {
        wall_tolerance: Some(0.02),
        ..RunOptions::default()
    };
    let out = run1(b, case(PathId::HostRam, 0, 3), opts);
    out.results[0]
        .measurement
        .evidence
        .wall_clock_disagreement
        .clone()
}

/// Whether `d` flags the timer, `apart_pct` (to 0.1) from the wall clock.
fn flags_timer(d: &Option<hwc_model::WallClockDisagreement>, apart_pct: f64) -> bool {
    d.as_ref()
        .is_some_and(|d| (d.apart_pct - apart_pct).abs() < 0.05 && d.tolerance_pct == 2.0)
}

#[test]
fn wall_clock_disagreement_is_flagged() {
    let d = timer_check([1.05; 4]);
    assert!(flags_timer(&d, 4.8), "{d:?}");
    let shown = d.unwrap().to_string();
    assert!(shown.contains("4.8 % apart"), "{shown}");
}

#[test]
fn one_repetition_that_caught_a_host_stall_does_not_flag_the_timer() {
    // The second timed repetition's wall span caught the host thread descheduled for 0.5 s.
    // The medians agree: no note.
    assert_eq!(timer_check([1.0, 1.0, 1.5, 1.0]), None);
    // Two of the three: the timer's median is not the wall clock's.
    let d = timer_check([1.0, 1.5, 1.5, 1.0]);
    assert!(flags_timer(&d, 33.3), "{d:?}");
}

#[test]
fn cancel_stops_before_the_next_case() {
    let b = Scripted::new(&[1.0]);
    let mut backends: Vec<Box<dyn Engine>> = vec![Box::new(b)];
    let cancel = AtomicBool::new(true);
    let out = run(
        &[case(PathId::HostRam, 0, 3)],
        &mut backends,
        &RunOptions::default(),
        &mut NoObserver,
        &cancel,
    );
    assert!(out.interrupted);
    assert!(out.results.is_empty());
}

/// Records what `expect` announced to it.
struct Announced {
    engine: EngineId,
    keys: std::rc::Rc<std::cell::RefCell<Vec<String>>>,
}

impl Engine for Announced {
    fn id(&self) -> EngineId {
        self.engine.clone()
    }
    fn prepare<'a>(&'a mut self, _case: &Case) -> Result<Box<dyn Prepared + 'a>, BenchError> {
        Err(BenchError::failed("not measured in this test"))
    }
    fn expect(&mut self, cases: &[&Case]) {
        self.keys
            .borrow_mut()
            .extend(cases.iter().map(|c| c.key.clone()));
    }
    fn environment(&self) -> hwc_model::Environment {
        let mut env = hwc_model::Environment::new();
        env.insert(format!("{}.setting", self.engine), "on".into());
        let mut narrow = hwc_model::Setting::from("narrow");
        narrow.shapes = vec![PathId::H2d];
        env.insert(format!("{}.narrow", self.engine), narrow);
        env
    }
}

#[test]
fn each_engine_is_told_in_advance_only_the_cases_it_will_run() {
    let first = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let second = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    // The first engine's cases are of host_ram and h2d; the second's of none (d2d's engine is
    // not in the run).
    let mut backends: Vec<Box<dyn Engine>> = vec![
        Box::new(Announced {
            engine: EngineId::new("first"),
            keys: first.clone(),
        }),
        Box::new(Announced {
            engine: EngineId::new("second"),
            keys: second.clone(),
        }),
    ];
    let of = |path, key: &str, engine: &'static str| Case {
        key: key.into(),
        engine: EngineId::new(engine),
        ..case(path, 0, 1)
    };
    let d2d = of(PathId::D2d, "d2d/cuda-copy/x", "nobody");
    let h2d = of(PathId::H2d, "h2d/cuda-copy/x", "first");
    let host = of(PathId::HostRam, "host/x", "first");
    let out = run(
        &[h2d, d2d, host],
        &mut backends,
        &RunOptions::default(),
        &mut NoObserver,
        &AtomicBool::new(false),
    );
    assert_eq!(
        *first.borrow(),
        vec!["h2d/cuda-copy/x".to_string(), "host/x".into()]
    );
    assert!(second.borrow().is_empty(), "{:?}", second.borrow());
    // An engine's settings shape the paths it measured, or the narrower ones it names; one
    // that measured nothing records none.
    let env = &out.environment;
    assert_eq!(
        env["first.setting"].shapes,
        vec![PathId::H2d, PathId::HostRam]
    );
    assert_eq!(env["first.narrow"].shapes, vec![PathId::H2d]);
    assert!(!env.keys().any(|k| k.starts_with("second.")), "{env:?}");
}

/// Logs each preparation and its finish, as `engine:event`.
struct Logged {
    engine: EngineId,
    log: std::rc::Rc<std::cell::RefCell<Vec<String>>>,
    cancel: Option<std::sync::Arc<AtomicBool>>,
}

impl Engine for Logged {
    fn id(&self) -> EngineId {
        self.engine.clone()
    }
    fn prepare<'a>(&'a mut self, case: &Case) -> Result<Box<dyn Prepared + 'a>, BenchError> {
        self.log
            .borrow_mut()
            .push(format!("{}:{}", self.engine, case.key));
        if let Some(c) = &self.cancel {
            c.store(true, Ordering::SeqCst);
        }
        Err(BenchError::failed("not measured in this test"))
    }
    fn finish(&mut self) {
        self.log
            .borrow_mut()
            .push(format!("{}:finish", self.engine));
    }
}

#[test]
fn each_engine_finishes_after_its_last_case_and_before_the_next_engine_s_first() {
    let log = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let engines = |cancel: Option<std::sync::Arc<AtomicBool>>| -> Vec<Box<dyn Engine>> {
        ["a", "b", "idle"]
            .into_iter()
            .map(|e| {
                Box::new(Logged {
                    engine: EngineId::new(e),
                    log: log.clone(),
                    cancel: cancel.clone(),
                }) as Box<dyn Engine>
            })
            .collect()
    };
    let of = |key: &str, engine: &'static str| Case {
        key: key.into(),
        engine: EngineId::new(engine),
        ..case(PathId::NvmeRead, 0, 1)
    };
    let plan = [of("a1", "a"), of("a2", "a"), of("b1", "b")];
    run(
        &plan,
        &mut engines(None),
        &RunOptions::default(),
        &mut NoObserver,
        &AtomicBool::new(false),
    );
    // `idle` had no cases: it is not told to finish.
    assert_eq!(
        *log.borrow(),
        ["a:a1", "a:a2", "a:finish", "b:b1", "b:finish"]
    );
    // Interrupted in the first case: every engine that had cases still finishes.
    log.borrow_mut().clear();
    let cancel = std::sync::Arc::new(AtomicBool::new(false));
    let out = run(
        &plan,
        &mut engines(Some(cancel.clone())),
        &RunOptions::default(),
        &mut NoObserver,
        &cancel,
    );
    assert!(out.interrupted);
    assert_eq!(*log.borrow(), ["a:a1", "a:finish", "b:finish"]);
}

/// Runs for 2 s a repetition and moves 2, 4, 6, … GB (an engine that runs for a time).
struct ForATime {
    reps: u64,
}

impl Prepared for ForATime {
    fn bytes_per_rep(&self) -> u64 {
        // The median of the repetitions so far, as the profile records it.
        (self.reps + 1) * 1_000_000_000
    }
    fn run_once(&mut self) -> Result<Rep, BenchError> {
        self.reps += 1;
        Ok(Rep {
            seconds: 2.0,
            wall_seconds: None,
        })
    }
    fn last_bytes(&self) -> Option<u64> {
        Some(self.reps * 2_000_000_000)
    }
    fn verify(&mut self) -> Result<(), BenchError> {
        Ok(())
    }
}

struct ForATimeEngine;

impl Engine for ForATimeEngine {
    fn id(&self) -> EngineId {
        EngineId::new("scripted")
    }
    fn prepare<'a>(&'a mut self, _case: &Case) -> Result<Box<dyn Prepared + 'a>, BenchError> {
        Ok(Box::new(ForATime { reps: 0 }))
    }
}

#[test]
fn an_engine_that_runs_for_a_time_is_measured_by_the_bytes_each_repetition_moved() {
    let mut engines: Vec<Box<dyn Engine>> = vec![Box::new(ForATimeEngine)];
    let out = run(
        &[case(PathId::NvmeRead, 1, 3)],
        &mut engines,
        &RunOptions::default(),
        &mut NoObserver,
        &AtomicBool::new(false),
    );
    let m = &out.results[0].measurement;
    // Cold 2 GB, warm-up 4 GB, timed 6, 8 and 10 GB, each in 2 s.
    assert_eq!(m.cold_gbps, Some(1.0));
    assert_eq!((m.gbps.median, m.gbps.min, m.gbps.max), (4.0, 3.0, 5.0));
    assert_eq!(m.bytes_per_rep, 6_000_000_000);
}

fn retrying(timed: u32, limit_pct: u32) -> Case {
    Case {
        reps: Reps {
            warmup: 0,
            timed,
            retry_above_spread_pct: Some(limit_pct),
            steady: None,
        },
        ..case(PathId::HostRam, 0, timed)
    }
}

/// A case of 3 timed repetitions held to 1 %, run on a backend taking `times` seconds a
/// repetition (the cold one first).
fn held_to_1_pct(times: &[f64]) -> CaseResult {
    let out = run1(Scripted::new(times), retrying(3, 1), RunOptions::default());
    out.results[0].clone()
}

/// The case's account of its windows of timed repetitions, in words.
fn windows_note(r: &CaseResult) -> &str {
    &r.measurement
        .evidence
        .windows
        .as_ref()
        .expect("windows recorded")
        .detail
}

#[test]
fn a_steady_first_window_is_the_only_one() {
    // cold, then 1.00 / 1.005 / 1.00 s: spread 0.5 %, within 1 %.
    let r = &held_to_1_pct(&[1.0, 1.0, 1.005, 1.0]);
    assert_eq!(r.samples_gbps.len(), 3);
    assert!(r.measurement.evidence.windows.is_none());
}

#[test]
fn a_noisy_window_is_timed_again_and_the_steadiest_kept() {
    // cold, window 1: 1, 2, 1 s (1, 0.5, 1 GB/s: spread 50 %); window 2: 1, 1, 1 s (0 %).
    let r = &held_to_1_pct(&[1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0]);
    assert_eq!(r.samples_gbps, vec![1.0, 1.0, 1.0]);
    assert_eq!(r.measurement.gbps.spread_pct, 0.0);
    let note = windows_note(r);
    assert!(note.contains("spread 50.00 %, more than the 1 %"), "{note}");
    assert!(note.contains("2 windows in all"), "{note}");
    assert!(note.contains("medians 1.00, 1.00 GB/s"), "{note}");
    assert!(note.contains("spreads 50.00, 0.00 %"), "{note}");
    assert!(note.contains("window 2's, the steadiest"), "{note}");
    assert!(!note.contains("unsteady"), "{note}");
    assert!(!r.measurement.unsteady());
    let w = r.measurement.evidence.windows.as_ref().unwrap();
    assert_eq!((w.timed, w.kept, w.cut_short), (2, 2, false));
    assert_eq!(w.medians_gbps, vec![1.0, 1.0]);
    assert_eq!(w.spreads_pct, vec![50.0, 0.0]);
}

#[test]
fn a_machine_that_stays_noisy_gets_the_steadiest_of_three_windows_and_says_so() {
    // cold, then windows of 1, 0.5, 1 GB/s (spread 50 %), 1, 1, 1.25 (25 %) and 1, 2, 1
    // (100 %): the second is kept, and no fourth runs.
    let times = [1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 0.8, 1.0, 0.5, 1.0, 1.0, 9.0];
    let r = &held_to_1_pct(&times);
    assert_eq!(r.samples_gbps, vec![1.0, 1.0, 1.25]);
    assert_eq!(r.measurement.gbps.median, 1.0);
    let note = windows_note(r);
    assert!(note.contains("3 windows in all"), "{note}");
    assert!(note.contains("window 2's, the steadiest"), "{note}");
    assert!(note.contains("no window stayed within 1 %"), "{note}");
    assert_eq!(r.measurement.spread_limit_pct, Some(1));
    assert!(r.measurement.unsteady());
}

#[test]
fn without_a_limit_a_noisy_window_stands() {
    let b = Scripted::new(&[1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0]);
    let out = run1(b, case(PathId::HostRam, 0, 3), RunOptions::default());
    let r = &out.results[0];
    assert_eq!(r.samples_gbps, vec![1.0, 0.5, 1.0]);
    assert!((r.measurement.gbps.spread_pct - 50.0).abs() < 1e-9);
    assert_eq!(r.measurement.spread_limit_pct, None);
    assert!(!r.measurement.unsteady());
}

#[test]
fn only_the_kept_window_s_timer_check_is_reported() {
    // Window 1 (spread 50 %) has a wall clock 10 % off; window 2, kept, agrees.
    let mut b = Scripted::new(&[1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0]);
    b.walls = vec![1.0, 1.1, 2.0, 1.0, 1.0, 1.0, 1.0];
    let opts = RunOptions {
        wall_tolerance: Some(0.02),
        ..RunOptions::default()
    };
    let out = run1(b, retrying(3, 1), opts.clone());
    let r = &out.results[0];
    assert_eq!(r.samples_gbps, vec![1.0, 1.0, 1.0]);
    assert_eq!(r.measurement.evidence.wall_clock_disagreement, None);
    // Kept with the disagreement, the note is there.
    let mut b = Scripted::new(&[1.0, 1.0, 1.0, 1.0]);
    b.walls = vec![1.0, 1.1, 1.1, 1.0];
    let out = run1(b, retrying(3, 1), opts);
    assert!(flags_timer(
        &out.results[0].measurement.evidence.wall_clock_disagreement,
        9.1
    ));
}

/// A case of 3 repetitions held to 1 %, on `times`, with the interrupt flag set after `after`
/// repetitions (the cold one counted): its outcome and how many repetitions ran.
fn interrupted_after(after: usize, times: &[f64]) -> (CaseOutcome, usize) {
    let flag = std::sync::Arc::new(AtomicBool::new(false));
    let mut b = Scripted::new(times);
    b.cancel_after = Some((after, flag.clone()));
    let outcome = run_case(&retrying(3, 1), &mut b, &RunOptions::default(), &flag);
    (outcome, b.next)
}

#[test]
fn an_interrupt_after_a_noisy_window_keeps_it_instead_of_timing_another() {
    // cold + 3 repetitions (spread 50 %), then the flag: the case is measured, one window.
    let (outcome, ran) = interrupted_after(4, &[1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0]);
    match outcome {
        CaseOutcome::Measured(r) => {
            assert_eq!(r.samples_gbps, vec![1.0, 0.5, 1.0]);
            assert!(r.measurement.evidence.windows.is_none());
            assert!(r.measurement.unsteady());
        }
        other => panic!("expected a measurement, got {other:?}"),
    }
    assert_eq!(ran, 4, "no repetition after the interrupt");
}

#[test]
fn an_interrupt_while_timed_again_keeps_the_finished_window_and_says_so() {
    // cold + window 1 (spread 50 %), one repetition of window 2, then the flag.
    let (outcome, ran) = interrupted_after(5, &[1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0]);
    match outcome {
        CaseOutcome::Measured(r) => {
            assert_eq!(r.samples_gbps, vec![1.0, 0.5, 1.0]);
            let note = windows_note(&r);
            assert!(
                note.contains("interrupted while the case was timed again, so 1 finished window"),
                "{note}"
            );
            assert!(note.contains("no window stayed within 1 %"), "{note}");
            assert!(r.measurement.unsteady());
        }
        other => panic!("expected a measurement, got {other:?}"),
    }
    assert_eq!(ran, 5, "no repetition after the interrupt");
    // Interrupted within the first window, there is no figure.
    let (outcome, _) = interrupted_after(3, &[1.0, 1.0, 2.0, 1.0]);
    assert!(matches!(outcome, CaseOutcome::Failed(_)));
}

/// Three cases: a lead, an unrelated one, and the lead's companion (planned last).
fn grouped_plan(timed: u32, limit: Option<u32>) -> Vec<Case> {
    let named = |key: &str| Case {
        key: key.into(),
        reps: Reps {
            warmup: 1,
            timed,
            retry_above_spread_pct: limit,
            steady: None,
        },
        ..case(PathId::HostRam, 1, timed)
    };
    vec![named("pair/h2d"), named("other"), named("pair/d2h")]
}

/// A backend whose case `pair/h2d` names `pair/d2h` as timed with it, at `companion` seconds
/// a repetition (by the same index as `times`).
fn paired(times: &[f64], companion: &[f64]) -> Scripted {
    let mut b = Scripted::new(times);
    b.also = Some(("pair/h2d".into(), "pair/d2h".into(), companion.to_vec()));
    b
}

/// The run's measurement of `key`.
fn result<'o>(out: &'o RunOutcome, key: &str) -> &'o CaseResult {
    out.results
        .iter()
        .find(|r| r.measurement.key == key)
        .expect("a measurement of the key")
}

/// The keys of a run's measurements, in the order they were filed.
fn result_keys(out: &RunOutcome) -> Vec<&str> {
    out.results
        .iter()
        .map(|r| r.measurement.key.as_str())
        .collect()
}

/// Run `cases` with `b`; the keys it prepared, in order.
fn run_all(b: Scripted, cases: &[Case]) -> (RunOutcome, Vec<String>) {
    let prepared = b.prepared.clone();
    let mut backends: Vec<Box<dyn Engine>> = vec![Box::new(b)];
    let out = run(
        cases,
        &mut backends,
        &RunOptions::default(),
        &mut NoObserver,
        &AtomicBool::new(false),
    );
    let keys = prepared.lock().map(|p| p.clone()).unwrap_or_default();
    (out, keys)
}

#[test]
fn a_companion_is_timed_in_the_lead_s_repetitions_and_not_run_again() {
    // Lead 1 s a repetition (1 GB/s); the companion's own timer 0.5, 0.25, 0.4 … s over its
    // 0.5 GB: 1, 2, 1.25 … GB/s.
    let b = paired(&[1.0; 6], &[0.5, 0.25, 0.4, 0.4, 0.4, 0.5]);
    let (out, prepared) = run_all(b, &grouped_plan(3, None));
    assert_eq!(
        prepared,
        vec!["pair/h2d", "other"],
        "the companion is not prepared"
    );
    let keys = result_keys(&out);
    assert_eq!(keys, vec!["pair/h2d", "pair/d2h", "other"]);
    let (lead, companion) = (&out.results[0], &out.results[1]);
    assert_eq!(lead.samples_gbps, vec![1.0; 3]);
    // cold (rep 1), warm-up (rep 2: 2 GB/s), timed reps 3–5.
    assert_eq!(companion.measurement.cold_gbps, Some(1.0));
    assert_eq!(companion.warmup_gbps, vec![2.0]);
    assert_eq!(companion.samples_gbps, vec![1.25, 1.25, 1.25]);
    assert_eq!(companion.measurement.bytes_per_rep, 500_000_000);
    assert_eq!(companion.case_seconds, None);
    assert!(lead.case_seconds.is_some_and(|s| s > 0.0));
    let notes = &companion.measurement.notes;
    assert!(
        notes[0].starts_with("timed in the same repetitions as pair/h2d"),
        "{notes:?}"
    );
    assert_eq!(notes[1], "companion note 0");
    assert!(!notes.iter().any(|n| n == "lead note"), "{notes:?}");
    assert!(lead.measurement.notes.iter().any(|n| n == "lead note"));
    assert_eq!(companion.measurement.placement, lead.measurement.placement);
    assert!(lead.measurement.placement.is_some());
}

#[test]
fn a_companion_that_spreads_times_the_pair_again_and_the_lead_s_note_says_why() {
    // Lead steady throughout. Companion: window 1 spreads (0.5, 0.25, 0.5 s), window 2 not.
    let b = paired(&[1.0; 8], &[0.5, 0.5, 0.5, 0.25, 0.5, 0.5, 0.5, 0.5]);
    let (out, _) = run_all(b, &grouped_plan(3, Some(1)));
    let (lead, companion) = (&out.results[0], &out.results[1]);
    assert_eq!(companion.samples_gbps, vec![1.0; 3], "window 2 kept");
    assert!(!companion.measurement.unsteady());
    let note = windows_note(companion);
    assert!(
        note.contains("more than the 1 % this case allows"),
        "{note}"
    );
    let note = windows_note(lead);
    assert!(
        note.contains(
            "within the 1 % this case allows, but a figure timed in the same \
                       repetitions spread more"
        ),
        "{note}"
    );
    assert!(
        note.contains("the one whose figures went least past their limits"),
        "{note}"
    );
}

#[test]
fn a_companion_the_plan_does_not_hold_or_already_ran_is_ignored() {
    let mut b = Scripted::new(&[1.0; 4]);
    b.also = Some(("pair/h2d".into(), "not/planned".into(), vec![0.5; 4]));
    let (out, prepared) = run_all(b, &grouped_plan(3, None));
    let keys = result_keys(&out);
    assert_eq!(keys, vec!["pair/h2d", "other", "pair/d2h"]);
    assert_eq!(prepared.len(), 3);
    // A companion planned before the lead has run already: not measured twice.
    let b = paired(&[1.0; 4], &[0.5; 4]);
    let mut plan = grouped_plan(3, None);
    plan.swap(0, 2);
    let (out, prepared) = run_all(b, &plan);
    assert_eq!(out.results.len(), 3);
    assert_eq!(prepared.len(), 3);
}

#[test]
fn a_lead_that_fails_leaves_its_companion_to_run_alone() {
    let mut b = paired(&[1.0; 4], &[0.5; 4]);
    b.fail_verify_of = Some("pair/h2d".into());
    let (out, prepared) = run_all(b, &grouped_plan(3, None));
    assert_eq!(out.failures.len(), 1);
    assert_eq!(out.failures[0].key, "pair/h2d");
    assert_eq!(prepared, vec!["pair/h2d", "other", "pair/d2h"]);
    let alone = result(&out, "pair/d2h");
    assert!(!alone
        .measurement
        .notes
        .iter()
        .any(|n| n.contains("timed in the same repetitions")));
}

#[test]
fn cases_that_share_a_key_each_run_once_without_companions() {
    let b = Scripted::new(&[1.0; 4]);
    let mut plan = grouped_plan(3, None);
    plan[2].key = "pair/h2d".into();
    let (out, prepared) = run_all(b, &plan);
    assert_eq!(out.results.len(), 3);
    assert_eq!(prepared, vec!["pair/h2d", "other", "pair/h2d"]);
}

#[test]
fn a_companion_that_asks_for_other_repetitions_runs_alone() {
    let b = paired(&[1.0; 4], &[0.5; 4]);
    let mut plan = grouped_plan(3, None);
    plan[2].reps.timed = 5;
    let (out, prepared) = run_all(b, &plan);
    assert_eq!(prepared, vec!["pair/h2d", "other", "pair/d2h"]);
    let alone = result(&out, "pair/d2h");
    assert_eq!(alone.samples_gbps.len(), 5);
}

#[test]
fn a_figure_without_a_limit_in_a_retimed_group_says_why_and_is_not_unsteady() {
    // The lead is held to 1 % and spreads in window 1 (1, 2, 1 s); its companion has no
    // limit and its own timer reads steady throughout.
    let b = paired(&[1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0], &[0.4; 8]);
    let mut plan = grouped_plan(3, Some(1));
    plan[2].reps.retry_above_spread_pct = None;
    let (out, _) = run_all(b, &plan);
    let (lead, companion) = (&out.results[0], &out.results[1]);
    assert_eq!(lead.samples_gbps, vec![1.0; 3], "window 2 kept");
    assert_eq!(companion.measurement.spread_limit_pct, None);
    assert!(!companion.measurement.unsteady());
    let note = windows_note(companion);
    assert!(
        note.contains("a figure timed in the same repetitions spread more than its case allows"),
        "{note}"
    );
    assert!(!note.contains("unsteady"), "{note}");
    assert!(windows_note(lead).contains("more than the 1 % this case allows"));
}

#[test]
fn a_companion_over_its_limit_only_in_the_window_kept_for_the_pair_says_another_held_it() {
    // Windows of 3 after the cold repetition and 1 warm-up. Lead: 50 %, 0 %, 50 %. Companion
    // (0.5 GB): 0 %, 2.04 % (0.49 s once), 0 %. Window 2 goes least past the limits (2.04).
    let lead = [1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 1.0];
    let companion = [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.49, 0.5, 0.5, 0.5, 0.5];
    let (out, _) = run_all(paired(&lead, &companion), &grouped_plan(3, Some(1)));
    let (lead, companion) = (&out.results[0], &out.results[1]);
    assert_eq!(lead.samples_gbps, vec![1.0; 3], "window 2 kept");
    assert!(!lead.measurement.unsteady());
    assert!(companion.measurement.unsteady());
    let note = windows_note(companion);
    assert!(note.contains("3 windows in all"), "{note}");
    assert!(
        note.contains("spread more than 1 % for this one (another window held it within 1 %)"),
        "{note}"
    );
    assert!(!note.contains("no window stayed"), "{note}");
}

#[test]
fn a_companion_whose_timer_fails_fails_its_lead_and_then_runs_alone() {
    // The companion's timer reads 0 s in the cold repetition.
    let b = paired(&[1.0; 8], &[0.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]);
    let (out, prepared) = run_all(b, &grouped_plan(3, None));
    assert_eq!(out.failures.len(), 1);
    assert_eq!(out.failures[0].key, "pair/h2d");
    assert!(
        out.failures[0].error.contains("pair/d2h"),
        "{}",
        out.failures[0].error
    );
    assert_eq!(prepared, vec!["pair/h2d", "other", "pair/d2h"]);
    assert_eq!(result_keys(&out), vec!["other", "pair/d2h"]);
}

#[test]
fn a_lead_that_names_itself_as_timed_with_it_is_not_its_own_companion() {
    let mut b = Scripted::new(&[1.0; 4]);
    b.also = Some(("pair/h2d".into(), "pair/h2d".into(), vec![0.5; 4]));
    let (out, prepared) = run_all(b, &grouped_plan(3, None));
    assert_eq!(result_keys(&out), vec!["pair/h2d", "other", "pair/d2h"]);
    assert_eq!(prepared, vec!["pair/h2d", "other", "pair/d2h"]);
    assert!(!out.results[0]
        .measurement
        .notes
        .iter()
        .any(|n| n.contains("timed in the same repetitions")));
}

/// What an observer saw: `start KEY` and `finish KEY` in order.
#[derive(Default)]
struct Recorder(Vec<String>);

impl Observer for Recorder {
    fn case_started(&mut self, _index: usize, _total: usize, case: &Case) {
        self.0.push(format!("start {}", case.key));
    }
    fn case_finished(&mut self, outcome: &CaseOutcome) {
        self.0.push(format!("finish {}", outcome_key(outcome)));
    }
    fn case_retimed(&mut self, index: usize, outcome: &CaseOutcome, timed_again: bool) {
        let what = if timed_again { "retimed" } else { "kept" };
        self.0
            .push(format!("{what} {} (#{index})", outcome_key(outcome)));
    }
}

fn outcome_key(outcome: &CaseOutcome) -> String {
    match outcome {
        CaseOutcome::Measured(r) => r.measurement.key.clone(),
        CaseOutcome::Waived(w) => w.scope.clone().unwrap_or_default(),
        CaseOutcome::Failed(f) => f.key.clone(),
    }
}

#[test]
fn an_observer_sees_a_companion_start_and_finish_after_its_lead() {
    let mut backends: Vec<Box<dyn Engine>> = vec![Box::new(paired(&[1.0; 6], &[0.5; 6]))];
    let mut seen = Recorder::default();
    run(
        &grouped_plan(3, None),
        &mut backends,
        &RunOptions::default(),
        &mut seen,
        &AtomicBool::new(false),
    );
    assert_eq!(
        seen.0,
        vec![
            "start pair/h2d",
            "finish pair/h2d",
            "start pair/d2h",
            "finish pair/d2h",
            "start other",
            "finish other"
        ]
    );
}

#[test]
fn a_zero_limit_times_again_any_window_that_spread_at_all() {
    // Window 1 spreads 0.5 %, window 2 not at all.
    let out = run1(
        Scripted::new(&[1.0, 1.0, 1.005, 1.0, 1.0, 1.0, 1.0]),
        retrying(3, 0),
        RunOptions::default(),
    );
    let r = &out.results[0];
    assert_eq!(r.samples_gbps, vec![1.0; 3], "window 2 kept");
    assert!(windows_note(r).contains("2 windows in all"));
    assert!(!r.measurement.unsteady());
}

/// Cases of 3 timed repetitions and no warm-up named `keys`, each held to 1 % where `held`.
fn named_plan(keys: &[&str], held: &[bool]) -> Vec<Case> {
    keys.iter()
        .zip(held)
        .map(|(key, &held)| Case {
            key: (*key).into(),
            reps: Reps {
                warmup: 0,
                timed: 3,
                retry_above_spread_pct: held.then_some(1),
                steady: None,
            },
            ..case(PathId::HostRam, 0, 3)
        })
        .collect()
}

/// Run `cases` on `b`, watched: the outcome, the keys prepared in order, and what the observer
/// saw.
fn run_watched(
    b: Scripted,
    cases: &[Case],
    cancel: &AtomicBool,
) -> (RunOutcome, Vec<String>, Vec<String>) {
    let prepared = b.prepared.clone();
    let mut backends: Vec<Box<dyn Engine>> = vec![Box::new(b)];
    let mut seen = Recorder::default();
    let out = run(
        cases,
        &mut backends,
        &RunOptions::default(),
        &mut seen,
        cancel,
    );
    let keys = prepared.lock().map(|p| p.clone()).unwrap_or_default();
    (out, keys, seen.0)
}

/// Seconds a repetition, in order, for a held case `a` of 3 repetitions that spreads 50 % in
/// both windows timed at once (cold, then 1, 2, 1 s twice), a case `b` after it (cold and 3
/// repetitions of 1 s), then `a` prepared again (cold and 3 repetitions of `third` s).
fn noisy_a_steady_b_then_a_at(third: f64) -> Vec<f64> {
    let mut times = vec![1.0, 1.0, 2.0, 1.0, 1.0, 2.0, 1.0];
    times.extend([1.0; 4]);
    times.extend([third; 4]);
    times
}

#[test]
fn a_case_noisy_in_both_windows_at_once_is_timed_again_after_the_last_case() {
    // a: cold, windows 1 and 2 spread 50 % (1, 0.5, 1 GB/s); b (no limit): cold + 1 window;
    // a again at the end: cold, window 3 steady.
    let times = noisy_a_steady_b_then_a_at(1.0);
    let cases = named_plan(&["a", "b"], &[true, false]);
    let (out, prepared, seen) = run_watched(Scripted::new(&times), &cases, &AtomicBool::new(false));
    assert_eq!(prepared, vec!["a", "b", "a"]);
    assert_eq!(result_keys(&out), vec!["a", "b"], "filed in place, once");
    let a = result(&out, "a");
    assert_eq!(a.samples_gbps, vec![1.0; 3]);
    assert!(!a.measurement.unsteady());
    let note = windows_note(a);
    assert!(note.contains("timed again, 3 windows in all (window 3 after the run's other scripted cases, the case prepared anew)"), "{note}");
    assert!(note.contains("spreads 50.00, 50.00, 0.00 %"), "{note}");
    assert!(note.contains("window 3's, the steadiest"), "{note}");
    assert_eq!(a.warmup_gbps, Vec::<f64>::new());
    assert_eq!(
        a.measurement.cold_gbps,
        Some(1.0),
        "the first preparation's cold figure"
    );
    assert_eq!(
        seen,
        vec![
            "start a",
            "finish a",
            "start b",
            "finish b",
            "retimed a (#0)"
        ]
    );
    assert!(!out.interrupted);
}

#[test]
fn once_four_cases_in_a_row_stay_noisy_at_the_end_the_others_are_not_timed_again() {
    // Every window spreads 50 %: six held cases, timed twice each, then four at the end.
    let keys = ["c0", "c1", "c2", "c3", "c4", "c5"];
    let cases = named_plan(&keys, &[true; 6]);
    let (out, prepared, seen) =
        run_watched(Scripted::new(&[1.0, 2.0]), &cases, &AtomicBool::new(false));
    assert_eq!(
        prepared,
        vec!["c0", "c1", "c2", "c3", "c4", "c5", "c0", "c1", "c2", "c3"]
    );
    assert_eq!(result_keys(&out), keys.to_vec());
    for key in ["c0", "c3"] {
        let note = windows_note(result(&out, key));
        assert!(
            note.contains("3 windows in all (window 3 after the run's other scripted cases"),
            "{note}"
        );
        assert!(note.contains("no window stayed within 1 %"), "{note}");
    }
    for key in ["c4", "c5"] {
        let r = result(&out, key);
        let note = windows_note(r);
        assert!(
            note.contains("timed again, 2 windows in all (medians"),
            "{note}"
        );
        assert!(
            note.contains(
                "it was not timed again after the run's other scripted cases: the 4 timed again \
                 just before it (a duplex pair counting once) all stayed past their limits (the \
                 machine was still unsteady)"
            ),
            "{note}"
        );
        assert!(r.measurement.unsteady());
    }
    // Every case comes back once, the ones not timed again with their note.
    let back: Vec<&str> = seen[12..].iter().map(String::as_str).collect();
    assert_eq!(
        back,
        [
            "retimed c0 (#0)",
            "retimed c1 (#1)",
            "retimed c2 (#2)",
            "retimed c3 (#3)",
            "kept c4 (#4)",
            "kept c5 (#5)"
        ]
    );
}

#[test]
fn an_interrupt_while_cases_wait_to_be_timed_again_keeps_their_windows_and_says_so() {
    // a and b spread 50 % in windows 1 and 2 (7 repetitions each); the flag is set within a's
    // third preparation, before b's.
    let flag = std::sync::Arc::new(AtomicBool::new(false));
    let mut b = Scripted::new(&[1.0, 2.0]);
    b.cancel_after = Some((16, flag.clone()));
    let (out, prepared, seen) = run_watched(b, &named_plan(&["a", "b"], &[true, true]), &flag);
    assert_eq!(prepared, vec!["a", "b", "a"]);
    for (key, why) in [
        ("a", "the run was interrupted while it was"),
        ("b", "the run was interrupted first"),
    ] {
        let r = result(&out, key);
        assert_eq!(r.samples_gbps.len(), 3);
        let note = windows_note(r);
        assert!(
            note.contains("timed again, 2 windows in all (medians"),
            "{note}"
        );
        assert!(
            note.contains(&format!(
                "it was not timed again after the run's other scripted cases: {why}"
            )),
            "{note}"
        );
    }
    assert!(out.interrupted);
    assert_eq!(seen[4..], ["kept a (#0)".to_string(), "kept b (#1)".into()]);
}

#[test]
fn a_case_that_cannot_be_prepared_again_keeps_its_windows_and_says_why() {
    let mut b = Scripted::new(&[1.0, 2.0]);
    b.prepare_limit = Some(1);
    let (out, prepared, _) = run_watched(b, &named_plan(&["a"], &[true]), &AtomicBool::new(false));
    assert_eq!(prepared, vec!["a"]);
    assert!(out.failures.is_empty());
    let r = &out.results[0];
    assert_eq!(r.samples_gbps.len(), 3);
    let note = windows_note(r);
    assert!(
        note.contains(
            "it was not timed again after the run's other scripted cases: its preparation or repetitions \
             failed: out of pinned memory"
        ),
        "{note}"
    );
}

#[test]
fn a_pair_timed_again_at_the_end_brings_back_both_figures_from_the_window_kept() {
    // The lead steady; the companion (0.5 GB a repetition) spreads 50 % in windows 1 and 2
    // (after cold and warm-up: 2 repetitions each preparation), then holds in window 3.
    let lead = [1.0; 20];
    let mut companion = vec![0.5, 0.5];
    companion.extend([0.5, 0.25, 0.5, 0.5, 0.25, 0.5]);
    companion.extend([0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]);
    let b = paired(&lead, &companion);
    let (out, prepared, seen) = run_watched(b, &grouped_plan(3, Some(1)), &AtomicBool::new(false));
    assert_eq!(prepared, vec!["pair/h2d", "other", "pair/h2d"]);
    let d2h = result(&out, "pair/d2h");
    assert_eq!(d2h.samples_gbps, vec![1.0; 3]);
    assert!(
        windows_note(d2h).contains("window 3's"),
        "{}",
        windows_note(d2h)
    );
    let h2d = result(&out, "pair/h2d");
    assert!(windows_note(h2d).contains("window 3 after the run's other scripted cases"));
    assert!(h2d.case_seconds.is_some() && d2h.case_seconds.is_none());
    assert_eq!(
        seen[seen.len() - 2..],
        [
            "retimed pair/h2d (#0)".to_string(),
            "retimed pair/d2h (#2)".to_string()
        ]
    );
}

#[test]
fn a_backend_s_cases_are_timed_again_after_its_last_case_and_before_another_backend_s() {
    // Backend 1: a (held) spreads 50 % in windows 1 and 2, b (held) is steady, a holds in its
    // third window. Backend 2: x, planned after both.
    let times = noisy_a_steady_b_then_a_at(1.0);
    let mut cases = named_plan(&["a", "b", "x"], &[true, true, false]);
    cases[2].engine = EngineId::new("other");
    let mut other = Scripted::new(&[1.0]);
    other.engine = EngineId::new("other");
    let mut backends: Vec<Box<dyn Engine>> = vec![Box::new(Scripted::new(&times)), Box::new(other)];
    let mut seen = Recorder::default();
    let out = run(
        &cases,
        &mut backends,
        &RunOptions::default(),
        &mut seen,
        &AtomicBool::new(false),
    );
    assert_eq!(
        seen.0,
        vec![
            "start a",
            "finish a",
            "start b",
            "finish b",
            "retimed a (#0)",
            "start x",
            "finish x"
        ]
    );
    assert!(!result(&out, "a").measurement.unsteady());
    assert_eq!(result_keys(&out), vec!["a", "b", "x"]);
}

#[test]
fn a_window_kept_from_the_second_preparation_carries_that_preparation_s_bytes() {
    // a's second preparation moves 2 GB a repetition: 2 s repetitions read 1 GB/s.
    let times = noisy_a_steady_b_then_a_at(2.0);
    let mut b = Scripted::new(&times);
    b.bytes_by_prep = vec![1_000_000_000, 1_000_000_000, 2_000_000_000];
    let cases = named_plan(&["a", "b"], &[true, false]);
    let (out, prepared, _) = run_watched(b, &cases, &AtomicBool::new(false));
    assert_eq!(prepared, vec!["a", "b", "a"]);
    let a = result(&out, "a");
    assert!(
        windows_note(a).contains("window 3's"),
        "{}",
        windows_note(a)
    );
    assert_eq!(a.samples_gbps, vec![1.0; 3]);
    assert_eq!(a.measurement.bytes_per_rep, 2_000_000_000);
}

#[test]
fn a_case_timed_again_replaces_its_own_result_not_another_of_its_key() {
    // Two cases keyed a: the first steady, the second noisy twice, then steady.
    let times = [
        1.0, 1.0, 1.001, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0,
    ];
    let cases = named_plan(&["a", "a"], &[true, true]);
    let (out, _, seen) = run_watched(Scripted::new(&times), &cases, &AtomicBool::new(false));
    assert_eq!(out.results[0].samples_gbps.len(), 3);
    assert!(
        out.results[0].samples_gbps[1] < 1.0,
        "the first kept its own"
    );
    assert_eq!(out.results[1].samples_gbps, vec![1.0; 3]);
    assert_eq!(seen.last().map(String::as_str), Some("retimed a (#1)"));
}

/// A backend whose lead `L` names companions `X` and `Y`, in that order in its first
/// preparation and the other way round after; Y spreads 50 % in the first and holds after.
struct Flip {
    preps: usize,
    reps: usize,
}

struct FlipCase<'a>(&'a mut Flip, bool);

impl Prepared for FlipCase<'_> {
    fn bytes_per_rep(&self) -> u64 {
        1_000_000_000
    }
    fn run_once(&mut self) -> Result<Rep, BenchError> {
        self.0.reps += 1;
        Ok(Rep {
            seconds: 1.0,
            wall_seconds: None,
        })
    }
    fn verify(&mut self) -> Result<(), BenchError> {
        Ok(())
    }
    fn also(&self) -> Vec<Also> {
        let named = |key: &str| Also {
            key: key.into(),
            bytes_per_rep: 1_000_000_000,
        };
        if self.1 {
            vec![named("X"), named("Y")]
        } else {
            vec![named("Y"), named("X")]
        }
    }
    fn last_also_seconds(&self) -> Vec<f64> {
        // X 1 GB/s throughout; Y 1 or 2 GB/s by turns at first, then 2 GB/s.
        let y = if self.1 && self.0.reps % 2 == 1 {
            1.0
        } else {
            0.5
        };
        if self.1 {
            vec![1.0, y]
        } else {
            vec![y, 1.0]
        }
    }
}

impl Engine for Flip {
    fn id(&self) -> EngineId {
        EngineId::new("scripted")
    }
    fn prepare<'a>(&'a mut self, _case: &Case) -> Result<Box<dyn Prepared + 'a>, BenchError> {
        self.preps += 1;
        let first = self.preps == 1;
        Ok(Box::new(FlipCase(self, first)))
    }
}

#[test]
fn companions_named_in_another_order_when_prepared_again_keep_their_own_figures() {
    let mut backends: Vec<Box<dyn Engine>> = vec![Box::new(Flip { preps: 0, reps: 0 })];
    let out = run(
        &named_plan(&["L", "X", "Y"], &[true; 3]),
        &mut backends,
        &RunOptions::default(),
        &mut NoObserver,
        &AtomicBool::new(false),
    );
    assert!(windows_note(result(&out, "Y")).contains("window 3's"));
    assert_eq!(result(&out, "X").measurement.gbps.median, 1.0);
    assert_eq!(result(&out, "Y").measurement.gbps.median, 2.0);
    assert_eq!(result(&out, "Y").measurement.gbps.spread_pct, 0.0);
}

/// Counters of one thread on CPU 0: `delay_ns` on the run queue, no steal.
fn one_thread(delay_ns: u64) -> Option<hwc_model::RepSched> {
    Some(hwc_model::RepSched {
        threads: vec![hwc_model::ThreadSched {
            cpu: 0,
            run_delay_ns: Some(delay_ns),
            nivcsw: Some(0),
            steal_us: Some(0),
        }],
        machine_steal_us: Some(0),
    })
}

#[test]
fn timed_repetitions_scheduling_is_kept_judged_and_noted_not_dropped() {
    // cold, one warm-up, then four timed 1 s repetitions; the third is slow (2 s) and its
    // thread waited 0.5 s for its CPU (25 % of it). The cold and warm-up ones waited too, and
    // are not kept.
    let mut b = Scripted::new(&[4.0, 2.0, 1.0, 1.0, 2.0, 1.0]);
    b.sched = vec![
        one_thread(3_000_000_000),
        one_thread(1_000_000_000),
        one_thread(0),
        one_thread(2_000_000),
        one_thread(500_000_000),
        one_thread(9_000_000),
    ];
    b.sched_sources.steal_tick_us = Some(10_000);
    let out = run1(b, case(PathId::HostRam, 1, 4), RunOptions::default());
    let r = &out.results[0];
    let ev = r
        .scheduling
        .as_ref()
        .expect("evidence kept in the raw record");
    assert_eq!(ev.disturbed_above_pct, sched::DISTURBED_ABOVE_PCT);
    assert_eq!(ev.steal_tick_us, Some(10_000));
    let kept: Vec<(f64, Option<u64>, Option<bool>)> = ev
        .reps
        .iter()
        .map(|e| (e.seconds, e.sched.threads[0].run_delay_ns, e.disturbed))
        .collect();
    assert_eq!(
        kept,
        [
            (1.0, Some(0), Some(false)),
            (1.0, Some(2_000_000), Some(false)),
            (2.0, Some(500_000_000), Some(true)),
            (1.0, Some(9_000_000), Some(false)),
        ]
    );
    // The disturbed repetition stays in the statistic.
    assert_eq!(r.samples_gbps, vec![1.0, 1.0, 0.5, 1.0]);
    assert_eq!(r.measurement.gbps.n, 4);
    assert_eq!(r.measurement.gbps.min, 0.5);
    let summary = r
        .measurement
        .evidence
        .scheduling
        .as_ref()
        .expect("a summary");
    assert_eq!(
        summary.counts,
        Some(hwc_model::RepCounts {
            disturbed: 1,
            not_judged: 0,
            of: 4
        })
    );
    let notes = [&summary.detail];
    assert!(
        notes[0].starts_with("1 of 4 repetitions disturbed"),
        "{}",
        notes[0]
    );
    assert!(
        notes[0].contains("largest run-queue delay 500.00 ms (rep 3, CPU 0: 25 % of it)"),
        "{}",
        notes[0]
    );
    assert!(
        notes[0].ends_with("slowest repetition 3 (0.50 GB/s) disturbed"),
        "{}",
        notes[0]
    );
    // It survives the raw record's JSON.
    let json = serde_json::to_string(r).unwrap();
    let back: CaseResult = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, r);
}

#[test]
fn a_backend_that_reads_no_scheduling_gets_no_evidence_and_no_note() {
    let out = run1(
        Scripted::new(&[1.0]),
        case(PathId::HostRam, 1, 3),
        RunOptions::default(),
    );
    let r = &out.results[0];
    assert_eq!(r.scheduling, None);
    assert_eq!(r.measurement.evidence.scheduling, None);
    // A raw record of an earlier build, without the field, still reads.
    let mut v = serde_json::to_value(r).unwrap();
    v.as_object_mut().unwrap().remove("scheduling");
    let back: CaseResult = serde_json::from_value(v).unwrap();
    assert_eq!(back.scheduling, None);
}

/// A procedure that takes the cases of one path and measures each at `gbps`, or fails.
struct Whole {
    path: PathId,
    gbps: f64,
    ran: Vec<String>,
    cancel_after: Option<&'static AtomicBool>,
}

impl crate::Procedure for Whole {
    fn takes(&self, case: &Case) -> bool {
        case.path == self.path
    }
    fn run(&mut self, case: &Case) -> Result<CaseResult, BenchError> {
        self.ran.push(case.key.clone());
        if let Some(c) = self.cancel_after {
            c.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        if self.gbps <= 0.0 {
            return Err(BenchError::failed("the drive went away"));
        }
        Ok(CaseResult {
            measurement: hwc_testkit::h2d_measurement(&case.key, self.gbps, 0.5, 1),
            samples_gbps: vec![self.gbps],
            warmup_gbps: Vec::new(),
            case_seconds: Some(1.0),
            phase_seconds: None,
            scheduling: None,
        })
    }
}

/// Every event, as `started i` / `finished KEY`.
#[derive(Default)]
struct Events(Vec<String>);
impl Observer for Events {
    fn case_started(&mut self, index: usize, total: usize, case: &Case) {
        self.0.push(format!("started {index}/{total} {}", case.key));
    }
    fn case_finished(&mut self, outcome: &CaseOutcome) {
        let what = match outcome {
            CaseOutcome::Measured(r) => format!("measured {}", r.measurement.key),
            CaseOutcome::Waived(w) => format!("waived {}", w.reason),
            CaseOutcome::Failed(f) => format!("failed {}", f.error),
        };
        self.0.push(what);
    }
}

#[test]
fn a_procedures_cases_run_after_the_engines_under_their_plan_index() {
    let keyed = |path: PathId, key: &str| Case {
        key: key.into(),
        ..case(path, 0, 2)
    };
    // The procedure's case comes first in the plan, an engine's second: the engine runs first.
    let cases = [
        keyed(PathId::NvmeWrite, "nvme_write/gc"),
        keyed(PathId::HostRam, "host_ram/a"),
        keyed(PathId::NvmeWrite, "nvme_write/gc2"),
    ];
    let mut backends: Vec<Box<dyn Engine>> = vec![Box::new(Scripted::new(&[1.0]))];
    let mut whole = Whole {
        path: PathId::NvmeWrite,
        gbps: 3.0,
        ran: Vec::new(),
        cancel_after: None,
    };
    let mut events = Events::default();
    let out = crate::run_with(
        &cases,
        &mut backends,
        &mut [&mut whole],
        &RunOptions::default(),
        &mut events,
        &AtomicBool::new(false),
    );
    assert_eq!(
        events.0,
        [
            "started 1/3 host_ram/a",
            "measured host_ram/a",
            "started 0/3 nvme_write/gc",
            "measured nvme_write/gc",
            "started 2/3 nvme_write/gc2",
            "measured nvme_write/gc2",
        ]
    );
    assert_eq!(out.results.len(), 3);
    assert!(!out.interrupted);

    // A failure is the case's alone; once the run is cancelled, no further case starts.
    static CANCEL: AtomicBool = AtomicBool::new(false);
    let mut failing = Whole {
        path: PathId::NvmeWrite,
        gbps: 0.0,
        ran: Vec::new(),
        cancel_after: Some(&CANCEL),
    };
    let out = crate::run_with(
        &cases,
        &mut backends,
        &mut [&mut failing],
        &RunOptions::default(),
        &mut NoObserver,
        &CANCEL,
    );
    assert_eq!(failing.ran, ["nvme_write/gc"], "the second never started");
    assert_eq!(out.failures.len(), 1);
    assert!(out.failures[0].error.contains("the drive went away"));
    assert!(out.interrupted);
}

/// A case of up to 12 timed repetitions that may stop once 5 or more have a median known
/// within 1 %.
fn adaptive() -> Case {
    Case {
        reps: Reps {
            steady: Some(hwc_model::Steady {
                min_timed: 5,
                within_pct: 1,
            }),
            ..case(PathId::HostRam, 0, 12).reps
        },
        ..case(PathId::HostRam, 0, 12)
    }
}

#[test]
fn a_steady_case_stops_at_its_floor() {
    let out = run1(Scripted::new(&[1.0]), adaptive(), RunOptions::default());
    assert_eq!(out.results[0].samples_gbps, vec![1.0; 5]);
}

#[test]
fn an_early_outlier_keeps_a_case_timing_until_its_median_is_known() {
    // cold, then one slow repetition among steady ones: at 5 the interval is min–max (0.5–1
    // GB/s); at 9 it is the 2nd to the 8th of them, all 1 GB/s.
    let mut times = vec![1.0, 1.0, 2.0];
    times.extend([1.0; 20]);
    let out = run1(Scripted::new(&times), adaptive(), RunOptions::default());
    let r = &out.results[0];
    assert_eq!(r.samples_gbps.len(), 9);
    // The outlier stays in the statistics.
    assert_eq!((r.measurement.gbps.min, r.measurement.gbps.n), (0.5, 9));
}

#[test]
fn a_case_that_never_steadies_runs_to_its_cap() {
    let out = run1(
        Scripted::new(&[1.0, 2.0]),
        adaptive(),
        RunOptions::default(),
    );
    assert_eq!(out.results[0].samples_gbps.len(), 12);
    // Without `steady`, the fixed count.
    let fixed = Case {
        reps: Reps {
            steady: None,
            ..adaptive().reps
        },
        ..adaptive()
    };
    let out = run1(Scripted::new(&[1.0]), fixed, RunOptions::default());
    assert_eq!(out.results[0].samples_gbps.len(), 12);
}

#[test]
fn a_case_s_phases_account_for_its_time() {
    let out = run1(Scripted::new(&[1.0]), adaptive(), RunOptions::default());
    let r = &out.results[0];
    let p = r.phase_seconds.expect("the lead's phases");
    let total = r.case_seconds.unwrap();
    let parts = [p.idle_check, p.prepare, p.cold_and_warmup, p.timed];
    assert!(parts.iter().all(|s| *s >= 0.0), "{p:?}");
    assert!(parts.iter().sum::<f64>() <= total, "{p:?} of {total}");
}
