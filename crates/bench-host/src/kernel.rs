//! Copy kernels: the C library's `memcpy`, and a streaming copy that writes with non-temporal
//! stores (the widest the CPU has: AVX-512, AVX2 or SSE2).
//!
//! Why two: a copy that writes through the cache first reads every destination line it is about
//! to overwrite (read-for-ownership), so DRAM moves three bytes for every two a copy needs.
//! Non-temporal stores skip that read. The C library switches to them only above a threshold
//! it derives from the last-level cache size; on a machine (or a VM) that reports a large cache
//! the per-thread slices of a large copy stay under it, and `memcpy` reaches about two thirds of
//! what the memory can do. The streaming kernel is what the memory allows; `memcpy` is what
//! software that calls it gets.

use std::fmt;

/// glibc's non-temporal threshold from the dynamic loader's `--list-diagnostics` output
/// (`x86.cpu_features.non_temporal_threshold=0xb580000`): its `memcpy` writes calls at least
/// this long with non-temporal stores, shorter ones through the cache.
pub fn parse_non_temporal_threshold(diagnostics: &str) -> Option<u64> {
    diagnostics.lines().find_map(|l| {
        let v = l
            .trim()
            .strip_prefix("x86.cpu_features.non_temporal_threshold=")?;
        let v = v.trim();
        match v.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => v.parse().ok(),
        }
    })
}

/// This process's glibc non-temporal threshold, asked of the x86-64 dynamic loader (glibc 2.33
/// and later answer `--list-diagnostics`; the child inherits `GLIBC_TUNABLES`, so a tuned
/// threshold is the one read). `None` elsewhere, or when the loader does not say.
pub fn glibc_non_temporal_threshold() -> Option<u64> {
    const LOADER: &str = "/lib64/ld-linux-x86-64.so.2";
    if !cfg!(target_arch = "x86_64") {
        return None;
    }
    let out = std::process::Command::new(LOADER)
        .arg("--list-diagnostics")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    parse_non_temporal_threshold(&String::from_utf8_lossy(&out.stdout))
}

/// How a worker copies its slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyKernel {
    /// `memcpy` from the C library (`std::ptr::copy_nonoverlapping`).
    Memcpy,
    /// Vector loads and non-temporal stores, with this instruction set.
    Streaming(Isa),
}

/// The vector width of the streaming kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    Avx512,
    Avx2,
    Sse2,
}

impl Isa {
    /// The widest streaming stores this CPU runs; `None` off x86-64.
    pub fn detect() -> Option<Isa> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return Some(Isa::Avx512);
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                return Some(Isa::Avx2);
            }
            // SSE2 is part of x86-64.
            Some(Isa::Sse2)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            None
        }
    }

    /// Every instruction set this CPU runs, widest first (for tests), each detected on its own
    /// (a VM may mask AVX2 and still show AVX-512F).
    pub fn available() -> Vec<Isa> {
        #[cfg(target_arch = "x86_64")]
        {
            let mut v = Vec::new();
            if std::arch::is_x86_feature_detected!("avx512f") {
                v.push(Isa::Avx512);
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                v.push(Isa::Avx2);
            }
            v.push(Isa::Sse2);
            v
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Vec::new()
        }
    }
}

impl fmt::Display for CopyKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CopyKernel::Memcpy => f.write_str("C library memcpy"),
            CopyKernel::Streaming(isa) => write!(
                f,
                "streaming copy ({} loads, non-temporal stores)",
                match isa {
                    Isa::Avx512 => "AVX-512",
                    Isa::Avx2 => "AVX2",
                    Isa::Sse2 => "SSE2",
                }
            ),
        }
    }
}

impl CopyKernel {
    /// Copy `len` bytes from `src` to `dst`. The streaming kernel's stores are fenced before it
    /// returns, so whatever the caller publishes afterwards is ordered after the copy.
    ///
    /// # Safety
    /// `src` and `dst` must be valid for `len` bytes and must not overlap; a `Streaming` kernel's
    /// instruction set must be one the CPU runs ([`Isa::detect`]).
    pub unsafe fn copy(self, dst: *mut u8, src: *const u8, len: usize) {
        match self {
            // SAFETY: the caller's contract.
            CopyKernel::Memcpy => unsafe { std::ptr::copy_nonoverlapping(src, dst, len) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the caller's contract, and the CPU runs `isa`.
            CopyKernel::Streaming(isa) => unsafe { x86::stream_copy(isa, dst, src, len) },
            #[cfg(not(target_arch = "x86_64"))]
            CopyKernel::Streaming(_) => unreachable!("Isa::detect is None off x86-64"),
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Isa;
    use std::arch::x86_64::*;

    /// Bytes per loop iteration: four vectors.
    const fn step(isa: Isa) -> usize {
        match isa {
            Isa::Avx512 => 256,
            Isa::Avx2 => 128,
            Isa::Sse2 => 64,
        }
    }

    /// Bytes copied plainly before the vector loop (up to the first destination address the
    /// stores accept: one vector's alignment) and bytes the loop streams, for a copy of `len`
    /// bytes to `dst_addr`.
    pub fn split(isa: Isa, dst_addr: usize, len: usize) -> (usize, usize) {
        let align = step(isa) / 4;
        let head = ((align - dst_addr % align) % align).min(len);
        (head, (len - head) / step(isa) * step(isa))
    }

    /// # Safety
    /// As [`super::CopyKernel::copy`]; the CPU runs `isa`.
    pub unsafe fn stream_copy(isa: Isa, dst: *mut u8, src: *const u8, len: usize) {
        // Plain copy of the head, the vector loop, then a plain copy of the tail.
        let (head, body) = split(isa, dst as usize, len);
        // SAFETY: head + body + tail = len, all within the caller's ranges; `dst + head` is
        // aligned to `align`; the CPU runs `isa` (caller).
        unsafe {
            std::ptr::copy_nonoverlapping(src, dst, head);
            let (d, s) = (dst.add(head), src.add(head));
            match isa {
                Isa::Avx512 => avx512(d, s, body),
                Isa::Avx2 => avx2(d, s, body),
                Isa::Sse2 => sse2(d, s, body),
            }
            _mm_sfence();
            std::ptr::copy_nonoverlapping(
                src.add(head + body),
                dst.add(head + body),
                len - head - body,
            );
        }
    }

    /// # Safety
    /// `d` 64-byte aligned; `d` and `s` valid for `n` bytes, `n` a multiple of 256; AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn avx512(d: *mut u8, s: *const u8, n: usize) {
        let mut i = 0;
        while i < n {
            // SAFETY: i + 256 <= n (n is a multiple of 256); the stores are aligned (d is, and
            // i is a multiple of 64).
            unsafe {
                let a = _mm512_loadu_si512(s.add(i).cast());
                let b = _mm512_loadu_si512(s.add(i + 64).cast());
                let c = _mm512_loadu_si512(s.add(i + 128).cast());
                let e = _mm512_loadu_si512(s.add(i + 192).cast());
                _mm512_stream_si512(d.add(i).cast(), a);
                _mm512_stream_si512(d.add(i + 64).cast(), b);
                _mm512_stream_si512(d.add(i + 128).cast(), c);
                _mm512_stream_si512(d.add(i + 192).cast(), e);
            }
            i += 256;
        }
    }

    /// # Safety
    /// `d` 32-byte aligned; `d` and `s` valid for `n` bytes, `n` a multiple of 128; AVX2.
    #[target_feature(enable = "avx2")]
    unsafe fn avx2(d: *mut u8, s: *const u8, n: usize) {
        let mut i = 0;
        while i < n {
            // SAFETY: i + 128 <= n; aligned stores (d is, i is a multiple of 32).
            unsafe {
                let a = _mm256_loadu_si256(s.add(i).cast());
                let b = _mm256_loadu_si256(s.add(i + 32).cast());
                let c = _mm256_loadu_si256(s.add(i + 64).cast());
                let e = _mm256_loadu_si256(s.add(i + 96).cast());
                _mm256_stream_si256(d.add(i).cast(), a);
                _mm256_stream_si256(d.add(i + 32).cast(), b);
                _mm256_stream_si256(d.add(i + 64).cast(), c);
                _mm256_stream_si256(d.add(i + 96).cast(), e);
            }
            i += 128;
        }
    }

    /// # Safety
    /// `d` 16-byte aligned; `d` and `s` valid for `n` bytes, `n` a multiple of 64.
    #[target_feature(enable = "sse2")]
    unsafe fn sse2(d: *mut u8, s: *const u8, n: usize) {
        let mut i = 0;
        while i < n {
            // SAFETY: i + 64 <= n; aligned stores (d is, i is a multiple of 16).
            unsafe {
                let a = _mm_loadu_si128(s.add(i).cast());
                let b = _mm_loadu_si128(s.add(i + 16).cast());
                let c = _mm_loadu_si128(s.add(i + 32).cast());
                let e = _mm_loadu_si128(s.add(i + 48).cast());
                _mm_stream_si128(d.add(i).cast(), a);
                _mm_stream_si128(d.add(i + 16).cast(), b);
                _mm_stream_si128(d.add(i + 32).cast(), c);
                _mm_stream_si128(d.add(i + 48).cast(), e);
            }
            i += 64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_non_temporal_threshold_is_read_from_the_loader_diagnostics() {
        let text = "x86.cpu_features.rep_movsb_threshold=0x840\n\
                    x86.cpu_features.non_temporal_threshold=0xb580000\n";
        assert_eq!(parse_non_temporal_threshold(text), Some(190_316_544));
        assert_eq!(
            parse_non_temporal_threshold("x86.cpu_features.non_temporal_threshold=4096"),
            Some(4096)
        );
        assert_eq!(
            parse_non_temporal_threshold("version.release=\"stable\"\n"),
            None
        );
        assert_eq!(
            parse_non_temporal_threshold("x86.cpu_features.non_temporal_threshold=0xzz"),
            None
        );
    }

    /// The report reads the instruction set back from the note `copy: <this text>`
    /// (`hwc_report`'s `streaming_isa`): this wording is an interface, pinned here.
    #[test]
    fn the_kernel_names_keep_the_wording_the_report_reads() {
        assert_eq!(
            CopyKernel::Streaming(Isa::Avx512).to_string(),
            "streaming copy (AVX-512 loads, non-temporal stores)"
        );
        assert_eq!(
            CopyKernel::Streaming(Isa::Avx2).to_string(),
            "streaming copy (AVX2 loads, non-temporal stores)"
        );
        assert_eq!(
            CopyKernel::Streaming(Isa::Sse2).to_string(),
            "streaming copy (SSE2 loads, non-temporal stores)"
        );
        assert_eq!(CopyKernel::Memcpy.to_string(), "C library memcpy");
    }

    fn check(kernel: CopyKernel, src_off: usize, dst_off: usize, len: usize) {
        let src: Vec<u8> = (0..len + src_off + 64).map(|i| (i * 7 + 3) as u8).collect();
        let mut dst = vec![0xAAu8; len + dst_off + 64];
        // SAFETY: both ranges lie inside their vectors, which do not overlap; the ISA came
        // from `Isa::available`.
        unsafe {
            kernel.copy(
                dst.as_mut_ptr().add(dst_off),
                src.as_ptr().add(src_off),
                len,
            )
        };
        assert_eq!(
            &dst[dst_off..dst_off + len],
            &src[src_off..src_off + len],
            "{kernel} src+{src_off} dst+{dst_off} len {len}"
        );
        assert!(
            dst[..dst_off].iter().all(|&b| b == 0xAA),
            "{kernel}: wrote before dst"
        );
        assert!(
            dst[dst_off + len..].iter().all(|&b| b == 0xAA),
            "{kernel}: wrote past the end"
        );
    }

    #[test]
    fn every_kernel_copies_exactly_the_range_at_any_alignment_and_length() {
        let mut kernels = vec![CopyKernel::Memcpy];
        kernels.extend(Isa::available().into_iter().map(CopyKernel::Streaming));
        for k in kernels {
            for len in [0, 1, 15, 63, 64, 65, 255, 256, 257, 1000, 4096, 70_001] {
                for (s, d) in [(0, 0), (1, 0), (0, 1), (3, 17), (63, 5), (32, 32)] {
                    check(k, s, d, len);
                }
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_vector_loop_streams_all_but_an_unaligned_head_and_a_short_tail() {
        for (isa, step) in [(Isa::Avx512, 256), (Isa::Avx2, 128), (Isa::Sse2, 64)] {
            let align = step / 4;
            // A page-aligned worker slice (how the backend splits a copy) streams whole.
            assert_eq!(x86::split(isa, 0x7f00_0000_0000, 1 << 20), (0, 1 << 20));
            assert_eq!(x86::split(isa, 4096, 64 << 20), (0, 64 << 20));
            // Unaligned: a head shorter than one vector, the rest in steps, a short tail.
            for addr in [4096 + 1, 4096 + align - 1, 4096 + 3] {
                for len in [0, 5, step - 1, step, 10 * step + 7, 1 << 20] {
                    let (head, body) = x86::split(isa, addr, len);
                    assert!(head < align && head <= len, "{isa:?} {addr} {len}");
                    assert!(len - head < step || (addr + head) % align == 0);
                    assert_eq!(body % step, 0);
                    assert!(len - head - body < step, "{isa:?} {addr} {len}: tail");
                    if len >= align + step {
                        assert!(body > 0, "{isa:?} {addr} {len}: no streaming");
                    }
                }
            }
        }
    }

    #[test]
    fn x86_64_always_has_a_streaming_kernel_and_names_it() {
        if cfg!(target_arch = "x86_64") {
            let isa = Isa::detect().expect("SSE2 is part of x86-64");
            assert!(Isa::available().contains(&Isa::Sse2));
            assert!(CopyKernel::Streaming(isa)
                .to_string()
                .contains("non-temporal"));
        } else {
            assert_eq!(Isa::detect(), None);
        }
        assert_eq!(CopyKernel::Memcpy.to_string(), "C library memcpy");
    }
}
