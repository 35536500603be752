//! Engines: the mechanisms that measure a path (the CUDA copy engine, the C library's `memcpy`,
//! io_uring reads, …). A case is (path, engine, typed spec): two engines can measure one path
//! side by side, and every figure says which engine made it.
//!
//! The set of engines is open: an engine names itself with an [`EngineId`] and declares what it
//! needs and measures in an [`EngineDecl`], which the planner reads; nothing here lists them.

use crate::plan::PathId;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;

/// An engine's stable name, as case keys, measurements and ceilings spell it (`cuda-copy`,
/// `host-memcpy`, `io-uring`, …): lowercase ASCII letters, digits and `-`.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct EngineId(#[schemars(with = "String")] Cow<'static, str>);

impl EngineId {
    /// An engine's id, for the engine's own constant.
    pub const fn new(id: &'static str) -> Self {
        EngineId(Cow::Borrowed(id))
    }

    /// An engine id given as text (`--engines`), checked.
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let ok = !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if ok {
            Ok(EngineId(Cow::Owned(t.to_string())))
        } else {
            Err(format!(
                "`{s}` is not an engine name (lowercase letters, digits and `-`)"
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EngineId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which cells of a path's matrix an engine measures.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CellKind {
    /// The spec's sweeps (sizes, streams, thread counts, queue depths).
    Sweep,
    /// The size a sustained ceiling is taken at (host RAM's largest size): where engines that
    /// measure only the ceiling compete with the sweep's.
    Sustained,
    /// The long drive tests (read cache, power states, gc-settle).
    LongTest,
}

/// A shared library an engine loads, and how to get it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Library {
    /// The name detection records it under (`libcuda`, `libcufile`, …: `Topology::tools`).
    pub name: String,
    /// What to install where it is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_hint: Option<String>,
}

/// What an engine needs of the machine before it can measure anything.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Needs {
    /// Root (or the capabilities root has).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub root: bool,
    /// An NVIDIA GPU.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gpu: bool,
    /// NVMe drives bound to vfio-pci (userspace drivers).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub vfio: bool,
    /// It writes to devices: only through the write gate (drives named, none in use).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub writes_devices: bool,
    /// Libraries it loads at run time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libraries: Vec<Library>,
}

/// An engine's declaration: what it is, what it measures, what it needs. The planner plans and
/// waives from it; the profile records it (`engines:`), so readers label figures by it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EngineDecl {
    pub id: EngineId,
    /// One line for people: the mechanism (`CUDA copy engine: cuMemcpyAsync behind a latch`).
    pub title: String,
    /// The paths it measures.
    pub paths: Vec<PathId>,
    /// The cells of those paths' matrices it measures.
    pub cells: Vec<CellKind>,
    #[serde(default)]
    pub needs: Needs,
    /// Its figures are the hardware's. False for an engine that measures the tool itself (the
    /// null engine): its figures are never ceilings, and compare, qualify and serve skip them.
    pub hardware: bool,
    /// Planned unless the run names its engines (`--engines`). An engine off by default runs
    /// only when named.
    pub default_on: bool,
}

impl EngineDecl {
    /// Whether the engine measures cells of `kind` of `path`.
    pub fn measures(&self, path: PathId, kind: CellKind) -> bool {
        self.paths.contains(&path) && self.cells.contains(&kind)
    }
}

/// Whether an engine can run here, as its probe found: the planner waives what it cannot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineStatus {
    pub decl: EngineDecl,
    /// `Err((reason, hint))` where its probe found the machine unusable for it.
    pub available: Result<(), (String, Option<String>)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_names_are_checked_and_read_as_written() {
        assert_eq!(EngineId::parse(" io-uring ").unwrap().as_str(), "io-uring");
        assert_eq!(
            EngineId::parse("cuda-copy").unwrap(),
            EngineId::new("cuda-copy")
        );
        for bad in ["", "CUDA", "io_uring", "a b", "é"] {
            assert!(EngineId::parse(bad).is_err(), "{bad}");
        }
        let y = serde_json::to_string(&EngineId::new("null")).unwrap();
        assert_eq!(y, "\"null\"");
        let back: EngineId = serde_json::from_str(&y).unwrap();
        assert_eq!(back, EngineId::new("null"));
    }
}
