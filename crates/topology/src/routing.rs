//! The spec's `topology:` section: each GPU and drive's link theory and how data between every
//! GPU and every NVMe drive travels.

use std::collections::BTreeMap;

use hwc_model::pcie::PortType;
use hwc_model::topology::{
    Gpu, LinkBasis, LinkTheory, NvmeDrive, PciFunction, PcieHop, PciePath, Relation, Route, Routing,
};
use hwc_model::{pcie_gen_from_speed, LinkState};

/// Routing between `gpus` and `drives`; `pci` supplies their links.
pub(crate) fn routing(gpus: &[Gpu], drives: &[NvmeDrive], pci: &[PciFunction]) -> Routing {
    let function = |bdf: Option<&str>| pci.iter().find(|f| Some(f.bdf.as_str()) == bdf);
    let devices: Vec<(String, Option<&str>)> = gpus
        .iter()
        .map(|g| (g.name(), Some(g.pci_bdf.as_str())))
        .chain(drives.iter().map(|d| (d.name.clone(), d.bdf.as_deref())))
        .collect();
    let pcie_paths: Vec<PciePath> = devices
        .iter()
        .filter_map(|(name, bdf)| pcie_path(name, (*bdf)?, pci))
        .collect();
    let links = devices.iter().filter_map(|(name, bdf)| {
        let path = pcie_paths.iter().find(|p| &p.device == name);
        link_theory(name, function(*bdf)?, path.filter(|p| complete(p, pci)))
    });
    let mut routes = Vec::new();
    let mut same_root_drives = BTreeMap::new();
    for gpu in gpus {
        let near: Vec<String> = drives
            .iter()
            .filter(|d| same_root(gpu.root.as_deref(), d.root.as_deref()))
            .filter_map(|d| d.bdf.clone())
            .collect();
        same_root_drives.insert(gpu.name(), near);
        routes.extend(drives.iter().map(|d| Route {
            gpu: gpu.name(),
            gpu_bdf: gpu.pci_bdf.clone(),
            drive: d.name.clone(),
            drive_bdf: d.bdf.clone(),
            relation: relation(
                (gpu.root.as_deref(), gpu.numa_node),
                (d.root.as_deref(), d.numa_node),
            ),
        }));
    }
    Routing {
        same_root_drives,
        routes,
        links: links.collect(),
        pcie_paths,
    }
}

fn same_root(a: Option<&str>, b: Option<&str>) -> bool {
    a.is_some() && a == b
}

/// How data travels between two devices given their (root complex, NUMA node).
pub fn relation(a: (Option<&str>, Option<u32>), b: (Option<&str>, Option<u32>)) -> Relation {
    let ((root_a, node_a), (root_b, node_b)) = (a, b);
    if same_root(root_a, root_b) {
        return Relation::SameRoot;
    }
    match (node_a, node_b) {
        (Some(x), Some(y)) if x != y => Relation::CrossNuma,
        (Some(_), Some(_)) if root_a.is_some() && root_b.is_some() => Relation::SameNuma,
        _ => Relation::Unknown,
    }
}

/// `device`'s way up: its function, then each bridge above it, up to and including its root
/// port (at most 16 hops). Functions whose config space was not read are left out.
fn pcie_path(device: &str, bdf: &str, pci: &[PciFunction]) -> Option<PciePath> {
    let mut hops = Vec::new();
    let mut at = Some(bdf);
    while let Some(f) = at.and_then(|b| pci.iter().find(|f| f.bdf == b)) {
        let Some(config) = &f.config else { break };
        hops.push(PcieHop {
            bdf: f.bdf.clone(),
            config: config.clone(),
            iommu_domain: f.iommu_domain.clone(),
        });
        if hops.len() >= 16 || config.port == Some(hwc_model::pcie::PortType::RootPort) {
            break;
        }
        at = f.parent.as_deref();
    }
    (!hops.is_empty()).then(|| PciePath {
        device: device.to_string(),
        hops,
    })
}

/// The smallest MPS set along `path`, when every hop's could be read.
pub fn min_mps_bytes(path: &PciePath) -> Option<u32> {
    path.hops
        .iter()
        .map(|h| h.config.mps_bytes)
        .collect::<Option<Vec<u32>>>()?
        .into_iter()
        .min()
}

/// `path` reaches its root port, or a function with no parent (a root bus's, as in a VM): its
/// smallest MPS is then the whole way's.
fn complete(path: &PciePath, pci: &[PciFunction]) -> bool {
    let Some(last) = path.hops.last() else {
        return false;
    };
    last.config.port == Some(PortType::RootPort)
        || pci
            .iter()
            .find(|f| f.bdf == last.bdf)
            .is_some_and(|f| f.parent.is_none())
}

/// Theoretical bandwidth of a device's link, when its current speed and width are known; with
/// the smallest MPS of its `path` (a complete one), the TLP-adjusted limits.
fn link_theory(device: &str, func: &PciFunction, path: Option<&PciePath>) -> Option<LinkTheory> {
    let link = func.link?;
    let current = LinkState {
        gen: pcie_gen_from_speed(link.current_speed_gts?)?,
        width: link.current_width?,
    };
    let max_gen = link.max_speed_gts.and_then(pcie_gen_from_speed);
    let mps = path.and_then(min_mps_bytes);
    LinkTheory::new(
        device,
        &func.bdf,
        current,
        max_gen,
        link.max_width,
        mps,
        LinkBasis::Detection,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use hwc_model::topology::PcieLink;

    #[test]
    fn relations() {
        let r = |a, b| relation(a, b);
        assert_eq!(
            r((Some("0000:00"), None), (Some("0000:00"), None)),
            Relation::SameRoot
        );
        assert_eq!(
            r((Some("0000:00"), Some(0)), (Some("0000:40"), Some(0))),
            Relation::SameNuma
        );
        assert_eq!(
            r((Some("0000:00"), Some(0)), (Some("0000:40"), Some(1))),
            Relation::CrossNuma
        );
        assert_eq!(r((None, Some(0)), (None, Some(1))), Relation::CrossNuma);
        assert_eq!(
            r((None, Some(0)), (Some("0000:40"), Some(0))),
            Relation::Unknown
        );
        assert_eq!(
            r((Some("0000:00"), None), (Some("0000:40"), Some(0))),
            Relation::Unknown
        );
        assert_eq!(r((None, None), (None, None)), Relation::Unknown);
    }

    #[test]
    fn a_downtrained_link_is_degraded() {
        let func = PciFunction {
            bdf: "0000:01:00.0".into(),
            class: "0x010802".into(),
            vendor: "0x144d".into(),
            device: "0xa808".into(),
            numa_node: None,
            numa_source: None,
            root: None,
            link: Some(PcieLink {
                current_speed_gts: Some(8.0),
                current_width: Some(4),
                max_speed_gts: Some(16.0),
                max_width: Some(4),
            }),
            ..PciFunction::default()
        };
        let t = link_theory("nvme0", &func, None).expect("link known");
        assert_eq!(
            (t.gen, t.width, t.max_gen, t.max_width),
            (3, 4, Some(4), Some(4))
        );
        assert!(t.degraded);
        assert!((t.theoretical_gbps - 3.938).abs() < 1e-3);
        assert!((t.max_theoretical_gbps.expect("max known") - 7.877).abs() < 1e-3);
        let unknown = PciFunction { link: None, ..func };
        assert!(link_theory("nvme0", &unknown, None).is_none());
    }

    #[test]
    fn a_drive_behind_a_switch_has_four_hops_and_the_smallest_mps_sets_the_tlp_limit() {
        use hwc_model::pcie::{PcieConfig, PortType};
        let f = |bdf: &str, parent: Option<&str>, port, mps| PciFunction {
            bdf: bdf.into(),
            parent: parent.map(Into::into),
            config: Some(PcieConfig {
                readable_bytes: 4096,
                port: Some(port),
                mps_bytes: Some(mps),
                ..PcieConfig::default()
            }),
            iommu_domain: Some("DMA-FQ".into()),
            link: Some(PcieLink {
                current_speed_gts: Some(16.0),
                current_width: Some(4),
                max_speed_gts: Some(16.0),
                max_width: Some(4),
            }),
            ..PciFunction::default()
        };
        let pci = vec![
            f("0000:00:01.0", None, PortType::RootPort, 512),
            f(
                "0000:01:00.0",
                Some("0000:00:01.0"),
                PortType::SwitchUpstream,
                512,
            ),
            f(
                "0000:02:03.0",
                Some("0000:01:00.0"),
                PortType::SwitchDownstream,
                128,
            ),
            f(
                "0000:03:00.0",
                Some("0000:02:03.0"),
                PortType::Endpoint,
                256,
            ),
        ];
        let p = pcie_path("nvme0", "0000:03:00.0", &pci).unwrap();
        let bdfs: Vec<&str> = p.hops.iter().map(|h| h.bdf.as_str()).collect();
        assert_eq!(
            bdfs,
            [
                "0000:03:00.0",
                "0000:02:03.0",
                "0000:01:00.0",
                "0000:00:01.0"
            ]
        );
        assert_eq!(p.hops[0].iommu_domain.as_deref(), Some("DMA-FQ"));
        assert_eq!(min_mps_bytes(&p), Some(128));
        let t = link_theory("nvme0", &pci[3], Some(&p)).unwrap();
        // Gen4 x4: 7.877 GB/s encoded; 128 / (128 + 24) of it written, 128 / 148 read.
        assert!((t.tlp_write_gbps.unwrap() - 7.877 * 128.0 / 152.0).abs() < 1e-3);
        assert!((t.tlp_read_gbps.unwrap() - 7.877 * 128.0 / 148.0).abs() < 1e-3);
        // A hop whose config space could not be read leaves the smallest MPS unknown.
        let mut blind = pci.clone();
        blind[1].config.as_mut().unwrap().mps_bytes = None;
        let p = pcie_path("nvme0", "0000:03:00.0", &blind).unwrap();
        assert_eq!(min_mps_bytes(&p), None);
        // A walk cut short (a bridge with no config space read) leaves it unknown too: the
        // bridges beyond might set a smaller one.
        assert!(complete(
            &pcie_path("nvme0", "0000:03:00.0", &pci).unwrap(),
            &pci
        ));
        let mut cut = pci.clone();
        cut[1].config = None;
        let p = pcie_path("nvme0", "0000:03:00.0", &cut).unwrap();
        assert_eq!((p.hops.len(), min_mps_bytes(&p)), (2, Some(128)));
        assert!(!complete(&p, &cut));
        let drive = NvmeDrive {
            name: "nvme0".into(),
            bdf: Some("0000:03:00.0".into()),
            ..NvmeDrive::default()
        };
        let r = routing(&[], &[drive], &cut);
        assert_eq!(r.links[0].min_mps_bytes, None);
        assert_eq!(r.links[0].tlp_write_gbps, None);
        // A device on a root bus (no parent, as in a VM) is its whole way.
        let lone = vec![f("0000:00:06.0", None, PortType::Endpoint, 256)];
        let p = pcie_path("gpu0", "0000:00:06.0", &lone).unwrap();
        assert!(complete(&p, &lone));
    }
}
