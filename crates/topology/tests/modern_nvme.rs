//! A hand-built sysfs of a modern kernel, the layout no snapshot has: controllers under
//! `/sys/class/nvme`, a namespace below its controller, a native-multipath namespace head, an
//! NVMe-over-TCP controller and a drive bound to `vfio-pci` — around a GPU on a second root
//! complex.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use hwc_model::topology::Relation;
use hwc_model::Topology;
use hwc_topology::{detect, starting_nvme_controllers, Sources};

/// Writes `text` at `path` under `root`, creating folders.
fn write(root: &Path, path: &str, text: &str) {
    let full = root.join(path);
    fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
    fs::write(full, text).expect("write");
}

/// Makes `path` under `root` a symlink to `target`, creating folders.
fn link(root: &Path, path: &str, target: &str) {
    let full = root.join(path);
    fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
    symlink(target, full).expect("symlink");
}

/// A PCI function at `dir` (under `sys/devices`) with its `/sys/bus/pci/devices` link.
fn pci_function(root: &Path, dir: &str, class: &str, node: i32, driver: &str, link_gts: &str) {
    let bdf = dir.rsplit('/').next().expect("bdf");
    let full = format!("sys/devices/{dir}");
    for (file, text) in [
        ("class", class),
        ("vendor", "0x144d"),
        ("device", "0xa80a"),
        ("numa_node", &node.to_string()),
        ("current_link_speed", link_gts),
        ("current_link_width", "4"),
        ("max_link_speed", "16.0 GT/s PCIe"),
        ("max_link_width", "4"),
    ] {
        write(root, &format!("{full}/{file}"), &format!("{text}\n"));
    }
    let depth = full.matches('/').count();
    link(
        root,
        &format!("{full}/driver"),
        &format!("{}bus/pci/drivers/{driver}", "../".repeat(depth)),
    );
    link(
        root,
        &format!("sys/bus/pci/devices/{bdf}"),
        &format!("../../../devices/{dir}"),
    );
}

fn namespace(root: &Path, dir: &str, sectors: &str) {
    write(root, &format!("{dir}/size"), sectors);
    write(root, &format!("{dir}/queue/logical_block_size"), "4096\n");
    write(root, &format!("{dir}/queue/max_hw_sectors_kb"), "512\n");
    fs::create_dir_all(root.join(dir).join("holders")).expect("mkdir");
}

fn controller(root: &Path, dir: &str, name: &str, transport: &str, device: &str) {
    let ctrl = format!("{dir}/{name}");
    write(
        root,
        &format!("{ctrl}/model"),
        "Samsung SSD 990 PRO 2TB                 \n",
    );
    write(root, &format!("{ctrl}/serial"), "S6Z2NF0W123456      \n");
    write(root, &format!("{ctrl}/firmware_rev"), "4B2QJXD7\n");
    write(
        root,
        &format!("{ctrl}/transport"),
        &format!("{transport}\n"),
    );
    link(root, &format!("{ctrl}/device"), device);
    link(
        root,
        &format!("sys/class/nvme/{name}"),
        &format!("../../{}", ctrl.trim_start_matches("sys/")),
    );
}

fn build(root: &Path) {
    for (node, cpus) in [(0, "0-1"), (1, "2-3")] {
        write(
            root,
            &format!("sys/devices/system/node/node{node}/cpulist"),
            &format!("{cpus}\n"),
        );
    }
    write(root, "sys/devices/system/cpu/online", "0-3\n");

    // nvme0: a plain PCIe controller on root 0000:00 (node 0), its namespace below it, held
    // by a device-mapper target.
    let pci0 = "pci0000:00/0000:00:01.0/0000:01:00.0";
    pci_function(root, pci0, "0x010802", 0, "nvme", "8.0 GT/s PCIe");
    controller(
        root,
        &format!("sys/devices/{pci0}/nvme"),
        "nvme0",
        "pcie",
        "../../../0000:01:00.0",
    );
    let ns0 = format!("sys/devices/{pci0}/nvme/nvme0/nvme0n1");
    namespace(root, &ns0, "3907029168\n");
    link(
        root,
        &format!("{ns0}/holders/dm-0"),
        "../../../../../../../virtual/block/dm-0",
    );
    link(
        root,
        "sys/block/nvme0n1",
        &format!("../{}", ns0.trim_start_matches("sys/")),
    );

    // nvme1: root 0000:40 (node 1); its namespace is a multipath head in nvme-subsystem,
    // mounted on a path with a space.
    let pci1 = "pci0000:40/0000:40:01.0/0000:41:00.0";
    pci_function(root, pci1, "0x010802", 1, "nvme", "16.0 GT/s PCIe");
    controller(
        root,
        &format!("sys/devices/{pci1}/nvme"),
        "nvme1",
        "pcie",
        "../../../0000:41:00.0",
    );
    let head = "sys/devices/virtual/nvme-subsystem/nvme-subsys1/nvme1n1";
    namespace(root, head, "1000000\n");
    fs::create_dir_all(root.join(format!("sys/devices/{pci1}/nvme/nvme1/nvme1c1n1")))
        .expect("mkdir");
    link(
        root,
        &format!("{head}/multipath/nvme1c1n1"),
        &format!("../../../../../{pci1}/nvme/nvme1/nvme1c1n1"),
    );
    link(
        root,
        "sys/block/nvme1n1",
        &format!("../{}", head.trim_start_matches("sys/")),
    );
    write(
        root,
        "proc/mounts",
        "/dev/nvme1n1 /mnt/fast\\040disk xfs rw 0 0\n",
    );

    // nvme2: NVMe over TCP, no PCI function.
    controller(
        root,
        "sys/devices/virtual/nvme-fabrics/ctl",
        "nvme2",
        "tcp",
        "../../ctl",
    );

    // A drive bound to vfio-pci for SPDK: no kernel controller, no namespace.
    pci_function(
        root,
        "pci0000:00/0000:00:02.0/0000:02:00.0",
        "0x010802",
        0,
        "vfio-pci",
        "16.0 GT/s PCIe",
    );

    // The GPU shares root 0000:40 with nvme1.
    let gpu = "pci0000:40/0000:40:02.0/0000:42:00.0";
    pci_function(root, gpu, "0x030200", 1, "nvidia", "16.0 GT/s PCIe");
    write(root, &format!("sys/devices/{gpu}/vendor"), "0x10de\n");
}

fn detect_built() -> Topology {
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path());
    detect(&Sources::fsroot(dir.path()))
}

#[test]
fn controllers_namespaces_and_routes_of_a_modern_kernel() {
    let topo = detect_built();
    let names: Vec<&str> = topo.nvme.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["nvme0", "nvme1", "nvme2", "0000:02:00.0"]);

    let nvme0 = &topo.nvme[0];
    assert_eq!(nvme0.bdf.as_deref(), Some("0000:01:00.0"));
    assert_eq!(nvme0.model.as_deref(), Some("Samsung SSD 990 PRO 2TB"));
    assert_eq!(nvme0.serial.as_deref(), Some("S6Z2NF0W123456"));
    assert_eq!(nvme0.firmware_rev.as_deref(), Some("4B2QJXD7"));
    assert_eq!(nvme0.transport.as_deref(), Some("pcie"));
    assert_eq!(
        (nvme0.numa_node, nvme0.root.as_deref()),
        (Some(0), Some("0000:00"))
    );
    assert_eq!((nvme0.pcie_gen, nvme0.pcie_width), (Some(3), Some(4)));
    assert_eq!(nvme0.namespaces[0].holders, ["dm-0"]);
    assert!(nvme0.in_use);
    assert_eq!(nvme0.capacity_bytes, Some(3_907_029_168 * 512));
    assert_eq!(nvme0.namespaces[0].logical_block_size, Some(4096));

    let nvme1 = &topo.nvme[1];
    assert_eq!(nvme1.namespaces.len(), 1);
    assert_eq!(nvme1.namespaces[0].name, "nvme1n1");
    assert_eq!(nvme1.namespaces[0].mounts, ["/mnt/fast disk"]);
    assert!(nvme1.in_use);

    let nvme2 = &topo.nvme[2];
    assert_eq!(
        (nvme2.bdf.as_deref(), nvme2.transport.as_deref()),
        (None, Some("tcp"))
    );
    assert!(nvme2.namespaces.is_empty() && !nvme2.in_use);
    assert_eq!(nvme2.capacity_bytes, None);

    let vfio = &topo.nvme[3];
    assert_eq!(vfio.driver.as_deref(), Some("vfio-pci"));
    assert_eq!(vfio.bdf.as_deref(), Some("0000:02:00.0"));
    assert!(vfio.namespaces.is_empty());

    assert_eq!(topo.gpus.len(), 1);
    assert_eq!(
        topo.topology.same_root_drives.get("gpu0"),
        Some(&vec!["0000:41:00.0".to_string()])
    );
    let relations: Vec<(&str, Relation)> = topo
        .topology
        .routes
        .iter()
        .map(|r| (r.drive.as_str(), r.relation))
        .collect();
    assert_eq!(
        relations,
        [
            ("nvme0", Relation::CrossNuma),
            ("nvme1", Relation::SameRoot),
            ("nvme2", Relation::Unknown),
            ("0000:02:00.0", Relation::CrossNuma),
        ]
    );
    let degraded: Vec<&str> = topo
        .topology
        .links
        .iter()
        .filter(|l| l.degraded)
        .map(|l| l.device.as_str())
        .collect();
    assert_eq!(degraded, ["nvme0"], "8 GT/s on a 16 GT/s link");
    assert_eq!(topo.topology.links.len(), 4);
}

#[test]
fn a_namespace_without_a_size_has_no_size_and_its_drive_no_capacity() {
    let dir = tempfile::tempdir().expect("tempdir");
    build(dir.path());
    fs::remove_file(
        dir.path()
            .join("sys/devices/virtual/nvme-subsystem/nvme-subsys1/nvme1n1/size"),
    )
    .expect("rm size");
    let topo = detect(&Sources::fsroot(dir.path()));
    let nvme1 = &topo.nvme[1];
    assert_eq!(nvme1.namespaces[0].size_bytes, None, "unknown, not 0");
    assert_eq!((nvme1.capacity_bytes, nvme1.capacity_tb), (None, None));
    // The drive whose size the kernel gave keeps it.
    assert_eq!(
        topo.nvme[0].namespaces[0].size_bytes,
        Some(3_907_029_168 * 512)
    );
    assert_eq!(topo.nvme[1].namespaces[0].logical_block_size, Some(4096));
}

/// A controller the kernel is still starting (just put back on `nvme`): the kernel prints
/// `(efault)` for the identity of a subsystem it has not read, which must never become a serial.
#[test]
fn a_controller_still_starting_has_no_identity_and_is_listed_as_starting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    build(root);
    let ctrl = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/nvme/nvme0";
    write(root, &format!("{ctrl}/state"), "live\n");
    controller(
        root,
        "sys/devices/virtual/nvme-fabrics/ctl",
        "nvme3",
        "tcp",
        "../../ctl",
    );
    let starting = "sys/devices/virtual/nvme-fabrics/ctl/nvme3";
    for file in ["model", "serial", "firmware_rev"] {
        write(root, &format!("{starting}/{file}"), "(efault)\n");
    }
    write(root, &format!("{starting}/state"), "connecting\n");
    let src = Sources::fsroot(root);
    assert_eq!(starting_nvme_controllers(&src), ["nvme3"]);

    let topo = detect(&src);
    let nvme0 = topo.nvme.iter().find(|d| d.name == "nvme0").expect("nvme0");
    assert_eq!(nvme0.controller_state.as_deref(), Some("live"));
    assert_eq!(nvme0.serial.as_deref(), Some("S6Z2NF0W123456"));
    assert!(!nvme0.is_starting());
    let nvme3 = topo.nvme.iter().find(|d| d.name == "nvme3").expect("nvme3");
    assert_eq!(nvme3.controller_state.as_deref(), Some("connecting"));
    assert!(nvme3.is_starting());
    assert_eq!(
        (&nvme3.model, &nvme3.serial, &nvme3.firmware_rev),
        (&None, &None, &None),
        "no identity from a controller that is not live"
    );

    write(root, &format!("{starting}/state"), "live\n");
    assert!(starting_nvme_controllers(&src).is_empty());
}
