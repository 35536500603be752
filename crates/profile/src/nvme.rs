//! The spec's `nvme:` fields and NVMe ceilings, from the Path 1/2 sweeps, Step 3's latency
//! probes and the long drive tests. Figures come from drives only: a `--target` file or device
//! is never a drive ceiling (its long tests are kept in `nvme.long_tests`, under its path).

use crate::Ceilings;
use hwc_model::ceiling_key::{self, NvmeDir};
use hwc_model::long_tests::{
    cache_speedup, can_change_power_state_when_idle, has_read_cache, transition_at, IdleGap,
    NvmeLongTests, PowerStatesResult, ReadCacheResult, POWER_TRANSITION_FACTOR,
    POWER_TRANSITION_MIN_EXCESS_US, READ_CACHE_SPEEDUP_THRESHOLD,
};
use hwc_model::profile::{IoSizeSweep, NvmeProfile};
use hwc_model::{
    size_label, CeilingMeta, EngineId, Measurement, NvmePattern, NvmeSpec, NvmeTest, PathId,
    Profile, Topology,
};
use std::collections::BTreeMap;

/// Fraction of the peak that defines the knee (the optimal chunk size).
pub const KNEE_FRACTION: f64 = 0.95;
/// QD16 and QD32 within this fraction of each other: the drives are link-saturated.
pub const SATURATION_TOLERANCE: f64 = 0.02;

/// A drive sweep case (not a latency probe, not a `--target`).
pub fn is_drive_sweep(m: &Measurement) -> bool {
    m.spec.nvme().is_some_and(NvmeSpec::drive_sweep)
}

fn nvme(m: &Measurement) -> Option<&NvmeSpec> {
    m.spec.nvme()
}

fn queue_depth(m: &Measurement) -> Option<u32> {
    nvme(m).map(|s| s.queue_depth)
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

/// The measurements of the 1-drive size sweep at QD 32 (the spec's `io_size_sweep_*`), or at the
/// deepest QD measured, of one engine: where several measured it (the kernel's and SPDK's), the
/// one with the fastest point.
pub fn size_sweep_points(ms: &[Measurement], path: PathId) -> Vec<&Measurement> {
    let one: Vec<&Measurement> = sweeps(ms, path)
        .filter(|m| m.spec.drives().len() == 1)
        .collect();
    let qd = if one.iter().any(|m| queue_depth(m) == Some(32)) {
        Some(32)
    } else {
        one.iter().filter_map(|m| queue_depth(m)).max()
    };
    let at_qd: Vec<&Measurement> = one.into_iter().filter(|m| queue_depth(m) == qd).collect();
    let fastest = at_qd
        .iter()
        .max_by(|a, b| a.gbps.median.total_cmp(&b.gbps.median))
        .map(|m| m.engine.clone());
    at_qd
        .into_iter()
        .filter(|m| Some(&m.engine) == fastest.as_ref())
        .collect()
}

fn size_sweep(ms: &[Measurement], path: PathId) -> Option<IoSizeSweep> {
    let points: Vec<(u64, f64)> = size_sweep_points(ms, path)
        .iter()
        .map(|m| (m.spec.size_bytes(), m.gbps.median))
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
        engine: size_sweep_points(ms, path)
            .first()
            .map(|m| m.engine.clone()),
    })
}

/// Per drive count (`1_drive`, …), the sweep case with the highest median: the measurement
/// `nvme.raw_*_gbps` and its ceilings are the medians of.
pub fn raw_picks(ms: &[Measurement], path: PathId) -> BTreeMap<usize, &Measurement> {
    let mut best: BTreeMap<usize, &Measurement> = BTreeMap::new();
    for m in sweeps(ms, path) {
        let k = m.spec.drives().len();
        if best.get(&k).is_none_or(|b| m.gbps.median > b.gbps.median) {
            best.insert(k, m);
        }
    }
    best
}

/// Per drive count: the figure, the drives it used and the engine it came from.
struct PerCount {
    gbps: BTreeMap<String, f64>,
    used: BTreeMap<String, Vec<String>>,
    engines: BTreeMap<String, EngineId>,
}

fn per_count(ms: &[Measurement], path: PathId) -> PerCount {
    let best = raw_picks(ms, path);
    let mut p = PerCount {
        gbps: BTreeMap::new(),
        used: BTreeMap::new(),
        engines: BTreeMap::new(),
    };
    for (&k, m) in &best {
        p.gbps.insert(count_key(k), m.gbps.median);
        p.used.insert(count_key(k), m.spec.drives().to_vec());
        p.engines.insert(count_key(k), m.engine.clone());
    }
    p
}

/// Fill the sweep-derived fields and each drive's latencies.
pub fn fill(topo: &Topology, ms: &[Measurement], n: &mut NvmeProfile) {
    let read = per_count(ms, PathId::NvmeRead);
    (n.raw_read_gbps, n.read_drives_used, n.raw_read_engines) =
        (read.gbps, read.used, read.engines);
    let write = per_count(ms, PathId::NvmeWrite);
    (n.raw_write_gbps, n.write_drives_used, n.raw_write_engines) =
        (write.gbps, write.used, write.engines);
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
                    && nvme(m).is_some_and(|s| {
                        s.test == NvmeTest::Latency
                            && !s.target
                            && s.queue_depth == qd
                            && s.drives == [key.clone()]
                    })
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
    n.long_tests = long_tests(ms);
    merge_long_tests(n, &[]);
}

/// The long test a measurement belongs to, and the device it ran on.
fn long_test_of(m: &Measurement) -> Option<(NvmeTest, &str)> {
    let s = nvme(m)?;
    let device = s.drives.first()?;
    matches!(
        s.test,
        NvmeTest::ReadCache | NvmeTest::PowerStates | NvmeTest::GcSettle
    )
    .then_some((s.test, device.as_str()))
}

fn entry<'a>(v: &'a mut Vec<NvmeLongTests>, device: &str) -> &'a mut NvmeLongTests {
    if let Some(i) = v.iter().position(|e| e.device == device) {
        return &mut v[i];
    }
    v.push(NvmeLongTests {
        device: device.to_string(),
        read_cache: None,
        power_states: None,
        gc_settle: None,
    });
    v.last_mut().expect("just pushed")
}

/// The read-cache and power-state tests' results, from the runner's measurements, in the order
/// the devices first appear.
pub fn long_tests(ms: &[Measurement]) -> Vec<NvmeLongTests> {
    let mut out: Vec<NvmeLongTests> = Vec::new();
    let mut hot: BTreeMap<&str, &Measurement> = BTreeMap::new();
    let mut cold: BTreeMap<&str, &Measurement> = BTreeMap::new();
    let mut idle: BTreeMap<&str, Vec<&Measurement>> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for m in ms.iter().filter(|m| m.latency_us.is_some()) {
        let Some((test, device)) = long_test_of(m) else {
            continue;
        };
        if !order.contains(&device) {
            order.push(device);
        }
        match (test, nvme(m).map(|s| &s.pattern)) {
            (NvmeTest::ReadCache, Some(NvmePattern::Hot { .. })) => {
                hot.insert(device, m);
            }
            (NvmeTest::ReadCache, _) => {
                cold.insert(device, m);
            }
            (NvmeTest::PowerStates, Some(NvmePattern::Idle { .. })) => {
                idle.entry(device).or_default().push(m);
            }
            _ => {}
        }
    }
    let lat = |m: &Measurement| m.latency_us.expect("filtered on latency_us");
    for device in order {
        if let (Some(h), Some(c)) = (hot.get(device), cold.get(device)) {
            // Hot reads confined to a region (always, as planned), and both medians usable.
            if let (Some(region), Some(speedup)) = (
                match nvme(h).map(|s| &s.pattern) {
                    Some(NvmePattern::Hot { region_bytes }) => Some(*region_bytes),
                    _ => None,
                },
                cache_speedup(lat(c).median, lat(h).median),
            ) {
                entry(&mut out, device).read_cache = Some(ReadCacheResult {
                    hot_key: h.key.clone(),
                    hot_region_bytes: region,
                    hot_latency_us: lat(h),
                    cold_key: c.key.clone(),
                    cold_latency_us: lat(c),
                    cache_speedup: speedup,
                    has_read_cache: has_read_cache(speedup),
                    speedup_threshold: READ_CACHE_SPEEDUP_THRESHOLD,
                });
            }
        }
        let Some(cases) = idle.get(device) else {
            continue;
        };
        let idle_ms = |m: &Measurement| match nvme(m).map(|s| &s.pattern) {
            Some(NvmePattern::Idle { idle_ms }) => Some(*idle_ms),
            _ => None,
        };
        let Some(base) = cases.iter().find(|m| idle_ms(m) == Some(0)) else {
            continue;
        };
        let base_median = lat(base).median;
        let mut gaps: Vec<IdleGap> = cases
            .iter()
            .filter(|m| idle_ms(m) != Some(0))
            .map(|m| IdleGap {
                idle_s: idle_ms(m).unwrap_or(0) as f64 / 1e3,
                key: m.key.clone(),
                latency_us: lat(m),
                vs_baseline: lat(m).median / base_median,
            })
            .collect();
        // Without a measured gap there is nothing to find a step in: no record, not a "none".
        if gaps.is_empty() {
            continue;
        }
        gaps.sort_by(|a, b| a.idle_s.total_cmp(&b.idle_s));
        let medians: Vec<(f64, f64)> = gaps
            .iter()
            .map(|g| (g.idle_s, g.latency_us.median))
            .collect();
        let step = transition_at(base_median, &medians);
        entry(&mut out, device).power_states = Some(PowerStatesResult {
            baseline_key: base.key.clone(),
            baseline_latency_us: lat(base),
            gaps,
            transition_factor: POWER_TRANSITION_FACTOR,
            min_excess_us: Some(POWER_TRANSITION_MIN_EXCESS_US),
            latency_step_at_s: step,
            // Until the drive's Identify says otherwise (merge_long_tests).
            drive_can_change_power_state: None,
            power_state_transition_at_s: step,
        });
    }
    out
}

/// Add long-test records measured outside the runner (gc-settle) to the profile, by device, and
/// copy every drive's results into the spec's per-drive fields. A latency step after idle on a
/// drive whose Identify reports no APST and no non-operational power state is not a power-state
/// transition of the drive: its `power_state_transition_at_s` is null.
pub fn merge_long_tests(n: &mut NvmeProfile, extra: &[NvmeLongTests]) {
    for x in extra {
        let e = entry(&mut n.long_tests, &x.device);
        if x.read_cache.is_some() {
            e.read_cache = x.read_cache.clone();
        }
        if x.power_states.is_some() {
            e.power_states = x.power_states.clone();
        }
        if x.gc_settle.is_some() {
            e.gc_settle = x.gc_settle.clone();
        }
    }
    for d in &mut n.drives {
        let key = d.bdf.clone().unwrap_or_else(|| d.name.clone());
        let Some(t) = n.long_tests.iter_mut().find(|t| t.device == key) else {
            continue;
        };
        if let Some(p) = &mut t.power_states {
            p.drive_can_change_power_state =
                can_change_power_state_when_idle(d.apst_supported, &d.power_states);
            p.power_state_transition_at_s = match p.drive_can_change_power_state {
                Some(false) => None,
                _ => p.latency_step_at_s,
            };
        }
        if let Some(r) = &t.read_cache {
            d.has_read_cache = Some(r.has_read_cache);
            d.cache_speedup = Some(r.cache_speedup);
            d.read_cache_hot_latency_us = Some(r.hot_latency_us.median);
            d.read_cache_cold_latency_us = Some(r.cold_latency_us.median);
        }
        if let Some(p) = &t.power_states {
            d.power_state_transition_at_s = Some(p.power_state_transition_at_s);
        }
        if let Some(g) = &t.gc_settle {
            d.sustained_write_mbps = Some(g.sustained_write_mbps.median);
            d.recommended_gc_settle_s = Some(g.recommended_gc_settle_s);
        }
    }
}

/// The GPU with the best NUMA-local H2D peak (the first of equals) and that peak: the warm-path
/// ceiling feeding the cold path.
pub fn best_h2d_gpu(p: &Profile) -> Option<(&str, f64)> {
    p.gpus
        .iter()
        .filter_map(|(name, g)| Some((name.as_str(), g.h2d_peak_numa_local_gbps?)))
        .reduce(|a, b| if b.1 > a.1 { b } else { a })
}

/// The best NUMA-local H2D peak over GPUs (the warm-path ceiling feeding the cold path).
pub fn best_h2d_peak(p: &Profile) -> Option<f64> {
    best_h2d_gpu(p).map(|(_, v)| v)
}

/// The spec's NVMe and dispatcher-cold ceilings with their sources, and the cold path's
/// bottleneck per drive count.
pub fn ceilings(p: &Profile, c: &mut Ceilings) -> BTreeMap<String, String> {
    let n = &p.nvme;
    let ms = &p.measurements;
    let (read, write) = (
        raw_picks(ms, PathId::NvmeRead),
        raw_picks(ms, PathId::NvmeWrite),
    );
    let drives = |k: usize| u32::try_from(k).unwrap_or(u32::MAX);
    for (picks, path, dir) in [
        (&read, PathId::NvmeRead, NvmeDir::Read),
        (&write, PathId::NvmeWrite, NvmeDir::Write),
    ] {
        for (&k, m) in picks.iter() {
            c.measured(
                ceiling_key::nvme_raw(k, dir),
                CeilingMeta::gbps(Some(path)).drives(drives(k)),
                Some(m.gbps.median),
                Some(m),
            );
        }
    }
    for (path, sweep, dir) in [
        (PathId::NvmeRead, &n.io_size_sweep_read_gbps, NvmeDir::Read),
        (
            PathId::NvmeWrite,
            &n.io_size_sweep_write_gbps,
            NvmeDir::Write,
        ),
    ] {
        let points = size_sweep_points(ms, path);
        let qd = points
            .first()
            .and_then(|m| queue_depth(m))
            .map(|q| format!(" at QD {q}"))
            .unwrap_or_default();
        c.derived(
            ceiling_key::nvme_optimal_chunk(dir),
            CeilingMeta::bytes(Some(path)).drives(1),
            sweep.as_ref().and_then(|s| s.optimal_bytes).map(|b| b as f64),
            format!(
                "knee of the 1-drive {} size sweep{qd}: the smallest block size reaching {:.0} % of its peak median",
                dir.as_str(),
                KNEE_FRACTION * 100.0
            ),
            &points,
        );
    }
    let mut bottleneck = BTreeMap::new();
    let Some((gpu, h2d)) = best_h2d_gpu(p) else {
        return bottleneck;
    };
    let h2d_pick = p
        .gpus
        .get(gpu)
        .and_then(|g| crate::derive::gpu_picks(gpu, g.numa_node, ms).h2d_peak_numa_local);
    for (&k, m) in &read {
        let v = m.gbps.median;
        let bound = if v < h2d { "nvme" } else { "h2d" };
        c.derived(
            ceiling_key::dispatcher_cold(k),
            CeilingMeta::gbps(None).drives(drives(k)).gpu(gpu),
            Some(v.min(h2d)),
            format!(
                "min of {} and the best NUMA-local H2D peak ({}): {} bounds it",
                ceiling_key::nvme_raw(k, NvmeDir::Read),
                ceiling_key::warm_h2d_peak(gpu),
                if bound == "nvme" { "NVMe" } else { "H2D" }
            ),
            &[Some(*m), h2d_pick]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>(),
        );
        bottleneck.insert(count_key(k), bound.to_string());
    }
    if let Some(one) = read.get(&1).filter(|m| m.gbps.median > 0.0) {
        c.derived(
            ceiling_key::DISPATCHER_COLD_CROSSOVER.into(),
            CeilingMeta::drive_count(None).gpu(gpu),
            Some(h2d / one.gbps.median),
            format!(
                "the best NUMA-local H2D peak ({}) / {}: the drive count from which H2D caps the cold path",
                ceiling_key::warm_h2d_peak(gpu),
                ceiling_key::nvme_raw(1, NvmeDir::Read)
            ),
            &[h2d_pick, Some(*one)]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>(),
        );
    }
    bottleneck
}

#[cfg(test)]
mod tests {
    use super::*;
    use hwc_model::long_tests::{GcSettleResult, SettleProbe};
    use hwc_model::topology::NvmeDrive;
    use hwc_model::{CaseResult, EngineId, NvmeSpec, Plan, Provenance, Spec, Stats};
    use proptest::prelude::*;

    fn stats(median: f64) -> Stats {
        Stats {
            median,
            min: median * 0.9,
            max: median * 1.2,
            spread_pct: 30.0,
            n: 3,
        }
    }

    fn lat_case(
        key: &str,
        device: &str,
        pattern: &str,
        idle_ms: Option<u64>,
        us: f64,
    ) -> CaseResult {
        // `nvme_read/io-uring/<test>/…`.
        let test = match key.split('/').nth(2) {
            Some("read-cache") => NvmeTest::ReadCache,
            Some("power-states") => NvmeTest::PowerStates,
            Some("latency") => NvmeTest::Latency,
            _ => NvmeTest::Sweep,
        };
        CaseResult {
            measurement: Measurement {
                key: key.into(),
                path: PathId::NvmeRead,
                engine: EngineId::new("io-uring"),
                cell: key.splitn(3, '/').nth(2).unwrap_or(key).into(),
                spec: Spec::Nvme(NvmeSpec {
                    test,
                    block_bytes: 4096,
                    queue_depth: 1,
                    drives: vec![device.into()],
                    target: false,
                    pattern: match (pattern, idle_ms) {
                        ("hot", _) => NvmePattern::Hot {
                            region_bytes: 1 << 20,
                        },
                        (_, Some(idle_ms)) => NvmePattern::Idle { idle_ms },
                        ("random", None) => NvmePattern::Random,
                        _ => NvmePattern::Sequential,
                    },
                }),
                bytes_per_rep: 4096,
                gbps: stats(4096.0 / us / 1e3),
                cold_gbps: None,
                warmup: 0,
                latency_us: Some(stats(us)),
                latency_p50_us: None,
                latency_p99_us: None,
                placement: None,
                cache_resident: false,
                contended: false,
                spread_limit_pct: None,
                evidence: Default::default(),
                notes: vec![],
            },
            samples_gbps: vec![1.0; 3],
            warmup_gbps: vec![],
            case_seconds: Some(1.0),
            phase_seconds: None,
            scheduling: None,
        }
    }

    fn drive(name: &str, bdf: &str) -> NvmeDrive {
        NvmeDrive {
            name: name.into(),
            bdf: Some(bdf.into()),
            ..NvmeDrive::default()
        }
    }

    #[test]
    fn the_size_sweep_is_one_engine_s_the_one_with_the_fastest_point() {
        let point = |engine: &'static str, block: u64, gbps: f64| {
            let mut m =
                lat_case("nvme_read/x/1drive", "0000:11:00.0", "seq", None, 1.0).measurement;
            m.engine = EngineId::new(engine);
            m.key = format!("nvme_read/{engine}/1drive/{block}/qd32");
            m.gbps = stats(gbps);
            if let Spec::Nvme(s) = &mut m.spec {
                (s.block_bytes, s.queue_depth) = (block, 32);
            }
            m
        };
        let ms = [
            point("io-uring", 128 << 10, 1.0),
            point("io-uring", 1 << 20, 1.5),
            point("spdk-perf", 128 << 10, 2.0),
            point("spdk-perf", 1 << 20, 2.05),
        ];
        let keys: Vec<&str> = size_sweep_points(&ms, PathId::NvmeRead)
            .iter()
            .map(|m| m.key.as_str())
            .collect();
        assert_eq!(
            keys,
            [
                "nvme_read/spdk-perf/1drive/131072/qd32",
                "nvme_read/spdk-perf/1drive/1048576/qd32"
            ]
        );
        let sweep = size_sweep(&ms, PathId::NvmeRead).unwrap();
        assert_eq!(sweep.optimal_bytes, Some(128 << 10));
        assert_eq!(sweep.points["128kib"], 2.0);
    }

    #[test]
    fn long_tests_become_the_spec_fields_of_their_drive() {
        let (a, b, c, e) = (
            "0000:10:00.0",
            "0000:11:00.0",
            "0000:13:00.0",
            "0000:14:00.0",
        );
        let qemu_like = NvmeDrive {
            apst_supported: Some(false),
            power_states: vec![hwc_model::topology::PowerStateDescriptor {
                state: 0,
                max_power_w: 25.0,
                non_operational: false,
                entry_latency_us: 0,
                exit_latency_us: 0,
            }],
            ..drive("nvme3", c)
        };
        let results = vec![
            // The QD1 latency probe shares pattern and QD with the cold reads: not confused.
            lat_case(
                "nvme_read/io-uring/latency/nvme0/4KiB-random/qd1",
                a,
                "random",
                None,
                70.0,
            ),
            lat_case(
                "nvme_read/io-uring/read-cache/nvme0/cold",
                a,
                "random",
                None,
                90.0,
            ),
            lat_case(
                "nvme_read/io-uring/read-cache/nvme0/hot",
                a,
                "hot",
                None,
                30.0,
            ),
            lat_case(
                "nvme_read/io-uring/power-states/nvme0/idle-0s",
                a,
                "idle",
                Some(0),
                80.0,
            ),
            lat_case(
                "nvme_read/io-uring/power-states/nvme0/idle-500ms",
                a,
                "idle",
                Some(500),
                650.0,
            ),
            lat_case(
                "nvme_read/io-uring/power-states/nvme0/idle-10ms",
                a,
                "idle",
                Some(10),
                85.0,
            ),
            lat_case(
                "nvme_read/io-uring/power-states/nvme0/idle-100ms",
                a,
                "idle",
                Some(100),
                170.0,
            ),
            // nvme1: no transition, no read cache.
            lat_case(
                "nvme_read/io-uring/read-cache/nvme1/cold",
                b,
                "random",
                None,
                90.0,
            ),
            lat_case(
                "nvme_read/io-uring/read-cache/nvme1/hot",
                b,
                "hot",
                None,
                80.0,
            ),
            lat_case(
                "nvme_read/io-uring/power-states/nvme1/idle-0s",
                b,
                "idle",
                Some(0),
                80.0,
            ),
            lat_case(
                "nvme_read/io-uring/power-states/nvme1/idle-10ms",
                b,
                "idle",
                Some(10),
                90.0,
            ),
            // nvme3 (no APST, no non-operational state): a step, but not the drive's.
            lat_case(
                "nvme_read/io-uring/power-states/nvme3/idle-0s",
                c,
                "idle",
                Some(0),
                400.0,
            ),
            lat_case(
                "nvme_read/io-uring/power-states/nvme3/idle-10ms",
                c,
                "idle",
                Some(10),
                2600.0,
            ),
            // nvme4: the baseline only (its gaps did not finish): no record, not a "none".
            lat_case(
                "nvme_read/io-uring/power-states/nvme4/idle-0s",
                e,
                "idle",
                Some(0),
                80.0,
            ),
            // A target: kept under its path, never a drive field.
            lat_case(
                "nvme_read/io-uring/read-cache/target/cold",
                "/tmp/f",
                "random",
                None,
                9.0,
            ),
            lat_case(
                "nvme_read/io-uring/read-cache/target/hot",
                "/tmp/f",
                "hot",
                None,
                3.0,
            ),
        ];
        let topo = Topology {
            nvme: vec![
                drive("nvme0", a),
                drive("nvme1", b),
                drive("nvme2", "0000:12:00.0"),
                qemu_like,
                drive("nvme4", e),
            ],
            ..Topology::default()
        };
        let p = crate::build(
            &topo,
            &Plan::default(),
            &results,
            &[],
            &[],
            &[],
            Provenance::default(),
        );
        let [d0, d1, d2, d3, d4] = &p.nvme.drives[..] else {
            panic!("five drives");
        };
        assert_eq!(
            d0.read_latency_qd1_us,
            Some(70.0),
            "the probe, not the cold reads"
        );
        assert_eq!(
            (d0.has_read_cache, d0.cache_speedup),
            (Some(true), Some(3.0))
        );
        assert_eq!(
            (d0.read_cache_hot_latency_us, d0.read_cache_cold_latency_us),
            (Some(30.0), Some(90.0))
        );
        assert_eq!(
            d0.power_state_transition_at_s,
            Some(Some(0.5)),
            "170 µs after 100 ms is above 2 × 80 µs but only 90 µs above it; 650 µs after 500 ms \
             is a step"
        );
        assert_eq!(
            (d1.has_read_cache, d1.cache_speedup),
            (Some(false), Some(90.0 / 80.0))
        );
        assert_eq!(
            d1.power_state_transition_at_s,
            Some(None),
            "measured: no transition"
        );
        assert_eq!(d2.has_read_cache, None, "not measured: absent");
        assert_eq!(d2.power_state_transition_at_s, None);
        assert_eq!(
            d3.power_state_transition_at_s,
            Some(None),
            "a step, on a drive that cannot change power state by itself: not a transition"
        );
        assert_eq!(
            d4.power_state_transition_at_s, None,
            "no gap measured: absent"
        );
        assert_eq!(p.nvme.long_tests.len(), 4);
        let ps3 = p.nvme.long_tests[2].power_states.as_ref().unwrap();
        assert_eq!(
            (
                ps3.latency_step_at_s,
                ps3.drive_can_change_power_state,
                ps3.power_state_transition_at_s
            ),
            (Some(0.01), Some(false), None)
        );
        let ps = p.nvme.long_tests[0].power_states.as_ref().unwrap();
        let gaps: Vec<f64> = ps.gaps.iter().map(|g| g.idle_s).collect();
        assert_eq!(gaps, [0.01, 0.1, 0.5], "shortest first");
        assert!((ps.gaps[2].vs_baseline - 650.0 / 80.0).abs() < 1e-12);
        assert_eq!(ps.baseline_latency_us.median, 80.0);
        assert_eq!(
            (ps.latency_step_at_s, ps.drive_can_change_power_state),
            (Some(0.5), None),
            "no Identify: unknown, the step stands"
        );
        assert_eq!(ps.min_excess_us, Some(500.0));
        let t = &p.nvme.long_tests[3];
        assert_eq!(t.device, "/tmp/f");
        assert_eq!(t.read_cache.as_ref().unwrap().cache_speedup, 3.0);

        // YAML: a measured "no transition" is null; an unmeasured field is absent.
        let y = crate::to_yaml(&p).unwrap();
        assert_eq!(
            y.matches("power_state_transition_at_s: null").count(),
            4,
            "{y}"
        );
        assert_eq!(
            y.matches("power_state_transition_at_s: 0.5").count(),
            2,
            "{y}"
        );
        let back = crate::from_yaml(&y).unwrap();
        assert_eq!(back.nvme, p.nvme);
    }

    #[test]
    fn gc_settle_records_merge_into_their_drive() {
        let a = "0000:10:00.0";
        let topo = Topology {
            nvme: vec![drive("nvme0", a)],
            ..Topology::default()
        };
        let mut p = crate::build(
            &topo,
            &Plan::default(),
            &[],
            &[],
            &[],
            &[],
            Provenance::default(),
        );
        assert!(p.nvme.long_tests.is_empty());
        let gc = |settled: Option<f64>| GcSettleResult {
            key: "nvme_write/io-uring/gc-settle/nvme0".into(),
            write_block_bytes: 128 << 10,
            write_queue_depth: 32,
            interval_s: 1.0,
            baseline_latency_us: stats(80.0),
            probe_reads: 32,
            probe_region_bytes: Some(64 << 20),
            write_intervals_mbps: vec![3000.0, 1500.0, 1400.0],
            bytes_written: 6 << 30,
            sustained_write_mbps: stats(1400.0),
            settle_max_s: 10,
            settle_probes: vec![SettleProbe {
                at_s: 0.0,
                latency_us: stats(85.0),
            }],
            settled_at_s: settled,
            recommended_gc_settle_s: settled.map(|_| 0),
        };
        merge_long_tests(
            &mut p.nvme,
            &[NvmeLongTests {
                device: a.into(),
                read_cache: None,
                power_states: None,
                gc_settle: Some(gc(None)),
            }],
        );
        let d = &p.nvme.drives[0];
        assert_eq!(d.sustained_write_mbps, Some(1400.0));
        assert_eq!(
            d.recommended_gc_settle_s,
            Some(None),
            "measured, not settled: null"
        );
        let y = crate::to_yaml(&p).unwrap();
        assert!(y.contains("recommended_gc_settle_s: null"), "{y}");
        assert_eq!(crate::from_yaml(&y).unwrap().nvme, p.nvme);
        merge_long_tests(
            &mut p.nvme,
            &[NvmeLongTests {
                device: a.into(),
                read_cache: None,
                power_states: None,
                gc_settle: Some(gc(Some(0.0002))),
            }],
        );
        assert_eq!(p.nvme.drives[0].recommended_gc_settle_s, Some(Some(0)));
        assert_eq!(p.nvme.long_tests.len(), 1, "one entry per device");
    }

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
