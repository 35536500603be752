//! What a profile warns its reader of, as typed values: each says what it is in its fields
//! (`kind` and the counts, devices and keys it concerns) and in one sentence (`message`, its
//! [`Display`](std::fmt::Display)), which the report and the closing summary print.

use serde::{Deserialize, Serialize};

/// Whose load made measurements contended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Busy {
    Cpus,
    Gpu,
    CpusOrGpu,
}

/// One warning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WarningKind {
    /// A host RAM node pair measured only at sizes a cache holds: no sustained figure.
    CacheOnly { src_node: u32, dst_node: u32 },
    /// Measurements taken while their CPUs or GPU were busy.
    Contended { count: usize, busy: Busy },
    /// Measurements that spread past their limit in the window kept.
    Unsteady { count: usize },
    /// Measurements whose NUMA placement could not be verified.
    PlacementUnverified { count: usize },
    /// A link trained below its maximum when detected.
    LinkDegraded {
        device: String,
        bdf: String,
        gen: u32,
        width: u32,
        max_gen: u32,
        max_width: u32,
    },
    /// A GPU copy faster than its link can carry: a measurement bug. (Profiles of earlier
    /// builds; such a case now fails, with the same words.)
    AboveLink {
        key: String,
        gbps: f64,
        link_gbps: f64,
    },
    /// Measurements during which a device on their PCIe path reported errors (AER counters
    /// rose, or NVML's PCIe replay counter of their GPU).
    LinkErrors { count: usize },
    /// GPU copies during which the GPU's link ran below its capable generation or width with
    /// the copies in flight (`evidence.gpu_state.link_under_load`).
    LinkDowntrainedUnderLoad { count: usize },
    /// GPU copies during which NVML reported clocks slowed (power cap, thermal or hardware
    /// slowdown; `evidence.gpu_state.clock_events`): `reasons`, each once.
    GpuClocksSlowed {
        count: usize,
        reasons: Vec<crate::ClockEvent>,
    },
    /// Cases during which a host setting changed (a governor, transparent huge pages, the
    /// hugepage pool; `evidence.host_state.changed`).
    HostSettingsChanged { count: usize },
    /// A GPU copy above its link's TLP-adjusted limit (but not above the link): suspect.
    AboveTlpLimit {
        key: String,
        gbps: f64,
        tlp_gbps: f64,
        mps_bytes: u32,
    },
    /// Cases that failed; `errors` the commonest errors first, each with its count, and
    /// `other_cases` that failed with `other_errors` errors not listed.
    CasesFailed {
        count: usize,
        errors: Vec<ErrorCount>,
        #[serde(default, skip_serializing_if = "is_zero")]
        other_cases: usize,
        #[serde(default, skip_serializing_if = "is_zero")]
        other_errors: usize,
    },
    /// NVMe → BAR: the 1-drive host-RAM figure lies more than 20 % under spdk_nvme_perf's read
    /// of the same drive at the same command size (the spec's sanity rule).
    HarnessOverhead {
        /// The BAR's device (`gpu0`, `pci-0000:00:05.0-bar2`).
        device: String,
        drive: String,
        host_ram_gbps: f64,
        perf_gbps: f64,
    },
    /// The run was interrupted.
    Interrupted,
    /// A warning of a profile written before warnings were typed: its words only.
    Text { text: String },
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// An error and how many cases failed with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorCount {
    pub count: usize,
    pub error: String,
}

/// A warning as the profile keeps it: its typed kind and its sentence.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Warning {
    #[serde(flatten)]
    pub kind: WarningKind,
    /// The warning in one sentence (what [`Display`](std::fmt::Display) prints).
    pub message: String,
}

impl From<WarningKind> for Warning {
    fn from(kind: WarningKind) -> Warning {
        let message = kind.to_string();
        Warning { kind, message }
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Typed warnings read as written; a profile of an earlier build holds plain strings, which
/// read as [`WarningKind::Text`].
impl<'de> Deserialize<'de> for Warning {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Typed {
            #[serde(flatten)]
            kind: WarningKind,
            message: String,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Text(String),
            Typed(Typed),
        }
        Ok(match Either::deserialize(d)? {
            Either::Text(text) => Warning {
                message: text.clone(),
                kind: WarningKind::Text { text },
            },
            Either::Typed(t) => Warning {
                kind: t.kind,
                message: t.message,
            },
        })
    }
}

impl std::fmt::Display for WarningKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WarningKind::CacheOnly { src_node, dst_node } => write!(
                f,
                "host RAM n{src_node}-n{dst_node}: every size measured fits in cache (source + \
                 destination under 4× the last-level cache), so it has no sustained figure and \
                 no ceiling; measure a larger size (the default sweep does; --host-sizes)"
            ),
            WarningKind::Contended { count, busy } => write!(
                f,
                "{count} measurement(s) ran while {} and are marked contended: treat them as \
                 lower bounds and rerun on an idle node",
                match busy {
                    Busy::Cpus => "their CPUs were busy",
                    Busy::Gpu => "their GPU was busy",
                    Busy::CpusOrGpu => "their CPUs or GPU were busy",
                }
            ),
            WarningKind::Unsteady { count } => write!(
                f,
                "{count} measurement(s) spread more than they are held to (spread_limit_pct) in \
                 the window of repetitions kept, after being timed again (unsteady figures: \
                 something on the machine varied their speed); their `evidence.windows` lists \
                 the windows; rerun on an idle node"
            ),
            WarningKind::PlacementUnverified { count } => write!(
                f,
                "{count} measurement(s) could not verify their NUMA placement (see each \
                 placement detail)"
            ),
            WarningKind::LinkDegraded {
                device,
                bdf,
                gen,
                width,
                max_gen,
                max_width,
            } => write!(
                f,
                "{device} ({bdf}) links at Gen{gen} x{width} below its maximum Gen{max_gen} \
                 x{max_width} when detected (idle devices downtrain; the GPU backend re-reads \
                 the link under load)"
            ),
            WarningKind::AboveLink {
                key,
                gbps,
                link_gbps,
            } => write!(
                f,
                "{key} measured {gbps:.2} GB/s, above the link's theoretical {link_gbps:.2} \
                 GB/s: this is a measurement bug, do not use this figure"
            ),
            WarningKind::LinkErrors { count } => write!(
                f,
                "{count} measurement(s) ran while a device on their PCIe path reported errors \
                 (AER counters or the GPU's PCIe replay counter rose; each one's \
                 evidence.link_errors and evidence.gpu_state.pcie_replays say which): check the \
                 links (seating, risers, retimers) and rerun"
            ),
            WarningKind::LinkDowntrainedUnderLoad { count } => write!(
                f,
                "{count} GPU copy measurement(s) ran with the GPU's link below its capable \
                 generation or width while the copies were in flight \
                 (evidence.gpu_state.link_under_load): their figures are of that slower link"
            ),
            WarningKind::GpuClocksSlowed { count, reasons } => write!(
                f,
                "{count} GPU copy measurement(s) ran while NVML reported clocks slowed ({}): \
                 check cooling and power limits, and rerun",
                reasons
                    .iter()
                    .map(|r| r.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            WarningKind::HostSettingsChanged { count } => write!(
                f,
                "{count} case(s) ran while a host setting changed (evidence.host_state.changed: \
                 a governor, transparent huge pages or the hugepage pool): something else is \
                 configuring the machine; rerun when it is left alone"
            ),
            WarningKind::AboveTlpLimit {
                key,
                gbps,
                tlp_gbps,
                mps_bytes,
            } => write!(
                f,
                "{key} measured {} GB/s, above its link's TLP-adjusted limit of {} GB/s at an \
                 MPS of {mps_bytes} bytes (a model of the wire, docs/pcie.md): suspect; check \
                 the MPS read and the figure's timing",
                crate::text::fixed(*gbps, 2),
                crate::text::fixed(*tlp_gbps, 2)
            ),
            WarningKind::CasesFailed {
                count,
                errors,
                other_cases,
                other_errors,
            } => {
                let mut why: Vec<String> = errors
                    .iter()
                    .map(|e| format!("{} × {}", e.count, e.error))
                    .collect();
                if *other_errors > 0 {
                    why.push(format!("{other_cases} with {other_errors} other error(s)"));
                }
                write!(
                    f,
                    "{count} case(s) failed; their figures are absent ({}; `failures` lists \
                     every case)",
                    why.join("; ")
                )
            }
            WarningKind::HarnessOverhead {
                device,
                drive,
                host_ram_gbps,
                perf_gbps,
            } => write!(
                f,
                "NVMe → BAR ({device}): the 1-drive host-RAM figure on {drive} ({host_ram_gbps:.2} \
                 GB/s) lies more than 20 % under spdk_nvme_perf's ({perf_gbps:.2} GB/s): the \
                 harness may be adding overhead; host RAM against the BAR still compares, but the \
                 absolute figures may understate the hardware"
            ),
            WarningKind::Interrupted => f.write_str(
                "the run was interrupted: only the cases that finished are in this profile",
            ),
            WarningKind::Text { text } => f.write_str(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_reads_back_typed_and_an_old_string_reads_as_text() {
        let ws: Vec<Warning> = vec![
            WarningKind::Contended {
                count: 2,
                busy: Busy::Gpu,
            }
            .into(),
            WarningKind::Interrupted.into(),
        ];
        let yaml = serde_saphyr::to_string(&ws).unwrap();
        assert!(yaml.contains("kind: contended"), "{yaml}");
        assert!(yaml.contains("busy: gpu"), "{yaml}");
        let back: Vec<Warning> = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(back, ws);
        assert!(back[0]
            .to_string()
            .starts_with("2 measurement(s) ran while their GPU"));
        let old: Vec<Warning> = serde_saphyr::from_str("- a warning of old\n").unwrap();
        assert_eq!(
            old[0].kind,
            WarningKind::Text {
                text: "a warning of old".into()
            }
        );
        assert_eq!(old[0].to_string(), "a warning of old");
    }
}
