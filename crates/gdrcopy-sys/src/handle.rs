//! The handles: an open library state ([`Gdr`]), a pinned GPU buffer ([`Pinned`]) and its
//! CPU mapping ([`Mapping`]), each borrowing the one before, so they drop in the order
//! libgdrapi asks for: unmap, then unpin, then close.

use crate::ffi::{
    GdrMh, GdrT, RawInfo, GDR_MAPPING_TYPE_CACHING, GDR_MAPPING_TYPE_DEVICE, GDR_MAPPING_TYPE_NONE,
    GDR_MAPPING_TYPE_WC,
};
use crate::load::{Gdrapi, InfoCall};
use std::ffi::{c_int, c_ulong, c_void};
use std::fmt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

/// Where the gdrdrv node is looked for by [`Gdrapi::open`].
pub const DEFAULT_DEV_DIR: &str = "/dev";

/// How to get the kernel module and the library, for messages.
pub const DRIVER_INSTALL_HINT: &str = "build and load it from https://github.com/NVIDIA/gdrcopy \
     (`make driver && sudo ./insmod.sh`), user library via `make lib lib_install`";

/// Why [`Gdrapi::open`] failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The gdrdrv node is absent: the kernel module is not loaded (or its node not made).
    #[error(
        "the gdrdrv kernel module is not loaded (`{}` absent): {DRIVER_INSTALL_HINT}",
        node.display()
    )]
    NoGdrdrv { node: PathBuf },
    /// The node is there but `gdr_open` returned NULL.
    #[error("gdr_open failed although `{}` exists: {reason}", node.display())]
    OpenFailed { node: PathBuf, reason: String },
}

/// Why a call on a handle failed.
#[derive(Debug, thiserror::Error)]
pub enum GdrError {
    /// libgdrapi returned a non-zero code (an errno value).
    #[error("{call} failed: {} (code {code})", std::io::Error::from_raw_os_error(code.wrapping_abs()))]
    Call { call: &'static str, code: i32 },
    /// A range outside the mapping, refused before calling.
    #[error(
        "{call}: {len_bytes} bytes at offset {offset_bytes} run past the {mapping_bytes}-byte mapping"
    )]
    OutOfBounds {
        call: &'static str,
        offset_bytes: usize,
        len_bytes: usize,
        mapping_bytes: usize,
    },
    /// A length or address this platform's C types cannot carry, or a zero length.
    #[error("{call}: {what}")]
    Invalid { call: &'static str, what: String },
}

/// Results of calls on handles.
pub type Result<T, E = GdrError> = std::result::Result<T, E>;

fn check(call: &'static str, code: c_int) -> Result<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(GdrError::Call { call, code })
    }
}

/// `gdr_mapping_type_t`: how the CPU mapping reaches GPU memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MappingType {
    /// `GDR_MAPPING_TYPE_NONE`: not mapped.
    None,
    /// `GDR_MAPPING_TYPE_WC`: write-combining (BAR1 over PCIe, the usual case).
    WriteCombining,
    /// `GDR_MAPPING_TYPE_CACHING`: cached (coherent platforms).
    Caching,
    /// `GDR_MAPPING_TYPE_DEVICE`: device (uncached) memory.
    Device,
    /// A value this crate does not know (a newer library's).
    Unknown(i32),
}

impl MappingType {
    /// The C value decoded.
    pub const fn from_raw(raw: i32) -> MappingType {
        match raw {
            GDR_MAPPING_TYPE_NONE => MappingType::None,
            GDR_MAPPING_TYPE_WC => MappingType::WriteCombining,
            GDR_MAPPING_TYPE_CACHING => MappingType::Caching,
            GDR_MAPPING_TYPE_DEVICE => MappingType::Device,
            other => MappingType::Unknown(other),
        }
    }

    /// The C value.
    pub const fn as_raw(self) -> i32 {
        match self {
            MappingType::None => GDR_MAPPING_TYPE_NONE,
            MappingType::WriteCombining => GDR_MAPPING_TYPE_WC,
            MappingType::Caching => GDR_MAPPING_TYPE_CACHING,
            MappingType::Device => GDR_MAPPING_TYPE_DEVICE,
            MappingType::Unknown(raw) => raw,
        }
    }

    /// What a 2.0–2.3 info (no `mapping_type`) implies, as libgdrapi 2.4+ itself derives it
    /// for an old gdrdrv: mapped and write-combining is WC, mapped otherwise is caching.
    pub const fn from_v1_flags(mapped: bool, wc_mapping: bool) -> MappingType {
        match (mapped, wc_mapping) {
            (false, _) => MappingType::None,
            (true, true) => MappingType::WriteCombining,
            (true, false) => MappingType::Caching,
        }
    }

    /// Whether this is a mapping at all.
    pub const fn is_mapped(self) -> bool {
        !matches!(self, MappingType::None)
    }
}

impl fmt::Display for MappingType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // gdr_get_mapping_type_string's words.
        match self {
            MappingType::None => f.write_str("None"),
            MappingType::WriteCombining => f.write_str("Write Combining"),
            MappingType::Caching => f.write_str("Caching"),
            MappingType::Device => f.write_str("Device"),
            MappingType::Unknown(raw) => write!(f, "unknown mapping type {raw}"),
        }
    }
}

/// `gdr_info_v2_t` without the deprecated timing fields: the pinned region as gdrdrv sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Info {
    /// The pinned region's GPU virtual address (the pinned address rounded down to a GPU page).
    pub va: u64,
    /// The pinned region's length.
    pub mapped_size_bytes: u64,
    /// The GPU page size gdrdrv pinned with.
    pub page_size_bytes: u32,
    /// Whether a CPU mapping exists.
    pub mapped: bool,
    /// Whether that mapping is write-combining.
    pub wc_mapping: bool,
    /// The mapping's type (derived from the two flags with a 2.0–2.3 library).
    pub mapping_type: MappingType,
}

impl Info {
    fn decode(raw: &RawInfo, call: InfoCall) -> Info {
        let (mapped, wc_mapping) = (raw.mapped(), raw.wc_mapping());
        Info {
            va: raw.va,
            mapped_size_bytes: raw.mapped_size,
            page_size_bytes: raw.page_size,
            mapped,
            wc_mapping,
            mapping_type: match call {
                InfoCall::V2 => MappingType::from_raw(raw.mapping_type),
                InfoCall::V1 => MappingType::from_v1_flags(mapped, wc_mapping),
            },
        }
    }

    /// Where GPU address `addr` lies from the start of the pinned region (and so from a
    /// [`Mapping`]'s pointer), if inside it.
    pub fn offset_bytes_of(&self, addr: u64) -> Option<u64> {
        let off = addr.checked_sub(self.va)?;
        (off < self.mapped_size_bytes).then_some(off)
    }
}

/// The gdrdrv node under `dev_dir`, if it exists; [`OpenError::NoGdrdrv`] naming it otherwise.
pub fn check_gdrdrv(dev_dir: &Path) -> Result<PathBuf, OpenError> {
    let node = dev_dir.join("gdrdrv");
    // symlink_metadata: a dangling link is "there" too, and gdr_open will say why it fails.
    if node.symlink_metadata().is_ok() {
        Ok(node)
    } else {
        Err(OpenError::NoGdrdrv { node })
    }
}

/// Why gdr_open would fail on a node that exists: not a character device (a stale or
/// hand-made node), the node refusing a read-write open (its mode), or else the version
/// handshake.
fn diagnose_open_failure(node: &Path, runtime: (i32, i32)) -> String {
    use std::os::unix::fs::FileTypeExt;
    let char_device = std::fs::metadata(node).is_ok_and(|m| m.file_type().is_char_device());
    if !char_device {
        return "it is not a character device (a stale or hand-made node): reload gdrdrv \
                with gdrcopy's `sudo ./insmod.sh`, which recreates it"
            .into();
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(node)
    {
        Err(e) => format!(
            "it cannot be opened read-write ({e}); insmod.sh makes it mode 0666 \
             (`sudo chmod a+rw {}`)",
            node.display()
        ),
        Ok(_) => format!(
            "gdrdrv refused libgdrapi {}.{} (a gdrdrv older than 2.0, or one that needs a newer \
             libgdrapi); rerun with GDRCOPY_ENABLE_LOGGING=1 for libgdrapi's reason",
            runtime.0, runtime.1
        ),
    }
}

impl Gdrapi {
    /// `gdr_open`, after checking that `/dev/gdrdrv` exists (so its absence is named
    /// exactly). See [`Self::open_in`].
    pub fn open(&self) -> Result<Gdr<'_>, OpenError> {
        self.open_in(Path::new(DEFAULT_DEV_DIR))
    }

    /// `gdr_open`, after checking that `dev_dir/gdrdrv` exists; without it, `gdr_open` is not
    /// called. libgdrapi itself always opens `/dev/gdrdrv`: `dev_dir` only moves the check
    /// (tests). (GDRCopy 2.6's fallback to the CUDA driver's dma-buf mmap, used when gdrdrv
    /// is absent, is deliberately not reached: this crate is for the gdrdrv path.)
    pub fn open_in(&self, dev_dir: &Path) -> Result<Gdr<'_>, OpenError> {
        let node = check_gdrdrv(dev_dir)?;
        // SAFETY: no arguments; returns a heap state object or NULL.
        let g = unsafe { (self.fns.open)() };
        match NonNull::new(g) {
            Some(g) => Ok(Gdr { api: self, g }),
            None => Err(OpenError::OpenFailed {
                reason: diagnose_open_failure(&node, self.runtime_version()),
                node,
            }),
        }
    }
}

/// An open libgdrapi state (`gdr_t`): a connection to gdrdrv. Closed on drop.
///
/// libgdrapi is not thread-safe: a `Gdr` may move to another thread but is not shared
/// (`!Sync`), and so neither are its [`Pinned`] buffers and [`Mapping`]s. Its process-wide
/// state is the CPU feature flags each `gdr_open` sets (to the same values every time) and
/// per-type mapping counters kept only for its log, so separate `Gdr`s on separate threads
/// do not disturb one another.
pub struct Gdr<'a> {
    api: &'a Gdrapi,
    g: NonNull<c_void>,
}

// SAFETY: a gdr_t is a heap object holding a file descriptor and a list of handles, with no
// tie to the thread that opened it; `Gdr` is not `Sync`, so calls on it are never concurrent
// (libgdrapi is not thread-safe).
unsafe impl Send for Gdr<'_> {}

impl fmt::Debug for Gdr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gdr").field("g", &self.g).finish()
    }
}

impl<'a> Gdr<'a> {
    fn raw(&self) -> GdrT {
        self.g.as_ptr()
    }

    /// The library this state came from.
    pub fn api(&self) -> &'a Gdrapi {
        self.api
    }

    /// `gdr_driver_get_version`: gdrdrv's (major, minor).
    pub fn driver_version(&self) -> Result<(i32, i32)> {
        let (mut major, mut minor): (c_int, c_int) = (-1, -1);
        // SAFETY: `self.g` is an open gdr_t; the out-pointers are locals outliving the call.
        let code = unsafe { (self.api.fns.driver_get_version)(self.raw(), &mut major, &mut minor) };
        check("gdr_driver_get_version", code)?;
        Ok((major, minor))
    }

    /// `gdr_pin_buffer` with p2p_token 0 and va_space 0: pin `len_bytes` of GPU memory from
    /// device address `addr` (a `CUdeviceptr`). gdrdrv pins the whole GPU pages around it
    /// ([`crate::gpu_page_span`], [`Pinned::info`]).
    pub fn pin(&self, addr: u64, len_bytes: u64) -> Result<Pinned<'_>> {
        const CALL: &str = "gdr_pin_buffer";
        if len_bytes == 0 {
            return Err(GdrError::Invalid {
                call: CALL,
                what: "cannot pin 0 bytes".into(),
            });
        }
        let addr_c = c_ulong::try_from(addr).map_err(|_| GdrError::Invalid {
            call: CALL,
            what: format!("address {addr:#x} does not fit an unsigned long"),
        })?;
        let len_c = usize::try_from(len_bytes).map_err(|_| GdrError::Invalid {
            call: CALL,
            what: format!("{len_bytes} bytes do not fit a size_t"),
        })?;
        let mut mh = GdrMh { h: 0 };
        // SAFETY: `self.g` is an open gdr_t; `mh` is a local out-parameter outliving the call.
        // gdrdrv checks the range itself (a bad address is an error code, not a fault).
        let code = unsafe { (self.api.fns.pin_buffer)(self.raw(), addr_c, len_c, 0, 0, &mut mh) };
        check(CALL, code)?;
        Ok(Pinned {
            gdr: self,
            mh,
            addr,
            len_bytes,
        })
    }

    /// `gdr_close` now, with its result (drop does the same and ignores it).
    pub fn close(self) -> Result<()> {
        let r = self.close_inner();
        std::mem::forget(self);
        r
    }

    fn close_inner(&self) -> Result<()> {
        // SAFETY: `self.g` is an open gdr_t, closed exactly once (here, from `close` or
        // `drop`); every `Pinned` borrowing it has been dropped, so no handle is used after.
        check("gdr_close", unsafe { (self.api.fns.close)(self.raw()) })
    }
}

impl Drop for Gdr<'_> {
    fn drop(&mut self) {
        let _ = self.close_inner();
    }
}

/// A pinned GPU buffer (`gdr_mh_t`). Unpinned on drop.
pub struct Pinned<'g> {
    gdr: &'g Gdr<'g>,
    mh: GdrMh,
    addr: u64,
    len_bytes: u64,
}

impl fmt::Debug for Pinned<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pinned")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len_bytes", &self.len_bytes)
            .finish_non_exhaustive()
    }
}

impl<'g> Pinned<'g> {
    /// The device address pinned, as given.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// The length pinned, as given.
    pub fn len_bytes(&self) -> u64 {
        self.len_bytes
    }

    /// `gdr_get_info_v2` (or 2.0–2.3's `gdr_get_info`): the pinned region and its mapping.
    pub fn info(&self) -> Result<Info> {
        let api = self.gdr.api;
        let mut raw = RawInfo::default();
        // SAFETY: the gdr_t is open and `mh` pinned on it; `raw` is a local of the v2 layout,
        // which a v1 call fills a 40-byte prefix of.
        let code = unsafe { (api.fns.get_info)(self.gdr.raw(), self.mh, &mut raw) };
        check(api.info_symbol(), code)?;
        Ok(Info::decode(&raw, api.info_call))
    }

    /// `gdr_map`: map `len_bytes` of the pinned region into this process (from its start,
    /// [`Info::va`], not from [`Self::addr`]); at most [`Info::mapped_size_bytes`]. One
    /// mapping at a time per pinned buffer (a second is refused with EAGAIN).
    pub fn map(&self, len_bytes: usize) -> Result<Mapping<'_>> {
        if len_bytes == 0 {
            return Err(GdrError::Invalid {
                call: "gdr_map",
                what: "cannot map 0 bytes".into(),
            });
        }
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: the gdr_t is open and `mh` pinned on it; `ptr` is a local out-parameter.
        // libgdrapi mmaps the region itself and returns the address through `ptr`.
        let code = unsafe { (self.gdr.api.fns.map)(self.gdr.raw(), self.mh, &mut ptr, len_bytes) };
        check("gdr_map", code)?;
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or_else(|| GdrError::Invalid {
            call: "gdr_map",
            what: "returned 0 but a NULL mapping".into(),
        })?;
        Ok(Mapping {
            pinned: self,
            core: MapCore { ptr, len_bytes },
        })
    }

    /// Map `len_bytes` of the buffer and keep the pin and the mapping together (see
    /// [`Mapped`]).
    pub fn into_mapped(self, len_bytes: usize) -> Result<Mapped<'g>> {
        let core = {
            let m = self.map(len_bytes)?;
            let core = MapCore {
                ptr: m.core.ptr,
                len_bytes: m.core.len_bytes,
            };
            // Ownership of the mapping moves to the `Mapped`, which unmaps it.
            std::mem::forget(m);
            core
        };
        Ok(Mapped { core, pinned: self })
    }

    /// `gdr_unpin_buffer` now, with its result (drop does the same and ignores it).
    pub fn unpin(self) -> Result<()> {
        let r = self.unpin_inner();
        std::mem::forget(self);
        r
    }

    fn unpin_inner(&self) -> Result<()> {
        // SAFETY: `mh` was pinned on this open gdr_t and is unpinned exactly once; every
        // `Mapping` of it borrowed `self` and has been dropped (unmapped) before.
        check("gdr_unpin_buffer", unsafe {
            (self.gdr.api.fns.unpin_buffer)(self.gdr.raw(), self.mh)
        })
    }
}

impl Drop for Pinned<'_> {
    fn drop(&mut self) {
        let _ = self.unpin_inner();
    }
}

/// A CPU mapping of a pinned buffer: `len_bytes` of GPU memory from [`Info::va`], at
/// [`Self::as_ptr`]. Unmapped on drop.
pub struct Mapping<'p> {
    pinned: &'p Pinned<'p>,
    core: MapCore,
}

/// A pinned buffer and its CPU mapping in one value, borrowing only the [`Gdr`]
/// ([`Pinned::into_mapped`]): for holders that cannot keep a [`Pinned`] and a [`Mapping`] of it
/// side by side. Drop unmaps, then unpins.
pub struct Mapped<'g> {
    core: MapCore,
    pinned: Pinned<'g>,
}

/// What `gdr_map` returned.
struct MapCore {
    ptr: NonNull<u8>,
    len_bytes: usize,
}

impl fmt::Debug for Mapping<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mapping")
            .field("ptr", &self.core.ptr)
            .field("len_bytes", &self.core.len_bytes)
            .finish_non_exhaustive()
    }
}

impl MapCore {
    fn range(&self, call: &'static str, offset_bytes: usize, len_bytes: usize) -> Result<()> {
        match offset_bytes.checked_add(len_bytes) {
            Some(end) if end <= self.len_bytes => Ok(()),
            _ => Err(GdrError::OutOfBounds {
                call,
                offset_bytes,
                len_bytes,
                mapping_bytes: self.len_bytes,
            }),
        }
    }

    fn copy_to(&self, pinned: &Pinned<'_>, src: &[u8], offset_bytes: usize) -> Result<()> {
        const CALL: &str = "gdr_copy_to_mapping";
        self.range(CALL, offset_bytes, src.len())?;
        // SAFETY: `[offset_bytes, + src.len())` lies inside the live mapping (checked above),
        // so the destination pointer is in bounds; `src` is a live host slice of that length;
        // the two cannot overlap (one is device memory mapped by gdrdrv).
        let code = unsafe {
            (pinned.gdr.api.fns.copy_to_mapping)(
                pinned.mh,
                self.ptr.as_ptr().add(offset_bytes).cast(),
                src.as_ptr().cast(),
                src.len(),
            )
        };
        check(CALL, code)
    }

    fn copy_from(&self, pinned: &Pinned<'_>, dst: &mut [u8], offset_bytes: usize) -> Result<()> {
        const CALL: &str = "gdr_copy_from_mapping";
        self.range(CALL, offset_bytes, dst.len())?;
        // SAFETY: as in `copy_to`, with `dst` a live, exclusively borrowed host slice.
        let code = unsafe {
            (pinned.gdr.api.fns.copy_from_mapping)(
                pinned.mh,
                dst.as_mut_ptr().cast(),
                self.ptr.as_ptr().add(offset_bytes).cast_const().cast(),
                dst.len(),
            )
        };
        check(CALL, code)
    }

    fn unmap(&self, pinned: &Pinned<'_>) -> Result<()> {
        // SAFETY: `ptr`/`len_bytes` are what gdr_map returned and was given for this handle,
        // unmapped exactly once (by the one owner of this core); no reference into the
        // mapping outlives that owner.
        check("gdr_unmap", unsafe {
            (pinned.gdr.api.fns.unmap)(
                pinned.gdr.raw(),
                pinned.mh,
                self.ptr.as_ptr().cast(),
                self.len_bytes,
            )
        })
    }
}

impl Mapping<'_> {
    /// The CPU address of the pinned region's start. Reads and writes through it reach GPU
    /// memory (write-combined, usually): prefer [`Self::copy_to`]/[`Self::copy_from`], which
    /// use libgdrapi's tuned copies.
    pub fn as_ptr(&self) -> *mut u8 {
        self.core.ptr.as_ptr()
    }

    /// The mapped length.
    pub fn len_bytes(&self) -> usize {
        self.core.len_bytes
    }

    /// `gdr_copy_to_mapping`: write `src` into GPU memory at `offset_bytes` into the mapping.
    pub fn copy_to(&self, src: &[u8], offset_bytes: usize) -> Result<()> {
        self.core.copy_to(self.pinned, src, offset_bytes)
    }

    /// `gdr_copy_from_mapping`: read GPU memory at `offset_bytes` into the mapping into `dst`.
    pub fn copy_from(&self, dst: &mut [u8], offset_bytes: usize) -> Result<()> {
        self.core.copy_from(self.pinned, dst, offset_bytes)
    }

    /// `gdr_unmap` now, with its result (drop does the same and ignores it).
    pub fn unmap(self) -> Result<()> {
        let r = self.core.unmap(self.pinned);
        std::mem::forget(self);
        r
    }
}

impl Drop for Mapping<'_> {
    fn drop(&mut self) {
        let _ = self.core.unmap(self.pinned);
    }
}

impl<'g> Mapped<'g> {
    /// The pinned buffer (its address, length and [`Pinned::info`]).
    pub fn pinned(&self) -> &Pinned<'g> {
        &self.pinned
    }

    /// As [`Mapping::as_ptr`].
    pub fn as_ptr(&self) -> *mut u8 {
        self.core.ptr.as_ptr()
    }

    /// The mapped length.
    pub fn len_bytes(&self) -> usize {
        self.core.len_bytes
    }

    /// As [`Mapping::copy_to`].
    pub fn copy_to(&self, src: &[u8], offset_bytes: usize) -> Result<()> {
        self.core.copy_to(&self.pinned, src, offset_bytes)
    }

    /// As [`Mapping::copy_from`].
    pub fn copy_from(&self, dst: &mut [u8], offset_bytes: usize) -> Result<()> {
        self.core.copy_from(&self.pinned, dst, offset_bytes)
    }
}

impl Drop for Mapped<'_> {
    fn drop(&mut self) {
        // Unmapped here; `pinned` is unpinned after, when its own drop runs.
        let _ = self.core.unmap(&self.pinned);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_types_decode_gdrapi_h_s_values() {
        assert_eq!(MappingType::from_raw(0), MappingType::None);
        assert_eq!(MappingType::from_raw(1), MappingType::WriteCombining);
        assert_eq!(MappingType::from_raw(2), MappingType::Caching);
        assert_eq!(MappingType::from_raw(3), MappingType::Device);
        // GDR_MAPPING_TYPE_MAX (4) and anything later are not types: kept as numbers.
        assert_eq!(MappingType::from_raw(4), MappingType::Unknown(4));
        assert_eq!(MappingType::from_raw(-1), MappingType::Unknown(-1));
        for raw in -1..6 {
            assert_eq!(MappingType::from_raw(raw).as_raw(), raw);
        }
        assert!(!MappingType::None.is_mapped());
        assert!(MappingType::Device.is_mapped());
        assert_eq!(MappingType::WriteCombining.to_string(), "Write Combining");
        assert_eq!(
            MappingType::Unknown(9).to_string(),
            "unknown mapping type 9"
        );
    }

    #[test]
    fn a_v1_info_derives_its_type_from_the_flags() {
        assert_eq!(MappingType::from_v1_flags(false, false), MappingType::None);
        assert_eq!(MappingType::from_v1_flags(false, true), MappingType::None);
        assert_eq!(
            MappingType::from_v1_flags(true, true),
            MappingType::WriteCombining
        );
        assert_eq!(
            MappingType::from_v1_flags(true, false),
            MappingType::Caching
        );
    }

    #[test]
    fn info_decodes_the_raw_struct() {
        let raw = RawInfo {
            va: 0x7f00_0001_0000,
            mapped_size: 4 << 16,
            page_size: 1 << 16,
            tm_cycles: 123,
            cycles_per_ms: 456,
            bits: RawInfo::bits_for(true, true),
            mapping_type: 1,
        };
        let i = Info::decode(&raw, InfoCall::V2);
        assert_eq!(
            i,
            Info {
                va: 0x7f00_0001_0000,
                mapped_size_bytes: 4 << 16,
                page_size_bytes: 1 << 16,
                mapped: true,
                wc_mapping: true,
                mapping_type: MappingType::WriteCombining,
            }
        );
        // A v1 call leaves mapping_type alone: it is derived, not read.
        let raw = RawInfo {
            bits: RawInfo::bits_for(true, false),
            mapping_type: 0,
            ..raw
        };
        assert_eq!(
            Info::decode(&raw, InfoCall::V1).mapping_type,
            MappingType::Caching
        );
        assert_eq!(i.offset_bytes_of(0x7f00_0001_0000), Some(0));
        assert_eq!(i.offset_bytes_of(0x7f00_0001_1234), Some(0x1234));
        assert_eq!(i.offset_bytes_of(0x7f00_0001_0000 + (4 << 16)), None);
        assert_eq!(i.offset_bytes_of(0x7f00_0000_ffff), None);
    }

    #[test]
    fn without_the_node_open_names_the_module_and_how_to_get_it() {
        let dir = tempfile::tempdir().unwrap();
        let e = check_gdrdrv(dir.path()).unwrap_err();
        let node = dir.path().join("gdrdrv");
        assert!(
            matches!(&e, OpenError::NoGdrdrv { node: n } if *n == node),
            "{e}"
        );
        let s = e.to_string();
        assert_eq!(
            s,
            format!(
                "the gdrdrv kernel module is not loaded (`{}` absent): build and load it from \
                 https://github.com/NVIDIA/gdrcopy (`make driver && sudo ./insmod.sh`), user \
                 library via `make lib lib_install`",
                node.display()
            )
        );
        assert!(!s.contains('\n'));
        // With the default directory it reads exactly as the brief.
        let s = OpenError::NoGdrdrv {
            node: Path::new(DEFAULT_DEV_DIR).join("gdrdrv"),
        }
        .to_string();
        assert!(
            s.starts_with("the gdrdrv kernel module is not loaded (`/dev/gdrdrv` absent): "),
            "{s}"
        );
    }

    #[test]
    fn a_present_node_passes_the_check() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("gdrdrv"), b"").unwrap();
        assert_eq!(check_gdrdrv(dir.path()).unwrap(), dir.path().join("gdrdrv"));
    }

    #[test]
    fn a_node_gdr_open_refused_is_diagnosed() {
        let dir = tempfile::tempdir().unwrap();
        // Not a character device: a stale node.
        let file = dir.path().join("gdrdrv");
        std::fs::write(&file, b"").unwrap();
        let d = diagnose_open_failure(&file, (2, 5));
        assert!(d.starts_with("it is not a character device"), "{d}");
        assert!(d.contains("insmod.sh"), "{d}");
        // A character device that opens read-write: the version handshake is left.
        let null = Path::new("/dev/null");
        if null.exists() {
            let d = diagnose_open_failure(null, (2, 5));
            assert!(d.contains("refused libgdrapi 2.5"), "{d}");
            assert!(d.contains("GDRCOPY_ENABLE_LOGGING=1"), "{d}");
        }
    }

    #[test]
    fn call_errors_name_the_call_and_the_errno() {
        let e = GdrError::Call {
            call: "gdr_pin_buffer",
            code: 22,
        };
        let s = e.to_string();
        assert!(s.starts_with("gdr_pin_buffer failed: "), "{s}");
        assert!(
            s.contains("Invalid argument") && s.ends_with("(code 22)"),
            "{s}"
        );
        let e = GdrError::OutOfBounds {
            call: "gdr_copy_to_mapping",
            offset_bytes: 65530,
            len_bytes: 10,
            mapping_bytes: 65536,
        };
        assert_eq!(
            e.to_string(),
            "gdr_copy_to_mapping: 10 bytes at offset 65530 run past the 65536-byte mapping"
        );
    }
}
