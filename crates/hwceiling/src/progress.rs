//! Progress on a terminal (quiet otherwise): a bar, and each figure as its case finishes.

use hwc_model::{Case, CaseResult};
use hwc_runner::{CaseOutcome, Observer};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

pub struct Progress {
    bar: Option<ProgressBar>,
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
        Progress { bar }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Observer for Progress {
    fn case_started(&mut self, _index: usize, _total: usize, case: &Case) {
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
    }

    fn case_retimed(&mut self, _index: usize, outcome: &CaseOutcome, timed_again: bool) {
        if let (Some(b), CaseOutcome::Measured(r), true) = (&self.bar, outcome, timed_again) {
            b.println(figure_line(
                r,
                "; timed again after its backend's other cases",
            ));
        }
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
            scheduling: None,
        };
        assert_eq!(
            figure_line(&r, "; more"),
            "h2d/cuda-copy/gpu0/local/4MiB/s1                         53.46 GB/s ±0.5 % (median, N=12; more)"
        );
    }
}
