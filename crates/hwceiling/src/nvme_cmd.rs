//! The NVMe part of `profile`: ask the drives Identify, resolve `--drives` / `--target`, run the
//! write safety gate (a refusal ends the run before anything is measured or written), and hand
//! the planner its NVMe options and the runner its backend; after the runner, run the gc-settle
//! cases (a protocol the runner does not drive).

use crate::cli::ProfileArgs;
use anyhow::{bail, Result};
use hwc_bench_nvme::{GcSettleRunner, NvmeBackend, Request, DEFAULT_BYTES_PER_DRIVE};
use hwc_model::long_tests::{LongTest, NvmeLongTests};
use hwc_model::{Case, PathId, Topology};
use hwc_plan::NvmePlanOptions;
use hwc_runner::{BenchError, CaseOutcome, Observer, RunOutcome};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};

/// The planner's NVMe options and, on a live machine, the backend and the gc-settle runner.
pub struct Nvme {
    pub plan: NvmePlanOptions,
    pub backend: Option<NvmeBackend>,
    pub gc_settle: Option<GcSettleRunner>,
    /// The drives the selections left out, for the profile's options.
    pub left_out: LeftOutDrives,
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

fn wants(a: &ProfileArgs, path: PathId) -> bool {
    a.paths.as_ref().is_none_or(|p| p.contains(&path))
}

/// Long tests `all` brought in that `--paths` leaves out, with the path each is part of.
type LeftOut = Vec<(LongTest, PathId)>;

/// The long tests to plan, and those `all` brought in that `--paths` leaves out (with their
/// path). A test named in `--nvme-long-tests` whose path is left out is an error.
fn runnable_long_tests(a: &ProfileArgs) -> Result<(BTreeSet<LongTest>, LeftOut)> {
    let Some(req) = &a.nvme_long_tests else {
        return Ok((BTreeSet::new(), Vec::new()));
    };
    let (mut kept, mut left_out) = (BTreeSet::new(), Vec::new());
    for &t in &req.tests {
        let path = t.path();
        if wants(a, path) {
            kept.insert(t);
        } else if req.named.contains(&t) {
            bail!("--nvme-long-tests {t} is part of {path}: add {path} to --paths");
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
    a: &ProfileArgs,
    topo: &mut Topology,
    live: bool,
    cancel: &'static AtomicBool,
) -> Result<Nvme> {
    if a.write_drives.is_some() && !wants(a, PathId::NvmeWrite) {
        bail!(
            "--write-drives names the drives the write sweep writes, and --paths leaves it out: \
             add {} to --paths",
            PathId::NvmeWrite
        );
    }
    let (long_tests, left_out) = runnable_long_tests(a)?;
    for (t, path) in left_out {
        eprintln!(
            "note: --nvme-long-tests all: {t} left out, it is part of {path}, which --paths leaves \
             out"
        );
    }
    let mut plan = NvmePlanOptions {
        sizes: a.nvme_sizes.clone(),
        queue_depths: a.queue_depths.clone(),
        long_tests,
        idle_max_s: a.nvme_idle_max_s,
        gc_write_s: a.nvme_gc_write_s,
        gc_settle_max_s: a.nvme_gc_settle_max_s,
        ..NvmePlanOptions::default()
    };
    let wants_nvme = wants(a, PathId::NvmeRead) || wants(a, PathId::NvmeWrite);
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
        });
    }
    let notes = if live {
        hwc_bench_nvme::inspect(topo)
    } else {
        Vec::new()
    };
    let req = Request {
        drives: a.drives.clone().unwrap_or_default(),
        write_drives: a.write_drives.clone().unwrap_or_default(),
        allow_destructive_writes: a.allow_destructive_writes && live,
        target: a.target.clone(),
        wants_write: wants(a, PathId::NvmeWrite) && live,
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
    plan.selected = setup.selected;
    plan.write_drives = setup.write_drives;
    plan.target = setup.target;
    let backend = live.then(|| {
        let mut b = NvmeBackend::new(setup.config);
        if !notes.is_empty() {
            // Drives that did not answer Identify keep the facts sysfs gave.
            b.note_environment("nvme_identify_failed", notes.join("; ").into());
        }
        b
    });
    let gc_settle = backend.as_ref().map(NvmeBackend::gc_settle_runner);
    Ok(Nvme {
        plan,
        backend,
        gc_settle,
        left_out,
    })
}

/// Run the gc-settle cases after the runner's, reporting each to the progress observer and
/// adding its outcome to `outcome`; returns their records for the profile's `long_tests`.
pub fn run_gc_settle(
    cases: &[Case],
    runner: Option<&GcSettleRunner>,
    progress: &mut dyn Observer,
    outcome: &mut RunOutcome,
    cancel: &AtomicBool,
) -> Vec<NvmeLongTests> {
    let mut records = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        if cancel.load(Ordering::SeqCst) {
            outcome.interrupted = true;
            break;
        }
        progress.case_started(i, cases.len(), case);
        let result = match runner {
            Some(r) => r.run(case),
            None => Err(BenchError::failed("no NVMe backend in this run")),
        };
        let o = match result {
            Ok((measured, record)) => {
                records.push(record);
                CaseOutcome::Measured(Box::new(measured))
            }
            Err(e) => hwc_runner::from_error(case, e),
        };
        progress.case_finished(&o);
        outcome.record(o);
    }
    if cancel.load(Ordering::SeqCst) {
        outcome.interrupted = true;
    }
    records
}

/// The NVMe options that shaped the run, for the provenance, with the drives the selections
/// left out ([`LeftOutDrives`]; recorded empty when a selection named every drive).
pub fn options(a: &ProfileArgs, left_out: &LeftOutDrives, o: &mut BTreeMap<String, String>) {
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
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn args(extra: &[&str]) -> ProfileArgs {
        let cli = Cli::try_parse_from(["hwceiling", "profile"].iter().chain(extra)).unwrap();
        match cli.command {
            Command::Profile(p) => *p,
            _ => unreachable!(),
        }
    }

    #[test]
    fn all_keeps_the_long_tests_of_the_paths_chosen_and_a_named_one_must_fit() {
        let a = args(&["--paths", "nvme_read", "--nvme-long-tests", "all"]);
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
        let a = args(&["--nvme-long-tests", "all"]);
        assert_eq!(runnable_long_tests(&a).unwrap().0.len(), 3);
        let mut o = BTreeMap::new();
        options(&a, &LeftOutDrives::default(), &mut o);
        assert!(!o.contains_key("nvme_long_tests_left_out"));
        let a = args(&["--paths", "nvme_read", "--nvme-long-tests", "all,gc-settle"]);
        let e = runnable_long_tests(&a).unwrap_err().to_string();
        assert!(e.contains("add nvme_write to --paths"), "{e}");
        let a = args(&["--paths", "host_ram", "--nvme-long-tests", "all"]);
        assert!(runnable_long_tests(&a).unwrap().0.is_empty());
        assert!(runnable_long_tests(&args(&[])).unwrap().0.is_empty());
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

    #[test]
    fn a_sweep_given_narrows_only_when_it_leaves_out_a_point_of_the_full_runs() {
        use hwc_model::topology::{NumaNode, Platform};
        // Two nodes: 8 CPUs (1, 2, 4, 8) and 4 (1, 2, 4).
        let node = |id: u32, cpus: std::ops::Range<u32>| NumaNode {
            id,
            cpus: cpus.collect(),
            memory_only: false,
            memory_bytes: None,
            distances: vec![],
        };
        let topo = Topology {
            platform: Platform {
                numa_nodes: 2,
                numa: vec![node(0, 0..8), node(1, 8..12)],
                ..Platform::default()
            },
            ..Topology::default()
        };
        // What the run judges (typed), which is what a profile of an earlier build, holding
        // only the options' words, reads as.
        let narrowed_by = |extra: &[&str]| {
            let a = args(extra);
            let none = LeftOutDrives::default();
            let typed = hwc_model::Provenance {
                run: Some(crate::profile_cmd::run_choices(&a, &topo, &none)),
                ..Default::default()
            }
            .narrowed_by();
            let legacy = hwc_model::Provenance {
                options: crate::profile_cmd::options_map(&a, &topo, &none),
                ..Default::default()
            }
            .narrowed_by();
            assert_eq!(typed, legacy, "{extra:?}");
            typed
        };
        let none: &[&str] = &[];
        assert_eq!(narrowed_by(&["--threads", "8,4,2,1"]), none);
        assert_eq!(narrowed_by(&["--threads", "1,2,4,8,16"]), none);
        assert_eq!(
            narrowed_by(&["--threads", "1,8"]),
            ["--threads 1,8 (leaves out 2,4)"]
        );
        assert_eq!(
            narrowed_by(&["--host-sizes", "256MiB,64MiB,16MiB,4MiB"]),
            none
        );
        // A larger size moves the streaming kernel (and the sustained ceiling) off 256 MiB.
        assert_eq!(
            narrowed_by(&["--host-sizes", "4MiB,16MiB,64MiB,256MiB,1GiB"]),
            ["--host-sizes 4MiB,16MiB,64MiB,256MiB,1GiB (leaves out 256MiB sustained)"]
        );
        assert_eq!(
            narrowed_by(&["--host-sizes", "256MiB"]),
            ["--host-sizes 256MiB (leaves out 4MiB,16MiB,64MiB)"]
        );
        assert_eq!(narrowed_by(&["--queue-depths", "32,16"]), none);
        assert_eq!(
            narrowed_by(&["--queue-depths", "32"]),
            ["--queue-depths 32 (leaves out 16)"]
        );
        assert_eq!(
            narrowed_by(&[
                "--nvme-sizes",
                "4KiB,16KiB,64KiB,128KiB,256KiB,512KiB,1MiB,2MiB,4MiB,8MiB"
            ]),
            none
        );
        assert_eq!(
            narrowed_by(&["--nvme-sizes", "1MiB,8MiB"]),
            ["--nvme-sizes 1MiB,8MiB (leaves out 4KiB,16KiB,64KiB,128KiB,256KiB,512KiB,2MiB,4MiB)"]
        );
    }

    #[test]
    fn the_options_a_run_records_say_what_narrowed_it() {
        let narrowed_by = |extra: &[&str], read: Option<&[String]>| {
            let left_out = LeftOutDrives {
                read: read.map(<[String]>::to_vec),
                written: None,
            };
            let a = args(extra);
            let topo = Topology::default();
            let typed = hwc_model::Provenance {
                run: Some(crate::profile_cmd::run_choices(&a, &topo, &left_out)),
                ..Default::default()
            };
            let legacy = hwc_model::Provenance {
                options: crate::profile_cmd::options_map(&a, &topo, &left_out),
                ..Default::default()
            };
            assert_eq!(typed.narrowed_by(), legacy.narrowed_by(), "{extra:?}");
            assert_eq!(typed.quick(), legacy.quick());
            typed.narrowed_by()
        };
        let none: &[&str] = &[];
        let full = [
            "--allow-contended",
            "--quick",
            "--nvme-bytes",
            "1GiB",
            "--nvme-long-tests",
            "read-cache",
            "--nvme-idle-max-s",
            "1",
        ];
        assert_eq!(narrowed_by(&full, None), none);
        assert_eq!(narrowed_by(&["--paths", "h2d"], None), ["--paths h2d"]);
        // Every drive named (as a full run with writes must): not narrowed, when the run
        // recorded that it left none out.
        let drives = ["--drives", "nvme0,nvme1", "--allow-destructive-writes"];
        assert_eq!(narrowed_by(&drives, Some(&[])), none);
        assert_eq!(
            narrowed_by(&drives, Some(&["nvme2".to_string()])),
            ["--drives nvme0,nvme1 (leaves out nvme2)"]
        );
        assert_eq!(narrowed_by(&drives, None), ["--drives nvme0,nvme1"]);
        // Writes to some drives while every drive is read: complete, and the options say
        // which drives were not written.
        let writes = ["--allow-destructive-writes", "--write-drives", "nvme1"];
        assert_eq!(narrowed_by(&writes, None), none);
        let left_out = LeftOutDrives {
            read: None,
            written: Some(vec!["nvme0".into(), "nvme2".into()]),
        };
        let o = crate::profile_cmd::options_map(&args(&writes), &Topology::default(), &left_out);
        assert_eq!(o["write_drives"], "nvme1");
        assert_eq!(o["write_drives_left_out"], "nvme0,nvme2");
        assert!(!o.contains_key("drives_left_out"));
        let p = hwc_model::Provenance {
            options: o,
            ..Default::default()
        };
        assert_eq!(p.narrowed_by(), none, "writes left out narrow nothing");
        let sweeps = [
            "--target",
            "/scratch/f",
            "--threads",
            "4",
            "--host-sizes",
            "4MiB",
            "--nvme-sizes",
            "1MiB",
            "--queue-depths",
            "64",
        ];
        assert_eq!(
            narrowed_by(&sweeps, None),
            // No NUMA node known here: no host-RAM case a list could leave out.
            [
                "--target /scratch/f",
                "--nvme-sizes 1MiB (leaves out 4KiB,16KiB,64KiB,128KiB,256KiB,512KiB,2MiB,4MiB,8MiB)",
                "--queue-depths 64 (leaves out 16,32)"
            ]
        );
    }
}
