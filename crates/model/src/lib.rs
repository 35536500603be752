//! Serde types shared by every hwceiling crate: the detected topology, the plan, the measured
//! results and the YAML ceiling profile (the public API, see [`profile`]).
//!
//! Units are in field names (`_gbps` = 10⁹ bytes/s, `_bytes`, `_us`). Unknown facts are `None`
//! and omitted when serialised, never guessed.

pub mod carry;
pub mod ceiling;
pub mod ceiling_key;
pub mod cpulist;
pub mod engine;
pub mod long_tests;
pub mod pcie;
pub mod plan;
pub mod profile;
pub mod results;
pub mod run;
pub mod sched;
pub mod setting;
pub mod spec;
pub mod text;
pub mod topology;
pub mod v1;
pub mod warning;
pub mod xxh3;

pub use ceiling::{Better, CarriedFrom, CeilingMeta, CeilingRecord, CeilingSource, Numa, Unit};
pub use engine::{CellKind, EngineDecl, EngineId, EngineStatus, Library, Needs};
pub use plan::{case_key, cell_parts, Case, Covers, PathId, Plan, Reps, Steady, Waiver};
pub use profile::{CeilingOrigin, Profile, Provenance, SCHEMA_VERSION};
pub use results::{
    failure_groups, AerIncrease, CaseResult, ClockEvent, Evidence, Failure, FailureGroup,
    GpuCaseState, HostCaseState, Measurement, PhaseSeconds, Placement, PlacementSearch, Range,
    Stats, WallClockDisagreement, Windows,
};
pub use run::{LeftOut, Narrowing, RunChoices, RunConfig, RunWritten, Selection};
pub use sched::{
    RepCounts, RepEvidence, RepSched, SchedEvidence, SchedSources, SchedSummary, ThreadSched,
};
pub use setting::{gpu_key, Environment, LinkState, Setting, PCIE_LINK_LOAD};
pub use spec::{
    BarDevice, CopyDirection, DmaTarget, GdrcopySpec, GdsRoute, GdsSpec, GpuCopySpec, HashSpec,
    HostCopySpec, HostMemory, NvmeBarSpec, NvmePattern, NvmeSpec, NvmeTest, Spec, SpecError,
};
pub use topology::Topology;
pub use warning::{Busy, ErrorCount, Warning, WarningKind};
pub use xxh3::{HashVariant, SimdPath, TierBasis, Xxh3Figure};

/// Bytes per GiB / MiB / KiB.
pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * 1024;
pub const GIB: u64 = 1024 * 1024 * 1024;

/// `131072` → `128KiB`, `4194304` → `4MiB`, `1536` → `1536B`. Used in case keys and tables.
pub fn size_label(bytes: u64) -> String {
    if bytes >= GIB && bytes.is_multiple_of(GIB) {
        format!("{}GiB", bytes / GIB)
    } else if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{}MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{}KiB", bytes / KIB)
    } else {
        format!("{bytes}B")
    }
}

/// Theoretical one-direction bandwidth of a PCIe link in GB/s (10⁹ B/s):
/// GT/s × lanes × efficiency ÷ 8, the efficiency being the encoding's (8b/10b up to 5 GT/s,
/// 128b/130b at 8–32 GT/s) or, in flit mode (64 GT/s on), the share of each 256-byte flit left
/// for TLPs and DLLPs, 242/256 (the rest is its CRC and FEC; docs/pcie.md).
pub fn pcie_theoretical_gbps(speed_gts: f64, width: u32) -> f64 {
    let efficiency = if speed_gts <= 5.0 {
        8.0 / 10.0
    } else if pcie::flit_mode(speed_gts) {
        242.0 / 256.0
    } else {
        128.0 / 130.0
    };
    speed_gts * f64::from(width) * efficiency / 8.0
}

/// PCIe generation from the link speed in GT/s (2.5 → 1, 5 → 2, 8 → 3, 16 → 4, 32 → 5, 64 → 6).
pub fn pcie_gen_from_speed(speed_gts: f64) -> Option<u32> {
    const TABLE: [(f64, u32); 7] = [
        (2.5, 1),
        (5.0, 2),
        (8.0, 3),
        (16.0, 4),
        (32.0, 5),
        (64.0, 6),
        (128.0, 7),
    ];
    TABLE
        .iter()
        .find(|(s, _)| (speed_gts - s).abs() < 0.01)
        .map(|&(_, g)| g)
}

/// Link speed in GT/s of a PCIe generation.
pub fn pcie_speed_of_gen(gen: u32) -> Option<f64> {
    match gen {
        1 => Some(2.5),
        2 => Some(5.0),
        3 => Some(8.0),
        4 => Some(16.0),
        5 => Some(32.0),
        6 => Some(64.0),
        7 => Some(128.0),
        _ => None,
    }
}

/// The JSON Schema of the YAML profile, generated from the types (published as
/// `docs/profile.schema.json`).
pub fn profile_json_schema() -> schemars::Schema {
    schemars::schema_for!(Profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_labels() {
        assert_eq!(size_label(128 * KIB), "128KiB");
        assert_eq!(size_label(4 * MIB), "4MiB");
        assert_eq!(size_label(2 * GIB), "2GiB");
        assert_eq!(size_label(1536), "1536B");
        assert_eq!(size_label(1536 * KIB), "1536KiB");
    }

    #[test]
    fn pcie_math_matches_the_spec() {
        // Gen5 x16: 32 GT/s × 16 × 128/130 / 8 = 63.015 GB/s (the anchors' 63.0).
        assert!((pcie_theoretical_gbps(32.0, 16) - 63.0154).abs() < 1e-3);
        // Gen4 x4: 7.877 GB/s.
        assert!((pcie_theoretical_gbps(16.0, 4) - 7.8769).abs() < 1e-3);
        // Gen2 x1: 5 GT/s × 8/10 / 8 = 0.5 GB/s; Gen1 x1 0.25 GB/s.
        assert!((pcie_theoretical_gbps(5.0, 1) - 0.5).abs() < 1e-9);
        assert!((pcie_theoretical_gbps(2.5, 1) - 0.25).abs() < 1e-9);
        // Gen6 x16 in flits: 64 GT/s × 16 / 8 = 128 GB/s raw, 242/256 of it 121.0 GB/s.
        assert!((pcie_theoretical_gbps(64.0, 16) - 121.0).abs() < 1e-9);
        assert_eq!(pcie_gen_from_speed(32.0), Some(5));
        assert_eq!(pcie_gen_from_speed(2.5), Some(1));
        assert_eq!(pcie_gen_from_speed(3.0), None);
        for g in 1..=7 {
            assert_eq!(pcie_gen_from_speed(pcie_speed_of_gen(g).unwrap()), Some(g));
        }
    }

    #[test]
    fn path_names_round_trip() {
        for p in PathId::ALL {
            assert_eq!(p.as_str().parse::<PathId>().unwrap(), p);
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{}\"", p.as_str()));
        }
        assert_eq!("Host-RAM".parse::<PathId>().unwrap(), PathId::HostRam);
        let err = "nvram".parse::<PathId>().unwrap_err().to_string();
        assert!(
            err.contains("unknown path `nvram`") && err.contains("host_ram"),
            "{err}"
        );
    }

    #[test]
    fn io_size_sweep_flattens_points_and_keeps_the_knee() {
        let mut s = profile::IoSizeSweep::default();
        s.points.insert("4kib".into(), 1.5);
        s.points.insert("1mib".into(), 6.75);
        s.optimal_bytes = Some(1 << 20);
        let y = serde_saphyr::to_string(&s).unwrap();
        assert!(
            y.contains("4kib: 1.5") && y.contains("optimal_bytes: 1048576"),
            "{y}"
        );
        let back: profile::IoSizeSweep = serde_saphyr::from_str(&y).unwrap();
        assert_eq!(back, s);
    }
}
