//! The GPUs' and the host's state through the run, from each case's `evidence.gpu_state` and
//! `evidence.host_state`: one row a GPU, one for the host, each naming the cases where
//! something moved.

use crate::table;
use hwc_model::{LinkState, Measurement, Profile, Range};

fn range(rs: impl Iterator<Item = Range>) -> Option<Range> {
    rs.fold(None, |acc, r| {
        Some(match acc {
            None => r,
            Some(a) => Range {
                min: a.min.min(r.min),
                max: a.max.max(r.max),
            },
        })
    })
}

fn span(r: Option<Range>, unit: &str) -> String {
    match r {
        Some(r) if r.min == r.max => format!("{} {unit}", r.min),
        Some(r) => format!("{}–{} {unit}", r.min, r.max),
        None => "—".into(),
    }
}

fn link(l: Option<LinkState>) -> String {
    l.map_or_else(|| "—".into(), |l| format!("Gen{} x{}", l.gen, l.width))
}

/// The section, where any case recorded a state.
pub(crate) fn render(out: &mut String, p: &Profile) {
    let gpu_cases: Vec<&Measurement> = p
        .measurements
        .iter()
        .filter(|m| m.evidence.gpu_state.is_some())
        .collect();
    let host_cases: Vec<&Measurement> = p
        .measurements
        .iter()
        .filter(|m| m.evidence.host_state.is_some())
        .collect();
    if gpu_cases.is_empty() && host_cases.is_empty() {
        return;
    }
    out.push_str("**State during the run** (read with each case: `evidence.gpu_state`, `evidence.host_state`):\n\n");
    let mut gpus: Vec<&str> = gpu_cases.iter().filter_map(|m| m.spec.gpu()).collect();
    gpus.sort();
    gpus.dedup();
    let mut rows = Vec::new();
    for g in gpus {
        let states: Vec<_> = gpu_cases
            .iter()
            .filter(|m| m.spec.gpu() == Some(g))
            .filter_map(|m| m.evidence.gpu_state.as_ref())
            .collect();
        let mut events: Vec<&str> = states
            .iter()
            .flat_map(|s| s.clock_events.iter().map(|e| e.as_str()))
            .collect();
        events.sort_unstable();
        events.dedup();
        let slowest = {
            let links: Vec<LinkState> = states.iter().filter_map(|s| s.link_under_load).collect();
            links
                .iter()
                .map(|l| l.gen)
                .min()
                .zip(links.iter().map(|l| l.width).min())
                .map(|(gen, width)| LinkState { gen, width })
        };
        let replays: Option<u64> = states
            .iter()
            .filter_map(|s| s.pcie_replays)
            .reduce(|a, b| a + b);
        let downtrained = states.iter().filter(|s| s.downtrained()).count();
        let persistence = match states.iter().find_map(|s| s.persistence_mode) {
            Some(true) => "on",
            Some(false) => "off",
            None => "—",
        };
        rows.push(vec![
            g.to_string(),
            states.len().to_string(),
            span(range(states.iter().filter_map(|s| s.sm_clock_mhz)), "MHz"),
            span(range(states.iter().filter_map(|s| s.mem_clock_mhz)), "MHz"),
            span(range(states.iter().filter_map(|s| s.temperature_c)), "°C"),
            if events.is_empty() {
                "none".into()
            } else {
                events.join(", ")
            },
            format!(
                "{} / {}{}",
                link(slowest),
                link(states.iter().find_map(|s| s.link_max)),
                if downtrained > 0 {
                    format!(" (**below in {downtrained} cases**)")
                } else {
                    String::new()
                }
            ),
            replays.map_or_else(|| "—".into(), |r| r.to_string()),
            persistence.into(),
        ]);
    }
    if !rows.is_empty() {
        table(
            out,
            &[
                "GPU",
                "Cases",
                "SM clock",
                "Memory clock",
                "Temperature",
                "Clock events",
                "Slowest link under load / capable",
                "PCIe replays",
                "Persistence",
            ],
            &rows,
        );
    }
    if !host_cases.is_empty() {
        let states: Vec<_> = host_cases
            .iter()
            .filter_map(|m| m.evidence.host_state.as_ref())
            .collect();
        let mut governors: Vec<String> = states.iter().flat_map(|s| s.governors.clone()).collect();
        governors.sort();
        governors.dedup();
        let mut thp: Vec<String> = states.iter().filter_map(|s| s.thp.clone()).collect();
        thp.sort();
        thp.dedup();
        let hugepages = range(states.iter().filter_map(|s| {
            s.hugepages_total
                .and_then(|t| u32::try_from(t).ok())
                .map(|t| Range { min: t, max: t })
        }));
        let changed: Vec<&str> = host_cases
            .iter()
            .filter(|m| {
                m.evidence
                    .host_state
                    .as_ref()
                    .is_some_and(|h| !h.changed.is_empty())
            })
            .map(|m| m.key.as_str())
            .collect();
        let none = |v: &[String]| {
            if v.is_empty() {
                "— (not exposed)".to_string()
            } else {
                v.join(", ")
            }
        };
        table(
            out,
            &[
                "Host",
                "Cases",
                "Governors",
                "CPU clock",
                "Transparent huge pages",
                "Hugepages",
                "Changed during a case",
            ],
            &[vec![
                "host".into(),
                states.len().to_string(),
                none(&governors),
                span(range(states.iter().filter_map(|s| s.cpu_mhz)), "MHz"),
                none(&thp),
                span(hugepages, "pages"),
                if changed.is_empty() {
                    "nothing".into()
                } else {
                    changed.join(", ")
                },
            ]],
        );
    }
}
