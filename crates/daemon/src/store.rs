//! The profile being served: the newest `hardware_profile_<date>[-N].yaml` of the output folder
//! that parses, reloaded when a newer one appears (the folder is polled; a file that fails to
//! parse is logged, remembered until it changes, and the profile already served is kept).
//!
//! "Newest" is by file name: the date, then the `-N` suffix a second run of the same day gets.
//! hwceiling writes profiles atomically (a temp file hard-linked into place), so a profile file
//! is never seen half-written.

use crate::AppState;
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
    fingerprint: Fingerprint,
    key: (String, u32),
    pub loaded_at: SystemTime,
}

impl Loaded {
    pub fn file_name(&self) -> String {
        self.file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Seconds since the profile's run finished (`provenance.finished_at`), when it parses.
    pub fn age_seconds(&self) -> Option<f64> {
        let finished =
            chrono::DateTime::parse_from_rfc3339(&self.profile.provenance.finished_at).ok()?;
        let age = chrono::Utc::now().signed_duration_since(finished);
        Some(age.num_milliseconds() as f64 / 1000.0)
    }
}

pub(crate) struct Store {
    dir: PathBuf,
    current: RwLock<Option<Arc<Loaded>>>,
    /// Files that failed to load, until they change.
    failed: Mutex<HashMap<PathBuf, Fingerprint>>,
    last_error: Mutex<Option<String>>,
    pub reloads: Counter,
    pub reload_errors: Counter,
}

/// `hardware_profile_2026-11-29.yaml` → (`2026-11-29`, 1); `…-29-3.yaml` → (`2026-11-29`, 3).
/// Other names are not profiles the daemon serves.
pub fn profile_sort_key(name: &str) -> Option<(String, u32)> {
    let stem = name
        .strip_prefix("hardware_profile_")?
        .strip_suffix(".yaml")?;
    let (date, n) = match stem.get(10..) {
        Some("") => (stem, 1),
        Some(rest) => (&stem[..10], rest.strip_prefix('-')?.parse::<u32>().ok()?),
        None => return None,
    };
    let b = date.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    (b.len() == 10 && b[4] == b'-' && b[7] == b'-' && digits(0..4) && digits(5..7) && digits(8..10))
        .then(|| (date.to_string(), n))
}

struct Candidate {
    key: (String, u32),
    path: PathBuf,
    fingerprint: Fingerprint,
}

/// Profile files of `dir`, newest first.
fn candidates(dir: &Path) -> Vec<Candidate> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<Candidate> = entries
        .flatten()
        .filter_map(|e| {
            let key = profile_sort_key(e.file_name().to_str()?)?;
            let path = e.path();
            let m = std::fs::metadata(&path).ok().filter(|m| m.is_file())?;
            Some(Candidate {
                key,
                path,
                fingerprint: Fingerprint::of(&m),
            })
        })
        .collect();
    out.sort_by(|a, b| b.key.cmp(&a.key));
    out
}

impl Store {
    pub fn new(dir: PathBuf) -> Self {
        Store {
            dir,
            current: RwLock::new(None),
            failed: Mutex::new(HashMap::new()),
            last_error: Mutex::new(None),
            reloads: Counter::default(),
            reload_errors: Counter::default(),
        }
    }

    pub fn current(&self) -> Option<Arc<Loaded>> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn try_load(&self, c: &Candidate) -> bool {
        match hwc_profile::read_profile_with_text(&c.path) {
            Ok((profile, text)) => {
                tracing::info!(file = %c.path.display(), "serving profile");
                let loaded = Loaded {
                    file: c.path.clone(),
                    text,
                    profile,
                    fingerprint: c.fingerprint,
                    key: c.key.clone(),
                    loaded_at: SystemTime::now(),
                };
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(loaded));
                self.failed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&c.path);
                self.reloads.inc();
                true
            }
            Err(e) => {
                let msg = e.to_string();
                tracing::warn!(error = %msg, "profile not loaded; keeping the one served");
                self.failed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(c.path.clone(), c.fingerprint);
                *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(msg);
                self.reload_errors.inc();
                false
            }
        }
    }

    /// Load the newest profile that parses, if it is newer than (or a changed version of) the
    /// one served. Blocking: call from a blocking thread.
    pub fn refresh_blocking(&self) {
        let current = self.current();
        for c in candidates(&self.dir) {
            if let Some(cur) = &current {
                if c.path == cur.file {
                    if c.fingerprint != cur.fingerprint && !self.known_bad(&c) {
                        self.try_load(&c);
                    }
                    return;
                }
                if c.key < cur.key {
                    return;
                }
            }
            if self.known_bad(&c) {
                continue;
            }
            if self.try_load(&c) {
                return;
            }
        }
    }

    fn known_bad(&self, c: &Candidate) -> bool {
        self.failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&c.path)
            == Some(&c.fingerprint)
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
