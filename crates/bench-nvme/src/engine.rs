//! The io_uring engine: one ring per drive at a fixed queue depth, O_DIRECT, one page-aligned
//! NUMA-placed buffer per queue slot registered with the ring (`ReadFixed`/`WriteFixed`), every
//! I/O timed from submission to completion.
//!
//! Sequential runs continue where the previous repetition stopped and wrap at the end of the
//! device, so successive repetitions read new blocks (past the drive's cache) when the device
//! is larger than one repetition.

use hwc_numa::NumaBuffer;
use io_uring::{opcode, types, IoUring};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Transparent huge page size on x86-64: slots start on this boundary.
const HUGE_PAGE: usize = 2 << 20;

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
}

/// Where the next I/O goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    Sequential,
    /// Uniform over the device's blocks (xorshift64*, seeded).
    Random {
        seed: u64,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("io_uring setup with {entries} entries failed: {cause}")]
    Setup { entries: u32, cause: std::io::Error },
    #[error("buffer: {0}")]
    Buffer(String),
    #[error("the device holds {span} bytes, less than one {block}-byte I/O")]
    TooSmall { span: u64, block: u64 },
    #[error("submitting to io_uring failed: {0}")]
    Submit(std::io::Error),
    #[error("{op:?} at offset {offset} failed: {cause}")]
    Io {
        op: Op,
        offset: u64,
        cause: std::io::Error,
    },
    #[error("{op:?} at offset {offset} moved {got} of {want} bytes")]
    Short {
        op: Op,
        offset: u64,
        got: i32,
        want: u64,
    },
    #[error("interrupted (SIGINT/SIGTERM): in-flight I/O drained, nothing left behind")]
    Interrupted,
}

/// What one run of the engine measured.
#[derive(Debug, Clone, PartialEq)]
pub struct RunStats {
    pub bytes: u64,
    pub ios: u64,
    /// From the first submission to the last completion.
    pub seconds: f64,
    pub started: Instant,
    pub finished: Instant,
    pub avg_latency_us: f64,
    pub p50_latency_us: f64,
    pub p99_latency_us: f64,
}

/// Fill a buffer with a non-repeating, non-zero pattern (what writes put on the device).
pub fn fill_pattern(buf: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// Percentile `q` (0..=1) of `v` by nearest rank; reorders `v`. `None` when empty.
pub fn percentile(v: &mut [u32], q: f64) -> Option<u32> {
    if v.is_empty() {
        return None;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    let (_, x, _) = v.select_nth_unstable(rank);
    Some(*x)
}

/// When a run stops submitting.
#[derive(Debug, Clone, Copy)]
enum Limit {
    /// After this many I/Os.
    Ios(u64),
    /// Once this long has passed since the first submission (after at least one I/O), so
    /// that the run's measured span is never shorter than asked.
    For(Duration),
}

/// One drive's ring, buffers and position.
pub struct Engine {
    ring: IoUring,
    file: Arc<File>,
    buffers: NumaBuffer,
    block: u64,
    qd: u32,
    registered: bool,
    /// Where the first slot starts in `buffers` (the first huge-page boundary).
    offset: usize,
    /// Bytes of the device usable by this engine (its size, rounded down to the block size).
    span: u64,
    cursor: u64,
    rng: u64,
    latencies_ns: Vec<u32>,
}

impl Engine {
    /// A ring of `qd` entries and `qd` buffers of `block` bytes on `node` (when given). Buffers
    /// are registered with the ring when the kernel allows it (RLIMIT_MEMLOCK may not), and ask
    /// for transparent huge pages: physically contiguous buffers keep a large I/O in few DMA
    /// segments (with 4 KiB pages a 1 MiB read exceeds a virtio queue's 254 segments and is
    /// split, which halved throughput against fio in the comparison of tools/nvme-reference).
    pub fn new(
        file: Arc<File>,
        device_bytes: u64,
        block: u64,
        qd: u32,
        node: Option<u32>,
    ) -> Result<Self, EngineError> {
        let span = device_bytes / block * block;
        if span == 0 {
            return Err(EngineError::TooSmall {
                span: device_bytes,
                block,
            });
        }
        let qd = qd.max(1);
        let ring = IoUring::new(qd).map_err(|cause| EngineError::Setup { entries: qd, cause })?;
        let total = usize::try_from(block * u64::from(qd))
            .map_err(|_| EngineError::Buffer("buffer larger than the address space".into()))?;
        // One huge page more than needed, so the slots can start on a huge-page boundary: a
        // slot in the unaligned head or tail of the mapping would sit on 4 KiB pages.
        let mut buffers = NumaBuffer::new(total + HUGE_PAGE, node, true)
            .map_err(|e| EngineError::Buffer(e.to_string()))?;
        let offset = (HUGE_PAGE - buffers.as_ptr() as usize % HUGE_PAGE) % HUGE_PAGE;
        fill_pattern(buffers.as_mut_slice(), 0x6877_6365_696c);
        // SAFETY: offset < HUGE_PAGE and the mapping holds total + HUGE_PAGE bytes.
        let base = unsafe { buffers.as_mut_ptr().add(offset) };
        let iovecs: Vec<libc::iovec> = (0..qd as usize)
            .map(|i| libc::iovec {
                // SAFETY: i * block < total: inside the mapping.
                iov_base: unsafe { base.add(i * block as usize) }.cast(),
                iov_len: block as usize,
            })
            .collect();
        // SAFETY: the iovecs describe `buffers`, which lives in this Engine as long as the ring
        // (fields drop in order: `ring` first, so the registration ends before the memory goes).
        let registered = unsafe { ring.submitter().register_buffers(&iovecs) }.is_ok();
        Ok(Self {
            ring,
            file,
            buffers,
            block,
            qd,
            registered,
            offset,
            span,
            cursor: 0,
            rng: 0,
            latencies_ns: Vec::new(),
        })
    }

    pub fn registered(&self) -> bool {
        self.registered
    }

    pub fn placement(&self) -> String {
        self.buffers.placement().describe()
    }

    /// The I/O slots' bytes, and how many of them transparent huge pages back at least (`None`
    /// when `/proc/self/smaps` cannot be read).
    pub fn huge_pages(&self) -> (u64, Option<u64>) {
        let slots = self.block * u64::from(self.qd);
        let huge = self.buffers.huge_page_bytes().map(|h| h.min(slots));
        (slots, huge)
    }

    pub fn placement_verified(&self) -> bool {
        self.buffers.placement().is_verified()
    }

    pub fn span(&self) -> u64 {
        self.span
    }

    /// Every I/O latency of the last run, in ns (unordered).
    pub fn latencies_ns(&self) -> &[u32] {
        &self.latencies_ns
    }

    fn next_offset(&mut self, pattern: Pattern) -> u64 {
        match pattern {
            Pattern::Sequential => {
                if self.cursor + self.block > self.span {
                    self.cursor = 0;
                }
                let o = self.cursor;
                self.cursor += self.block;
                o
            }
            Pattern::Random { seed } => {
                if self.rng == 0 {
                    self.rng = seed | 1;
                }
                self.rng ^= self.rng >> 12;
                self.rng ^= self.rng << 25;
                self.rng ^= self.rng >> 27;
                let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
                (r % (self.span / self.block)) * self.block
            }
        }
    }

    fn entry(&mut self, op: Op, slot: usize, offset: u64) -> io_uring::squeue::Entry {
        let fd = types::Fd(self.file.as_raw_fd());
        let len = self.block as u32;
        // SAFETY: slot < qd, so offset + (slot + 1) × block ≤ offset + total: inside the mapping.
        let ptr = unsafe {
            self.buffers
                .as_mut_ptr()
                .add(self.offset + slot * self.block as usize)
        };
        let e = match (op, self.registered) {
            (Op::Read, true) => opcode::ReadFixed::new(fd, ptr, len, slot as u16)
                .offset(offset)
                .build(),
            (Op::Write, true) => opcode::WriteFixed::new(fd, ptr, len, slot as u16)
                .offset(offset)
                .build(),
            (Op::Read, false) => opcode::Read::new(fd, ptr, len).offset(offset).build(),
            (Op::Write, false) => opcode::Write::new(fd, ptr, len).offset(offset).build(),
        };
        e.user_data(slot as u64)
    }

    /// Move `bytes` (rounded down to whole blocks, at least one) with `qd` I/Os in flight.
    /// Checks `cancel` before the first submission and at every completion: on cancel, submits
    /// nothing more, drains what is in flight and returns [`EngineError::Interrupted`].
    pub fn run(
        &mut self,
        op: Op,
        pattern: Pattern,
        bytes: u64,
        cancel: &AtomicBool,
    ) -> Result<RunStats, EngineError> {
        self.drive(op, pattern, Limit::Ios((bytes / self.block).max(1)), cancel)
    }

    /// Keep `qd` I/Os in flight for `duration` (at least one I/O): no new I/O is submitted
    /// after it, and those in flight complete. Cancel as in [`Engine::run`].
    pub fn run_for(
        &mut self,
        op: Op,
        pattern: Pattern,
        duration: Duration,
        cancel: &AtomicBool,
    ) -> Result<RunStats, EngineError> {
        self.drive(op, pattern, Limit::For(duration), cancel)
    }

    fn drive(
        &mut self,
        op: Op,
        pattern: Pattern,
        limit: Limit,
        cancel: &AtomicBool,
    ) -> Result<RunStats, EngineError> {
        let total_ios = match limit {
            Limit::Ios(n) => n,
            Limit::For(_) => u64::from(self.qd),
        };
        let slots = self.qd as usize;
        let mut issued_at = vec![Instant::now(); slots];
        let mut offsets = vec![0u64; slots];
        self.latencies_ns.clear();
        self.latencies_ns
            .reserve(usize::try_from(total_ios).unwrap_or(0));
        let mut submitted = 0u64;
        let mut completed = 0u64;
        let mut failure: Option<EngineError> = None;
        if cancel.load(Ordering::Relaxed) {
            return Err(EngineError::Interrupted);
        }
        let started = Instant::now();
        let enough = |submitted: u64| match limit {
            Limit::Ios(n) => submitted >= n,
            Limit::For(d) => submitted > 0 && started.elapsed() >= d,
        };
        for slot in 0..slots.min(usize::try_from(total_ios).unwrap_or(slots)) {
            let offset = self.next_offset(pattern);
            let e = self.entry(op, slot, offset);
            offsets[slot] = offset;
            issued_at[slot] = Instant::now();
            // SAFETY: the entry's buffer (slot) stays valid and untouched until its completion.
            unsafe { self.ring.submission().push(&e) }
                .map_err(|_| EngineError::Submit(std::io::Error::other("submission queue full")))?;
            submitted += 1;
        }
        while completed < submitted {
            if let Err(e) = self.ring.submit_and_wait(1) {
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(EngineError::Submit(e));
            }
            let done: Vec<(usize, i32)> = self
                .ring
                .completion()
                .map(|c| (c.user_data() as usize, c.result()))
                .collect();
            let stop = cancel.load(Ordering::Relaxed);
            for (slot, res) in done {
                let now = Instant::now();
                completed += 1;
                let ns = now.duration_since(issued_at[slot]).as_nanos();
                self.latencies_ns
                    .push(u32::try_from(ns).unwrap_or(u32::MAX));
                if res < 0 {
                    failure.get_or_insert(EngineError::Io {
                        op,
                        offset: offsets[slot],
                        cause: std::io::Error::from_raw_os_error(-res),
                    });
                } else if res as u64 != self.block {
                    failure.get_or_insert(EngineError::Short {
                        op,
                        offset: offsets[slot],
                        got: res,
                        want: self.block,
                    });
                }
                if stop || failure.is_some() || enough(submitted) {
                    continue;
                }
                let offset = self.next_offset(pattern);
                let e = self.entry(op, slot, offset);
                offsets[slot] = offset;
                issued_at[slot] = Instant::now();
                // SAFETY: as above; the slot's previous I/O has completed.
                unsafe { self.ring.submission().push(&e) }.map_err(|_| {
                    EngineError::Submit(std::io::Error::other("submission queue full"))
                })?;
                submitted += 1;
            }
            if stop && failure.is_none() {
                failure = Some(EngineError::Interrupted);
            }
        }
        let finished = Instant::now();
        if let Some(f) = failure {
            return Err(f);
        }
        let seconds = finished.duration_since(started).as_secs_f64();
        let n = self.latencies_ns.len().max(1) as f64;
        let avg_ns = self.latencies_ns.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
        let p50 = percentile(&mut self.latencies_ns, 0.50).unwrap_or(0);
        let p99 = percentile(&mut self.latencies_ns, 0.99).unwrap_or(0);
        Ok(RunStats {
            bytes: completed * self.block,
            ios: completed,
            seconds,
            started,
            finished,
            avg_latency_us: avg_ns / 1e3,
            p50_latency_us: f64::from(p50) / 1e3,
            p99_latency_us: f64::from(p99) / 1e3,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let mut v: Vec<u32> = (1..=100).rev().collect();
        assert_eq!(percentile(&mut v, 0.5), Some(50));
        assert_eq!(percentile(&mut v, 0.99), Some(99));
        assert_eq!(percentile(&mut v, 1.0), Some(100));
        assert_eq!(percentile(&mut v, 0.0), Some(1));
        assert_eq!(percentile(&mut [], 0.5), None);
    }

    proptest! {
        #[test]
        fn percentiles_are_members_and_ordered(mut v in proptest::collection::vec(any::<u32>(), 1..500)) {
            let p50 = percentile(&mut v.clone(), 0.5).unwrap();
            let p99 = percentile(&mut v, 0.99).unwrap();
            prop_assert!(v.contains(&p50) && v.contains(&p99));
            prop_assert!(p50 <= p99);
        }
    }

    fn scratch(bytes: u64) -> Option<(tempfile::TempDir, Arc<File>)> {
        let dir = tempfile::tempdir().ok()?;
        let path = dir.path().join("data");
        match crate::device::create_scratch_file(&path, bytes, &AtomicBool::new(false)) {
            Ok(f) => Some((dir, Arc::new(f))),
            Err(e) => {
                eprintln!("SKIPPED: {e}");
                None
            }
        }
    }

    #[test]
    fn sequential_reads_and_writes_cover_the_file_and_wrap() {
        let Some((_dir, file)) = scratch(4 << 20) else {
            return;
        };
        let never = AtomicBool::new(false);
        let mut e = Engine::new(file, 4 << 20, 128 << 10, 8, None).unwrap();
        let r = e
            .run(Op::Read, Pattern::Sequential, 6 << 20, &never)
            .unwrap();
        assert_eq!((r.bytes, r.ios), (6 << 20, 48));
        assert!(r.seconds > 0.0 && r.p50_latency_us > 0.0 && r.p99_latency_us >= r.p50_latency_us);
        assert_eq!(e.cursor, 2 << 20, "6 MiB on a 4 MiB file wraps once");
        let w = e
            .run(Op::Write, Pattern::Sequential, 1 << 20, &never)
            .unwrap();
        assert_eq!(w.ios, 8);
        let r = e
            .run(Op::Read, Pattern::Random { seed: 7 }, 1 << 20, &never)
            .unwrap();
        assert_eq!(r.ios, 8);
    }

    #[test]
    fn a_timed_run_stops_submitting_at_its_deadline() {
        let Some((_dir, file)) = scratch(4 << 20) else {
            return;
        };
        let never = AtomicBool::new(false);
        let mut e = Engine::new(file, 4 << 20, 64 << 10, 4, None).unwrap();
        let r = e
            .run_for(
                Op::Write,
                Pattern::Sequential,
                Duration::from_millis(200),
                &never,
            )
            .unwrap();
        assert!(r.seconds >= 0.2, "ran {} s", r.seconds);
        assert!(r.seconds < 2.0, "ran {} s past a 0.2 s deadline", r.seconds);
        assert_eq!(r.bytes, r.ios * (64 << 10));
        assert_eq!(e.latencies_ns().len() as u64, r.ios);
        // A zero duration still moves at least one block.
        let r = e
            .run_for(
                Op::Read,
                Pattern::Random { seed: 3 },
                Duration::ZERO,
                &never,
            )
            .unwrap();
        assert!(r.ios >= 1 && r.ios <= 4, "{}", r.ios);
    }

    #[test]
    fn cancel_drains_and_reports_interrupted() {
        let Some((_dir, file)) = scratch(1 << 20) else {
            return;
        };
        let cancelled = AtomicBool::new(true);
        let mut e = Engine::new(file, 1 << 20, 4096, 4, None).unwrap();
        let err = e
            .run(Op::Read, Pattern::Sequential, 64 << 20, &cancelled)
            .unwrap_err();
        assert!(matches!(err, EngineError::Interrupted), "{err}");
        // Already cancelled: not one write is submitted.
        let err = e
            .run_for(
                Op::Write,
                Pattern::Sequential,
                Duration::from_secs(1),
                &cancelled,
            )
            .unwrap_err();
        assert!(matches!(err, EngineError::Interrupted), "{err}");
        assert!(
            e.latencies_ns().is_empty(),
            "an I/O was submitted after the cancel"
        );
    }

    #[test]
    fn a_device_smaller_than_one_io_is_refused() {
        let Some((_dir, file)) = scratch(4096) else {
            return;
        };
        assert!(matches!(
            Engine::new(file, 4096, 8192, 1, None),
            Err(EngineError::TooSmall { .. })
        ));
    }
}
