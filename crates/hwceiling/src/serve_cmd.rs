//! `hwceiling serve`: run the daemon (crate `hwc-daemon`) on a Unix socket or a loopback TCP
//! address, with settings from flags over an optional TOML file; SIGTERM/SIGINT stop it cleanly.

use anyhow::{bail, Context, Result};
use clap::Args;
use hwc_daemon::{Config, Listener};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Serve the newest complete profile of this folder (not --quick, not interrupted, not
    /// narrowed by --paths, --drives, --target or a sweep; the newest at all while none is
    /// complete) [default: profiling].
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Listen on this Unix socket, mode 0660 [default: $XDG_RUNTIME_DIR/hwceiling.sock, else
    /// /run/hwceiling/hwceiling.sock].
    #[arg(long, value_name = "PATH", conflicts_with = "listen")]
    pub socket: Option<PathBuf>,
    /// Listen on TCP instead, e.g. 127.0.0.1:9187 or localhost:9187 (loopback only without
    /// --listen-public; a name given here is one requests may name in their Host header).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Serve the profiles of this host [default: this machine's hostname]; a profile of
    /// another host is refused (set it after renaming the machine, say).
    #[arg(long, value_name = "NAME")]
    pub hostname: Option<String>,
    /// Allow a non-loopback --listen address. Profile runs stay limited to local callers.
    #[arg(long)]
    pub listen_public: bool,
    /// Settings file (TOML; deploy/serve.example.toml shows every key). Flags override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Seconds between checks of the folder for a newer profile [default: 2].
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub poll_interval: Option<f64>,
    /// Seconds a stopped profile run may take to stop its case in flight and write its files
    /// before it is killed [default: 120].
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub run_grace: Option<f64>,
}

/// The shortest interval a setting may give: a poll every 10 ms is already busy; a shorter
/// one would keep a CPU spinning on the folder.
const MIN_SECONDS: f64 = 0.01;

fn parse_seconds(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && (MIN_SECONDS..=86_400.0).contains(v))
        .ok_or_else(|| format!("`{s}` is not a number of seconds from {MIN_SECONDS} to 86400"))
}

/// The TOML settings file; every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    output_dir: Option<PathBuf>,
    socket: Option<PathBuf>,
    listen: Option<String>,
    listen_public: Option<bool>,
    hostname: Option<String>,
    poll_interval_s: Option<f64>,
    run_grace_s: Option<f64>,
    max_connections: Option<usize>,
    max_body_bytes: Option<usize>,
    header_read_timeout_s: Option<f64>,
}

fn read_config(path: &Path) -> Result<FileConfig> {
    let text = hwc_profile::read_text_capped(path, 1 << 20)?;
    let c: FileConfig = toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}", e.message()))
        .with_context(|| format!("{} is not a valid serve config", path.display()))?;
    for (name, v) in [
        ("poll_interval_s", c.poll_interval_s),
        ("run_grace_s", c.run_grace_s),
        ("header_read_timeout_s", c.header_read_timeout_s),
    ] {
        if let Some(v) = v {
            parse_seconds(&v.to_string())
                .map_err(|e| anyhow::anyhow!("{}: {name}: {e}", path.display()))?;
        }
    }
    if c.socket.is_some() && c.listen.is_some() {
        bail!("{}: give `socket` or `listen`, not both", path.display());
    }
    if c.max_connections == Some(0) || c.max_body_bytes == Some(0) {
        bail!(
            "{}: max_connections and max_body_bytes must be above 0",
            path.display()
        );
    }
    Ok(c)
}

enum Bind {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

pub fn run(a: &ServeArgs) -> Result<i32> {
    let file = match &a.config {
        Some(p) => read_config(p)?,
        None => FileConfig::default(),
    };
    let output_dir = a
        .output_dir
        .clone()
        .or(file.output_dir)
        .unwrap_or_else(|| PathBuf::from("profiling"));
    // A folder not there yet is fine (a first run makes it); something else there is not.
    if output_dir.exists() && !output_dir.is_dir() {
        bail!(
            "the profile folder {} is not a folder",
            output_dir.display()
        );
    }
    let public = a.listen_public || file.listen_public.unwrap_or(false);
    // The TCP address as given (a name is resolved below), or the socket.
    let listen = match (&a.socket, &a.listen, &file.socket, &file.listen) {
        (Some(s), _, _, _) => Err(s.clone()),
        (None, Some(l), _, _) => Ok(l.clone()),
        (None, None, Some(s), _) => Err(s.clone()),
        (None, None, None, Some(l)) => Ok(l.clone()),
        (None, None, None, None) => Err(hwc_daemon::default_socket_path()),
    };
    let mut host_names = Vec::new();
    let bind = match listen {
        Ok(spec) => {
            let (addr, name) = hwc_daemon::resolve_listen(&spec)?;
            hwc_daemon::check_listen_addr(addr, public)?;
            host_names.extend(name);
            Bind::Tcp(addr)
        }
        // Said and then ignored, it would read as if a public address were served.
        Err(path) if public => bail!(
            "listen_public applies to a TCP address (--listen), not to the socket {}",
            path.display()
        ),
        Err(path) => Bind::Unix(path),
    };
    let program = std::env::current_exe().context("cannot find this executable to run profiles")?;
    let mut config = Config::new(&output_dir, program);
    let seconds = |cli: Option<f64>, file: Option<f64>, default: Duration| {
        cli.or(file).map(Duration::from_secs_f64).unwrap_or(default)
    };
    config.poll_interval = seconds(a.poll_interval, file.poll_interval_s, config.poll_interval);
    config.run.grace = seconds(a.run_grace, file.run_grace_s, config.run.grace);
    config.header_read_timeout =
        seconds(None, file.header_read_timeout_s, config.header_read_timeout);
    config.max_connections = file.max_connections.unwrap_or(config.max_connections);
    config.max_body_bytes = file.max_body_bytes.unwrap_or(config.max_body_bytes);
    config.host_names = host_names;
    if let Some(h) = a.hostname.clone().or(file.hostname) {
        config.hostname = Some(h);
    }

    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HWCEILING_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async move {
        let (listener, shown) = match bind {
            Bind::Unix(path) => (
                Listener::Unix(hwc_daemon::bind_unix(&path)?),
                path.display().to_string(),
            ),
            Bind::Tcp(addr) => {
                let l = tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("cannot listen on {addr}"))?;
                let shown = l.local_addr().map(|a| a.to_string()).unwrap_or_default();
                (Listener::Tcp(l), shown)
            }
        };
        let shutdown = shutdown_signal()?;
        tracing::info!(
            listen = %shown,
            output_dir = %output_dir.display(),
            "hwceiling serve listening"
        );
        hwc_daemon::run(listener, config, shutdown).await;
        tracing::info!("stopped");
        anyhow::Ok(0)
    })
}

/// Completes on the first SIGTERM or SIGINT.
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM"),
            _ = int.recv() => tracing::info!("SIGINT"),
        }
    })
}
