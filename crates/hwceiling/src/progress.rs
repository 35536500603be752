//! Progress on stderr. On a terminal: a bar, and each figure as its case finishes. Elsewhere
//! (CI logs, systemd's journal, a daemon's child): one plain line per finished case, numbered,
//! as the run goes. Both say at once when the running record cannot be saved.

use crate::out::say;
use hwc_model::{Case, CaseResult};
use hwc_runner::{CaseOutcome, Observer};
use hwc_session::{RecordSave, RunObserver};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

pub struct Progress {
    bar: Option<ProgressBar>,
    /// Without a bar: the cases finished so far, the plan's count, and the key of the case in
    /// flight.
    done: usize,
    total: usize,
    current: String,
}

impl Progress {
    pub fn new(total: usize) -> Self {
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
            done: 0,
            total,
            current: String::new(),
        }
    }

    /// A line above the bar, or on its own without one.
    fn line(&self, text: &str) {
        match &self.bar {
            Some(b) => b.println(text),
            None => say!("{text}"),
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Observer for Progress {
    fn case_started(&mut self, _index: usize, _total: usize, case: &Case) {
        self.current.clone_from(&case.key);
        if let Some(b) = &self.bar {
            b.set_message(case.key.clone());
        }
    }

    fn case_finished(&mut self, outcome: &CaseOutcome) {
        self.done += 1;
        match &self.bar {
            Some(b) => {
                if let CaseOutcome::Measured(r) = outcome {
                    b.println(figure_line(r, ""));
                }
                b.inc(1);
            }
            None => say!(
                "{}",
                plain_line(self.done, self.total, &self.current, outcome)
            ),
        }
    }

    fn case_retimed(&mut self, _index: usize, outcome: &CaseOutcome, timed_again: bool) {
        if let (CaseOutcome::Measured(r), true) = (outcome, timed_again) {
            self.line(&figure_line(
                r,
                "; timed again after its backend's other cases",
            ));
        }
    }
}

impl RunObserver for Progress {
    fn record_save(&mut self, save: &RecordSave) {
        self.line(&save_line(save));
    }
}

/// What a change in saving the running record is told as.
fn save_line(s: &RecordSave) -> String {
    match &s.error {
        Some(e) => format!(
            "hwceiling: warning: the running record was not saved after case {} of {}: {e}; \
             {} on disk holds {} of the {} cases finished (each case tries again)",
            s.finished,
            s.planned,
            s.path.display(),
            s.on_disk,
            s.finished
        ),
        None => format!(
            "hwceiling: note: the running record is saved again: {} holds all {} cases finished",
            s.path.display(),
            s.on_disk
        ),
    }
}

/// A finished case as a plain line: `[3/10] ` and its figure, or what kept it from one.
fn plain_line(done: usize, total: usize, key: &str, outcome: &CaseOutcome) -> String {
    let what = match outcome {
        CaseOutcome::Measured(r) => figure_line(r, ""),
        CaseOutcome::Waived(w) => format!(
            "{key:<52} waived: {}",
            hwc_report::waiver_text(w).replace('\n', " ")
        ),
        CaseOutcome::Failed(f) => format!("{:<52} failed: {}", f.key, f.error.replace('\n', " ")),
    };
    format!("[{done}/{total}] {what}")
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

    #[test]
    fn a_figure_line_names_the_key_median_spread_and_count() {
        let r = CaseResult {
            measurement: hwc_testkit::h2d_measurement(
                "h2d/cuda-copy/gpu0/local/4MiB/s1",
                53.456,
                0.5,
                12,
            ),
            samples_gbps: vec![53.456; 12],
            warmup_gbps: Vec::new(),
            case_seconds: Some(1.0),
            phase_seconds: None,
            scheduling: None,
        };
        assert_eq!(
            figure_line(&r, "; more"),
            "h2d/cuda-copy/gpu0/local/4MiB/s1                         53.46 GB/s ±0.5 % (median, N=12; more)"
        );
    }

    #[test]
    fn a_plain_line_numbers_the_case_and_says_a_failure_on_one_line() {
        let f = CaseOutcome::Failed(hwc_model::Failure {
            key: "host/k".into(),
            path: hwc_model::PathId::HostRam,
            engine: None,
            error: "two\nlines".into(),
        });
        let l = plain_line(3, 10, "host/k", &f);
        assert!(l.starts_with("[3/10] host/k "), "{l}");
        assert!(l.ends_with("failed: two lines"), "{l}");
    }

    #[test]
    fn a_failed_save_says_its_cause_and_what_is_on_disk() {
        let s = RecordSave {
            path: "p/r.partial.json".into(),
            error: Some("cannot write p/r.partial.json: No space left on device".into()),
            on_disk: 2,
            finished: 3,
            planned: 10,
        };
        assert_eq!(
            save_line(&s),
            "hwceiling: warning: the running record was not saved after case 3 of 10: cannot \
             write p/r.partial.json: No space left on device; p/r.partial.json on disk holds 2 \
             of the 3 cases finished (each case tries again)"
        );
    }
}
