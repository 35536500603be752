//! Files: dated names that never overwrite an earlier run, and atomic writes (temp file in the
//! same folder, fsync, then a hard link that fails rather than replace an existing file).

use anyhow::{bail, Context, Result};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The three files of one run, plus the record kept while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFiles {
    pub report: PathBuf,
    pub profile: PathBuf,
    pub raw: PathBuf,
    /// Rewritten after each case; removed once the run's files are written.
    pub partial: PathBuf,
}

impl RunFiles {
    fn for_suffix(dir: &Path, date: &str, suffix: &str) -> Self {
        RunFiles {
            report: dir.join(format!("hardware-ceiling-{date}{suffix}.md")),
            profile: dir.join(format!("hardware_profile_{date}{suffix}.yaml")),
            raw: dir.join(format!("hardware_raw_{date}{suffix}.json")),
            partial: dir.join(format!("hardware_raw_{date}{suffix}.partial.json")),
        }
    }

    fn any_exists(&self) -> bool {
        [&self.report, &self.profile, &self.raw, &self.partial]
            .iter()
            .any(|p| p.exists())
    }

    /// The first set of names for `date` in `dir` that no earlier run used: `…-<date>`, then
    /// `…-<date>-2`, `-3`, …
    pub fn choose(dir: &Path, date: &str) -> Result<Self> {
        for n in 1..10_000 {
            let suffix = if n == 1 {
                String::new()
            } else {
                format!("-{n}")
            };
            let files = Self::for_suffix(dir, date, &suffix);
            if !files.any_exists() {
                return Ok(files);
            }
        }
        bail!("{} already holds 9999 runs dated {date}", dir.display())
    }
}

/// Create `dir` if needed and prove it is writable, before any measurement runs.
pub fn ensure_writable(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir)
        .with_context(|| format!("cannot create output folder {}", dir.display()))?;
    let probe = dir.join(format!(".hwceiling-write-test-{}", std::process::id()));
    File::create(&probe)
        .and_then(|mut f| f.write_all(b"ok"))
        .with_context(|| format!("output folder {} is not writable", dir.display()))?;
    fs::remove_file(&probe).ok();
    Ok(())
}

fn temp_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

fn write_temp(path: &Path, bytes: &[u8]) -> Result<PathBuf> {
    let tmp = temp_beside(path);
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    Ok(tmp)
}

/// Write a new file atomically; fails (leaving nothing behind) if `path` exists.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = write_temp(path, bytes)?;
    let linked = fs::hard_link(&tmp, path);
    fs::remove_file(&tmp).ok();
    linked.with_context(|| format!("cannot create {} (it must not exist yet)", path.display()))
}

/// Atomically replace `path` (for the running record only).
pub fn replace(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = write_temp(path, bytes)?;
    fs::rename(&tmp, path).with_context(|| format!("cannot update {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dated_and_never_reused() {
        let d = tempfile::tempdir().unwrap();
        let a = RunFiles::choose(d.path(), "2026-11-29").unwrap();
        assert!(a.report.ends_with("hardware-ceiling-2026-11-29.md"));
        assert!(a.profile.ends_with("hardware_profile_2026-11-29.yaml"));
        write_new(&a.profile, b"x").unwrap();
        let b = RunFiles::choose(d.path(), "2026-11-29").unwrap();
        assert!(b.report.ends_with("hardware-ceiling-2026-11-29-2.md"));
        // A leftover partial record of an interrupted run also reserves its name.
        write_new(&b.partial, b"{}").unwrap();
        let c = RunFiles::choose(d.path(), "2026-11-29").unwrap();
        assert!(c.raw.ends_with("hardware_raw_2026-11-29-3.json"));
    }

    #[test]
    fn write_new_refuses_to_overwrite_and_leaves_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.yaml");
        write_new(&p, b"first").unwrap();
        assert!(write_new(&p, b"second").is_err());
        assert_eq!(fs::read(&p).unwrap(), b"first");
        let names: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn unwritable_folder_is_reported() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("plain-file");
        fs::write(&file, b"").unwrap();
        let e = ensure_writable(&file.join("sub")).unwrap_err();
        assert!(
            format!("{e:#}").contains("cannot create output folder"),
            "{e:#}"
        );
    }
}
