//! Tests of the NVMe → BAR matrix.

use super::*;
use crate::tests::engine;
use crate::{plan, NvmePlanOptions};
use hwc_model::topology::{Gpu, NumaNode, Platform};
use hwc_model::CellKind::Sweep;
use hwc_model::Needs;

fn drive(i: u32, root: &str, node: u32) -> NvmeDrive {
    NvmeDrive {
        name: format!("nvme{i}"),
        bdf: Some(format!("0000:{:02x}:00.0", 0x10 + i)),
        numa_node: Some(node),
        root: Some(root.into()),
        ..NvmeDrive::default()
    }
}

fn node(id: u32, cpus: std::ops::Range<u32>) -> NumaNode {
    NumaNode {
        id,
        cpus: cpus.collect(),
        memory_only: false,
        memory_bytes: None,
        distances: vec![],
    }
}

/// Two nodes; a GPU on node 0's root complex; three drives there and two on node 1's.
fn machine() -> Topology {
    let mut g: Gpu = crate::tests::gpu(0, Some(0));
    g.root = Some("pci0000:40".into());
    Topology {
        platform: Platform {
            numa: vec![node(0, 0..8), node(1, 8..16)],
            ..Platform::default()
        },
        gpus: vec![g],
        nvme: vec![
            drive(1, "pci0000:80", 1),
            drive(2, "pci0000:40", 0),
            drive(3, "pci0000:40", 0),
            drive(4, "pci0000:80", 1),
            drive(5, "pci0000:40", 0),
        ],
        ..Topology::default()
    }
}

fn keys(t: &Topology) -> Vec<String> {
    t.nvme.iter().filter_map(|d| d.bdf.clone()).collect()
}

fn opts(t: &Topology, bar: BarPlanOptions) -> PlanOptions {
    let mut native = engine(
        "spdk-native",
        &[PathId::NvmeBar1],
        &[Sweep],
        Needs {
            vfio: true,
            ..Default::default()
        },
    );
    native.decl.default_on = true;
    PlanOptions {
        engines: vec![native],
        version: "0.1.0".into(),
        paths: Some([PathId::NvmeBar1].into()),
        nvme: NvmePlanOptions {
            bindable: Some(keys(t)),
            ..NvmePlanOptions::default()
        },
        bar,
        ..PlanOptions::default()
    }
}

fn specs(p: &hwc_model::Plan) -> Vec<(&str, &NvmeBarSpec)> {
    p.cases
        .iter()
        .map(|c| {
            (
                c.cell.as_str(),
                c.spec.nvme_bar().expect("an nvme_bar spec"),
            )
        })
        .collect()
}

#[test]
fn each_gpu_gets_the_specs_drive_counts_nearest_first_both_memories_and_a_cross_numa_run() {
    let t = machine();
    let p = plan(&t, &opts(&t, BarPlanOptions::default()));
    let s = specs(&p);
    // 1, 4 and all 5 drives NUMA-local, 4 cross-NUMA; each into host RAM then the BAR.
    let runs: Vec<(usize, bool, DmaTarget)> = s
        .iter()
        .map(|(_, s)| (s.drives.len(), s.cross_numa, s.memory))
        .collect();
    let mut want = Vec::new();
    for (k, x) in [(1, false), (4, false), (5, false), (4, true)] {
        want.push((k, x, DmaTarget::HostRam));
        want.push((k, x, DmaTarget::Bar));
    }
    assert_eq!(runs, want);
    // The GPU's root complex first: its three drives, then node 1's.
    let four = s[2].1;
    assert_eq!(
        four.drives,
        [
            "0000:12:00.0",
            "0000:13:00.0",
            "0000:15:00.0",
            "0000:11:00.0"
        ]
    );
    assert_eq!(s[0].1.drives, ["0000:12:00.0"]);
    assert_eq!(
        s[0].0,
        "gpu0/1drive/same-root/numa-local/pollers-numa-local/host-ram"
    );
    assert_eq!(
        s[2].0,
        "gpu0/4drive/mixed-root/numa-mixed/pollers-numa-local/host-ram"
    );
    for (_, spec) in &s {
        assert_eq!(spec.block_bytes, BAR_BLOCK_BYTES);
        assert_eq!(
            spec.queue_depth,
            if spec.drives.len() == 1 { 16 } else { 32 }
        );
        assert_eq!(spec.poller_node, Some(if spec.cross_numa { 1 } else { 0 }));
        assert!(matches!(&spec.device, BarDevice::GpuBar1 { gpu, .. } if gpu == "gpu0"));
    }
}

#[test]
fn a_gpu_whose_bar1_cannot_be_mapped_is_waived_by_name_and_a_named_pci_bar_still_runs() {
    let t = machine();
    let bar = BarPlanOptions {
        pci_bars: vec![PciBarTarget {
            bdf: "0000:41:00.0".into(),
            resource: 2,
            size_bytes: 64 << 20,
            numa_node: Some(1),
            root: Some("pci0000:80".into()),
        }],
        gpu_bar1_blocked: Some((
            "the gdrdrv kernel module is not loaded".into(),
            Some("make driver".into()),
        )),
    };
    let p = plan(&t, &opts(&t, bar));
    let w: Vec<_> = p
        .waived
        .iter()
        .filter(|w| w.path == PathId::NvmeBar1)
        .collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].scope.as_deref(), Some("gpu0 BAR1"));
    assert!(w[0].reason.starts_with("the gdrdrv kernel module"));
    let s = specs(&p);
    assert!(!s.is_empty());
    for (cell, spec) in &s {
        assert!(cell.starts_with("pci-0000:41:00.0-bar2/"), "{cell}");
        assert_eq!(
            spec.device,
            BarDevice::PciBar {
                bdf: "0000:41:00.0".into(),
                resource: 2
            }
        );
    }
    // Nearest the BAR (node 1's root complex) first; the cross run's pollers on node 0.
    assert_eq!(s[0].1.drives, ["0000:11:00.0"]);
    assert!(s
        .iter()
        .any(|(_, x)| x.cross_numa && x.poller_node == Some(0)));
}

#[test]
fn without_drives_handed_to_spdk_the_engine_says_which_flag_it_needs() {
    let t = machine();
    let mut o = opts(&t, BarPlanOptions::default());
    o.nvme.bindable = None;
    let p = plan(&t, &o);
    assert!(p.cases.is_empty());
    assert!(p
        .waived
        .iter()
        .any(|w| w.path == PathId::NvmeBar1 && w.reason.contains("--spdk-drives")));
}

#[test]
fn one_drive_and_one_node_plan_no_cross_numa_run() {
    let mut t = machine();
    t.platform.numa.truncate(1);
    t.nvme.truncate(1);
    let p = plan(&t, &opts(&t, BarPlanOptions::default()));
    let s = specs(&p);
    assert_eq!(s.len(), 2);
    assert!(s.iter().all(|(_, x)| !x.cross_numa && x.drives.len() == 1));
}
