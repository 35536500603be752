//! Builds the YAML ceiling profile (the public API, see `hwc_model::profile`) from what `detect`
//! found and what the runner measured, derives the spec's per-path fields and the flat
//! `ceilings:` map, and reads/writes profiles and the raw JSON record.
//!
//! Pure: nothing here touches the machine. Only measured values enter a profile; a field whose
//! measurement is missing is omitted, never estimated.

use hwc_model::profile::{GdsProfile, NvmeDriveProfile, NvmeProfile};
use hwc_model::{
    CaseResult, Failure, Measurement, Plan, Profile, Provenance, Topology, Waiver, SCHEMA_VERSION,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod derive;
pub use derive::{gpu_fields, host_ram_pairs};
mod file;
pub mod nvme;
pub use file::{
    read_profile, read_profile_with_text, read_text_capped, yaml_options, ReadError,
    MAX_PROFILE_BYTES,
};

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
        "profile schema_version {found} is older than any this hwceiling reads ({SCHEMA_VERSION})"
    )]
    Older { found: u32 },
}

/// Assemble the profile. `waived` and `failures` are the run-time ones; the plan's waivers are
/// taken from `plan`.
pub fn build(
    topo: &Topology,
    plan: &Plan,
    results: &[CaseResult],
    runtime_waived: &[Waiver],
    failures: &[Failure],
    provenance: Provenance,
) -> Profile {
    let measurements: Vec<Measurement> = results.iter().map(|r| r.measurement.clone()).collect();
    let mut profile = Profile {
        schema_version: SCHEMA_VERSION,
        provenance,
        platform: topo.platform.clone(),
        cpu_features: topo.cpu_features.clone(),
        gpus: BTreeMap::new(),
        nvme: nvme_section(topo),
        bar1: BTreeMap::new(),
        gdrcopy: Default::default(),
        gds: GdsProfile {
            available: gds_available(topo),
            ..GdsProfile::default()
        },
        host_ram: Default::default(),
        topology: topo.topology.clone(),
        ceilings: BTreeMap::new(),
        measurements,
        failures: failures.to_vec(),
        waived: plan.waived.iter().chain(runtime_waived).cloned().collect(),
        tools: topo.tools.clone(),
        warnings: Vec::new(),
    };
    for g in &topo.gpus {
        let entry = gpu_fields(g, &profile.measurements);
        profile.gpus.insert(format!("gpu{}", g.index), entry);
    }
    profile.host_ram = derive::host_ram(&profile.measurements);
    nvme::fill(topo, &profile.measurements, &mut profile.nvme);
    profile.ceilings = ceilings(&profile);
    profile.nvme.dispatcher_cold_bottleneck = nvme::ceilings(&profile, &mut BTreeMap::new());
    profile.warnings = warnings(topo, &profile);
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
    let mut c = BTreeMap::new();
    let mut put = |k: String, v: Option<f64>| {
        if let Some(v) = v {
            c.insert(k, v);
        }
    };
    for (name, g) in &p.gpus {
        put(
            format!("warm_{name}_gbps"),
            g.h2d_4m_1stream_numa_local_gbps,
        );
        put(format!("warm_{name}_peak_gbps"), g.h2d_peak_numa_local_gbps);
        put(
            format!("warm_{name}_cross_numa_penalty_gbps"),
            g.cross_numa_h2d_penalty_gbps,
        );
        put(format!("{name}_d2h_peak_gbps"), g.d2h_peak_numa_local_gbps);
        put(format!("{name}_d2d_sustained_gbps"), g.d2d_1stream_gbps);
    }
    let d2d_min = p
        .gpus
        .values()
        .filter_map(|g| g.d2d_1stream_gbps)
        .reduce(f64::min);
    put("gpu_d2d_sustained_gbps".into(), d2d_min);
    put("host_ram_same_numa_gbps".into(), p.host_ram.same_numa_gbps);
    put(
        "host_ram_cross_numa_gbps".into(),
        p.host_ram.cross_numa_gbps,
    );
    nvme::ceilings(p, &mut c);
    c
}

fn warnings(topo: &Topology, p: &Profile) -> Vec<String> {
    let mut w = Vec::new();
    let contended = p.measurements.iter().filter(|m| m.contended).count();
    if contended > 0 {
        w.push(format!(
            "{contended} measurement(s) ran while their CPUs or GPU were busy and are marked contended: \
             treat them as lower bounds and rerun on an idle node"
        ));
    }
    let unverified = p
        .measurements
        .iter()
        .filter(|m| m.placement.as_ref().is_some_and(|pl| !pl.verified))
        .count();
    if unverified > 0 {
        w.push(format!(
            "{unverified} measurement(s) could not verify their NUMA placement (see each placement detail)"
        ));
    }
    for l in topo.topology.links.iter().filter(|l| l.degraded) {
        w.push(format!(
            "{} ({}) links at Gen{} x{} below its maximum Gen{} x{} when detected (idle devices downtrain; \
             the GPU backend re-reads the link under load)",
            l.device,
            l.bdf,
            l.gen,
            l.width,
            l.max_gen.unwrap_or(l.gen),
            l.max_width.unwrap_or(l.width)
        ));
    }
    for g in &topo.gpus {
        w.extend(derive::link_excess(
            g,
            &topo.topology.links,
            &p.measurements,
        ));
    }
    if !p.failures.is_empty() {
        w.push(format!(
            "{} case(s) failed; their figures are absent (see failures)",
            p.failures.len()
        ));
    }
    if p.provenance.interrupted {
        w.push("the run was interrupted: only the cases that finished are in this profile".into());
    }
    w
}

/// The profile as YAML, with the spec's comment header.
pub fn to_yaml(p: &Profile) -> Result<String, ProfileError> {
    let body = serde_saphyr::to_string(p).map_err(|e| ProfileError::Yaml(e.to_string()))?;
    Ok(format!(
        "# Auto-generated by hwceiling {} ({})\n# Date: {}\n# Node: {}\n# Schema: docs/profile-schema.md (schema_version {})\n{body}",
        p.provenance.version,
        p.provenance.git_revision,
        p.provenance.date,
        p.platform.hostname.as_deref().unwrap_or("unknown"),
        p.schema_version,
    ))
}

#[derive(Deserialize)]
struct VersionProbe {
    schema_version: Option<u32>,
}

/// Read a profile, refusing other schema versions with a clear message.
pub fn from_yaml(text: &str) -> Result<Profile, ProfileError> {
    let probe: VersionProbe = serde_saphyr::from_str_with_options(text, yaml_options())
        .map_err(|e| ProfileError::Yaml(first_line(&e.to_string())))?;
    match probe.schema_version {
        None => return Err(ProfileError::NoVersion),
        Some(v) if v > SCHEMA_VERSION => return Err(ProfileError::Newer { found: v }),
        Some(v) if v < SCHEMA_VERSION => return Err(ProfileError::Older { found: v }),
        Some(_) => {}
    }
    serde_saphyr::from_str_with_options(text, yaml_options())
        .map_err(|e| ProfileError::Yaml(first_line(&e.to_string())))
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or(s);
    line.trim_start_matches("error: ").to_string()
}

#[cfg(test)]
mod tests;
