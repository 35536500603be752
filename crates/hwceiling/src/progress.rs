//! Progress on a terminal (quiet otherwise) and the running record saved after every case.

use hwc_model::Case;
use hwc_runner::{CaseOutcome, Observer};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// Called with every outcome so far after each case (to save the running record).
pub type SaveFn<'a> = Box<dyn FnMut(&[CaseOutcome]) + 'a>;

pub struct Progress<'a> {
    bar: Option<ProgressBar>,
    outcomes: Vec<CaseOutcome>,
    save: SaveFn<'a>,
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
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Observer for Progress<'_> {
    fn case_started(&mut self, _index: usize, _total: usize, case: &Case) {
        if let Some(b) = &self.bar {
            b.set_message(case.key.clone());
        }
    }

    fn case_finished(&mut self, outcome: &CaseOutcome) {
        if let Some(b) = &self.bar {
            if let CaseOutcome::Measured(r) = outcome {
                b.println(format!(
                    "{:<40} {:>9.2} GB/s ±{:.1} % (median, N={})",
                    r.measurement.key,
                    r.measurement.gbps.median,
                    r.measurement.gbps.spread_pct,
                    r.measurement.gbps.n
                ));
            }
            b.inc(1);
        }
        self.outcomes.push(outcome.clone());
        (self.save)(&self.outcomes);
    }
}
