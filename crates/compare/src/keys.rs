//! What a ceiling's key name says about it: its unit, the GPU and drive count it concerns, NUMA
//! locality, and which direction is better. The keys follow the spec (`warm_gpu0_peak_gbps`,
//! `nvme_raw_4drive_read_gbps`, `p2p_cold_4drive_gpu0_cross_numa_gbps`, …).

use serde::Serialize;

/// NUMA locality of a ceiling: the spec's ceilings are NUMA-local unless the key says
/// `cross_numa`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Numa {
    Local,
    Cross,
}

impl Numa {
    pub fn as_str(self) -> &'static str {
        match self {
            Numa::Local => "local",
            Numa::Cross => "cross",
        }
    }
}

/// Labels parsed from a ceiling key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyLabels {
    /// `gpu0`, … when the key names one GPU.
    pub gpu: Option<String>,
    /// The drive count when the key names one (`4drive` → 4).
    pub drives: Option<u32>,
    pub numa: Numa,
    /// The unit suffix: `gbps`, `bytes`, `pct`, `drives`, or `value` when the key has none.
    pub unit: &'static str,
}

/// Which way a value should move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Bandwidth: a drop is a regression.
    HigherIsBetter,
    /// A penalty: a rise is a regression.
    LowerIsBetter,
    /// A size or count (optimal chunk, crossover drives): a change is reported, never a
    /// regression.
    Neutral,
}

fn tokens(key: &str) -> impl Iterator<Item = &str> {
    key.split(['_', '/', '-', '.']).filter(|t| !t.is_empty())
}

fn gpu_token(t: &str) -> bool {
    t.len() > 3 && t.starts_with("gpu") && t[3..].bytes().all(|b| b.is_ascii_digit())
}

/// The first `gpuN` token of a key (`warm_gpu0_gbps`, `h2d/gpu1/local/4MiB/s1`).
pub fn gpu_of(key: &str) -> Option<String> {
    tokens(key).find(|t| gpu_token(t)).map(str::to_string)
}

/// The first `nvmeN` token of a key.
pub fn drive_of(key: &str) -> Option<String> {
    tokens(key)
        .find(|t| {
            t.len() > 4 && t.starts_with("nvme") && t[4..].bytes().all(|b| b.is_ascii_digit())
        })
        .map(str::to_string)
}

fn drives_of(key: &str) -> Option<u32> {
    tokens(key).find_map(|t| t.strip_suffix("drive").and_then(|n| n.parse().ok()))
}

const UNITS: [&str; 4] = ["gbps", "bytes", "pct", "drives"];

pub fn labels(key: &str) -> KeyLabels {
    let last = tokens(key).last().unwrap_or("");
    KeyLabels {
        gpu: gpu_of(key),
        drives: drives_of(key),
        numa: if key.contains("cross_numa") {
            Numa::Cross
        } else {
            Numa::Local
        },
        unit: UNITS
            .iter()
            .find(|u| **u == last)
            .copied()
            .unwrap_or("value"),
    }
}

pub fn direction(key: &str) -> Direction {
    let unit = labels(key).unit;
    if key.contains("penalty") {
        Direction::LowerIsBetter
    } else if key.contains("crossover") || matches!(unit, "bytes" | "drives" | "value") {
        Direction::Neutral
    } else {
        Direction::HigherIsBetter
    }
}

/// Which way a measurement's median GB/s should move. The long drive tests' read cases
/// (`nvme_read/read-cache/…`, `nvme_read/power-states/…`) time single 4 KiB reads at QD 1 —
/// their GB/s is a latency in disguise, of a drive's cache or of its first read after idle,
/// measured over as few as 3 reads — so a change is reported, never a regression. Every other
/// measurement is a bandwidth.
pub fn measurement_direction(key: &str) -> Direction {
    match key.split('/').nth(1) {
        Some("read-cache" | "power-states") => Direction::Neutral,
        _ => Direction::HigherIsBetter,
    }
}

/// A ceiling an efficiency can be computed against: a bandwidth in GB/s that is not a penalty.
pub fn is_bandwidth_ceiling(key: &str) -> bool {
    labels(key).unit == "gbps" && direction(key) == Direction::HigherIsBetter
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_keys_yield_their_labels() {
        let l = labels("warm_gpu0_peak_gbps");
        assert_eq!(
            (l.gpu.as_deref(), l.drives, l.numa, l.unit),
            (Some("gpu0"), None, Numa::Local, "gbps")
        );
        let l = labels("p2p_cold_4drive_gpu1_cross_numa_gbps");
        assert_eq!(
            (l.gpu.as_deref(), l.drives, l.numa),
            (Some("gpu1"), Some(4), Numa::Cross)
        );
        let l = labels("nvme_raw_1drive_read_gbps");
        assert_eq!((l.gpu, l.drives), (None, Some(1)));
        assert_eq!(labels("gpu_d2d_sustained_gbps").gpu, None);
        assert_eq!(labels("host_ram_cross_numa_gbps").numa, Numa::Cross);
        assert_eq!(labels("nvme_optimal_read_chunk_bytes").unit, "bytes");
        assert_eq!(labels("dispatcher_cold_crossover_drives").unit, "drives");
        assert_eq!(labels("p2p_cold_cross_numa_penalty_pct").unit, "pct");
        assert_eq!(labels("odd").unit, "value");
        assert_eq!(gpu_of("h2d/gpu12/local/4MiB/s1").as_deref(), Some("gpu12"));
        assert_eq!(gpu_of("gpux_gbps"), None);
        assert_eq!(drive_of("nvme_read/nvme3/qd32").as_deref(), Some("nvme3"));
    }

    #[test]
    fn directions_follow_what_the_key_measures() {
        assert_eq!(direction("warm_gpu0_gbps"), Direction::HigherIsBetter);
        assert_eq!(
            direction("warm_gpu0_cross_numa_penalty_gbps"),
            Direction::LowerIsBetter
        );
        assert_eq!(
            direction("p2p_cold_cross_numa_penalty_pct"),
            Direction::LowerIsBetter
        );
        assert_eq!(
            direction("nvme_optimal_read_chunk_bytes"),
            Direction::Neutral
        );
        assert_eq!(
            direction("dispatcher_cold_crossover_drives"),
            Direction::Neutral
        );
        assert!(is_bandwidth_ceiling("host_ram_same_numa_gbps"));
        assert!(!is_bandwidth_ceiling("warm_gpu0_cross_numa_penalty_gbps"));
        assert!(!is_bandwidth_ceiling("nvme_optimal_read_chunk_bytes"));
    }
}
