//! Paths 1 and 2 (NVMe sequential read/write): a throughput matrix and a latency matrix with
//! rows = (drives, block size) and columns = queue depth, the knee of each drive count, the
//! link-saturated rows, and the BDFs each drive count used. Step 3's latency probes go to the
//! inspection table, with the drives' power states and the long drive tests' tables.

use crate::{cell, table, waivers};
use hwc_model::long_tests::{GcSettleResult, NvmeLongTests, PowerStatesResult, ReadCacheResult};
use hwc_model::text::fixed;
use hwc_model::{size_label, Measurement, NvmeTest, PathId, Profile, Stats};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// Fraction of a drive count's peak that defines its knee.
const KNEE_FRACTION: f64 = 0.95;
/// QD16 and QD32 within 2 % of each other: link-saturated.
const SATURATION_TOLERANCE: f64 = 0.02;

/// The sort order of the target's row group: after every drive count.
const TARGET_GROUP: usize = usize::MAX;

/// The row group of a sweep case: `1 drive`, `4 drives`, or `target`.
fn group(m: &Measurement) -> Option<(usize, String)> {
    let s = m.spec.nvme()?;
    if s.target {
        return Some((TARGET_GROUP, format!("target {}", s.drives.join(","))));
    }
    let n = s.drives.len();
    Some((n, format!("{n} drive{}", if n == 1 { "" } else { "s" })))
}

/// (sort order, label) of a row group.
type Group = (usize, String);
/// Block size → queue depth → measurement.
type BySize<'a> = BTreeMap<u64, BTreeMap<u32, &'a Measurement>>;

fn saturated(a: f64, b: f64) -> bool {
    let hi = a.max(b);
    hi > 0.0 && (a - b).abs() <= SATURATION_TOLERANCE * hi
}

pub(crate) fn render(out: &mut String, p: &Profile, path: PathId, title: &str) {
    let _ = writeln!(out, "### {title}\n");
    let ms: Vec<&Measurement> = p
        .measurements_of(path)
        .filter(|m| m.spec.nvme().is_some_and(|s| s.test == NvmeTest::Sweep))
        .collect();
    let engines = crate::engines_of(p, &ms);
    for engine in &engines {
        let mine: Vec<&Measurement> = ms.iter().copied().filter(|m| &m.engine == engine).collect();
        if engines.len() > 1 {
            let _ = writeln!(out, "#### `{engine}` — {}\n", p.engine_title(engine));
        }
        sweep(out, &mine);
    }
    waivers(out, p, path);
    out.push('\n');
}

fn sweep(out: &mut String, ms: &[&Measurement]) {
    let reps: BTreeSet<(u32, u32)> = ms.iter().map(|m| (m.gbps.n, m.warmup)).collect();
    let bytes: BTreeSet<u64> = ms.iter().map(|m| m.bytes_per_rep).collect();
    let _ = writeln!(
        out,
        "Sequential, O_DIRECT, io_uring with registered buffers, one pinned thread per drive. \
         Cells: median GB/s ± spread over {} timed repetitions after {} warm-up (repetitions move {} \
         bytes). **knee** = smallest size ≥ 95 % of that drive count's peak; *link-saturated* = \
         QD16 and QD32 within 2 %.\n",
        reps.iter().map(|r| r.0.to_string()).collect::<Vec<_>>().join("/"),
        reps.iter().map(|r| r.1.to_string()).collect::<Vec<_>>().join("/"),
        bytes.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
    );
    // (group order, group label) → size → qd → measurement.
    let mut rows: BTreeMap<Group, BySize> = BTreeMap::new();
    let mut qds: BTreeSet<u32> = BTreeSet::new();
    let mut used: BTreeMap<Group, Vec<String>> = BTreeMap::new();
    for m in ms {
        let (Some(g), Some(s)) = (group(m), m.spec.nvme()) else {
            continue;
        };
        let (size, qd) = (s.block_bytes, s.queue_depth);
        qds.insert(qd);
        used.insert(g.clone(), s.drives.clone());
        rows.entry(g)
            .or_default()
            .entry(size)
            .or_default()
            .insert(qd, m);
    }
    let knees: BTreeMap<Group, u64> = rows
        .iter()
        .filter_map(|(g, sizes)| {
            let best: Vec<(u64, f64)> = sizes
                .iter()
                .map(|(s, by_qd)| {
                    let b = by_qd.values().map(|m| m.gbps.median).fold(0.0, f64::max);
                    (*s, b)
                })
                .collect();
            let peak = best.iter().map(|b| b.1).fold(0.0, f64::max);
            let k = best
                .iter()
                .filter(|b| b.1 >= KNEE_FRACTION * peak)
                .map(|b| b.0)
                .min()?;
            Some((g.clone(), k))
        })
        .collect();
    let qd_cols: Vec<String> = qds.iter().map(|q| format!("QD{q} GB/s")).collect();
    let mut head: Vec<&str> = vec!["Drives", "Block"];
    head.extend(qd_cols.iter().map(String::as_str));
    head.push("Note");
    let mut trows = Vec::new();
    let mut lrows = Vec::new();
    for (g, sizes) in &rows {
        for (size, by_qd) in sizes {
            let mut r = vec![g.1.clone(), size_label(*size)];
            let mut l = vec![g.1.clone(), size_label(*size)];
            for q in &qds {
                r.push(
                    by_qd
                        .get(q)
                        .map(|m| cell(&m.gbps))
                        .unwrap_or_else(|| "—".into()),
                );
                l.push(
                    by_qd
                        .get(q)
                        .map(|m| latency_cell(m))
                        .unwrap_or_else(|| "—".into()),
                );
            }
            let mut notes = Vec::new();
            if knees.get(g) == Some(size) {
                notes.push("**knee**".to_string());
            }
            if let (Some(a), Some(b)) = (by_qd.get(&16), by_qd.get(&32)) {
                if saturated(a.gbps.median, b.gbps.median) {
                    notes.push("*link-saturated*".into());
                }
            }
            r.push(notes.join(", "));
            trows.push(r);
            lrows.push(l);
        }
    }
    out.push_str("Throughput:\n\n");
    table(out, &head, &trows);
    let lat_cols: Vec<String> = qds
        .iter()
        .map(|q| format!("QD{q} avg / p50 / p99 µs"))
        .collect();
    let mut lhead: Vec<&str> = vec!["Drives", "Block"];
    lhead.extend(lat_cols.iter().map(String::as_str));
    out.push_str("Latency per I/O (submission to completion; medians over repetitions):\n\n");
    table(out, &lhead, &lrows);
    for ((order, label), drives) in &used {
        // A target's label is its path already.
        if *order == TARGET_GROUP {
            continue;
        }
        let _ = writeln!(out, "- {label}: {}", drives.join(", "));
    }
    out.push('\n');
}

/// `86.8 µs ±12.0 % (N=5)`.
fn us_cell(s: &Stats) -> String {
    format!(
        "{} µs ±{} % (N={})",
        fixed(s.median, 1),
        fixed(s.spread_pct, 1),
        s.n
    )
}

/// `nvme0 (0000:10:00.0)` for a drive's key, the path for a `--target`.
fn device_label(p: &Profile, device: &str) -> String {
    p.nvme
        .drives
        .iter()
        .find(|d| d.bdf.as_deref().unwrap_or(&d.name) == device)
        .map(|d| match &d.bdf {
            Some(b) => format!("{} ({b})", d.name),
            None => d.name.clone(),
        })
        .unwrap_or_else(|| device.to_string())
}

/// Each drive's power state descriptors and APST state, from Identify and Get Features.
pub(crate) fn power_states(out: &mut String, p: &Profile) {
    let drives: Vec<_> = p
        .nvme
        .drives
        .iter()
        .filter(|d| !d.power_states.is_empty() || d.power_features.is_some())
        .collect();
    if drives.is_empty() {
        return;
    }
    out.push_str(
        "Power states (Identify Controller descriptors; APST read with Get Features):\n\n",
    );
    let mut rows = Vec::new();
    for d in &drives {
        for s in &d.power_states {
            rows.push(vec![
                d.name.clone(),
                format!("PS{}", s.state),
                fixed(s.max_power_w, 4),
                if s.non_operational { "no" } else { "yes" }.into(),
                s.entry_latency_us.to_string(),
                s.exit_latency_us.to_string(),
            ]);
        }
    }
    if !rows.is_empty() {
        table(
            out,
            &[
                "Drive",
                "State",
                "Max W",
                "Operational",
                "Entry µs",
                "Exit µs",
            ],
            &rows,
        );
    }
    let mut bullets = false;
    for d in &drives {
        let mut parts = Vec::new();
        match d.apst_supported {
            Some(true) => parts.push("APST supported".to_string()),
            Some(false) => parts.push("APST not supported".to_string()),
            None => {}
        }
        if let Some(f) = &d.power_features {
            if let Some(e) = f.apst_enabled {
                parts.push(format!("APST {}", if e { "enabled" } else { "disabled" }));
            }
            if !f.apst_transitions.is_empty() {
                let t: Vec<String> = f
                    .apst_transitions
                    .iter()
                    .map(|t| {
                        format!(
                            "PS{} → PS{} after {} ms idle",
                            t.from_state, t.to_state, t.idle_ms
                        )
                    })
                    .collect();
                parts.push(t.join(", "));
            }
            if let Some(s) = f.current_power_state {
                parts.push(format!("now in PS{s}"));
            }
            parts.extend(f.not_readable.iter().cloned());
        }
        if !parts.is_empty() {
            bullets = true;
            let _ = writeln!(out, "- {}: {}", d.name, parts.join("; "));
        }
    }
    if bullets {
        out.push('\n');
    }
}

/// The long drive tests' tables (read cache, power-state transitions, gc-settle), and their
/// waivers.
pub(crate) fn long_tests(out: &mut String, p: &Profile) {
    let long = |t: hwc_model::NvmeTest| {
        matches!(
            t,
            hwc_model::NvmeTest::ReadCache
                | hwc_model::NvmeTest::PowerStates
                | hwc_model::NvmeTest::GcSettle
        )
    };
    let waived: Vec<_> = p
        .waived
        .iter()
        .filter(|w| match &w.covers {
            // Waived as a whole (`read-cache`), or one of its cases at run time.
            Some(hwc_model::Covers::NvmeTest { test }) => long(*test),
            Some(hwc_model::Covers::Case {
                spec: hwc_model::Spec::Nvme(n),
            }) => long(n.test),
            _ => false,
        })
        .collect();
    if p.nvme.long_tests.is_empty() && waived.is_empty() {
        return;
    }
    out.push_str("### Long drive tests\n\n");
    let with = |f: fn(&NvmeLongTests) -> bool| p.nvme.long_tests.iter().filter(move |t| f(t));
    let caches: Vec<(&str, &ReadCacheResult)> = with(|t| t.read_cache.is_some())
        .filter_map(|t| Some((t.device.as_str(), t.read_cache.as_ref()?)))
        .collect();
    if !caches.is_empty() {
        read_cache(out, p, &caches);
    }
    for t in &p.nvme.long_tests {
        if let Some(ps) = &t.power_states {
            power_transitions(out, &device_label(p, &t.device), ps);
        }
    }
    for t in &p.nvme.long_tests {
        if let Some(g) = &t.gc_settle {
            gc_settle(out, &device_label(p, &t.device), g);
        }
    }
    for w in &waived {
        let _ = writeln!(out, "- **Waived** — {}", crate::waiver_line(w));
    }
    if !waived.is_empty() {
        out.push('\n');
    }
}

fn read_cache(out: &mut String, p: &Profile, caches: &[(&str, &ReadCacheResult)]) {
    let r0 = caches[0].1;
    let _ = writeln!(
        out,
        "**Read cache.** 4 KiB reads at QD 1, random offsets: *hot* re-reads the first {} after a \
         warming pass, *cold* spans the whole device. Cells: median per-repetition average \
         latency ± spread (N timed repetitions). Speedup = cold median / hot median; a read cache \
         when ≥ {}.\n",
        size_label(r0.hot_region_bytes),
        r0.speedup_threshold
    );
    let rows: Vec<Vec<String>> = caches
        .iter()
        .map(|(device, r)| {
            vec![
                device_label(p, device),
                us_cell(&r.hot_latency_us),
                us_cell(&r.cold_latency_us),
                format!("{}×", fixed(r.cache_speedup, 2)),
                if r.has_read_cache { "yes" } else { "no" }.into(),
            ]
        })
        .collect();
    table(
        out,
        &["Device", "Hot", "Cold", "Speedup", "Read cache"],
        &rows,
    );
}

fn power_transitions(out: &mut String, label: &str, ps: &PowerStatesResult) {
    // Profiles written before the absolute floor have no `latency_step_at_s`.
    let step = ps.latency_step_at_s.or(ps.power_state_transition_at_s);
    let rule = match ps.min_excess_us {
        Some(us) => format!(
            "more than {}× the baseline and at least {} µs more",
            ps.transition_factor,
            fixed(us, 0)
        ),
        None => format!("more than {}× the baseline", ps.transition_factor),
    };
    let longest = ps.gaps.last().map(|g| g.idle_s);
    let found = match (step, longest) {
        (Some(s), _) => format!("the first read takes {rule} from the **{s} s** gap on"),
        (None, Some(max)) => format!("no gap up to {max} s made the first read take {rule}"),
        (None, None) => "no idle gap was measured".to_string(),
    };
    let verdict = match (ps.drive_can_change_power_state, step) {
        (Some(false), Some(_)) => {
            " — but the drive reports no APST support and no non-operational power state, so \
             this latency step **cannot be a power-state transition of the drive** (it comes \
             from the host: CPU idle states, virtualisation, the storage stack): \
             `power_state_transition_at_s` is null"
        }
        (Some(false), None) => {
            "; the drive reports no APST support and no non-operational power state: it has no \
             power-state transition to make"
        }
        (Some(true), Some(_)) => {
            " (`power_state_transition_at_s`); the drive reports APST or a non-operational power \
             state: its table above says whether it moves to one after such a gap"
        }
        (None, Some(_)) => {
            " (`power_state_transition_at_s`); the drive's power states are unknown here (no \
             Identify), so the step may come from the host (CPU idle states, virtualisation, the \
             storage stack) rather than a power-state transition"
        }
        (_, None) => "",
    };
    let _ = writeln!(
        out,
        "**Power-state transitions — {label}.** The first 4 KiB read (random offset, QD 1) after \
         an idle gap; baseline (no gap) {}; {found}{verdict}.\n",
        us_cell(&ps.baseline_latency_us),
    );
    let rows: Vec<Vec<String>> = ps
        .gaps
        .iter()
        .map(|g| {
            vec![
                format!("{} s", g.idle_s),
                us_cell(&g.latency_us),
                format!("{}×", fixed(g.vs_baseline, 2)),
            ]
        })
        .collect();
    if !rows.is_empty() {
        table(out, &["Idle gap", "First read", "vs baseline"], &rows);
    }
}

/// At most this many rows of a long series; the rest are elided (all are in the profile).
const SERIES_ROWS: usize = 20;

fn gc_settle(out: &mut String, label: &str, g: &GcSettleResult) {
    let s = &g.sustained_write_mbps;
    let verdict = match (g.settled_at_s, g.recommended_gc_settle_s) {
        (Some(t), Some(r)) => {
            format!(
                "reads settled {} s after the last write: recommended settle **{r} s**",
                fixed(t, 2)
            )
        }
        _ => format!("reads did **not** settle within {} s", g.settle_max_s),
    };
    let _ = writeln!(
        out,
        "**GC settle — {label}.** {} one-second intervals of sequential {} writes at QD {} \
         ({} bytes); sustained write **{} MB/s** ±{} % (median of the last {} intervals; \
         MB/s = 10⁶ B/s). 4 KiB QD 1 read probes of {} reads: baseline {} before writing; {verdict} \
         (rule: the first probe whose median is within 10 % of the baseline's).\n",
        g.write_intervals_mbps.len(),
        size_label(g.write_block_bytes),
        g.write_queue_depth,
        g.bytes_written,
        fixed(s.median, 1),
        fixed(s.spread_pct, 1),
        s.n,
        g.probe_reads,
        us_cell(&g.baseline_latency_us),
    );
    let intervals: Vec<String> = g
        .write_intervals_mbps
        .iter()
        .map(|m| fixed(*m, 1))
        .collect();
    let shown = if intervals.len() > 2 * SERIES_ROWS {
        format!(
            "{}, … ({} more) …, {}",
            intervals[..SERIES_ROWS].join(", "),
            intervals.len() - 2 * SERIES_ROWS,
            intervals[intervals.len() - SERIES_ROWS..].join(", ")
        )
    } else {
        intervals.join(", ")
    };
    let _ = writeln!(
        out,
        "Write MB/s of each one-second interval, in order (one sample each): {shown}.\n"
    );
    let probes = &g.settle_probes;
    let mut rows: Vec<Vec<String>> = Vec::new();
    let row = |p: &hwc_model::long_tests::SettleProbe| {
        vec![
            format!("{} s", fixed(p.at_s, 2)),
            us_cell(&p.latency_us),
            format!(
                "{}×",
                fixed(p.latency_us.median / g.baseline_latency_us.median, 2)
            ),
        ]
    };
    if probes.len() > 2 * SERIES_ROWS {
        rows.extend(probes[..SERIES_ROWS].iter().map(row));
        rows.push(vec![
            format!("… {} more", probes.len() - 2 * SERIES_ROWS),
            String::new(),
            String::new(),
        ]);
        rows.extend(probes[probes.len() - SERIES_ROWS..].iter().map(row));
    } else {
        rows.extend(probes.iter().map(row));
    }
    table(out, &["After writes", "Read probe", "vs baseline"], &rows);
}

/// `avg ±spread / p50 / p99 (N=n)`: the average's median over the repetitions with its spread,
/// and the percentiles' medians over the same repetitions.
fn latency_cell(m: &Measurement) -> String {
    let f = |v: Option<f64>| v.map(|x| fixed(x, 0)).unwrap_or_else(|| "—".into());
    let avg = match m.latency_us {
        Some(s) => format!("{} ±{} %", fixed(s.median, 0), fixed(s.spread_pct, 1)),
        None => "—".into(),
    };
    let n = m
        .latency_us
        .map(|s| format!(" (N={})", s.n))
        .unwrap_or_default();
    format!(
        "{avg} / {} / {}{n}",
        f(m.latency_p50_us),
        f(m.latency_p99_us)
    )
}

#[cfg(test)]
mod tests {
    use crate::render;
    use hwc_model::profile::GpuProfile;
    use hwc_model::topology::{NvmeDrive, NvmeNamespace};
    use hwc_model::{
        CaseResult, EngineId, Measurement, NvmePattern, NvmeSpec, NvmeTest, PathId, Plan,
        Provenance, Spec, Stats, Topology, KIB, MIB,
    };

    fn stats(median: f64) -> Stats {
        Stats {
            median,
            min: median * 0.99,
            max: median * 1.01,
            spread_pct: 2.0,
            n: 5,
        }
    }

    fn case(key: &str, path: PathId, size: u64, qd: u32, drives: &[&str], gbps: f64) -> CaseResult {
        let random = key.contains("random");
        // `<path>/io-uring/<cell>`; the cell's first part says which test.
        let cell = key.splitn(3, '/').nth(2).unwrap_or(key);
        let test = match cell.split('/').next() {
            Some("latency") => NvmeTest::Latency,
            Some("read-cache") => NvmeTest::ReadCache,
            Some("power-states") => NvmeTest::PowerStates,
            Some("gc-settle") => NvmeTest::GcSettle,
            _ => NvmeTest::Sweep,
        };
        CaseResult {
            measurement: Measurement {
                key: key.into(),
                path,
                engine: EngineId::new("io-uring"),
                cell: cell.into(),
                spec: Spec::Nvme(NvmeSpec {
                    test,
                    block_bytes: size,
                    queue_depth: qd,
                    drives: drives.iter().map(|d| d.to_string()).collect(),
                    target: cell.starts_with("target"),
                    pattern: if random {
                        NvmePattern::Random
                    } else {
                        NvmePattern::Sequential
                    },
                }),
                bytes_per_rep: 2 << 30,
                gbps: stats(gbps),
                cold_gbps: Some(gbps),
                warmup: 1,
                latency_us: Some(stats(80.0 * f64::from(qd))),
                latency_p50_us: Some(75.0 * f64::from(qd)),
                latency_p99_us: Some(120.0 * f64::from(qd)),
                placement: None,
                cache_resident: false,
                contended: false,
                spread_limit_pct: None,
                evidence: Default::default(),
                notes: vec![],
            },
            samples_gbps: vec![gbps; 5],
            warmup_gbps: vec![gbps],
            case_seconds: Some(1.0),
            phase_seconds: None,
            scheduling: None,
        }
    }

    fn drive(i: u32, root: &str) -> NvmeDrive {
        NvmeDrive {
            name: format!("nvme{i}"),
            bdf: Some(format!("0000:1{i}:00.0")),
            model: Some("QEMU NVMe Ctrl".into()),
            serial: Some(format!("HWC{i}")),
            firmware_rev: Some("7.2.22".into()),
            transport: Some("pcie".into()),
            numa_node: Some(0),
            root: Some(root.into()),
            pcie_gen: Some(4),
            pcie_width: Some(4),
            driver: Some("nvme".into()),
            namespaces: vec![NvmeNamespace {
                name: format!("nvme{i}n1"),
                size_bytes: Some(1 << 40),
                logical_block_size: Some(4096),
                max_hw_sectors_kb: Some(128),
                partitions: vec![],
                holders: vec![],
                mounts: vec![],
                in_use: false,
            }],
            capacity_bytes: Some(1 << 40),
            capacity_tb: Some(1.1),
            mdts_bytes: Some(128 * KIB),
            mdts_source: Some("identify".into()),
            vwc_present: Some(true),
            ..NvmeDrive::default()
        }
    }

    fn long_case(
        key: &str,
        device: &str,
        pattern: &str,
        idle_ms: Option<u64>,
        us: f64,
    ) -> CaseResult {
        let mut c = case(key, PathId::NvmeRead, 4 * KIB, 1, &[device], 0.04);
        if let Spec::Nvme(s) = &mut c.measurement.spec {
            s.pattern = match (pattern, idle_ms) {
                ("hot", _) => NvmePattern::Hot { region_bytes: MIB },
                (_, Some(idle_ms)) => NvmePattern::Idle { idle_ms },
                ("random", None) => NvmePattern::Random,
                _ => NvmePattern::Sequential,
            };
        }
        c.measurement.latency_us = Some(stats(us));
        c
    }

    #[test]
    fn long_tests_render_their_tables_power_states_and_waivers() {
        use hwc_model::long_tests::{GcSettleResult, NvmeLongTests, SettleProbe};
        use hwc_model::topology::{ApstTransition, PowerFeatures, PowerStateDescriptor};
        let mut d0 = drive(0, "0000:10");
        d0.power_states = vec![
            PowerStateDescriptor {
                state: 0,
                max_power_w: 8.25,
                non_operational: false,
                entry_latency_us: 0,
                exit_latency_us: 0,
            },
            PowerStateDescriptor {
                state: 3,
                max_power_w: 0.05,
                non_operational: true,
                entry_latency_us: 2000,
                exit_latency_us: 10_000,
            },
        ];
        d0.apst_supported = Some(true);
        d0.power_features = Some(PowerFeatures {
            apst_enabled: Some(true),
            apst_transitions: vec![ApstTransition {
                from_state: 0,
                to_state: 3,
                idle_ms: 100,
            }],
            current_power_state: Some(0),
            not_readable: vec![],
        });
        let mut d1 = drive(1, "0000:10");
        d1.power_features = Some(PowerFeatures {
            not_readable: vec!["not readable: APST: Permission denied".into()],
            ..PowerFeatures::default()
        });
        // Like QEMU's drives: one operational state, no APST.
        let mut d2 = drive(2, "0000:10");
        d2.apst_supported = Some(false);
        d2.power_states = vec![PowerStateDescriptor {
            state: 0,
            max_power_w: 25.0,
            non_operational: false,
            entry_latency_us: 0,
            exit_latency_us: 0,
        }];
        let topo = Topology {
            nvme: vec![d0, d1, d2],
            ..Topology::default()
        };
        let a = "0000:10:00.0";
        let c = "0000:12:00.0";
        let results = vec![
            long_case(
                "nvme_read/io-uring/read-cache/nvme0/cold",
                a,
                "random",
                None,
                90.0,
            ),
            long_case(
                "nvme_read/io-uring/read-cache/nvme0/hot",
                a,
                "hot",
                None,
                30.0,
            ),
            long_case(
                "nvme_read/io-uring/power-states/nvme0/idle-0s",
                a,
                "idle",
                Some(0),
                80.0,
            ),
            long_case(
                "nvme_read/io-uring/power-states/nvme0/idle-10ms",
                a,
                "idle",
                Some(10),
                90.0,
            ),
            long_case(
                "nvme_read/io-uring/power-states/nvme0/idle-1s",
                a,
                "idle",
                Some(1000),
                2400.0,
            ),
            long_case(
                "nvme_read/io-uring/power-states/nvme2/idle-0s",
                c,
                "idle",
                Some(0),
                400.0,
            ),
            long_case(
                "nvme_read/io-uring/power-states/nvme2/idle-10ms",
                c,
                "idle",
                Some(10),
                2600.0,
            ),
        ];
        let plan = Plan {
            cases: vec![],
            waived: vec![hwc_model::Waiver {
                engine: None,
                path: PathId::NvmeWrite,
                scope: Some("gc-settle".into()),
                covers: Some(hwc_model::Covers::NvmeTest {
                    test: hwc_model::NvmeTest::GcSettle,
                }),
                reason: "not requested: pass --nvme-long-tests gc-settle".into(),
                hint: None,
            }],
        };
        let prov = Provenance::default();
        let mut p = hwc_profile::build(&topo, &plan, &results, &[], &[], &[], prov);
        let md = render(&p);
        assert!(
            md.contains("| nvme0 (0000:10:00.0) | 30.0 µs ±2.0 % (N=5) | 90.0 µs ±2.0 % (N=5) | 3.00× | yes |"),
            "{md}"
        );
        assert!(
            md.contains("| 1 s | 2400.0 µs ±2.0 % (N=5) | 30.00× |"),
            "{md}"
        );
        assert!(
            md.contains(
                "the first read takes more than 2× the baseline and at least 500 µs more from \
                 the **1 s** gap on (`power_state_transition_at_s`); the drive reports APST"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "from the **0.01 s** gap on — but the drive reports no APST support and no \
                 non-operational power state, so this latency step **cannot be a power-state \
                 transition of the drive**"
            ),
            "{md}"
        );
        assert!(
            md.contains("| 0.01 s | 2600.0 µs ±2.0 % (N=5) | 6.50× |"),
            "{md}"
        );
        assert_eq!(p.nvme.drives[2].power_state_transition_at_s, Some(None));
        assert!(
            md.contains("| nvme0 | PS3 | 0.0500 | no | 2000 | 10000 |"),
            "{md}"
        );
        assert!(
            md.contains(
                "- nvme0: APST supported; APST enabled; PS0 → PS3 after 100 ms idle; now in PS0"
            ),
            "{md}"
        );
        assert!(
            md.contains("- nvme1: not readable: APST: Permission denied"),
            "{md}"
        );
        assert!(
            md.contains(
                "- **Waived** — gc-settle: not requested: pass --nvme-long-tests gc-settle"
            ),
            "{md}"
        );
        assert!(!md.contains("GC settle —"), "not measured: no table");

        let probe = |at_s: f64, us: f64| SettleProbe {
            at_s,
            latency_us: stats(us),
        };
        hwc_profile::nvme::merge_long_tests(
            &mut p.nvme,
            &[NvmeLongTests {
                device: a.into(),
                read_cache: None,
                power_states: None,
                gc_settle: Some(GcSettleResult {
                    key: "nvme_write/io-uring/gc-settle/nvme0".into(),
                    write_block_bytes: 128 * KIB,
                    write_queue_depth: 32,
                    interval_s: 1.0,
                    baseline_latency_us: stats(80.0),
                    probe_reads: 32,
                    probe_region_bytes: Some(64 << 20),
                    write_intervals_mbps: (0..50).map(|i| 3000.0 - f64::from(i)).collect(),
                    bytes_written: 123,
                    sustained_write_mbps: stats(2960.0),
                    settle_max_s: 600,
                    settle_probes: (0..45)
                        .map(|i| probe(f64::from(i), 500.0))
                        .chain([probe(45.0, 85.0)])
                        .collect(),
                    settled_at_s: Some(45.0),
                    recommended_gc_settle_s: Some(45),
                }),
            }],
        );
        let md = render(&p);
        assert!(
            md.contains("sustained write **2960.0 MB/s** ±2.0 % (median of the last 5 intervals"),
            "{md}"
        );
        assert!(md.contains("recommended settle **45 s**"), "{md}");
        assert!(md.contains("3000.0, 2999.0"), "{md}");
        assert!(
            md.contains("… (10 more) …"),
            "50 intervals: 20 shown each end: {md}"
        );
        assert!(md.contains("| … 6 more |  |  |"), "46 probes: {md}");
        assert!(
            md.contains("| 45.00 s | 85.0 µs ±2.0 % (N=5) | 1.06× |"),
            "{md}"
        );
        assert_eq!(p.nvme.drives[0].recommended_gc_settle_s, Some(Some(45)));
    }

    #[test]
    fn nvme_sweeps_render_matrices_knees_saturation_and_the_cold_path() {
        let topo = Topology {
            nvme: vec![drive(0, "0000:10"), drive(1, "0000:10")],
            ..Topology::default()
        };
        let (a, b) = ("0000:10:00.0", "0000:11:00.0");
        let r = PathId::NvmeRead;
        let results = vec![
            case(
                "nvme_read/io-uring/latency/nvme0/4KiB-random/qd1",
                r,
                4 * KIB,
                1,
                &[a],
                0.05,
            ),
            case(
                "nvme_read/io-uring/latency/nvme0/4KiB-random/qd32",
                r,
                4 * KIB,
                32,
                &[a],
                1.2,
            ),
            case(
                "nvme_read/io-uring/1drive/128KiB/qd16",
                r,
                128 * KIB,
                16,
                &[a],
                3.0,
            ),
            case(
                "nvme_read/io-uring/1drive/128KiB/qd32",
                r,
                128 * KIB,
                32,
                &[a],
                3.4,
            ),
            case("nvme_read/io-uring/1drive/1MiB/qd16", r, MIB, 16, &[a], 3.5),
            case(
                "nvme_read/io-uring/1drive/1MiB/qd32",
                r,
                MIB,
                32,
                &[a],
                3.51,
            ),
            case(
                "nvme_read/io-uring/2drive/1MiB/qd16",
                r,
                MIB,
                16,
                &[a, b],
                6.9,
            ),
            case(
                "nvme_read/io-uring/2drive/1MiB/qd32",
                r,
                MIB,
                32,
                &[a, b],
                7.0,
            ),
            case(
                "nvme_read/io-uring/target/1MiB/qd32",
                r,
                MIB,
                32,
                &["/tmp/f"],
                9.0,
            ),
        ];
        let prov = Provenance {
            tool: "hwceiling".into(),
            date: "2026-11-29".into(),
            ..Provenance::default()
        };
        let mut p = hwc_profile::build(&topo, &Plan::default(), &results, &[], &[], &[], prov);
        // Profile fields: per drive count (targets excluded), the QD32 size sweep and its knee.
        assert_eq!(p.nvme.raw_read_gbps["1_drive"], 3.51);
        assert_eq!(p.nvme.raw_read_gbps["2_drive"], 7.0);
        assert_eq!(p.nvme.raw_read_gbps.len(), 2, "the target is not a drive");
        assert_eq!(p.nvme.read_drives_used["2_drive"], [a, b]);
        let sweep = p.nvme.io_size_sweep_read_gbps.clone().unwrap();
        assert_eq!(sweep.points["128kib"], 3.4);
        assert_eq!(sweep.optimal_bytes, Some(128 * KIB), "3.4 ≥ 0.95 × 3.51");
        assert_eq!(p.nvme.same_root_groups["0000:10"], [a, b]);
        let d = &p.nvme.drives[0];
        assert_eq!(d.read_latency_qd1_us, Some(80.0));
        assert_eq!(d.read_latency_qd32_p99_us, Some(3840.0));
        assert_eq!(p.ceilings["nvme_raw_2drive_read_gbps"], 7.0);
        assert_eq!(p.ceilings["nvme_optimal_read_chunk_bytes"], 131072.0);
        assert!(
            !p.ceilings.contains_key("dispatcher_cold_1drive_gbps"),
            "no GPU"
        );

        let md = render(&p);
        assert!(
            md.contains("| 1 drive | 1MiB | 3.50 ±2.0 % | 3.51 ±2.0 % | *link-saturated* |"),
            "{md}"
        );
        assert!(
            md.contains("| 1 drive | 128KiB | 3.00 ±2.0 % | 3.40 ±2.0 % | **knee** |"),
            "{md}"
        );
        assert!(
            md.contains("- 2 drives: 0000:10:00.0, 0000:11:00.0"),
            "{md}"
        );
        assert!(md.contains("| target /tmp/f | 1MiB |"), "{md}");
        // Sweep latencies: the average with its spread and count, the percentiles' medians.
        assert!(
            md.contains(
                "| 1 drive | 1MiB | 1280 ±2.0 % / 1200 / 1920 (N=5) | 2560 ±2.0 % / 2400 / 3840 (N=5) |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| nvme0 | 80 ±2.0 % / 75 / 120 (N=5) | — | 2560 ±2.0 % / 2400 / 3840 (N=5) |"
            ),
            "{md}"
        );
        assert!(md.contains("128KiB (identify)"), "{md}");

        // With a GPU: sub-table 3 takes min(NVMe, H2D) and the crossover.
        p.gpus.insert(
            "gpu0".into(),
            GpuProfile {
                h2d_peak_numa_local_gbps: Some(5.0),
                pci_bdf: "0000:06:00.0".into(),
                ..GpuProfile::default()
            },
        );
        let c = hwc_profile::ceilings_with_sources(&p);
        (p.ceilings, p.ceiling_records) = (c.values, c.records);
        assert_eq!(p.ceilings["dispatcher_cold_1drive_gbps"], 3.51);
        assert_eq!(p.ceilings["dispatcher_cold_2drive_gbps"], 5.0);
        assert!((p.ceilings["dispatcher_cold_crossover_drives"] - 5.0 / 3.51).abs() < 1e-9);
        let md = render(&p);
        assert!(md.contains("| 2 | gpu0 | 5.00 | H2D PCIe"), "{md}");
        assert!(md.contains("| 1 | gpu0 | 3.51 | NVMe aggregate"), "{md}");
        assert!(
            md.contains("Crossover: H2D caps the cold path from **1.4 drives**"),
            "{md}"
        );
        // The bounding measurement's spread and count come with each cold-path ceiling; the
        // H2D figure here is set by hand, not measured: the profile records sources and names
        // none for it, so it says so and shows no spread.
        let row = md.lines().find(|l| l.starts_with("| 1 | gpu0 |")).unwrap();
        assert!(row.contains("N=5"), "{row}");
        let row = md.lines().find(|l| l.starts_with("| 2 | gpu0 |")).unwrap();
        assert!(row.contains("(GB/s: 5.00 (source not recorded))"), "{row}");
        let line = md
            .lines()
            .find(|l| l.starts_with("Crossover: H2D"))
            .unwrap();
        assert!(
            line.contains("5.00 (source not recorded) H2D / 3.51 (±2.0 %, N=5) per drive"),
            "{line}"
        );
    }

    /// `r` with its spread and repetition count set.
    fn spread(mut r: CaseResult, spread_pct: f64, n: u32) -> CaseResult {
        r.measurement.gbps.spread_pct = spread_pct;
        r.measurement.gbps.n = n;
        r
    }

    fn line_starting<'a>(md: &'a str, start: &str) -> &'a str {
        md.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line starts with {start:?}:\n{md}"))
    }

    /// Section 7 of report `md` (the sweeps' own tables show every measurement's spread).
    fn summary(md: &str) -> &str {
        let start = md.find("## 7. Summary").expect("a summary");
        let end = md[start..].find("## 8.").map_or(md.len(), |e| start + e);
        &md[start..end]
    }

    /// Two drives read and written; ahead of each 1-drive pick, a 2-drive QD16 case with the
    /// same median and another spread (±9.0 %, N=3). A GPU whose H2D peak (5.0) bounds the
    /// cold path from 2 drives, set by hand.
    fn equal_medians_profile() -> hwc_model::Profile {
        let topo = Topology {
            nvme: vec![drive(0, "0000:10"), drive(1, "0000:10")],
            ..Topology::default()
        };
        let (a, b) = ("0000:10:00.0", "0000:11:00.0");
        let (r, w) = (PathId::NvmeRead, PathId::NvmeWrite);
        let results = vec![
            spread(
                case(
                    "nvme_read/io-uring/2drive/1MiB/qd16",
                    r,
                    MIB,
                    16,
                    &[a, b],
                    3.51,
                ),
                9.0,
                3,
            ),
            case(
                "nvme_read/io-uring/1drive/1MiB/qd32",
                r,
                MIB,
                32,
                &[a],
                3.51,
            ),
            case(
                "nvme_read/io-uring/2drive/1MiB/qd32",
                r,
                MIB,
                32,
                &[a, b],
                7.0,
            ),
            spread(
                case(
                    "nvme_write/io-uring/2drive/1MiB/qd16",
                    w,
                    MIB,
                    16,
                    &[a, b],
                    2.9,
                ),
                9.0,
                3,
            ),
            case(
                "nvme_write/io-uring/1drive/1MiB/qd32",
                w,
                MIB,
                32,
                &[a],
                2.9,
            ),
            case(
                "nvme_write/io-uring/2drive/1MiB/qd32",
                w,
                MIB,
                32,
                &[a, b],
                5.8,
            ),
        ];
        let prov = Provenance {
            tool: "hwceiling".into(),
            date: "2026-11-30".into(),
            ..Provenance::default()
        };
        let mut p = hwc_profile::build(&topo, &Plan::default(), &results, &[], &[], &[], prov);
        p.gpus.insert(
            "gpu0".into(),
            GpuProfile {
                h2d_peak_numa_local_gbps: Some(5.0),
                pci_bdf: "0000:06:00.0".into(),
                ..GpuProfile::default()
            },
        );
        let c = hwc_profile::ceilings_with_sources(&p);
        (p.ceilings, p.ceiling_records) = (c.values, c.records);
        p
    }

    /// The 1-drive read and write rows, the cold sub-table's NVMe bound and the crossover's
    /// per-drive figure show `read` / `write` (figure and source), and the 2-drive read row keeps
    /// its named source; no spread is borrowed from the 9 %-spread measurement of equal median.
    fn assert_nvme_figures(md: &str, read: &str, write: &str) {
        let row = line_starting(md, "| NVMe → Host read (1 drive)");
        assert!(row.contains(&format!("| {read} |")), "{row}");
        let row = line_starting(md, "| NVMe → Host write (1 drive)");
        assert!(row.contains(&format!("| {write} |")), "{row}");
        // The 2-drive figures are the QD32 cases (no other median equals them).
        let read2 = line_starting(md, "| NVMe → Host read (2 drive)");
        assert!(read2.contains("| 7.00 (±2.0 %, N=5) |"), "{read2}");
        // Sub-table 3: the NVMe bound and the crossover's per-drive figure are the same ceiling.
        let cold = line_starting(md, "| 1 | gpu0 |");
        assert!(cold.contains(&format!("(GB/s: {read})")), "{cold}");
        let cross = line_starting(md, "Crossover: H2D");
        assert!(cross.contains(&format!("/ {read} per drive")), "{cross}");
        assert!(
            !summary(md).contains("±9.0"),
            "no spread from a measurement guessed by value:\n{md}"
        );
    }

    #[test]
    fn nvme_figures_take_spread_and_count_from_the_measurement_their_ceiling_names() {
        let p = equal_medians_profile();
        for (ceiling, source) in [
            (
                "nvme_raw_1drive_read_gbps",
                "nvme_read/io-uring/1drive/1MiB/qd32",
            ),
            (
                "nvme_raw_1drive_write_gbps",
                "nvme_write/io-uring/1drive/1MiB/qd32",
            ),
        ] {
            assert_eq!(
                p.ceiling_records[ceiling].source,
                Some(hwc_model::CeilingSource::measured(source)),
                "{ceiling}"
            );
        }
        let md = render(&p);
        assert_nvme_figures(&md, "3.51 (±2.0 %, N=5)", "2.90 (±2.0 %, N=5)");
        let cold = line_starting(&md, "| 1 | gpu0 |");
        assert!(
            cold.contains("NVMe aggregate, below H2D (GB/s: 3.51 (±2.0 %, N=5))"),
            "{cold}"
        );
    }

    #[test]
    fn an_nvme_figure_whose_source_is_not_recorded_shows_no_spread() {
        let mut p = equal_medians_profile();
        // No source for the 1-drive read ceiling; the write ceiling names a measurement the
        // profile does not hold.
        p.ceiling_records
            .get_mut("nvme_raw_1drive_read_gbps")
            .unwrap()
            .source = None;
        p.ceiling_records
            .get_mut("nvme_raw_1drive_write_gbps")
            .unwrap()
            .source = Some(hwc_model::CeilingSource::measured(
            "nvme_write/io-uring/1drive/1MiB/qd64",
        ));
        // Figures whose sources are named (the 2-drive read) keep their spread.
        assert_nvme_figures(
            &render(&p),
            "3.51 (source not recorded)",
            "2.90 (source not recorded)",
        );
    }

    #[test]
    fn a_write_ceiling_carried_from_an_earlier_run_says_so_in_its_row() {
        let mut p = equal_medians_profile();
        let row = |p: &hwc_model::Profile| {
            line_starting(&render(p), "| NVMe → Host write (1 drive)").to_string()
        };
        assert!(!row(&p).contains("carried"), "{}", row(&p));
        p.ceiling_records
            .get_mut("nvme_raw_1drive_write_gbps")
            .unwrap()
            .carried_from = Some(hwc_model::CarriedFrom {
            file: "hardware_profile_2026-11-28.yaml".into(),
            finished_at: "2026-11-28T10:00:00+00:00".into(),
            drives: vec!["S1".into()],
        });
        assert!(
            row(&p).ends_with(
                "| carried from hardware_profile_2026-11-28.yaml, a write run that finished \
                 2026-11-28T10:00:00+00:00, on blank drives |"
            ),
            "{}",
            row(&p)
        );
    }

    #[test]
    fn a_profile_without_ceiling_sources_keeps_the_equal_median_search() {
        // A profile written before `ceiling_sources`: the old rule, the first measurement of
        // the path with the figure's median (here the 2-drive QD16 case, which it cannot tell
        // from the 1-drive pick: the guess a profile with sources never makes).
        let p = hwc_testkit::unsourced(equal_medians_profile());
        let md = render(&p);
        let read = line_starting(&md, "| NVMe → Host read (1 drive)");
        assert!(read.contains("| 3.51 (±9.0 %, N=3) |"), "{read}");
        let read2 = line_starting(&md, "| NVMe → Host read (2 drive)");
        assert!(read2.contains("| 7.00 (±2.0 %, N=5) |"), "{read2}");
        let cross = line_starting(&md, "Crossover: H2D");
        assert!(cross.contains("5.00 (derived) H2D"), "{cross}");
        assert!(!md.contains("source not recorded"), "{md}");
    }
}
