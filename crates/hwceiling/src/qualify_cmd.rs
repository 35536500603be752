//! `hwceiling qualify`: hold a profile to a bring-up spec; a pass/fail table, a JUnit XML for CI,
//! exit 0 when every check passes and 1 otherwise.

use crate::cli::Format;
use anyhow::{Context, Result};
use clap::Args;
use hwc_compare::qualify;
use hwc_model::text::{escape_control, escape_strings};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct QualifyArgs {
    /// The profile to qualify (`hardware_profile_<date>.yaml`).
    pub profile: PathBuf,
    /// The spec: rules and link checks (docs/qualify-spec.md; examples/ has one).
    #[arg(long, value_name = "SPEC.yaml")]
    pub spec: PathBuf,
    /// Baseline profile for `min_pct_of_baseline` rules (overrides the spec's `baseline:`).
    #[arg(long, value_name = "PROFILE")]
    pub baseline: Option<PathBuf>,
    /// Also write the result as JUnit XML to FILE (a regular file there is replaced; anything
    /// else, a symbolic link included, is refused).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

pub fn run(a: &QualifyArgs) -> Result<i32> {
    // Before any work: a device node, FIFO, directory or link named as the JUnit file is refused.
    if let Some(path) = &a.junit {
        hwc_session::files::check_replaceable(path)?;
    }
    let text = hwc_profile::read_text_capped(&a.spec, qualify::MAX_SPEC_BYTES)?;
    let spec = qualify::parse_spec(&text).with_context(|| a.spec.display().to_string())?;
    // A damaged file (figures no run writes) is refused by the reader, as by every reader: a
    // negative link or ceiling would make floors no figure can miss.
    let profile = hwc_profile::read_profile(&a.profile)?;
    // Text goes to a terminal: the strings of the profile and spec (a hostname, a key, a
    // check's name) made inert. JSON, YAML and JUnit escape in their own syntax.
    let text = a.format == Format::Text && a.junit.is_none();
    let inert = |p: hwc_model::Profile| -> Result<hwc_model::Profile> {
        Ok(if text {
            escape_strings(&p, escape_control)?
        } else {
            p
        })
    };
    let profile = inert(profile)?;
    let baseline_path = a.baseline.clone().or_else(|| {
        spec.baseline
            .as_ref()
            .map(|b| a.spec.parent().unwrap_or(Path::new(".")).join(b))
    });
    let baseline = match &baseline_path {
        Some(p) => Some(inert(
            hwc_profile::read_profile(p).context("reading the baseline profile")?,
        )?),
        None => None,
    };
    let spec = if text {
        spec.map_strings(escape_control)
    } else {
        spec
    };
    let report = qualify::qualify(
        &spec,
        &file_name(&a.spec),
        &profile,
        &a.profile.display().to_string(),
        baseline.as_ref(),
    )
    .with_context(|| a.spec.display().to_string())?;
    if let Some(path) = &a.junit {
        hwc_session::files::replace(path, hwc_compare::junit::render(&report).as_bytes())?;
    }
    let out = match a.format {
        Format::Text => qualify::render(&report),
        Format::Json => {
            serde_json::to_string_pretty(&report).context("serialising to JSON")? + "\n"
        }
        Format::Yaml => serde_saphyr::to_string(&report).context("serialising to YAML")?,
    };
    crate::out::print(&out)?;
    Ok(if report.ok() { 0 } else { 1 })
}
