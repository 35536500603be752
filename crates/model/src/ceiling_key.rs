//! The names of the profile's `ceilings` (the public YAML API, `docs/profile-schema.md`): the
//! profile builder writes every one of them from here, and the report looks figures up by
//! them. Nothing reads a name back: what a ceiling is (unit, path, GPU, drives, …) is in its
//! record (`ceiling_records`).

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

/// The raw NVMe ceiling of `drives` drives (`nvme_raw_1drive_read_gbps`).
pub fn nvme_raw(drives: usize, dir: NvmeDir) -> String {
    format!("nvme_raw_{drives}drive_{}_gbps", dir.as_str())
}

/// The knee of the one-drive block-size sweep (`nvme_optimal_read_chunk_bytes`).
pub fn nvme_optimal_chunk(dir: NvmeDir) -> String {
    format!("nvme_optimal_{}_chunk_bytes", dir.as_str())
}

/// The dispatcher cold path of `drives` drives (`dispatcher_cold_2drive_gbps`).
pub fn dispatcher_cold(drives: usize) -> String {
    format!("dispatcher_cold_{drives}drive_gbps")
}

/// The drive count from which H2D caps the cold path.
pub const DISPATCHER_COLD_CROSSOVER: &str = "dispatcher_cold_crossover_drives";

/// GDRCopy's best NUMA-local CPU → BAR1 stores and BAR1 → CPU loads (the `gdrcopy:` fields).
pub const GDRCOPY_CPU_TO_BAR1: &str = "gdrcopy_cpu_to_bar1_gbps";
pub const GDRCOPY_BAR1_TO_CPU: &str = "gdrcopy_bar1_to_cpu_gbps";
/// NVMe DMA → GPU BAR1 over `drives` drives, NUMA-local pollers: the best GPU's
/// (`p2p_cold_1drive_gbps`).
pub fn p2p_cold(drives: usize) -> String {
    format!("p2p_cold_{drives}drive_gbps")
}

/// The same into `gpu`'s BAR1 (`p2p_cold_4drive_gpu0_gbps`).
pub fn p2p_cold_gpu(drives: usize, gpu: &str) -> String {
    format!("p2p_cold_{drives}drive_{gpu}_gbps")
}

/// The same with the pollers on another node (`p2p_cold_4drive_gpu0_cross_numa_gbps`).
pub fn p2p_cold_gpu_cross_numa(drives: usize, gpu: &str) -> String {
    format!("p2p_cold_{drives}drive_{gpu}_cross_numa_gbps")
}

/// The drive count at which NVMe → `gpu`'s BAR1 saturates: the first count past which adding
/// drives gained under 5 % (`p2p_cold_gpu0_saturated_drives`).
pub fn p2p_cold_saturated(gpu: &str) -> String {
    format!("p2p_cold_{gpu}_saturated_drives")
}

/// How far `gpu`'s cross-NUMA BAR1 figure lies under its NUMA-local one of the same drive
/// count, in % (`p2p_cold_gpu0_cross_numa_penalty_pct`).
pub fn p2p_cold_cross_numa_penalty(gpu: &str) -> String {
    format!("p2p_cold_{gpu}_cross_numa_penalty_pct")
}

/// The best GPUDirect (never compat-mode) cuFile read over one drive, and over four.
pub const GDS_1DRIVE: &str = "gds_1drive_gbps";
pub const GDS_4DRIVE: &str = "gds_4drive_gbps";

#[cfg(test)]
mod tests {
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
        assert_eq!(nvme_raw(1, NvmeDir::Read), "nvme_raw_1drive_read_gbps");
        assert_eq!(nvme_raw(4, NvmeDir::Write), "nvme_raw_4drive_write_gbps");
        assert_eq!(
            nvme_optimal_chunk(NvmeDir::Write),
            "nvme_optimal_write_chunk_bytes"
        );
        assert_eq!(dispatcher_cold(2), "dispatcher_cold_2drive_gbps");
        assert_eq!(p2p_cold(1), "p2p_cold_1drive_gbps");
        assert_eq!(p2p_cold_gpu(4, "gpu0"), "p2p_cold_4drive_gpu0_gbps");
        assert_eq!(
            p2p_cold_gpu_cross_numa(4, "gpu0"),
            "p2p_cold_4drive_gpu0_cross_numa_gbps"
        );
        assert_eq!(GPU_D2D_SUSTAINED, "gpu_d2d_sustained_gbps");
        assert_eq!(
            DISPATCHER_COLD_CROSSOVER,
            "dispatcher_cold_crossover_drives"
        );
    }
}
