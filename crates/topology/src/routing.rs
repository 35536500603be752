//! The spec's `topology:` section: each GPU and drive's link theory and how data between every
//! GPU and every NVMe drive travels.

use std::collections::BTreeMap;

use hwc_model::topology::{Gpu, LinkTheory, NvmeDrive, PciFunction, Relation, Route, Routing};
use hwc_model::{pcie_gen_from_speed, pcie_theoretical_gbps};

/// Routing between `gpus` and `drives`; `pci` supplies their links.
pub(crate) fn routing(gpus: &[Gpu], drives: &[NvmeDrive], pci: &[PciFunction]) -> Routing {
    let function = |bdf: Option<&str>| pci.iter().find(|f| Some(f.bdf.as_str()) == bdf);
    let gpu_links = gpus
        .iter()
        .filter_map(|g| link_theory(&gpu_name(g), function(Some(&g.pci_bdf))?));
    let drive_links = drives
        .iter()
        .filter_map(|d| link_theory(&d.name, function(d.bdf.as_deref())?));
    let mut routes = Vec::new();
    let mut same_root_drives = BTreeMap::new();
    for gpu in gpus {
        let near: Vec<String> = drives
            .iter()
            .filter(|d| same_root(gpu.root.as_deref(), d.root.as_deref()))
            .filter_map(|d| d.bdf.clone())
            .collect();
        same_root_drives.insert(gpu_name(gpu), near);
        routes.extend(drives.iter().map(|d| Route {
            gpu: gpu_name(gpu),
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
        links: gpu_links.chain(drive_links).collect(),
    }
}

fn gpu_name(gpu: &Gpu) -> String {
    format!("gpu{}", gpu.index)
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

/// Theoretical bandwidth of a device's link, when its current speed and width are known.
fn link_theory(device: &str, func: &PciFunction) -> Option<LinkTheory> {
    let link = func.link?;
    let (speed, width) = (link.current_speed_gts?, link.current_width?);
    let gen = pcie_gen_from_speed(speed)?;
    let max_gen = link.max_speed_gts.and_then(pcie_gen_from_speed);
    let below = |current: u32, max: Option<u32>| max.is_some_and(|m| current < m);
    Some(LinkTheory {
        device: device.to_string(),
        bdf: func.bdf.clone(),
        gen,
        width,
        max_gen,
        max_width: link.max_width,
        theoretical_gbps: pcie_theoretical_gbps(speed, width),
        max_theoretical_gbps: link
            .max_speed_gts
            .zip(link.max_width)
            .map(|(s, w)| pcie_theoretical_gbps(s, w)),
        degraded: below(gen, max_gen) || below(width, link.max_width),
    })
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
            driver: None,
        };
        let t = link_theory("nvme0", &func).expect("link known");
        assert_eq!(
            (t.gen, t.width, t.max_gen, t.max_width),
            (3, 4, Some(4), Some(4))
        );
        assert!(t.degraded);
        assert!((t.theoretical_gbps - 3.938).abs() < 1e-3);
        assert!((t.max_theoretical_gbps.expect("max known") - 7.877).abs() < 1e-3);
        let unknown = PciFunction { link: None, ..func };
        assert!(link_theory("nvme0", &unknown).is_none());
    }
}
