//! `GET /metrics`: the served profile as Prometheus gauges, one per ceiling, labelled with what
//! its record says (`path` = the ceiling key, `gpu`, `drives`, `numa`, `engine`; `carried_from`
//! on a ceiling the profile records as carried from an earlier run's file), plus the profile's age,
//! whether it is complete (and a newer incomplete one passed over), and the daemon's own
//! counters. The registry is built per scrape, so a reload never leaves stale series behind.
//!
//! Values are in Prometheus base units: bandwidth in bytes per second, shares as ratios. The
//! names in GB/s and percent of the release before (`hwceiling_ceiling_gbps`,
//! `hwceiling_ceiling_pct`, `hwceiling_ceiling_source_spread_pct`) are still written beside
//! them, marked deprecated, for one more release.
//!
//! The text is OpenMetrics 1.0 when the scraper asks for it (`Accept`), else the Prometheus
//! text format 0.0.4 ([`prometheus_text`]), which `promtool check metrics` reads.

use crate::store::ServedCeiling;
use crate::AppState;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

type Labels = Vec<(String, String)>;
type FloatGauge = Gauge<f64, AtomicU64>;

pub(crate) const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub(crate) const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Said in the HELP of a name kept one release after its rename.
fn deprecated(new: &str) -> String {
    format!("Deprecated, removed in the next release: use {new} (the same in base units)")
}

/// A ceiling's labels: its key, what its record says it concerns (GPU, drive count, host
/// memory locality, engine), and `carried_from` (the earlier run's file) for one its record says
/// was carried from an earlier run.
fn ceiling_labels(key: &str, record: Option<&hwc_model::CeilingRecord>) -> Labels {
    let mut v = vec![("path".to_string(), key.to_string())];
    if let Some(r) = record {
        if let Some(g) = &r.meta.gpu {
            v.push(("gpu".into(), g.clone()));
        }
        if let Some(d) = r.meta.drives {
            v.push(("drives".into(), d.to_string()));
        }
        if let Some(n) = r.meta.numa {
            v.push(("numa".into(), n.as_str().to_string()));
        }
        if let Some(e) = &r.engine {
            v.push(("engine".into(), e.to_string()));
        }
        if let Some(c) = &r.carried_from {
            v.push(("carried_from".into(), c.file.clone()));
        }
    }
    v
}

/// Where each ceiling comes from, so that no figure is served bare, looked up by key in the
/// profile's `ceiling_records` ([`hwc_model::Profile::ceiling_source`]): for a ceiling that is
/// one measurement's median, that measurement's spread and repetition count (labelled with its
/// key); for a derived one (penalties, minima of two paths, crossovers, knees), a `derived`
/// marker; for one the profile says nothing usable about, an `unknown` marker.
fn register_sources(reg: &mut Registry, served: &[ServedCeiling<'_>]) {
    use hwc_model::CeilingOrigin;
    let spread: Family<Labels, FloatGauge> = Family::default();
    let spread_pct: Family<Labels, FloatGauge> = Family::default();
    let runs: Family<Labels, FloatGauge> = Family::default();
    let derived: Family<Labels, FloatGauge> = Family::default();
    let unknown: Family<Labels, FloatGauge> = Family::default();
    let (mut any_measured, mut any_derived, mut any_unknown) = (false, false, false);
    for c in served {
        let path = || vec![("path".to_string(), c.key.to_string())];
        match c.profile.ceiling_source(c.key) {
            Some(CeilingOrigin::Measured(m)) => {
                let labels = vec![
                    ("path".to_string(), c.key.to_string()),
                    ("measurement".to_string(), m.key.clone()),
                ];
                spread.get_or_create(&labels).set(m.gbps.spread_pct / 100.0);
                spread_pct.get_or_create(&labels).set(m.gbps.spread_pct);
                runs.get_or_create(&labels).set(f64::from(m.gbps.n));
                any_measured = true;
            }
            Some(CeilingOrigin::Derived { .. }) => {
                derived.get_or_create(&path()).set(1.0);
                any_derived = true;
            }
            Some(CeilingOrigin::Unknown) | None => {
                unknown.get_or_create(&path()).set(1.0);
                any_unknown = true;
            }
        }
    }
    if any_measured {
        reg.register(
            "hwceiling_ceiling_source_spread_ratio",
            "Spread (max - min) / median of the measurement whose median the ceiling is",
            spread,
        );
        reg.register(
            "hwceiling_ceiling_source_spread_pct",
            deprecated("hwceiling_ceiling_source_spread_ratio"),
            spread_pct,
        );
        reg.register(
            "hwceiling_ceiling_source_repetitions",
            "Timed repetitions (N) of the measurement whose median the ceiling is",
            runs,
        );
    }
    if any_derived {
        reg.register(
            "hwceiling_ceiling_derived",
            "1 for a ceiling derived from measured medians (a difference, minimum, ratio or knee), \
             not itself a measurement",
            derived,
        );
    }
    if any_unknown {
        reg.register(
            "hwceiling_ceiling_source_unknown",
            "1 for a ceiling whose source the profile's ceiling_records do not give (a hand-edited \
             or damaged profile): no spread or count can be shown",
            unknown,
        );
    }
}

/// The metrics text for the current state.
pub(crate) fn render(state: &AppState) -> String {
    let mut reg = Registry::default();
    let serving = state.store.serving();
    let loaded = serving.loaded.clone();
    let served = serving.ceilings();

    use hwc_model::Unit;
    // The unit a ceiling's record gives, its gauge's name, the factor to the gauge's unit, and
    // its HELP.
    let gbps_help = "Bandwidth ceiling of a data path, bytes per second: a measurement's median \
                     (see hwceiling_ceiling_source_*) or derived from measured medians \
                     (hwceiling_ceiling_derived)";
    let by_unit: [(Option<Unit>, &str, f64, String); 7] = [
        (Some(Unit::Gbps), "bytes_per_second", 1e9, gbps_help.into()),
        (
            Some(Unit::Gbps),
            "gbps",
            1.0,
            deprecated("hwceiling_ceiling_bytes_per_second"),
        ),
        (
            Some(Unit::Bytes),
            "bytes",
            1.0,
            "Size-valued ceiling (e.g. the optimal NVMe chunk), bytes".into(),
        ),
        (
            Some(Unit::Drives),
            "drives",
            1.0,
            "Drive-count-valued ceiling field (e.g. the crossover)".into(),
        ),
        (
            Some(Unit::Pct),
            "ratio",
            0.01,
            "Ratio-valued ceiling (e.g. a cross-NUMA penalty: 0.1 for 10 %)".into(),
        ),
        (
            Some(Unit::Pct),
            "pct",
            1.0,
            deprecated("hwceiling_ceiling_ratio"),
        ),
        (
            None,
            "value",
            1.0,
            "Ceiling without a record of its unit (added to the profile by hand)".into(),
        ),
    ];
    for (unit, name, factor, help) in by_unit {
        let family: Family<Labels, FloatGauge> = Family::default();
        let mut any = false;
        for c in &served {
            let record = c.profile.ceiling_records.get(c.key);
            if record.map(|r| r.meta.unit) == unit {
                family
                    .get_or_create(&ceiling_labels(c.key, record))
                    .set(c.value * factor);
                any = true;
            }
        }
        if any {
            reg.register(format!("hwceiling_ceiling_{name}"), help, family);
        }
    }

    register_sources(&mut reg, &served);

    let present: FloatGauge = Gauge::default();
    present.set(if loaded.is_some() { 1.0 } else { 0.0 });
    reg.register(
        "hwceiling_profile_loaded",
        "1 when a profile is being served",
        present,
    );
    if let Some(l) = &loaded {
        if let Some(age) = l.age_seconds() {
            let g: FloatGauge = Gauge::default();
            g.set(age);
            reg.register(
                "hwceiling_profile_age_seconds",
                "Seconds since the served profile's run finished (provenance.finished_at)",
                g,
            );
        }
        let info: Family<Labels, FloatGauge> = Family::default();
        let p = &l.profile;
        info.get_or_create(&vec![
            ("file".to_string(), l.file_name()),
            (
                "hostname".to_string(),
                p.platform
                    .hostname
                    .clone()
                    .or(p.provenance.hostname.clone())
                    .unwrap_or_default(),
            ),
            ("version".to_string(), p.provenance.version.clone()),
            (
                "git_revision".to_string(),
                p.provenance.git_revision.clone(),
            ),
            ("schema_version".to_string(), p.schema_version.to_string()),
        ])
        .set(1.0);
        reg.register("hwceiling_profile_info", "The served profile", info);
        let complete: FloatGauge = Gauge::default();
        complete.set(if l.completeness.complete() { 1.0 } else { 0.0 });
        reg.register(
            "hwceiling_profile_complete",
            "1 when the served profile is of a complete run; 0 for a --quick, interrupted or \
             narrowed run, served because the folder has no complete profile (its ceilings are \
             weaker, or fewer)",
            complete,
        );
        if let Some(o) = &serving.passed_over {
            let passed: Family<Labels, FloatGauge> = Family::default();
            passed
                .get_or_create(&vec![
                    ("file".to_string(), o.file.clone()),
                    ("reason".to_string(), o.why.reasons()),
                ])
                .set(1.0);
            reg.register(
                "hwceiling_profile_passed_over",
                "A profile newer than the served one, not served because its run was --quick, \
                 interrupted or narrowed by a selection (reason)",
                passed,
            );
        }
        let counts: Family<Labels, FloatGauge> = Family::default();
        for (what, n) in [
            ("measurements", p.measurements.len()),
            ("waived", p.waived.len()),
            ("failures", p.failures.len()),
            ("warnings", p.warnings.len()),
        ] {
            counts
                .get_or_create(&vec![("kind".to_string(), what.to_string())])
                .set(n as f64);
        }
        reg.register(
            "hwceiling_profile_entries",
            "Entries of the served profile's lists (measurements, waived, failures, warnings)",
            counts,
        );
    }
    reg.register(
        "hwceiling_profile_reloads",
        "Profiles loaded since the daemon started",
        state.store.reloads.clone(),
    );
    reg.register(
        "hwceiling_profile_reload_errors",
        "Profile files that failed to load (the previous profile was kept)",
        state.store.reload_errors.clone(),
    );
    let running: FloatGauge = Gauge::default();
    running.set(if state.runner.is_running() { 1.0 } else { 0.0 });
    reg.register(
        "hwceiling_profile_run_active",
        "1 while a profile run started through the daemon is in flight",
        running,
    );
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &reg);
    out
}

/// OpenMetrics text from `render` in the Prometheus text format 0.0.4: a counter's HELP and
/// TYPE name its samples (`x_total`, where OpenMetrics names the family `x`), and no `# EOF`.
/// (`render` writes no UNIT lines, histograms or exemplars.)
pub(crate) fn prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines().filter(|l| *l != "# EOF") {
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let (name, rest) = line.strip_prefix(prefix)?.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {rest}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text of the ceiling-source metrics that `register_sources` registers for `p`.
    fn source_metrics(p: &hwc_model::Profile) -> String {
        let mut reg = Registry::default();
        let served: Vec<ServedCeiling<'_>> = p
            .ceilings
            .iter()
            .map(|(key, &value)| ServedCeiling {
                key,
                value,
                profile: p,
            })
            .collect();
        register_sources(&mut reg, &served);
        let mut text = String::new();
        encode(&mut text, &reg).unwrap();
        text
    }

    /// Each of `lines` is a whole line of `text`.
    fn assert_lines(text: &str, lines: &[&str]) {
        for line in lines {
            assert!(
                text.lines().any(|l| l == *line),
                "missing `{line}` in\n{text}"
            );
        }
    }

    #[test]
    fn every_ceiling_says_its_spread_and_count_or_that_it_is_derived() {
        let mut p = hwc_testkit::ceilings_profile(
            "node1",
            "2026-11-29T19:05:00+00:00",
            &[
                ("warm_gpu0_peak_gbps", 55.5),
                ("warm_gpu0_cross_numa_penalty_gbps", 3.25),
                ("nvme_optimal_read_chunk_bytes", 55.5),
            ],
        );
        p.measurements.push(hwc_testkit::h2d_measurement(
            "h2d/cuda-copy/gpu0/local/256MiB/s1",
            55.5,
            1.8,
            20,
        ));
        let text = source_metrics(&p);
        assert_lines(
            &text,
            &[
                r#"hwceiling_ceiling_source_spread_pct{path="warm_gpu0_peak_gbps",measurement="h2d/cuda-copy/gpu0/local/256MiB/s1"} 1.8"#,
                r#"hwceiling_ceiling_source_repetitions{path="warm_gpu0_peak_gbps",measurement="h2d/cuda-copy/gpu0/local/256MiB/s1"} 20.0"#,
                r#"hwceiling_ceiling_derived{path="warm_gpu0_cross_numa_penalty_gbps"} 1.0"#,
                // A size is never a measurement's median, whatever its value.
                r#"hwceiling_ceiling_derived{path="nvme_optimal_read_chunk_bytes"} 1.0"#,
            ],
        );
    }

    #[test]
    fn sources_are_read_by_key_from_ceiling_records() {
        use hwc_model::CeilingSource;
        let mut p = hwc_testkit::ceilings_profile(
            "node1",
            "2026-11-29T19:05:00+00:00",
            &[
                ("warm_gpu0_peak_gbps", 55.5),
                ("warm_gpu0_cross_numa_penalty_gbps", 55.5),
                ("gpu0_d2h_peak_gbps", 55.5),
            ],
        );
        // Two measurements with the ceiling's median: the source is the one named, not the first.
        for (key, spread) in [
            ("h2d/cuda-copy/gpu0/local/4MiB/s1", 0.5),
            ("h2d/cuda-copy/gpu0/local/256MiB/s1", 1.8),
        ] {
            p.measurements
                .push(hwc_testkit::h2d_measurement(key, 55.5, spread, 20));
        }
        let p = hwc_testkit::with_sources(
            p,
            &[
                (
                    "warm_gpu0_peak_gbps",
                    CeilingSource::measured("h2d/cuda-copy/gpu0/local/256MiB/s1"),
                ),
                (
                    "warm_gpu0_cross_numa_penalty_gbps",
                    CeilingSource::derived("a minus b", vec![]),
                ),
            ],
        );
        let text = source_metrics(&p);
        assert_lines(
            &text,
            &[
                r#"hwceiling_ceiling_source_spread_pct{path="warm_gpu0_peak_gbps",measurement="h2d/cuda-copy/gpu0/local/256MiB/s1"} 1.8"#,
                r#"hwceiling_ceiling_derived{path="warm_gpu0_cross_numa_penalty_gbps"} 1.0"#,
                // No source in a profile that records sources: unknown, not guessed by value.
                r#"hwceiling_ceiling_source_unknown{path="gpu0_d2h_peak_gbps"} 1.0"#,
            ],
        );
        assert!(!text.contains("4MiB"), "{text}");
    }

    #[test]
    fn labels_name_what_the_ceilings_record_says() {
        use hwc_model::{CeilingMeta, CeilingRecord, EngineId, Numa, PathId};
        let record = CeilingRecord {
            carried_from: None,
            value: 20.0,
            meta: CeilingMeta::gbps(None)
                .gpu("gpu0")
                .drives(4)
                .numa(Numa::Cross),
            engine: Some(EngineId::new("spdk-native")),
            source: None,
        };
        // The key's spelling says nothing: the labels are the record's.
        let l = ceiling_labels("some_ceiling", Some(&record));
        let get = |k: &str| l.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("path"), Some("some_ceiling"));
        assert_eq!(get("gpu"), Some("gpu0"));
        assert_eq!(get("drives"), Some("4"));
        assert_eq!(get("numa"), Some("cross"));
        assert_eq!(get("engine"), Some("spdk-native"));
        let host = CeilingRecord {
            carried_from: None,
            meta: CeilingMeta::gbps(Some(PathId::HostRam)).numa(Numa::Local),
            engine: None,
            ..record
        };
        let l = ceiling_labels("host_ram_same_numa_gbps", Some(&host));
        assert_eq!(l.len(), 2, "{l:?}");
        // A ceiling the profile records as carried names the run's file it came from.
        let carried = CeilingRecord {
            carried_from: Some(hwc_model::CarriedFrom {
                file: "hardware_profile_2026-11-28.yaml".into(),
                finished_at: "2026-11-28T10:00:00+00:00".into(),
                drives: vec!["S1".into()],
            }),
            ..host
        };
        let l = ceiling_labels("nvme_raw_1drive_write_gbps", Some(&carried));
        assert_eq!(
            l.last().unwrap(),
            &(
                "carried_from".to_string(),
                "hardware_profile_2026-11-28.yaml".to_string()
            )
        );
    }
}
