//! GPU copy bandwidth through the CUDA driver API: the spec's Path 3 (pinned and pageable H2D
//! and D2H, one or several streams, NUMA-placed host buffers, duplex) and Path 4 (D2D), as a
//! backend of `hwc_runner`.
//!
//! libcuda and NVML are loaded at run time (cudarc with dynamic loading, nvml-wrapper), so this
//! crate builds and its binary starts on machines without either: [`probe`] says why CUDA is
//! not usable (fit to be a waiver's reason) instead of panicking as cudarc would.
//!
//! How a figure is made:
//! - pinned host buffers are `mmap`ed, bound to the requested NUMA node, pre-faulted, checked
//!   page by page, then registered with `cuMemHostRegister` (portable, not write-combined);
//! - before a pinned case, no line of its host buffers is in a CPU cache (destinations are
//!   poisoned with non-temporal stores, sources flushed after the CPU wrote them), so the DMA
//!   reads and writes memory, not lines a core holds modified (see `cache`);
//! - one repetition queues K back-to-back copies per stream behind a spin-kernel latch that
//!   the host opens only after everything is queued, so submission is not timed; CUDA events
//!   time the span and the host clock cross-checks it; K is calibrated per case so that a
//!   repetition lasts about 20 ms, with at most 256 copies per stream (see [`MAX_COPIES`]);
//!   where 256 pinned H2D or duplex copies take much less than that, a repetition gathers
//!   several such latched batches, its time the sum of their spans, so that it still holds
//!   about 20 ms of copying (small copies that read host memory run in spells of 50–150 ms:
//!   see [`batches_per_rep`]); D2H and D2D batches stay repetitions of their own;
//! - a measuring process asks the driver for 32 hardware work queues (`connections`) unless
//!   the user set `CUDA_DEVICE_MAX_CONNECTIONS`;
//! - one-stream duplex and D2H cases of 2 MiB or less first try each of
//!   [`SEARCH_PLACEMENTS`] (where in their buffers the D2H device source and the host buffers
//!   lie), try the 3 fastest again and are measured at the fastest of those (the second
//!   direction's case of a duplex size, on the same buffers, at the first's choice): where
//!   the buffers lie moves those copies by several per cent, and no placement is known in
//!   advance to be the fast one; one-stream D2D cases of 16 MiB or less do the same over
//!   [`D2D_SEARCH_PLACEMENTS`] (source and destination up to 240 MiB into their buffers);
//! - the GPU's clocks are warmed before its first case (an idle H200 sits at 345 MHz) and the
//!   clocks and PCIe link under load are recorded;
//! - the idle guard refuses a GPU that another process uses;
//! - every case's data is checked once, outside the timed region.
//!
//! Units: GB/s = 10⁹ B/s; D2D counts bytes copied (not read + written).

mod affinity;
mod backend;
mod bdf;
mod cache;
mod case_state;
pub mod connections;
mod copy;
mod driver;
mod error;
mod nvml;
mod params;
mod pattern;
mod pool;
mod probe;
mod timing;

pub use affinity::AffinityGuard;
pub use backend::{decl, CudaBackend, BUSY_UTILISATION_PCT, ENGINE};
pub use bdf::normalize_bdf;
pub use driver::{DeviceBuffer, HostBuffer};
pub use error::CudaError;
pub use nvml::NvmlFacts;
pub use params::{
    l2_resident, CopyPlacement, ParamError, D2D_SEARCH_MAX_BYTES, D2D_SEARCH_PLACEMENTS,
    HOME_PLACEMENT, PLACEMENT_SEARCH_MAX_BYTES, SEARCH_PLACEMENTS,
};
pub use probe::{probe, CudaDevice, CudaProbe};
pub use timing::{
    batches_per_rep, copies_per_rep, MAX_BATCHES, MAX_COPIES, MIN_COPIES, TARGET_REP_SECONDS,
};
