//! A ceiling as a record: its value with what it is a ceiling of — unit, which way is better, the
//! path, GPU, drive count, NUMA locality, the engine and the measurement it comes from. The
//! profile's flat `ceilings:` map (what the evaluator divides by) holds the values; its
//! `ceiling_records:` hold the records under the same keys, and every reader that needs to know
//! what a ceiling is reads them, never the key's spelling.

use crate::engine::EngineId;
use crate::plan::PathId;
use serde::{Deserialize, Serialize};

/// What a ceiling's value counts.
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
pub enum Unit {
    /// 10⁹ bytes per second.
    Gbps,
    /// A size in bytes (an optimal chunk).
    Bytes,
    /// A count of drives (the cold path's crossover).
    Drives,
    /// A percentage (a penalty of one figure against another).
    Pct,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Gbps => "gbps",
            Unit::Bytes => "bytes",
            Unit::Drives => "drives",
            Unit::Pct => "pct",
        }
    }
}

/// Which way a figure should move.
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
pub enum Better {
    /// A bandwidth: a drop is a regression.
    Higher,
    /// A penalty: a rise is a regression.
    Lower,
    /// A size or count: a change is reported, never a regression.
    Neither,
}

/// NUMA locality of the host memory a ceiling was measured with.
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
pub enum Numa {
    Local,
    Cross,
}

impl Numa {
    pub fn as_str(self) -> &'static str {
        match self {
            Numa::Local => "local",
            Numa::Cross => "cross",
        }
    }
}

/// Where one ceiling comes from.
///
/// In YAML either `{measurement: KEY}` or `{derived: HOW, inputs: [KEY, …]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum CeilingSource {
    /// The ceiling is the median of the measurement with this `key` (in `measurements`): its
    /// spread, repetition count and contention are the ceiling's.
    Measured { measurement: String },
    /// The ceiling is arithmetic on measured figures (a difference, a minimum of two paths, a
    /// ratio, a knee), described in one line; `inputs` are the keys of the measurements it read.
    Derived {
        derived: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        inputs: Vec<String>,
    },
}

impl CeilingSource {
    pub fn measured(key: impl Into<String>) -> Self {
        CeilingSource::Measured {
            measurement: key.into(),
        }
    }
    pub fn derived(how: impl Into<String>, inputs: Vec<String>) -> Self {
        CeilingSource::Derived {
            derived: how.into(),
            inputs,
        }
    }
}

/// What a ceiling is, apart from its value and source: the facts its key names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CeilingMeta {
    pub unit: Unit,
    pub better: Better,
    /// The path it is a ceiling of; absent for one derived across paths (the cold path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathId>,
    /// The GPU it concerns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// The number of drives it concerns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drives: Option<u32>,
    /// The locality of its host memory, where it has host memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<Numa>,
}

impl CeilingMeta {
    /// A bandwidth of `path` (higher is better).
    pub fn gbps(path: Option<PathId>) -> Self {
        CeilingMeta {
            unit: Unit::Gbps,
            better: Better::Higher,
            path,
            gpu: None,
            drives: None,
            numa: None,
        }
    }
    /// A bandwidth lost (lower is better).
    pub fn penalty_gbps(path: Option<PathId>) -> Self {
        CeilingMeta {
            better: Better::Lower,
            ..Self::gbps(path)
        }
    }
    /// A share lost, in % (lower is better).
    pub fn penalty_pct(path: Option<PathId>) -> Self {
        CeilingMeta {
            unit: Unit::Pct,
            better: Better::Lower,
            ..Self::gbps(path)
        }
    }
    /// A size (neither way is better).
    pub fn bytes(path: Option<PathId>) -> Self {
        CeilingMeta {
            unit: Unit::Bytes,
            better: Better::Neither,
            ..Self::gbps(path)
        }
    }
    /// A drive count (neither way is better).
    pub fn drive_count(path: Option<PathId>) -> Self {
        CeilingMeta {
            unit: Unit::Drives,
            better: Better::Neither,
            ..Self::gbps(path)
        }
    }
    pub fn gpu(self, gpu: &str) -> Self {
        CeilingMeta {
            gpu: Some(gpu.into()),
            ..self
        }
    }
    pub fn drives(self, n: u32) -> Self {
        CeilingMeta {
            drives: Some(n),
            ..self
        }
    }
    pub fn numa(self, numa: Numa) -> Self {
        CeilingMeta {
            numa: Some(numa),
            ..self
        }
    }
    /// A bandwidth an efficiency can be computed against: GB/s where higher is better.
    pub fn bandwidth(&self) -> bool {
        self.unit == Unit::Gbps && self.better == Better::Higher
    }
}

/// One ceiling: its value (as the flat `ceilings:` map holds it), what it is, which engine
/// measured it, and where it comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CeilingRecord {
    pub value: f64,
    #[serde(flatten)]
    pub meta: CeilingMeta,
    /// The engine of the measurement it is the median of, or that every measurement it was
    /// derived from shares; absent where it is derived from several engines' figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineId>,
    /// Where it comes from; absent only in profiles written before sources were recorded
    /// (version 1 files without `ceiling_sources`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<CeilingSource>,
    /// Present on a ceiling this run did not measure but took from an earlier run of the same
    /// drives (`hwceiling merge`): that run, and the drives it was measured on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_from: Option<CarriedFrom>,
}

/// The earlier run a carried ceiling was measured in ([`CeilingRecord::carried_from`]). Its
/// `source` names measurements that `hwceiling merge` copied from that run's profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CarriedFrom {
    /// The file name of that run's profile.
    pub file: String,
    /// When that run finished (its `provenance.finished_at`).
    pub finished_at: String,
    /// The serial numbers of the drives that run wrote (blank then).
    pub drives: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_written_with_its_facts_flat() {
        let r = CeilingRecord {
            carried_from: None,
            value: 55.4,
            meta: CeilingMeta::gbps(Some(PathId::H2d))
                .gpu("gpu0")
                .numa(Numa::Local),
            engine: Some(EngineId::new("cuda-copy")),
            source: Some(CeilingSource::measured(
                "h2d/cuda-copy/gpu0/local/256MiB/s1",
            )),
        };
        let y = serde_saphyr::to_string(&r).unwrap();
        assert_eq!(
            y,
            "value: 55.4\nunit: gbps\nbetter: higher\npath: h2d\ngpu: gpu0\nnuma: local\n\
             engine: cuda-copy\nsource:\n  measurement: h2d/cuda-copy/gpu0/local/256MiB/s1\n"
        );
        let back: CeilingRecord = serde_saphyr::from_str(&y).unwrap();
        assert_eq!(back, r);
        assert!(r.meta.bandwidth());
        assert!(!CeilingMeta::penalty_gbps(None).bandwidth());
        assert!(!CeilingMeta::bytes(Some(PathId::NvmeRead)).bandwidth());
    }
}
