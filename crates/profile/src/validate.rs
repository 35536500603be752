//! The one check every profile reader applies after parsing: figures no run writes.

use hwc_model::Profile;
use std::collections::BTreeSet;

/// Whether a GB/s ceiling can be divided by: normal and positive. Zero, NaN, infinities and
/// subnormals (1e-320: a quotient by it overflows) divide nothing; [`damaged`] holds a profile
/// to the same test.
pub fn usable_ceiling(gbps: f64) -> bool {
    gbps.is_normal() && gbps > 0.0
}

/// Why a profile is damaged, if it is: figures no run writes (a hand-edited or broken file).
/// Every reader refuses such a file ([`crate::from_yaml`] checks it), so `report`, `compare`,
/// `qualify`, `efficiency` and `serve` agree on what a profile may hold: a ceiling that is not a
/// finite number, or a bandwidth ceiling (a GB/s figure where higher is better) that is not above
/// zero (penalties, sizes and counts may be zero or negative); a measurement whose median, min or
/// max is negative or not finite, or two measurements under one key (which would a reader
/// take?); a PCIe link whose theoretical bandwidth is negative or not finite.
pub fn damaged(p: &Profile) -> Option<String> {
    let why = |what: String| {
        Some(format!(
            "{what}, which no run writes: the profile is damaged"
        ))
    };
    if let Some((k, v)) = p
        .ceilings
        .iter()
        .find(|(k, &v)| !v.is_finite() || (p.is_bandwidth_ceiling(k) && !usable_ceiling(v)))
    {
        return why(format!("ceiling `{k}` is {v}"));
    }
    let mut seen = BTreeSet::new();
    for m in &p.measurements {
        if !seen.insert(m.key.as_str()) {
            return why(format!("measurement `{}` is listed twice", m.key));
        }
        let g = &m.gbps;
        if let Some(v) = [g.median, g.min, g.max]
            .into_iter()
            .find(|v| !v.is_finite() || *v < 0.0)
        {
            return why(format!("measurement `{}` has a figure of {v}", m.key));
        }
    }
    p.topology.links.iter().find_map(|l| {
        let t = [Some(l.theoretical_gbps), l.max_theoretical_gbps];
        let v = t
            .into_iter()
            .flatten()
            .find(|v| !v.is_finite() || *v < 0.0)?;
        why(format!(
            "the PCIe link of `{}` has a theoretical {v} GB/s",
            l.device
        ))
    })
}
