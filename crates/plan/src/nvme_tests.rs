//! Tests of the NVMe matrix.

use super::*;
use crate::plan;
use hwc_model::long_tests::LongTest;
use hwc_model::topology::{NvmeDrive, NvmeNamespace};
use hwc_model::Case;
use proptest::prelude::*;
use std::collections::BTreeSet;

fn drive(i: u32, root: Option<&str>, visible: bool) -> NvmeDrive {
    NvmeDrive {
        name: format!("nvme{i}"),
        bdf: Some(format!("0000:{:02x}:00.0", 0x10 + i)),
        model: Some("QEMU NVMe Ctrl".into()),
        serial: Some(format!("HWC{i}")),
        transport: Some("pcie".into()),
        numa_node: Some(0),
        root: root.map(str::to_string),
        driver: Some(if visible { "nvme" } else { "vfio-pci" }.into()),
        namespaces: if visible {
            vec![NvmeNamespace {
                name: format!("nvme{i}n1"),
                size_bytes: Some(64 << 20),
                logical_block_size: Some(512),
                max_hw_sectors_kb: Some(128),
                partitions: vec![],
                holders: vec![],
                mounts: vec![],
                in_use: false,
            }]
        } else {
            vec![]
        },
        ..NvmeDrive::default()
    }
}

fn machine(drives: Vec<NvmeDrive>) -> Topology {
    Topology {
        nvme: drives,
        ..Topology::default()
    }
}

fn nv(c: &Case) -> &hwc_model::NvmeSpec {
    c.spec.nvme().expect("an NVMe case")
}

fn pattern(c: &Case) -> Option<&'static str> {
    c.spec.nvme().map(|s| s.pattern.as_str())
}

fn region(c: &Case) -> Option<u64> {
    match nv(c).pattern {
        hwc_model::NvmePattern::Hot { region_bytes } => Some(region_bytes),
        _ => None,
    }
}

fn idle(c: &Case) -> Option<u64> {
    match nv(c).pattern {
        hwc_model::NvmePattern::Idle { idle_ms } => Some(idle_ms),
        _ => None,
    }
}

fn gc_of(c: &Case) -> (Option<u64>, Option<u64>) {
    match nv(c).pattern {
        hwc_model::NvmePattern::GcSettle {
            duration_s,
            settle_max_s,
        } => (Some(duration_s), Some(settle_max_s)),
        _ => (None, None),
    }
}

fn opts(nvme: NvmePlanOptions) -> PlanOptions {
    PlanOptions {
        engines: crate::tests::this_builds_engines(),
        version: "0.1.0".into(),
        nvme,
        ..PlanOptions::default()
    }
}

fn bed() -> Topology {
    // The VM test bed's shape: two drives on one root, one on another.
    machine(vec![
        drive(0, Some("0000:20"), true),
        drive(1, Some("0000:10"), true),
        drive(2, Some("0000:10"), true),
    ])
}

#[test]
fn drive_counts_follow_the_spec_and_end_with_all() {
    assert_eq!(drive_counts(&READ_DRIVE_COUNTS, 7), [1, 2, 4, 6, 7]);
    assert_eq!(drive_counts(&READ_DRIVE_COUNTS, 6), [1, 2, 4, 6]);
    assert_eq!(drive_counts(&READ_DRIVE_COUNTS, 3), [1, 2, 3]);
    assert_eq!(drive_counts(&WRITE_DRIVE_COUNTS, 8), [1, 2, 4, 8]);
    assert_eq!(drive_counts(&READ_DRIVE_COUNTS, 1), [1]);
    assert!(drive_counts(&READ_DRIVE_COUNTS, 0).is_empty());
}

#[test]
fn groups_prefer_one_root_complex() {
    let t = bed();
    let all: Vec<&NvmeDrive> = t.nvme.iter().collect();
    let names = |k| -> Vec<String> {
        drive_group(&all, k)
            .iter()
            .map(|d| d.name.clone())
            .collect()
    };
    assert_eq!(names(1), ["nvme1"]);
    assert_eq!(names(2), ["nvme1", "nvme2"], "both on root 0000:10");
    assert_eq!(names(3), ["nvme1", "nvme2", "nvme0"]);
    let groups = same_root_groups(&t.nvme);
    assert_eq!(groups["0000:10"], ["0000:11:00.0", "0000:12:00.0"]);
    assert_eq!(groups["0000:20"], ["0000:10:00.0"]);
}

#[test]
fn reads_plan_latency_probes_and_the_full_sweep() {
    let p = plan(&bed(), &opts(NvmePlanOptions::default()));
    let reads: Vec<&Case> = p.cases_of(PathId::NvmeRead).collect();
    // 3 drives × 3 QDs of latency, then counts 1, 2, 3 × 10 sizes × 2 QDs.
    assert_eq!(reads.len(), 9 + 3 * 10 * 2);
    assert_eq!(
        reads[0].key,
        "nvme_read/io-uring/latency/nvme0/4KiB-random/qd1"
    );
    assert_eq!(pattern(reads[0]), Some("random"));
    let two = p
        .cases
        .iter()
        .find(|c| c.key == "nvme_read/io-uring/2drive/128KiB/qd32")
        .unwrap();
    assert_eq!(two.spec.drives(), ["0000:11:00.0", "0000:12:00.0"]);
    assert_eq!(pattern(two), Some("sequential"));
    assert!(reads
        .iter()
        .all(|c| !c.key.contains("read-cache") && !c.key.contains("power-states")));
}

#[test]
fn long_tests_are_waived_unless_requested_naming_the_flag() {
    let p = plan(&bed(), &opts(NvmePlanOptions::default()));
    for (path, test) in [
        (PathId::NvmeRead, "read-cache"),
        (PathId::NvmeRead, "power-states"),
        (PathId::NvmeWrite, "gc-settle"),
    ] {
        let w = p
            .waivers_of(path)
            .find(|w| w.scope.as_deref() == Some(test))
            .unwrap_or_else(|| panic!("{test} not waived: {:?}", p.waived));
        assert!(
            w.reason.starts_with("not requested")
                && w.reason.contains(&format!("--nvme-long-tests {test}")),
            "{w:?}"
        );
    }
    assert!(p
        .waived
        .iter()
        .filter(|w| w.scope.as_deref() == Some("gc-settle"))
        .all(|w| w.reason.contains("--allow-destructive-writes")));
    // One sentence each: no run of spaces left by a broken line continuation.
    for w in &p.waived {
        assert!(!w.reason.contains("  "), "{:?}", w.reason);
    }
}

#[test]
fn requested_read_tests_plan_per_drive_cases() {
    let o = NvmePlanOptions {
        long_tests: [LongTest::ReadCache, LongTest::PowerStates].into(),
        idle_max_s: Some(0.5),
        sizes: Some(vec![MIB]),
        queue_depths: Some(vec![16]),
        ..NvmePlanOptions::default()
    };
    let p = plan(&bed(), &opts(o));
    let keys: Vec<&str> = p
        .cases_of(PathId::NvmeRead)
        .map(|c| c.key.as_str())
        .filter(|k| k.contains("/nvme1/") && !k.contains("latency"))
        .collect();
    assert_eq!(
        keys,
        [
            "nvme_read/io-uring/read-cache/nvme1/cold",
            "nvme_read/io-uring/read-cache/nvme1/hot",
            "nvme_read/io-uring/power-states/nvme1/idle-0s",
            "nvme_read/io-uring/power-states/nvme1/idle-10ms",
            "nvme_read/io-uring/power-states/nvme1/idle-100ms",
            "nvme_read/io-uring/power-states/nvme1/idle-500ms",
        ],
        "gaps up to --nvme-idle-max-s 0.5"
    );
    let case = |k: &str| p.cases.iter().find(|c| c.key == k).unwrap();
    let hot = case("nvme_read/io-uring/read-cache/nvme1/hot");
    assert_eq!(
        (
            region(hot),
            Some(nv(hot).queue_depth),
            Some(hot.spec.size_bytes())
        ),
        (Some(MIB), Some(1), Some(4 * KIB))
    );
    assert_eq!(hot.spec.drives(), ["0000:11:00.0"]);
    let cold = case("nvme_read/io-uring/read-cache/nvme1/cold");
    assert_eq!((region(cold), pattern(cold)), (None, Some("random")));
    let gap = case("nvme_read/io-uring/power-states/nvme1/idle-100ms");
    assert_eq!((idle(gap), pattern(gap)), (Some(100), Some("idle")));
    assert_eq!((gap.reps.warmup, gap.reps.timed), (0, 3));
    assert!(
        case("nvme_read/io-uring/power-states/nvme1/idle-0s")
            .reps
            .timed
            > gap.reps.timed
    );
    // After the sweeps, so an interrupted run keeps them.
    let first_long = p
        .cases
        .iter()
        .position(|c| c.key.contains("read-cache"))
        .unwrap();
    let last_sweep = p
        .cases
        .iter()
        .rposition(|c| c.key.contains("drive/"))
        .unwrap();
    assert!(first_long > last_sweep);
    assert!(p
        .waived
        .iter()
        .all(|w| w.scope.as_deref() != Some("read-cache")
            && w.scope.as_deref() != Some("power-states")));
    // gc-settle was not asked for: still waived as not requested.
    assert!(p
        .waivers_of(PathId::NvmeWrite)
        .any(|w| w.scope.as_deref() == Some("gc-settle") && w.reason.starts_with("not requested")));
}

#[test]
fn gc_settle_runs_only_on_drives_the_gate_approved() {
    let mut o = NvmePlanOptions {
        long_tests: [LongTest::GcSettle].into(),
        gc_write_s: Some(10),
        gc_settle_max_s: Some(30),
        ..NvmePlanOptions::default()
    };
    let p = plan(&bed(), &opts(o.clone()));
    assert_eq!(p.cases_of(PathId::NvmeWrite).count(), 0);
    let w = p
        .waivers_of(PathId::NvmeWrite)
        .find(|w| w.scope.as_deref() == Some("gc-settle"))
        .unwrap();
    assert!(
        w.reason.contains("gc-settle writes") && w.reason.contains("--allow-destructive-writes"),
        "{w:?}"
    );
    o.write_drives = Some(vec!["nvme2".into()]);
    o.sizes = Some(vec![MIB]);
    let p = plan(&bed(), &opts(o));
    let gc: Vec<&Case> = p
        .cases_of(PathId::NvmeWrite)
        .filter(|c| pattern(c) == Some("gc-settle"))
        .collect();
    assert_eq!(gc.len(), 1);
    assert_eq!(gc[0].key, "nvme_write/io-uring/gc-settle/nvme2");
    assert_eq!(gc[0].spec.drives(), ["0000:12:00.0"]);
    assert_eq!(gc_of(gc[0]), (Some(10), Some(30)));
    assert_eq!(
        (gc[0].reps.warmup, gc[0].reps.timed),
        (6, 4),
        "the last third of 10 s"
    );
    assert!(p
        .waived
        .iter()
        .all(|w| w.scope.as_deref() != Some("gc-settle")));
}

#[test]
fn a_target_gets_the_long_tests_it_may_run() {
    let o = NvmePlanOptions {
        target: Some(("/tmp/x".into(), false)),
        sizes: Some(vec![MIB]),
        queue_depths: Some(vec![16]),
        long_tests: LongTest::ALL.into(),
        idle_max_s: Some(0.01),
        gc_write_s: Some(3),
        ..NvmePlanOptions::default()
    };
    let p = plan(&machine(vec![]), &opts(o.clone()));
    let keys: Vec<&str> = p.cases.iter().map(|c| c.key.as_str()).collect();
    assert!(
        keys.contains(&"nvme_read/io-uring/read-cache/target/hot"),
        "{keys:?}"
    );
    assert!(
        keys.contains(&"nvme_read/io-uring/power-states/target/idle-10ms"),
        "{keys:?}"
    );
    assert!(!keys.iter().any(|k| k.contains("gc-settle")));
    assert!(p.waivers_of(PathId::NvmeWrite).any(
        |w| w.scope.as_deref() == Some("gc-settle") && w.reason.contains("may not be written")
    ));
    let mut o = o;
    o.target = Some(("/tmp/x".into(), true));
    let p = plan(&machine(vec![]), &opts(o));
    let gc = p
        .cases
        .iter()
        .find(|c| c.key == "nvme_write/io-uring/gc-settle/target")
        .unwrap();
    assert_eq!(gc.spec.drives(), ["/tmp/x"]);
    assert_eq!((gc.reps.warmup, gc.reps.timed), (2, 1));
}

#[test]
fn writes_are_waived_unless_approved() {
    let p = plan(&bed(), &opts(NvmePlanOptions::default()));
    assert_eq!(p.cases_of(PathId::NvmeWrite).count(), 0);
    let w: Vec<_> = p.waivers_of(PathId::NvmeWrite).collect();
    assert!(w[0].reason.contains("--allow-destructive-writes"), "{w:?}");

    let p = plan(
        &bed(),
        &opts(NvmePlanOptions {
            write_drives: Some(vec!["nvme2".into()]),
            sizes: Some(vec![128 * KIB, MIB]),
            ..NvmePlanOptions::default()
        }),
    );
    let writes: Vec<&Case> = p.cases_of(PathId::NvmeWrite).collect();
    assert_eq!(writes.len(), 4, "one drive × 2 sizes × 2 QDs");
    assert!(writes.iter().all(|c| c.spec.drives() == ["0000:12:00.0"]));
}

#[test]
fn invisible_drives_are_waived_with_their_driver() {
    let t = machine(vec![drive(0, Some("0000:10"), true), drive(1, None, false)]);
    let p = plan(&t, &opts(NvmePlanOptions::default()));
    let w = p
        .waivers_of(PathId::NvmeRead)
        .find(|w| w.scope.as_deref() == Some("nvme1"))
        .unwrap();
    assert!(w.reason.contains("vfio-pci"), "{}", w.reason);
    assert!(p
        .cases_of(PathId::NvmeRead)
        .all(|c| c.spec.drives() == ["0000:10:00.0"]));
}

#[test]
fn a_target_replaces_the_drives() {
    let o = NvmePlanOptions {
        target: Some(("/tmp/x".into(), false)),
        sizes: Some(vec![MIB]),
        queue_depths: Some(vec![16]),
        ..NvmePlanOptions::default()
    };
    let p = plan(&machine(vec![]), &opts(o.clone()));
    let reads: Vec<&Case> = p.cases_of(PathId::NvmeRead).collect();
    assert_eq!(reads.len(), 1);
    assert_eq!(reads[0].key, "nvme_read/io-uring/target/1MiB/qd16");
    assert_eq!(reads[0].spec.drives(), ["/tmp/x"]);
    assert!(p
        .waivers_of(PathId::NvmeWrite)
        .any(|w| w.reason.contains("not created by hwceiling")));
    let mut o = o;
    o.target = Some(("/tmp/x".into(), true));
    let p = plan(&machine(vec![]), &opts(o));
    assert_eq!(p.cases_of(PathId::NvmeWrite).count(), 1);
}

#[test]
fn selected_drives_limit_the_reads() {
    let o = NvmePlanOptions {
        selected: Some(vec!["nvme0".into()]),
        ..NvmePlanOptions::default()
    };
    let p = plan(&bed(), &opts(o));
    assert!(p
        .cases_of(PathId::NvmeRead)
        .all(|c| c.spec.drives() == ["0000:10:00.0"]));
}

proptest! {
    /// A group of k drives has min(k, n) distinct drives and touches as few roots as possible.
    #[test]
    fn groups_span_the_fewest_roots(roots in proptest::collection::vec(proptest::option::of(0u8..4), 1..10), k in 1usize..12) {
        let drives: Vec<NvmeDrive> = roots
            .iter()
            .enumerate()
            .map(|(i, r)| drive(i as u32, r.map(|r| format!("0000:{r:02x}")).as_deref(), true))
            .collect();
        let refs: Vec<&NvmeDrive> = drives.iter().collect();
        let g = drive_group(&refs, k);
        prop_assert_eq!(g.len(), k.min(drives.len()));
        let keys: BTreeSet<String> = g.iter().map(|d| drive_key(d)).collect();
        prop_assert_eq!(keys.len(), g.len());
        let root_of = |d: &NvmeDrive| d.root.clone().unwrap_or_else(|| drive_key(d));
        let touched: BTreeSet<String> = g.iter().map(|d| root_of(d)).collect();
        let mut sizes: Vec<usize> = {
            let mut m: BTreeMap<String, usize> = BTreeMap::new();
            for d in &drives { *m.entry(root_of(d)).or_default() += 1; }
            m.into_values().collect()
        };
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        let mut need = 0;
        let mut have = 0;
        for s in sizes { if have >= g.len() { break; } have += s; need += 1; }
        prop_assert_eq!(touched.len(), need);
    }
}

#[test]
fn sizes_that_are_not_whole_logical_blocks_of_a_drive_are_waived_on_it() {
    // nvme0 is formatted with 4 KiB blocks, nvme1 and nvme2 with 512-byte ones.
    let mut t = bed();
    t.nvme[0].namespaces[0].logical_block_size = Some(4096);
    let o = NvmePlanOptions {
        sizes: Some(vec![512, 4 * KIB]),
        queue_depths: Some(vec![16]),
        ..NvmePlanOptions::default()
    };
    let p = plan(&t, &opts(o));
    let keys: Vec<&str> = p
        .cases_of(PathId::NvmeRead)
        .filter(|c| !c.key.contains("latency"))
        .map(|c| c.key.as_str())
        .collect();
    // Groups of 1 and 2 drives are on root 0000:10 (nvme1, nvme2); the 3-drive group has nvme0.
    assert_eq!(
        keys,
        [
            "nvme_read/io-uring/1drive/512B/qd16",
            "nvme_read/io-uring/1drive/4KiB/qd16",
            "nvme_read/io-uring/2drive/512B/qd16",
            "nvme_read/io-uring/2drive/4KiB/qd16",
            "nvme_read/io-uring/3drive/4KiB/qd16",
        ]
    );
    let w: Vec<_> = p
        .waivers_of(PathId::NvmeRead)
        .filter(|w| w.scope.as_deref() == Some("512B I/O on nvme0"))
        .collect();
    assert_eq!(w.len(), 1, "one waiver per size and drive: {w:?}");
    assert_eq!(
        w[0].reason,
        "nvme0n1 has 4096-byte logical blocks: an O_DIRECT I/O of 512B is not a whole number of \
         them"
    );
    assert_eq!(
        w[0].hint.as_deref(),
        Some("--nvme-sizes in multiples of 4096 bytes for nvme0")
    );
    // The 4 KiB latency probes fit every drive.
    assert_eq!(
        p.cases_of(PathId::NvmeRead)
            .filter(|c| c.key.contains("latency"))
            .count(),
        9
    );
}

#[test]
fn io_buffers_beyond_half_a_nodes_memory_are_waived_per_case() {
    let mut t = bed();
    t.platform.numa = vec![hwc_model::topology::NumaNode {
        id: 0,
        cpus: vec![0, 1],
        memory_only: false,
        memory_bytes: Some(16 << 30),
        distances: vec![],
    }];
    let o = NvmePlanOptions {
        sizes: Some(vec![MIB, 256 * MIB]),
        queue_depths: Some(vec![16]),
        ..NvmePlanOptions::default()
    };
    let p = plan(&t, &opts(o.clone()));
    let sweep: Vec<&str> = p
        .cases_of(PathId::NvmeRead)
        .filter(|c| !c.key.contains("latency"))
        .map(|c| c.key.as_str())
        .collect();
    // 256 MiB × QD 16 = 4 GiB per drive: one or two drives fit half of 16 GiB, three do not.
    assert_eq!(
        sweep,
        [
            "nvme_read/io-uring/1drive/1MiB/qd16",
            "nvme_read/io-uring/1drive/256MiB/qd16",
            "nvme_read/io-uring/2drive/1MiB/qd16",
            "nvme_read/io-uring/2drive/256MiB/qd16",
            "nvme_read/io-uring/3drive/1MiB/qd16",
        ]
    );
    let w = p
        .waivers_of(PathId::NvmeRead)
        .find(|w| w.scope.as_deref() == Some("nvme_read/3drive/256MiB/qd16"))
        .unwrap();
    assert_eq!(
        w.reason,
        "the I/O buffers of nvme_read/3drive/256MiB/qd16 (queue depth 16 × 256MiB per drive) \
         would take 12.0 GiB of node 0's 16.0 GiB of memory, more than half (the rest is left to \
         the system and other processes)"
    );
    // A target is served from the only node with CPUs.
    let o = NvmePlanOptions {
        target: Some(("/tmp/x".into(), false)),
        queue_depths: Some(vec![64]),
        ..o
    };
    let p = plan(&t, &opts(o));
    let reads: Vec<&str> = p
        .cases_of(PathId::NvmeRead)
        .map(|c| c.key.as_str())
        .collect();
    assert_eq!(reads, ["nvme_read/io-uring/target/1MiB/qd64"]);
    assert!(p.waivers_of(PathId::NvmeRead).any(|w| w.scope.as_deref()
        == Some("nvme_read/target/256MiB/qd64")
        && w.reason.contains("16.0 GiB of node 0's 16.0 GiB")));
}

/// This build's engines and one of a userspace driver (as spdk-perf declares itself, less root).
fn with_userspace_engine(nvme: NvmePlanOptions) -> PlanOptions {
    let mut o = opts(nvme);
    let mut spdk = crate::tests::engine(
        "spdk-perf",
        &[PathId::NvmeRead, PathId::NvmeWrite],
        &[CellKind::Sweep],
        hwc_model::Needs {
            vfio: true,
            ..Default::default()
        },
    );
    spdk.decl.default_on = true;
    let mut native = spdk.clone();
    native.decl.id = hwc_model::EngineId::new("spdk-native");
    o.engines.push(spdk);
    o.engines.push(native);
    o
}

#[test]
fn a_userspace_engine_measures_only_the_drives_handed_to_it() {
    let spdk_cases = |p: &hwc_model::Plan| -> Vec<String> {
        p.cases
            .iter()
            .filter(|c| c.engine.as_str() == "spdk-perf")
            .map(|c| c.cell.clone())
            .collect()
    };
    let spdk_waivers = |p: &hwc_model::Plan| -> Vec<String> {
        p.waived
            .iter()
            .filter(|w| w.engine.as_ref().is_some_and(|e| e.as_str() == "spdk-perf"))
            .map(|w| format!("{}: {}", w.path, w.reason))
            .collect()
    };
    let sizes = NvmePlanOptions {
        sizes: Some(vec![128 << 10]),
        queue_depths: Some(vec![16]),
        ..NvmePlanOptions::default()
    };
    // No drive named: the engine binds none, and says how to name them.
    let p = plan(&bed(), &with_userspace_engine(sizes.clone()));
    assert!(spdk_cases(&p).is_empty());
    let w = spdk_waivers(&p);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("only for drives named with --spdk-drives"),
        "{w:?}"
    );
    // nvme1 handed over: its latency probes and the 1-drive sweep (nvme1 leads the same-root
    // group), side by side with the kernel engine's; the cases over other drives waived once.
    let p = plan(
        &bed(),
        &with_userspace_engine(NvmePlanOptions {
            bindable: Some(vec!["0000:11:00.0".into()]),
            ..sizes.clone()
        }),
    );
    assert_eq!(
        spdk_cases(&p),
        [
            "latency/nvme1/4KiB-random/qd1",
            "latency/nvme1/4KiB-random/qd16",
            "latency/nvme1/4KiB-random/qd32",
            "1drive/128KiB/qd16"
        ]
    );
    let kernel = p.cases.iter().filter(|c| c.engine.as_str() == "io-uring");
    assert_eq!(kernel.count(), 9 + 3);
    // Its cases run last, together, writes included: the drives leave the kernel once.
    let p = plan(
        &bed(),
        &with_userspace_engine(NvmePlanOptions {
            bindable: Some(vec!["0000:11:00.0".into()]),
            write_drives: Some(vec!["nvme1".into()]),
            ..sizes.clone()
        }),
    );
    let order: Vec<String> = p
        .cases
        .iter()
        .map(|c| format!("{}/{}", c.path, c.engine))
        .collect();
    // Each userspace engine's cases together, reads and writes, one engine after the other.
    let first_spdk = order.iter().position(|k| k.ends_with("spdk-perf")).unwrap();
    let first_native = order
        .iter()
        .position(|k| k.ends_with("spdk-native"))
        .unwrap();
    assert!(
        order[first_spdk..first_native]
            .iter()
            .all(|k| k.ends_with("spdk-perf")),
        "{order:?}"
    );
    assert!(order[first_native..]
        .iter()
        .all(|k| k.ends_with("spdk-native")));
    assert_eq!(order[first_native - 1], "nvme_write/spdk-perf");
    assert_eq!(order.last().unwrap(), "nvme_write/spdk-native");
    assert!(order[..first_spdk].contains(&"nvme_write/io-uring".to_string()));
    let w = spdk_waivers(&p);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("8 of nvme_read's cases use others"), "{w:?}");
    // A --target is not a drive.
    let p = plan(
        &bed(),
        &with_userspace_engine(NvmePlanOptions {
            target: Some(("/tmp/f".into(), false)),
            bindable: Some(vec!["0000:11:00.0".into()]),
            ..sizes
        }),
    );
    assert!(spdk_cases(&p).is_empty());
    let w = spdk_waivers(&p);
    assert!(w.iter().any(|w| w.contains("not a --target")), "{w:?}");
}
