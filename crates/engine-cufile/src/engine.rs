//! The engine: NVMe → GPU reads by cuFile, or by the POSIX bounce baseline, on threads.

use crate::api::{self, Cufile, Status, PARAM_USE_PCIP2PDMA};
use crate::mode::{self, Evidence, Mode};
use cudarc::driver::{sys, CudaContext, CudaStream};
use hwc_bench_cuda::{DeviceBuffer, HostBuffer};
use hwc_model::{
    size_label, Case, EngineId, Environment, GdsRoute, GdsSpec, HostMemory, Placement, Setting,
    Spec,
};
use hwc_numa::{Pages, PlacementCheck};
use hwc_runner::{BenchError, Engine, Idle, Prepared, Rep};
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

pub const ENGINE: EngineId = EngineId::new("cufile");

/// Bytes each drive (or the target) gives per repetition unless the run says (`--nvme-bytes`),
/// at most its size.
pub const DEFAULT_BYTES_PER_DRIVE: u64 = 4 << 30;

/// A GPU the engine may use: our name, CUDA ordinal and PCI address.
#[derive(Debug, Clone)]
pub struct GpuSlot {
    pub name: String,
    pub ordinal: u32,
    pub bdf: String,
}

/// The engine.
pub struct CufileEngine {
    lib: Result<Arc<Cufile>, String>,
    /// The driver opened and its mode decided, or why not (at the first cuFile case).
    opened: Option<Result<(Mode, String), String>>,
    gpus: Vec<GpuSlot>,
    /// Drive key → its block device (`/dev/nvme0n1`); a `--target` is its own path.
    devices: BTreeMap<String, PathBuf>,
    node_cpus: BTreeMap<u32, Vec<u32>>,
    bytes_per_drive: u64,
    contexts: BTreeMap<u32, Arc<CudaContext>>,
    nvml: Option<nvml_wrapper::Nvml>,
    strict: StrictOpen,
    /// The driver was closed (`finish`).
    closed: bool,
}

/// Opens libcufile's driver with compat mode forbidden where that cannot spoil this process's
/// library (another process: [`crate::strict::in_child`]), given the library's path; `None`
/// where the check cannot be made.
pub type StrictOpen = Box<dyn FnMut(&std::path::Path) -> Option<Result<(), Status>> + Send>;

impl CufileEngine {
    /// `lib`: libcufile as loaded (or why not: every cuFile case is then waived with it; the
    /// baseline still runs).
    pub fn new(
        lib: Result<Cufile, String>,
        gpus: Vec<GpuSlot>,
        devices: BTreeMap<String, PathBuf>,
        node_cpus: BTreeMap<u32, Vec<u32>>,
        bytes_per_drive: u64,
        strict: StrictOpen,
    ) -> Self {
        CufileEngine {
            strict,
            closed: false,
            lib: lib.map(Arc::new),
            opened: None,
            gpus,
            devices,
            node_cpus,
            bytes_per_drive,
            contexts: BTreeMap::new(),
            nvml: nvml_wrapper::Nvml::init().ok(),
        }
    }

    fn context(&mut self, ordinal: u32) -> Result<Arc<CudaContext>, BenchError> {
        if let Some(c) = self.contexts.get(&ordinal) {
            return Ok(c.clone());
        }
        let c = CudaContext::new(ordinal as usize)
            .map_err(|e| BenchError::unavailable(format!("CUDA device {ordinal}: {e:?}")))?;
        self.contexts.insert(ordinal, c.clone());
        Ok(c)
    }

    /// Open the driver once, as configured, after the check of the mode with compat mode
    /// forbidden (in another process).
    fn open(&mut self) -> Result<(Arc<Cufile>, Mode, String), BenchError> {
        let lib = self.lib.clone().map_err(|e| BenchError::Unavailable {
            reason: e,
            hint: Some(
                "install CUDA's GPUDirect Storage library (libcufile: the toolkit's cuda-cufile \
                 package, or pip install nvidia-cufile-cu13) or point HWC_LIBCUFILE at it"
                    .into(),
            ),
        })?;
        if self.opened.is_none() {
            let strict = (self.strict)(&lib.path);
            self.opened = Some(open_driver(&lib, strict));
        }
        match self.opened.as_ref().expect("just set") {
            Ok((m, why)) => Ok((lib, *m, why.clone())),
            Err(e) => Err(BenchError::unavailable(e.clone())),
        }
    }
}

/// Open the driver as configured and decide its mode, `strict_open` the check's result.
fn open_driver(
    lib: &Cufile,
    strict_open: Option<Result<(), Status>>,
) -> Result<(Mode, String), String> {
    let s = lib.driver_open();
    if s.err != 0 {
        return Err(format!("cuFileDriverOpen failed: {}", api::describe(s)));
    }
    let props = lib
        .properties()
        .map_err(|s| format!("cuFileDriverGetProperties failed: {}", api::describe(s)))?;
    let evidence = Evidence {
        strict_open,
        props,
        p2pdma_enabled: lib.get_bool(PARAM_USE_PCIP2PDMA),
    };
    Ok(mode::decide(&evidence))
}

/// The decl's engine.
impl Engine for CufileEngine {
    fn id(&self) -> EngineId {
        ENGINE
    }

    fn prepare<'a>(&'a mut self, case: &Case) -> Result<Box<dyn Prepared + 'a>, BenchError> {
        let Spec::Gds(spec) = &case.spec else {
            return Err(BenchError::failed(format!(
                "the cufile engine was given a {} case",
                case.spec.kind()
            )));
        };
        let gpu = self
            .gpus
            .iter()
            .find(|g| g.name == spec.gpu)
            .cloned()
            .ok_or_else(|| {
                BenchError::unavailable(format!("{} is not a CUDA device here", spec.gpu))
            })?;
        let ctx = self.context(gpu.ordinal)?;
        ctx.bind_to_thread()
            .map_err(|e| BenchError::failed(format!("cuCtxSetCurrent: {e:?}")))?;
        let cufile = match spec.route {
            GdsRoute::Cufile => Some(self.open()?),
            GdsRoute::PosixBounce => None,
        };
        let cpus: Vec<u32> = spec
            .host_node
            .and_then(|n| self.node_cpus.get(&n).cloned())
            .unwrap_or_default();
        GdsCase::prepare(self, spec, ctx, cufile, cpus).map(|c| Box::new(c) as Box<dyn Prepared>)
    }

    /// Busy when another process holds a compute context on the case's GPU (NVML).
    fn idle_check(&mut self, case: &Case) -> Idle {
        let (Some(nvml), Some(name)) = (self.nvml.as_ref(), case.spec.gpu()) else {
            return Idle::Idle;
        };
        let Some(g) = self.gpus.iter().find(|g| g.name == name) else {
            return Idle::Idle;
        };
        let Ok(device) = nvml.device_by_pci_bus_id(g.bdf.as_str()) else {
            return Idle::Idle;
        };
        let me = std::process::id();
        match device.running_compute_processes() {
            Ok(p) => {
                let others: Vec<String> = p
                    .iter()
                    .filter(|p| p.pid != me)
                    .map(|p| format!("pid {}", p.pid))
                    .collect();
                if others.is_empty() {
                    Idle::Idle
                } else {
                    Idle::Busy(format!(
                        "{} ({}) has other compute processes: {}",
                        g.name,
                        g.bdf,
                        others.join(", ")
                    ))
                }
            }
            Err(_) => Idle::Idle,
        }
    }

    fn refuse_when_busy(&self) -> bool {
        true
    }

    fn environment(&self) -> Environment {
        let mut env = Environment::new();
        if let Ok(lib) = &self.lib {
            let version = lib
                .version()
                .map_or("version unknown".to_string(), |v| format!("version {v}"));
            env.insert(
                "gds.libcufile".into(),
                Setting::about(lib.path.display().to_string(), version),
            );
        }
        match &self.opened {
            Some(Ok((m, why))) => {
                env.insert("gds.mode".into(), Setting::about(m.as_str(), why.clone()));
            }
            Some(Err(e)) => {
                env.insert("gds.mode".into(), Setting::about("unavailable", e.clone()));
            }
            None => {
                if let Err(e) = &self.lib {
                    env.insert("gds.mode".into(), Setting::about("unavailable", e.clone()));
                }
            }
        }
        env
    }

    fn finish(&mut self) {
        // The mode stays recorded for `environment`, read after this.
        if let (Ok(lib), Some(Ok(_))) = (&self.lib, &self.opened) {
            if !self.closed {
                lib.driver_close();
                self.closed = true;
            }
        }
    }
}

/// A drive or target, open for reading.
struct Source {
    key: String,
    path: PathBuf,
    fd: OwnedFd,
    /// Bytes read from it: its size, less any partial block.
    span_bytes: u64,
    /// Its cuFile handle (the cuFile route).
    handle: Option<*mut c_void>,
}

/// One reading thread's things.
struct Lane {
    source: usize,
    /// Its slot in the GPU buffer.
    slot: usize,
    /// The file offset of the block it moved last (what its slot holds), for `verify`.
    last_offset: Option<u64>,
    host: Option<HostBuffer>,
    stream: Option<Arc<CudaStream>>,
}

struct GdsCase<'a> {
    /// The engine, held while the case runs (its devices and contexts).
    _engine: &'a mut CufileEngine,
    ctx: Arc<CudaContext>,
    spec: GdsSpec,
    cufile: Option<(Arc<Cufile>, Mode, String)>,
    sources: Vec<Source>,
    gpu: DeviceBuffer,
    /// The GPU buffer is registered with cuFile, or why not.
    registered: Result<bool, String>,
    lanes: Vec<Lane>,
    cpus: Vec<u32>,
    /// Blocks per drive per repetition, in lane-sized rounds: `blocks_per_lane` × QD.
    blocks_per_lane: u64,
    /// Every thread of the last repetition ran on one of `cpus`.
    pinned: bool,
}

/// A raw pointer or handle a reading thread uses alone while a repetition runs.
#[derive(Clone, Copy)]
struct Raw<T>(T);
// SAFETY: each lane's handle, buffers and stream are used by its one thread during a
// repetition, and by the case's thread otherwise.
unsafe impl<T> Send for Raw<T> {}

fn open_source(key: &str, path: PathBuf, write: bool) -> Result<Source, BenchError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::EINVAL) {
                ": its filesystem refuses O_DIRECT (tmpfs does); use a file on ext4 or xfs"
            } else {
                ""
            };
            BenchError::unavailable(format!("{}: {e}{hint}", path.display()))
        })?;
    let fd: OwnedFd = file.into();
    // SAFETY: lseek on our open descriptor; the end of a block device is its size.
    let end = unsafe { libc::lseek(fd.as_raw_fd(), 0, libc::SEEK_END) };
    if end <= 0 {
        return Err(BenchError::unavailable(format!(
            "{} is empty (or its size cannot be read)",
            path.display()
        )));
    }
    Ok(Source {
        key: key.to_string(),
        path,
        fd,
        span_bytes: end as u64,
        handle: None,
    })
}

impl<'a> GdsCase<'a> {
    fn prepare(
        engine: &'a mut CufileEngine,
        spec: &GdsSpec,
        ctx: Arc<CudaContext>,
        cufile: Option<(Arc<Cufile>, Mode, String)>,
        cpus: Vec<u32>,
    ) -> Result<Self, BenchError> {
        let block = spec.block_bytes;
        let qd = spec.queue_depth.max(1) as usize;
        let mut sources = Vec::new();
        for key in &spec.drives {
            let path = engine
                .devices
                .get(key)
                .cloned()
                .unwrap_or_else(|| PathBuf::from(key));
            let mut s = open_source(key, path, spec.write)?;
            s.span_bytes -= s.span_bytes % block;
            if s.span_bytes == 0 {
                return Err(BenchError::unavailable(format!(
                    "{} is smaller than one {} read",
                    s.path.display(),
                    size_label(block)
                )));
            }
            sources.push(s);
        }
        // Each drive gives the same bytes: the engine's amount, at most the smallest span, in
        // whole rounds of `qd` blocks.
        let smallest = sources.iter().map(|s| s.span_bytes).min().unwrap_or(0);
        let per_drive = engine.bytes_per_drive.min(smallest).max(block * qd as u64);
        let blocks_per_lane = (per_drive / block / qd as u64).max(1);
        let slots = sources.len() * qd;
        let gpu = DeviceBuffer::new(&ctx, slots * block as usize)
            .map_err(|e| BenchError::unavailable(format!("GPU memory: {e}")))?;
        if spec.write {
            // What the writes put on the drive: a pattern that differs from block to block.
            gpu.write_range(0, gpu.len(), |chunk, at| {
                for (i, b) in chunk.iter_mut().enumerate() {
                    let x = (at + i) as u64;
                    *b = (x.wrapping_mul(0x9e37_79b9) >> 11) as u8 ^ (x >> 20) as u8;
                }
            })
        } else {
            // A fill no read leaves in place (checked in verify).
            gpu.fill_prefix(gpu.len(), 0xee)
        }
        .map_err(|e| BenchError::failed(e.to_string()))?;
        let mut case = GdsCase {
            _engine: engine,
            ctx: ctx.clone(),
            spec: spec.clone(),
            cufile,
            sources,
            gpu,
            registered: Ok(false),
            lanes: Vec::new(),
            cpus,
            blocks_per_lane,
            pinned: false,
        };
        if let Some((lib, _, _)) = case.cufile.clone() {
            for s in &mut case.sources {
                let h = lib.handle_register(s.fd.as_raw_fd()).map_err(|st| {
                    BenchError::unavailable(format!(
                        "cuFileHandleRegister({}): {}",
                        s.path.display(),
                        api::describe(st)
                    ))
                })?;
                s.handle = Some(h);
            }
            // SAFETY: the buffer is a live allocation of gpu.len() bytes, deregistered in Drop.
            let st = unsafe { lib.buf_register(case.gpu.ptr() as *const c_void, case.gpu.len()) };
            case.registered = if st.err == 0 {
                Ok(true)
            } else {
                Err(api::describe(st))
            };
        }
        for (si, _) in case.sources.iter().enumerate() {
            for t in 0..qd {
                let (host, stream) = match spec.route {
                    GdsRoute::Cufile => (None, None),
                    GdsRoute::PosixBounce => {
                        let h = HostBuffer::new(
                            &ctx,
                            block as usize,
                            spec.host_node,
                            HostMemory::Pinned,
                            Pages::Huge,
                        )
                        .map_err(|e| BenchError::unavailable(format!("pinned host memory: {e}")))?;
                        let s = ctx
                            .new_stream()
                            .map_err(|e| BenchError::failed(format!("cuStreamCreate: {e:?}")))?;
                        (Some(h), Some(s))
                    }
                };
                case.lanes.push(Lane {
                    source: si,
                    slot: si * qd + t,
                    last_offset: None,
                    host,
                    stream,
                });
            }
        }
        Ok(case)
    }

    /// The file offset of a drive's `k`-th block in a repetition.
    fn offset(&self, source: usize, k: u64) -> u64 {
        let blocks = self.sources[source].span_bytes / self.spec.block_bytes;
        (k % blocks) * self.spec.block_bytes
    }
}

/// One POSIX bounce: O_DIRECT `pread` into `host`, then a copy to the device; or (`write`) a
/// copy from the device, then O_DIRECT `pwrite`.
///
/// # Safety
/// `host` is `block` bytes of pinned memory and `dev` `block` bytes of device memory, both used
/// by this thread alone; `stream` is this thread's stream, in the current context.
unsafe fn bounce(
    fd: i32,
    write: bool,
    host: *mut c_void,
    dev: sys::CUdeviceptr,
    block: usize,
    off: u64,
    stream: sys::CUstream,
) -> Result<(), String> {
    let io_err = |what: &str, n: isize| {
        format!(
            "{what} at {off}: {}",
            if n < 0 {
                std::io::Error::last_os_error().to_string()
            } else {
                format!("{n} bytes")
            }
        )
    };
    let wait = || {
        // SAFETY: the caller's stream.
        unsafe { sys::cuStreamSynchronize(stream) }
            .result()
            .map_err(|e| format!("cuStreamSynchronize: {e:?}"))
    };
    if write {
        // SAFETY: as the caller guarantees.
        unsafe { sys::cuMemcpyDtoHAsync_v2(host, dev, block, stream) }
            .result()
            .map_err(|e| format!("cuMemcpyDtoHAsync: {e:?}"))?;
        wait()?;
        // SAFETY: host holds `block` bytes.
        let n = unsafe { libc::pwrite(fd, host, block, off as i64) };
        if n != block as isize {
            return Err(io_err("pwrite", n));
        }
    } else {
        // SAFETY: host is `block` writable bytes.
        let n = unsafe { libc::pread(fd, host, block, off as i64) };
        if n != block as isize {
            return Err(io_err("pread", n));
        }
        // SAFETY: as the caller guarantees.
        unsafe { sys::cuMemcpyHtoDAsync_v2(dev, host, block, stream) }
            .result()
            .map_err(|e| format!("cuMemcpyHtoDAsync: {e:?}"))?;
        wait()?;
    }
    Ok(())
}

/// Pin this thread to `cpus` (none: leave it); whether it then runs on one of them.
fn pin(cpus: &[u32]) -> bool {
    if cpus.is_empty() {
        return false;
    }
    // SAFETY: a zeroed cpu_set_t with the node's CPUs set, for this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c as usize, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
            && cpus.contains(&(libc::sched_getcpu() as u32))
    }
}

/// One lane's reads; (first start, last end).
struct LaneTimes {
    start: Instant,
    end: Instant,
    pinned: bool,
    last_offset: Option<u64>,
}

impl Prepared for GdsCase<'_> {
    fn bytes_per_rep(&self) -> u64 {
        self.lanes.len() as u64 * self.blocks_per_lane * self.spec.block_bytes
    }

    fn run_once(&mut self) -> Result<Rep, BenchError> {
        let barrier = Barrier::new(self.lanes.len());
        let block = self.spec.block_bytes as usize;
        // Each drive's blocks are handed out one at a time to whichever of its lanes is free,
        // as kvikio's task pool does, so a slow read delays only itself.
        let total = self.blocks_per_lane * u64::from(self.spec.queue_depth.max(1));
        let next: Vec<AtomicU64> = self.sources.iter().map(|_| AtomicU64::new(0)).collect();
        let offsets: Vec<Vec<u64>> = (0..self.sources.len())
            .map(|si| (0..total).map(|k| self.offset(si, k)).collect())
            .collect();
        let lib = self.cufile.as_ref().map(|c| c.0.clone());
        let base = Raw(self.gpu.ptr());
        let write = self.spec.write;
        let results: Vec<Result<LaneTimes, String>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .lanes
                .iter_mut()
                .map(|lane| {
                    let src = &self.sources[lane.source];
                    let (next, offsets) = (&next[lane.source], &offsets[lane.source]);
                    let fd = src.fd.as_raw_fd();
                    let handle = Raw(src.handle);
                    let host = Raw(lane.host.as_mut().map(|h| h.as_mut_ptr()));
                    let stream = Raw(lane.stream.as_ref().map(|s| s.cu_stream()));
                    let slot_offset = (lane.slot * block) as u64;
                    let (ctx, lib, barrier, cpus) = (&self.ctx, lib.clone(), &barrier, &self.cpus);
                    s.spawn(move || {
                        let (handle, host, stream, base) = (handle, host, stream, base);
                        ctx.bind_to_thread().map_err(|e| format!("{e:?}"))?;
                        let pinned = pin(cpus);
                        barrier.wait();
                        let start = Instant::now();
                        let mut last_offset = None;
                        loop {
                            let k = next.fetch_add(1, Ordering::Relaxed);
                            let Some(&off) = offsets.get(k as usize) else {
                                break;
                            };
                            last_offset = Some(off);
                            match (&lib, handle.0, host.0, stream.0) {
                                (Some(lib), Some(h), _, _) => {
                                    // SAFETY: h is registered; the slot lies in the buffer.
                                    let n = unsafe {
                                        lib.io(
                                            write,
                                            h,
                                            base.0 as *mut c_void,
                                            block,
                                            off as i64,
                                            slot_offset as i64,
                                        )
                                    }?;
                                    if n != block {
                                        return Err(format!("cuFile moved {n} bytes at {off}"));
                                    }
                                }
                                (_, _, Some(host), Some(stream)) => {
                                    // SAFETY: host is this lane's pinned buffer of `block` bytes;
                                    // the device slot lies in the buffer; the lane's own stream,
                                    // synchronised before the host buffer is used again.
                                    unsafe {
                                        bounce(
                                            fd,
                                            write,
                                            host,
                                            base.0 + slot_offset,
                                            block,
                                            off,
                                            stream,
                                        )
                                    }?;
                                }
                                _ => return Err("a lane without its route's resources".into()),
                            }
                        }
                        Ok(LaneTimes {
                            start,
                            end: Instant::now(),
                            pinned,
                            last_offset,
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a reader panicked".into())))
                .collect()
        });
        let mut first: Option<Instant> = None;
        let mut last: Option<Instant> = None;
        let mut pinned = true;
        for (lane, r) in self.lanes.iter_mut().zip(results) {
            let r = r.map_err(BenchError::failed)?;
            lane.last_offset = r.last_offset;
            first = Some(first.map_or(r.start, |f| f.min(r.start)));
            last = Some(last.map_or(r.end, |l| l.max(r.end)));
            pinned &= r.pinned;
        }
        self.pinned = pinned;
        let (Some(a), Some(b)) = (first, last) else {
            return Err(BenchError::failed("no reader ran"));
        };
        Ok(Rep {
            seconds: (b - a).as_secs_f64(),
            wall_seconds: None,
        })
    }

    /// Each drive's first lane that moved a block: its GPU slot and the block it read (or wrote)
    /// last are byte for byte the same, as an O_DIRECT read of the block gives it.
    fn verify(&mut self) -> Result<(), BenchError> {
        let block = self.spec.block_bytes as usize;
        let qd = self.spec.queue_depth.max(1) as usize;
        let mut expect = aligned(block)?;
        let mut got = vec![0u8; block];
        for (si, src) in self.sources.iter().enumerate() {
            let Some((lane, off)) = self.lanes[si * qd..(si + 1) * qd]
                .iter()
                .find_map(|l| l.last_offset.map(|o| (l, o)))
            else {
                return Err(BenchError::failed(format!(
                    "{}: no block was moved before the check",
                    src.path.display()
                )));
            };
            // SAFETY: expect is `block` writable, 4 KiB-aligned bytes.
            let n = unsafe {
                libc::pread(
                    src.fd.as_raw_fd(),
                    expect.as_mut_ptr().cast(),
                    block,
                    off as i64,
                )
            };
            if n != block as isize {
                return Err(BenchError::failed(format!(
                    "{}: the check's read at {off} failed",
                    src.path.display()
                )));
            }
            self.gpu
                .read_with(lane.slot * block, block, &mut got, |chunk, at| {
                    let from = at - lane.slot * block;
                    if chunk == &expect.as_slice()[from..from + chunk.len()] {
                        Ok(())
                    } else {
                        Err(())
                    }
                })
                .map_err(|e| BenchError::failed(e.to_string()))?
                .map_err(|()| {
                    BenchError::failed(format!(
                        "{}: the GPU's copy of the block at {off} differs from the drive's",
                        src.path.display()
                    ))
                })?;
        }
        Ok(())
    }

    fn placement(&self) -> Option<Placement> {
        let host_ok = self.lanes.iter().all(|l| {
            l.host
                .as_ref()
                .is_none_or(|h| matches!(h.placement(), PlacementCheck::Verified { .. }))
        });
        let cpus = (!self.cpus.is_empty()).then(|| {
            self.cpus
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        });
        Some(Placement {
            verified: self.pinned && host_ok && self.spec.host_node.is_some(),
            detail: match self.spec.host_node {
                Some(n) => format!(
                    "{} reading threads on node {n} (the GPU's){}{}",
                    self.lanes.len(),
                    if self.pinned { "" } else { ", not all pinned" },
                    if self.spec.route == GdsRoute::PosixBounce {
                        if host_ok {
                            "; bounce buffers verified on it"
                        } else {
                            "; bounce buffers not verified on it"
                        }
                    } else {
                        ""
                    }
                ),
                None => "the GPU's NUMA node is unknown: threads and buffers not placed".into(),
            },
            cpus,
        })
    }

    fn notes(&self) -> Vec<String> {
        let qd = self.spec.queue_depth;
        let drives: Vec<String> = self
            .sources
            .iter()
            .map(|s| format!("{} ({})", s.key, s.path.display()))
            .collect();
        let (call, way) = if self.spec.write {
            ("cuFileWrite", "from")
        } else {
            ("cuFileRead", "into")
        };
        let how = match &self.cufile {
            Some((_, m, _)) => format!(
                "{call} ({}) of {} {way} GPU memory{}",
                m.label(),
                size_label(self.spec.block_bytes),
                match &self.registered {
                    Ok(true) => ", the buffer registered (cuFileBufRegister)".to_string(),
                    Ok(false) => String::new(),
                    Err(e) => format!(", the buffer NOT registered ({e})"),
                }
            ),
            None if self.spec.write => format!(
                "POSIX bounce: cuMemcpyDtoHAsync of {} to pinned host memory and a wait, then an \
                 O_DIRECT pwrite, per write",
                size_label(self.spec.block_bytes)
            ),
            None => format!(
                "POSIX bounce: O_DIRECT pread of {} into pinned host memory, then \
                 cuMemcpyHtoDAsync and a wait, per read",
                size_label(self.spec.block_bytes)
            ),
        };
        vec![format!(
            "{how}; {qd} threads per drive, each with one I/O in flight, taking the drive's next \
             block when free (threads, not the batch API); {} MiB per drive per repetition, {} {}",
            (self.blocks_per_lane * u64::from(qd) * self.spec.block_bytes) >> 20,
            if self.spec.write { "to" } else { "from" },
            drives.join(", ")
        )]
    }
}

/// `len` bytes aligned for O_DIRECT (4 KiB).
fn aligned(len: usize) -> Result<AlignedBuf, BenchError> {
    let layout = std::alloc::Layout::from_size_align(len.max(1), 4096)
        .map_err(|e| BenchError::failed(e.to_string()))?;
    // SAFETY: a non-zero-sized layout; the pointer is freed in Drop with the same layout.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(BenchError::failed("out of memory for the check's buffer"));
    }
    Ok(AlignedBuf { ptr, layout })
}

struct AlignedBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl AlignedBuf {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
    fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr holds layout.size() initialised (zeroed) bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `aligned` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

impl Drop for GdsCase<'_> {
    fn drop(&mut self) {
        let Some((lib, _, _)) = &self.cufile else {
            return;
        };
        let _ = self.ctx.bind_to_thread();
        if self.registered == Ok(true) {
            // SAFETY: registered in prepare; no read is in flight between repetitions.
            unsafe { lib.buf_deregister(self.gpu.ptr() as *const c_void) };
        }
        for s in &self.sources {
            if let Some(h) = s.handle {
                // SAFETY: registered in prepare, deregistered once; the fd is still open.
                unsafe { lib.handle_deregister(h) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_is_still_recorded_after_the_engine_finished() {
        let mut e = CufileEngine::new(
            Err("no libcufile here".into()),
            Vec::new(),
            BTreeMap::new(),
            BTreeMap::new(),
            1 << 30,
            Box::new(|_: &std::path::Path| None),
        );
        e.opened = Some(Ok((Mode::Compat, "nvidia-fs 0.0".into())));
        e.finish();
        let env = e.environment();
        assert_eq!(env["gds.mode"].value, "compat");
        assert_eq!(env["gds.mode"].about.as_deref(), Some("nvidia-fs 0.0"));
        e.opened = Some(Err("cuFileDriverOpen failed".into()));
        assert_eq!(e.environment()["gds.mode"].value, "unavailable");
        // No library at all: said too, so the report can say why cuFile did not run.
        e.opened = None;
        let env = e.environment();
        assert_eq!(env["gds.mode"].value, "unavailable");
        assert_eq!(env["gds.mode"].about.as_deref(), Some("no libcufile here"));
    }
}
