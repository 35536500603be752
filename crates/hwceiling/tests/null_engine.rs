//! A whole profile through every layer with the null engine alone, on whatever machine runs the
//! tests (no GPU or drive needed): probe, plan, runner, profile, report, compare, qualify. Its
//! figures are labelled as the null engine's and none becomes a ceiling.

use std::path::Path;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hwceiling"))
        .args(args)
        .output()
        .expect("run hwceiling")
}

fn one(dir: &Path, ext: &str) -> std::path::PathBuf {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(ext))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.pop().unwrap()
}

#[test]
fn a_profile_of_the_null_engine_runs_every_layer_and_serves_no_ceiling() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = run(&["profile", "--engines", "null", "-o", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("narrowed by --engines null"),
        "a null run is no complete profile: {stdout}"
    );
    let yaml_path = one(&out, ".yaml");
    let yaml = std::fs::read_to_string(&yaml_path).unwrap();
    let p: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
    // Every measurement is the null engine's, timed with repetitions; not one is a ceiling.
    let ms = p["measurements"].as_array().expect("measurements");
    assert!(!ms.is_empty(), "{yaml}");
    for m in ms {
        assert_eq!(m["engine"], "null", "{m}");
        assert!(m["key"].as_str().unwrap().contains("/null/"), "{m}");
        assert!(m["gbps"]["n"].as_u64().unwrap() >= 5, "{m}");
        assert!(m["latency_us"]["median"].as_f64().unwrap() > 0.0, "{m}");
    }
    assert_eq!(p["ceilings"], serde_json::json!({}), "{yaml}");
    let null = p["engines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == "null")
        .expect("the run declares the null engine");
    assert_eq!(null["hardware"], false);

    // The report says whose figures they are, and re-renders from the profile as written.
    let report = std::fs::read_to_string(one(&out, ".md")).unwrap();
    assert!(
        report.contains("`null` — null engine: moves no data")
            && report.contains("its figures are never ceilings"),
        "{report}"
    );
    let again = run(&["report", yaml_path.to_str().unwrap()]);
    assert!(again.status.success());
    // (But for its chart links: to standard output there are no charts to link.)
    assert_eq!(
        String::from_utf8_lossy(&again.stdout),
        hwc_testkit::without_chart_links(&report)
    );

    // Nothing of it is compared or qualified as the hardware's.
    let y = yaml_path.to_str().unwrap();
    let c = run(&["compare", y, y]);
    assert_eq!(c.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&c.stderr).contains("nothing to compare"),
        "{}",
        String::from_utf8_lossy(&c.stderr)
    );
    let spec = dir.path().join("spec.yaml");
    std::fs::write(
        &spec,
        "rules:\n- path: host_ram_same_numa_gbps\n  min_gbps: 1\n",
    )
    .unwrap();
    let q = run(&["qualify", y, "--spec", spec.to_str().unwrap()]);
    assert_eq!(q.status.code(), Some(1), "no ceiling to pass");
}
