//! The spec's `bar1:` section (NVMe DMA → GPU BAR1), `pci_bar:` (the same into a PCI BAR named
//! with `--p2p-bar`, a stand-in that is never a GPU figure), the `p2p_cold_*` ceilings (GPU BAR1
//! only) and the spec's sanity rule on the harness.

use crate::Ceilings;
use hwc_model::profile::Bar1Profile;
use hwc_model::{
    ceiling_key, BarDevice, CeilingMeta, DmaTarget, Measurement, Numa, NvmeBarSpec, PathId,
    Profile, WarningKind,
};
use std::collections::BTreeMap;

/// Adding drives gains less than this fraction: the BAR saturates (the spec's 5 %).
pub const SATURATION_GAIN: f64 = 0.05;
/// The 1-drive host-RAM figure more than this fraction under spdk_nvme_perf's: the harness may
/// be adding overhead (the spec's 20 %).
pub const HARNESS_SHORTFALL: f64 = 0.20;

fn spec(m: &Measurement) -> Option<&NvmeBarSpec> {
    m.spec.nvme_bar()
}

/// The best measurement of `device` for (`memory`, drive count, cross-NUMA).
pub fn best<'a>(
    p: &'a Profile,
    device: &BarDevice,
    memory: DmaTarget,
    drives: usize,
    cross: bool,
) -> Option<&'a Measurement> {
    p.measurements_of(PathId::NvmeBar1)
        .filter(|m| p.hardware(&m.engine))
        .filter(|m| {
            spec(m).is_some_and(|s| {
                &s.device == device
                    && s.memory == memory
                    && s.drives.len() == drives
                    && s.cross_numa == cross
            })
        })
        .max_by(|a, b| a.gbps.median.total_cmp(&b.gbps.median))
}

/// Every device measured, with its drive counts (NUMA-local, cross-NUMA), ascending.
fn devices(p: &Profile) -> BTreeMap<String, (BarDevice, Vec<usize>, Vec<usize>)> {
    let mut out: BTreeMap<String, (BarDevice, Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for m in p.measurements_of(PathId::NvmeBar1) {
        let Some(s) = spec(m) else { continue };
        let e = out
            .entry(s.device.key())
            .or_insert_with(|| (s.device.clone(), Vec::new(), Vec::new()));
        let counts = if s.cross_numa { &mut e.2 } else { &mut e.1 };
        if !counts.contains(&s.drives.len()) {
            counts.push(s.drives.len());
            counts.sort_unstable();
        }
    }
    out
}

/// `(a - b) / a` in %.
fn under_pct(a: f64, b: f64) -> Option<f64> {
    (a > 0.0).then(|| (a - b) / a * 100.0)
}

pub(crate) fn fill(p: &mut Profile) {
    for (key, (device, local, cross)) in devices(p) {
        let prefix = match device {
            BarDevice::GpuBar1 { .. } => "bar1",
            BarDevice::PciBar { .. } => "bar",
        };
        let gbps = |memory, k, x| best(p, &device, memory, k, x).map(|m| m.gbps.median);
        let mut e = Bar1Profile {
            bdf: Some(device.bdf().to_string()),
            ..Bar1Profile::default()
        };
        let mut bar_local = Vec::new();
        for &k in &local {
            let host = gbps(DmaTarget::HostRam, k, false);
            let bar = gbps(DmaTarget::Bar, k, false);
            if let Some(h) = host {
                e.numa_local.insert(format!("host_ram_{k}drive_gbps"), h);
            }
            if let Some(b) = bar {
                e.numa_local.insert(format!("{prefix}_{k}drive_gbps"), b);
                bar_local.push((k, b));
            }
            if let Some(o) = host.zip(bar).and_then(|(h, b)| under_pct(h, b)) {
                e.numa_local.insert(format!("overhead_{k}drive_pct"), o);
            }
        }
        for &k in &cross {
            let host = gbps(DmaTarget::HostRam, k, true);
            let bar = gbps(DmaTarget::Bar, k, true);
            if let Some(h) = host {
                e.cross_numa.insert(format!("host_ram_{k}drive_gbps"), h);
            }
            if let Some(b) = bar {
                e.cross_numa.insert(format!("{prefix}_{k}drive_gbps"), b);
                let local = gbps(DmaTarget::Bar, k, false);
                if let Some(pen) = local.and_then(|l| under_pct(l, b)) {
                    e.cross_numa.insert("penalty_vs_local_pct".into(), pen);
                }
            }
        }
        e.saturated = saturated(&bar_local);
        if e.numa_local.is_empty() && e.cross_numa.is_empty() {
            continue;
        }
        match device {
            BarDevice::GpuBar1 { .. } => p.bar1.insert(key, e),
            BarDevice::PciBar { .. } => p.pci_bar.insert(key, e),
        };
    }
}

/// Whether adding drives gained under [`SATURATION_GAIN`] at some step of `(drives, gbps)`
/// (ascending drives); `None` with fewer than two counts.
pub fn saturated(figures: &[(usize, f64)]) -> Option<bool> {
    (figures.len() >= 2).then(|| saturated_at(figures).is_some())
}

/// The first drive count of `(drives, gbps)` (ascending drives) past which adding drives
/// gained under [`SATURATION_GAIN`]; `None` where every step gained more, or fewer than two.
pub fn saturated_at(figures: &[(usize, f64)]) -> Option<usize> {
    figures
        .windows(2)
        .find(|w| w[1].1 < w[0].1 * (1.0 + SATURATION_GAIN))
        .map(|w| w[0].0)
}

/// The `p2p_cold_*` ceilings: GPU BAR1's NUMA-local figures per drive count (the best GPU's,
/// and each GPU's), and each GPU's cross-NUMA one. A PCI BAR stand-in gives none.
pub(crate) fn ceilings(p: &Profile, c: &mut Ceilings) {
    let mut best_of_count: BTreeMap<usize, &Measurement> = BTreeMap::new();
    for (_, (device, local, cross)) in devices(p) {
        let BarDevice::GpuBar1 { gpu, .. } = &device else {
            continue;
        };
        for &k in &cross {
            let l = best(p, &device, DmaTarget::Bar, k, false);
            let x = best(p, &device, DmaTarget::Bar, k, true);
            if let (Some(l), Some(x)) = (l, x) {
                c.derived(
                    ceiling_key::p2p_cold_cross_numa_penalty(gpu),
                    CeilingMeta::penalty_pct(Some(PathId::NvmeBar1))
                        .gpu(gpu)
                        .drives(k as u32),
                    under_pct(l.gbps.median, x.gbps.median),
                    format!(
                        "(NUMA-local − cross-NUMA) / NUMA-local × 100, NVMe → {gpu} BAR1 over {k} \
                         drives"
                    ),
                    &[l, x],
                );
            }
        }
        // Where adding drives stopped paying: the drive count, derived from the local figures.
        let local_best: Vec<&Measurement> = local
            .iter()
            .filter_map(|&k| best(p, &device, DmaTarget::Bar, k, false))
            .collect();
        let figures: Vec<(usize, f64)> = local
            .iter()
            .zip(&local_best)
            .map(|(&k, m)| (k, m.gbps.median))
            .collect();
        if local_best.len() == local.len() {
            if let Some(k) = saturated_at(&figures) {
                c.derived(
                    ceiling_key::p2p_cold_saturated(gpu),
                    CeilingMeta::drive_count(Some(PathId::NvmeBar1)).gpu(gpu),
                    Some(k as f64),
                    format!(
                        "the first drive count past which NVMe → {gpu} BAR1 (NUMA-local) gained \
                         under {} % per step of drives",
                        SATURATION_GAIN * 100.0
                    ),
                    &local_best,
                );
            }
        }
        for (counts, x) in [(&local, false), (&cross, true)] {
            for &k in counts {
                let Some(m) = best(p, &device, DmaTarget::Bar, k, x) else {
                    continue;
                };
                let key = if x {
                    ceiling_key::p2p_cold_gpu_cross_numa(k, gpu)
                } else {
                    ceiling_key::p2p_cold_gpu(k, gpu)
                };
                c.measured(
                    key,
                    CeilingMeta::gbps(Some(PathId::NvmeBar1))
                        .gpu(gpu)
                        .drives(k as u32)
                        .numa(if x { Numa::Cross } else { Numa::Local }),
                    Some(m.gbps.median),
                    Some(m),
                );
                if !x {
                    let slot = best_of_count.entry(k).or_insert(m);
                    if m.gbps.median > slot.gbps.median {
                        *slot = m;
                    }
                }
            }
        }
    }
    for (k, m) in best_of_count {
        c.measured(
            ceiling_key::p2p_cold(k),
            CeilingMeta::gbps(Some(PathId::NvmeBar1))
                .drives(k as u32)
                .numa(Numa::Local),
            Some(m.gbps.median),
            Some(m),
        );
    }
}

/// The spec's sanity rule: where a device's 1-drive host-RAM figure lies more than
/// [`HARNESS_SHORTFALL`] under spdk_nvme_perf's best read of the same drive at the same
/// command size, the harness may be adding overhead.
pub(crate) fn harness_warnings(p: &Profile) -> Vec<WarningKind> {
    let mut out = Vec::new();
    for (key, (device, local, _)) in devices(p) {
        if !local.contains(&1) {
            continue;
        }
        let Some(m) = best(p, &device, DmaTarget::HostRam, 1, false) else {
            continue;
        };
        let Some(s) = spec(m) else { continue };
        let perf = p
            .measurements_of(PathId::NvmeRead)
            .filter(|r| r.engine.as_str() == "spdk-perf")
            .filter(|r| {
                r.spec.nvme().is_some_and(|n| {
                    n.drive_sweep() && n.drives == s.drives && n.block_bytes == s.block_bytes
                })
            })
            .max_by(|a, b| a.gbps.median.total_cmp(&b.gbps.median));
        let Some(perf) = perf else { continue };
        if m.gbps.median < perf.gbps.median * (1.0 - HARNESS_SHORTFALL) {
            out.push(WarningKind::HarnessOverhead {
                device: key,
                drive: s.drives[0].clone(),
                host_ram_gbps: m.gbps.median,
                perf_gbps: perf.gbps.median,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturation_is_a_step_that_gains_under_five_percent() {
        assert_eq!(saturated(&[(1, 4.3)]), None);
        assert_eq!(saturated(&[(1, 4.3), (4, 20.0), (6, 21.5)]), Some(false));
        assert_eq!(saturated(&[(1, 4.3), (4, 20.0), (6, 20.9)]), Some(true));
    }
}
