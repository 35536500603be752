//! Renders a profile as the spec's markdown report. Pure: `render(&Profile) -> String`, so
//! `hwceiling report PROFILE.yaml` re-renders exactly what `profile` wrote.
//!
//! Every number printed comes from the profile's measurements, with its spread and count close
//! by; a path that did not run shows why (its waiver), never a number.
//!
//! Every string of the profile (a hostname, a drive's model, a note, a key) is escaped for
//! markdown once, before rendering ([`hwc_model::text::escape_markdown`]), so a hostile or odd
//! one cannot break a table or a heading, or reach a terminal as an escape sequence.

use hwc_model::profile::HostRamPair;
use hwc_model::text::fixed;
use hwc_model::topology::Relation;
use hwc_model::{size_label, EngineId, Measurement, PathId, Profile, Spec, Stats, Waiver};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

mod nvme;
mod paths;
mod state;
mod summary;

/// Render the whole report.
pub fn render(p: &Profile) -> String {
    render_with_charts(p, &[])
}

/// A chart written beside the report, linked from the section it illustrates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartLink {
    /// The path whose section links it; `None`: the platform section (the topology).
    pub path: Option<PathId>,
    /// Its name, the link's text: `h2d-gpu0-pinned-node0` (its caption says what it shows).
    pub name: String,
    /// Where it is, relative to the report: `charts-<date>/h2d-gpu0-pinned-node0.svg`.
    pub href: String,
}

/// Render the whole report, each of `charts` linked, one line each, from its section. A link
/// whose address is not a plain relative path (letters, digits, `-`, `_`, `.`, `/`) is left out.
pub fn render_with_charts(p: &Profile, charts: &[ChartLink]) -> String {
    use hwc_model::text::{escape_control, escape_markdown, escape_strings};
    let charts: Vec<ChartLink> = charts
        .iter()
        .filter(|c| plain_href(&c.href))
        .map(|c| ChartLink {
            name: escape_markdown(&escape_control(&c.name)).into_owned(),
            ..c.clone()
        })
        .collect();
    match escape_strings(p, escape_markdown) {
        Ok(safe) => render_escaped(&safe, &charts),
        // Not reached for a profile hwceiling reads (its types all round-trip); should one
        // not, no control character still reaches the reader.
        Err(_) => render_escaped(p, &charts)
            .split('\n')
            .map(|l| escape_control(l).into_owned() + "\n")
            .collect(),
    }
}

fn plain_href(href: &str) -> bool {
    !href.is_empty()
        && !href.starts_with('/')
        && !href.split('/').any(|part| part.is_empty() || part == "..")
        && href
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

/// The charts of `path` (`None`: the topology) on one line, each link named by its chart's
/// name (what it shows is its caption), then a blank line; nothing when none.
pub(crate) fn chart_links(out: &mut String, charts: &[ChartLink], path: Option<PathId>) {
    let links: Vec<String> = charts
        .iter()
        .filter(|c| c.path == path)
        .map(|c| format!("[{}]({})", c.name, c.href))
        .collect();
    if !links.is_empty() {
        let _ = writeln!(out, "Charts: {}\n", links.join(" · "));
    }
}

/// The answer first (the spec's summary and observations, sections 7 and 8), then the
/// machine and the per-path tables (sections 1–6, numbered as the spec numbers them), then the
/// evidence (the appendices).
fn render_escaped(p: &Profile, charts: &[ChartLink]) -> String {
    let mut out = String::new();
    header(&mut out, p);
    summary::render(&mut out, p);
    observations(&mut out, p);
    platform(&mut out, p);
    chart_links(&mut out, charts, None);
    cpu_features(&mut out, p);
    nvme_inspection(&mut out, p);
    pcie_table(&mut out, p);
    paths::render(&mut out, p, charts);
    engines(&mut out, p);
    routing(&mut out, p);
    appendix(&mut out, p);
    out
}

/// The engines of `ms`, in the order the run declared them (then any it did not declare, in the
/// order they first appear).
pub(crate) fn engines_of(p: &Profile, ms: &[&Measurement]) -> Vec<EngineId> {
    let mut out: Vec<EngineId> = p
        .engines
        .iter()
        .map(|e| e.id.clone())
        .filter(|id| ms.iter().any(|m| &m.engine == id))
        .collect();
    for m in ms {
        if !out.contains(&m.engine) {
            out.push(m.engine.clone());
        }
    }
    out
}

/// Engines side by side: every cell of a path that more than one engine measured (the same
/// spec), one row per cell and one column per engine, and which one the path's ceiling takes.
/// Nothing where no cell was measured twice. Host RAM's are not repeated here: Path 7 shows
/// each engine's table, one above the other, and names the best.
fn engines(out: &mut String, p: &Profile) {
    let mut tables: Vec<(PathId, Vec<EngineId>, Vec<Vec<String>>)> = Vec::new();
    for path in PathId::ALL.into_iter().filter(|&p| p != PathId::HostRam) {
        let ms: Vec<&Measurement> = p.measurements_of(path).collect();
        let mut cells: Vec<(&Spec, Vec<&Measurement>)> = Vec::new();
        for m in &ms {
            match cells.iter_mut().find(|(s, _)| *s == &m.spec) {
                Some((_, v)) => v.push(m),
                None => cells.push((&m.spec, vec![m])),
            }
        }
        let shared: Vec<&Measurement> = cells
            .iter()
            .filter(|(_, g)| g.len() > 1)
            .flat_map(|(_, g)| g.iter().copied())
            .collect();
        if shared.is_empty() {
            continue;
        }
        let columns = engines_of(p, &shared);
        let mut rows = Vec::new();
        for (_, group) in cells.iter().filter(|(_, g)| g.len() > 1) {
            let best = group
                .iter()
                .filter(|m| p.hardware(&m.engine))
                .max_by(|a, b| a.gbps.median.total_cmp(&b.gbps.median));
            let mut row = vec![format!("`{}`", group[0].cell)];
            for engine in &columns {
                row.push(match group.iter().find(|m| &m.engine == engine) {
                    Some(m) => {
                        let lead = if best.is_some_and(|b| b.key == m.key) {
                            " **best**"
                        } else {
                            ""
                        };
                        format!("{}, N={}{lead}", cell(&m.gbps), m.gbps.n)
                    }
                    None => "—".into(),
                });
            }
            rows.push(row);
        }
        tables.push((path, columns, rows));
    }
    if tables.is_empty() {
        return;
    }
    // The engines are named in the report's header.
    out.push_str(
        "## Engines side by side\n\n\
         Cells of a path that several engines measured in this run (median GB/s ± spread); a \
         ceiling takes the best engine's figure.\n\n",
    );
    for (path, columns, rows) in tables {
        let heads: Vec<String> = columns.iter().map(|e| format!("`{e}`")).collect();
        let mut head = vec![format!("{path} cell")];
        head.extend(heads);
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        table(out, &head, &rows);
    }
}

/// `55.49`.
pub(crate) fn gbps(v: f64) -> String {
    fixed(v, 2)
}

/// `55.49 ±0.4 %`.
pub(crate) fn cell(s: &Stats) -> String {
    format!("{} ±{} %", gbps(s.median), fixed(s.spread_pct, 1))
}

/// A waiver in one line: `scope: reason — hint`.
pub fn waiver_text(w: &Waiver) -> String {
    let scope = waiver_scope(w);
    // Waivers are written so that the hint says what the reason does not (the plan's rule).
    match &w.hint {
        Some(hint) => format!("{scope}{} — {hint}", w.reason),
        None => format!("{scope}{}", w.reason),
    }
}

/// What a waiver covers, as its text begins: `engine, scope: `, `engine e: `, `scope: ` or
/// nothing.
fn waiver_scope(w: &Waiver) -> String {
    match (&w.engine, &w.scope) {
        (Some(e), Some(s)) => format!("{e}, {s}: "),
        (Some(e), None) => format!("engine {e}: "),
        (None, Some(s)) => format!("{s}: "),
        (None, None) => String::new(),
    }
}

/// A waiver as the report's sections say it: its scope and reason, and where its remedy is
/// (§8 lists each remedy once, with every path it would measure).
pub(crate) fn waiver_line(w: &Waiver) -> String {
    let scope = waiver_scope(w);
    let remedy = if w.hint.is_some() {
        " (how to measure it: §8)"
    } else {
        ""
    };
    format!("{scope}{}{remedy}", w.reason)
}

/// Waivers of a path as a bullet list (nothing when none).
pub(crate) fn waivers(out: &mut String, p: &Profile, path: PathId) {
    for w in p.waivers_of(path) {
        let _ = writeln!(out, "- **Waived** — {}", waiver_line(w));
    }
}

pub(crate) fn table(out: &mut String, head: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", head.join(" | "));
    let _ = writeln!(
        out,
        "|{}|",
        head.iter().map(|_| "---").collect::<Vec<_>>().join("|")
    );
    for r in rows {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
    out.push('\n');
}

/// As [`table`], without the spaces around each cell (the same table once rendered).
fn compact_table(out: &mut String, head: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(out, "|{}|", head.join("|"));
    let _ = writeln!(out, "|{}|", vec!["---"; head.len()].join("|"));
    for r in rows {
        let _ = writeln!(out, "|{}|", r.join("|"));
    }
    out.push('\n');
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map(T::to_string).unwrap_or_else(|| "—".into())
}

fn header(out: &mut String, p: &Profile) {
    let pv = &p.provenance;
    let host = p.platform.hostname.as_deref().unwrap_or("unknown host");
    let _ = writeln!(out, "# Hardware ceiling — {host} — {}\n", pv.date);
    let _ = writeln!(
        out,
        "Generated by {} {} (git {}); command: `{}` (start and end: Provenance).\n",
        pv.tool, pv.version, pv.git_revision, pv.command_line
    );
    out.push_str(
        "Units: GB/s = 10⁹ bytes/s. A copy of N bytes counts N bytes (bytes copied, not read + \
         written). Every figure is the **median** of N timed repetitions, after the first (cold) \
         repetition (for GPU copies, the first batch of copies), which is kept apart and labelled \
         cold, and the case's warm-up, if any; `±` is the spread (max − min) / median. \
         A path that could not run here is marked **waived** with its reason — never a number.\n\n",
    );
    // The engines whose figures this report shows, each by its declared title; one that
    // measures the tool itself is said to, since its figures are never ceilings.
    let mut measured: Vec<&hwc_model::EngineId> = Vec::new();
    for m in &p.measurements {
        if !measured.contains(&&m.engine) {
            measured.push(&m.engine);
        }
    }
    if !measured.is_empty() {
        let named: Vec<String> = measured
            .iter()
            .map(|id| {
                let tool = if p.hardware(id) {
                    ""
                } else {
                    " (**measures the tool itself, not the hardware: its figures are never ceilings**)"
                };
                format!("`{id}` — {}{tool}", p.engine_title(id))
            })
            .collect();
        let _ = writeln!(out, "Engines: {}.\n", named.join("; "));
    }
    if pv.interrupted {
        out.push_str(
            "> **This run was interrupted**: only the cases that finished are reported.\n\n",
        );
    }
    for w in &p.warnings {
        let _ = writeln!(out, "> **Warning:** {w}");
    }
    if !p.warnings.is_empty() {
        out.push('\n');
    }
}

fn platform(out: &mut String, p: &Profile) {
    let pl = &p.platform;
    out.push_str("## 1. Platform\n\n");
    let caches = pl
        .caches
        .iter()
        .map(|c| {
            let inst = c.instances.map(|i| format!(" ×{i}")).unwrap_or_default();
            format!("L{} {} {}{inst}", c.level, c.kind, size_label(c.size_bytes))
        })
        .collect::<Vec<_>>()
        .join(", ");
    let rows = vec![
        vec!["Hostname".into(), opt(&pl.hostname)],
        vec!["CPU".into(), opt(&pl.cpu)],
        vec![
            "Sockets / cores / threads".into(),
            format!("{} / {} / {}", opt(&pl.sockets), opt(&pl.cores), pl.threads),
        ],
        vec![
            "Caches".into(),
            if caches.is_empty() {
                "—".into()
            } else {
                caches
            },
        ],
        vec![
            "Memory".into(),
            pl.memory_bytes.map(gib_label).unwrap_or_else(|| "—".into()),
        ],
        vec!["NUMA nodes".into(), pl.numa_nodes.to_string()],
        vec!["Kernel".into(), opt(&pl.kernel)],
        vec![
            "IOMMU".into(),
            match (pl.iommu_present, pl.iommu_options.is_empty()) {
                (Some(on), true) => (if on { "on" } else { "off" }).into(),
                (Some(on), false) => format!(
                    "{} (kernel command line: `{}`)",
                    if on { "on" } else { "off" },
                    pl.iommu_options.join(" ")
                ),
                (None, _) => "—".into(),
            },
        ],
        vec!["OS".into(), opt(&pl.os)],
    ];
    table(out, &["Item", "Value"], &rows);
    if !pl.numa.is_empty() {
        let rows: Vec<Vec<String>> = pl
            .numa
            .iter()
            .map(|n| {
                vec![
                    n.id.to_string(),
                    if n.memory_only {
                        "memory only".into()
                    } else {
                        hwc_model::cpulist::format(&n.cpus)
                    },
                    n.memory_bytes.map(gib_label).unwrap_or_else(|| "—".into()),
                    n.distances
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(" "),
                ]
            })
            .collect();
        table(out, &["Node", "CPUs", "Memory", "Distances"], &rows);
        if let Some(note) = node_memory_note(&pl.numa, pl.memory_bytes) {
            let _ = writeln!(out, "{note}\n");
        }
    }
    topology_diagram(out, p);
}

/// A line under the node table when the nodes' memory (each node's `meminfo`) does not add up
/// to the machine's (`/proc/meminfo`) within 10 %, as on the H200 VM (node 0: 4.3 of 125.9 GiB);
/// both are read from the kernel, neither is measured.
fn node_memory_note(nodes: &[hwc_model::topology::NumaNode], total: Option<u64>) -> Option<String> {
    let total = total?;
    let known: Vec<u64> = nodes.iter().filter_map(|n| n.memory_bytes).collect();
    if known.len() != nodes.len() || total == 0 {
        return None;
    }
    let sum: u64 = known.iter().sum();
    let ratio = sum as f64 / total as f64;
    if (0.9..=1.1).contains(&ratio) {
        return None;
    }
    Some(format!(
        "The nodes' memory (`MemTotal` of each node's `meminfo`) adds up to {}, the \
         machine's (`/proc/meminfo`) to {}. Both are as the kernel reports them; the Memory \
         column is each node's own figure.",
        gib_label(sum),
        gib_label(total)
    ))
}

/// `24.0 GiB`.
fn gib_label(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn topology_diagram(out: &mut String, p: &Profile) {
    // Root complex → the GPUs and drives on it.
    let mut roots: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, g) in &p.gpus {
        let link = p
            .topology
            .links
            .iter()
            .find(|l| &l.device == name)
            .map(|l| format!("Gen{} x{}", l.gen, l.width))
            .unwrap_or_default();
        let line = format!(
            "{} {name} {} {link} (node {})",
            g.pci_bdf,
            g.model.as_deref().unwrap_or("GPU"),
            opt(&g.numa_node)
        );
        roots.entry(root_label(&g.root)).or_default().push(line);
    }
    for d in &p.nvme.drives {
        let bdf = d.bdf.clone().unwrap_or_else(|| "?".into());
        let line = format!(
            "{bdf} {} {} (node {})",
            d.name,
            d.model.as_deref().unwrap_or("NVMe"),
            opt(&d.numa_node)
        );
        roots.entry(root_label(&d.root)).or_default().push(line);
    }
    out.push_str("### Topology\n\n```text\n");
    if roots.is_empty() {
        out.push_str("(no GPU or NVMe drive detected)\n");
    }
    for (root, devices) in &roots {
        let _ = writeln!(out, "root complex {root}");
        for (i, d) in devices.iter().enumerate() {
            let branch = if i + 1 == devices.len() {
                "└──"
            } else {
                "├──"
            };
            let _ = writeln!(out, "{branch} {d}");
        }
    }
    out.push_str("```\n\n");
}

fn root_label(root: &Option<String>) -> String {
    root.clone().unwrap_or_else(|| "unknown".into())
}

fn cpu_features(out: &mut String, p: &Profile) {
    let f = &p.cpu_features;
    out.push_str("## 2. CPU features\n\n```text\n");
    let yes = |b: bool| if b { "yes" } else { "no" };
    let _ = writeln!(out, "vendor            {}", opt(&f.vendor));
    let _ = writeln!(
        out,
        "family / model    {} / {}",
        f.family
            .map(|x| format!("{x:#x}"))
            .unwrap_or_else(|| "—".into()),
        f.model
            .map(|x| format!("{x:#x}"))
            .unwrap_or_else(|| "—".into())
    );
    let _ = writeln!(out, "zen               {}", f.zen_label);
    let _ = writeln!(out, "avx512f           {}", yes(f.has_avx512f));
    let _ = writeln!(out, "avx512bw          {}", yes(f.has_avx512bw));
    let _ = writeln!(out, "avx2              {}", yes(f.has_avx2));
    let _ = writeln!(out, "sse4_2            {}", yes(f.has_sse4_2));
    let _ = writeln!(out, "pclmulqdq         {}", yes(f.has_pclmulqdq));
    let _ = writeln!(out, "aes               {}", yes(f.has_aes));
    let basis = match f.xxh3_tier_basis {
        hwc_model::TierBasis::Measured => "measured",
        hwc_model::TierBasis::Inferred => "inferred from the flags",
    };
    let _ = writeln!(out, "xxh3 tier         {} ({basis})", f.xxh3_tier);
    if let Some(e) = &f.xxh3_throughput_estimate {
        let _ = writeln!(out, "xxh3 throughput   {e}");
    }
    let _ = writeln!(out, "recommended hash  {}", f.certus_recommended_hash);
    out.push_str(
        "```

",
    );
    xxh3_table(out, p);
}

/// The XXH3 figures (every path, variant, block size and thread count), or why there are none.
fn xxh3_table(out: &mut String, p: &Profile) {
    let f = &p.cpu_features;
    if f.xxh3_throughput_gbps.is_empty() {
        out.push_str(
            "The XXH3 tier is the widest code path the CPU flags allow: the hash path did not \
             run, so no throughput is claimed for it (hwceiling prints only what it measured).\n\n",
        );
        waivers(out, p, PathId::Xxh3);
        if p.waivers_of(PathId::Xxh3).next().is_some() {
            out.push('\n');
        }
        return;
    }
    out.push_str(
        "XXH3 throughput, bytes hashed per second, one build per SIMD code path. A block `+NB` \
         starts N bytes past a page boundary: `+0B` gives the tier, `+16B` lies where \
         `xxhsum -b`'s block does (off a 64-byte line), to compare with it.\n\n",
    );
    if let Some(rule) = &f.certus_recommended_hash_rule {
        let _ = writeln!(
            out,
            "Recommended hash: **{}**. Rule: {rule}.\n",
            f.certus_recommended_hash
        );
    }
    let ms: Vec<&Measurement> = p.measurements_of(PathId::Xxh3).collect();
    paths::reps_line(out, &ms);
    xxh3_pivots(out, &f.xxh3_throughput_gbps);
    let measured: BTreeSet<hwc_model::SimdPath> =
        f.xxh3_throughput_gbps.iter().map(|x| x.path).collect();
    let missing: Vec<&str> = f
        .xxh3_paths
        .iter()
        .filter(|p| !measured.contains(p))
        .map(|p| p.label())
        .collect();
    if !missing.is_empty() {
        let _ = writeln!(
            out,
            "Not measured, though the flags allow them: {} (see the waivers and failures).\n",
            missing.join(", ")
        );
    }
    waivers(out, p, PathId::Xxh3);
    if p.waivers_of(PathId::Xxh3).next().is_some() {
        out.push('\n');
    }
}

/// The XXH3 figures as two pivots: every path and variant on 1 thread by block (the rows of
/// the comparison between paths), then the thread sweep by block and variant (the widest path's,
/// the only one swept).
fn xxh3_pivots(out: &mut String, figures: &[hwc_model::Xxh3Figure]) {
    let cell = |x: &hwc_model::Xxh3Figure| {
        format!("{} ±{} %", gbps(x.gbps.median), fixed(x.gbps.spread_pct, 1))
    };
    let block = |x: &hwc_model::Xxh3Figure| {
        format!(
            "{}{}",
            hwc_model::xxh3::block_label(x.size_bytes, x.offset_bytes),
            if x.cache_resident { "" } else { " (memory)" }
        )
    };
    // A block: its size and where it starts past a page boundary.
    let at = |x: &hwc_model::Xxh3Figure| (x.size_bytes, x.offset_bytes);
    // Blocks in size order, each once.
    let blocks = |pick: &dyn Fn(&&hwc_model::Xxh3Figure) -> bool| {
        let mut v: Vec<((u64, Option<u32>), String)> = figures
            .iter()
            .filter(pick)
            .map(|x| (at(x), block(x)))
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let one = blocks(&|x| x.threads == 1);
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut seen = Vec::new();
    for x in figures.iter().filter(|x| x.threads == 1) {
        if seen.contains(&(x.path, x.variant)) {
            continue;
        }
        seen.push((x.path, x.variant));
        let mut row = vec![x.path.label().to_string(), x.variant.label().to_string()];
        for (size, _) in &one {
            row.push(
                figures
                    .iter()
                    .find(|y| {
                        y.threads == 1 && (y.path, y.variant, at(y)) == (x.path, x.variant, *size)
                    })
                    .map_or_else(|| "—".into(), cell),
            );
        }
        rows.push(row);
    }
    let mut head = vec!["path".to_string(), "hash".to_string()];
    head.extend(one.iter().map(|(_, b)| format!("{b}, 1 thread")));
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    table(out, &head, &rows);
    // The sweep: the paths with more than one thread count.
    let swept: BTreeSet<hwc_model::SimdPath> = figures
        .iter()
        .filter(|x| x.threads > 1)
        .map(|x| x.path)
        .collect();
    for path in swept {
        // Every block and variant of which a figure took more than one thread (the 1-thread
        // figures of the others are in the table above).
        let swept_blocks: BTreeSet<(hwc_model::HashVariant, (u64, Option<u32>))> = figures
            .iter()
            .filter(|x| x.path == path && x.threads > 1)
            .map(|x| (x.variant, at(x)))
            .collect();
        let mine: Vec<&hwc_model::Xxh3Figure> = figures
            .iter()
            .filter(|x| x.path == path && swept_blocks.contains(&(x.variant, at(x))))
            .collect();
        let threads: BTreeSet<u32> = mine.iter().map(|x| x.threads).collect();
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut seen = Vec::new();
        for x in &mine {
            if seen.contains(&(x.variant, at(x))) {
                continue;
            }
            seen.push((x.variant, at(x)));
            let mut row = vec![x.variant.label().to_string(), block(x)];
            for t in &threads {
                row.push(
                    mine.iter()
                        .find(|y| (y.variant, at(y), y.threads) == (x.variant, at(x), *t))
                        .map_or_else(|| "—".into(), |y| cell(y)),
                );
            }
            rows.push(row);
        }
        let _ = writeln!(out, "{path} over the thread sweep:\n");
        let mut head = vec!["hash".to_string(), "block".to_string()];
        head.extend(threads.iter().map(|t| format!("{t} thr")));
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        table(out, &head, &rows);
    }
}

fn nvme_inspection(out: &mut String, p: &Profile) {
    out.push_str("## 3. NVMe device inspection\n\n");
    if p.nvme.drives.is_empty() {
        out.push_str("No NVMe drives were detected on this machine.\n\n");
        nvme::long_tests(out, p);
        return;
    }
    let rows: Vec<Vec<String>> = p
        .nvme
        .drives
        .iter()
        .map(|d| {
            vec![
                d.name.clone(),
                opt(&d.bdf),
                opt(&d.model),
                opt(&d.serial.as_deref().map(str::trim)),
                opt(&d.firmware_rev),
                d.capacity_tb
                    .map(|t| fixed(t, 3))
                    .unwrap_or_else(|| "—".into()),
                opt(&d.block_size),
                match (&d.mdts_bytes, &d.mdts_source) {
                    (Some(b), Some(src)) => format!("{} ({src})", size_label(*b)),
                    (Some(b), None) => size_label(*b),
                    (None, _) => "—".into(),
                },
                d.vwc_enabled
                    .map(|v| if v { "yes" } else { "no" }.to_string())
                    .unwrap_or_else(|| "—".into()),
                opt(&d.numa_node),
                opt(&d.root),
                opt(&d.driver),
                if d.in_use {
                    "in use (never written)".into()
                } else if d.driver.as_deref().is_some_and(|x| x != "nvme") {
                    "namespaces not visible (never written)".into()
                } else {
                    "no mount, partition or holder".into()
                },
            ]
        })
        .collect();
    table(
        out,
        &[
            "Drive", "BDF", "Model", "Serial", "Firmware", "TB", "Block", "MDTS", "VWC", "Node",
            "Root", "Driver", "State",
        ],
        &rows,
    );
    // The average with the spread and count of the probe it comes from, where the profile
    // holds that measurement (`nvme_read/latency/<drive>/4KiB-random/qd<q>`).
    let lat = |drive: &str, qd: u32, a: Option<f64>, p50: Option<f64>, p99: Option<f64>| {
        let Some(a) = a else {
            return "—".to_string();
        };
        let probe = p
            .measurement(&format!(
                "nvme_read/io-uring/latency/{drive}/4KiB-random/qd{qd}"
            ))
            .and_then(|m| m.latency_us)
            .filter(|s| s.median == a);
        let (spread, n) = probe
            .map(|s| {
                (
                    format!(" ±{} %", fixed(s.spread_pct, 1)),
                    format!(" (N={})", s.n),
                )
            })
            .unwrap_or_default();
        format!(
            "{}{spread} / {} / {}{n}",
            fixed(a, 0),
            p50.map(|x| fixed(x, 0)).unwrap_or_else(|| "—".into()),
            p99.map(|x| fixed(x, 0)).unwrap_or_else(|| "—".into())
        )
    };
    let rows: Vec<Vec<String>> = p
        .nvme
        .drives
        .iter()
        .filter(|d| d.read_latency_qd1_us.is_some() || d.read_latency_qd32_us.is_some())
        .map(|d| {
            vec![
                d.name.clone(),
                lat(
                    &d.name,
                    1,
                    d.read_latency_qd1_us,
                    d.read_latency_qd1_p50_us,
                    d.read_latency_qd1_p99_us,
                ),
                lat(
                    &d.name,
                    16,
                    d.read_latency_qd16_us,
                    d.read_latency_qd16_p50_us,
                    d.read_latency_qd16_p99_us,
                ),
                lat(
                    &d.name,
                    32,
                    d.read_latency_qd32_us,
                    d.read_latency_qd32_p50_us,
                    d.read_latency_qd32_p99_us,
                ),
            ]
        })
        .collect();
    if !rows.is_empty() {
        out.push_str(
            "4 KiB random-read latency per I/O, µs (average ± its spread / p50 / p99: medians \
             over the probe's repetitions):\n\n",
        );
        table(out, &["Drive", "QD 1", "QD 16", "QD 32"], &rows);
    }
    nvme::power_states(out, p);
    nvme::long_tests(out, p);
}

fn pcie_table(out: &mut String, p: &Profile) {
    out.push_str(
        "## 4. PCIe theoretical bandwidth\n\nPer direction: GT/s × lanes × 128/130 ÷ 8 (8b/10b \
         for Gen1/2, 242/256 from Gen6). Computed from the link, not measured; a GPU's link as \
         read under load where it was (Note).\n\n",
    );
    if p.topology.links.is_empty() {
        out.push_str("No GPU or NVMe link was detected.\n\n");
        return;
    }
    let rows: Vec<Vec<String>> = p
        .topology
        .links
        .iter()
        .map(|l| {
            vec![
                l.device.clone(),
                l.bdf.clone(),
                format!("Gen{} x{}", l.gen, l.width),
                match (l.max_gen, l.max_width) {
                    (Some(g), Some(w)) => format!("Gen{g} x{w}"),
                    _ => "—".into(),
                },
                gbps(l.theoretical_gbps),
                l.max_theoretical_gbps
                    .map(gbps)
                    .unwrap_or_else(|| "—".into()),
                l.min_mps_bytes
                    .map(|m| format!("{m} B"))
                    .unwrap_or_else(|| "—".into()),
                match (l.tlp_write_gbps, l.tlp_read_gbps) {
                    (Some(w), Some(r)) => format!("{} / {}", gbps(w), gbps(r)),
                    _ => "—".into(),
                },
                [l.degraded.then(|| "below max".to_string()), l.basis_note()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join("; "),
            ]
        })
        .collect();
    table(
        out,
        &[
            "Device",
            "BDF",
            "Link",
            "Max link",
            "GB/s at link",
            "GB/s at max",
            "Smallest MPS",
            "TLP-adjusted GB/s (DMA writes / reads)",
            "Note",
        ],
        &rows,
    );
    out.push_str(
        "TLP-adjusted: the link's GB/s × MPS / (MPS + 24) for DMA writes, / (MPS + 20) for the \
         completions that carry DMA reads' data, at the smallest MPS on the path; a model of \
         the wire, not a measurement (docs/pcie.md).\n\n",
    );
    pcie_paths(out, p);
    state::render(out, p);
}

/// Each device's path to its root port, hop by hop, with what config space says.
fn pcie_paths(out: &mut String, p: &Profile) {
    if p.topology.pcie_paths.is_empty() {
        return;
    }
    let yes = |b: Option<bool>| match b {
        Some(true) => "on",
        Some(false) => "off",
        None => "—",
    };
    let bytes = |b: Option<u32>| b.map(|v| format!("{v}")).unwrap_or_else(|| "—".into());
    let mut rows = Vec::new();
    for path in &p.topology.pcie_paths {
        for (i, h) in path.hops.iter().enumerate() {
            let c = &h.config;
            let link = |l: Option<hwc_model::LinkState>| {
                l.map(|l| format!("Gen{} x{}", l.gen, l.width))
                    .unwrap_or_else(|| "—".into())
            };
            rows.push(vec![
                if i == 0 {
                    path.device.clone()
                } else {
                    String::new()
                },
                h.bdf.clone(),
                c.port
                    .map(|t| format!("{t:?}"))
                    .unwrap_or_else(|| "—".into()),
                format!("{} / {}", bytes(c.mps_bytes), bytes(c.mps_capable_bytes)),
                bytes(c.mrrs_bytes),
                yes(c.relaxed_ordering).into(),
                format!("{} / {}", yes(c.extended_tags), yes(c.tag10_requester)),
                format!("{} / {}", link(c.link_current), link(c.link_capable)),
                match c.acs {
                    Some(a) if a.p2p_request_redirect => "**redirect**".into(),
                    Some(_) => "no redirect".into(),
                    None => "—".into(),
                },
                h.iommu_domain.clone().unwrap_or_else(|| "—".into()),
                c.unreadable.clone().unwrap_or_default(),
            ]);
        }
    }
    out.push_str(
        "**PCIe path settings** (config space, from each device up to its root port):\n\n",
    );
    table(
        out,
        &[
            "Device",
            "Hop",
            "Port",
            "MPS set / capable (B)",
            "MRRS (B)",
            "Relaxed ordering",
            "Ext / 10-bit tags",
            "Link now / capable",
            "ACS P2P",
            "IOMMU",
            "Not read",
        ],
        &rows,
    );
}

fn routing(out: &mut String, p: &Profile) {
    out.push_str("## 6. Topology routing matrix\n\n");
    if p.topology.routes.is_empty() {
        let why = match (p.gpus.is_empty(), p.nvme.drives.is_empty()) {
            (true, true) => "no GPU and no NVMe drive",
            (true, false) => "no GPU",
            (false, true) => "no NVMe drive",
            (false, false) => "no route could be computed",
        };
        let _ = writeln!(
            out,
            "No GPU ↔ NVMe pairing to route: {why} on this machine.\n"
        );
        return;
    }
    let drives: Vec<&str> = {
        let mut v: Vec<&str> = p.topology.routes.iter().map(|r| r.drive.as_str()).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let gpus: BTreeSet<&str> = p.topology.routes.iter().map(|r| r.gpu.as_str()).collect();
    let mut head = vec!["GPU \\ drive"];
    head.extend(drives.iter().copied());
    let rows: Vec<Vec<String>> = gpus
        .iter()
        .map(|g| {
            let mut row = vec![g.to_string()];
            for d in &drives {
                let rel = p
                    .topology
                    .routes
                    .iter()
                    .find(|r| r.gpu == *g && r.drive == *d)
                    .map(|r| short_relation(r.relation))
                    .unwrap_or("—");
                row.push(rel.to_string());
            }
            row
        })
        .collect();
    table(out, &head, &rows);
    out.push_str(
        "same root = direct PCIe path; same node = through the CPU's fabric; cross NUMA = \
                  through the inter-socket link.\n\n",
    );
}

fn short_relation(r: Relation) -> &'static str {
    match r {
        Relation::SameRoot => "same root",
        Relation::SameNuma => "same node",
        Relation::CrossNuma => "cross NUMA",
        Relation::Unknown => "unknown",
    }
}

fn observations(out: &mut String, p: &Profile) {
    out.push_str("## 8. Observations and recommendations\n\n");
    let mut items: Vec<String> = Vec::new();
    if p.measurements.is_empty() {
        items.push("Nothing was measured on this run.".into());
    }
    for g in hwc_model::failure_groups(&p.failures) {
        items.push(format!(
            "{} case(s) failed and have no figure: {}",
            g.keys.len(),
            g.error
        ));
    }
    for (name, pair) in &p.host_ram.pairs {
        items.push(host_observation(p, name, pair));
    }
    if let (Some(same), Some(cross)) = (p.host_ram.same_numa_gbps, p.host_ram.cross_numa_gbps) {
        items.push(format!(
            "Host RAM cross-NUMA reaches {} GB/s, {} % of same-NUMA ({} GB/s).",
            gbps(cross),
            fixed(cross / same * 100.0, 1),
            gbps(same)
        ));
    }
    let resident = p.measurements.iter().filter(|m| m.cache_resident).count();
    if resident > 0 {
        items.push(format!(
            "{resident} measurement(s) ran on buffers a cache can hold (marked *cache*): \
             cache figures, not memory or link ceilings."
        ));
    }
    items.extend(summary::gpu_observations(p));
    // One line per remedy, naming every path it would measure.
    let mut hints: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for w in &p.waived {
        if let Some(h) = &w.hint {
            hints
                .entry(h.as_str())
                .or_default()
                .insert(w.path.to_string());
        }
    }
    for (hint, paths) in hints {
        let paths: Vec<String> = paths.into_iter().collect();
        items.push(format!("To measure {}: {hint}", paths.join(", ")));
    }
    for i in items {
        let _ = writeln!(out, "- {i}");
    }
    out.push('\n');
}

fn host_observation(p: &Profile, name: &str, pair: &HostRamPair) -> String {
    let best_engine = &pair.engine;
    // `(median, ±1.0 %, N=20)` of the sweep's measurement at `threads` by `engine`; nothing
    // for a figure with none.
    let stats_at = |threads: u32, engine: &EngineId| {
        p.measurements_of(PathId::HostRam)
            .find(|m| {
                &m.engine == engine
                    && m.spec.host_copy().is_some_and(|c| {
                        c.size_bytes == pair.size_bytes
                            && c.threads == threads
                            && (c.src_node, c.dst_node, c.cpu_node)
                                == (pair.src_node, pair.dst_node, pair.cpu_node)
                    })
            })
            .map(|m| {
                format!(
                    " (median, ±{} %, N={})",
                    fixed(m.gbps.spread_pct, 1),
                    m.gbps.n
                )
            })
            .unwrap_or_default()
    };
    let several = pair.engine_sweeps_gbps.len() > 1;
    let one = pair.sweep_gbps.get(&1).copied();
    let mut s = format!(
        "Host RAM {name} ({}): best {} GB/s{} at {} thread(s){}",
        size_label(pair.size_bytes),
        gbps(pair.best_gbps),
        stats_at(pair.best_threads, best_engine),
        pair.best_threads,
        if several {
            format!(" with `{best_engine}`")
        } else {
            String::new()
        }
    );
    if let Some(one) = one.filter(|_| pair.best_threads != 1) {
        let _ = write!(
            s,
            "; one thread reaches {} GB/s{} ({} % of best, a ratio of medians) — one thread is \
             not the ceiling",
            gbps(one),
            stats_at(1, best_engine),
            fixed(one / pair.best_gbps * 100.0, 0)
        );
    }
    // What the other engines reach (software that calls the C library's memcpy gets that
    // engine's figure, not the streaming copy's).
    for (engine, sweep) in pair
        .engine_sweeps_gbps
        .iter()
        .filter(|(e, _)| *e != best_engine)
    {
        if let Some((&t, &g)) = sweep.iter().max_by(|a, b| a.1.total_cmp(b.1)) {
            let _ = write!(
                s,
                "; `{engine}` reaches {} GB/s{} at {t} thread(s) ({} % of it, a ratio of \
                 medians)",
                gbps(g),
                stats_at(t, engine),
                fixed(g / pair.best_gbps * 100.0, 0)
            );
        }
    }
    s.push('.');
    s
}

/// Each distinct placement (CPUs, whether verified, what was checked) once, in groups of those
/// that differ only in their CPUs (Appendix B's rows): groups in the order the measurements first
/// use them, and within a group in that order too. Numbered through the groups in turn
/// (`P1`, `P2`, …), as Appendix A names each measurement's.
fn placement_groups(p: &Profile) -> Vec<Vec<&hwc_model::Placement>> {
    let mut groups: Vec<Vec<&hwc_model::Placement>> = Vec::new();
    for pl in p.measurements.iter().filter_map(|m| m.placement.as_ref()) {
        match groups.iter_mut().find(|g| same_but_cpus(g[0], pl)) {
            Some(g) if g.contains(&pl) => {}
            Some(g) => g.push(pl),
            None => groups.push(vec![pl]),
        }
    }
    groups
}

/// The group Appendices A and C put a measurement in (its path, engine and the first part of
/// its cell: a GPU, a node pair), and its row's name there (the rest of the cell).
pub(crate) fn appendix_group(m: &Measurement) -> ((PathId, &EngineId, &str), &str) {
    let (first, rest) = hwc_model::cell_parts(&m.cell);
    ((m.path, &m.engine, first), rest)
}

fn same_but_cpus(a: &hwc_model::Placement, b: &hwc_model::Placement) -> bool {
    (a.verified, &a.detail) == (b.verified, &b.detail)
}

fn appendix(out: &mut String, p: &Profile) {
    let groups = placement_groups(p);
    let placed = groups.concat();
    out.push_str("## Appendix A — every measurement\n\n");
    if p.measurements.is_empty() {
        out.push_str("None.\n\n");
    } else {
        out.push_str(
            "Grouped by path, engine and the first part of the cell (a GPU, a node pair): a \
             case's key is its group's prefix and its row's name.\n\n",
        );
        // Its placement's index in Appendix B, and its flags.
        let placement_of = |m: &Measurement| {
            m.placement
                .as_ref()
                .and_then(|pl| placed.iter().position(|q| *q == pl))
        };
        let flags_of = |m: &Measurement| {
            let mut flags = Vec::new();
            if m.cache_resident {
                flags.push("cache".to_string());
            }
            if m.contended {
                flags.push("contended".to_string());
            }
            if m.unsteady() {
                flags.push("unsteady".to_string());
            }
            if let Some(c) = paths::disturbed(m) {
                flags.push(format!("disturbed {}/{}", c.disturbed, c.of));
            }
            if m.placement.as_ref().is_some_and(|pl| !pl.verified) {
                flags.push("placement unverified".to_string());
            }
            flags
        };
        // Groups in the order their first measurement comes.
        let mut groups: Vec<(PathId, &EngineId, &str)> = Vec::new();
        for m in &p.measurements {
            let g = appendix_group(m).0;
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
        for (path, engine, first) in groups {
            let mine: Vec<&Measurement> = p
                .measurements
                .iter()
                .filter(|m| appendix_group(m).0 == (path, engine, first))
                .collect();
            // What the whole group shares goes in its heading instead of a column: one
            // placement with no flags, and one warm-up count.
            let placements: BTreeSet<Option<usize>> =
                mine.iter().map(|m| placement_of(m)).collect();
            let shared_placement = match placements.iter().collect::<Vec<_>>()[..] {
                [Some(i)] if mine.iter().all(|m| flags_of(m).is_empty()) => Some(*i),
                _ => None,
            };
            let warmups: BTreeSet<u32> = mine.iter().map(|m| m.warmup).collect();
            let shared_warmup = match warmups.iter().collect::<Vec<_>>()[..] {
                [w] => Some(*w),
                _ => None,
            };
            let mut heading = format!("`{}`", hwc_model::case_key(path, engine, first));
            if let Some(i) = shared_placement {
                let _ = write!(heading, ", placement P{}", i + 1);
            }
            if let Some(w) = shared_warmup {
                let _ = write!(heading, ", {w} warm-up each");
            }
            let mut head = vec!["Cell", "Median GB/s", "Min", "Max", "Spread %", "N"];
            if shared_warmup.is_none() {
                head.push("Warm-up");
            }
            head.push("Cold GB/s");
            if shared_placement.is_none() {
                head.push("Placement, flags");
            }
            let rows: Vec<Vec<String>> = mine
                .iter()
                .map(|m| {
                    let mut row = vec![
                        appendix_group(m).1.to_string(),
                        gbps(m.gbps.median),
                        gbps(m.gbps.min),
                        gbps(m.gbps.max),
                        fixed(m.gbps.spread_pct, 1),
                        m.gbps.n.to_string(),
                    ];
                    if shared_warmup.is_none() {
                        row.push(m.warmup.to_string());
                    }
                    row.push(m.cold_gbps.map(gbps).unwrap_or_else(|| "—".into()));
                    if shared_placement.is_none() {
                        let mut flags = flags_of(m);
                        if let Some(i) = placement_of(m) {
                            flags.insert(0, format!("P{}", i + 1));
                        }
                        row.push(flags.join(", "));
                    }
                    row
                })
                .collect();
            let _ = writeln!(out, "{heading}\n");
            // The report's longest tables, one row per measurement: their cells go unpadded.
            compact_table(out, &head, &rows);
        }
    }
    if !p.failures.is_empty() {
        out.push_str("### Failed cases\n\n");
        for g in hwc_model::failure_groups(&p.failures) {
            let keys: Vec<String> = g.keys.iter().map(|k| format!("`{k}`")).collect();
            let _ = writeln!(
                out,
                "- {} — {} case(s): {}",
                g.error,
                keys.len(),
                keys.join(", ")
            );
        }
        out.push('\n');
    }
    out.push_str("## Appendix B — placement of each measurement\n\n");
    if placed.is_empty() {
        out.push_str("None.\n\n");
    } else {
        out.push_str(
            "Each placement once (Appendix A names each measurement's); a row holds the \
             placements that differ only in their CPUs, listed in the order of their numbers; a \
             placement is verified unless it says not.\n\n",
        );
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut first = 0;
        for group in &groups {
            let run = group.len();
            let cases = p
                .measurements
                .iter()
                .filter(|m| m.placement.as_ref().is_some_and(|pl| group.contains(&pl)))
                .count();
            let pl = group[0];
            rows.push(vec![
                if run == 1 {
                    format!("P{}", first + 1)
                } else {
                    format!("P{}–P{}", first + 1, first + run)
                },
                group
                    .iter()
                    .map(|pl| opt(&pl.cpus))
                    .collect::<Vec<_>>()
                    .join("; "),
                cases.to_string(),
                if pl.verified {
                    pl.detail.clone()
                } else {
                    format!("**not verified**: {}", pl.detail)
                },
            ]);
            first += run;
        }
        table(out, &["Placements", "CPUs", "Cases", "Detail"], &rows);
    }
    let all: Vec<&Measurement> = p.measurements.iter().collect();
    paths::disturbed_cases(out, &all);
    out.push_str("## Provenance\n\n");
    let pv = &p.provenance;
    let mut rows = vec![
        vec!["tool".into(), format!("{} {}", pv.tool, pv.version)],
        vec!["git revision".into(), pv.git_revision.clone()],
        vec!["kernel".into(), opt(&pv.kernel)],
        vec!["os".into(), opt(&pv.os)],
        vec!["started".into(), pv.started_at.clone()],
        vec!["finished".into(), pv.finished_at.clone()],
        vec!["schema_version".into(), p.schema_version.to_string()],
    ];
    // A setting's note shows where it is short; a longer one (how an engine works, why it
    // set what it set) stays in the profile's `provenance.environment`.
    let mut long_notes = false;
    let settings: Vec<(&String, String)> = pv
        .environment
        .iter()
        .map(|(k, v)| match &v.about {
            Some(about) if about.chars().count() > PROVENANCE_NOTE_MAX_CHARS => {
                long_notes = true;
                (k, format!("{} (note in the profile)", v.value))
            }
            _ => (k, v.to_string()),
        })
        .collect();
    for (k, v) in pv
        .options
        .iter()
        .map(|(k, v)| (k, v.clone()))
        .chain(settings)
    {
        // An empty value says "nothing" (`drives_left_out`, `threads_left_out`, …): in words,
        // not as a blank cell.
        let shown = if v.is_empty() { "(none)".into() } else { v };
        rows.push(vec![k.clone(), shown]);
    }
    table(out, &["Field", "Value"], &rows);
    if long_notes {
        out.push_str(
            "*note in the profile*: the setting's note is in `provenance.environment` of the \
             YAML profile.\n\n",
        );
    }
}

/// A setting's note longer than this is left to the profile (see `appendix`'s Provenance).
const PROVENANCE_NOTE_MAX_CHARS: usize = 60;

#[cfg(test)]
mod tests;
