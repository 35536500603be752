//! A bounded load test on loopback and on a Unix socket: many concurrent clients, a mix of good
//! and bad requests; every answer is a 2xx or the expected 4xx, none fails, none is a 5xx.

mod common;
use common::{profile_yaml, write_profile, Bind, Daemon};
use hwc_daemon::load::{self, LoadPlan};
use std::time::Duration;

fn with_profile(dir: &std::path::Path, _: &mut hwc_daemon::Config) {
    write_profile(
        dir,
        "hardware_profile_2026-11-29.yaml",
        &profile_yaml(
            "node1",
            "2026-11-29T10:00:00+00:00",
            &[
                ("warm_gpu0_peak_gbps", 55.6),
                ("host_ram_same_numa_gbps", 34.7),
            ],
        ),
    );
}

fn plan(requests: usize) -> LoadPlan {
    LoadPlan {
        requests,
        concurrency: 32,
        max_duration: Duration::from_secs(60),
        paths: [
            "/v1/efficiency?path=warm_gpu0_peak_gbps&measured_gbps=44.5",
            "/v1/ceilings",
            "/metrics",
            "/healthz",
            "/v1/efficiency?path=warm_gpu0_peak_gbps&measured_gbps=-1",
            "/no/such/endpoint",
        ]
        .map(String::from)
        .to_vec(),
    }
}

fn check(r: &load::LoadReport, requests: usize) {
    assert_eq!(r.sent, requests, "{r}");
    assert_eq!((r.failed, r.status_5xx), (0, 0), "{r}");
    assert_eq!(r.status_4xx, requests / 3, "the bad third: {r}");
    assert_eq!(r.status_2xx, requests - requests / 3, "{r}");
}

#[test]
fn loopback_tcp_under_32_concurrent_clients() {
    let d = Daemon::tcp(with_profile);
    let r = load::run(&d.target, &plan(3000)).unwrap();
    println!("load test, TCP 127.0.0.1, 32 clients: {r}");
    check(&r, 3000);
    assert_eq!(d.json("/healthz").0, 200, "still answering");
}

#[test]
fn unix_socket_under_32_concurrent_clients() {
    let sockdir = tempfile::Builder::new()
        .prefix("hwc")
        .tempdir_in("/tmp")
        .unwrap();
    let d = Daemon::start(Bind::Unix(sockdir.path().join("l.sock")), with_profile);
    let r = load::run(&d.target, &plan(3000)).unwrap();
    println!("load test, Unix socket, 32 clients: {r}");
    check(&r, 3000);
}
