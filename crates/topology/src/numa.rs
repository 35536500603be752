//! NUMA nodes (`/sys/devices/system/node`) and the rules that place a PCI device on one.

use hwc_model::topology::{NumaNode, NumaSource};

use crate::fsroot::FsRoot;
use crate::parse::{meminfo_value, parse_cpulist};

const NODE_DIR: &str = "/sys/devices/system/node";

/// The machine's NUMA nodes in id order. Without any node directory (a kernel without NUMA)
/// there is one node 0 holding every online CPU and all memory.
pub(crate) fn nodes(fs: &FsRoot, online: &[u32], mem_total: Option<u64>) -> Vec<NumaNode> {
    let mut ids: Vec<u32> = fs
        .names(NODE_DIR)
        .iter()
        .filter_map(|name| name.strip_prefix("node")?.parse().ok())
        .collect();
    ids.sort_unstable();
    if ids.is_empty() {
        return vec![NumaNode {
            id: 0,
            cpus: online.to_vec(),
            memory_only: online.is_empty(),
            memory_bytes: mem_total,
            distances: Vec::new(),
        }];
    }
    ids.into_iter().map(|id| node(fs, id)).collect()
}

fn node(fs: &FsRoot, id: u32) -> NumaNode {
    let dir = format!("{NODE_DIR}/node{id}");
    let cpus = fs
        .read(format!("{dir}/cpulist"))
        .and_then(|t| parse_cpulist(&t))
        .unwrap_or_default();
    NumaNode {
        id,
        memory_only: cpus.is_empty(),
        cpus,
        memory_bytes: fs
            .read(format!("{dir}/meminfo"))
            .and_then(|t| meminfo_value(&t, "MemTotal"))
            .and_then(|kib| kib.checked_mul(1024)),
        distances: fs
            .read(format!("{dir}/distance"))
            .and_then(|t| t.split_whitespace().map(|d| d.parse().ok()).collect())
            .unwrap_or_default(),
    }
}

/// The node whose CPUs include every one of `local` (CPUs that belong to no node are ignored),
/// when exactly one node does. A set spanning several nodes, such as all CPUs of a multi-node
/// machine, has no such node.
pub fn node_of_cpus(local: &[u32], nodes: &[NumaNode]) -> Option<u32> {
    let known: Vec<u32> = local
        .iter()
        .copied()
        .filter(|c| nodes.iter().any(|n| n.cpus.contains(c)))
        .collect();
    if known.is_empty() {
        return None;
    }
    let mut holders = nodes
        .iter()
        .filter(|n| known.iter().all(|c| n.cpus.contains(c)));
    match (holders.next(), holders.next()) {
        (Some(node), None) => Some(node.id),
        _ => None,
    }
}

/// A PCI device's NUMA node and where it came from: its sysfs `numa_node` when ≥ 0; else its
/// local CPUs when they lie within exactly one node; else the machine's only node with CPUs.
/// Otherwise unknown: never a guess.
pub fn device_locality(
    sysfs_node: Option<i64>,
    local_cpus: Option<&[u32]>,
    nodes: &[NumaNode],
) -> (Option<u32>, Option<NumaSource>) {
    if let Some(node) = sysfs_node.and_then(|n| u32::try_from(n).ok()) {
        return (Some(node), Some(NumaSource::Sysfs));
    }
    if let Some(node) = local_cpus.and_then(|cpus| node_of_cpus(cpus, nodes)) {
        return (Some(node), Some(NumaSource::LocalCpus));
    }
    let mut with_cpus = nodes.iter().filter(|n| !n.cpus.is_empty());
    match (with_cpus.next(), with_cpus.next()) {
        (Some(only), None) => (Some(only.id), Some(NumaSource::SingleNode)),
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u32, cpus: &[u32]) -> NumaNode {
        NumaNode {
            id,
            cpus: cpus.to_vec(),
            memory_only: cpus.is_empty(),
            memory_bytes: None,
            distances: Vec::new(),
        }
    }

    fn two_nodes() -> Vec<NumaNode> {
        vec![node(0, &[0, 1, 2, 3]), node(1, &[4, 5, 6, 7]), node(2, &[])]
    }

    #[test]
    fn local_cpus_pick_the_one_containing_node() {
        let nodes = two_nodes();
        assert_eq!(node_of_cpus(&[0, 1], &nodes), Some(0));
        assert_eq!(node_of_cpus(&[4, 5, 6, 7], &nodes), Some(1));
        assert_eq!(node_of_cpus(&[3, 4], &nodes), None);
        assert_eq!(node_of_cpus(&(0..8).collect::<Vec<_>>(), &nodes), None);
        assert_eq!(node_of_cpus(&[], &nodes), None);
        assert_eq!(node_of_cpus(&[99], &nodes), None);
        assert_eq!(node_of_cpus(&[4, 5, 99], &nodes), Some(1));
    }

    #[test]
    fn locality_order_of_evidence() {
        let nodes = two_nodes();
        assert_eq!(
            device_locality(Some(1), Some(&[0]), &nodes),
            (Some(1), Some(NumaSource::Sysfs))
        );
        assert_eq!(
            device_locality(Some(-1), Some(&[0, 1]), &nodes),
            (Some(0), Some(NumaSource::LocalCpus))
        );
        assert_eq!(
            device_locality(Some(-1), Some(&[0, 1, 2, 3, 4, 5, 6, 7]), &nodes),
            (None, None)
        );
        assert_eq!(device_locality(None, None, &nodes), (None, None));
        let single = vec![node(0, &[0, 1]), node(1, &[])];
        assert_eq!(
            device_locality(Some(-1), None, &single),
            (Some(0), Some(NumaSource::SingleNode))
        );
        assert_eq!(
            device_locality(None, Some(&[0, 1]), &single),
            (Some(0), Some(NumaSource::LocalCpus))
        );
        assert_eq!(device_locality(None, None, &[]), (None, None));
    }

    #[test]
    fn no_node_directory_means_one_node() {
        let empty = tempfile::tempdir().expect("tempdir");
        let fs = FsRoot::new(empty.path());
        let nodes = nodes(&fs, &[0, 1], Some(1 << 30));
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].cpus, vec![0, 1]);
        assert_eq!(nodes[0].memory_bytes, Some(1 << 30));
        assert!(!nodes[0].memory_only);
    }
}
