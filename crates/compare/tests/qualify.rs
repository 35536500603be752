//! `qualify`: spec parsing, rules against absolute / link / baseline floors, link checks, JUnit.

mod common;
use common::{
    host_ceiling, profile, with_limit, with_link, with_measurement, with_source, with_stats,
};
use hwc_compare::qualify::{
    glob, parse_spec, qualify, render, FailureKind, Group, Outcome, Spec, SpecError,
};
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
    let p = with_measurement(p, "h2d/cuda-copy/gpu0/local/256MiB/s1", 55.5, false);
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
        .filter(|c| c.outcome.is_fail())
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
    assert_eq!(
        r.checks[0].outcome,
        Outcome::Fail(FailureKind::LinkBelowTarget)
    );
    // This build's profile of that node, with no reading under load, holds the link at its
    // maximum (`basis: capable`) for its shares; the gate still judges what detection read.
    let mut capable = p.clone();
    let l = &mut capable.topology.links[0];
    *l = l.rebased(
        hwc_model::LinkState { gen: 5, width: 16 },
        hwc_model::topology::LinkBasis::Capable,
    );
    let r = qualify(&spec, "s", &capable, "p", None).unwrap();
    assert_eq!(
        r.checks[0].outcome,
        Outcome::Fail(FailureKind::LinkBelowTarget),
        "{}",
        r.checks[0].detail
    );
    assert!(r.checks[0].detail.contains("at detection"));
    // Words alone are no reading (a link half read is recorded so).
    p.provenance
        .environment
        .insert("gpu0.pcie_link_load".into(), "gen5".into());
    let r = qualify(&spec, "s", &p, "p", None).unwrap();
    assert!(r.checks[0].detail.contains("at detection"));
    p.provenance.environment.insert(
        "gpu0.pcie_link_load".into(),
        hwc_model::Setting::link(hwc_model::LinkState { gen: 5, width: 16 }),
    );
    let r = qualify(&spec, "s", &p, "p", None).unwrap();
    assert_eq!(r.checks[0].outcome, Outcome::Pass, "{}", r.checks[0].detail);
    assert!(r.checks[0].detail.contains("read under load"));
    // Each case's reading with its copies in flight wins over the warm-up's: the slowest.
    for (key, gen) in [
        ("h2d/cuda-copy/gpu0/local/4MiB/s1", 5),
        ("d2h/cuda-copy/gpu0/local/4MiB/s1", 4),
    ] {
        p = with_measurement(p, key, 50.0, false);
        p.measurements.last_mut().unwrap().evidence.gpu_state = Some(hwc_model::GpuCaseState {
            link_under_load: Some(hwc_model::LinkState { gen, width: 16 }),
            ..Default::default()
        });
    }
    let r = qualify(&spec, "s", &p, "p", None).unwrap();
    assert_eq!(
        r.checks[0].outcome,
        Outcome::Fail(FailureKind::LinkBelowTarget)
    );
    assert!(
        r.checks[0]
            .detail
            .contains("the slowest read under load in 2 case(s)"),
        "{}",
        r.checks[0].detail
    );
}

#[test]
fn a_pcie_error_counter_that_rose_during_a_crossing_case_fails_no_link_errors() {
    let spec =
        parse_spec("spec_version: 1\npcie:\n  - device: gpu0\n    no_link_errors: true\n").unwrap();
    let mut p = with_measurement(
        profile("n", &[]),
        "h2d/cuda-copy/gpu0/local/4MiB/s1",
        50.0,
        false,
    );
    p.measurements[0].evidence.gpu_state = Some(hwc_model::GpuCaseState {
        pcie_replays: Some(0),
        ..Default::default()
    });
    p.topology.pcie_paths = vec![hwc_model::topology::PciePath {
        device: "gpu0".into(),
        hops: vec![hwc_model::topology::PcieHop {
            bdf: "0000:01:00.0".into(),
            config: Default::default(),
            iommu_domain: None,
        }],
    }];
    let r = qualify(&spec, "s", &p, "p", None).unwrap();
    assert_eq!(r.checks[0].outcome, Outcome::Pass, "{}", r.checks[0].detail);
    assert!(r.checks[0]
        .detail
        .contains("in the 1 measurement(s) that crossed it"));
    // An AER rise on a hop, and replays: both named.
    p.measurements[0]
        .evidence
        .gpu_state
        .as_mut()
        .unwrap()
        .pcie_replays = Some(4);
    p.measurements[0].evidence.link_errors = Some(vec![hwc_model::AerIncrease {
        bdf: "0000:01:00.0".into(),
        correctable: 2,
        nonfatal: 0,
        fatal: 0,
    }]);
    let r = qualify(&spec, "s", &p, "p", None).unwrap();
    assert_eq!(r.checks[0].outcome, Outcome::Fail(FailureKind::LinkErrors));
    assert_eq!(
        r.checks[0].detail,
        "h2d/cuda-copy/gpu0/local/4MiB/s1: 0000:01:00.0 +2 correctable, +0 non-fatal, +0 fatal; \
         h2d/cuda-copy/gpu0/local/4MiB/s1: 4 PCIe replays (NVML)"
    );
    // `false` asks nothing.
    let e = parse_spec("spec_version: 1\npcie:\n  - device: gpu0\n    no_link_errors: false\n")
        .unwrap_err();
    assert!(
        e.to_string().contains("no_link_errors: false asks nothing"),
        "{e}"
    );
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
        ("spec_version: 1\n", "no rules, link checks or PCIe checks"),
        (
            "spec_version: 1\npcie:\n  - device: gpu0\n",
            "PCIe check 1 (`gpu0`): give min_mps_bytes, acs_redirect, iommu, no_link_errors or \
             several",
        ),
        (
            "spec_version: 1\npcie:\n  - device: gpu0\n    min_mps: 256\n",
            "not a valid qualify spec",
        ),
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
    // The prefix and the suffix may not share characters.
    assert!(!glob("ab*ba", "aba") && glob("ab*ba", "abba"));
    assert!(glob("a**b", "ab") && glob("**", ""));
    // Many stars take no longer than few (a backtracking matcher ran for minutes on these).
    assert!(!glob(&format!("{}x", "*".repeat(40)), &"a".repeat(60)));
    assert!(!glob(&format!("{}b", "*a".repeat(20)), &"a".repeat(200)));
}

/// The plain definition of `*` (any run of characters), by backtracking: slow, but plainly right.
fn glob_by_definition(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => name.strip_prefix(head).is_some_and(|tail| {
            (0..=tail.len())
                .filter(|&i| tail.is_char_boundary(i))
                .any(|i| glob_by_definition(rest, &tail[i..]))
        }),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn globs_match_as_the_definition_does(pattern in "[ab*é]{0,8}", name in "[abé]{0,10}") {
        prop_assert_eq!(glob(&pattern, &name), glob_by_definition(&pattern, &name));
    }

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

/// A spec of two rules, `warm_gpu0_peak_gbps` >= 50 GB/s and `path` >= `min_gbps`, and a
/// profile of node9 with 55.5 GB/s for the first and `value` for `path`.
fn gpu_and_second_rule(path: &str, min_gbps: u32, value: f64) -> (Spec, hwc_model::Profile) {
    let spec = parse_spec(&format!(
        "spec_version: 1\nrules:\n  - path: warm_gpu0_peak_gbps\n    min_gbps: 50\n  - path: {path}\n    min_gbps: {min_gbps}\n"
    ))
    .unwrap();
    let p = profile("node9", &[("warm_gpu0_peak_gbps", 55.5), (path, value)]);
    (spec, p)
}

#[test]
fn a_ceiling_shows_its_source_measurement_and_inherits_its_contention() {
    let (spec, p) = gpu_and_second_rule("host_ram_same_numa_gbps", 10, 30.0);
    // The ceiling is this measurement's median, and it ran while the GPU was busy.
    let p = with_measurement(p, "h2d/cuda-copy/gpu0/local/256MiB/s1", 55.5, true);
    let r = qualify(&spec, "spec.yaml", &p, "p.yaml", None).unwrap();
    let d = &r.checks[0].detail;
    assert!(d.contains("55.50 GB/s >= the floor 50.00 GB/s"), "{d}");
    assert!(d.contains("h2d/cuda-copy/gpu0/local/256MiB/s1"), "{d}");
    assert!(d.contains("N=10"), "{d}");
    assert!(d.contains("lower bound"), "{d}");
    // No measurement has this median and the profile names no sources: where the ceiling
    // comes from is not known (derived, or typed in), and the check does not guess.
    let d = &r.checks[1].detail;
    assert!(d.contains("source unknown"), "{d}");
    assert!(!d.contains("lower bound"), "{d}");
}

/// `p` with `warm_gpu0_peak_gbps` named as the median of `h2d/cuda-copy/gpu0/local/256MiB/s1`, and
/// `dispatcher_cold_1drive_gbps` as derived from the measurement `input`.
fn with_peak_and_dispatcher_sources(p: hwc_model::Profile, input: &str) -> hwc_model::Profile {
    let p = with_source(
        p,
        "warm_gpu0_peak_gbps",
        CeilingSource::measured("h2d/cuda-copy/gpu0/local/256MiB/s1"),
    );
    with_source(
        p,
        "dispatcher_cold_1drive_gbps",
        CeilingSource::derived("min of NVMe and H2D: H2D bounds it", vec![input.into()]),
    )
}

#[test]
fn a_ceiling_source_is_read_by_key_with_its_derivation() {
    let (spec, p) = gpu_and_second_rule("dispatcher_cold_1drive_gbps", 3, 55.5);
    // A contended measurement with the same median comes first; the source is the other one.
    let p = with_measurement(p, "h2d/cuda-copy/gpu0/local/4MiB/s4", 55.5, true);
    let p = with_stats(p, "h2d/cuda-copy/gpu0/local/256MiB/s1", 55.5, 0.7, 12);
    let p = with_peak_and_dispatcher_sources(p, "h2d/cuda-copy/gpu0/local/4MiB/s4");
    let r = qualify(&spec, "spec.yaml", &p, "p.yaml", None).unwrap();
    let d = &r.checks[0].detail;
    assert!(
        d.contains("median of `h2d/cuda-copy/gpu0/local/256MiB/s1`, ±0.7 %, N=12"),
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

#[test]
fn a_ceiling_from_an_unsteady_measurement_says_so() {
    let (spec, p) = gpu_and_second_rule("dispatcher_cold_1drive_gbps", 3, 55.5);
    // The peak is a measurement that stayed over its 1 % limit; the derived figure uses it.
    let p = with_limit(p, "h2d/cuda-copy/gpu0/local/256MiB/s1", 55.5, 3.2, 1);
    let p = with_peak_and_dispatcher_sources(p, "h2d/cuda-copy/gpu0/local/256MiB/s1");
    let r = qualify(&spec, "spec.yaml", &p, "p.yaml", None).unwrap();
    let d = &r.checks[0].detail;
    assert!(d.contains("an unsteady figure; rerun idle"), "{d}");
    let d = &r.checks[1].detail;
    assert!(
        d.contains("derived from a measurement whose repetitions spread"),
        "{d}"
    );
    // Within its limit, nothing is said.
    let (spec, p) = gpu_and_second_rule("host_ram_same_numa_gbps", 10, 30.0);
    let p = with_limit(p, "h2d/cuda-copy/gpu0/local/256MiB/s1", 55.5, 0.4, 1);
    let p = with_source(
        p,
        "warm_gpu0_peak_gbps",
        CeilingSource::measured("h2d/cuda-copy/gpu0/local/256MiB/s1"),
    );
    let r = qualify(&spec, "spec.yaml", &p, "p.yaml", None).unwrap();
    assert!(
        !r.checks[0].detail.contains("unsteady"),
        "{}",
        r.checks[0].detail
    );
}

const HOST_BASELINE_SPEC: &str =
    "spec_version: 1\nrules:\n  - path: host_ram_same_numa_gbps\n    min_pct_of_baseline: 90\n";

#[test]
fn a_baseline_rule_holds_figures_of_one_copy_kernel_to_each_other() {
    let spec = parse_spec(HOST_BASELINE_SPEC).unwrap();
    for kernel in ["host-memcpy", "host-streaming"] {
        let golden = host_ceiling("golden", Some(kernel), 58.0);
        // 90 % of 58.00 = 52.20 GB/s.
        for (gbps, outcome, op) in [
            (55.0, Outcome::Pass, ">="),
            (50.0, Outcome::Fail(FailureKind::BelowFloor), "<"),
        ] {
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
    let p = host_ceiling("node", Some("host-memcpy"), 35.0);
    let r = qualify(&spec, "s", &p, "p", Some(&old)).unwrap();
    assert_eq!(r.checks[0].outcome, Outcome::Pass, "{}", r.checks[0].detail);
}

/// A figure or a floor that is not a finite number is `not-finite` whatever the rule's kind
/// (a NaN used to read as below any floor, infinity as above it).
#[test]
fn a_non_finite_figure_or_floor_fails_as_not_finite_for_every_rule_kind() {
    let spec = parse_spec(
        r#"
spec_version: 1
rules:
  - path: host_ram_same_numa_gbps
    min_gbps: 10
  - path: host_ram_same_numa_gbps
    min_pct_of_link: 50
  - path: host_ram_same_numa_gbps
    min_pct_of_baseline: 90
"#,
    )
    .unwrap();
    // JSON cannot carry them, so they are set after the fixture is built, as a program would.
    let with_value = |name: &str, v: f64| {
        let mut p = host_ceiling(name, Some("host-streaming"), 58.0);
        p.ceilings.insert("host_ram_same_numa_gbps".into(), v);
        for m in &mut p.measurements {
            m.gbps.median = v;
        }
        p
    };
    let golden = host_ceiling("golden", Some("host-streaming"), 58.0);
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let p = with_value("node", bad);
        let r = qualify(&spec, "s", &p, "p", Some(&golden)).unwrap();
        for c in &r.checks {
            assert_eq!(
                c.outcome,
                Outcome::Fail(FailureKind::NotFinite),
                "{bad}: {}",
                c.detail
            );
            assert_eq!(c.value, None, "{bad}");
            assert!(c.detail.contains("is not a finite number"), "{}", c.detail);
        }
    }
    // A finite figure against a baseline that is not: the floor is the problem, and the
    // figure is kept.
    let nan_baseline = with_value("golden", f64::NAN);
    let p = with_value("node", 55.0);
    let r = qualify(&spec, "s", &p, "p", Some(&nan_baseline)).unwrap();
    let c = &r.checks[2];
    assert_eq!(
        c.outcome,
        Outcome::Fail(FailureKind::NotFinite),
        "{}",
        c.detail
    );
    assert_eq!(c.value, Some(55.0));
    assert!(
        c.detail.starts_with("the floor is not a finite number"),
        "{}",
        c.detail
    );
    assert!(c.detail.contains("55.00 GB/s"), "{}", c.detail);
}

#[test]
fn a_baseline_rule_across_copy_kernels_is_not_comparable() {
    let spec = parse_spec(HOST_BASELINE_SPEC).unwrap();
    // On the ratio alone the first would pass (58 >= 90 % of 35) and the second would fail
    // (35 < 90 % of 58); neither says anything about the machine.
    for (was, base_gbps, now, gbps) in [
        ("host-memcpy", 35.0, "host-streaming", 58.0),
        ("host-streaming", 58.0, "host-memcpy", 35.0),
    ] {
        let golden = host_ceiling("golden", Some(was), base_gbps);
        let p = host_ceiling("node", Some(now), gbps);
        let r = qualify(&spec, "s", &p, "p", Some(&golden)).unwrap();
        let c = &r.checks[0];
        assert_eq!(
            c.outcome,
            Outcome::Fail(FailureKind::NotComparable),
            "{}",
            c.detail
        );
        assert_eq!(c.floor, None, "no floor was computed: {}", c.detail);
        assert_eq!(c.value, Some(gbps));
        let verdict =
            format!("not comparable: engine {was} (baseline) → {now} (profile); re-baseline");
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
        let failures: Vec<(String, String)> = hwc_testkit::junit_cases(&xml)
            .into_iter()
            .filter_map(|(_, failure)| failure)
            .collect();
        assert_eq!(failures.len(), 1, "{xml}");
        assert!(failures[0].1.starts_with(&verdict), "{xml}");
    }
}

#[test]
fn an_old_baseline_without_a_copy_kernel_against_a_streaming_profile_is_not_comparable() {
    let spec = parse_spec(HOST_BASELINE_SPEC).unwrap();
    let p = host_ceiling("node", Some("host-streaming"), 58.0);
    // Its measurement names no copy kernel; with its ceiling_sources, and from before those
    // existed (the source is then the measurement with the ceiling's median).
    let old = host_ceiling("golden", None, 36.0);
    let older = hwc_testkit::unsourced(old.clone());
    for baseline in [&old, &older] {
        let r = qualify(&spec, "s", &p, "p", Some(baseline)).unwrap();
        let c = &r.checks[0];
        assert_eq!(
            c.outcome,
            Outcome::Fail(FailureKind::NotComparable),
            "{}",
            c.detail
        );
        assert!(
            c.detail.starts_with(
                "not comparable: engine host-memcpy (baseline) → host-streaming (profile)"
            ),
            "{}",
            c.detail
        );
        assert!(!r.ok());
    }
}

/// One failure of every kind (and a pass and a skip): the JUnit `<failure type>` says which.
#[test]
fn junit_failure_types_say_what_happened() {
    let mut spec = parse_spec(
        r#"
spec_version: 1
rules:
  - name: fast enough
    path: warm_gpu0_peak_gbps
    min_gbps: 20
  - name: too slow
    path: warm_gpu0_peak_gbps
    min_gbps: 50
  - name: absent
    path: nope_gbps
    min_gbps: 1
  - name: absent, not required
    path: nope_gbps
    min_gbps: 1
    required: false
  - name: absent from the baseline
    path: warm_gpu0_peak_gbps
    min_pct_of_baseline: 90
  - name: across copy kernels
    path: host_ram_same_numa_gbps
    min_pct_of_baseline: 90
  - name: no device in the path
    path: host_ram_same_numa_gbps
    min_pct_of_link: 50
  - name: no such link
    path: warm_gpu0_peak_gbps
    min_pct_of_link: 50
    link: gpu7
links:
  - device: gpu0
    gen: max
  - device: gpu1
    gen: max
  - device: gpu2
    gen: 4
    width: max
  - device: "nvme*"
    gen: 4
pcie:
  - device: gpu0
    min_mps_bytes: 256
    acs_redirect: false
    iommu: [identity]
    no_link_errors: true
  - device: nvme0
    min_mps_bytes: 128
"#,
    )
    .unwrap();
    // A spec built in code, not checked by parse_spec, can hold a rule without a floor.
    let mut no_floor = spec.rules[0].clone();
    no_floor.name = Some("no floor".into());
    no_floor.min_gbps = None;
    spec.rules.push(no_floor);
    // A profile built in code (not read from a file, which refuses it) can hold infinity.
    let mut infinite = spec.rules[0].clone();
    infinite.name = Some("not a number".into());
    infinite.path = "warm_gpu1_peak_gbps".into();
    spec.rules.push(infinite);

    let mut p = host_ceiling("node", Some("host-streaming"), 58.0);
    p.ceilings.insert("warm_gpu0_peak_gbps".into(), 26.0);
    p.ceilings
        .insert("warm_gpu1_peak_gbps".into(), f64::INFINITY);
    // gpu0 runs Gen4 of its Gen5; gpu1's maximum is unknown; gpu2 runs Gen3 (< 4) and its
    // maximum width is unknown: the lower generation names the failure.
    let p = with_link(p, "gpu0", (4, 16), (5, 16));
    let mut p = with_link(p, "gpu1", (5, 16), (5, 16));
    p.topology.links[1].max_gen = None;
    let mut p = with_link(p, "gpu2", (3, 16), (5, 16));
    p.topology.links[2].max_width = None;
    // gpu0's root port sets MPS 128 and redirects P2P requests, its domain is DMA-FQ; nvme0's
    // path was read without root.
    use hwc_model::pcie::{Acs, PcieConfig, PortType};
    use hwc_model::topology::{PcieHop, PciePath};
    let hop = |bdf: &str, port, mps, acs| PcieHop {
        bdf: bdf.into(),
        config: PcieConfig {
            readable_bytes: 4096,
            port: Some(port),
            mps_bytes: Some(mps),
            acs,
            ..PcieConfig::default()
        },
        iommu_domain: Some("DMA-FQ".into()),
    };
    p.topology.pcie_paths = vec![
        PciePath {
            device: "gpu0".into(),
            hops: vec![
                hop("0000:01:00.0", PortType::Endpoint, 256, None),
                hop(
                    "0000:00:01.0",
                    PortType::RootPort,
                    128,
                    Some(Acs::new(0x5f, 0x1d)),
                ),
            ],
        },
        PciePath {
            device: "nvme0".into(),
            hops: vec![PcieHop {
                bdf: "0000:05:00.0".into(),
                config: PcieConfig {
                    readable_bytes: 64,
                    unreadable: Some("only 64 bytes".into()),
                    ..PcieConfig::default()
                },
                iommu_domain: None,
            }],
        },
    ];
    // A gpu0 copy saw a PCIe replay.
    let mut p = with_measurement(p, "h2d/cuda-copy/gpu0/local/4MiB/s1", 50.0, false);
    p.measurements.last_mut().unwrap().evidence.gpu_state = Some(hwc_model::GpuCaseState {
        pcie_replays: Some(1),
        ..Default::default()
    });
    let baseline = host_ceiling("golden", Some("host-memcpy"), 35.0);

    let r = qualify(&spec, "s", &p, "p", Some(&baseline)).unwrap();
    let expected: Vec<(&str, Option<&str>)> = vec![
        ("fast enough", None),
        ("too slow", Some("below-floor")),
        ("absent", Some("missing-in-profile")),
        ("absent, not required", None),
        ("absent from the baseline", Some("missing-in-baseline")),
        ("across copy kernels", Some("not-comparable")),
        ("no device in the path", Some("no-device")),
        ("no such link", Some("no-link")),
        ("no floor", Some("no-floor")),
        ("not a number", Some("not-finite")),
        ("gpu0 link (0000:01:00.0)", Some("link-below-target")),
        ("gpu1 link (0000:02:00.0)", Some("max-unknown")),
        ("gpu2 link (0000:03:00.0)", Some("link-below-target")),
        ("nvme* link", Some("no-matching-link")),
        ("gpu0 MPS", Some("pcie-setting")),
        ("gpu0 ACS redirect", Some("pcie-setting")),
        ("gpu0 IOMMU", Some("pcie-setting")),
        ("gpu0 link errors", Some("link-errors")),
        ("nvme0 MPS", Some("pcie-unreadable")),
    ];
    let xml = hwc_compare::junit::render(&r);
    let got = hwc_testkit::junit_cases(&xml);
    let got_types: Vec<(&str, Option<&str>)> = got
        .iter()
        .map(|(n, f)| (n.as_str(), f.as_ref().map(|(t, _)| t.as_str())))
        .collect();
    assert_eq!(got_types, expected, "{}", render(&r));
    // The report's checks carry the same kinds, and every kind was exercised.
    for (c, (name, ty)) in r.checks.iter().zip(&expected) {
        assert_eq!(c.name, *name);
        assert_eq!(c.outcome.failure().map(|k| k.as_str()), *ty, "{}", c.detail);
    }
    let seen: std::collections::BTreeSet<&str> = expected.iter().filter_map(|e| e.1).collect();
    let all: std::collections::BTreeSet<&str> =
        FailureKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(seen, all);
    // The failure's message is the detail, and the detail says what happened.
    let message = |name: &str| {
        got.iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, f)| f.as_ref())
            .map(|(_, m)| m.clone())
            .unwrap()
    };
    assert!(message("too slow").contains("26.00 GB/s < the floor 50.00 GB/s"));
    assert_eq!(
        message("gpu0 MPS"),
        "smallest MPS 128 bytes (at 0000:00:01.0), under 256"
    );
    assert!(message("gpu0 ACS redirect").starts_with("ACS P2P request redirect on at 0000:00:01.0"));
    assert_eq!(message("gpu0 IOMMU"), "domain DMA-FQ; allowed identity");
    assert!(message("nvme0 MPS").contains("not readable (it needs root)"));
    assert!(message("absent").contains("not among the profile's ceilings"));
    assert!(message("absent from the baseline").contains("the baseline profile has no"));
    assert!(message("across copy kernels").starts_with(
        "not comparable: engine host-memcpy (baseline) → host-streaming (profile); re-baseline"
    ));
    assert!(message("gpu2 link (0000:03:00.0)").contains("gen 3 < 4"));
    assert!(message("gpu2 link (0000:03:00.0)").contains("maximum unknown"));
    assert_eq!(
        message("not a number"),
        "the profile's ceiling is not a finite number (inf)"
    );
    assert_eq!((r.passed, r.failed, r.skipped), (1, 17, 1));

    // JSON/YAML: `outcome` stays pass/fail/skip; `failure` names the kind of a failed check.
    let v = serde_json::to_value(&r).unwrap();
    for (c, (_, ty)) in v["checks"].as_array().unwrap().iter().zip(&expected) {
        match ty {
            Some(t) => {
                assert_eq!(c["outcome"], "fail", "{c}");
                assert_eq!(c["failure"], *t, "{c}");
            }
            None => {
                assert_ne!(c["outcome"], "fail", "{c}");
                assert!(c.get("failure").is_none(), "{c}");
            }
        }
    }
    assert_eq!(v["checks"][0]["outcome"], "pass");
    assert_eq!(v["checks"][3]["outcome"], "skip");
    assert_eq!(v["checks"][0]["floor"], 20.0);
    assert!(v["checks"][2].get("value").is_none());
}

/// Names, check names and details with markup characters come back out of the XML unchanged,
/// and the raw document holds none of them unescaped.
#[test]
fn junit_escapes_attribute_values() {
    let spec = parse_spec(
        "spec_version: 1\nrules:\n  - name: 'x<y & \"z\"'\n    path: 'a<b&\"c\"'\n    min_gbps: 1\n",
    )
    .unwrap();
    let r = qualify(&spec, "s", &profile("n", &[]), "p", None).unwrap();
    let detail = &r.checks[0].detail;
    assert!(
        detail.contains(r#"`a<b&"c"`"#),
        "the detail carries the path: {detail}"
    );
    let xml = hwc_compare::junit::render(&r);
    assert_eq!(
        hwc_testkit::junit_cases(&xml),
        vec![(
            r#"x<y & "z""#.to_string(),
            Some(("missing-in-profile".to_string(), detail.clone()))
        )]
    );
    assert!(
        xml.contains(r#"name="x&lt;y &amp; &quot;z&quot;""#),
        "{xml}"
    );
    assert!(xml.contains("`a&lt;b&amp;&quot;c&quot;`"), "{xml}");
    assert!(!xml.contains("a<b") && !xml.contains("x<y"), "{xml}");

    // A detail with an arrow, `<`, `&` and `"`, straight into the renderer.
    let detail =
        r#"not comparable: engine host-memcpy (baseline) → host-streaming (profile) < 1 & "2""#;
    let mut r = r.clone();
    r.checks[0].outcome = Outcome::Fail(FailureKind::NotComparable);
    r.checks[0].detail = detail.to_string();
    let xml = hwc_compare::junit::render(&r);
    assert_eq!(
        hwc_testkit::junit_cases(&xml)[0].1,
        Some(("not-comparable".to_string(), detail.to_string()))
    );
    assert!(
        xml.contains(
            "message=\"not comparable: engine host-memcpy (baseline) → host-streaming (profile) \
             &lt; 1 &amp; &quot;2&quot;\" type=\"not-comparable\""
        ),
        "{xml}"
    );
}

/// Every failure type is a stable kebab-case name, named once, and documented in the spec's
/// documentation.
#[test]
fn every_failure_type_is_documented() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/qualify-spec.md"
    ))
    .unwrap();
    let names: std::collections::BTreeSet<&str> =
        FailureKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(names.len(), FailureKind::ALL.len());
    for k in FailureKind::ALL {
        let n = k.as_str();
        assert!(n.chars().all(|c| c.is_ascii_lowercase() || c == '-'), "{n}");
        assert_eq!(k.to_string(), n);
        assert!(
            doc.lines().any(|l| l.starts_with(&format!("| `{n}` |"))),
            "docs/qualify-spec.md has no row for `{n}`"
        );
    }
}

#[test]
fn a_missing_figure_says_why_when_its_case_failed() {
    let spec = parse_spec(SPEC).unwrap();
    let baseline = profile("golden", &[("host_ram_same_numa_gbps", 32.0)]);
    let mut p = profile(
        "node9",
        &[
            ("warm_gpu0_peak_gbps", 55.6),
            ("host_ram_same_numa_gbps", 30.0),
        ],
    );
    p = with_link(p, "gpu0", (5, 16), (5, 16));
    let refused = "refused: gpu0 (0000:00:06.0) has 1 other compute process(es): pid 529";
    p.failures = vec![hwc_model::Failure {
        engine: None,
        key: "h2d/cuda-copy/gpu0/local/256MiB/s1".into(),
        path: hwc_model::PathId::H2d,
        error: refused.into(),
    }];
    let r = qualify(&spec, "spec.yaml", &p, "p.yaml", Some(&baseline)).unwrap();
    let failed: Vec<&str> = r
        .checks
        .iter()
        .filter(|c| c.outcome.is_fail())
        .map(|c| c.detail.as_str())
        .collect();
    assert_eq!(
        failed,
        [format!(
            "`h2d/cuda-copy/gpu0/local/256MiB/s1` failed in this run: {refused}"
        )]
    );
    // A figure that is absent for another reason points at the waivers and the failures.
    let skipped = r
        .checks
        .iter()
        .find(|c| c.name.starts_with("nvme_raw_4drive_read_gbps"))
        .unwrap();
    assert!(
        skipped.detail.contains(
            "(see its `waived` list; 1 case(s) of this run failed: see its `failures` list)"
        ),
        "{}",
        skipped.detail
    );
}

#[test]
fn a_share_of_a_link_that_reads_zero_fails_instead_of_passing_every_figure() {
    let spec = parse_spec(SPEC).unwrap();
    let mut p = node();
    // The link down: width 0 at its maximum too, 0 GB/s theoretical.
    let l = &mut p.topology.links[0];
    (l.max_width, l.max_theoretical_gbps) = (Some(0), Some(0.0));
    let baseline = profile("golden", &[("host_ram_same_numa_gbps", 32.0)]);
    let r = qualify(&spec, "spec.yaml", &p, "p.yaml", Some(&baseline)).unwrap();
    let c = &r.checks[1];
    assert_eq!(
        c.outcome,
        Outcome::Fail(FailureKind::NoLink),
        "{}",
        render(&r)
    );
    assert!(c.detail.contains("0.00 GB/s theoretical"), "{}", c.detail);
}
