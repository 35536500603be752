//! A bounded load test of `hwceiling serve`'s HTTP surface on this machine: starts the daemon on
//! 127.0.0.1:0 (or a Unix socket with `--unix`) over a synthetic profile, then runs N requests
//! from M concurrent clients, bounded in count and time, and prints requests/s and latency.
//!
//! cargo run --release -p hwc-daemon --example loadtest -- --requests 20000 --concurrency 64

use hwc_daemon::client::Target;
use hwc_daemon::load::{self, LoadPlan};
use hwc_daemon::{Config, Listener};
use hwc_model::{Plan, Provenance, Topology};
use std::time::Duration;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a whole number, not `{v}`"))
        })
        .unwrap_or(default)
}

fn main() {
    let requests = arg("--requests", 20_000) as usize;
    let concurrency = arg("--concurrency", 32) as usize;
    let max_seconds = arg("--max-seconds", 60);
    let unix = std::env::args().any(|a| a == "--unix");

    let dir = tempfile::tempdir().expect("a temporary folder");
    let mut topo = Topology::default();
    topo.platform.hostname = Some("loadtest".into());
    let mut profile = hwc_profile::build(
        &topo,
        &Plan::default(),
        &[],
        &[],
        &[],
        &[],
        Provenance {
            tool: "hwceiling".into(),
            finished_at: chrono::Local::now().to_rfc3339(),
            date: "2026-11-29".into(),
            ..Provenance::default()
        },
    );
    profile.ceilings.insert("warm_gpu0_peak_gbps".into(), 55.6);
    profile
        .ceilings
        .insert("host_ram_same_numa_gbps".into(), 34.7);
    std::fs::write(
        dir.path().join("hardware_profile_2026-11-29.yaml"),
        hwc_profile::to_yaml(&profile).expect("profile YAML"),
    )
    .expect("writing the profile");

    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let config = Config::new(dir.path(), "/bin/false");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let sock = dir.path().join("load.sock");
    let (listener, target) = rt.block_on(async {
        if unix {
            let l = hwc_daemon::bind_unix(&sock).expect("binding the socket");
            (Listener::Unix(l), Target::Unix(sock.clone()))
        } else {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("binding 127.0.0.1:0");
            let a = l.local_addr().expect("local address");
            (Listener::Tcp(l), Target::Tcp(a))
        }
    });
    let server = rt.spawn(hwc_daemon::run(listener, config, async move {
        let _ = stop_rx.await;
    }));

    let plan = LoadPlan {
        requests,
        concurrency,
        max_duration: Duration::from_secs(max_seconds),
        paths: vec![
            "/v1/efficiency?path=warm_gpu0_peak_gbps&measured_gbps=44.5".into(),
            "/v1/ceilings".into(),
            "/metrics".into(),
            "/healthz".into(),
            "/v1/efficiency?path=warm_gpu0_peak_gbps&measured_gbps=-1".into(),
            "/no/such/endpoint".into(),
        ],
    };
    let report = load::run(&target, &plan).expect("a local target");
    println!(
        "{} clients on {}: {report}",
        concurrency,
        if unix { "a Unix socket" } else { "127.0.0.1" }
    );
    let _ = stop_tx.send(());
    rt.block_on(server).expect("the daemon stopped");
}
