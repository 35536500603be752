//! `POST /v1/profile/run`: one `hwceiling profile` at a time, as a child process (its
//! benchmarks run on its own threads, never on the daemon's async runtime). Progress is read from
//! the running record the child rewrites after every case (`hardware_raw_<date>.partial.json`).
//! Cancelling sends SIGTERM — the child stops its case in flight at the next repetition and writes its files marked
//! interrupted — and SIGKILL only if it has not exited after the grace period.

use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How a profile run is started.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The `hwceiling` executable (the daemon's own, normally).
    pub program: PathBuf,
    /// Arguments before `--run-config FILE --result-file FILE` (normally `profile`).
    pub args: Vec<OsString>,
    /// How long a cancelled run may take to stop its case in flight and write its files before SIGKILL.
    pub grace: Duration,
}

impl Launch {
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Launch {
            program: program.into(),
            args: vec!["profile".into()],
            grace: Duration::from_secs(120),
        }
    }
}

/// The body of `POST /v1/profile/run` (all optional; `{}` or no body runs the full profile).
/// A run with `quick`, or narrowed by `paths` (not every path), or by a `threads` or
/// `host_sizes` list that leaves out a case of this machine's full sweep, writes a profile that
/// `serve` does not let replace a complete one ([`RunRequest::note`] says so in the answer).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// Only these paths (`host_ram`, `h2d`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<String>>,
    /// Host memcpy thread counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<Vec<u32>>,
    /// Host memcpy sizes (`256MiB`, `1GiB`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_sizes: Option<Vec<String>>,
    #[serde(default)]
    pub quick: bool,
    #[serde(default)]
    pub allow_contended: bool,
}

impl RunRequest {
    /// Check the options as `hwceiling profile` checks its flags (the same checks, from
    /// `hwc_plan::input`: a request the command line would refuse is refused here, and one it
    /// takes is taken), and turn them into the run's configuration, writing into `output_dir`.
    pub fn to_config(&self, output_dir: &Path) -> Result<hwc_model::RunConfig, String> {
        use hwc_plan::input::{check_host_threads, no_repeats, parse_size};
        let mut c = hwc_model::RunConfig::new(output_dir);
        if let Some(paths) = &self.paths {
            if paths.is_empty() {
                return Err("`paths` is empty: leave it out to run every path".into());
            }
            let ids = paths
                .iter()
                .map(|p| p.parse::<hwc_model::PathId>().map_err(|e| format!("{e}")))
                .collect::<Result<Vec<_>, _>>()?;
            no_repeats(&ids, |x| x.to_string()).map_err(|e| format!("`paths` {e}"))?;
            c.paths = Some(ids);
        }
        if let Some(threads) = &self.threads {
            if threads.is_empty() {
                return Err("`threads` is empty: leave it out for the sweep".into());
            }
            for &t in threads {
                check_host_threads(t).map_err(|e| format!("`threads`: {e}"))?;
            }
            no_repeats(threads, u32::to_string).map_err(|e| format!("`threads` {e}"))?;
            c.threads = Some(threads.clone());
        }
        if let Some(sizes) = &self.host_sizes {
            if sizes.is_empty() {
                return Err("`host_sizes` is empty: leave it out for the default sizes".into());
            }
            let bytes = sizes
                .iter()
                .map(|s| parse_size(s).map_err(|e| format!("`host_sizes`: {e}")))
                .collect::<Result<Vec<u64>, _>>()?;
            no_repeats(&bytes, |&b| hwc_model::size_label(b))
                .map_err(|e| format!("`host_sizes` {e}"))?;
            c.host_sizes = Some(bytes);
        }
        c.quick = self.quick;
        c.allow_contended = self.allow_contended;
        Ok(c)
    }

    /// When the run's profile will not replace a complete profile (a `--quick` run, or one
    /// narrowed by its selections, by the rule the run applies to itself), one line that says
    /// so; `None` for a full run.
    pub fn note(&self) -> Option<String> {
        // What the selections leave out of this machine's full sweeps is not known yet (the
        // run finds out, and records it).
        let choices = self
            .to_config(Path::new(""))
            .ok()?
            .run_choices(&hwc_model::LeftOut::default());
        let narrowings = choices.narrowed_by;
        let run = hwc_model::profile::Completeness {
            quick: self.quick,
            narrowed_by: narrowings.iter().map(ToString::to_string).collect(),
            ..Default::default()
        };
        if run.complete() {
            return None;
        }
        // Whether a sweep list leaves out a case of the full sweep depends on this machine's
        // nodes, which the run finds out and records: where the lists are all that may narrow
        // the run, the note says it is narrowed only if they do.
        let only_sweeps = !run.quick && narrowings.iter().all(|n| n.selection.is_sweep());
        let condition = if only_sweeps {
            " if a list leaves out a case of this machine's full sweep (the profile records what \
             it leaves out); then"
        } else {
            ":"
        };
        Some(format!(
            "{}{condition} its profile will not replace a complete profile of the full plan; \
             while the folder has one, it is passed over (and named), and it is served, marked, \
             only while the folder has none",
            run.describe()
        ))
    }
}

/// Cases done out of planned, from the child's running record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Progress {
    pub cases_done: usize,
    pub cases_total: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_case: Option<String>,
}

/// What `GET /v1/profile/run` answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RunStatus {
    /// No run since the daemon started.
    Idle,
    Running {
        id: u64,
        started_at: String,
        pid: Option<u32>,
        request: RunRequest,
        /// A stop was requested: the run stops its case in flight and writes its files.
        cancelling: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        progress: Option<Progress>,
    },
    Finished {
        id: u64,
        started_at: String,
        finished_at: String,
        request: RunRequest,
        /// `completed`, `interrupted` (files written with what finished), `failed` or `killed`.
        outcome: String,
        exit_code: Option<i32>,
        /// The profile the run wrote, as it printed it.
        #[serde(skip_serializing_if = "Option::is_none")]
        profile: Option<String>,
        /// The last line the run printed on stderr, when it failed.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

struct Active {
    id: u64,
    started: SystemTime,
    started_at: String,
    pid: Option<u32>,
    request: RunRequest,
    cancel: watch::Sender<bool>,
}

enum Slot {
    Idle,
    Running(Active),
    Finished(RunStatus),
}

pub(crate) struct Runner {
    config: Launch,
    output_dir: PathBuf,
    slot: Mutex<Slot>,
    task: Mutex<Option<JoinHandle<()>>>,
    next_id: Mutex<u64>,
    /// Set at shutdown: no new runs.
    closed: AtomicBool,
}

/// Why a run was not started.
#[derive(Debug)]
pub(crate) enum StartError {
    Busy(Box<RunStatus>),
    Spawn(String),
    ShuttingDown,
}

fn now_rfc3339() -> String {
    chrono::Local::now().to_rfc3339()
}

/// The last `cap` bytes of a pipe.
async fn tail<R: tokio::io::AsyncRead + Unpin>(mut r: R, cap: usize) -> String {
    let mut keep: Vec<u8> = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                keep.extend_from_slice(&buf[..n]);
                if keep.len() > cap {
                    keep.drain(..keep.len() - cap);
                }
            }
        }
    }
    String::from_utf8_lossy(&keep).into_owned()
}

fn send_sigterm(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) with a pid of our own child that has not been reaped yet (the monitor task
    // reaps it only after this), so the pid cannot name another process.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
}

impl Runner {
    pub fn new(config: Launch, output_dir: PathBuf) -> Self {
        Runner {
            config,
            output_dir,
            slot: Mutex::new(Slot::Idle),
            task: Mutex::new(None),
            next_id: Mutex::new(0),
            closed: AtomicBool::new(false),
        }
    }

    /// The folder its runs write to.
    pub fn output_dir(&self) -> &Path {
        &self.output_dir
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_running(&self) -> bool {
        matches!(*self.slot(), Slot::Running(_))
    }

    /// The state without progress (cheap; no file read).
    pub fn status_now(&self) -> (RunStatus, Option<SystemTime>) {
        match &*self.slot() {
            Slot::Idle => (RunStatus::Idle, None),
            Slot::Finished(s) => (s.clone(), None),
            Slot::Running(a) => (
                RunStatus::Running {
                    id: a.id,
                    started_at: a.started_at.clone(),
                    pid: a.pid,
                    request: a.request.clone(),
                    cancelling: *a.cancel.borrow(),
                    progress: None,
                },
                Some(a.started),
            ),
        }
    }

    /// The state, with progress read from the running record for a run in flight.
    pub async fn status(&self) -> RunStatus {
        let (mut status, started) = self.status_now();
        if let (RunStatus::Running { progress, .. }, Some(started)) = (&mut status, started) {
            let dir = self.output_dir.clone();
            *progress = tokio::task::spawn_blocking(move || read_progress(&dir, started))
                .await
                .ok()
                .flatten();
        }
        status
    }

    /// Start a run; one at a time.
    pub fn start(
        self: &Arc<Self>,
        request: RunRequest,
        run: hwc_model::RunConfig,
    ) -> Result<RunStatus, StartError> {
        let mut slot = self.slot();
        if let Slot::Running(_) = &*slot {
            drop(slot);
            return Err(StartError::Busy(Box::new(self.status_now().0)));
        }
        if self.closed.load(Ordering::SeqCst) {
            return Err(StartError::ShuttingDown);
        }
        let id = {
            let mut n = self.next_id.lock().unwrap_or_else(|p| p.into_inner());
            *n += 1;
            *n
        };
        // The run the child makes (`--run-config`), and where it says which files it wrote;
        // both are removed once it has exited.
        let config_file = self
            .output_dir
            .join(format!(".hwceiling-run-{id}.config.json"));
        let result_file = self.output_dir.join(format!(".hwceiling-run-{id}.json"));
        let json = serde_json::to_vec(&run).map_err(|e| StartError::Spawn(e.to_string()))?;
        // The folder the child would make first: its configuration goes there.
        std::fs::create_dir_all(&self.output_dir)
            .and_then(|()| std::fs::write(&config_file, json))
            .map_err(|e| {
                StartError::Spawn(format!(
                    "cannot write the run configuration {}: {e}",
                    config_file.display()
                ))
            })?;
        let mut cmd = tokio::process::Command::new(&self.config.program);
        cmd.args(&self.config.args)
            .arg("--run-config")
            .arg(&config_file)
            .arg("--result-file")
            .arg(&result_file)
            .stdin(Stdio::null())
            // What the run wrote comes from its result file; its summary is for terminals.
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            // Its own process group: a Ctrl-C at the daemon's terminal reaches the daemon only,
            // which then stops the run with exactly one SIGTERM.
            .process_group(0)
            .kill_on_drop(true);
        // Before the spawn: the child's first running record must not predate the run.
        let started = SystemTime::now();
        let mut child = cmd.spawn().map_err(|e| {
            let _ = std::fs::remove_file(&config_file);
            StartError::Spawn(format!(
                "cannot start {}: {e}",
                self.config.program.display()
            ))
        })?;
        let (cancel_tx, cancel_rx) = watch::channel(false);
        let active = Active {
            id,
            started,
            started_at: now_rfc3339(),
            pid: child.id(),
            request: request.clone(),
            cancel: cancel_tx,
        };
        match active.pid {
            Some(pid) => tracing::info!(id, pid, "profile run started"),
            None => tracing::info!(id, "profile run started (its process id is not known)"),
        }
        let status = RunStatus::Running {
            id,
            started_at: active.started_at.clone(),
            pid: active.pid,
            request,
            cancelling: false,
            progress: None,
        };
        *slot = Slot::Running(active);
        drop(slot);
        let stderr = child.stderr.take();
        let me = self.clone();
        let handle = tokio::spawn(async move {
            let err = tokio::spawn(async move {
                match stderr {
                    Some(s) => tail(s, 16 << 10).await,
                    None => String::new(),
                }
            });
            let exit = me.supervise(&mut child, cancel_rx).await;
            let stderr = err.await.unwrap_or_default();
            let written = tokio::fs::read(&result_file).await.ok();
            let _ = tokio::fs::remove_file(&result_file).await;
            let _ = tokio::fs::remove_file(&config_file).await;
            let profile = written
                .and_then(|b| serde_json::from_slice::<hwc_model::RunWritten>(&b).ok())
                .map(|w| w.profile.display().to_string());
            me.finish(exit, profile, &stderr);
        });
        *self.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
        Ok(status)
    }

    /// Wait for the child; on cancel, SIGTERM, then SIGKILL after the grace period.
    async fn supervise(
        &self,
        child: &mut tokio::process::Child,
        mut cancel: watch::Receiver<bool>,
    ) -> std::io::Result<std::process::ExitStatus> {
        tokio::select! {
            status = child.wait() => return status,
            _ = cancel.wait_for(|c| *c) => {}
        }
        if let Some(pid) = child.id() {
            tracing::info!(pid, "stopping the profile run (SIGTERM)");
            send_sigterm(pid);
        }
        match tokio::time::timeout(self.config.grace, child.wait()).await {
            Ok(status) => status,
            Err(_) => {
                tracing::warn!("the profile run did not stop within the grace period: SIGKILL");
                let _ = child.start_kill();
                child.wait().await
            }
        }
    }

    fn finish(
        &self,
        exit: std::io::Result<std::process::ExitStatus>,
        profile: Option<String>,
        stderr: &str,
    ) {
        let mut slot = self.slot();
        let Slot::Running(a) = &*slot else {
            return;
        };
        let last_err = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(str::to_string);
        let (outcome, code, error) = match &exit {
            Ok(s) => match s.code() {
                Some(0) => ("completed", Some(0), None),
                Some(130) => ("interrupted", Some(130), None),
                Some(c) => ("failed", Some(c), last_err),
                None => ("killed", None, Some(format!("ended by a signal ({s})"))),
            },
            Err(e) => (
                "failed",
                None,
                Some(format!("cannot wait for the run: {e}")),
            ),
        };
        tracing::info!(id = a.id, outcome, "profile run finished");
        let status = RunStatus::Finished {
            id: a.id,
            started_at: a.started_at.clone(),
            finished_at: now_rfc3339(),
            request: a.request.clone(),
            outcome: outcome.to_string(),
            exit_code: code,
            profile,
            error,
        };
        *slot = Slot::Finished(status);
    }

    /// Ask a run in flight to stop. Returns false when none runs.
    pub fn cancel(&self) -> bool {
        match &*self.slot() {
            Slot::Running(a) => {
                let _ = a.cancel.send(true);
                true
            }
            _ => false,
        }
    }

    /// At shutdown: refuse new runs and stop the one in flight.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.cancel();
    }

    /// Wait until the run in flight (if any) has ended.
    pub async fn wait(&self) {
        let handle = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.await;
        }
    }
}

#[derive(Deserialize)]
struct PartialRecord {
    plan: PartialPlan,
    #[serde(default)]
    results: Vec<PartialResult>,
    #[serde(default)]
    failures: Vec<serde::de::IgnoredAny>,
    #[serde(default)]
    waived: Vec<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct PartialPlan {
    cases: Vec<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct PartialResult {
    measurement: PartialMeasurement,
}

#[derive(Deserialize)]
struct PartialMeasurement {
    key: String,
}

/// How far a file's modification time may lag the clock it is compared with.
const MTIME_SLACK: Duration = Duration::from_secs(2);

/// The newest running record in `dir` written since `since`.
fn read_progress(dir: &Path, since: SystemTime) -> Option<Progress> {
    let newest = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(hwc_profile::names::RunName::parse)
                .is_some_and(|(kind, _)| kind == hwc_profile::names::RunFile::Partial)
        })
        .filter_map(|e| {
            let m = e.metadata().ok()?.modified().ok()?;
            // File times come from a coarser clock than SystemTime::now(): allow for it.
            (m + MTIME_SLACK >= since).then(|| (m, e.path()))
        })
        .max()?;
    let text = hwc_profile::read_text_capped(&newest.1, 64 << 20).ok()?;
    let r: PartialRecord = serde_json::from_str(&text).ok()?;
    Some(Progress {
        cases_done: r.results.len() + r.failures.len() + r.waived.len(),
        cases_total: r.plan.cases.len(),
        last_case: r.results.last().map(|x| x.measurement.key.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_requests_become_checked_run_configurations() {
        let r = RunRequest {
            paths: Some(vec!["host-ram".into(), "h2d".into()]),
            threads: Some(vec![1, 8]),
            host_sizes: Some(vec!["256MiB".into(), "4096".into()]),
            quick: true,
            allow_contended: false,
        };
        let c = r.to_config(Path::new("/srv/p")).unwrap();
        let mut want = hwc_model::RunConfig::new("/srv/p");
        want.paths = Some(vec![hwc_model::PathId::HostRam, hwc_model::PathId::H2d]);
        want.threads = Some(vec![1, 8]);
        want.host_sizes = Some(vec![256 << 20, 4096]);
        want.quick = true;
        assert_eq!(c, want);
        assert_eq!(
            RunRequest::default()
                .to_config(Path::new("/srv/p"))
                .unwrap(),
            hwc_model::RunConfig::new("/srv/p")
        );
        let bad = |r: RunRequest| r.to_config(Path::new("o")).unwrap_err();
        assert!(bad(RunRequest {
            paths: Some(vec!["nvram".into()]),
            ..RunRequest::default()
        })
        .contains("unknown path `nvram`"));
        assert!(bad(RunRequest {
            host_sizes: Some(vec!["1TB; rm -rf /".into()]),
            ..RunRequest::default()
        })
        .contains("host_sizes"));
        assert!(bad(RunRequest {
            paths: Some(vec![]),
            ..RunRequest::default()
        })
        .contains("empty"));
    }

    #[test]
    fn a_quick_or_narrowed_request_is_told_its_profile_will_not_replace_a_full_one() {
        assert_eq!(RunRequest::default().note(), None);
        let contended = RunRequest {
            allow_contended: true,
            ..RunRequest::default()
        };
        assert_eq!(contended.note(), None);
        let every_path = RunRequest {
            paths: Some(
                hwc_model::PathId::ALL
                    .iter()
                    .map(|p| p.to_string())
                    .collect(),
            ),
            ..RunRequest::default()
        };
        assert_eq!(every_path.note(), None);
        let quick = RunRequest {
            quick: true,
            ..RunRequest::default()
        };
        assert!(quick
            .note()
            .unwrap()
            .starts_with("a --quick run: its profile will not replace a complete profile"));
        let narrowed = RunRequest {
            paths: Some(vec!["host-ram".into(), "h2d".into()]),
            threads: Some(vec![1, 8]),
            host_sizes: Some(vec!["256MiB".into(), "4096".into()]),
            quick: true,
            allow_contended: false,
        };
        // The options as the child records them (canonical names and sizes).
        assert!(narrowed.note().unwrap().starts_with(
            "a --quick run narrowed by --paths host_ram,h2d, --threads 1,8, --host-sizes \
             256MiB,4KiB: its profile will not replace"
        ));
        let sizes = RunRequest {
            host_sizes: Some(vec!["1GiB".into()]),
            ..RunRequest::default()
        };
        let note = sizes.note().unwrap();
        assert!(
            note.starts_with(
                "a run narrowed by --host-sizes 1GiB if a list leaves out a case of this \
                 machine's full sweep (the profile records what it leaves out); then its profile \
                 will not replace"
            ),
            "{note}"
        );
        // Quick, or narrowed by its paths: not replacing whatever the lists hold.
        assert!(!narrowed.note().unwrap().contains(" if a list "));
    }

    #[test]
    fn run_requests_are_refused_as_the_command_line_refuses_them() {
        let bad = |r: RunRequest| r.to_config(Path::new("o")).unwrap_err();
        let threads = |t: Vec<u32>| RunRequest {
            threads: Some(t),
            ..RunRequest::default()
        };
        let sizes = |s: &[&str]| RunRequest {
            host_sizes: Some(s.iter().map(|x| x.to_string()).collect()),
            ..RunRequest::default()
        };
        // The command line's words: `profile --threads 0` says "from 1 to 4096" too.
        assert_eq!(
            bad(threads(vec![0])),
            "`threads`: `0`: a thread count must be from 1 to 4096"
        );
        assert!(bad(threads(vec![4097])).contains("from 1 to 4096"));
        assert!(bad(threads(vec![])).contains("empty"));
        assert!(threads(vec![4096]).to_config(Path::new("o")).is_ok());
        assert_eq!(bad(threads(vec![1, 2, 1])), "`threads` lists 1 twice");
        assert_eq!(
            bad(sizes(&["4MiB", "4096KiB"])),
            "`host_sizes` lists 4MiB twice"
        );
        assert!(bad(sizes(&["0"])).contains("not a usable size"));
        assert!(bad(sizes(&["99999999999999999999G"])).contains("host_sizes"));
        assert!(bad(sizes(&[])).contains("empty"));
        assert_eq!(
            bad(RunRequest {
                paths: Some(vec!["h2d".into(), "host_ram".into(), "H2D".into()]),
                ..RunRequest::default()
            }),
            "`paths` lists h2d twice"
        );
    }

    #[test]
    fn progress_comes_from_the_newest_running_record() {
        let d = tempfile::tempdir().unwrap();
        let since = SystemTime::now() - Duration::from_secs(5);
        assert_eq!(read_progress(d.path(), since), None);
        std::fs::write(
            d.path().join("hardware_raw_2026-11-29.partial.json"),
            r#"{"plan":{"cases":[1,2,3,4],"waived":[]},"results":[{"measurement":{"key":"host_ram/host-memcpy/n0-n0/4MiB/t1","x":1}}],"failures":[{}],"waived":[]}"#,
        )
        .unwrap();
        assert_eq!(
            read_progress(d.path(), since),
            Some(Progress {
                cases_done: 2,
                cases_total: 4,
                last_case: Some("host_ram/host-memcpy/n0-n0/4MiB/t1".into())
            })
        );
        // A record older than the run is another run's leftover.
        assert_eq!(
            read_progress(d.path(), SystemTime::now() + Duration::from_secs(60)),
            None
        );
        std::fs::write(
            d.path().join("hardware_raw_2026-11-29.partial.json"),
            "{not json",
        )
        .unwrap();
        assert_eq!(read_progress(d.path(), since), None);
    }
}
