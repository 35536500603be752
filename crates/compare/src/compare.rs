//! `hwceiling compare`: two profiles side by side (baseline → candidate, per ceiling and per
//! measurement, deltas, regressions beyond a tolerance), or a fleet of three or more (per path the
//! median and the nodes that stray from it).

use crate::method;
use crate::settings::{self, SettingDiff};
use crate::source::Source;
use crate::tolerance::Tolerance;
use hwc_model::text::fixed;
use hwc_model::Profile;
use hwc_model::{Better, Numa, PathId};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// One profile and the name it goes by in the tables.
#[derive(Debug, Clone, Copy)]
pub struct Node<'a> {
    pub name: &'a str,
    pub profile: &'a Profile,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    /// A key of the `ceilings:` map.
    Ceiling,
    /// A `measurements[].key`; its value is the median GB/s.
    Measurement,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Within the tolerance.
    Within,
    /// Better beyond the tolerance.
    Better,
    /// Worse beyond the tolerance.
    Worse,
    /// A size or count changed beyond the tolerance (no better or worse).
    Changed,
    /// In the baseline, not in the candidate.
    Missing,
    /// In the candidate only.
    New,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    pub tolerance: Tolerance,
    /// Leave the per-measurement rows out.
    pub ceilings_only: bool,
}

/// Name the nodes: their hostnames when every profile has one and they differ, else the file
/// names given.
pub fn node_names(files: &[(String, &Profile)]) -> Vec<String> {
    let hosts: Vec<Option<&str>> = files
        .iter()
        .map(|(_, p)| {
            p.platform
                .hostname
                .as_deref()
                .or(p.provenance.hostname.as_deref())
        })
        .collect();
    let distinct: BTreeSet<&str> = hosts.iter().flatten().copied().collect();
    if hosts.iter().all(Option::is_some) && distinct.len() == files.len() {
        hosts.into_iter().flatten().map(str::to_string).collect()
    } else {
        files.iter().map(|(f, _)| f.clone()).collect()
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Value {
    v: f64,
    contended: bool,
    /// Where `v` comes from: its measurement's spread and N, or derived.
    source: Source,
    /// How it was measured: its engine (`host-memcpy`, `host-streaming`, …).
    method: Option<String>,
    /// Which way it should move.
    direction: Better,
    /// Where it stands in reading order.
    rank: Rank,
}

/// A value's place in reading order: ceilings by what their records say they are (path, GPU,
/// drive count, locality), measurements in the order the run measured them (its plan's: sizes,
/// streams and thread counts ascending).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Rank {
    Ceiling(Option<PathId>, Option<String>, Option<u32>, Option<Numa>),
    Measurement(usize),
}

/// The distinct keys of `maps`, by section, then by the [`Rank`] of the first profile that has
/// each, then by key.
fn in_reading_order<'a>(
    maps: &[&'a BTreeMap<(Section, String), Value>],
) -> Vec<&'a (Section, String)> {
    let mut keys: BTreeMap<&(Section, String), &Rank> = BTreeMap::new();
    for m in maps {
        for (k, v) in m.iter() {
            keys.entry(k).or_insert(&v.rank);
        }
    }
    let mut keys: Vec<_> = keys.into_iter().collect();
    keys.sort_by(|(ka, ra), (kb, rb)| (ka.0, ra, &ka.1).cmp(&(kb.0, rb, &kb.1)));
    keys.into_iter().map(|(k, _)| k).collect()
}

/// Every comparable value of a profile: its ceilings and its measurements' medians.
fn values(p: &Profile, opts: &Options) -> BTreeMap<(Section, String), Value> {
    let mut out: BTreeMap<(Section, String), Value> = p
        .ceilings
        .iter()
        .map(|(k, &v)| {
            // By key (`ceiling_records`): a ceiling that is a contended measurement's median, or
            // was derived from one, is marked contended too.
            let (source, contended) = Source::of_ceiling(p, k).unwrap_or((Source::Unknown, false));
            let method = method::of_ceiling(p, k).map(str::to_string);
            (
                (Section::Ceiling, k.clone()),
                Value {
                    v,
                    contended,
                    source,
                    method,
                    // A ceiling without a record of what it is (added by hand): a change is
                    // reported, never judged.
                    direction: p.ceiling_meta(k).map_or(Better::Neither, |m| m.better),
                    rank: p
                        .ceiling_meta(k)
                        .map_or(Rank::Ceiling(None, None, None, None), |m| {
                            Rank::Ceiling(m.path, m.gpu.clone(), m.drives, m.numa)
                        }),
                },
            )
        })
        .collect();
    if !opts.ceilings_only {
        // The hardware's figures: not those of an engine that measures the tool itself.
        let hardware = p.measurements.iter().filter(|m| p.hardware(&m.engine));
        for (i, m) in hardware.enumerate() {
            out.insert(
                (Section::Measurement, m.key.clone()),
                Value {
                    v: m.gbps.median,
                    contended: m.contended,
                    source: Source::of_measurement(m),
                    method: method::of_measurement(m).map(str::to_string),
                    direction: measurement_direction(m),
                    rank: Rank::Measurement(i),
                },
            );
        }
    }
    out
}

/// Which way a measurement's median should move. The read-cache and power-state tests'
/// figures are latencies in disguise (of a drive's cache, of its first read after idle), over as
/// few as 3 reads: a change is reported, never a regression. Every other figure is a bandwidth.
fn measurement_direction(m: &hwc_model::Measurement) -> Better {
    use hwc_model::NvmeTest;
    match m.spec.nvme().map(|s| s.test) {
        Some(NvmeTest::ReadCache | NvmeTest::PowerStates) => Better::Neither,
        _ => Better::Higher,
    }
}

/// Relative change from `reference` to `v` (0 when both are 0).
fn relative(reference: f64, v: f64) -> f64 {
    if reference == v {
        0.0
    } else if reference == 0.0 {
        f64::INFINITY.copysign(v)
    } else {
        (v - reference) / reference.abs()
    }
}

fn judge(dir: Better, rel: f64, tol: Tolerance) -> Verdict {
    let t = tol.fraction();
    // A hair of slack so that exactly-at-tolerance deltas (5.0 % of a binary fraction) pass.
    let beyond = |x: f64| x > t + 1e-9;
    match dir {
        Better::Higher if beyond(-rel) => Verdict::Worse,
        Better::Higher if beyond(rel) => Verdict::Better,
        Better::Lower if beyond(rel) => Verdict::Worse,
        Better::Lower if beyond(-rel) => Verdict::Better,
        Better::Neither if beyond(rel.abs()) => Verdict::Changed,
        _ => Verdict::Within,
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairRow {
    pub section: Section,
    pub key: String,
    pub baseline: Option<f64>,
    /// Where the baseline's value comes from (spread and N of its measurement, or derived).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_source: Option<Source>,
    pub candidate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidate_source: Option<Source>,
    /// candidate − baseline.
    pub delta: Option<f64>,
    /// (candidate − baseline) / |baseline| × 100.
    pub delta_pct: Option<f64>,
    pub verdict: Verdict,
    /// A worse value, or a ceiling the candidate lost.
    pub regression: bool,
    /// Either side was measured while its device was busy.
    pub contended: bool,
    /// The two sides were measured differently (`engine host-memcpy → host-streaming`): a change
    /// of method, not of the machine, so never a regression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method_change: Option<String>,
    /// A better or worse verdict whose delta is no larger than the wider of the two
    /// measurements' spreads (max − min over median, the full range of each side's
    /// repetitions): the change is inside the variation of a single run, so it says little on
    /// its own. Only where both sides are measurements (a derived or unknown figure has no
    /// spread of its own). Still counted (a gate keeps failing on it), only marked.
    pub inside_spread: bool,
}

/// True when a better or worse verdict's `delta_pct` is no larger than the wider spread of
/// `a` and `b`, both measurements with a finite, non-negative spread.
fn inside_spread(
    verdict: Verdict,
    delta_pct: Option<f64>,
    a: Option<&Source>,
    b: Option<&Source>,
) -> bool {
    let spread = |s: Option<&Source>| match s {
        Some(Source::Measured { spread_pct, .. })
            if spread_pct.is_finite() && *spread_pct >= 0.0 =>
        {
            Some(*spread_pct)
        }
        _ => None,
    };
    let (Some(sa), Some(sb), Some(d)) = (spread(a), spread(b), delta_pct) else {
        return false;
    };
    // The same hair of slack as `judge` (1e-9 of a fraction), in per cent.
    matches!(verdict, Verdict::Better | Verdict::Worse)
        && d.is_finite()
        && d.abs() <= sa.max(sb) + 1e-7
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairReport {
    pub baseline: String,
    pub candidate: String,
    pub tolerance_pct: f64,
    pub rows: Vec<PairRow>,
    pub regressions: usize,
    /// Settings the figures were taken under that differ between the two (driver, CUDA
    /// hardware queues, …): shown beside the deltas, never a verdict of their own.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<SettingDiff>,
}

/// Baseline → candidate.
pub fn compare_pair(baseline: Node, candidate: Node, opts: &Options) -> PairReport {
    let a = values(baseline.profile, opts);
    let b = values(candidate.profile, opts);
    let keys = in_reading_order(&[&a, &b]);
    let rows: Vec<PairRow> = keys
        .into_iter()
        .map(|k| {
            let (section, key) = k;
            let (va, vb) = (a.get(k), b.get(k));
            let method_change = method::changed(
                va.and_then(|x| x.method.as_deref()),
                vb.and_then(|x| x.method.as_deref()),
            )
            .map(|(x, y)| format!("engine {x} → {y}"));
            let (delta, delta_pct, verdict) = match (va, vb) {
                (Some(x), Some(y)) => {
                    let rel = relative(x.v, y.v);
                    let verdict = match judge(y.direction, rel, opts.tolerance) {
                        Verdict::Better | Verdict::Worse if method_change.is_some() => {
                            Verdict::Changed
                        }
                        v => v,
                    };
                    (
                        Some(y.v - x.v),
                        rel.is_finite().then_some(rel * 100.0),
                        verdict,
                    )
                }
                (Some(_), None) => (None, None, Verdict::Missing),
                _ => (None, None, Verdict::New),
            };
            PairRow {
                section: *section,
                key: key.clone(),
                baseline: va.map(|x| x.v),
                baseline_source: va.map(|x| x.source.clone()),
                candidate: vb.map(|x| x.v),
                candidate_source: vb.map(|x| x.source.clone()),
                delta,
                delta_pct,
                inside_spread: inside_spread(
                    verdict,
                    delta_pct,
                    va.map(|x| &x.source),
                    vb.map(|x| &x.source),
                ),
                verdict,
                regression: verdict == Verdict::Worse
                    || (verdict == Verdict::Missing && *section == Section::Ceiling),
                contended: va.is_some_and(|x| x.contended) || vb.is_some_and(|x| x.contended),
                method_change,
            }
        })
        .collect();
    PairReport {
        baseline: baseline.name.to_string(),
        candidate: candidate.name.to_string(),
        tolerance_pct: opts.tolerance.fraction() * 100.0,
        regressions: rows.iter().filter(|r| r.regression).count(),
        rows,
        settings: settings::differences(&[
            (baseline.name, baseline.profile),
            (candidate.name, candidate.profile),
        ]),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutlierKind {
    /// Worse than the fleet median beyond the tolerance.
    Worse,
    /// Better than the median beyond the tolerance (a node to look at: a different part, or a
    /// measurement bug).
    Better,
    /// A size or count that differs from the median beyond the tolerance.
    Differs,
    /// Most nodes have this path; this one does not.
    Missing,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outlier {
    pub node: String,
    pub kind: OutlierKind,
    pub value: Option<f64>,
    /// Where the node's value comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    /// (value − median) / |median| × 100.
    pub delta_pct: Option<f64>,
    pub regression: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetRow {
    pub section: Section,
    pub key: String,
    /// Nodes that have this path.
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Each node's source of its value, in node order (nodes without the path left out).
    pub sources: Vec<NodeSource>,
    pub outliers: Vec<Outlier>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeSource {
    pub node: String,
    pub source: Source,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetReport {
    pub nodes: Vec<String>,
    pub tolerance_pct: f64,
    pub rows: Vec<FleetRow>,
    /// Outliers that count as regressions (worse, or a ceiling missing on one node).
    pub regressions: usize,
    /// Settings the figures were taken under that are not the same on every node.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<SettingDiff>,
}

/// The median of a non-empty slice.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Three or more profiles: per path the median, and the nodes beyond the tolerance from it.
pub fn compare_fleet(nodes: &[Node], opts: &Options) -> FleetReport {
    let per_node: Vec<BTreeMap<(Section, String), Value>> =
        nodes.iter().map(|n| values(n.profile, opts)).collect();
    let keys = in_reading_order(&per_node.iter().collect::<Vec<_>>());
    let mut rows = Vec::new();
    for k in keys {
        let (section, key) = k;
        let present: Vec<f64> = per_node
            .iter()
            .filter_map(|m| m.get(k).map(|x| x.v))
            .collect();
        let med = median(&present);
        let Some(dir) = per_node.iter().find_map(|m| m.get(k)).map(|x| x.direction) else {
            continue;
        };
        // The method most nodes used (the host RAM copy kernel): a node measured another way
        // differs from the fleet, it is not better or worse.
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for m in per_node.iter().filter_map(|m| m.get(k)?.method.as_deref()) {
            *counts.entry(m).or_default() += 1;
        }
        let usual = counts
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(m, _)| m.to_string());
        let mut outliers = Vec::new();
        for (node, m) in nodes.iter().zip(&per_node) {
            match m.get(k) {
                Some(x) if present.len() >= 2 => {
                    let rel = relative(med, x.v);
                    let other_method = x.method.is_some() && usual.is_some() && x.method != usual;
                    let kind = match judge(dir, rel, opts.tolerance) {
                        Verdict::Worse | Verdict::Better if other_method => OutlierKind::Differs,
                        Verdict::Worse => OutlierKind::Worse,
                        Verdict::Better => OutlierKind::Better,
                        Verdict::Changed => OutlierKind::Differs,
                        _ => continue,
                    };
                    outliers.push(Outlier {
                        node: node.name.to_string(),
                        kind,
                        value: Some(x.v),
                        source: Some(x.source.clone()),
                        delta_pct: rel.is_finite().then_some(rel * 100.0),
                        regression: kind == OutlierKind::Worse,
                    });
                }
                None if present.len() * 2 > nodes.len() => outliers.push(Outlier {
                    node: node.name.to_string(),
                    kind: OutlierKind::Missing,
                    value: None,
                    source: None,
                    delta_pct: None,
                    regression: *section == Section::Ceiling,
                }),
                _ => {}
            }
        }
        rows.push(FleetRow {
            section: *section,
            key: key.clone(),
            n: present.len(),
            median: med,
            min: present.iter().copied().fold(f64::INFINITY, f64::min),
            max: present.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            sources: nodes
                .iter()
                .zip(&per_node)
                .filter_map(|(node, m)| {
                    m.get(k).map(|x| NodeSource {
                        node: node.name.to_string(),
                        source: x.source.clone(),
                    })
                })
                .collect(),
            outliers,
        });
    }
    FleetReport {
        nodes: nodes.iter().map(|n| n.name.to_string()).collect(),
        tolerance_pct: opts.tolerance.fraction() * 100.0,
        regressions: rows
            .iter()
            .flat_map(|r| &r.outliers)
            .filter(|o| o.regression)
            .count(),
        rows,
        settings: settings::differences(
            &nodes
                .iter()
                .map(|n| (n.name, n.profile))
                .collect::<Vec<_>>(),
        ),
    }
}

fn num(v: Option<f64>) -> String {
    v.map(|x| fixed(x, 2)).unwrap_or_else(|| "—".into())
}

fn pct(v: Option<f64>) -> String {
    v.map(|x| format!("{x:+.1}%")).unwrap_or_default()
}

fn section_title(s: Section) -> &'static str {
    match s {
        Section::Ceiling => "ceiling",
        Section::Measurement => "measurement (median GB/s)",
    }
}

fn verdict_label(r: &PairRow) -> String {
    let v = match r.verdict {
        Verdict::Within => "ok",
        Verdict::Better => "better",
        Verdict::Worse => "REGRESSION",
        Verdict::Changed => "changed",
        Verdict::Missing if r.regression => "MISSING",
        Verdict::Missing => "missing",
        Verdict::New => "new",
    };
    let v = match &r.method_change {
        Some(m) => format!("{v} ({m})"),
        None => v.to_string(),
    };
    let v = if r.inside_spread {
        format!("{v} (inside spread)")
    } else {
        v
    };
    if r.contended {
        format!("{v} (contended)")
    } else {
        v
    }
}

fn source_cell(s: Option<&Source>) -> String {
    s.map(Source::cell).unwrap_or_default()
}

/// The baseline → candidate table. Every value shows where it comes from: its measurement's
/// spread and repetition count N, or `derived` (each derived ceiling's derivation is listed
/// after the table).
pub fn render_pair(r: &PairReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "baseline   {}", r.baseline);
    let _ = writeln!(s, "candidate  {}", r.candidate);
    let _ = writeln!(s, "tolerance  {}%", r.tolerance_pct);
    let width = key_width(r.rows.iter().map(|x| x.key.as_str()));
    let mut last = None;
    for row in &r.rows {
        if last != Some(row.section) {
            let _ = writeln!(
                s,
                "\n{:<width$} {:>10} {:>13} {:>10} {:>13} {:>10} {:>8}  verdict",
                section_title(row.section),
                "baseline",
                "spread, N",
                "candidate",
                "spread, N",
                "delta",
                "delta%"
            );
            last = Some(row.section);
        }
        let _ = writeln!(
            s,
            "{:<width$} {:>10} {:>13} {:>10} {:>13} {:>10} {:>8}  {}",
            row.key,
            num(row.baseline),
            source_cell(row.baseline_source.as_ref()),
            num(row.candidate),
            source_cell(row.candidate_source.as_ref()),
            row.delta.map(|d| format!("{d:+.2}")).unwrap_or_default(),
            pct(row.delta_pct),
            verdict_label(row)
        );
    }
    derivations(
        &mut s,
        r.rows.iter().map(|row| {
            (
                row.key.as_str(),
                vec![
                    (r.baseline.as_str(), row.baseline_source.as_ref()),
                    (r.candidate.as_str(), row.candidate_source.as_ref()),
                ],
            )
        }),
    );
    settings::render(&mut s, &r.settings);
    let noisy = r
        .rows
        .iter()
        .filter(|x| x.regression && x.inside_spread)
        .count();
    let _ = write!(s, "\n{}", summary(r.regressions));
    if noisy > 0 {
        let _ = writeln!(
            s,
            "{noisy} of them inside spread: the delta is no larger than the wider of the two \
             measurements' spreads (the full range of each side's repetitions, max - min over \
             median), so a rerun may not repeat it"
        );
    }
    s
}

/// `derived:` and one line per derived ceiling saying how it was computed; where the nodes'
/// profiles say different things, one line per wording with the nodes that give it.
fn derivations<'a>(
    s: &mut String,
    rows: impl Iterator<Item = (&'a str, Vec<(&'a str, Option<&'a Source>)>)>,
) {
    let mut lines = Vec::new();
    for (key, sources) in rows {
        let mut hows: Vec<(&str, Vec<&str>)> = Vec::new();
        for (node, how) in sources
            .into_iter()
            .filter_map(|(node, src)| Some((node, src?.how()?)))
        {
            match hows.iter_mut().find(|(h, _)| *h == how) {
                Some((_, nodes)) => nodes.push(node),
                None => hows.push((how, vec![node])),
            }
        }
        match &hows[..] {
            [] => {}
            [(how, _)] => lines.push(format!("  {key}: {how}")),
            _ => {
                for (how, nodes) in hows {
                    lines.push(format!("  {key} ({}): {how}", nodes.join(", ")));
                }
            }
        }
    }
    if !lines.is_empty() {
        let _ = writeln!(s, "\nderived:");
        for l in lines {
            let _ = writeln!(s, "{l}");
        }
    }
}

/// The key column's width: the longest key, at least 26 characters.
fn key_width<'a>(keys: impl Iterator<Item = &'a str>) -> usize {
    keys.map(str::len).max().unwrap_or(0).max(26)
}

fn summary(regressions: usize) -> String {
    if regressions == 0 {
        "no regression\n".to_string()
    } else {
        format!("{regressions} regression(s)\n")
    }
}

fn outlier_label(o: &Outlier) -> String {
    let kind = match o.kind {
        OutlierKind::Worse => "WORSE",
        OutlierKind::Better => "better",
        OutlierKind::Differs => "differs",
        OutlierKind::Missing => {
            return format!(
                "{} {}",
                o.node,
                if o.regression { "MISSING" } else { "missing" }
            )
        }
    };
    format!(
        "{} {} ({}) {} {}",
        o.node,
        num(o.value),
        source_cell(o.source.as_ref()),
        pct(o.delta_pct),
        kind
    )
}

/// The fleet's sources of one path: the widest spread and the range of N over the nodes whose
/// value is a measurement's median (`≤±1.2% N=10–12`), and how many are derived or unknown.
fn fleet_sources(sources: &[NodeSource]) -> String {
    let mut spread: Option<f64> = None;
    let (mut n_min, mut n_max) = (u32::MAX, 0);
    let (mut derived, mut unknown) = (0, 0);
    for ns in sources {
        match &ns.source {
            Source::Measured { spread_pct, n, .. } => {
                spread = Some(spread.map_or(*spread_pct, |s| s.max(*spread_pct)));
                n_min = n_min.min(*n);
                n_max = n_max.max(*n);
            }
            Source::Derived { .. } => derived += 1,
            Source::Unknown => unknown += 1,
        }
    }
    let mut parts = Vec::new();
    if let Some(sp) = spread {
        let n = if n_min == n_max {
            format!("N={n_min}")
        } else {
            format!("N={n_min}–{n_max}")
        };
        parts.push(format!("≤±{}% {n}", fixed(sp, 1)));
    }
    let all = sources.len();
    match derived {
        0 => {}
        d if d == all => parts.push("derived".into()),
        d => parts.push(format!("{d} derived")),
    }
    match unknown {
        0 => {}
        u if u == all => parts.push("unknown".into()),
        u => parts.push(format!("{u} unknown")),
    }
    parts.join(", ")
}

/// The fleet table: per path n, median, min, max, the nodes' sources (widest spread and N, or
/// derived) and the outliers with their own spread and N.
pub fn render_fleet(r: &FleetReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "fleet      {} nodes: {}",
        r.nodes.len(),
        r.nodes.join(", ")
    );
    let _ = writeln!(s, "tolerance  {}% from the median", r.tolerance_pct);
    let width = key_width(r.rows.iter().map(|x| x.key.as_str()));
    let cells: Vec<String> = r.rows.iter().map(|x| fleet_sources(&x.sources)).collect();
    let sw = cells
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(0)
        .max("spread, N".len());
    let mut last = None;
    for (row, cell) in r.rows.iter().zip(&cells) {
        if last != Some(row.section) {
            let _ = writeln!(
                s,
                "\n{:<width$} {:>5} {:>10} {:>10} {:>10}  {:<sw$}  outliers",
                section_title(row.section),
                "n",
                "median",
                "min",
                "max",
                "spread, N"
            );
            last = Some(row.section);
        }
        let outliers: Vec<String> = row.outliers.iter().map(outlier_label).collect();
        let line = format!(
            "{:<width$} {:>5} {:>10.2} {:>10.2} {:>10.2}  {}{}  {}",
            row.key,
            format!("{}/{}", row.n, r.nodes.len()),
            row.median,
            row.min,
            row.max,
            cell,
            " ".repeat(sw - cell.chars().count()),
            outliers.join("; ")
        );
        let _ = writeln!(s, "{}", line.trim_end());
    }
    derivations(
        &mut s,
        r.rows.iter().map(|row| {
            (
                row.key.as_str(),
                row.sources
                    .iter()
                    .map(|ns| (ns.node.as_str(), Some(&ns.source)))
                    .collect(),
            )
        }),
    );
    settings::render(&mut s, &r.settings);
    let _ = write!(s, "\n{}", summary(r.regressions));
    s
}
