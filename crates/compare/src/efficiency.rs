//! `efficiency = measured / ceiling[path]`: the evaluator's one formula, with the checks that make
//! its answer trustworthy (a known bandwidth ceiling, a finite non-negative measurement).

use crate::source::Source;
use hwc_model::Profile;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Efficiency {
    /// The ceiling key.
    pub path: String,
    pub measured_gbps: f64,
    pub ceiling_gbps: f64,
    /// Where the ceiling comes from: the measurement it is the median of, with its spread and
    /// N, or how it was derived. Absent when only the `ceilings:` map was at hand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling_source: Option<Source>,
    /// measured / ceiling.
    pub efficiency: f64,
    /// Present when the answer needs a caveat (a measurement above its ceiling).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EfficiencyError {
    #[error("unknown ceiling `{path}` (known: {})", if known.is_empty() { "none: the profile has no bandwidth ceilings".to_string() } else { known.join(", ") })]
    UnknownPath { path: String, known: Vec<String> },
    #[error("`{path}` is not a bandwidth ceiling (a penalty, size or count, or a ceiling without a record of what it is): efficiency needs a GB/s ceiling")]
    NotBandwidth { path: String },
    #[error("measured_gbps `{0}` is not a finite, non-negative number of GB/s")]
    BadMeasured(String),
    #[error(
        "ceiling `{path}` is {value}, which cannot divide a measurement: the profile is damaged"
    )]
    UnusableCeiling { path: String, value: f64 },
}

pub use hwc_profile::usable_ceiling;

/// Parse a measured figure in GB/s: finite and ≥ 0.
pub fn parse_measured(s: &str) -> Result<f64, EfficiencyError> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| EfficiencyError::BadMeasured(s.to_string()))
}

/// The bandwidth ceilings of `p` (their records say GB/s, higher is better): the keys an
/// evaluator may ask for.
pub fn bandwidth_keys(p: &Profile) -> Vec<String> {
    p.ceilings
        .keys()
        .filter(|k| p.is_bandwidth_ceiling(k))
        .cloned()
        .collect()
}

/// `measured_gbps / p.ceilings[path]`, refused where `path` is not a usable bandwidth ceiling of
/// `p`; [`efficiency_in`] adds where the ceiling comes from and its caveats.
pub fn efficiency(
    p: &Profile,
    path: &str,
    measured_gbps: f64,
) -> Result<Efficiency, EfficiencyError> {
    if !(measured_gbps.is_finite() && measured_gbps >= 0.0) {
        return Err(EfficiencyError::BadMeasured(measured_gbps.to_string()));
    }
    let Some(&ceiling) = p.ceilings.get(path) else {
        return Err(EfficiencyError::UnknownPath {
            path: path.to_string(),
            known: bandwidth_keys(p),
        });
    };
    if !p.is_bandwidth_ceiling(path) {
        return Err(EfficiencyError::NotBandwidth {
            path: path.to_string(),
        });
    }
    if !usable_ceiling(ceiling) {
        return Err(EfficiencyError::UnusableCeiling {
            path: path.to_string(),
            value: ceiling,
        });
    }
    let ratio = measured_gbps / ceiling;
    Ok(Efficiency {
        path: path.to_string(),
        measured_gbps,
        ceiling_gbps: ceiling,
        ceiling_source: None,
        efficiency: ratio,
        note: (ratio > 1.0).then(|| {
            "the measurement exceeds the ceiling: the profile is stale, or the two count bytes differently".to_string()
        }),
    })
}

/// [`efficiency`] against a whole profile: the answer also says where the ceiling comes from
/// (`ceiling_source`, looked up by key).
pub fn efficiency_in(
    p: &Profile,
    path: &str,
    measured_gbps: f64,
) -> Result<Efficiency, EfficiencyError> {
    let mut e = efficiency(p, path, measured_gbps)?;
    let source = Source::of_ceiling(p, path);
    let contended = source.as_ref().is_some_and(|(_, c)| *c);
    e.ceiling_source = source.map(|(s, _)| s);
    // What makes the ceiling itself weaker than a ceiling: the evaluator should know before
    // dividing by it.
    let mut caveats: Vec<String> = e.note.take().into_iter().collect();
    if contended {
        caveats.push(
            "the ceiling was measured while its CPUs or GPU were busy (contended): a lower bound, \
             so this efficiency reads high"
                .into(),
        );
    }
    if p.ceiling_source(path).is_some_and(|o| o.unsteady()) {
        caveats.push("the ceiling's measurement spread more than it is held to (unsteady)".into());
    }
    if p.provenance.interrupted {
        caveats.push("the profile is of an interrupted run".into());
    }
    if !p.failures.is_empty() {
        caveats.push(format!(
            "the profile's run had {} failed case(s) (a ceiling that is the best of fewer cases \
             can be low, and this efficiency high)",
            p.failures.len()
        ));
    }
    if p.provenance.quick() {
        caveats.push("the profile is a --quick run (a look, not a ceiling to publish)".into());
    }
    let narrowed_by = p.provenance.narrowed_by();
    if !narrowed_by.is_empty() {
        caveats.push(format!(
            "the profile is of a run narrowed by {} (a part of the full plan: a ceiling of a \
             narrower sweep can be low, and this efficiency high)",
            narrowed_by.join(", ")
        ));
    }
    if let Some(c) = p.ceiling_record(path).and_then(|r| r.carried_from.as_ref()) {
        caveats.push(format!(
            "the ceiling is carried from {}, a write run that finished {}, measured on drives {} \
             while they were blank (drives that hold data since may write slower)",
            c.file,
            c.finished_at,
            c.drives.join(", ")
        ));
    }
    e.note = (!caveats.is_empty()).then(|| caveats.join("; "));
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ceilings() -> Profile {
        hwc_testkit::ceilings_profile(
            "n",
            "2026-11-29T19:05:00+00:00",
            &[
                ("warm_gpu0_peak_gbps", 55.0),
                ("warm_gpu0_cross_numa_penalty_gbps", 3.0),
                ("nvme_optimal_read_chunk_bytes", 1048576.0),
                ("broken_gbps", 0.0),
            ],
        )
    }

    #[test]
    fn ratio_of_measured_to_ceiling() {
        let e = efficiency(&ceilings(), "warm_gpu0_peak_gbps", 44.0).unwrap();
        assert!((e.efficiency - 0.8).abs() < 1e-12);
        assert_eq!(e.ceiling_gbps, 55.0);
        assert!(e.note.is_none());
        let over = efficiency(&ceilings(), "warm_gpu0_peak_gbps", 60.0).unwrap();
        assert!(over.note.unwrap().contains("exceeds"));
        assert_eq!(
            efficiency(&ceilings(), "warm_gpu0_peak_gbps", 0.0)
                .unwrap()
                .efficiency,
            0.0
        );
    }

    #[test]
    fn unknown_unusable_and_bad_inputs_are_refused() {
        match efficiency(&ceilings(), "warm_gpu9_gbps", 1.0) {
            Err(EfficiencyError::UnknownPath { known, .. }) => {
                assert_eq!(known, vec!["broken_gbps", "warm_gpu0_peak_gbps"])
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            efficiency(&ceilings(), "warm_gpu0_cross_numa_penalty_gbps", 1.0),
            Err(EfficiencyError::NotBandwidth { .. })
        ));
        assert!(matches!(
            efficiency(&ceilings(), "broken_gbps", 1.0),
            Err(EfficiencyError::UnusableCeiling { .. })
        ));
        // A ceiling added by hand has no record of what it is: not taken for a bandwidth.
        let mut bare = ceilings();
        bare.ceilings.insert("warm_gpu1_peak_gbps".into(), 50.0);
        assert!(matches!(
            efficiency(&bare, "warm_gpu1_peak_gbps", 1.0),
            Err(EfficiencyError::NotBandwidth { .. })
        ));
        let mut tiny = ceilings();
        tiny.ceilings.insert("warm_gpu0_peak_gbps".into(), 1e-320);
        assert!(matches!(
            efficiency(&tiny, "warm_gpu0_peak_gbps", 1.0),
            Err(EfficiencyError::UnusableCeiling { .. })
        ));
        for bad in ["-1", "NaN", "inf", "", "1e999", "abc", "0x10"] {
            assert!(parse_measured(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_measured(" 12.5 ").unwrap(), 12.5);
        assert!(efficiency(&ceilings(), "warm_gpu0_peak_gbps", f64::NAN).is_err());
        let e = efficiency(
            &hwc_testkit::ceilings_profile("n", "2026-11-29T19:05:00+00:00", &[]),
            "x",
            1.0,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no bandwidth ceilings"), "{e}");
    }

    #[test]
    fn a_ceiling_the_profile_records_as_carried_says_from_which_run() {
        let p = hwc_testkit::ceilings_profile("n", "2026-11-29T19:05:00+00:00", &[]);
        let mut p = hwc_testkit::with_nvme(p, &["S1"], Some(5.0));
        let e = efficiency_in(&p, "nvme_raw_1drive_write_gbps", 2.5).unwrap();
        assert_eq!(e.note, None);
        p.ceiling_records
            .get_mut("nvme_raw_1drive_write_gbps")
            .unwrap()
            .carried_from = Some(hwc_model::CarriedFrom {
            file: "hardware_profile_2026-11-28.yaml".into(),
            finished_at: "2026-11-28T10:00:00+00:00".into(),
            drives: vec!["S1".into()],
        });
        let e = efficiency_in(&p, "nvme_raw_1drive_write_gbps", 2.5).unwrap();
        assert_eq!(
            e.note.as_deref(),
            Some(
                "the ceiling is carried from hardware_profile_2026-11-28.yaml, a write run that \
                 finished 2026-11-28T10:00:00+00:00, measured on drives S1 while they were blank \
                 (drives that hold data since may write slower)"
            )
        );
    }

    #[test]
    fn against_a_profile_the_answer_names_the_ceilings_source() {
        let mut p = hwc_testkit::ceilings_profile(
            "n",
            "2026-11-29T19:05:00+00:00",
            &[("warm_gpu0_peak_gbps", 55.0)],
        );
        for (key, spread) in [
            ("h2d/cuda-copy/gpu0/local/4MiB/s4", 0.2),
            ("h2d/cuda-copy/gpu0/local/256MiB/s1", 1.8),
        ] {
            p.measurements
                .push(hwc_testkit::h2d_measurement(key, 55.0, spread, 12));
        }
        // A version 1 profile written before ceiling sources: the first equal median.
        let e = efficiency_in(
            &hwc_testkit::unsourced(p.clone()),
            "warm_gpu0_peak_gbps",
            44.0,
        )
        .unwrap();
        assert_eq!(
            e.ceiling_source,
            Some(Source::Measured {
                measurement: "h2d/cuda-copy/gpu0/local/4MiB/s4".into(),
                spread_pct: 0.2,
                n: 12
            })
        );
        let p = hwc_testkit::with_sources(
            p,
            &[(
                "warm_gpu0_peak_gbps",
                hwc_model::CeilingSource::measured("h2d/cuda-copy/gpu0/local/256MiB/s1"),
            )],
        );
        let e = efficiency_in(&p, "warm_gpu0_peak_gbps", 44.0).unwrap();
        assert!((e.efficiency - 0.8).abs() < 1e-12);
        assert_eq!(
            e.ceiling_source,
            Some(Source::Measured {
                measurement: "h2d/cuda-copy/gpu0/local/256MiB/s1".into(),
                spread_pct: 1.8,
                n: 12
            }),
            "by key, not the first equal median"
        );
    }
}
