//! The spec's gc-settle test, a protocol the runner does not drive (its length depends on the
//! drive): a read-latency baseline, sustained sequential writes in one-second intervals, then a
//! read-latency probe every interval until the latency is back within 10 % of the baseline or
//! the wait limit passes.
//!
//! It writes: it runs only on a drive or target the write gate approved, through the run's
//! shared descriptors ([`crate::descriptors`]): the device is held exclusively and checked
//! again (still the approved object; not mounted, partitioned or held; no signature) right
//! before the first write. The I/O runs on one thread pinned to the drive's NUMA node.
//!
//! - Probe region: the device's first [`PROBE_REGION_BYTES`] (all of a smaller device), written
//!   once sequentially before the baseline, so every probe reads blocks the drive has mapped (an
//!   unwritten or trimmed block is answered from the controller without reading flash, before
//!   and after the writes alike, and would hide the garbage collection the test looks for).
//! - Baseline: [`GC_BASELINE_PROBES`] probes, one per interval, of [`GC_PROBE_READS`] 4 KiB QD1
//!   reads at random offsets in the probe region; its figure is the median over every read.
//! - Writes: `duration_s` intervals of sequential writes (the case's block size and queue
//!   depth, 128 KiB at QD 32 as planned), each timed; `sustained_write_mbps` is the median of the
//!   last third ([`sustained_intervals`]).
//! - Settle: a probe (as the baseline's) at 0, 1, 2, … s after the last write completed; the
//!   first whose median is within [`GC_SETTLE_TOLERANCE`] of the baseline's ends the test.

use crate::backend::{sleep_until, unit_of, NvmeConfig};
use crate::descriptors::{engine_error, Descriptors};
use crate::engine::{Engine, Op, Pattern};
use hwc_model::long_tests::{
    recommended_settle_s, settled, sustained_intervals, GcSettleResult, NvmeLongTests, SettleProbe,
    GC_BASELINE_PROBES, GC_INTERVAL_S, GC_PROBE_READS,
};
use hwc_model::{Case, CaseResult, Measurement, NvmePattern, Placement, Stats};
use hwc_runner::BenchError;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// Bytes of one probe read.
const PROBE_BLOCK: u64 = 4096;
/// The probes read inside the device's first this many bytes (or all of a smaller device),
/// written once before the baseline.
const PROBE_REGION_BYTES: u64 = 1 << 30;

/// Runs gc-settle cases on the drives and target of one run.
pub struct GcSettleRunner {
    cfg: NvmeConfig,
    files: Descriptors,
    /// The record of each test run as a [`hwc_runner::Procedure`], in order.
    records: Vec<NvmeLongTests>,
}

/// Each gc-settle case, run whole after the runner's engines; its record kept for
/// [`GcSettleRunner::take_records`].
impl hwc_runner::Procedure for GcSettleRunner {
    fn takes(&self, case: &Case) -> bool {
        is_gc_settle(case)
    }

    fn run(&mut self, case: &Case) -> Result<CaseResult, BenchError> {
        let (measured, record) = GcSettleRunner::run(self, case)?;
        self.records.push(record);
        Ok(measured)
    }
}

/// Whether a case is a gc-settle case (run by [`GcSettleRunner`] as a procedure).
pub fn is_gc_settle(case: &Case) -> bool {
    matches!(
        case.spec.nvme().map(|s| &s.pattern),
        Some(NvmePattern::GcSettle { .. })
    )
}

/// What one probe measured: its start, and each read's latency in µs.
struct Probe {
    started: Instant,
    latencies_us: Vec<f64>,
}

fn stats(v: &[f64], what: &str) -> Result<Stats, BenchError> {
    hwc_stats::summarize(v).map_err(|e| BenchError::failed(format!("{what}: {e}")))
}

fn probe(engine: &mut Engine, cancel: &AtomicBool) -> Result<Probe, BenchError> {
    let started = Instant::now();
    engine
        .run(
            Op::Read,
            Pattern::Random { seed: 0x6763 },
            u64::from(GC_PROBE_READS) * PROBE_BLOCK,
            cancel,
        )
        .map_err(engine_error)?;
    Ok(Probe {
        started,
        // A completion is never timed at 0 ns, but the statistics need positive samples.
        latencies_us: engine
            .latencies_ns()
            .iter()
            .map(|&ns| f64::from(ns.max(1)) / 1e3)
            .collect(),
    })
}

impl GcSettleRunner {
    pub(crate) fn new(cfg: NvmeConfig, files: Descriptors) -> Self {
        Self {
            cfg,
            files,
            records: Vec::new(),
        }
    }

    /// The records of the tests run as a procedure so far, taken.
    pub fn take_records(&mut self) -> Vec<NvmeLongTests> {
        std::mem::take(&mut self.records)
    }

    /// Run one gc-settle case: the measurement of its sustained writes (for the profile's
    /// `measurements`) and the whole test's record, under the drive's (or target's) key.
    pub fn run(&self, case: &Case) -> Result<(CaseResult, NvmeLongTests), BenchError> {
        let started = Instant::now();
        let spec = crate::backend::nvme_spec(case)?;
        let [key] = spec.drives.as_slice() else {
            return Err(BenchError::failed("a gc-settle case names one drive"));
        };
        let NvmePattern::GcSettle {
            duration_s,
            settle_max_s,
        } = spec.pattern
        else {
            return Err(BenchError::failed("not a gc-settle case"));
        };
        let block = spec.block_bytes;
        let qd = spec.queue_depth;
        let write_s = duration_s.max(1);
        // Refused unless approved, held exclusively and checked again, before any write.
        let (file, _, size) = self.files.open(&self.cfg, key, true)?;
        let (node, cpus) = unit_of(&self.cfg, key);
        let cancel = self.cfg.cancel;
        let interval = Duration::from_secs_f64(GC_INTERVAL_S);

        let outcome = std::thread::scope(|s| {
            s.spawn(|| -> Result<_, BenchError> {
                if !cpus.is_empty() {
                    hwc_numa::pin_current_thread(&cpus)
                        .map_err(|e| BenchError::failed(e.to_string()))?;
                }
                let region = size.min(PROBE_REGION_BYTES);
                let mut reader = Engine::new(file.clone(), region, PROBE_BLOCK, 1, node)
                    .map_err(engine_error)?;
                let mut writer =
                    Engine::new(file.clone(), size, block, qd, node).map_err(engine_error)?;
                let interrupted = || BenchError::failed("interrupted (SIGINT/SIGTERM)");

                // Precondition: the probe region written once, from offset 0. The writer's
                // sequential cursor then carries on after it.
                let precondition = writer
                    .run(Op::Write, Pattern::Sequential, region, cancel)
                    .map_err(engine_error)?;

                // Baseline: one probe per interval.
                let t0 = Instant::now();
                let mut baseline = Vec::new();
                for i in 0..GC_BASELINE_PROBES {
                    if !sleep_until(t0 + interval * i, cancel) {
                        return Err(interrupted());
                    }
                    baseline.extend(probe(&mut reader, cancel)?.latencies_us);
                }
                let baseline = stats(&baseline, "baseline reads")?;

                // Sustained writes, interval by interval.
                let mut mbps = Vec::new();
                let mut bytes = Vec::new();
                let mut last_write = Instant::now();
                for _ in 0..write_s {
                    let r = writer
                        .run_for(Op::Write, Pattern::Sequential, interval, cancel)
                        .map_err(engine_error)?;
                    bytes.push(r.bytes);
                    mbps.push(r.bytes as f64 / r.seconds / 1e6);
                    last_write = r.finished;
                }

                // Settle: a probe every interval after the last write completed.
                let mut probes = Vec::new();
                let mut settled_at = None;
                for k in 0..=settle_max_s {
                    let due = last_write + interval * u32::try_from(k).unwrap_or(u32::MAX);
                    if !sleep_until(due, cancel) {
                        return Err(interrupted());
                    }
                    let p = probe(&mut reader, cancel)?;
                    let at_s = p.started.duration_since(last_write).as_secs_f64();
                    let latency_us = stats(&p.latencies_us, "settle probe")?;
                    let done = settled(baseline.median, latency_us.median);
                    probes.push(SettleProbe { at_s, latency_us });
                    if done {
                        settled_at = Some(at_s);
                        break;
                    }
                }
                Ok((
                    baseline,
                    mbps,
                    bytes,
                    probes,
                    settled_at,
                    reader,
                    writer,
                    (region, precondition.bytes),
                ))
            })
            .join()
            .unwrap_or_else(|_| Err(BenchError::failed("the gc-settle thread panicked")))
        });
        let (baseline, mbps, bytes, probes, settled_at, reader, writer, (region, precondition)) =
            outcome?;
        let bytes_written: u64 = bytes.iter().sum();

        let sustained = sustained_intervals(&mbps);
        let sustained_write_mbps = stats(sustained, "write intervals")?;
        let timed = sustained.len();
        let gbps: Vec<f64> = mbps.iter().map(|m| m / 1e3).collect();
        let earlier = &gbps[..gbps.len() - timed];
        let placement = Placement {
            cpus: (!cpus.is_empty()).then(|| hwc_model::cpulist::format(&cpus)),
            verified: writer.placement_verified()
                && reader.placement_verified()
                && !cpus.is_empty(),
            detail: format!(
                "{key}: thread on node {}, buffers {}",
                node.map(|n| n.to_string()).unwrap_or_else(|| "?".into()),
                writer.placement()
            ),
        };
        let measurement = Measurement {
            key: case.key.clone(),
            path: case.path,
            engine: case.engine.clone(),
            cell: case.cell.clone(),
            spec: case.spec.clone(),
            // Intervals are timed, not sized: a repetition's bytes are their mean.
            bytes_per_rep: bytes[bytes.len() - timed..].iter().sum::<u64>() / timed as u64,
            gbps: stats(&gbps[gbps.len() - timed..], "write intervals")?,
            cold_gbps: earlier.first().copied(),
            warmup: u32::try_from(earlier.len().saturating_sub(1)).unwrap_or(u32::MAX),
            latency_us: None,
            latency_p50_us: None,
            latency_p99_us: None,
            placement: Some(placement),
            cache_resident: false,
            contended: false,
            spread_limit_pct: None,
            evidence: Default::default(),
            notes: vec![format!(
                "gc-settle: {write_s} one-second intervals of sequential {} writes at QD {qd} \
                 ({bytes_written} bytes); the figure is the median of the last {timed}; the \
                 settle probes (in nvme.long_tests) read the first {} of the device, written \
                 once before the baseline ({precondition} bytes)",
                hwc_model::size_label(block),
                hwc_model::size_label(region)
            )],
        };
        let result = CaseResult {
            measurement,
            samples_gbps: gbps[gbps.len() - timed..].to_vec(),
            warmup_gbps: earlier.iter().skip(1).copied().collect(),
            case_seconds: Some(started.elapsed().as_secs_f64()),
            phase_seconds: None,
            scheduling: None,
        };
        let record = GcSettleResult {
            key: case.key.clone(),
            write_block_bytes: block,
            write_queue_depth: qd,
            interval_s: GC_INTERVAL_S,
            baseline_latency_us: baseline,
            probe_reads: GC_PROBE_READS,
            probe_region_bytes: Some(region),
            write_intervals_mbps: mbps,
            bytes_written,
            sustained_write_mbps,
            settle_max_s,
            settle_probes: probes,
            settled_at_s: settled_at,
            recommended_gc_settle_s: settled_at.map(recommended_settle_s),
        };
        Ok((
            result,
            NvmeLongTests {
                device: key.clone(),
                read_cache: None,
                power_states: None,
                gc_settle: Some(record),
            },
        ))
    }
}
