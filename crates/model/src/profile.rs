//! The YAML ceiling profile: hwceiling's public, versioned API.
//!
//! Sections and field names follow the spec's YAML schema (`platform`, `cpu_features`, `gpus`,
//! `nvme`, `bar1`, `gdrcopy`, `gds`, `host_ram`, `topology`, `ceilings`). Only measured values are
//! present: a path that did not run is absent from its section and listed under `waived` with its
//! reason. Every figure a section names is the median of a measurement listed under
//! `measurements` with its min, max, spread and repetition count.

use crate::ceiling::{CeilingRecord, CeilingSource};
use crate::engine::{EngineDecl, EngineId};
use crate::long_tests::{absent_null_or, NvmeLongTests};
use crate::plan::{PathId, Waiver};
use crate::results::{Failure, Measurement};
use crate::topology::{
    CpuFeatures, Platform, PowerFeatures, PowerStateDescriptor, Routing, ToolStatus,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the profile format. Bump on any change that an older reader would misread;
/// adding an optional field does not need a bump.
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Profile {
    pub schema_version: u32,
    pub provenance: Provenance,
    pub platform: Platform,
    pub cpu_features: CpuFeatures,
    /// Keyed `gpu0`, `gpu1`, … in PCI address order.
    #[serde(default)]
    pub gpus: BTreeMap<String, GpuProfile>,
    #[serde(default)]
    pub nvme: NvmeProfile,
    /// NVMe DMA → GPU BAR1 per GPU (`gpu0`, …): the spec's `dispatcher-p2p` cold path.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bar1: BTreeMap<String, Bar1Profile>,
    /// NVMe DMA → the BAR of another PCI device named with `--p2p-bar` (a stand-in for BAR1,
    /// `pci-<bdf>-bar<N>`), in `bar1`'s shape with `bar_` for `bar1_`: never a GPU's figure.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pci_bar: BTreeMap<String, Bar1Profile>,
    #[serde(default)]
    pub gdrcopy: GdrcopyProfile,
    #[serde(default)]
    pub gds: GdsProfile,
    #[serde(default)]
    pub host_ram: HostRamProfile,
    #[serde(default)]
    pub topology: Routing,
    /// The engines of the run: what each measures and how (`measurements[].engine` names one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub engines: Vec<EngineDecl>,
    /// Flat map consumed by the efficiency evaluator: `efficiency = measured / ceilings[key]`.
    #[serde(default)]
    pub ceilings: BTreeMap<String, f64>,
    /// Each `ceilings` entry as a record, under the same key: its unit, which way is better, its
    /// path, GPU, drive count, NUMA locality, engine, and the measurement it is the median of or
    /// how it was derived. Readers learn what a ceiling is here, never from its key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ceiling_records: BTreeMap<String, CeilingRecord>,
    #[serde(default)]
    pub measurements: Vec<Measurement>,
    #[serde(default)]
    pub failures: Vec<Failure>,
    #[serde(default)]
    pub waived: Vec<Waiver>,
    #[serde(default)]
    pub tools: Vec<ToolStatus>,
    /// Things a reader must know (contention, unverified placement, degraded links, …).
    #[serde(default)]
    pub warnings: Vec<crate::Warning>,
}

impl Profile {
    pub fn measurement(&self, key: &str) -> Option<&Measurement> {
        self.measurements.iter().find(|m| m.key == key)
    }
    /// The declaration of engine `id`, as the run recorded it.
    pub fn engine(&self, id: &EngineId) -> Option<&EngineDecl> {
        self.engines.iter().find(|e| &e.id == id)
    }
    /// Whether engine `id` measures the hardware (not the tool itself, as the null engine does):
    /// only its figures may be ceilings. An engine the profile does not declare counts as one.
    pub fn hardware(&self, id: &EngineId) -> bool {
        self.engine(id).is_none_or(|e| e.hardware)
    }
    /// The engine's one-line title, or its id where the profile does not declare it.
    pub fn engine_title(&self, id: &EngineId) -> String {
        self.engine(id)
            .map_or_else(|| id.to_string(), |e| e.title.clone())
    }
    pub fn measurements_of(&self, path: PathId) -> impl Iterator<Item = &Measurement> {
        self.measurements.iter().filter(move |m| m.path == path)
    }
    pub fn waivers_of(&self, path: PathId) -> impl Iterator<Item = &Waiver> {
        self.waived.iter().filter(move |w| w.path == path)
    }
    /// The record of ceiling `key`, where the profile has one whose value is the ceiling's (a
    /// figure edited by hand in `ceilings` is no longer its record's).
    pub fn ceiling_record(&self, key: &str) -> Option<&CeilingRecord> {
        let value = *self.ceilings.get(key)?;
        self.ceiling_records.get(key).filter(|r| r.value == value)
    }

    /// What ceiling `key` is (its record's unit, direction, path, GPU, drives, locality), where
    /// the profile has that ceiling and a record of it. What a ceiling is does not change when
    /// its figure is edited, so this does not ask that the record's value be the figure's.
    pub fn ceiling_meta(&self, key: &str) -> Option<&crate::ceiling::CeilingMeta> {
        self.ceilings.get(key)?;
        self.ceiling_records.get(key).map(|r| &r.meta)
    }

    /// Whether ceiling `key` is a bandwidth an efficiency can be computed against (its record
    /// says GB/s, higher is better).
    pub fn is_bandwidth_ceiling(&self, key: &str) -> bool {
        self.ceiling_meta(key).is_some_and(|m| m.bandwidth())
    }

    /// The ceilings with a record of their value ([`Profile::ceiling_record`]), by key.
    pub fn records(&self) -> impl Iterator<Item = (&str, &CeilingRecord)> {
        self.ceiling_records
            .iter()
            .filter(|(k, r)| self.ceilings.get(k.as_str()) == Some(&r.value))
            .map(|(k, r)| (k.as_str(), r))
    }

    /// The drive-count bandwidth ceilings of `path` (NVMe raw read or write), fewest drives first:
    /// (drives, key, GB/s from `ceilings`). What a ceiling is comes from its record even where
    /// its figure was edited since.
    pub fn drive_ceilings(&self, path: PathId) -> Vec<(u32, &str, f64)> {
        let mut v: Vec<(u32, &str, f64)> = self
            .ceiling_records
            .iter()
            .filter(|(_, r)| r.meta.path == Some(path) && r.meta.unit == crate::ceiling::Unit::Gbps)
            .filter_map(|(k, r)| Some((r.meta.drives?, k.as_str(), *self.ceilings.get(k)?)))
            .collect();
        v.sort_by_key(|e| e.0);
        v
    }

    /// Whether the profile records where its ceilings come from (every profile but version 1
    /// files written before `ceiling_sources`).
    pub fn records_sources(&self) -> bool {
        self.ceiling_records.values().any(|r| r.source.is_some())
    }

    /// Where the ceiling `key` comes from; `None` when the profile has no such ceiling.
    ///
    /// Read from its record. A record that names a measurement the profile does not hold, or one
    /// whose median is not the ceiling (a hand-edited figure), and a ceiling without a record,
    /// give [`CeilingOrigin::Unknown`]: no guess by value, and no spread borrowed from another
    /// figure. Only a version 1 profile written before ceiling sources were recorded (no record
    /// has a source) falls back to what its key and figures tell
    /// ([`crate::v1::unrecorded_origin`]).
    pub fn ceiling_source(&self, key: &str) -> Option<CeilingOrigin<'_>> {
        let value = *self.ceilings.get(key)?;
        let Some(record) = self.ceiling_record(key) else {
            return Some(CeilingOrigin::Unknown);
        };
        Some(match &record.source {
            None if self.records_sources() => CeilingOrigin::Unknown,
            None => crate::v1::unrecorded_origin(self, key, value),
            Some(CeilingSource::Measured { measurement }) => match self.measurement(measurement) {
                Some(m) if m.gbps.median == value => CeilingOrigin::Measured(m),
                _ => CeilingOrigin::Unknown,
            },
            Some(CeilingSource::Derived { derived, inputs }) => CeilingOrigin::Derived {
                how: Some(derived),
                inputs: inputs.iter().filter_map(|k| self.measurement(k)).collect(),
            },
        })
    }
}

/// A ceiling's source resolved against the profile's measurements ([`Profile::ceiling_source`]).
#[derive(Debug, Clone, PartialEq)]
pub enum CeilingOrigin<'a> {
    /// The ceiling is this measurement's median.
    Measured(&'a Measurement),
    /// Arithmetic on measured figures: how (absent for a profile written before
    /// `ceiling_sources`), and the measurements it read that the profile holds.
    Derived {
        how: Option<&'a str>,
        inputs: Vec<&'a Measurement>,
    },
    /// The profile says nothing usable about this ceiling (a hand-edited or damaged profile).
    Unknown,
}

impl CeilingOrigin<'_> {
    /// The ceiling is, or was derived from, a measurement taken while its CPUs or GPU were busy
    /// (`contended`): a figure to rerun on an idle node.
    pub fn contended(&self) -> bool {
        match self {
            CeilingOrigin::Measured(m) => m.contended,
            CeilingOrigin::Derived { inputs, .. } => inputs.iter().any(|m| m.contended),
            CeilingOrigin::Unknown => false,
        }
    }

    /// The ceiling is, or was derived from, a measurement that spread more than it was held to
    /// in the window of repetitions kept ([`Measurement::unsteady`]): a figure to rerun.
    pub fn unsteady(&self) -> bool {
        match self {
            CeilingOrigin::Measured(m) => m.unsteady(),
            CeilingOrigin::Derived { inputs, .. } => inputs.iter().any(|m| m.unsteady()),
            CeilingOrigin::Unknown => false,
        }
    }
}

/// Who made the profile, when, where and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct Provenance {
    pub tool: String,
    pub version: String,
    pub git_revision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// RFC 3339 with offset.
    pub started_at: String,
    pub finished_at: String,
    /// The date used in the file names (`YYYY-MM-DD`, local time at start).
    pub date: String,
    pub command_line: String,
    /// Every option that shaped the run, as `name: value`.
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    /// The settings the figures were taken under (driver versions, clocks, timing and buffer
    /// methods), recorded by the engines and the run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub environment: crate::Environment,
    /// True when the run was interrupted: the profile holds the cases that finished.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// Whether the run was `--quick`, and the selections that narrowed it, as it judged them;
    /// absent in profiles of builds before it was recorded (their `options` decide then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<crate::RunChoices>,
}

impl Provenance {
    /// True for a `profile --quick` run (option `quick: "true"`): a tenth of the repetitions, a
    /// look, not a ceiling to publish.
    pub fn quick(&self) -> bool {
        match &self.run {
            Some(r) => r.quick,
            None => self.options.get("quick").map(String::as_str) == Some("true"),
        }
    }

    /// The selections that narrowed this run's plan below a full run's, as flags with their
    /// values (`--paths h2d`); empty for a run of the full plan. From `run`, or, for a profile
    /// of an earlier build, from its recorded options ([`legacy_narrowing`]).
    pub fn narrowed_by(&self) -> Vec<String> {
        match &self.run {
            Some(r) => r.narrowed_by.iter().map(ToString::to_string).collect(),
            None => legacy_narrowing(&self.options),
        }
    }
}

/// What makes a run's ceilings weaker than a complete run's: fewer repetitions (`--quick`),
/// cases that never ran (interrupted), cases that ran and failed (a driver fault, a data
/// mismatch: the ceilings they would have given are missing, or the best of fewer cases), or a
/// plan narrowed by a selection (`--paths h2d`, `--threads 4`, …: fewer ceilings, or ceilings
/// of a narrower sweep; see [`narrowing`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Completeness {
    pub quick: bool,
    pub interrupted: bool,
    /// Cases that ran and failed (the profile's `failures`).
    pub failed_cases: usize,
    /// The options that narrowed the run, as flags with their values; empty when none did.
    pub narrowed_by: Vec<String>,
}

/// [`Completeness`] as the JSON answers (`serve`'s `profile` objects, `hwceiling efficiency`)
/// give it.
#[derive(Debug, Serialize)]
pub struct CompletenessFields<'a> {
    pub complete: bool,
    pub quick: bool,
    pub interrupted: bool,
    pub failed_cases: usize,
    pub narrowed: bool,
    pub narrowed_by: &'a [String],
}

impl Completeness {
    /// The completeness of `p`'s run.
    pub fn of(p: &Profile) -> Self {
        Completeness {
            failed_cases: p.failures.len(),
            ..Self::of_run(&p.provenance)
        }
    }

    /// The completeness of the run `p` records, failures aside (they are the profile's).
    pub fn of_run(p: &Provenance) -> Self {
        Completeness {
            quick: p.quick(),
            interrupted: p.interrupted,
            failed_cases: 0,
            narrowed_by: p.narrowed_by(),
        }
    }

    /// True when a selection narrowed the run.
    pub fn narrowed(&self) -> bool {
        !self.narrowed_by.is_empty()
    }

    /// True for a full run, neither quick nor interrupted, with no failed case: its ceilings
    /// are the ones to divide by.
    pub fn complete(&self) -> bool {
        !self.quick && !self.interrupted && self.failed_cases == 0 && !self.narrowed()
    }

    /// The run in words: `a --quick run`, `an interrupted run`, `a run narrowed by --paths
    /// h2d`, `a run with 2 failed cases`, … .
    pub fn describe(&self) -> String {
        let run = match (self.quick, self.interrupted) {
            (false, false) if self.complete() => return "a complete run".to_string(),
            (false, false) => "a run",
            (true, false) => "a --quick run",
            (false, true) => "an interrupted run",
            (true, true) => "an interrupted --quick run",
        };
        let mut s = run.to_string();
        if self.narrowed() {
            s.push_str(&format!(" narrowed by {}", self.narrowed_by.join(", ")));
        }
        match self.failed_cases {
            0 => {}
            1 => s.push_str(" with 1 failed case"),
            n => s.push_str(&format!(" with {n} failed cases")),
        }
        s
    }

    /// The run's completeness as the JSON answers give it.
    pub fn fields(&self) -> CompletenessFields<'_> {
        CompletenessFields {
            complete: self.complete(),
            quick: self.quick,
            interrupted: self.interrupted,
            failed_cases: self.failed_cases,
            narrowed: self.narrowed(),
            narrowed_by: &self.narrowed_by,
        }
    }

    /// What is missing, for headers and labels: `quick`, `interrupted`, `failed`, `narrowed`,
    /// or several joined by commas (`quick,narrowed`); empty when complete.
    pub fn reasons(&self) -> String {
        let mut v = Vec::new();
        if self.quick {
            v.push("quick");
        }
        if self.interrupted {
            v.push("interrupted");
        }
        if self.failed_cases > 0 {
            v.push("failed");
        }
        if self.narrowed() {
            v.push("narrowed");
        }
        v.join(",")
    }
}

/// For a profile written before `provenance.run` was recorded: the options of its run
/// (`provenance.options`, as those builds recorded them) that narrow its plan below a full
/// run's, each as its flag and the value recorded (`--paths h2d`), in the order below; empty for
/// a run of the full plan. Runs now judge the same rules themselves ([`crate::Narrowing`]).
///
/// A narrowed run measures a part of the full plan, or a sweep other than the full one: its
/// profile lacks ceilings a full run has, or holds ceilings that are the best of fewer points.
/// An evaluator dividing by it gets "unknown ceiling", or an efficiency that reads high, so
/// `serve` does not let it replace a full profile, as it does not a `--quick` or interrupted one.
///
/// Narrowing:
/// - `paths`: only the paths named — unless it names every path there is (the full plan).
/// - `engines`: only the engines named (`--engines`), unless the run recorded an empty
///   `engines_left_out` (it named every engine on by default).
/// - `drives`: the NVMe sweeps read (and write) only the drives named. Not when the run recorded
///   an empty `drives_left_out`: it named every drive a full run reads. (Writes refuse a mounted
///   drive, so a write run on a machine with one names the drives to write with `write_drives`,
///   which leaves the reads on every drive: see docs/serve.md.) `drives` without
///   `drives_left_out` (a profile written before it was recorded, or a run whose `--paths` left
///   the NVMe paths out) cannot say, and counts.
/// - `target`: a file or block device measured instead of the drives: the NVMe ceilings are its
///   own, not the drives'.
/// - `threads`, `host_sizes`, `nvme_sizes`, `queue_depths`: a list replaces the default sweep, and
///   a ceiling is the best point of the sweep measured. Not when the run recorded an empty
///   `<option>_left_out` (`threads_left_out`, …): the list plans every case of the full run's
///   sweep on that machine (the host sweeps depend on its nodes; for host sizes the cases are
///   compared, since the largest size of a list also takes the streaming kernel and the
///   sustained ceiling), so it measures no fewer. A list with more points measures more: its
///   ceilings are the best of more points, never lower. Without `<option>_left_out` (a profile
///   written before it was recorded) a list cannot be told from a narrower one, and counts.
///
/// Not narrowing — they select no fewer cases and no fewer points:
/// - `quick` (a reason of its own, [`Provenance::quick`]), `allow_contended` (a contended figure
///   is marked, and an efficiency answer against it says so), `output_dir`.
/// - `allow_destructive_writes` and `write_drives` (the drives it writes, when named apart from
///   the reads): they add the write sweep to the plan; they take nothing away.
/// - `nvme_bytes_per_drive` (recorded by every run, 2GiB unless `--nvme-bytes`): how many bytes a
///   repetition moves per drive. Every case of the plan still runs, with its repetitions, over
///   the same points; it sets how long a repetition lasts (the tool keeps it at least 1MiB and
///   the largest block size), not which ceilings are measured or what they are the best of. How
///   steady each figure is stays judged per measurement (spread, `unsteady`), as for any run.
/// - `nvme_long_tests` and its settings (`nvme_idle_max_s`, `nvme_gc_write_s`,
///   `nvme_gc_settle_max_s`, `nvme_long_tests_left_out`): the long tests are cases beyond the
///   full plan, which has none, and their settings shape only them. A test that `all` left out
///   (`nvme_long_tests_left_out`) was left out because `--paths` left its path out, and `paths`
///   narrows that run already.
pub fn legacy_narrowing(options: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for key in [
        "paths",
        "engines",
        "drives",
        "target",
        "threads",
        "host_sizes",
        "nvme_sizes",
        "queue_depths",
    ] {
        let Some(value) = options.get(key) else {
            continue;
        };
        let flag = format!("--{} {value}", key.replace('_', "-"));
        match key {
            "paths" => {
                let named: Vec<&str> = value.split(',').map(str::trim).collect();
                if !PathId::ALL.iter().all(|p| named.contains(&p.as_str())) {
                    out.push(flag);
                }
            }
            "target" => out.push(flag),
            _ => match options.get(&format!("{key}_left_out")).map(String::as_str) {
                Some("") => {}
                Some(left_out) => out.push(format!("{flag} (leaves out {left_out})")),
                None => out.push(flag),
            },
        }
    }
    out
}

/// The spec's `gpus.gpuN` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct GpuProfile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_gen: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bar1_gib: Option<f64>,
    pub pci_bdf: String,
    /// Host bridge (root complex), e.g. `0000:40`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_index: Option<u32>,
    #[serde(default)]
    pub numa_node: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2d_4m_1stream_numa_local_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2d_peak_numa_local_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub d2h_peak_numa_local_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2d_4m_1stream_cross_numa_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2d_peak_cross_numa_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_numa_h2d_penalty_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub d2d_1stream_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub d2d_4stream_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplex_h2d_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplex_d2h_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplex_total_gbps: Option<f64>,
}

/// The spec's `nvme:` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct NvmeProfile {
    #[serde(default)]
    pub drives: Vec<NvmeDriveProfile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mdts_bytes: Option<u64>,
    /// `1_drive`, `4_drive`, … → GB/s.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub raw_read_gbps: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub raw_write_gbps: BTreeMap<String, f64>,
    /// The engine each `raw_read_gbps` figure came from (`io-uring`, `spdk-perf`): the fastest
    /// of those that measured the drive count.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub raw_read_engines: BTreeMap<String, EngineId>,
    /// As `raw_read_engines`, for `raw_write_gbps`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub raw_write_engines: BTreeMap<String, EngineId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_size_sweep_read_gbps: Option<IoSizeSweep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_size_sweep_write_gbps: Option<IoSizeSweep>,
    /// Drives that share a PCIe root complex: root (e.g. `0000:40`) → drive BDFs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub same_root_groups: BTreeMap<String, Vec<String>>,
    /// The drive BDFs (or target path) each drive count of the read sweep used: `1_drive` → BDFs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub read_drives_used: BTreeMap<String, Vec<String>>,
    /// As `read_drives_used`, for the write sweep.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub write_drives_used: BTreeMap<String, Vec<String>>,
    /// The spec's `dispatcher_cold_bottleneck_at_<N>drive`, per drive count (`4_drive` → `nvme`
    /// or `h2d`): which stage caps `min(NVMe aggregate, H2D)`. A string, so it lives here rather
    /// than in the numeric `ceilings` map.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dispatcher_cold_bottleneck: BTreeMap<String, String>,
    /// The spec's long drive tests (read cache, power states, gc-settle), per drive or
    /// `--target`, with every figure's statistics; absent unless `--nvme-long-tests` ran them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub long_tests: Vec<NvmeLongTests>,
}

/// `4kib: <GB/s>`, … plus the knee, and the engine that measured them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct IoSizeSweep {
    #[serde(flatten)]
    pub points: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimal_bytes: Option<u64>,
    /// The engine of every point: of those that measured the sweep, the one with the fastest
    /// point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineId>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct NvmeDriveProfile {
    #[serde(default)]
    pub bdf: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware_rev: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_tb: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mdts_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_gen: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_width: Option<u32>,
    #[serde(default)]
    pub numa_node: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vwc_enabled: Option<bool>,
    pub in_use: bool,
    /// `identify` or `sysfs`: where `mdts_bytes` came from (see the topology's NVMe drive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mdts_source: Option<String>,
    /// The kernel driver the drive is bound to (`nvme`, `vfio-pci`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// 4 KiB random-read latency at QD 1, 16 and 32 (average, p50, p99 per I/O), µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd1_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd1_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd1_p99_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd16_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd16_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd16_p99_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd32_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd32_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_qd32_p99_us: Option<f64>,
    /// Read-cache test: cold / hot 4 KiB QD1 read latency ≥ 1.5 (see `nvme.long_tests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_read_cache: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_speedup: Option<f64>,
    /// Read-cache test: median per-repetition average latency of the hot and cold reads, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_cache_hot_latency_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_cache_cold_latency_us: Option<f64>,
    /// gc-settle test: median write MB/s over the last third of its intervals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sustained_write_mbps: Option<f64>,
    /// gc-settle test: seconds after sustained writes until 4 KiB reads are back within 10 % of
    /// their baseline; null when they were not within the test's wait limit; absent when the
    /// test did not run.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "absent_null_or"
    )]
    #[schemars(with = "Option<u64>")]
    pub recommended_gc_settle_s: Option<Option<u64>>,
    /// Power-state test: the shortest idle gap after which the first read took more than twice
    /// the no-idle latency, s; null when no gap did; absent when the test did not run.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "absent_null_or"
    )]
    #[schemars(with = "Option<f64>")]
    pub power_state_transition_at_s: Option<Option<f64>>,
    /// Identify Controller's power state descriptors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub power_states: Vec<PowerStateDescriptor>,
    /// Identify Controller APSTA: autonomous power state transitions are supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apst_supported: Option<bool>,
    /// Get Features APST and Power Management, or why they could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_features: Option<PowerFeatures>,
}

/// The spec's `bar1.gpuN` entry (NVMe DMA → BAR1), and a `pci_bar` entry. Figures are medians
/// in GB/s of the best measurement of each drive count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct Bar1Profile {
    /// The PCI address of the device whose BAR the drives read into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bdf: Option<String>,
    /// Pollers on the device's NUMA node: `host_ram_<N>drive_gbps`, `bar1_<N>drive_gbps`
    /// (`bar_` for a PCI BAR) and `overhead_<N>drive_pct` (how far the BAR figure lies under
    /// host RAM's, in % of host RAM's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub numa_local: BTreeMap<String, f64>,
    /// Pollers on another node: the same figures, and `penalty_vs_local_pct` (how far the BAR
    /// figure lies under the NUMA-local one of the same drive count, in % of it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cross_numa: BTreeMap<String, f64>,
    /// Adding drives gained under 5 % somewhere along the NUMA-local BAR figures: the BAR
    /// saturates. Absent with fewer than two drive counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturated: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct GdrcopyProfile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_to_bar1_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bar1_to_cpu_gbps: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct GdsProfile {
    pub available: bool,
    /// How libcufile ran: `nvfs` (GPUDirect through nvidia-fs), `p2pdma` (GPUDirect through the
    /// kernel's PCI P2PDMA) or `compat` (a POSIX bounce through host memory inside libcufile);
    /// absent where no cuFile case ran. `1drive_gbps`/`4drive_gbps` are set for a direct mode
    /// only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(
        default,
        rename = "1drive_gbps",
        skip_serializing_if = "Option::is_none"
    )]
    pub one_drive_gbps: Option<f64>,
    #[serde(
        default,
        rename = "4drive_gbps",
        skip_serializing_if = "Option::is_none"
    )]
    pub four_drive_gbps: Option<f64>,
}

/// The spec's `host_ram:` section. Figures are bytes copied per second (a copy of N bytes
/// counts N, not 2N), at the best thread count, at the largest size of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, Default)]
pub struct HostRamProfile {
    /// Best same-node figure over all nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_numa_gbps: Option<f64>,
    /// Best cross-node figure over all node pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_numa_gbps: Option<f64>,
    /// Per source→destination node pair (`n0-n0`, `n0-n1`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pairs: BTreeMap<String, HostRamPair>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostRamPair {
    pub src_node: u32,
    pub dst_node: u32,
    pub cpu_node: u32,
    pub size_bytes: u64,
    /// Median at the best thread count.
    pub best_gbps: f64,
    pub best_threads: u32,
    /// The measurement that `best_gbps` comes from.
    pub key: String,
    /// The engine of that measurement (`host-memcpy`, `host-streaming`, …).
    pub engine: EngineId,
    /// Median at each thread count of the sweep, at `size_bytes`, with the best's engine.
    pub sweep_gbps: BTreeMap<u32, f64>,
    /// Per engine that measured `size_bytes`: median at each thread count.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub engine_sweeps_gbps: BTreeMap<EngineId, BTreeMap<u32, f64>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Stats;

    #[test]
    fn quick_and_interrupted_runs_are_not_complete() {
        let mut p = Provenance::default();
        assert!(
            Completeness::of_run(&p).complete() && !p.quick(),
            "a profile without options is complete"
        );
        p.options.insert("quick".into(), "false".into());
        assert!(Completeness::of_run(&p).complete());
        p.options.insert("quick".into(), "true".into());
        assert!(p.quick() && !Completeness::of_run(&p).complete());
        p.options.insert("quick".into(), "false".into());
        p.interrupted = true;
        assert!(!p.quick() && !Completeness::of_run(&p).complete());
    }

    #[test]
    fn a_run_with_failed_cases_is_not_complete_and_says_how_many() {
        let failed = |n| Completeness {
            failed_cases: n,
            ..Completeness::default()
        };
        assert!(failed(0).complete());
        assert!(!failed(1).complete());
        assert_eq!(failed(1).describe(), "a run with 1 failed case");
        assert_eq!(failed(2).reasons(), "failed");
        let c = Completeness {
            quick: true,
            narrowed_by: vec!["--paths h2d".into()],
            ..failed(3)
        };
        assert_eq!(
            c.describe(),
            "a --quick run narrowed by --paths h2d with 3 failed cases"
        );
        assert_eq!(c.reasons(), "quick,failed,narrowed");
    }

    #[test]
    fn each_selection_that_narrows_the_plan_is_named_and_the_rest_are_not() {
        let every_path: Vec<&str> = PathId::ALL.iter().map(|p| p.as_str()).collect();
        let every_path = every_path.join(",");
        let all_but_one = PathId::ALL[1..]
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let all_but_one_flag = format!("--paths {all_but_one}");
        // The options a run recorded, and what narrowed it.
        type Row<'a> = (Vec<(&'a str, &'a str)>, Vec<&'a str>);
        #[rustfmt::skip]
        let table: Vec<Row> = vec![
            // What a full run records, and what never narrows.
            (vec![], vec![]),
            (vec![("output_dir", "profiling"), ("quick", "true"), ("allow_contended", "true")],
             vec![]),
            (vec![("allow_destructive_writes", "true"), ("nvme_bytes_per_drive", "1048576")],
             vec![]),
            (vec![("nvme_long_tests", "read-cache,power-states"), ("nvme_idle_max_s", "1"),
                  ("nvme_gc_write_s", "3"), ("nvme_gc_settle_max_s", "0"),
                  ("nvme_long_tests_left_out", "gc-settle (nvme_write not in --paths)")],
             vec![]),
            // Paths: some, or every one.
            (vec![("paths", "h2d")], vec!["--paths h2d"]),
            (vec![("paths", &all_but_one)], vec![&all_but_one_flag]),
            (vec![("paths", &every_path)], vec![]),
            // Engines: some of those on by default, or every one of them (and more).
            (vec![("engines", "null"), ("engines_left_out", "host-memcpy,cuda-copy")],
             vec!["--engines null (leaves out host-memcpy,cuda-copy)"]),
            (vec![("engines", "host-memcpy,cuda-copy,null"), ("engines_left_out", "")], vec![]),
            // Drives: some, every one a full run reads, or unknown.
            (vec![("drives", "nvme0")], vec!["--drives nvme0"]),
            (vec![("drives", "S1,S2"), ("drives_left_out", "")], vec![]),
            (vec![("drives", "nvme0"), ("drives_left_out", "nvme1,nvme2")],
             vec!["--drives nvme0 (leaves out nvme1,nvme2)"]),
            // A target, and each sweep given.
            (vec![("target", "/scratch/f")], vec!["--target /scratch/f"]),
            (vec![("threads", "4")], vec!["--threads 4"]),
            (vec![("host_sizes", "4MiB")], vec!["--host-sizes 4MiB"]),
            (vec![("nvme_sizes", "128KiB,1MiB")], vec!["--nvme-sizes 128KiB,1MiB"]),
            (vec![("queue_depths", "64")], vec!["--queue-depths 64"]),
            // A sweep that holds every point of the full run's (and more), or leaves some out.
            (vec![("threads", "1,2,4,8,16,32"), ("threads_left_out", "")], vec![]),
            (vec![("threads", "1,16"), ("threads_left_out", "2,4,8")],
             vec!["--threads 1,16 (leaves out 2,4,8)"]),
            (vec![("host_sizes", "4MiB,16MiB,64MiB,256MiB"), ("host_sizes_left_out", "")],
             vec![]),
            (vec![("nvme_sizes", "1MiB"), ("nvme_sizes_left_out", "4KiB,8MiB")],
             vec!["--nvme-sizes 1MiB (leaves out 4KiB,8MiB)"]),
            (vec![("queue_depths", "32,16,64"), ("queue_depths_left_out", "")], vec![]),
            // A target is never a drive's sweep, whatever else was recorded.
            (vec![("target", "/scratch/f"), ("target_left_out", "")],
             vec!["--target /scratch/f"]),
            // Several: in a fixed order, whatever the map's.
            (vec![("threads", "4"), ("paths", "host_ram"), ("quick", "true")],
             vec!["--paths host_ram", "--threads 4"]),
        ];
        for (options, narrowed_by) in table {
            let mut p = Provenance::default();
            for (k, v) in &options {
                p.options.insert(k.to_string(), v.to_string());
            }
            assert_eq!(p.narrowed_by(), narrowed_by, "{options:?}");
            let c = Completeness::of_run(&p);
            assert_eq!(c.narrowed(), !narrowed_by.is_empty(), "{options:?}");
            assert_eq!(
                c.complete(),
                narrowed_by.is_empty() && !p.quick(),
                "{options:?}"
            );
        }
    }

    fn measurement(key: &str, median: f64, spread_pct: f64, n: u32) -> Measurement {
        Measurement {
            key: key.into(),
            path: PathId::H2d,
            engine: EngineId::new("cuda-copy"),
            cell: key.into(),
            spec: crate::Spec::GpuCopy(crate::GpuCopySpec {
                gpu: "gpu0".into(),
                size_bytes: 1 << 20,
                streams: 1,
                host_memory: Some(crate::HostMemory::Pinned),
                host_node: Some(0),
                cpu_node: Some(0),
                direction: None,
            }),
            bytes_per_rep: 1 << 20,
            gbps: Stats {
                median,
                min: median,
                max: median,
                spread_pct,
                n,
            },
            cold_gbps: None,
            warmup: 2,
            latency_us: None,
            latency_p50_us: None,
            latency_p99_us: None,
            placement: None,
            cache_resident: false,
            contended: false,
            spread_limit_pct: None,
            evidence: Default::default(),
            notes: vec![],
        }
    }

    /// Two measurements share the median 50.0; a derived penalty happens to equal a median too;
    /// the optimal chunk is a size.
    fn profile() -> Profile {
        Profile {
            schema_version: SCHEMA_VERSION,
            provenance: Provenance::default(),
            platform: Platform::default(),
            cpu_features: CpuFeatures::default(),
            gpus: BTreeMap::new(),
            nvme: NvmeProfile::default(),
            bar1: BTreeMap::new(),
            pci_bar: BTreeMap::new(),
            gdrcopy: GdrcopyProfile::default(),
            gds: GdsProfile::default(),
            host_ram: HostRamProfile::default(),
            topology: Routing::default(),
            engines: vec![],
            ceilings: [
                ("warm_gpu0_peak_gbps", 50.0),
                ("warm_gpu0_cross_numa_penalty_gbps", 3.0),
                ("nvme_optimal_read_chunk_bytes", 3.0),
                ("host_ram_same_numa_gbps", 7.0),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            ceiling_records: BTreeMap::new(),
            measurements: vec![
                measurement("h2d/gpu0/a", 50.0, 1.0, 12),
                measurement("h2d/gpu0/b", 50.0, 4.0, 20),
                measurement("h2d/gpu0/c", 3.0, 9.0, 5),
            ],
            failures: vec![],
            waived: vec![],
            tools: vec![],
            warnings: vec![],
        }
    }

    /// `p` with a record of each ceiling, from `source(key)`.
    fn recorded(mut p: Profile, source: impl Fn(&str) -> Option<CeilingSource>) -> Profile {
        p.ceiling_records = p
            .ceilings
            .iter()
            .map(|(k, v)| {
                let record = CeilingRecord {
                    carried_from: None,
                    value: *v,
                    meta: crate::v1::ceiling_meta(k, None),
                    engine: None,
                    source: source(k),
                };
                (k.clone(), record)
            })
            .collect();
        p
    }

    /// `p` as a version 1 profile written before ceiling sources reads: records without sources.
    fn unsourced(p: Profile) -> Profile {
        recorded(p, |_| None)
    }

    fn with_sources(p: Profile) -> Profile {
        let sources: BTreeMap<String, CeilingSource> = [
            ("warm_gpu0_peak_gbps", CeilingSource::measured("h2d/gpu0/b")),
            (
                "warm_gpu0_cross_numa_penalty_gbps",
                CeilingSource::derived(
                    "one-stream local peak minus cross-NUMA peak",
                    vec!["h2d/gpu0/a".into(), "h2d/gpu0/c".into()],
                ),
            ),
            (
                "nvme_optimal_read_chunk_bytes",
                CeilingSource::derived("knee", vec![]),
            ),
            (
                "host_ram_same_numa_gbps",
                CeilingSource::measured("host_ram/gone"),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        recorded(p, |k| sources.get(k).cloned())
    }

    fn measured_key<'a>(o: &CeilingOrigin<'a>) -> Option<&'a str> {
        match o {
            CeilingOrigin::Measured(m) => Some(&m.key),
            _ => None,
        }
    }

    #[test]
    fn a_ceiling_source_is_found_by_key_not_by_value() {
        let p = with_sources(profile());
        let peak = p.ceiling_source("warm_gpu0_peak_gbps").unwrap();
        assert_eq!(
            measured_key(&peak),
            Some("h2d/gpu0/b"),
            "the named measurement, not the first with an equal median"
        );
        match p
            .ceiling_source("warm_gpu0_cross_numa_penalty_gbps")
            .unwrap()
        {
            CeilingOrigin::Derived { how, inputs } => {
                assert_eq!(how, Some("one-stream local peak minus cross-NUMA peak"));
                let keys: Vec<&str> = inputs.iter().map(|m| m.key.as_str()).collect();
                assert_eq!(keys, ["h2d/gpu0/a", "h2d/gpu0/c"]);
            }
            other => panic!("derived, although a median equals it: {other:?}"),
        }
        assert_eq!(
            p.ceiling_source("host_ram_same_numa_gbps"),
            Some(CeilingOrigin::Unknown),
            "names a measurement the profile does not hold"
        );
        let mut q = p.clone();
        q.ceilings.insert("gpu0_d2h_peak_gbps".into(), 50.0);
        assert_eq!(
            q.ceiling_source("gpu0_d2h_peak_gbps"),
            Some(CeilingOrigin::Unknown),
            "a ceiling without a record: no guess by value"
        );
        assert_eq!(p.ceiling_source("no_such_gbps"), None);
        // A ceiling edited by hand no longer is its named measurement's median: that
        // measurement's spread and N are not this figure's.
        let mut r = p.clone();
        let peak = r.ceilings["warm_gpu0_peak_gbps"];
        r.ceilings.insert("warm_gpu0_peak_gbps".into(), peak + 1.0);
        assert_eq!(
            r.ceiling_source("warm_gpu0_peak_gbps"),
            Some(CeilingOrigin::Unknown)
        );
    }

    #[test]
    fn a_version_1_profile_without_ceiling_sources_falls_back_to_matching_medians() {
        let p = unsourced(profile());
        assert_eq!(
            measured_key(&p.ceiling_source("warm_gpu0_peak_gbps").unwrap()),
            Some("h2d/gpu0/a"),
            "the old rule: the first equal median"
        );
        let derived = CeilingOrigin::Derived {
            how: None,
            inputs: vec![],
        };
        assert_eq!(
            p.ceiling_source("warm_gpu0_cross_numa_penalty_gbps"),
            Some(derived.clone()),
            "a penalty is a difference, although a median (h2d/gpu0/c) equals it"
        );
        assert_eq!(
            p.ceiling_source("nvme_optimal_read_chunk_bytes"),
            Some(derived),
            "a size is never a measurement's median"
        );
        assert_eq!(
            p.ceiling_source("host_ram_same_numa_gbps"),
            Some(CeilingOrigin::Unknown),
            "no equal median: typed in, or its measurement lost; not guessed derived"
        );
    }

    #[test]
    fn contention_comes_from_the_source_or_any_input() {
        let mut p = with_sources(profile());
        assert!(!p
            .ceiling_source("warm_gpu0_cross_numa_penalty_gbps")
            .unwrap()
            .contended());
        p.measurements[2].contended = true;
        assert!(p
            .ceiling_source("warm_gpu0_cross_numa_penalty_gbps")
            .unwrap()
            .contended());
        assert!(!p.ceiling_source("warm_gpu0_peak_gbps").unwrap().contended());
        p.measurements[1].contended = true;
        assert!(p.ceiling_source("warm_gpu0_peak_gbps").unwrap().contended());
    }

    #[test]
    fn ceiling_records_in_yaml_name_a_measurement_key_or_a_derivation() {
        let p = with_sources(profile());
        let y = serde_saphyr::to_string(&p.ceiling_records).unwrap();
        assert_eq!(
            y,
            "host_ram_same_numa_gbps:\n  value: 7.0\n  unit: gbps\n  better: higher\n  path: host_ram\n  numa: local\n  source:\n    measurement: host_ram/gone\n\
             nvme_optimal_read_chunk_bytes:\n  value: 3.0\n  unit: bytes\n  better: neither\n  path: nvme_read\n  source:\n    derived: knee\n\
             warm_gpu0_cross_numa_penalty_gbps:\n  value: 3.0\n  unit: gbps\n  better: lower\n  path: h2d\n  gpu: gpu0\n  numa: cross\n  source:\n    derived: one-stream local peak minus cross-NUMA peak\n    inputs:\n    - h2d/gpu0/a\n    - h2d/gpu0/c\n\
             warm_gpu0_peak_gbps:\n  value: 50.0\n  unit: gbps\n  better: higher\n  path: h2d\n  gpu: gpu0\n  numa: local\n  source:\n    measurement: h2d/gpu0/b\n"
        );
        let back: Profile = serde_saphyr::from_str(&serde_saphyr::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
        let json: Profile = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(json, p);
        // A profile without records reads, and writes none back.
        let old = profile();
        let y = serde_saphyr::to_string(&old).unwrap();
        assert!(!y.contains("ceiling_records"), "{y}");
        let back: Profile = serde_saphyr::from_str(&y).unwrap();
        assert!(back.ceiling_records.is_empty());
    }
}
