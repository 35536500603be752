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
}
