//! The profile being served: the newest *complete* `hardware_profile_<date>[-N].yaml` of the
//! output folder (not a `--quick` run, not an interrupted one, not one narrowed by a selection
//! such as `--paths h2d`), or, while the folder holds no complete profile, the newest one that
//! parses, marked as what it is. An efficiency evaluator divides by the ceilings served, so a
//! quick look, a run stopped half-way or a run of a part of the plan never silently replaces a
//! complete run's ceilings (a narrowed run would take away every ceiling it did not measure).
//!
//! The folder is polled. A newer complete profile, or a changed version of the file served,
//! replaces the profile served (a served file rewritten as an incomplete run's is judged as any
//! file: a complete profile of the folder is served over it); a newer quick, interrupted or narrowed one does not replace a
//! complete one but is noted as passed over ([`Serving::passed_over`]: the newest such file, and why). A file
//! that fails to parse is logged, remembered until it changes, and skipped: the profile already
//! served is kept, even when the broken file is a rewrite of it. Each version of a file is parsed
//! once: those found incomplete are remembered too, so a poll costs a directory listing.
//!
//! What is served is the file as it is: the daemon composes nothing. Write ceilings of an
//! earlier write run stand beside a read-only run's only where `hwceiling merge` wrote them into
//! the profile, each marked `carried_from` that run, so the file says what is served.
//!
//! "Newest" is by the time the profile records its run finished (`provenance.finished_at`),
//! not by its file name (a file copied in under a newer date is not newer); on a tie, by name:
//! the date, then the `-N` suffix a second run of the same day gets. A file whose time cannot be
//! read (it does not parse) is placed by its modification time. Each version of a file is read
//! for its time once. hwceiling writes profiles atomically (a temp file hard-linked into place,
//! or renamed over the file by `merge`), so a profile file is never seen half-written.
//!
//! A profile of another host (`platform.hostname`, else `provenance.hostname`, against this
//! machine's) is refused as a file that does not read is: it does not describe this machine.
//! A load error is reported while its file is still there, and not after it is removed or
//! loads.

use crate::AppState;
pub(crate) use hwc_model::profile::Completeness;
use hwc_model::Profile;
use prometheus_client::metrics::counter::Counter;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

/// What identifies one version of a file: size, modification time, inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    len: u64,
    mtime_ns: i128,
    inode: u64,
}

impl Fingerprint {
    fn of(m: &std::fs::Metadata) -> Self {
        Fingerprint {
            len: m.len(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            inode: m.ino(),
        }
    }
}

/// A profile in memory, with the exact text it was read from.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub file: PathBuf,
    pub text: String,
    pub profile: Profile,
    pub completeness: Completeness,
    fingerprint: Fingerprint,
    key: SortKey,
    pub loaded_at: SystemTime,
}

impl Loaded {
    fn new(c: &Candidate, parsed: Box<Parsed>) -> Self {
        let Parsed { profile, text } = *parsed;
        Loaded {
            file: c.path.clone(),
            completeness: Completeness::of(&profile),
            text,
            profile,
            fingerprint: c.fingerprint,
            key: c.key.clone(),
            loaded_at: SystemTime::now(),
        }
    }

    pub fn file_name(&self) -> String {
        file_name(&self.file)
    }

    /// Seconds since the profile's run finished (`provenance.finished_at`), when it parses.
    pub fn age_seconds(&self) -> Option<f64> {
        let finished =
            chrono::DateTime::parse_from_rfc3339(&self.profile.provenance.finished_at).ok()?;
        let age = chrono::Utc::now().signed_duration_since(finished);
        Some(age.num_milliseconds() as f64 / 1000.0)
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A profile newer than the one served that is not served because its run was not complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PassedOver {
    /// Its file name.
    pub file: String,
    pub why: Completeness,
}

/// What the daemon serves: the profile, and the newest newer profile passed over for being
/// incomplete (only ever beside a complete profile: without one, the newest profile that
/// parses is served, whatever its run).
#[derive(Debug, Clone, Default)]
pub(crate) struct Serving {
    pub loaded: Option<Arc<Loaded>>,
    pub passed_over: Option<PassedOver>,
}

/// A ceiling served: its key and value, and the profile it is read from.
pub(crate) struct ServedCeiling<'a> {
    pub key: &'a str,
    pub value: f64,
    pub profile: &'a Profile,
}

impl Serving {
    /// Every ceiling of the served profile, as its file holds them.
    pub fn ceilings(&self) -> Vec<ServedCeiling<'_>> {
        self.loaded.as_ref().map_or_else(Vec::new, |l| {
            l.profile
                .ceilings
                .iter()
                .map(|(key, &value)| ServedCeiling {
                    key,
                    value,
                    profile: &l.profile,
                })
                .collect()
        })
    }

    /// One line for people, when what is served needs one: a quick, interrupted or narrowed
    /// profile served for want of a complete one, or a newer incomplete profile passed over.
    pub fn note(&self) -> Option<String> {
        let l = self.loaded.as_ref()?;
        if !l.completeness.complete() {
            return Some(format!(
                "{} is {}, served because the folder has no complete profile: its ceilings are \
                 weaker than a complete run's",
                l.file_name(),
                l.completeness.describe()
            ));
        }
        let p = self.passed_over.as_ref()?;
        Some(format!(
            "newer {} not served: {}; serving {}, the newest complete profile",
            p.file,
            p.why.describe(),
            l.file_name()
        ))
    }
}

/// What a version of a file was found to hold, remembered until the file changes, so that a
/// poll parses no file twice that it will not serve.
#[derive(Debug, Clone)]
enum Known {
    /// It does not parse (said once, as a warning, `last_load_error` and
    /// `hwceiling_profile_reload_errors_total`).
    Bad,
    /// The profile of an incomplete run.
    Incomplete { why: Completeness },
}

pub(crate) struct Store {
    dir: PathBuf,
    /// This machine's hostname; `None`: profiles of any host are served.
    hostname: Option<String>,
    serving: RwLock<Serving>,
    known: Mutex<HashMap<PathBuf, (Fingerprint, Known)>>,
    /// The time each version of a file records, read once.
    recorded: Mutex<HashMap<PathBuf, (Fingerprint, Option<Time>)>>,
    /// The file that last failed to load, and why.
    last_error: Mutex<Option<(PathBuf, String)>>,
    pub reloads: Counter,
    pub reload_errors: Counter,
}

/// `hardware_profile_2026-11-29.yaml` → (`2026-11-29`, 1); `…-29-3.yaml` → (`2026-11-29`, 3).
/// Other names are not profiles the daemon serves.
pub fn profile_sort_key(name: &str) -> Option<(String, u32)> {
    match hwc_profile::names::RunName::parse(name)? {
        (hwc_profile::names::RunFile::Profile, run) => Some((run.date, run.number)),
        _ => None,
    }
}

type Time = chrono::DateTime<chrono::Utc>;

/// Where a profile stands in time: the time its run finished as it records it (a file that
/// does not parse: its modification time), then its name's date and run number.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct SortKey {
    time: Time,
    name: (String, u32),
}

struct Candidate {
    key: SortKey,
    path: PathBuf,
    fingerprint: Fingerprint,
}

/// A profile file's contents.
struct Parsed {
    profile: Profile,
    text: String,
}

/// What a file holds, as far as choosing goes.
enum Read {
    /// It does not parse (now, or at this version before).
    Bad,
    Complete(Box<Parsed>),
    /// Parsed now, or known from an earlier poll (`parsed` `None`).
    Incomplete {
        why: Completeness,
        parsed: Option<Box<Parsed>>,
    },
}

/// The profiles to choose from, newest first: the files, with the profile in memory standing in
/// for its own file when that is unchanged, or at its place (by its run's time) when its file is gone.
enum Entry<'a> {
    Served(&'a Arc<Loaded>),
    File(&'a Candidate),
}

fn entries<'a>(files: &'a [Candidate], served: Option<&'a Arc<Loaded>>) -> Vec<Entry<'a>> {
    let mut out = Vec::with_capacity(files.len() + 1);
    let mut pending = served;
    for c in files {
        if let Some(l) = pending {
            if c.path == l.file {
                pending = None;
                if c.fingerprint == l.fingerprint {
                    out.push(Entry::Served(l));
                    continue;
                }
                // A new version of it: read as a file (if it does not parse, `l` stands in).
            } else if c.key < l.key {
                out.push(Entry::Served(l));
                pending = None;
            }
        }
        out.push(Entry::File(c));
    }
    if let Some(l) = pending {
        out.push(Entry::Served(l));
    }
    out
}

/// The profile chosen: the one in memory, or a file (parsed already, or to be read).
enum Pick<'a> {
    Served(Arc<Loaded>),
    File(&'a Candidate, Option<Box<Parsed>>),
}

impl Pick<'_> {
    fn file_name(&self) -> String {
        match self {
            Pick::Served(l) => l.file_name(),
            Pick::File(c, _) => file_name(&c.path),
        }
    }
}

impl Store {
    pub fn new(dir: PathBuf, hostname: Option<String>) -> Self {
        Store {
            dir,
            hostname,
            serving: RwLock::new(Serving::default()),
            known: Mutex::new(HashMap::new()),
            recorded: Mutex::new(HashMap::new()),
            last_error: Mutex::new(None),
            reloads: Counter::default(),
            reload_errors: Counter::default(),
        }
    }

    /// The profile served, if any.
    pub fn current(&self) -> Option<Arc<Loaded>> {
        self.serving().loaded
    }

    /// The profile served and what was passed over, read together.
    pub fn serving(&self) -> Serving {
        self.serving
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn last_error(&self) -> Option<String> {
        lock(&self.last_error).as_ref().map(|(_, e)| e.clone())
    }

    /// Profile files of the folder, newest first.
    fn candidates(&self) -> Vec<Candidate> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out: Vec<Candidate> = entries
            .flatten()
            .filter_map(|e| {
                let name = profile_sort_key(e.file_name().to_str()?)?;
                let path = e.path();
                let m = std::fs::metadata(&path).ok().filter(|m| m.is_file())?;
                let fingerprint = Fingerprint::of(&m);
                let time = self
                    .recorded_time(&path, fingerprint)
                    .unwrap_or_else(|| m.modified().map(Time::from).unwrap_or_default());
                Some(Candidate {
                    key: SortKey { time, name },
                    path,
                    fingerprint,
                })
            })
            .collect();
        out.sort_by(|a, b| b.key.cmp(&a.key));
        out
    }

    /// When the run of this version of `path` finished, as the profile records it.
    fn recorded_time(&self, path: &Path, fingerprint: Fingerprint) -> Option<Time> {
        if let Some((fp, time)) = lock(&self.recorded).get(path) {
            if *fp == fingerprint {
                return *time;
            }
        }
        let time = hwc_profile::read_profile(path).ok().and_then(|p| {
            chrono::DateTime::parse_from_rfc3339(&p.provenance.finished_at)
                .ok()
                .map(|t| t.to_utc())
        });
        lock(&self.recorded).insert(path.to_path_buf(), (fingerprint, time));
        time
    }

    /// Why `p` is not to be served here: it is of another host.
    fn other_host(&self, p: &Profile) -> Option<String> {
        let me = self.hostname.as_deref()?;
        let host = hwc_model::carry::host_of(p)?;
        // As profiles record it: the short name (`node1`, not `node1.example.com`).
        let short = |h: &str| h.split('.').next().unwrap_or(h).to_ascii_lowercase();
        (short(host) != short(me))
            .then(|| format!("a profile of host `{host}`, not of this machine (`{me}`)"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What this version of `c` was found to hold before, if it was read.
    fn known(&self, c: &Candidate) -> Option<Known> {
        match lock(&self.known).get(&c.path) {
            Some((fp, known)) if *fp == c.fingerprint => Some(known.clone()),
            _ => None,
        }
    }

    fn remember(&self, c: &Candidate, known: Option<Known>) {
        let mut map = lock(&self.known);
        match known {
            Some(k) => map.insert(c.path.clone(), (c.fingerprint, k)),
            None => map.remove(&c.path),
        };
    }

    /// Parse `c`; a failure is logged, counted and remembered until the file changes.
    fn parse(&self, c: &Candidate) -> Option<Box<Parsed>> {
        let read = hwc_profile::read_profile_with_text(&c.path)
            .map_err(|e| e.to_string())
            .and_then(|(profile, text)| match self.other_host(&profile) {
                Some(why) => Err(format!("{}: {why}: not served", c.path.display())),
                None => Ok((profile, text)),
            });
        match read {
            Ok((profile, text)) => {
                self.remember(c, None);
                let mut last = lock(&self.last_error);
                if last.as_ref().is_some_and(|(f, _)| *f == c.path) {
                    *last = None;
                }
                Some(Box::new(Parsed { profile, text }))
            }
            Err(msg) => {
                self.remember(c, Some(Known::Bad));
                tracing::warn!(error = %msg, "profile not loaded; keeping the one served");
                *lock(&self.last_error) = Some((c.path.clone(), msg));
                self.reload_errors.inc();
                None
            }
        }
    }

    /// What `c` holds: from memory when this version of it was read before and was broken or
    /// incomplete, else parsed now.
    fn read(&self, c: &Candidate) -> Read {
        match self.known(c) {
            Some(Known::Bad) => return Read::Bad,
            Some(Known::Incomplete { why }) => return Read::Incomplete { why, parsed: None },
            None => {}
        }
        let Some(parsed) = self.parse(c) else {
            return Read::Bad;
        };
        let why = Completeness::of(&parsed.profile);
        if why.complete() {
            Read::Complete(parsed)
        } else {
            self.remember(c, Some(Known::Incomplete { why: why.clone() }));
            Read::Incomplete {
                why,
                parsed: Some(parsed),
            }
        }
    }

    /// Choose what to serve from the folder as it is now: the newest complete profile, else the
    /// newest that parses; load it if it is not the one served. Blocking: call from a blocking
    /// thread.
    pub fn refresh_blocking(&self) {
        let served = self.current();
        let files = self.candidates();
        self.forget_gone(&files);
        let mut chosen: Option<Pick> = None;
        let mut fallback: Option<Pick> = None;
        let mut passed_over: Option<PassedOver> = None;
        for entry in entries(&files, served.as_ref()) {
            let (pick, why) = match entry {
                Entry::Served(l) => (Pick::Served(l.clone()), l.completeness.clone()),
                Entry::File(c) => match self.read(c) {
                    Read::Complete(p) => (Pick::File(c, Some(p)), Completeness::default()),
                    Read::Incomplete { why, parsed, .. } => (Pick::File(c, parsed), why),
                    Read::Bad => match served.as_ref().filter(|l| l.file == c.path) {
                        // A broken rewrite of the file served: the version in memory stands in.
                        Some(l) => (Pick::Served(l.clone()), l.completeness.clone()),
                        None => continue,
                    },
                },
            };
            if why.complete() {
                chosen = Some(pick);
                break;
            }
            if passed_over.is_none() {
                passed_over = Some(PassedOver {
                    file: pick.file_name(),
                    why,
                });
            }
            if fallback.is_none() {
                fallback = Some(pick);
            }
        }
        let (pick, passed_over) = match (chosen, fallback) {
            (Some(pick), _) => (pick, passed_over),
            // No complete profile: the newest that parses, with nothing newer passed over.
            (None, Some(pick)) => (pick, None),
            (None, None) => return,
        };
        let loaded = match pick {
            Pick::Served(l) => l,
            Pick::File(c, parsed) => {
                let Some(parsed) = parsed.or_else(|| self.parse(c)) else {
                    return;
                };
                self.reloads.inc();
                Arc::new(Loaded::new(c, parsed))
            }
        };
        let next = Serving {
            loaded: Some(loaded),
            passed_over,
        };
        let mut serving = self.serving.write().unwrap_or_else(|p| p.into_inner());
        let reloaded = !same_profile(&serving.loaded, &next.loaded);
        if reloaded || serving.passed_over != next.passed_over {
            log_serving(&next, reloaded);
        }
        *serving = next;
    }

    /// Forget what was remembered about files no longer in the folder, a load error too.
    fn forget_gone(&self, files: &[Candidate]) {
        let present: std::collections::HashSet<&Path> =
            files.iter().map(|c| c.path.as_path()).collect();
        lock(&self.known).retain(|p, _| present.contains(p.as_path()));
        lock(&self.recorded).retain(|p, _| present.contains(p.as_path()));
        let mut last = lock(&self.last_error);
        if last
            .as_ref()
            .is_some_and(|(f, _)| !present.contains(f.as_path()))
        {
            *last = None;
        }
    }
}

fn same_profile(a: &Option<Arc<Loaded>>, b: &Option<Arc<Loaded>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The log line of a change in what is served: which file, and, when it is not a complete run
/// or a newer incomplete one was passed over, that too (a warning).
fn log_serving(s: &Serving, reloaded: bool) {
    let Some(l) = &s.loaded else {
        return;
    };
    let file = l.file.display();
    let passed_over = s.passed_over.as_ref().map(|p| p.file.as_str());
    let run = l.completeness.describe();
    match (s.note(), reloaded) {
        (None, _) => tracing::info!(%file, "serving profile"),
        (Some(note), true) => tracing::warn!(%file, run, passed_over, "serving profile: {note}"),
        (Some(note), false) => tracing::warn!(%file, run, passed_over, "{note}"),
    }
}

/// One refresh on a blocking thread (file reads and parsing stay off the async runtime).
pub(crate) async fn refresh(state: &Arc<AppState>) {
    let s = state.clone();
    if let Err(e) = tokio::task::spawn_blocking(move || s.store.refresh_blocking()).await {
        tracing::error!(error = %e, "profile refresh task failed");
    }
}

/// Poll the folder every `poll_interval` until `stop` turns true.
pub(crate) async fn watch(state: Arc<AppState>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(state.config.poll_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => refresh(&state).await,
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY1: &str = "hardware_profile_2026-11-28.yaml";
    const DAY2: &str = "hardware_profile_2026-11-29.yaml";
    const DAY2_2: &str = "hardware_profile_2026-11-29-2.yaml";
    const DAY3: &str = "hardware_profile_2026-11-30.yaml";

    const COMPLETE: Completeness = Completeness {
        quick: false,
        interrupted: false,
        failed_cases: 0,
        narrowed_by: Vec::new(),
    };
    const QUICK: Completeness = Completeness {
        quick: true,
        interrupted: false,
        failed_cases: 0,
        narrowed_by: Vec::new(),
    };
    const INTERRUPTED: Completeness = Completeness {
        quick: false,
        interrupted: true,
        failed_cases: 0,
        narrowed_by: Vec::new(),
    };

    /// A run narrowed by these options (flags with their values, as the model names them).
    fn narrowed(by: &[&str]) -> Completeness {
        Completeness {
            narrowed_by: by.iter().map(|s| s.to_string()).collect(),
            ..COMPLETE
        }
    }

    /// 10:00 UTC of the day `name` is of: the time its run finished, as the profile records it.
    fn finished_at(name: &str) -> String {
        format!("{}T10:00:00+00:00", profile_sort_key(name).unwrap().0)
    }

    /// Write text that does not parse to `dir/name`, modified at the time `name` says.
    fn put_broken(dir: &Path, name: &str) {
        let path = dir.join(name);
        std::fs::write(&path, "schema_version: 1\nplatform: [oops\n").unwrap();
        let t = chrono::DateTime::parse_from_rfc3339(&finished_at(name)).unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(t.into()).unwrap();
    }

    /// Write a profile of a quick, interrupted or complete run to `dir/name`, with one ceiling
    /// of `gbps`; its quick mark is the option `profile --quick` records.
    fn put(dir: &Path, name: &str, run: Completeness, gbps: f64) {
        assert!(!run.narrowed(), "a narrowed run is written with put_run");
        let quick = run.quick.to_string();
        put_run(dir, name, &[("quick", &quick)], run.interrupted, gbps);
    }

    /// Write a profile of a run that recorded these options (`paths: h2d`, as `hwceiling
    /// profile` records them) to `dir/name`, with one ceiling of `gbps`.
    fn put_run(dir: &Path, name: &str, options: &[(&str, &str)], interrupted: bool, gbps: f64) {
        let p = hwc_testkit::ceilings_profile(
            "node1",
            &finished_at(name),
            &[("warm_gpu0_peak_gbps", gbps)],
        );
        let mut p = hwc_testkit::with_options(p, options);
        p.provenance.interrupted = interrupted;
        std::fs::write(dir.join(name), hwc_profile::to_yaml(&p).unwrap()).unwrap();
    }

    /// Refresh, then: the file served with its run, and the file passed over with its run.
    fn refresh(store: &Store) -> ((String, Completeness), Option<(String, Completeness)>) {
        store.refresh_blocking();
        let s = store.serving();
        let l = s.loaded.as_ref().expect("a profile served");
        (
            (l.file_name(), l.completeness.clone()),
            s.passed_over.map(|o| (o.file, o.why)),
        )
    }

    fn store() -> (tempfile::TempDir, Store) {
        let d = tempfile::tempdir().unwrap();
        let s = Store::new(d.path().to_path_buf(), None);
        (d, s)
    }

    #[test]
    fn a_complete_profile_newer_than_a_quick_one_is_served() {
        let (d, store) = store();
        put(d.path(), DAY1, QUICK, 40.0);
        put(d.path(), DAY2, COMPLETE, 55.0);
        assert_eq!(refresh(&store), ((DAY2.into(), COMPLETE), None));
        assert_eq!(store.serving().note(), None);
        assert_eq!(store.reloads.get(), 1);
    }

    #[test]
    fn a_newer_quick_or_interrupted_profile_is_passed_over_and_named() {
        let (d, store) = store();
        put(d.path(), DAY1, COMPLETE, 55.0);
        put(d.path(), DAY2, INTERRUPTED, 30.0);
        put(d.path(), DAY2_2, QUICK, 40.0);
        // The newest of the incomplete ones is named.
        assert_eq!(
            refresh(&store),
            ((DAY1.into(), COMPLETE), Some((DAY2_2.into(), QUICK)))
        );
        let l = store.current().unwrap();
        assert_eq!(l.profile.ceilings["warm_gpu0_peak_gbps"], 55.0);
        let note = store.serving().note().unwrap();
        assert!(
            note.contains(DAY2_2) && note.contains("--quick") && note.contains(DAY1),
            "{note}"
        );
    }

    #[test]
    fn a_newer_full_run_with_a_failed_case_is_passed_over_and_named() {
        let (d, store) = store();
        put(d.path(), DAY1, COMPLETE, 55.0);
        let mut p = hwc_testkit::ceilings_profile(
            "node1",
            "2026-11-29T10:00:00+00:00",
            &[("warm_gpu0_peak_gbps", 20.0)],
        );
        p.failures.push(hwc_model::Failure {
            engine: None,
            key: "h2d/cuda-copy/gpu0/local/256MiB/s1".into(),
            path: hwc_model::PathId::H2d,
            error: "cuMemcpyHtoDAsync: CUDA_ERROR_LAUNCH_FAILED".into(),
        });
        std::fs::write(d.path().join(DAY2), hwc_profile::to_yaml(&p).unwrap()).unwrap();
        let failed = Completeness {
            failed_cases: 1,
            ..COMPLETE
        };
        assert_eq!(
            refresh(&store),
            ((DAY1.into(), COMPLETE), Some((DAY2.into(), failed.clone())))
        );
        assert_eq!(failed.reasons(), "failed");
        let note = store.serving().note().unwrap();
        assert!(
            note.contains(&format!(
                "newer {DAY2} not served: a run with 1 failed case"
            )),
            "{note}"
        );
    }

    #[test]
    fn without_a_complete_profile_the_newest_that_parses_is_served_and_marked() {
        let (d, store) = store();
        put(d.path(), DAY1, INTERRUPTED, 30.0);
        put(d.path(), DAY2, QUICK, 40.0);
        std::fs::write(d.path().join(DAY3), "schema_version: 1\nplatform: [oops\n").unwrap();
        assert_eq!(refresh(&store), ((DAY2.into(), QUICK), None));
        assert!(store.last_error().unwrap().contains(DAY3));
        let note = store.serving().note().unwrap();
        assert!(
            note.contains(DAY2) && note.contains("no complete profile"),
            "{note}"
        );
        // Only interrupted ones: the newest, marked so.
        std::fs::remove_file(d.path().join(DAY2)).unwrap();
        std::fs::remove_file(d.path().join(DAY3)).unwrap();
        let store = Store::new(d.path().to_path_buf(), None);
        assert_eq!(refresh(&store), ((DAY1.into(), INTERRUPTED), None));
        assert!(store
            .serving()
            .note()
            .unwrap()
            .contains("an interrupted run"));
    }

    #[test]
    fn reloads_take_a_new_complete_profile_and_only_note_an_incomplete_one() {
        let (d, store) = store();
        put(d.path(), DAY1, COMPLETE, 55.0);
        assert_eq!(refresh(&store), ((DAY1.into(), COMPLETE), None));
        let first = store.current().unwrap();

        // A quick run appears: noted, not served, and the profile in memory is the same one.
        put(d.path(), DAY2, QUICK, 40.0);
        assert_eq!(
            refresh(&store),
            ((DAY1.into(), COMPLETE), Some((DAY2.into(), QUICK)))
        );
        assert!(Arc::ptr_eq(&first, &store.current().unwrap()));
        assert_eq!(store.reloads.get(), 1);
        // Polled again: still so, and nothing reloaded.
        assert_eq!(
            refresh(&store),
            ((DAY1.into(), COMPLETE), Some((DAY2.into(), QUICK)))
        );
        assert_eq!(store.reloads.get(), 1);

        // A newer complete run replaces it, and nothing is passed over any more.
        put(d.path(), DAY3, COMPLETE, 56.0);
        assert_eq!(refresh(&store), ((DAY3.into(), COMPLETE), None));
        assert_eq!(
            store.current().unwrap().profile.ceilings["warm_gpu0_peak_gbps"],
            56.0
        );
        assert_eq!(store.reloads.get(), 2);
    }

    #[test]
    fn a_served_incomplete_profile_gives_way_to_any_complete_one() {
        let (d, store) = store();
        put(d.path(), DAY2, QUICK, 40.0);
        assert_eq!(refresh(&store), ((DAY2.into(), QUICK), None));
        // A newer incomplete one: the newest that parses.
        put(d.path(), DAY2_2, INTERRUPTED, 30.0);
        assert_eq!(refresh(&store), ((DAY2_2.into(), INTERRUPTED), None));
        // A complete one, even an older one (copied in), since the folder now has one.
        put(d.path(), DAY1, COMPLETE, 55.0);
        assert_eq!(
            refresh(&store),
            ((DAY1.into(), COMPLETE), Some((DAY2_2.into(), INTERRUPTED)))
        );
    }

    #[test]
    fn a_newer_narrowed_profile_does_not_replace_a_full_one_and_is_named() {
        let (d, store) = store();
        put(d.path(), DAY1, COMPLETE, 55.0);
        put_run(d.path(), DAY2, &[("paths", "h2d")], false, 30.0);
        assert_eq!(
            refresh(&store),
            (
                (DAY1.into(), COMPLETE),
                Some((DAY2.into(), narrowed(&["--paths h2d"])))
            )
        );
        assert_eq!(
            store.current().unwrap().profile.ceilings["warm_gpu0_peak_gbps"],
            55.0
        );
        let s = store.serving();
        assert_eq!(s.passed_over.as_ref().unwrap().why.reasons(), "narrowed");
        let note = s.note().unwrap();
        assert!(
            note.contains(&format!(
                "newer {DAY2} not served: a run narrowed by --paths h2d"
            )) && note.contains(DAY1),
            "{note}"
        );
        // A quick run of some paths says both; the newest passed over is named.
        put_run(
            d.path(),
            DAY2_2,
            &[("quick", "true"), ("paths", "host_ram"), ("threads", "4")],
            false,
            40.0,
        );
        let by = narrowed(&["--paths host_ram", "--threads 4"]);
        let quick_narrowed = Completeness { quick: true, ..by };
        assert_eq!(quick_narrowed.reasons(), "quick,narrowed");
        assert_eq!(
            refresh(&store),
            (
                (DAY1.into(), COMPLETE),
                Some((DAY2_2.into(), quick_narrowed))
            )
        );
        // A run that named every drive, as a full run with writes does, is a full run.
        put_run(
            d.path(),
            DAY3,
            &[("drives", "nvme0,nvme1"), ("drives_left_out", "")],
            false,
            56.0,
        );
        assert_eq!(refresh(&store), ((DAY3.into(), COMPLETE), None));
    }

    #[test]
    fn with_only_narrowed_profiles_the_newest_is_served_marked_narrowed() {
        let (d, store) = store();
        put_run(d.path(), DAY1, &[("threads", "4")], false, 20.0);
        put_run(d.path(), DAY2, &[("drives", "nvme0")], false, 30.0);
        assert_eq!(
            refresh(&store),
            ((DAY2.into(), narrowed(&["--drives nvme0"])), None)
        );
        let s = store.serving();
        assert_eq!(
            s.loaded.as_ref().unwrap().completeness.reasons(),
            "narrowed"
        );
        let note = s.note().unwrap();
        assert!(
            note.contains(&format!(
                "{DAY2} is a run narrowed by --drives nvme0, served because"
            )) && note.contains("no complete profile"),
            "{note}"
        );
        // A complete profile, even an older one, replaces it.
        put(d.path(), "hardware_profile_2026-11-27.yaml", COMPLETE, 55.0);
        assert_eq!(
            refresh(&store),
            (
                ("hardware_profile_2026-11-27.yaml".into(), COMPLETE),
                Some((DAY2.into(), narrowed(&["--drives nvme0"])))
            )
        );
    }

    #[test]
    fn a_broken_rewrite_or_removal_of_the_served_file_keeps_the_version_in_memory() {
        let (d, store) = store();
        put(d.path(), DAY1, COMPLETE, 55.0);
        put(d.path(), DAY2, COMPLETE, 56.0);
        assert_eq!(refresh(&store), ((DAY2.into(), COMPLETE), None));
        std::fs::write(d.path().join(DAY2), "schema_version: 1\nplatform: [oops\n").unwrap();
        assert_eq!(refresh(&store), ((DAY2.into(), COMPLETE), None));
        assert_eq!(store.reload_errors.get(), 1);
        std::fs::remove_file(d.path().join(DAY2)).unwrap();
        put(d.path(), DAY2_2, QUICK, 40.0);
        assert_eq!(
            refresh(&store),
            ((DAY2.into(), COMPLETE), Some((DAY2_2.into(), QUICK)))
        );
        assert_eq!(
            store.current().unwrap().profile.ceilings["warm_gpu0_peak_gbps"],
            56.0
        );
        assert_eq!(store.reloads.get(), 1);
    }

    /// A complete profile of node1 with NVMe drives of these serials; with `write_gbps`, of a
    /// write run on the first.
    fn put_nvme(dir: &Path, name: &str, serials: &[&str], write_gbps: Option<f64>) {
        let p = hwc_testkit::ceilings_profile(
            "node1",
            &finished_at(name),
            &[("warm_gpu0_peak_gbps", 55.0)],
        );
        let p = hwc_testkit::with_nvme(p, serials, write_gbps);
        // Into place under a new inode, as `hwceiling profile` writes: a rewrite is a new
        // version even within the file system's time granularity.
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, hwc_profile::to_yaml(&p).unwrap()).unwrap();
        std::fs::rename(&tmp, dir.join(name)).unwrap();
    }

    /// The text of `dir/name`, as the file holds it.
    fn text_of(dir: &Path, name: &str) -> String {
        std::fs::read_to_string(dir.join(name)).unwrap()
    }

    #[test]
    fn a_read_only_profile_is_served_as_its_file_holds_it_beside_an_older_write_run() {
        let (d, store) = store();
        put_nvme(d.path(), DAY1, &["S1", "S2"], Some(5.0));
        put_nvme(d.path(), DAY2, &["S1", "S2"], None);
        assert_eq!(refresh(&store), ((DAY2.into(), COMPLETE), None));
        // Exactly the file: its text, and its ceilings, none of the write run's beside them.
        let l = store.current().unwrap();
        assert_eq!(l.text, text_of(d.path(), DAY2));
        let file = hwc_profile::read_profile(&d.path().join(DAY2)).unwrap();
        let serving = store.serving();
        let served: Vec<(&str, f64)> = serving
            .ceilings()
            .iter()
            .map(|c| (c.key, c.value))
            .collect();
        let want: Vec<(&str, f64)> = file
            .ceilings
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(served, want);
        assert!(!file.ceilings.contains_key("nvme_raw_1drive_write_gbps"));
    }

    #[test]
    fn a_merged_profile_is_served_with_the_ceilings_it_carries_as_its_file_holds_them() {
        let (d, store) = store();
        put_nvme(d.path(), DAY1, &["S1"], Some(5.0));
        put_nvme(d.path(), DAY2, &["S1"], None);
        refresh(&store);
        // `hwceiling merge` rewrites the read-only run with the write run's ceilings carried in.
        let older = hwc_profile::read_profile(&d.path().join(DAY1)).unwrap();
        let newer = hwc_profile::read_profile(&d.path().join(DAY2)).unwrap();
        let (merged, _) = hwc_model::carry::merge(&newer, &older, DAY1).unwrap();
        let tmp = d.path().join(".merged.tmp");
        std::fs::write(&tmp, hwc_profile::to_yaml(&merged).unwrap()).unwrap();
        std::fs::rename(&tmp, d.path().join(DAY2)).unwrap();
        assert_eq!(refresh(&store), ((DAY2.into(), COMPLETE), None));
        let l = store.current().unwrap();
        assert_eq!(l.text, text_of(d.path(), DAY2));
        assert_eq!(l.profile, merged);
        let s = store.serving();
        let carried = s
            .ceilings()
            .into_iter()
            .find(|c| c.key == "nvme_raw_1drive_write_gbps")
            .map(|c| (c.value, c.profile.ceiling_record(c.key).cloned()));
        let (value, record) = carried.unwrap();
        assert_eq!(value, 5.0);
        assert_eq!(record.unwrap().carried_from.unwrap().file, DAY1);
    }

    #[test]
    fn a_newer_file_that_does_not_read_is_a_load_error_said_once() {
        let (d, store) = store();
        put(d.path(), DAY1, COMPLETE, 55.0);
        put_broken(d.path(), DAY2);
        assert_eq!(refresh(&store), ((DAY1.into(), COMPLETE), None));
        assert!(store.last_error().is_some_and(|e| e.contains(DAY2)));
        refresh(&store);
        assert_eq!(store.reload_errors.get(), 1);
        std::fs::remove_file(d.path().join(DAY2)).unwrap();
        refresh(&store);
        assert_eq!(store.last_error(), None);
    }

    #[test]
    fn another_hosts_profile_is_not_served() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::new(d.path().to_path_buf(), Some("node1".into()));
        put_nvme(d.path(), DAY2, &["S1"], None);
        assert_eq!(refresh(&store), ((DAY2.into(), COMPLETE), None));
        assert_eq!(store.last_error(), None);
        // Another host's newer profile: refused, said, and forgotten once removed.
        let p = hwc_testkit::ceilings_profile("node9", &finished_at(DAY3), &[]);
        std::fs::write(d.path().join(DAY3), hwc_profile::to_yaml(&p).unwrap()).unwrap();
        assert_eq!(refresh(&store), ((DAY2.into(), COMPLETE), None));
        let e = store.last_error().unwrap();
        assert!(
            e.contains("a profile of host `node9`, not of this machine (`node1`)"),
            "{e}"
        );
        std::fs::remove_file(d.path().join(DAY3)).unwrap();
        refresh(&store);
        assert_eq!(store.last_error(), None);
    }

    #[test]
    fn profile_names_sort_by_date_then_run_number() {
        assert_eq!(
            profile_sort_key("hardware_profile_2026-11-29.yaml"),
            Some(("2026-11-29".into(), 1))
        );
        assert_eq!(
            profile_sort_key("hardware_profile_2026-11-29-12.yaml"),
            Some(("2026-11-29".into(), 12))
        );
        for bad in [
            "hardware_profile_2026-11-29.yml",
            ".hardware_profile_2026-11-29.yaml.tmp-77",
            "hardware_profile_latest.yaml",
            "hardware_profile_2026-11-29-.yaml",
            "hardware_profile_2026-11-29-07.yaml",
            "hardware_profile_2026-11-29-1.yaml",
            "hardware_profile_2026-11-29-+2.yaml",
            "hardware_profile_2026-11-29x.yaml",
            "hardware_profile_2026_11_29.yaml",
            "hardware_profile_.yaml",
            "hardware_raw_2026-11-29.json",
        ] {
            assert_eq!(profile_sort_key(bad), None, "{bad}");
        }
        let mut keys = [
            profile_sort_key("hardware_profile_2026-11-29-10.yaml"),
            profile_sort_key("hardware_profile_2026-11-30.yaml"),
            profile_sort_key("hardware_profile_2026-11-29-2.yaml"),
            profile_sort_key("hardware_profile_2026-11-29.yaml"),
        ];
        keys.sort();
        assert_eq!(keys[0].as_ref().unwrap().1, 1);
        assert_eq!(keys[1].as_ref().unwrap().1, 2);
        assert_eq!(keys[2].as_ref().unwrap().1, 10);
        assert_eq!(keys[3].as_ref().unwrap().0, "2026-11-30");
    }
}
