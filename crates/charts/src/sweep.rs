//! Bandwidth against transfer size: the measurements of a path grouped into charts (what they
//! were measured on) and series (the setting swept beside the size), then drawn.

use crate::{colour, draw_error, file_stem, Result};
use hwc_model::spec::{CopyDirection, DmaTarget, GdsRoute, NvmeTest};
use hwc_model::topology::LinkTheory;
use hwc_model::{size_label, EngineId, Measurement, PathId, Profile, Spec};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::BTreeMap;

/// A series' knee: the smallest size whose median reaches this share of the series' peak.
pub const KNEE_SHARE: f64 = 0.95;

/// One chart of bandwidth against transfer size.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    pub path: PathId,
    /// The chart's file stem, unique among the profile's sweeps.
    pub name: String,
    pub title: String,
    /// The theoretical bandwidth of the link the data crosses, where it has one the profile
    /// knows (none for D2D and host RAM).
    pub theory: Option<Theory>,
    pub series: Vec<Series>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Theory {
    pub gbps: f64,
    /// What link it is: `PCIe Gen5 x16 (gpu0)`.
    pub label: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    /// By size, smallest first.
    pub points: Vec<Point>,
}

/// One measurement: its median with the min and max of its repetitions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub size_bytes: u64,
    pub median_gbps: f64,
    pub min_gbps: f64,
    pub max_gbps: f64,
    pub n: u32,
    /// The buffers fit in a cache: drawn hollow, and never a knee.
    pub cache_resident: bool,
}

impl Series {
    /// The smallest size whose median reaches [`KNEE_SHARE`] of the series' peak median, of
    /// the sizes that are not cache figures.
    pub fn knee(&self) -> Option<Point> {
        let memory = || self.points.iter().filter(|p| !p.cache_resident);
        let peak = memory().map(|p| p.median_gbps).fold(f64::NAN, f64::max);
        memory()
            .find(|p| p.median_gbps >= KNEE_SHARE * peak)
            .copied()
    }
}

/// Where a measurement goes: its chart and its series.
struct Place {
    chart: String,
    title: String,
    theory: Option<Theory>,
    /// Orders the series of a chart.
    series_order: u64,
    series: String,
    size_bytes: u64,
}

/// Every sweep chart the profile's measurements make, in path order, charts of a path in the
/// order their first measurement appears. Duplex copies have their own chart
/// ([`crate::duplex`]); latency probes and long tests are not sweeps, and the figures of an
/// engine that measures the tool itself (not the hardware) are not drawn.
pub fn sweeps(p: &Profile) -> Vec<Sweep> {
    /// A series as it is gathered: its order, its engines, its points and each one's engine.
    type Gathered = (u64, Vec<EngineId>, Vec<(Point, EngineId)>);
    struct Building {
        sweep: Sweep,
        /// By series label.
        series: BTreeMap<String, Gathered>,
    }
    let mut charts: Vec<Building> = Vec::new();
    // Only hardware figures: an engine that measures the tool itself makes no ceiling.
    for m in p.measurements.iter().filter(|m| p.hardware(&m.engine)) {
        let Some(place) = place(p, m) else { continue };
        let i = match charts.iter().position(|b| b.sweep.name == place.chart) {
            Some(i) => i,
            None => {
                charts.push(Building {
                    sweep: Sweep {
                        path: m.path,
                        name: place.chart.clone(),
                        title: place.title.clone(),
                        theory: place.theory.clone(),
                        series: Vec::new(),
                    },
                    series: BTreeMap::new(),
                });
                charts.len() - 1
            }
        };
        let entry = charts[i]
            .series
            .entry(place.series)
            .or_insert_with(|| (place.series_order, Vec::new(), Vec::new()));
        if !entry.1.contains(&m.engine) {
            entry.1.push(m.engine.clone());
        }
        entry.2.push((
            Point {
                size_bytes: place.size_bytes,
                median_gbps: m.gbps.median,
                min_gbps: m.gbps.min,
                max_gbps: m.gbps.max,
                n: m.gbps.n,
                cache_resident: m.cache_resident,
            },
            m.engine.clone(),
        ));
    }
    let mut out: Vec<Sweep> = charts
        .into_iter()
        .map(|b| {
            let mut engines: Vec<EngineId> = Vec::new();
            for (_, e, _) in b.series.values() {
                for id in e {
                    if !engines.contains(id) {
                        engines.push(id.clone());
                    }
                }
            }
            let mut sweep = b.sweep;
            let mut series: Vec<(u64, String, Series)> = Vec::new();
            for (label, (order, _, points)) in b.series {
                // Several engines in one chart: a series per engine, each named.
                for engine in &engines {
                    let mut pts: Vec<Point> = points
                        .iter()
                        .filter(|(_, e)| e == engine)
                        .map(|(pt, _)| *pt)
                        .collect();
                    if pts.is_empty() {
                        continue;
                    }
                    pts.sort_by_key(|pt| pt.size_bytes);
                    let label = if engines.len() > 1 {
                        format!("{label}, {engine}")
                    } else {
                        label.clone()
                    };
                    series.push((order, label.clone(), Series { label, points: pts }));
                }
            }
            series.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
            sweep.series = series.into_iter().map(|(_, _, s)| s).collect();
            sweep
        })
        .collect();
    out.sort_by_key(|s| PathId::ALL.iter().position(|&p| p == s.path));
    out
}

fn gpu_link<'a>(p: &'a Profile, gpu: &str) -> Option<&'a LinkTheory> {
    p.topology.links.iter().find(|l| l.device == gpu)
}

fn link_theory(l: &LinkTheory) -> Theory {
    Theory {
        gbps: l.theoretical_gbps,
        label: format!("PCIe Gen{} x{} ({})", l.gen, l.width, l.device),
    }
}

/// The drives' links together (each drive's key is its BDF, or its name where it has none);
/// `None` unless every drive's link is known.
fn drives_theory(p: &Profile, drives: &[String]) -> Option<Theory> {
    let links: Vec<&LinkTheory> = drives
        .iter()
        .map(|d| {
            p.topology
                .links
                .iter()
                .find(|l| &l.bdf == d || &l.device == d)
        })
        .collect::<Option<_>>()?;
    let first = links.first()?;
    let gbps = links.iter().map(|l| l.theoretical_gbps).sum();
    let same = links
        .iter()
        .all(|l| (l.gen, l.width) == (first.gen, first.width));
    let label = match (links.len(), same) {
        (1, _) => format!("PCIe Gen{} x{} ({})", first.gen, first.width, first.device),
        (n, true) => format!("{n} × PCIe Gen{} x{}", first.gen, first.width),
        (n, false) => format!("{n} drives' PCIe links"),
    };
    Some(Theory { gbps, label })
}

/// The lower of two limits, where either is known.
fn lower(a: Option<Theory>, b: Option<Theory>) -> Option<Theory> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.gbps < a.gbps { b } else { a }),
        (a, b) => a.or(b),
    }
}

fn gpu_title(p: &Profile, gpu: &str) -> String {
    match p.gpus.get(gpu).and_then(|g| g.model.as_deref()) {
        Some(model) => format!("{gpu} ({model})"),
        None => gpu.to_string(),
    }
}

fn drive_count(n: usize) -> String {
    if n == 1 {
        "1 drive".into()
    } else {
        format!("{n} drives")
    }
}

fn place(p: &Profile, m: &Measurement) -> Option<Place> {
    let path = m.path;
    let name = path.as_str();
    match &m.spec {
        Spec::GpuCopy(s) if matches!(path, PathId::H2d | PathId::D2h) => {
            let memory = if s.pinned() { "pinned" } else { "pageable" };
            let gpu_node = p.gpus.get(&s.gpu).and_then(|g| g.numa_node);
            let (node, where_) = match s.host_node {
                Some(n) if gpu_node == Some(n) => (format!("node{n}"), format!("node {n}, local")),
                Some(n) if gpu_node.is_some() => {
                    (format!("node{n}"), format!("node {n}, cross-NUMA"))
                }
                Some(n) => (format!("node{n}"), format!("node {n}")),
                None => ("any".into(), "an unplaced buffer".into()),
            };
            let dir = if path == PathId::H2d { "H2D" } else { "D2H" };
            Some(Place {
                chart: file_stem(&format!("{name}-{}-{memory}-{node}", s.gpu)),
                title: format!(
                    "{dir} copies, {}: {memory} host memory on {where_}",
                    gpu_title(p, &s.gpu)
                ),
                theory: gpu_link(p, &s.gpu).map(link_theory),
                series_order: u64::from(s.streams),
                series: streams(s.streams),
                size_bytes: s.size_bytes,
            })
        }
        Spec::GpuCopy(s) if path == PathId::D2d => Some(Place {
            chart: file_stem(&format!("{name}-{}", s.gpu)),
            title: format!(
                "D2D copies in {}'s memory (no PCIe link crossed)",
                gpu_title(p, &s.gpu)
            ),
            theory: None,
            series_order: u64::from(s.streams),
            series: streams(s.streams),
            size_bytes: s.size_bytes,
        }),
        Spec::Nvme(s) if s.test == NvmeTest::Sweep => {
            let way = if path == PathId::NvmeRead {
                "NVMe reads"
            } else {
                "NVMe writes"
            };
            let (what, theory) = if s.target {
                ("a target file or device".to_string(), None)
            } else {
                (drive_count(s.drives.len()), drives_theory(p, &s.drives))
            };
            let pattern = match s.pattern.as_str() {
                "sequential" => String::new(),
                other => format!(", {other}"),
            };
            // Several groups of the same size (each drive alone): a series per group.
            let groups = p
                .measurements_of(path)
                .filter_map(|o| match &o.spec {
                    Spec::Nvme(t)
                        if t.test == NvmeTest::Sweep
                            && t.target == s.target
                            && t.pattern == s.pattern
                            && t.drives.len() == s.drives.len() =>
                    {
                        Some(&t.drives)
                    }
                    _ => None,
                })
                .fold(Vec::new(), |mut v: Vec<&Vec<String>>, d| {
                    if !v.contains(&d) {
                        v.push(d);
                    }
                    v
                });
            let group = if groups.len() > 1 {
                format!("{}, ", s.drives.join("+"))
            } else {
                String::new()
            };
            Some(Place {
                chart: file_stem(&format!(
                    "{name}-{}{pattern}",
                    if s.target {
                        "target".to_string()
                    } else {
                        drive_count(s.drives.len())
                    }
                )),
                title: format!("{way}, {what}{pattern}"),
                theory,
                series_order: u64::from(s.queue_depth),
                series: format!("{group}QD{}", s.queue_depth),
                size_bytes: s.block_bytes,
            })
        }
        Spec::Gds(s) => {
            let way = if s.write {
                "GPU → NVMe"
            } else {
                "NVMe → GPU"
            };
            let route = match s.route {
                GdsRoute::Cufile => "cuFile",
                GdsRoute::PosixBounce => "POSIX bounce",
            };
            let theory = lower(
                gpu_link(p, &s.gpu).map(link_theory),
                if s.target {
                    None
                } else {
                    drives_theory(p, &s.drives)
                },
            );
            Some(Place {
                chart: file_stem(&format!(
                    "gds-{}-{}-{}",
                    if s.write { "write" } else { "read" },
                    s.gpu,
                    drive_count(s.drives.len())
                )),
                title: format!(
                    "{way} (GDS), {}, {}",
                    gpu_title(p, &s.gpu),
                    drive_count(s.drives.len())
                ),
                theory,
                series_order: u64::from(s.route == GdsRoute::PosixBounce) << 32
                    | u64::from(s.queue_depth),
                series: format!("{route}, QD{}", s.queue_depth),
                size_bytes: s.block_bytes,
            })
        }
        // A chart per engine: each sweeps threads at each size.
        Spec::HostCopy(s) => Some(Place {
            chart: file_stem(&format!(
                "host-ram-{}-n{}-n{}-cpu{}",
                m.engine, s.src_node, s.dst_node, s.cpu_node
            )),
            title: format!(
                "Host RAM copies by {}, node {} → node {} (threads on node {})",
                m.engine, s.src_node, s.dst_node, s.cpu_node
            ),
            theory: None,
            series_order: u64::from(s.threads),
            series: if s.threads == 1 {
                "1 thread".into()
            } else {
                format!("{} threads", s.threads)
            },
            size_bytes: s.size_bytes,
        }),
        Spec::Gdrcopy(s) if !s.latency => {
            let node = s.cpu_node.map_or("any".to_string(), |n| format!("node{n}"));
            Some(Place {
                chart: file_stem(&format!("gdrcopy-{}-{node}", s.gpu)),
                title: format!(
                    "GDRCopy CPU ↔ {} BAR1, thread on {}",
                    gpu_title(p, &s.gpu),
                    s.cpu_node
                        .map_or("an unplaced CPU".to_string(), |n| format!("node {n}"))
                ),
                theory: gpu_link(p, &s.gpu).map(link_theory),
                series_order: u64::from(s.direction == CopyDirection::D2h),
                series: match s.direction {
                    CopyDirection::H2d => "CPU → BAR1".into(),
                    CopyDirection::D2h => "BAR1 → CPU".into(),
                },
                size_bytes: s.size_bytes,
            })
        }
        Spec::NvmeBar(s) => {
            let memory = match s.memory {
                DmaTarget::Bar => "into the BAR",
                DmaTarget::HostRam => "into host RAM",
            };
            Some(Place {
                chart: file_stem(&format!(
                    "nvme-bar-{}-{}",
                    s.device.key(),
                    drive_count(s.drives.len())
                )),
                title: format!(
                    "NVMe DMA → {}, {}",
                    s.device.label(),
                    drive_count(s.drives.len())
                ),
                theory: drives_theory(p, &s.drives),
                series_order: u64::from(s.memory == DmaTarget::HostRam) << 32
                    | u64::from(s.queue_depth),
                series: format!("{memory}, QD{}", s.queue_depth),
                size_bytes: s.block_bytes,
            })
        }
        _ => None,
    }
}

fn streams(n: u32) -> String {
    if n == 1 {
        "1 stream".into()
    } else {
        format!("{n} streams")
    }
}

/// `1 MiB`, `128 KiB`, `3 B`: a size for an axis.
pub fn size_text(bytes: u64) -> String {
    let l = size_label(bytes);
    match l.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => format!("{} {}", &l[..i], &l[i..]),
        None => l,
    }
}

pub(crate) const WIDTH: u32 = 960;
pub(crate) const HEIGHT: u32 = 560;

/// The chart as SVG.
pub fn svg(s: &Sweep) -> Result<String> {
    let mut out = String::new();
    draw(s, &mut out).map_err(|e| draw_error(&s.name, e))?;
    Ok(out)
}

type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn draw(s: &Sweep, out: &mut String) -> DrawResult {
    let points = || s.series.iter().flat_map(|x| x.points.iter());
    let log2 = |b: u64| (b.max(1) as f64).log2();
    let (mut x0, mut x1) = points().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
        (a.min(log2(p.size_bytes)), b.max(log2(p.size_bytes)))
    });
    if !x0.is_finite() {
        (x0, x1) = (10.0, 30.0);
    }
    let (x0, x1) = (x0.floor() - 0.5, x1.ceil() + 0.5);
    let top = points()
        .map(|p| p.max_gbps.max(p.median_gbps))
        .chain(s.theory.as_ref().map(|t| t.gbps))
        .fold(0.0_f64, f64::max);
    let y1 = if top > 0.0 { top * 1.12 } else { 1.0 };

    let root = SVGBackend::with_string(out, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, foot) = root.split_vertically(HEIGHT - 28);
    let mut chart = ChartBuilder::on(&plot)
        .caption(&s.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, 0.0..y1)?;
    chart
        .configure_mesh()
        .x_desc("transfer size (log₂ scale)")
        .y_desc("bandwidth, GB/s (10⁹ B/s)")
        .x_labels(((x1 - x0) as usize + 1).min(24))
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-9 && *x >= 0.0 {
                size_text(2f64.powi(x.round() as i32) as u64)
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| format!("{y:.0}"))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;

    if let Some(t) = &s.theory {
        let style = ShapeStyle::from(&RGBColor(90, 90, 90)).stroke_width(2);
        chart
            .draw_series(DashedLineSeries::new(
                vec![(x0, t.gbps), (x1, t.gbps)],
                10,
                6,
                style,
            ))?
            .label(format!("theoretical: {} = {:.1} GB/s", t.label, t.gbps))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }

    for (i, series) in s.series.iter().enumerate() {
        let c = colour(i);
        let line = ShapeStyle::from(&c).stroke_width(2);
        let xy: Vec<(f64, f64)> = series
            .points
            .iter()
            .map(|p| (log2(p.size_bytes), p.median_gbps))
            .collect();
        chart
            .draw_series(LineSeries::new(xy, line))?
            .label(series.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], line));
        // Each point: the median (the dot) and the min–max of its repetitions (the whisker).
        chart.draw_series(series.points.iter().map(|p| {
            let style = if p.cache_resident {
                ShapeStyle::from(&c).stroke_width(1)
            } else {
                c.filled()
            };
            ErrorBar::new_vertical(
                log2(p.size_bytes),
                p.min_gbps,
                p.median_gbps,
                p.max_gbps,
                style,
                8,
            )
        }))?;
        if let Some(k) = series.knee() {
            chart.draw_series(std::iter::once(TriangleMarker::new(
                (log2(k.size_bytes), k.median_gbps),
                9,
                ShapeStyle::from(&c).stroke_width(2),
            )))?;
        }
    }
    // The knee of the best series, in words beside its marker.
    if let Some(k) = s
        .series
        .iter()
        .filter_map(|x| x.knee().map(|k| (peak(x), k)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
    {
        // Right of the marker, or left of it near the right edge, so it is not cut off.
        let x = log2(k.size_bytes);
        let h = if x > x0 + 0.75 * (x1 - x0) {
            HPos::Right
        } else {
            HPos::Left
        };
        chart.draw_series(std::iter::once(Text::new(
            format!("knee {}", size_text(k.size_bytes)),
            (x, k.median_gbps + y1 * 0.07),
            ("sans-serif", 14)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(h, VPos::Top)),
        )))?;
    }
    // The legend where the curves are not: low on the right where they end high.
    let ends_high = s
        .series
        .iter()
        .filter_map(|x| x.points.last())
        .all(|p| p.median_gbps > 0.45 * y1);
    chart
        .configure_series_labels()
        .position(if ends_high {
            SeriesLabelPosition::LowerRight
        } else {
            SeriesLabelPosition::UpperRight
        })
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(160, 160, 160))
        .label_font(("sans-serif", 14))
        .draw()?;
    let n: Vec<u32> = points().map(|p| p.n).collect();
    let reps = match (n.iter().min(), n.iter().max()) {
        (Some(a), Some(b)) if a == b => format!("{a}"),
        (Some(a), Some(b)) => format!("{a}–{b}"),
        _ => "no".into(),
    };
    foot.draw(&Text::new(
        format!(
            "dot: median of {reps} timed repetitions (hollow: a cache figure); whisker: their \
             min–max; △ knee: the smallest size reaching {:.0} % of the series' peak",
            KNEE_SHARE * 100.0
        ),
        (14, 4),
        ("sans-serif", 13).into_font().color(&RGBColor(60, 60, 60)),
    ))?;
    root.present()?;
    Ok(())
}

/// The series' highest median, cache figures left out (as for its knee).
fn peak(s: &Series) -> f64 {
    s.points
        .iter()
        .filter(|p| !p.cache_resident)
        .map(|p| p.median_gbps)
        .fold(f64::NEG_INFINITY, f64::max)
}
