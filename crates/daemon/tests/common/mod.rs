//! A daemon on 127.0.0.1:0 or a temporary Unix socket, in its own runtime thread, and profiles
//! written the way `hwceiling profile` writes them.
// Each test binary uses a part of these helpers.
#![allow(dead_code)]

use hwc_daemon::client::{self, Response, Target};
use hwc_daemon::{Config, DaemonError, Listener};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const TIMEOUT: Duration = Duration::from_secs(10);

pub fn profile_yaml(host: &str, finished_at: &str, ceilings: &[(&str, f64)]) -> String {
    hwc_profile::to_yaml(&hwc_testkit::ceilings_profile(host, finished_at, ceilings)).unwrap()
}

/// Write atomically, as hwceiling does (temp file, then a hard link).
pub fn write_profile(dir: &Path, name: &str, yaml: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, yaml).unwrap();
    std::fs::hard_link(&tmp, dir.join(name)).unwrap();
    std::fs::remove_file(&tmp).unwrap();
}

pub struct Daemon {
    pub target: Target,
    dir: Option<tempfile::TempDir>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), DaemonError>>>,
}

pub enum Bind {
    Tcp,
    Unix(PathBuf),
}

impl Daemon {
    /// A daemon over a fresh output folder; `setup` may write profiles before it starts and
    /// adjust the config.
    pub fn start(bind: Bind, setup: impl FnOnce(&Path, &mut Config)) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::new(dir.path(), "/bin/false");
        config.poll_interval = Duration::from_millis(50);
        config.header_read_timeout = Duration::from_millis(500);
        // The fixtures are of made-up hosts: the tests of the hostname check set their own.
        config.hostname = None;
        setup(dir.path(), &mut config);
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (target_tx, target_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let (listener, target) = match bind {
                    Bind::Tcp => {
                        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                        let a = l.local_addr().unwrap();
                        (Listener::Tcp(l), Target::Tcp(a))
                    }
                    Bind::Unix(path) => {
                        let l = hwc_daemon::bind_unix(&path)?;
                        (Listener::Unix(l), Target::Unix(path))
                    }
                };
                target_tx.send(target).unwrap();
                hwc_daemon::run(listener, config, async move {
                    let _ = stop_rx.await;
                })
                .await;
                Ok(())
            })
        });
        let target = target_rx.recv_timeout(TIMEOUT).expect("daemon started");
        Daemon {
            target,
            dir: Some(dir),
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    pub fn tcp(setup: impl FnOnce(&Path, &mut Config)) -> Daemon {
        Daemon::start(Bind::Tcp, setup)
    }

    /// The output folder.
    pub fn dir(&self) -> &Path {
        self.dir
            .as_ref()
            .map(|d| d.path())
            .unwrap_or(Path::new("/nonexistent"))
    }

    pub fn get(&self, path: &str) -> Response {
        client::get_json(&self.target, path, TIMEOUT).unwrap()
    }

    pub fn json(&self, path: &str) -> (u16, serde_json::Value) {
        let r = self.get(path);
        let v =
            serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{path}: {e}: {}", r.text()));
        (r.status, v)
    }

    pub fn send(&self, method: &str, path: &str, body: &[u8]) -> Response {
        client::request(
            &self.target,
            method,
            path,
            &[("Content-Type", "application/json")],
            body,
            TIMEOUT,
        )
        .unwrap()
    }

    /// Poll `path` until `done` holds for its JSON (or fail after the timeout).
    pub fn wait_for(
        &self,
        path: &str,
        done: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let start = Instant::now();
        loop {
            let (_, v) = self.json(path);
            if done(&v) {
                return v;
            }
            assert!(
                start.elapsed() < TIMEOUT,
                "timed out waiting on {path}: {v}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Trigger the shutdown future and wait for `run` to return; the output folder outlives it.
    pub fn stop(mut self) -> (Result<(), DaemonError>, tempfile::TempDir) {
        let r = self.shutdown();
        (r, self.dir.take().expect("the folder"))
    }

    fn shutdown(&mut self) -> Result<(), DaemonError> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        match self.thread.take() {
            Some(t) => t.join().expect("daemon thread"),
            None => Ok(()),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
