//! Tests of the Path 6 matrix.

use super::*;
use crate::tests::engine;
use crate::{plan, NvmePlanOptions};
use hwc_model::topology::NvmeNamespace;
use hwc_model::CellKind::Sweep;

fn drive(i: u32, root: &str, node: u32) -> NvmeDrive {
    NvmeDrive {
        name: format!("nvme{i}"),
        bdf: Some(format!("0000:{:02x}:00.0", 0x10 + i)),
        numa_node: Some(node),
        root: Some(root.into()),
        namespaces: vec![NvmeNamespace {
            name: format!("nvme{i}n1"),
            size_bytes: Some(64 << 30),
            logical_block_size: Some(512),
            max_hw_sectors_kb: Some(128),
            partitions: vec![],
            holders: vec![],
            mounts: vec![],
            in_use: false,
        }],
        ..NvmeDrive::default()
    }
}

fn gpu_on(index: u32, root: &str, node: u32) -> Gpu {
    let mut g = crate::tests::gpu(index, Some(node));
    g.root = Some(root.into());
    g
}

fn opts() -> PlanOptions {
    PlanOptions {
        engines: vec![engine(
            "cufile",
            &[PathId::Gds],
            &[Sweep],
            Default::default(),
        )],
        version: "0.1.0".into(),
        paths: Some([PathId::Gds].into()),
        ..PlanOptions::default()
    }
}

fn names(p: &hwc_model::Plan) -> Vec<String> {
    p.cases.iter().map(|c| c.cell.clone()).collect()
}

#[test]
fn each_gpu_reads_its_nearest_drives_and_a_cross_root_group_by_both_routes() {
    let t = Topology {
        gpus: vec![gpu_on(0, "pci0000:40", 0)],
        nvme: vec![
            drive(1, "pci0000:80", 1),
            drive(2, "pci0000:40", 0),
            drive(3, "pci0000:40", 0),
            drive(4, "pci0000:80", 1),
            drive(5, "pci0000:c0", 1),
        ],
        ..Topology::default()
    };
    let p = plan(&t, &opts());
    let n = names(&p);
    // 1, 2 and 4 drives; the near group and a farther one; 3 sizes × 2 depths × 2 routes.
    let groups = [
        "1drive/same-root/numa-local",
        "1drive/cross-root/cross-numa",
        "2drive/same-root/numa-local",
        "2drive/cross-root/cross-numa",
        "4drive/mixed-root/numa-mixed",
    ];
    assert_eq!(n.len(), groups.len() * 3 * 2 * 2, "{n:?}");
    for g in groups {
        for route in ["cufile", "posix-bounce"] {
            let name = format!("gpu0/{g}/16MiB/qd32/{route}");
            assert!(n.contains(&name), "{name} not in {n:?}");
        }
    }
    let spec = |cell: &str| {
        p.cases
            .iter()
            .find(|c| c.cell == cell)
            .and_then(|c| c.spec.gds())
            .unwrap()
            .clone()
    };
    let near = spec("gpu0/2drive/same-root/numa-local/4MiB/qd16/cufile");
    assert_eq!(near.drives, ["0000:12:00.0", "0000:13:00.0"]);
    assert_eq!((near.host_node, near.route), (Some(0), GdsRoute::Cufile));
    let far = spec("gpu0/1drive/cross-root/cross-numa/4MiB/qd16/posix-bounce");
    assert_eq!(far.drives, ["0000:11:00.0"]);
    assert_eq!(far.route, GdsRoute::PosixBounce);
    // The four nearest: both same-root drives first.
    let four = spec("gpu0/4drive/mixed-root/numa-mixed/8MiB/qd32/cufile");
    assert_eq!(&four.drives[..2], ["0000:12:00.0", "0000:13:00.0"]);
    assert!(p.cases.iter().all(|c| c.spec.check(PathId::Gds).is_ok()));
}

#[test]
fn a_target_replaces_the_drives_and_selections_sizes_and_depths_apply() {
    let mut o = opts();
    o.nvme = NvmePlanOptions {
        target: Some(("/data/big.bin".into(), false)),
        queue_depths: Some(vec![16]),
        sizes: Some(vec![4 * MIB, 16 * MIB]),
        ..NvmePlanOptions::default()
    };
    let t = Topology {
        gpus: vec![gpu_on(0, "pci0000:40", 0)],
        ..Topology::default()
    };
    let p = plan(&t, &o);
    let n = names(&p);
    assert_eq!(n.len(), 2 * 2, "{n:?}");
    assert!(n.contains(&"gpu0/target/4MiB/qd16/cufile".to_string()));
    assert!(n.contains(&"gpu0/target/16MiB/qd16/posix-bounce".to_string()));
    let s = p.cases[0].spec.gds().unwrap();
    assert!(s.target);
    assert_eq!(s.drives, ["/data/big.bin"]);

    let mut o = opts();
    o.nvme.selected = Some(vec!["nvme3".into()]);
    let t = Topology {
        gpus: vec![gpu_on(0, "pci0000:40", 0)],
        nvme: vec![drive(2, "pci0000:40", 0), drive(3, "pci0000:80", 1)],
        ..Topology::default()
    };
    let p = plan(&t, &o);
    assert!(p.cases.iter().all(|c| c.spec.drives() == ["0000:13:00.0"]));
    assert!(names(&p)[0].starts_with("gpu0/1drive/cross-root/cross-numa/"));
}

#[test]
fn no_gpu_or_no_drive_is_one_waiver_saying_which() {
    let p = plan(&Topology::default(), &opts());
    let w: Vec<_> = p.waivers_of(PathId::Gds).collect();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].reason, "no NVIDIA GPU was detected");
    let t = Topology {
        gpus: vec![gpu_on(0, "pci0000:40", 0)],
        ..Topology::default()
    };
    let p = plan(&t, &opts());
    assert!(p.cases.is_empty());
    let w: Vec<_> = p.waivers_of(PathId::Gds).collect();
    assert_eq!(w[0].reason, "no NVMe drives were detected");
}

#[test]
fn writes_only_on_the_drives_the_gate_approved_else_one_waiver() {
    let t = Topology {
        gpus: vec![gpu_on(0, "pci0000:40", 0)],
        nvme: vec![drive(2, "pci0000:40", 0), drive(3, "pci0000:80", 1)],
        ..Topology::default()
    };
    let p = plan(&t, &opts());
    assert!(p.cases.iter().all(|c| !c.spec.gds().unwrap().write));
    let w: Vec<_> = p.waivers_of(PathId::Gds).collect();
    assert_eq!(w.len(), 1);
    assert!(
        w[0].reason.starts_with("read-only by default"),
        "{}",
        w[0].reason
    );

    let mut o = opts();
    o.nvme.write_drives = Some(vec!["nvme3".into()]);
    let p = plan(&t, &o);
    let writes: Vec<_> = p
        .cases
        .iter()
        .filter(|c| c.spec.gds().unwrap().write)
        .collect();
    // One drive approved: 1 drive, 3 sizes × 2 depths × 2 routes.
    assert_eq!(writes.len(), 12);
    assert!(writes.iter().all(|c| c.spec.drives() == ["0000:13:00.0"]
        && c.cell
            .starts_with("gpu0/write/1drive/cross-root/cross-numa/")));
    assert_eq!(p.waivers_of(PathId::Gds).count(), 0);
    // Reads still cover both drives.
    assert!(p
        .cases
        .iter()
        .any(|c| !c.spec.gds().unwrap().write && c.spec.drives().len() == 2));

    let mut o = opts();
    o.nvme.target = Some(("/data/x.bin".into(), false));
    let p = plan(&t, &o);
    assert!(p.cases.iter().all(|c| !c.spec.gds().unwrap().write));
    assert!(p
        .waivers_of(PathId::Gds)
        .any(|w| w.reason.contains("writes need --allow-destructive-writes")));
    o.nvme.target = Some(("/data/x.bin".into(), true));
    let p = plan(&plan_topo_with_gpu(), &o);
    assert_eq!(
        p.cases
            .iter()
            .filter(|c| c.spec.gds().unwrap().write && c.cell.starts_with("gpu0/write/target/"))
            .count(),
        12
    );
}

fn plan_topo_with_gpu() -> Topology {
    Topology {
        gpus: vec![gpu_on(0, "pci0000:40", 0)],
        ..Topology::default()
    }
}
