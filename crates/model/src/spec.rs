//! Typed case specs: what one case asks of its engine, one shape per kind of workload, built and
//! checked once by the planner ([`Spec::check`]). Engines of the same workload (io_uring and SPDK
//! reading NVMe, `memcpy` and the streaming copy on host RAM) take the same spec, so the same cell
//! measured by two engines has equal specs.

use crate::plan::PathId;
use serde::{Deserialize, Serialize};

/// The most streams one GPU copy case may ask for.
pub const MAX_STREAMS: u32 = 64;

/// One case's parameters, by kind of workload.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Spec {
    /// A copy between two host buffers (host RAM).
    HostCopy(HostCopySpec),
    /// GPU copies: H2D, D2H, duplex, D2D.
    GpuCopy(GpuCopySpec),
    /// NVMe I/O: the read and write sweeps, latency probes and long tests.
    Nvme(NvmeSpec),
    /// NVMe → GPU reads (GPUDirect Storage and its POSIX bounce baseline).
    Gds(GdsSpec),
    /// NVMe DMA straight into a device's BAR (GPU BAR1, or a PCI BAR standing in for it), or
    /// into host RAM as its baseline.
    NvmeBar(NvmeBarSpec),
    /// CPU loads and stores to GPU memory through a GDRCopy BAR1 mapping.
    Gdrcopy(GdrcopySpec),
    /// XXH3 hashing of host memory by one of xxHash's SIMD code paths (the CPU step).
    Hash(HashSpec),
}

/// XXH3 throughput: `threads` pinned threads on `cpu_node` each hash blocks of `size_bytes`
/// with `variant` through code path `simd`: a block that fits a cache is hashed over and over,
/// a working set larger than the caches a part a repetition, split among the threads.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HashSpec {
    pub variant: crate::xxh3::HashVariant,
    pub simd: crate::xxh3::SimdPath,
    /// Bytes of one block (one call of the hash).
    pub size_bytes: u64,
    pub threads: u32,
    /// The node of the threads and their blocks; absent where nodes are unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_node: Option<u32>,
    /// Present: each thread hashes a block of its own, over and over, starting this many bytes
    /// past a page boundary: 0, page-aligned, as a storage stack's blocks are;
    /// [`crate::xxh3::XXHSUM_OFFSET_BYTES`] for the comparison with `xxhsum -b`, whose block is
    /// only 16-byte aligned (off a 64-byte line, AVX-512's loads straddle two cache lines;
    /// `tools/xxh3-reference/README.md`). Absent: a working set, hashed in page-aligned slices;
    /// in older profiles also a block of its own, unplaced or page-aligned (older builds wrote no
    /// offset of 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset_bytes: Option<u32>,
}

/// How an NVMe → GPU read travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GdsRoute {
    /// `cuFileRead` into GPU memory: GPUDirect where the node has it, else whatever mode
    /// libcufile runs in (the case's notes and `gds.mode` say which).
    Cufile,
    /// The baseline: O_DIRECT `pread` into pinned host memory on `host_node`, then a copy to
    /// the GPU.
    PosixBounce,
}

impl GdsRoute {
    pub fn as_str(self) -> &'static str {
        match self {
            GdsRoute::Cufile => "cufile",
            GdsRoute::PosixBounce => "posix-bounce",
        }
    }
}

/// NVMe → GPU (Path 6): on each of `drives` (their keys, or the `--target` path),
/// `queue_depth` threads each with one read of `block_bytes` in flight, into `gpu`'s memory by
/// `route`; with `write`, GPU → NVMe writes the same way (only where the write gate let them).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GdsSpec {
    /// `gpu0`, … (the topology's GPU names).
    pub gpu: String,
    pub drives: Vec<String>,
    /// `drives` names a `--target` file or block device, not drives.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub target: bool,
    pub block_bytes: u64,
    pub queue_depth: u32,
    pub route: GdsRoute,
    /// Writes from GPU memory to the drives instead of reads (destroys their data).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub write: bool,
    /// The node of the reading threads (and of the bounce buffers): the GPU's node; absent
    /// where it is unknown (nothing placed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_node: Option<u32>,
}

/// GDRCopy (Path 5): one thread on `cpu_node` copies `size_bytes` between host memory on that
/// node and `gpu`'s memory mapped through BAR1 (`gdr_copy_to_mapping` for `h2d`, CPU → BAR1
/// writes; `gdr_copy_from_mapping` for `d2h`, BAR1 → CPU reads), over and over; `latency`:
/// small copies whose mean time is the figure of interest (gdrcopy's copylat).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GdrcopySpec {
    /// `gpu0`, … (the topology's GPU names).
    pub gpu: String,
    pub direction: CopyDirection,
    pub size_bytes: u64,
    /// The copying thread's node (and the host buffer's); absent where nodes are unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_node: Option<u32>,
    /// That node is not the GPU's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cross_numa: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub latency: bool,
}

/// The device whose BAR an NVMe → BAR case reads into.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BarDevice {
    /// A GPU's memory mapped through its BAR1 by GDRCopy: the spec's `dispatcher-p2p` cold path.
    GpuBar1 {
        /// `gpu0`, … (the topology's GPU names).
        gpu: String,
        bdf: String,
    },
    /// Memory behind BAR `resource` of another PCI device (sysfs `resourceN`): a stand-in for
    /// BAR1 where no GPU BAR can be reached. Never a GPU figure.
    PciBar { bdf: String, resource: u32 },
}

impl BarDevice {
    pub fn bdf(&self) -> &str {
        match self {
            BarDevice::GpuBar1 { bdf, .. } | BarDevice::PciBar { bdf, .. } => bdf,
        }
    }

    /// `gpu0` for a GPU; `pci-0000:00:05.0-bar2` for a PCI BAR (the profile's keys).
    pub fn key(&self) -> String {
        match self {
            BarDevice::GpuBar1 { gpu, .. } => gpu.clone(),
            BarDevice::PciBar { bdf, resource } => format!("pci-{bdf}-bar{resource}"),
        }
    }

    /// For people: `gpu0 BAR1 (0000:…)`, `PCI BAR2 of 0000:… (not a GPU)`.
    pub fn label(&self) -> String {
        match self {
            BarDevice::GpuBar1 { gpu, bdf } => format!("{gpu} BAR1 ({bdf})"),
            BarDevice::PciBar { bdf, resource } => {
                format!("PCI BAR{resource} of {bdf} (not a GPU)")
            }
        }
    }
}

/// Where an NVMe → BAR case's reads land.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DmaTarget {
    /// Host RAM on the pollers' node: the baseline, measured back to back with `bar`.
    HostRam,
    /// The device's BAR.
    Bar,
}

impl DmaTarget {
    pub fn as_str(self) -> &'static str {
        match self {
            DmaTarget::HostRam => "host-ram",
            DmaTarget::Bar => "bar",
        }
    }
}

/// NVMe DMA → BAR (the spec's Step 13): each of `drives` read sequentially in `block_bytes`
/// commands at `queue_depth`, by one poller per drive pinned to `poller_node`, into `memory`
/// (the BAR of `device`, or host RAM on `poller_node` as the baseline).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NvmeBarSpec {
    pub device: BarDevice,
    pub memory: DmaTarget,
    pub drives: Vec<String>,
    pub block_bytes: u64,
    pub queue_depth: u32,
    /// The node of the pollers (and of host-RAM buffers); absent where nodes are unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poller_node: Option<u32>,
    /// The pollers run off the device's node: the cross-NUMA penalty run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cross_numa: bool,
}

/// Host RAM: `threads` pinned threads on `cpu_node` copy `size_bytes` from a buffer on
/// `src_node` to one on `dst_node`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostCopySpec {
    pub size_bytes: u64,
    pub threads: u32,
    pub cpu_node: u32,
    pub src_node: u32,
    pub dst_node: u32,
}

/// Kind of host memory of an H2D/D2H copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HostMemory {
    /// Page-locked and registered with the driver: DMA straight from it.
    Pinned,
    /// Ordinary memory: the driver stages it through a pinned buffer of its own.
    Pageable,
}

impl HostMemory {
    pub fn as_str(self) -> &'static str {
        match self {
            HostMemory::Pinned => "pinned",
            HostMemory::Pageable => "pageable",
        }
    }
}

/// One direction across PCIe.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CopyDirection {
    H2d,
    D2h,
}

impl CopyDirection {
    pub fn as_str(self) -> &'static str {
        match self {
            CopyDirection::H2d => "h2d",
            CopyDirection::D2h => "d2h",
        }
    }
}

/// GPU copies of `size_bytes` per buffer on `streams` concurrent streams (each with its own
/// buffers). The path says which way (H2D, D2H, both at once, or device to device).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GpuCopySpec {
    /// `gpu0`, … (the topology's GPU names).
    pub gpu: String,
    pub size_bytes: u64,
    pub streams: u32,
    /// The host buffers' kind; absent for D2D.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_memory: Option<HostMemory>,
    /// The NUMA node of the host buffers; absent for D2D, or where the GPU's node is unknown
    /// (nothing placed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_node: Option<u32>,
    /// The node whose CPUs issue the copies; absent = the thread is left where it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_node: Option<u32>,
    /// Duplex only: the direction this case reports (its pair reports the other).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<CopyDirection>,
}

impl GpuCopySpec {
    /// Pinned host memory (or none: D2D).
    pub fn pinned(&self) -> bool {
        self.host_memory != Some(HostMemory::Pageable)
    }
}

/// How NVMe I/Os are laid out.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NvmePattern {
    /// Sequential I/O over the drive (the sweeps).
    Sequential,
    /// Random I/O over the drive (latency probes, the read-cache test's cold reads).
    Random,
    /// Random re-reads of the drive's first `region_bytes` (the read-cache test's hot reads).
    Hot { region_bytes: u64 },
    /// One read after `idle_ms` of idleness (the power-state test).
    Idle { idle_ms: u64 },
    /// Sustained writes for `duration_s`, then reads until they settle, for at most
    /// `settle_max_s` (the gc-settle test).
    GcSettle { duration_s: u64, settle_max_s: u64 },
}

impl NvmePattern {
    pub fn as_str(&self) -> &'static str {
        match self {
            NvmePattern::Sequential => "sequential",
            NvmePattern::Random => "random",
            NvmePattern::Hot { .. } => "hot",
            NvmePattern::Idle { .. } => "idle",
            NvmePattern::GcSettle { .. } => "gc-settle",
        }
    }
}

/// Which part of the NVMe plan a case is.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum NvmeTest {
    /// The block-size and queue-depth sweep of Paths 1 and 2.
    Sweep,
    /// Step 3's per-drive 4 KiB random-read latency probe.
    Latency,
    /// The long tests.
    ReadCache,
    PowerStates,
    GcSettle,
}

impl NvmeTest {
    pub fn as_str(self) -> &'static str {
        match self {
            NvmeTest::Sweep => "sweep",
            NvmeTest::Latency => "latency",
            NvmeTest::ReadCache => "read-cache",
            NvmeTest::PowerStates => "power-states",
            NvmeTest::GcSettle => "gc-settle",
        }
    }
}

/// NVMe I/O of `block_bytes` at `queue_depth` per drive on `drives` (their BDFs or names, or the
/// `--target` path); the path says read or write.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NvmeSpec {
    pub test: NvmeTest,
    pub block_bytes: u64,
    pub queue_depth: u32,
    pub drives: Vec<String>,
    /// `drives` names a `--target` file or block device, not drives: its figures are never a
    /// drive's ceiling.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub target: bool,
    pub pattern: NvmePattern,
}

impl NvmeSpec {
    /// A sweep of drives (not a latency probe, not a `--target`).
    pub fn drive_sweep(&self) -> bool {
        self.test == NvmeTest::Sweep && !self.target
    }
}

/// A spec that does not fit its path or asks for what no machine can do: a planner bug.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("a {kind} spec does not measure path {path}")]
    WrongPath { kind: &'static str, path: PathId },
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    #[error("streams must be from 1 to {MAX_STREAMS}, got {0}")]
    Streams(u32),
    #[error("{0}")]
    Inconsistent(&'static str),
}

impl Spec {
    /// The kind's name, as YAML tags it.
    pub fn kind(&self) -> &'static str {
        match self {
            Spec::HostCopy(_) => "host_copy",
            Spec::GpuCopy(_) => "gpu_copy",
            Spec::Nvme(_) => "nvme",
            Spec::Gds(_) => "gds",
            Spec::NvmeBar(_) => "nvme_bar",
            Spec::Gdrcopy(_) => "gdrcopy",
            Spec::Hash(_) => "hash",
        }
    }

    /// Check the spec against its path: the planner calls this once for every case it plans, so
    /// engines take what they are given.
    pub fn check(&self, path: PathId) -> Result<(), SpecError> {
        let wrong = || SpecError::WrongPath {
            kind: self.kind(),
            path,
        };
        match self {
            Spec::HostCopy(s) => {
                if path != PathId::HostRam {
                    return Err(wrong());
                }
                nonzero(s.size_bytes, "size_bytes")?;
                nonzero(u64::from(s.threads), "threads")
            }
            Spec::GpuCopy(s) => {
                if !matches!(
                    path,
                    PathId::H2d | PathId::D2h | PathId::Duplex | PathId::D2d
                ) {
                    return Err(wrong());
                }
                nonzero(s.size_bytes, "size_bytes")?;
                if !(1..=MAX_STREAMS).contains(&s.streams) {
                    return Err(SpecError::Streams(s.streams));
                }
                let d2d = path == PathId::D2d;
                if d2d != s.host_memory.is_none() {
                    return Err(SpecError::Inconsistent(
                        "host_memory is set for copies through host memory, and only for them",
                    ));
                }
                if (path == PathId::Duplex) != s.direction.is_some() {
                    return Err(SpecError::Inconsistent(
                        "a duplex case names the direction it reports, and only a duplex case",
                    ));
                }
                if path == PathId::Duplex && !s.pinned() {
                    return Err(SpecError::Inconsistent(
                        "duplex copies need pinned host memory (pageable copies cannot be \
                         queued behind a latch)",
                    ));
                }
                Ok(())
            }
            Spec::Nvme(s) => {
                if !matches!(path, PathId::NvmeRead | PathId::NvmeWrite) {
                    return Err(wrong());
                }
                drive_io(s.block_bytes, s.queue_depth, &s.drives)
            }
            Spec::Gds(s) => {
                if path != PathId::Gds {
                    return Err(wrong());
                }
                drive_io(s.block_bytes, s.queue_depth, &s.drives)
            }
            Spec::NvmeBar(s) => {
                if path != PathId::NvmeBar1 {
                    return Err(wrong());
                }
                drive_io(s.block_bytes, s.queue_depth, &s.drives)
            }
            Spec::Gdrcopy(s) => {
                if path != PathId::Gdrcopy {
                    return Err(wrong());
                }
                nonzero(s.size_bytes, "size_bytes")
            }
            Spec::Hash(s) => {
                if path != PathId::Xxh3 {
                    return Err(wrong());
                }
                nonzero(s.size_bytes, "size_bytes")?;
                nonzero(u64::from(s.threads), "threads")?;
                if s.offset_bytes
                    .is_some_and(|o| o >= crate::xxh3::OFFSET_LIMIT_BYTES)
                {
                    return Err(SpecError::Inconsistent(
                        "offset_bytes must be under 4096 (a block starts less than a page past a \
                         page boundary)",
                    ));
                }
                Ok(())
            }
        }
    }

    pub fn host_copy(&self) -> Option<&HostCopySpec> {
        match self {
            Spec::HostCopy(s) => Some(s),
            _ => None,
        }
    }

    pub fn gpu_copy(&self) -> Option<&GpuCopySpec> {
        match self {
            Spec::GpuCopy(s) => Some(s),
            _ => None,
        }
    }

    pub fn nvme(&self) -> Option<&NvmeSpec> {
        match self {
            Spec::Nvme(s) => Some(s),
            _ => None,
        }
    }

    pub fn gds(&self) -> Option<&GdsSpec> {
        match self {
            Spec::Gds(s) => Some(s),
            _ => None,
        }
    }

    pub fn gdrcopy(&self) -> Option<&GdrcopySpec> {
        match self {
            Spec::Gdrcopy(s) => Some(s),
            _ => None,
        }
    }

    pub fn hash(&self) -> Option<&HashSpec> {
        match self {
            Spec::Hash(s) => Some(s),
            _ => None,
        }
    }

    pub fn nvme_bar(&self) -> Option<&NvmeBarSpec> {
        match self {
            Spec::NvmeBar(s) => Some(s),
            _ => None,
        }
    }

    /// The GPU the case runs on, where it runs on one.
    pub fn gpu(&self) -> Option<&str> {
        match self {
            Spec::GpuCopy(s) => Some(&s.gpu),
            Spec::Gds(s) => Some(&s.gpu),
            Spec::Gdrcopy(s) => Some(&s.gpu),
            Spec::NvmeBar(NvmeBarSpec {
                device: BarDevice::GpuBar1 { gpu, .. },
                ..
            }) => Some(gpu),
            _ => None,
        }
    }

    /// Bytes of one copy or I/O (per buffer for copies, per block for NVMe).
    pub fn size_bytes(&self) -> u64 {
        match self {
            Spec::HostCopy(s) => s.size_bytes,
            Spec::GpuCopy(s) => s.size_bytes,
            Spec::Nvme(s) => s.block_bytes,
            Spec::Gds(s) => s.block_bytes,
            Spec::NvmeBar(s) => s.block_bytes,
            Spec::Gdrcopy(s) => s.size_bytes,
            Spec::Hash(s) => s.size_bytes,
        }
    }

    /// The drives the case uses (none for copies).
    pub fn drives(&self) -> &[String] {
        match self {
            Spec::Nvme(s) => &s.drives,
            Spec::Gds(s) => &s.drives,
            Spec::NvmeBar(s) => &s.drives,
            _ => &[],
        }
    }
}

/// I/O of `block_bytes` at `queue_depth` on at least one drive.
fn drive_io(block_bytes: u64, queue_depth: u32, drives: &[String]) -> Result<(), SpecError> {
    nonzero(block_bytes, "block_bytes")?;
    nonzero(u64::from(queue_depth), "queue_depth")?;
    if drives.is_empty() {
        return Err(SpecError::Zero("drives"));
    }
    Ok(())
}

fn nonzero(v: u64, what: &'static str) -> Result<(), SpecError> {
    if v == 0 {
        Err(SpecError::Zero(what))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h2d() -> GpuCopySpec {
        GpuCopySpec {
            gpu: "gpu0".into(),
            size_bytes: 4 << 20,
            streams: 1,
            host_memory: Some(HostMemory::Pinned),
            host_node: Some(0),
            cpu_node: Some(0),
            direction: None,
        }
    }

    #[test]
    fn a_spec_is_checked_against_its_path() {
        assert_eq!(Spec::GpuCopy(h2d()).check(PathId::H2d), Ok(()));
        assert!(matches!(
            Spec::GpuCopy(h2d()).check(PathId::HostRam),
            Err(SpecError::WrongPath { .. })
        ));
        assert!(
            Spec::GpuCopy(h2d()).check(PathId::Duplex).is_err(),
            "duplex names its direction"
        );
        let duplex = GpuCopySpec {
            direction: Some(CopyDirection::D2h),
            ..h2d()
        };
        assert_eq!(Spec::GpuCopy(duplex.clone()).check(PathId::Duplex), Ok(()));
        let pageable = GpuCopySpec {
            host_memory: Some(HostMemory::Pageable),
            ..duplex
        };
        assert!(Spec::GpuCopy(pageable).check(PathId::Duplex).is_err());
        let streams = GpuCopySpec {
            streams: 65,
            ..h2d()
        };
        assert_eq!(
            Spec::GpuCopy(streams).check(PathId::H2d),
            Err(SpecError::Streams(65))
        );
        assert!(
            Spec::GpuCopy(h2d()).check(PathId::D2d).is_err(),
            "D2D has no host memory"
        );
        let nvme = NvmeSpec {
            test: NvmeTest::Latency,
            target: false,
            block_bytes: 4096,
            queue_depth: 0,
            drives: vec!["nvme0".into()],
            pattern: NvmePattern::Random,
        };
        assert_eq!(
            Spec::Nvme(nvme).check(PathId::NvmeRead),
            Err(SpecError::Zero("queue_depth"))
        );
    }

    #[test]
    fn specs_read_back_as_written() {
        let specs = [
            Spec::GpuCopy(h2d()),
            Spec::HostCopy(HostCopySpec {
                size_bytes: 1 << 30,
                threads: 16,
                cpu_node: 0,
                src_node: 0,
                dst_node: 1,
            }),
            Spec::Nvme(NvmeSpec {
                test: NvmeTest::GcSettle,
                target: true,
                block_bytes: 4096,
                queue_depth: 1,
                drives: vec!["0000:01:00.0".into()],
                pattern: NvmePattern::GcSettle {
                    duration_s: 3,
                    settle_max_s: 10,
                },
            }),
        ];
        for s in specs {
            let y = serde_saphyr::to_string(&s).unwrap();
            let back: Spec = serde_saphyr::from_str(&y).unwrap();
            assert_eq!(back, s, "{y}");
        }
    }
}
