//! Profiles built in memory for the tests.
// Each test binary uses a part of these helpers.
#![allow(dead_code)]

use hwc_compare::compare::{compare_fleet, compare_pair, FleetReport, Node, Options, PairReport};
use hwc_model::topology::LinkTheory;
use hwc_model::{CeilingSource, Measurement, Profile};
use std::borrow::Borrow;

pub fn profile(host: &str, ceilings: &[(&str, f64)]) -> Profile {
    hwc_testkit::ceilings_profile(host, "2026-11-29T19:05:00+00:00", ceilings)
}

pub fn with_measurement(mut p: Profile, key: &str, median: f64, contended: bool) -> Profile {
    let mut m: Measurement = hwc_testkit::h2d_measurement(key, median, 0.0, 10);
    m.warmup = 3;
    m.contended = contended;
    p.measurements.push(m);
    p
}

/// An NVMe measurement `key` of the io_uring engine, of the long test `test`, on `nvme0`.
pub fn with_nvme_measurement(
    mut p: Profile,
    key: &str,
    test: hwc_model::NvmeTest,
    median: f64,
) -> Profile {
    let mut m = hwc_testkit::h2d_measurement(key, median, 0.0, 10);
    m.path = if key.starts_with("nvme_write") {
        hwc_model::PathId::NvmeWrite
    } else {
        hwc_model::PathId::NvmeRead
    };
    m.engine = hwc_model::EngineId::new("io-uring");
    m.spec = hwc_model::Spec::Nvme(hwc_model::NvmeSpec {
        test,
        block_bytes: 4096,
        queue_depth: 1,
        drives: vec!["nvme0".into()],
        target: false,
        pattern: hwc_model::NvmePattern::Random,
    });
    p.measurements.push(m);
    p
}

/// A measurement with its spread and repetition count.
pub fn with_stats(mut p: Profile, key: &str, median: f64, spread_pct: f64, n: u32) -> Profile {
    p.measurements
        .push(hwc_testkit::h2d_measurement(key, median, spread_pct, n));
    p
}

/// A measurement held to a spread limit (`spread_limit_pct`) with this spread.
pub fn with_limit(
    mut p: Profile,
    key: &str,
    median: f64,
    spread_pct: f64,
    limit_pct: u32,
) -> Profile {
    let mut m = hwc_testkit::h2d_measurement(key, median, spread_pct, 12);
    m.spread_limit_pct = Some(limit_pct);
    p.measurements.push(m);
    p
}

/// Say where the ceiling `key` comes from (its record), as the profile builder does.
pub fn with_source(p: Profile, key: &str, source: CeilingSource) -> Profile {
    hwc_testkit::with_sources(p, &[(key, source)])
}

pub fn with_link(mut p: Profile, device: &str, cur: (u32, u32), max: (u32, u32)) -> Profile {
    let theory = |gen: u32, width: u32| {
        hwc_model::pcie_theoretical_gbps(hwc_model::pcie_speed_of_gen(gen).unwrap(), width)
    };
    p.topology.links.push(LinkTheory {
        device: device.into(),
        bdf: format!("0000:{:02x}:00.0", p.topology.links.len() + 1),
        gen: cur.0,
        width: cur.1,
        max_gen: Some(max.0),
        max_width: Some(max.1),
        theoretical_gbps: theory(cur.0, cur.1),
        max_theoretical_gbps: Some(theory(max.0, max.1)),
        degraded: cur != max,
        basis: Default::default(),
        detected: None,
        min_mps_bytes: None,
        tlp_write_gbps: None,
        tlp_read_gbps: None,
    });
    p
}

/// A profile whose `host_ram_same_numa_gbps` ceiling is the median of one host RAM measurement
/// copied with `kernel`, keyed as the plan keys it (`…/t16` for memcpy, `…/t16/streaming`).
/// `None`: a measurement from before the streaming kernel, which names no `copy_kernel` (and
/// was measured with memcpy).
pub fn host_ceiling(host: &str, kernel: Option<&str>, gbps: f64) -> Profile {
    hwc_testkit::with_host_ram_ceiling(profile(host, &[]), kernel, gbps)
}

/// `compare_pair` of a baseline and a candidate, each given as (name, profile).
pub fn pair(baseline: (&str, &Profile), candidate: (&str, &Profile), o: &Options) -> PairReport {
    let node = |(name, profile)| Node { name, profile };
    compare_pair(node(baseline), node(candidate), o)
}

/// `compare_fleet` of nodes given as (name, profile); the profiles owned or borrowed.
pub fn fleet<P: Borrow<Profile>>(nodes: &[(&str, P)], o: &Options) -> FleetReport {
    let list: Vec<Node> = nodes
        .iter()
        .map(|(name, p)| Node {
            name,
            profile: p.borrow(),
        })
        .collect();
    compare_fleet(&list, o)
}
