//! GPU pages: gdrdrv pins and maps whole 64 KiB GPU pages (`GPU_PAGE_SIZE` in gdrapi.h), so a
//! buffer's address and length are rounded out to them.

/// `GPU_PAGE_SHIFT` in gdrapi.h.
pub const GPU_PAGE_SHIFT: u32 = 16;
/// `GPU_PAGE_SIZE` in gdrapi.h: 64 KiB.
pub const GPU_PAGE_BYTES: u64 = 1 << GPU_PAGE_SHIFT;

/// `addr` rounded down to the start of its GPU page.
pub const fn round_down_to_gpu_page(addr: u64) -> u64 {
    addr & !(GPU_PAGE_BYTES - 1)
}

/// `bytes` rounded up to a whole number of GPU pages; `None` past `u64::MAX`.
pub const fn round_up_to_gpu_page(bytes: u64) -> Option<u64> {
    match bytes.checked_add(GPU_PAGE_BYTES - 1) {
        Some(b) => Some(round_down_to_gpu_page(b)),
        None => None,
    }
}

/// The whole GPU pages covering `[addr, addr + len_bytes)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuPageSpan {
    /// The first page's address (`addr` rounded down).
    pub start_addr: u64,
    /// The pages' length, a multiple of [`GPU_PAGE_BYTES`].
    pub len_bytes: u64,
    /// Where `addr` lies from `start_addr`.
    pub offset_bytes: u64,
}

impl GpuPageSpan {
    /// The number of GPU pages.
    pub const fn pages(&self) -> u64 {
        self.len_bytes >> GPU_PAGE_SHIFT
    }
}

/// The GPU pages covering `len_bytes` from `addr` (an empty span at the rounded-down address
/// when `len_bytes` is 0); `None` when the range runs past `u64::MAX`.
pub const fn gpu_page_span(addr: u64, len_bytes: u64) -> Option<GpuPageSpan> {
    let start_addr = round_down_to_gpu_page(addr);
    let offset_bytes = addr - start_addr;
    if len_bytes == 0 {
        return Some(GpuPageSpan {
            start_addr,
            len_bytes: 0,
            offset_bytes,
        });
    }
    let Some(end) = addr.checked_add(len_bytes) else {
        return None;
    };
    let Some(end) = round_up_to_gpu_page(end) else {
        return None;
    };
    Some(GpuPageSpan {
        start_addr,
        len_bytes: end - start_addr,
        offset_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gpu_page_is_64_kib() {
        assert_eq!(GPU_PAGE_BYTES, 65536);
        assert_eq!(1u64 << GPU_PAGE_SHIFT, GPU_PAGE_BYTES);
    }

    #[test]
    fn rounding_goes_out_to_whole_pages() {
        assert_eq!(round_down_to_gpu_page(0), 0);
        assert_eq!(round_down_to_gpu_page(0xffff), 0);
        assert_eq!(round_down_to_gpu_page(0x1_0000), 0x1_0000);
        assert_eq!(round_down_to_gpu_page(0x7f12_3456_789a), 0x7f12_3456_0000);
        assert_eq!(round_up_to_gpu_page(0), Some(0));
        assert_eq!(round_up_to_gpu_page(1), Some(GPU_PAGE_BYTES));
        assert_eq!(round_up_to_gpu_page(GPU_PAGE_BYTES), Some(GPU_PAGE_BYTES));
        assert_eq!(
            round_up_to_gpu_page(GPU_PAGE_BYTES + 1),
            Some(2 * GPU_PAGE_BYTES)
        );
        assert_eq!(round_up_to_gpu_page(u64::MAX), None);
        assert_eq!(
            round_up_to_gpu_page(u64::MAX - GPU_PAGE_BYTES + 1),
            Some(u64::MAX - GPU_PAGE_BYTES + 1)
        );
    }

    #[test]
    fn a_span_covers_the_range_from_its_first_page() {
        // Aligned: exactly the pages asked for.
        let s = gpu_page_span(0x20_0000, 3 * GPU_PAGE_BYTES).unwrap();
        assert_eq!(
            s,
            GpuPageSpan {
                start_addr: 0x20_0000,
                len_bytes: 3 * GPU_PAGE_BYTES,
                offset_bytes: 0
            }
        );
        assert_eq!(s.pages(), 3);
        // One byte straddling a page boundary needs both pages.
        let s = gpu_page_span(0x2_ffff, 2).unwrap();
        assert_eq!(s.start_addr, 0x2_0000);
        assert_eq!(s.len_bytes, 2 * GPU_PAGE_BYTES);
        assert_eq!(s.offset_bytes, 0xffff);
        assert_eq!(s.pages(), 2);
        // Unaligned inside one page.
        let s = gpu_page_span(0x1_0100, 0x100).unwrap();
        assert_eq!(
            (s.start_addr, s.len_bytes, s.offset_bytes),
            (0x1_0000, GPU_PAGE_BYTES, 0x100)
        );
        // Empty.
        let s = gpu_page_span(0x1_0100, 0).unwrap();
        assert_eq!(
            (s.start_addr, s.len_bytes, s.offset_bytes),
            (0x1_0000, 0, 0x100)
        );
        // Past the end of the address space.
        assert_eq!(gpu_page_span(u64::MAX - 10, 100), None);
        assert_eq!(gpu_page_span(u64::MAX - 10, 5), None);
    }
}
