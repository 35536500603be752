//! One setting a run was measured under (`provenance.environment`): its value, short, as two
//! runs compare it, and one line on who set it or what it means. Sizes and PCIe links also
//! carry their typed reading, so no reader parses the value.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The settings of a run, by key (`cuda.device_max_connections`, `gpu0.pcie_link_load`, …).
pub type Environment = BTreeMap<String, Setting>;

/// The name of a GPU's link as NVML read it with the warm-up's copies in flight.
pub const PCIE_LINK_LOAD: &str = "pcie_link_load";

/// The key of `gpu`'s setting `name` (`gpu0.pcie_link_load`): how the GPU backend writes it and
/// every reader looks it up.
pub fn gpu_key(gpu: &str, name: &str) -> String {
    format!("{gpu}.{name}")
}

/// A PCIe link's generation and width, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkState {
    pub gen: u32,
    pub width: u32,
}

impl std::fmt::Display for LinkState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "gen{} x{}", self.gen, self.width)
    }
}

/// One setting.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Setting {
    /// The setting itself, short (`32`, `gen5 x16`, `always [madvise] never`): what `compare`
    /// holds against another run's.
    pub value: String,
    /// Who set it, or what it means, in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub about: Option<String>,
    /// The value as a number of bytes, where it is a size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// The value as a PCIe link, where it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkState>,
    /// The paths whose figures it shapes: those its engine measured in the run (the runner
    /// records them); empty where it shapes every path, or in profiles before this field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shapes: Vec<crate::PathId>,
    /// Read from a profile that held the setting as one line of text (an older build's): its
    /// `value` is that whole line, value and description in the words of the build that wrote
    /// it (written so where such a profile is written again).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub as_text: bool,
}

impl Setting {
    /// A value with one line about it.
    pub fn about(value: impl Into<String>, about: impl Into<String>) -> Setting {
        Setting {
            about: Some(about.into()),
            ..Setting::from(value.into())
        }
    }

    /// A size in bytes, with one line about it.
    pub fn bytes(bytes: u64, about: impl Into<String>) -> Setting {
        Setting {
            bytes: Some(bytes),
            ..Setting::about(bytes.to_string(), about)
        }
    }

    /// A PCIe link reading.
    pub fn link(link: LinkState) -> Setting {
        Setting {
            link: Some(link),
            ..Setting::from(link.to_string())
        }
    }
}

impl From<String> for Setting {
    fn from(value: String) -> Setting {
        Setting {
            value,
            about: None,
            bytes: None,
            link: None,
            shapes: Vec::new(),
            as_text: false,
        }
    }
}

impl From<&str> for Setting {
    fn from(value: &str) -> Setting {
        Setting::from(value.to_string())
    }
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.about {
            Some(about) => write!(f, "{} ({about})", self.value),
            None => f.write_str(&self.value),
        }
    }
}

/// Profiles written before settings were structured hold each as one string: it reads as the
/// value, with nothing about it. Their words are not taken apart, with one exception at this
/// upgrade boundary: a whole value of the form `gen5 x16` (how those builds recorded a GPU's
/// link under load, which `qualify` checks) also reads as its link.
impl<'de> Deserialize<'de> for Setting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            value: String,
            #[serde(default)]
            about: Option<String>,
            #[serde(default)]
            bytes: Option<u64>,
            #[serde(default)]
            link: Option<LinkState>,
            #[serde(default)]
            shapes: Vec<crate::PathId>,
            #[serde(default)]
            as_text: bool,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Text(String),
            Full(Full),
        }
        Ok(match Either::deserialize(d)? {
            Either::Text(value) => Setting {
                link: legacy_link(&value),
                as_text: true,
                ..Setting::from(value)
            },
            Either::Full(f) => Setting {
                value: f.value,
                about: f.about,
                bytes: f.bytes,
                link: f.link,
                shapes: f.shapes,
                as_text: f.as_text,
            },
        })
    }
}

/// `gen<N> x<M>`, the whole string, as builds before structured settings wrote a link.
fn legacy_link(s: &str) -> Option<LinkState> {
    let (gen, width) = s.strip_prefix("gen")?.split_once(" x")?;
    Some(LinkState {
        gen: gen.parse().ok()?,
        width: width.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_reads_back_and_an_old_string_reads_as_its_value() {
        let mut env = Environment::new();
        env.insert(
            "gpu0.pcie_link_load".into(),
            Setting::link(LinkState { gen: 5, width: 16 }),
        );
        env.insert(
            "host.glibc_non_temporal_threshold".into(),
            Setting::bytes(
                190_316_544,
                "181.5 MiB: glibc's memcpy streams calls this long",
            ),
        );
        env.insert("cuda.timing".into(), "latched".into());
        let json = serde_json::to_string(&env).unwrap();
        let back: Environment = serde_json::from_str(&json).unwrap();
        assert_eq!(back, env);
        assert_eq!(back["gpu0.pcie_link_load"].value, "gen5 x16");
        let old: Environment =
            serde_json::from_str(r#"{"cuda.device_max_connections": "32 (set by hwceiling)"}"#)
                .unwrap();
        let s = &old["cuda.device_max_connections"];
        assert_eq!(
            (s.value.as_str(), &s.about),
            ("32 (set by hwceiling)", &None)
        );
        assert!(s.as_text && !back["cuda.timing"].as_text);
        assert_eq!(
            Setting::about("32", "set by hwceiling").to_string(),
            "32 (set by hwceiling)"
        );
        assert!(serde_json::from_str::<Setting>(r#"{"valu": "x"}"#).is_err());
        // An old link reading is still a link; nothing else of an old string is.
        let old: Setting = serde_json::from_str(r#""gen4 x8""#).unwrap();
        assert_eq!(old.link, Some(LinkState { gen: 4, width: 8 }));
        for other in ["gen4 x8 (idle)", "x8", "gen4", "8"] {
            let s: Setting = serde_json::from_str(&format!("{other:?}")).unwrap();
            assert_eq!(s.link, None, "{other}");
        }
    }
}
