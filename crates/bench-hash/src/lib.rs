//! XXH3 hash throughput (the spec's CPU step): XXH3-64 and XXH3-128 per SIMD code path,
//! measured, so the profile's `xxh3_tier` is the fastest path that ran, not the widest the
//! flags allow.
//!
//! **Implementation: upstream xxHash's C header** (`xxhash.h`, Debian's `libxxhash-dev`),
//! compiled by `build.rs` once per code path in a translation unit of its own
//! (`csrc/xxh3_path.c`, `XXH_INLINE_ALL` with `XXH_VECTOR` = `XXH_SCALAR`, `XXH_SSE2`,
//! `XXH_AVX2` under `-mavx2`, `XXH_AVX512` under `-mavx512f`; `XXH_NEON` on AArch64), each
//! exporting wrappers of its own name. One portable binary thus holds every path, and picks
//! one at run time ([`runnable`]: compiled here, and `is_x86_feature_detected!` says the CPU
//! has it); a path the CPU lacks is never called. It is the reference implementation, the code
//! `xxhsum` and the storage stacks that use XXH3 run, so the figures are theirs.
//!
//! Why not a Rust crate: `xxhash-rust` picks its SIMD path at compile time
//! (`cfg(target_feature = "avx2")`, …), so one binary measures one path; `twox-hash` 2.x
//! dispatches at run time between its scalar, SSE2, AVX2 and NEON code, but has no AVX-512
//! path and exposes no way to force one path, so neither measures every path the CPU can run.
//! Without `xxhash.h` at build time the crate still builds, with no path: the engine is then
//! unavailable with the install hint ([`available`]), and the hash path is waived.
//!
//! How a case is measured: `threads` threads pinned one to a CPU of the case's node (one per
//! physical core first). A block (a case with an offset) is each thread's own, filled with pseudo-random bytes by that thread
//! (so its pages are local), and hashed over and over for about [`REP_SECONDS`] a
//! repetition. A memory-resident working set is one buffer bound to the case's node (huge
//! pages asked for), filled once and kept for the next case of its size, hashed in
//! [`MEMORY_PARTS`] parts in turn, one a repetition, where each thread's slice of a part is at
//! least [`MEMORY_PART_MIN_SLICE_BYTES`] (else whole), each part split into one page-aligned
//! slice per thread, hashed once as one input. Which mode a case takes is its spec's: a block
//! offset ([`HashSpec::offset_bytes`]) asks for own blocks, placed that many bytes past a page
//! boundary and checked; none, for the working set. Threads are released together by a barrier and
//! each times its own hashing; a repetition's time runs from the first thread's start to the last one's end.
//! Before the repetitions the case's path hashes a fixed buffer and the result must equal the
//! scalar path's and the known test vectors ([`check_path`]); after each repetition every
//! thread's hash must equal the scalar path's hash of its block, computed before the timing.

use hwc_model::{
    Case, CellKind, EngineDecl, EngineId, HashSpec, HashVariant, Needs, PathId, SimdPath, Spec,
};
use hwc_numa::NumaBuffer;
use hwc_runner::{BenchError, Engine, Prepared, Rep};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Barrier, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// The engine's id.
pub const ENGINE: EngineId = EngineId::new("xxh3");

/// How long a repetition of a cache-resident case runs, about: the first thread hashes its
/// block for [`CALIBRATE_SECONDS`] before the case, and every thread then hashes its block as
/// many times a repetition as that rate fills this (each path as long, whatever its speed).
/// Long enough that the barrier's wake-up (tens of µs) is under 1 % of it.
pub const REP_SECONDS: f64 = 0.004;
/// A memory-resident working set is hashed a part at a time, the parts in turn: a repetition
/// hashes one part (each thread its slice of it), and the part was last hashed this many
/// repetitions earlier, with the rest of the working set (1.5 × the last-level cache for a
/// working set of 2 × it) hashed in between. A quarter of the time a repetition of the whole
/// set would take, and as far from the cache.
pub const MEMORY_PARTS: usize = 4;

/// A part's slice is at least this many bytes a thread, or the working set is hashed whole a
/// repetition: a part of many threads' small slices would last a millisecond or less, where the
/// threads' release by the barrier (tens of µs apart) would show in the figure.
pub const MEMORY_PART_MIN_SLICE_BYTES: u64 = 32 << 20;

/// The parts a working set of `size_bytes` on `threads` threads is hashed in:
/// [`MEMORY_PARTS`] where each thread's slice of a part is at least
/// [`MEMORY_PART_MIN_SLICE_BYTES`], else 1 (the whole set a repetition). Pure.
pub fn memory_parts(size_bytes: u64, threads: usize) -> usize {
    let per_thread = size_bytes / (MEMORY_PARTS * threads.max(1)) as u64;
    if per_thread >= MEMORY_PART_MIN_SLICE_BYTES {
        MEMORY_PARTS
    } else {
        1
    }
}

/// Most threads the scalar reference pass over a working set hashes on at once.
const REFERENCE_THREADS: usize = 8;

/// How long the first thread times its path to set the repetition's length.
pub const CALIBRATE_SECONDS: f64 = 0.001;
/// Bytes a thread hashes in one repetition of a cache-resident case, at least and at most.
pub const REP_BYTES_PER_THREAD: std::ops::RangeInclusive<u64> = (16 << 20)..=(256 << 20);

/// Calls of the hash on a `block`-byte block that make a repetition of about [`REP_SECONDS`]
/// at `bytes_per_second`, within [`REP_BYTES_PER_THREAD`] (at least one call). Pure.
pub fn calls_per_rep(block: u64, bytes_per_second: f64) -> u64 {
    let block = block.max(1);
    let (min, max) = (
        REP_BYTES_PER_THREAD.start().div_ceil(block),
        (REP_BYTES_PER_THREAD.end() / block).max(1),
    );
    let want = (REP_SECONDS * bytes_per_second / block as f64).ceil();
    if want.is_finite() && want > 0.0 {
        (want as u64).clamp(min.min(max), max)
    } else {
        max
    }
}

/// The install hint where `xxhash.h` was missing at build time.
pub const INSTALL_HINT: &str = "install libxxhash-dev (Debian/Ubuntu: apt-get install \
    libxxhash-dev; or set XXHASH_INCLUDE_DIR to the folder of xxhash.h 0.8 or newer) and build \
    hwceiling again";

/// Why a hash could not be computed or checked.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HashError {
    #[error("this build of hwceiling has no XXH3 {0} path (xxhash.h missing, or it did not compile for it)")]
    NotCompiled(SimdPath),
    #[error("this CPU cannot run the XXH3 {0} path (its flags lack it)")]
    CpuLacks(SimdPath),
    #[error(
        "the XXH3 {path} path hashed the test buffer ({len} bytes) with {variant} to {got:#034x}, \
         where {what} is {want:#034x}"
    )]
    Mismatch {
        path: SimdPath,
        variant: HashVariant,
        len: usize,
        got: u128,
        want: u128,
        what: &'static str,
    },
}

/// The engine's declaration: every cell of the hash path.
pub fn decl() -> EngineDecl {
    EngineDecl {
        id: ENGINE,
        title: "XXH3-64 and XXH3-128 of upstream xxHash (xxhash.h), one build per SIMD path, \
                on pinned threads"
            .into(),
        paths: vec![PathId::Xxh3],
        cells: vec![CellKind::Sweep],
        needs: Needs::default(),
        hardware: true,
        default_on: true,
    }
}

/// Whether this build can hash at all: (reason, install hint) where `xxhash.h` was missing.
pub fn available() -> Result<(), (String, Option<String>)> {
    if cfg!(hwc_xxhash) {
        Ok(())
    } else {
        let why = option_env!("HWC_XXHASH_MISSING").unwrap_or("not found");
        Err((
            format!("this build of hwceiling has no XXH3 code: xxhash.h was missing when it was built ({why})"),
            Some(INSTALL_HINT.into()),
        ))
    }
}

/// The version of `xxhash.h` the paths were compiled from (`0.8.1`), where there is one.
pub fn xxhash_version() -> Option<String> {
    #[cfg(hwc_xxhash)]
    {
        // SAFETY: a C function of no arguments that returns a constant.
        let n = unsafe { ffi::hwc_xxh_version_number() };
        Some(format!("{}.{}.{}", n / 10000, n / 100 % 100, n % 100))
    }
    #[cfg(not(hwc_xxhash))]
    None
}

/// The code paths compiled into this build, narrowest first.
pub fn compiled() -> Vec<SimdPath> {
    let mut v = Vec::new();
    if cfg!(hwc_xxh3_path = "scalar") {
        v.push(SimdPath::Scalar);
    }
    if cfg!(hwc_xxh3_path = "sse2") {
        v.push(SimdPath::Sse2);
    }
    if cfg!(hwc_xxh3_path = "avx2") {
        v.push(SimdPath::Avx2);
    }
    if cfg!(hwc_xxh3_path = "avx512") {
        v.push(SimdPath::Avx512);
    }
    if cfg!(hwc_xxh3_path = "neon") {
        v.push(SimdPath::Neon);
    }
    v
}

/// Whether the CPU this runs on has what `path` executes (checked at run time).
pub fn cpu_has(path: SimdPath) -> bool {
    match path {
        SimdPath::Scalar => true,
        #[cfg(target_arch = "x86_64")]
        SimdPath::Sse2 => std::arch::is_x86_feature_detected!("sse2"),
        #[cfg(target_arch = "x86_64")]
        SimdPath::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
        #[cfg(target_arch = "x86_64")]
        SimdPath::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
        #[cfg(target_arch = "aarch64")]
        SimdPath::Neon => std::arch::is_aarch64_feature_detected!("neon"),
        #[allow(unreachable_patterns)]
        _ => false,
    }
}

/// The paths this build can run on this CPU, narrowest first.
pub fn runnable() -> Vec<SimdPath> {
    compiled().into_iter().filter(|&p| cpu_has(p)).collect()
}

/// Why `path` cannot run here, where it cannot.
pub fn path_blocked(path: SimdPath) -> Option<HashError> {
    if !compiled().contains(&path) {
        Some(HashError::NotCompiled(path))
    } else if !cpu_has(path) {
        Some(HashError::CpuLacks(path))
    } else {
        None
    }
}

/// One path's hash of one variant: a checked handle (the path is compiled and the CPU runs it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hasher {
    path: SimdPath,
    variant: HashVariant,
}

impl Hasher {
    /// The hash of `variant` by `path`, where this build has it and the CPU runs it.
    pub fn new(path: SimdPath, variant: HashVariant) -> Result<Hasher, HashError> {
        match path_blocked(path) {
            Some(e) => Err(e),
            None => Ok(Hasher { path, variant }),
        }
    }

    pub fn path(&self) -> SimdPath {
        self.path
    }

    /// The hash of `data`: XXH3-64 in the low 64 bits; XXH3-128 as `high << 64 | low`.
    pub fn hash(&self, data: &[u8]) -> u128 {
        #[cfg(hwc_xxhash)]
        {
            ffi::hash(self.path, self.variant, data)
        }
        #[cfg(not(hwc_xxhash))]
        {
            // `Hasher::new` refuses every path in a build without xxhash.h.
            let _ = data;
            unreachable!("no XXH3 path in this build")
        }
    }
}

#[cfg(hwc_xxhash)]
mod ffi {
    use super::{HashVariant, SimdPath};

    macro_rules! path_fns {
        ($cfg:literal, $h64:ident, $h128:ident) => {
            #[cfg(hwc_xxh3_path = $cfg)]
            extern "C" {
                pub fn $h64(data: *const u8, len: usize) -> u64;
                pub fn $h128(data: *const u8, len: usize, out: *mut u64);
            }
        };
    }
    path_fns!("scalar", hwc_xxh3_64_scalar, hwc_xxh3_128_scalar);
    path_fns!("sse2", hwc_xxh3_64_sse2, hwc_xxh3_128_sse2);
    path_fns!("avx2", hwc_xxh3_64_avx2, hwc_xxh3_128_avx2);
    path_fns!("avx512", hwc_xxh3_64_avx512, hwc_xxh3_128_avx512);
    path_fns!("neon", hwc_xxh3_64_neon, hwc_xxh3_128_neon);

    extern "C" {
        pub fn hwc_xxh_version_number() -> u32;
    }

    type Fns = (
        unsafe extern "C" fn(*const u8, usize) -> u64,
        unsafe extern "C" fn(*const u8, usize, *mut u64),
    );

    fn fns(path: SimdPath) -> Option<Fns> {
        match path {
            #[cfg(hwc_xxh3_path = "scalar")]
            SimdPath::Scalar => Some((hwc_xxh3_64_scalar, hwc_xxh3_128_scalar)),
            #[cfg(hwc_xxh3_path = "sse2")]
            SimdPath::Sse2 => Some((hwc_xxh3_64_sse2, hwc_xxh3_128_sse2)),
            #[cfg(hwc_xxh3_path = "avx2")]
            SimdPath::Avx2 => Some((hwc_xxh3_64_avx2, hwc_xxh3_128_avx2)),
            #[cfg(hwc_xxh3_path = "avx512")]
            SimdPath::Avx512 => Some((hwc_xxh3_64_avx512, hwc_xxh3_128_avx512)),
            #[cfg(hwc_xxh3_path = "neon")]
            SimdPath::Neon => Some((hwc_xxh3_64_neon, hwc_xxh3_128_neon)),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// Only through a [`super::Hasher`], whose constructor checked that `path` is compiled and
    /// that the CPU runs it.
    pub(super) fn hash(path: SimdPath, variant: HashVariant, data: &[u8]) -> u128 {
        let Some((h64, h128)) = fns(path) else {
            unreachable!("Hasher::new admits compiled paths only")
        };
        match variant {
            HashVariant::Xxh3_64 => {
                // SAFETY: `data` is a valid slice of `len` bytes, which xxHash only reads; the
                // Hasher this comes from checked that the CPU executes this path's
                // instructions.
                u128::from(unsafe { h64(data.as_ptr(), data.len()) })
            }
            HashVariant::Xxh3_128 => {
                let mut out = [0u64; 2];
                // SAFETY: as above; `out` holds the two words the wrapper writes.
                unsafe { h128(data.as_ptr(), data.len(), out.as_mut_ptr()) };
                (u128::from(out[1]) << 64) | u128::from(out[0])
            }
        }
    }
}

/// The test buffer of upstream xxHash's sanity checks: byte `i` is the top byte of
/// `2654435761 × 11400714785074694797^i` (mod 2⁶⁴).
pub fn test_buffer(len: usize) -> Vec<u8> {
    let mut gen: u64 = 2_654_435_761;
    (0..len)
        .map(|_| {
            let b = (gen >> 56) as u8;
            gen = gen.wrapping_mul(11_400_714_785_074_694_797);
            b
        })
        .collect()
}

/// Known test vectors: (input length of [`test_buffer`], variant, hash), as Debian's `xxhsum`
/// 0.8.1 prints them (`xxhsum -H3` and `-H2`; the empty input is xxHash's documented one).
pub const TEST_VECTORS: [(usize, HashVariant, u128); 4] = [
    (0, HashVariant::Xxh3_64, 0x2d06_8005_38d3_94c2),
    (
        0,
        HashVariant::Xxh3_128,
        0x99aa_06d3_0147_98d8_6001_c324_468d_497f,
    ),
    (4099, HashVariant::Xxh3_64, 0x318d_235a_ba64_8b01),
    (
        4099,
        HashVariant::Xxh3_128,
        0x56ef_94df_d330_9161_318d_235a_ba64_8b01,
    ),
];

/// Lengths the check hashes besides the test vectors': short inputs (each length class of
/// XXH3), one stripe block, and long ones with a partial last stripe.
const CHECK_LENGTHS: [usize; 10] = [1, 3, 16, 17, 128, 129, 240, 241, 1024, 100 * 1024 + 7];

/// Check `path` against the known test vectors and against the scalar path on inputs of every
/// XXH3 length class, for both variants: a path that hashes differently is wrong.
pub fn check_path(path: SimdPath) -> Result<(), HashError> {
    let buf = test_buffer(CHECK_LENGTHS[CHECK_LENGTHS.len() - 1].max(4099));
    for variant in HashVariant::ALL {
        let h = Hasher::new(path, variant)?;
        for &(len, v, want) in TEST_VECTORS.iter().filter(|t| t.1 == variant) {
            let got = h.hash(&buf[..len]);
            if got != want {
                return Err(HashError::Mismatch {
                    path,
                    variant: v,
                    len,
                    got,
                    want,
                    what: "the known test vector",
                });
            }
        }
        let scalar = Hasher::new(SimdPath::Scalar, variant)?;
        for len in CHECK_LENGTHS {
            let (got, want) = (h.hash(&buf[..len]), scalar.hash(&buf[..len]));
            if got != want {
                return Err(HashError::Mismatch {
                    path,
                    variant,
                    len,
                    got,
                    want,
                    what: "the scalar path's hash",
                });
            }
        }
    }
    Ok(())
}

/// The hash engine for one machine.
pub struct HashEngine {
    /// Node id → CPUs in pinning order (one thread per physical core first).
    node_cpus: BTreeMap<u32, Vec<u32>>,
    /// Bytes of the last-level cache on the whole machine, when known: blocks under it are
    /// cache-resident.
    llc_bytes: Option<u64>,
    /// Where `/proc` is (its `stat` and the threads' `schedstat` feed the CPU guard).
    proc_root: PathBuf,
    /// Paths whose check ([`check_path`]) has passed in this run.
    checked: Vec<SimdPath>,
    /// The last memory-resident working set, kept for the next case of its size and node
    /// (every path and variant hashes the same one), with the scalar path's hash of each slice
    /// it was asked for.
    working_set: Option<WorkingSet>,
}

/// A memory-resident working set, filled once, and the scalar hashes of its slices.
struct WorkingSet {
    size_bytes: u64,
    node: Option<u32>,
    buf: Arc<NumaBuffer>,
    /// (variant, offset, length) → the scalar path's hash.
    reference: BTreeMap<(HashVariant, usize, usize), u128>,
    /// The part the next repetition hashes, whichever case it is of.
    cursor: Arc<std::sync::atomic::AtomicUsize>,
}

impl WorkingSet {
    fn new(size_bytes: u64, node: Option<u32>) -> Result<WorkingSet, BenchError> {
        let len = usize::try_from(size_bytes).map_err(|_| {
            BenchError::unavailable("the working set does not fit this address space")
        })?;
        let mut buf = NumaBuffer::new(len, node, true)
            .map_err(|e| BenchError::unavailable(format!("cannot map the working set: {e}")))?;
        fill(buf.as_mut_slice(), size_bytes);
        Ok(WorkingSet {
            size_bytes,
            node,
            buf: Arc::new(buf),
            reference: BTreeMap::new(),
            cursor: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        })
    }

    /// The scalar path's hash of each `(off, len)` slice, each computed once: the missing
    /// ones on up to [`REFERENCE_THREADS`] threads at a time (the scalar path hashes a few
    /// GB/s, and a case's reference pass covers the whole set).
    fn references(
        &mut self,
        variant: HashVariant,
        slices: &[(usize, usize)],
    ) -> Result<Vec<u128>, BenchError> {
        let scalar = Hasher::new(SimdPath::Scalar, variant)
            .map_err(|e| BenchError::unavailable(e.to_string()))?;
        let missing: Vec<(usize, usize)> = slices
            .iter()
            .copied()
            .filter(|&(off, len)| !self.reference.contains_key(&(variant, off, len)))
            .collect();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, REFERENCE_THREADS);
        let data = self.buf.as_slice();
        for chunk in missing.chunks(threads) {
            let hashes: Vec<u128> = std::thread::scope(|s| {
                let handles: Vec<_> = chunk
                    .iter()
                    .map(|&(off, len)| s.spawn(move || scalar.hash(&data[off..off + len])))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                    .collect()
            });
            for (&(off, len), h) in chunk.iter().zip(hashes) {
                self.reference.insert((variant, off, len), h);
            }
        }
        Ok(slices
            .iter()
            .map(|&(off, len)| self.reference[&(variant, off, len)])
            .collect())
    }
}

impl HashEngine {
    /// `node_cpus`: each node's CPUs in pinning order (see `hwc_bench_host::pinning_order`);
    /// `proc_root`: where `/proc` is, for the CPU guard.
    pub fn new(
        node_cpus: BTreeMap<u32, Vec<u32>>,
        llc_bytes: Option<u64>,
        proc_root: impl Into<PathBuf>,
    ) -> Self {
        HashEngine {
            node_cpus,
            llc_bytes,
            proc_root: proc_root.into(),
            checked: Vec::new(),
            working_set: None,
        }
    }

    fn cpus_for(&self, spec: &HashSpec) -> Result<Vec<u32>, BenchError> {
        let threads = spec.threads.max(1) as usize;
        let cpus: Vec<u32> = match spec.cpu_node {
            Some(node) => self
                .node_cpus
                .get(&node)
                .cloned()
                .ok_or_else(|| BenchError::unavailable(format!("node {node} has no CPUs")))?,
            None => self.node_cpus.values().flatten().copied().collect(),
        };
        if threads > cpus.len() {
            return Err(BenchError::unavailable(format!(
                "{threads} hashing threads requested but there are {} CPUs to pin them to",
                cpus.len()
            )));
        }
        Ok(cpus[..threads].to_vec())
    }

    /// Whether the threads' own blocks fit the last-level cache together (where it is
    /// unknown, a block hashed over and over stays in a cache of its core's: still true).
    fn blocks_cache_resident(&self, spec: &HashSpec) -> bool {
        self.llc_bytes
            .is_none_or(|llc| spec.size_bytes.saturating_mul(u64::from(spec.threads)) < llc)
    }
}

impl Engine for HashEngine {
    fn id(&self) -> EngineId {
        ENGINE
    }

    fn prepare<'a>(&'a mut self, case: &Case) -> Result<Box<dyn Prepared + 'a>, BenchError> {
        let spec = match &case.spec {
            Spec::Hash(s) => s.clone(),
            other => {
                return Err(BenchError::failed(format!(
                    "the hash engine was given a {} case",
                    other.kind()
                )))
            }
        };
        if let Some(e) = path_blocked(spec.simd) {
            return Err(BenchError::unavailable(e.to_string()));
        }
        if !self.checked.contains(&spec.simd) {
            check_path(spec.simd).map_err(|e| BenchError::failed(e.to_string()))?;
            self.checked.push(spec.simd);
        }
        let cpus = self.cpus_for(&spec)?;
        if spec.offset_bytes.is_some() {
            let resident = self.blocks_cache_resident(&spec);
            let root = &self.proc_root;
            return Ok(Box::new(Workers::start(
                &spec, &cpus, None, resident, root,
            )?));
        }
        let fits = self
            .working_set
            .as_ref()
            .is_some_and(|w| w.size_bytes == spec.size_bytes && w.node == spec.cpu_node);
        if !fits {
            // The old one goes first: two would need twice the memory.
            self.working_set = None;
            self.working_set = Some(WorkingSet::new(spec.size_bytes, spec.cpu_node)?);
        }
        let Some(set) = self.working_set.as_mut() else {
            return Err(BenchError::failed("no working set"));
        };
        Ok(Box::new(Workers::start(
            &spec,
            &cpus,
            Some(set),
            false,
            &self.proc_root,
        )?))
    }

    /// The working set is freed after the engine's last case, for the next engine's cases.
    fn finish(&mut self) {
        self.working_set = None;
    }

    fn environment(&self) -> hwc_model::Environment {
        let mut env = BTreeMap::new();
        if let Some(v) = xxhash_version() {
            env.insert(
                "xxhash_h".to_string(),
                hwc_model::Setting::about(
                    v,
                    "the version of upstream xxHash's header the XXH3 paths were compiled from",
                ),
            );
        }
        env
    }
}

/// What a hashing thread reports once ready: the scalar path's hash of its own block (0 for a
/// slice of the working set, whose hash the engine keeps), the node of its block's first page,
/// where the block starts past a page boundary, and (the first thread of a cache-resident case)
/// the bytes a second its path hashed its block at.
type Ready = (u128, Option<i32>, usize, Option<f64>);

/// What one worker reports of one repetition.
#[derive(Debug, Clone, Copy)]
struct Slot {
    start: Instant,
    end: Instant,
    /// The hash of its block (the last call's).
    hash: u128,
    /// How long it waited for its CPU since its last reading (`None`: it could not read it).
    waited_ns: Option<u64>,
}

/// A case's threads, each with its block, waiting at the start barrier.
struct Workers {
    start: Arc<Barrier>,
    done: Arc<Barrier>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    slots: Arc<Mutex<Vec<Option<Slot>>>>,
    /// Each thread's block's hash by the scalar path, computed before the timing, by part of
    /// the working set (one part for a cache-resident case).
    expected: Vec<Vec<u128>>,
    /// The part of the working set the current repetition hashes.
    part: Arc<std::sync::atomic::AtomicUsize>,
    /// The part the next repetition hashes (the working set's, kept across cases).
    cursor: Arc<std::sync::atomic::AtomicUsize>,
    /// The part the last repetition hashed.
    hashed_part: usize,
    handles: Vec<JoinHandle<()>>,
    bytes_per_rep: u64,
    cache_resident: bool,
    notes: Vec<String>,
    placement: hwc_model::Placement,
    /// The host engines' CPU guard: a hash case shares the cores it runs on, and for a
    /// memory-resident set the memory, with whatever else is busy.
    watch: hwc_bench_host::CpuWatch,
    /// The threads' run-queue delay over the repetitions since the watch began.
    waits: hwc_bench_host::WaitTally,
}

impl Workers {
    /// Start the case's threads: each with a block of its own (`shared` None: cache-resident),
    /// or each with a slice of `shared`.
    fn start(
        spec: &HashSpec,
        cpus: &[u32],
        shared: Option<&mut WorkingSet>,
        cache_resident: bool,
        proc_root: &std::path::Path,
    ) -> Result<Workers, BenchError> {
        let threads = cpus.len();
        let hasher = Hasher::new(spec.simd, spec.variant)
            .map_err(|e| BenchError::unavailable(e.to_string()))?;
        let scalar = Hasher::new(SimdPath::Scalar, spec.variant)
            .map_err(|e| BenchError::unavailable(e.to_string()))?;
        // Own blocks: each thread its own block, hashed over and over. A working set: a part a
        // repetition, the parts in turn, each split into one slice per thread, hashed once; a
        // slice is a whole number of pages, so each starts page-aligned.
        let own = shared.is_none();
        let page = hwc_numa::page_size();
        let parts = if own {
            1
        } else {
            memory_parts(spec.size_bytes, threads)
        };
        let block = if own {
            spec.size_bytes
        } else {
            let slice = spec.size_bytes / (parts * threads) as u64 / page as u64 * page as u64;
            if slice == 0 {
                return Err(BenchError::unavailable(format!(
                    "a working set of {} bytes split among {threads} threads leaves each less \
                     than a page",
                    spec.size_bytes
                )));
            }
            slice
        };
        // Calls of the hash a repetition: set once the first thread has timed its path (a
        // slice of the working set is hashed once).
        let calls = Arc::new(std::sync::atomic::AtomicU64::new(1));
        let offset = spec.offset_bytes.unwrap_or(0) as usize;
        let block = usize::try_from(block.max(1))
            .map_err(|_| BenchError::unavailable("the block does not fit this address space"))?;
        // Each thread's data: its own block (filled by itself, so its pages are its node's), or
        // its slice of each part of the shared working set, with the scalar hashes of them
        // (`expected[part][thread]`).
        let mut expected = vec![vec![0u128; threads]; parts];
        let mut slices: Vec<Option<(Arc<NumaBuffer>, Vec<usize>)>> = vec![None; threads];
        // The part the next repetition hashes: the working set's, kept from case to case, so
        // that a part is always the one hashed longest ago.
        let mut cursor = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        if let Some(set) = shared {
            for (i, slot) in slices.iter_mut().enumerate() {
                let offs: Vec<usize> = (0..parts).map(|p| (p * threads + i) * block).collect();
                *slot = Some((set.buf.clone(), offs));
            }
            // The scalar hashes, part by part in the order the repetitions take them, so the
            // first part hashed is the one the reference pass left longest ago.
            let next = set.cursor.load(std::sync::atomic::Ordering::Acquire) % parts;
            let order: Vec<(usize, usize)> = (0..parts)
                .map(|k| (next + k) % parts)
                .flat_map(|p| (0..threads).map(move |i| (p, i)))
                .collect();
            let wanted: Vec<(usize, usize)> = order
                .iter()
                .map(|&(p, i)| (slices[i].as_ref().map_or(0, |(_, offs)| offs[p]), block))
                .collect();
            let hashes = set.references(spec.variant, &wanted)?;
            for (&(p, i), h) in order.iter().zip(hashes) {
                expected[p][i] = h;
            }
            cursor = set.cursor.clone();
        }
        let part = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let placement = hwc_model::Placement {
            cpus: Some(hwc_model::cpulist::format(cpus)),
            verified: slices
                .iter()
                .flatten()
                .all(|(buf, _)| buf.placement().is_verified())
                && !own,
            detail: match slices.iter().flatten().next() {
                Some((buf, _)) => format!("working set: {}", buf.placement().describe()),
                None => "each thread's block filled by that thread (first touch, not checked)"
                    .to_string(),
            },
        };
        let start = Arc::new(Barrier::new(threads + 1));
        let done = Arc::new(Barrier::new(threads + 1));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let slots = Arc::new(Mutex::new(vec![None; threads]));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<(usize, Result<Ready, String>)>();
        let mut handles = Vec::with_capacity(threads);
        // Each thread waits for its launch before anything else: where one cannot be started,
        // the launches are dropped, and the threads already started end (none is left at a
        // barrier that the missing one would never reach).
        let mut launches = Vec::with_capacity(threads);
        for (i, (&cpu, slice)) in cpus.iter().zip(slices).enumerate() {
            let (launch, launched) = std::sync::mpsc::sync_channel::<()>(1);
            launches.push(launch);
            let (start, done, stop, slots, ready, calls, part) = (
                start.clone(),
                done.clone(),
                stop.clone(),
                slots.clone(),
                ready_tx.clone(),
                calls.clone(),
                part.clone(),
            );
            let root = proc_root.to_path_buf();
            let h = std::thread::Builder::new()
                .name(format!("xxh3-{i}"))
                .spawn(move || {
                    if launched.recv().is_err() {
                        return;
                    }
                    if let Err(e) = hwc_numa::pin_current_thread(&[cpu]) {
                        let _ = ready.send((i, Err(format!("cannot pin it to CPU {cpu}: {e}"))));
                        drop(ready);
                        // Released with the others when the case is dropped.
                        start.wait();
                        return;
                    }
                    let own: NumaBuffer;
                    let mine: &[u8] = match &slice {
                        Some((buf, offs)) => {
                            let at = buf.as_ptr() as usize + offs[0];
                            let _ = ready.send((i, Ok((0, None, at % page, None))));
                            &[]
                        }
                        None => {
                            // Mapped, so page-aligned, and touched by this pinned thread.
                            let mut buf = match NumaBuffer::new(offset + block, None, false) {
                                Ok(b) => b,
                                Err(e) => {
                                    let _ =
                                        ready.send((i, Err(format!("cannot map its block: {e}"))));
                                    drop(ready);
                                    start.wait();
                                    return;
                                }
                            };
                            fill(&mut buf.as_mut_slice()[offset..offset + block], i as u64);
                            own = buf;
                            let data = &own.as_slice()[offset..offset + block];
                            // Where its pages landed (checked, not presumed).
                            let node = hwc_numa::node_of(data.as_ptr() as usize).ok();
                            let at = data.as_ptr() as usize % page;
                            let want = scalar.hash(data);
                            // The first thread times its path, for the repetition's length.
                            let rate = (i == 0).then(|| {
                                let t0 = Instant::now();
                                let mut n = 0u64;
                                while t0.elapsed().as_secs_f64() < CALIBRATE_SECONDS {
                                    std::hint::black_box(hasher.hash(std::hint::black_box(data)));
                                    n += 1;
                                }
                                (n * block as u64) as f64 / t0.elapsed().as_secs_f64()
                            });
                            let _ = ready.send((i, Ok((want, node, at, rate))));
                            data
                        }
                    };
                    drop(ready);
                    // Opened here: `thread-self` is the thread that opens it. Read once a
                    // repetition, after the thread's hashing ends, never before it starts (a
                    // read there would delay its start inside the repetition's span): each
                    // reading covers the wait since the last, its wake at the start included.
                    let mut probe = hwc_bench_host::sched::ThreadProbe::open(&root);
                    let mut last = probe.read().run_delay_ns;
                    loop {
                        start.wait();
                        if stop.load(std::sync::atomic::Ordering::Acquire) {
                            return;
                        }
                        let calls = calls.load(std::sync::atomic::Ordering::Acquire);
                        let data = match &slice {
                            Some((buf, offs)) => {
                                let off = offs[part.load(std::sync::atomic::Ordering::Acquire)];
                                &buf.as_slice()[off..off + block]
                            }
                            None => mine,
                        };
                        let t0 = Instant::now();
                        let mut hash = 0;
                        for _ in 0..calls {
                            hash = std::hint::black_box(hasher.hash(std::hint::black_box(data)));
                        }
                        let t1 = Instant::now();
                        let now = probe.read().run_delay_ns;
                        let waited_ns = hwc_bench_host::sched::delta(last, now);
                        last = now;
                        if let Ok(mut s) = slots.lock() {
                            s[i] = Some(Slot {
                                start: t0,
                                end: t1,
                                hash,
                                waited_ns,
                            });
                        }
                        done.wait();
                    }
                })
                .map_err(|e| BenchError::failed(format!("cannot start a hashing thread: {e}")))?;
            handles.push(h);
        }
        for launch in launches {
            // A thread that ended already (it cannot have) would only make its report missing.
            let _ = launch.send(());
        }
        drop(ready_tx);
        // Made before the threads report, so that an early return drops it and releases them.
        let mut workers = Workers {
            placement,
            start,
            done,
            stop,
            slots,
            expected: Vec::new(),
            part,
            cursor,
            hashed_part: 0,
            handles,
            bytes_per_rep: 0,
            cache_resident,
            notes: Vec::new(),
            watch: hwc_bench_host::CpuWatch::new(proc_root, cpus),
            waits: hwc_bench_host::WaitTally::new(),
        };
        let mut block_nodes: Vec<Option<i32>> = Vec::new();
        let mut rate: Option<f64> = None;
        for _ in 0..threads {
            match ready_rx.recv() {
                Ok((i, Ok((h, node, at, r)))) => {
                    rate = rate.or(r);
                    // Where the block starts is what the case measures (AVX-512 reads a block
                    // off a 64-byte line about a fifth slower): checked, not presumed.
                    if at != offset {
                        return Err(BenchError::failed(format!(
                            "hashing thread {i}'s block starts {at} bytes past a page boundary, \
                             not {offset}"
                        )));
                    }
                    if own {
                        expected[0][i] = h;
                        block_nodes.push(node);
                    }
                }
                Ok((_, Err(e))) => {
                    return Err(BenchError::unavailable(format!(
                        "a hashing thread could not start: {e}"
                    )))
                }
                Err(_) => {
                    return Err(BenchError::failed(
                        "a hashing thread ended before it was ready",
                    ))
                }
            }
        }
        // The first thread's rate sets every thread's calls (one for a slice of the working
        // set).
        let calls_per_rep = match rate {
            Some(r) if own => calls_per_rep(block as u64, r),
            _ => 1,
        };
        calls.store(calls_per_rep, std::sync::atomic::Ordering::Release);
        workers.expected = expected;
        workers.bytes_per_rep = block as u64 * calls_per_rep * threads as u64;
        workers.notes = vec![format!(
            "{} {} path (xxhash.h {}), {} thread(s), each hashing {} {} of {} bytes ({}) per \
             repetition",
            spec.variant,
            spec.simd,
            xxhash_version().unwrap_or_default(),
            threads,
            calls_per_rep,
            if own {
                "time(s) its own block".to_string()
            } else if parts == 1 {
                "time its slice of the working set".to_string()
            } else {
                format!(
                    "time its slice of one of the working set's {parts} parts, the parts in turn,"
                )
            },
            block,
            if offset == 0 {
                "page-aligned".to_string()
            } else {
                format!("starting {offset} bytes past a page boundary")
            }
        )];
        if own {
            // Verified where every thread's block is on the case's node.
            let want = spec.cpu_node.and_then(|n| i32::try_from(n).ok());
            let on_node = want.is_some() && block_nodes.iter().all(|&n| n == want);
            workers.placement.verified = on_node;
            workers.placement.detail = match (want, on_node) {
                (Some(n), true) => format!(
                    "each thread's block, filled by that thread, is on node {n} (its first page \
                     checked)"
                ),
                (Some(n), false) => format!(
                    "each thread's block was filled by that thread; not every block's first page \
                     was found on node {n}: {block_nodes:?}"
                ),
                (None, _) => "each thread's block filled by that thread (no node asked)".into(),
            };
        }
        Ok(workers)
    }
}

/// Fill `buf` with pseudo-random bytes (xorshift64*, different for each `seed`): a 64 KiB
/// pattern, copied over the rest with each copy's first word changed, so a large working set
/// fills at copy speed and no two of its 64 KiB pieces are alike.
fn fill(buf: &mut [u8], seed: u64) {
    const PATTERN: usize = 64 * 1024;
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ seed.wrapping_add(1).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let n = buf.len().min(PATTERN);
    for chunk in buf[..n].chunks_mut(8) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let w = x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
    let (head, rest) = buf.split_at_mut(n);
    for (k, chunk) in rest.chunks_mut(PATTERN).enumerate() {
        chunk.copy_from_slice(&head[..chunk.len()]);
        let tag = (k as u64 + 1).to_le_bytes();
        let m = chunk.len().min(8);
        chunk[..m].copy_from_slice(&tag[..m]);
    }
}

impl Workers {
    /// Each thread's hash of the last repetition against the scalar path's hash of what it
    /// hashed (its block, or its slice of the part hashed).
    fn check(&self) -> Result<(), BenchError> {
        let slots = self
            .slots
            .lock()
            .map_err(|_| BenchError::failed("a hashing thread panicked"))?;
        let expected = self
            .expected
            .get(self.hashed_part)
            .ok_or_else(|| BenchError::failed("no hash to check the repetition against"))?;
        for (i, (slot, want)) in slots.iter().zip(expected).enumerate() {
            let got = slot.map(|s| s.hash);
            if got != Some(*want) {
                return Err(BenchError::failed(format!(
                    "thread {i} hashed its data to {got:x?}, the scalar path to {want:#x}"
                )));
            }
        }
        Ok(())
    }
}

impl Prepared for Workers {
    fn bytes_per_rep(&self) -> u64 {
        self.bytes_per_rep
    }

    fn run_once(&mut self) -> Result<Rep, BenchError> {
        if let Ok(mut s) = self.slots.lock() {
            s.iter_mut().for_each(|x| *x = None);
        }
        let parts = self.expected.len().max(1);
        self.hashed_part = self.cursor.load(std::sync::atomic::Ordering::Acquire) % parts;
        self.cursor.store(
            (self.hashed_part + 1) % parts,
            std::sync::atomic::Ordering::Release,
        );
        self.part
            .store(self.hashed_part, std::sync::atomic::Ordering::Release);
        self.start.wait();
        self.done.wait();
        let slots = self
            .slots
            .lock()
            .map_err(|_| BenchError::failed("a hashing thread panicked"))?;
        let all: Vec<Slot> = slots.iter().flatten().copied().collect();
        if all.len() != slots.len() {
            return Err(BenchError::failed("a hashing thread did not report"));
        }
        let first = all.iter().map(|s| s.start).min();
        let last = all.iter().map(|s| s.end).max();
        let rep = match (first, last) {
            (Some(a), Some(b)) => Rep {
                seconds: b.duration_since(a).as_secs_f64(),
                wall_seconds: None,
            },
            _ => return Err(BenchError::failed("no hashing thread ran")),
        };
        self.waits.add(rep.seconds, all.iter().map(|s| s.waited_ns));
        // Every repetition's hashes are checked (outside its timed region; the runner's data
        // check follows the last repetition only, and a working set's parts take turns).
        drop(slots);
        self.check()?;
        Ok(rep)
    }

    fn verify(&mut self) -> Result<(), BenchError> {
        self.check()
    }

    fn watch(&mut self) {
        self.waits = hwc_bench_host::WaitTally::new();
        self.watch.start();
    }

    fn busy_meanwhile(&mut self) -> Option<String> {
        self.watch.verdict(self.waits.waits())
    }

    fn cache_resident(&self) -> bool {
        self.cache_resident
    }

    fn placement(&self) -> Option<hwc_model::Placement> {
        Some(self.placement.clone())
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        // Every worker waits at the start barrier (one that could not pin waits there too),
        // and leaves on seeing `stop`.
        self.start.wait();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests;
