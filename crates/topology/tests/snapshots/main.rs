//! Detection on real `/sys` + `/proc` snapshots (`../shared/fixtures/fsroot`). Every expected
//! value below is read off the snapshot's own files.

mod fixtures;
#[cfg(feature = "hwloc-oracle")]
mod oracle;

/// Without the feature (no libhwloc-dev needed), the hwloc cross-check is not built: say so.
#[cfg(not(feature = "hwloc-oracle"))]
#[test]
fn hwloc_cross_check_needs_its_feature() {
    eprintln!(
        "SKIPPED: the hwloc cross-check of the snapshots is built with --features \
         hwc-topology/hwloc-oracle (needs libhwloc-dev libudev-dev pkg-config; .ci/run turns it on)"
    );
}

use hwc_model::topology::{NumaSource, PciFunction};
use hwc_model::Topology;
use hwc_topology::{detect, node_of_cpus, parse_cpulist, parse_cpumask, Sources};

use fixtures::Snapshot;

fn detect_snapshot(snapshot: Snapshot) -> Topology {
    detect(&Sources::fsroot(snapshot.root()))
}

fn function<'a>(topo: &'a Topology, bdf: &str) -> &'a PciFunction {
    topo.pci
        .iter()
        .find(|f| f.bdf == bdf)
        .unwrap_or_else(|| panic!("{bdf} not detected"))
}

#[test]
fn h200_vm_has_one_gen5_gpu_with_a_256_gib_bar1() {
    if !fixtures::present() {
        return;
    }
    let topo = detect_snapshot(Snapshot::H200);
    assert_eq!(topo.gpus.len(), 1);
    let gpu = &topo.gpus[0];
    assert_eq!((gpu.index, gpu.pci_bdf.as_str()), (0, "0000:00:06.0"));
    assert_eq!(gpu.model.as_deref(), Some("NVIDIA H200"));
    assert_eq!(
        (gpu.vendor.as_str(), gpu.device.as_str()),
        ("0x10de", "0x2335")
    );
    assert_eq!(
        (
            gpu.pcie_gen,
            gpu.pcie_width,
            gpu.pcie_max_gen,
            gpu.pcie_max_width
        ),
        (Some(5), Some(16), Some(5), Some(16))
    );
    assert_eq!(gpu.bar1_bytes, Some(274_877_906_944));
    assert_eq!(gpu.bar1_gib, Some(256.0));
    assert_eq!(
        gpu.bars.iter().map(|b| b.index).collect::<Vec<_>>(),
        [0, 2, 4]
    );
    assert_eq!(gpu.root.as_deref(), Some("0000:00"));
    assert_eq!(gpu.driver.as_deref(), Some("nvidia"));

    // sysfs says -1; the node comes from the local CPUs (0-15, all of node 0's).
    assert_eq!(
        Snapshot::H200.file("sys/bus/pci/devices/0000:00:06.0/numa_node"),
        "-1"
    );
    assert_eq!(gpu.numa_node, Some(0));
    let source = function(&topo, "0000:00:06.0").numa_source;
    assert!(
        matches!(source, Some(NumaSource::LocalCpus | NumaSource::SingleNode)),
        "{source:?}"
    );

    let p = &topo.platform;
    assert_eq!(
        (p.threads, p.cores, p.sockets, p.numa_nodes),
        (16, Some(16), Some(1), 1)
    );
    assert_eq!(p.cpu.as_deref(), Some("Intel(R) Xeon(R) Processor"));
    assert_eq!((p.hostname.as_deref(), p.kernel.as_deref()), (None, None));
    assert!(topo.cpu_features.has_avx512);
    assert_eq!(topo.cpu_features.xxh3_tier, "AVX-512");
    assert!(topo.nvme.is_empty());

    let links = &topo.topology.links;
    assert_eq!(links.len(), 1);
    assert_eq!(
        (links[0].device.as_str(), links[0].gen, links[0].width),
        ("gpu0", 5, 16)
    );
    assert!((links[0].theoretical_gbps - 63.015).abs() < 1e-3);
    assert!(!links[0].degraded);
    assert_eq!(
        topo.topology.same_root_drives.get("gpu0"),
        Some(&Vec::new())
    );
    assert!(topo.topology.routes.is_empty());
}

#[test]
fn ci_vm_has_nothing_to_find() {
    if !fixtures::present() {
        return;
    }
    let topo = detect_snapshot(Snapshot::Cpu2);
    assert!(topo.gpus.is_empty());
    assert!(topo.nvme.is_empty());
    assert_eq!(topo.platform.threads, 2);
    assert_eq!(topo.platform.numa_nodes, 1);
    assert!(!topo.pci.is_empty());
    assert!(topo.topology.links.is_empty() && topo.topology.routes.is_empty());
    assert_eq!(topo.tools.len(), 9);
    assert!(topo.tools.iter().all(|t| !t.present));
}

#[test]
fn em64t_nvme_with_a_partition_is_in_use_and_local_to_node_0() {
    if !fixtures::present() {
        return;
    }
    let snap = Snapshot::Em64t;
    let topo = detect_snapshot(snap);
    assert_eq!(topo.platform.numa_nodes, 2);
    assert_eq!(
        (topo.platform.sockets, topo.platform.threads),
        (Some(2), 16)
    );
    assert_eq!(topo.nvme.len(), 1);
    let drive = &topo.nvme[0];
    // An old kernel: no /sys/class/nvme; the controller is the PCI function's misc/nvme0.
    assert_eq!(drive.name, "nvme0");
    assert_eq!(drive.bdf.as_deref(), Some("0000:00:02.0"));
    assert_eq!(drive.driver.as_deref(), Some("nvme"));
    assert_eq!(drive.root.as_deref(), Some("0000:00"));
    assert_eq!(drive.namespaces.len(), 1);
    let ns = &drive.namespaces[0];
    assert_eq!(ns.name, "nvme0n1");
    assert_eq!(ns.partitions, ["nvme0n1p1"]);
    assert!(ns.in_use && drive.in_use);
    assert_eq!(ns.size_bytes, Some(781_422_768 * 512));
    assert_eq!(
        (ns.logical_block_size, ns.max_hw_sectors_kb),
        (Some(512), Some(128))
    );
    assert_eq!(drive.capacity_bytes, Some(400_088_457_216));

    // sysfs numa_node is -1; local_cpulist 0-3 lies within node 0 (0-7) only (node 1 is 8-15).
    let dev = "sys/bus/pci/devices/0000:00:02.0";
    assert_eq!(snap.file(&format!("{dev}/numa_node")), "-1");
    let local = parse_cpulist(&snap.file(&format!("{dev}/local_cpulist"))).expect("cpulist");
    assert_eq!(local, [0, 1, 2, 3]);
    assert_eq!(node_of_cpus(&local, &topo.platform.numa), Some(0));
    assert_eq!(drive.numa_node, Some(0));
    assert_eq!(
        function(&topo, "0000:00:02.0").numa_source,
        Some(NumaSource::LocalCpus)
    );
}

#[test]
fn intel40_roots_and_the_localities_sysfs_gives() {
    if !fixtures::present() {
        return;
    }
    let snap = Snapshot::Intel40;
    let topo = detect_snapshot(snap);
    assert_eq!(
        (topo.platform.sockets, topo.platform.numa_nodes),
        (Some(4), 4)
    );
    // Package 1's CPUs are node 1's.
    let package1: Vec<u32> = topo
        .platform
        .cpus
        .iter()
        .filter(|c| c.package == Some(1))
        .map(|c| c.id)
        .collect();
    assert_eq!(node_of_cpus(&package1, &topo.platform.numa), Some(1));

    for f in &topo.pci {
        let expected_root = if f.bdf.as_str() < "0000:40" {
            "0000:00"
        } else {
            "0000:40"
        };
        assert_eq!(f.root.as_deref(), Some(expected_root), "{}", f.bdf);
    }
    // Every function's local CPUs are all 40 CPUs, so they name no node; only 0000:43:00.0 has
    // a sysfs numa_node (2). The "0000:40 near package 1" locality of hwloc's own test comes
    // from its HWLOC_PCI_LOCALITY variable, not from these files — and even that mask
    // (odd CPUs) spans nodes 1 and 3.
    for f in &topo.pci {
        let dev = format!("sys/bus/pci/devices/{}", f.bdf);
        assert_eq!(snap.file(&format!("{dev}/local_cpulist")), "0-39");
        if f.bdf == "0000:43:00.0" {
            assert_eq!(
                (f.numa_node, f.numa_source),
                (Some(2), Some(NumaSource::Sysfs))
            );
        } else {
            assert_eq!((f.numa_node, f.numa_source), (None, None), "{}", f.bdf);
        }
    }
    let forced_near_package1 = parse_cpumask("000000aa,aaaaaaaa").expect("mask");
    assert_eq!(
        node_of_cpus(&forced_near_package1, &topo.platform.numa),
        None
    );
}

#[test]
fn fake_localities_match_sysfs_root_by_root() {
    if !fixtures::present() {
        return;
    }
    let snap = Snapshot::FakePci;
    let topo = detect_snapshot(snap);
    let expected = [
        ("0000:00", 0),
        ("0000:40", 1),
        ("0000:80", 2),
        ("0000:c0", 3),
    ];
    for f in &topo.pci {
        let root = f.root.as_deref().expect("every function has a root");
        let node = expected
            .iter()
            .find(|(r, _)| *r == root)
            .map(|&(_, n)| n)
            .unwrap_or_else(|| panic!("unexpected root {root}"));
        assert_eq!(
            (f.numa_node, f.numa_source),
            (Some(node), Some(NumaSource::Sysfs))
        );
        // The local CPU mask tells the same story as numa_node.
        let mask = snap.file(&format!("sys/bus/pci/devices/{}/local_cpus", f.bdf));
        let local = parse_cpumask(&mask).expect("mask");
        assert_eq!(
            node_of_cpus(&local, &topo.platform.numa),
            Some(node),
            "{}",
            f.bdf
        );
    }
    assert_eq!(
        topo.pci
            .iter()
            .filter(|f| f.root.as_deref() == Some("0000:40"))
            .count(),
        4
    );
}

#[test]
fn every_snapshot_round_trips_through_json() {
    if !fixtures::present() {
        return;
    }
    for snapshot in Snapshot::ALL {
        let topo = detect_snapshot(snapshot);
        let json = serde_json::to_string(&topo).expect("serialise");
        let back: Topology = serde_json::from_str(&json).expect("deserialise");
        assert_eq!(back, topo, "{snapshot:?}");
        assert!(topo.platform.threads > 0, "{snapshot:?}");
        assert_eq!(topo.platform.cpus.len(), topo.platform.threads as usize);
        assert!(
            topo.platform.cpus.iter().all(|c| c.node.is_some()),
            "{snapshot:?}"
        );
    }
}
