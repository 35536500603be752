//! The duplex penalty: per GPU and transfer size, H2D and D2H alone beside the same copies run
//! at the same time (one stream each way), as bars with min–max whiskers.

use crate::sweep::size_text;
use crate::{colour, draw_error, file_stem, Result};
use hwc_model::spec::{CopyDirection, GpuCopySpec};
use hwc_model::{Measurement, PathId, Profile, Spec, Stats};
use plotters::prelude::*;

/// The bars of each size, in this order.
pub const BARS: [&str; 4] = ["H2D alone", "H2D in duplex", "D2H alone", "D2H in duplex"];

/// One GPU's duplex chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Duplex {
    /// The chart's file stem.
    pub name: String,
    pub title: String,
    /// By size, smallest first.
    pub groups: Vec<Group>,
}

/// One size: each of [`BARS`], where it was measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub size_bytes: u64,
    pub bars: [Option<Stats>; 4],
}

impl Group {
    /// How much slower each direction ran in duplex than alone, in per cent of alone
    /// (H2D, D2H), where both were measured.
    pub fn penalty_pct(&self) -> [Option<f64>; 2] {
        let pct = |alone: &Option<Stats>, both: &Option<Stats>| match (alone, both) {
            (Some(a), Some(b)) if a.median > 0.0 => Some((a.median - b.median) / a.median * 100.0),
            _ => None,
        };
        [
            pct(&self.bars[0], &self.bars[1]),
            pct(&self.bars[2], &self.bars[3]),
        ]
    }
}

fn gpu_copy(m: &Measurement) -> Option<&GpuCopySpec> {
    match &m.spec {
        Spec::GpuCopy(s) => Some(s),
        _ => None,
    }
}

/// A duplex chart per GPU and host node whose duplex copies were measured.
pub fn charts(p: &Profile) -> Vec<Duplex> {
    let mut out: Vec<(String, Option<u32>, Duplex)> = Vec::new();
    for m in p
        .measurements_of(PathId::Duplex)
        .filter(|m| p.hardware(&m.engine))
    {
        let Some(s) = gpu_copy(m) else { continue };
        let Some(direction) = s.direction else {
            continue;
        };
        let i = match out
            .iter()
            .position(|(g, n, _)| g == &s.gpu && n == &s.host_node)
        {
            Some(i) => i,
            None => {
                let node = s
                    .host_node
                    .map_or("any".to_string(), |n| format!("node{n}"));
                let model = p
                    .gpus
                    .get(&s.gpu)
                    .and_then(|g| g.model.as_deref())
                    .map_or(String::new(), |m| format!(" ({m})"));
                let host = s
                    .host_node
                    .map_or(String::new(), |n| format!(", host memory on node {n}"));
                out.push((
                    s.gpu.clone(),
                    s.host_node,
                    Duplex {
                        name: file_stem(&format!("duplex-{}-{node}", s.gpu)),
                        title: format!(
                            "Duplex penalty, {}{model}: each direction alone and both at once{host}",
                            s.gpu
                        ),
                        groups: Vec::new(),
                    },
                ));
                out.len() - 1
            }
        };
        let d = &mut out[i].2;
        let g = match d.groups.iter().position(|g| g.size_bytes == s.size_bytes) {
            Some(g) => g,
            None => {
                d.groups.push(Group {
                    size_bytes: s.size_bytes,
                    bars: [None; 4],
                });
                d.groups.len() - 1
            }
        };
        let (alone_path, slot) = match direction {
            CopyDirection::H2d => (PathId::H2d, 0),
            CopyDirection::D2h => (PathId::D2h, 2),
        };
        d.groups[g].bars[slot + 1] = Some(m.gbps);
        // The same copy alone: same GPU, size, streams, pinned memory on the same node.
        let alone = p.measurements_of(alone_path).find(|o| {
            gpu_copy(o).is_some_and(|a| {
                a.gpu == s.gpu
                    && a.size_bytes == s.size_bytes
                    && a.streams == s.streams
                    && a.pinned()
                    && a.host_node == s.host_node
            }) && o.engine == m.engine
        });
        if let Some(a) = alone {
            d.groups[g].bars[slot] = Some(a.gbps);
        }
    }
    out.into_iter()
        .map(|(_, _, mut d)| {
            d.groups.sort_by_key(|g| g.size_bytes);
            d
        })
        .collect()
}

/// The chart as SVG.
pub fn svg(d: &Duplex) -> Result<String> {
    let mut out = String::new();
    draw(d, &mut out).map_err(|e| draw_error(&d.name, e))?;
    Ok(out)
}

const BAR_COLOURS: [usize; 4] = [0, 5, 1, 4];

fn draw(d: &Duplex, out: &mut String) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let n = d.groups.len().max(1);
    let top = d
        .groups
        .iter()
        .flat_map(|g| g.bars.iter().flatten())
        .map(|s| s.max.max(s.median))
        .fold(0.0_f64, f64::max);
    // Headroom above the bars for the legend.
    let y1 = if top > 0.0 { top * 1.45 } else { 1.0 };
    let width = (240 + 110 * n as u32).clamp(720, 1400);
    let root = SVGBackend::with_string(out, (width, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, foot) = root.split_vertically(520 - 28);
    let mut chart = ChartBuilder::on(&plot)
        .caption(&d.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5..(n as f64 - 0.5), 0.0..y1)?;
    let sizes: Vec<u64> = d.groups.iter().map(|g| g.size_bytes).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("transfer size per copy")
        .y_desc("bandwidth, GB/s (10⁹ B/s)")
        .x_labels(n + 1)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-9 && i >= 0.0 {
                sizes
                    .get(i as usize)
                    .map_or(String::new(), |&b| size_text(b))
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| format!("{y:.0}"))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    const BAR_WIDTH: f64 = 0.19;
    let left = |i: usize, b: usize| i as f64 - 2.0 * BAR_WIDTH + b as f64 * BAR_WIDTH;
    for (b, label) in BARS.iter().enumerate() {
        let c = colour(BAR_COLOURS[b]);
        chart
            .draw_series(d.groups.iter().enumerate().filter_map(|(i, g)| {
                let s = g.bars[b]?;
                let x = left(i, b);
                Some(Rectangle::new(
                    [(x + 0.01, 0.0), (x + BAR_WIDTH - 0.01, s.median)],
                    c.filled(),
                ))
            }))?
            .label(*label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()));
        chart.draw_series(d.groups.iter().enumerate().filter_map(|(i, g)| {
            let s = g.bars[b]?;
            Some(ErrorBar::new_vertical(
                left(i, b) + BAR_WIDTH / 2.0,
                s.min,
                s.median,
                s.max,
                BLACK.filled(),
                6,
            ))
        }))?;
    }
    // Each duplex bar's penalty against its direction alone.
    for (i, g) in d.groups.iter().enumerate() {
        for (k, pct) in g.penalty_pct().iter().enumerate() {
            let (Some(pct), Some(s)) = (pct, g.bars[2 * k + 1]) else {
                continue;
            };
            chart.draw_series(std::iter::once(Text::new(
                format!("{}{:.0} %", if *pct > 0.0 { "−" } else { "+" }, pct.abs()),
                (left(i, 2 * k + 1), s.max.max(s.median) + y1 * 0.02),
                ("sans-serif", 12).into_font().color(&BLACK),
            )))?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(160, 160, 160))
        .label_font(("sans-serif", 14))
        .draw()?;
    foot.draw(&Text::new(
        "bar: median; whisker: min–max of the repetitions; the figure above a duplex bar: its \
         change against the same direction alone",
        (14, 4),
        ("sans-serif", 13).into_font().color(&RGBColor(60, 60, 60)),
    ))?;
    root.present()?;
    Ok(())
}
