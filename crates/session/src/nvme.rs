//! The NVMe part of a run: ask the drives Identify, resolve `--drives` / `--target`, run the
//! write safety gate (a refusal ends the run before anything is measured or written), and hand
//! the planner its NVMe options, and the runner its engine and the gc-settle procedure.

use crate::SessionError;
use hwc_bench_nvme::{GcSettleRunner, NvmeBackend, Request, DEFAULT_BYTES_PER_DRIVE};
use hwc_model::long_tests::LongTest;
use hwc_model::topology::NvmeDrive;
use hwc_model::RunConfig;
use hwc_model::{PathId, Topology};
use hwc_plan::NvmePlanOptions;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicBool;

/// The planner's NVMe options and, on a live machine, the engine and the gc-settle procedure.
pub struct Nvme {
    pub plan: NvmePlanOptions,
    pub backend: Option<NvmeBackend>,
    pub gc_settle: Option<GcSettleRunner>,
    /// The drives the selections left out, for the profile's options.
    pub left_out: LeftOutDrives,
    /// What the caller should tell the user before the run (long tests left out).
    pub notes: Vec<String>,
    /// The drives `--spdk-drives` named, as the bind gate passed them (a live run only).
    pub spdk: Option<crate::bind::Choice>,
}

/// The drives the NVMe selections left out, recorded in the profile's options.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LeftOutDrives {
    /// With `--drives`, when the NVMe paths are planned: the drives a full run reads that the
    /// selection leaves out (`drives_left_out`, where an empty list says the run named every
    /// drive and is not narrowed by it: `hwc_model::profile::narrowing`).
    pub read: Option<Vec<String>>,
    /// When writes were planned on drives (`--write-drives`, or `--drives` with
    /// `--allow-destructive-writes`): the drives with a namespace that are not written
    /// (`write_drives_left_out`; the write ceilings cover only the drives written).
    pub written: Option<Vec<String>>,
}

/// The drives a full run reads — those the kernel shows a namespace of (a full run waives the
/// others too) — that `named` leaves out.
fn drives_left_out(topo: &Topology, named: &[String]) -> Vec<String> {
    topo.nvme
        .iter()
        .filter(|d| !d.namespaces.is_empty() && !named.contains(&d.name))
        .map(|d| d.name.clone())
        .collect()
}

/// Long tests `all` brought in that `--paths` leaves out, with the path each is part of.
type LeftOutTests = Vec<(LongTest, PathId)>;

/// The long tests to plan, and those `all` brought in that `--paths` leaves out (with their
/// path). A test named in `--nvme-long-tests` whose path is left out is an error.
fn runnable_long_tests(a: &RunConfig) -> Result<(BTreeSet<LongTest>, LeftOutTests), SessionError> {
    let Some(req) = &a.nvme_long_tests else {
        return Ok((BTreeSet::new(), Vec::new()));
    };
    let (mut kept, mut left_out) = (BTreeSet::new(), Vec::new());
    for &t in &req.tests {
        let path = t.path();
        if a.wants(path) {
            kept.insert(t);
        } else if req.named.contains(&t) {
            return Err(SessionError::Refused(format!(
                "--nvme-long-tests {t} is part of {path}: add {path} to --paths"
            )));
        } else {
            left_out.push((t, path));
        }
    }
    Ok((kept, left_out))
}

/// Resolve the NVMe request. `live` is false for a dry run on a snapshot (`--fsroot`): nothing
/// is opened, and writes are not planned (the gate needs the live devices). Every refusal
/// (a drive that is not there, a target that cannot be made, the write gate) comes before
/// anything is measured or written: `profile` calls this before it creates its output folder.
pub fn prepare(
    a: &RunConfig,
    topo: &mut Topology,
    live: bool,
    cancel: &'static AtomicBool,
) -> Result<Nvme, SessionError> {
    if a.write_drives.is_some() && !a.wants(PathId::NvmeWrite) {
        return Err(SessionError::Refused(format!(
            "--write-drives names the drives the write sweep writes, and --paths leaves it out: \
             add {} to --paths",
            PathId::NvmeWrite
        )));
    }
    let (long_tests, left_out) = runnable_long_tests(a)?;
    if a.spdk_drives.is_some() && long_tests.contains(&LongTest::GcSettle) {
        // The drives come back from vfio-pci renumbered: gc-settle, which runs after every
        // engine, would reopen its drive by a name that may now be another drive's.
        return Err(SessionError::Refused(
            "--nvme-long-tests gc-settle and --spdk-drives cannot be in one run: run gc-settle \
             on its own"
                .into(),
        ));
    }
    let notes = left_out
        .iter()
        .map(|(t, path)| {
            format!(
                "--nvme-long-tests all: {t} left out, it is part of {path}, which --paths leaves \
                 out"
            )
        })
        .collect();
    let mut plan = NvmePlanOptions {
        sizes: a.nvme_sizes.clone(),
        queue_depths: a.queue_depths.clone(),
        long_tests,
        idle_max_s: a.nvme_idle_max_s,
        gc_write_s: a.nvme_gc_write_s,
        gc_settle_max_s: a.nvme_gc_settle_max_s,
        ..NvmePlanOptions::default()
    };
    // Path 6 reads the same drives (or target), chosen the same way.
    let wants_nvme =
        a.wants(PathId::NvmeRead) || a.wants(PathId::NvmeWrite) || a.wants(PathId::Gds);
    if !wants_nvme {
        // A drive or target named that is not there is bad input whatever --paths says: the
        // names are resolved and the target checked (reads only: nothing is opened or written).
        if a.drives.is_some() || a.write_drives.is_some() || a.target.is_some() {
            let check = Request {
                drives: a.drives.clone().unwrap_or_default(),
                write_drives: a.write_drives.clone().unwrap_or_default(),
                allow_destructive_writes: false,
                target: a.target.clone(),
                wants_write: false,
                bytes_per_drive: a.nvme_bytes.unwrap_or(DEFAULT_BYTES_PER_DRIVE),
            };
            hwc_bench_nvme::setup(topo, &check, cancel)?;
        }
        return Ok(Nvme {
            plan,
            backend: None,
            gc_settle: None,
            left_out: LeftOutDrives::default(),
            notes,
            spdk: None,
        });
    }
    let identify_failed = if live {
        hwc_bench_nvme::inspect(topo)
    } else {
        Vec::new()
    };
    // The drives --spdk-drives names are resolved first, so that a mistyped name is refused
    // under its own flag (without --drives, the SPDK drives are also the kernel engine's).
    let spdk_named = a
        .spdk_drives
        .as_deref()
        .map(|names| {
            names
                .iter()
                .map(|n| {
                    hwc_bench_nvme::gate::select(topo, n)
                        .map(|d| (n, d))
                        .map_err(|e| SessionError::Refused(format!("--spdk-drives: {e}")))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    let req = Request {
        // The drives handed to SPDK are measured by the kernel engine too, side by side.
        drives: a
            .drives
            .clone()
            .or_else(|| a.spdk_drives.clone())
            .unwrap_or_default(),
        write_drives: a.write_drives.clone().unwrap_or_default(),
        allow_destructive_writes: a.allow_destructive_writes && live,
        target: a.target.clone(),
        wants_write: (a.wants(PathId::NvmeWrite) || a.wants(PathId::Gds)) && live,
        bytes_per_drive: a.nvme_bytes.unwrap_or(DEFAULT_BYTES_PER_DRIVE),
    };
    let setup = hwc_bench_nvme::setup(topo, &req, cancel)?;
    let left_out = LeftOutDrives {
        read: setup
            .selected
            .as_ref()
            .map(|named| drives_left_out(topo, named)),
        written: setup
            .write_drives
            .as_ref()
            .map(|named| drives_left_out(topo, named)),
    };
    let spdk = match &spdk_named {
        Some(named) => Some(spdk_choice(topo, named, setup.selected.as_deref(), live)?),
        None => None,
    };
    plan.bindable = spdk
        .as_ref()
        .map(|c| c.chosen.iter().map(|d| d.bdf.clone()).collect());
    plan.selected = setup.selected;
    plan.write_drives = setup.write_drives;
    plan.target = setup.target;
    let backend = live.then(|| {
        let mut b = NvmeBackend::new(setup.config);
        if !identify_failed.is_empty() {
            // Drives that did not answer Identify keep the facts sysfs gave.
            b.note_environment("nvme_identify_failed", identify_failed.join("; ").into());
        }
        b
    });
    let gc_settle = backend.as_ref().map(NvmeBackend::gc_settle_runner);
    Ok(Nvme {
        plan,
        backend,
        gc_settle,
        left_out,
        notes,
        spdk: spdk.filter(|_| live),
    })
}

/// The drives `--spdk-drives` names (each name with the drive it resolved to), each among the
/// drives measured (`selected`, by name) and passed by the bind gate (a live run; a snapshot's
/// are only resolved): a drive refused is an error naming every reason.
fn spdk_choice(
    topo: &Topology,
    named: &[(&String, &NvmeDrive)],
    selected: Option<&[String]>,
    live: bool,
) -> Result<crate::bind::Choice, SessionError> {
    for (n, d) in named {
        if selected.is_some_and(|s| !s.contains(&d.name)) {
            return Err(SessionError::Refused(format!(
                "--spdk-drives {n} is not among --drives: the SPDK engines measure drives the run \
                 measures"
            )));
        }
    }
    if live {
        let cfg = crate::bind::BindConfig {
            drives: Some(named.iter().map(|(n, _)| n.to_string()).collect()),
            ..Default::default()
        };
        return crate::bind::choose(topo, &cfg);
    }
    let chosen = named
        .iter()
        .map(|(_, d)| crate::bind::Chosen {
            name: d.name.clone(),
            bdf: d.bdf.clone().unwrap_or_default(),
            numa_node: d.numa_node,
        })
        .collect();
    Ok(crate::bind::Choice {
        chosen,
        ..Default::default()
    })
}

/// The NVMe options that shaped the run, for the provenance, with the drives the selections
/// left out ([`LeftOutDrives`]; recorded empty when a selection named every drive).
pub fn options(a: &RunConfig, left_out: &LeftOutDrives, o: &mut BTreeMap<String, String>) {
    if let Some(w) = &a.write_drives {
        o.insert("write_drives".into(), w.join(","));
    }
    if let Some(written) = &left_out.written {
        o.insert("write_drives_left_out".into(), written.join(","));
    }
    o.insert(
        "allow_destructive_writes".into(),
        a.allow_destructive_writes.to_string(),
    );
    if let Some(d) = &a.spdk_drives {
        o.insert("spdk_drives".into(), d.join(","));
        o.insert("leave_bound".into(), a.leave_bound.to_string());
    }
    if let Some(d) = &a.spdk_dir {
        o.insert("spdk_dir".into(), d.display().to_string());
    }
    o.insert(
        "nvme_bytes_per_drive".into(),
        a.nvme_bytes.unwrap_or(DEFAULT_BYTES_PER_DRIVE).to_string(),
    );
    if a.nvme_long_tests.is_some() {
        // What was planned; what `all` brought in that --paths left out, said separately.
        // (`prepare` has already refused a request that does not fit.)
        let (kept, left_out) = runnable_long_tests(a).unwrap_or_default();
        let v: Vec<&str> = kept.iter().map(|x| x.as_str()).collect();
        o.insert("nvme_long_tests".into(), v.join(","));
        if !left_out.is_empty() {
            let v: Vec<String> = left_out
                .iter()
                .map(|(t, path)| format!("{t} ({path} not in --paths)"))
                .collect();
            o.insert("nvme_long_tests_left_out".into(), v.join(", "));
        }
        let d = |v: Option<u64>, default: u64| v.unwrap_or(default).to_string();
        o.insert(
            "nvme_idle_max_s".into(),
            a.nvme_idle_max_s
                .unwrap_or(hwc_model::long_tests::DEFAULT_IDLE_MAX_S)
                .to_string(),
        );
        o.insert(
            "nvme_gc_write_s".into(),
            d(a.nvme_gc_write_s, hwc_model::long_tests::DEFAULT_GC_WRITE_S),
        );
        o.insert(
            "nvme_gc_settle_max_s".into(),
            d(
                a.nvme_gc_settle_max_s,
                hwc_model::long_tests::DEFAULT_GC_SETTLE_MAX_S,
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(paths: Option<&[PathId]>, long_tests: Option<&str>) -> RunConfig {
        let mut c = RunConfig::new("out");
        c.paths = paths.map(<[PathId]>::to_vec);
        c.nvme_long_tests = long_tests.map(|t| hwc_model::long_tests::parse_long_tests(t).unwrap());
        c
    }

    #[test]
    fn all_keeps_the_long_tests_of_the_paths_chosen_and_a_named_one_must_fit() {
        let read = Some(&[PathId::NvmeRead][..]);
        let a = config(read, Some("all"));
        let (kept, left_out) = runnable_long_tests(&a).unwrap();
        assert_eq!(
            kept.into_iter().collect::<Vec<_>>(),
            [LongTest::ReadCache, LongTest::PowerStates]
        );
        assert_eq!(left_out, [(LongTest::GcSettle, PathId::NvmeWrite)]);
        // The profile's options say what ran and what was left out, and why.
        let mut o = BTreeMap::new();
        options(&a, &LeftOutDrives::default(), &mut o);
        assert_eq!(o["nvme_long_tests"], "read-cache,power-states");
        assert_eq!(
            o["nvme_long_tests_left_out"],
            "gc-settle (nvme_write not in --paths)"
        );
        let a = config(None, Some("all"));
        assert_eq!(runnable_long_tests(&a).unwrap().0.len(), 3);
        let mut o = BTreeMap::new();
        options(&a, &LeftOutDrives::default(), &mut o);
        assert!(!o.contains_key("nvme_long_tests_left_out"));
        let a = config(read, Some("all,gc-settle"));
        let e = runnable_long_tests(&a).unwrap_err().to_string();
        assert!(e.contains("add nvme_write to --paths"), "{e}");
        let a = config(Some(&[PathId::HostRam]), Some("all"));
        assert!(runnable_long_tests(&a).unwrap().0.is_empty());
        assert!(runnable_long_tests(&config(None, None))
            .unwrap()
            .0
            .is_empty());
    }

    #[test]
    fn left_out_are_the_drives_with_a_namespace_not_named() {
        let drive = |name: &str, namespace: bool| hwc_model::topology::NvmeDrive {
            name: name.into(),
            namespaces: namespace
                .then(|| {
                    serde_json::from_value(
                        serde_json::json!({"name": format!("{name}n1"), "in_use": false}),
                    )
                    .unwrap()
                })
                .into_iter()
                .collect(),
            ..Default::default()
        };
        // nvme2 has no namespace: a full run waives it too.
        let topo = Topology {
            nvme: vec![
                drive("nvme0", true),
                drive("nvme1", true),
                drive("nvme2", false),
            ],
            ..Default::default()
        };
        let named = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(drives_left_out(&topo, &named(&["nvme0"])), ["nvme1"]);
        assert!(drives_left_out(&topo, &named(&["nvme1", "nvme0"])).is_empty());
    }
}
