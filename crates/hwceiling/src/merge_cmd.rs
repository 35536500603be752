//! `hwceiling merge`: a read-only profile with the write ceilings of an earlier write run of the
//! same drives carried in, written once into a file the user can read (`serve` serves files as
//! they are). The rule is `hwc_model::carry::write_carry`; each carried ceiling's record says
//! `carried_from` that run.

use anyhow::{Context, Result};
use clap::Args;
use hwc_model::text::escape_control;
use hwc_session::files;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The newer profile: a complete read-only run (no NVMe write ceilings).
    #[arg(value_name = "PROFILE")]
    pub profile: PathBuf,
    /// The profile of an earlier complete write run of the same drives, whose NVMe write
    /// ceilings are carried.
    #[arg(long, value_name = "PROFILE")]
    pub from: PathBuf,
    /// Where to write the merged profile: a new file, or PROFILE itself (replaced atomically).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
}

pub fn run(a: &MergeArgs) -> Result<i32> {
    let in_place = same_file(&a.output, &a.profile);
    if !in_place {
        files::check_new(&a.output)?;
    }
    let newer = hwc_profile::read_profile(&a.profile)?;
    let older = hwc_profile::read_profile(&a.from)?;
    let finished = |p: &hwc_model::Profile| {
        chrono::DateTime::parse_from_rfc3339(&p.provenance.finished_at).ok()
    };
    if let (Some(n), Some(o)) = (finished(&newer), finished(&older)) {
        if o > n {
            anyhow::bail!(
                "nothing written: {} finished after {}: only an earlier write run's ceilings are \
                 carried into a later read-only run",
                a.from.display(),
                a.profile.display()
            );
        }
    }
    let from_name = a
        .from
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| a.from.display().to_string());
    let (merged, keys) =
        hwc_model::carry::merge(&newer, &older, &from_name).with_context(|| {
            format!(
                "nothing written: cannot carry the write ceilings of {} into {}",
                a.from.display(),
                a.profile.display()
            )
        })?;
    let yaml = hwc_profile::to_yaml(&merged)?;
    if in_place {
        files::replace(&a.output, yaml.as_bytes())?;
    } else {
        files::write_new(&a.output, yaml.as_bytes())?;
    }
    crate::out::print(&format!(
        "{}: {} write ceiling(s) carried from {} (finished {}): {}\n",
        escape_control(&a.output.display().to_string()),
        keys.len(),
        escape_control(&from_name),
        escape_control(&older.provenance.finished_at),
        keys.join(", ")
    ))?;
    Ok(0)
}

/// Whether `output` names the file at `profile` (then it is replaced, not refused as existing).
fn same_file(output: &Path, profile: &Path) -> bool {
    match (output.canonicalize(), profile.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
