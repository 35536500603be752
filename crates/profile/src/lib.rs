//! Builds the YAML ceiling profile (the public API, see `hwc_model::profile`) from what `detect`
//! found and what the runner measured, derives the spec's per-path fields and the flat
//! `ceilings:` map, and reads/writes profiles and the raw JSON record.
//!
//! Pure: nothing here touches the machine. Only measured values enter a profile; a field whose
//! measurement is missing is omitted, never estimated.

use hwc_model::ceiling_key;
use hwc_model::profile::{GdsProfile, NvmeDriveProfile, NvmeProfile};
use hwc_model::topology::LinkBasis;
use hwc_model::{Busy, ErrorCount, Warning, WarningKind};
use hwc_model::{
    CaseResult, CeilingMeta, CeilingRecord, CeilingSource, EngineDecl, Failure, Measurement, Numa,
    PathId, Plan, Profile, Provenance, Topology, Waiver, SCHEMA_VERSION,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

mod bar;
pub mod derive;
mod gdrcopy;
mod gds;
pub use derive::{gpu_fields, gpu_picks, host_ram_pairs, GpuPicks};
mod file;
pub mod names;
pub mod nvme;
mod validate;
pub mod xxh3;
pub use file::{
    read_profile, read_profile_with_text, read_text_capped, yaml_message, yaml_options, ReadError,
    MAX_PROFILE_BYTES,
};
pub use validate::{damaged, usable_ceiling};

/// Everything one run saw and measured, with every raw sample: the JSON record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub schema_version: u32,
    pub provenance: Provenance,
    pub topology: Topology,
    pub plan: Plan,
    pub results: Vec<CaseResult>,
    pub failures: Vec<Failure>,
    /// Cases waived at run time (a backend found them unavailable).
    pub waived: Vec<Waiver>,
    /// The long drive tests' results (as in the profile's `nvme.long_tests`), including the
    /// gc-settle records, which are measured outside the runner.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvme_long_tests: Vec<hwc_model::long_tests::NvmeLongTests>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("not a valid hwceiling profile: {0}")]
    Yaml(String),
    #[error("not an hwceiling profile: no `schema_version` field")]
    NoVersion,
    #[error(
        "profile schema_version {found} is newer than this hwceiling reads ({SCHEMA_VERSION}): upgrade hwceiling"
    )]
    Newer { found: u32 },
    #[error(
        "profile schema_version {found} is older than any this hwceiling reads \
         ({OLDEST_SCHEMA_VERSION} to {SCHEMA_VERSION})"
    )]
    Older { found: u32 },
    #[error(
        "cut short: no `warnings` field, the last one of every profile hwceiling writes (the file \
         was truncated, or not written whole)"
    )]
    CutShort,
    /// Figures no run writes ([`damaged`]).
    #[error("{0}")]
    Damaged(String),
}

/// Assemble the profile. `waived` and `failures` are the run-time ones; the plan's waivers are
/// taken from `plan`.
pub fn build(
    topo: &Topology,
    plan: &Plan,
    results: &[CaseResult],
    runtime_waived: &[Waiver],
    failures: &[Failure],
    engines: &[EngineDecl],
    provenance: Provenance,
) -> Profile {
    let all: Vec<Measurement> = results.iter().map(|r| r.measurement.clone()).collect();
    // The spec's fields and the ceilings come from the hardware's figures only (not the null
    // engine's, which measures the tool itself); `measurements` lists every figure.
    let hardware = |m: &&Measurement| engines.iter().all(|e| e.id != m.engine || e.hardware);
    let measurements: Vec<Measurement> = all.iter().filter(hardware).cloned().collect();
    // A copy faster than its link fails its case; one above the TLP-adjusted limit is suspect.
    let mut topology = topo.topology.clone();
    topology.links = derive::links_as_run(&topology.links, &topo.gpus, &provenance.environment);
    let mut wire_warnings = Vec::new();
    let (measurements, over_link) = derive::over_the_wire(
        &topo.gpus,
        &topology.links,
        measurements,
        &mut wire_warnings,
    );
    let failed: BTreeSet<String> = over_link.iter().map(|f| f.key.clone()).collect();
    let failures: Vec<Failure> = failures.iter().cloned().chain(over_link).collect();
    let mut profile = Profile {
        schema_version: SCHEMA_VERSION,
        provenance,
        platform: topo.platform.clone(),
        cpu_features: topo.cpu_features.clone(),
        gpus: BTreeMap::new(),
        nvme: nvme_section(topo),
        bar1: BTreeMap::new(),
        pci_bar: BTreeMap::new(),
        gdrcopy: Default::default(),
        gds: GdsProfile {
            available: gds_available(topo),
            ..GdsProfile::default()
        },
        host_ram: Default::default(),
        topology,
        engines: engines.to_vec(),
        ceilings: BTreeMap::new(),
        ceiling_records: BTreeMap::new(),
        measurements,
        failures,
        waived: plan.waived.iter().chain(runtime_waived).cloned().collect(),
        tools: topo.tools.clone(),
        warnings: Vec::new(),
    };
    for g in &topo.gpus {
        let entry = gpu_fields(g, &profile.measurements);
        profile.gpus.insert(g.name(), entry);
    }
    profile.host_ram = derive::host_ram(&profile.measurements);
    nvme::fill(topo, &profile.measurements, &mut profile.nvme);
    gds::fill(&mut profile);
    bar::fill(&mut profile);
    gdrcopy::fill(&mut profile);
    xxh3::fill(&mut profile.cpu_features, &profile.measurements);
    let c = ceilings_with_sources(&profile);
    (profile.ceilings, profile.ceiling_records) = (c.values, c.records);
    profile.nvme.dispatcher_cold_bottleneck = nvme::ceilings(&profile, &mut Ceilings::default());
    profile.warnings = wire_warnings;
    profile.warnings.extend(warnings(&profile));
    profile.measurements = all
        .into_iter()
        .filter(|m| !failed.contains(&m.key))
        .collect();
    profile
}

/// `gds.available`: a GPU was detected and cuFile (`libcufile`) is present, as detection found
/// them (a fact of the machine, not a measurement; `mode` and the figures stay absent until the
/// path is measured).
fn gds_available(topo: &Topology) -> bool {
    !topo.gpus.is_empty()
        && topo
            .tools
            .iter()
            .any(|t| t.name == "libcufile" && t.present)
}

fn nvme_section(topo: &Topology) -> NvmeProfile {
    NvmeProfile {
        drives: topo
            .nvme
            .iter()
            .map(|d| NvmeDriveProfile {
                bdf: d.bdf.clone(),
                name: d.name.clone(),
                model: d.model.clone(),
                firmware_rev: d.firmware_rev.clone(),
                serial: d.serial.clone(),
                capacity_tb: d.capacity_tb,
                mdts_bytes: d.mdts_bytes,
                block_size: d.namespaces.first().and_then(|n| n.logical_block_size),
                pcie_gen: d.pcie_gen,
                pcie_width: d.pcie_width,
                numa_node: d.numa_node,
                root: d.root.clone(),
                vwc_enabled: d.vwc_present,
                in_use: d.in_use,
                mdts_source: d.mdts_source.clone(),
                driver: d.driver.clone(),
                power_states: d.power_states.clone(),
                apst_supported: d.apst_supported,
                power_features: d.power_features.clone(),
                ..NvmeDriveProfile::default()
            })
            .collect(),
        ..NvmeProfile::default()
    }
}

/// The flat map the efficiency evaluator reads. Keys follow the spec; only measured inputs.
pub fn ceilings(p: &Profile) -> BTreeMap<String, f64> {
    ceilings_with_sources(p).values
}

/// The `ceilings:` map and, under the same keys, each ceiling's record (`ceiling_records:`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ceilings {
    pub values: BTreeMap<String, f64>,
    pub records: BTreeMap<String, CeilingRecord>,
}

impl Ceilings {
    /// A ceiling that is the median of `source`. Without a source (a profile whose fields were
    /// set by hand, not built from measurements) the ceiling's record names none.
    pub fn measured(
        &mut self,
        key: String,
        meta: CeilingMeta,
        value: Option<f64>,
        source: Option<&Measurement>,
    ) {
        let Some(v) = value else { return };
        let record = CeilingRecord {
            carried_from: None,
            value: v,
            meta,
            engine: source.map(|m| m.engine.clone()),
            source: source.map(|m| CeilingSource::measured(m.key.clone())),
        };
        self.records.insert(key.clone(), record);
        self.values.insert(key, v);
    }

    /// A ceiling computed from `inputs`' medians as `how` says; its engine is theirs where they
    /// share one.
    pub fn derived(
        &mut self,
        key: String,
        meta: CeilingMeta,
        value: Option<f64>,
        how: String,
        inputs: &[&Measurement],
    ) {
        let Some(v) = value else { return };
        let engine = inputs
            .first()
            .map(|m| m.engine.clone())
            .filter(|e| inputs.iter().all(|m| &m.engine == e));
        let record = CeilingRecord {
            carried_from: None,
            value: v,
            meta,
            engine,
            source: Some(CeilingSource::derived(
                how,
                inputs.iter().map(|m| m.key.clone()).collect(),
            )),
        };
        self.records.insert(key.clone(), record);
        self.values.insert(key, v);
    }
}

/// Every ceiling with its record: the values as [`ceilings`], the sources from the same
/// selection rules that chose the profile's fields ([`derive::GpuPicks`], the host RAM pairs,
/// [`nvme::raw_picks`]).
pub fn ceilings_with_sources(p: &Profile) -> Ceilings {
    let mut c = Ceilings::default();
    let mut d2d_slowest: Option<(f64, Option<&Measurement>, &str)> = None;
    for (name, g) in &p.gpus {
        let k = derive::gpu_picks(name, g.numa_node, &p.measurements);
        let local = |path| CeilingMeta::gbps(Some(path)).gpu(name).numa(Numa::Local);
        c.measured(
            ceiling_key::warm_h2d(name),
            local(PathId::H2d),
            g.h2d_4m_1stream_numa_local_gbps,
            k.h2d_4m_1stream_numa_local,
        );
        c.measured(
            ceiling_key::warm_h2d_peak(name),
            local(PathId::H2d),
            g.h2d_peak_numa_local_gbps,
            k.h2d_peak_numa_local,
        );
        c.derived(
            ceiling_key::cross_numa_penalty(name),
            CeilingMeta::penalty_gbps(Some(PathId::H2d))
                .gpu(name)
                .numa(Numa::Cross),
            g.cross_numa_h2d_penalty_gbps,
            "best NUMA-local one-stream H2D median minus the worst cross-NUMA node's best \
             one-stream H2D median"
                .into(),
            &[k.h2d_1stream_peak_numa_local, k.h2d_peak_cross_numa]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>(),
        );
        c.measured(
            ceiling_key::d2h_peak(name),
            local(PathId::D2h),
            g.d2h_peak_numa_local_gbps,
            k.d2h_peak_numa_local,
        );
        c.measured(
            ceiling_key::d2d_sustained(name),
            CeilingMeta::gbps(Some(PathId::D2d)).gpu(name),
            g.d2d_1stream_gbps,
            k.d2d_1stream,
        );
        if let Some(v) = g.d2d_1stream_gbps {
            if d2d_slowest.is_none_or(|(w, _, _)| v < w) {
                d2d_slowest = Some((v, k.d2d_1stream, name));
            }
        }
    }
    // The slowest GPU's D2D figure: that GPU's measurement. What every GPU reaches is unknown
    // while one of them has no D2D figure (its cases waived or failed): no ceiling then.
    let every_gpu = p.gpus.values().all(|g| g.d2d_1stream_gbps.is_some());
    if let Some((v, m, _)) = d2d_slowest.filter(|_| every_gpu) {
        c.measured(
            ceiling_key::GPU_D2D_SUSTAINED.into(),
            CeilingMeta::gbps(Some(PathId::D2d)),
            Some(v),
            m,
        );
    }
    for (key, same) in [
        (ceiling_key::HOST_RAM_SAME_NUMA, true),
        (ceiling_key::HOST_RAM_CROSS_NUMA, false),
    ] {
        let pair = derive::best_pair(&p.host_ram.pairs, same);
        let numa = if same { Numa::Local } else { Numa::Cross };
        c.measured(
            key.into(),
            CeilingMeta::gbps(Some(PathId::HostRam)).numa(numa),
            if same {
                p.host_ram.same_numa_gbps
            } else {
                p.host_ram.cross_numa_gbps
            },
            pair.and_then(|pair| p.measurement(&pair.key)),
        );
    }
    nvme::ceilings(p, &mut c);
    bar::ceilings(p, &mut c);
    gdrcopy::ceilings(p, &mut c);
    if gds::direct(p) {
        for (key, drives, value) in [
            (ceiling_key::GDS_1DRIVE, 1, p.gds.one_drive_gbps),
            (ceiling_key::GDS_4DRIVE, 4, p.gds.four_drive_gbps),
        ] {
            c.measured(
                key.into(),
                CeilingMeta::gbps(Some(PathId::Gds)),
                value,
                gds::best_cufile(p, drives),
            );
        }
    }
    c
}

fn warnings(p: &Profile) -> Vec<Warning> {
    let mut w: Vec<Warning> = Vec::new();
    // Host RAM node pairs measured only at sizes a cache holds: no sustained figure.
    let cached_only: BTreeSet<(u32, u32)> = p
        .measurements_of(hwc_model::PathId::HostRam)
        .filter_map(|m| m.spec.host_copy().map(|c| (c.src_node, c.dst_node)))
        .filter(|&(s, d)| {
            !p.host_ram
                .pairs
                .values()
                .any(|pair| (pair.src_node, pair.dst_node) == (s, d))
        })
        .collect();
    for (src_node, dst_node) in cached_only {
        w.push(WarningKind::CacheOnly { src_node, dst_node }.into());
    }
    let contended = p.measurements.iter().filter(|m| m.contended).count();
    if contended > 0 {
        // A GPU case's idle guard reads its GPU (NVML), a host case's CPU guard the CPUs.
        let on_gpu = p
            .measurements
            .iter()
            .filter(|m| m.contended && m.spec.gpu().is_some())
            .count();
        let busy = match (on_gpu, contended - on_gpu) {
            (0, _) => Busy::Cpus,
            (_, 0) => Busy::Gpu,
            _ => Busy::CpusOrGpu,
        };
        w.push(
            WarningKind::Contended {
                count: contended,
                busy,
            }
            .into(),
        );
    }
    let unsteady = p.measurements.iter().filter(|m| m.unsteady()).count();
    if unsteady > 0 {
        w.push(WarningKind::Unsteady { count: unsteady }.into());
    }
    let unverified = p
        .measurements
        .iter()
        .filter(|m| m.placement.as_ref().is_some_and(|pl| !pl.verified))
        .count();
    if unverified > 0 {
        w.push(WarningKind::PlacementUnverified { count: unverified }.into());
    }
    let link_errors = p
        .measurements
        .iter()
        .filter(|m| {
            let replays = m.evidence.gpu_state.as_ref().and_then(|g| g.pcie_replays);
            m.evidence.link_errors.is_some() || replays.is_some_and(|r| r > 0)
        })
        .count();
    if link_errors > 0 {
        w.push(WarningKind::LinkErrors { count: link_errors }.into());
    }
    let gpu_states = || {
        p.measurements
            .iter()
            .filter_map(|m| m.evidence.gpu_state.as_ref())
    };
    let downtrained = gpu_states().filter(|g| g.downtrained()).count();
    if downtrained > 0 {
        w.push(WarningKind::LinkDowntrainedUnderLoad { count: downtrained }.into());
    }
    let slowed: Vec<&hwc_model::GpuCaseState> =
        gpu_states().filter(|g| !g.slowdowns().is_empty()).collect();
    if !slowed.is_empty() {
        let mut reasons: Vec<hwc_model::ClockEvent> =
            slowed.iter().flat_map(|g| g.slowdowns()).collect();
        reasons.sort();
        reasons.dedup();
        w.push(
            WarningKind::GpuClocksSlowed {
                count: slowed.len(),
                reasons,
            }
            .into(),
        );
    }
    let changed = p
        .measurements
        .iter()
        .filter(|m| {
            m.evidence
                .host_state
                .as_ref()
                .is_some_and(|h| !h.changed.is_empty())
        })
        .count();
    if changed > 0 {
        w.push(WarningKind::HostSettingsChanged { count: changed }.into());
    }
    // A link read below its maximum at detection. A GPU's read under load instead is judged by
    // its cases (`link_downtrained_under_load`): at detection an idle GPU may read downtrained.
    for l in &p.topology.links {
        let detected = match l.basis {
            LinkBasis::Detection if l.degraded => l.state(),
            LinkBasis::Capable => l.detected.unwrap_or(l.state()),
            _ => continue,
        };
        w.push(
            WarningKind::LinkDegraded {
                device: l.device.clone(),
                bdf: l.bdf.clone(),
                gen: detected.gen,
                width: detected.width,
                max_gen: l.max_gen.unwrap_or(l.gen),
                max_width: l.max_width.unwrap_or(l.width),
            }
            .into(),
        );
    }
    if !p.failures.is_empty() {
        w.push(failures_warning(&p.failures).into());
    }
    if p.provenance.interrupted {
        w.push(WarningKind::Interrupted.into());
    }
    w.extend(bar::harness_warnings(p).into_iter().map(Warning::from));
    w
}

/// The failed cases: how many, and why (the commonest reasons first, each with its count, and
/// the rest summed; the `failures` list names every case).
fn failures_warning(failures: &[hwc_model::Failure]) -> WarningKind {
    const SHOWN: usize = 3;
    let groups = hwc_model::failure_groups(failures);
    let errors: Vec<ErrorCount> = groups
        .iter()
        .take(SHOWN)
        .map(|g| ErrorCount {
            count: g.keys.len(),
            error: g.error.to_string(),
        })
        .collect();
    let rest = groups.get(SHOWN..).unwrap_or_default();
    WarningKind::CasesFailed {
        count: failures.len(),
        errors,
        other_cases: rest.iter().map(|g| g.keys.len()).sum(),
        other_errors: rest.len(),
    }
}

/// The profile as YAML, with the spec's comment header.
pub fn to_yaml(p: &Profile) -> Result<String, ProfileError> {
    let body = serde_saphyr::to_string(p).map_err(|e| ProfileError::Yaml(e.to_string()))?;
    Ok(format!(
        "# Auto-generated by hwceiling {} ({})\n# Date: {}\n# Node: {}\n# Schema: docs/profile-schema.md (schema_version {})\n{body}",
        p.provenance.version,
        p.provenance.git_revision,
        p.provenance.date,
        // A comment holds one line of printable text: the hostname is escaped there (the
        // field itself keeps it exactly, quoted by the serializer).
        hwc_model::text::escape_control(p.platform.hostname.as_deref().unwrap_or("unknown")),
        p.schema_version,
    ))
}

#[derive(Deserialize)]
struct VersionProbe {
    schema_version: Option<u32>,
    /// Present in every profile hwceiling has written, as its last field (`warnings: []` when
    /// there are none): its absence marks a file cut short, which would otherwise read as a
    /// valid profile with fewer measurements, failures or waivers than the run had.
    warnings: Option<serde::de::IgnoredAny>,
}

/// Read a profile, refusing other schema versions with a clear message.
pub fn from_yaml(text: &str) -> Result<Profile, ProfileError> {
    let probe: VersionProbe = serde_saphyr::from_str_with_options(text, yaml_options())
        .map_err(|e| ProfileError::Yaml(yaml_message(&e)))?;
    let version = match probe.schema_version {
        None => return Err(ProfileError::NoVersion),
        Some(v) if v > SCHEMA_VERSION => return Err(ProfileError::Newer { found: v }),
        Some(v) if v < OLDEST_SCHEMA_VERSION => return Err(ProfileError::Older { found: v }),
        Some(v) => v,
    };
    if probe.warnings.is_none() {
        return Err(ProfileError::CutShort);
    }
    let yaml = |e: serde_saphyr::Error| ProfileError::Yaml(yaml_message(&e));
    if version == 1 {
        // Version 1: read as written, then upgraded (`hwc_model::v1`).
        let old: hwc_model::v1::V1Profile =
            serde_saphyr::from_str_with_options(text, yaml_options()).map_err(yaml)?;
        return intact(old.upgrade());
    }
    intact(serde_saphyr::from_str_with_options(text, yaml_options()).map_err(yaml)?)
}

fn intact(p: Profile) -> Result<Profile, ProfileError> {
    match damaged(&p) {
        Some(why) => Err(ProfileError::Damaged(why)),
        None => Ok(p),
    }
}

/// The oldest profile schema this build reads (and upgrades to [`SCHEMA_VERSION`]).
pub const OLDEST_SCHEMA_VERSION: u32 = 1;

#[cfg(test)]
mod tests;
