//! Section 7: the spec's four summary sub-tables and the crossover comparison.

use crate::{gbps, table};
use hwc_model::ceiling_key;
use hwc_model::text::fixed;
use hwc_model::Covers;
use hwc_model::{size_label, CeilingOrigin, Measurement, PathId, Profile};
use std::collections::BTreeMap;
use std::fmt::Write;

/// `55.49 (±0.4 %, N=20)` for the measurement of `path` (and `gpu`) whose median is `value`:
/// the old rule, kept for version 1 profiles written before ceiling sources ([`ceiling_cell`]).
fn with_spread(p: &Profile, path: PathId, gpu: Option<&str>, value: f64) -> String {
    let m = p
        .measurements_of(path)
        .filter(|m| gpu.is_none() || m.spec.gpu() == gpu)
        .find(|m| m.gbps.median == value);
    match m {
        Some(m) => spread_of(m),
        None => format!("{} (derived)", gbps(value)),
    }
}

/// Where a figure that is a ceiling comes from, as the profile's `ceiling_records` names it.
enum Source<'a> {
    /// The named measurement, and it is this figure's: its path (and GPU), median equal.
    Measured(&'a Measurement),
    /// The ceiling is arithmetic on measured figures, not one measurement's median.
    Derived,
    /// No usable name: no such ceiling (fields set by hand), no record of its source,
    /// a source the profile does not hold, or a named measurement that is not this figure's.
    Unnamed,
}

/// The source of ceiling `key`, whose figure `v` is of `path` (and `gpu`).
fn source_of<'a>(p: &'a Profile, key: &str, path: PathId, gpu: Option<&str>, v: f64) -> Source<'a> {
    match p.ceiling_source(key) {
        Some(CeilingOrigin::Measured(m)) if is_figure(m, path, gpu, v) => Source::Measured(m),
        Some(CeilingOrigin::Derived { .. }) => Source::Derived,
        _ => Source::Unnamed,
    }
}

fn is_figure(m: &Measurement, path: PathId, gpu: Option<&str>, v: f64) -> bool {
    m.path == path && m.spec.gpu() == gpu && m.gbps.median == v
}

/// The profile says where its ceilings come from (`ceiling_records`). One written before that
/// field has none: only there may a figure's measurement be found by an equal median.
fn records_sources(p: &Profile) -> bool {
    p.records_sources()
}

/// A figure with no usable source name: in a profile that records sources, the figure alone
/// and the fact (`55.49 (source not recorded)`), never a spread from a measurement guessed by
/// value ([`Profile::ceiling_source`]'s rule); in an older profile the equal-median search.
fn unnamed_cell(p: &Profile, path: PathId, gpu: Option<&str>, v: f64) -> String {
    if records_sources(p) {
        format!("{} (source not recorded)", gbps(v))
    } else {
        with_spread(p, path, gpu, v)
    }
}

/// `55.49 (±0.4 %, N=20)` from the measurement ceiling `key` names; `55.49 (derived)` for a
/// derived ceiling; [`unnamed_cell`] when the profile names no usable source.
fn ceiling_cell(p: &Profile, key: &str, path: PathId, gpu: Option<&str>, v: f64) -> String {
    match source_of(p, key, path, gpu, v) {
        Source::Measured(m) => spread_of(m),
        Source::Derived => format!("{} (derived)", gbps(v)),
        Source::Unnamed => unnamed_cell(p, path, gpu, v),
    }
}

/// The cross-NUMA H2D peak `v` of `gpu` has no ceiling of its own: it is the cross-NUMA input
/// of the derived penalty ceiling (the input whose host node is not the GPU's).
fn cross_numa_cell(p: &Profile, gpu: &str, numa_node: Option<u32>, v: f64) -> String {
    let named = match p.ceiling_source(&ceiling_key::cross_numa_penalty(gpu)) {
        Some(CeilingOrigin::Derived { inputs, .. }) => inputs.into_iter().find(|m| {
            is_figure(m, PathId::H2d, Some(gpu), v)
                && m.spec.gpu_copy().and_then(|c| c.host_node) != numa_node
        }),
        _ => None,
    };
    match named {
        Some(m) => spread_of(m),
        None => unnamed_cell(p, PathId::H2d, Some(gpu), v),
    }
}

fn spread_of(m: &Measurement) -> String {
    format!(
        "{} (±{} %, N={})",
        gbps(m.gbps.median),
        fixed(m.gbps.spread_pct, 1),
        m.gbps.n
    )
}

/// A row for a figure that is absent, with [`absent_reason`] for a cross-NUMA figure (`cross`)
/// or another one.
fn waived_row(label: &str, limit: &str, p: &Profile, path: PathId, cross: bool) -> Vec<String> {
    absent_row(
        label,
        limit,
        absent_reason(p, path, |c| is_cross(p, c) == Some(cross)),
    )
}

fn absent_row(label: &str, limit: &str, why: Option<String>) -> Vec<String> {
    vec![
        label.to_string(),
        "—".into(),
        limit.to_string(),
        absent_note(why),
    ]
}

/// Why a figure is missing: its waiver's reason, or plainly that it was not measured.
fn absent_note(why: Option<String>) -> String {
    match why {
        Some(why) => format!("waived: {why}"),
        None => "not measured in this run".into(),
    }
}

/// The reason a figure of `path` is absent: the first waiver whose part (typed: `covers`)
/// `matches` the figure, else the path's whole-path waiver. A waiver of some other part is
/// never the reason.
fn absent_reason(p: &Profile, path: PathId, matches: impl Fn(&Covers) -> bool) -> Option<String> {
    p.waivers_of(path)
        .find(|w| w.covers.as_ref().is_some_and(&matches))
        .or_else(|| p.waivers_of(path).find(|w| w.scope.is_none()))
        .map(|w| w.reason.clone())
}

/// Whether a waived part is cross-NUMA (`None`: neither, or not known: a node, a drive).
fn is_cross(p: &Profile, c: &Covers) -> Option<bool> {
    match c {
        Covers::CrossNuma => Some(true),
        Covers::HostPair { src_node, dst_node } => Some(src_node != dst_node),
        Covers::Gpu { local, cross, .. } if local != cross => Some(*cross),
        Covers::Case { spec } => match spec {
            hwc_model::Spec::HostCopy(h) => Some(h.src_node != h.dst_node),
            hwc_model::Spec::GpuCopy(g) => {
                let gpu_node = p.gpus.get(&g.gpu).and_then(|x| x.numa_node);
                match (g.host_node, gpu_node) {
                    (Some(h), Some(n)) => Some(h != n),
                    _ => None,
                }
            }
            _ => None,
        },
        _ => None,
    }
}

/// The whole-path waiver's reason, for one-line summaries.
fn path_waiver(p: &Profile, path: PathId) -> Option<String> {
    absent_reason(p, path, |_| false)
}

/// [`absent_reason`] for a pinned figure of `gpu` with host memory cross-NUMA (`cross`) or
/// NUMA-local: a waiver of that GPU at that placement, or of one such case. Another GPU's,
/// the other placement's or a pageable case's waiver is never the reason for a pinned peak.
fn gpu_waiver(p: &Profile, path: PathId, gpu: &str, cross: bool) -> Option<String> {
    absent_reason(p, path, |c| match c {
        Covers::Gpu {
            gpu: g,
            local,
            cross: x,
        } => g == gpu && if cross { *x } else { *local },
        Covers::Case {
            spec: hwc_model::Spec::GpuCopy(g),
        } => {
            // A case whose GPU's node is unknown is unplaced: a local figure's stand-in.
            g.gpu == gpu && g.pinned() && is_cross(p, c).unwrap_or(false) == cross
        }
        _ => false,
    })
}

fn link_of(p: &Profile, gpu: &str) -> String {
    p.topology
        .links
        .iter()
        .find(|l| l.device == gpu)
        .map(|l| format!("Gen{} x{}", l.gen, l.width))
        .unwrap_or_else(|| "link unknown".into())
}

/// A GPU copy's limit cell: its link, and the figure's share of the link's theoretical
/// bandwidth and of its TLP-adjusted limit (`reads`: the limit for DMA reads, H2D; else for
/// DMA writes, D2H), where known.
fn gpu_limit(p: &Profile, gpu: &str, v: Option<f64>, reads: bool) -> String {
    let Some(l) = p.topology.links.iter().find(|l| l.device == gpu) else {
        return "GPU PCIe, link unknown".into();
    };
    let mut s = format!("GPU PCIe Gen{} x{}", l.gen, l.width);
    if let Some(v) = v.filter(|_| l.theoretical_gbps > 0.0) {
        let _ = write!(
            s,
            ": {} % of {} GB/s",
            fixed(v / l.theoretical_gbps * 100.0, 1),
            gbps(l.theoretical_gbps)
        );
        let tlp = if reads {
            l.tlp_read_gbps
        } else {
            l.tlp_write_gbps
        };
        if let Some(t) = tlp.filter(|t| *t > 0.0) {
            let _ = write!(
                s,
                ", {} % of the TLP-adjusted {}",
                fixed(v / t * 100.0, 1),
                gbps(t)
            );
        }
    }
    s
}

pub(crate) fn render(out: &mut String, p: &Profile) {
    out.push_str("## 7. Summary\n\n");
    raw_paths(out, p);
    warm_path(out, p);
    cold_paths(out, p);
}

fn raw_paths(out: &mut String, p: &Profile) {
    out.push_str("### Sub-table 1 — raw hardware paths\n\n");
    let mut rows: Vec<Vec<String>> = Vec::new();
    nvme_rows(p, &mut rows);
    if p.gpus.is_empty() {
        rows.push(waived_row(
            "Host → GPU H2D",
            "GPU PCIe",
            p,
            PathId::H2d,
            false,
        ));
        rows.push(waived_row(
            "GPU → Host D2H",
            "GPU PCIe",
            p,
            PathId::D2h,
            false,
        ));
        rows.push(waived_row(
            "GPU D2D (1-stream sustained)",
            "HBM",
            p,
            PathId::D2d,
            false,
        ));
    }
    for (name, g) in &p.gpus {
        let gpu = Some(name.as_str());
        // Each figure with the spread and N of the measurement its ceiling names.
        // `cross`: the figure is of host memory on another node than the GPU's.
        let mut push = |(label, cross): (String, bool),
                        limit: String,
                        cell: Option<String>,
                        path,
                        note: String| {
            rows.push(match cell {
                Some(cell) => vec![label, cell, limit, note],
                None => absent_row(&label, &limit, gpu_waiver(p, path, name, cross)),
            });
        };
        push(
            (format!("Host → {name} H2D (NUMA-local, peak)"), false),
            gpu_limit(p, name, g.h2d_peak_numa_local_gbps, true),
            g.h2d_peak_numa_local_gbps
                .map(|v| ceiling_cell(p, &ceiling_key::warm_h2d_peak(name), PathId::H2d, gpu, v)),
            PathId::H2d,
            String::new(),
        );
        let penalty = g
            .cross_numa_h2d_penalty_gbps
            .map(|x| format!("penalty vs local (1-stream peaks): {} GB/s", gbps(x)))
            .unwrap_or_default();
        push(
            (format!("Host → {name} H2D (cross-NUMA, peak)"), true),
            "inter-socket link".into(),
            g.h2d_peak_cross_numa_gbps
                .map(|v| cross_numa_cell(p, name, g.numa_node, v)),
            PathId::H2d,
            penalty,
        );
        push(
            (format!("{name} → Host D2H (peak)"), false),
            gpu_limit(p, name, g.d2h_peak_numa_local_gbps, false),
            g.d2h_peak_numa_local_gbps
                .map(|v| ceiling_cell(p, &ceiling_key::d2h_peak(name), PathId::D2h, gpu, v)),
            PathId::D2h,
            String::new(),
        );
        push(
            (format!("{name} D2D (1-stream sustained)"), false),
            "HBM".into(),
            g.d2d_1stream_gbps
                .map(|v| ceiling_cell(p, &ceiling_key::d2d_sustained(name), PathId::D2d, gpu, v)),
            PathId::D2d,
            "largest size outside L2".into(),
        );
    }
    let gdr = &p.gdrcopy;
    for (label, v, ceiling) in [
        (
            "GDRCopy CPU→BAR1 write",
            gdr.cpu_to_bar1_gbps,
            ceiling_key::GDRCOPY_CPU_TO_BAR1,
        ),
        (
            "GDRCopy CPU←BAR1 read",
            gdr.bar1_to_cpu_gbps,
            ceiling_key::GDRCOPY_BAR1_TO_CPU,
        ),
    ] {
        rows.push(match v {
            Some(v) => vec![
                label.into(),
                ceiling_cell(p, ceiling, PathId::Gdrcopy, None, v),
                "BAR1".into(),
                String::new(),
            ],
            None => waived_row(label, "BAR1", p, PathId::Gdrcopy, false),
        });
    }
    for (label, cross, limit, v, ceiling) in [
        (
            "Host RAM same-NUMA (sustained)",
            false,
            "memory controller",
            p.host_ram.same_numa_gbps,
            ceiling_key::HOST_RAM_SAME_NUMA,
        ),
        (
            "Host RAM cross-NUMA (sustained)",
            true,
            "inter-socket link",
            p.host_ram.cross_numa_gbps,
            ceiling_key::HOST_RAM_CROSS_NUMA,
        ),
    ] {
        // The measurement the ceiling names (`ceiling_records`) gives the spread, N and kernel.
        rows.push(match v {
            Some(v) => {
                let note = match source_of(p, ceiling, PathId::HostRam, None, v) {
                    Source::Measured(m) => {
                        format!("best thread count, `{}`", m.engine)
                    }
                    _ => "best thread count".into(),
                };
                vec![
                    label.into(),
                    ceiling_cell(p, ceiling, PathId::HostRam, None, v),
                    limit.into(),
                    note,
                ]
            }
            None => {
                let cached_only = p.measurements_of(PathId::HostRam).any(|m| {
                    m.spec
                        .host_copy()
                        .is_some_and(|c| (c.src_node != c.dst_node) == cross)
                });
                if cached_only {
                    // Measured, but only at sizes a cache holds (the pair has no sustained
                    // size): not a memory ceiling.
                    vec![
                        label.into(),
                        "—".into(),
                        limit.into(),
                        "no sustained figure: every size measured fits in cache".into(),
                    ]
                } else {
                    waived_row(label, limit, p, PathId::HostRam, cross)
                }
            }
        });
    }
    rows.push(match p.gds.one_drive_gbps {
        Some(v) => vec![
            "GDS NVMe → GPU".into(),
            ceiling_cell(p, ceiling_key::GDS_1DRIVE, PathId::Gds, None, v),
            "nvidia_fs / P2P DMA".into(),
            p.gds.mode.clone().unwrap_or_default(),
        ],
        None => waived_row(
            "GDS NVMe → GPU",
            "nvidia_fs / P2P DMA",
            p,
            PathId::Gds,
            false,
        ),
    });
    table(
        out,
        &["Data path", "Peak GB/s", "Limiting factor", "Notes"],
        &rows,
    );
}

fn nvme_rows(p: &Profile, rows: &mut Vec<Vec<String>>) {
    let n = &p.nvme;
    // Why an NVMe row has no figure: cases that ran on a `--target` (a file or device named for
    // the run, not a detected drive) give no drive ceiling; otherwise the path's own waiver
    // (a long test's waiver is scoped to that test, never the reason a sweep figure is absent).
    let absent = |label: &str, limit: &str, path: PathId| {
        let sweeps = |drive: bool| {
            p.measurements_of(path).any(|m| {
                m.spec
                    .nvme()
                    .is_some_and(|s| s.test == hwc_model::NvmeTest::Sweep)
                    && hwc_profile::nvme::is_drive_sweep(m) == drive
            })
        };
        if sweeps(false) && !sweeps(true) {
            vec![
                label.to_string(),
                "—".into(),
                limit.to_string(),
                "measured on --target only (see the path's section): a target gives no drive \
                 ceiling"
                    .into(),
            ]
        } else {
            absent_row(label, limit, path_waiver(p, path))
        }
    };
    for (path, label) in [
        (PathId::NvmeRead, "NVMe → Host read"),
        (PathId::NvmeWrite, "NVMe → Host write"),
    ] {
        let ceilings = p.drive_ceilings(path);
        if ceilings.is_empty() {
            rows.push(absent(label, "drive PCIe link", path));
        }
        for (drives, key, v) in ceilings {
            rows.push(vec![
                format!("{label} ({drives} drive)"),
                ceiling_cell(p, key, path, None, v),
                "drive PCIe link / aggregate".into(),
                carried_note(p, key),
            ]);
        }
    }
    for (path, label, sweep) in [
        (
            PathId::NvmeRead,
            "Optimal read chunk size",
            &n.io_size_sweep_read_gbps,
        ),
        (
            PathId::NvmeWrite,
            "Optimal write chunk size",
            &n.io_size_sweep_write_gbps,
        ),
    ] {
        match sweep.as_ref().and_then(|s| s.optimal_bytes) {
            Some(b) => rows.push(vec![
                label.into(),
                size_label(b),
                "knee: smallest size ≥ 95 % of peak".into(),
                String::new(),
            ]),
            None => rows.push(absent(label, "knee of the size sweep", path)),
        }
    }
}

/// Where the profile records ceiling `key` as carried from an earlier run (`hwceiling merge`),
/// that run; else nothing.
fn carried_note(p: &Profile, key: &str) -> String {
    p.ceiling_record(key)
        .and_then(|r| r.carried_from.as_ref())
        .map_or_else(String::new, |c| {
            format!(
                "carried from {}, a write run that finished {}, on blank drives",
                c.file, c.finished_at
            )
        })
}

/// The GPU with the best NUMA-local H2D peak: the warm ceiling feeding the cold path, chosen as
/// the profile chose the `dispatcher_cold_*` ceilings' source (the first of equals).
fn best_h2d(p: &Profile) -> Option<(String, f64)> {
    hwc_profile::nvme::best_h2d_gpu(p).map(|(n, v)| (n.to_string(), v))
}

fn warm_path(out: &mut String, p: &Profile) {
    out.push_str(
        "### Sub-table 2 — `dispatcher` warm path\n\nRoute: memory tier (pinned DRAM) ──H2D DMA──▶ \
         GPU. Ceiling = H2D PCIe bandwidth (NVMe not involved).\n\n",
    );
    if p.gpus.is_empty() {
        let why = path_waiver(p, PathId::H2d).unwrap_or_else(|| "no GPU".into());
        let _ = writeln!(out, "Waived: {why}.\n");
        return;
    }
    let rows: Vec<Vec<String>> = p
        .gpus
        .iter()
        .map(|(name, g)| {
            let bound = format!("H2D PCIe {}", link_of(p, name));
            match g.h2d_peak_numa_local_gbps {
                Some(v) => vec![
                    name.clone(),
                    ceiling_cell(
                        p,
                        &ceiling_key::warm_h2d_peak(name),
                        PathId::H2d,
                        Some(name),
                        v,
                    ),
                    bound,
                ],
                None => vec![
                    name.clone(),
                    "—".into(),
                    absent_note(gpu_waiver(p, PathId::H2d, name, false)),
                ],
            }
        })
        .collect();
    table(out, &["GPU", "Ceiling GB/s", "Bound by"], &rows);
}

fn cold_paths(out: &mut String, p: &Profile) {
    out.push_str(
        "### Sub-table 3 — `dispatcher` cold path\n\nRoute: NVMe ──DMA──▶ memory tier (DRAM) \
         ──H2D DMA──▶ GPU. Ceiling = min(NVMe aggregate, H2D); crossover = H2D ceiling / \
         per-drive bandwidth.\n\n",
    );
    let h2d = best_h2d(p);
    match h2d {
        Some((gpu, h2d)) if !p.drive_ceilings(PathId::NvmeRead).is_empty() => {
            let reads = p.drive_ceilings(PathId::NvmeRead);
            let h2d_cell = ceiling_cell(
                p,
                &ceiling_key::warm_h2d_peak(&gpu),
                PathId::H2d,
                Some(&gpu),
                h2d,
            );
            let rows: Vec<Vec<String>> = reads
                .iter()
                .map(|&(n, key, nvme)| {
                    // The ceiling is the bounding measurement's median: its spread and N here.
                    let bound = if nvme < h2d {
                        format!(
                            "NVMe aggregate, below H2D (GB/s: {})",
                            ceiling_cell(p, key, PathId::NvmeRead, None, nvme)
                        )
                    } else {
                        format!("H2D PCIe {} (GB/s: {h2d_cell})", link_of(p, &gpu))
                    };
                    vec![n.to_string(), gpu.clone(), gbps(nvme.min(h2d)), bound]
                })
                .collect();
            table(out, &["Drives", "GPU", "Ceiling GB/s", "Bound by"], &rows);
            if let Some(&(_, key, one)) = reads.iter().find(|r| r.0 == 1 && r.2 > 0.0) {
                let _ = writeln!(
                    out,
                    "Crossover: H2D caps the cold path from **{} drives** (derived from measured medians, GB/s: {h2d_cell} H2D / {} per drive).\n",
                    fixed(h2d / one, 1),
                    ceiling_cell(p, key, PathId::NvmeRead, None, one)
                );
            }
        }
        _ => {
            let why = if p.gpus.is_empty() || h2d.is_none() {
                path_waiver(p, PathId::H2d)
            } else {
                path_waiver(p, PathId::NvmeRead)
            };
            let _ = writeln!(
                out,
                "Waived: needs both an NVMe read and an H2D measurement ({}).\n",
                why.unwrap_or_else(|| "not measured".into())
            );
        }
    }
    p2p_cold_path(out, p);
    crossover(out, p);
}

/// Sub-table 4: NVMe DMA → GPU BAR1 per GPU and drive count, with the BAR's overhead against
/// host RAM; per GPU, why not where it was not measured.
fn p2p_cold_path(out: &mut String, p: &Profile) {
    out.push_str(
        "### Sub-table 4 — `dispatcher-p2p` cold path\n\nRoute: NVMe ──DMA──▶ BAR1 \
         (GDRCopy-mapped GPU memory). Ceiling = the NVMe → BAR1 measurement.\n\n",
    );
    let mut rows = Vec::new();
    for (gpu, e) in &p.bar1 {
        for (figures, cross) in [(&e.numa_local, false), (&e.cross_numa, true)] {
            let mut counts: Vec<usize> = figures
                .keys()
                .filter_map(|k| {
                    k.strip_prefix("bar1_")?
                        .strip_suffix("drive_gbps")?
                        .parse()
                        .ok()
                })
                .collect();
            counts.sort_unstable();
            let last = counts.last().copied();
            for k in counts {
                let v = figures[&format!("bar1_{k}drive_gbps")];
                let key = if cross {
                    ceiling_key::p2p_cold_gpu_cross_numa(k, gpu)
                } else {
                    ceiling_key::p2p_cold_gpu(k, gpu)
                };
                let overhead = figures
                    .get(&format!("overhead_{k}drive_pct"))
                    .map_or("—".into(), |o| format!("{} %", fixed(*o, 1)));
                let mut note = if cross { "cross-NUMA" } else { "NUMA-local" }.to_string();
                if cross {
                    if let Some(pen) = figures.get("penalty_vs_local_pct") {
                        let _ = write!(note, ", {} % under NUMA-local", fixed(*pen, 1));
                    }
                } else if Some(k) == last && e.saturated == Some(true) {
                    note.push_str(", saturated (a step of drives gained < 5 %)");
                }
                rows.push(vec![
                    k.to_string(),
                    gpu.clone(),
                    ceiling_cell(p, &key, PathId::NvmeBar1, Some(gpu), v),
                    overhead,
                    note,
                ]);
            }
        }
    }
    if !rows.is_empty() {
        table(
            out,
            &[
                "Drives",
                "GPU",
                "BAR1 ceiling GB/s",
                "BAR1 overhead vs host RAM",
                "Notes",
            ],
            &rows,
        );
    }
    for name in p.gpus.keys().filter(|g| !p.bar1.contains_key(*g)) {
        let scope = format!("{name} BAR1");
        let why = p
            .waivers_of(PathId::NvmeBar1)
            .find(|w| w.scope.as_deref() == Some(scope.as_str()))
            .map(crate::waiver_line)
            .or_else(|| path_waiver(p, PathId::NvmeBar1))
            .unwrap_or_else(|| "not measured".into());
        let _ = writeln!(out, "Waived: {why}.\n");
    }
    if p.gpus.is_empty() && p.bar1.is_empty() {
        let why = path_waiver(p, PathId::NvmeBar1).unwrap_or_else(|| "no GPU".into());
        let _ = writeln!(out, "Waived: {why}.\n");
    }
    if !p.pci_bar.is_empty() {
        let _ = writeln!(
            out,
            "NVMe DMA into a PCI BAR standing in for BAR1 ({}) is in Path 8: it is not a GPU \
             figure, and no ceiling here comes from it.\n",
            p.pci_bar.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }
}

/// Figures within this fraction of each other tie.
const TIE_FRACTION: f64 = 0.02;

/// The crossover comparison: per drive count, the dispatcher cold ceiling (min of NVMe and
/// H2D) against the dispatcher-p2p cold one (NVMe → BAR1, the best GPU), and which wins.
fn crossover(out: &mut String, p: &Profile) {
    out.push_str("### Crossover comparison\n\n");
    let cold: BTreeMap<usize, f64> = match best_h2d(p) {
        Some((_, h2d)) => p
            .drive_ceilings(PathId::NvmeRead)
            .iter()
            .map(|&(n, _, nvme)| (n as usize, nvme.min(h2d)))
            .collect(),
        None => BTreeMap::new(),
    };
    let rows: Vec<Vec<String>> = cold
        .iter()
        .filter_map(|(&n, &d)| {
            let p2p = p.ceilings.get(&ceiling_key::p2p_cold(n)).copied()?;
            let winner = if (d - p2p).abs() <= TIE_FRACTION * d.max(p2p) {
                "tie (within 2 %)"
            } else if d > p2p {
                "dispatcher"
            } else {
                "dispatcher-p2p"
            };
            Some(vec![n.to_string(), gbps(d), gbps(p2p), winner.into()])
        })
        .collect();
    if rows.is_empty() {
        out.push_str(
            "Waived: the comparison needs the dispatcher and dispatcher-p2p cold ceilings of the \
             same drive count (see sub-tables 3 and 4).\n\n",
        );
        return;
    }
    table(
        out,
        &[
            "Drive count",
            "dispatcher cold GB/s",
            "dispatcher-p2p cold GB/s",
            "Winner",
        ],
        &rows,
    );
    out.push_str(
        "Both columns are ceilings derived from medians measured in this run (sub-tables 3 and \
         4 give their spreads and sources).\n\n",
    );
}

/// Duplex below this fraction of the one-way peaks added counts as the directions interfering.
const DUPLEX_INTERFERENCE_FRACTION: f64 = 0.95;

/// `H2D 55.44 (±0.1 %, N=12) at 256MiB × 1 stream, D2H …`: the measurements two figures of a
/// GPU come from, when both are there and their medians are the figures (a hand-edited
/// profile's may not be: then nothing, rather than spreads of other measurements).
fn pair_cells(
    h2d: Option<&Measurement>,
    d2h: Option<&Measurement>,
    h2d_gbps: f64,
    d2h_gbps: f64,
) -> Option<String> {
    let (a, b) = (h2d?, d2h?);
    let cell = |m: &Measurement| {
        let size = size_label(m.spec.size_bytes());
        let at = match m.spec.gpu_copy().map(|c| c.streams) {
            Some(1) => format!(" at {size} × 1 stream"),
            Some(s) => format!(" at {size} × {s} streams"),
            None => format!(" at {size}"),
        };
        format!("{}{at}", spread_of(m))
    };
    (a.gbps.median == h2d_gbps && b.gbps.median == d2h_gbps)
        .then(|| format!("H2D {}, D2H {}", cell(a), cell(b)))
}

/// GPU findings for section 8.
pub(crate) fn gpu_observations(p: &Profile) -> Vec<String> {
    let mut v = Vec::new();
    for (name, g) in &p.gpus {
        let link = p.topology.links.iter().find(|l| &l.device == name);
        if let (Some(peak), Some(l)) = (g.h2d_peak_numa_local_gbps, link) {
            // One line: the share of the link, and of its TLP-adjusted limit where known.
            let tlp = match (l.tlp_read_gbps, l.min_mps_bytes) {
                (Some(tlp), Some(mps)) => format!(
                    ", {} % of its TLP-adjusted limit for DMA reads ({} GB/s at an MPS of {mps} \
                     bytes: docs/pcie.md)",
                    fixed(peak / tlp * 100.0, 1),
                    gbps(tlp)
                ),
                _ => String::new(),
            };
            let basis = l.basis_note().map(|b| format!("{b}; ")).unwrap_or_default();
            v.push(format!(
                "{name} H2D peaks at {} GB/s, {} % of its Gen{} x{} link's theoretical {} GB/s \
                 ({basis}computed from the link, not measured){tlp}.",
                ceiling_cell(
                    p,
                    &ceiling_key::warm_h2d_peak(name),
                    PathId::H2d,
                    Some(name),
                    peak
                ),
                fixed(peak / l.theoretical_gbps * 100.0, 1),
                l.gen,
                l.width,
                gbps(l.theoretical_gbps)
            ));
        }
        if let (Some(total), Some(h), Some(d)) = (
            g.duplex_total_gbps,
            g.h2d_peak_numa_local_gbps,
            g.d2h_peak_numa_local_gbps,
        ) {
            // Sums of medians, not measurements: say so, give each input's spread and N, and
            // claim interference only when the duplex sum falls clearly short of the one-way
            // sum.
            let picks = hwc_profile::gpu_picks(name, g.numa_node, &p.measurements);
            // The cells belong to the total only if it is their sum (a hand-edited total is
            // not).
            let duplex_inputs = g
                .duplex_h2d_gbps
                .zip(g.duplex_d2h_gbps)
                .filter(|(dh, dd)| (dh + dd - total).abs() <= 1e-9 * total.abs().max(1.0))
                .and_then(|(dh, dd)| pair_cells(picks.duplex_h2d, picks.duplex_d2h, dh, dd));
            let verdict = if total < DUPLEX_INTERFERENCE_FRACTION * (h + d) {
                "H2D and D2H interfere on the link"
            } else {
                "the two directions do not measurably slow each other (the duplex sum is not 5 % below it)"
            };
            v.push(format!(
                "{name} duplex moves {} GB/s in both directions together (sum of the two \
                 directions' medians{}), against {} GB/s for the one-way peaks added (sum of \
                 their medians{}): {verdict}.",
                gbps(total),
                duplex_inputs
                    .map(|cells| format!(": {cells}"))
                    .unwrap_or_default(),
                gbps(h + d),
                pair_cells(picks.h2d_peak_numa_local, picks.d2h_peak_numa_local, h, d)
                    .map(|cells| format!(": {cells}"))
                    .unwrap_or_default(),
            ));
        }
        if let Some(pen) = g.cross_numa_h2d_penalty_gbps {
            v.push(format!(
                "{name}: a host buffer on the wrong NUMA node costs {} GB/s of H2D (1-stream peaks): \
                 pin the feeding threads and buffers to node {}.",
                gbps(pen),
                g.numa_node.map(|n| n.to_string()).unwrap_or_else(|| "?".into())
            ));
        }
    }
    v
}
