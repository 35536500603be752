//! Step 3's drive facts from the controller itself: Identify Controller (model, serial,
//! firmware, MDTS, VWC, power state descriptors, APSTA) merged into the detected topology, with
//! MDTS resolved to bytes, and the APST table and current power state read with Get Features.

use crate::identify::{cap_mpsmin, identify_controller, mdts_bytes, power_features, read_cap};
use hwc_model::topology::PowerFeatures;
use hwc_model::Topology;
use std::path::Path;

/// MDTS in bytes, where it came from, and whether the controller sets no limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mdts {
    pub bytes: Option<u64>,
    pub source: Option<&'static str>,
    pub unlimited: bool,
}

/// Resolve MDTS from what could be read: Identify's byte 77, CAP.MPSMIN, and the kernel's
/// `max_hw_sectors_kb` (MDTS capped by the driver's own limit). Pure.
///
/// - Identify and CAP: `2^(12 + MPSMIN) × 2^MDTS`, source `identify`.
/// - Identify without CAP (BAR0 not mappable, e.g. `CONFIG_IO_STRICT_DEVMEM`): the kernel's
///   limit when it equals `2^(MDTS + 12 + k)` for a valid MPSMIN k (the kernel derived it from
///   MDTS), source `identify+sysfs`; otherwise `2^(MDTS + 12)`, the value for 4 KiB pages (the
///   minimum page of nearly every controller), source `identify (4 KiB minimum page assumed)`.
/// - No Identify: the kernel's limit, source `sysfs`.
pub fn resolve_mdts(mdts: Option<u8>, mpsmin: Option<u8>, sysfs_max_kb: Option<u32>) -> Mdts {
    let none = Mdts {
        bytes: None,
        source: None,
        unlimited: false,
    };
    match (mdts, mpsmin, sysfs_max_kb) {
        (Some(0), _, _) => Mdts {
            bytes: None,
            source: Some("identify"),
            unlimited: true,
        },
        (Some(n), Some(k), _) => Mdts {
            bytes: mdts_bytes(n, k),
            source: Some("identify"),
            unlimited: false,
        },
        (Some(n), None, kb) => {
            let kernel = kb.map(|kb| u64::from(kb) * 1024);
            let derived = (0..=15u8).find_map(|k| mdts_bytes(n, k).filter(|b| Some(*b) == kernel));
            match derived {
                Some(b) => Mdts {
                    bytes: Some(b),
                    source: Some("identify+sysfs"),
                    unlimited: false,
                },
                None => Mdts {
                    bytes: mdts_bytes(n, 0),
                    source: Some("identify (4 KiB minimum page assumed)"),
                    unlimited: false,
                },
            }
        }
        (None, _, Some(kb)) => Mdts {
            bytes: Some(u64::from(kb) * 1024),
            source: Some("sysfs"),
            unlimited: false,
        },
        (None, _, None) => none,
    }
}

/// Send Identify Controller to every kernel-bound drive and merge what it says into `topo`.
/// Returns one line per drive that could not be asked (and why); those keep their sysfs facts.
pub fn inspect(topo: &mut Topology) -> Vec<String> {
    let mut problems = Vec::new();
    for d in &mut topo.nvme {
        // A namespace is a kernel block device: its controller is the kernel's (`/dev/<name>`).
        let kernel_bound = !d.namespaces.is_empty();
        let sysfs_kb = d.namespaces.iter().find_map(|n| n.max_hw_sectors_kb);
        let id = if kernel_bound {
            match identify_controller(&Path::new("/dev").join(&d.name)) {
                Ok(id) => Some(id),
                Err(e) => {
                    problems.push(format!("{}: {e}", d.name));
                    // The power states come from Identify: say why they are missing.
                    d.power_features = Some(PowerFeatures {
                        not_readable: vec![format!("not readable: power states: {e}")],
                        ..PowerFeatures::default()
                    });
                    None
                }
            }
        } else {
            None
        };
        let mpsmin = d
            .bdf
            .as_ref()
            .filter(|_| id.is_some())
            .and_then(|bdf| read_cap(&Path::new("/sys/bus/pci/devices").join(bdf)).ok())
            .map(cap_mpsmin);
        let m = resolve_mdts(id.as_ref().map(|i| i.mdts), mpsmin, sysfs_kb);
        d.mdts_bytes = m.bytes;
        d.mdts_source = m.source.map(str::to_string);
        d.mdts_unlimited = m.unlimited;
        if let Some(id) = id {
            d.power_features = Some(power_features(
                &Path::new("/dev").join(&d.name),
                id.power_states.len(),
                id.apst_supported,
            ));
            d.apst_supported = Some(id.apst_supported);
            d.power_states = id.power_states;
            d.vwc_present = Some(id.vwc_present);
            d.model.get_or_insert(id.model);
            d.serial.get_or_insert(id.serial);
            d.firmware_rev.get_or_insert(id.firmware_rev);
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mdts_resolution_says_where_it_came_from() {
        let r = resolve_mdts(Some(5), Some(0), Some(128));
        assert_eq!((r.bytes, r.source), (Some(128 << 10), Some("identify")));
        let r = resolve_mdts(Some(5), Some(2), None);
        assert_eq!(r.bytes, Some(512 << 10));
        // CAP unreadable: the kernel's limit tells MPSMIN when it was derived from MDTS.
        let r = resolve_mdts(Some(5), None, Some(512));
        assert_eq!(
            (r.bytes, r.source),
            (Some(512 << 10), Some("identify+sysfs"))
        );
        // The driver caps below MDTS: 4 KiB pages assumed, and said so.
        let r = resolve_mdts(Some(10), None, Some(1024));
        assert_eq!(r.bytes, Some(4 << 20));
        assert!(r.source.unwrap().contains("assumed"));
        let r = resolve_mdts(Some(0), None, Some(4096));
        assert!(r.unlimited && r.bytes.is_none());
        let r = resolve_mdts(None, None, Some(256));
        assert_eq!((r.bytes, r.source), (Some(256 << 10), Some("sysfs")));
        assert_eq!(resolve_mdts(None, None, None).bytes, None);
    }
}
