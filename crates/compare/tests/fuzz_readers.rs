//! Fuzzing the readers: profile and spec files, damaged at random from seeds that hold the
//! hostile cases we know (a negative median, a key twice, an escape-laden hostname, 1e308, -0,
//! deep nesting, aliases), are read and then rendered by every consumer — report, compare,
//! efficiency, qualify (text and JUnit) — and none may panic; what reads writes out and reads
//! back the same. CI runs a bounded count;
//! `HWC_FUZZ_CASES=N` runs more.

use hwc_compare::compare::{self, Node, Options};
use hwc_compare::{efficiency, junit, qualify, Tolerance};
use proptest::prelude::*;

const H200: &str = include_str!("../../profile/tests/fixtures/v1-h200-a.yaml");

/// The real profile, read once.
static PARSED: std::sync::LazyLock<hwc_model::Profile> =
    std::sync::LazyLock::new(|| hwc_profile::from_yaml(H200).unwrap());

fn cases(default: u32) -> u32 {
    std::env::var("HWC_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Seeds: a real profile, and the same with each known hostile edit.
fn profile_seeds() -> Vec<String> {
    let mut seeds = vec![H200.to_string()];
    let hostile = "\"n\\e]0;pwned\\a\\0\\e[2J\\n# pwned | x\"";
    for (from, to) in [
        ("hostname: vm", &*format!("hostname: {hostile}")),
        ("median: 25.87519805689122", "median: -25.8"),
        ("median: 25.87519805689122", "median: 1e308"),
        ("median: 25.87519805689122", "median: -0"),
        ("warm_gpu0_gbps: 53.408636642750714", "warm_gpu0_gbps: .nan"),
        ("schema_version: 1", "schema_version: 1\nschema_version: 1"),
        ("ceilings:", "ceilings:\n  x: &a [*a]"),
        (
            "measurements:",
            "measurements: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\nx:",
        ),
    ] {
        seeds.push(H200.replacen(from, to, 1));
    }
    seeds
}

/// Every consumer of a profile, on `p`.
fn consume(p: &hwc_model::Profile) {
    let md = hwc_report::render(p);
    assert!(!md.chars().any(|c| c.is_control() && c != '\n'));
    let opts = Options {
        tolerance: "5%".parse::<Tolerance>().unwrap(),
        ceilings_only: false,
    };
    let r = compare::compare_pair(
        Node {
            name: "a",
            profile: p,
        },
        Node {
            name: "b",
            profile: p,
        },
        &opts,
    );
    let _ = compare::render_pair(&r);
    for key in p.ceilings.keys().take(8) {
        let _ = efficiency::efficiency_in(p, key, 1.0);
    }
    let spec = qualify::parse_spec(
        "spec_version: 1\nrules:\n  - path: warm_gpu0_gbps\n    min_gbps: 1\n  - path: warm_gpu0_peak_gbps\n    min_pct_of_link: 50\n  - path: host_ram_same_numa_gbps\n    min_pct_of_baseline: 90\nlinks:\n  - device: gpu*\n    gen: max\n    width: max\n",
    )
    .unwrap();
    if let Ok(q) = qualify::qualify(&spec, "s.yaml", p, "p.yaml", Some(p)) {
        let _ = qualify::render(&q);
        let _ = junit::render(&q);
    }
}

fn damage(
    good: &str,
    how: u8,
    at: usize,
    cut: usize,
    byte: u8,
    insert: &str,
    line: usize,
) -> Option<String> {
    let mut bytes = good.as_bytes().to_vec();
    match how {
        0 => bytes.truncate(cut % (bytes.len() + 1)),
        1 => {
            let i = at % bytes.len();
            bytes[i] = byte;
        }
        2 => {
            let i = at % bytes.len();
            bytes.splice(i..i, insert.bytes());
        }
        _ => {
            let lines: Vec<&str> = good.lines().collect();
            let mut v = lines.clone();
            v.insert(line % lines.len(), lines[line % lines.len()]);
            bytes = (v.join("\n") + "\n").into_bytes();
        }
    }
    String::from_utf8(bytes).ok()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(32)))]

    #[test]
    fn a_damaged_profile_is_refused_or_rendered_by_every_consumer_never_a_panic(
        seed in 0usize..9,
        how in 0u8..5,
        at in 0usize..200_000,
        cut in 0usize..200_000,
        byte in any::<u8>(),
        insert in "[\\[\\]{}:&*!|>'\"#%@`, \\-\\n]{0,8}|\\PC{0,8}|\\x1b\\[[0-9;]{0,4}m",
        line in 0usize..5000,
    ) {
        let seeds = profile_seeds();
        let good = &seeds[seed % seeds.len()];
        let text = if how == 4 { Some(good.clone()) } else { damage(good, how, at, cut, byte, &insert, line) };
        if let Some(text) = text {
            if let Ok(p) = hwc_profile::from_yaml(&text) {
                consume(&p);
                // What was read writes out and reads back the same (text compared, so a NaN
                // the damage produced compares equal to itself).
                let again = hwc_profile::to_yaml(&p).unwrap();
                let third = hwc_profile::to_yaml(&hwc_profile::from_yaml(&again).unwrap()).unwrap();
                prop_assert_eq!(third, again);
            }
        }
    }

    #[test]
    fn a_damaged_spec_is_refused_or_checked_never_a_panic(
        how in 0u8..5,
        at in 0usize..400,
        cut in 0usize..400,
        byte in any::<u8>(),
        insert in "[\\[\\]{}:&*!|>'\"#%@`, \\-\\n]{0,8}|\\PC{0,8}|[0-9e.+-]{1,8}",
        line in 0usize..20,
    ) {
        let good = "spec_version: 1\nname: \"a \\e[31m|\\n# x\"\nbaseline: b.yaml\nrules:\n  - path: warm_gpu0_gbps\n    min_gbps: 1e308\n  - path: warm_gpu0_peak_gbps\n    min_pct_of_link: -0\n  - path: host_ram_same_numa_gbps\n    min_pct_of_baseline: 90\n    required: false\nlinks:\n  - device: \"gpu*\"\n    gen: max\n    width: 16\n";
        prop_assert!(qualify::parse_spec(good).is_ok());
        let text = if how == 4 { Some(good.to_string()) } else { damage(good, how, at, cut, byte, &insert, line) };
        let p = &*PARSED;
        if let Some(text) = text {
            if let Ok(spec) = qualify::parse_spec(&text) {
                if let Ok(q) = qualify::qualify(&spec, "s.yaml", p, "p.yaml", Some(p)) {
                    let _ = qualify::render(&q);
                    let _ = junit::render(&q);
                }
            }
        }
    }
}

#[test]
fn every_seed_reads_or_is_refused_with_one_line() {
    for (i, s) in profile_seeds().iter().enumerate() {
        match hwc_profile::from_yaml(s) {
            Ok(p) => consume(&p),
            Err(e) => assert!(!e.to_string().contains('\n'), "seed {i}: {e}"),
        }
    }
    // The seeds do what they say: the hostile hostname reads, the damaged ones are refused.
    let seeds = profile_seeds();
    assert!(hwc_profile::from_yaml(&seeds[1]).is_ok());
    for i in [2, 5, 6, 7, 8] {
        assert!(hwc_profile::from_yaml(&seeds[i]).is_err(), "seed {i} read");
    }
}
