//! Profiles of schema version 1, as the build before the engine axis wrote them on the H200 test
//! machine (2026-12-03, commit 48d7ad0: `fixtures/v1-h200-*.yaml`), read by this build: upgraded
//! to the current schema with their engines named, their figures unchanged, and the spec's
//! fields the same when derived again from the upgraded measurements.

use hwc_model::{EngineId, PathId, Profile};
use std::collections::BTreeSet;
use std::path::PathBuf;

fn fixture(name: &str) -> (String, Profile) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let p = hwc_profile::from_yaml(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    (text, p)
}

#[test]
fn a_version_1_profile_reads_as_the_current_schema_with_its_engines_named() {
    let (text, p) = fixture("v1-h200-a.yaml");
    assert!(text.contains("\nschema_version: 1\n"));
    assert_eq!(p.schema_version, hwc_model::SCHEMA_VERSION);
    assert_eq!(p.measurements.len(), 161);
    let engines: BTreeSet<&str> = p.measurements.iter().map(|m| m.engine.as_str()).collect();
    assert_eq!(
        engines,
        ["cuda-copy", "host-memcpy", "host-streaming"].into()
    );
    for m in &p.measurements {
        assert_eq!(
            m.key,
            hwc_model::case_key(m.path, &m.engine, &m.cell),
            "{}",
            m.key
        );
        assert!(p.engine(&m.engine).is_some_and(|e| e.hardware), "{}", m.key);
        assert_eq!(m.spec.check(m.path), Ok(()), "{}", m.key);
    }
    // The flat map the evaluator reads is exactly as written.
    let raw: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    let ceilings: std::collections::BTreeMap<String, f64> =
        serde_json::from_value(raw["ceilings"].clone()).unwrap();
    assert_eq!(p.ceilings, ceilings);
    // Every ceiling's source still names a measurement the profile holds, or a derivation.
    for key in p.ceilings.keys() {
        assert_ne!(
            p.ceiling_source(key),
            Some(hwc_model::CeilingOrigin::Unknown),
            "{key}"
        );
    }
    let peak = &p.ceiling_records["warm_gpu0_peak_gbps"];
    assert_eq!(
        peak.source,
        Some(hwc_model::CeilingSource::measured(
            "h2d/cuda-copy/gpu0/local/256MiB/s1"
        ))
    );
    assert_eq!(peak.engine, Some(EngineId::new("cuda-copy")));
    assert_eq!(peak.meta.gpu.as_deref(), Some("gpu0"));
    let host = &p.host_ram.pairs["n0-n0"];
    assert_eq!(host.engine, EngineId::new("host-streaming"));
    assert_eq!(host.key, "host_ram/host-streaming/n0-n0/1GiB/t16");
}

#[test]
fn the_spec_s_fields_derive_again_from_the_upgraded_measurements() {
    for name in ["v1-h200-a.yaml", "v1-h200-b.yaml"] {
        let (_, p) = fixture(name);
        assert_eq!(
            hwc_profile::derive::host_ram(&p.measurements),
            p.host_ram,
            "{name}"
        );
        for (gpu, g) in &p.gpus {
            let picks = hwc_profile::gpu_picks(gpu, g.numa_node, &p.measurements);
            let median = |m: Option<&hwc_model::Measurement>| m.map(|m| m.gbps.median);
            assert_eq!(
                median(picks.h2d_4m_1stream_numa_local),
                g.h2d_4m_1stream_numa_local_gbps
            );
            assert_eq!(
                median(picks.h2d_peak_numa_local),
                g.h2d_peak_numa_local_gbps
            );
            assert_eq!(
                median(picks.d2h_peak_numa_local),
                g.d2h_peak_numa_local_gbps
            );
            assert_eq!(median(picks.d2d_1stream), g.d2d_1stream_gbps);
            assert_eq!(median(picks.d2d_4stream), g.d2d_4stream_gbps);
            assert_eq!(median(picks.duplex_h2d), g.duplex_h2d_gbps);
            assert_eq!(median(picks.duplex_d2h), g.duplex_d2h_gbps);
            assert!(g.duplex_h2d_gbps.is_some() && g.d2d_1stream_gbps.is_some());
        }
        let c = hwc_profile::ceilings_with_sources(&p);
        assert_eq!(c.values, p.ceilings, "{name}");
        // The builder's records, from typed cases, are what the upgrade made of the keys.
        for (key, record) in &c.records {
            assert_eq!(Some(record), p.ceiling_records.get(key), "{name}: {key}");
        }
        assert_eq!(c.records.len(), p.ceiling_records.len(), "{name}");
    }
}

#[test]
fn an_upgraded_profile_writes_and_reads_back_in_the_current_schema() {
    let (_, p) = fixture("v1-h200-b.yaml");
    let y = hwc_profile::to_yaml(&p).unwrap();
    assert!(y.contains("\nschema_version: 2\n"), "{}", &y[..400]);
    let back = hwc_profile::from_yaml(&y).unwrap();
    assert_eq!(back, p);
    assert!(back.measurements_of(PathId::D2d).count() > 0);
}
