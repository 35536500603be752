//! The settings a figure was taken under, where two profiles of one machine can differ and the
//! figures move with them: the driver, the CUDA hardware work queues
//! (`CUDA_DEVICE_MAX_CONNECTIONS`: 32 unless the user set it, in older builds the driver's 8,
//! moving 128 KiB–1 MiB copies by 1–3 %), transparent huge pages, the timing and
//! buffer methods of the GPU and NVMe backends, and where small duplex and D2H copies lie in
//! their buffers (searched in later builds; where they lie moves 512 KiB duplex by several
//! per cent).
//! `compare` lists the ones that differ under the table, so a delta is read with its cause
//! beside it; it does not change a verdict (a real regression under a new setting is still a
//! regression).

use hwc_model::{Profile, Setting};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

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
    "host.cpufreq_governor",
    "host.hugepages_total",
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
    /// The setting's value as `nodes` recorded it (or [`NOT_RECORDED`]).
    pub value: String,
    /// What every one of `nodes` said about it, where they said the same (who chose a queue
    /// count); absent where they differ in that alone, or said nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub about: Option<String>,
    /// In node order.
    pub nodes: Vec<String>,
    /// `value` is a whole line of text, as profiles of older builds recorded a setting, value
    /// and description in the words of the build that wrote it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub as_text: bool,
}

/// A value as it is gathered: with each member's setting as one line (`value (about)`), which is
/// what a profile of text settings recorded, so one of those can join it.
struct Gathered {
    value: SettingValue,
    lines: Vec<String>,
}

impl Gathered {
    /// Whether a node that recorded `setting` (`None`: nothing) has this value. A setting
    /// recorded as text is the same as a structured one whose line it is.
    fn holds(&self, setting: Option<&Setting>) -> bool {
        let v = &self.value;
        match setting {
            None => v.value == NOT_RECORDED && !v.as_text,
            Some(s) if s.as_text => {
                (v.as_text && v.value == s.value) || self.lines.contains(&s.value)
            }
            Some(s) => {
                (!v.as_text && v.value == s.value) || (v.as_text && v.value == s.to_string())
            }
        }
    }

    fn of(name: &str, setting: Option<&Setting>) -> Gathered {
        Gathered {
            value: SettingValue {
                value: setting.map_or(NOT_RECORDED.to_string(), |s| s.value.clone()),
                about: setting.and_then(|s| s.about.clone()),
                nodes: vec![name.to_string()],
                as_text: setting.is_some_and(|s| s.as_text),
            },
            lines: setting
                .filter(|s| !s.as_text)
                .map(|s| s.to_string())
                .into_iter()
                .collect(),
        }
    }
}

/// The settings of [`KEYS`] that differ between `nodes` (name, profile), by value: two records
/// of one value said differently (`32`, set by hwceiling or by the user) are one setting, and
/// so are a setting an older profile recorded as its line of text and the same line recorded
/// structured. A key no node records is left out.
pub fn differences(nodes: &[(&str, &Profile)]) -> Vec<SettingDiff> {
    KEYS.iter()
        .filter_map(|key| {
            let mut values: Vec<Gathered> = Vec::new();
            let mut recorded = false;
            // A node that measured nothing the setting shapes is left out of it: a host RAM
            // profile has no NVMe engine to differ in.
            for (name, p) in nodes.iter().filter(|(_, p)| shapes_figures_of(key, p)) {
                let setting = p.provenance.environment.get(*key);
                recorded |= setting.is_some();
                match values.iter_mut().find(|x| x.holds(setting)) {
                    Some(x) => {
                        if let Some(s) = setting.filter(|s| !s.as_text) {
                            if x.value.about != s.about {
                                x.value.about = None;
                            }
                            x.lines.push(s.to_string());
                        }
                        x.value.nodes.push(name.to_string());
                    }
                    None => values.push(Gathered::of(name, setting)),
                }
            }
            (recorded && values.len() > 1).then(|| SettingDiff {
                key: key.to_string(),
                values: values.into_iter().map(|g| g.value).collect(),
            })
        })
        .chain(pcie_differences(nodes))
        .collect()
}

/// The PCIe facts of each GPU's and drive's path that shape its figures, by key
/// (`pcie.gpu0.mps_bytes`: the smallest MPS on the path; `mrrs_bytes`, `relaxed_ordering`,
/// `link` of the device; `acs_p2p_redirect`: on at which bridges; `iommu_domain`).
pub fn pcie_facts(p: &Profile) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let known = |v: Option<String>| v.unwrap_or_else(|| "unreadable".into());
    for path in &p.topology.pcie_paths {
        let Some(dev) = path.hops.first() else {
            continue;
        };
        let c = &dev.config;
        let d = &path.device;
        let mps = path
            .hops
            .iter()
            .map(|h| h.config.mps_bytes)
            .collect::<Option<Vec<u32>>>()
            .and_then(|v| v.into_iter().min());
        let redirect: Vec<&str> = path
            .hops
            .iter()
            .filter(|h| h.config.acs.is_some_and(|a| a.p2p_request_redirect))
            .map(|h| h.bdf.as_str())
            .collect();
        let acs = if path.hops.iter().any(|h| h.config.unreadable.is_some()) {
            None
        } else if redirect.is_empty() {
            Some("off".to_string())
        } else {
            Some(format!("on at {}", redirect.join(", ")))
        };
        for (key, value) in [
            ("mps_bytes", mps.map(|v| v.to_string())),
            ("mrrs_bytes", c.mrrs_bytes.map(|v| v.to_string())),
            (
                "relaxed_ordering",
                c.relaxed_ordering.map(|v| v.to_string()),
            ),
            ("link", c.link_current.map(|l| l.to_string())),
            ("acs_p2p_redirect", acs),
            (
                "iommu_domain",
                Some(dev.iommu_domain.clone().unwrap_or_else(|| "none".into())),
            ),
        ] {
            out.insert(format!("pcie.{d}.{key}"), known(value));
        }
    }
    out
}

/// [`pcie_facts`] that differ between `nodes`, with the nodes that hold each value.
fn pcie_differences(nodes: &[(&str, &Profile)]) -> Vec<SettingDiff> {
    let facts: Vec<(&str, BTreeMap<String, String>)> =
        nodes.iter().map(|(n, p)| (*n, pcie_facts(p))).collect();
    let keys: BTreeSet<&String> = facts.iter().flat_map(|(_, f)| f.keys()).collect();
    keys.into_iter()
        .filter_map(|key| {
            let mut values: Vec<SettingValue> = Vec::new();
            for (name, f) in &facts {
                let v = f.get(key).map_or(NOT_RECORDED, String::as_str);
                match values.iter_mut().find(|x| x.value == v) {
                    Some(x) => x.nodes.push(name.to_string()),
                    None => values.push(SettingValue {
                        value: v.to_string(),
                        about: None,
                        nodes: vec![name.to_string()],
                        as_text: false,
                    }),
                }
            }
            (values.len() > 1).then(|| SettingDiff {
                key: key.clone(),
                values,
            })
        })
        .collect()
}

/// Whether `p` measured a path the setting `key` shapes. A profile records the paths a setting
/// shapes with it (`shapes`, those its engine measured); one without them (written by an older
/// build) is read by the rule of its time: the NVMe engine shapes NVMe paths, the driver
/// and CUDA settings GPU paths, glibc's non-temporal threshold host RAM's `memcpy`, and
/// transparent huge pages every host buffer. A profile without measurements (its `ceilings:`
/// only) cannot tell, and counts.
fn shapes_figures_of(key: &str, p: &Profile) -> bool {
    use hwc_model::PathId;
    let measured = |shaped: &dyn Fn(PathId) -> bool| {
        p.measurements.is_empty() || p.measurements.iter().any(|m| shaped(m.path))
    };
    if let Some(s) = p.provenance.environment.get(key) {
        if !s.shapes.is_empty() {
            return measured(&|path| s.shapes.contains(&path));
        }
    }
    if key == "nvme_engine" {
        measured(&|path| matches!(path, PathId::NvmeRead | PathId::NvmeWrite))
    } else if key == "host.glibc_non_temporal_threshold" {
        measured(&|path| path == PathId::HostRam)
    } else if key.starts_with("cuda.") || key.starts_with("nvidia.") {
        // Every path but the kernel's NVMe ones and host RAM goes through a GPU.
        measured(&|path| !matches!(path, PathId::NvmeRead | PathId::NvmeWrite | PathId::HostRam))
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
            let about = v
                .about
                .as_ref()
                .map_or(String::new(), |a| format!(" ({a})"));
            let _ = writeln!(s, "    {}: {}{about}", v.nodes.join(", "), v.value);
        }
        let recorded_as = |text| {
            d.values
                .iter()
                .any(|v| v.as_text == text && v.value != NOT_RECORDED)
        };
        if recorded_as(true) && recorded_as(false) {
            let _ = writeln!(
                s,
                "    (a line of text is how profiles of older builds recorded it: it may be \
                 the same setting in other words)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(v: &str, about: Option<&str>, nodes: &[&str]) -> SettingValue {
        SettingValue {
            value: v.into(),
            about: about.map(str::to_string),
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            as_text: false,
        }
    }

    /// A profile that measured a GPU copy, with these settings recorded.
    fn with(env: &[(&str, Setting)]) -> Profile {
        let mut p = hwc_testkit::ceilings_profile("node", "2026-11-30T00:00:00Z", &[]);
        p.measurements.push(hwc_testkit::h2d_measurement(
            "h2d/cuda-copy/gpu0/local/256MiB/s1",
            55.0,
            0.1,
            12,
        ));
        p.provenance.environment = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        p
    }

    fn set(v: &str) -> Setting {
        Setting::from(v)
    }

    #[test]
    fn only_recorded_keys_that_differ_are_listed() {
        let old = with(&[
            ("nvidia.driver_version", set("580.159.04")),
            ("other", set("a")),
        ]);
        let new = with(&[
            ("nvidia.driver_version", set("580.159.04")),
            (
                "cuda.device_max_connections",
                Setting::about("32", "set by hwceiling"),
            ),
            ("other", set("b")),
        ]);
        let d = differences(&[("old", &old), ("new", &new)]);
        assert_eq!(
            d,
            vec![SettingDiff {
                key: "cuda.device_max_connections".into(),
                values: vec![
                    value(NOT_RECORDED, None, &["old"]),
                    value("32", Some("set by hwceiling"), &["new"]),
                ],
            }]
        );
        let mut s = String::new();
        render(&mut s, &d);
        assert!(s.contains("settings that differ"), "{s}");
        assert!(s.contains("    old: not recorded\n"), "{s}");
        assert!(s.contains("    new: 32 (set by hwceiling)\n"), "{s}");
    }

    #[test]
    fn host_governors_and_hugepages_are_settings_that_differ() {
        let a = with(&[
            ("host.cpufreq_governor", set("performance")),
            ("host.hugepages_total", set("0")),
        ]);
        let b = with(&[
            ("host.cpufreq_governor", set("powersave")),
            ("host.hugepages_total", set("0")),
        ]);
        let d = differences(&[("a", &a), ("b", &b)]);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].key, "host.cpufreq_governor");
        assert_eq!(d[0].values[1].value, "powersave");
    }

    #[test]
    fn equal_settings_and_keys_nobody_records_give_nothing() {
        let a = with(&[("cuda.device_max_connections", set("32"))]);
        let b = with(&[("cuda.device_max_connections", set("32"))]);
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
            ("nvidia.driver_version", set("580")),
            ("nvme_engine", set("io_uring")),
        ]);
        let mut host_only = hwc_testkit::with_host_ram_ceiling(with(&[]), None, 30.0);
        host_only
            .measurements
            .retain(|m| m.path == hwc_model::PathId::HostRam);
        assert_eq!(host_only.measurements.len(), 1);
        assert!(differences(&[("gpu", &gpu), ("host", &host_only)]).is_empty());
        // glibc's threshold shapes host RAM's memcpy only: GPU-only nodes do not differ by it.
        let glibc = with(&[(
            "host.glibc_non_temporal_threshold",
            Setting::bytes(158_334_976, "151.0 MiB"),
        )]);
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
        assert_eq!(d[0].values[1], value(NOT_RECORDED, None, &["old"]));
    }

    #[test]
    fn a_setting_that_records_its_paths_shapes_those_alone() {
        // Recorded as shaping NVMe reads only: a node that measured a GPU copy alone is left
        // out of it, where the rule for profiles without `shapes` would keep it.
        let mut nvme_only = set("580");
        nvme_only.shapes = vec![hwc_model::PathId::NvmeRead];
        let gpu = with(&[("nvidia.driver_version", nvme_only)]);
        let other = with(&[("nvidia.driver_version", set("575"))]);
        let d = differences(&[("gpu", &gpu), ("other", &other)]);
        assert!(d.is_empty(), "{d:?}");
        // Recorded as shaping H2D, which it measured: it counts.
        let mut h2d = set("580");
        h2d.shapes = vec![hwc_model::PathId::H2d];
        let gpu = with(&[("nvidia.driver_version", h2d)]);
        let d = differences(&[("gpu", &gpu), ("other", &other)]);
        assert_eq!(d.len(), 1, "{d:?}");
    }

    #[test]
    fn a_setting_an_old_profile_recorded_as_text_is_the_same_as_its_line() {
        let text = |line: &str| -> Setting { serde_json::from_str(&format!("{line:?}")).unwrap() };
        let old = with(&[
            ("cuda.device_max_connections", text("32 (set by hwceiling)")),
            (
                "cuda.timing",
                text("copies behind a latch, timed by events"),
            ),
        ]);
        let new = with(&[
            (
                "cuda.device_max_connections",
                Setting::about("32", "set by hwceiling"),
            ),
            (
                "cuda.timing",
                Setting::about("latched events", "copies behind a latch"),
            ),
        ]);
        let d = differences(&[("old", &old), ("new", &new)]);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].key, "cuda.timing");
        assert!(d[0].values[0].as_text && !d[0].values[1].as_text);
        let mut s = String::new();
        render(&mut s, &d);
        assert!(
            s.contains("it may be the same setting in other words"),
            "{s}"
        );
        // Two structured values that differ are not said to be a matter of words.
        let newer = with(&[("cuda.timing", Setting::about("events", "no latch"))]);
        let d = differences(&[("new", &new), ("newer", &newer)]);
        let mut s = String::new();
        render(&mut s, &d);
        assert!(!s.contains("other words"), "{s}");
    }

    #[test]
    fn a_fleet_groups_nodes_by_value() {
        let a = with(&[("nvidia.driver_version", set("580"))]);
        let b = with(&[("nvidia.driver_version", set("575"))]);
        let d = differences(&[("n1", &a), ("n2", &b), ("n3", &a)]);
        assert_eq!(
            d[0].values,
            vec![
                value("580", None, &["n1", "n3"]),
                value("575", None, &["n2"])
            ]
        );
    }

    #[test]
    fn the_same_value_chosen_by_someone_else_is_the_same_setting() {
        let key = "cuda.device_max_connections";
        let ours = with(&[(key, Setting::about("32", "set by hwceiling"))]);
        let users = with(&[(key, Setting::about("32", "from the environment"))]);
        assert!(differences(&[("a", &ours), ("b", &users)]).is_empty());
        let eight = with(&[(key, Setting::about("8", "from the environment"))]);
        let d = differences(&[("a", &ours), ("b", &eight), ("c", &users)]);
        assert_eq!(d.len(), 1);
        // a's words are not c's: the group says only the value, not who chose it for whom.
        assert_eq!(d[0].values[0], value("32", None, &["a", "c"]));
        assert_eq!(
            d[0].values[1],
            value("8", Some("from the environment"), &["b"])
        );
        let mut out = String::new();
        render(&mut out, &d);
        assert!(out.contains("    a, c: 32\n"), "{out}");
        assert!(out.contains("    b: 8 (from the environment)\n"), "{out}");
    }
}
