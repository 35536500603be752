//! NUMA-placed, pre-faulted buffers and thread pinning, without libnuma: `mmap` + `mbind`, every
//! page touched, and placement checked page by page with `get_mempolicy(MPOL_F_NODE|MPOL_F_ADDR)`.

use std::io;
use std::ptr::NonNull;

const MPOL_BIND: libc::c_int = 2;
const MPOL_F_NODE: libc::c_ulong = 1;
const MPOL_F_ADDR: libc::c_ulong = 2;
/// Nodemask words passed to the kernel (64 × 16 = 1024 nodes).
const MASK_WORDS: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum NumaError {
    #[error("mmap of {len} bytes failed: {cause}")]
    Map { len: usize, cause: io::Error },
    #[error("node {0} is beyond the {max} nodes this build can address", max = MASK_WORDS * 64)]
    NodeOutOfRange(u32),
    #[error("sched_setaffinity to CPUs {cpus:?} failed: {cause}")]
    Affinity { cpus: Vec<u32>, cause: io::Error },
    #[error("no CPUs given to pin to")]
    NoCpus,
}

/// How a buffer's placement turned out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementCheck {
    /// Every sampled page is on the requested node.
    Verified { node: u32, pages_checked: usize },
    /// Some pages are elsewhere.
    Misplaced {
        node: u32,
        wrong_pages: usize,
        pages_checked: usize,
        example_node: i32,
    },
    /// Placement was not requested, or the kernel would not bind or tell (no NUMA support,
    /// seccomp): the reason.
    Unverified(String),
}

impl PlacementCheck {
    pub fn is_verified(&self) -> bool {
        matches!(self, PlacementCheck::Verified { .. })
    }
    pub fn describe(&self) -> String {
        match self {
            PlacementCheck::Verified {
                node,
                pages_checked,
            } => format!("on node {node} ({pages_checked} pages checked)"),
            PlacementCheck::Misplaced {
                node,
                wrong_pages,
                pages_checked,
                example_node,
            } => format!(
                "{wrong_pages} of {pages_checked} pages checked are not on node {node} (e.g. node {example_node})"
            ),
            PlacementCheck::Unverified(why) => format!("placement unverified: {why}"),
        }
    }
}

/// Which pages a [`NumaBuffer`] asks the kernel for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pages {
    /// Transparent huge pages (`MADV_HUGEPAGE`): physically contiguous 2 MiB pieces where the
    /// kernel has them.
    Huge,
    /// Base pages only (`MADV_NOHUGEPAGE`), even where THP is `always`: the buffer lies in
    /// page-sized pieces scattered over physical memory.
    Small,
    /// No advice: whatever the system's THP setting gives.
    Default,
}

/// An anonymous, page-aligned, pre-faulted buffer, optionally bound to one NUMA node.
pub struct NumaBuffer {
    ptr: NonNull<u8>,
    len: usize,
    placement: PlacementCheck,
}

// SAFETY: the buffer is plain memory owned by this value; access goes through &/&mut.
unsafe impl Send for NumaBuffer {}
// SAFETY: shared access only hands out shared slices.
unsafe impl Sync for NumaBuffer {}

/// The system's page size in bytes (4096 where it cannot be read).
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

impl NumaBuffer {
    /// Map `len` bytes (rounded up to a page), bind them to `node` when given, ask for
    /// transparent huge pages when `huge` (else leave the system's setting), touch every page,
    /// and check where the pages are.
    pub fn new(len: usize, node: Option<u32>, huge: bool) -> Result<Self, NumaError> {
        let pages = if huge { Pages::Huge } else { Pages::Default };
        Self::with_pages(len, node, pages)
    }

    /// As [`NumaBuffer::new`], asking for `pages`.
    pub fn with_pages(len: usize, node: Option<u32>, pages: Pages) -> Result<Self, NumaError> {
        let page = page_size();
        let len = len.max(1).div_ceil(page) * page;
        // SAFETY: anonymous private mapping with no address hint; checked for MAP_FAILED.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(NumaError::Map {
                len,
                cause: io::Error::last_os_error(),
            });
        }
        let ptr = NonNull::new(raw.cast::<u8>()).ok_or(NumaError::Map {
            len,
            cause: io::Error::other("mmap returned null"),
        })?;
        let mut buf = NumaBuffer {
            ptr,
            len,
            placement: PlacementCheck::Unverified("no node requested".into()),
        };
        let advice = match pages {
            Pages::Huge => Some(libc::MADV_HUGEPAGE),
            Pages::Small => Some(libc::MADV_NOHUGEPAGE),
            Pages::Default => None,
        };
        if let Some(advice) = advice {
            // SAFETY: advice on our own mapping, before any page is touched; failure only
            // means the kernel's default pages.
            unsafe { libc::madvise(raw, len, advice) };
        }
        let bind_error = match node {
            Some(n) => bind(raw, len, n)?.err(),
            None => None,
        };
        // Bound pages land on their node whoever touches them, so several threads may fault
        // them in (first touches cost most where a VM backs its memory lazily); unbound pages
        // land where the toucher runs, so only this thread touches them.
        let bound = node.is_some() && bind_error.is_none();
        buf.prefault(page, if bound { prefault_threads(len) } else { 1 });
        buf.placement = match (node, bind_error) {
            (None, _) => PlacementCheck::Unverified("no node requested".into()),
            (Some(_), Some(e)) => PlacementCheck::Unverified(format!("mbind failed: {e}")),
            (Some(n), None) => check_pages(buf.ptr.as_ptr(), len, page, n),
        };
        Ok(buf)
    }

    /// Touch every page, on `threads` threads each taking a contiguous share.
    fn prefault(&mut self, page: usize, threads: usize) {
        let share = self.len.div_ceil(threads.max(1)).next_multiple_of(page);
        let touch = |part: &mut [u8]| {
            let base = part.as_mut_ptr();
            for off in (0..part.len()).step_by(page) {
                // SAFETY: off < part.len(), inside our mapping; volatile so the touch is not
                // elided.
                unsafe { std::ptr::write_volatile(base.add(off), 0) };
            }
        };
        let all = self.as_mut_slice();
        if threads <= 1 {
            touch(all);
            return;
        }
        std::thread::scope(|s| {
            for part in all.chunks_mut(share) {
                s.spawn(move || touch(part));
            }
        });
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr/len describe our live, initialised (zero-filled) mapping.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
    pub fn placement(&self) -> &PlacementCheck {
        &self.placement
    }

    /// Bytes of this buffer backed by transparent huge pages, at least (from
    /// `/proc/self/smaps`), or `None` when that cannot be read.
    pub fn huge_page_bytes(&self) -> Option<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let start = self.ptr.as_ptr() as u64;
        Some(huge_bytes_in(&smaps, start, start + self.len as u64))
    }
}

/// Threads that fault in a bound buffer of `len` bytes: one per [`PREFAULT_SHARE_BYTES`], at
/// most the CPUs this thread may run on and [`PREFAULT_THREADS_MAX`].
fn prefault_threads(len: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (len / PREFAULT_SHARE_BYTES).clamp(1, cpus.min(PREFAULT_THREADS_MAX))
}

/// A prefault thread's share at least: smaller buffers fault in faster than threads start.
const PREFAULT_SHARE_BYTES: usize = 64 << 20;
/// Prefault threads at most.
const PREFAULT_THREADS_MAX: usize = 8;

/// Bytes of `[start, end)` that `smaps` shows backed by anonymous huge pages, at least: a
/// mapping's `AnonHugePages` counts for the range only beyond what the mapping's part outside
/// the range could hold (mappings merged with a neighbour are not over-counted). Pure.
pub fn huge_bytes_in(smaps: &str, start: u64, end: u64) -> u64 {
    let mut total = 0u64;
    let mut current: Option<(u64, u64)> = None;
    for line in smaps.lines() {
        if let Some(range) = mapping_range(line) {
            current = Some(range);
            continue;
        }
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { continue };
        if first != "AnonHugePages:" {
            continue;
        }
        let (Some((a, b)), Some(kb)) = (current, words.next().and_then(|w| w.parse::<u64>().ok()))
        else {
            continue;
        };
        let overlap = end.min(b).saturating_sub(start.max(a));
        if overlap == 0 {
            continue;
        }
        let outside = (b - a) - overlap;
        total += (kb * 1024).saturating_sub(outside).min(overlap);
    }
    total
}

/// The address range a `smaps` mapping header (`7f00…-7f00… rw-p …`) starts, or `None` for
/// any other line.
fn mapping_range(line: &str) -> Option<(u64, u64)> {
    let first = line.split_whitespace().next()?;
    let (a, b) = first.split_once('-')?;
    Some((
        u64::from_str_radix(a, 16).ok()?,
        u64::from_str_radix(b, 16).ok()?,
    ))
}

impl Drop for NumaBuffer {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping we created.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

fn nodemask(node: u32) -> Result<[libc::c_ulong; MASK_WORDS], NumaError> {
    let mut mask = [0 as libc::c_ulong; MASK_WORDS];
    let word = node as usize / 64;
    if word >= MASK_WORDS {
        return Err(NumaError::NodeOutOfRange(node));
    }
    mask[word] = 1 << (node % 64);
    Ok(mask)
}

/// `mbind(MPOL_BIND)`; the inner error is the kernel's refusal (kept as a reason, not fatal).
fn bind(
    addr: *mut libc::c_void,
    len: usize,
    node: u32,
) -> Result<Result<(), io::Error>, NumaError> {
    let mask = nodemask(node)?;
    // SAFETY: addr/len is our mapping; mask outlives the call; maxnode = bits in mask + 1.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            addr,
            len,
            MPOL_BIND,
            mask.as_ptr(),
            (MASK_WORDS * 64 + 1) as libc::c_ulong,
            0 as libc::c_uint,
        )
    };
    Ok(if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    })
}

/// The node of the page at address `addr`, as the kernel reports it (the kernel looks the
/// address up in this process's mappings; it is never dereferenced here).
pub fn node_of(addr: usize) -> Result<i32, io::Error> {
    let mut node: libc::c_int = -1;
    // SAFETY: mode out-pointer is valid; no nodemask requested; addr is only looked up.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut node as *mut libc::c_int,
            std::ptr::null_mut::<libc::c_ulong>(),
            0 as libc::c_ulong,
            addr,
            MPOL_F_NODE | MPOL_F_ADDR,
        )
    };
    if rc == 0 {
        Ok(node)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Check up to 256 pages spread over the buffer, first and last included.
fn check_pages(base: *const u8, len: usize, page: usize, node: u32) -> PlacementCheck {
    let pages = len / page;
    let samples = pages.min(256);
    let mut wrong = 0;
    let mut example = -1;
    for i in 0..samples {
        let p = if samples <= 1 {
            0
        } else {
            i * (pages - 1) / (samples - 1)
        };
        match node_of(base as usize + p * page) {
            Ok(n) if n == node as i32 => {}
            Ok(n) => {
                wrong += 1;
                example = n;
            }
            Err(e) => return PlacementCheck::Unverified(format!("get_mempolicy failed: {e}")),
        }
    }
    if wrong == 0 {
        PlacementCheck::Verified {
            node,
            pages_checked: samples,
        }
    } else {
        PlacementCheck::Misplaced {
            node,
            wrong_pages: wrong,
            pages_checked: samples,
            example_node: example,
        }
    }
}

/// Pin the calling thread to `cpus`.
pub fn pin_current_thread(cpus: &[u32]) -> Result<(), NumaError> {
    if cpus.is_empty() {
        return Err(NumaError::NoCpus);
    }
    // SAFETY: cpu_set_t is plain data; zeroed is its empty value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: CPU_SET bounds-checks against the set's size.
        unsafe { libc::CPU_SET(c as usize, &mut set) };
    }
    // SAFETY: pid 0 = calling thread; set is a valid cpu_set_t of the given size.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(NumaError::Affinity {
            cpus: cpus.to_vec(),
            cause: io::Error::last_os_error(),
        })
    }
}

/// The CPUs the calling thread may run on.
pub fn current_affinity() -> Vec<u32> {
    // SAFETY: zeroed cpu_set_t is valid; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer and size.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: index within CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .map(|c| c as u32)
        .collect()
}

/// The CPU the calling thread is running on now.
pub fn current_cpu() -> Option<u32> {
    // SAFETY: no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_is_page_rounded_zeroed_and_writable() {
        let mut b = NumaBuffer::new(10_000, None, false).unwrap();
        assert_eq!(b.len() % page_size(), 0);
        assert!(b.len() >= 10_000);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[9_999] = 7;
        assert_eq!(b.as_slice()[9_999], 7);
        assert!(!b.placement().is_verified());
    }

    #[test]
    fn binding_to_node_zero_is_verified_or_explained() {
        // Node 0 exists on every Linux machine with NUMA support; where the kernel or a
        // sandbox refuses mbind, the check must say so instead of claiming success.
        let b = NumaBuffer::new(4 << 20, Some(0), true).unwrap();
        match b.placement() {
            PlacementCheck::Verified {
                node,
                pages_checked,
            } => {
                assert_eq!(*node, 0);
                assert!(*pages_checked > 1);
            }
            PlacementCheck::Unverified(why) => assert!(why.contains("failed"), "{why}"),
            other => panic!("node 0 binding misplaced pages: {other:?}"),
        }
    }

    #[test]
    fn a_bound_buffer_is_faulted_in_by_up_to_one_thread_a_share() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(prefault_threads(PREFAULT_SHARE_BYTES - 1), 1);
        assert_eq!(prefault_threads(2 * PREFAULT_SHARE_BYTES), cpus.min(2));
        assert_eq!(prefault_threads(1 << 40), cpus.min(PREFAULT_THREADS_MAX));
        // Faulted in on several threads, every page is there, zeroed and on its node.
        let b = NumaBuffer::new(2 * PREFAULT_SHARE_BYTES + 4096, Some(0), true).unwrap();
        assert!(b.as_slice().iter().step_by(4096).all(|&x| x == 0));
        assert!(
            !matches!(b.placement(), PlacementCheck::Misplaced { .. }),
            "{:?}",
            b.placement()
        );
    }

    #[test]
    fn a_node_that_does_not_exist_is_not_claimed_verified() {
        let b = NumaBuffer::new(1 << 20, Some(1000), false).unwrap();
        assert!(!b.placement().is_verified(), "{:?}", b.placement());
        assert!(matches!(
            NumaBuffer::new(4096, Some(5000), false),
            Err(NumaError::NodeOutOfRange(5000))
        ));
    }

    #[test]
    fn pinning_moves_the_thread() {
        let allowed = current_affinity();
        assert!(!allowed.is_empty());
        let target = *allowed.last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(&[target]).unwrap();
            assert_eq!(current_affinity(), vec![target]);
            assert_eq!(current_cpu(), Some(target));
        })
        .join()
        .unwrap();
        assert!(matches!(pin_current_thread(&[]), Err(NumaError::NoCpus)));
    }

    const SMAPS: &str = "\
7f0000000000-7f0000800000 rw-p 00000000 00:00 0 
Size:               8192 kB
AnonHugePages:      6144 kB
7f0000800000-7f0000a00000 rw-p 00000000 00:00 0 
Size:               2048 kB
AnonHugePages:         0 kB
7fff00000000-7fff00021000 rw-p 00000000 00:00 0                          [stack]
AnonHugePages:         0 kB
";

    #[test]
    fn huge_pages_are_counted_only_inside_the_range() {
        let mib = 1u64 << 20;
        let base = 0x7f00_0000_0000u64;
        // The whole first mapping: 6 MiB of its 8 on huge pages.
        assert_eq!(huge_bytes_in(SMAPS, base, base + 8 * mib), 6 * mib);
        // Its second half: the first half could hold 4 MiB of them, so at least 2 are ours.
        assert_eq!(
            huge_bytes_in(SMAPS, base + 4 * mib, base + 8 * mib),
            2 * mib
        );
        // A quarter of it: the other 6 MiB could hold them all.
        assert_eq!(huge_bytes_in(SMAPS, base, base + 2 * mib), 0);
        // Across both mappings; the second has none.
        assert_eq!(huge_bytes_in(SMAPS, base, base + 10 * mib), 6 * mib);
        assert_eq!(huge_bytes_in(SMAPS, base + 8 * mib, base + 10 * mib), 0);
        // Nowhere near, and garbage.
        assert_eq!(huge_bytes_in(SMAPS, 0x1000, 0x2000), 0);
        assert_eq!(
            huge_bytes_in("AnonHugePages: 4 kB\nnot-hex zz\n", 0, u64::MAX),
            0
        );
    }

    #[test]
    fn a_live_buffer_reports_its_huge_pages_within_its_size() {
        let b = NumaBuffer::new(8 << 20, None, true).unwrap();
        // Whether the kernel gave huge pages depends on the machine; the figure must be
        // readable here and never exceed the buffer.
        let huge = b
            .huge_page_bytes()
            .expect("/proc/self/smaps is readable on Linux");
        assert!(huge <= b.len() as u64, "{huge} > {}", b.len());
    }

    /// The `VmFlags` of the mapping of `smaps` that holds `addr`.
    fn vm_flags_at(smaps: &str, addr: u64) -> Option<Vec<String>> {
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((a, b)) = mapping_range(line) {
                inside = a <= addr && addr < b;
                continue;
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return Some(flags.split_whitespace().map(String::from).collect());
                }
            }
        }
        None
    }

    #[test]
    fn the_flags_of_the_mapping_holding_an_address_are_found() {
        let smaps = "7f0000000000-7f0000800000 rw-p 00000000 00:00 0\nVmFlags: rd wr mr hg\n\
                     7f0000800000-7f0000a00000 rw-p 00000000 00:00 0\nVmFlags: rd wr nh\n";
        let flags = |addr| vm_flags_at(smaps, addr);
        assert!(flags(0x7f00_0000_1000).unwrap().contains(&"hg".to_string()));
        assert!(flags(0x7f00_0080_0000).unwrap().contains(&"nh".to_string()));
        assert_eq!(flags(0x1000), None);
    }

    /// The kernel's flags of `b`'s mapping (`hg`: MADV_HUGEPAGE, `nh`: MADV_NOHUGEPAGE).
    fn live_flags(b: &NumaBuffer) -> Vec<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("readable on Linux");
        vm_flags_at(&smaps, b.as_ptr() as u64).expect("the buffer is mapped")
    }

    #[test]
    fn each_kind_of_pages_gives_its_advice_to_the_kernel() {
        // A kernel built without transparent huge pages refuses both pieces of advice (the
        // buffer gets base pages either way, which the advice cannot change).
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            eprintln!("SKIPPED: this kernel has no transparent huge pages to advise about");
            return;
        }
        let small = NumaBuffer::with_pages(8 << 20, None, Pages::Small).unwrap();
        assert_eq!(small.len(), 8 << 20);
        let flags = live_flags(&small);
        assert!(flags.contains(&"nh".to_string()), "{flags:?}");
        assert!(!flags.contains(&"hg".to_string()), "{flags:?}");
        // Whatever the system's THP mode, a buffer advised so has no huge pages.
        assert_eq!(small.huge_page_bytes(), Some(0));
        assert!(small.as_slice().iter().all(|&x| x == 0));

        let huge = NumaBuffer::with_pages(8 << 20, None, Pages::Huge).unwrap();
        let flags = live_flags(&huge);
        assert!(flags.contains(&"hg".to_string()), "{flags:?}");
        assert!(!flags.contains(&"nh".to_string()), "{flags:?}");

        let default = NumaBuffer::with_pages(8 << 20, None, Pages::Default).unwrap();
        let flags = live_flags(&default);
        assert!(!flags.contains(&"hg".to_string()), "{flags:?}");
        assert!(!flags.contains(&"nh".to_string()), "{flags:?}");
    }
}
