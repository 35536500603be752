//! hwloc as an independent oracle: it reads the same snapshot (`HWLOC_FSROOT`) with its own
//! Linux backend, and its view of CPUs, NUMA nodes and PCI devices must agree with ours.

use std::collections::BTreeMap;
use std::path::Path;

use hwc_model::topology::NumaSource;
use hwc_model::Topology;
use hwc_topology::{detect, Sources};
use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::topology::builder::TypeFilter;

use crate::fixtures::Snapshot;

/// What hwloc reports of one snapshot.
#[derive(Debug)]
struct HwlocView {
    pus: usize,
    packages: usize,
    /// NUMA node id → its CPUs.
    nodes: BTreeMap<u32, Vec<u32>>,
    /// PCI device BDF → its single NUMA node, when its locality is exactly one node.
    pci: BTreeMap<String, Option<u32>>,
}

/// Loads the snapshot with hwloc's Linux backend only (`linux,stop`, so the x86 backend does
/// not describe this host's CPU), keeping every I/O object.
fn hwloc_view(root: &Path) -> HwlocView {
    // hwloc reads these when the topology is built; the caller holds the only thread doing so.
    std::env::set_var("HWLOC_FSROOT", root);
    std::env::set_var("HWLOC_COMPONENTS", "linux,stop");
    std::env::set_var("HWLOC_DUMPED_HWDATA_DIR", "/var/run/hwloc");
    let topo = hwlocality::Topology::builder()
        .with_io_type_filter(TypeFilter::KeepAll)
        .expect("keep I/O objects")
        .build()
        .expect("hwloc loads the snapshot");
    HwlocView {
        pus: topo.objects_with_type(ObjectType::PU).count(),
        packages: topo.objects_with_type(ObjectType::Package).count(),
        nodes: topo
            .objects_with_type(ObjectType::NUMANode)
            .map(|n| (os_index(n), cpus(n)))
            .collect(),
        pci: topo.pci_devices().map(|d| (bdf(d), locality(d))).collect(),
    }
}

fn os_index(obj: &TopologyObject) -> u32 {
    let index = obj.os_index().expect("NUMA nodes have an OS index");
    u32::try_from(index).expect("small node id")
}

fn cpus(obj: &TopologyObject) -> Vec<u32> {
    obj.cpuset()
        .map(|set| {
            set.iter_set()
                .map(|i| u32::try_from(usize::from(i)).expect("small CPU id"))
                .collect()
        })
        .unwrap_or_default()
}

fn bdf(obj: &TopologyObject) -> String {
    let Some(ObjectAttributes::PCIDevice(pci)) = obj.attributes() else {
        panic!("a PCI device without PCI attributes: {obj:?}");
    };
    format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        pci.domain(),
        pci.bus_id(),
        pci.bus_device(),
        pci.function()
    )
}

/// The NUMA node of the device's first non-I/O ancestor, when its nodeset is one node.
fn locality(obj: &TopologyObject) -> Option<u32> {
    let nodeset = obj.first_non_io_ancestor()?.nodeset()?;
    if nodeset.weight() != Some(1) {
        return None;
    }
    let node = nodeset.first_set()?;
    u32::try_from(usize::from(node)).ok()
}

/// Compares our view with hwloc's; returns how many PCI localities both gave.
fn check(snapshot: Snapshot, ours: &Topology, hwloc: &HwlocView) -> usize {
    let ctx = format!("{snapshot:?}");
    assert_eq!(ours.platform.threads as usize, hwloc.pus, "{ctx}: threads");
    assert_eq!(
        ours.platform.sockets.unwrap_or(0) as usize,
        hwloc.packages,
        "{ctx}: packages"
    );
    let our_nodes: BTreeMap<u32, Vec<u32>> = ours
        .platform
        .numa
        .iter()
        .map(|n| (n.id, n.cpus.clone()))
        .collect();
    assert_eq!(our_nodes, hwloc.nodes, "{ctx}: NUMA nodes and their CPUs");
    assert!(!hwloc.pci.is_empty(), "{ctx}: hwloc saw no PCI device");
    let mut compared = 0;
    for (bdf, hwloc_node) in &hwloc.pci {
        let ours = ours
            .pci
            .iter()
            .find(|f| &f.bdf == bdf)
            .unwrap_or_else(|| panic!("{ctx}: hwloc reports {bdf}, we do not"));
        match (ours.numa_node, hwloc_node) {
            (Some(a), Some(b)) => {
                assert_eq!(a, *b, "{ctx}: NUMA node of {bdf} ({:?})", ours.numa_source);
                compared += 1;
            }
            (None, None) => {}
            // hwloc 2.x places a device by its local CPUs alone and does not read `numa_node`:
            // 40intel64's 0000:43:00.0 says node 2 while its local CPUs are all 40 CPUs.
            (Some(_), None) if ours.numa_source == Some(NumaSource::Sysfs) => {}
            (ours_node, hwloc_node) => panic!(
                "{ctx}: {bdf}: we say {ours_node:?} ({:?}), hwloc says {hwloc_node:?}",
                ours.numa_source
            ),
        }
    }
    println!(
        "{ctx}: {} PCI devices from hwloc, {compared} NUMA localities compared",
        hwloc.pci.len()
    );
    compared
}

/// All snapshots in one test: hwloc's environment variables are process-wide.
#[test]
fn hwloc_agrees_on_every_snapshot() {
    if !super::fixtures::present() {
        return;
    }
    let compared: Vec<usize> = Snapshot::ALL
        .iter()
        .map(|&snapshot| {
            let root = snapshot.root();
            check(snapshot, &detect(&Sources::fsroot(root)), &hwloc_view(root))
        })
        .collect();
    // The comparison is not vacuous: on every snapshot but 40intel64 (whose devices are local
    // to all CPUs) both sides place devices on nodes.
    assert_eq!(
        compared.iter().filter(|&&n| n == 0).count(),
        1,
        "{compared:?}"
    );
}
