//! Where a printed figure comes from, as every table of this crate shows it beside the number:
//! the statistic's spread and repetition count N of the measurement it is the median of, or a
//! `derived` label. Ceilings are looked up by key in the profile's `ceiling_records`
//! ([`Profile::ceiling_source`]), never by matching their value.

use hwc_model::text::fixed;
use hwc_model::{CeilingOrigin, Measurement, Profile};
use serde::Serialize;

/// A figure's source, resolved for printing and for JSON/YAML output.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// The figure is the median of this measurement.
    Measured {
        measurement: String,
        spread_pct: f64,
        n: u32,
    },
    /// Arithmetic on measured medians: how (absent for a profile written before
    /// ceiling sources), and the keys of the measurements it read.
    Derived {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        how: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        inputs: Vec<String>,
    },
    /// The profile does not say (a hand-edited or damaged `ceiling_records`).
    Unknown,
}

impl Source {
    /// A measurement's own statistics.
    pub fn of_measurement(m: &Measurement) -> Self {
        Source::Measured {
            measurement: m.key.clone(),
            spread_pct: m.gbps.spread_pct,
            n: m.gbps.n,
        }
    }

    /// The source of the ceiling `key`, and whether it is, or was derived from, a contended
    /// measurement; `None` when the profile has no such ceiling.
    pub fn of_ceiling(p: &Profile, key: &str) -> Option<(Self, bool)> {
        let origin = p.ceiling_source(key)?;
        let contended = origin.contended();
        let source = match origin {
            CeilingOrigin::Measured(m) => Source::of_measurement(m),
            CeilingOrigin::Derived { how, inputs } => Source::Derived {
                how: how.map(str::to_string),
                inputs: inputs.iter().map(|m| m.key.clone()).collect(),
            },
            CeilingOrigin::Unknown => Source::Unknown,
        };
        Some((source, contended))
    }

    /// The table cell: `±1.2% N=12`, `derived` or `unknown`.
    pub fn cell(&self) -> String {
        match self {
            Source::Measured { spread_pct, n, .. } => format!("±{}% N={n}", fixed(*spread_pct, 1)),
            Source::Derived { .. } => "derived".into(),
            Source::Unknown => "unknown".into(),
        }
    }

    /// One phrase for prose: `median of `KEY`, ±1.2 %, N=12`, `derived: HOW`, …
    pub fn phrase(&self) -> String {
        match self {
            Source::Measured {
                measurement,
                spread_pct,
                n,
            } => format!(
                "median of `{measurement}`, ±{} %, N={n}",
                fixed(*spread_pct, 1)
            ),
            Source::Derived { how: Some(how), .. } => format!("derived: {how}"),
            Source::Derived { how: None, .. } => "derived from measured medians".into(),
            Source::Unknown => "source unknown: the profile's ceiling_records do not say".into(),
        }
    }

    /// How a derived figure was computed, when the profile says.
    pub fn how(&self) -> Option<&str> {
        match self {
            Source::Derived { how, .. } => how.as_deref(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_and_phrases() {
        let m = Source::Measured {
            measurement: "h2d/cuda-copy/gpu0/local/4MiB/s1".into(),
            spread_pct: 1.25,
            n: 12,
        };
        assert_eq!(m.cell(), "±1.2% N=12");
        assert_eq!(
            m.phrase(),
            "median of `h2d/cuda-copy/gpu0/local/4MiB/s1`, ±1.2 %, N=12"
        );
        let d = Source::Derived {
            how: Some("a minus b".into()),
            inputs: vec![],
        };
        assert_eq!(
            (d.cell().as_str(), d.phrase().as_str()),
            ("derived", "derived: a minus b")
        );
        assert_eq!(d.how(), Some("a minus b"));
        assert_eq!(Source::Unknown.cell(), "unknown");
    }
}
