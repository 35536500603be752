//! Paths 1 and 2 (NVMe sequential read/write): a throughput matrix and a latency matrix with
//! rows = (drives, block size) and columns = queue depth, the knee of each drive count, the
//! link-saturated rows, and the BDFs each drive count used. Step 3's latency probes go to the
//! inspection table.

use crate::{cell, table, waivers};
use hwc_model::{size_label, Measurement, PathId, Profile};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// Fraction of a drive count's peak that defines its knee.
const KNEE_FRACTION: f64 = 0.95;
/// QD16 and QD32 within 2 % of each other: link-saturated.
const SATURATION_TOLERANCE: f64 = 0.02;

/// The row group of a sweep case: `1 drive`, `4 drives`, or `target`.
fn group(m: &Measurement) -> Option<(usize, String)> {
    let seg = m.key.split('/').nth(1)?;
    if seg == "target" {
        return Some((usize::MAX, format!("target {}", m.params.drives.join(","))));
    }
    let n: usize = seg.strip_suffix("drive")?.parse().ok()?;
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
        .filter(|m| m.params.pattern.as_deref() == Some("sequential"))
        .collect();
    if !ms.is_empty() {
        sweep(out, &ms);
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
        let (Some(g), Some(size), Some(qd)) = (group(m), m.params.size_bytes, m.params.queue_depth)
        else {
            continue;
        };
        qds.insert(qd);
        used.insert(g.clone(), m.params.drives.clone());
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
    for ((_, label), drives) in &used {
        let _ = writeln!(out, "- {label}: {}", drives.join(", "));
    }
    out.push('\n');
}

fn latency_cell(m: &Measurement) -> String {
    let f = |v: Option<f64>| v.map(|x| format!("{x:.0}")).unwrap_or_else(|| "—".into());
    format!(
        "{} / {} / {}",
        f(m.latency_us.map(|s| s.median)),
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
        CaseParams, CaseResult, Measurement, PathId, Plan, Provenance, Stats, Topology, KIB, MIB,
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
        CaseResult {
            measurement: Measurement {
                key: key.into(),
                path,
                params: CaseParams {
                    size_bytes: Some(size),
                    queue_depth: Some(qd),
                    drives: drives.iter().map(|d| d.to_string()).collect(),
                    pattern: Some(if random { "random" } else { "sequential" }.into()),
                    ..CaseParams::default()
                },
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
                notes: vec![],
            },
            samples_gbps: vec![gbps; 5],
            warmup_gbps: vec![gbps],
            case_seconds: 1.0,
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
            in_use: false,
            capacity_bytes: Some(1 << 40),
            capacity_tb: Some(1.1),
            mdts_bytes: Some(128 * KIB),
            mdts_source: Some("identify".into()),
            mdts_unlimited: false,
            vwc_present: Some(true),
        }
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
                "nvme_read/latency/nvme0/4KiB-random/qd1",
                r,
                4 * KIB,
                1,
                &[a],
                0.05,
            ),
            case(
                "nvme_read/latency/nvme0/4KiB-random/qd32",
                r,
                4 * KIB,
                32,
                &[a],
                1.2,
            ),
            case("nvme_read/1drive/128KiB/qd16", r, 128 * KIB, 16, &[a], 3.0),
            case("nvme_read/1drive/128KiB/qd32", r, 128 * KIB, 32, &[a], 3.4),
            case("nvme_read/1drive/1MiB/qd16", r, MIB, 16, &[a], 3.5),
            case("nvme_read/1drive/1MiB/qd32", r, MIB, 32, &[a], 3.51),
            case("nvme_read/2drive/1MiB/qd16", r, MIB, 16, &[a, b], 6.9),
            case("nvme_read/2drive/1MiB/qd32", r, MIB, 32, &[a, b], 7.0),
            case("nvme_read/target/1MiB/qd32", r, MIB, 32, &["/tmp/f"], 9.0),
        ];
        let prov = Provenance {
            tool: "hwceiling".into(),
            date: "2026-11-29".into(),
            ..Provenance::default()
        };
        let mut p = hwc_profile::build(&topo, &Plan::default(), &results, &[], &[], prov);
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
        assert!(
            md.contains("| nvme0 | 80 / 75 / 120 | — | 2560 / 2400 / 3840 |"),
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
        p.ceilings = hwc_profile::ceilings(&p);
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
    }
}
