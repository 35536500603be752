//! `qualify`: spec parsing, rules against absolute / link / baseline floors, link checks, JUnit.

mod common;
use common::{host_ceiling, profile, with_link, with_measurement, with_source, with_stats};
use hwc_compare::qualify::{glob, parse_spec, qualify, render, Group, Outcome, SpecError};
use hwc_model::CeilingSource;
use proptest::prelude::*;

const SPEC: &str = r#"
spec_version: 1
name: gpu-nvme-node
rules:
  - path: warm_gpu0_peak_gbps
    min_gbps: 50
  - path: warm_gpu0_peak_gbps
    min_pct_of_link: 85
  - name: host RAM holds up
    path: host_ram_same_numa_gbps
    min_pct_of_baseline: 90
  - path: h2d/gpu0/local/256MiB/s1
    min_pct_of_link: 80
  - path: nvme_raw_4drive_read_gbps
    min_gbps: 20
    required: false
links:
  - device: "gpu*"
    gen: max
    width: max
  - device: "nvme*"
    gen: 4
    width: 4
    required: false
"#;

fn node() -> hwc_model::Profile {
    let p = profile(
        "node7",
        &[
            ("warm_gpu0_peak_gbps", 55.6),
            ("host_ram_same_numa_gbps", 30.0),
        ],
    );
    let p = with_measurement(p, "h2d/gpu0/local/256MiB/s1", 55.5, false);
    with_link(p, "gpu0", (5, 16), (5, 16))
}

#[test]
fn a_healthy_node_passes_every_rule() {
    let spec = parse_spec(SPEC).unwrap();
    let baseline = profile("golden", &[("host_ram_same_numa_gbps", 32.0)]);
    let r = qualify(&spec, "spec.yaml", &node(), "p.yaml", Some(&baseline)).unwrap();
    let outcomes: Vec<_> = r.checks.iter().map(|c| (c.group, c.outcome)).collect();
    assert_eq!(
        outcomes,
        vec![
            (Group::Rule, Outcome::Pass),
            (Group::Rule, Outcome::Pass),
            (Group::Rule, Outcome::Pass),
            (Group::Rule, Outcome::Pass),
            (Group::Rule, Outcome::Skip),
            (Group::Link, Outcome::Pass),
            (Group::Link, Outcome::Skip),
        ],
        "{}",
        render(&r)
    );
    assert!(r.ok());
    assert_eq!(r.spec, "gpu-nvme-node");
    // 85 % of Gen5 x16 (63.015 GB/s) = 53.56 GB/s.
    let link_rule = &r.checks[1];
    assert!((link_rule.floor.unwrap() - 53.563).abs() < 0.01);
    assert!(
        link_rule.detail.contains("Gen5 x16"),
        "{}",
        link_rule.detail
    );
    assert_eq!(r.checks[2].name, "host RAM holds up");
    assert!((r.checks[2].floor.unwrap() - 28.8).abs() < 1e-9);
    let text = render(&r);
    assert!(
        text.contains("QUALIFIED: 5 passed, 0 failed, 2 skipped"),
        "{text}"
    );
}

#[test]
fn a_slow_node_with_a_downtrained_link_fails() {
    let spec = parse_spec(SPEC).unwrap();
    let p = profile("node8", &[("warm_gpu0_peak_gbps", 26.0)]);
    let p = with_link(p, "gpu0", (4, 16), (5, 16));
    let baseline = profile("golden", &[("host_ram_same_numa_gbps", 32.0)]);
    let r = qualify(&spec, "spec.yaml", &p, "p.yaml", Some(&baseline)).unwrap();
    let fails: Vec<&str> = r
        .checks
        .iter()
        .filter(|c| c.outcome == Outcome::Fail)
        .map(|c| c.detail.as_str())
        .collect();
    assert_eq!(r.failed, 5, "{fails:#?}");
    assert!(
        fails[0].contains("26.00 GB/s < the floor 50.00 GB/s"),
        "{}",
        fails[0]
    );
    assert!(fails
        .iter()
        .any(|d| d.contains("not among the profile's ceilings")));
    assert!(fails.iter().any(|d| d.contains("gen 4, its maximum is 5")));
    assert!(!r.ok());
    assert!(render(&r).contains("NOT QUALIFIED"));
}

#[test]
fn the_link_read_under_load_wins_over_the_idle_one() {
    let spec = parse_spec("spec_version: 1\nlinks:\n  - device: gpu0\n    gen: max\n").unwrap();
    // Detected idle at Gen1 (downtrained), Gen5 under load.
    let mut p = with_link(profile("n", &[]), "gpu0", (1, 16), (5, 16));
    let r = qualify(&spec, "s", &p, "p", None).unwrap();
    assert_eq!(r.checks[0].outcome, Outcome::Fail);
    p.provenance
        .environment
        .insert("gpu0.pcie_link_load".into(), "gen5 x16".into());
    let r = qualify(&spec, "s", &p, "p", None).unwrap();
    assert_eq!(r.checks[0].outcome, Outcome::Pass, "{}", r.checks[0].detail);
    assert!(r.checks[0].detail.contains("read under load"));
}

#[test]
fn baseline_rules_need_a_baseline_and_the_baseline_needs_the_path() {
    let spec = parse_spec(SPEC).unwrap();
    assert_eq!(
        qualify(&spec, "s", &node(), "p", None).unwrap_err(),
        SpecError::NoBaseline(1)
    );
    let empty = profile("golden", &[]);
    let r = qualify(&spec, "s", &node(), "p", Some(&empty)).unwrap();
    assert!(r.checks[2].detail.contains("baseline profile has no"));
}

#[test]
fn bad_specs_are_refused_with_the_rule_named() {
    let cases = [
        ("spec_version: 2\nrules: []\n", "spec_version 2"),
        ("spec_version: 1\n", "no rules and no link checks"),
        (
            "spec_version: 1\nrules:\n  - path: x\n",
            "rule 1 (`x`): give one floor",
        ),
        (
            "spec_version: 1\nrules:\n  - path: x\n    min_gbps: 1\n    min_pct_of_link: 5\n",
            "only one floor",
        ),
        (
            "spec_version: 1\nrules:\n  - path: x\n    min_gbps: -1\n",
            "finite, non-negative",
        ),
        (
            "spec_version: 1\nrules:\n  - path: x\n    min_gbps: 1\n    link: gpu0\n",
            "`link` only goes with",
        ),
        (
            "spec_version: 1\nlinks:\n  - device: gpu0\n",
            "link check 1 (`gpu0`)",
        ),
        (
            "spec_version: 1\nlinks:\n  - device: gpu0\n    gen: fast\n",
            "not a valid qualify spec",
        ),
        (
            "spec_version: 1\nrules:\n  - path: x\n    min_gbs: 1\n",
            "not a valid qualify spec",
        ),
        (
            "spec_version: 1\nspec_version: 1\nrules: []\n",
            "not a valid qualify spec",
        ),
        ("spec_version: one\n", "not a valid qualify spec"),
        ("- just\n- a list\n", "not a valid qualify spec"),
    ];
    for (text, needle) in cases {
        let e = parse_spec(text).unwrap_err().to_string();
        assert!(e.contains(needle), "{text:?}: {e}");
        assert!(!e.contains('\n'), "one line: {e}");
    }
}

#[test]
fn a_rule_without_a_device_must_name_its_link() {
    let spec = parse_spec(
        "spec_version: 1\nrules:\n  - path: host_ram_same_numa_gbps\n    min_pct_of_link: 50\n",
    )
    .unwrap();
    let r = qualify(&spec, "s", &node(), "p", None).unwrap();
    assert!(r.checks[0].detail.contains("name the link with `link:`"));
}

#[test]
fn junit_is_well_formed_and_counts_failures() {
    let spec = parse_spec(SPEC).unwrap();
    let p = profile("node<&>\"8\"", &[("warm_gpu0_peak_gbps", 26.0)]);
    let baseline = profile("golden", &[("host_ram_same_numa_gbps", 32.0)]);
    let r = qualify(&spec, "spec.yaml", &p, "p.yaml", Some(&baseline)).unwrap();
    let xml = hwc_compare::junit::render(&r);
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .unwrap();
    assert_eq!(suite.attribute("tests"), Some("7"));
    assert_eq!(
        suite.attribute("failures"),
        Some(r.failed.to_string().as_str())
    );
    assert_eq!(suite.attribute("hostname"), Some("node<&>\"8\""));
    let failures = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .count();
    assert_eq!(failures, r.failed);
    let skipped = doc
        .descendants()
        .filter(|n| n.has_tag_name("skipped"))
        .count();
    assert_eq!(skipped, r.skipped);
}

#[test]
fn the_shipped_example_spec_parses() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/qualify-gpu-nvme-node.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let spec = parse_spec(&text).unwrap();
    assert!(!spec.rules.is_empty() && !spec.links.is_empty());
}

#[test]
fn globs_match_whole_names() {
    assert!(glob("gpu*", "gpu0"));
    assert!(glob("*", "nvme3"));
    assert!(glob("gpu0", "gpu0"));
    assert!(!glob("gpu0", "gpu01"));
    assert!(glob("n*e*", "nvme1"));
    assert!(!glob("gpu*", "nvme0"));
    assert!(glob("*1", "nvme1") && !glob("*1", "nvme10"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_text_never_panics_the_spec_parser(s in "\\PC{0,300}") {
        let _ = parse_spec(&s);
    }

    #[test]
    fn spec_shaped_noise_never_panics(
        version in prop_oneof![Just("1".to_string()), "[0-9a-z.-]{0,6}"],
        path in "[a-z_/0-9*]{0,20}",
        floor in prop_oneof![Just("50".to_string()), Just("-3".to_string()), Just(".nan".to_string()), Just("[1]".to_string()), "[0-9.e+-]{0,8}"],
        key in prop_oneof![Just("min_gbps"), Just("min_pct_of_link"), Just("min_pct_of_baseline"), Just("bogus")],
        gen in prop_oneof![Just("max".to_string()), "[0-9a-z-]{0,5}"],
    ) {
        let text = format!(
            "spec_version: {version}\nrules:\n  - path: \"{path}\"\n    {key}: {floor}\nlinks:\n  - device: \"{path}\"\n    gen: {gen}\n"
        );
        if let Ok(spec) = parse_spec(&text) {
            let base = node();
            let r = qualify(&spec, "s", &node(), "p", Some(&base)).unwrap();
            prop_assert_eq!(r.passed + r.failed + r.skipped, r.checks.len());
        }
    }

    #[test]
    fn deeply_nested_specs_are_errors(depth in 1usize..3000) {
        let s = format!("spec_version: 1\nrules: {}{}", "[".repeat(depth), "]".repeat(depth));
        prop_assert!(parse_spec(&s).is_err());
    }
}

#[test]
fn a_ceiling_shows_its_source_measurement_and_inherits_its_contention() {
    let spec = parse_spec(
        "spec_version: 1\nrules:\n  - path: warm_gpu0_peak_gbps\n    min_gbps: 50\n  - path: host_ram_same_numa_gbps\n    min_gbps: 10\n",
    )
    .unwrap();
    let p = profile(
        "node9",
        &[
            ("warm_gpu0_peak_gbps", 55.5),
            ("host_ram_same_numa_gbps", 30.0),
        ],
    );
    // The ceiling is this measurement's median, and it ran while the GPU was busy.
    let p = with_measurement(p, "h2d/gpu0/local/256MiB/s1", 55.5, true);
    let r = qualify(&spec, "spec.yaml", &p, "p.yaml", None).unwrap();
    let d = &r.checks[0].detail;
    assert!(d.contains("55.50 GB/s >= the floor 50.00 GB/s"), "{d}");
    assert!(d.contains("h2d/gpu0/local/256MiB/s1"), "{d}");
    assert!(d.contains("N=10"), "{d}");
    assert!(d.contains("lower bound"), "{d}");
    // No measurement has this median: the ceiling is arithmetic on measured medians.
    let d = &r.checks[1].detail;
    assert!(d.contains("derived from measured medians"), "{d}");
    assert!(!d.contains("lower bound"), "{d}");
}

#[test]
fn a_ceiling_source_is_read_by_key_with_its_derivation() {
    let spec = parse_spec(
        "spec_version: 1\nrules:\n  - path: warm_gpu0_peak_gbps\n    min_gbps: 50\n  - path: dispatcher_cold_1drive_gbps\n    min_gbps: 3\n",
    )
    .unwrap();
    let p = profile(
        "node9",
        &[
            ("warm_gpu0_peak_gbps", 55.5),
            ("dispatcher_cold_1drive_gbps", 55.5),
        ],
    );
    // A contended measurement with the same median comes first; the source is the other one.
    let p = with_measurement(p, "h2d/gpu0/local/4MiB/s4", 55.5, true);
    let p = with_stats(p, "h2d/gpu0/local/256MiB/s1", 55.5, 0.7, 12);
    let p = with_source(
        p,
        "warm_gpu0_peak_gbps",
        CeilingSource::measured("h2d/gpu0/local/256MiB/s1"),
    );
    let p = with_source(
        p,
        "dispatcher_cold_1drive_gbps",
        CeilingSource::derived(
            "min of NVMe and H2D: H2D bounds it",
            vec!["h2d/gpu0/local/4MiB/s4".into()],
        ),
    );
    let r = qualify(&spec, "spec.yaml", &p, "p.yaml", None).unwrap();
    let d = &r.checks[0].detail;
    assert!(
        d.contains("median of `h2d/gpu0/local/256MiB/s1`, ±0.7 %, N=12"),
        "{d}"
    );
    assert!(!d.contains("busy"), "{d}");
    let d = &r.checks[1].detail;
    assert!(
        d.contains("derived: min of NVMe and H2D: H2D bounds it"),
        "{d}"
    );
    assert!(
        d.contains("derived from a measurement taken while the device was busy"),
        "an input was contended: {d}"
    );
}

const HOST_BASELINE_SPEC: &str =
    "spec_version: 1\nrules:\n  - path: host_ram_same_numa_gbps\n    min_pct_of_baseline: 90\n";

#[test]
fn a_baseline_rule_holds_figures_of_one_copy_kernel_to_each_other() {
    let spec = parse_spec(HOST_BASELINE_SPEC).unwrap();
    for kernel in ["memcpy", "streaming"] {
        let golden = host_ceiling("golden", Some(kernel), 58.0);
        // 90 % of 58.00 = 52.20 GB/s.
        for (gbps, outcome, op) in [(55.0, Outcome::Pass, ">="), (50.0, Outcome::Fail, "<")] {
            let p = host_ceiling("node", Some(kernel), gbps);
            let r = qualify(&spec, "s", &p, "p", Some(&golden)).unwrap();
            let c = &r.checks[0];
            assert_eq!(c.outcome, outcome, "{kernel}: {}", c.detail);
            assert!((c.floor.unwrap() - 52.2).abs() < 1e-9, "{kernel}");
            assert!(
                c.detail.contains(&format!(
                    "{gbps:.2} GB/s {op} 90% of the baseline's 58.00 GB/s"
                )),
                "{kernel}: {}",
                c.detail
            );
            assert!(!c.detail.contains("not comparable"), "{}", c.detail);
        }
    }
    // A baseline from before the streaming kernel was measured with memcpy: comparable to a
    // memcpy figure.
    let old = host_ceiling("golden", None, 36.0);
    let p = host_ceiling("node", Some("memcpy"), 35.0);
    let r = qualify(&spec, "s", &p, "p", Some(&old)).unwrap();
    assert_eq!(r.checks[0].outcome, Outcome::Pass, "{}", r.checks[0].detail);
}

#[test]
fn a_baseline_rule_across_copy_kernels_is_not_comparable() {
    let spec = parse_spec(HOST_BASELINE_SPEC).unwrap();
    // On the ratio alone the first would pass (58 >= 90 % of 35) and the second would fail
    // (35 < 90 % of 58); neither says anything about the machine.
    for (was, base_gbps, now, gbps) in [
        ("memcpy", 35.0, "streaming", 58.0),
        ("streaming", 58.0, "memcpy", 35.0),
    ] {
        let golden = host_ceiling("golden", Some(was), base_gbps);
        let p = host_ceiling("node", Some(now), gbps);
        let r = qualify(&spec, "s", &p, "p", Some(&golden)).unwrap();
        let c = &r.checks[0];
        assert_eq!(c.outcome, Outcome::Fail, "{}", c.detail);
        assert_eq!(c.floor, None, "no floor was computed: {}", c.detail);
        assert_eq!(c.value, Some(gbps));
        let verdict =
            format!("not comparable: copy kernel {was} (baseline) → {now} (profile); re-baseline");
        assert!(c.detail.starts_with(&verdict), "{}", c.detail);
        assert!(!c.detail.contains(">=") && !c.detail.contains(" < "));
        assert_eq!((r.passed, r.failed, r.skipped), (0, 1, 0));
        assert!(!r.ok(), "the exit code is 1, as for any failed check");
        let text = render(&r);
        assert!(
            text.lines()
                .any(|l| l.starts_with("FAIL  ") && l.contains(&verdict)),
            "{text}"
        );
        assert!(text.contains("NOT QUALIFIED: 0 passed, 1 failed"), "{text}");
        let xml = hwc_compare::junit::render(&r);
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let failure = doc
            .descendants()
            .find(|n| n.has_tag_name("failure"))
            .expect("a <failure>");
        assert!(
            failure.attribute("message").unwrap().starts_with(&verdict),
            "{xml}"
        );
    }
}

#[test]
fn an_old_baseline_without_a_copy_kernel_against_a_streaming_profile_is_not_comparable() {
    let spec = parse_spec(HOST_BASELINE_SPEC).unwrap();
    let p = host_ceiling("node", Some("streaming"), 58.0);
    // Its measurement names no copy kernel; with its ceiling_sources, and from before those
    // existed (the source is then the measurement with the ceiling's median).
    let old = host_ceiling("golden", None, 36.0);
    let mut older = old.clone();
    older.ceiling_sources.clear();
    for baseline in [&old, &older] {
        let r = qualify(&spec, "s", &p, "p", Some(baseline)).unwrap();
        let c = &r.checks[0];
        assert_eq!(c.outcome, Outcome::Fail, "{}", c.detail);
        assert!(
            c.detail
                .starts_with("not comparable: copy kernel memcpy (baseline) → streaming (profile)"),
            "{}",
            c.detail
        );
        assert!(!r.ok());
    }
}
