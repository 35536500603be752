//! The spec's `nvme:` fields and NVMe ceilings, from the Path 1/2 sweeps and Step 3's latency
//! probes. Figures come from drives only: a `--target` file or device is never a drive ceiling.

use hwc_model::profile::{IoSizeSweep, NvmeProfile};
use hwc_model::{size_label, Measurement, PathId, Profile, Topology};
use std::collections::BTreeMap;

/// Fraction of the peak that defines the knee (the optimal chunk size).
pub const KNEE_FRACTION: f64 = 0.95;
/// QD16 and QD32 within this fraction of each other: the drives are link-saturated.
pub const SATURATION_TOLERANCE: f64 = 0.02;

/// A drive sweep case (not a latency probe, not a `--target`).
pub fn is_drive_sweep(m: &Measurement) -> bool {
    m.params.pattern.as_deref() == Some("sequential")
        && m.key
            .split('/')
            .nth(1)
            .is_some_and(|s| s.ends_with("drive"))
}

/// `1_drive`, `4_drive`, … (the spec's keys).
pub fn count_key(n: usize) -> String {
    format!("{n}_drive")
}

/// True when QD16 and QD32 agree within [`SATURATION_TOLERANCE`] of the larger: deeper queuing
/// adds only latency (the spec's "link-saturated").
pub fn link_saturated(qd16_gbps: f64, qd32_gbps: f64) -> bool {
    let hi = qd16_gbps.max(qd32_gbps);
    hi > 0.0 && (qd16_gbps - qd32_gbps).abs() <= SATURATION_TOLERANCE * hi
}

/// The smallest block size whose throughput reaches [`KNEE_FRACTION`] of the peak.
pub fn knee(points: &[(u64, f64)]) -> Option<u64> {
    let peak = points.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    points
        .iter()
        .filter(|p| p.1 >= KNEE_FRACTION * peak)
        .map(|p| p.0)
        .min()
}

fn sweeps(ms: &[Measurement], path: PathId) -> impl Iterator<Item = &Measurement> {
    ms.iter()
        .filter(move |m| m.path == path && is_drive_sweep(m))
}

/// The 1-drive size sweep at QD 32 (the spec's `io_size_sweep_*`), or at the deepest QD measured.
fn size_sweep(ms: &[Measurement], path: PathId) -> Option<IoSizeSweep> {
    let one: Vec<&Measurement> = sweeps(ms, path)
        .filter(|m| m.params.drives.len() == 1)
        .collect();
    let qd = if one.iter().any(|m| m.params.queue_depth == Some(32)) {
        Some(32)
    } else {
        one.iter().filter_map(|m| m.params.queue_depth).max()
    };
    let points: Vec<(u64, f64)> = one
        .iter()
        .filter(|m| m.params.queue_depth == qd)
        .filter_map(|m| Some((m.params.size_bytes?, m.gbps.median)))
        .collect();
    if points.is_empty() {
        return None;
    }
    Some(IoSizeSweep {
        points: points
            .iter()
            .map(|(s, g)| (size_label(*s).to_ascii_lowercase(), *g))
            .collect(),
        optimal_bytes: knee(&points),
    })
}

fn per_count(
    ms: &[Measurement],
    path: PathId,
) -> (BTreeMap<String, f64>, BTreeMap<String, Vec<String>>) {
    let mut best: BTreeMap<usize, &Measurement> = BTreeMap::new();
    for m in sweeps(ms, path) {
        let k = m.params.drives.len();
        if best.get(&k).is_none_or(|b| m.gbps.median > b.gbps.median) {
            best.insert(k, m);
        }
    }
    let gbps = best
        .iter()
        .map(|(k, m)| (count_key(*k), m.gbps.median))
        .collect();
    let used = best
        .iter()
        .map(|(k, m)| (count_key(*k), m.params.drives.clone()))
        .collect();
    (gbps, used)
}

/// Fill the sweep-derived fields and each drive's latencies.
pub fn fill(topo: &Topology, ms: &[Measurement], n: &mut NvmeProfile) {
    (n.raw_read_gbps, n.read_drives_used) = per_count(ms, PathId::NvmeRead);
    (n.raw_write_gbps, n.write_drives_used) = per_count(ms, PathId::NvmeWrite);
    n.io_size_sweep_read_gbps = size_sweep(ms, PathId::NvmeRead);
    n.io_size_sweep_write_gbps = size_sweep(ms, PathId::NvmeWrite);
    n.mdts_bytes = n.drives.iter().filter_map(|d| d.mdts_bytes).min();
    for d in &topo.nvme {
        if let Some(r) = &d.root {
            n.same_root_groups
                .entry(r.clone())
                .or_default()
                .push(d.bdf.clone().unwrap_or_else(|| d.name.clone()));
        }
    }
    for v in n.same_root_groups.values_mut() {
        v.sort();
    }
    for d in &mut n.drives {
        let key = d.bdf.clone().unwrap_or_else(|| d.name.clone());
        let probe = |qd: u32| {
            ms.iter().find(|m| {
                m.path == PathId::NvmeRead
                    && m.params.pattern.as_deref() == Some("random")
                    && m.params.queue_depth == Some(qd)
                    && m.params.drives == [key.clone()]
            })
        };
        let fields = |qd| {
            probe(qd).map(|m| {
                (
                    m.latency_us.map(|s| s.median),
                    m.latency_p50_us,
                    m.latency_p99_us,
                )
            })
        };
        if let Some((a, p50, p99)) = fields(1) {
            (
                d.read_latency_qd1_us,
                d.read_latency_qd1_p50_us,
                d.read_latency_qd1_p99_us,
            ) = (a, p50, p99);
        }
        if let Some((a, p50, p99)) = fields(16) {
            (
                d.read_latency_qd16_us,
                d.read_latency_qd16_p50_us,
                d.read_latency_qd16_p99_us,
            ) = (a, p50, p99);
        }
        if let Some((a, p50, p99)) = fields(32) {
            (
                d.read_latency_qd32_us,
                d.read_latency_qd32_p50_us,
                d.read_latency_qd32_p99_us,
            ) = (a, p50, p99);
        }
    }
}

/// The best NUMA-local H2D peak over GPUs (the warm-path ceiling feeding the cold path).
pub fn best_h2d_peak(p: &Profile) -> Option<f64> {
    p.gpus
        .values()
        .filter_map(|g| g.h2d_peak_numa_local_gbps)
        .reduce(f64::max)
}

/// The spec's NVMe and dispatcher-cold ceilings, and the cold path's bottleneck per drive count.
pub fn ceilings(p: &Profile, c: &mut BTreeMap<String, f64>) -> BTreeMap<String, String> {
    let n = &p.nvme;
    let num = |k: &str| k.trim_end_matches("_drive").to_string();
    for (k, v) in &n.raw_read_gbps {
        c.insert(format!("nvme_raw_{}drive_read_gbps", num(k)), *v);
    }
    for (k, v) in &n.raw_write_gbps {
        c.insert(format!("nvme_raw_{}drive_write_gbps", num(k)), *v);
    }
    if let Some(b) = n
        .io_size_sweep_read_gbps
        .as_ref()
        .and_then(|s| s.optimal_bytes)
    {
        c.insert("nvme_optimal_read_chunk_bytes".into(), b as f64);
    }
    if let Some(b) = n
        .io_size_sweep_write_gbps
        .as_ref()
        .and_then(|s| s.optimal_bytes)
    {
        c.insert("nvme_optimal_write_chunk_bytes".into(), b as f64);
    }
    let mut bottleneck = BTreeMap::new();
    let Some(h2d) = best_h2d_peak(p) else {
        return bottleneck;
    };
    for (k, v) in &n.raw_read_gbps {
        c.insert(format!("dispatcher_cold_{}drive_gbps", num(k)), v.min(h2d));
        bottleneck.insert(k.clone(), if *v < h2d { "nvme" } else { "h2d" }.to_string());
    }
    if let Some(per_drive) = n.raw_read_gbps.get("1_drive").filter(|v| **v > 0.0) {
        c.insert("dispatcher_cold_crossover_drives".into(), h2d / per_drive);
    }
    bottleneck
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn saturation_means_qd16_and_qd32_agree() {
        assert!(link_saturated(3.50, 3.52));
        assert!(link_saturated(3.52, 3.50));
        assert!(!link_saturated(2.0, 3.0));
        assert!(!link_saturated(0.0, 0.0));
    }

    #[test]
    fn the_knee_is_the_smallest_size_at_95_percent_of_peak() {
        let pts = [
            (4096, 0.5),
            (131072, 3.2),
            (262144, 3.45),
            (1 << 20, 3.5),
            (8 << 20, 3.49),
        ];
        assert_eq!(knee(&pts), Some(262144), "3.2 < 3.325 ≤ 3.45: 256 KiB");
        assert_eq!(knee(&pts[..2]), Some(131072));
        assert_eq!(knee(&[]), None);
    }

    proptest! {
        #[test]
        fn the_knee_reaches_95_percent_and_nothing_smaller_does(ys in proptest::collection::vec(0.01f64..10.0, 1..10)) {
            let pts: Vec<(u64, f64)> = ys.iter().enumerate().map(|(i, y)| (4096u64 << i, *y)).collect();
            let peak = ys.iter().cloned().fold(f64::MIN, f64::max);
            let k = knee(&pts).unwrap();
            let at = pts.iter().find(|p| p.0 == k).unwrap().1;
            prop_assert!(at >= KNEE_FRACTION * peak);
            prop_assert!(pts.iter().filter(|p| p.0 < k).all(|p| p.1 < KNEE_FRACTION * peak));
        }
    }
}
