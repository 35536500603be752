//! The settings a figure was taken under, where two profiles of one machine can differ and the
//! figures move with them: the driver, the CUDA hardware work queues
//! (`CUDA_DEVICE_MAX_CONNECTIONS`: 32 from 2026-11-30 unless the user set it, the driver's 8
//! before, moving 128 KiB–1 MiB copies by 1–3 %), transparent huge pages, the timing and
//! buffer methods of the GPU and NVMe backends, and where small duplex copies lie in device
//! memory (searched from 2026-11-30; where they lie moves 512 KiB duplex by several per cent).
//! `compare` lists the ones that differ under the table, so a delta is read with its cause
//! beside it; it does not change a verdict (a real regression under a new setting is still a
//! regression).

use hwc_model::Profile;
use serde::Serialize;

/// The `provenance.environment` keys that change how figures are taken.
pub const KEYS: &[&str] = &[
    "nvidia.driver_version",
    "cuda.driver_api_version",
    "cuda.device_max_connections",
    "cuda.device_placement",
    "cuda.timing",
    "cuda.pinned_memory",
    "host.transparent_hugepage",
    "nvme_engine",
];

/// What a profile without the key shows (it predates the record, or did not run that backend).
pub const NOT_RECORDED: &str = "not recorded";

/// One setting that is not the same on every node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SettingDiff {
    pub key: String,
    /// Each distinct value (or [`NOT_RECORDED`]) with the nodes that have it, in node order.
    pub values: Vec<(String, Vec<String>)>,
}

/// The settings of [`KEYS`] that differ between `nodes` (name, profile). A key no node records
/// is left out.
pub fn differences(nodes: &[(&str, &Profile)]) -> Vec<SettingDiff> {
    KEYS.iter()
        .filter_map(|key| {
            let mut values: Vec<(String, Vec<String>)> = Vec::new();
            let mut recorded = false;
            for (name, p) in nodes {
                let v = match p.provenance.environment.get(*key) {
                    Some(v) => {
                        recorded = true;
                        v.clone()
                    }
                    None => NOT_RECORDED.to_string(),
                };
                match values.iter_mut().find(|(x, _)| *x == v) {
                    Some((_, names)) => names.push(name.to_string()),
                    None => values.push((v, vec![name.to_string()])),
                }
            }
            (recorded && values.len() > 1).then(|| SettingDiff {
                key: key.to_string(),
                values,
            })
        })
        .collect()
}

/// `settings that differ (the figures may move with them):` and a line per setting and value.
pub fn render(s: &mut String, diffs: &[SettingDiff]) {
    use std::fmt::Write;
    if diffs.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nsettings that differ (the figures may move with them):"
    );
    for d in diffs {
        let _ = writeln!(s, "  {}", d.key);
        for (value, nodes) in &d.values {
            let _ = writeln!(s, "    {}: {value}", nodes.join(", "));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(env: &[(&str, &str)]) -> Profile {
        let mut p = hwc_testkit::ceilings_profile("node", "2026-11-30T00:00:00Z", &[]);
        p.provenance.environment = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        p
    }

    #[test]
    fn only_recorded_keys_that_differ_are_listed() {
        let old = with(&[("nvidia.driver_version", "580.159.04"), ("other", "a")]);
        let new = with(&[
            ("nvidia.driver_version", "580.159.04"),
            ("cuda.device_max_connections", "32 (set by hwceiling …)"),
            ("other", "b"),
        ]);
        let d = differences(&[("old", &old), ("new", &new)]);
        assert_eq!(
            d,
            vec![SettingDiff {
                key: "cuda.device_max_connections".into(),
                values: vec![
                    (NOT_RECORDED.into(), vec!["old".into()]),
                    ("32 (set by hwceiling …)".into(), vec!["new".into()]),
                ],
            }]
        );
        let mut s = String::new();
        render(&mut s, &d);
        assert!(s.contains("settings that differ"), "{s}");
        assert!(s.contains("    old: not recorded\n"), "{s}");
        assert!(s.contains("    new: 32 (set by hwceiling …)\n"), "{s}");
    }

    #[test]
    fn equal_settings_and_keys_nobody_records_give_nothing() {
        let a = with(&[("cuda.device_max_connections", "32")]);
        let b = with(&[("cuda.device_max_connections", "32")]);
        assert!(differences(&[("a", &a), ("b", &b)]).is_empty());
        let c = with(&[]);
        assert!(differences(&[("a", &c), ("b", &c)]).is_empty());
        let mut s = String::new();
        render(&mut s, &[]);
        assert!(s.is_empty());
    }

    #[test]
    fn a_fleet_groups_nodes_by_value() {
        let a = with(&[("nvidia.driver_version", "580")]);
        let b = with(&[("nvidia.driver_version", "575")]);
        let d = differences(&[("n1", &a), ("n2", &b), ("n3", &a)]);
        assert_eq!(
            d[0].values,
            vec![
                ("580".into(), vec!["n1".into(), "n3".into()]),
                ("575".into(), vec!["n2".into()]),
            ]
        );
    }
}
