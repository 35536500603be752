//! Schema version 1 profiles, frozen as they were written, and their upgrade to the current
//! schema: every reader takes old profiles through [`V1Profile::upgrade`], so old and new
//! profiles read, compare and qualify alike.
//!
//! Version 1 had no engine axis: a case was a path and a bag of optional parameters, and its key
//! had no engine. Each v1 path had exactly one engine, so the upgrade names it from the path (and,
//! for host RAM, the `copy_kernel` parameter) and moves the engine into every key
//! ([`upgrade_key`]). This module is the one place that reads what version 1 spelled in its keys;
//! current profiles carry those facts as fields.

use crate::ceiling::{Better, CeilingMeta, CeilingRecord, CeilingSource, Numa, Unit};
use crate::engine::{CellKind, EngineDecl, EngineId, Needs};
use crate::long_tests::NvmeLongTests;
use crate::plan::{case_key, PathId, Waiver};
use crate::profile::{
    Bar1Profile, CeilingOrigin, GdrcopyProfile, GdsProfile, GpuProfile, HostRamPair,
    HostRamProfile, NvmeProfile, Profile, Provenance,
};
use crate::results::{Failure, Measurement, Placement, Stats};
use crate::spec::{
    CopyDirection, GpuCopySpec, HostCopySpec, HostMemory, NvmePattern, NvmeSpec, NvmeTest, Spec,
};
use crate::topology::{CpuFeatures, Platform, Routing, ToolStatus};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The engines of version 1, each the only one of its paths then.
pub const V1_CUDA: EngineId = EngineId::new("cuda-copy");
pub const V1_HOST_MEMCPY: EngineId = EngineId::new("host-memcpy");
pub const V1_HOST_STREAMING: EngineId = EngineId::new("host-streaming");
pub const V1_IO_URING: EngineId = EngineId::new("io-uring");

/// The engines of version 1, as its profiles were measured (they recorded none).
pub fn v1_engines() -> Vec<EngineDecl> {
    let decl = |id: EngineId, title: &str, paths: Vec<PathId>, cells: Vec<CellKind>| EngineDecl {
        id,
        title: title.into(),
        paths,
        cells,
        needs: Needs::default(),
        hardware: true,
        default_on: true,
    };
    vec![
        decl(
            V1_CUDA,
            "CUDA copy engine: cuMemcpyAsync behind a device-side latch, timed by events",
            vec![PathId::H2d, PathId::D2h, PathId::Duplex, PathId::D2d],
            vec![CellKind::Sweep],
        ),
        decl(
            V1_HOST_MEMCPY,
            "C library memcpy on pinned threads",
            vec![PathId::HostRam],
            vec![CellKind::Sweep, CellKind::Sustained],
        ),
        decl(
            V1_HOST_STREAMING,
            "streaming copy (vector loads, non-temporal stores) on pinned threads",
            vec![PathId::HostRam],
            vec![CellKind::Sustained],
        ),
        decl(
            V1_IO_URING,
            "kernel NVMe: io_uring, O_DIRECT, registered buffers, one ring per drive",
            vec![PathId::NvmeRead, PathId::NvmeWrite],
            vec![CellKind::Sweep, CellKind::LongTest],
        ),
    ]
}

/// The v1 engine of a case of `path` whose host copy kernel was `copy_kernel`.
fn v1_engine(path: PathId, copy_kernel: Option<&str>) -> EngineId {
    match path {
        PathId::H2d | PathId::D2h | PathId::Duplex | PathId::D2d => V1_CUDA,
        PathId::HostRam if copy_kernel == Some("streaming") => V1_HOST_STREAMING,
        PathId::HostRam => V1_HOST_MEMCPY,
        // Version 1 measured no other path; a hand-made profile may still name one.
        _ => V1_IO_URING,
    }
}

/// A v1 case or measurement key in the current form (`h2d/gpu0/local/4MiB/s1` →
/// `h2d/cuda-copy/gpu0/local/4MiB/s1`; `host_ram/n0-n0/1GiB/t16/streaming` →
/// `host_ram/host-streaming/n0-n0/1GiB/t16`). A key that starts with no path of version 1 is
/// returned as it is. Used on every key a v1 profile holds, and on keys a user wrote for v1
/// profiles (qualify rules, efficiency requests).
pub fn upgrade_key(key: &str) -> Option<String> {
    let (path, engine, cell) = split_key(key)?;
    Some(case_key(path, &engine, &cell))
}

/// A v1 key's path, engine and cell (see [`upgrade_key`]).
fn split_key(key: &str) -> Option<(PathId, EngineId, String)> {
    let (head, cell) = key.split_once('/')?;
    let path: PathId = head.parse().ok().filter(|p: &PathId| p.as_str() == head)?;
    let measured = [
        PathId::H2d,
        PathId::D2h,
        PathId::Duplex,
        PathId::D2d,
        PathId::HostRam,
        PathId::NvmeRead,
        PathId::NvmeWrite,
    ];
    if !measured.contains(&path) {
        return None;
    }
    let streaming = path == PathId::HostRam && cell.ends_with("/streaming");
    let cell = if streaming {
        cell.trim_end_matches("/streaming")
    } else {
        cell
    };
    let engine = v1_engine(path, streaming.then_some("streaming"));
    Some((path, engine, cell.to_string()))
}

fn up(key: &str) -> String {
    upgrade_key(key).unwrap_or_else(|| key.to_string())
}

/// Version 1's case parameters: only the fields a path used were set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct CaseParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_node: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_node: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_node: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_kernel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_memory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drives: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle_max_s: Option<u64>,
}

impl CaseParams {
    /// The typed spec of a v1 case of `path` whose key was `key`.
    pub fn spec(&self, path: PathId, key: &str) -> Spec {
        match path {
            PathId::HostRam => {
                let src = self.src_node.unwrap_or(0);
                Spec::HostCopy(HostCopySpec {
                    size_bytes: self.size_bytes.unwrap_or(0),
                    threads: self.threads.unwrap_or(1),
                    cpu_node: self.cpu_node.unwrap_or(src),
                    src_node: src,
                    dst_node: self.dst_node.unwrap_or(src),
                })
            }
            PathId::NvmeRead | PathId::NvmeWrite => Spec::Nvme(NvmeSpec {
                // v1 keys: `<path>/<Ndrive|target|latency|read-cache|power-states|gc-settle>/…`.
                test: match key.split('/').nth(1) {
                    Some("latency") => NvmeTest::Latency,
                    Some("read-cache") => NvmeTest::ReadCache,
                    Some("power-states") => NvmeTest::PowerStates,
                    Some("gc-settle") => NvmeTest::GcSettle,
                    _ => NvmeTest::Sweep,
                },
                target: key.split('/').nth(1) == Some("target")
                    || key.split('/').nth(2) == Some("target"),
                block_bytes: self.size_bytes.unwrap_or(4096),
                queue_depth: self.queue_depth.unwrap_or(1),
                drives: self.drives.clone(),
                pattern: match self.pattern.as_deref() {
                    Some("random") => NvmePattern::Random,
                    Some("hot") => NvmePattern::Hot {
                        region_bytes: self.region_bytes.unwrap_or(0),
                    },
                    Some("idle") => NvmePattern::Idle {
                        idle_ms: self.idle_ms.unwrap_or(0),
                    },
                    Some("gc-settle") => NvmePattern::GcSettle {
                        duration_s: self.duration_s.unwrap_or(0),
                        settle_max_s: self.settle_max_s.unwrap_or(0),
                    },
                    _ => NvmePattern::Sequential,
                },
            }),
            _ => {
                let pinned = self
                    .host_memory
                    .as_deref()
                    .is_none_or(|m| m.eq_ignore_ascii_case("pinned"));
                let d2d = path == PathId::D2d;
                let host_node = match path {
                    PathId::D2h => self.dst_node,
                    PathId::D2d => None,
                    _ => self.src_node,
                };
                Spec::GpuCopy(GpuCopySpec {
                    gpu: self.gpu.clone().unwrap_or_default(),
                    size_bytes: self.size_bytes.unwrap_or(0),
                    streams: self.streams.unwrap_or(1),
                    host_memory: (!d2d).then_some(if pinned {
                        HostMemory::Pinned
                    } else {
                        HostMemory::Pageable
                    }),
                    host_node,
                    cpu_node: if d2d { None } else { self.cpu_node },
                    direction: match self.direction.as_deref() {
                        Some("d2h") => Some(CopyDirection::D2h),
                        Some(_) => Some(CopyDirection::H2d),
                        None if path == PathId::Duplex => Some(CopyDirection::H2d),
                        None => None,
                    },
                })
            }
        }
    }
}

/// A v1 measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct V1Measurement {
    pub key: String,
    pub path: PathId,
    pub params: CaseParams,
    pub bytes_per_rep: u64,
    pub gbps: Stats,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_gbps: Option<f64>,
    pub warmup: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<Stats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p99_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cache_resident: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub contended: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_limit_pct: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl V1Measurement {
    pub fn upgrade(self) -> Measurement {
        let engine = v1_engine(self.path, self.params.copy_kernel.as_deref());
        let cell = split_key(&self.key).map_or_else(|| self.key.clone(), |(_, _, c)| c);
        Measurement {
            key: up(&self.key),
            path: self.path,
            engine,
            cell,
            spec: self.params.spec(self.path, &self.key),
            bytes_per_rep: self.bytes_per_rep,
            gbps: self.gbps,
            cold_gbps: self.cold_gbps,
            warmup: self.warmup,
            latency_us: self.latency_us,
            latency_p50_us: self.latency_p50_us,
            latency_p99_us: self.latency_p99_us,
            placement: self.placement,
            cache_resident: self.cache_resident,
            contended: self.contended,
            spread_limit_pct: self.spread_limit_pct,
            evidence: Default::default(),
            notes: self.notes,
        }
    }
}

/// A v1 failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct V1Failure {
    pub key: String,
    pub path: PathId,
    pub error: String,
}

/// A v1 host RAM node pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct V1HostRamPair {
    pub src_node: u32,
    pub dst_node: u32,
    pub cpu_node: u32,
    pub size_bytes: u64,
    pub best_gbps: f64,
    pub best_threads: u32,
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    pub sweep_gbps: BTreeMap<u32, f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_sweeps_gbps: BTreeMap<String, BTreeMap<u32, f64>>,
}

/// The v1 `host_ram:` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct V1HostRamProfile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_numa_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_numa_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pairs: BTreeMap<String, V1HostRamPair>,
}

fn kernel_engine(kernel: Option<&str>) -> EngineId {
    v1_engine(PathId::HostRam, kernel)
}

impl V1HostRamProfile {
    fn upgrade(self) -> HostRamProfile {
        HostRamProfile {
            same_numa_gbps: self.same_numa_gbps,
            cross_numa_gbps: self.cross_numa_gbps,
            pairs: self
                .pairs
                .into_iter()
                .map(|(k, p)| {
                    let pair = HostRamPair {
                        src_node: p.src_node,
                        dst_node: p.dst_node,
                        cpu_node: p.cpu_node,
                        size_bytes: p.size_bytes,
                        best_gbps: p.best_gbps,
                        best_threads: p.best_threads,
                        key: up(&p.key),
                        engine: kernel_engine(p.kernel.as_deref()),
                        sweep_gbps: p.sweep_gbps,
                        engine_sweeps_gbps: p
                            .kernel_sweeps_gbps
                            .into_iter()
                            .map(|(kernel, sweep)| (kernel_engine(Some(&kernel)), sweep))
                            .collect(),
                    };
                    (k, pair)
                })
                .collect(),
        }
    }
}

/// What a version 1 ceiling is, from its key (version 1 recorded nothing else): the catalogue of
/// keys that version wrote (`docs/profile-schema.md`), with the path of the measurement it is
/// the median of where it names one.
pub fn ceiling_meta(key: &str, measured: Option<PathId>) -> CeilingMeta {
    let tokens: Vec<&str> = key
        .split(['_', '/', '-', '.'])
        .filter(|t| !t.is_empty())
        .collect();
    let numbered = |t: &str, prefix: &str| {
        t.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let gpu = tokens
        .iter()
        .find(|t| numbered(t, "gpu"))
        .map(|t| t.to_string());
    let drives = tokens
        .iter()
        .find_map(|t| t.strip_suffix("drive").and_then(|n| n.parse().ok()));
    let unit = match tokens.last().copied() {
        Some("bytes") => Unit::Bytes,
        Some("drives") => Unit::Drives,
        Some("pct") => Unit::Pct,
        _ => Unit::Gbps,
    };
    let better = if key.contains("penalty") {
        Better::Lower
    } else if unit != Unit::Gbps || key.contains("crossover") {
        Better::Neither
    } else {
        Better::Higher
    };
    let path = measured.or(if key.starts_with("warm_") || key.contains("_d2h_") {
        Some(if key.contains("_d2h_") {
            PathId::D2h
        } else {
            PathId::H2d
        })
    } else if key.contains("_d2d_") {
        Some(PathId::D2d)
    } else if key.starts_with("host_ram_") {
        Some(PathId::HostRam)
    } else if key.starts_with("nvme_") && key.contains("write") {
        Some(PathId::NvmeWrite)
    } else if key.starts_with("nvme_") {
        Some(PathId::NvmeRead)
    } else if key.starts_with("gdrcopy_") {
        Some(PathId::Gdrcopy)
    } else if key.starts_with("gds_") {
        Some(PathId::Gds)
    } else {
        None
    });
    let host = matches!(
        path,
        Some(PathId::H2d | PathId::D2h | PathId::Duplex | PathId::HostRam)
    );
    let numa = host.then(|| {
        if key.contains("cross_numa") {
            Numa::Cross
        } else {
            Numa::Local
        }
    });
    CeilingMeta {
        unit,
        better,
        path,
        gpu,
        drives,
        numa,
    }
}

/// Where a ceiling of a version 1 profile written before ceiling sources were recorded comes
/// from, as far as its key and figures tell: a kind of ceiling that version always derived (a
/// penalty, a knee, the cold path and its crossover, a size or count) is derived; another is
/// the first measurement whose median equals it, else unknown (typed in, or its measurement
/// lost: the file does not say).
pub fn unrecorded_origin<'a>(p: &'a Profile, key: &str, value: f64) -> CeilingOrigin<'a> {
    let derived = key.ends_with("_cross_numa_penalty_gbps")
        || key.starts_with("nvme_optimal_")
        || key.starts_with("dispatcher_cold_")
        || key.ends_with("_bytes")
        || key.ends_with("_drives");
    if derived {
        return CeilingOrigin::Derived {
            how: None,
            inputs: Vec::new(),
        };
    }
    p.measurements
        .iter()
        .find(|m| m.gbps.median == value)
        .map_or(CeilingOrigin::Unknown, CeilingOrigin::Measured)
}

/// The ceiling records of a version 1 profile's `ceilings` and `ceiling_sources` (keys already
/// upgraded), each described from its key ([`ceiling_meta`]).
fn records(
    ceilings: &BTreeMap<String, f64>,
    sources: &BTreeMap<String, CeilingSource>,
    measurements: &[Measurement],
) -> BTreeMap<String, CeilingRecord> {
    let measurement = |k: &str| measurements.iter().find(|m| m.key == k);
    ceilings
        .iter()
        .map(|(key, &value)| {
            let source = sources.get(key).cloned();
            let of = match &source {
                Some(CeilingSource::Measured { measurement: m }) => measurement(m),
                _ => None,
            };
            let inputs: Vec<&Measurement> = match &source {
                Some(CeilingSource::Derived { inputs, .. }) => {
                    inputs.iter().filter_map(|k| measurement(k)).collect()
                }
                _ => of.into_iter().collect(),
            };
            let engine = inputs
                .first()
                .map(|m| m.engine.clone())
                .filter(|e| inputs.iter().all(|m| &m.engine == e));
            let record = CeilingRecord {
                carried_from: None,
                value,
                meta: ceiling_meta(key, of.map(|m| m.path)),
                engine,
                source,
            };
            (key.clone(), record)
        })
        .collect()
}

/// A version 1 profile, field for field as version 1 wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct V1Profile {
    pub schema_version: u32,
    pub provenance: Provenance,
    pub platform: Platform,
    pub cpu_features: CpuFeatures,
    #[serde(default)]
    pub gpus: BTreeMap<String, GpuProfile>,
    #[serde(default)]
    pub nvme: NvmeProfile,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bar1: BTreeMap<String, Bar1Profile>,
    #[serde(default)]
    pub gdrcopy: GdrcopyProfile,
    #[serde(default)]
    pub gds: GdsProfile,
    #[serde(default)]
    pub host_ram: V1HostRamProfile,
    #[serde(default)]
    pub topology: Routing,
    #[serde(default)]
    pub ceilings: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ceiling_sources: BTreeMap<String, CeilingSource>,
    #[serde(default)]
    pub measurements: Vec<V1Measurement>,
    #[serde(default)]
    pub failures: Vec<V1Failure>,
    #[serde(default)]
    pub waived: Vec<Waiver>,
    #[serde(default)]
    pub tools: Vec<ToolStatus>,
    #[serde(default)]
    pub warnings: Vec<String>,
}

fn upgrade_long_tests(t: &mut NvmeLongTests) {
    if let Some(r) = &mut t.read_cache {
        r.hot_key = up(&r.hot_key);
        r.cold_key = up(&r.cold_key);
    }
    if let Some(p) = &mut t.power_states {
        p.baseline_key = up(&p.baseline_key);
        for g in &mut p.gaps {
            g.key = up(&g.key);
        }
    }
    if let Some(g) = &mut t.gc_settle {
        g.key = up(&g.key);
    }
}

impl V1Profile {
    /// The profile in the current schema: engines named, keys in the current form, specs typed.
    pub fn upgrade(self) -> Profile {
        let mut nvme = self.nvme;
        nvme.long_tests.iter_mut().for_each(upgrade_long_tests);
        let measurements: Vec<Measurement> = self
            .measurements
            .into_iter()
            .map(V1Measurement::upgrade)
            .collect();
        let ceiling_sources: BTreeMap<String, CeilingSource> = self
            .ceiling_sources
            .into_iter()
            .map(|(k, s)| {
                let s = match s {
                    CeilingSource::Measured { measurement } => {
                        CeilingSource::measured(up(&measurement))
                    }
                    CeilingSource::Derived { derived, inputs } => {
                        CeilingSource::derived(derived, inputs.iter().map(|i| up(i)).collect())
                    }
                };
                (k, s)
            })
            .collect();
        Profile {
            schema_version: crate::SCHEMA_VERSION,
            provenance: self.provenance,
            platform: self.platform,
            cpu_features: self.cpu_features,
            gpus: self.gpus,
            nvme,
            bar1: self.bar1,
            pci_bar: BTreeMap::new(),
            gdrcopy: self.gdrcopy,
            gds: self.gds,
            host_ram: self.host_ram.upgrade(),
            topology: self.topology,
            engines: v1_engines(),
            ceiling_records: records(&self.ceilings, &ceiling_sources, &measurements),
            ceilings: self.ceilings,
            measurements,
            failures: self
                .failures
                .into_iter()
                .map(|f| Failure {
                    key: up(&f.key),
                    path: f.path,
                    engine: upgrade_key(&f.key).map(|_| {
                        let streaming = f.key.ends_with("/streaming");
                        v1_engine(f.path, streaming.then_some("streaming"))
                    }),
                    error: f.error,
                })
                .collect(),
            waived: self
                .waived
                .into_iter()
                .map(|w| Waiver {
                    engine: None,
                    scope: w.scope.map(|s| up(&s)),
                    ..w
                })
                .collect(),
            tools: self.tools,
            warnings: self
                .warnings
                .into_iter()
                .map(|text| crate::Warning {
                    message: text.clone(),
                    kind: crate::WarningKind::Text { text },
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_keys_gain_their_engine() {
        for (old, new) in [
            ("h2d/gpu0/local/4MiB/s1", "h2d/cuda-copy/gpu0/local/4MiB/s1"),
            (
                "duplex/gpu1/local/256MiB/s1/d2h",
                "duplex/cuda-copy/gpu1/local/256MiB/s1/d2h",
            ),
            ("d2d/gpu0/1GiB/s4", "d2d/cuda-copy/gpu0/1GiB/s4"),
            (
                "host_ram/n0-n1/1GiB/t16",
                "host_ram/host-memcpy/n0-n1/1GiB/t16",
            ),
            (
                "host_ram/n0-n0/1GiB/t16/streaming",
                "host_ram/host-streaming/n0-n0/1GiB/t16",
            ),
            (
                "nvme_read/1drive/nvme0/1MiB/qd32",
                "nvme_read/io-uring/1drive/nvme0/1MiB/qd32",
            ),
        ] {
            assert_eq!(upgrade_key(old).as_deref(), Some(new), "{old}");
        }
        for other in ["warm_gpu0_peak_gbps", "gds/x", "H2D/gpu0", "nonsense", ""] {
            assert_eq!(upgrade_key(other), None, "{other}");
        }
    }

    #[test]
    fn v1_params_become_the_spec_the_planner_writes_now() {
        let p = CaseParams {
            size_bytes: Some(4 << 20),
            streams: Some(1),
            gpu: Some("gpu0".into()),
            host_memory: Some("pinned".into()),
            cpu_node: Some(0),
            dst_node: Some(0),
            ..CaseParams::default()
        };
        assert_eq!(
            p.spec(PathId::D2h, "d2h/gpu0/local/4MiB/s1"),
            Spec::GpuCopy(GpuCopySpec {
                gpu: "gpu0".into(),
                size_bytes: 4 << 20,
                streams: 1,
                host_memory: Some(HostMemory::Pinned),
                host_node: Some(0),
                cpu_node: Some(0),
                direction: None,
            })
        );
        assert!(p
            .spec(PathId::D2h, "d2h/gpu0/local/4MiB/s1")
            .check(PathId::D2h)
            .is_ok());
    }
}
