//! The spec's `gds:` section from Path 6's measurements: the mode libcufile ran in (as the
//! cuFile engine recorded it in the provenance's `gds.mode`) and, only for a direct mode, the
//! best cuFile read over one drive and over four. A compat-mode figure stays a measurement:
//! it is a POSIX bounce, never a GPUDirect ceiling.

use hwc_model::{GdsRoute, Measurement, PathId, Profile};

/// The modes that move data straight from the drive to the GPU.
const DIRECT_MODES: [&str; 2] = ["nvfs", "p2pdma"];

/// The fastest cuFile measurement over `drives` whole drives (not a `--target`).
pub(crate) fn best_cufile(p: &Profile, drives: usize) -> Option<&Measurement> {
    p.measurements_of(PathId::Gds)
        .filter(|m| {
            m.spec.gds().is_some_and(|s| {
                s.route == GdsRoute::Cufile && !s.write && !s.target && s.drives.len() == drives
            })
        })
        .max_by(|a, b| a.gbps.median.total_cmp(&b.gbps.median))
}

/// Whether the run's cuFile figures are GPUDirect.
pub(crate) fn direct(p: &Profile) -> bool {
    p.gds
        .mode
        .as_deref()
        .is_some_and(|m| DIRECT_MODES.contains(&m))
}

pub(crate) fn fill(p: &mut Profile) {
    p.gds.mode = p
        .provenance
        .environment
        .get("gds.mode")
        .map(|s| s.value.clone())
        .filter(|m| m != "unavailable");
    if direct(p) {
        p.gds.one_drive_gbps = best_cufile(p, 1).map(|m| m.gbps.median);
        p.gds.four_drive_gbps = best_cufile(p, 4).map(|m| m.gbps.median);
    }
}
