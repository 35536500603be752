//! Pinning the thread that issues the copies to a NUMA node's CPUs, for one case only.

use std::path::Path;

use hwc_model::cpulist::parse as parse_cpulist;
use hwc_numa::{current_affinity, pin_current_thread, NumaError};

use crate::error::CudaError;

/// The CPUs of NUMA node `node`, from `<sys_root>/devices/system/node/node<N>/cpulist`. A
/// kernel without NUMA support has no such folder: node 0 is then every CPU this thread may use.
pub fn node_cpus(sys_root: &Path, node: u32) -> Result<Vec<u32>, CudaError> {
    let nodes = sys_root.join("devices/system/node");
    let path = nodes.join(format!("node{node}/cpulist"));
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let cpus = parse_cpulist(&text).ok_or_else(|| {
                CudaError::unavailable(format!("{} is not a CPU list", path.display()), None)
            })?;
            if cpus.is_empty() {
                return Err(CudaError::unavailable(
                    format!("NUMA node {node} has no CPUs to issue copies from"),
                    Some("choose a node with CPUs for cpu_node"),
                ));
            }
            Ok(cpus)
        }
        Err(_) if node == 0 && !nodes.exists() => Ok(current_affinity()),
        Err(e) => Err(CudaError::unavailable(
            format!(
                "NUMA node {node} is not on this machine ({}: {e})",
                path.display()
            ),
            None,
        )),
    }
}

/// Pins the calling thread and puts its previous CPUs back when dropped.
pub struct AffinityGuard {
    previous: Vec<u32>,
}

impl AffinityGuard {
    pub fn pin(cpus: &[u32]) -> Result<Self, NumaError> {
        let previous = current_affinity();
        pin_current_thread(cpus)?;
        Ok(AffinityGuard { previous })
    }
}

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        if !self.previous.is_empty() {
            let _ = pin_current_thread(&self.previous);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_cpus_reads_sysfs_and_falls_back_only_for_node_zero() {
        let root = std::env::temp_dir().join(format!("hwc-bench-cuda-{}", std::process::id()));
        let node1 = root.join("devices/system/node/node1");
        std::fs::create_dir_all(&node1).unwrap();
        std::fs::write(node1.join("cpulist"), "4-7\n").unwrap();
        std::fs::create_dir_all(root.join("devices/system/node/node2")).unwrap();
        std::fs::write(root.join("devices/system/node/node2/cpulist"), "\n").unwrap();
        assert_eq!(node_cpus(&root, 1).unwrap(), vec![4, 5, 6, 7]);
        assert!(node_cpus(&root, 2)
            .unwrap_err()
            .to_string()
            .contains("no CPUs"));
        assert!(node_cpus(&root, 3).is_err());
        let bare = root.join("bare");
        std::fs::create_dir_all(&bare).unwrap();
        assert_eq!(node_cpus(&bare, 0).unwrap(), current_affinity());
        assert!(node_cpus(&bare, 1).is_err());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_guard_restores_the_previous_cpus() {
        std::thread::spawn(|| {
            let before = current_affinity();
            {
                let _g = AffinityGuard::pin(&before[..1]).unwrap();
                assert_eq!(current_affinity(), before[..1].to_vec());
            }
            assert_eq!(current_affinity(), before);
        })
        .join()
        .unwrap();
    }
}
