//! `hwceiling bind`: hand named NVMe drives to a userspace driver (vfio-pci) for an SPDK job of
//! the user's, with the hugepages it needs, the way SPDK's `setup.sh` does, but refusing any
//! drive with data or in use, and journaling every change. With a command after `--` it runs
//! the command and puts everything back when it ends; without one it leaves the drives bound
//! until `hwceiling restore`.

use crate::out::{println_or_warn, say};
use crate::signals;
use anyhow::{anyhow, Result};
use clap::Args;
use hwc_session::bind::{BindConfig, Progress};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Test hook: sleep this long after each binding step, so a test can signal between steps.
const STEP_DELAY_ENV: &str = "HWCEILING_STEP_DELAY_MS";

#[derive(Args, Debug)]
pub struct BindArgs {
    /// The drives to bind, by serial, /dev path or PCI address (comma-separated). Each must be
    /// unmounted, unpartitioned, unheld, carry no signature and be open in no process.
    #[arg(long, value_delimiter = ',', required = true, value_name = "LIST")]
    pub drives: Vec<String>,
    /// The userspace driver: vfio-pci (needs an IOMMU), or uio_pci_generic with
    /// --allow-no-iommu.
    #[arg(long, default_value = hwc_safety::pci::VFIO_PCI, value_name = "DRIVER")]
    pub driver: String,
    /// Accept a driver without IOMMU protection (the drive may DMA anywhere in memory).
    #[arg(long)]
    pub allow_no_iommu: bool,
    /// Hugepage memory to have free on each bound drive's NUMA node, MiB (0: none).
    #[arg(long, default_value_t = 512, value_name = "MIB")]
    pub hugepages_mib: u64,
    /// Where to mount hugetlbfs if none is mounted there.
    #[arg(long, default_value = "/dev/hugepages", value_name = "DIR")]
    pub hugetlbfs: PathBuf,
    /// A command to run while the drives are bound; they are put back when it ends.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(a: &BindArgs) -> Result<i32> {
    signals::install();
    let cfg = BindConfig {
        drives: Some(a.drives.clone()),
        driver: a.driver.clone(),
        allow_no_iommu: a.allow_no_iommu,
        hugepages_bytes_per_node: a.hugepages_mib << 20,
        hugetlbfs: a.hugetlbfs.clone(),
    };
    hwc_safety::journal::check_clear(&hwc_safety::journal::dir())?;
    let topo = hwc_session::detect(None)?;
    let choice = hwc_session::bind::choose(&topo, &cfg)?;
    let delay = std::env::var(STEP_DELAY_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis);
    let command_line = std::env::args().collect::<Vec<_>>().join(" ");
    let bound = match hwc_session::bind::bind(
        &choice,
        &cfg,
        &command_line,
        &mut |p| {
            match p {
                Progress::Hugepages { node, bytes } => say!(
                    "hwceiling: hugepages: {} MiB free{}",
                    bytes >> 20,
                    node.map(|n| format!(" on node {n}")).unwrap_or_default()
                ),
                Progress::Drive { bdf, step } => say!("hwceiling: {bdf}: {}", step.as_str()),
            }
            if let Some(d) = delay {
                std::thread::sleep(d);
            }
        },
        &signals::CANCEL,
    ) {
        Ok(b) => b,
        // Interrupted while binding: what was done is already put back.
        Err(e) if signals::CANCEL.load(Ordering::SeqCst) => {
            say!("hwceiling: {e}");
            return Ok(130);
        }
        Err(e) => return Err(e.into()),
    };
    // What is printed from here on must not stop the command: the drives are bound, and a
    // failed print (said on stderr) neither undoes that nor leaves it half done.
    for (c, from) in &bound.drives {
        println_or_warn(&match from {
            None => format!("{} ({}) already was on {}", c.name, c.bdf, cfg.driver),
            Some(from) => format!(
                "{} ({}) moved from {} to {}",
                c.name,
                c.bdf,
                from.as_deref().unwrap_or("no driver"),
                cfg.driver
            ),
        });
    }
    let Some((program, args)) = a.command.split_first() else {
        let kept = bound.journal.leave();
        println_or_warn(&format!(
            "{} change(s) left in place; `hwceiling restore` puts them back",
            kept.len()
        ));
        return Ok(0);
    };
    let status = run_child(program, args);
    crate::report_restore(Some(bound.journal.restore()));
    let status = status?;
    if signals::CANCEL.load(Ordering::SeqCst) {
        return Ok(130);
    }
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// Run the user's command to its end; on SIGINT/SIGTERM ask it to stop and wait for it.
fn run_child(program: &str, args: &[String]) -> Result<std::process::ExitStatus> {
    let mut c = std::process::Command::new(program)
        .args(args)
        .spawn()
        .map_err(|e| anyhow!("{program}: {e}"))?;
    loop {
        if let Some(s) = c.try_wait()? {
            return Ok(s);
        }
        if signals::CANCEL.load(Ordering::SeqCst) {
            // Our own child, which this process spawned and has not reaped.
            // SAFETY: kill(2) with a pid and a signal number; no memory is passed.
            unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
            return Ok(c.wait()?);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
