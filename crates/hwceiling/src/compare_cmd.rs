//! `hwceiling compare`: two profiles (baseline → candidate) or a fleet of three or more; exit 1
//! on a regression.

use crate::cli::Format;
use anyhow::{Context, Result};
use clap::Args;
use hwc_compare::compare::{self, Node, Options};
use hwc_compare::Tolerance;
use hwc_model::text::{escape_control, escape_strings};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Profiles to compare. Two: the first is the baseline, the second the candidate. Three or
    /// more: a fleet, compared with its per-path median.
    #[arg(required = true, num_args = 2.., value_name = "PROFILE")]
    pub profiles: Vec<PathBuf>,
    /// How far a value may move before it counts: a percentage (`5%`) or a fraction (`0.05`).
    #[arg(long, default_value = "5%", value_parser = parse_tolerance)]
    pub tolerance: Tolerance,
    /// Compare the `ceilings:` map only, not every measurement.
    #[arg(long)]
    pub ceilings_only: bool,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

fn parse_tolerance(s: &str) -> Result<Tolerance, String> {
    s.parse()
        .map_err(|e: hwc_compare::tolerance::BadTolerance| e.to_string())
}

pub fn run(a: &CompareArgs) -> Result<i32> {
    let profiles = a
        .profiles
        .iter()
        .map(|p| {
            let profile = hwc_profile::read_profile(p)?;
            // Text goes to a terminal: the profiles' strings (a hostname, a key) made inert.
            Ok(match a.format {
                Format::Text => escape_strings(&profile, escape_control)?,
                _ => profile,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let labelled: Vec<(String, &hwc_model::Profile)> = a
        .profiles
        .iter()
        .map(|p| escape_control(&p.display().to_string()).into_owned())
        .zip(profiles.iter())
        .collect();
    let names = compare::node_names(&labelled);
    let nodes: Vec<Node> = names
        .iter()
        .zip(&profiles)
        .map(|(name, profile)| Node { name, profile })
        .collect();
    let opts = Options {
        tolerance: a.tolerance,
        ceilings_only: a.ceilings_only,
    };
    let (text, regressions) = if let [baseline, candidate] = nodes[..] {
        let r = compare::compare_pair(baseline, candidate, &opts);
        if r.rows.is_empty() {
            anyhow::bail!(
                "nothing to compare: neither profile has a {}",
                if a.ceilings_only {
                    "ceiling"
                } else {
                    "ceiling or measurement"
                }
            );
        }
        (render(a.format, &r, compare::render_pair)?, r.regressions)
    } else {
        let r = compare::compare_fleet(&nodes, &opts);
        if r.rows.is_empty() {
            anyhow::bail!("nothing to compare: no profile has a ceiling or measurement");
        }
        (render(a.format, &r, compare::render_fleet)?, r.regressions)
    };
    crate::out::print(&text)?;
    Ok(if regressions > 0 { 1 } else { 0 })
}

fn render<T: serde::Serialize>(format: Format, r: &T, text: fn(&T) -> String) -> Result<String> {
    Ok(match format {
        Format::Text => text(r),
        Format::Json => serde_json::to_string_pretty(r).context("serialising to JSON")? + "\n",
        Format::Yaml => serde_saphyr::to_string(r).context("serialising to YAML")?,
    })
}
