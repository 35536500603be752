//! Draws a profile's charts as SVG: pure functions from the typed results to SVG text, which
//! the session writes beside the report and the report links from the section each illustrates.
//!
//! - [`sweep`]: bandwidth against transfer size, one chart per path and what it was measured on
//!   (GPU, host placement, drive count), one line per series (streams, threads, queue depth);
//!   each point is the median of its repetitions with a min–max whisker, the link's theoretical
//!   bandwidth is a horizontal line, and each series' knee (the smallest size reaching 95 % of
//!   its peak) is marked.
//! - [`duplex`]: the duplex penalty per GPU, H2D and D2H alone beside the same copies at the same
//!   time, as bars with whiskers.
//! - [`topology`]: NUMA nodes, their root complexes and the GPUs and drives on them.
//!
//! Drawn with `plotters`' SVG backend, which writes text as `<text>` elements: no font file or
//! font library is read. A chart with nothing to draw is not made.

use hwc_model::{PathId, Profile};
use plotters::style::RGBColor;

pub mod duplex;
pub mod sweep;
pub mod topology;

/// A chart could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("cannot draw chart {chart}: {detail}")]
    Draw { chart: String, detail: String },
    #[error("cannot make the profile's strings safe to draw: {0}")]
    Escape(#[from] hwc_model::text::EscapeError),
}

pub type Result<T> = std::result::Result<T, ChartError>;

/// One drawn chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// The path whose report section it illustrates; `None` for the topology picture (the
    /// report's platform section).
    pub path: Option<PathId>,
    /// Its name, unique among the profile's charts: `h2d-gpu0-pinned-node0` (the report's
    /// link text; its file is [`Chart::file_name`]).
    pub name: String,
    /// What it shows, in words (its caption).
    pub title: String,
    pub svg: String,
}

impl Chart {
    /// Its file: its name and `.svg` (`h2d-gpu0-pinned-node0.svg`).
    pub fn file_name(&self) -> String {
        format!("{}.svg", self.name)
    }
}

/// Every chart the profile has data for: the topology picture, then each path's sweeps in the
/// spec's path order, each duplex chart after the copies it compares. Control characters in the
/// profile's strings (a hostname, a model) are drawn as visible escapes: an SVG cannot hold them.
pub fn all(p: &Profile) -> Result<Vec<Chart>> {
    let safe = hwc_model::text::escape_strings(p, hwc_model::text::escape_control)?;
    let p = &safe;
    let mut out = Vec::new();
    if let Some(t) = topology::picture(p) {
        out.push(Chart {
            path: None,
            name: "topology".into(),
            title: t.title.clone(),
            svg: topology::svg(&t)?,
        });
    }
    let sweeps = sweep::sweeps(p);
    let duplexes = duplex::charts(p);
    for path in PathId::ALL {
        for s in sweeps.iter().filter(|s| s.path == path) {
            out.push(Chart {
                path: Some(path),
                name: s.name.clone(),
                title: s.title.clone(),
                svg: sweep::svg(s)?,
            });
        }
        if path == PathId::Duplex {
            for d in &duplexes {
                out.push(Chart {
                    path: Some(path),
                    name: d.name.clone(),
                    title: d.title.clone(),
                    svg: duplex::svg(d)?,
                });
            }
        }
    }
    Ok(out)
}

/// Series colours (Okabe–Ito: told apart by colour-blind readers too), then black.
pub(crate) const COLOURS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

pub(crate) fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// A file-name-safe form of `s`: ASCII letters and digits and `-`; anything else becomes `-`.
pub(crate) fn file_stem(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    while out.contains("--") {
        out = out.replace("--", "-");
    }
    out.trim_matches('-').to_string()
}

pub(crate) fn draw_error(chart: &str, e: impl std::fmt::Display) -> ChartError {
    ChartError::Draw {
        chart: chart.to_string(),
        detail: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn file_stems_are_safe() {
        assert_eq!(
            super::file_stem("nvme_read 2 drives/QD32"),
            "nvme-read-2-drives-qd32"
        );
        assert_eq!(super::file_stem("../x"), "x");
    }
}
