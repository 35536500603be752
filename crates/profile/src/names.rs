//! The names of a run's files, written and read in this one place:
//! `hardware-ceiling-<date>[-N].md`, `hardware_profile_<date>[-N].yaml`,
//! `hardware_raw_<date>[-N].json` and, while the run goes on, `hardware_raw_<date>[-N].partial.json`.
//! The day's first run has no `-N`; later runs count from 2. `hwceiling profile` names its files
//! by [`RunName::file`]; it numbers a run past every number in its folder, and `serve` finds
//! profiles and running records, newest first, by [`RunName::parse`].

/// One of a run's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunFile {
    Report,
    Profile,
    Raw,
    /// The running record, rewritten after each case; removed once the run's files are written.
    Partial,
}

impl RunFile {
    /// Every kind, the running record before the raw record (its name ends as the raw one's).
    pub const ALL: [RunFile; 4] = [
        RunFile::Report,
        RunFile::Profile,
        RunFile::Partial,
        RunFile::Raw,
    ];

    fn prefix(self) -> &'static str {
        match self {
            RunFile::Report => "hardware-ceiling-",
            RunFile::Profile => "hardware_profile_",
            RunFile::Raw | RunFile::Partial => "hardware_raw_",
        }
    }

    fn extension(self) -> &'static str {
        match self {
            RunFile::Report => ".md",
            RunFile::Profile => ".yaml",
            RunFile::Raw => ".json",
            RunFile::Partial => ".partial.json",
        }
    }
}

/// Which run of which day: what a run's file names carry. Orders as `serve` picks the newest
/// (the later date, then the higher number).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RunName {
    /// `YYYY-MM-DD`.
    pub date: String,
    /// 1 for the day's first run, then 2, 3, …
    pub number: u32,
}

impl RunName {
    /// The name of the run's file of `kind`.
    pub fn file(&self, kind: RunFile) -> String {
        let suffix = match self.number {
            1 => String::new(),
            n => format!("-{n}"),
        };
        format!("{}{}{suffix}{}", kind.prefix(), self.date, kind.extension())
    }

    /// The kind and run of a file named as [`RunName::file`] names them; `None` for any other
    /// name (a number with a leading zero, `-1`, a date not `YYYY-MM-DD`, another extension).
    pub fn parse(name: &str) -> Option<(RunFile, RunName)> {
        RunFile::ALL.into_iter().find_map(|kind| {
            let stem = name
                .strip_prefix(kind.prefix())?
                .strip_suffix(kind.extension())?;
            let date = stem.get(..10)?;
            let b = date.as_bytes();
            let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
            let dated =
                b[4] == b'-' && b[7] == b'-' && digits(0..4) && digits(5..7) && digits(8..10);
            let number = run_number(stem.get(10..)?)?;
            dated.then(|| {
                (
                    kind,
                    RunName {
                        date: date.to_string(),
                        number,
                    },
                )
            })
        })
    }
}

/// The run number a name carries after its date: nothing for the day's first run (1), `-N` for
/// a later one (N from 2, in digits without a leading zero); `None` for any other suffix.
fn run_number(suffix: &str) -> Option<u32> {
    match suffix.strip_prefix('-') {
        None if suffix.is_empty() => Some(1),
        Some(d) if !d.starts_with('0') && d.bytes().all(|b| b.is_ascii_digit()) => {
            d.parse::<u32>().ok().filter(|&n| n >= 2)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(date: &str, number: u32) -> RunName {
        RunName {
            date: date.into(),
            number,
        }
    }

    #[test]
    fn every_file_of_a_run_reads_back_as_its_kind_and_run() {
        for r in [run("2026-11-29", 1), run("2026-11-29", 12)] {
            for kind in RunFile::ALL {
                assert_eq!(RunName::parse(&r.file(kind)), Some((kind, r.clone())));
            }
        }
        assert_eq!(
            run("2026-11-29", 3).file(RunFile::Partial),
            "hardware_raw_2026-11-29-3.partial.json"
        );
        assert_eq!(
            run("2026-11-29", 1).file(RunFile::Report),
            "hardware-ceiling-2026-11-29.md"
        );
    }

    #[test]
    fn other_names_are_no_run_files() {
        for name in [
            "hardware_profile_2026-11-29.yml",
            "hardware_profile_latest.yaml",
            "hardware_profile_2026-11-29-.yaml",
            "hardware_profile_2026-11-29-07.yaml",
            "hardware_profile_2026-11-29-1.yaml",
            "hardware_profile_2026-11-29-+2.yaml",
            "hardware_profile_2026-11-29x.yaml",
            "hardware_profile_2026_11_29.yaml",
            "hardware_profile_.yaml",
            "hardware_raw_2026-11-29.json.tmp",
            "hardware_profile_2026-11-29-99999999999.yaml",
        ] {
            assert_eq!(RunName::parse(name), None, "{name}");
        }
        assert!(run("2026-11-30", 1) > run("2026-11-29", 10));
    }
}
