//! The C side: types and call signatures exactly as `include/gdrapi.h` of GDRCopy 2.4 and 2.5
//! declares them (2.6 leaves every one used here unchanged). C enums are read as plain
//! integers, so a value a newer library adds is a number to report, not undefined behaviour.

use std::ffi::{c_int, c_uint, c_ulong, c_void};

/// `gdr_t`: `struct gdr *`, opaque.
pub(crate) type GdrT = *mut c_void;

/// `gdr_mh_t`: `typedef struct gdr_mh_s { unsigned long h; } gdr_mh_t;`, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GdrMh {
    pub h: c_ulong,
}

/// `gdr_info_v2_t`:
///
/// ```c
/// typedef struct gdr_info_v2 {
///     uint64_t va;
///     uint64_t mapped_size;
///     uint32_t page_size;
///     uint64_t tm_cycles;      // deprecated
///     uint32_t cycles_per_ms;  // deprecated
///     unsigned mapped:1;
///     unsigned wc_mapping:1;
///     gdr_mapping_type_t mapping_type;
/// } gdr_info_v2_t;
/// ```
///
/// The two bit-fields share one `unsigned` ([`RawInfo::bits`]). The 2.0–2.3 `struct gdr_info`
/// (what `gdr_get_info` fills) is this without `mapping_type`: the first 40 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RawInfo {
    pub va: u64,
    pub mapped_size: u64,
    pub page_size: u32,
    pub tm_cycles: u64,
    pub cycles_per_ms: u32,
    pub bits: c_uint,
    pub mapping_type: c_int,
}

/// Bytes of the 2.0–2.3 `struct gdr_info` (`gdr_info_v1_t` in 2.4+): [`RawInfo`] up to
/// `mapping_type`.
pub(crate) const INFO_V1_BYTES: usize = 40;

// The fallback to `gdr_get_info` rests on this: the v1 struct is the v2 one's prefix.
const _: () = assert!(std::mem::offset_of!(RawInfo, mapping_type) == INFO_V1_BYTES);
const _: () = assert!(std::mem::size_of::<RawInfo>() == 48);

/// Bit of [`RawInfo::bits`] holding `mapped:1` and `wc_mapping:1`: GCC and Clang allocate
/// bit-fields from the least significant bit on little-endian targets and from the most
/// significant on big-endian ones.
#[cfg(target_endian = "little")]
const MAPPED_BIT: u32 = 1 << 0;
#[cfg(target_endian = "little")]
const WC_MAPPING_BIT: u32 = 1 << 1;
#[cfg(target_endian = "big")]
const MAPPED_BIT: u32 = 1 << 31;
#[cfg(target_endian = "big")]
const WC_MAPPING_BIT: u32 = 1 << 30;

impl RawInfo {
    pub(crate) fn mapped(&self) -> bool {
        self.bits & MAPPED_BIT != 0
    }

    pub(crate) fn wc_mapping(&self) -> bool {
        self.bits & WC_MAPPING_BIT != 0
    }

    /// The bit-field word for the given flags (tests).
    #[cfg(test)]
    pub(crate) fn bits_for(mapped: bool, wc_mapping: bool) -> c_uint {
        (if mapped { MAPPED_BIT } else { 0 }) | (if wc_mapping { WC_MAPPING_BIT } else { 0 })
    }
}

/// `gdr_mapping_type_t` values.
pub(crate) const GDR_MAPPING_TYPE_NONE: c_int = 0;
pub(crate) const GDR_MAPPING_TYPE_WC: c_int = 1;
pub(crate) const GDR_MAPPING_TYPE_CACHING: c_int = 2;
pub(crate) const GDR_MAPPING_TYPE_DEVICE: c_int = 3;

/// `gdr_t gdr_open(void);`
pub(crate) type OpenFn = unsafe extern "C" fn() -> GdrT;
/// `int gdr_close(gdr_t g);`
pub(crate) type CloseFn = unsafe extern "C" fn(GdrT) -> c_int;
/// `int gdr_pin_buffer(gdr_t g, unsigned long addr, size_t size, uint64_t p2p_token,
/// uint32_t va_space, gdr_mh_t *handle);`
pub(crate) type PinBufferFn =
    unsafe extern "C" fn(GdrT, c_ulong, usize, u64, u32, *mut GdrMh) -> c_int;
/// `int gdr_unpin_buffer(gdr_t g, gdr_mh_t handle);`
pub(crate) type UnpinBufferFn = unsafe extern "C" fn(GdrT, GdrMh) -> c_int;
/// `int gdr_get_info_v2(gdr_t g, gdr_mh_t handle, gdr_info_v2_t *info);`, and the 2.0–2.3
/// `int gdr_get_info(gdr_t g, gdr_mh_t handle, gdr_info_t *info);` (a 40-byte prefix).
pub(crate) type GetInfoFn = unsafe extern "C" fn(GdrT, GdrMh, *mut RawInfo) -> c_int;
/// `int gdr_map(gdr_t g, gdr_mh_t handle, void **va, size_t size);`
pub(crate) type MapFn = unsafe extern "C" fn(GdrT, GdrMh, *mut *mut c_void, usize) -> c_int;
/// `int gdr_unmap(gdr_t g, gdr_mh_t handle, void *va, size_t size);`
pub(crate) type UnmapFn = unsafe extern "C" fn(GdrT, GdrMh, *mut c_void, usize) -> c_int;
/// `int gdr_copy_to_mapping(gdr_mh_t handle, void *map_d_ptr, const void *h_ptr,
/// size_t size);`
pub(crate) type CopyToMappingFn =
    unsafe extern "C" fn(GdrMh, *mut c_void, *const c_void, usize) -> c_int;
/// `int gdr_copy_from_mapping(gdr_mh_t handle, void *h_ptr, const void *map_d_ptr,
/// size_t size);`
pub(crate) type CopyFromMappingFn =
    unsafe extern "C" fn(GdrMh, *mut c_void, *const c_void, usize) -> c_int;
/// `void gdr_runtime_get_version(int *major, int *minor);`
pub(crate) type RuntimeGetVersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int);
/// `int gdr_driver_get_version(gdr_t g, int *major, int *minor);`
pub(crate) type DriverGetVersionFn = unsafe extern "C" fn(GdrT, *mut c_int, *mut c_int) -> c_int;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn gdr_info_v2_has_gdrapi_h_s_layout() {
        assert_eq!(offset_of!(RawInfo, va), 0);
        assert_eq!(offset_of!(RawInfo, mapped_size), 8);
        assert_eq!(offset_of!(RawInfo, page_size), 16);
        assert_eq!(offset_of!(RawInfo, tm_cycles), 24);
        assert_eq!(offset_of!(RawInfo, cycles_per_ms), 32);
        assert_eq!(offset_of!(RawInfo, bits), 36);
        // The v1 struct ends after the bit-field word (36 + 4, already 8-aligned): the v2
        // struct adds only `mapping_type` after it, so a v1 call fills a prefix.
        assert_eq!(offset_of!(RawInfo, mapping_type), INFO_V1_BYTES);
        assert_eq!(size_of::<RawInfo>(), 48);
        assert_eq!(align_of::<RawInfo>(), 8);
    }

    #[test]
    fn gdr_mh_is_one_unsigned_long() {
        assert_eq!(size_of::<GdrMh>(), size_of::<c_ulong>());
        assert_eq!(align_of::<GdrMh>(), align_of::<c_ulong>());
    }

    #[test]
    fn the_bit_fields_decode_independently() {
        for (mapped, wc) in [(false, false), (true, false), (false, true), (true, true)] {
            let r = RawInfo {
                bits: RawInfo::bits_for(mapped, wc),
                ..RawInfo::default()
            };
            assert_eq!((r.mapped(), r.wc_mapping()), (mapped, wc));
        }
        // Bits past the two fields (padding in C) are ignored.
        let r = RawInfo {
            bits: !RawInfo::bits_for(true, true),
            ..RawInfo::default()
        };
        assert!(!r.mapped() && !r.wc_mapping());
    }
}
