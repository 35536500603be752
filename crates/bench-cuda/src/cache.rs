//! Keeping a host buffer's lines out of the CPU caches before a case.
//!
//! The pool writes sources and destinations with the CPU, and a DMA access to a line a core
//! holds modified is first served by that core (a snoop), which makes small copies slower and
//! less steady. So no line of a case's host buffers is left in a cache when its copies start:
//! destinations are poisoned with non-temporal stores ([`fill_uncached`]), sources are flushed
//! after the CPU wrote them ([`flush`]), and the copies read and write memory, as data produced
//! long before its transfer is. Evidence:
//! [measurements](../../../docs/measurements.md#host-buffers-out-of-the-cpu-caches).

/// Flush `len` bytes at `ptr` from every CPU cache (`clflushopt` where the CPU has it, else
/// `clflush`, then a fence). Returns false where the architecture has no such instruction
/// (nothing is done there).
///
/// # Safety
/// `ptr` must be valid for reads of `len` bytes.
pub unsafe fn flush(ptr: *const u8, len: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if has_clflushopt() {
            // SAFETY: the caller's contract; the CPU has clflushopt.
            unsafe { flush_opt(ptr, len) };
        } else {
            // SAFETY: the caller's contract; clflush is part of x86-64 (SSE2).
            unsafe { flush_plain(ptr, len) };
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (ptr, len);
        false
    }
}

/// Fill `buf` with `byte` and leave none of its lines in a CPU cache: non-temporal stores (which
/// write memory and drop any cached copy of the line) for the 16-byte-aligned middle, plain
/// stores then a flush for the ragged ends, then a fence. Where the architecture has neither,
/// a plain fill; returns whether the lines were kept out of the caches (as after [`flush`]).
/// Poisoning a destination this way costs about a third of a fill then a flush, and no flush
/// is needed after it.
pub fn fill_uncached(buf: &mut [u8], byte: u8) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_set1_epi8, _mm_sfence, _mm_stream_si128};
        // SAFETY: `align_to_mut` hands back the 16-byte-aligned middle as `__m128i`s, any bit
        // pattern of which is valid.
        let (head, middle, tail) = unsafe { buf.align_to_mut::<__m128i>() };
        head.fill(byte);
        tail.fill(byte);
        // SAFETY: SSE2 is part of x86-64.
        let v = unsafe { _mm_set1_epi8(byte as i8) };
        for m in middle.iter_mut() {
            // SAFETY: `m` is an aligned, writable 16-byte slot of `buf`; SSE2 is part of x86-64.
            unsafe { _mm_stream_si128(m, v) };
        }
        // SAFETY: both ranges lie inside `buf`, valid for reads.
        unsafe {
            flush(head.as_ptr(), head.len());
            flush(tail.as_ptr(), tail.len());
        }
        // Non-temporal stores are ordered only by a fence: the DMA that follows must see them.
        // SAFETY: a fence has no memory operands.
        unsafe { _mm_sfence() };
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        buf.fill(byte);
        false
    }
}

/// [`fill_uncached`], in pieces on several threads (those of [`crate::pattern::fill`]) where
/// `buf` is large: one thread poisoned 8 × 256 MiB of D2H destinations in about 0.2 s.
pub fn fill_uncached_on_threads(buf: &mut [u8], byte: u8) -> bool {
    use crate::pattern::{on_threads, PARALLEL_BYTES, PIECE_BYTES};
    if buf.len() <= PARALLEL_BYTES {
        return fill_uncached(buf, byte);
    }
    let pieces: Vec<&mut [u8]> = buf.chunks_mut(PIECE_BYTES).collect();
    on_threads(pieces, |piece| fill_uncached(piece, byte))
        .into_iter()
        .all(|kept_out| kept_out)
}

/// CPUID leaf 7, EBX bit 23 (the standard library does not detect clflushopt).
#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)] // `__cpuid_count` is safe in newer Rust, unsafe in older ones
fn has_clflushopt() -> bool {
    use std::arch::x86_64::__cpuid_count;
    // SAFETY: cpuid is part of x86-64; leaf 0 says how many leaves there are.
    let max_leaf = unsafe { __cpuid_count(0, 0) }.eax;
    // SAFETY: as above, and leaf 7 exists.
    max_leaf >= 7 && unsafe { __cpuid_count(7, 0) }.ebx & (1 << 23) != 0
}

/// Cache line size on every x86-64 CPU that hwceiling meets; a smaller stride only repeats work.
#[cfg(target_arch = "x86_64")]
const LINE: usize = 64;

/// The address of every cache line holding a byte of `[ptr, ptr + len)`.
#[cfg(target_arch = "x86_64")]
fn lines(ptr: *const u8, len: usize) -> impl Iterator<Item = usize> {
    // None for an empty range, whose pointer may be dangling.
    let end = ptr as usize + len;
    let start = if len == 0 {
        end
    } else {
        ptr as usize & !(LINE - 1)
    };
    (start..end).step_by(LINE)
}

/// # Safety
/// `ptr` valid for `len` bytes; the CPU has clflushopt ([`has_clflushopt`]).
#[cfg(target_arch = "x86_64")]
unsafe fn flush_opt(ptr: *const u8, len: usize) {
    use std::arch::x86_64::_mm_sfence;
    for a in lines(ptr, len) {
        // SAFETY: `a` lies in a line that holds bytes of the caller's valid range; clflushopt
        // writes the line back and invalidates it, changing no data (the CPU has it: caller).
        unsafe {
            std::arch::asm!("clflushopt [{0}]", in(reg) a, options(nostack, preserves_flags))
        };
    }
    // clflushopt is ordered only by a fence.
    // SAFETY: a fence has no memory operands.
    unsafe { _mm_sfence() };
}

/// # Safety
/// `ptr` valid for `len` bytes.
#[cfg(target_arch = "x86_64")]
unsafe fn flush_plain(ptr: *const u8, len: usize) {
    use std::arch::x86_64::{_mm_clflush, _mm_mfence};
    for a in lines(ptr, len) {
        // SAFETY: as in `flush_opt`.
        unsafe { _mm_clflush(a as *const u8) };
    }
    // SAFETY: a fence has no memory operands.
    unsafe { _mm_mfence() };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn every_line_touched_is_flushed_once() {
        let at = |a: usize| a as *const u8;
        let got = |p, len| lines(at(p), len).collect::<Vec<_>>();
        assert_eq!(got(640, 64), [640]);
        // Five bytes into a line, 60 bytes long: ends one byte into the next line.
        assert_eq!(got(645, 60), [640, 704]);
        assert_eq!(got(645, 59), [640]);
        assert_eq!(got(640, 0), Vec::<usize>::new());
        assert_eq!(got(645, 0), Vec::<usize>::new());
        assert_eq!(got(0, 129), [0, 64, 128]);
    }

    #[test]
    fn an_uncached_fill_writes_every_byte_and_no_other() {
        let mut v = vec![7u8; 4096 + 64];
        // Ragged at both ends, aligned, tiny and empty ranges.
        for (off, len) in [
            (3, 1000),
            (0, 4096),
            (16, 32),
            (5, 7),
            (9, 0),
            (1, 4096 + 62),
        ] {
            v.fill(7);
            let ran = fill_uncached(&mut v[off..off + len], 0xA5);
            assert_eq!(ran, cfg!(target_arch = "x86_64"));
            for (i, &b) in v.iter().enumerate() {
                let inside = (off..off + len).contains(&i);
                assert_eq!(b, if inside { 0xA5 } else { 7 }, "byte {i} of {off}+{len}");
            }
        }
    }

    #[test]
    fn a_large_uncached_fill_on_threads_writes_every_byte_and_no_other() {
        use crate::pattern::{PARALLEL_BYTES, PIECE_BYTES};
        // Over the threshold, ragged at both ends and not a multiple of the pieces.
        let len = PARALLEL_BYTES + PIECE_BYTES / 2 + 13;
        let mut v = vec![7u8; len + 10];
        let ran = fill_uncached_on_threads(&mut v[3..3 + len], 0xA5);
        assert_eq!(ran, cfg!(target_arch = "x86_64"));
        assert_eq!(&v[..3], &[7, 7, 7]);
        assert!(v[3..3 + len].iter().all(|&b| b == 0xA5));
        assert!(v[3 + len..].iter().all(|&b| b == 7));
    }

    #[test]
    fn flushing_keeps_the_data_and_says_whether_it_ran() {
        let v: Vec<u8> = (0..100_003u32).map(|i| (i * 7) as u8).collect();
        for (off, len) in [(0, v.len()), (1, 63), (5, 0), (63, 200), (4096, 65)] {
            // SAFETY: each range lies inside `v`.
            let ran = unsafe { flush(v.as_ptr().add(off), len) };
            assert_eq!(ran, cfg!(target_arch = "x86_64"));
        }
        assert!(v
            .iter()
            .enumerate()
            .all(|(i, &b)| b == (i as u32 * 7) as u8));
    }
}
