//! Section 5: one matrix per data path (spec Paths 1–8), or the path's waivers.

use crate::{cell, gbps, table, waivers};
use hwc_model::text::fixed;
use hwc_model::{size_label, CopyDirection, Measurement, PathId, Profile};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

pub(crate) fn render(out: &mut String, p: &Profile, charts: &[crate::ChartLink]) {
    out.push_str("## 5. Data paths\n\n");
    type Section = fn(&mut String, &Profile);
    let sections: [(&[PathId], Section); 8] = [
        (&[PathId::NvmeRead], |o, p| {
            crate::nvme::render(
                o,
                p,
                PathId::NvmeRead,
                "Path 1 — NVMe → host RAM sequential read",
            )
        }),
        (&[PathId::NvmeWrite], |o, p| {
            crate::nvme::render(
                o,
                p,
                PathId::NvmeWrite,
                "Path 2 — host RAM → NVMe sequential write",
            )
        }),
        (&[PathId::H2d, PathId::D2h, PathId::Duplex], gpu_copies),
        (&[PathId::D2d], d2d),
        (&[PathId::Gdrcopy], gdrcopy),
        (&[PathId::Gds], gds),
        (&[PathId::HostRam], host_ram),
        (&[PathId::NvmeBar1], nvme_bar),
    ];
    for (paths, section) in sections {
        let mut body = String::new();
        section(&mut body, p);
        let failed = failures(p, paths);
        // A section that printed only its heading: say so rather than leave it blank.
        if body.trim_end().lines().count() == 1 {
            let why = if failed.is_empty() {
                "not selected with --paths, or no case finished"
            } else {
                "every case planned failed"
            };
            body = format!(
                "{}\n\nNot measured in this run ({why}).\n\n",
                body.trim_end()
            );
        }
        // The section's charts, under its heading.
        let mut links = String::new();
        for &path in paths {
            crate::chart_links(&mut links, charts, Some(path));
        }
        match body.find("\n\n") {
            Some(i) if !links.is_empty() => {
                out.push_str(&body[..i + 2]);
                out.push_str(&links);
                out.push_str(&body[i + 2..]);
            }
            _ => out.push_str(&body),
        }
        out.push_str(&failed);
    }
}

/// The section's failed cases, one line per error: how many, and which (all of them when few;
/// the appendix lists every one).
fn failures(p: &Profile, paths: &[PathId]) -> String {
    const NAMED: usize = 4;
    let groups = hwc_model::failure_groups(p.failures.iter().filter(|f| paths.contains(&f.path)));
    let mut out = String::new();
    for g in &groups {
        let which = if g.keys.len() <= NAMED {
            g.keys
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            format!(
                "`{}` … `{}`, all listed under Failed cases in Appendix A",
                g.keys[0],
                g.keys[g.keys.len() - 1]
            )
        };
        let _ = writeln!(
            out,
            "- **Failed** — {} case(s), no figure: {} ({which})",
            g.keys.len(),
            g.error
        );
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// A matrix cell with its flags.
fn flagged(m: &Measurement) -> String {
    let mut s = cell(&m.gbps);
    if m.cache_resident {
        s.push_str(" *cache*");
    }
    if m.contended {
        s.push_str(" *contended*");
    }
    if m.unsteady() {
        s.push_str(" *unsteady*");
    }
    if disturbed(m).is_some() {
        s.push_str(" *disturbed*");
    }
    s
}

/// Rows by size, one column per label; `—` where a cell was not measured.
fn matrix<'a>(
    out: &mut String,
    first: &str,
    ms: impl Iterator<Item = &'a Measurement>,
    column: impl Fn(&Measurement) -> String,
) {
    let mut cells: BTreeMap<u64, BTreeMap<String, String>> = BTreeMap::new();
    let mut columns: Vec<String> = Vec::new();
    for m in ms {
        let col = column(m);
        if !columns.contains(&col) {
            columns.push(col.clone());
        }
        let size = m.spec.size_bytes();
        cells.entry(size).or_default().insert(col, flagged(m));
    }
    let mut head = vec![first];
    head.extend(columns.iter().map(String::as_str));
    let rows: Vec<Vec<String>> = cells
        .iter()
        .map(|(size, row)| {
            let mut r = vec![size_label(*size)];
            r.extend(
                columns
                    .iter()
                    .map(|c| row.get(c).cloned().unwrap_or_else(|| "—".into())),
            );
            r
        })
        .collect();
    table(out, &head, &rows);
}

/// What the cells hold and how many repetitions made them: the count where every case had the
/// same, else the range (each case's own is in Appendix A).
pub(crate) fn reps_line(out: &mut String, ms: &[&Measurement]) {
    let ns: BTreeSet<u32> = ms.iter().map(|m| m.gbps.n).collect();
    let warmups: BTreeSet<u32> = ms.iter().map(|m| m.warmup).collect();
    let range = |set: &BTreeSet<u32>| match (set.first(), set.last()) {
        (Some(a), Some(b)) if a == b => a.to_string(),
        (Some(a), Some(b)) => format!("{a} to {b}"),
        _ => String::new(),
    };
    if ms.is_empty() {
        return;
    }
    let each = if ns.len() > 1 || warmups.len() > 1 {
        " (each case's: Appendix A)"
    } else {
        ""
    };
    let after = if warmups.iter().all(|&w| w == 0) {
        "the cold one".to_string()
    } else {
        format!("the cold one and {} warm-up", range(&warmups))
    };
    let _ = writeln!(
        out,
        "Cells: median GB/s ± spread; {} timed repetitions after {after}{each}.\n",
        range(&ns),
    );
}

/// Which of `paths`' figures were held to a spread (as the profile records it, so the line
/// follows the plan's rule), what that means, and what *unsteady* marks.
fn spread_limit_line(out: &mut String, p: &Profile, paths: &[PathId]) {
    let held: Vec<&Measurement> = p
        .measurements
        .iter()
        .filter(|m| paths.contains(&m.path) && m.spread_limit_pct.is_some())
        .collect();
    let limits: BTreeSet<u32> = held.iter().filter_map(|m| m.spread_limit_pct).collect();
    let smallest = held.iter().map(|m| m.spec.size_bytes()).min();
    let (false, Some(smallest)) = (limits.is_empty(), smallest) else {
        return;
    };
    let limits: Vec<String> = limits.iter().map(|l| format!("{l} %")).collect();
    let _ = writeln!(
        out,
        "Copies of {} or more here are held to a spread of {}: one that spread more was timed \
         again and keeps its steadiest window (docs/gpu-method.md); *unsteady*: that window \
         still spread more.\n",
        size_label(smallest),
        limits.join(" or ")
    );
}

/// Path 6: the mode cuFile ran in first, then per GPU and drive group a table of block size ×
/// depth with cuFile and the POSIX bounce side by side, and cuFile's share of the bounce.
fn gds(out: &mut String, p: &Profile) {
    let _ = writeln!(out, "### Path 6 — NVMe → GPU through GPUDirect Storage\n");
    let ms: Vec<&Measurement> = p.measurements_of(PathId::Gds).collect();
    if !ms.is_empty() {
        let why = p
            .provenance
            .environment
            .get("gds.mode")
            .and_then(|s| s.about.clone())
            .unwrap_or_default();
        let mode = match p.gds.mode.as_deref() {
            Some("compat") => "**compat** mode: a POSIX bounce inside libcufile, **not \
                               GPUDirect**; no figure here is a GDS ceiling"
                .to_string(),
            Some(m) => format!("**{m}** mode (GPUDirect)"),
            None => String::new(),
        };
        if mode.is_empty() {
            let _ = writeln!(out, "cuFile did not run: {why}.\n");
        } else {
            let _ = writeln!(out, "cuFile ran in {mode}. Evidence: {why}.\n");
        }
        reps_line(out, &ms);
        // A table per GPU, direction and group of drives (or target), from the specs.
        let group = |m: &Measurement| {
            m.spec
                .gds()
                .map(|s| (s.gpu.clone(), s.write, s.drives.clone()))
        };
        let groups: BTreeSet<_> = ms.iter().filter_map(|m| group(m)).collect();
        for g in groups {
            let mine: Vec<&Measurement> = ms
                .iter()
                .copied()
                .filter(|m| group(m).as_ref() == Some(&g))
                .collect();
            let (gpu, write, drives) = &g;
            let way = if *write { "writes to" } else { "reads from" };
            let _ = writeln!(out, "#### {gpu} {way} {}\n", drives.join(", "));
            let mut rows: BTreeMap<(u64, u32), [Option<&Measurement>; 2]> = BTreeMap::new();
            for m in &mine {
                let Some(s) = m.spec.gds() else { continue };
                let at = usize::from(s.route == hwc_model::GdsRoute::PosixBounce);
                rows.entry((s.block_bytes, s.queue_depth)).or_default()[at] = Some(m);
            }
            let body: Vec<Vec<String>> = rows
                .iter()
                .map(|((size, qd), [c, b])| {
                    let ratio = match (c, b) {
                        (Some(c), Some(b)) if b.gbps.median > 0.0 => {
                            format!("{} %", fixed(c.gbps.median / b.gbps.median * 100.0, 0))
                        }
                        _ => "—".into(),
                    };
                    let f = |m: &Option<&Measurement>| m.map_or("—".into(), flagged);
                    vec![size_label(*size), qd.to_string(), f(c), f(b), ratio]
                })
                .collect();
            table(
                out,
                &["Size", "QD", "cuFile", "POSIX bounce", "cuFile / bounce"],
                &body,
            );
        }
    }
    waivers(out, p, PathId::Gds);
    out.push('\n');
}

/// Path 5: per GPU and direction, bandwidth by size with a column per copying thread's node
/// (the GPU's first), then the small copies' mean latency.
fn gdrcopy(out: &mut String, p: &Profile) {
    let _ = writeln!(out, "### Path 5 — GDRCopy CPU ↔ GPU BAR1\n");
    let ms: Vec<&Measurement> = p.measurements_of(PathId::Gdrcopy).collect();
    if !ms.is_empty() {
        reps_line(out, &ms);
        for key in [
            "gdrcopy.libgdrapi",
            "gdrcopy.gdrdrv",
            "gdrcopy.nvidia_peermem",
        ] {
            if let Some(s) = p.provenance.environment.get(key) {
                let _ = writeln!(out, "- {key}: {}", s.value);
            }
        }
        out.push('\n');
        let groups: BTreeSet<(String, CopyDirection)> = ms
            .iter()
            .filter_map(|m| m.spec.gdrcopy().map(|s| (s.gpu.clone(), s.direction)))
            .collect();
        for (gpu, dir) in groups {
            let of = |m: &&&Measurement| {
                m.spec
                    .gdrcopy()
                    .is_some_and(|s| s.gpu == gpu && s.direction == dir)
            };
            let way = match dir {
                CopyDirection::H2d => "CPU → BAR1 stores",
                CopyDirection::D2h => "BAR1 → CPU loads",
            };
            let _ = writeln!(out, "#### {gpu}: {way}\n");
            let place = |m: &Measurement| {
                m.spec
                    .gdrcopy()
                    .map_or(String::new(), |s| match (s.cpu_node, s.cross_numa) {
                        (Some(n), true) => format!("thread on n{n} (cross-NUMA)"),
                        (Some(n), false) => format!("thread on n{n} (local)"),
                        (None, _) => "thread not placed".into(),
                    })
            };
            let bw: Vec<&Measurement> = ms
                .iter()
                .filter(of)
                .filter(|m| m.spec.gdrcopy().is_some_and(|s| !s.latency))
                .copied()
                .collect();
            let cols: Vec<String> = bw
                .iter()
                .map(|m| (m.spec.gdrcopy().is_some_and(|s| s.cross_numa), place(m)))
                .collect::<BTreeSet<_>>()
                .into_iter()
                .map(|(_, c)| c)
                .collect();
            let mut rows: BTreeMap<u64, Vec<String>> = BTreeMap::new();
            for m in &bw {
                let col = cols.iter().position(|c| *c == place(m)).unwrap_or(0);
                let row = rows
                    .entry(m.spec.size_bytes())
                    .or_insert_with(|| vec!["—".into(); cols.len()]);
                row[col] = flagged(m);
            }
            if !rows.is_empty() {
                let mut head = vec!["Size"];
                head.extend(cols.iter().map(String::as_str));
                let body: Vec<Vec<String>> = rows
                    .into_iter()
                    .map(|(size, cells)| {
                        let mut r = vec![size_label(size)];
                        r.extend(cells);
                        r
                    })
                    .collect();
                table(out, &head, &body);
            }
            let lat: Vec<Vec<String>> = ms
                .iter()
                .filter(of)
                .filter_map(|m| {
                    let s = m.spec.gdrcopy().filter(|s| s.latency)?;
                    Some(vec![
                        format!("{} B", s.size_bytes),
                        m.latency_us.as_ref().map_or("—".into(), |u| {
                            format!("{} ±{} %", fixed(u.median, 2), fixed(u.spread_pct, 1))
                        }),
                        place(m),
                    ])
                })
                .collect();
            if !lat.is_empty() {
                table(out, &["Copy", "Mean latency µs", "Thread"], &lat);
            }
        }
    }
    waivers(out, p, PathId::Gdrcopy);
    out.push('\n');
}

/// Path 8: per device whose BAR the drives read into, a row per drive count and poller
/// placement with host RAM and the BAR back to back, the BAR's overhead, and the drives' BDFs.
fn nvme_bar(out: &mut String, p: &Profile) {
    let _ = writeln!(
        out,
        "### Path 8 — NVMe DMA → BAR1
"
    );
    let ms: Vec<&Measurement> = p.measurements_of(PathId::NvmeBar1).collect();
    if !ms.is_empty() {
        reps_line(out, &ms);
        let devices: BTreeSet<hwc_model::BarDevice> = ms
            .iter()
            .filter_map(|m| m.spec.nvme_bar().map(|s| s.device.clone()))
            .collect();
        for d in devices {
            let _ = writeln!(
                out,
                "#### Into {}
",
                d.label()
            );
            if matches!(d, hwc_model::BarDevice::PciBar { .. }) {
                out.push_str(
                    "A PCI BAR standing in for GPU BAR1: it shows the path's mechanics (SPDK DMA \
                     into another device's BAR through the IOMMU), not a GPU's figures; none of \
                     them is a `p2p_cold` ceiling.\n\n",
                );
            }
            // (cross-NUMA, drives) → [host RAM, BAR]
            type Row<'a> = BTreeMap<(bool, usize, Vec<String>), [Option<&'a Measurement>; 2]>;
            let mut rows: Row = BTreeMap::new();
            for m in &ms {
                let Some(s) = m.spec.nvme_bar().filter(|s| s.device == d) else {
                    continue;
                };
                let at = usize::from(s.memory == hwc_model::DmaTarget::Bar);
                rows.entry((s.cross_numa, s.drives.len(), s.drives.clone()))
                    .or_default()[at] = Some(m);
            }
            let body: Vec<Vec<String>> = rows
                .iter()
                .map(|((cross, k, drives), [h, b])| {
                    let any = h.or(*b).and_then(|m| m.spec.nvme_bar());
                    let pollers = match (any.and_then(|s| s.poller_node), cross) {
                        (Some(n), true) => format!("node {n} (cross-NUMA)"),
                        (Some(n), false) => format!("node {n} (local)"),
                        (None, _) => "not placed".into(),
                    };
                    let overhead = match (h, b) {
                        (Some(h), Some(b)) if h.gbps.median > 0.0 => format!(
                            "{} %",
                            fixed((h.gbps.median - b.gbps.median) / h.gbps.median * 100.0, 1)
                        ),
                        _ => "—".into(),
                    };
                    let f = |m: &Option<&Measurement>| m.map_or("—".into(), flagged);
                    vec![
                        k.to_string(),
                        pollers,
                        any.map_or("—".into(), |s| {
                            format!("{} × {}", s.queue_depth, size_label(s.block_bytes))
                        }),
                        f(h),
                        f(b),
                        overhead,
                        drives.join(", "),
                    ]
                })
                .collect();
            table(
                out,
                &[
                    "Drives",
                    "Pollers",
                    "QD × command",
                    "Host RAM",
                    "BAR",
                    "BAR overhead",
                    "Drive BDFs",
                ],
                &body,
            );
        }
    }
    waivers(out, p, PathId::NvmeBar1);
    out.push('\n');
}

/// Where a GPU copy's host buffers were, against its GPU's node, and whether they were pinned:
/// a table of its own each, shown as `local`, `cross-n1`, `unplaced` (the GPU's node unknown),
/// with `-pageable` for pageable memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct HostSide {
    at: HostAt,
    pageable: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum HostAt {
    Cross(u32),
    Local,
    Unplaced,
}

impl HostSide {
    const LOCAL_PINNED: HostSide = HostSide {
        at: HostAt::Local,
        pageable: false,
    };
}

impl std::fmt::Display for HostSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.at {
            HostAt::Cross(n) => write!(f, "cross-n{n}")?,
            HostAt::Local => f.write_str("local")?,
            HostAt::Unplaced => f.write_str("unplaced")?,
        }
        if self.pageable {
            f.write_str("-pageable")?;
        }
        Ok(())
    }
}

fn placement_label(p: &Profile, m: &Measurement) -> Option<HostSide> {
    let c = m.spec.gpu_copy()?;
    let gpu_node = p.gpus.get(&c.gpu).and_then(|g| g.numa_node);
    let at = match (c.host_node, gpu_node) {
        (None, _) => HostAt::Unplaced,
        (Some(n), Some(g)) if n == g => HostAt::Local,
        (Some(n), _) => HostAt::Cross(n),
    };
    Some(HostSide {
        at,
        pageable: !c.pinned(),
    })
}

fn streams(m: &Measurement) -> u32 {
    m.spec.gpu_copy().map_or(1, |c| c.streams)
}

fn streams_label(prefix: &str, m: &Measurement) -> String {
    format!("{prefix} {}-stream", streams(m))
}

fn gpu_copies(out: &mut String, p: &Profile) {
    out.push_str("### Path 3 — host ↔ GPU copies (H2D, D2H, duplex)\n\n");
    let copies: Vec<&Measurement> = p
        .measurements
        .iter()
        .filter(|m| matches!(m.path, PathId::H2d | PathId::D2h))
        .collect();
    reps_line(out, &copies);
    spread_limit_line(out, p, &[PathId::H2d, PathId::D2h, PathId::Duplex]);
    for gpu in p.gpus.keys() {
        let mine: Vec<&Measurement> = copies
            .iter()
            .copied()
            .filter(|m| m.spec.gpu() == Some(gpu.as_str()))
            .collect();
        let labels: BTreeSet<HostSide> =
            mine.iter().filter_map(|m| placement_label(p, m)).collect();
        for label in labels {
            let _ = writeln!(out, "#### {gpu} — host memory {label}\n");
            let rows: Vec<&Measurement> = mine
                .iter()
                .copied()
                .filter(|m| placement_label(p, m) == Some(label))
                .collect();
            let column = |m: &Measurement| {
                streams_label(if m.path == PathId::H2d { "H2D" } else { "D2H" }, m)
            };
            matrix(out, "Size", rows.iter().copied(), column);
            placement_footnote(out, &rows, |m| format!("{} at ", column(m)));
        }
        duplex(out, p, gpu);
    }
    // Three paths share this section: each waiver says which it is.
    for (path, label) in [
        (PathId::H2d, "H2D"),
        (PathId::D2h, "D2H"),
        (PathId::Duplex, "duplex"),
    ] {
        for w in p.waivers_of(path) {
            let sep = if w.scope.is_some() { "," } else { ":" };
            let _ = writeln!(out, "- **Waived** — {label}{sep} {}", crate::waiver_line(w));
        }
    }
    out.push('\n');
}

fn duplex(out: &mut String, p: &Profile, gpu: &str) {
    let ms: Vec<&Measurement> = p
        .measurements_of(PathId::Duplex)
        .filter(|m| m.spec.gpu() == Some(gpu))
        .collect();
    if ms.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "#### {gpu} — duplex (H2D and D2H at the same time, one stream each)\n"
    );
    let one_way = |dir: PathId, size: u64| {
        p.measurements_of(dir)
            .find(|m| {
                m.spec.gpu() == Some(gpu)
                    && m.spec.size_bytes() == size
                    && streams(m) == 1
                    && placement_label(p, m) == Some(HostSide::LOCAL_PINNED)
            })
            .map(|m| m.gbps.median)
    };
    let sizes: BTreeSet<u64> = ms.iter().map(|m| m.spec.size_bytes()).collect();
    let rows: Vec<Vec<String>> = sizes
        .iter()
        .map(|&size| {
            let get = |dir: CopyDirection| {
                ms.iter()
                    .find(|m| {
                        m.spec.size_bytes() == size
                            && m.spec.gpu_copy().and_then(|c| c.direction) == Some(dir)
                    })
                    .copied()
            };
            let (h, d) = (get(CopyDirection::H2d), get(CopyDirection::D2h));
            let penalty = |m: Option<&Measurement>, dir| match (m, one_way(dir, size)) {
                (Some(m), Some(one)) => {
                    format!("{} %", fixed((one - m.gbps.median) / one * 100.0, 1))
                }
                _ => "—".into(),
            };
            vec![
                size_label(size),
                h.map(flagged).unwrap_or_else(|| "—".into()),
                d.map(flagged).unwrap_or_else(|| "—".into()),
                match (h, d) {
                    (Some(h), Some(d)) => gbps(h.gbps.median + d.gbps.median),
                    _ => "—".into(),
                },
                penalty(h, PathId::H2d),
                penalty(d, PathId::D2h),
            ]
        })
        .collect();
    table(
        out,
        &[
            "Size",
            "H2D",
            "D2H",
            "Sum of medians",
            "H2D penalty vs one-way (of medians)",
            "D2H penalty vs one-way (of medians)",
        ],
        &rows,
    );
    placement_footnote(out, &ms, |_| String::new());
}

/// Under a table: per `subject` (`D2H 1-stream at `; empty under a duplex table), the sizes
/// whose figures were measured at the fastest placement tried, when there are any.
fn placement_footnote(
    out: &mut String,
    ms: &[&Measurement],
    subject: impl Fn(&Measurement) -> String,
) {
    let mut searched: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for m in ms.iter().filter(|m| m.evidence.placement_search.is_some()) {
        searched
            .entry(subject(m))
            .or_default()
            .insert(m.spec.size_bytes());
    }
    for (subject, sizes) in searched {
        let labels: Vec<String> = sizes.iter().map(|&s| size_label(s)).collect();
        let _ = writeln!(
            out,
            "*{subject}{}*: measured at the fastest of several placements in their buffers, \
             tried first (`evidence.placement_search`; docs/gpu-method.md).\n",
            labels.join(", ")
        );
    }
}

fn d2d(out: &mut String, p: &Profile) {
    out.push_str("### Path 4 — GPU D2D (bytes copied per second)\n\n");
    let ms: Vec<&Measurement> = p.measurements_of(PathId::D2d).collect();
    reps_line(out, &ms);
    for gpu in p.gpus.keys() {
        let mine: Vec<&Measurement> = ms
            .iter()
            .copied()
            .filter(|m| m.spec.gpu() == Some(gpu.as_str()))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let _ = writeln!(out, "#### {gpu}\n");
        let column = |m: &Measurement| streams_label("D2D", m);
        matrix(out, "Size", mine.iter().copied(), column);
        out.push_str(
            "*cache*: source and destination fit in the GPU's L2 — a cache figure, not HBM.\n\n",
        );
        placement_footnote(out, &mine, |m| format!("{} at ", column(m)));
    }
    waivers(out, p, PathId::D2d);
    out.push('\n');
}

fn host_ram(out: &mut String, p: &Profile) {
    out.push_str(
        "### Path 7 — host RAM copy: memcpy, and streaming stores at the sustained size (bytes \
         copied per second)\n\n",
    );
    let ms: Vec<&Measurement> = p.measurements_of(PathId::HostRam).collect();
    reps_line(out, &ms);
    if !ms.is_empty() {
        out.push_str(
            "*cache*: source + destination under 4× the last-level cache, so partly served from \
             it; the sustained figure comes from the largest size beyond that.\n\n",
        );
    }
    if let (false, Some(t)) = (
        ms.is_empty(),
        p.provenance
            .environment
            .get("host.glibc_non_temporal_threshold"),
    ) {
        // The size in MiB is enough here (a profile of an earlier build has only its words).
        let shown = t.bytes.map_or_else(
            || t.value.clone(),
            |b| format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        );
        let _ = writeln!(
            out,
            "`memcpy` gives each thread one call of size ÷ threads; glibc writes calls of {shown} \
             or more with non-temporal stores.\n"
        );
    }
    let nodes = |m: &Measurement| m.spec.host_copy().map(|c| (c.src_node, c.dst_node));
    let pairs: BTreeSet<(u32, u32)> = ms.iter().filter_map(|m| nodes(m)).collect();
    for (s, d) in pairs {
        let kind = if s == d { "same NUMA" } else { "cross NUMA" };
        let _ = writeln!(
            out,
            "#### src node {s} → dst node {d} ({kind}; threads on node {s})\n"
        );
        let of_pair: Vec<&Measurement> = ms
            .iter()
            .copied()
            .filter(|m| nodes(m) == Some((s, d)))
            .collect();
        // In the run's engine order (the C library's memcpy first: the spec's table), each
        // engine's rows.
        let engines = crate::engines_of(p, &of_pair);
        for engine in &engines {
            if engines.len() > 1 {
                let _ = writeln!(out, "`{engine}` — {}:\n", p.engine_title(engine));
            }
            let rows = of_pair.iter().copied().filter(|m| &m.engine == engine);
            matrix(out, "Size", rows, |m| {
                format!("{} thr", m.spec.host_copy().map_or(1, |c| c.threads))
            });
        }
        let pair = p
            .host_ram
            .pairs
            .values()
            .find(|pair| (pair.src_node, pair.dst_node) == (s, d));
        if let Some(pair) = pair {
            let _ = writeln!(
                out,
                "Sustained ({}): best **{} GB/s at {} thread(s)**{} (`{}`{}).\n",
                size_label(pair.size_bytes),
                gbps(pair.best_gbps),
                pair.best_threads,
                if engines.len() > 1 {
                    format!(", {}", pair.engine)
                } else {
                    String::new()
                },
                pair.key,
                p.measurement(&pair.key)
                    .map(|m| format!(
                        ": median, ±{} %, N={}",
                        fixed(m.gbps.spread_pct, 1),
                        m.gbps.n
                    ))
                    .unwrap_or_default()
            );
        } else {
            out.push_str(
                "Sustained: none — every size measured here fits in cache, and a cache figure \
                 is not a memory ceiling (measure a larger size: the default sweep does, or \
                 `--host-sizes`).\n\n",
            );
        }
    }
    scheduling(out, &ms);
    waivers(out, p, PathId::HostRam);
    out.push('\n');
}

/// Each case's scheduling summary, key first; empty for profiles of builds before the summary
/// was a field of its own.
fn scheduling_lines<'a>(ms: &[&'a Measurement]) -> Vec<(&'a str, &'a hwc_model::SchedSummary)> {
    ms.iter()
        .filter_map(|m| Some((m.key.as_str(), m.evidence.scheduling.as_ref()?)))
        .collect()
}

/// The repetition counts of a case that scheduling disturbed at least once; `None` otherwise.
pub(crate) fn disturbed(m: &Measurement) -> Option<hwc_model::RepCounts> {
    m.evidence
        .scheduling
        .as_ref()?
        .counts
        .filter(|c| c.disturbed > 0)
}

/// Under the host RAM tables: the rule in one sentence and how many cases it flagged (their
/// lines are in Appendix C, every repetition's counters in the raw JSON); nothing where no case
/// has a scheduling summary (profiles of earlier builds).
fn scheduling(out: &mut String, ms: &[&Measurement]) {
    let lines = scheduling_lines(ms);
    if lines.is_empty() {
        return;
    }
    // The share each summary was judged by, as the profile records it.
    let mut pcts: Vec<String> = Vec::new();
    for (_, l) in &lines {
        let pct = l.disturbed_above_pct.to_string();
        if !pcts.contains(&pct) {
            pcts.push(pct);
        }
    }
    let _ = write!(
        out,
        "*disturbed*: scheduling kept a copy thread off its CPU for over {} % of a repetition \
         (docs/usage.md); ",
        pcts.join(" or ")
    );
    let counted: Vec<_> = lines.iter().map(|&(_, l)| l.counts).collect();
    let hit = counted
        .iter()
        .filter(|c| c.is_some_and(|c| c.disturbed > 0))
        .count();
    let calm = counted
        .iter()
        .filter(|c| c.is_some_and(|c| c.undisturbed()))
        .count();
    // No disturbed repetition among those judged, but some could not be judged.
    let partly = counted
        .iter()
        .filter(|c| c.is_some_and(|c| c.disturbed == 0 && c.not_judged > 0))
        .count();
    let unread = counted.len() - hit - calm - partly;
    let _ = write!(
        out,
        "{hit} of {} case(s) had a disturbed repetition",
        counted.len()
    );
    if calm > 0 {
        let _ = write!(out, "; {calm} had none");
    }
    if partly > 0 {
        let _ = write!(
            out,
            "; {partly} had none among the repetitions that could be judged, but not every one \
             could"
        );
    }
    if unread > 0 {
        let _ = write!(out, "; for {unread} the counters could not be read");
    }
    if hit > 0 {
        out.push_str(" (listed in Appendix C; every counter in the raw JSON).\n\n");
    } else {
        out.push_str(" (every counter in the raw JSON).\n\n");
    }
}

/// Appendix C: each case with a disturbed repetition, and how many of its repetitions were (the
/// counters behind it are the case's `evidence.scheduling` and the raw JSON), grouped as
/// Appendix A groups its rows; nothing where none was.
pub(crate) fn disturbed_cases(out: &mut String, ms: &[&Measurement]) {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for m in ms {
        let Some(c) = disturbed(m) else { continue };
        let ((path, engine, first), rest) = crate::appendix_group(m);
        let prefix = hwc_model::case_key(path, engine, first);
        let mut entry = format!("{rest}: {} of {}", c.disturbed, c.of);
        if c.not_judged > 0 {
            let _ = write!(entry, " ({} not judged)", c.not_judged);
        }
        match groups.iter_mut().find(|(p, _)| *p == prefix) {
            Some((_, entries)) => entries.push(entry),
            None => groups.push((prefix, vec![entry])),
        }
    }
    if groups.is_empty() {
        return;
    }
    out.push_str(
        "## Appendix C — cases scheduling disturbed\n\n\
         Each case with its disturbed repetitions of those timed, grouped as in Appendix A. Their \
         counters: `evidence.scheduling` in the profile, every repetition's in the raw JSON.\n\n",
    );
    for (prefix, entries) in groups {
        let _ = writeln!(out, "- `{prefix}` — {}", entries.join("; "));
    }
    out.push('\n');
}
