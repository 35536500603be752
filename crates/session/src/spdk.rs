//! The SPDK engines of a run: `spdk_nvme_perf` found, and the drives named with `--spdk-drives`
//! handed to vfio-pci through [`crate::bind`] for their cases (journaled, put back when they
//! end, or on any exit), or why they cannot run here.

use crate::bind::{self, Bound, Choice};
use hwc_engine_spdk::{Binder, BoundDrive, Finished, SpdkPerf};
use hwc_model::{EngineStatus, RunConfig, Topology};
use hwc_runner::Engine;
use hwc_safety::journal::Change;
use hwc_safety::pci::Pci;
use hwc_safety::Live;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// Binds the chosen drives through the journal, and puts them back (or leaves them bound).
pub struct JournalBinder {
    /// Who binds, as the journal names the change's owner.
    who: &'static str,
    choice: Choice,
    cfg: bind::BindConfig,
    leave_bound: bool,
    cancel: &'static AtomicBool,
    bound: Option<Bound>,
}

impl JournalBinder {
    pub fn new(
        who: &'static str,
        choice: Choice,
        leave_bound: bool,
        cancel: &'static AtomicBool,
    ) -> Self {
        JournalBinder {
            who,
            choice,
            cfg: bind::BindConfig::default(),
            leave_bound,
            cancel,
            bound: None,
        }
    }
}

impl Binder for JournalBinder {
    fn bind(&mut self, hugepages_bytes_per_node: u64) -> Result<Vec<BoundDrive>, String> {
        let cfg = bind::BindConfig {
            hugepages_bytes_per_node,
            ..self.cfg.clone()
        };
        let b = bind::bind(&self.choice, &cfg, self.who, &mut |_| {}, self.cancel)
            .map_err(|e| e.to_string())?;
        let drives = b
            .drives
            .iter()
            .map(|(c, _)| BoundDrive {
                name: c.name.clone(),
                bdf: c.bdf.clone(),
                numa_node: c.numa_node,
                tcp: None,
            })
            .collect();
        self.bound = Some(b);
        Ok(drives)
    }

    fn record_files(&mut self, prefix: &str) -> Result<(), String> {
        let b = self.bound.as_ref().ok_or("no drives are bound")?;
        let mounts = Live::default()
            .hugetlbfs_mounts()
            .map_err(|e| format!("reading the hugetlbfs mounts: {e}"))?;
        for dir in mounts {
            b.journal
                .record(Change::HugepageFiles {
                    dir,
                    prefix: prefix.to_string(),
                })
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<Option<Finished>, String> {
        let Some(b) = self.bound.take() else {
            return Ok(None);
        };
        let bdfs: Vec<String> = b.drives.iter().map(|(c, _)| c.bdf.clone()).collect();
        let how = if self.leave_bound {
            b.journal.leave();
            format!(
                "left on {} as asked (--leave-bound): `hwceiling restore` puts them back",
                self.cfg.driver
            )
        } else {
            let restored = b.journal.restore().map_err(|e| e.to_string())?;
            // What was changed and is back; a perf process's hugepage files are gone with it
            // unless it was killed (then their removal is said).
            let v: Vec<String> = restored
                .iter()
                .filter(|r| r.acted || !matches!(r.change, Change::HugepageFiles { .. }))
                .map(ToString::to_string)
                .collect();
            format!("put back: {}", v.join("; "))
        };
        let sys = Live::default().sys;
        let drivers = bdfs
            .into_iter()
            .map(|bdf| {
                let d = match sys.driver(&bdf) {
                    Ok(Some(d)) => d,
                    Ok(None) => "none".into(),
                    Err(e) => format!("unknown ({e})"),
                };
                (bdf, d)
            })
            .collect();
        Ok(Some(Finished { drivers, how }))
    }
}

/// The spdk-perf engine of this run, or why it cannot run here: `choice` holds the drives
/// `--spdk-drives` named, as the bind gate passed them (`None`: none named; the planner then
/// waives the engine and says how to name them).
pub fn perf_engine(
    config: &RunConfig,
    topo: &Topology,
    choice: Option<Choice>,
    cancel: &'static AtomicBool,
) -> Result<Box<dyn Engine>, (String, Option<String>)> {
    let perf = locate(config.spdk_dir.as_deref())?;
    let Some(choice) = choice else {
        return Err((
            "no drive was named with --spdk-drives".into(),
            Some("--spdk-drives DRIVE,...".into()),
        ));
    };
    // `--leave-bound` is for the last userspace engine of the run to honour.
    let leave = config.leave_bound && !native_runs(config);
    Ok(Box::new(SpdkPerf::new(
        perf,
        Box::new(JournalBinder::new(
            "hwceiling profile (engine spdk-perf)",
            choice,
            leave,
            cancel,
        )),
        node_cpus(topo),
        cancel,
    )))
}

fn node_cpus(topo: &Topology) -> BTreeMap<u32, Vec<u32>> {
    topo.platform
        .numa
        .iter()
        .filter(|n| !n.cpus.is_empty())
        .map(|n| (n.id, n.cpus.clone()))
        .collect()
}

/// Whether the spdk-native engine is in this build and selected: it runs after spdk-perf.
fn native_runs(config: &RunConfig) -> bool {
    cfg!(feature = "spdk")
        && config
            .engines
            .as_ref()
            .is_none_or(|e| e.iter().any(|id| id.as_str() == "spdk-native"))
}

/// The spdk-native engine of this run (a build with the `spdk` feature), or why it cannot run.
#[cfg(feature = "spdk")]
pub fn native_engine(
    config: &RunConfig,
    topo: &Topology,
    choice: Option<Choice>,
    cancel: &'static AtomicBool,
) -> Result<Box<dyn Engine>, (String, Option<String>)> {
    use hwc_engine_spdk::native::{HostRam, SpdkNative, DEFAULT_BYTES_PER_DRIVE};
    let Some(choice) = choice else {
        return Err((
            "no drive was named with --spdk-drives".into(),
            Some("--spdk-drives DRIVE,...".into()),
        ));
    };
    let choice_drives = choice.chosen.len();
    Ok(Box::new(
        SpdkNative::new(
            Box::new(JournalBinder::new(
                "hwceiling profile (engine spdk-native)",
                choice,
                config.leave_bound,
                cancel,
            )),
            Box::new(HostRam),
            node_cpus(topo),
            config.nvme_bytes.unwrap_or(DEFAULT_BYTES_PER_DRIVE),
        )
        .with_bar_opener(bar_opener(topo, choice_drives)),
    ))
}

/// Bytes of GPU memory mapped for NVMe → BAR1: the deepest case's buffers (every drive × QD 32
/// × 128 KiB), in whole 2 MiB pages.
#[cfg(feature = "spdk")]
fn bar1_window_bytes(drives: usize) -> u64 {
    let two_mib = 2u64 << 20;
    let need = drives.max(1) as u64 * 32 * hwc_plan::bar::BAR_BLOCK_BYTES;
    need.div_ceil(two_mib) * two_mib
}

/// PCI BARs through sysfs; a GPU's BAR1 through GDRCopy (gdrdrv opened once, for the process).
#[cfg(feature = "spdk")]
fn bar_opener(topo: &Topology, drives: usize) -> hwc_engine_spdk::native::BarOpener {
    use hwc_engine_spdk::native::{sysfs_bar_opener, BarRegion};
    use hwc_model::BarDevice;
    let mut pci = sysfs_bar_opener("/sys".into());
    let ordinals: std::collections::BTreeMap<String, u32> = topo
        .gpus
        .iter()
        .filter_map(|g| Some((g.name(), g.cuda_index?)))
        .collect();
    let mut gdr: Option<Result<&'static hwc_gdrcopy_sys::Gdr<'static>, String>> = None;
    let window = bar1_window_bytes(drives);
    Box::new(move |d: &BarDevice| {
        let BarDevice::GpuBar1 { gpu, bdf } = d else {
            return pci(d);
        };
        let g = *gdr
            .get_or_insert_with(|| {
                hwc_engine_gdrcopy::probe(Path::new("/dev"))
                    .map(|g| &*Box::leak(Box::new(g)))
                    .map_err(|(reason, hint)| format!("{reason} ({hint})"))
            })
            .as_ref()
            .map_err(Clone::clone)?;
        let ordinal = *ordinals
            .get(gpu)
            .ok_or_else(|| format!("{gpu} has no CUDA device"))?;
        let w = hwc_engine_gdrcopy::Bar1Window::new(
            g,
            ordinal,
            window,
            format!("{gpu} BAR1 ({bdf}) through GDRCopy"),
        )?;
        let (ptr, len, label) = (w.ptr(), w.len(), w.label().to_string());
        // SAFETY: the window maps `len` bytes at `ptr`, read/write, for as long as `w` lives,
        // which the region keeps.
        unsafe { BarRegion::register(ptr.cast(), len, label, Box::new(w)) }
    })
}

fn locate(spdk_dir: Option<&Path>) -> Result<std::path::PathBuf, (String, Option<String>)> {
    let cwd = std::env::current_dir().unwrap_or_default();
    hwc_engine_spdk::locate(spdk_dir, &cwd, std::env::var_os("PATH").as_deref())
        .map_err(|e| (e, Some(hwc_engine_spdk::perf::INSTALL_HINT.into())))
}

/// What the spdk-perf engine's probe finds, for a plan that does not run: whether perf is there
/// (under `spdk_dir`, `--spdk-dir`, when given).
pub fn perf_status(spdk_dir: Option<&Path>) -> EngineStatus {
    EngineStatus {
        decl: hwc_engine_spdk::decl(),
        available: locate(spdk_dir).map(|_| ()),
    }
}
