//! Files: dated names that never overwrite an earlier run, and atomic writes (temp file in the
//! same folder, fsync, then a hard link that fails rather than replace an existing file, or a
//! rename over an existing regular file).
//!
//! An output path the user names is checked before any work: it must be nothing yet, or (for
//! [`replace`]) a regular file. A device node, FIFO, socket, folder or symbolic link there is
//! refused with an error naming what it is, so a rename never swaps `/dev/full` or a link for a
//! regular file. Every temp file is removed on every error path.

use hwc_profile::names::{RunFile, RunName};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Why a file could not be written, or a path not used.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The path cannot be used as asked (what is there, a missing name); the message says why.
    #[error("{0}")]
    Refused(String),
    /// An I/O error while doing what the message says; the error is its source.
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

type Result<T> = std::result::Result<T, FileError>;

/// Refuse with a message.
macro_rules! refuse {
    ($($t:tt)*) => {
        return Err(FileError::Refused(format!($($t)*)))
    };
}

/// An I/O error, with what was being done.
trait Doing<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> Doing<T> for std::io::Result<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| FileError::Io {
            what: what(),
            source,
        })
    }
}

/// The three files of one run, the folder of its charts, and the record kept while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFiles {
    pub report: PathBuf,
    pub profile: PathBuf,
    pub raw: PathBuf,
    /// Rewritten after each case; removed once the run's files are written.
    pub partial: PathBuf,
    /// The run's SVG charts, beside the report, which links them: `charts-<date>[-N]`.
    pub charts: PathBuf,
}

impl RunFiles {
    fn of(dir: &Path, run: &RunName) -> Self {
        RunFiles {
            report: dir.join(run.file(RunFile::Report)),
            profile: dir.join(run.file(RunFile::Profile)),
            raw: dir.join(run.file(RunFile::Raw)),
            partial: dir.join(run.file(RunFile::Partial)),
            charts: dir.join(charts_dir_name(run)),
        }
    }

    /// The charts folder's name, as the report links it (relative to the report's folder).
    pub fn charts_name(&self) -> String {
        self.charts
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Whether any of the names is taken, by anything at all: a dangling symbolic link or a
    /// folder reserves a name as much as a file does (the final hard link would fail on it, at
    /// the end of a run).
    fn any_exists(&self) -> bool {
        [
            &self.report,
            &self.profile,
            &self.raw,
            &self.partial,
            &self.charts,
        ]
        .iter()
        .any(|p| fs::symlink_metadata(p).is_ok())
    }

    /// The names for `date` in `dir` after the last any earlier run used: `…-<date>`, then
    /// `…-<date>-2`, `-3`, … A name freed by deleting an earlier run is not taken again: a
    /// later run always sorts after every run already there (`serve` picks the newest by name).
    pub fn choose(dir: &Path, date: &str) -> Result<Self> {
        let highest = highest_run_number(dir, date);
        let first = highest.saturating_add(1);
        // Past the highest number, names are free but for entries the listing missed (an
        // unreadable folder, a race): a bounded search, from wherever the numbers reached.
        for number in first..=first.saturating_add(9_999) {
            let run = RunName {
                date: date.to_string(),
                number,
            };
            let files = Self::of(dir, &run);
            if !files.any_exists() {
                return Ok(files);
            }
        }
        if highest == u32::MAX {
            refuse!(
                "no run number is free for {date} in {}: a file there is numbered {highest}, \
                 the largest there can be; move or rename the files numbered that high",
                dir.display()
            )
        }
        refuse!(
            "no run number is free for {date} in {}: every name from run {first} to {} is taken",
            dir.display(),
            first.saturating_add(9_999)
        )
    }
}

/// `charts-<date>` for a day's first run, `charts-<date>-N` for its Nth.
fn charts_dir_name(run: &RunName) -> String {
    match run.number {
        1 => format!("charts-{}", run.date),
        n => format!("charts-{}-{n}", run.date),
    }
}

/// Write each chart (file name, SVG) into `dir`, a new folder: all of them or, on an error,
/// none (the folder is removed again). Nothing is written, and no folder made, for no chart.
pub fn write_charts<N: AsRef<str>>(dir: &Path, charts: &[(N, &[u8])]) -> Result<()> {
    if charts.is_empty() {
        return Ok(());
    }
    check_new(dir)?;
    fs::create_dir(dir).doing(|| format!("cannot create {}", dir.display()))?;
    for (name, bytes) in charts {
        if let Err(e) = write_new(&dir.join(name.as_ref()), bytes) {
            remove_charts(dir, charts);
            return Err(e);
        }
    }
    Ok(())
}

/// Remove the charts [`write_charts`] wrote, then their folder (only if it is then empty).
pub fn remove_charts<N: AsRef<str>>(dir: &Path, charts: &[(N, &[u8])]) {
    for (name, _) in charts {
        let _ = fs::remove_file(dir.join(name.as_ref()));
    }
    let _ = fs::remove_dir(dir);
}

/// The highest run number of `date` that any file or entry of `dir` carries (1 for the
/// unsuffixed names, N for `-N`); 0 where there is none (or `dir` cannot be read: then the
/// names themselves are checked one by one).
fn highest_run_number(dir: &Path, date: &str) -> u32 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|e| RunName::parse(e.file_name().to_str()?))
        .filter(|(_, run)| run.date == date)
        .map(|(_, run)| run.number)
        .max()
        .unwrap_or(0)
}

/// Create `dir` if needed and prove it is writable, before any measurement runs.
pub fn ensure_writable(dir: &Path) -> Result<()> {
    // `metadata` follows a link: a link to a folder is a folder.
    if let Ok(m) = fs::metadata(dir) {
        if !m.is_dir() {
            refuse!(
                "cannot use {} as the output folder: it is {}, not a folder",
                dir.display(),
                kind_of(m.file_type())
            );
        }
    }
    fs::create_dir_all(dir).doing(|| format!("cannot create output folder {}", dir.display()))?;
    create_temp(&dir.join("hwceiling-write-test"))
        .and_then(|(mut f, _probe)| f.write_all(b"ok"))
        .doing(|| format!("output folder {} is not writable", dir.display()))
}

/// What a file system entry is, in words.
fn kind_of(t: fs::FileType) -> &'static str {
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_file() {
        "a regular file"
    } else {
        "an unknown kind of file"
    }
}

/// Refuse `path` as an output before any work: when it names no file, when its folder is
/// missing, when something other than a regular file is there (a device node, FIFO, socket,
/// directory or symbolic link — a link is refused rather than followed or replaced), or, unless
/// `existing_ok`, when anything is there at all.
fn check_target(path: &Path, existing_ok: bool) -> Result<()> {
    let shown = path.display();
    if path.file_name().is_none() {
        refuse!("cannot write {shown}: it does not name a file");
    }
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => refuse!(
            "refusing to write {shown}: it is a symbolic link (give the path of the file it \
             points to instead)"
        ),
        Ok(m) if !m.file_type().is_file() => refuse!(
            "refusing to write {shown}: it is {}, not a regular file",
            kind_of(m.file_type())
        ),
        Ok(_) if !existing_ok => {
            refuse!("cannot create {shown}: it already exists (it is never overwritten)")
        }
        Ok(_) => Ok(()),
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            match fs::metadata(dir) {
                Ok(m) if m.is_dir() => Ok(()),
                Ok(m) => refuse!(
                    "cannot write {shown}: {} is {}, not a folder",
                    dir.display(),
                    kind_of(m.file_type())
                ),
                Err(e) => {
                    Err(e).doing(|| format!("cannot write {shown}: no folder {}", dir.display()))
                }
            }
        }
        Err(e) => Err(e).doing(|| format!("cannot write {shown}")),
    }
}

/// Check, before any work, that [`write_new`] may create `path`: nothing may be there yet.
pub fn check_new(path: &Path) -> Result<()> {
    check_target(path, false)
}

/// Check, before any work, that [`replace`] may write `path`: nothing, or a regular file.
pub fn check_replaceable(path: &Path) -> Result<()> {
    check_target(path, true)
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
fn write_temp(path: &Path, bytes: &[u8]) -> std::io::Result<Temp> {
    let (mut f, tmp) = create_temp(path)?;
    f.write_all(bytes).and_then(|()| f.sync_all())?;
    Ok(tmp)
}

/// Write a new file atomically; fails (leaving nothing behind) if anything is at `path`.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    check_new(path)?;
    let tmp = write_temp(path, bytes).doing(|| format!("cannot write {}", path.display()))?;
    // A hard link never replaces what is there, whatever it is; the temp name goes either way.
    fs::hard_link(tmp.path(), path).map_err(|e| match e.kind() {
        ErrorKind::AlreadyExists => FileError::Refused(format!(
            "cannot create {}: it already exists (it is never overwritten)",
            path.display()
        )),
        _ => FileError::Io {
            what: format!("cannot create {}", path.display()),
            source: e,
        },
    })
}

/// Create each new file with [`write_new`], in order, or none: when one cannot be written, those
/// created before it are removed again, so a failed run never leaves a profile without its
/// report (which `serve` would take for a finished run) or a report without its profile.
pub fn write_all_new(files: &[(&Path, &[u8])]) -> Result<()> {
    for (i, (path, bytes)) in files.iter().enumerate() {
        if let Err(e) = write_new(path, bytes) {
            for (done, _) in &files[..i] {
                let _ = fs::remove_file(done);
            }
            return Err(e);
        }
    }
    Ok(())
}

/// Atomically replace `path`, which must be nothing or a regular file (see [`check_replaceable`];
/// what is there is checked again here, a moment before the rename).
pub fn replace(path: &Path, bytes: &[u8]) -> Result<()> {
    check_replaceable(path)?;
    rename_into_place(path, bytes)
}

fn rename_into_place(path: &Path, bytes: &[u8]) -> Result<()> {
    let failed = || format!("cannot write {}", path.display());
    let tmp = write_temp(path, bytes).doing(failed)?;
    fs::rename(tmp.path(), path).doing(failed)?;
    tmp.renamed();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hwc_testkit::{mkfifo, names_in};

    #[test]
    fn files_written_together_are_all_written_or_none() {
        let d = tempfile::tempdir().unwrap();
        let (raw, profile) = (d.path().join("raw.json"), d.path().join("p.yaml"));
        // The third cannot be created (its folder is missing): the two before it go again.
        let missing = d.path().join("gone").join("report.md");
        let e = write_all_new(&[(&raw, b"{}"), (&profile, b"y"), (&missing, b"#")]).unwrap_err();
        assert!(format!("{e:#}").contains("report.md"), "{e:#}");
        assert!(names_in(d.path()).is_empty(), "{:?}", names_in(d.path()));
        // Something already at the second name is refused and left as it was.
        std::fs::write(&profile, "theirs").unwrap();
        assert!(write_all_new(&[(&raw, b"{}"), (&profile, b"y")]).is_err());
        assert_eq!(names_in(d.path()), ["p.yaml"]);
        assert_eq!(std::fs::read_to_string(&profile).unwrap(), "theirs");
        std::fs::remove_file(&profile).unwrap();
        write_all_new(&[(&raw, b"{}"), (&profile, b"y")]).unwrap();
        assert_eq!(names_in(d.path()), ["p.yaml", "raw.json"]);
    }

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
    fn charts_are_written_all_or_none_into_a_new_folder_that_reserves_the_run() {
        let d = tempfile::tempdir().unwrap();
        let a = RunFiles::choose(d.path(), "2026-11-29").unwrap();
        assert!(a.charts.ends_with("charts-2026-11-29"));
        assert_eq!(a.charts_name(), "charts-2026-11-29");
        // No chart: no folder.
        write_charts::<&str>(&a.charts, &[]).unwrap();
        assert!(names_in(d.path()).is_empty());
        // A name that cannot be created: none of them stays, nor the folder.
        let bad: [(&str, &[u8]); 2] = [("a.svg", b"<svg/>"), ("no/such/b.svg", b"<svg/>")];
        assert!(write_charts(&a.charts, &bad).is_err());
        assert!(names_in(d.path()).is_empty(), "{:?}", names_in(d.path()));
        write_charts(&a.charts, &[("a.svg", b"<svg/>"), ("b.svg", b"<svg/>")]).unwrap();
        assert_eq!(names_in(&a.charts), ["a.svg", "b.svg"]);
        // Never into a folder that is already there.
        assert!(write_charts(&a.charts, &[("c.svg", b"<svg/>")]).is_err());
        // A charts folder left alone takes its run's number.
        let b = RunFiles::choose(d.path(), "2026-11-29").unwrap();
        assert!(b.charts.ends_with("charts-2026-11-29-2"), "{:?}", b.charts);
        assert!(b.report.ends_with("hardware-ceiling-2026-11-29-2.md"));
    }

    #[test]
    fn a_name_freed_by_deleting_an_earlier_run_is_not_taken_again() {
        let d = tempfile::tempdir().unwrap();
        let date = "2026-12-02";
        let a = RunFiles::choose(d.path(), date).unwrap();
        write_new(&a.profile, b"x").unwrap();
        let b = RunFiles::choose(d.path(), date).unwrap();
        write_new(&b.profile, b"x").unwrap();
        fs::remove_file(&a.profile).unwrap();
        // The next run sorts after -2, not in the freed first slot.
        let c = RunFiles::choose(d.path(), date).unwrap();
        assert!(
            c.profile.ends_with("hardware_profile_2026-12-02-3.yaml"),
            "{c:?}"
        );
        // Other dates, other files and odd suffixes do not count.
        for name in [
            "hardware_profile_2026-12-01-9.yaml",
            "hardware_profile_2026-12-02-07.yaml",
            "hardware_profile_2026-12-02-x.yaml",
            "hardware_profile_2026-12-02-+9.yaml",
            "hardware_profile_2026-12-02-1.yaml",
            "notes-2026-12-02-40.txt",
        ] {
            fs::write(d.path().join(name), b"x").unwrap();
        }
        assert_eq!(highest_run_number(d.path(), date), 2);
        fs::write(
            d.path().join("hardware_raw_2026-12-02-12.partial.json"),
            b"{}",
        )
        .unwrap();
        assert_eq!(highest_run_number(d.path(), date), 12);
        assert_eq!(highest_run_number(&d.path().join("missing"), date), 0);
    }

    #[test]
    fn numbers_beyond_ten_thousand_go_on_and_the_largest_is_refused_clearly() {
        let d = tempfile::tempdir().unwrap();
        let date = "2026-12-02";
        fs::write(
            d.path().join("hardware_profile_2026-12-02-12345.yaml"),
            b"x",
        )
        .unwrap();
        let next = RunFiles::choose(d.path(), date).unwrap();
        assert!(
            next.profile
                .ends_with("hardware_profile_2026-12-02-12346.yaml"),
            "{next:?}"
        );
        let max = format!("hardware_raw_2026-12-02-{}.json", u32::MAX);
        fs::write(d.path().join(max), b"{}").unwrap();
        let e = RunFiles::choose(d.path(), date).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "no run number is free for {date} in {}: a file there is numbered {}",
                d.path().display(),
                u32::MAX
            )),
            "{e}"
        );
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

    /// A folder holding one of each kind of entry that is not a regular file.
    fn not_regular_files(dir: &Path) -> Vec<(PathBuf, &'static str)> {
        let target = dir.join("target.xml");
        fs::write(&target, b"kept").unwrap();
        let fifo = dir.join("fifo.xml");
        mkfifo(&fifo);
        let folder = dir.join("adir");
        fs::create_dir(&folder).unwrap();
        let link = dir.join("link.xml");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let dangling = dir.join("dangling.xml");
        std::os::unix::fs::symlink(dir.join("nowhere.xml"), &dangling).unwrap();
        let socket = dir.join("sock.xml");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        vec![
            (fifo, "is a FIFO (named pipe), not a regular file"),
            (folder, "is a directory, not a regular file"),
            (link, "is a symbolic link"),
            (dangling, "is a symbolic link"),
            (socket, "is a socket, not a regular file"),
        ]
    }

    #[test]
    fn replace_and_write_new_refuse_what_is_not_a_regular_file_and_create_nothing() {
        let d = tempfile::tempdir().unwrap();
        let cases = not_regular_files(d.path());
        let before = names_in(d.path());
        for (path, says) in &cases {
            let kind = fs::symlink_metadata(path).unwrap().file_type();
            for (what, result) in [
                ("check_replaceable", check_replaceable(path)),
                ("replace", replace(path, b"new")),
                ("check_new", check_new(path)),
                ("write_new", write_new(path, b"new")),
            ] {
                let e = format!("{:#}", result.unwrap_err());
                assert!(
                    e.contains(&path.display().to_string()) && e.contains(says),
                    "{what}: {e}"
                );
                assert!(!e.contains('\n'), "{what}: {e}");
            }
            // Still what it was, and nothing new beside it.
            assert_eq!(fs::symlink_metadata(path).unwrap().file_type(), kind);
            assert_eq!(names_in(d.path()), before);
        }
        assert_eq!(fs::read(d.path().join("target.xml")).unwrap(), b"kept");
        assert!(names_in(&d.path().join("adir")).is_empty());
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
    fn a_missing_folder_or_a_path_naming_no_file_is_refused_up_front() {
        let d = tempfile::tempdir().unwrap();
        let e = format!(
            "{:#}",
            check_replaceable(&d.path().join("no/junit.xml")).unwrap_err()
        );
        assert!(e.contains("cannot write") && e.contains("no folder"), "{e}");
        let file = d.path().join("plain");
        fs::write(&file, b"").unwrap();
        let e = format!("{:#}", check_new(&file.join("out.md")).unwrap_err());
        assert!(e.contains("is a regular file, not a folder"), "{e}");
        let e = format!("{:#}", check_new(Path::new("/")).unwrap_err());
        assert!(e.contains("does not name a file"), "{e}");
        let e = format!("{:#}", check_new(&file).unwrap_err());
        assert!(e.contains("already exists"), "{e}");
        assert_eq!(names_in(d.path()), ["plain"]);
    }

    #[test]
    fn a_failed_rename_removes_its_temp_file() {
        // Checked up front, a directory is refused before any temp file; past the check (as
        // when one appears mid-run), the rename fails on it and the temp file must still go.
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("out.json");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("inside"), b"x").unwrap();
        let e = format!("{:#}", rename_into_place(&target, b"new").unwrap_err());
        assert!(e.starts_with("cannot write") && !e.contains('\n'), "{e}");
        assert_eq!(names_in(d.path()), ["out.json"]);
        assert_eq!(names_in(&target), ["inside"]);
    }

    #[test]
    fn any_entry_reserves_a_run_name_a_dangling_link_included() {
        let d = tempfile::tempdir().unwrap();
        let a = RunFiles::choose(d.path(), "2026-12-02").unwrap();
        std::os::unix::fs::symlink(d.path().join("gone"), &a.raw).unwrap();
        let b = RunFiles::choose(d.path(), "2026-12-02").unwrap();
        assert!(b.raw.ends_with("hardware_raw_2026-12-02-2.json"), "{b:?}");
    }

    #[test]
    fn an_output_folder_that_is_not_a_folder_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        mkfifo(&fifo);
        let e = format!("{:#}", ensure_writable(&fifo).unwrap_err());
        assert!(e.contains("is a FIFO (named pipe), not a folder"), "{e}");
        // A link to a folder is a folder; the probe leaves nothing behind.
        let real = d.path().join("real");
        fs::create_dir(&real).unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        ensure_writable(&link).unwrap();
        assert!(names_in(&real).is_empty());
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
