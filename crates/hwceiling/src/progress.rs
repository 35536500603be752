//! Progress on a terminal (quiet otherwise) and the running record saved after every case.

use hwc_model::{Case, CaseResult};
use hwc_runner::{CaseOutcome, Observer};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::HashMap;
use std::io::IsTerminal;

/// Called with every outcome so far after each case (to save the running record).
pub type SaveFn<'a> = Box<dyn FnMut(&[CaseOutcome]) + 'a>;

pub struct Progress<'a> {
    bar: Option<ProgressBar>,
    outcomes: Vec<CaseOutcome>,
    save: SaveFn<'a>,
    /// The plan index of the case started last, until it finishes.
    started: Option<usize>,
    /// Where each finished case's outcome is in `outcomes`, by plan index.
    filed: HashMap<usize, usize>,
}

impl<'a> Progress<'a> {
    pub fn new(total: usize, save: SaveFn<'a>) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new(total as u64);
            if let Ok(style) =
                ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed_precise} {msg}")
            {
                b.set_style(style);
            }
            b
        });
        Progress {
            bar,
            outcomes: Vec::new(),
            save,
            started: None,
            filed: HashMap::new(),
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Observer for Progress<'_> {
    fn case_started(&mut self, index: usize, _total: usize, case: &Case) {
        self.started = Some(index);
        if let Some(b) = &self.bar {
            b.set_message(case.key.clone());
        }
    }

    fn case_finished(&mut self, outcome: &CaseOutcome) {
        if let Some(b) = &self.bar {
            if let CaseOutcome::Measured(r) = outcome {
                b.println(figure_line(r, ""));
            }
            b.inc(1);
        }
        if let Some(index) = self.started.take() {
            self.filed.insert(index, self.outcomes.len());
        }
        self.outcomes.push(outcome.clone());
        (self.save)(&self.outcomes);
    }

    fn case_retimed(&mut self, index: usize, outcome: &CaseOutcome, timed_again: bool) {
        if let (Some(b), CaseOutcome::Measured(r), true) = (&self.bar, outcome, timed_again) {
            b.println(figure_line(
                r,
                "; timed again after its backend's other cases",
            ));
        }
        match self.filed.get(&index) {
            Some(&at) => self.outcomes[at] = outcome.clone(),
            None => self.outcomes.push(outcome.clone()),
        }
        (self.save)(&self.outcomes);
    }
}

/// A finished case's figure as the progress display prints it (`more` inside the brackets).
fn figure_line(r: &CaseResult, more: &str) -> String {
    format!(
        "{:<52} {:>9.2} GB/s ±{:.1} % (median, N={}{more})",
        r.measurement.key,
        r.measurement.gbps.median,
        r.measurement.gbps.spread_pct,
        r.measurement.gbps.n
    )
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn a_figure_line_names_the_key_median_spread_and_count() {
        let CaseOutcome::Measured(r) = measured("h2d/cuda-copy/gpu0/local/4MiB/s1", 53.456) else {
            unreachable!()
        };
        assert_eq!(
            figure_line(&r, "; more"),
            "h2d/cuda-copy/gpu0/local/4MiB/s1                         53.46 GB/s ±0.5 % (median, N=12; more)"
        );
    }

    #[test]
    fn a_case_timed_again_replaces_its_own_earlier_outcome_in_the_running_record() {
        let saved: RefCell<Vec<Vec<f64>>> = RefCell::default();
        let mut progress = Progress::new(
            2,
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
        );
        let case = |key: &str| Case {
            key: key.into(),
            ..hwc_model::Case::new(
                hwc_model::PathId::HostRam,
                hwc_model::EngineId::new("host-memcpy"),
                key,
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
            )
        };
        // Two cases of one key (plan indices 0 and 1): the second is timed again.
        for (i, median) in [(0, 50.0), (1, 40.0)] {
            progress.case_started(i, 2, &case("a"));
            progress.case_finished(&measured("a", median));
        }
        progress.case_retimed(1, &measured("a", 45.0), true);
        drop(progress);
        assert_eq!(
            *saved.borrow(),
            vec![vec![50.0], vec![50.0, 40.0], vec![50.0, 45.0]]
        );
    }
}
