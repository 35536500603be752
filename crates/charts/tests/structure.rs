//! The charts of the fixture results, by structure: which charts are made, and in each the
//! count of each SVG element and every text it writes (titles, axis titles and ticks, legend,
//! the theoretical line's label, the knee), so a lost axis, legend or whisker shows in the
//! snapshot without pinning the SVG's bytes.

mod common;

use hwc_charts::sweep::{self, Sweep};
use hwc_charts::{duplex, Chart};
use std::collections::BTreeMap;

/// Each element's tag and count, and the texts in document order.
fn structure(svg: &str) -> (BTreeMap<String, usize>, Vec<String>) {
    let doc = roxmltree::Document::parse(svg).expect("well-formed SVG");
    let mut tags = BTreeMap::new();
    let mut texts = Vec::new();
    for n in doc.descendants().filter(|n| n.is_element()) {
        *tags.entry(n.tag_name().name().to_string()).or_insert(0) += 1;
        if n.tag_name().name() == "text" {
            texts.push(n.text().unwrap_or_default().trim().to_string());
        }
    }
    (tags, texts)
}

fn summary(charts: &[Chart]) -> String {
    let mut out = String::new();
    for c in charts {
        let (tags, texts) = structure(&c.svg);
        let section = c.path.map_or("platform".to_string(), |p| p.to_string());
        out.push_str(&format!("## {} ({section}): {}\n", c.file_name(), c.title));
        let counts: Vec<String> = tags.iter().map(|(t, n)| format!("{t}={n}")).collect();
        out.push_str(&format!("elements: {}\n", counts.join(" ")));
        out.push_str(&format!("texts: {}\n\n", texts.join(" | ")));
    }
    out
}

#[test]
fn h200_charts_structure() {
    let charts = hwc_charts::all(&common::h200_with_drives()).unwrap();
    insta::assert_snapshot!(summary(&charts));
}

/// A sweep's points each get one whisker (three lines and a dot), whatever else is drawn.
#[test]
fn every_point_has_one_whisker_and_every_series_a_knee() {
    let p = common::h200_with_drives();
    let sweeps = sweep::sweeps(&p);
    assert!(!sweeps.is_empty());
    for s in &sweeps {
        let points: usize = s.series.iter().map(|x| x.points.len()).sum();
        let svg = sweep::svg(s).unwrap();
        let (tags, _) = structure(&svg);
        // Each whisker's dot is a circle; nothing else in a sweep is.
        assert_eq!(
            tags.get("circle").copied().unwrap_or(0),
            points,
            "{}",
            s.name
        );
        // Each series' knee is a triangle (a polygon); nothing else is.
        let knees = s.series.iter().filter(|x| x.knee().is_some()).count();
        assert_eq!(
            tags.get("polygon").copied().unwrap_or(0),
            knees,
            "{}",
            s.name
        );
        assert_eq!(knees, s.series.len(), "{}", s.name);
    }
}

#[test]
fn the_theory_line_is_the_link_s_and_the_knee_the_first_size_within_five_per_cent() {
    let p = common::h200_with_drives();
    let sweeps = sweep::sweeps(&p);
    let get = |name: &str| -> &Sweep {
        sweeps
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no chart {name} in {:?}", names(&sweeps)))
    };
    let h2d = get("h2d-gpu0-pinned-node0");
    let t = h2d.theory.as_ref().expect("the GPU's link");
    assert!(
        (t.gbps - 63.015).abs() < 0.01 && t.label == "PCIe Gen5 x16 (gpu0)",
        "{t:?}"
    );
    let two = get("nvme-read-2-drives");
    let t = two.theory.as_ref().expect("the drives' links");
    assert!(
        (t.gbps - 2.0 * 7.877).abs() < 0.01 && t.label == "2 × PCIe Gen4 x4",
        "{t:?}"
    );
    for s in &two.series {
        let k = s.knee().unwrap();
        let peak = s.points.iter().map(|p| p.median_gbps).fold(0.0, f64::max);
        assert!(k.median_gbps >= 0.95 * peak);
        assert!(s
            .points
            .iter()
            .filter(|p| p.size_bytes < k.size_bytes)
            .all(|p| p.median_gbps < 0.95 * peak));
    }
    // D2D crosses no PCIe link: no theoretical line.
    assert!(get("d2d-gpu0").theory.is_none());
}

fn names(s: &[Sweep]) -> Vec<&str> {
    s.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn duplex_bars_pair_each_direction_with_the_same_copy_alone() {
    let p = common::h200();
    let d = duplex::charts(&p);
    assert_eq!(d.len(), 1, "one GPU");
    let g = &d[0].groups;
    assert!(!g.is_empty());
    for group in g {
        assert!(group.bars.iter().all(Option::is_some), "{group:?}");
    }
    // One whisker (a dot and three lines) per bar, one penalty label per duplex bar.
    let (tags, texts) = structure(&duplex::svg(&d[0]).unwrap());
    let bars: usize = g.iter().map(|x| x.bars.iter().flatten().count()).sum();
    assert_eq!(tags["circle"], bars);
    let penalties = texts.iter().filter(|t| t.ends_with(" %")).count();
    assert_eq!(penalties, g.len() * 2);
}

#[test]
fn a_profile_without_measurements_or_devices_makes_no_chart() {
    let mut p = common::h200();
    p.measurements.clear();
    p.gpus.clear();
    p.platform.numa.clear();
    assert!(hwc_charts::all(&p).unwrap().is_empty());
}

/// A hostile hostname or model (markup, control characters) is drawn as text: every chart is
/// still well-formed SVG and shows the string's visible escape.
#[test]
fn hostile_strings_stay_text() {
    let mut p = common::h200_with_drives();
    let evil = "h\u{1b}]0;x\u{7}\u{0}<script>alert(1)</script>&";
    p.platform.hostname = Some(evil.into());
    for g in p.gpus.values_mut() {
        g.model = Some(evil.into());
    }
    let charts = hwc_charts::all(&p).unwrap();
    assert!(!charts.is_empty());
    for c in &charts {
        let (tags, texts) = structure(&c.svg);
        assert!(!tags.contains_key("script"), "{}", c.file_name());
        assert!(!c.svg.contains('\u{1b}') && !c.svg.contains('\u{0}'));
        if c.title.contains("h\\e") {
            assert!(
                texts.iter().any(|t| t.contains("<script>")),
                "{}",
                c.file_name()
            );
        }
    }
}

/// The fixture's figures, moved onto `engine`, declared as the run declares it.
fn by_engine(
    mut p: hwc_model::Profile,
    engine: &'static str,
    hardware: bool,
) -> hwc_model::Profile {
    let id = hwc_model::EngineId::new(engine);
    for m in &mut p.measurements {
        m.engine = id.clone();
    }
    p.engines = vec![hwc_model::EngineDecl {
        id,
        title: "an engine".into(),
        paths: hwc_model::PathId::ALL.to_vec(),
        cells: vec![],
        needs: Default::default(),
        hardware,
        default_on: true,
    }];
    p
}

#[test]
fn a_tool_measuring_engine_s_figures_are_not_charted() {
    let p = by_engine(common::h200(), "null", false);
    let charts = hwc_charts::all(&p).unwrap();
    let names: Vec<String> = charts.iter().map(|c| c.file_name()).collect();
    assert_eq!(names, ["topology.svg"], "only the machine's picture");
    let p = by_engine(common::h200(), "cuda-copy", true);
    assert!(hwc_charts::all(&p).unwrap().len() > 1);
}

/// NVMe → GPU: the theoretical line is the lower of the GPU's link and the drives' together.
#[test]
fn a_gds_sweep_is_bounded_by_the_lower_of_the_gpu_and_the_drives() {
    use hwc_model::spec::{GdsRoute, GdsSpec};
    let mut p = common::h200_with_drives();
    let template = p
        .measurements
        .iter()
        .find(|m| m.path == hwc_model::PathId::NvmeRead)
        .unwrap()
        .clone();
    let drives: Vec<String> = p.nvme.drives.iter().filter_map(|d| d.bdf.clone()).collect();
    for (route, size) in [
        (GdsRoute::Cufile, 1u64 << 20),
        (GdsRoute::PosixBounce, 1 << 20),
    ] {
        let mut m = template.clone();
        m.path = hwc_model::PathId::Gds;
        m.key = format!("gds/{route:?}/{size}");
        m.spec = hwc_model::Spec::Gds(GdsSpec {
            gpu: "gpu0".into(),
            drives: drives.clone(),
            target: false,
            block_bytes: size,
            queue_depth: 8,
            route,
            write: false,
            host_node: Some(0),
        });
        p.measurements.push(m);
    }
    let sweeps = sweep::sweeps(&p);
    let gds = sweeps
        .iter()
        .find(|s| s.path == hwc_model::PathId::Gds)
        .expect("a GDS chart");
    assert_eq!(gds.name, "gds-read-gpu0-2-drives");
    let t = gds.theory.as_ref().unwrap();
    // Two Gen4 x4 drives (15.75 GB/s) under the GPU's Gen5 x16 (63.0).
    assert!((t.gbps - 2.0 * 7.877).abs() < 0.01, "{t:?}");
    let labels: Vec<&str> = gds.series.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["cuFile, QD8", "POSIX bounce, QD8"]);
    assert!(hwc_charts::sweep::svg(gds)
        .unwrap()
        .contains("theoretical: 2 × PCIe Gen4 x4"));
}
