//! The names of the profile's `ceilings` (the public YAML API, `docs/profile-schema.md`): the
//! profile builder writes every one of them from here, and the report looks figures up by
//! them. (`compare` and the daemon take the names from the profile they read, so they spell
//! none; tests spell keys out on purpose, as the schema documents them.)

/// H2D, 4 MiB, one stream, NUMA-local (`gpus.<gpu>.h2d_4m_1stream_numa_local_gbps`).
pub fn warm_h2d(gpu: &str) -> String {
    format!("warm_{gpu}_gbps")
}

/// The NUMA-local H2D peak (`gpus.<gpu>.h2d_peak_numa_local_gbps`).
pub fn warm_h2d_peak(gpu: &str) -> String {
    format!("warm_{gpu}_peak_gbps")
}

/// NUMA-local minus cross-NUMA H2D (derived; `gpus.<gpu>.cross_numa_h2d_penalty_gbps`).
pub fn cross_numa_penalty(gpu: &str) -> String {
    format!("warm_{gpu}_cross_numa_penalty_gbps")
}

/// The NUMA-local D2H peak (`gpus.<gpu>.d2h_peak_numa_local_gbps`).
pub fn d2h_peak(gpu: &str) -> String {
    format!("{gpu}_d2h_peak_gbps")
}

/// D2D, one stream, the largest size outside L2 (`gpus.<gpu>.d2d_1stream_gbps`).
pub fn d2d_sustained(gpu: &str) -> String {
    format!("{gpu}_d2d_sustained_gbps")
}

/// D2D sustained, the slowest GPU's (`gpu_d2d_sustained_gbps`): what every GPU reaches; absent
/// while any GPU has no D2D figure.
pub const GPU_D2D_SUSTAINED: &str = "gpu_d2d_sustained_gbps";

pub const HOST_RAM_SAME_NUMA: &str = "host_ram_same_numa_gbps";
pub const HOST_RAM_CROSS_NUMA: &str = "host_ram_cross_numa_gbps";

/// Which NVMe direction a raw ceiling is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NvmeDir {
    Read,
    Write,
}

impl NvmeDir {
    pub fn as_str(self) -> &'static str {
        match self {
            NvmeDir::Read => "read",
            NvmeDir::Write => "write",
        }
    }
}

/// `1_drive` → `1`: the drive count as the ceiling names spell it.
fn drives(count: &str) -> &str {
    count.trim_end_matches("_drive")
}

/// The raw NVMe ceiling of the `nvme.raw_<dir>_gbps` entry `count` (`1_drive` →
/// `nvme_raw_1drive_read_gbps`).
pub fn nvme_raw(count: &str, dir: NvmeDir) -> String {
    format!("nvme_raw_{}drive_{}_gbps", drives(count), dir.as_str())
}

/// The knee of the one-drive block-size sweep (`nvme_optimal_read_chunk_bytes`).
pub fn nvme_optimal_chunk(dir: NvmeDir) -> String {
    format!("nvme_optimal_{}_chunk_bytes", dir.as_str())
}

/// True for a ceiling of the NVMe write sweep: `nvme_raw_<N>drive_write_gbps` and
/// `nvme_optimal_write_chunk_bytes` (what [`nvme_raw`] and [`nvme_optimal_chunk`] name for
/// [`NvmeDir::Write`]).
pub fn is_nvme_write(key: &str) -> bool {
    let raw_count = key
        .strip_prefix("nvme_raw_")
        .and_then(|k| k.strip_suffix("drive_write_gbps"));
    match raw_count {
        Some(n) => !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()),
        None => key == nvme_optimal_chunk(NvmeDir::Write),
    }
}

/// The dispatcher cold path for the `nvme.raw_read_gbps` entry `count` (`2_drive` →
/// `dispatcher_cold_2drive_gbps`).
pub fn dispatcher_cold(count: &str) -> String {
    format!("dispatcher_cold_{}drive_gbps", drives(count))
}

/// The drive count from which H2D caps the cold path.
pub const DISPATCHER_COLD_CROSSOVER: &str = "dispatcher_cold_crossover_drives";

/// True for a ceiling the builder always derives from measured medians, never takes as one
/// measurement's: a cross-NUMA penalty, an NVMe knee (`nvme_optimal_*_chunk_bytes`), the
/// dispatcher cold path and its crossover, and any size or count (`…_bytes`, `…_drives`).
/// Readers use it for profiles without `ceiling_sources`, where the key is all there is.
pub fn is_derived(key: &str) -> bool {
    key.ends_with("_cross_numa_penalty_gbps")
        || key.starts_with("nvme_optimal_")
        || key.starts_with("dispatcher_cold_")
        || key.ends_with("_bytes")
        || key.ends_with("_drives")
}

/// Reserved for the GDRCopy and GDS backends, which are not built (both paths are always
/// waived today), named after their profile fields: when they are measured, the builder writes
/// these with their sources, and the report already reads them.
pub const GDRCOPY_CPU_TO_BAR1: &str = "gdrcopy_cpu_to_bar1_gbps";
pub const GDRCOPY_BAR1_TO_CPU: &str = "gdrcopy_bar1_to_cpu_gbps";
pub const GDS_1DRIVE: &str = "gds_1drive_gbps";

#[cfg(test)]
mod tests {
    #[test]
    fn derived_kinds_are_told_by_their_keys() {
        use super::*;
        for k in [
            cross_numa_penalty("gpu1"),
            nvme_optimal_chunk(NvmeDir::Read),
            dispatcher_cold("2_drive"),
            DISPATCHER_COLD_CROSSOVER.to_string(),
        ] {
            assert!(is_derived(&k), "{k}");
        }
        for k in [
            warm_h2d("gpu0"),
            warm_h2d_peak("gpu0"),
            d2h_peak("gpu0"),
            d2d_sustained("gpu0"),
            GPU_D2D_SUSTAINED.to_string(),
            HOST_RAM_SAME_NUMA.to_string(),
            nvme_raw("1_drive", NvmeDir::Read),
        ] {
            assert!(!is_derived(&k), "{k}");
        }
    }

    use super::*;

    #[test]
    fn keys_are_spelled_as_the_schema_documents_them() {
        assert_eq!(warm_h2d("gpu0"), "warm_gpu0_gbps");
        assert_eq!(warm_h2d_peak("gpu1"), "warm_gpu1_peak_gbps");
        assert_eq!(
            cross_numa_penalty("gpu0"),
            "warm_gpu0_cross_numa_penalty_gbps"
        );
        assert_eq!(d2h_peak("gpu0"), "gpu0_d2h_peak_gbps");
        assert_eq!(d2d_sustained("gpu0"), "gpu0_d2d_sustained_gbps");
        assert_eq!(
            nvme_raw("1_drive", NvmeDir::Read),
            "nvme_raw_1drive_read_gbps"
        );
        assert_eq!(
            nvme_raw("4_drive", NvmeDir::Write),
            "nvme_raw_4drive_write_gbps"
        );
        assert_eq!(
            nvme_optimal_chunk(NvmeDir::Write),
            "nvme_optimal_write_chunk_bytes"
        );
        assert_eq!(dispatcher_cold("2_drive"), "dispatcher_cold_2drive_gbps");
        for count in ["1_drive", "4_drive", "12_drive"] {
            assert!(is_nvme_write(&nvme_raw(count, NvmeDir::Write)));
            assert!(!is_nvme_write(&nvme_raw(count, NvmeDir::Read)));
            assert!(!is_nvme_write(&dispatcher_cold(count)));
        }
        assert!(is_nvme_write(&nvme_optimal_chunk(NvmeDir::Write)));
        assert!(!is_nvme_write(&nvme_optimal_chunk(NvmeDir::Read)));
        for other in [
            "nvme_raw_drive_write_gbps",
            "nvme_raw_xdrive_write_gbps",
            "nvme_raw_1drive_write_gbps_old",
            "warm_gpu0_gbps",
        ] {
            assert!(!is_nvme_write(other), "{other}");
        }
        assert_eq!(GPU_D2D_SUSTAINED, "gpu_d2d_sustained_gbps");
        assert_eq!(
            DISPATCHER_COLD_CROSSOVER,
            "dispatcher_cold_crossover_drives"
        );
    }
}
