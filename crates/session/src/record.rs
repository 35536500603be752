//! The running record: every outcome so far, saved after each case (the partial raw record, so
//! an interrupted or crashed run keeps what it measured), with each event passed on to the
//! caller's observer (a progress display).

use hwc_model::Case;
use hwc_runner::{CaseOutcome, Observer};
use std::collections::HashMap;

/// Called with every outcome so far after each case.
pub(crate) type SaveFn<'a> = Box<dyn FnMut(&[CaseOutcome]) + 'a>;

pub(crate) struct Recorder<'a> {
    outcomes: Vec<CaseOutcome>,
    save: SaveFn<'a>,
    then: &'a mut dyn Observer,
    /// The plan index of the case started last, until it finishes.
    started: Option<usize>,
    /// Where each finished case's outcome is in `outcomes`, by plan index.
    filed: HashMap<usize, usize>,
}

impl<'a> Recorder<'a> {
    pub(crate) fn new(save: SaveFn<'a>, then: &'a mut dyn Observer) -> Self {
        Recorder {
            outcomes: Vec::new(),
            save,
            then,
            started: None,
            filed: HashMap::new(),
        }
    }
}

impl Observer for Recorder<'_> {
    fn case_started(&mut self, index: usize, total: usize, case: &Case) {
        self.started = Some(index);
        self.then.case_started(index, total, case);
    }

    fn case_finished(&mut self, outcome: &CaseOutcome) {
        if let Some(index) = self.started.take() {
            self.filed.insert(index, self.outcomes.len());
        }
        self.outcomes.push(outcome.clone());
        (self.save)(&self.outcomes);
        self.then.case_finished(outcome);
    }

    fn case_retimed(&mut self, index: usize, outcome: &CaseOutcome, timed_again: bool) {
        match self.filed.get(&index) {
            Some(&at) => self.outcomes[at] = outcome.clone(),
            None => self.outcomes.push(outcome.clone()),
        }
        (self.save)(&self.outcomes);
        self.then.case_retimed(index, outcome, timed_again);
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
            scheduling: None,
        }))
    }

    /// Counts the events passed on.
    #[derive(Default)]
    struct Count(usize, usize, usize);
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
            }),
            &mut count,
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
}
