//! The runner's view of NVMe: a [`Backend`] serving `nvme_read` and `nvme_write`. One case runs
//! one engine per drive, each on its own thread pinned to the drive's NUMA node, started
//! together behind a barrier; a repetition's time runs from the first submission to the last
//! completion over all drives.
//!
//! The long tests' read cases ride on the same machinery: the read-cache test's hot reads are
//! random reads confined to a region (`region_bytes`); the power-state test's repetition is one
//! read after an idle gap ([`IdleRead`]). The gc-settle test is a protocol of its own
//! ([`crate::gc::GcSettleRunner`]), which the runner does not drive.

use crate::descriptors::{engine_error, Approved, Descriptors};
use crate::device::Kind;
use crate::engine::{percentile, Engine, Op, Pattern};
use crate::gc::GcSettleRunner;
use hwc_model::{
    Case, CellKind, EngineDecl, EngineId, Needs, NvmePattern, NvmeSpec, PathId, Placement, Spec,
};
use hwc_runner::{BenchError, Engine as RunEngine, Prepared, Rep};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// One drive the backend may measure, as the plan names it (`key`: its BDF, or its controller
/// name when it has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriveUnit {
    pub key: String,
    /// The namespace block device, e.g. `/dev/nvme0n1`.
    pub device: PathBuf,
    pub node: Option<u32>,
    /// CPUs of `node`, where the drive's I/O thread is pinned.
    pub cpus: Vec<u32>,
}

/// A `--target` file or block device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetUnit {
    pub key: String,
    pub path: PathBuf,
    /// Create the file (it does not exist): this many bytes, removed when hwceiling ends.
    pub create_bytes: Option<u64>,
    /// The node whose CPUs run the I/O thread (the machine's only node, when it has one).
    pub node: Option<u32>,
    pub cpus: Vec<u32>,
}

/// Everything the backend needs, decided before the run (the gate has passed `writable`).
#[derive(Clone)]
pub struct NvmeConfig {
    pub drives: Vec<DriveUnit>,
    pub target: Option<TargetUnit>,
    /// Keys the write gate approved, with what exactly it approved under each.
    pub writable: BTreeMap<String, Approved>,
    /// Bytes per drive per sequential repetition (a smaller device is read more than once).
    pub bytes_per_drive: u64,
    /// Bytes per drive per random-read latency repetition.
    pub latency_bytes: u64,
    pub cancel: &'static AtomicBool,
}

/// The kernel io_uring NVMe backend.
pub struct NvmeBackend {
    cfg: NvmeConfig,
    /// The run's descriptors, shared with the gc-settle runner.
    files: Descriptors,
    /// Facts for the profile's provenance (e.g. drives that did not answer Identify).
    environment: hwc_model::Environment,
}

impl NvmeBackend {
    pub fn new(cfg: NvmeConfig) -> Self {
        Self {
            cfg,
            files: Descriptors::default(),
            environment: BTreeMap::new(),
        }
    }

    /// Record a fact for the profile's provenance.
    pub fn note_environment(&mut self, key: &str, value: hwc_model::Setting) {
        self.environment.insert(key.to_string(), value);
    }

    /// What runs the gc-settle cases (outside the runner): the same drives, target, write
    /// approvals, cancel flag and descriptors (a device held for writing is held once).
    pub fn gc_settle_runner(&self) -> GcSettleRunner {
        GcSettleRunner::new(self.cfg.clone(), self.files.clone())
    }

    /// The NUMA node and CPUs of a drive or the target.
    fn unit_of(&self, key: &str) -> (Option<u32>, Vec<u32>) {
        unit_of(&self.cfg, key)
    }

    /// The power-state test's repetition: one 4 KiB read after an idle gap.
    fn prepare_idle(
        &mut self,
        spec: &NvmeSpec,
        idle_ms: u64,
    ) -> Result<Box<dyn Prepared + '_>, BenchError> {
        let [key] = spec.drives.as_slice() else {
            return Err(BenchError::failed("an idle-read case names one drive"));
        };
        let block = spec.block_bytes;
        let gap = Duration::from_millis(idle_ms);
        let (file, _, size) = self.files.open(&self.cfg, key, false)?;
        let (node, cpus) = self.unit_of(key);
        let engine = Engine::new(file, size, block, 1, node).map_err(engine_error)?;
        let placement = Placement {
            cpus: (!cpus.is_empty()).then(|| hwc_model::cpulist::format(&cpus)),
            verified: engine.placement_verified() && !cpus.is_empty(),
            detail: format!(
                "{key}: thread on node {}, buffers {}",
                node.map(|n| n.to_string()).unwrap_or_else(|| "?".into()),
                engine.placement()
            ),
        };
        Ok(Box::new(IdleRead {
            engine,
            cpus,
            gap,
            block,
            last_done: None,
            last_bytes: 0,
            last_latency_us: None,
            cancel: self.cfg.cancel,
            placement,
            key: key.clone(),
        }))
    }
}

/// The NUMA node and CPUs of a drive or the target.
pub(crate) fn unit_of(cfg: &NvmeConfig, key: &str) -> (Option<u32>, Vec<u32>) {
    match (&cfg.target, cfg.drives.iter().find(|d| d.key == key)) {
        (_, Some(u)) => (u.node, u.cpus.clone()),
        (Some(t), None) if t.key == key => (t.node, t.cpus.clone()),
        _ => (None, Vec::new()),
    }
}

/// The kernel NVMe engine's id.
pub const ENGINE: EngineId = EngineId::new("io-uring");

/// The kernel NVMe engine's declaration: O_DIRECT io_uring reads and writes through the kernel's
/// NVMe driver, the sweeps and the long tests.
pub fn decl() -> EngineDecl {
    EngineDecl {
        id: ENGINE,
        title: "kernel NVMe: io_uring, O_DIRECT, registered buffers, one ring per drive".into(),
        paths: vec![PathId::NvmeRead, PathId::NvmeWrite],
        cells: vec![CellKind::Sweep, CellKind::LongTest],
        needs: Needs {
            writes_devices: true,
            ..Needs::default()
        },
        hardware: true,
        default_on: true,
    }
}

/// A case's NVMe spec.
pub(crate) fn nvme_spec(case: &Case) -> Result<&NvmeSpec, BenchError> {
    match &case.spec {
        Spec::Nvme(s) => Ok(s),
        other => Err(BenchError::failed(format!(
            "the NVMe engine was given a {} case",
            other.kind()
        ))),
    }
}

impl RunEngine for NvmeBackend {
    fn id(&self) -> EngineId {
        ENGINE
    }

    fn finish(&mut self) {
        self.files.close_drives();
    }

    fn prepare<'a>(&'a mut self, case: &Case) -> Result<Box<dyn Prepared + 'a>, BenchError> {
        let op = if case.path == PathId::NvmeWrite {
            Op::Write
        } else {
            Op::Read
        };
        let spec = nvme_spec(case)?;
        let block = spec.block_bytes;
        let qd = spec.queue_depth;
        let mut region = None;
        let pattern = match &spec.pattern {
            NvmePattern::Idle { idle_ms } => return self.prepare_idle(spec, *idle_ms),
            NvmePattern::GcSettle { .. } => {
                return Err(BenchError::failed(
                    "gc-settle is a protocol of its own (GcSettleRunner), not a runner case",
                ))
            }
            NvmePattern::Hot { region_bytes } => {
                region = Some(*region_bytes);
                Pattern::Random { seed: 0x9e37_79b9 }
            }
            NvmePattern::Random => Pattern::Random { seed: 0x9e37_79b9 },
            NvmePattern::Sequential => Pattern::Sequential,
        };
        let mut units = Vec::new();
        let mut notes = Vec::new();
        let mut placement = Vec::new();
        let mut verified = true;
        let mut all_cpus = Vec::new();
        for key in &spec.drives {
            let (file, kind, size) = self.files.open(&self.cfg, key, op == Op::Write)?;
            let (node, cpus) = self.unit_of(key);
            // The read-cache test's hot reads stay in the device's first `region_bytes`.
            let span = region.map_or(size, |r| r.min(size));
            if span < size {
                notes.push(format!(
                    "{key}: every read falls in the first {} of the device (re-read after the \
                     cold repetition and warm-up: a hot region)",
                    hwc_model::size_label(span)
                ));
            }
            let engine = Engine::new(file, span, block, qd, node).map_err(engine_error)?;
            let budget = match pattern {
                Pattern::Sequential => self.cfg.bytes_per_drive,
                Pattern::Random { .. } => self.cfg.latency_bytes,
            };
            // A device smaller than a repetition is passed over more than once (sequential
            // I/O wraps): short repetitions would be dominated by filling and draining the queue.
            let bytes = (budget / block).max(1) * block;
            if pattern == Pattern::Sequential && engine.span() < bytes {
                notes.push(format!(
                    "{key}: the device holds {} bytes, less than the {bytes} bytes of a repetition: \
                     each repetition reads it {:.1} times over (its cache may serve the re-reads)",
                    engine.span(),
                    bytes as f64 / engine.span() as f64
                ));
            }
            if kind == Kind::File {
                notes.push(format!(
                    "{key} is a regular file: O_DIRECT bypasses this machine's page cache, but a \
                     virtual disk may still be cached by its host"
                ));
            }
            if !engine.registered() {
                notes.push(format!(
                    "{key}: io_uring refused to register the buffers (RLIMIT_MEMLOCK?): plain \
                     read/write operations were used"
                ));
            }
            let (slot_bytes, huge) = engine.huge_pages();
            let huge_text = match huge {
                Some(h) => format!(
                    "{} of {} on transparent huge pages",
                    hwc_model::size_label(h),
                    hwc_model::size_label(slot_bytes)
                ),
                None => "huge pages not readable (/proc/self/smaps)".to_string(),
            };
            if huge.is_some_and(|h| h < slot_bytes) && block > 4096 {
                notes.push(format!(
                    "{key}: only {huge_text}: an I/O on 4 KiB pages needs one DMA segment per \
                     page and may be split, so this figure can be lower than the drive's"
                ));
            }
            verified &= engine.placement_verified() && !cpus.is_empty();
            placement.push(format!(
                "{key}: thread on node {} CPUs {}, buffers {}, {huge_text}",
                node.map(|n| n.to_string()).unwrap_or_else(|| "?".into()),
                if cpus.is_empty() {
                    "unpinned".to_string()
                } else {
                    hwc_model::cpulist::format(&cpus)
                },
                engine.placement()
            ));
            all_cpus.extend(cpus.iter().copied());
            units.push(Unit {
                engine,
                cpus,
                bytes,
            });
        }
        if units.is_empty() {
            return Err(BenchError::failed("an NVMe case needs at least one drive"));
        }
        Ok(Box::new(NvmeRun {
            units,
            op,
            pattern,
            block,
            cancel: self.cfg.cancel,
            last_bytes: 0,
            last_latency: None,
            notes,
            placement: Placement {
                cpus: (!all_cpus.is_empty()).then(|| hwc_model::cpulist::format(&all_cpus)),
                verified,
                detail: placement.join("; "),
            },
        }))
    }

    fn environment(&self) -> hwc_model::Environment {
        let mut e = self.environment.clone();
        e.insert(
            "nvme_engine".into(),
            hwc_model::Setting::about(
                "io_uring",
                "io-uring 0.7, O_DIRECT, registered buffers, one pinned thread per drive",
            ),
        );
        e
    }
}

struct Unit {
    engine: Engine,
    cpus: Vec<u32>,
    bytes: u64,
}

/// A prepared NVMe case.
struct NvmeRun {
    units: Vec<Unit>,
    op: Op,
    pattern: Pattern,
    block: u64,
    cancel: &'static AtomicBool,
    last_bytes: u64,
    /// (average, p50, p99) µs over every I/O of the last repetition.
    last_latency: Option<(f64, f64, f64)>,
    notes: Vec<String>,
    placement: Placement,
}

impl Prepared for NvmeRun {
    fn bytes_per_rep(&self) -> u64 {
        self.units.iter().map(|u| u.bytes).sum()
    }

    fn run_once(&mut self) -> Result<Rep, BenchError> {
        let barrier = Barrier::new(self.units.len());
        let (op, pattern, cancel) = (self.op, self.pattern, self.cancel);
        let results: Vec<Result<_, String>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .units
                .iter_mut()
                .map(|u| {
                    let barrier = &barrier;
                    s.spawn(move || {
                        if !u.cpus.is_empty() {
                            hwc_numa::pin_current_thread(&u.cpus).map_err(|e| e.to_string())?;
                        }
                        barrier.wait();
                        u.engine
                            .run(op, pattern, u.bytes, cancel)
                            .map_err(|e| e.to_string())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("an I/O thread panicked".to_string()))
                })
                .collect()
        });
        let stats = results
            .into_iter()
            .collect::<Result<Vec<_>, String>>()
            .map_err(BenchError::failed)?;
        let mut all_lat: Vec<u32> = self
            .units
            .iter()
            .flat_map(|u| u.engine.latencies_ns().iter().copied())
            .collect();
        let start = stats.iter().map(|s| s.started).min();
        let end = stats.iter().map(|s| s.finished).max();
        let (Some(start), Some(end)) = (start, end) else {
            return Err(BenchError::failed("no drive ran"));
        };
        self.last_bytes = stats.iter().map(|s| s.bytes).sum();
        let ios: u64 = stats.iter().map(|s| s.ios).sum();
        let avg = stats
            .iter()
            .map(|s| s.avg_latency_us * s.ios as f64)
            .sum::<f64>()
            / ios.max(1) as f64;
        let p50 = percentile(&mut all_lat, 0.5).map(|x| f64::from(x) / 1e3);
        let p99 = percentile(&mut all_lat, 0.99).map(|x| f64::from(x) / 1e3);
        self.last_latency = p50.zip(p99).map(|(a, b)| (avg, a, b));
        Ok(Rep {
            seconds: end.duration_since(start).as_secs_f64(),
            wall_seconds: None,
        })
    }

    fn verify(&mut self) -> Result<(), BenchError> {
        let want = self.bytes_per_rep();
        if self.last_bytes != want {
            return Err(BenchError::failed(format!(
                "the repetition moved {} of {want} bytes",
                self.last_bytes
            )));
        }
        if !self.last_bytes.is_multiple_of(self.block) {
            return Err(BenchError::failed("a partial block was counted"));
        }
        Ok(())
    }

    fn placement(&self) -> Option<Placement> {
        Some(self.placement.clone())
    }

    fn last_latency_us(&self) -> Option<f64> {
        self.last_latency.map(|l| l.0)
    }

    fn last_latency_percentiles_us(&self) -> Option<(f64, f64)> {
        self.last_latency.map(|l| (l.1, l.2))
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}

/// The power-state test's repetition: wait `gap` after the previous read completed (after
/// `gap` from now, for the first), then time one read at a random offset. The wait is not
/// timed; the repetition's time is the read's, submission to completion.
pub(crate) struct IdleRead {
    engine: Engine,
    cpus: Vec<u32>,
    gap: Duration,
    block: u64,
    last_done: Option<Instant>,
    last_bytes: u64,
    last_latency_us: Option<f64>,
    cancel: &'static AtomicBool,
    placement: Placement,
    key: String,
}

/// Sleep until `until`, waking every 100 ms to check `cancel`; false when cancelled.
pub(crate) fn sleep_until(until: Instant, cancel: &AtomicBool) -> bool {
    loop {
        if cancel.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= until {
            return true;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(100)));
    }
}

impl Prepared for IdleRead {
    fn bytes_per_rep(&self) -> u64 {
        self.block
    }

    fn run_once(&mut self) -> Result<Rep, BenchError> {
        let until = self.last_done.unwrap_or_else(Instant::now) + self.gap;
        let (cpus, cancel, block) = (&self.cpus, self.cancel, self.block);
        let engine = &mut self.engine;
        let r = std::thread::scope(|s| {
            s.spawn(move || {
                if !cpus.is_empty() {
                    hwc_numa::pin_current_thread(cpus).map_err(|e| e.to_string())?;
                }
                if !sleep_until(until, cancel) {
                    return Err("interrupted during the idle gap".to_string());
                }
                engine
                    .run(Op::Read, Pattern::Random { seed: 0x1d1e }, block, cancel)
                    .map_err(|e| e.to_string())
            })
            .join()
            .unwrap_or_else(|_| Err("the I/O thread panicked".to_string()))
        })
        .map_err(BenchError::failed)?;
        self.last_done = Some(r.finished);
        self.last_bytes = r.bytes;
        self.last_latency_us = Some(r.avg_latency_us);
        Ok(Rep {
            seconds: r.seconds,
            wall_seconds: None,
        })
    }

    fn verify(&mut self) -> Result<(), BenchError> {
        if self.last_bytes != self.block {
            return Err(BenchError::failed(format!(
                "the idle read moved {} of {} bytes",
                self.last_bytes, self.block
            )));
        }
        Ok(())
    }

    fn placement(&self) -> Option<Placement> {
        Some(self.placement.clone())
    }

    fn last_latency_us(&self) -> Option<f64> {
        self.last_latency_us
    }

    fn notes(&self) -> Vec<String> {
        vec![format!(
            "{}: each repetition is one {}-byte read at a random offset, {} ms after the previous \
             one completed (the wait is not timed)",
            self.key,
            self.block,
            self.gap.as_millis()
        )]
    }
}
