//! `hwceiling serve`: a local daemon that keeps the newest complete ceiling profile of an output
//! folder (not a `--quick`, interrupted or narrowed run — `--paths h2d`, `--threads 4`, … —
//! unless the folder has nothing else: see `store`)
//! and answers the efficiency evaluator, monitoring and operators over HTTP — on a Unix socket by
//! default, or on a loopback TCP address.
//!
//! The server is [`run`]: a library function taking a bound [`Listener`], a [`Config`] and a
//! shutdown future, so tests bind `127.0.0.1:0` or a temporary socket. Endpoints:
//!
//! | endpoint | answer |
//! |---|---|
//! | `GET /healthz` | liveness, the loaded profile's file (and whether it is complete, and a newer incomplete one passed over), the run state |
//! | `GET /v1/profile` | the profile, YAML (as written) or JSON by `Accept` (q-values; 406 for nothing acceptable) or `?format=` |
//! | `GET /v1/ceilings` | the flat `ceilings:` map (JSON) |
//! | `GET /v1/efficiency?path=KEY&measured_gbps=X` | measured / ceiling, the ceiling, the profile |
//! | `GET /metrics` | Prometheus text 0.0.4, or OpenMetrics by `Accept`: one gauge per ceiling (base units), the profile's age |
//! | `POST /v1/profile/run` | start `hwceiling profile` in a child process (local callers) |
//! | `GET /v1/profile/run` | the run's state and progress |
//! | `DELETE /v1/profile/run` | stop the run: its case in flight stops at its next repetition (local callers) |
//!
//! Every request passes the `guard` module first (a foreign `Host` or `Origin`: 403; a POST that is not
//! JSON: 415), and every error is JSON, hyper's own (400, 414, 431) too.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub mod client;
mod guard;
pub mod load;
mod metrics;
mod routes;
mod runner;
mod serve;
mod socket;
mod store;

pub use routes::completeness_fields;
pub use runner::{Launch, RunRequest, RunStatus};
pub use socket::{
    bind_unix, check_listen_addr, default_socket_path, is_local_peer, resolve_listen,
};
pub use store::profile_sort_key;

/// Where the daemon listens.
#[derive(Debug)]
pub enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

/// Who is calling: a Unix-socket peer (local by construction) or a TCP address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    Unix,
    Tcp(SocketAddr),
}

#[derive(Debug, Clone)]
pub struct Config {
    /// The folder `hwceiling profile` writes to; the daemon serves its newest complete profile
    /// (the newest at all while none is complete).
    pub output_dir: PathBuf,
    /// How often the folder is checked for a newer profile.
    pub poll_interval: Duration,
    /// Largest request body accepted (413 above).
    pub max_body_bytes: usize,
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// A client must send a request's headers within this time, and its body within this time
    /// after them, or its connection is closed (idle, slow and stalled clients cannot hold
    /// connections forever).
    pub header_read_timeout: Duration,
    /// Names the daemon answers to over TCP besides loopback names and addresses and the
    /// address a connection came in on (the name given to `--listen`): a request with another
    /// `Host` is refused (403), as a DNS-rebinding web page's would be.
    pub host_names: Vec<String>,
    /// This machine's hostname: a profile of another host is not served (names compare by
    /// their first label, `node1` for `node1.example.com`). `None`: not checked.
    pub hostname: Option<String>,
    /// How `POST /v1/profile/run` starts a profile.
    pub run: Launch,
}

impl Config {
    /// Defaults for `output_dir` running `program profile …`.
    pub fn new(output_dir: impl Into<PathBuf>, program: impl Into<PathBuf>) -> Self {
        Config {
            output_dir: output_dir.into(),
            poll_interval: Duration::from_secs(2),
            max_body_bytes: 64 << 10,
            max_connections: 512,
            header_read_timeout: Duration::from_secs(10),
            host_names: Vec::new(),
            hostname: this_hostname(),
            run: Launch::new(program),
        }
    }
}

/// This machine's hostname, as the kernel has it (`None` where it cannot be read).
pub fn this_hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{what}: {cause}")]
    Io { what: String, cause: std::io::Error },
    #[error("refusing to listen on {0}: not a loopback address (pass --listen-public to serve other hosts)")]
    NotLoopback(SocketAddr),
    #[error("`{0}` is not an address to listen on: give ADDRESS:PORT, [IPv6]:PORT or NAME:PORT (localhost:9187)")]
    BadListen(String),
    #[error("cannot resolve `{spec}` to an address to listen on: {cause}")]
    Resolve { spec: String, cause: std::io::Error },
    #[error("{0} is in use by a running daemon")]
    SocketInUse(PathBuf),
    #[error("{0} exists and is not a socket: refusing to replace it")]
    NotASocket(PathBuf),
}

impl DaemonError {
    fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DaemonError {
        let what = what.into();
        move |cause| DaemonError::Io { what, cause }
    }
}

/// Shared by the handlers, the folder watcher and the runner.
pub(crate) struct AppState {
    pub config: Config,
    pub store: store::Store,
    pub runner: Arc<runner::Runner>,
}

/// Serve until `shutdown` completes, then stop accepting, finish the requests in flight, stop a
/// profile run cleanly (SIGTERM: it stops its case in flight at the next repetition and writes its files marked
/// interrupted; SIGKILL only after `config.run.grace`), and remove the Unix socket.
pub async fn run(
    listener: Listener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let socket_file = match &listener {
        Listener::Unix(l) => l
            .local_addr()
            .ok()
            .and_then(|a| a.as_pathname().map(Path::to_path_buf))
            .map(socket::SocketFile::new),
        Listener::Tcp(_) => None,
    };
    let state = Arc::new(AppState {
        store: store::Store::new(config.output_dir.clone(), config.hostname.clone()),
        runner: Arc::new(runner::Runner::new(
            config.run.clone(),
            config.output_dir.clone(),
        )),
        config,
    });
    store::refresh(&state).await;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let watcher = tokio::spawn(store::watch(state.clone(), stop_rx.clone()));
    let on_shutdown = {
        let state = state.clone();
        async move {
            shutdown.await;
            tracing::info!("shutting down: no new connections; stopping any profile run");
            let _ = stop_tx.send(true);
            state.runner.close();
        }
    };
    let app = routes::router(state.clone());
    let limits = serve::Limits {
        max_connections: state.config.max_connections.max(1),
        read_timeout: state.config.header_read_timeout,
        max_body_bytes: state.config.max_body_bytes,
        host_names: state.config.host_names.clone(),
    };
    serve::serve(listener, app, limits, stop_rx, on_shutdown).await;
    state.runner.close();
    state.runner.wait().await;
    let _ = watcher.await;
    if let Some(f) = socket_file {
        f.remove();
    }
}
