//! The `spdk-native` engine: SPDK's NVMe driver driven by our own pollers, the mechanism the
//! NVMe → BAR1 path builds on. Built with the `native` feature (SPDK and libclang at build time:
//! `hwc-spdk-sys`).
//!
//! One environment (DPDK) per process, started at the engine's first case over the drives bound
//! for it (`pci_allowed`: DPDK touches no other device); each drive's controller attached for the
//! engine's cases and detached when it finishes, before the drives go back. A case gets, per
//! drive, one I/O queue pair and `QD` buffers of the block size in [`TargetMemory`] on the drive's
//! NUMA node; a repetition is one thread per drive, pinned to a CPU of the drive's node, that keeps
//! `QD` commands in flight until it has moved its bytes (sequential from LBA 0, wrapping at the
//! namespace's end; random 4 KiB reads for the latency probes), every completion's status checked.
//! Its time runs from the first submission of all threads (a barrier) to the last completion.

use crate::perf::{cores_for, Binder, BoundDrive, Finished};
use hwc_model::{
    BarDevice, Case, CellKind, DmaTarget, EngineDecl, EngineId, Environment, Needs, NvmePattern,
    NvmeTest, PathId, Placement, Spec,
};
use hwc_runner::{BenchError, Engine, Prepared, Rep};
use hwc_spdk_sys as sys;
use std::collections::BTreeMap;
use std::ffi::{c_void, CString};
use std::sync::{Barrier, OnceLock};
use std::time::Instant;

pub const ENGINE: EngineId = EngineId::new("spdk-native");

/// Bytes each drive moves per repetition unless the run says (`--nvme-bytes`).
pub const DEFAULT_BYTES_PER_DRIVE: u64 = 2 << 30;

/// The engine's declaration.
pub fn decl() -> EngineDecl {
    EngineDecl {
        id: ENGINE,
        title: "SPDK NVMe driver, our own pollers: one pinned thread and queue pair per drive"
            .into(),
        paths: vec![PathId::NvmeRead, PathId::NvmeWrite, PathId::NvmeBar1],
        cells: vec![CellKind::Sweep],
        needs: Needs {
            root: true,
            vfio: true,
            writes_devices: true,
            ..Needs::default()
        },
        hardware: true,
        default_on: true,
    }
}

/// DMA-able memory a drive reads into or writes from: host RAM, or a device's BAR.
pub trait TargetMemory {
    /// What it is, for the figure's label (`host RAM`).
    fn describe(&self) -> String;
    /// `bytes` of DMA-able memory on `node` (any node: `None`), 4 KiB-aligned.
    fn alloc(&mut self, bytes: u64, node: Option<u32>) -> Result<DmaBuf, String>;
}

/// A DMA buffer; freed on drop (a slice of a mapped region: handed back to the region).
pub struct DmaBuf {
    ptr: *mut c_void,
    len: u64,
    owner: Owner,
}

enum Owner {
    /// From `spdk_dma_zmalloc_socket`.
    Spdk,
    /// A slice of a [`BarRegion`]: the region's count of slices out.
    Region(std::sync::Arc<std::sync::atomic::AtomicUsize>),
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        match &self.owner {
            // SAFETY: `ptr` came from spdk_dma_zmalloc_socket and is freed once, here.
            Owner::Spdk => unsafe { sys::spdk_dma_free(self.ptr) },
            Owner::Region(out) => {
                out.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    }
}

/// Host RAM from SPDK's hugepage heap, on the drive's node.
pub struct HostRam;

impl TargetMemory for HostRam {
    fn describe(&self) -> String {
        "host RAM (SPDK's DMA heap on its poller's node)".into()
    }
    fn alloc(&mut self, bytes: u64, node: Option<u32>) -> Result<DmaBuf, String> {
        let socket = node.map_or(-1, |n| n as i32);
        // SAFETY: a plain allocation call; a null result is checked.
        let ptr = unsafe {
            sys::spdk_dma_zmalloc_socket(bytes as usize, 4096, std::ptr::null_mut(), socket)
        };
        if ptr.is_null() {
            return Err(format!(
                "no {} MiB of DMA memory on node {socket} (hugepages)",
                bytes >> 20
            ));
        }
        Ok(DmaBuf {
            ptr,
            len: bytes,
            owner: Owner::Spdk,
        })
    }
}

/// SPDK's translations are 2 MiB pages: a region it registers starts and ends on one.
pub const REGION_ALIGN_BYTES: u64 = 2 << 20;

/// `spdk_vtophys`'s failure value (`SPDK_VTOPHYS_ERROR`).
const VTOPHYS_ERROR: u64 = u64::MAX;

/// Memory mapped into this process by a provider (a PCI BAR through sysfs, GPU memory through
/// GDRCopy), registered with SPDK so that drives can DMA into it, and handed out in slices.
/// The provider's mapping is released after SPDK forgets the region (drop order).
pub struct BarRegion {
    ptr: *mut c_void,
    len: u64,
    label: String,
    iova: u64,
    /// Slices handed out since the last time none was out.
    next: u64,
    out: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    _mapping: Box<dyn std::any::Any>,
}

impl BarRegion {
    /// Register `len` bytes at `ptr` (both 2 MiB-aligned), which `mapping` keeps mapped, with
    /// SPDK, and check that SPDK really translates them: v25.09's `spdk_mem_register` returns 0
    /// even when the translation failed (`../shared/tools/spdk/README.md`).
    ///
    /// # Safety
    /// `ptr..ptr+len` is mapped, readable and writable, for as long as `mapping` lives.
    pub unsafe fn register(
        ptr: *mut c_void,
        len: u64,
        label: String,
        mapping: Box<dyn std::any::Any>,
    ) -> Result<Self, String> {
        if !(ptr as u64).is_multiple_of(REGION_ALIGN_BYTES)
            || !len.is_multiple_of(REGION_ALIGN_BYTES)
            || len == 0
        {
            return Err(format!(
                "{label}: SPDK registers whole 2 MiB pages ({len} bytes at {ptr:?})"
            ));
        }
        // SAFETY: the caller's mapping, 2 MiB-aligned (checked).
        let rc = unsafe { sys::spdk_mem_register(ptr, len as usize) };
        if rc != 0 {
            return Err(format!("{label}: spdk_mem_register failed ({rc})"));
        }
        let mut region = BarRegion {
            ptr,
            len,
            label,
            iova: VTOPHYS_ERROR,
            next: 0,
            out: Default::default(),
            _mapping: mapping,
        };
        let mut iova = VTOPHYS_ERROR;
        for at in [0, len - 4096] {
            let mut size = 4096u64;
            // SAFETY: an address inside the registered region; size is valid for writing.
            let t = unsafe { sys::spdk_vtophys(ptr.add(at as usize), &mut size) };
            if t == VTOPHYS_ERROR {
                // Dropping the region unregisters it.
                return Err(format!(
                    "{}: registered, but SPDK cannot translate it for DMA (an IOMMU through                      vfio-pci is needed: under uio every command would fail)",
                    region.label
                ));
            }
            if at == 0 {
                iova = t;
            }
        }
        region.iova = iova;
        Ok(region)
    }
}

impl Drop for BarRegion {
    fn drop(&mut self) {
        // SAFETY: registered once in `register`; nothing is in flight (no slice is out while
        // its engine holds the region and no case runs).
        unsafe { sys::spdk_mem_unregister(self.ptr, self.len as usize) };
    }
}

impl TargetMemory for BarRegion {
    fn describe(&self) -> String {
        format!(
            "{} ({} MiB registered with SPDK, IOVA {:#x})",
            self.label,
            self.len >> 20,
            self.iova
        )
    }
    fn alloc(&mut self, bytes: u64, _node: Option<u32>) -> Result<DmaBuf, String> {
        if self.out.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            self.next = 0;
        }
        let bytes_aligned = bytes.div_ceil(4096) * 4096;
        if self.next + bytes_aligned > self.len {
            return Err(format!(
                "{}: its {} MiB do not hold the case's buffers (QD × drives × block)",
                self.label,
                self.len >> 20
            ));
        }
        // SAFETY: inside the region (checked above).
        let ptr = unsafe { self.ptr.add(self.next as usize) };
        self.next += bytes_aligned;
        self.out.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(DmaBuf {
            ptr,
            len: bytes,
            owner: Owner::Region(self.out.clone()),
        })
    }
}

/// A PCI device's BAR mapped through sysfs (`resourceN`) at a 2 MiB-aligned address.
pub struct PciBarMapping {
    reserved: *mut c_void,
    reserved_len: usize,
}

impl Drop for PciBarMapping {
    fn drop(&mut self) {
        // SAFETY: the reservation (and the BAR mapped over part of it) was made in
        // `map_pci_bar` and is unmapped once, here.
        unsafe { libc::munmap(self.reserved, self.reserved_len) };
    }
}

/// Map BAR `resource` of `bdf` (under `sysfs`, normally `/sys`), the whole 2 MiB pages of it,
/// and register them with SPDK. The caller has checked the device (the BAR gate).
pub fn map_pci_bar(sysfs: &std::path::Path, bdf: &str, resource: u32) -> Result<BarRegion, String> {
    use std::os::fd::AsRawFd;
    let path = sysfs.join(format!("bus/pci/devices/{bdf}/resource{resource}"));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let size = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    let len = size - size % REGION_ALIGN_BYTES;
    if len == 0 {
        return Err(format!(
            "BAR{resource} of {bdf} is {size} bytes: SPDK needs at least one whole 2 MiB page"
        ));
    }
    let reserved_len = (len + REGION_ALIGN_BYTES) as usize;
    // SAFETY: an anonymous reservation, no access, anywhere; checked for failure.
    let reserved = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            reserved_len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if reserved == libc::MAP_FAILED {
        return Err(format!(
            "reserving {} MiB of address space failed",
            len >> 20
        ));
    }
    let mapping = PciBarMapping {
        reserved,
        reserved_len,
    };
    let want = (reserved as u64).div_ceil(REGION_ALIGN_BYTES) * REGION_ALIGN_BYTES;
    // SAFETY: `want..want+len` lies inside our reservation, which MAP_FIXED replaces; the file
    // is the BAR's sysfs resource, mapped shared (the device's memory itself).
    let bar = unsafe {
        libc::mmap(
            want as *mut c_void,
            len as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            file.as_raw_fd(),
            0,
        )
    };
    if bar == libc::MAP_FAILED {
        return Err(format!(
            "mapping {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    let label = format!("PCI BAR{resource} of {bdf} (not a GPU)");
    // SAFETY: `bar` maps `len` bytes, read/write, for as long as `mapping` lives.
    unsafe { BarRegion::register(bar, len, label, Box::new(mapping)) }
}

/// The process's SPDK environment: started once (DPDK cannot start twice in a process).
static ENV: OnceLock<Result<(), String>> = OnceLock::new();

/// Controllers are attached in this process: DPDK holds their vfio devices until they are
/// detached, so unbinding them from here would wait for ever.
static ATTACHED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process holds drives through SPDK's driver (see [`ATTACHED`]): a path that puts
/// the drives back at once (a second signal) must leave that to another process.
pub fn holds_drives() -> bool {
    ATTACHED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Start the environment on `main_core`, touching only the PCI functions `bdfs`; on `no_huge_mib`
/// MiB of ordinary memory instead of hugepages where given (then with no PCI at all).
fn start_env(bdfs: &[String], main_core: u32, no_huge_mib: Option<u32>) -> Result<(), String> {
    ENV.get_or_init(|| {
        let bdfs = bdfs.to_vec();
        // DPDK pins the thread that starts it to its main core: a thread of its own.
        std::thread::spawn(move || {
            let name = CString::new("hwceiling").expect("no NUL");
            let mask = CString::new(format!("[{main_core}]")).expect("no NUL");
            let mut allowed: Vec<sys::spdk_pci_addr> = Vec::with_capacity(bdfs.len());
            for b in &bdfs {
                let c = CString::new(b.as_str()).map_err(|e| e.to_string())?;
                let mut a = sys::spdk_pci_addr::default();
                // SAFETY: `a` and `c` are valid for the call.
                if unsafe { sys::spdk_pci_addr_parse(&mut a, c.as_ptr()) } != 0 {
                    return Err(format!("{b} is not a PCI address"));
                }
                allowed.push(a);
            }
            let mut opts = sys::spdk_env_opts {
                opts_size: std::mem::size_of::<sys::spdk_env_opts>(),
                ..Default::default()
            };
            // SAFETY: opts is a valid, sized spdk_env_opts.
            unsafe { sys::spdk_env_opts_init(&mut opts) };
            opts.name = name.as_ptr();
            opts.core_mask = mask.as_ptr();
            opts.pci_allowed = allowed.as_mut_ptr();
            opts.num_pci_addr = allowed.len();
            if let Some(mib) = no_huge_mib {
                opts.no_huge = true;
                opts.no_pci = true;
                opts.mem_size = mib as i32;
            }
            // SAFETY: every pointer in opts lives until the call returns (DPDK copies them).
            let rc = unsafe { sys::spdk_env_init(&opts) };
            if rc != 0 {
                return Err(format!(
                    "spdk_env_init failed ({rc}): DPDK could not start (hugepages, vfio)"
                ));
            }
            Ok(())
        })
        .join()
        .unwrap_or_else(|_| Err("starting SPDK's environment panicked".into()))
    })
    .clone()
}

/// A controller attached, and what the engine knows of its first namespace.
struct Drive {
    bound: BoundDrive,
    ctrlr: *mut sys::spdk_nvme_ctrlr,
    ns: *mut sys::spdk_nvme_ns,
    sector_bytes: u64,
    max_xfer_bytes: u64,
    size_bytes: u64,
}

/// The engine.
pub struct SpdkNative {
    binder: Box<dyn Binder>,
    memory: Box<dyn TargetMemory>,
    node_cpus: BTreeMap<u32, Vec<u32>>,
    bytes_per_drive: u64,
    hugepages_bytes_per_node: u64,
    /// See [`SpdkNative::without_hugepages`].
    no_huge_mib: Option<u32>,
    /// The drives attached, or why they could not be; `None` before the first case.
    drives: Option<Result<Vec<Drive>, String>>,
    /// Maps a device's BAR for the NVMe → BAR cases (after SPDK has started).
    bar_opener: BarOpener,
    /// The BARs mapped so far, by [`BarDevice::key`], or why one could not be.
    bars: BTreeMap<String, Result<BarRegion, String>>,
    finished: Option<Result<Finished, String>>,
}

/// Maps a device's BAR and registers it with SPDK.
pub type BarOpener = Box<dyn FnMut(&BarDevice) -> Result<BarRegion, String>>;

/// PCI BARs through `sysfs` (normally `/sys`); GPU BAR1 needs GDRCopy, which the caller's
/// opener adds (`with_bar_opener`).
pub fn sysfs_bar_opener(sysfs: std::path::PathBuf) -> BarOpener {
    Box::new(move |d: &BarDevice| match d {
        BarDevice::PciBar { bdf, resource } => map_pci_bar(&sysfs, bdf, *resource),
        BarDevice::GpuBar1 { gpu, .. } => Err(format!(
            "{gpu}: this engine was given no GPU BAR1 mapper (GDRCopy; with_bar_opener)"
        )),
    })
}

impl SpdkNative {
    pub fn new(
        binder: Box<dyn Binder>,
        memory: Box<dyn TargetMemory>,
        node_cpus: BTreeMap<u32, Vec<u32>>,
        bytes_per_drive: u64,
    ) -> Self {
        SpdkNative {
            binder,
            memory,
            node_cpus,
            bytes_per_drive,
            hugepages_bytes_per_node: crate::perf::MIN_HUGEPAGES_BYTES_PER_NODE,
            no_huge_mib: None,
            drives: None,
            bar_opener: sysfs_bar_opener("/sys".into()),
            bars: BTreeMap::new(),
            finished: None,
        }
    }

    /// Map BARs with `opener` instead of [`sysfs_bar_opener`]'s.
    pub fn with_bar_opener(mut self, opener: BarOpener) -> Self {
        self.bar_opener = opener;
        self
    }

    /// Start SPDK on `mib` MiB of ordinary memory, with no PCI device (`--no-huge`): for drives
    /// reached over NVMe-oF TCP only, which need no DMA.
    pub fn without_hugepages(mut self, mib: u32) -> Self {
        self.no_huge_mib = Some(mib);
        self
    }

    fn attach(&mut self) -> Result<Vec<Drive>, String> {
        let bound = self.binder.bind(self.hugepages_bytes_per_node)?;
        let bdfs: Vec<String> = bound
            .iter()
            .filter(|b| b.tcp.is_none())
            .map(|b| b.bdf.clone())
            .collect();
        let main = self
            .node_cpus
            .values()
            .flatten()
            .min()
            .copied()
            .unwrap_or(0);
        start_env(&bdfs, main, self.no_huge_mib)?;
        self.binder
            .record_files(&format!("spdk_pid{}", std::process::id()))?;
        let mut drives = Vec::new();
        for b in bound {
            let trid_s = CString::new(b.trid()).map_err(|e| e.to_string())?;
            let mut trid = sys::spdk_nvme_transport_id::default();
            // SAFETY: valid pointers for the call.
            if unsafe { sys::spdk_nvme_transport_id_parse(&mut trid, trid_s.as_ptr()) } != 0 {
                return Err(format!("{}: not a transport id", b.bdf));
            }
            // SAFETY: trid is valid; default controller options (null, 0).
            let ctrlr = unsafe { sys::spdk_nvme_connect(&trid, std::ptr::null(), 0) };
            if ctrlr.is_null() {
                detach_all(&mut drives);
                return Err(format!(
                    "SPDK could not attach {} (spdk_nvme_connect)",
                    b.bdf
                ));
            }
            // SAFETY: ctrlr is attached; namespace 1 may be absent (null, checked).
            let ns = unsafe { sys::spdk_nvme_ctrlr_get_ns(ctrlr, 1) };
            // SAFETY: as above.
            if ns.is_null() || !unsafe { sys::spdk_nvme_ns_is_active(ns) } {
                // SAFETY: ctrlr attached above, detached once.
                unsafe { sys::spdk_nvme_detach(ctrlr) };
                detach_all(&mut drives);
                return Err(format!("{} has no active namespace 1", b.bdf));
            }
            // SAFETY: ns is an active namespace of an attached controller.
            let (sector, max_xfer, size) = unsafe {
                (
                    u64::from(sys::spdk_nvme_ns_get_sector_size(ns)),
                    u64::from(sys::spdk_nvme_ns_get_max_io_xfer_size(ns)),
                    sys::spdk_nvme_ns_get_size(ns),
                )
            };
            ATTACHED.store(true, std::sync::atomic::Ordering::SeqCst);
            drives.push(Drive {
                bound: b,
                ctrlr,
                ns,
                sector_bytes: sector,
                max_xfer_bytes: max_xfer,
                size_bytes: size,
            });
        }
        Ok(drives)
    }
}

fn detach_all(drives: &mut Vec<Drive>) {
    for d in drives.drain(..) {
        // SAFETY: each controller was attached once and is detached once.
        unsafe { sys::spdk_nvme_detach(d.ctrlr) };
    }
    ATTACHED.store(false, std::sync::atomic::Ordering::SeqCst);
}

/// A raw pointer handed to a poller thread, which alone uses it while the repetition runs.
struct Ptr<T>(*mut T);
// SAFETY: a queue pair (and its buffers) is used by one thread at a time: the poller of its
// drive, during a repetition; the case's thread otherwise.
unsafe impl<T> Send for Ptr<T> {}

/// What a case asks of the drives, whichever its spec.
struct Job<'s> {
    drives: &'s [String],
    block_bytes: u64,
    queue_depth: u32,
    write: bool,
    random: bool,
    latency: bool,
    /// All pollers (and host buffers) on this node (`Some(None)`: nodes unknown); `None`: each
    /// on its drive's node.
    poller_node: Option<Option<u32>>,
    /// Read into this device's BAR instead of host RAM.
    bar: Option<&'s BarDevice>,
}

/// One drive of a prepared case.
struct Lane {
    ctrlr: *mut sys::spdk_nvme_ctrlr,
    ns: *mut sys::spdk_nvme_ns,
    /// The queue pair's poll group (perf's way: for TCP, one socket group polled at once).
    group: *mut sys::spdk_nvme_poll_group,
    qpair: *mut sys::spdk_nvme_qpair,
    /// Set by the driver when the queue pair drops (its poll group's context).
    disconnected: Box<std::sync::atomic::AtomicBool>,
    buffers: Vec<DmaBuf>,
    sector_bytes: u64,
    span_bytes: u64,
    cpu: u32,
    /// The node its poller (and host buffers) belong on: the drive's, or the case's.
    node: Option<u32>,
    drive_node: Option<u32>,
    bdf: String,
}

impl Drop for Lane {
    fn drop(&mut self) {
        // SAFETY: the queue pair was allocated for this case and has nothing in flight; freeing
        // it takes it out of its group, which is then empty and destroyed once.
        unsafe {
            if !self.qpair.is_null() {
                sys::spdk_nvme_ctrlr_free_io_qpair(self.qpair);
            }
            sys::spdk_nvme_poll_group_destroy(self.group);
        }
    }
}

/// The driver's word that a queue pair of a lane's group dropped.
unsafe extern "C" fn on_disconnect(_qpair: *mut sys::spdk_nvme_qpair, ctx: *mut c_void) {
    // SAFETY: ctx is the lane's flag, boxed for the lane's life (the group's context).
    let flag = unsafe { &*(ctx as *const std::sync::atomic::AtomicBool) };
    flag.store(true, std::sync::atomic::Ordering::Relaxed);
}

struct NativeCase<'a> {
    _engine: &'a mut SpdkNative,
    lanes: Vec<Lane>,
    write: bool,
    random: bool,
    block_bytes: u64,
    bytes_per_drive: u64,
    last_latency_us: Option<f64>,
    memory: String,
    /// Every poller of the last repetition ran on its CPU.
    pinned: bool,
    node_cpus: BTreeMap<u32, Vec<u32>>,
    /// Per lane and buffer, the block the last repetition left in it.
    last_blocks: Vec<Vec<Option<u64>>>,
    /// Host memory for the check's reads.
    check_memory: HostRam,
    /// Per lane, the node its host-RAM buffers are on, as the kernel says (`None`: a BAR, or
    /// the kernel could not say).
    buffer_nodes: Vec<Option<u32>>,
    /// The buffers are a BAR's, not host RAM.
    into_bar: bool,
}

/// One drive's repetition as it runs: what its commands' completions read and change. Reached
/// only through raw pointers while the repetition runs (the driver's callbacks write to it from
/// inside `spdk_nvme_qpair_process_completions`, on the poller's own thread).
struct LaneState {
    ns: *mut sys::spdk_nvme_ns,
    qpair: *mut sys::spdk_nvme_qpair,
    write: bool,
    random: bool,
    block: u64,
    sector_bytes: u64,
    blocks_in_span: u64,
    /// Commands to issue in all, and issued so far.
    total: u64,
    next: u64,
    in_flight: usize,
    rng: u64,
    /// The first failure (a command's status, a submission refused).
    error: Option<String>,
    latency_ticks: u64,
    completions: u64,
}

/// One command slot: its buffer, and when its command went.
struct Slot {
    state: *mut LaneState,
    buffer: *mut c_void,
    submitted_tick: u64,
    /// The block its last command moved (an index into the span).
    last_block: Option<u64>,
}

/// Issue the next command of `slot`'s lane into its buffer.
///
/// # Safety
/// `slot` and its state are valid and used by this thread alone; the slot has nothing in flight.
unsafe fn submit(slot: *mut Slot) {
    // SAFETY: as the caller guarantees.
    let (sl, st) = unsafe { (&mut *slot, &mut *(*slot).state) };
    let index = if st.random {
        st.rng ^= st.rng << 13;
        st.rng ^= st.rng >> 7;
        st.rng ^= st.rng << 17;
        st.rng % st.blocks_in_span
    } else {
        st.next % st.blocks_in_span
    };
    let lba = index * st.block / st.sector_bytes;
    let count = (st.block / st.sector_bytes) as u32;
    st.next += 1;
    st.in_flight += 1;
    sl.last_block = Some(index);
    // SAFETY: spdk_get_ticks reads the TSC.
    sl.submitted_tick = unsafe { sys::spdk_get_ticks() };
    let arg = slot as *mut c_void;
    // Reads and writes take the same arguments.
    let command = if st.write {
        sys::spdk_nvme_ns_cmd_write
    } else {
        sys::spdk_nvme_ns_cmd_read
    };
    // SAFETY: ns and qpair are the lane's, used by this thread alone; the buffer holds a block;
    // the slot lives until its completion (the poller drains every command).
    let rc = unsafe {
        command(
            st.ns,
            st.qpair,
            sl.buffer,
            lba,
            count,
            Some(on_complete),
            arg,
            0,
        )
    };
    if rc != 0 {
        st.in_flight -= 1;
        st.error
            .get_or_insert(format!("submitting a command failed ({rc})"));
    }
}

/// A command completed: count it, check its status, and issue the slot's next (as perf does:
/// from inside the completion, so one doorbell write covers every command issued in one poll).
unsafe extern "C" fn on_complete(arg: *mut c_void, cpl: *const sys::spdk_nvme_cpl) {
    let slot = arg as *mut Slot;
    // SAFETY: arg is a slot of the polling thread's lane, alive while its command is in flight;
    // cpl is the completion the driver passes.
    let (sl, st, cpl) = unsafe { (&mut *slot, &mut *(*slot).state, &*cpl) };
    // SAFETY: spdk_get_ticks reads the TSC.
    st.latency_ticks += unsafe { sys::spdk_get_ticks() } - sl.submitted_tick;
    st.completions += 1;
    st.in_flight -= 1;
    // SAFETY: the status read as its raw 16 bits.
    let raw = unsafe { cpl.__bindgen_anon_1.status_raw };
    // Status code (bits 1–8) and type (bits 9–11): both zero is success.
    let status = (raw >> 1) & 0x7ff;
    if status != 0 {
        st.error
            .get_or_insert(format!("a command completed with status {status:#x}"));
    }
    if st.next < st.total && st.error.is_none() {
        // SAFETY: the slot's command has completed; same thread, same lane.
        unsafe { submit(slot) };
    }
}

/// What one drive's repetition did.
struct LaneRun {
    first_submit: Instant,
    last_completion: Instant,
    latency_sum_s: f64,
    commands: u64,
    /// The poller ran on its CPU.
    pinned: bool,
    /// Per buffer, the block its last command moved.
    last_blocks: Vec<Option<u64>>,
}

/// I/O polls between two of the admin queue, which sends the keep-alives a fabrics target
/// drops a silent host without (its timeout is seconds; this many polls take milliseconds).
const ADMIN_POLL_EVERY: u64 = 4096;

/// One drive's repetition: `bytes` in commands of `block` at the queue depth of its buffers.
fn poll_lane(
    lane: &Lane,
    write: bool,
    random: bool,
    block: u64,
    bytes: u64,
    start: &Barrier,
) -> Result<LaneRun, String> {
    let pinned = pin(lane.cpu);
    let mut state = LaneState {
        ns: lane.ns,
        qpair: lane.qpair,
        write,
        random,
        block,
        sector_bytes: lane.sector_bytes,
        blocks_in_span: (lane.span_bytes / block).max(1),
        total: bytes / block,
        next: 0,
        in_flight: 0,
        rng: 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(lane.cpu),
        error: None,
        latency_ticks: 0,
        completions: 0,
    };
    let st: *mut LaneState = &mut state;
    let mut slots: Vec<Slot> = lane
        .buffers
        .iter()
        .map(|b| Slot {
            state: st,
            buffer: b.ptr,
            submitted_tick: 0,
            last_block: None,
        })
        .collect();
    let base = slots.as_mut_ptr();
    start.wait();
    let t0 = Instant::now();
    for i in 0..slots.len() {
        // SAFETY: st and the slots are this thread's; no command is in flight yet.
        unsafe {
            if (*st).next < (*st).total && (*st).error.is_none() {
                submit(base.add(i));
            }
        }
    }
    // SAFETY: the driver's callbacks write the state only inside process_completions, on
    // this thread; between calls it is read through the same pointer.
    for polls in 0u64.. {
        // SAFETY: as above; the state escaped to the driver, so each read is a fresh one.
        if unsafe { (*st).in_flight } == 0 {
            break;
        }
        if polls % ADMIN_POLL_EVERY == ADMIN_POLL_EVERY - 1 {
            // SAFETY: during a repetition this thread alone uses its controller.
            unsafe { sys::spdk_nvme_ctrlr_process_admin_completions(lane.ctrlr) };
        }
        // SAFETY: this thread alone polls the lane's group.
        let rc = unsafe {
            sys::spdk_nvme_poll_group_process_completions(lane.group, 0, Some(on_disconnect))
        };
        if rc < 0 || lane.disconnected.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(format!("{}: the queue pair failed ({rc})", lane.bdf));
        }
    }
    let t1 = Instant::now();
    let last_blocks = slots.iter().map(|s| s.last_block).collect();
    drop(slots);
    if let Some(e) = state.error {
        return Err(format!("{}: {e}", lane.bdf));
    }
    // SAFETY: spdk_get_ticks_hz has no preconditions.
    let hz = unsafe { sys::spdk_get_ticks_hz() }.max(1) as f64;
    Ok(LaneRun {
        first_submit: t0,
        last_completion: t1,
        latency_sum_s: state.latency_ticks as f64 / hz,
        commands: state.completions,
        pinned,
        last_blocks,
    })
}

/// Add the lane's queue pair to its group and connect it, polling until it is (10 s at most).
fn connect(lane: &Lane) -> Result<(), String> {
    // SAFETY: the queue pair was created (not connected) for this lane's group and controller;
    // this thread alone uses them.
    unsafe {
        if sys::spdk_nvme_poll_group_add(lane.group, lane.qpair) != 0 {
            return Err(format!("{}: the queue pair joins no poll group", lane.bdf));
        }
        if sys::spdk_nvme_ctrlr_connect_io_qpair(lane.ctrlr, lane.qpair) != 0 {
            return Err(format!("{}: the queue pair does not connect", lane.bdf));
        }
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        loop {
            sys::spdk_nvme_poll_group_process_completions(lane.group, 0, Some(on_disconnect));
            match sys::spdk_nvme_poll_group_all_connected(lane.group) {
                0 => return Ok(()),
                rc if rc != -libc::EAGAIN || Instant::now() > deadline => {
                    return Err(format!(
                        "{}: the queue pair failed to connect ({rc})",
                        lane.bdf
                    ))
                }
                _ => {}
            }
        }
    }
}

/// Read block `index` (of `block` bytes) of the lane's drive into `buffer`, waiting for it (10 s
/// at most).
fn read_block(lane: &Lane, index: u64, block: u64, buffer: *mut c_void) -> Result<(), String> {
    use std::sync::atomic::{AtomicU32, Ordering};
    const PENDING: u32 = u32::MAX;
    unsafe extern "C" fn done(arg: *mut c_void, cpl: *const sys::spdk_nvme_cpl) {
        // SAFETY: arg is the waiting caller's status cell, alive until this runs; cpl is the
        // driver's completion, its status read as its raw 16 bits.
        let (cell, raw) = unsafe {
            (
                &*(arg as *const AtomicU32),
                (*cpl).__bindgen_anon_1.status_raw,
            )
        };
        cell.store(u32::from((raw >> 1) & 0x7ff), Ordering::SeqCst);
    }
    // Boxed: leaked if the read never completes, so a late completion writes to live memory.
    let status = Box::new(AtomicU32::new(PENDING));
    let lba = index * block / lane.sector_bytes;
    let count = (block / lane.sector_bytes) as u32;
    // SAFETY: the lane's queue pair, used by this thread alone, nothing in flight; `buffer` is
    // `block` bytes of registered memory; `status` outlives the command (polled to completion).
    let rc = unsafe {
        sys::spdk_nvme_ns_cmd_read(
            lane.ns,
            lane.qpair,
            buffer,
            lba,
            count,
            Some(done),
            &*status as *const AtomicU32 as *mut c_void,
            0,
        )
    };
    if rc != 0 {
        return Err(format!("{}: the check's read was refused ({rc})", lane.bdf));
    }
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    while status.load(Ordering::SeqCst) == PENDING {
        // SAFETY: this thread alone polls the lane's group.
        let rc = unsafe {
            sys::spdk_nvme_poll_group_process_completions(lane.group, 0, Some(on_disconnect))
        };
        if rc < 0 || Instant::now() > deadline {
            Box::leak(status);
            return Err(format!("{}: the check's read did not complete", lane.bdf));
        }
    }
    match status.load(Ordering::SeqCst) {
        0 => Ok(()),
        s => Err(format!(
            "{}: the check's read failed (status {s:#x})",
            lane.bdf
        )),
    }
}

/// Pin this thread to `cpu`; whether it then runs there.
fn pin(cpu: u32) -> bool {
    // SAFETY: a zeroed cpu_set_t with one CPU set, for this thread; sched_getcpu has no
    // preconditions.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
            && libc::sched_getcpu() == cpu as i32
    }
}

impl Engine for SpdkNative {
    fn id(&self) -> EngineId {
        ENGINE
    }

    fn expect(&mut self, cases: &[&Case]) {
        let specs: Vec<&hwc_model::NvmeSpec> = cases.iter().filter_map(|c| c.spec.nvme()).collect();
        self.hugepages_bytes_per_node = crate::perf::hugepages_per_node(&specs, &|_| None);
    }

    fn prepare<'a>(&'a mut self, case: &Case) -> Result<Box<dyn Prepared + 'a>, BenchError> {
        let job = match &case.spec {
            Spec::Nvme(spec) => {
                if spec.target {
                    return Err(BenchError::unavailable(
                        "the SPDK driver drives whole NVMe drives, not a --target",
                    ));
                }
                if !matches!(spec.test, NvmeTest::Sweep | NvmeTest::Latency) {
                    return Err(BenchError::unavailable(format!(
                        "spdk-native does not run the {:?} test",
                        spec.test
                    )));
                }
                Job {
                    drives: &spec.drives,
                    block_bytes: spec.block_bytes,
                    queue_depth: spec.queue_depth,
                    write: case.path == PathId::NvmeWrite,
                    random: matches!(spec.pattern, NvmePattern::Random),
                    latency: spec.test == NvmeTest::Latency,
                    poller_node: None,
                    bar: None,
                }
            }
            Spec::NvmeBar(spec) => Job {
                drives: &spec.drives,
                block_bytes: spec.block_bytes,
                queue_depth: spec.queue_depth,
                write: false,
                random: false,
                latency: false,
                poller_node: Some(spec.poller_node),
                bar: (spec.memory == DmaTarget::Bar).then_some(&spec.device),
            },
            _ => {
                return Err(BenchError::failed(
                    "the spdk-native engine takes NVMe and NVMe → BAR cases",
                ))
            }
        };
        let (write, random) = (job.write, job.random);
        if self.drives.is_none() {
            let attached = self.attach();
            self.drives = Some(attached);
        }
        let drives = match self.drives.as_ref().expect("just set") {
            Ok(d) => d,
            Err(e) => {
                return Err(BenchError::unavailable(format!(
                    "the drives could not be handed to SPDK: {e}"
                )))
            }
        };
        let mut chosen = Vec::new();
        for key in job.drives {
            let d = drives.iter().find(|d| &d.bound.bdf == key).ok_or_else(|| {
                BenchError::unavailable(format!(
                    "{key} is not one of the drives handed to vfio-pci (--spdk-drives)"
                ))
            })?;
            if job.block_bytes % d.sector_bytes != 0 {
                return Err(BenchError::unavailable(format!(
                    "{key}: {} is not a whole number of its {}-byte sectors",
                    job.block_bytes, d.sector_bytes
                )));
            }
            if d.max_xfer_bytes > 0 && job.block_bytes > d.max_xfer_bytes {
                return Err(BenchError::unavailable(format!(
                    "{key}: {} KiB commands exceed its largest transfer ({} KiB, MDTS): the driver \
                     would split them",
                    job.block_bytes >> 10,
                    d.max_xfer_bytes >> 10
                )));
            }
            chosen.push(d);
        }
        // Each poller on its drive's node, or all on the case's node (NVMe → BAR).
        let nodes: Vec<Option<u32>> = chosen
            .iter()
            .map(|d| job.poller_node.unwrap_or(d.bound.numa_node))
            .collect();
        let cpus = cores_for(&nodes, &self.node_cpus);
        let qd = job.queue_depth.max(1);
        if let Some(device) = job.bar {
            if !self.bars.contains_key(&device.key()) {
                let opened = (self.bar_opener)(device);
                self.bars.insert(device.key(), opened);
            }
        }
        let memory: &mut dyn TargetMemory = match job.bar {
            None => &mut *self.memory,
            Some(device) => match self.bars.get_mut(&device.key()).expect("just opened") {
                Ok(region) => region,
                Err(e) => return Err(BenchError::unavailable(e.clone())),
            },
        };
        let mut lanes = Vec::new();
        for ((d, cpu), node) in chosen.iter().zip(cpus).zip(nodes) {
            let mut o = sys::spdk_nvme_io_qpair_opts::default();
            // SAFETY: o is a valid, sized options struct; ctrlr is attached.
            unsafe {
                sys::spdk_nvme_ctrlr_get_default_io_qpair_opts(
                    d.ctrlr,
                    &mut o,
                    std::mem::size_of::<sys::spdk_nvme_io_qpair_opts>(),
                )
            };
            // As perf: the deepest queue the controller allows (CAP.MQES is 0-based), and one
            // doorbell write per poll for the commands issued in it.
            // SAFETY: ctrlr is attached; the register is read as its raw 64 bits.
            let mqes = unsafe { sys::spdk_nvme_ctrlr_get_regs_cap(d.ctrlr).raw } & 0xffff;
            o.io_queue_size = (mqes as u32 + 1).max(2);
            if o.io_queue_size <= qd {
                return Err(BenchError::unavailable(format!(
                    "{}: queue depth {qd} does not fit its {}-entry queues",
                    d.bound.bdf, o.io_queue_size
                )));
            }
            o.io_queue_requests = o.io_queue_requests.max(2 * qd);
            o.__bindgen_anon_1.delay_cmd_submit = true;
            o.create_only = true;
            let disconnected = Box::new(std::sync::atomic::AtomicBool::new(false));
            let ctx = &*disconnected as *const std::sync::atomic::AtomicBool as *mut c_void;
            // SAFETY: ctx, the boxed flag, lives as long as the lane that owns the group.
            let group = unsafe { sys::spdk_nvme_poll_group_create(ctx, std::ptr::null_mut()) };
            if group.is_null() {
                return Err(BenchError::failed("no SPDK poll group"));
            }
            let mut lane = Lane {
                ctrlr: d.ctrlr,
                ns: d.ns,
                group,
                qpair: std::ptr::null_mut(),
                disconnected,
                buffers: Vec::new(),
                sector_bytes: d.sector_bytes,
                span_bytes: d.size_bytes - d.size_bytes % job.block_bytes,
                cpu,
                node,
                drive_node: d.bound.numa_node,
                bdf: d.bound.bdf.clone(),
            };
            // SAFETY: as above.
            lane.qpair = unsafe {
                sys::spdk_nvme_ctrlr_alloc_io_qpair(
                    d.ctrlr,
                    &o,
                    std::mem::size_of::<sys::spdk_nvme_io_qpair_opts>(),
                )
            };
            if lane.qpair.is_null() {
                return Err(BenchError::failed(format!(
                    "{}: no I/O queue pair of depth {qd}",
                    d.bound.bdf
                )));
            }
            connect(&lane).map_err(BenchError::failed)?;
            for _ in 0..qd {
                let b = memory
                    .alloc(job.block_bytes, node)
                    .map_err(BenchError::unavailable)?;
                // A fill no read leaves in place: the check after the last repetition.
                // SAFETY: b is `len` writable bytes.
                unsafe { std::ptr::write_bytes(b.ptr as *mut u8, 0xee, b.len as usize) };
                lane.buffers.push(b);
            }
            lanes.push(lane);
        }
        let bytes_per_drive = if job.latency {
            // The probes: enough commands for a steady average, not gigabytes of 4 KiB reads.
            (20_000 * job.block_bytes).min(self.bytes_per_drive)
        } else {
            self.bytes_per_drive
        };
        let bytes_per_drive = (bytes_per_drive / job.block_bytes).max(1) * job.block_bytes;
        let memory = memory.describe();
        let buffer_nodes = lanes
            .iter()
            .map(|l| {
                let b = l.buffers.first()?;
                if job.bar.is_some() {
                    return None;
                }
                hwc_numa::node_of(b.ptr as usize)
                    .ok()
                    .and_then(|n| u32::try_from(n).ok())
            })
            .collect();
        let node_cpus = self.node_cpus.clone();
        Ok(Box::new(NativeCase {
            pinned: false,
            last_blocks: Vec::new(),
            check_memory: HostRam,
            buffer_nodes,
            into_bar: job.bar.is_some(),
            node_cpus,
            _engine: self,
            lanes,
            write,
            random,
            block_bytes: job.block_bytes,
            bytes_per_drive,
            last_latency_us: None,
            memory,
        }))
    }

    fn finish(&mut self) {
        // SPDK forgets the BARs, then their mappings go.
        self.bars.clear();
        match &mut self.drives {
            Some(Ok(drives)) => detach_all(drives),
            // Never started, or the binding failed and put itself back.
            None => return,
            // Bound, then SPDK could not start or attach: the drives go back all the same.
            Some(Err(_)) => {}
        }
        if self.finished.is_none() {
            // A bind that failed has nothing to put back (None): nothing to say.
            self.finished = self.binder.finish().transpose();
        }
    }

    fn environment(&self) -> Environment {
        let mut env = Environment::new();
        if let Some(f) = &self.finished {
            env.insert(
                "spdk_native.drivers_at_end".into(),
                crate::perf::drivers_at_end(f),
            );
        }
        env
    }
}

impl Prepared for NativeCase<'_> {
    fn bytes_per_rep(&self) -> u64 {
        self.bytes_per_drive * self.lanes.len() as u64
    }

    fn run_once(&mut self) -> Result<Rep, BenchError> {
        for lane in &self.lanes {
            // Whatever the admin queue gathered since the last repetition (keep-alives are due
            // while the engine waits for its next one).
            // SAFETY: no poller runs; the controller is attached.
            let rc = unsafe { sys::spdk_nvme_ctrlr_process_admin_completions(lane.ctrlr) };
            if rc < 0 {
                return Err(BenchError::failed(format!(
                    "{}: the controller failed ({rc})",
                    lane.bdf
                )));
            }
        }
        let start = Barrier::new(self.lanes.len());
        let (write, random, block, bytes) = (
            self.write,
            self.random,
            self.block_bytes,
            self.bytes_per_drive,
        );
        let results: Vec<Result<LaneRun, String>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .lanes
                .iter()
                .map(|lane| {
                    let lane = Ptr(lane as *const Lane as *mut Lane);
                    let start = &start;
                    s.spawn(move || {
                        let lane = lane;
                        // SAFETY: the lane outlives the scope and this thread alone uses it.
                        let lane = unsafe { &*lane.0 };
                        poll_lane(lane, write, random, block, bytes, start)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a poller panicked".into())))
                .collect()
        });
        let mut first: Option<Instant> = None;
        let mut last: Option<Instant> = None;
        let (mut lat, mut n) = (0.0, 0u64);
        let mut pinned = true;
        self.last_blocks.clear();
        for r in results {
            let r = r.map_err(BenchError::failed)?;
            self.last_blocks.push(r.last_blocks);
            first = Some(first.map_or(r.first_submit, |f| f.min(r.first_submit)));
            last = Some(last.map_or(r.last_completion, |f| f.max(r.last_completion)));
            lat += r.latency_sum_s;
            n += r.commands;
            pinned &= r.pinned;
        }
        self.pinned = pinned;
        let (Some(a), Some(b)) = (first, last) else {
            return Err(BenchError::failed("no drive ran"));
        };
        self.last_latency_us = (n > 0).then(|| lat / n as f64 * 1e6);
        Ok(Rep {
            seconds: (b - a).as_secs_f64(),
            wall_seconds: None,
        })
    }

    /// Every command's status was checked as it completed. Reads: each lane's first buffer
    /// holds, byte for byte, the block it read last, as a fresh read of that block into host
    /// RAM gives it (DMA that never landed, or landed elsewhere, differs).
    fn verify(&mut self) -> Result<(), BenchError> {
        if self.write {
            return Ok(());
        }
        for (lane, blocks) in self.lanes.iter().zip(&self.last_blocks) {
            let (Some(buffer), Some(Some(block))) = (lane.buffers.first(), blocks.first()) else {
                return Err(BenchError::failed(format!(
                    "{}: no read landed before the check",
                    lane.bdf
                )));
            };
            let fresh = self
                .check_memory
                .alloc(buffer.len, lane.node)
                .map_err(BenchError::failed)?;
            read_block(lane, *block, self.block_bytes, fresh.ptr).map_err(BenchError::failed)?;
            // SAFETY: both are `len` readable bytes with no command in flight (a BAR's mapping
            // is read by the CPU, slowly, once per case).
            let (got, want) = unsafe {
                (
                    std::slice::from_raw_parts(buffer.ptr as *const u8, buffer.len as usize),
                    std::slice::from_raw_parts(fresh.ptr as *const u8, fresh.len as usize),
                )
            };
            if got != want {
                return Err(BenchError::failed(format!(
                    "{}: the block at byte {} in {} differs from a fresh read of it: the data \
                     did not arrive",
                    lane.bdf,
                    block * self.block_bytes,
                    self.memory
                )));
            }
        }
        Ok(())
    }

    fn placement(&self) -> Option<Placement> {
        Some(Placement {
            cpus: Some(
                self.lanes
                    .iter()
                    .map(|l| l.cpu.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            // Each poller ran on its CPU, and that CPU is on its node (the drive's, or the
            // case's).
            // Each poller ran on its CPU, that CPU is on its node, and host-RAM buffers are there.
            verified: self.pinned
                && self.lanes.iter().zip(&self.buffer_nodes).all(|(l, b)| {
                    l.node.is_none_or(|n| {
                        self.node_cpus.get(&n).is_some_and(|c| c.contains(&l.cpu))
                            && (self.into_bar || *b == Some(n))
                    })
                }),
            detail: self
                .lanes
                .iter()
                .zip(&self.buffer_nodes)
                .map(|(l, b)| {
                    let at = |n: Option<u32>| n.map_or("?".into(), |n| n.to_string());
                    let cpu_node = self
                        .node_cpus
                        .iter()
                        .find(|(_, c)| c.contains(&l.cpu))
                        .map(|(n, _)| *n);
                    format!(
                        "{} (node {}) polled from CPU {} (node {}){}{}{}",
                        l.bdf,
                        at(l.drive_node),
                        l.cpu,
                        at(cpu_node),
                        if self.into_bar {
                            String::new()
                        } else {
                            format!(", buffers on node {}", at(*b))
                        },
                        match l.node {
                            Some(n) if cpu_node != Some(n) => {
                                format!(", not node {n}: it has too few CPUs")
                            }
                            _ => String::new(),
                        },
                        if self.pinned { "" } else { " (not pinned)" }
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
        })
    }

    fn last_latency_us(&self) -> Option<f64> {
        self.last_latency_us
    }

    fn notes(&self) -> Vec<String> {
        vec![format!(
            "SPDK NVMe driver, one pinned poller and queue pair per drive, QD {} of {} KiB \
             commands into {}; {} MiB per drive per repetition",
            self.lanes.first().map_or(0, |l| l.buffers.len()),
            self.block_bytes >> 10,
            self.memory,
            self.bytes_per_drive >> 20
        )]
    }
}
