//! `hwceiling restore`: put back the system changes a run that died (SIGKILL, power loss before
//! it could restore) left in its journal. A run restores its own changes as it exits; this is
//! for when it could not, and every later run refuses to start until it is done.

use anyhow::Result;
use clap::Args;
use hwc_safety::journal;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// The journal folder (default `$HWCEILING_JOURNAL_DIR`, else /run/hwceiling).
    #[arg(long, value_name = "DIR")]
    pub journal_dir: Option<PathBuf>,
}

pub fn run(a: &RestoreArgs) -> Result<i32> {
    let dir = a.journal_dir.clone().unwrap_or_else(journal::dir);
    match journal::restore_left_over(&dir, &hwc_safety::Live::default())? {
        // The journal is acted on before anything is printed: a failed print loses no change.
        None => crate::out::println_or_warn(&format!(
            "nothing to restore: no journal in {}",
            dir.display()
        )),
        Some((file, restored)) => {
            crate::out::println_or_warn(&format!(
                "restored what pid {} ({}) changed, newest first:",
                file.pid, file.command
            ));
            for r in restored {
                crate::out::println_or_warn(&format!("  {r}"));
            }
        }
    }
    Ok(0)
}
