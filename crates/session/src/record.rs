//! The running record: every outcome so far, saved after each case (the partial raw record, so
//! an interrupted or crashed run keeps what it measured), with each event passed on to the
//! caller's observer (a progress display). A save that fails is told to the observer at once,
//! with its cause and how many cases the record on disk still holds, and again when it succeeds
//! once more; never dropped silently.

use crate::link_watch::LinkWatch;
use crate::{RecordSave, RunObserver};
use hwc_model::Case;
use hwc_runner::{CaseOutcome, Observer};
use std::collections::HashMap;
use std::path::PathBuf;

/// Called with every outcome so far after each case; an error is one line, with its cause.
pub(crate) type SaveFn<'a> = Box<dyn FnMut(&[CaseOutcome]) -> Result<(), String> + 'a>;

pub(crate) struct Recorder<'a> {
    outcomes: Vec<CaseOutcome>,
    save: SaveFn<'a>,
    then: &'a mut dyn RunObserver,
    /// Where the running record is saved, and the plan's case count (for what is told).
    path: PathBuf,
    planned: usize,
    /// Cases in the record as it is on disk (its last save that succeeded); None: never saved.
    on_disk: Option<usize>,
    /// The cause of the last save's failure, while saves fail.
    failing: Option<String>,
    /// The plan index of the case started last, until it finishes.
    started: Option<usize>,
    /// Where each finished case's outcome is in `outcomes`, by plan index.
    filed: HashMap<usize, usize>,
    /// AER counters around each case, where the paths are known.
    watch: Option<LinkWatch>,
}

impl<'a> Recorder<'a> {
    pub(crate) fn new(
        save: SaveFn<'a>,
        then: &'a mut dyn RunObserver,
        path: PathBuf,
        planned: usize,
    ) -> Self {
        Recorder {
            outcomes: Vec::new(),
            save,
            then,
            path,
            planned,
            on_disk: None,
            failing: None,
            started: None,
            filed: HashMap::new(),
            watch: None,
        }
    }

    /// Read the AER counters of each case's paths when it starts and finishes.
    pub(crate) fn with_watch(mut self, watch: LinkWatch) -> Self {
        self.watch = Some(watch);
        self
    }

    /// The AER counters that rose during each case, and the host's settings through it, by
    /// case key.
    pub(crate) fn take_watched(&mut self) -> crate::link_watch::Watched {
        self.watch.as_mut().map(LinkWatch::take).unwrap_or_default()
    }

    /// Cases in the running record as it is on disk; None where no save succeeded.
    pub(crate) fn on_disk(&self) -> Option<usize> {
        self.on_disk
    }

    /// Save every outcome so far; tell the observer when a save fails (the first time, or for
    /// another cause) and when one succeeds again.
    fn save(&mut self) {
        match (self.save)(&self.outcomes) {
            Ok(()) => {
                self.on_disk = Some(self.outcomes.len());
                if self.failing.take().is_some() {
                    self.tell(None);
                }
            }
            Err(cause) => {
                if self.failing.as_deref() != Some(cause.as_str()) {
                    self.tell(Some(cause.clone()));
                }
                self.failing = Some(cause);
            }
        }
    }

    fn tell(&mut self, error: Option<String>) {
        let save = RecordSave {
            path: self.path.clone(),
            error,
            on_disk: self.on_disk.unwrap_or(0),
            finished: self.outcomes.len(),
            planned: self.planned,
        };
        self.then.record_save(&save);
    }
}

impl Observer for Recorder<'_> {
    fn case_started(&mut self, index: usize, total: usize, case: &Case) {
        self.started = Some(index);
        if let Some(w) = &mut self.watch {
            w.start(case);
        }
        self.then.case_started(index, total, case);
    }

    fn case_finished(&mut self, outcome: &CaseOutcome) {
        if let Some(w) = &mut self.watch {
            w.finish();
        }
        if let Some(index) = self.started.take() {
            self.filed.insert(index, self.outcomes.len());
        }
        self.outcomes.push(outcome.clone());
        // The case's own line first, then what became of its save.
        self.then.case_finished(outcome);
        self.save();
    }

    fn case_retimed(&mut self, index: usize, outcome: &CaseOutcome, timed_again: bool) {
        match self.filed.get(&index) {
            Some(&at) => self.outcomes[at] = outcome.clone(),
            None => self.outcomes.push(outcome.clone()),
        }
        self.then.case_retimed(index, outcome, timed_again);
        self.save();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hwc_model::CaseResult;
    use std::cell::RefCell;

    fn measured(key: &str, median: f64) -> CaseOutcome {
        CaseOutcome::Measured(Box::new(CaseResult {
            measurement: hwc_testkit::h2d_measurement(key, median, 0.5, 12),
            samples_gbps: vec![median; 12],
            warmup_gbps: Vec::new(),
            case_seconds: Some(1.0),
            phase_seconds: None,
            scheduling: None,
        }))
    }

    /// Counts the events passed on, and keeps what it is told of saves.
    #[derive(Default)]
    struct Count(usize, usize, usize, Vec<RecordSave>);
    impl RunObserver for Count {
        fn record_save(&mut self, save: &RecordSave) {
            self.3.push(save.clone());
        }
    }
    impl Observer for Count {
        fn case_started(&mut self, _: usize, _: usize, _: &Case) {
            self.0 += 1;
        }
        fn case_finished(&mut self, _: &CaseOutcome) {
            self.1 += 1;
        }
        fn case_retimed(&mut self, _: usize, _: &CaseOutcome, _: bool) {
            self.2 += 1;
        }
    }

    #[test]
    fn a_case_timed_again_replaces_its_own_earlier_outcome_in_the_running_record() {
        let saved: RefCell<Vec<Vec<f64>>> = RefCell::default();
        let mut count = Count::default();
        let mut recorder = Recorder::new(
            Box::new(|all: &[CaseOutcome]| {
                let medians = all
                    .iter()
                    .filter_map(|o| match o {
                        CaseOutcome::Measured(r) => Some(r.measurement.gbps.median),
                        _ => None,
                    })
                    .collect();
                saved.borrow_mut().push(medians);
                Ok(())
            }),
            &mut count,
            PathBuf::from("r.partial.json"),
            2,
        );
        let case = hwc_model::Case::new(
            hwc_model::PathId::HostRam,
            hwc_model::EngineId::new("host-memcpy"),
            "a",
            hwc_model::Spec::HostCopy(hwc_model::HostCopySpec {
                size_bytes: 1,
                threads: 1,
                cpu_node: 0,
                src_node: 0,
                dst_node: 0,
            }),
            hwc_model::Reps {
                warmup: 1,
                timed: 12,
                retry_above_spread_pct: Some(1),
                steady: None,
            },
        );
        // Two cases of one key (plan indices 0 and 1): the second is timed again.
        for (i, median) in [(0, 50.0), (1, 40.0)] {
            recorder.case_started(i, 2, &case);
            recorder.case_finished(&measured("a", median));
        }
        recorder.case_retimed(1, &measured("a", 45.0), true);
        drop(recorder);
        assert_eq!(
            *saved.borrow(),
            vec![vec![50.0], vec![50.0, 40.0], vec![50.0, 45.0]]
        );
        assert_eq!(
            (count.0, count.1, count.2),
            (2, 2, 1),
            "every event passed on"
        );
    }

    fn host_case() -> Case {
        hwc_model::Case::new(
            hwc_model::PathId::HostRam,
            hwc_model::EngineId::new("host-memcpy"),
            "a",
            hwc_model::Spec::HostCopy(hwc_model::HostCopySpec {
                size_bytes: 1,
                threads: 1,
                cpu_node: 0,
                src_node: 0,
                dst_node: 0,
            }),
            hwc_model::Reps {
                warmup: 1,
                timed: 12,
                retry_above_spread_pct: Some(1),
                steady: None,
            },
        )
    }

    #[test]
    fn a_failed_save_is_told_at_once_with_what_the_record_on_disk_holds() {
        // Saves 1 and 2 succeed, 3 and 4 fail (the disk full), 5 succeeds again.
        let mut n = 0;
        let mut count = Count::default();
        let mut recorder = Recorder::new(
            Box::new(|_: &[CaseOutcome]| {
                n += 1;
                match n {
                    3 | 4 => Err("cannot write r.partial.json: No space left on device".into()),
                    _ => Ok(()),
                }
            }),
            &mut count,
            PathBuf::from("r.partial.json"),
            6,
        );
        let case = host_case();
        let mut told = Vec::new();
        for i in 0..5 {
            recorder.case_started(i, 6, &case);
            recorder.case_finished(&measured("a", 10.0));
            told.push(recorder.on_disk());
        }
        drop(recorder);
        assert_eq!(told, [Some(1), Some(2), Some(2), Some(2), Some(5)]);
        // Told once when saves start failing (not again for the same cause), and once when
        // they succeed again.
        let saves = &count.3;
        assert_eq!(saves.len(), 2, "{saves:?}");
        assert_eq!(
            saves[0],
            RecordSave {
                path: PathBuf::from("r.partial.json"),
                error: Some("cannot write r.partial.json: No space left on device".into()),
                on_disk: 2,
                finished: 3,
                planned: 6,
            }
        );
        assert_eq!((saves[1].error.as_deref(), saves[1].on_disk), (None, 5));
    }
}
