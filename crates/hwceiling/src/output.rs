//! Files: dated names that never overwrite an earlier run, and atomic writes (temp file in the
//! same folder, fsync, then a hard link that fails rather than replace an existing file). Every
//! temp file is removed on every error path.

use anyhow::{bail, Context, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
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
    create_temp(&dir.join("hwceiling-write-test"))
        .and_then(|(mut f, _probe)| f.write_all(b"ok"))
        .with_context(|| format!("output folder {} is not writable", dir.display()))
}

/// A temp file this process created; removed when dropped unless it was renamed into place.
struct Temp {
    path: PathBuf,
    armed: bool,
}

impl Temp {
    fn path(&self) -> &Path {
        &self.path
    }

    /// It is no longer there to remove: it was renamed into place.
    fn renamed(mut self) {
        self.armed = false;
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if self.armed {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Create a new, empty temp file beside `path` (`.<name>.tmp-<pid>`, `-<n>` added if that is
/// taken). `create_new` neither follows a link planted at the name nor truncates a file that
/// is there, so the guard only ever removes a file this call made.
fn create_temp(path: &Path) -> std::io::Result<(File, Temp)> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let pid = std::process::id();
    for n in 0..100 {
        let tmp = match n {
            0 => path.with_file_name(format!(".{name}.tmp-{pid}")),
            _ => path.with_file_name(format!(".{name}.tmp-{pid}-{n}")),
        };
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => {
                return Ok((
                    f,
                    Temp {
                        path: tmp,
                        armed: true,
                    },
                ))
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        ErrorKind::AlreadyExists,
        "100 temp files of this process are in the way",
    ))
}

/// `bytes` in a synced temp file beside `path`; on any error the temp file is gone.
fn write_temp(path: &Path, bytes: &[u8]) -> Result<Temp> {
    let (mut f, tmp) = create_temp(path)?;
    f.write_all(bytes).and_then(|()| f.sync_all())?;
    Ok(tmp)
}

/// Write a new file atomically; fails (leaving nothing behind) if `path` exists.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp =
        write_temp(path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    // The temp name goes whether the link was made or not.
    fs::hard_link(tmp.path(), path)
        .with_context(|| format!("cannot create {} (it must not exist yet)", path.display()))
}

/// Atomically replace `path` (for the running record only).
pub fn replace(path: &Path, bytes: &[u8]) -> Result<()> {
    let failed = || format!("cannot write {}", path.display());
    let tmp = write_temp(path, bytes).with_context(failed)?;
    fs::rename(tmp.path(), path).with_context(failed)?;
    tmp.renamed();
    Ok(())
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

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replace_writes_a_new_file_or_over_a_regular_one_and_leaves_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("junit.xml");
        replace(&p, b"one").unwrap();
        replace(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(names_in(d.path()), ["junit.xml"]);
        // A temp file left by an earlier process of this id is neither used nor removed.
        let stale = d
            .path()
            .join(format!(".junit.xml.tmp-{}", std::process::id()));
        fs::write(&stale, b"stale").unwrap();
        replace(&p, b"three").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"three");
        assert_eq!(fs::read(&stale).unwrap(), b"stale");
        assert_eq!(names_in(d.path()).len(), 2);
    }

    #[test]
    fn a_failed_rename_removes_its_temp_file() {
        // The rename fails on a non-empty directory; the temp file must still go.
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("out.json");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("inside"), b"x").unwrap();
        let e = format!("{:#}", replace(&target, b"new").unwrap_err());
        assert!(e.starts_with("cannot write") && !e.contains('\n'), "{e}");
        assert_eq!(names_in(d.path()), ["out.json"]);
        assert_eq!(names_in(&target), ["inside"]);
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
