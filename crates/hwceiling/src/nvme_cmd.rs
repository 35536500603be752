//! The NVMe part of `profile`: ask the drives Identify, resolve `--drives` / `--target`, run the
//! write safety gate (a refusal ends the run before anything is measured or written), and hand
//! the planner its NVMe options and the runner its backend.

use crate::cli::ProfileArgs;
use anyhow::Result;
use hwc_bench_nvme::{NvmeBackend, Request, DEFAULT_BYTES_PER_DRIVE};
use hwc_model::{PathId, Topology};
use hwc_plan::NvmePlanOptions;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

/// The planner's NVMe options and, on a live machine, the backend.
pub struct Nvme {
    pub plan: NvmePlanOptions,
    pub backend: Option<NvmeBackend>,
}

fn wants(a: &ProfileArgs, path: PathId) -> bool {
    a.paths.as_ref().is_none_or(|p| p.contains(&path))
}

/// Resolve the NVMe request. `live` is false for a dry run on a snapshot (`--fsroot`): nothing
/// is opened, and writes are not planned (the gate needs the live devices).
pub fn prepare(
    a: &ProfileArgs,
    topo: &mut Topology,
    live: bool,
    cancel: &'static AtomicBool,
) -> Result<Nvme> {
    let mut plan = NvmePlanOptions {
        sizes: a.nvme_sizes.clone(),
        queue_depths: a.queue_depths.clone(),
        ..NvmePlanOptions::default()
    };
    let wants_nvme = wants(a, PathId::NvmeRead) || wants(a, PathId::NvmeWrite);
    if !wants_nvme {
        return Ok(Nvme {
            plan,
            backend: None,
        });
    }
    let notes = if live {
        hwc_bench_nvme::inspect(topo)
    } else {
        Vec::new()
    };
    let req = Request {
        drives: a.drives.clone().unwrap_or_default(),
        allow_destructive_writes: a.allow_destructive_writes && live,
        target: a.target.clone(),
        wants_write: wants(a, PathId::NvmeWrite) && live,
        bytes_per_drive: a.nvme_bytes.unwrap_or(DEFAULT_BYTES_PER_DRIVE),
    };
    let setup = hwc_bench_nvme::setup(topo, &req, cancel)?;
    plan.selected = setup.selected;
    plan.write_drives = setup.write_drives;
    plan.target = setup.target;
    let backend = live.then(|| {
        let mut b = NvmeBackend::new(setup.config);
        if !notes.is_empty() {
            // Drives that did not answer Identify keep the facts sysfs gave.
            b.note_environment("nvme_identify_failed", notes.join("; "));
        }
        b
    });
    Ok(Nvme { plan, backend })
}

/// The NVMe options that shaped the run, for the provenance.
pub fn options(a: &ProfileArgs, o: &mut BTreeMap<String, String>) {
    if let Some(d) = &a.drives {
        o.insert("drives".into(), d.join(","));
    }
    o.insert(
        "allow_destructive_writes".into(),
        a.allow_destructive_writes.to_string(),
    );
    if let Some(t) = &a.target {
        o.insert("target".into(), t.display().to_string());
    }
    if let Some(s) = &a.nvme_sizes {
        let v: Vec<String> = s.iter().map(|&b| hwc_model::size_label(b)).collect();
        o.insert("nvme_sizes".into(), v.join(","));
    }
    if let Some(q) = &a.queue_depths {
        let v: Vec<String> = q.iter().map(u32::to_string).collect();
        o.insert("queue_depths".into(), v.join(","));
    }
    o.insert(
        "nvme_bytes_per_drive".into(),
        a.nvme_bytes.unwrap_or(DEFAULT_BYTES_PER_DRIVE).to_string(),
    );
}
