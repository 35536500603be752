//! `compare`: pair deltas and regressions, fleet medians and outliers.

mod common;
use common::{
    fleet, host_ceiling, pair, profile, with_measurement, with_nvme_measurement, with_source,
    with_stats,
};
use hwc_compare::compare::{
    median, node_names, render_fleet, render_pair, Options, OutlierKind, PairReport, PairRow,
    Section, Verdict,
};
use hwc_compare::Tolerance;
use hwc_model::CeilingSource;

/// The row of `key` in a pair report.
fn pair_row<'a>(r: &'a PairReport, key: &str) -> &'a PairRow {
    r.rows.iter().find(|x| x.key == key).unwrap()
}

fn opts(tol: &str) -> Options {
    Options {
        tolerance: tol.parse().unwrap(),
        ceilings_only: false,
    }
}

#[test]
fn pair_flags_drops_beyond_tolerance_and_lost_ceilings() {
    let a = profile(
        "a",
        &[
            ("warm_gpu0_gbps", 53.4),
            ("warm_gpu0_peak_gbps", 55.6),
            ("host_ram_same_numa_gbps", 34.0),
            ("warm_gpu0_cross_numa_penalty_gbps", 3.0),
            ("nvme_optimal_read_chunk_bytes", 1048576.0),
        ],
    );
    let b = profile(
        "b",
        &[
            ("warm_gpu0_gbps", 50.0),                    // −6.4 %: regression at 5 %
            ("warm_gpu0_peak_gbps", 55.0),               // −1.1 %: within
            ("warm_gpu0_cross_numa_penalty_gbps", 2.0),  // penalty fell: better
            ("nvme_optimal_read_chunk_bytes", 524288.0), // size: changed, never a regression
            ("gpu0_d2h_peak_gbps", 55.3),                // new
        ],
    );
    let r = pair(("A", &a), ("B", &b), &opts("5%"));
    let row = |k: &str| pair_row(&r, k);
    assert_eq!(row("warm_gpu0_gbps").verdict, Verdict::Worse);
    assert!(row("warm_gpu0_gbps").regression);
    assert!((row("warm_gpu0_gbps").delta_pct.unwrap() + 6.367).abs() < 0.01);
    assert_eq!(row("warm_gpu0_peak_gbps").verdict, Verdict::Within);
    assert_eq!(
        row("warm_gpu0_cross_numa_penalty_gbps").verdict,
        Verdict::Better
    );
    assert_eq!(
        row("nvme_optimal_read_chunk_bytes").verdict,
        Verdict::Changed
    );
    assert!(!row("nvme_optimal_read_chunk_bytes").regression);
    assert_eq!(row("host_ram_same_numa_gbps").verdict, Verdict::Missing);
    assert!(row("host_ram_same_numa_gbps").regression, "a lost ceiling");
    assert_eq!(row("gpu0_d2h_peak_gbps").verdict, Verdict::New);
    assert_eq!(r.regressions, 2);
    let text = render_pair(&r);
    assert!(
        text.contains("REGRESSION") && text.contains("MISSING"),
        "{text}"
    );
    assert!(text.ends_with("2 regression(s)\n"), "{text}");

    // At 10 % the drop is within tolerance; only the lost ceiling remains.
    let r = pair(("A", &a), ("B", &b), &opts("0.10"));
    assert_eq!(r.regressions, 1);
}

#[test]
fn a_rising_penalty_is_a_regression_and_identical_profiles_pass() {
    let a = profile("a", &[("warm_gpu0_cross_numa_penalty_gbps", 3.0)]);
    let b = profile("b", &[("warm_gpu0_cross_numa_penalty_gbps", 4.0)]);
    let r = pair(("A", &a), ("B", &b), &opts("5%"));
    assert_eq!(r.regressions, 1);
    let same = pair(("A", &a), ("A", &a), &Options::default());
    assert_eq!(same.regressions, 0);
    assert!(render_pair(&same).ends_with("no regression\n"));
}

#[test]
fn measurements_are_compared_by_median_and_can_be_left_out() {
    let a = with_measurement(
        profile("a", &[]),
        "h2d/cuda-copy/gpu0/local/4MiB/s1",
        53.0,
        false,
    );
    let b = with_measurement(
        profile("b", &[]),
        "h2d/cuda-copy/gpu0/local/4MiB/s1",
        40.0,
        true,
    );
    let r = pair(("A", &a), ("B", &b), &opts("5%"));
    let row = &r.rows[0];
    assert_eq!(
        (row.section, row.verdict, row.contended),
        (Section::Measurement, Verdict::Worse, true)
    );
    assert!(render_pair(&r).contains("REGRESSION (contended)"));
    let mut o = opts("5%");
    o.ceilings_only = true;
    let r = pair(("A", &a), ("B", &b), &o);
    assert!(r.rows.is_empty());
    // A measurement only the baseline has is reported, not counted as a regression.
    let c = profile("c", &[]);
    let r = pair(("A", &a), ("C", &c), &opts("5%"));
    assert_eq!((r.rows[0].verdict, r.regressions), (Verdict::Missing, 0));
}

#[test]
fn fleet_reports_medians_and_outlier_nodes() {
    let nodes: Vec<_> = [
        ("n1", 55.0, Some(34.0)),
        ("n2", 54.8, Some(34.5)),
        ("n3", 55.3, Some(33.9)),
        ("n4", 41.0, None), // slow GPU link, host RAM not measured
        ("n5", 55.1, Some(39.0)),
    ]
    .into_iter()
    .map(|(h, g, ram)| {
        let mut c = vec![("warm_gpu0_peak_gbps", g)];
        if let Some(r) = ram {
            c.push(("host_ram_same_numa_gbps", r));
        }
        (h, profile(h, &c))
    })
    .collect();
    let r = fleet(&nodes, &opts("5%"));
    let gpu = r
        .rows
        .iter()
        .find(|x| x.key == "warm_gpu0_peak_gbps")
        .unwrap();
    assert_eq!((gpu.n, gpu.median), (5, 55.0));
    assert_eq!(gpu.outliers.len(), 1);
    assert_eq!(
        (gpu.outliers[0].node.as_str(), gpu.outliers[0].kind),
        ("n4", OutlierKind::Worse)
    );
    let ram = r
        .rows
        .iter()
        .find(|x| x.key == "host_ram_same_numa_gbps")
        .unwrap();
    assert_eq!(ram.median, (34.0 + 34.5) / 2.0);
    let kinds: Vec<_> = ram
        .outliers
        .iter()
        .map(|o| (o.node.as_str(), o.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![("n4", OutlierKind::Missing), ("n5", OutlierKind::Better)]
    );
    // Worse GPU on n4 and its missing ceiling; n5's better figure is not a regression.
    assert_eq!(r.regressions, 2);
    let text = render_fleet(&r);
    // Built without measurements or sources, no ceiling here says where it comes from: the
    // outlier says so, and guesses nothing.
    assert!(text.contains("n4 41.00 (unknown) -25.5% WORSE"), "{text}");
    assert!(text.contains("5/5") && text.contains("4/5"), "{text}");
}

#[test]
fn node_names_prefer_distinct_hostnames() {
    let a = profile("node1", &[]);
    let b = profile("node2", &[]);
    let c = profile("node1", &[]);
    fn files<'a>(ps: &[&'a hwc_model::Profile]) -> Vec<(String, &'a hwc_model::Profile)> {
        ps.iter()
            .enumerate()
            .map(|(i, p)| (format!("f{i}.yaml"), *p))
            .collect()
    }
    assert_eq!(node_names(&files(&[&a, &b])), vec!["node1", "node2"]);
    assert_eq!(node_names(&files(&[&a, &c])), vec!["f0.yaml", "f1.yaml"]);
}

#[test]
fn medians_of_odd_and_even_counts() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    assert_eq!(median(&[7.0]), 7.0);
    assert_eq!(Tolerance::default().fraction(), 0.05);
}

fn odd_value() -> impl proptest::strategy::Strategy<Value = f64> {
    use proptest::prelude::*;
    prop_oneof![
        0.0f64..100.0,
        Just(0.0),
        Just(-1.0),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::MAX),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// Any values, zeros, NaN and infinities included: a report, never a panic, and the
    /// regression count is the number of rows flagged.
    #[test]
    fn any_ceilings_compare_without_panicking(
        a in proptest::collection::btree_map("(warm_gpu[0-2]_gbps|x_penalty_gbps|y_bytes|z)", odd_value(), 0..5),
        b in proptest::collection::btree_map("(warm_gpu[0-2]_gbps|x_penalty_gbps|y_bytes|z)", odd_value(), 0..5),
        c in proptest::collection::btree_map("(warm_gpu[0-2]_gbps|x_penalty_gbps|y_bytes|z)", odd_value(), 0..5),
    ) {
        let pa = profile("a", &a.iter().map(|(k, v)| (k.as_str(), *v)).collect::<Vec<_>>());
        let pb = profile("b", &b.iter().map(|(k, v)| (k.as_str(), *v)).collect::<Vec<_>>());
        let pc = profile("c", &c.iter().map(|(k, v)| (k.as_str(), *v)).collect::<Vec<_>>());
        let r = pair(("a", &pa), ("b", &pb), &opts("5%"));
        proptest::prop_assert_eq!(r.regressions, r.rows.iter().filter(|x| x.regression).count());
        let _ = render_pair(&r);
        let f = fleet(&[("a", &pa), ("b", &pb), ("c", &pc)], &opts("5%"));
        let _ = render_fleet(&f);
        for row in &f.rows {
            proptest::prop_assert!(row.n >= 1 && row.n <= 3);
        }
    }
}

#[test]
fn the_long_drive_tests_latency_reads_change_but_never_regress() {
    let keys = [
        "nvme_read/io-uring/power-states/nvme0/idle-1s",
        "nvme_read/io-uring/read-cache/nvme0/hot",
        "nvme_read/io-uring/read-cache/nvme0/cold",
    ];
    let (mut a, mut b, mut c) = (profile("a", &[]), profile("b", &[]), profile("c", &[]));
    let tests = [
        hwc_model::NvmeTest::PowerStates,
        hwc_model::NvmeTest::ReadCache,
        hwc_model::NvmeTest::ReadCache,
    ];
    for (k, t) in keys.into_iter().zip(tests) {
        // One 4 KiB read after 1 s idle: 80 µs on A, 2.4 ms on B (its drive went to sleep).
        a = with_nvme_measurement(a, k, t, 0.051);
        b = with_nvme_measurement(b, k, t, 0.0017);
        c = with_nvme_measurement(c, k, t, 0.050);
    }
    // A sustained-write figure of the same tests is a bandwidth: it still regresses.
    let gc = hwc_model::NvmeTest::GcSettle;
    a = with_nvme_measurement(a, "nvme_write/io-uring/gc-settle/nvme0", gc, 1.4);
    b = with_nvme_measurement(b, "nvme_write/io-uring/gc-settle/nvme0", gc, 1.0);
    c = with_nvme_measurement(c, "nvme_write/io-uring/gc-settle/nvme0", gc, 1.4);
    let r = pair(("A", &a), ("B", &b), &opts("5%"));
    for k in keys {
        let row = pair_row(&r, k);
        assert_eq!(row.verdict, Verdict::Changed, "{k}");
        assert!(!row.regression, "{k}");
    }
    let gc = pair_row(&r, "nvme_write/io-uring/gc-settle/nvme0");
    assert!(gc.regression);
    assert_eq!(r.regressions, 1);
    assert!(render_pair(&r).contains("changed"));

    let f = fleet(&[("A", &a), ("B", &b), ("C", &c)], &opts("5%"));
    for k in keys {
        let row = f.rows.iter().find(|x| x.key == k).unwrap();
        assert!(
            row.outliers
                .iter()
                .all(|o| o.kind == OutlierKind::Differs && !o.regression),
            "{k}: {:?}",
            row.outliers
        );
    }
    assert_eq!(f.regressions, 1, "only the sustained writes");
}

#[test]
fn a_ceiling_taken_from_a_contended_measurement_is_marked_contended() {
    let a = with_measurement(
        profile("a", &[("warm_gpu0_gbps", 53.0)]),
        "h2d/cuda-copy/gpu0/local/4MiB/s1",
        53.0,
        false,
    );
    let b = with_measurement(
        profile("b", &[("warm_gpu0_gbps", 40.0)]),
        "h2d/cuda-copy/gpu0/local/4MiB/s1",
        40.0,
        true,
    );
    let mut o = opts("5%");
    o.ceilings_only = true;
    let r = pair(("A", &a), ("B", &b), &o);
    let row = &r.rows[0];
    assert_eq!(row.key, "warm_gpu0_gbps");
    assert_eq!((row.verdict, row.contended), (Verdict::Worse, true));
    assert!(render_pair(&r).contains("REGRESSION (contended)"));
}

/// Two nodes whose profiles say where each ceiling comes from. On each, two measurements share
/// the median of `warm_gpu0_gbps`; its record names the second.
fn sourced(host: &str, gbps: f64, spread: f64, penalty: f64) -> hwc_model::Profile {
    let p = profile(
        host,
        &[
            ("warm_gpu0_gbps", gbps),
            ("warm_gpu0_cross_numa_penalty_gbps", penalty),
        ],
    );
    let p = with_stats(p, "h2d/cuda-copy/gpu0/local/256MiB/s1", gbps, 0.1, 12);
    let p = with_stats(p, "h2d/cuda-copy/gpu0/local/4MiB/s1", gbps, spread, 12);
    let p = with_source(
        p,
        "warm_gpu0_gbps",
        CeilingSource::measured("h2d/cuda-copy/gpu0/local/4MiB/s1"),
    );
    with_source(
        p,
        "warm_gpu0_cross_numa_penalty_gbps",
        CeilingSource::derived(
            "local minus cross one-stream H2D peak",
            vec!["h2d/cuda-copy/gpu0/local/256MiB/s1".into()],
        ),
    )
}

#[test]
fn the_pair_table_shows_each_values_spread_and_n_or_that_it_is_derived() {
    let a = sourced("a", 53.4, 1.25, 3.0);
    let b = sourced("b", 50.0, 0.8, 2.0);
    let r = pair(("A", &a), ("B", &b), &opts("5%"));
    let expected = "\
baseline   A
candidate  B
tolerance  5%

ceiling                              baseline     spread, N  candidate     spread, N      delta   delta%  verdict
warm_gpu0_gbps                          53.40    ±1.2% N=12      50.00    ±0.8% N=12      -3.40    -6.4%  REGRESSION
warm_gpu0_cross_numa_penalty_gbps        3.00       derived       2.00       derived      -1.00   -33.3%  better

measurement (median GB/s)            baseline     spread, N  candidate     spread, N      delta   delta%  verdict
h2d/cuda-copy/gpu0/local/256MiB/s1      53.40    ±0.1% N=12      50.00    ±0.1% N=12      -3.40    -6.4%  REGRESSION
h2d/cuda-copy/gpu0/local/4MiB/s1        53.40    ±1.2% N=12      50.00    ±0.8% N=12      -3.40    -6.4%  REGRESSION

derived:
  warm_gpu0_cross_numa_penalty_gbps: local minus cross one-stream H2D peak

3 regression(s)
";
    assert_eq!(render_pair(&r), expected);
    let row = pair_row(&r, "warm_gpu0_gbps");
    let json = serde_json::to_value(row).unwrap();
    assert_eq!(
        json["candidate_source"],
        serde_json::json!({"kind": "measured", "measurement": "h2d/cuda-copy/gpu0/local/4MiB/s1", "spread_pct": 0.8, "n": 12})
    );
    let row = pair_row(&r, "warm_gpu0_cross_numa_penalty_gbps");
    assert_eq!(
        serde_json::to_value(row).unwrap()["baseline_source"],
        serde_json::json!({"kind": "derived", "how": "local minus cross one-stream H2D peak", "inputs": ["h2d/cuda-copy/gpu0/local/256MiB/s1"]})
    );
}

#[test]
fn a_delta_inside_the_measurements_spread_is_marked_but_still_counted() {
    // The 4 MiB figure (and the ceiling taken from it) moved 6.4 %, but one side's repetitions
    // ranged over 8 %: marked.
    let a = sourced("a", 53.4, 8.0, 3.0);
    let b = sourced("b", 50.0, 0.8, 2.0);
    let r = pair(("A", &a), ("B", &b), &opts("5%"));
    let text = render_pair(&r);
    // The 256 MiB figure moved as much with 0.1 % spreads; a derived ceiling has no spread of
    // its own: neither is marked.
    for (key, verdict) in [
        ("warm_gpu0_gbps ", "-6.4%  REGRESSION (inside spread)"),
        (
            "h2d/cuda-copy/gpu0/local/4MiB/s1",
            "-6.4%  REGRESSION (inside spread)",
        ),
        ("h2d/cuda-copy/gpu0/local/256MiB/s1", "-6.4%  REGRESSION"),
        ("warm_gpu0_cross_numa_penalty_gbps", "-33.3%  better"),
    ] {
        let line = text.lines().find(|l| l.starts_with(key)).unwrap();
        assert!(line.ends_with(verdict), "{key}: {text}");
    }
    assert_eq!(r.regressions, 3);
    assert!(
        text.ends_with(
            "3 regression(s)\n2 of them inside spread: the delta is no larger than the wider of \
             the two measurements' spreads (the full range of each side's repetitions, max - min \
             over median), so a rerun may not repeat it\n"
        ),
        "{text}"
    );
    // Always in the data, as `regression` and `contended` are.
    let json = |key: &str| serde_json::to_value(pair_row(&r, key)).unwrap();
    assert_eq!(
        json("h2d/cuda-copy/gpu0/local/4MiB/s1")["inside_spread"],
        true
    );
    assert_eq!(
        json("h2d/cuda-copy/gpu0/local/256MiB/s1")["inside_spread"],
        false
    );
    // Better is marked too (and never counted).
    let r = pair(("B", &b), ("A", &a), &opts("5%"));
    let row = pair_row(&r, "h2d/cuda-copy/gpu0/local/4MiB/s1");
    assert!(row.verdict == Verdict::Better && row.inside_spread && !row.regression);
    // At the spread it is inside, whatever the rounding of the delta; just past it, not.
    for (base, spread) in [(53.4, 8.0), (53.4, 2.5), (10.0, 3.3)] {
        let a = sourced("a", base, spread, 3.0);
        let at = sourced("b", base * (1.0 - spread / 100.0), 0.8, 2.0);
        let r = pair(("A", &a), ("B", &at), &opts("1%"));
        assert!(
            pair_row(&r, "h2d/cuda-copy/gpu0/local/4MiB/s1").inside_spread,
            "{base} {spread}"
        );
        let past = sourced("b", base * (1.0 - spread / 100.0 - 0.0001), 0.8, 2.0);
        let r = pair(("A", &a), ("B", &past), &opts("1%"));
        assert!(
            !pair_row(&r, "h2d/cuda-copy/gpu0/local/4MiB/s1").inside_spread,
            "{base} {spread}"
        );
    }
    // Within the tolerance there is nothing to mark.
    let b = sourced("b", 52.0, 0.8, 3.0);
    let r = pair(("A", &a), ("B", &b), &opts("5%"));
    assert!(r.rows.iter().all(|x| !x.inside_spread));
}

#[test]
fn only_two_measured_sides_with_real_spreads_can_be_inside_spread() {
    let a = sourced("a", 53.4, 8.0, 3.0);
    let b = sourced("b", 50.0, 0.8, 2.0);
    // The baseline's ceiling edited by hand: its named measurement is not its figure any more,
    // so its source is unknown, and one measured side alone decides nothing.
    let mut edited = a.clone();
    edited.ceilings.insert("warm_gpu0_gbps".into(), 53.5);
    let r = pair(("A", &edited), ("B", &b), &opts("5%"));
    let row = pair_row(&r, "warm_gpu0_gbps");
    assert_eq!(row.verdict, Verdict::Worse);
    assert!(!row.inside_spread);
    assert!(render_pair(&r).contains("unknown"), "{}", render_pair(&r));
    // A spread that is no number marks nothing.
    for bad in [f64::NAN, f64::INFINITY, -1.0] {
        let mut a = a.clone();
        for m in &mut a.measurements {
            if m.key == "h2d/cuda-copy/gpu0/local/4MiB/s1" {
                m.gbps.spread_pct = bad;
            }
        }
        let r = pair(("A", &a), ("B", &b), &opts("5%"));
        assert!(
            !pair_row(&r, "h2d/cuda-copy/gpu0/local/4MiB/s1").inside_spread,
            "{bad}"
        );
    }
    // A figure on one side only is missing or new, never inside spread.
    let mut gone = b.clone();
    gone.measurements
        .retain(|m| m.key != "h2d/cuda-copy/gpu0/local/4MiB/s1");
    let r = pair(("A", &a), ("B", &gone), &opts("5%"));
    let row = pair_row(&r, "h2d/cuda-copy/gpu0/local/4MiB/s1");
    assert_eq!(row.verdict, Verdict::Missing);
    assert!(!row.inside_spread);
}

#[test]
fn the_fleet_table_shows_the_widest_spread_and_the_range_of_n() {
    let nodes: Vec<_> = [("n1", 55.0, 0.5), ("n2", 55.2, 1.5), ("n3", 44.0, 0.7)]
        .into_iter()
        .map(|(h, g, spread)| (h, sourced(h, g, spread, 3.0)))
        .collect();
    let mut nodes = nodes;
    // n2's figure took fewer repetitions.
    nodes[1].1.measurements[1].gbps.n = 10;
    let mut o = opts("5%");
    o.ceilings_only = true;
    let text = render_fleet(&fleet(&nodes, &o));
    let expected = "\
fleet      3 nodes: n1, n2, n3
tolerance  5% from the median

ceiling                               n     median        min        max  spread, N       outliers
warm_gpu0_gbps                      3/3      55.00      44.00      55.20  ≤±1.5% N=10–12  n3 44.00 (±0.7% N=12) -20.0% WORSE
warm_gpu0_cross_numa_penalty_gbps   3/3       3.00       3.00       3.00  derived

derived:
  warm_gpu0_cross_numa_penalty_gbps: local minus cross one-stream H2D peak

1 regression(s)
";
    assert_eq!(text, expected);
}

#[test]
fn contention_follows_the_source_named_by_key_not_an_equal_median() {
    // The contended measurement has the ceiling's median too, and comes first.
    let mk = |host: &str, v: f64| {
        let p = profile(host, &[("warm_gpu0_gbps", v)]);
        let p = with_measurement(p, "h2d/cuda-copy/gpu0/local/256MiB/s1", v, true);
        let p = with_stats(p, "h2d/cuda-copy/gpu0/local/4MiB/s1", v, 0.5, 12);
        with_source(
            p,
            "warm_gpu0_gbps",
            CeilingSource::measured("h2d/cuda-copy/gpu0/local/4MiB/s1"),
        )
    };
    let (a, b) = (mk("a", 53.0), mk("b", 40.0));
    let mut o = opts("5%");
    o.ceilings_only = true;
    let r = pair(("A", &a), ("B", &b), &o);
    assert_eq!(
        (r.rows[0].verdict, r.rows[0].contended),
        (Verdict::Worse, false)
    );
    // A derived ceiling is contended when one of its inputs was.
    let c = with_source(
        b.clone(),
        "warm_gpu0_gbps",
        CeilingSource::derived("x", vec!["h2d/cuda-copy/gpu0/local/256MiB/s1".into()]),
    );
    let r = pair(("A", &a), ("C", &c), &o);
    assert!(r.rows[0].contended);
    assert!(render_pair(&r).contains("REGRESSION (contended)"));
}

#[test]
fn a_host_ceiling_measured_with_another_copy_kernel_is_a_change_of_method_not_a_regression() {
    let old = host_ceiling("old", Some("host-memcpy"), 58.0);
    let new = host_ceiling("new", Some("host-streaming"), 35.0);
    // Candidate measured with memcpy against a streaming baseline: 40 % lower, not a regression.
    let r = pair(("new", &new), ("old", &old), &opts("5%"));
    let row = pair_row(&r, "host_ram_same_numa_gbps");
    assert_eq!(row.verdict, Verdict::Changed);
    assert!(!row.regression);
    assert_eq!(
        row.method_change.as_deref(),
        Some("engine host-streaming → host-memcpy")
    );
    assert!(render_pair(&r).contains("changed (engine host-streaming → host-memcpy)"));
    // A baseline from before the streaming kernel names none: it was measured with memcpy
    // (this streaming figure is 40 % lower, and still no regression).
    let older = host_ceiling("older", None, 58.0);
    let r = pair(("older", &older), ("new", &new), &opts("5%"));
    let row = pair_row(&r, "host_ram_same_numa_gbps");
    assert_eq!(row.verdict, Verdict::Changed);
    assert_eq!(
        row.method_change.as_deref(),
        Some("engine host-memcpy → host-streaming")
    );
    // Same kernel on both sides: an ordinary regression.
    let worse = host_ceiling("worse", Some("host-streaming"), 30.0);
    let r = pair(("new", &new), ("worse", &worse), &opts("5%"));
    let row = pair_row(&r, "host_ram_same_numa_gbps");
    assert!(row.regression && row.method_change.is_none());
    // A fleet where one node still measured memcpy: that node differs, it is not worse.
    let a = host_ceiling("a", Some("host-streaming"), 58.0);
    let b = host_ceiling("b", Some("host-streaming"), 59.0);
    let c = host_ceiling("c", Some("host-memcpy"), 35.0);
    let f = fleet(&[("a", &a), ("b", &b), ("c", &c)], &opts("5%"));
    let row = f
        .rows
        .iter()
        .find(|r| r.key == "host_ram_same_numa_gbps")
        .unwrap();
    assert_eq!(row.outliers.len(), 1);
    assert_eq!(row.outliers[0].kind, OutlierKind::Differs);
    assert_eq!(f.regressions, 0);
}

#[test]
fn settings_that_differ_are_listed_beside_the_deltas_without_changing_verdicts() {
    let mut a = profile("a", &[("warm_gpu0_gbps", 53.4)]);
    let mut b = profile("b", &[("warm_gpu0_gbps", 50.0)]);
    a.provenance
        .environment
        .insert("nvidia.driver_version".into(), "580.159.04".into());
    b.provenance
        .environment
        .insert("nvidia.driver_version".into(), "580.159.04".into());
    b.provenance.environment.insert(
        "cuda.device_max_connections".into(),
        "32 (set by hwceiling)".into(),
    );
    let r = pair(("a", &a), ("b", &b), &opts("5%"));
    // The −6.4 % is still a regression: a new setting explains, it does not excuse.
    assert_eq!(r.regressions, 1);
    assert_eq!(r.settings.len(), 1, "{:?}", r.settings);
    let text = render_pair(&r);
    assert!(
        text.contains(
            "settings that differ (the figures may move with them):\n  \
             cuda.device_max_connections\n    a: not recorded\n    b: 32 (set by hwceiling)\n"
        ),
        "{text}"
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(
        json["settings"][0],
        serde_json::json!({
            "key": "cuda.device_max_connections",
            "values": [
                {"value": "not recorded", "nodes": ["a"]},
                {"value": "32 (set by hwceiling)", "nodes": ["b"]},
            ],
        })
    );
    // Same settings: no section, and none in the JSON.
    let r = pair(("a", &a), ("a2", &a), &opts("5%"));
    assert!(!render_pair(&r).contains("settings that differ"));
    assert!(serde_json::to_value(&r).unwrap().get("settings").is_none());
    // A fleet lists them too.
    let c = a.clone();
    let f = fleet(&[("a", &a), ("b", &b), ("c", &c)], &opts("5%"));
    assert!(
        render_fleet(&f).contains("    a, c: not recorded\n    b: 32 (set by hwceiling)\n"),
        "{}",
        render_fleet(&f)
    );
}

#[test]
fn a_damaged_ceiling_is_named_and_penalties_may_be_negative() {
    use hwc_profile::damaged;
    let ok = profile(
        "n",
        &[
            ("warm_gpu0_gbps", 53.4),
            ("warm_gpu0_cross_numa_penalty_gbps", -0.3),
        ],
    );
    assert_eq!(damaged(&ok), None);
    for (key, v) in [
        ("warm_gpu0_gbps", 0.0),
        ("warm_gpu0_gbps", 1e-320),
        ("warm_gpu0_gbps", -5.0),
        ("warm_gpu0_cross_numa_penalty_gbps", f64::NAN),
    ] {
        let p = profile("n", &[(key, v)]);
        let why = damaged(&p).unwrap_or_else(|| panic!("{key} = {v} passed"));
        assert!(why.starts_with(&format!("ceiling `{key}` is {v}")), "{why}");
    }
    // Measurements: a negative or non-finite figure, or one key twice (compare would take
    // whichever came last, so the verdict would hang on the order of the list).
    let m = |median: f64| {
        hwc_testkit::h2d_measurement("h2d/cuda-copy/gpu0/local/4MiB/s1", median, 0.5, 12)
    };
    let mut p = ok.clone();
    p.measurements.push(m(53.4));
    assert_eq!(damaged(&p), None);
    for bad in [-200.0, f64::INFINITY] {
        let mut q = ok.clone();
        let mut x = m(53.4);
        x.gbps.median = bad;
        q.measurements.push(x);
        let why = damaged(&q).unwrap_or_else(|| panic!("median {bad} passed"));
        assert!(
            why.starts_with("measurement `h2d/cuda-copy/gpu0/local/4MiB/s1` has a figure of"),
            "{why}"
        );
    }
    p.measurements.push(m(50.0));
    assert_eq!(
        damaged(&p).unwrap(),
        "measurement `h2d/cuda-copy/gpu0/local/4MiB/s1` is listed twice, which no run writes: the profile \
         is damaged"
    );
    // A link's theoretical bandwidth below zero (zero is a link that is down: it may be so).
    let link = |t: f64| hwc_model::topology::LinkTheory {
        device: "gpu0".into(),
        bdf: "0000:41:00.0".into(),
        gen: 5,
        width: 16,
        max_gen: Some(5),
        max_width: Some(16),
        theoretical_gbps: 63.0,
        max_theoretical_gbps: Some(t),
        degraded: false,
        basis: Default::default(),
        detected: None,
        min_mps_bytes: None,
        tlp_write_gbps: None,
        tlp_read_gbps: None,
    };
    let mut p = ok.clone();
    p.topology.links.push(link(0.0));
    assert_eq!(damaged(&p), None);
    p.topology.links.push(link(-5.0));
    assert!(damaged(&p)
        .unwrap()
        .contains("`gpu0` has a theoretical -5 GB/s"));
}

#[test]
fn pcie_settings_that_differ_between_nodes_are_listed() {
    use hwc_model::pcie::{Acs, PcieConfig, PortType};
    use hwc_model::topology::{PcieHop, PciePath};
    let hop = |bdf: &str, port, mps, acs: Option<Acs>| PcieHop {
        bdf: bdf.into(),
        config: PcieConfig {
            readable_bytes: 4096,
            port: Some(port),
            mps_bytes: Some(mps),
            mrrs_bytes: Some(512),
            relaxed_ordering: Some(true),
            link_current: Some(hwc_model::LinkState { gen: 5, width: 16 }),
            acs,
            ..PcieConfig::default()
        },
        iommu_domain: Some("DMA-FQ".into()),
    };
    let path = |mps_root, redirect| PciePath {
        device: "gpu0".into(),
        hops: vec![
            hop("0000:41:00.0", PortType::Endpoint, 256, None),
            hop(
                "0000:40:01.1",
                PortType::RootPort,
                mps_root,
                Some(Acs::new(0x5f, if redirect { 0x1d } else { 0x01 })),
            ),
        ],
    };
    let mut a = profile("a", &[("warm_gpu0_gbps", 53.4)]);
    let mut b = profile("b", &[("warm_gpu0_gbps", 53.3)]);
    a.topology.pcie_paths.push(path(256, false));
    b.topology.pcie_paths.push(path(128, true));
    let r = pair(("a", &a), ("b", &b), &opts("5%"));
    let keys: Vec<&str> = r.settings.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        keys,
        ["pcie.gpu0.acs_p2p_redirect", "pcie.gpu0.mps_bytes"],
        "{:?}",
        r.settings
    );
    let text = render_pair(&r);
    assert!(text.contains("on at 0000:40:01.1"), "{text}");
    // The same path on both: nothing listed.
    b.topology.pcie_paths[0] = path(256, false);
    assert!(pair(("a", &a), ("b", &b), &opts("5%")).settings.is_empty());
}
