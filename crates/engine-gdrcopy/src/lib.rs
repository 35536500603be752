//! The `gdrcopy` engine (Path 5): the CPU stores to and loads from GPU memory that gdrdrv maps
//! through BAR1, with libgdrapi's tuned copies (`gdr_copy_to_mapping`, `gdr_copy_from_mapping`),
//! as gdrcopy's `copybw` and `copylat` do.
//!
//! A case pins `size` bytes of the GPU's memory (64 KiB GPU pages, `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS`
//! set as gdrcopy's tests do), maps them, and copies between the mapping and host memory on the
//! copying thread's node, that thread pinned there; a repetition repeats the copy until it has
//! moved [`BYTES_PER_REP`] (a latency probe: [`LATENCY_COPIES`] copies, whose mean time is its
//! latency). The data is checked once per case, outside the timed region, through the CUDA
//! driver (not the mapping). The mapping type (write-combined, cached) is in each case's notes.
//!
//! Without libgdrapi or `/dev/gdrdrv` the engine does not start: every case is waived with the
//! install hint ([`probe`]).

use cudarc::driver::{sys, CudaContext};
use hwc_bench_cuda::{AffinityGuard, DeviceBuffer};
use hwc_gdrcopy_sys::{self as gdr, Gdr, Gdrapi, Mapped, GPU_PAGE_BYTES};
use hwc_model::{
    CellKind, CopyDirection, EngineDecl, EngineId, Environment, GdrcopySpec, Library, Needs,
    PathId, Placement, Setting, Spec,
};
use hwc_numa::{NumaBuffer, Pages, PlacementCheck};
use hwc_runner::{BenchError, Engine, Prepared, Rep};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

pub const ENGINE: EngineId = EngineId::new("gdrcopy");
/// Bytes a bandwidth repetition moves (at least one copy).
pub const BYTES_PER_REP: u64 = 256 << 20;
/// Copies a latency repetition makes.
pub const LATENCY_COPIES: u64 = 10_000;

/// The engine's declaration.
pub fn decl() -> EngineDecl {
    EngineDecl {
        id: ENGINE,
        title: "GDRCopy: CPU stores to and loads from GPU memory mapped through BAR1 (libgdrapi)"
            .into(),
        paths: vec![PathId::Gdrcopy],
        cells: vec![CellKind::Sweep],
        needs: Needs {
            gpu: true,
            libraries: vec![Library {
                name: "libcuda".into(),
                install_hint: None,
            }],
            ..Needs::default()
        },
        hardware: true,
        default_on: true,
    }
}

/// A GPU the engine may map: its topology name and CUDA ordinal.
#[derive(Debug, Clone)]
pub struct GpuSlot {
    pub name: String,
    pub ordinal: u32,
}

/// libgdrapi loaded and gdrdrv opened, or why not, with the fix: (reason, hint). `dev` is
/// normally `/dev`. The library stays loaded for the process (its handles borrow it).
pub fn probe(dev: &Path) -> Result<Gdr<'static>, (String, String)> {
    let api: &'static Gdrapi = match Gdrapi::load() {
        Ok(a) => Box::leak(Box::new(a)),
        Err(e) if e.is_not_found() => {
            return Err((
                "GDRCopy's user library (libgdrapi.so.2) was not found".into(),
                gdr::LIBRARY_INSTALL_HINT.into(),
            ))
        }
        Err(e) => return Err((e.to_string(), gdr::LIBRARY_INSTALL_HINT.into())),
    };
    api.open_in(dev).map_err(|e| match e {
        gdr::OpenError::NoGdrdrv { node } => (
            format!(
                "the gdrdrv kernel module is not loaded ({} absent)",
                node.display()
            ),
            gdr::DRIVER_INSTALL_HINT.into(),
        ),
        other => (other.to_string(), gdr::DRIVER_INSTALL_HINT.into()),
    })
}

/// Whether the kernel's `nvidia_peermem` module is loaded (some stacks need it beside gdrdrv),
/// under `sys` (normally `/sys`).
pub fn nvidia_peermem_loaded(sys: &Path) -> bool {
    sys.join("module/nvidia_peermem").exists()
}

/// The engine.
pub struct GdrcopyEngine {
    gdr: Gdr<'static>,
    gpus: Vec<GpuSlot>,
    node_cpus: BTreeMap<u32, Vec<u32>>,
    contexts: BTreeMap<u32, Arc<CudaContext>>,
    peermem: bool,
}

impl GdrcopyEngine {
    pub fn new(
        gdr: Gdr<'static>,
        gpus: Vec<GpuSlot>,
        node_cpus: BTreeMap<u32, Vec<u32>>,
        peermem: bool,
    ) -> Self {
        GdrcopyEngine {
            gdr,
            gpus,
            node_cpus,
            contexts: BTreeMap::new(),
            peermem,
        }
    }
}

impl Engine for GdrcopyEngine {
    fn id(&self) -> EngineId {
        ENGINE
    }

    fn prepare<'a>(
        &'a mut self,
        case: &hwc_model::Case,
    ) -> Result<Box<dyn Prepared + 'a>, BenchError> {
        let Spec::Gdrcopy(spec) = &case.spec else {
            return Err(BenchError::failed("the gdrcopy engine takes GDRCopy cases"));
        };
        let slot = self
            .gpus
            .iter()
            .find(|g| g.name == spec.gpu)
            .ok_or_else(|| BenchError::unavailable(format!("{} has no CUDA device", spec.gpu)))?;
        let ordinal = slot.ordinal;
        let ctx = match self.contexts.entry(ordinal) {
            std::collections::btree_map::Entry::Occupied(e) => e.get().clone(),
            std::collections::btree_map::Entry::Vacant(v) => v
                .insert(CudaContext::new(ordinal as usize).map_err(|e| {
                    BenchError::unavailable(format!("CUDA device {ordinal}: {e:?}"))
                })?)
                .clone(),
        };
        let cpus = spec
            .cpu_node
            .and_then(|n| self.node_cpus.get(&n).cloned())
            .unwrap_or_default();
        GdrCase::prepare(&self.gdr, ctx, spec.clone(), cpus).map(|c| Box::new(c) as _)
    }

    fn environment(&self) -> Environment {
        let mut env = Environment::new();
        let (major, minor) = self.gdr.api().runtime_version();
        env.insert(
            "gdrcopy.libgdrapi".into(),
            Setting::about(
                format!("{major}.{minor}"),
                self.gdr.api().path().display().to_string(),
            ),
        );
        if let Ok((major, minor)) = self.gdr.driver_version() {
            env.insert("gdrcopy.gdrdrv".into(), format!("{major}.{minor}").into());
        }
        env.insert(
            "gdrcopy.nvidia_peermem".into(),
            if self.peermem { "loaded" } else { "not loaded" }.into(),
        );
        env
    }
}

struct GdrCase<'g> {
    spec: GdrcopySpec,
    /// Keeps the GPU allocation alive under the pin.
    gpu: DeviceBuffer,
    mapped: Mapped<'g>,
    /// Where the copied bytes start in the mapping (the pin starts on a GPU page).
    at: usize,
    host: NumaBuffer,
    cpus: Vec<u32>,
    copies: u64,
    mapping_type: String,
    pinned: bool,
    last_latency_us: Option<f64>,
}

/// The byte the check expects at offset `i`.
/// Make every CUDA operation on `gpu` synchronous with respect to it, as GPUDirect mappings of
/// it require (GDRCopy's `gdr_pin_buffer` documentation).
fn sync_memops(gpu: &DeviceBuffer) -> Result<(), String> {
    let flag: u32 = 1;
    // SAFETY: the attribute takes a pointer to an unsigned int; `gpu` is a live allocation.
    unsafe {
        sys::cuPointerSetAttribute(
            (&flag as *const u32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
            gpu.ptr(),
        )
    }
    .result()
    .map_err(|e| format!("cuPointerSetAttribute(SYNC_MEMOPS): {e:?}"))
}

fn pattern(i: usize) -> u8 {
    (i as u64).wrapping_mul(0x9e37_79b9).rotate_right(13) as u8
}

impl<'g> GdrCase<'g> {
    fn prepare(
        gdr: &'g Gdr<'static>,
        ctx: Arc<CudaContext>,
        spec: GdrcopySpec,
        cpus: Vec<u32>,
    ) -> Result<Self, BenchError> {
        let size = spec.size_bytes as usize;
        // Room to start the copy on a GPU page, whatever the allocation's alignment.
        let span = (spec.size_bytes.div_ceil(GPU_PAGE_BYTES) + 1) * GPU_PAGE_BYTES;
        let gpu = DeviceBuffer::new(&ctx, span as usize)
            .map_err(|e| BenchError::unavailable(format!("GPU memory: {e}")))?;
        sync_memops(&gpu).map_err(BenchError::failed)?;
        let start = gpu.ptr().div_ceil(GPU_PAGE_BYTES) * GPU_PAGE_BYTES;
        let pin_len = span - GPU_PAGE_BYTES;
        let pinned = gdr.pin(start, pin_len).map_err(|e| {
            BenchError::unavailable(format!(
                "gdr_pin_buffer of {} bytes of {}: {e}",
                pin_len, spec.gpu
            ))
        })?;
        let info = pinned
            .info()
            .map_err(|e| BenchError::failed(format!("gdr_get_info: {e}")))?;
        let at = info.offset_bytes_of(start).unwrap_or(0) as usize;
        let mapped = pinned
            .into_mapped(pin_len as usize)
            .map_err(|e| BenchError::unavailable(format!("gdr_map: {e}")))?;
        let mut host = NumaBuffer::with_pages(size, spec.cpu_node, Pages::Default)
            .map_err(|e| BenchError::unavailable(format!("host memory: {e}")))?;
        let write = spec.direction == CopyDirection::H2d;
        if write {
            // What the stores put in GPU memory (checked in verify).
            for (i, b) in host.as_mut_slice().iter_mut().enumerate() {
                *b = pattern(i);
            }
        } else {
            gpu.write_range(at_offset(start, gpu.ptr()), size, |chunk, off| {
                let base = off - at_offset(start, gpu.ptr());
                for (i, b) in chunk.iter_mut().enumerate() {
                    *b = pattern(base + i);
                }
            })
            .map_err(|e| BenchError::failed(e.to_string()))?;
        }
        let copies = if spec.latency {
            LATENCY_COPIES
        } else {
            (BYTES_PER_REP / spec.size_bytes).max(1)
        };
        Ok(GdrCase {
            mapping_type: info.mapping_type.to_string(),
            spec,
            gpu,
            mapped,
            at,
            host,
            cpus,
            copies,
            pinned: false,
            last_latency_us: None,
        })
    }
}

/// The offset of `start` in the allocation at `base`.
fn at_offset(start: u64, base: u64) -> usize {
    (start - base) as usize
}

impl Prepared for GdrCase<'_> {
    fn bytes_per_rep(&self) -> u64 {
        self.copies * self.spec.size_bytes
    }

    fn run_once(&mut self) -> Result<Rep, BenchError> {
        let guard = (!self.cpus.is_empty())
            .then(|| AffinityGuard::pin(&self.cpus))
            .and_then(Result::ok);
        // SAFETY: sched_getcpu has no preconditions.
        let on = unsafe { libc::sched_getcpu() };
        self.pinned = guard.is_some() && self.cpus.contains(&(on as u32));
        let write = self.spec.direction == CopyDirection::H2d;
        let t = Instant::now();
        for _ in 0..self.copies {
            let r = if write {
                self.mapped.copy_to(self.host.as_slice(), self.at)
            } else {
                self.mapped.copy_from(self.host.as_mut_slice(), self.at)
            };
            r.map_err(|e| BenchError::failed(e.to_string()))?;
        }
        let seconds = t.elapsed().as_secs_f64();
        drop(guard);
        self.last_latency_us = Some(seconds / self.copies as f64 * 1e6);
        Ok(Rep {
            seconds,
            wall_seconds: None,
        })
    }

    /// The GPU's copy (read through the CUDA driver, not the mapping) and the host's are the
    /// pattern: what the stores wrote, or what the loads read.
    fn verify(&mut self) -> Result<(), BenchError> {
        let size = self.spec.size_bytes as usize;
        let start = self.mapped.pinned().addr();
        let from = at_offset(start, self.gpu.ptr());
        let bad = |what: &str| {
            BenchError::failed(format!(
                "{}: {what} differs from the pattern after the copies",
                self.spec.gpu
            ))
        };
        if self.spec.direction == CopyDirection::H2d {
            let mut staging = vec![0u8; size.min(4 << 20)];
            self.gpu
                .read_with(from, size, &mut staging, |chunk, off| {
                    let base = off - from;
                    if chunk
                        .iter()
                        .enumerate()
                        .all(|(i, &b)| b == pattern(base + i))
                    {
                        Ok(())
                    } else {
                        Err(())
                    }
                })
                .map_err(|e| BenchError::failed(e.to_string()))?
                .map_err(|()| bad("GPU memory"))
        } else if self
            .host
            .as_slice()
            .iter()
            .enumerate()
            .all(|(i, &b)| b == pattern(i))
        {
            Ok(())
        } else {
            Err(bad("the host buffer"))
        }
    }

    fn placement(&self) -> Option<Placement> {
        let host_ok = matches!(self.host.placement(), PlacementCheck::Verified { .. });
        Some(Placement {
            verified: self.pinned && host_ok && self.spec.cpu_node.is_some(),
            cpus: (!self.cpus.is_empty()).then(|| {
                self.cpus
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            }),
            detail: match self.spec.cpu_node {
                Some(n) => format!(
                    "the copying thread on node {n}{}; host memory {}",
                    if self.pinned { "" } else { " (not pinned)" },
                    if host_ok {
                        "verified on it"
                    } else {
                        "not verified on it"
                    }
                ),
                None => "the GPU's node is unknown: nothing placed".into(),
            },
        })
    }

    fn last_latency_us(&self) -> Option<f64> {
        self.spec.latency.then_some(self.last_latency_us).flatten()
    }

    fn notes(&self) -> Vec<String> {
        let (call, way) = match self.spec.direction {
            CopyDirection::H2d => ("gdr_copy_to_mapping", "CPU stores into"),
            CopyDirection::D2h => ("gdr_copy_from_mapping", "CPU loads from"),
        };
        vec![format!(
            "{call}: {way} {}'s memory through BAR1 ({} mapping), {} bytes per copy, {} copies \
             per repetition",
            self.spec.gpu, self.mapping_type, self.spec.size_bytes, self.copies
        )]
    }
}

/// SPDK registers memory in 2 MiB pages.
const WINDOW_ALIGN_BYTES: u64 = 2 << 20;

/// GPU memory mapped into this process through BAR1, for DMA from other devices (NVMe → BAR1):
/// `len` bytes at a 2 MiB-aligned CPU address ([`Self::ptr`]), inside a mapping 2 MiB larger
/// (gdrdrv picks the mapping's address, which need not be aligned). Unmapped, unpinned and
/// freed on drop, in that order.
pub struct Bar1Window {
    ptr: *mut u8,
    len: u64,
    label: String,
    _mapped: Mapped<'static>,
    _gpu: DeviceBuffer,
}

impl Bar1Window {
    /// Map `len` bytes (a multiple of 2 MiB) of CUDA device `ordinal`'s memory through BAR1.
    pub fn new(
        gdr: &'static Gdr<'static>,
        ordinal: u32,
        len: u64,
        label: String,
    ) -> Result<Self, String> {
        if len == 0 || !len.is_multiple_of(WINDOW_ALIGN_BYTES) {
            return Err(format!(
                "{label}: {len} bytes is not a whole number of 2 MiB pages"
            ));
        }
        let ctx = CudaContext::new(ordinal as usize)
            .map_err(|e| format!("CUDA device {ordinal}: {e:?}"))?;
        let span = len + WINDOW_ALIGN_BYTES;
        let gpu = DeviceBuffer::new(&ctx, (span + GPU_PAGE_BYTES) as usize)
            .map_err(|e| format!("{label}: GPU memory: {e}"))?;
        sync_memops(&gpu).map_err(|e| format!("{label}: {e}"))?;
        let start = gpu.ptr().div_ceil(GPU_PAGE_BYTES) * GPU_PAGE_BYTES;
        let mapped = gdr
            .pin(start, span)
            .and_then(|p| p.into_mapped(span as usize))
            .map_err(|e| format!("{label}: {e}"))?;
        let base = mapped.as_ptr() as u64;
        let aligned = base.div_ceil(WINDOW_ALIGN_BYTES) * WINDOW_ALIGN_BYTES;
        Ok(Bar1Window {
            ptr: aligned as *mut u8,
            len,
            label,
            _mapped: mapped,
            _gpu: gpu,
        })
    }

    /// The window's CPU address (2 MiB-aligned); `len` bytes from there are mapped.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn label(&self) -> &str {
        &self.label
    }
}
