//! The spec's `gdrcopy:` section from Path 5: the best NUMA-local bandwidth of CPU → BAR1
//! stores and of BAR1 → CPU loads (latency probes aside), and their ceilings.

use crate::Ceilings;
use hwc_model::{ceiling_key, CeilingMeta, CopyDirection, Measurement, Numa, PathId, Profile};

/// The fastest NUMA-local bandwidth case of `direction`.
pub(crate) fn best(p: &Profile, direction: CopyDirection) -> Option<&Measurement> {
    p.measurements_of(PathId::Gdrcopy)
        .filter(|m| p.hardware(&m.engine))
        .filter(|m| {
            m.spec
                .gdrcopy()
                .is_some_and(|s| s.direction == direction && !s.latency && !s.cross_numa)
        })
        .max_by(|a, b| a.gbps.median.total_cmp(&b.gbps.median))
}

pub(crate) fn fill(p: &mut Profile) {
    p.gdrcopy.cpu_to_bar1_gbps = best(p, CopyDirection::H2d).map(|m| m.gbps.median);
    p.gdrcopy.bar1_to_cpu_gbps = best(p, CopyDirection::D2h).map(|m| m.gbps.median);
}

pub(crate) fn ceilings(p: &Profile, c: &mut Ceilings) {
    for (key, direction) in [
        (ceiling_key::GDRCOPY_CPU_TO_BAR1, CopyDirection::H2d),
        (ceiling_key::GDRCOPY_BAR1_TO_CPU, CopyDirection::D2h),
    ] {
        if let Some(m) = best(p, direction) {
            let mut meta = CeilingMeta::gbps(Some(PathId::Gdrcopy)).numa(Numa::Local);
            if let Some(s) = m.spec.gdrcopy() {
                meta = meta.gpu(&s.gpu);
            }
            c.measured(key.into(), meta, Some(m.gbps.median), Some(m));
        }
    }
}
