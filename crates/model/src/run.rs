//! What a run was asked to measure, as the run itself judged it against this machine's full
//! plan: whether it was `--quick`, and each selection that narrowed it below a full run's
//! (`provenance.run`). `Completeness` reads these fields; nothing reads the options' words.

use serde::{Deserialize, Serialize};

/// The selections a run can narrow its plan by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Selection {
    Paths,
    Engines,
    Drives,
    Target,
    Threads,
    HostSizes,
    NvmeSizes,
    QueueDepths,
}

impl Selection {
    /// The flag that makes it.
    pub fn flag(self) -> &'static str {
        match self {
            Selection::Paths => "--paths",
            Selection::Engines => "--engines",
            Selection::Drives => "--drives",
            Selection::Target => "--target",
            Selection::Threads => "--threads",
            Selection::HostSizes => "--host-sizes",
            Selection::NvmeSizes => "--nvme-sizes",
            Selection::QueueDepths => "--queue-depths",
        }
    }

    /// Its name as a key of the options' record (`host_sizes`): the flag without its dashes.
    pub fn key(self) -> &'static str {
        match self {
            Selection::Paths => "paths",
            Selection::Engines => "engines",
            Selection::Drives => "drives",
            Selection::Target => "target",
            Selection::Threads => "threads",
            Selection::HostSizes => "host_sizes",
            Selection::NvmeSizes => "nvme_sizes",
            Selection::QueueDepths => "queue_depths",
        }
    }

    /// A list that replaces one of the sweeps (it narrows only where it leaves a point out).
    pub fn is_sweep(self) -> bool {
        matches!(
            self,
            Selection::Threads
                | Selection::HostSizes
                | Selection::NvmeSizes
                | Selection::QueueDepths
        )
    }
}

/// One selection that narrowed a run: what was given, and what of the full plan it left out
/// (absent where that is not known, as before a run has looked at its machine).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Narrowing {
    pub selection: Selection,
    /// The values given, as the run's case keys write them (`h2d`, `256MiB`, `8`).
    pub given: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out: Option<Vec<String>>,
}

impl Narrowing {
    /// The selection `given`, which left `left_out` of the full plan out (`None`: not known):
    /// a narrowing unless it is known to leave nothing out. A target always narrows (its
    /// ceilings are its own, not the drives'); paths narrow unless every path is named.
    pub fn judge(
        selection: Selection,
        given: Vec<String>,
        left_out: Option<Vec<String>>,
    ) -> Option<Narrowing> {
        let narrows = match selection {
            Selection::Target => true,
            Selection::Paths => !crate::PathId::ALL
                .iter()
                .all(|p| given.iter().any(|g| g == p.as_str())),
            _ => left_out.as_ref().is_none_or(|l| !l.is_empty()),
        };
        narrows.then_some(Narrowing {
            selection,
            given,
            left_out: left_out.filter(|_| selection != Selection::Paths),
        })
    }
}

impl std::fmt::Display for Narrowing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.selection.flag(), self.given.join(","))?;
        match &self.left_out {
            Some(l) if !l.is_empty() => write!(f, " (leaves out {})", l.join(",")),
            _ => Ok(()),
        }
    }
}

/// The run's own account of how much of the full plan it measured.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunChoices {
    /// `--quick`: a tenth of the repetitions.
    pub quick: bool,
    /// The selections that narrowed it, in flag order; empty for the full plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub narrowed_by: Vec<Narrowing>,
}

/// What one run is asked to do: the typed configuration `hwceiling profile` builds from its
/// flags and `serve` builds from a request (and hands its child as JSON, `--run-config`). Each
/// field is the flag of the same name; `None` is the flag left out (the full sweep, every
/// drive, the default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Folder for the report, profile and raw record.
    pub output_dir: std::path::PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<crate::PathId>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engines: Option<Vec<crate::EngineId>>,
    /// Host memcpy thread counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<Vec<u32>>,
    /// Host memcpy sizes, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_sizes: Option<Vec<u64>>,
    #[serde(default)]
    pub quick: bool,
    /// `--fixed-reps`: every case its full count of timed repetitions (no stopping once steady).
    #[serde(default)]
    pub fixed_reps: bool,
    #[serde(default)]
    pub allow_contended: bool,
    /// NVMe drives, as the user named them (serial, `/dev/nvmeXnY`, `/dev/nvmeX`, PCI address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drives: Option<Vec<String>>,
    #[serde(default)]
    pub allow_destructive_writes: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_drives: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<std::path::PathBuf>,
    /// NVMe block sizes, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvme_sizes: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_depths: Option<Vec<u32>>,
    /// Bytes per drive per NVMe repetition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvme_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvme_long_tests: Option<crate::long_tests::LongTestRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvme_idle_max_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvme_gc_write_s: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvme_gc_settle_max_s: Option<u64>,
    /// NVMe drives the SPDK engines may hand to vfio-pci for their cases (named as `drives`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spdk_drives: Option<Vec<String>>,
    /// Where SPDK is built: `spdk_nvme_perf` is looked for there only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spdk_dir: Option<std::path::PathBuf>,
    /// Leave `spdk_drives` on vfio-pci when the run ends (`hwceiling restore` puts them back).
    #[serde(default)]
    pub leave_bound: bool,
    /// PCI BARs (`BDF/N`) the NVMe → BAR path may DMA into, besides GPU BAR1 (their contents
    /// are overwritten).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p2p_bars: Option<Vec<String>>,
}

impl RunConfig {
    /// The full run, into `output_dir`.
    pub fn new(output_dir: impl Into<std::path::PathBuf>) -> Self {
        RunConfig {
            output_dir: output_dir.into(),
            paths: None,
            engines: None,
            threads: None,
            host_sizes: None,
            quick: false,
            fixed_reps: false,
            allow_contended: false,
            drives: None,
            allow_destructive_writes: false,
            write_drives: None,
            target: None,
            nvme_sizes: None,
            queue_depths: None,
            nvme_bytes: None,
            nvme_long_tests: None,
            nvme_idle_max_s: None,
            nvme_gc_write_s: None,
            nvme_gc_settle_max_s: None,
            spdk_drives: None,
            spdk_dir: None,
            leave_bound: false,
            p2p_bars: None,
        }
    }

    /// Whether the run measures `path` (every path without `paths`).
    pub fn wants(&self, path: crate::PathId) -> bool {
        self.paths.as_ref().is_none_or(|p| p.contains(&path))
    }
}

/// What of the full plan each selection of a [`RunConfig`] leaves out, as only the run on its
/// machine can tell (`None`: not known, as before the run has looked at its machine; see
/// [`Narrowing::judge`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeftOut {
    pub engines: Option<Vec<String>>,
    pub drives: Option<Vec<String>>,
    pub threads: Option<Vec<String>>,
    pub host_sizes: Option<Vec<String>>,
    pub nvme_sizes: Option<Vec<String>>,
    pub queue_depths: Option<Vec<String>>,
}

impl RunConfig {
    /// Each selection given, in flag order, with its values as the run's case keys write them
    /// and what of the full plan it leaves out (from `left`; never for `--paths` and
    /// `--target`, which [`Narrowing::judge`] decides alone).
    pub fn selections(&self, left: &LeftOut) -> Vec<(Selection, Vec<String>, Option<Vec<String>>)> {
        fn shown<T>(v: &[T], f: impl Fn(&T) -> String) -> Vec<String> {
            v.iter().map(f).collect()
        }
        let size = |b: &u64| crate::size_label(*b);
        let mut out = Vec::new();
        let mut push = |sel, given: Option<Vec<String>>, left: &Option<Vec<String>>| {
            if let Some(given) = given {
                out.push((sel, given, left.clone()));
            }
        };
        push(
            Selection::Paths,
            self.paths.as_ref().map(|v| shown(v, |p| p.to_string())),
            &None,
        );
        push(
            Selection::Engines,
            self.engines.as_ref().map(|v| shown(v, |e| e.to_string())),
            &left.engines,
        );
        // `--spdk-drives` without `--drives` selects the drives every engine measures.
        push(
            Selection::Drives,
            self.drives.clone().or_else(|| self.spdk_drives.clone()),
            &left.drives,
        );
        push(
            Selection::Target,
            self.target.as_ref().map(|t| vec![t.display().to_string()]),
            &None,
        );
        push(
            Selection::Threads,
            self.threads.as_ref().map(|v| shown(v, u32::to_string)),
            &left.threads,
        );
        push(
            Selection::HostSizes,
            self.host_sizes.as_ref().map(|v| shown(v, size)),
            &left.host_sizes,
        );
        push(
            Selection::NvmeSizes,
            self.nvme_sizes.as_ref().map(|v| shown(v, size)),
            &left.nvme_sizes,
        );
        push(
            Selection::QueueDepths,
            self.queue_depths.as_ref().map(|v| shown(v, u32::to_string)),
            &left.queue_depths,
        );
        out
    }

    /// The run's account of its completeness: `--quick`, and the selections that narrow it
    /// below the full plan, judged with what each leaves out (`left`).
    pub fn run_choices(&self, left: &LeftOut) -> RunChoices {
        RunChoices {
            quick: self.quick,
            narrowed_by: self
                .selections(left)
                .into_iter()
                .filter_map(|(sel, given, left)| Narrowing::judge(sel, given, left))
                .collect(),
        }
    }
}

/// The files a finished `hwceiling profile` wrote, as it tells a program that started it
/// (`--result-file`; `serve` reads it to answer which profile its run wrote).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunWritten {
    pub profile: std::path::PathBuf,
    pub report: std::path::PathBuf,
    pub raw: std::path::PathBuf,
    pub interrupted: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_selection_narrows_unless_it_is_known_to_leave_nothing_out() {
        let t = |left: Option<&[&str]>| {
            Narrowing::judge(Selection::Threads, s(&["1", "8"]), left.map(s)).map(|n| n.to_string())
        };
        assert_eq!(t(Some(&[])), None);
        assert_eq!(
            t(Some(&["2", "4"])).as_deref(),
            Some("--threads 1,8 (leaves out 2,4)")
        );
        assert_eq!(t(None).as_deref(), Some("--threads 1,8"));
        let all: Vec<String> = crate::PathId::ALL.iter().map(|p| p.to_string()).collect();
        assert_eq!(Narrowing::judge(Selection::Paths, all, None), None);
        let p = Narrowing::judge(Selection::Paths, s(&["h2d"]), Some(s(&["d2h"]))).unwrap();
        assert_eq!(p.to_string(), "--paths h2d");
        assert!(Narrowing::judge(Selection::Target, s(&["/x"]), Some(vec![])).is_some());
    }

    #[test]
    fn a_config_judges_its_selections_with_what_they_leave_out() {
        let mut c = RunConfig::new("out");
        assert_eq!(c.run_choices(&LeftOut::default()), RunChoices::default());
        c.quick = true;
        c.paths = Some(vec![crate::PathId::H2d]);
        c.threads = Some(vec![1, 8]);
        c.host_sizes = Some(vec![256 << 20]);
        let unknown = c.run_choices(&LeftOut::default());
        assert!(unknown.quick);
        let said: Vec<String> = unknown.narrowed_by.iter().map(|n| n.to_string()).collect();
        assert_eq!(
            said,
            ["--paths h2d", "--threads 1,8", "--host-sizes 256MiB"]
        );
        let known = LeftOut {
            threads: Some(vec![]),
            host_sizes: Some(s(&["4MiB"])),
            ..LeftOut::default()
        };
        let said: Vec<String> = c
            .run_choices(&known)
            .narrowed_by
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(
            said,
            ["--paths h2d", "--host-sizes 256MiB (leaves out 4MiB)"]
        );
    }

    #[test]
    fn a_config_reads_back_as_written_and_refuses_unknown_fields() {
        let mut c = RunConfig::new("/srv/p");
        c.nvme_long_tests = Some(crate::long_tests::parse_long_tests("all").unwrap());
        c.engines = Some(vec![crate::EngineId::new("null")]);
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<RunConfig>(&json).unwrap(), c);
        let e = serde_json::from_str::<RunConfig>(r#"{"output_dir":"x","thread":[1]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `thread`"), "{e}");
    }
}
