//! One prepared copy case: its streams, buffers and events, the timed repetition and the data
//! check.
//!
//! A repetition, pinned memory: a spin kernel (the latch) is queued on the lead stream, then the
//! first flow's start event; every other stream waits on that event, and every other flow's
//! head stream records its own start after the wait; each stream gets K back-to-back copies of
//! its own buffers; every stream of a flow joins its flow's head stream, which records the
//! flow's end event. Only then does the host open the latch: the copies start together, with
//! all submission already done, and the measured flow's span start → end (CUDA events) is the
//! time (a duplex direction's span starts when its own stream starts, not one cross-stream
//! wait earlier). The host clock from the release to the end event's completion is the
//! cross-check.
//!
//! Pageable memory cannot wait behind a latch (the driver stages it through its own pinned
//! buffer and may block the submitting thread until the copy ran), so its copies are timed by
//! the same events without the latch, staging included.

use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{sys, CudaContext, CudaEvent, CudaStream};
use hwc_model::{size_label, Placement, Stats};
use hwc_numa::{Pages, PlacementCheck};
use hwc_runner::{Also, BenchError, Prepared, Rep};

use crate::affinity::AffinityGuard;
use crate::driver::{DeviceBuffer, HostBuffer, Latch, LatchFlag, STAGING_BYTES};
use crate::error::{driver, CudaError};
use crate::params::{CopyPlacement, CopySpec, Direction, HostMemory, HOME_PLACEMENT};
use crate::pattern;
use crate::pool::{DeviceKey, HostKey, Lent, Pool, Role};
use crate::timing::{self, MAX_BATCHES, MAX_COPIES, MIN_COPIES, TARGET_REP_SECONDS};
use hwc_model::cpulist::format as format_cpulist;

/// How long the latch kernel waits for the host before it gives up (and marks that it did).
pub const LATCH_TIMEOUT_NS: u64 = 1_000_000_000;
/// Window read back from each of three places of a D2D destination larger than this.
const D2D_SAMPLE_BYTES: usize = 1 << 20;
/// Calibration attempts (each timeout halves the copies).
const CALIBRATION_ATTEMPTS: u32 = 8;

/// A GPU's context and the latch that all its cases share.
pub struct DeviceRuntime {
    pub ctx: Arc<CudaContext>,
    pub latch: Latch,
    pub flag: LatchFlag,
    /// When this GPU last ran work of ours (for the idle guard and the clock warm-up).
    pub last_active: Option<Instant>,
    /// Buffers kept from one case to the next.
    pub pool: Pool,
    /// The clock warm-up's streams and buffers, once made.
    pub warm_kit: Option<WarmKit>,
    /// The standing streams a placement's `queue` names (`queue` n is `standing[n - 1]`), made
    /// in order as the first case that asks for them needs them, then kept.
    standing: Vec<Arc<CudaStream>>,
    /// Pinned host memory the data check reads device destinations back through, made by
    /// the first check that needs it, then kept.
    staging: Option<HostBuffer>,
}

/// Bytes of each warm-up buffer.
const WARMUP_BUFFER_BYTES: usize = 64 << 20;

/// What the clock warm-up copies with: a stream for the latch kernel, one for pinned H2D
/// copies, one for D2D copies, a pinned host buffer and two device buffers.
pub struct WarmKit {
    pub spin: Arc<CudaStream>,
    pub h2d: Arc<CudaStream>,
    pub d2d: Arc<CudaStream>,
    pub host: HostBuffer,
    pub a: DeviceBuffer,
    pub b: DeviceBuffer,
}

impl WarmKit {
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self, CudaError> {
        let stream = || ctx.new_stream().map_err(driver("cuStreamCreate"));
        Ok(WarmKit {
            spin: stream()?,
            h2d: stream()?,
            d2d: stream()?,
            host: HostBuffer::new(
                ctx,
                WARMUP_BUFFER_BYTES,
                None,
                HostMemory::Pinned,
                Pages::Huge,
            )?,
            a: DeviceBuffer::new(ctx, WARMUP_BUFFER_BYTES)?,
            b: DeviceBuffer::new(ctx, WARMUP_BUFFER_BYTES)?,
        })
    }

    pub fn bytes(&self) -> usize {
        WARMUP_BUFFER_BYTES
    }
}

impl DeviceRuntime {
    /// Retain the device's primary context and load the latch.
    pub fn open(ordinal: u32) -> Result<Self, CudaError> {
        let ctx = CudaContext::new(ordinal as usize).map_err(driver("cuDevicePrimaryCtxRetain"))?;
        // SAFETY: called before anything is allocated in the context; this backend never
        // uses cudarc's CudaSlice, and orders its streams itself with explicit events.
        unsafe { ctx.disable_event_tracking() };
        let latch = Latch::load(&ctx)?;
        let flag = LatchFlag::new(&ctx)?;
        Ok(DeviceRuntime {
            ctx,
            latch,
            flag,
            last_active: None,
            pool: Pool::default(),
            warm_kit: None,
            standing: Vec::new(),
            staging: None,
        })
    }

    /// The read-back staging buffer ([`STAGING_BYTES`] of pinned host memory, not placed).
    fn staging(&mut self) -> Result<&mut [u8], CudaError> {
        let buffer = match &mut self.staging {
            Some(buffer) => buffer,
            none => none.insert(HostBuffer::new(
                &self.ctx,
                STAGING_BYTES,
                None,
                HostMemory::Pinned,
                Pages::Huge,
            )?),
        };
        Ok(buffer.as_mut_slice())
    }

    /// Standing stream `queue` (≥ 1), making it and every one before it that is not made yet.
    fn standing_stream(&mut self, queue: usize) -> Result<Arc<CudaStream>, CudaError> {
        while self.standing.len() < queue {
            let stream = self.ctx.new_stream().map_err(driver("cuStreamCreate"))?;
            self.standing.push(stream);
        }
        Ok(self.standing[queue - 1].clone())
    }
}

/// A copy's raw endpoints. Whoever builds one keeps the buffers behind it alive, and
/// synchronises the stream it was queued on before freeing them.
#[derive(Clone, Copy)]
pub enum CopyOp {
    H2d {
        dst: sys::CUdeviceptr,
        src: *const c_void,
    },
    D2h {
        dst: *mut c_void,
        src: sys::CUdeviceptr,
    },
    D2d {
        dst: sys::CUdeviceptr,
        src: sys::CUdeviceptr,
    },
}

impl CopyOp {
    /// The same copy with each end moved by `at`'s offset for its kind of buffer (see
    /// [`CopyPlacement`]).
    fn placed(self, at: CopyPlacement) -> CopyOp {
        let shift = |ptr: sys::CUdeviceptr, by: usize| ptr + by as sys::CUdeviceptr;
        match self {
            CopyOp::H2d { dst, src } => CopyOp::H2d {
                dst: shift(dst, at.device_destination_offset_bytes),
                src: src.wrapping_byte_add(at.host_source_offset_bytes),
            },
            CopyOp::D2h { dst, src } => CopyOp::D2h {
                dst: dst.wrapping_byte_add(at.host_destination_offset_bytes),
                src: shift(src, at.device_source_offset_bytes),
            },
            CopyOp::D2d { dst, src } => CopyOp::D2d {
                dst: shift(dst, at.device_destination_offset_bytes),
                src: shift(src, at.device_source_offset_bytes),
            },
        }
    }

    /// Where this copy lies in its buffers under `at`: the offsets of its two ends.
    fn shift(self, at: CopyPlacement) -> Shift {
        let (dst_at, src_at) = match self {
            CopyOp::H2d { .. } => (
                at.device_destination_offset_bytes,
                at.host_source_offset_bytes,
            ),
            CopyOp::D2h { .. } => (
                at.host_destination_offset_bytes,
                at.device_source_offset_bytes,
            ),
            CopyOp::D2d { .. } => (
                at.device_destination_offset_bytes,
                at.device_source_offset_bytes,
            ),
        };
        Shift { dst_at, src_at }
    }

    /// Queue the copy of `len` bytes on `stream`.
    ///
    /// # Safety
    /// Both endpoints must be allocations of at least `len` bytes that stay alive until
    /// `stream` has been synchronised; the stream's context must be bound to this thread.
    pub unsafe fn enqueue(self, len: usize, stream: &CudaStream) -> Result<(), CudaError> {
        let s = stream.cu_stream();
        let (code, call) = match self {
            // SAFETY: the caller's contract above (device dst, host src of `len` bytes).
            CopyOp::H2d { dst, src } => (
                unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src, len, s) },
                "cuMemcpyHtoDAsync",
            ),
            // SAFETY: the caller's contract above (host dst, device src of `len` bytes).
            CopyOp::D2h { dst, src } => (
                unsafe { sys::cuMemcpyDtoHAsync_v2(dst, src, len, s) },
                "cuMemcpyDtoHAsync",
            ),
            // SAFETY: the caller's contract above (device dst and src of `len` bytes).
            CopyOp::D2d { dst, src } => (
                unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, len, s) },
                "cuMemcpyDtoDAsync",
            ),
        };
        code.result().map_err(driver(call))
    }
}

type HostLent = Lent<HostKey, HostBuffer>;
type DeviceLent = Lent<DeviceKey, DeviceBuffer>;

/// The buffers of one stream, lent by the GPU's [`Pool`] for the case.
enum Buffers {
    H2d { src: HostLent, dst: DeviceLent },
    D2h { src: DeviceLent, dst: HostLent },
    D2d { src: DeviceLent, dst: DeviceLent },
}

impl Buffers {
    /// The host side of the copy, if it has one, with the bytes of it the case may use (the
    /// copy and room for the farthest placement).
    fn host_mut(&mut self, spec: &CopySpec) -> Option<(&mut HostLent, usize)> {
        match self {
            Buffers::H2d { src, .. } => Some((src, spec.host_source_bytes())),
            Buffers::D2h { dst, .. } => Some((dst, spec.host_destination_bytes())),
            Buffers::D2d { .. } => None,
        }
    }

    /// `Ok` when a copy of `size` bytes at `shift` stays inside both its buffers.
    fn fit(&self, shift: Shift, size: usize) -> Result<(), CudaError> {
        match self {
            Buffers::H2d { src, dst } => {
                dst.buf.check_range(shift.dst_at, size)?;
                src.buf.check_range(shift.src_at, size)
            }
            Buffers::D2h { src, dst } => {
                dst.buf.check_range(shift.dst_at, size)?;
                src.buf.check_range(shift.src_at, size)
            }
            Buffers::D2d { src, dst } => {
                dst.buf.check_range(shift.dst_at, size)?;
                src.buf.check_range(shift.src_at, size)
            }
        }
    }

    fn give_back(self, pool: &mut Pool) {
        match self {
            Buffers::H2d { src, dst } => {
                pool.give_host(src);
                pool.give_device(dst);
            }
            Buffers::D2h { src, dst } => {
                pool.give_device(src);
                pool.give_host(dst);
            }
            Buffers::D2d { src, dst } => {
                pool.give_device(src);
                pool.give_device(dst);
            }
        }
    }
}

struct Lane {
    /// Where the copies are queued: `own`, or a standing stream the placement names.
    stream: Arc<CudaStream>,
    /// The stream made for this lane.
    own: Arc<CudaStream>,
    /// The copy with its endpoints at their buffers' starts.
    op: CopyOp,
    /// Where in their buffers the copies lie ([`HOME_PLACEMENT`] unless the case searched).
    at: CopyPlacement,
    buffers: Buffers,
    seed: u64,
    index: u32,
}

impl Lane {
    /// The copy as queued: at the lane's placement.
    fn copy(&self) -> CopyOp {
        self.op.placed(self.at)
    }
}

/// Where a copy lies in its buffers, as the data check reads it: the destination's byte
/// `dst_at + i` must hold the source's byte `src_at + i`, whose pattern value depends on that
/// offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shift {
    dst_at: usize,
    src_at: usize,
}

impl Shift {
    /// The destination buffer offset of the copy's byte `i`: where reading back starts.
    fn destination(self, i: usize) -> usize {
        self.dst_at + i
    }

    /// Check a piece of the destination read back from buffer offset `at`; a mismatch's
    /// offset is the byte's index in the copy.
    fn check(self, chunk: &[u8], at: usize, seed: u64) -> Option<pattern::Mismatch> {
        let expected_at = at - self.dst_at + self.src_at;
        pattern::check(chunk, seed, expected_at).map(|m| pattern::Mismatch {
            offset: m.offset - self.src_at,
            ..m
        })
    }
}

/// What trying the placements found.
#[derive(Clone)]
struct PlacementSearch {
    /// Per placement tried: where, and GB/s of all flows together (each flow's
    /// bytes over its own span, summed) in one batch of K copies (after a settling batch where
    /// the placement moves the stream).
    tried: Vec<(CopyPlacement, f64)>,
    /// The [`FINALISTS`] fastest of `tried` (indices into it), each tried again: GB/s over
    /// [`FINAL_REPS`] batches, as in the first round (`None`: a batch gave no reading).
    finals: Vec<(usize, Option<Stats>)>,
    /// Index into `tried` of the placement the case is measured at: the finalist with the
    /// highest median.
    chosen: usize,
}

/// How many of the fastest placements of the first round are tried again. The fastest single
/// repetition of 24 is partly the luckiest: a placement whose one repetition ran high by the
/// repetitions' own spread (1–3 % for small duplex copies) could beat a truly faster one.
pub(crate) const FINALISTS: usize = 3;
/// Timed repetitions per finalist; their median decides.
pub(crate) const FINAL_REPS: usize = 3;

/// Index into `tried` of the placement to measure at: the finalist with the highest median;
/// if no finalist gave a reading, the fastest of the first round; if none did either, home
/// (index 0).
fn choose(tried: &[(CopyPlacement, f64)], finals: &[(usize, f64)]) -> usize {
    let best_final = fastest(finals.iter().map(|f| f.1), 1);
    match best_final.first() {
        Some(&f) => finals[f].0,
        None => fastest(tried.iter().map(|t| t.1), 1)
            .first()
            .copied()
            .unwrap_or(0),
    }
}

/// Indices of the `n` fastest finite rates, fastest first. A non-finite rate (an event span
/// read as zero) is no reading: it is never a finalist.
fn fastest(rates: impl Iterator<Item = f64>, n: usize) -> Vec<usize> {
    let mut finite: Vec<(usize, f64)> = rates.enumerate().filter(|r| r.1.is_finite()).collect();
    finite.sort_by(|a, b| b.1.total_cmp(&a.1));
    finite.into_iter().take(n).map(|r| r.0).collect()
}

/// The streams of one direction, joined into the lead stream's end event.
struct Flow {
    direction: Direction,
    lanes: Vec<Lane>,
    joins: Vec<CudaEvent>,
    /// Recorded on the head stream when the flow's copies may start.
    start: CudaEvent,
    end: CudaEvent,
}

/// What the backend knows about the GPU that a case needs.
pub struct CaseContext {
    pub l2_cache_bytes: u64,
    /// Notes from the backend that every figure of this GPU carries (clocks, idle guard).
    pub notes: Vec<String>,
    /// CPUs to pin the issuing thread to, with the node they belong to.
    pub pin: Option<(u32, Vec<u32>)>,
    /// For a duplex case: the key of the planned case of the other direction of the same
    /// copies, whose figure the same repetitions give (see [`Prepared::also`]).
    pub partner: Option<String>,
}

/// A prepared copy case.
pub struct CopyCase<'a> {
    rt: &'a mut DeviceRuntime,
    flows: Vec<Flow>,
    measured: usize,
    size_bytes: usize,
    streams: u32,
    copies: u32,
    /// Latched batches of `copies` per stream that one timed repetition gathers (see
    /// [`timing::batches_per_rep`]): more than 1 only for pinned H2D and duplex copies whose
    /// batch is well short of [`TARGET_REP_SECONDS`].
    batches: u32,
    latched: bool,
    /// No line of the host buffers was in a CPU cache when the case began.
    flushed: bool,
    cache_resident: bool,
    placement: Option<Placement>,
    /// Set when the case tried several placements.
    search: Option<PlacementSearch>,
    /// What the search found, as the measurement records it (the same for a duplex partner,
    /// timed at the same placement).
    found_placement: Option<hwc_model::PlacementSearch>,
    notes: Vec<String>,
    /// A duplex case's other direction, timed by its own events in the same repetitions:
    /// its planned case's key, the flow's index and its figure's notes.
    partner: Option<(String, usize, Vec<String>)>,
    /// Each flow's event seconds in the last repetition (its batches' spans summed).
    flow_seconds: Vec<f64>,
    /// Each flow's event seconds in the last batch.
    batch_flow_seconds: Vec<f64>,
    /// Set when the data check failed: the buffers are freed, not given back to the pool.
    suspect: bool,
    /// GB/s of each flow in the case's first batch of copies (calibration's): the cold figure.
    first_gbps: Vec<f64>,
    /// Copies per stream in that batch.
    first_copies: u32,
    /// The GPU's state through the case, where NVML is loaded.
    pub(crate) watch: Option<crate::case_state::StateWatch<'a>>,
    _affinity: Option<AffinityGuard>,
}

/// "1 copy", "256 copies".
fn copies_label(k: u32) -> String {
    if k == 1 {
        "1 copy".to_string()
    } else {
        format!("{k} copies")
    }
}

fn new_event(ctx: &Arc<CudaContext>, timing: bool) -> Result<CudaEvent, CudaError> {
    let flags = timing.then_some(sys::CUevent_flags::CU_EVENT_DEFAULT);
    ctx.new_event(flags).map_err(driver("cuEventCreate"))
}

impl<'a> CopyCase<'a> {
    /// Allocate, place, fill and calibrate; `watch` (the GPU's state through the case, where
    /// NVML is loaded) samples with the calibration's second batch in flight.
    pub(crate) fn prepare(
        rt: &'a mut DeviceRuntime,
        spec: &CopySpec,
        cx: CaseContext,
        watch: Option<crate::case_state::StateWatch<'a>>,
    ) -> Result<Self, CudaError> {
        let affinity = match &cx.pin {
            Some((_, cpus)) => Some(AffinityGuard::pin(cpus)?),
            None => None,
        };
        let ctx = rt.ctx.clone();
        ctx.bind_to_thread().map_err(driver("cuCtxSetCurrent"))?;
        let size = spec.size_bytes;
        let source_bytes = spec.device_source_bytes();
        let destination_bytes = spec.device_destination_bytes();
        let home = HOME_PLACEMENT;
        let pool = &mut rt.pool;
        let mut flows = Vec::with_capacity(spec.flows.len());
        for f in &spec.flows {
            let mut lanes = Vec::with_capacity(spec.streams as usize);
            for index in 0..spec.streams {
                let stream = ctx.new_stream().map_err(driver("cuStreamCreate"))?;
                let host = |role| HostKey::of(spec, f.host_node, index, role);
                let dev = |role| DeviceKey { role, lane: index };
                let (op, buffers, seed) = match f.direction {
                    Direction::H2d => {
                        let src =
                            pool.take_host(&ctx, host(Role::Src), spec.host_source_bytes())?;
                        let dst = pool.take_device(&ctx, dev(Role::Dst), destination_bytes)?;
                        let op = CopyOp::H2d {
                            dst: dst.buf.ptr(),
                            src: src.buf.as_ptr(),
                        };
                        let seed = src.seed;
                        (op, Buffers::H2d { src, dst }, seed)
                    }
                    Direction::D2h => {
                        let src = pool.take_device(&ctx, dev(Role::Src), source_bytes)?;
                        let mut dst =
                            pool.take_host(&ctx, host(Role::Dst), spec.host_destination_bytes())?;
                        let op = CopyOp::D2h {
                            dst: dst.buf.as_mut_ptr(),
                            src: src.buf.ptr(),
                        };
                        let seed = src.seed;
                        (op, Buffers::D2h { src, dst }, seed)
                    }
                    Direction::D2d => {
                        let src = pool.take_device(&ctx, dev(Role::Src), source_bytes)?;
                        let dst = pool.take_device(&ctx, dev(Role::Dst), destination_bytes)?;
                        let op = CopyOp::D2d {
                            dst: dst.buf.ptr(),
                            src: src.buf.ptr(),
                        };
                        let seed = src.seed;
                        (op, Buffers::D2d { src, dst }, seed)
                    }
                };
                lanes.push(Lane {
                    own: stream.clone(),
                    stream,
                    op,
                    at: home,
                    buffers,
                    seed,
                    index,
                });
            }
            let joins = (1..lanes.len())
                .map(|_| new_event(&ctx, false))
                .collect::<Result<Vec<_>, _>>()?;
            flows.push(Flow {
                direction: f.direction,
                lanes,
                joins,
                start: new_event(&ctx, true)?,
                end: new_event(&ctx, true)?,
            });
        }
        let latched = spec.latched();
        // The CPU filled the sources and poisoned the destinations: none of their lines may
        // sit in its caches, so the DMA meets memory, not modified lines (see `cache`). A
        // buffer the CPU wrote since its last flush is flushed now; one poisoned with
        // non-temporal stores, or flushed before and only read by copies since, holds no line
        // in a cache. Pageable copies go through the driver's staging buffer, which this cannot
        // reach.
        let mut flushed = spec.host_memory == HostMemory::Pinned && spec.uses_host();
        if flushed {
            for lane in flows.iter_mut().flat_map(|f| &mut f.lanes) {
                if let Some((h, len)) = lane.buffers.host_mut(spec) {
                    if h.cached {
                        // SAFETY: the pool lent a buffer of at least `len` bytes (`take_host`).
                        h.cached = !unsafe { crate::cache::flush(h.buf.as_ptr().cast(), len) };
                    }
                    flushed &= !h.cached;
                }
            }
        }
        let placement = placement_of(&flows, spec, cx.pin.as_ref());
        let cache_resident = spec.flows[0].direction == Direction::D2d
            && crate::params::l2_resident(size as u64, spec.streams, cx.l2_cache_bytes);
        let mut case = CopyCase {
            rt,
            flows,
            measured: spec.measured,
            size_bytes: size,
            streams: spec.streams,
            copies: MIN_COPIES,
            batches: 1,
            latched,
            flushed,
            cache_resident,
            placement,
            search: None,
            found_placement: None,
            notes: Vec::new(),
            partner: None,
            flow_seconds: Vec::new(),
            batch_flow_seconds: Vec::new(),
            suspect: false,
            first_gbps: Vec::new(),
            first_copies: 0,
            watch,
            _affinity: affinity,
        };
        let (first_gbps, batch_seconds) = case.calibrate()?;
        case.first_gbps = first_gbps.clone();
        // Copies that read host memory (H2D, and duplex, whose H2D half does) whose batch of K
        // falls well short of the target gather batches into repetitions of about the target
        // (host spells, see `timing::batches_per_rep`); D2H copies, which ran flat, and D2D ones
        // (a 16-batch repetition of a 0.5 ms L2 copy would spend most of its time queuing) keep
        // one batch a repetition.
        let reads_host = spec.flows.iter().any(|f| f.direction == Direction::H2d);
        if latched && reads_host {
            case.batches = timing::batches_per_rep(batch_seconds, TARGET_REP_SECONDS, MAX_BATCHES);
        }
        if spec.searches_placement() {
            case.search_placement(spec.placements())?;
        }
        case.notes = case.describe(spec, &cx, first_gbps[spec.measured]);
        if let Some(search) = &case.search {
            let directions: Vec<Direction> = spec.flows.iter().map(|f| f.direction).collect();
            let ends = moved_ends(&directions, spec.placements());
            case.found_placement = Some(placement_search(search, &ends));
        }
        let other = (0..spec.flows.len()).find(|&i| i != spec.measured);
        if let (Some(key), Some(other)) = (cx.partner.clone(), other) {
            let flipped = CopySpec {
                measured: other,
                ..spec.clone()
            };
            let notes = case.describe(&flipped, &cx, first_gbps[other]);
            case.partner = Some((key, other, notes));
        }
        Ok(case)
    }

    /// Choose K: one batch with about 32 MiB per stream gives the rate, K follows from it; a
    /// batch of that K must then pass without the latch timing out (a full driver queue makes
    /// the enqueue block until the latch gives up), else K is halved. At least two batches
    /// run: the first is the case's cold figure, the next (of K) warms it. Returns the first
    /// batch's throughput in GB/s of each flow and how long a batch of the chosen K lasts at
    /// the last batch's rate (of the measured flow), in seconds (short of the target where the
    /// queue, or a first rate that K then outgrew, stopped K).
    fn calibrate(&mut self) -> Result<(Vec<f64>, f64), CudaError> {
        let mut cap = MAX_COPIES;
        let mut k = timing::calibration_copies(self.size_bytes as u64);
        let round_bytes = self.size_bytes as u64 * u64::from(self.streams);
        let mut first_gbps = None;
        let mut passed = 0;
        for _ in 0..CALIBRATION_ATTEMPTS {
            match self.run_batch(k) {
                Ok((seconds, _)) => {
                    passed += 1;
                    if first_gbps.is_none() {
                        self.first_copies = k;
                    }
                    let rate = f64::from(k) * round_bytes as f64 / seconds;
                    let batch_bytes = f64::from(k) * round_bytes as f64;
                    let first = first_gbps.get_or_insert_with(|| {
                        self.batch_flow_seconds
                            .iter()
                            .map(|s| batch_bytes / s / 1e9)
                            .collect::<Vec<f64>>()
                    });
                    let chosen = timing::copies_per_rep(round_bytes, rate, TARGET_REP_SECONDS, cap);
                    if chosen <= k {
                        self.copies = chosen;
                        let batch_seconds = f64::from(chosen) * round_bytes as f64 / rate;
                        let first = first.clone();
                        if passed == 1 {
                            // The first batch is the cold figure; a second, of K, warms the
                            // case before its timed repetitions (and carries the NVML sample).
                            self.run_batch(chosen)?;
                        }
                        return Ok((first, batch_seconds));
                    }
                    k = chosen;
                    cap = chosen;
                }
                Err(CudaError::LatchTimeout { .. }) if k > MIN_COPIES => {
                    k = (k / 2).max(MIN_COPIES);
                    cap = k;
                    if let Some(w) = self.watch.as_mut() {
                        w.restart();
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(CudaError::LatchTimeout {
            timeout_ms: LATCH_TIMEOUT_NS / 1_000_000,
        })
    }

    /// Time a batch of the chosen K at each of `placements`, try the [`FINALISTS`] fastest
    /// again ([`FINAL_REPS`] timed batches each) and leave the lanes at the finalist with the
    /// highest median. The figures come from the repetitions the runner times afterwards, not
    /// from these, so picking the best of a few placements does not pick the luckiest
    /// repetition.
    ///
    /// A placement that moves the copies onto another stream (D2D) runs one settling batch
    /// first: a stream's first copies of a case may start late. One that only moves offsets in
    /// buffers the case already holds runs none: its batch repeats the same bytes K times (up
    /// to [`MAX_COPIES`], which copies of 2 MiB or less reach on a Gen5 x16 link), so the first
    /// copy's translation misses are spread over the whole batch.
    fn search_placement(&mut self, placements: &[CopyPlacement]) -> Result<(), CudaError> {
        let mut tried = Vec::new();
        for &at in placements {
            self.place(at)?;
            if at.queue != 0 {
                self.run_batch(self.copies)?;
            }
            self.run_batch(self.copies)?;
            tried.push((at, self.all_flows_gbps()));
        }
        let mut finals = Vec::new();
        for i in fastest(tried.iter().map(|t| t.1), FINALISTS) {
            let at = tried[i].0;
            self.place(at)?;
            if at.queue != 0 {
                self.run_batch(self.copies)?;
            }
            let mut reps = Vec::with_capacity(FINAL_REPS);
            for _ in 0..FINAL_REPS {
                self.run_batch(self.copies)?;
                reps.push(self.all_flows_gbps());
            }
            // A repetition that is no reading (not finite) makes the finalist no reading.
            finals.push((i, hwc_stats::summarize(&reps).ok()));
        }
        let medians: Vec<(usize, f64)> = finals
            .iter()
            .map(|(i, s)| (*i, s.as_ref().map_or(f64::NAN, |s| s.median)))
            .collect();
        let chosen = choose(&tried, &medians);
        self.place(tried[chosen].0)?;
        self.search = Some(PlacementSearch {
            tried,
            finals,
            chosen,
        });
        Ok(())
    }

    /// Move every lane's copies to `at`, after checking that they stay inside the buffers,
    /// and onto the stream it names (the lane's own for queue 0; else standing stream `queue`
    /// for the first lane, the next for the second, …). Every repetition ends synchronised, so
    /// nothing is in flight on the stream a lane leaves.
    fn place(&mut self, at: CopyPlacement) -> Result<(), CudaError> {
        let size = self.size_bytes;
        for (i, lane) in self.flows.iter_mut().flat_map(|f| &mut f.lanes).enumerate() {
            lane.buffers.fit(lane.op.shift(at), size)?;
            lane.at = at;
            lane.stream = match at.queue {
                0 => lane.own.clone(),
                q => self.rt.standing_stream(q + i)?,
            };
        }
        Ok(())
    }

    /// The last batch's throughput of every flow together: each flow's bytes over its own
    /// event span, summed, in GB/s.
    fn all_flows_gbps(&self) -> f64 {
        let flow_bytes = f64::from(self.copies) * self.size_bytes as f64 * f64::from(self.streams);
        self.batch_flow_seconds
            .iter()
            .map(|s| flow_bytes / s / 1e9)
            .sum()
    }

    fn lead(&self) -> &Arc<CudaStream> {
        &self.flows[0].lanes[0].stream
    }

    /// One latched batch of `k` copies per stream: (event seconds, wall seconds) of the
    /// measured flow; every flow's event seconds are left in `batch_flow_seconds`. Calibration
    /// and the placement search time single batches; a timed repetition gathers
    /// [`CopyCase::batches`] of them.
    fn run_batch(&mut self, k: u32) -> Result<(f64, f64), CudaError> {
        self.rt
            .ctx
            .bind_to_thread()
            .map_err(driver("cuCtxSetCurrent"))?;
        let lead = self.lead().clone();
        if self.latched {
            self.rt.flag.reset();
            self.rt
                .latch
                .launch(&lead, &self.rt.flag, LATCH_TIMEOUT_NS)?;
        }
        let submitted = Instant::now();
        let start = &self.flows[0].start;
        start.record(&lead).map_err(driver("cuEventRecord"))?;
        for (fi, flow) in self.flows.iter().enumerate() {
            for (li, lane) in flow.lanes.iter().enumerate() {
                if fi != 0 || li != 0 {
                    lane.stream
                        .wait(start)
                        .map_err(driver("cuStreamWaitEvent"))?;
                }
            }
            if fi != 0 {
                flow.start
                    .record(&flow.lanes[0].stream)
                    .map_err(driver("cuEventRecord"))?;
            }
        }
        for _ in 0..k {
            for flow in &self.flows {
                for lane in &flow.lanes {
                    // SAFETY: the lane owns both buffers, each of at least size_bytes from
                    // lane.at's offset for it (the home placement at offset 0, or one place()
                    // checked fits); the case drops the buffers only after synchronising every
                    // stream (run_batch's end, or Drop); the context was bound above.
                    unsafe { lane.copy().enqueue(self.size_bytes, &lane.stream) }?;
                }
            }
        }
        for flow in &self.flows {
            let head = &flow.lanes[0].stream;
            for (lane, join) in flow.lanes[1..].iter().zip(&flow.joins) {
                join.record(&lane.stream).map_err(driver("cuEventRecord"))?;
                head.wait(join).map_err(driver("cuStreamWaitEvent"))?;
            }
            flow.end.record(head).map_err(driver("cuEventRecord"))?;
        }
        let released = if self.latched {
            let t = Instant::now();
            self.rt.flag.release();
            t
        } else {
            submitted
        };
        // A few NVML reads while the copies run, outside the events that time them.
        if let Some(w) = self.watch.as_mut() {
            w.in_flight();
        }
        self.flows[self.measured]
            .end
            .synchronize()
            .map_err(driver("cuEventSynchronize"))?;
        let wall = released.elapsed().as_secs_f64();
        for flow in &self.flows {
            flow.end
                .synchronize()
                .map_err(driver("cuEventSynchronize"))?;
        }
        self.rt.last_active = Some(Instant::now());
        if self.latched && self.rt.flag.timed_out() {
            return Err(CudaError::LatchTimeout {
                timeout_ms: LATCH_TIMEOUT_NS / 1_000_000,
            });
        }
        self.batch_flow_seconds.clear();
        for flow in &self.flows {
            let ms = flow
                .start
                .elapsed_ms(&flow.end)
                .map_err(driver("cuEventElapsedTime"))?;
            self.batch_flow_seconds.push(f64::from(ms) / 1e3);
        }
        Ok((self.batch_flow_seconds[self.measured], wall))
    }

    fn describe(&self, spec: &CopySpec, cx: &CaseContext, first_gbps: f64) -> Vec<String> {
        let mut notes = Vec::new();
        let k = copies_label(self.copies);
        let m = self.batches;
        if self.latched && m > 1 {
            notes.push(format!(
                "{m} batches of {k} per stream per repetition, each batch queued behind \
                 a spin-kernel latch and timed by CUDA events, the repetition's time the sum of \
                 its batches' spans (batches gathered toward a {:.0} ms repetition, a \
                 setting), so that a figure does not rest on one short spell of the host",
                TARGET_REP_SECONDS * 1e3
            ));
        } else if self.latched {
            notes.push(format!(
                "{k} per stream per repetition, queued behind a spin-kernel latch and \
                 timed by CUDA events"
            ));
        } else {
            notes.push(format!(
                "{k} per stream per repetition, not latched: the driver stages pageable \
                 memory through its own pinned buffer and may block the submitting thread, so \
                 the event span includes that staging"
            ));
        }
        notes.push(format!(
            "cold: the case's first completed batch ({} per stream, its calibration's), \
             {first_gbps:.2} GB/s; the timed repetitions follow the calibration{}, which ran \
             the same copies",
            copies_label(self.first_copies),
            if spec.searches_placement() {
                " and the placement search"
            } else {
                ""
            }
        ));
        if spec.uses_host() && spec.host_memory == HostMemory::Pinned {
            notes.push(match spec.host_pages() {
                Pages::Small => "host buffers in small pages (MADV_NOHUGEPAGE), scattered over \
                                 physical memory, as every case that searches placement takes \
                                 them: small duplex pairs reach faster placements in them"
                    .into(),
                _ => "host buffers in transparent huge pages where the kernel gave them \
                      (MADV_HUGEPAGE)"
                    .into(),
            });
        }
        if self.flushed {
            notes.push(
                "host buffers out of the CPU caches before the case: the copies read and \
                 write memory, not lines a core holds"
                    .into(),
            );
        }
        let measured = spec.flows[spec.measured].direction;
        if let Some(other) = spec.flows.iter().find(|f| f.direction != measured) {
            notes.push(format!(
                "duplex: {} ran at the same time on its own {} stream(s); this figure is {} \
                 bytes over {}'s own event span",
                other.direction.as_str(),
                spec.streams,
                measured.as_str(),
                measured.as_str()
            ));
        }
        if measured == Direction::D2d {
            notes.push(
                "bytes copied per second (each byte read once and written once counts once)".into(),
            );
            if self.cache_resident {
                notes.push(format!(
                    "2 × {} × {} stream(s) fits the GPU's {} L2 cache: a cache figure, not \
                     device-memory bandwidth",
                    size_label(spec.size_bytes as u64),
                    spec.streams,
                    size_label(cx.l2_cache_bytes)
                ));
            }
        }
        notes.extend(cx.notes.iter().cloned());
        notes
    }
}

/// Check one lane's destination after a repetition: device destinations read back through
/// `staging`, host ones in place.
fn check_lane(
    size: usize,
    direction: Direction,
    lane: &Lane,
    staging: &mut [u8],
) -> Result<(), CudaError> {
    let shift = lane.op.shift(lane.at);
    let describe = |m: pattern::Mismatch| {
        CudaError::Mismatch(format!(
            "{} stream {}: byte {} of {} is {:#04x}, expected {:#04x}",
            direction.as_str(),
            lane.index,
            m.offset,
            size,
            m.found,
            m.expected
        ))
    };
    let mut device_check = |dst: &DeviceBuffer, offset: usize, len: usize| {
        dst.read_with(shift.destination(offset), len, staging, |chunk, at| {
            shift.check(chunk, at, lane.seed).map_or(Ok(()), Err)
        })
        .and_then(|r| r.map_err(describe))
    };
    match &lane.buffers {
        Buffers::H2d { dst, .. } => device_check(&dst.buf, 0, size),
        Buffers::D2h { dst, .. } => {
            check_host_destination(dst.buf.as_slice(), shift, size, lane.seed)?
                .map_or(Ok(()), |m| Err(describe(m)))
        }
        Buffers::D2d { dst, .. } => {
            for (offset, len) in d2d_windows(size) {
                device_check(&dst.buf, offset, len)?;
            }
            Ok(())
        }
    }
}

/// Check a D2H copy's host destination `dst` (the whole buffer) for `size` bytes at `shift`;
/// a mismatch's offset is the byte's index in the copy.
fn check_host_destination(
    dst: &[u8],
    shift: Shift,
    size: usize,
    seed: u64,
) -> Result<Option<pattern::Mismatch>, CudaError> {
    let at = shift.destination(0);
    crate::driver::check_range(at, size, dst.len())?;
    Ok(shift.check(&dst[at..at + size], at, seed))
}

/// What a case that tried several placements records of its search. `ends` are the buffer ends
/// the placements move, in the order each placement's label lists their offsets.
fn placement_search(search: &PlacementSearch, ends: &[End]) -> hwc_model::PlacementSearch {
    let label = |at: CopyPlacement| placement_label(at, ends);
    let tried: Vec<String> = search
        .tried
        .iter()
        .map(|(at, gbps)| format!("{} → {gbps:.2}", label(*at)))
        .collect();
    let finals: Vec<String> = search
        .finals
        .iter()
        .map(|(i, stats)| {
            let at = label(search.tried[*i].0);
            match stats {
                Some(s) => format!("{at} → {:.2} (±{:.1} %, N={})", s.median, s.spread_pct, s.n),
                None => format!("{at} → no reading"),
            }
        })
        .collect();
    let gbps = || search.tried.iter().map(|t| t.1);
    let fastest = gbps().fold(f64::NAN, f64::max);
    let slowest = gbps().fold(f64::NAN, f64::min);
    let names: Vec<&str> = ends.iter().map(|e| e.name()).collect();
    let detail = format!(
        "{} placements of the copies in their buffers tried \
         (offsets in KiB: {}), all flows' GB/s in one batch of copies each (N=1, no spread): \
         {}; fastest over slowest {:+.1} %; the {} fastest again, median of {} batches each: \
         {}; measured at {} (where the buffers lie changes small copies: the GPU and the host \
         map physical addresses onto memory channels that software neither sees nor chooses{})",
        search.tried.len(),
        names.join("/"),
        tried.join(", "),
        (fastest / slowest - 1.0) * 100.0,
        search.finals.len(),
        FINAL_REPS,
        finals.join(", "),
        label(search.tried[search.chosen].0),
        if ends.contains(&End::Queue) {
            "; so does the stream they are queued on"
        } else {
            ""
        },
    );
    hwc_model::PlacementSearch {
        tried: search.tried.len() as u32,
        finalists: search.finals.len() as u32,
        fastest_over_slowest_pct: (fastest / slowest - 1.0) * 100.0,
        chosen: label(search.tried[search.chosen].0),
        detail,
    }
}

/// What a [`CopyPlacement`] moves: one end of a copy (which buffer, and how far into it), or
/// the stream the copies are queued on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    DeviceSource,
    DeviceDestination,
    HostSource,
    HostDestination,
    Queue,
}

impl End {
    const ALL: [End; 5] = [
        End::DeviceSource,
        End::DeviceDestination,
        End::HostSource,
        End::HostDestination,
        End::Queue,
    ];

    /// The end's name in a note. A case has at most one end of each kind (an H2D copy's
    /// host source, a D2H copy's device source, …), so the kind names it.
    fn name(self) -> &'static str {
        match self {
            End::DeviceSource => "device source",
            End::DeviceDestination => "device destination",
            End::HostSource => "host source",
            End::HostDestination => "host destination",
            End::Queue => "stream (0: the case's own, n: the GPU's n-th standing stream)",
        }
    }

    /// How far `at` moves this: bytes into the buffer, or the queue's number.
    fn offset(self, at: CopyPlacement) -> usize {
        match self {
            End::DeviceSource => at.device_source_offset_bytes,
            End::DeviceDestination => at.device_destination_offset_bytes,
            End::HostSource => at.host_source_offset_bytes,
            End::HostDestination => at.host_destination_offset_bytes,
            End::Queue => at.queue,
        }
    }

    /// What a copy of `direction` has that a placement can move: its two ends and its stream.
    fn of(direction: Direction) -> [End; 3] {
        match direction {
            Direction::H2d => [End::HostSource, End::DeviceDestination, End::Queue],
            Direction::D2h => [End::DeviceSource, End::HostDestination, End::Queue],
            Direction::D2d => [End::DeviceSource, End::DeviceDestination, End::Queue],
        }
    }
}

/// What some of `placements` move in a case's copies, in [`End::ALL`]'s order.
fn moved_ends(directions: &[Direction], placements: &[CopyPlacement]) -> Vec<End> {
    End::ALL
        .into_iter()
        .filter(|e| directions.iter().any(|d| End::of(*d).contains(e)))
        .filter(|e| placements.iter().any(|p| e.offset(*p) != 0))
        .collect()
}

/// `704/2688/1024`: the offsets of `ends`, in KiB (a stream by its number).
fn placement_label(at: CopyPlacement, ends: &[End]) -> String {
    let parts: Vec<String> = ends
        .iter()
        .map(|e| match e {
            End::Queue => e.offset(at).to_string(),
            _ => (e.offset(at) >> 10).to_string(),
        })
        .collect();
    parts.join("/")
}

/// Where the D2D destination is read back: all of it when small, else 1 MiB at its start,
/// middle and end (offsets multiples of 8).
fn d2d_windows(size: usize) -> Vec<(usize, usize)> {
    if size <= 4 * D2D_SAMPLE_BYTES {
        return vec![(0, size)];
    }
    let mid = (size / 2) & !7;
    let last = (size - D2D_SAMPLE_BYTES) & !7;
    vec![
        (0, D2D_SAMPLE_BYTES),
        (mid, D2D_SAMPLE_BYTES),
        (last, size - last),
    ]
}

fn placement_of(
    flows: &[Flow],
    spec: &CopySpec,
    pin: Option<&(u32, Vec<u32>)>,
) -> Option<Placement> {
    if !spec.uses_host() {
        return None;
    }
    let mut parts = Vec::new();
    let mut verified = true;
    let mut any_request = pin.is_some();
    for (flow, f) in flows.iter().zip(&spec.flows) {
        let checks: Vec<&PlacementCheck> = flow
            .lanes
            .iter()
            .filter_map(|l| match &l.buffers {
                Buffers::H2d { src, .. } => Some(src.buf.placement()),
                Buffers::D2h { dst, .. } => Some(dst.buf.placement()),
                Buffers::D2d { .. } => None,
            })
            .collect();
        if f.host_node.is_some() {
            any_request = true;
            verified &= checks.iter().all(|c| c.is_verified());
        }
        let mut described: Vec<String> = checks.iter().map(|c| c.describe()).collect();
        described.dedup();
        parts.push(format!(
            "{} {} host buffers: {}",
            flow.direction.as_str(),
            spec.host_memory.as_str(),
            described.join("; ")
        ));
    }
    match pin {
        Some((node, cpus)) => parts.push(format!(
            "issuing thread pinned to node {node} (CPUs {})",
            format_cpulist(cpus)
        )),
        None => parts.push("issuing thread not pinned".into()),
    }
    Some(Placement {
        cpus: pin.map(|(_, cpus)| format_cpulist(cpus)),
        verified: any_request && verified,
        detail: parts.join("; "),
    })
}

impl Prepared for CopyCase<'_> {
    fn bytes_per_rep(&self) -> u64 {
        u64::from(self.batches)
            * u64::from(self.copies)
            * self.size_bytes as u64
            * u64::from(self.streams)
    }

    /// One repetition: `batches` latched batches, their event spans (and wall spans) summed.
    fn run_once(&mut self) -> Result<Rep, BenchError> {
        let (mut seconds, mut wall) = (0.0, 0.0);
        self.flow_seconds = vec![0.0; self.flows.len()];
        for _ in 0..self.batches {
            let (s, w) = self.run_batch(self.copies)?;
            seconds += s;
            wall += w;
            for (total, batch) in self.flow_seconds.iter_mut().zip(&self.batch_flow_seconds) {
                *total += batch;
            }
        }
        Ok(Rep {
            seconds,
            wall_seconds: Some(wall),
        })
    }

    fn verify(&mut self) -> Result<(), BenchError> {
        // Device destinations are read back through the runtime's pinned staging buffer;
        // failing to make it says nothing about the copies' data.
        let reads_device = self.flows.iter().any(|f| f.direction != Direction::D2h);
        let staging = if reads_device {
            self.rt.staging()?
        } else {
            &mut [][..]
        };
        let checked = self.flows.iter().try_for_each(|flow| {
            flow.lanes
                .iter()
                .try_for_each(|lane| check_lane(self.size_bytes, flow.direction, lane, staging))
        });
        if let Err(e) = checked {
            self.suspect = true;
            return Err(e.into());
        }
        Ok(())
    }

    fn placement(&self) -> Option<Placement> {
        self.placement.clone()
    }

    fn cache_resident(&self) -> bool {
        self.cache_resident
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    fn placement_search(&self) -> Option<hwc_model::PlacementSearch> {
        self.found_placement.clone()
    }

    fn gpu_state(&self) -> Option<hwc_model::GpuCaseState> {
        self.watch.as_ref().map(|w| w.state())
    }

    /// The first calibration batch's rate of the measured flow, then of the partner's.
    fn cold_gbps(&self) -> Option<Vec<f64>> {
        let lead = *self.first_gbps.get(self.measured)?;
        let mut cold = vec![lead];
        if let Some((_, flow, _)) = &self.partner {
            cold.push(*self.first_gbps.get(*flow)?);
        }
        Some(cold)
    }

    /// A duplex case's other direction: the same copies, the same bytes per repetition.
    fn also(&self) -> Vec<Also> {
        self.partner
            .iter()
            .map(|(key, _, _)| Also {
                key: key.clone(),
                bytes_per_rep: self.bytes_per_rep(),
            })
            .collect()
    }

    fn last_also_seconds(&self) -> Vec<f64> {
        self.partner
            .iter()
            .filter_map(|(_, flow, _)| self.flow_seconds.get(*flow).copied())
            .collect()
    }

    fn also_notes(&self, index: usize) -> Vec<String> {
        self.partner
            .iter()
            .nth(index)
            .map(|(_, _, notes)| notes.clone())
            .unwrap_or_default()
    }
}

impl Drop for CopyCase<'_> {
    fn drop(&mut self) {
        // An error between queuing the latch and releasing it leaves the streams waiting:
        // open the latch, then let every copy finish before the buffers are reused or freed.
        self.rt.flag.release();
        let mut idle = true;
        for flow in &self.flows {
            for lane in &flow.lanes {
                idle &= lane.stream.synchronize().is_ok() && lane.own.synchronize().is_ok();
            }
        }
        self.rt.last_active = Some(Instant::now());
        // Only buffers no copy can still touch, and whose data is not in doubt, are kept.
        if idle && !self.suspect {
            for flow in std::mem::take(&mut self.flows) {
                for lane in flow.lanes {
                    lane.buffers.give_back(&mut self.rt.pool);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::SEARCH_PLACEMENTS;

    const KIB: usize = 1 << 10;

    /// A placement that moves the device ends only.
    fn at(destination_kib: usize, source_kib: usize) -> CopyPlacement {
        CopyPlacement {
            device_destination_offset_bytes: destination_kib * KIB,
            device_source_offset_bytes: source_kib * KIB,
            ..HOME_PLACEMENT
        }
    }

    /// A placement that moves every end.
    fn all_at(device: (usize, usize), host: (usize, usize)) -> CopyPlacement {
        CopyPlacement {
            device_destination_offset_bytes: device.0 * KIB,
            device_source_offset_bytes: device.1 * KIB,
            host_destination_offset_bytes: host.0 * KIB,
            host_source_offset_bytes: host.1 * KIB,
            queue: 0,
        }
    }

    /// The placements searched, and some that move the device destination or both device
    /// ends: the shift arithmetic is general.
    fn shifts() -> Vec<CopyPlacement> {
        let mut v = SEARCH_PLACEMENTS.to_vec();
        v.extend([at(1088, 0), at(704, 2112), at(3200, 320), at(192, 4160)]);
        v
    }

    #[test]
    fn the_finalist_with_the_best_median_is_measured_else_the_best_first_round() {
        let tried: Vec<(CopyPlacement, f64)> = [70.1, 75.4, 74.9, 75.0]
            .into_iter()
            .enumerate()
            .map(|(i, gbps)| (at(0, 64 * i), gbps))
            .collect();
        // The single repetition ranked 1 first; its median over 3 falls behind 3's.
        assert_eq!(choose(&tried, &[(1, 74.2), (3, 74.8), (2, 74.5)]), 3);
        // A finalist that gave no reading never wins.
        assert_eq!(choose(&tried, &[(1, f64::NAN), (2, 74.5)]), 2);
        // No finalist gave a reading: the fastest of the first round, not home.
        assert_eq!(choose(&tried, &[(1, f64::NAN), (3, f64::NAN)]), 1);
        assert_eq!(choose(&tried, &[]), 1);
        // Nothing gave a reading: home.
        let blank = vec![(HOME_PLACEMENT, f64::NAN), (at(0, 64), f64::NAN)];
        assert_eq!(choose(&blank, &[]), 0);
    }

    #[test]
    fn the_fastest_finite_rates_come_first() {
        let rates = [70.9, f64::NAN, 75.2, f64::INFINITY, 72.4, 74.0];
        assert_eq!(fastest(rates.into_iter(), 3), vec![2, 5, 4]);
        assert_eq!(fastest(rates.into_iter(), 1), vec![2]);
        // Fewer readings than asked for: all of them; none: none.
        assert_eq!(fastest([71.0, f64::NAN].into_iter(), 3), vec![0]);
        assert!(fastest([f64::NAN].into_iter(), 3).is_empty());
    }

    #[test]
    fn a_placement_moves_each_end_by_its_own_offset() {
        let at = all_at((192, 4160), (1024, 2688));
        let host = 0x1000usize as *mut c_void;
        match (CopyOp::H2d {
            dst: 1 << 32,
            src: host,
        })
        .placed(at)
        {
            CopyOp::H2d { dst, src } => {
                assert_eq!(dst, (1 << 32) + (192 << 10));
                assert_eq!(src as usize, 0x1000 + (2688 << 10));
            }
            _ => panic!("direction changed"),
        }
        match (CopyOp::D2h {
            dst: host,
            src: 1 << 32,
        })
        .placed(at)
        {
            CopyOp::D2h { dst, src } => {
                assert_eq!(dst as usize, 0x1000 + (1024 << 10));
                assert_eq!(src, (1 << 32) + (4160 << 10));
            }
            _ => panic!("direction changed"),
        }
        match (CopyOp::D2d {
            dst: 1 << 33,
            src: 1 << 32,
        })
        .placed(at)
        {
            CopyOp::D2d { dst, src } => {
                assert_eq!(dst, (1 << 33) + (192 << 10));
                assert_eq!(src, (1 << 32) + (4160 << 10));
            }
            _ => panic!("direction changed"),
        }
        // Home moves nothing.
        match (CopyOp::H2d { dst: 7, src: host }).placed(HOME_PLACEMENT) {
            CopyOp::H2d { dst, src } => assert_eq!((dst, src), (7, host.cast_const())),
            _ => panic!("direction changed"),
        }
    }

    #[test]
    fn each_direction_shifts_its_own_ends() {
        let at = all_at((704, 2112), (1024, 2688));
        let host = std::ptr::null_mut::<c_void>();
        let shift = |dst_at, src_at| Shift { dst_at, src_at };
        let h2d = CopyOp::H2d {
            dst: 0,
            src: host.cast_const(),
        };
        assert_eq!(h2d.shift(at), shift(704 * KIB, 2688 * KIB));
        assert_eq!(
            CopyOp::D2h { dst: host, src: 0 }.shift(at),
            shift(1024 * KIB, 2112 * KIB)
        );
        assert_eq!(
            CopyOp::D2d { dst: 0, src: 0 }.shift(at),
            shift(704 * KIB, 2112 * KIB)
        );
        // Home: every copy starts at its buffers' starts.
        let home = HOME_PLACEMENT;
        assert_eq!(CopyOp::D2d { dst: 0, src: 0 }.shift(home), shift(0, 0));
        assert_eq!(h2d.shift(home), shift(0, 0));
    }

    /// `dst` read back as the device check reads it: from `shift.dst_at + offset`, in pieces of
    /// an odd number of 8-byte words, each checked at its buffer offset.
    fn check_read_back(dst: &[u8], shift: Shift, offset: usize, len: usize) -> Option<usize> {
        let start = shift.destination(offset);
        let piece = 8 * 1021;
        (start..start + len).step_by(piece).find_map(|at| {
            let end = (at + piece).min(start + len);
            shift.check(&dst[at..end], at, 7).map(|m| m.offset)
        })
    }

    /// A source of `room` bytes holding the pattern (seed 7) from its start.
    fn patterned(room: usize) -> Vec<u8> {
        let mut src = vec![0u8; room];
        pattern::fill(&mut src, 7, 0);
        src
    }

    /// A poisoned destination of `room` bytes into which `size` bytes of `src` from `from`
    /// were copied at `to`.
    fn copied(src: &[u8], size: usize, room: usize, from: usize, to: usize) -> Vec<u8> {
        let mut dst = vec![crate::pool::POISON; room];
        dst[to..to + size].copy_from_slice(&src[from..from + size]);
        dst
    }

    #[test]
    fn the_data_check_passes_a_copy_at_its_placement_and_fails_one_elsewhere() {
        let size = 64 * KIB;
        let room = size + 4160 * KIB;
        let src = patterned(room);
        for at in shifts() {
            let shift = CopyOp::D2d { dst: 0, src: 0 }.shift(at);
            let copy = |from, to| copied(&src, size, room, from, to);
            // The copy the placement queues: it passes, whole and in windows.
            let right = copy(shift.src_at, shift.dst_at);
            assert_eq!(check_read_back(&right, shift, 0, size), None, "{at:?}");
            assert_eq!(check_read_back(&right, shift, 8 * KIB, 16 * KIB), None);
            // A corrupted byte is reported by its index in the copy.
            let mut bad = right.clone();
            bad[shift.dst_at + 1000] ^= 0xFF;
            assert_eq!(check_read_back(&bad, shift, 0, size), Some(1000), "{at:?}");
            // A copy that ignored the placement fails where the placement moved an end.
            if shift.src_at != 0 {
                let from_start = copy(0, shift.dst_at);
                assert!(
                    check_read_back(&from_start, shift, 0, size).is_some(),
                    "{at:?}"
                );
            }
            if shift.dst_at != 0 {
                let to_start = copy(shift.src_at, 0);
                assert!(
                    check_read_back(&to_start, shift, 0, size).is_some(),
                    "{at:?}"
                );
            }
        }
        // An H2D copy from a moved host source is read back from device memory as above.
        for at in SEARCH_PLACEMENTS {
            let shift = CopyOp::H2d {
                dst: 0,
                src: std::ptr::null(),
            }
            .shift(at);
            let right = copied(&src, size, room, shift.src_at, 0);
            assert_eq!(check_read_back(&right, shift, 0, size), None, "{at:?}");
            if shift.src_at != 0 {
                let from_start = copied(&src, size, room, 0, 0);
                assert!(
                    check_read_back(&from_start, shift, 0, size).is_some(),
                    "{at:?}"
                );
            }
        }
    }

    #[test]
    fn the_host_destination_check_reads_a_d2h_copy_where_its_placement_put_it() {
        let size = 64 * KIB;
        let src = patterned(size + 4160 * KIB);
        let d2h = CopyOp::D2h {
            dst: std::ptr::null_mut(),
            src: 0,
        };
        for at in SEARCH_PLACEMENTS {
            let shift = d2h.shift(at);
            let host_room = size + shift.dst_at;
            let copy = |from, to| copied(&src, size, host_room, from, to);
            let right = copy(shift.src_at, shift.dst_at);
            assert_eq!(
                check_host_destination(&right, shift, size, 7).unwrap(),
                None,
                "{at:?}"
            );
            // A corrupted byte is reported by its index in the copy.
            let mut bad = right.clone();
            bad[shift.dst_at + 4321] ^= 0x5A;
            let m = check_host_destination(&bad, shift, size, 7).unwrap();
            assert_eq!(m.map(|m| m.offset), Some(4321), "{at:?}");
            // Written to the buffer's start although the placement moved it: fails.
            if shift.dst_at != 0 {
                let to_start = copy(shift.src_at, 0);
                assert!(
                    check_host_destination(&to_start, shift, size, 7)
                        .unwrap()
                        .is_some(),
                    "{at:?}"
                );
            }
            // Read from the device buffer's start although the placement moved it: fails.
            if shift.src_at != 0 {
                let from_start = copy(0, shift.dst_at);
                assert!(
                    check_host_destination(&from_start, shift, size, 7)
                        .unwrap()
                        .is_some(),
                    "{at:?}"
                );
            }
            // A buffer too small for the placement is an error, not a panic.
            let short = &right[..host_room - 1];
            assert!(matches!(
                check_host_destination(short, shift, size, 7),
                Err(CudaError::OutOfRange { .. })
            ));
        }
    }

    #[test]
    fn the_placement_note_names_every_try_and_the_one_measured() {
        let tried = vec![
            (HOME_PLACEMENT, 70.88),
            (all_at((0, 704), (1024, 2688)), 75.21),
            (all_at((0, 192), (64, 3200)), 72.41),
        ];
        let stats = |median: f64, spread_pct: f64| Stats {
            median,
            min: median * 0.998,
            max: median * (0.998 + spread_pct / 100.0),
            spread_pct,
            n: 3,
        };
        let finals = vec![
            (1, Some(stats(74.83, 0.4))),
            (2, None),
            (0, Some(stats(70.9, 1.2))),
        ];
        let search = PlacementSearch {
            tried,
            finals,
            chosen: 1,
        };
        let duplex = moved_ends(&[Direction::H2d, Direction::D2h], &SEARCH_PLACEMENTS);
        let found = placement_search(&search, &duplex);
        assert_eq!((found.tried, found.finalists), (3, 3));
        assert_eq!(found.chosen, "704/2688/1024");
        assert!((found.fastest_over_slowest_pct - 6.11).abs() < 0.01);
        let note = found.detail;
        assert!(note.starts_with("3 placements"), "{note}");
        assert!(
            note.contains("(offsets in KiB: device source/host source/host destination)"),
            "{note}"
        );
        assert!(
            note.contains("0/0/0 → 70.88, 704/2688/1024 → 75.21, 192/3200/64 → 72.41"),
            "{note}"
        );
        assert!(note.contains("(N=1, no spread)"), "{note}");
        // 75.21 / 70.88 = 1.0611.
        assert!(note.contains("fastest over slowest +6.1 %"), "{note}");
        assert!(
            note.contains(
                "the 3 fastest again, median of 3 batches each: 704/2688/1024 → 74.83 \
                 (±0.4 %, N=3), 192/3200/64 → no reading, 0/0/0 → 70.90 (±1.2 %, N=3); \
                 measured at 704/2688/1024"
            ),
            "{note}"
        );
        // A one-way D2H case names only its own ends.
        let d2h = moved_ends(&[Direction::D2h], &SEARCH_PLACEMENTS);
        let note = placement_search(&search, &d2h).detail;
        assert!(
            note.contains("(offsets in KiB: device source/host destination)"),
            "{note}"
        );
        assert!(note.contains("0/0 → 70.88, 704/1024 → 75.21"), "{note}");
        // Neither names a stream: their placements all keep the case's own.
        assert!(!note.contains("stream"), "{note}");
    }

    #[test]
    fn a_d2d_search_moves_both_device_ends_and_the_stream_and_its_note_says_so() {
        use crate::params::D2D_SEARCH_PLACEMENTS;
        let ends = moved_ends(&[Direction::D2d], &D2D_SEARCH_PLACEMENTS);
        assert_eq!(
            ends,
            [End::DeviceSource, End::DeviceDestination, End::Queue]
        );
        let search = PlacementSearch {
            tried: vec![
                (D2D_SEARCH_PLACEMENTS[0], 474.2),
                (D2D_SEARCH_PLACEMENTS[1], 505.9),
            ],
            finals: vec![(1, None)],
            chosen: 1,
        };
        let note = placement_search(&search, &ends).detail;
        assert!(
            note.contains(
                "(offsets in KiB: device source/device destination/stream (0: the case's own, \
                 n: the GPU's n-th standing stream))"
            ),
            "{note}"
        );
        // Offsets in KiB, the stream by its number.
        assert!(
            note.contains("0/0/0 → 474.20, 37120/236608/4 → 505.90"),
            "{note}"
        );
        assert!(
            note.ends_with("; so does the stream they are queued on)"),
            "{note}"
        );
    }

    #[test]
    fn only_the_ends_a_case_has_and_some_placement_moves_are_named() {
        use End::*;
        let searched = &SEARCH_PLACEMENTS[..];
        let h2d_d2h = [Direction::H2d, Direction::D2h];
        assert_eq!(
            moved_ends(&h2d_d2h, searched),
            vec![DeviceSource, HostSource, HostDestination]
        );
        assert_eq!(
            moved_ends(&[Direction::D2h], searched),
            vec![DeviceSource, HostDestination]
        );
        assert_eq!(moved_ends(&[Direction::D2d], searched), vec![DeviceSource]);
        assert!(moved_ends(&h2d_d2h, &[HOME_PLACEMENT]).is_empty());
        let both = [at(704, 0), at(0, 0)];
        assert_eq!(
            moved_ends(&[Direction::D2d], &both),
            vec![DeviceDestination]
        );
    }

    #[test]
    fn d2d_windows_cover_small_buffers_and_sample_large_ones() {
        assert_eq!(d2d_windows(128 << 10), vec![(0, 128 << 10)]);
        assert_eq!(d2d_windows(4 << 20), vec![(0, 4 << 20)]);
        let w = d2d_windows(256 << 20);
        assert_eq!(w.len(), 3);
        assert_eq!(w[0], (0, 1 << 20));
        assert_eq!(w[1], (128 << 20, 1 << 20));
        assert_eq!(w[2], ((255 << 20), 1 << 20));
        let odd = (5 << 20) + 3;
        for (offset, len) in d2d_windows(odd) {
            assert_eq!(offset % 8, 0);
            assert!(offset + len <= odd);
        }
        assert_eq!(d2d_windows(odd).last().map(|w| w.0 + w.1), Some(odd));
    }
}
