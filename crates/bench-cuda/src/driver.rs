//! Owners of the driver resources a copy case uses, on top of cudarc's context, streams and
//! events: device memory from `cuMemAlloc`, NUMA-placed host memory registered with
//! `cuMemHostRegister`, the host-mapped latch flag and the latch kernel.
//!
//! Every raw call runs with the owning context bound to the calling thread.

use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext, CudaStream};
use hwc_numa::{NumaBuffer, Pages, PlacementCheck};

use crate::error::{driver, CudaError};
use crate::params::HostMemory;

/// Bytes moved per step when filling or reading back device memory through a staging buffer.
pub const STAGING_BYTES: usize = 64 << 20;

fn bind(ctx: &CudaContext) -> Result<(), CudaError> {
    ctx.bind_to_thread().map_err(driver("cuCtxSetCurrent"))
}

/// Device memory from `cuMemAlloc` (not a stream-ordered pool), freed on drop.
pub struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    len: usize,
    ctx: Arc<CudaContext>,
}

impl DeviceBuffer {
    pub fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<Self, CudaError> {
        bind(ctx)?;
        // SAFETY: plain allocation in the bound context; the pointer is owned by the value.
        let ptr = unsafe { result::malloc_sync(len.max(1)) }.map_err(driver("cuMemAlloc"))?;
        Ok(DeviceBuffer {
            ptr,
            len,
            ctx: ctx.clone(),
        })
    }

    pub fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `Ok` when `[offset, offset + len)` lies inside the buffer.
    pub fn check_range(&self, offset: usize, len: usize) -> Result<(), CudaError> {
        check_range(offset, len, self.len)
    }

    /// Set the first `len` bytes to `value` (synchronous).
    pub fn fill_prefix(&self, len: usize, value: u8) -> Result<(), CudaError> {
        self.check_range(0, len)?;
        bind(&self.ctx)?;
        // SAFETY: ptr..ptr+len is inside this allocation (checked above).
        unsafe { result::memset_d8_sync(self.ptr, value, len) }.map_err(driver("cuMemsetD8"))
    }

    /// Write bytes produced by `make(chunk, offset)` over `[offset, offset + len)` through a
    /// pageable staging buffer (synchronous; outside any timed region).
    pub fn write_range(
        &self,
        offset: usize,
        len: usize,
        mut make: impl FnMut(&mut [u8], usize),
    ) -> Result<(), CudaError> {
        self.check_range(offset, len)?;
        bind(&self.ctx)?;
        let end = offset + len;
        let mut staging = vec![0u8; STAGING_BYTES.min(end.saturating_sub(offset))];
        let mut at = offset;
        while at < end {
            let n = STAGING_BYTES.min(end - at);
            make(&mut staging[..n], at);
            // SAFETY: at + n <= end <= self.len (check_range above): inside this allocation.
            unsafe { result::memcpy_htod_sync(self.ptr + at as u64, &staging[..n]) }
                .map_err(driver("cuMemcpyHtoD"))?;
            at += n;
        }
        Ok(())
    }

    /// Read `[offset, offset + len)` back through `staging` (pinned host memory reads back at
    /// the link's rate, a fresh pageable vector at a fifth of it after faulting every page in),
    /// in pieces of its size, and hand each to `inspect` with its offset; stops at the first
    /// piece `inspect` rejects (synchronous).
    pub fn read_with<E>(
        &self,
        offset: usize,
        len: usize,
        staging: &mut [u8],
        mut inspect: impl FnMut(&[u8], usize) -> Result<(), E>,
    ) -> Result<Result<(), E>, CudaError> {
        self.check_range(offset, len)?;
        if staging.is_empty() && len > 0 {
            return Err(CudaError::NoStaging);
        }
        bind(&self.ctx)?;
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let n = staging.len().min(end - at);
            // SAFETY: at + n <= end <= self.len (check_range above): inside this allocation.
            unsafe { result::memcpy_dtoh_sync(&mut staging[..n], self.ptr + at as u64) }
                .map_err(driver("cuMemcpyDtoH"))?;
            if let Err(e) = inspect(&staging[..n], at) {
                return Ok(Err(e));
            }
            at += n;
        }
        Ok(Ok(()))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if bind(&self.ctx).is_ok() {
            // SAFETY: ptr came from cuMemAlloc and is freed once; the owner synchronised the
            // streams that used it before dropping it.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// `Ok` when `[offset, offset + len)` lies inside a buffer of `capacity` bytes.
pub(crate) fn check_range(offset: usize, len: usize, capacity: usize) -> Result<(), CudaError> {
    match offset.checked_add(len) {
        Some(end) if end <= capacity => Ok(()),
        end => Err(CudaError::OutOfRange {
            offset,
            end: end.unwrap_or(usize::MAX),
            capacity,
        }),
    }
}

/// A page-aligned host buffer, pre-faulted and optionally bound to a NUMA node
/// (`hwc_numa::NumaBuffer`), registered with the driver when pinned.
pub struct HostBuffer {
    buf: NumaBuffer,
    /// The context the buffer is registered with, when pinned.
    registered: Option<Arc<CudaContext>>,
}

impl HostBuffer {
    pub fn new(
        ctx: &Arc<CudaContext>,
        len: usize,
        node: Option<u32>,
        memory: HostMemory,
        pages: Pages,
    ) -> Result<Self, CudaError> {
        let buf = NumaBuffer::with_pages(len, node, pages)?;
        let mut host = HostBuffer {
            buf,
            registered: None,
        };
        if memory == HostMemory::Pinned {
            bind(ctx)?;
            // SAFETY: the range is our live mapping of buf.len() bytes; it stays mapped until
            // Drop unregisters it first. PORTABLE: pinned for every context, not write-combined.
            unsafe {
                sys::cuMemHostRegister_v2(
                    host.buf.as_mut_ptr().cast::<c_void>(),
                    host.buf.len(),
                    sys::CU_MEMHOSTREGISTER_PORTABLE,
                )
            }
            .result()
            .map_err(driver("cuMemHostRegister"))?;
            host.registered = Some(ctx.clone());
        }
        Ok(host)
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.buf.len() == 0
    }
    pub fn as_ptr(&self) -> *const c_void {
        self.buf.as_ptr().cast()
    }
    pub fn as_mut_ptr(&mut self) -> *mut c_void {
        self.buf.as_mut_ptr().cast()
    }
    pub fn as_slice(&self) -> &[u8] {
        self.buf.as_slice()
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.buf.as_mut_slice()
    }
    /// `Ok` when `[offset, offset + len)` lies inside the buffer.
    pub fn check_range(&self, offset: usize, len: usize) -> Result<(), CudaError> {
        check_range(offset, len, self.len())
    }
    pub fn placement(&self) -> &PlacementCheck {
        self.buf.placement()
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if let Some(ctx) = self.registered.take() {
            if bind(&ctx).is_ok() {
                // SAFETY: the range was registered in new(); no copy uses it any more (the owner
                // synchronised its streams); the mapping is unmapped only after this.
                let _ = unsafe { sys::cuMemHostUnregister(self.buf.as_mut_ptr().cast()) };
            }
        }
    }
}

/// Two words of host memory mapped into the device: word 0 is the latch (the host sets it to
/// release the spin kernel), word 1 is set by the kernel when it gave up waiting.
pub struct LatchFlag {
    host: *mut c_void,
    device: sys::CUdeviceptr,
    ctx: Arc<CudaContext>,
}

impl LatchFlag {
    const BYTES: usize = 64;

    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self, CudaError> {
        bind(ctx)?;
        // SAFETY: a fresh page-locked, device-mapped allocation; freed in Drop.
        let host = unsafe {
            result::malloc_host(
                Self::BYTES,
                sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP,
            )
        }
        .map_err(driver("cuMemHostAlloc"))?;
        let mut flag = LatchFlag {
            host,
            device: 0,
            ctx: ctx.clone(),
        };
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: host was allocated with DEVICEMAP in this context; device is a valid out-ptr.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, flag.host, 0) }
            .result()
            .map_err(driver("cuMemHostGetDevicePointer"))?;
        flag.device = device;
        flag.reset();
        Ok(flag)
    }

    fn word(&self, index: usize) -> &AtomicU32 {
        debug_assert!(index < 2);
        // SAFETY: host is page-aligned, at least 8 bytes, and lives as long as self; the device
        // side only ever reads word 0 and writes word 1 with plain 32-bit accesses.
        unsafe { &*self.host.cast::<AtomicU32>().add(index) }
    }

    /// Close the latch and clear the timeout mark (before a latch kernel is queued).
    pub fn reset(&self) {
        self.word(0).store(0, Ordering::SeqCst);
        self.word(1).store(0, Ordering::SeqCst);
    }

    /// Open the latch: the spin kernel sees it on its next poll.
    pub fn release(&self) {
        self.word(0).store(1, Ordering::SeqCst);
    }

    /// True when the last latch kernel stopped on its timeout instead of the release.
    pub fn timed_out(&self) -> bool {
        self.word(1).load(Ordering::SeqCst) != 0
    }

    pub fn device_ptr(&self) -> sys::CUdeviceptr {
        self.device
    }
}

impl Drop for LatchFlag {
    fn drop(&mut self) {
        if bind(&self.ctx).is_ok() {
            // SAFETY: host came from cuMemHostAlloc and is freed once; no kernel polls it now
            // (every user synchronises its streams first).
            let _ = unsafe { result::free_host(self.host) };
        }
    }
}

/// The latch: one thread spins on the host-mapped flag, reading it with volatile loads, until
/// the host sets it or `timeout_ns` of `%globaltimer` pass (then it marks word 1). Written in
/// PTX so no compiler is needed at build or run time; the driver JIT-compiles it once per
/// context for whatever GPU is present.
const LATCH_PTX: &str = r#"
.version 6.0
.target sm_50
.address_size 64

.visible .entry hwc_latch(
    .param .u64 hwc_latch_flag,
    .param .u64 hwc_latch_timeout_ns
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<7>;

    ld.param.u64 %rd1, [hwc_latch_flag];
    ld.param.u64 %rd2, [hwc_latch_timeout_ns];
    cvta.to.global.u64 %rd3, %rd1;
    mov.u64 %rd4, %globaltimer;
    add.u64 %rd5, %rd4, %rd2;
$L_spin:
    ld.volatile.global.u32 %r1, [%rd3];
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_done;
    mov.u64 %rd6, %globaltimer;
    setp.lt.u64 %p2, %rd6, %rd5;
    @%p2 bra $L_spin;
    mov.u32 %r2, 1;
    st.volatile.global.u32 [%rd3+4], %r2;
$L_done:
    ret;
}
"#;

/// The latch kernel, loaded from PTX (`cuModuleLoadData`).
pub struct Latch {
    module: sys::CUmodule,
    function: sys::CUfunction,
    ctx: Arc<CudaContext>,
}

impl Latch {
    pub fn load(ctx: &Arc<CudaContext>) -> Result<Self, CudaError> {
        bind(ctx)?;
        let ptx = CString::new(LATCH_PTX).map_err(|_| CudaError::Driver {
            call: "cuModuleLoadData",
            code: "PTX text holds a NUL byte".into(),
        })?;
        // SAFETY: ptx is a NUL-terminated PTX image that outlives the call.
        let module = unsafe { result::module::load_data(ptx.as_ptr().cast()) }
            .map_err(driver("cuModuleLoadData"))?;
        let mut latch = Latch {
            module,
            function: std::ptr::null_mut(),
            ctx: ctx.clone(),
        };
        let name = CString::new("hwc_latch").map_err(|_| CudaError::Driver {
            call: "cuModuleGetFunction",
            code: "kernel name holds a NUL byte".into(),
        })?;
        // SAFETY: module was loaded above and is unloaded only in Drop.
        latch.function = unsafe { result::module::get_function(latch.module, name) }
            .map_err(driver("cuModuleGetFunction"))?;
        Ok(latch)
    }

    /// Queue the spin kernel on `stream`: everything queued after it waits for `flag`.
    pub fn launch(
        &self,
        stream: &CudaStream,
        flag: &LatchFlag,
        timeout_ns: u64,
    ) -> Result<(), CudaError> {
        bind(&self.ctx)?;
        let mut flag_ptr = flag.device_ptr();
        let mut timeout = timeout_ns;
        let mut args = [
            (&mut flag_ptr as *mut sys::CUdeviceptr).cast::<c_void>(),
            (&mut timeout as *mut u64).cast::<c_void>(),
        ];
        // SAFETY: function belongs to this context's live module; the kernel takes exactly two
        // u64 parameters, which the driver copies at launch; the flag outlives the kernel
        // because its owner synchronises the stream before dropping it.
        unsafe {
            result::launch_kernel(
                self.function,
                (1, 1, 1),
                (1, 1, 1),
                0,
                stream.cu_stream(),
                &mut args,
            )
        }
        .map_err(driver("cuLaunchKernel"))
    }
}

impl Drop for Latch {
    fn drop(&mut self) {
        if bind(&self.ctx).is_ok() {
            // SAFETY: the module is unloaded once; no launch of it is pending (owners
            // synchronise their streams first).
            let _ = unsafe { result::module::unload(self.module) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_fits_only_inside_its_buffer() {
        assert!(check_range(0, 10, 10).is_ok());
        assert!(check_range(10, 0, 10).is_ok());
        assert!(matches!(
            check_range(1, 10, 10),
            Err(CudaError::OutOfRange {
                offset: 1,
                end: 11,
                capacity: 10
            })
        ));
        // An end past usize::MAX is out of range, not a wrap to a small number.
        assert!(matches!(
            check_range(usize::MAX, 2, 10),
            Err(CudaError::OutOfRange {
                end: usize::MAX,
                ..
            })
        ));
    }
}
