//! The settings a figure was taken under, where two profiles of one machine can differ and the
//! figures move with them: the driver, the CUDA hardware work queues
//! (`CUDA_DEVICE_MAX_CONNECTIONS`: 32 from 2026-11-30 unless the user set it, the driver's 8
//! before, moving 128 KiB–1 MiB copies by 1–3 %), transparent huge pages, the timing and
//! buffer methods of the GPU and NVMe backends, and where small duplex and D2H copies lie in
//! their buffers (searched from 2026-11-30; where they lie moves 512 KiB duplex by several per
//! cent).
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
    "cuda.copy_placement",
    "cuda.device_placement",
    "cuda.timing",
    "cuda.pinned_memory",
    "host.transparent_hugepage",
    "host.glibc_non_temporal_threshold",
    "nvme_engine",
];

/// What a profile without the key shows (it predates the record, or did not run that backend).
pub const NOT_RECORDED: &str = "not recorded";

/// One setting that is not the same on every node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SettingDiff {
    pub key: String,
    /// Each distinct value, in the order the nodes first show it.
    pub values: Vec<SettingValue>,
}

/// One value of a setting and the nodes that have it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SettingValue {
    /// As `nodes` recorded it (or [`NOT_RECORDED`]); where they recorded the same setting in
    /// different words (who chose a queue count), only what decides (`32`).
    pub value: String,
    /// In node order.
    pub nodes: Vec<String>,
}

/// What decides whether two records of `key` are the same setting: the queue count for
/// `cuda.device_max_connections` (`32 (set by hwceiling …)` and `32 (from the environment …)`
/// are one setting, recorded with who chose it), the whole text otherwise. An unset variable
/// (`unset: the driver's default (8)`) is not taken for 8: the default is the driver's, and
/// another driver may have another.
fn comparable(key: &str, value: &str) -> String {
    if key == "cuda.device_max_connections" {
        let first = value.split_once(' ').map_or(value, |(n, _)| n);
        if let Ok(n) = first.parse::<u32>() {
            return n.to_string();
        }
    }
    value.to_string()
}

/// The settings of [`KEYS`] that differ between `nodes` (name, profile). A key no node records
/// is left out.
pub fn differences(nodes: &[(&str, &Profile)]) -> Vec<SettingDiff> {
    KEYS.iter()
        .filter_map(|key| {
            let mut values: Vec<SettingValue> = Vec::new();
            let mut recorded = false;
            // A node that measured nothing the setting shapes is left out of it: a host RAM
            // profile has no NVMe engine to differ in.
            for (name, p) in nodes.iter().filter(|(_, p)| shapes_figures_of(key, p)) {
                let v = match p.provenance.environment.get(*key) {
                    Some(v) => {
                        recorded = true;
                        v.clone()
                    }
                    None => NOT_RECORDED.to_string(),
                };
                let decides = comparable(key, &v);
                match values
                    .iter_mut()
                    .find(|x| comparable(key, &x.value) == decides)
                {
                    Some(x) => {
                        if x.value != v {
                            // The same setting in other words: say only what they share.
                            x.value = decides;
                        }
                        x.nodes.push(name.to_string());
                    }
                    None => values.push(SettingValue {
                        value: v,
                        nodes: vec![name.to_string()],
                    }),
                }
            }
            (recorded && values.len() > 1).then(|| SettingDiff {
                key: key.to_string(),
                values,
            })
        })
        .collect()
}

/// Whether `p` measured a path the setting `key` shapes: the NVMe engine NVMe paths, the
/// driver and CUDA settings GPU paths, glibc's non-temporal threshold host RAM's `memcpy`;
/// transparent huge pages shape every host buffer. A
/// profile without measurements (its `ceilings:` only) cannot tell, and counts.
fn shapes_figures_of(key: &str, p: &Profile) -> bool {
    use hwc_model::PathId;
    let measured = |shaped: fn(PathId) -> bool| {
        p.measurements.is_empty() || p.measurements.iter().any(|m| shaped(m.path))
    };
    if key == "nvme_engine" {
        measured(|path| matches!(path, PathId::NvmeRead | PathId::NvmeWrite))
    } else if key == "host.glibc_non_temporal_threshold" {
        measured(|path| path == PathId::HostRam)
    } else if key.starts_with("cuda.") || key.starts_with("nvidia.") {
        // Every path but the kernel's NVMe ones and host RAM goes through a GPU.
        measured(|path| !matches!(path, PathId::NvmeRead | PathId::NvmeWrite | PathId::HostRam))
    } else {
        true
    }
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
        for v in &d.values {
            let _ = writeln!(s, "    {}: {}", v.nodes.join(", "), v.value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(v: &str, nodes: &[&str]) -> SettingValue {
        SettingValue {
            value: v.into(),
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
        }
    }

    /// A profile that measured a GPU copy, with these settings recorded.
    fn with(env: &[(&str, &str)]) -> Profile {
        let mut p = hwc_testkit::ceilings_profile("node", "2026-11-30T00:00:00Z", &[]);
        p.measurements.push(hwc_testkit::h2d_measurement(
            "h2d/cuda-copy/gpu0/local/256MiB/s1",
            55.0,
            0.1,
            12,
        ));
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
                    value(NOT_RECORDED, &["old"]),
                    value("32 (set by hwceiling …)", &["new"]),
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
    fn a_node_that_measured_nothing_a_setting_shapes_is_left_out_of_it() {
        // A host RAM profile records no GPU driver and no NVMe engine: not a difference.
        let gpu = with(&[
            ("nvidia.driver_version", "580"),
            ("nvme_engine", "io_uring"),
        ]);
        let mut host_only = hwc_testkit::with_host_ram_ceiling(with(&[]), None, 30.0);
        host_only
            .measurements
            .retain(|m| m.path == hwc_model::PathId::HostRam);
        assert_eq!(host_only.measurements.len(), 1);
        assert!(differences(&[("gpu", &gpu), ("host", &host_only)]).is_empty());
        // glibc's threshold shapes host RAM's memcpy only: GPU-only nodes do not differ by it.
        let glibc = with(&[("host.glibc_non_temporal_threshold", "151.0 MiB")]);
        assert!(differences(&[("gpu", &with(&[])), ("glibc", &glibc)]).is_empty());
        // Two nodes that measured host RAM do.
        let host_glibc = hwc_testkit::with_host_ram_ceiling(glibc.clone(), None, 30.0);
        let host_plain = hwc_testkit::with_host_ram_ceiling(with(&[]), None, 30.0);
        let d = differences(&[("a", &host_plain), ("b", &host_glibc)]);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].key, "host.glibc_non_temporal_threshold");
        // Two GPU nodes still differ when one did not record the driver.
        let unrecorded = with(&[]);
        let d = differences(&[("gpu", &gpu), ("old", &unrecorded)]);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].key, "nvidia.driver_version");
        assert_eq!(d[0].values[1], value(NOT_RECORDED, &["old"]));
    }

    #[test]
    fn a_fleet_groups_nodes_by_value() {
        let a = with(&[("nvidia.driver_version", "580")]);
        let b = with(&[("nvidia.driver_version", "575")]);
        let d = differences(&[("n1", &a), ("n2", &b), ("n3", &a)]);
        assert_eq!(
            d[0].values,
            vec![value("580", &["n1", "n3"]), value("575", &["n2"])]
        );
    }

    #[test]
    fn the_same_queue_count_chosen_by_someone_else_is_the_same_setting() {
        let key = "cuda.device_max_connections";
        let ours = with(&[(
            key,
            "32 (set by hwceiling because CUDA_DEVICE_MAX_CONNECTIONS was unset; …)",
        )]);
        let users = with(&[(key, "32 (from the environment, left as the user set it)")]);
        assert!(differences(&[("a", &ours), ("b", &users)]).is_empty());
        let eight = with(&[(key, "8 (from the environment, left as the user set it)")]);
        let d = differences(&[("a", &ours), ("b", &eight), ("c", &users)]);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].values[0].nodes, ["a", "c"]);
        assert_eq!(d[0].values[1].nodes, ["b"]);
        // a's words are not c's: the group says only the count, not who chose it for whom.
        assert_eq!(d[0].values[0].value, "32");
        let mut out = String::new();
        render(&mut out, &d);
        assert!(out.contains("    a, c: 32\n"), "{out}");
        // One node's words stay whole.
        assert_eq!(
            d[0].values[1].value,
            "8 (from the environment, left as the user set it)"
        );
        // The count decides, however it is spelt.
        let spelt = with(&[(key, "08 (from the environment, left as the user set it)")]);
        assert!(differences(&[("a", &eight), ("b", &spelt)]).is_empty());
        // Unset (the driver's default) and an unreadable value are not taken for a number.
        let unset = with(&[(
            key,
            "unset: the driver's default (8); this process did not choose it",
        )]);
        let bad = with(&[(
            key,
            "\"abc\" (from the environment, …; not a number from 1 to 32, …)",
        )]);
        assert_eq!(
            differences(&[("a", &eight), ("b", &unset), ("c", &bad)])[0]
                .values
                .len(),
            3
        );
        // Other keys compare their whole text.
        let a = with(&[("cuda.timing", "events (spin-kernel latch)")]);
        let b = with(&[("cuda.timing", "events (wall clock)")]);
        assert_eq!(differences(&[("a", &a), ("b", &b)]).len(), 1);
    }
}
