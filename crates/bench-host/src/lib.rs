//! Host RAM copy engines (spec Path 7): N pinned threads copy one NUMA-placed buffer into
//! another, each its own contiguous slice, released together by a spinning start gate so
//! thread wake-up is not timed. Two engines: [`MEMCPY`] copies with the C library's `memcpy`,
//! [`STREAMING`] with the streaming kernel (non-temporal stores; see [`kernel`]); they share
//! their buffers ([`engines`]). Buffers are pre-faulted, bound with `mbind` and their placement
//! verified; every worker checks that it runs where it was pinned. GB/s counts bytes copied
//! (a copy of N bytes is N, the STREAM "copy" convention without its 2× read+write).
//!
//! Around each repetition, outside its timed region, every thread reads its own scheduling
//! counters and the timing thread the CPUs' steal ([`sched`]): the runner judges from them
//! which repetitions scheduling disturbed ([`Prepared::last_sched`]).

use hwc_model::cpulist::format as cpulist;
use hwc_model::topology::LogicalCpu;
use hwc_model::{
    Case, CellKind, EngineDecl, EngineId, HostCopySpec, Needs, PathId, Placement, RepSched,
    SchedSources, Spec, ThreadSched, Topology,
};
use hwc_numa::{NumaBuffer, PlacementCheck};
use hwc_runner::{BenchError, Engine, Prepared, Rep};
use std::cell::{RefCell, RefMut};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

mod idle;
pub use idle::{CpuWatch, WaitTally};
pub mod kernel;
pub mod sched;

pub use kernel::{CopyKernel, Isa};

/// Copies of this many bytes or more ask for transparent huge pages.
const HUGE_PAGE_MIN_BYTES: u64 = 4 << 20;

/// Whether a copy of `size_bytes` asks for transparent huge pages (its buffers' page kind, part
/// of what buffers are kept by).
fn huge_pages(size_bytes: u64) -> bool {
    size_bytes >= HUGE_PAGE_MIN_BYTES
}

/// The engine that copies with the C library's `memcpy`.
pub const MEMCPY: EngineId = EngineId::new("host-memcpy");
/// The engine that copies with the streaming kernel (vector loads, non-temporal stores).
pub const STREAMING: EngineId = EngineId::new("host-streaming");

/// The declaration of [`MEMCPY`]: every cell of the host RAM sweep.
pub fn memcpy_decl() -> EngineDecl {
    EngineDecl {
        id: MEMCPY,
        title: "C library memcpy on pinned threads".into(),
        paths: vec![PathId::HostRam],
        cells: vec![CellKind::Sweep, CellKind::Sustained],
        needs: Needs::default(),
        hardware: true,
        default_on: true,
    }
}

/// The declaration of [`STREAMING`]: the sustained cells (the largest size of the sweep), where
/// it competes with `memcpy` for the ceiling.
pub fn streaming_decl() -> EngineDecl {
    EngineDecl {
        id: STREAMING,
        title: "streaming copy (vector loads, non-temporal stores) on pinned threads".into(),
        paths: vec![PathId::HostRam],
        cells: vec![CellKind::Sustained],
        needs: Needs::default(),
        hardware: true,
        default_on: true,
    }
}

/// Whether the streaming engine can run on this CPU: (reason, hint) where it cannot.
pub fn streaming_available() -> Result<(), (String, Option<String>)> {
    match Isa::detect() {
        Some(_) => Ok(()),
        None => Err((
            "the streaming copy needs x86-64 non-temporal stores; this CPU is not x86-64".into(),
            None,
        )),
    }
}

/// The two host engines for one machine, sharing their buffers (a thread sweep of one size
/// runs several cases in a row on the same buffers, whichever engine copies).
pub fn engines(topo: &Topology, proc_root: impl Into<PathBuf>) -> (HostEngine, HostEngine) {
    let state = Rc::new(RefCell::new(HostMemcpy::new(topo, proc_root)));
    (
        HostEngine {
            id: MEMCPY,
            kernel: Some(CopyKernel::Memcpy),
            state: state.clone(),
        },
        HostEngine {
            id: STREAMING,
            kernel: Isa::detect().map(CopyKernel::Streaming),
            state,
        },
    )
}

/// One host copy engine ([`MEMCPY`] or [`STREAMING`]).
pub struct HostEngine {
    id: EngineId,
    /// `None`: the CPU cannot run this engine's kernel.
    kernel: Option<CopyKernel>,
    state: Rc<RefCell<HostMemcpy>>,
}

/// What the host engines share: the machine's CPUs and caches, and the last case's buffers.
pub struct HostMemcpy {
    /// Node id → CPUs in pinning order (one thread per physical core first, then siblings).
    node_cpus: BTreeMap<u32, Vec<u32>>,
    /// Bytes of the last-level cache on the whole machine (size × instances), when known.
    llc_bytes: Option<u64>,
    proc_root: PathBuf,
    /// The last case's buffers, kept for the next case of the same nodes and pages (a thread
    /// sweep runs several in a row, the sizes one after another; mapping, faulting and filling
    /// 2 × 1 GiB takes about a second, several where a VM backs fresh memory lazily).
    spare: Option<Buffers>,
    /// The largest copy planned for each (source node, destination node, huge pages), from
    /// [`Engine::expect`]: buffers are made that large once, and smaller copies use their start.
    largest: BTreeMap<(u32, u32, bool), usize>,
    /// Host engines given cases in this run that have not finished: the last to finish frees
    /// the buffers, so the memory is back before the next engine's cases (a path that maps
    /// memory next reuses pages the VM or the kernel has already backed).
    unfinished: usize,
    /// glibc's `memcpy` writes calls at least this long with non-temporal stores (read from the
    /// dynamic loader), when known.
    non_temporal_threshold: Option<u64>,
}

/// A case's source and destination, and what they were made for.
struct Buffers {
    key: BufferKey,
    src: NumaBuffer,
    dst: NumaBuffer,
    /// Bytes of each (source, destination) on transparent huge pages, read from
    /// `/proc/self/smaps` once when the buffers were made and faulted in (huge buffers only;
    /// reading smaps walks the whole process's page tables, 20–40 ms a time, so cases that
    /// reuse the buffers reuse the reading too).
    huge_bytes: Option<(Option<u64>, Option<u64>)>,
}

/// Source node, destination node, huge pages.
type BufferKey = (Option<u32>, Option<u32>, bool);

impl HostMemcpy {
    /// Build from the detected topology; `proc_root` is where `/proc/stat` is read for the CPU
    /// guard (the live `/proc` in production).
    pub fn new(topo: &Topology, proc_root: impl Into<PathBuf>) -> Self {
        let node_cpus = topo
            .platform
            .numa
            .iter()
            .filter(|n| !n.cpus.is_empty())
            .map(|n| (n.id, pinning_order(&n.cpus, &topo.platform.cpus)))
            .collect();
        let llc_bytes = topo.platform.llc_bytes();
        HostMemcpy {
            node_cpus,
            llc_bytes,
            non_temporal_threshold: kernel::glibc_non_temporal_threshold(),
            proc_root: proc_root.into(),
            spare: None,
            largest: BTreeMap::new(),
            unfinished: 0,
        }
    }

    fn cpus_for(&self, spec: &HostCopySpec) -> Result<Vec<u32>, BenchError> {
        let node = spec.cpu_node;
        let threads = spec.threads.max(1) as usize;
        let cpus = self
            .node_cpus
            .get(&node)
            .ok_or_else(|| BenchError::unavailable(format!("node {node} has no CPUs")))?;
        if threads > cpus.len() {
            return Err(BenchError::unavailable(format!(
                "{threads} threads requested but node {node} has {} CPUs",
                cpus.len()
            )));
        }
        Ok(cpus[..threads].to_vec())
    }
}

fn host_spec(case: &Case) -> Result<&HostCopySpec, BenchError> {
    match &case.spec {
        Spec::HostCopy(s) => Ok(s),
        other => Err(BenchError::failed(format!(
            "a host copy engine was given a {} case",
            other.kind()
        ))),
    }
}

/// Order a node's CPUs so the first k threads land on k distinct physical cores when possible:
/// by sibling rank within its core, then by CPU id.
pub fn pinning_order(node_cpus: &[u32], all: &[LogicalCpu]) -> Vec<u32> {
    let mut seen: BTreeMap<(Option<u32>, Option<u32>), u32> = BTreeMap::new();
    let mut sorted: Vec<u32> = node_cpus.to_vec();
    sorted.sort_unstable();
    let mut ranked: Vec<(u32, u32)> = sorted
        .iter()
        .map(|&id| {
            let info = all.iter().find(|c| c.id == id);
            let key = match info {
                Some(c) if c.core.is_some() => (c.package, c.core),
                // Unknown core: treat each CPU as its own core.
                _ => (None, Some(u32::MAX - id)),
            };
            let rank = seen.entry(key).or_insert(0);
            let r = *rank;
            *rank += 1;
            (r, id)
        })
        .collect();
    ranked.sort_unstable();
    ranked.into_iter().map(|(_, id)| id).collect()
}

impl Engine for HostEngine {
    fn id(&self) -> EngineId {
        self.id.clone()
    }

    fn prepare<'a>(&'a mut self, case: &Case) -> Result<Box<dyn Prepared + 'a>, BenchError> {
        let spec = host_spec(case)?;
        let kernel = self.kernel.ok_or_else(|| match streaming_available() {
            Err((reason, hint)) => BenchError::Unavailable { reason, hint },
            Ok(()) => BenchError::unavailable("this CPU cannot run the streaming copy"),
        })?;
        let state = self.state.borrow_mut();
        let cpus = state.cpus_for(spec)?;
        let size = spec.size_bytes;
        let cache_resident = state
            .llc_bytes
            .is_some_and(|llc| 2 * size < hwc_plan::CACHE_MARGIN * llc);
        let size =
            usize::try_from(size).map_err(|_| BenchError::failed("size does not fit in memory"))?;
        let threshold = state.non_temporal_threshold;
        let proc_root = state.proc_root.clone();
        let huge = huge_pages(spec.size_bytes);
        let capacity = state
            .largest
            .get(&(spec.src_node, spec.dst_node, huge))
            .map_or(size, |&most| most.max(size));
        let home = RefMut::map(state, |s| &mut s.spare);
        let mut copy = PreparedCopy::new(
            (size, capacity),
            &cpus,
            kernel,
            Some(spec.src_node),
            Some(spec.dst_node),
            cache_resident,
            &proc_root,
            home,
        )?;
        if kernel == CopyKernel::Memcpy {
            copy.store_note = threshold.map(|t| memcpy_store_note(size, cpus.len(), t));
        }
        Ok(Box::new(copy))
    }

    fn environment(&self) -> hwc_model::Environment {
        if self.id != MEMCPY {
            return BTreeMap::new();
        }
        self.state
            .borrow()
            .non_temporal_threshold
            .map(|t| {
                (
                    "host.glibc_non_temporal_threshold".to_string(),
                    hwc_model::Setting::bytes(
                        t,
                        format!(
                            "{}: glibc's memcpy uses non-temporal stores for calls this long or \
                             longer (ld.so --list-diagnostics)",
                            mib(t)
                        ),
                    ),
                )
            })
            .into_iter()
            .collect()
    }

    fn expect(&mut self, cases: &[&Case]) {
        let mut state = self.state.borrow_mut();
        if !cases.is_empty() {
            state.unfinished += 1;
        }
        for spec in cases.iter().filter_map(|c| host_spec(c).ok()) {
            let Ok(size) = usize::try_from(spec.size_bytes) else {
                continue;
            };
            let huge = huge_pages(spec.size_bytes);
            let most = state
                .largest
                .entry((spec.src_node, spec.dst_node, huge))
                .or_insert(0);
            *most = (*most).max(size);
        }
    }

    fn finish(&mut self) {
        let mut state = self.state.borrow_mut();
        state.unfinished = state.unfinished.saturating_sub(1);
        if state.unfinished == 0 {
            state.spare = None;
        }
    }
}

/// Which stores glibc's `memcpy` uses for each thread's call of a `size`-byte copy on
/// `threads` threads, against its non-temporal `threshold`: why the `memcpy` sweep can level
/// off where the calls fall under it (cached stores pay a read of every destination line).
fn memcpy_store_note(size: usize, threads: usize, threshold: u64) -> String {
    let call = split(size, threads.max(1))
        .first()
        .map_or(0, |&(_, len)| len as u64);
    let (side, stores) = if call >= threshold {
        ("at or above", "non-temporal stores")
    } else {
        ("under", "stores through the cache")
    };
    format!(
        "memcpy: each thread's call copies {}, {side} glibc's non-temporal threshold of {} \
         (ld.so --list-diagnostics): {stores}",
        hwc_model::size_label(call),
        mib(threshold)
    )
}

/// `181.5 MiB`: a threshold glibc derives from the cache size is rarely a whole unit.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

/// Shared state between the timing thread and the workers.
///
/// A repetition, in turn: the timing thread bumps `generation`; each worker reads its
/// scheduling counters and counts itself `armed`; once all are, the timing thread reads its
/// own, takes the start time and sets `go` to the generation, and every thread copies; each
/// worker counts itself `done` (the end time is taken when all are), then reads its counters
/// again, leaves the difference in its slot and counts itself `reported`. The counters are
/// read outside the timed region, by each thread of its own.
struct Gate {
    /// Bumped by the timing thread to start one repetition.
    generation: AtomicU64,
    /// Workers that read their counters for the current repetition.
    armed: AtomicUsize,
    /// Set to the current generation, after the start time is taken, to release the copy.
    go: AtomicU64,
    /// Workers that finished the current repetition.
    done: AtomicUsize,
    /// Workers that left their counters of the current repetition in their slot.
    reported: AtomicUsize,
    /// Each thread's counters over the last repetition, by thread index (0, the timing
    /// thread's, unused).
    slots: Vec<Mutex<Option<ThreadSched>>>,
    /// Why a worker could not read a counter, each once.
    why: Mutex<BTreeSet<String>>,
    stop: AtomicBool,
    /// Set by a worker that panicked: it will not count itself armed, done or reported again,
    /// so the timing thread stops waiting for it and the case fails.
    panicked: AtomicBool,
    /// Workers that found themselves on a CPU they were not pinned to.
    misplaced: AtomicUsize,
    ready: AtomicUsize,
    /// The next block of a shared copy ([`Work::Blocks`]) to take; reset before each
    /// repetition.
    next_block: AtomicUsize,
}

/// What one thread copies in a repetition.
#[derive(Clone, Copy)]
enum Work {
    /// Its own fixed slice (`memcpy`: the C library picks its store type by the length of
    /// each call, so the length is kept as the case's size over its threads).
    Slice(Chunk),
    /// Blocks of `block` bytes of the whole copy, taken in turn from [`Gate::next_block`] by
    /// every thread until none is left (the streaming kernel): a thread slowed by anything else
    /// on its CPU takes fewer blocks instead of holding the whole repetition back.
    Blocks { all: Chunk, block: usize },
}

impl Work {
    fn run(self, gate: &Gate) {
        match self {
            Work::Slice(c) => c.copy(),
            Work::Blocks { all, block } => loop {
                let i = gate.next_block.fetch_add(1, Ordering::Relaxed);
                let off = i.saturating_mul(block);
                if off >= all.len {
                    break;
                }
                // Each index is taken once per repetition, so the blocks are disjoint.
                Chunk {
                    src: all.src + off,
                    dst: all.dst + off,
                    len: block.min(all.len - off),
                    kernel: all.kernel,
                }
                .copy();
            },
        }
    }
}

/// The block size of a shared copy of `size` bytes on `threads` threads: about 16 blocks a
/// thread, whole 4 KiB pages, 64 KiB to 8 MiB (a 1 GiB copy on 16 threads: 4 MiB blocks).
fn shared_block(size: usize, threads: usize) -> usize {
    (size / (threads.max(1) * 16)).clamp(64 << 10, 8 << 20) / 4096 * 4096
}

/// A raw slice to copy, handed to a worker thread.
#[derive(Clone, Copy)]
struct Chunk {
    src: usize,
    dst: usize,
    len: usize,
    kernel: CopyKernel,
}

impl Chunk {
    fn copy(self) {
        // SAFETY: src/dst point into two live, distinct NumaBuffers (they outlive the workers:
        // PreparedCopy joins the workers before its buffers drop) and each chunk a repetition
        // copies is disjoint from every other (fixed slices, or blocks each taken once); a
        // streaming kernel's ISA came from Isa::detect.
        unsafe {
            self.kernel
                .copy(self.dst as *mut u8, self.src as *const u8, self.len)
        };
    }
}

struct PreparedCopy<'a> {
    /// The timing thread's counters (it copies too, as thread 0).
    probe: sched::ThreadProbe,
    steal: sched::StealProbe,
    /// The last repetition's scheduling counters.
    last_sched: Option<RepSched>,
    /// The CPU guard, and its threads' run-queue delay since it began.
    watch: CpuWatch,
    waits: WaitTally,
    /// Always `Some` until Drop hands the buffers back to `home`.
    bufs: Option<Buffers>,
    home: RefMut<'a, Option<Buffers>>,
    size: usize,
    gate: Arc<Gate>,
    workers: Vec<JoinHandle<()>>,
    own_work: Work,
    cpus: Vec<u32>,
    saved_affinity: Vec<u32>,
    cache_resident: bool,
    kernel: CopyKernel,
    /// For `memcpy`: which stores glibc uses for each thread's call ([`memcpy_store_note`]).
    store_note: Option<String>,
}

/// Split `size` into `n` chunks, each a multiple of 4 KiB except the last.
fn split(size: usize, n: usize) -> Vec<(usize, usize)> {
    let align = 4096;
    let per = size.div_ceil(n).div_ceil(align) * align;
    (0..n)
        .map(|i| {
            let start = (i * per).min(size);
            let end = ((i + 1) * per).min(size);
            (start, end - start)
        })
        .collect()
}

/// Bytes below which [`first_difference`] compares, and [`clear`] clears, on the calling thread
/// alone.
const PARALLEL_COMPARE_BYTES: usize = 64 << 20;

/// Bytes per piece of a `len`-byte buffer split for `threads` threads: whole pages.
fn piece_bytes(len: usize, threads: usize) -> usize {
    len.div_ceil(threads.max(1)).next_multiple_of(4096)
}

/// `f` applied to every piece, one thread each, each free to run on `cpus` (none: as spawned),
/// results in piece order. A panic in a thread is raised again here (a check must never pass
/// because one died).
fn on_threads<P: Send, R: Send>(pieces: Vec<P>, cpus: &[u32], f: impl Fn(P) -> R + Sync) -> Vec<R> {
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = pieces
            .into_iter()
            .map(|piece| {
                scope.spawn(move || {
                    if !cpus.is_empty() {
                        // Best effort: a thread left on the spawner's CPU still does its piece.
                        let _ = hwc_numa::pin_current_thread(cpus);
                    }
                    f(piece)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// Zero `buf`, in pieces on up to 16 threads free to run on `cpus` (the calling thread's
/// affinity before the case pins it): one thread cleared a 1 GiB destination in about 0.1 s,
/// ten such cases a profile.
fn clear(buf: &mut [u8], cpus: &[u32]) {
    let threads = cpus.len().clamp(1, 16);
    if buf.len() <= PARALLEL_COMPARE_BYTES || threads < 2 {
        buf.fill(0);
        return;
    }
    let piece = piece_bytes(buf.len(), threads);
    on_threads(buf.chunks_mut(piece).collect(), cpus, |part| part.fill(0));
}

/// The index of the first byte where `a` and `b` differ (over the shorter length), or `None`.
/// `==` on slices is memcmp (about 10 GB/s on one core); the byte loop only runs to name the
/// difference (verifying 1 GiB byte by byte took most of a second). Large buffers are compared
/// in pieces on up to 16 threads, free to run on `cpus` (the calling thread's affinity before
/// the case pinned it to one CPU, which threads it spawns would inherit): one thread read both
/// 1 GiB buffers of a host-memory case in 0.2 s, ten such cases a profile.
fn first_difference(a: &[u8], b: &[u8], cpus: &[u32]) -> Option<usize> {
    first_difference_on(a, b, cpus.len().clamp(1, 16), cpus)
}

/// [`first_difference`] on up to `threads` threads (pieces of whole pages), each allowed on
/// `cpus` (none: as spawned).
fn first_difference_on(a: &[u8], b: &[u8], threads: usize, cpus: &[u32]) -> Option<usize> {
    let len = a.len().min(b.len());
    let (a, b) = (&a[..len], &b[..len]);
    let serial = |a: &[u8], b: &[u8]| -> Option<usize> {
        if a == b {
            None
        } else {
            a.iter().zip(b).position(|(x, y)| x != y)
        }
    };
    if len <= PARALLEL_COMPARE_BYTES || threads < 2 {
        return serial(a, b);
    }
    let piece = piece_bytes(len, threads);
    let pieces: Vec<(&[u8], &[u8])> = a.chunks(piece).zip(b.chunks(piece)).collect();
    // In piece order: the first piece with a difference holds the first difference.
    on_threads(pieces, cpus, |(x, y)| serial(x, y))
        .into_iter()
        .enumerate()
        .find_map(|(i, d)| d.map(|d| i * piece + d))
}

/// The source pattern's byte at offset `i` (what [`fill_pattern`] writes; the tests check it).
#[cfg(test)]
fn pattern_byte(i: usize) -> u8 {
    (i.wrapping_mul(131) ^ (i >> 12)) as u8
}

/// `buf[i] = pattern_byte(i)`, a 4 KiB page at a time: within a page `i >> 12` is constant
/// and `i * 131` (mod 256) repeats the page's first 4 KiB, so each page is one template XOR
/// one byte — vectorised, where the byte loop took seconds per GiB.
fn fill_pattern(buf: &mut [u8]) {
    const PAGE: usize = 4096;
    let template: Vec<u8> = (0..PAGE).map(|i| i.wrapping_mul(131) as u8).collect();
    for (page, chunk) in buf.chunks_mut(PAGE).enumerate() {
        let k = page as u8;
        for (d, t) in chunk.iter_mut().zip(&template) {
            *d = t ^ k;
        }
    }
}

impl<'a> PreparedCopy<'a> {
    /// `proc_root`: where the threads' `schedstat` and the CPUs' steal (`stat`) are read
    /// (`/proc`).
    #[allow(clippy::too_many_arguments)]
    /// `size`: the copy's bytes; `capacity`: the buffers' (at least `size`), the largest copy
    /// planned for their nodes, so that they are made once.
    fn new(
        (size, capacity): (usize, usize),
        cpus: &[u32],
        kernel: CopyKernel,
        src_node: Option<u32>,
        dst_node: Option<u32>,
        cache_resident: bool,
        proc_root: &Path,
        mut home: RefMut<'a, Option<Buffers>>,
    ) -> Result<Self, BenchError> {
        let huge = huge_pages(size as u64);
        let key = (src_node, dst_node, huge);
        let capacity = capacity.max(size);
        let kept = home
            .take()
            .filter(|b| b.key == key && b.src.len() >= size && b.dst.len() >= size);
        let bufs = match kept {
            Some(mut b) => {
                // The source still holds the pattern (copies only read it); the destination
                // holds the last case's copy of it, so it is cleared: a copy that does nothing
                // must not pass the check.
                clear(
                    &mut b.dst.as_mut_slice()[..size],
                    &hwc_numa::current_affinity(),
                );
                b
            }
            // Buffers of another key were freed by the `filter` above, before the new ones
            // are mapped.
            None => {
                let alloc = |node| {
                    NumaBuffer::new(capacity, node, huge)
                        .map_err(|e| BenchError::failed(e.to_string()))
                };
                let mut src = alloc(src_node)?;
                let dst = alloc(dst_node)?;
                fill_pattern(&mut src.as_mut_slice()[..capacity]);
                let huge_bytes = huge.then(|| {
                    let smaps = std::fs::read_to_string("/proc/self/smaps").ok();
                    let of = |b: &NumaBuffer| {
                        let start = b.as_ptr() as u64;
                        smaps
                            .as_deref()
                            .map(|m| hwc_numa::huge_bytes_in(m, start, start + b.len() as u64))
                    };
                    (of(&src), of(&dst))
                });
                Buffers {
                    key,
                    src,
                    dst,
                    huge_bytes,
                }
            }
        };
        let saved_affinity = hwc_numa::current_affinity();
        hwc_numa::pin_current_thread(&cpus[..1]).map_err(|e| BenchError::failed(e.to_string()))?;
        let gate = Arc::new(Gate::new(cpus.len()));
        let chunk = |off: usize, len: usize| Chunk {
            src: bufs.src.as_ptr() as usize + off,
            dst: bufs.dst.as_ptr() as usize + off,
            len,
            kernel,
        };
        let work: Vec<Work> = match kernel {
            CopyKernel::Memcpy => split(size, cpus.len())
                .into_iter()
                .map(|(off, len)| Work::Slice(chunk(off, len)))
                .collect(),
            CopyKernel::Streaming(_) => {
                let shared = Work::Blocks {
                    all: chunk(0, size),
                    block: shared_block(size, cpus.len()),
                };
                vec![shared; cpus.len()]
            }
        };
        let mut me = PreparedCopy {
            // Opened on this thread, the one that times and copies as thread 0.
            probe: sched::ThreadProbe::open(proc_root),
            steal: sched::StealProbe::new(proc_root, sched::clk_tck()),
            last_sched: None,
            watch: CpuWatch::new(proc_root, cpus),
            waits: WaitTally::new(),
            own_work: work[0],
            bufs: Some(bufs),
            home,
            size,
            gate: gate.clone(),
            workers: Vec::new(),
            cpus: cpus.to_vec(),
            saved_affinity,
            cache_resident,
            kernel,
            store_note: None,
        };
        for (i, chunk) in work.into_iter().enumerate().skip(1) {
            let gate = gate.clone();
            let cpu = cpus[i];
            let root = proc_root.to_path_buf();
            let spawned = std::thread::Builder::new()
                .name(format!("hwc-memcpy-{cpu}"))
                .spawn(move || worker(gate, i, cpu, chunk, &root));
            match spawned {
                Ok(h) => me.workers.push(h),
                Err(e) => return Err(BenchError::failed(format!("spawning a worker: {e}"))),
            }
        }
        let n_workers = me.workers.len();
        while gate.ready.load(Ordering::Acquire) < n_workers {
            std::hint::spin_loop();
        }
        if hwc_numa::current_cpu() != Some(cpus[0]) {
            gate.misplaced.fetch_add(1, Ordering::Relaxed);
        }
        Ok(me)
    }
}

/// Thread `index` of a copy (1 and up; the timing thread is 0), pinned to `cpu`.
fn worker(gate: Arc<Gate>, index: usize, cpu: u32, work: Work, proc_root: &Path) {
    let _unwinding = Unwinding(&gate);
    if hwc_numa::pin_current_thread(&[cpu]).is_err() || hwc_numa::current_cpu() != Some(cpu) {
        gate.misplaced.fetch_add(1, Ordering::Relaxed);
    }
    // Opened here: `thread-self` is the thread that opens it.
    let mut probe = sched::ThreadProbe::open(proc_root);
    gate.ready.fetch_add(1, Ordering::Release);
    let mut seen = 0;
    loop {
        let g = gate.generation.load(Ordering::Acquire);
        if gate.stop.load(Ordering::Acquire) {
            return;
        }
        if g != seen {
            seen = g;
            let before = probe.read();
            gate.armed.fetch_add(1, Ordering::AcqRel);
            while gate.go.load(Ordering::Acquire) != g {
                if gate.stop.load(Ordering::Acquire) {
                    return;
                }
                std::hint::spin_loop();
            }
            work.run(&gate);
            gate.done.fetch_add(1, Ordering::AcqRel);
            // After the end: the timing thread takes its end time once every thread is done.
            let after = probe.read();
            *lock(&gate.slots[index]) = Some(thread_sched(cpu, before, after));
            lock(&gate.why).extend(probe.unavailable().cloned());
            gate.reported.fetch_add(1, Ordering::Release);
        } else {
            std::hint::spin_loop();
        }
    }
}

impl Gate {
    /// The gate of a copy on `threads` threads (the timing thread included).
    fn new(threads: usize) -> Gate {
        Gate {
            generation: AtomicU64::new(0),
            armed: AtomicUsize::new(0),
            go: AtomicU64::new(0),
            done: AtomicUsize::new(0),
            reported: AtomicUsize::new(0),
            slots: (0..threads).map(|_| Mutex::new(None)).collect(),
            why: Mutex::new(BTreeSet::new()),
            panicked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            misplaced: AtomicUsize::new(0),
            ready: AtomicUsize::new(0),
            next_block: AtomicUsize::new(0),
        }
    }
}

/// Marks the gate when the worker holding it unwinds from a panic (see [`Gate::panicked`]).
struct Unwinding<'a>(&'a Gate);

impl Drop for Unwinding<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.panicked.store(true, Ordering::Release);
        }
    }
}

/// Spin until `count` reaches `n`; an error if a worker panicked meanwhile (it never will).
fn wait_for(gate: &Gate, count: &AtomicUsize, n: usize) -> Result<(), BenchError> {
    while count.load(Ordering::Acquire) < n {
        if gate.panicked.load(Ordering::Acquire) {
            return Err(BenchError::failed(
                "a copy thread panicked: the repetition cannot finish",
            ));
        }
        std::hint::spin_loop();
    }
    Ok(())
}

/// The bookkeeping behind `m`, even if a thread panicked while holding it: a slot or the set of
/// reasons is whole after every write, so a panic elsewhere leaves nothing half-written.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The counters the workers on `cpus` left in their `slots`, emptying them. Every worker that
/// counted itself reported filled its slot first (a worker that panics fails the case before
/// its slot is read, see [`Gate::panicked`]), so an empty one is a defence: it would take only
/// that thread's evidence away, and `why` would say so.
fn take_slots(
    slots: &[Mutex<Option<ThreadSched>>],
    cpus: &[u32],
    why: &Mutex<BTreeSet<String>>,
) -> Vec<ThreadSched> {
    slots
        .iter()
        .zip(cpus)
        .map(|(slot, &cpu)| {
            lock(slot).take().unwrap_or_else(|| {
                lock(why).insert(format!(
                    "the copy thread on CPU {cpu} left no counters for a repetition"
                ));
                ThreadSched {
                    cpu,
                    run_delay_ns: None,
                    nivcsw: None,
                    steal_us: None,
                }
            })
        })
        .collect()
}

/// A thread's counters over a repetition, from its readings before and after (steal is added
/// by the timing thread).
fn thread_sched(
    cpu: u32,
    before: sched::ThreadCounters,
    after: sched::ThreadCounters,
) -> ThreadSched {
    ThreadSched {
        cpu,
        run_delay_ns: sched::delta(before.run_delay_ns, after.run_delay_ns),
        nivcsw: sched::delta(before.nivcsw, after.nivcsw),
        steal_us: None,
    }
}

impl PreparedCopy<'_> {
    fn buffers(&self) -> &Buffers {
        self.bufs
            .as_ref()
            .expect("the buffers are only taken out in Drop")
    }
}

impl Prepared for PreparedCopy<'_> {
    fn bytes_per_rep(&self) -> u64 {
        self.size as u64
    }

    fn run_once(&mut self) -> Result<Rep, BenchError> {
        if self.gate.stop.load(Ordering::Acquire) {
            return Err(BenchError::failed(
                "a repetition after the data check: the copy threads have ended",
            ));
        }
        let n_workers = self.workers.len();
        let gate = &self.gate;
        gate.armed.store(0, Ordering::Release);
        gate.done.store(0, Ordering::Release);
        gate.reported.store(0, Ordering::Release);
        gate.next_block.store(0, Ordering::Relaxed);
        // Steal brackets the whole repetition, the threads' readings included.
        let steal_before = self.steal.read();
        // Release: the resets above are seen by every worker that sees the new generation.
        let g = gate.generation.fetch_add(1, Ordering::AcqRel) + 1;
        wait_for(gate, &gate.armed, n_workers)?;
        let before = self.probe.read();
        let t0 = Instant::now();
        gate.go.store(g, Ordering::Release);
        self.own_work.run(gate);
        wait_for(gate, &gate.done, n_workers)?;
        let seconds = t0.elapsed().as_secs_f64();
        let after = self.probe.read();
        wait_for(gate, &gate.reported, n_workers)?;
        let steal_after = self.steal.read();
        let mut threads = vec![thread_sched(self.cpus[0], before, after)];
        // Every worker reported (the count above) after filling its slot.
        threads.extend(take_slots(&gate.slots[1..], &self.cpus[1..], &gate.why));
        for t in &mut threads {
            t.steal_us = self.steal.cpu_us(&steal_before, &steal_after, t.cpu);
        }
        self.waits
            .add(seconds, threads.iter().map(|t| t.run_delay_ns));
        self.last_sched = Some(RepSched {
            threads,
            machine_steal_us: self.steal.machine_us(&steal_before, &steal_after),
        });
        Ok(Rep {
            seconds,
            wall_seconds: None,
        })
    }

    fn last_sched(&self) -> Option<RepSched> {
        self.last_sched.clone()
    }

    fn watch(&mut self) {
        self.waits = WaitTally::new();
        self.watch.start();
    }

    fn busy_meanwhile(&mut self) -> Option<String> {
        self.watch.verdict(self.waits.waits())
    }

    fn sched_sources(&self) -> SchedSources {
        let mut why: BTreeSet<String> = lock(&self.gate.why).clone();
        why.extend(self.probe.unavailable().cloned());
        why.extend(self.steal.unavailable().cloned());
        SchedSources {
            steal_tick_us: self.steal.tick_us,
            unavailable: why.into_iter().collect(),
        }
    }

    /// The case's last step (the runner checks the data once the timed repetitions have run):
    /// the copy threads end first, so that the compare's threads do not share the CPUs with
    /// threads spinning for a repetition that will not come.
    fn verify(&mut self) -> Result<(), BenchError> {
        self.stop_workers();
        let b = self.buffers();
        let (src, dst) = (
            &b.src.as_slice()[..self.size],
            &b.dst.as_slice()[..self.size],
        );
        match first_difference(src, dst, &self.saved_affinity) {
            None => Ok(()),
            Some(i) => Err(BenchError::failed(format!(
                "copy mismatch at byte {i}: expected {:#04x}, found {:#04x}",
                src[i], dst[i]
            ))),
        }
    }

    fn placement(&self) -> Option<Placement> {
        let misplaced = self.gate.misplaced.load(Ordering::Relaxed);
        let (s, d) = (
            self.buffers().src.placement(),
            self.buffers().dst.placement(),
        );
        let threads = if misplaced == 0 {
            "each thread pinned and checked".to_string()
        } else {
            format!("{misplaced} thread(s) not on their pinned CPU")
        };
        Some(Placement {
            cpus: Some(cpulist(&self.cpus)),
            verified: misplaced == 0 && s.is_verified() && d.is_verified(),
            detail: format!("src {}; dst {}; {threads}", s.describe(), d.describe()),
        })
    }

    fn cache_resident(&self) -> bool {
        self.cache_resident
    }

    fn notes(&self) -> Vec<String> {
        let mut n = vec![format!("copy: {}", self.kernel)];
        n.extend(self.store_note.clone());
        if let Work::Blocks { block, .. } = self.own_work {
            n.push(format!(
                "work: {} blocks taken in turn by the {} thread(s), not fixed slices",
                hwc_model::size_label(block as u64),
                self.cpus.len()
            ));
        }
        let b = self.buffers();
        if let Some((src, dst)) = b.huge_bytes {
            // Read once over each whole buffer: which part of it a smaller copy uses is not
            // known, so the buffer's share is what is said.
            let cover = |bytes: Option<u64>, len: usize| match bytes {
                Some(h) => format!(
                    "{} of {}",
                    hwc_model::size_label(h.min(len as u64)),
                    hwc_model::size_label(len as u64)
                ),
                None => "unknown".to_string(),
            };
            let uses = if b.src.len() > self.size {
                format!(
                    " (the copy uses their first {})",
                    hwc_model::size_label(self.size as u64)
                )
            } else {
                String::new()
            };
            n.push(format!(
                "buffers madvise(MADV_HUGEPAGE); on transparent huge pages when they were \
                 made: src {}, dst {}{uses}",
                cover(src, b.src.len()),
                cover(dst, b.dst.len())
            ));
        }
        if let PlacementCheck::Misplaced { .. } = b.src.placement() {
            n.push(format!("src {}", b.src.placement().describe()));
        }
        if let PlacementCheck::Misplaced { .. } = b.dst.placement() {
            n.push(format!("dst {}", b.dst.placement().describe()));
        }
        n
    }
}

impl PreparedCopy<'_> {
    /// End the copy threads (they spin between repetitions, on every CPU of the case).
    fn stop_workers(&mut self) {
        self.gate.stop.store(true, Ordering::Release);
        for h in self.workers.drain(..) {
            // A worker that panicked has nothing left to clean up.
            let _ = h.join();
        }
    }
}

impl Drop for PreparedCopy<'_> {
    fn drop(&mut self) {
        self.stop_workers();
        // No worker touches the buffers any more: keep them for the next case.
        *self.home = self.bufs.take();
        if !self.saved_affinity.is_empty() {
            // Best effort: the runner's thread goes back to the CPUs it had.
            let _ = hwc_numa::pin_current_thread(&self.saved_affinity);
        }
    }
}

#[cfg(test)]
mod tests;
