//! What a ceiling's key name says about it: its unit, the GPU and drive count it concerns, NUMA
//! locality, and which direction is better. The keys follow the spec (`warm_gpu0_peak_gbps`,
//! `nvme_raw_4drive_read_gbps`, `p2p_cold_4drive_gpu0_cross_numa_gbps`, …).

use serde::Serialize;
use std::cmp::Ordering;

/// Keys in the order a reader expects: numbers by value, sizes by bytes (`4MiB` before `16MiB`
/// before `1GiB`), thread and stream counts by count (`t2` before `t16`), the rest as text.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    natural_tokens(a)
        .cmp(&natural_tokens(b))
        .then_with(|| a.cmp(b))
}

/// A key cut into numbers (a size in bytes where a unit follows) and the text between them.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Token<'a> {
    Number(u128),
    Text(&'a str),
}

fn natural_tokens(s: &str) -> Vec<Token<'_>> {
    const UNITS: [(&str, u32); 4] = [("KiB", 10), ("MiB", 20), ("GiB", 30), ("TiB", 40)];
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            let text = rest
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(rest.len());
            out.push(Token::Text(&rest[..text]));
            rest = &rest[text..];
            continue;
        }
        let mut n = rest[..digits].bytes().fold(0u128, |n, d| {
            n.saturating_mul(10).saturating_add(u128::from(d - b'0'))
        });
        rest = &rest[digits..];
        if let Some((unit, shift)) = UNITS.iter().find(|(u, _)| rest.starts_with(u)) {
            n = n.saturating_mul(1u128 << shift);
            rest = &rest[unit.len()..];
        }
        out.push(Token::Number(n));
    }
    out
}

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

/// The first `gpuN` token of a key (`warm_gpu0_gbps`, `h2d/cuda-copy/gpu1/local/4MiB/s1`).
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
        assert_eq!(
            gpu_of("h2d/cuda-copy/gpu12/local/4MiB/s1").as_deref(),
            Some("gpu12")
        );
        assert_eq!(gpu_of("gpux_gbps"), None);
        assert_eq!(
            drive_of("nvme_read/io-uring/nvme3/qd32").as_deref(),
            Some("nvme3")
        );
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

#[cfg(test)]
mod natural_order_tests {
    use super::natural_cmp;

    #[test]
    fn sizes_counts_and_text_sort_as_a_reader_expects() {
        let mut keys = vec![
            "d2d/cuda-copy/gpu0/1GiB/s1",
            "d2d/cuda-copy/gpu0/256MiB/s1",
            "d2d/cuda-copy/gpu0/16MiB/s1",
            "d2d/cuda-copy/gpu0/128KiB/s1",
            "d2d/cuda-copy/gpu0/4MiB/s1",
            "d2d/cuda-copy/gpu0/1MiB/s1",
            "d2d/cuda-copy/gpu10/1MiB/s1",
            "d2d/cuda-copy/gpu2/1MiB/s1",
            "host_ram/host-memcpy/n0-n0/1GiB/t16",
            "host_ram/host-memcpy/n0-n0/1GiB/t2",
            "host_ram/host-streaming/n0-n0/1GiB/t16",
        ];
        keys.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            keys,
            [
                "d2d/cuda-copy/gpu0/128KiB/s1",
                "d2d/cuda-copy/gpu0/1MiB/s1",
                "d2d/cuda-copy/gpu0/4MiB/s1",
                "d2d/cuda-copy/gpu0/16MiB/s1",
                "d2d/cuda-copy/gpu0/256MiB/s1",
                "d2d/cuda-copy/gpu0/1GiB/s1",
                "d2d/cuda-copy/gpu2/1MiB/s1",
                "d2d/cuda-copy/gpu10/1MiB/s1",
                "host_ram/host-memcpy/n0-n0/1GiB/t2",
                "host_ram/host-memcpy/n0-n0/1GiB/t16",
                "host_ram/host-streaming/n0-n0/1GiB/t16",
            ]
        );
        // A total order: equal only when equal.
        assert_eq!(natural_cmp("s01", "s1"), "s01".cmp("s1"));
    }
}
