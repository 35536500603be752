//! The daemon over real sockets: every endpoint, reloads, bad input, the Unix socket.

mod common;
use common::{profile_yaml, write_profile, Bind, Daemon, TIMEOUT};
use hwc_daemon::client::{self, Target};
use proptest::prelude::*;
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::time::Duration;

const DAY1: &str = "hardware_profile_2026-11-28.yaml";
const DAY2: &str = "hardware_profile_2026-11-29.yaml";
/// What Prometheus 2.x sends when it scrapes.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

fn with_day1(dir: &std::path::Path, _: &mut hwc_daemon::Config) {
    write_profile(
        dir,
        DAY1,
        &profile_yaml(
            "node1",
            "2026-11-28T10:00:00+00:00",
            &[
                ("warm_gpu0_gbps", 53.4),
                ("warm_gpu0_peak_gbps", 55.6),
                ("warm_gpu0_cross_numa_penalty_gbps", 3.0),
                ("host_ram_same_numa_gbps", 34.7),
                ("nvme_raw_4drive_read_gbps", 24.0),
            ],
        ),
    );
}

#[test]
fn efficiency_says_where_the_ceiling_comes_from_by_key() {
    let d = Daemon::tcp(|dir, _| {
        let p = hwc_testkit::with_equal_median_gpu_ceilings(
            hwc_testkit::ceilings_profile("node1", "2026-11-28T10:00:00+00:00", &[]),
            55.6,
            "min of NVMe and H2D",
        );
        write_profile(dir, DAY1, &hwc_profile::to_yaml(&p).unwrap());
    });
    let (status, e) = d.json("/v1/efficiency?path=warm_gpu0_peak_gbps&measured_gbps=27.8");
    assert_eq!(status, 200, "{e}");
    assert_eq!(
        e["ceiling_source"],
        serde_json::json!({"kind": "measured", "measurement": "h2d/cuda-copy/gpu0/local/256MiB/s1", "spread_pct": 1.8, "n": 12})
    );
    let (status, e) = d.json("/v1/efficiency?path=dispatcher_cold_1drive_gbps&measured_gbps=27.8");
    assert_eq!(status, 200, "{e}");
    assert_eq!(
        e["ceiling_source"],
        serde_json::json!({"kind": "derived", "how": "min of NVMe and H2D"})
    );
}

#[test]
fn profile_is_served_as_written_yaml_or_as_json() {
    let d = Daemon::tcp(with_day1);
    let written = std::fs::read_to_string(d.dir().join(DAY1)).unwrap();
    let yaml = client::request(&d.target, "GET", "/v1/profile", &[], b"", TIMEOUT).unwrap();
    assert_eq!(yaml.status, 200);
    assert_eq!(yaml.header("content-type"), Some("application/yaml"));
    assert_eq!(
        yaml.text(),
        written,
        "byte for byte, header comments included"
    );
    assert_eq!(yaml.header("x-hwceiling-profile"), Some(DAY1));
    let (status, json) = d.json("/v1/profile");
    assert_eq!(status, 200);
    assert_eq!(json["platform"]["hostname"], "node1");
    assert_eq!(json["ceilings"]["warm_gpu0_peak_gbps"], 55.6);
    let (_, j) = d.json("/v1/profile?format=json");
    assert_eq!(j["schema_version"], 2);
    let r = client::request(
        &d.target,
        "GET",
        "/v1/profile",
        &[("Accept", "image/png")],
        b"",
        TIMEOUT,
    )
    .unwrap();
    assert_eq!(r.status, 406);
}

#[test]
fn ceilings_and_efficiency_answer_the_evaluator() {
    let d = Daemon::tcp(with_day1);
    let (status, c) = d.json("/v1/ceilings");
    assert_eq!(status, 200);
    assert_eq!(c["host_ram_same_numa_gbps"], 34.7);
    assert_eq!(c.as_object().unwrap().len(), 5);

    let (status, e) = d.json("/v1/efficiency?path=warm_gpu0_peak_gbps&measured_gbps=44.48");
    assert_eq!(status, 200, "{e}");
    assert!(
        (e["efficiency"].as_f64().unwrap() - 0.8).abs() < 1e-9,
        "{e}"
    );
    assert_eq!(e["ceiling_gbps"], 55.6);
    assert_eq!(e["profile"]["file"], DAY1);
    assert_eq!(e["profile"]["hostname"], "node1");
    assert!(e["profile"]["age_seconds"].as_f64().unwrap() > 0.0);

    let (status, e) = d.json("/v1/efficiency?path=warm_gpu7_gbps&measured_gbps=1");
    assert_eq!(status, 404, "{e}");
    let known: Vec<&str> = e["known_paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        known.contains(&"warm_gpu0_gbps") && !known.contains(&"warm_gpu0_cross_numa_penalty_gbps")
    );

    for bad in [
        "path=warm_gpu0_gbps&measured_gbps=-1",
        "path=warm_gpu0_gbps&measured_gbps=NaN",
        "path=warm_gpu0_gbps&measured_gbps=inf",
        "path=warm_gpu0_gbps&measured_gbps=fast",
        "path=warm_gpu0_gbps&measured_gbps=",
        "path=warm_gpu0_gbps",
        "measured_gbps=3",
        "path=&measured_gbps=3",
        "path=warm_gpu0_cross_numa_penalty_gbps&measured_gbps=3",
    ] {
        let (status, e) = d.json(&format!("/v1/efficiency?{bad}"));
        assert_eq!(status, 400, "{bad}: {e}");
        assert!(
            e["error"].as_str().is_some_and(|s| !s.is_empty()),
            "{bad}: {e}"
        );
    }
}

/// A complete profile of node1 with NVMe drives of these serials; with `write_gbps`, a write
/// run's, on the first drive.
fn nvme_yaml(finished_at: &str, serials: &[&str], write_gbps: Option<f64>) -> String {
    let p = hwc_testkit::ceilings_profile("node1", finished_at, &[("warm_gpu0_peak_gbps", 55.0)]);
    hwc_profile::to_yaml(&hwc_testkit::with_nvme(p, serials, write_gbps)).unwrap()
}

#[test]
fn the_newest_complete_profile_is_served_as_its_file_holds_it_and_nothing_beside_it() {
    let d = Daemon::tcp(|dir, _| {
        write_profile(
            dir,
            DAY1,
            &nvme_yaml("2026-11-28T10:00:00+00:00", &["S1", "S2"], Some(5.2)),
        );
        write_profile(
            dir,
            DAY2,
            &nvme_yaml("2026-11-29T10:00:00+00:00", &["S1", "S2"], None),
        );
    });
    let (_, h) = d.json("/healthz");
    assert_eq!(h["profile"]["file"], DAY2, "{h}");
    // A read-only run: its file, its ceilings, none of the older write run's beside them.
    let text = std::fs::read_to_string(d.dir().join(DAY2)).unwrap();
    let file = hwc_profile::from_yaml(&text).unwrap();
    assert_eq!(d.get("/v1/profile?format=yaml").text(), text);
    let c = d.get("/v1/ceilings");
    assert_eq!(c.header("x-hwceiling-profile"), Some(DAY2));
    let map: serde_json::Value = serde_json::from_slice(&c.body).unwrap();
    assert_eq!(map, serde_json::json!(file.ceilings));
    let (status, e) = d.json("/v1/efficiency?path=nvme_raw_1drive_write_gbps&measured_gbps=2.6");
    assert_eq!(status, 404, "{e}");
    assert_eq!(
        e["error"],
        format!("unknown ceiling `nvme_raw_1drive_write_gbps` in {DAY2}"),
        "{e}"
    );
    assert!(!d.get("/metrics").text().contains("carried_from"));

    // `hwceiling merge` rewrites it with the write run's ceilings carried in: served as written.
    let older = hwc_profile::read_profile(&d.dir().join(DAY1)).unwrap();
    let (merged, _) = hwc_model::carry::merge(&file, &older, DAY1).unwrap();
    let text = hwc_profile::to_yaml(&merged).unwrap();
    let tmp = d.dir().join(".merged.tmp");
    std::fs::write(&tmp, &text).unwrap();
    std::fs::rename(&tmp, d.dir().join(DAY2)).unwrap();
    let map = d.wait_for("/v1/ceilings", |m| {
        m.get("nvme_raw_1drive_write_gbps").is_some()
    });
    assert_eq!(map, serde_json::json!(merged.ceilings));
    assert_eq!(d.get("/v1/profile?format=yaml").text(), text);
    let (status, e) = d.json("/v1/efficiency?path=nvme_raw_1drive_write_gbps&measured_gbps=2.6");
    assert_eq!(status, 200, "{e}");
    assert_eq!(
        (e["efficiency"].as_f64(), &e["profile"]["file"]),
        (Some(0.5), &DAY2.into()),
        "{e}"
    );
    let note = e["note"].as_str().unwrap();
    assert!(note.contains(&format!("carried from {DAY1}")), "{note}");
    let m = d.get("/metrics").text();
    let line = format!(
        r#"hwceiling_ceiling_gbps{{path="nvme_raw_1drive_write_gbps",drives="1",carried_from="{DAY1}"}} 5.2"#
    );
    assert!(m.lines().any(|l| l == line), "{m}");
}

#[test]
fn metrics_carry_one_labelled_gauge_per_ceiling_and_the_age() {
    let d = Daemon::tcp(with_day1);
    let r = client::request(
        &d.target,
        "GET",
        "/metrics",
        &[("Accept", PROMETHEUS_ACCEPT)],
        b"",
        TIMEOUT,
    )
    .unwrap();
    assert_eq!(r.status, 200);
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("application/openmetrics-text"));
    let m = r.text();
    for line in [
        r#"hwceiling_ceiling_gbps{path="warm_gpu0_peak_gbps",gpu="gpu0",numa="local"} 55.6"#,
        r#"hwceiling_ceiling_gbps{path="nvme_raw_4drive_read_gbps",drives="4"} 24.0"#,
        r#"hwceiling_ceiling_gbps{path="host_ram_same_numa_gbps",numa="local"} 34.7"#,
        r#"hwceiling_profile_loaded 1.0"#,
        r#"hwceiling_profile_reloads_total 1"#,
        r#"hwceiling_profile_run_active 0.0"#,
    ] {
        assert!(m.lines().any(|l| l == line), "missing `{line}` in\n{m}");
    }
    let age: f64 = m
        .lines()
        .find_map(|l| l.strip_prefix("hwceiling_profile_age_seconds "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(age > 86_400.0, "a profile finished on 2026-11-28: {age}");
    assert!(m.contains(
        r#"hwceiling_profile_info{file="hardware_profile_2026-11-28.yaml",hostname="node1""#
    ));
    assert!(m.ends_with("# EOF\n"));
}

#[test]
fn a_newer_profile_is_picked_up_and_a_broken_one_never_replaces_a_good_one() {
    let d = Daemon::tcp(with_day1);
    // A newer file that does not parse: logged, counted, the old profile stays.
    write_profile(d.dir(), DAY2, "schema_version: 1\nplatform: [oops\n");
    d.wait_for("/healthz", |h| h["last_load_error"].is_string());
    let (_, h) = d.json("/healthz");
    assert_eq!(h["profile"]["file"], DAY1);
    assert!(h["last_load_error"].as_str().unwrap().contains(DAY2), "{h}");
    assert!(d
        .get("/metrics")
        .text()
        .lines()
        .any(|l| l == "hwceiling_profile_reload_errors_total 1"));
    // A newer schema is refused the same way.
    write_profile(
        d.dir(),
        "hardware_profile_2026-11-29-2.yaml",
        "schema_version: 9\n",
    );
    d.wait_for("/healthz", |h| {
        h["last_load_error"]
            .as_str()
            .is_some_and(|e| e.contains("newer than this hwceiling reads"))
    });
    assert_eq!(d.json("/healthz").1["profile"]["file"], DAY1);
    // A good, newer one wins.
    write_profile(
        d.dir(),
        "hardware_profile_2026-11-29-3.yaml",
        &profile_yaml(
            "node2",
            "2026-11-29T12:00:00+00:00",
            &[("warm_gpu0_gbps", 50.0)],
        ),
    );
    let h = d.wait_for("/healthz", |h| {
        h["profile"]["file"] == "hardware_profile_2026-11-29-3.yaml"
    });
    assert_eq!(h["profile"]["hostname"], "node2");
    let (status, e) = d.json("/v1/efficiency?path=warm_gpu0_gbps&measured_gbps=25");
    assert_eq!((status, e["efficiency"].as_f64()), (200, Some(0.5)));
    // An older one appearing later is not newer.
    write_profile(
        d.dir(),
        "hardware_profile_2026-01-01.yaml",
        &profile_yaml("old", "2026-01-01T00:00:00+00:00", &[]),
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        d.json("/healthz").1["profile"]["file"],
        "hardware_profile_2026-11-29-3.yaml"
    );
}

/// A profile of a run that recorded these options (`quick: "true"` for `profile --quick`,
/// `paths: "h2d"` for `--paths h2d`), with one ceiling.
fn run_profile_yaml(options: &[(&str, &str)], gbps: f64) -> String {
    run_profile_yaml_at("2026-11-29T10:00:00+00:00", options, gbps)
}

/// `run_profile_yaml` of a run that finished at `finished_at`.
fn run_profile_yaml_at(finished_at: &str, options: &[(&str, &str)], gbps: f64) -> String {
    let p = hwc_testkit::ceilings_profile("node1", finished_at, &[("warm_gpu0_peak_gbps", gbps)]);
    hwc_profile::to_yaml(&hwc_testkit::with_options(p, options)).unwrap()
}

fn quick_profile_yaml(gbps: f64) -> String {
    run_profile_yaml(&[("quick", "true")], gbps)
}

#[test]
fn every_answer_says_when_the_profile_served_is_quick_or_a_newer_one_was_passed_over() {
    // Only a quick profile: served, and marked everywhere.
    let d = Daemon::tcp(|dir, _| {
        let quick = run_profile_yaml_at("2026-11-28T10:00:00+00:00", &[("quick", "true")], 40.0);
        write_profile(dir, DAY1, &quick)
    });
    let (_, h) = d.json("/healthz");
    let p = &h["profile"];
    assert_eq!(
        (&p["file"], &p["complete"], &p["quick"], &p["interrupted"]),
        (&DAY1.into(), &false.into(), &true.into(), &false.into()),
        "{h}"
    );
    assert_eq!(p["passed_over"], serde_json::Value::Null, "{h}");
    assert!(
        p["note"].as_str().unwrap().contains("no complete profile"),
        "{h}"
    );
    let c = d.get("/v1/ceilings");
    assert_eq!(c.header("x-hwceiling-profile"), Some(DAY1));
    assert_eq!(c.header("x-hwceiling-profile-incomplete"), Some("quick"));
    let m = d.get("/metrics").text();
    assert!(
        m.lines().any(|l| l == "hwceiling_profile_complete 0.0"),
        "{m}"
    );

    // A complete one replaces it.
    write_profile(
        d.dir(),
        DAY2,
        &profile_yaml(
            "node1",
            "2026-11-29T09:00:00+00:00",
            &[("warm_gpu0_peak_gbps", 55.0)],
        ),
    );
    let h = d.wait_for("/healthz", |h| h["profile"]["file"] == DAY2);
    assert_eq!(h["profile"]["complete"], true, "{h}");
    assert_eq!(h["profile"]["note"], serde_json::Value::Null, "{h}");

    // A newer quick one does not replace it, and is named wherever the profile is.
    let newer = "hardware_profile_2026-11-29-2.yaml";
    write_profile(d.dir(), newer, &quick_profile_yaml(40.0));
    let h = d.wait_for("/healthz", |h| h["profile"]["passed_over"].is_object());
    assert_eq!(h["profile"]["file"], DAY2, "{h}");
    assert_eq!(
        h["profile"]["passed_over"],
        serde_json::json!({"file": newer, "complete": false, "quick": true,
                           "interrupted": false, "failed_cases": 0, "narrowed": false,
                           "narrowed_by": []})
    );
    let note = h["profile"]["note"].as_str().unwrap();
    assert!(note.contains(newer) && note.contains("--quick"), "{note}");
    let (status, e) = d.json("/v1/efficiency?path=warm_gpu0_peak_gbps&measured_gbps=27.5");
    assert_eq!(
        (status, e["efficiency"].as_f64(), &e["profile"]["file"]),
        (200, Some(0.5), &DAY2.into()),
        "{e}"
    );
    assert_eq!(e["profile"]["passed_over"]["file"], newer, "{e}");
    let c = d.get("/v1/ceilings");
    assert_eq!(c.header("x-hwceiling-profile"), Some(DAY2));
    assert_eq!(c.header("x-hwceiling-profile-incomplete"), None);
    let passed = format!("{newer} (quick)");
    assert_eq!(
        c.header("x-hwceiling-profile-passed-over"),
        Some(passed.as_str())
    );
    let m = d.get("/metrics").text();
    for line in [
        "hwceiling_profile_complete 1.0".to_string(),
        format!(r#"hwceiling_profile_passed_over{{file="{newer}",reason="quick"}} 1.0"#),
    ] {
        assert!(m.lines().any(|l| l == line), "missing `{line}` in\n{m}");
    }

    // A newer run of some paths does not replace it either: its other ceilings would be lost.
    let narrowed = "hardware_profile_2026-11-29-3.yaml";
    write_profile(
        d.dir(),
        narrowed,
        &run_profile_yaml(&[("paths", "h2d")], 30.0),
    );
    let h = d.wait_for("/healthz", |h| {
        h["profile"]["passed_over"]["file"] == narrowed
    });
    assert_eq!(h["profile"]["file"], DAY2, "{h}");
    assert_eq!(
        h["profile"]["passed_over"],
        serde_json::json!({"file": narrowed, "complete": false, "quick": false,
                           "interrupted": false, "failed_cases": 0, "narrowed": true,
                           "narrowed_by": ["--paths h2d"]})
    );
    let note = h["profile"]["note"].as_str().unwrap();
    assert!(
        note.contains(&format!(
            "newer {narrowed} not served: a run narrowed by --paths h2d"
        )),
        "{note}"
    );
    let (_, e) = d.json("/v1/efficiency?path=warm_gpu0_peak_gbps&measured_gbps=27.5");
    assert_eq!(
        (e["efficiency"].as_f64(), &e["profile"]["file"]),
        (Some(0.5), &DAY2.into()),
        "{e}"
    );
    let passed = format!("{narrowed} (narrowed)");
    assert_eq!(
        d.get("/v1/ceilings")
            .header("x-hwceiling-profile-passed-over"),
        Some(passed.as_str())
    );
    let m = d.get("/metrics").text();
    let line =
        format!(r#"hwceiling_profile_passed_over{{file="{narrowed}",reason="narrowed"}} 1.0"#);
    assert!(m.lines().any(|l| l == line), "missing `{line}` in\n{m}");
}

#[test]
fn a_narrowed_profile_served_for_want_of_a_full_one_is_marked_narrowed() {
    let d = Daemon::tcp(|dir, _| {
        write_profile(
            dir,
            DAY1,
            &run_profile_yaml(&[("paths", "h2d"), ("quick", "true")], 40.0),
        )
    });
    let (_, h) = d.json("/healthz");
    let p = &h["profile"];
    assert_eq!(
        (&p["file"], &p["complete"], &p["quick"], &p["narrowed"]),
        (&DAY1.into(), &false.into(), &true.into(), &true.into()),
        "{h}"
    );
    assert_eq!(p["narrowed_by"], serde_json::json!(["--paths h2d"]), "{h}");
    let note = p["note"].as_str().unwrap();
    assert!(
        note.starts_with(&format!(
            "{DAY1} is a --quick run narrowed by --paths h2d, served"
        )),
        "{note}"
    );
    let c = d.get("/v1/profile");
    assert_eq!(
        c.header("x-hwceiling-profile-incomplete"),
        Some("quick,narrowed")
    );
    // A ceiling the narrowed run did not measure: the refusal says what the profile is too.
    let unknown = "/v1/efficiency?path=nvme_raw_1drive_read_gbps&measured_gbps=3";
    let (status, e) = d.json(unknown);
    assert_eq!(status, 404, "{e}");
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .ends_with(&format!("in {DAY1}, a --quick run narrowed by --paths h2d")),
        "{e}"
    );
    assert_eq!(
        e["profile"]["narrowed_by"],
        serde_json::json!(["--paths h2d"])
    );
    assert_eq!(
        d.get(unknown).header("x-hwceiling-profile-incomplete"),
        Some("quick,narrowed")
    );
    assert!(d
        .get("/metrics")
        .text()
        .lines()
        .any(|l| l == "hwceiling_profile_complete 0.0"));
}

#[test]
fn without_a_profile_the_daemon_still_answers() {
    let d = Daemon::tcp(|_, _| {});
    let (status, h) = d.json("/healthz");
    assert_eq!(
        (status, &h["status"], &h["profile"]),
        (200, &"ok".into(), &serde_json::Value::Null)
    );
    for p in [
        "/v1/profile",
        "/v1/ceilings",
        "/v1/efficiency?path=x&measured_gbps=1",
    ] {
        let (status, e) = d.json(p);
        assert_eq!(status, 503, "{p}");
        assert!(e["error"]
            .as_str()
            .unwrap()
            .contains("no profile loaded yet"));
    }
    assert!(d
        .get("/metrics")
        .text()
        .contains("hwceiling_profile_loaded 0.0"));
    // Then one appears.
    write_profile(
        d.dir(),
        DAY1,
        &profile_yaml("n", "2026-11-28T10:00:00+00:00", &[("warm_gpu0_gbps", 1.0)]),
    );
    d.wait_for("/healthz", |h| h["profile"]["file"] == DAY1);
}

#[test]
fn unknown_paths_methods_and_bodies_get_4xx() {
    let d = Daemon::tcp(with_day1);
    let (status, e) = d.json("/v2/anything");
    assert_eq!(status, 404);
    assert!(e["endpoints"].as_array().unwrap().len() >= 5);
    let r = d.send("POST", "/v1/ceilings", b"");
    assert_eq!(r.status, 405, "{}", r.text());
    let r = d.send("PUT", "/v1/profile/run", b"{}");
    assert_eq!(r.status, 405);
    let r = d.send("POST", "/v1/profile/run", b"{not json");
    assert_eq!(r.status, 400, "{}", r.text());
    let r = d.send("POST", "/v1/profile/run", br#"{"paths":["warp"]}"#);
    assert_eq!(r.status, 400);
    assert!(r.text().contains("unknown path `warp`"), "{}", r.text());
    let r = d.send("POST", "/v1/profile/run", br#"{"rm":"-rf"}"#);
    assert_eq!(r.status, 400, "{}", r.text());
    // Options `profile` refuses on its command line are refused here, before any run starts.
    for (body, needle) in [
        (&br#"{"threads":[0]}"#[..], "from 1 to 4096"),
        (br#"{"threads":[1,1]}"#, "`threads` lists 1 twice"),
        (
            br#"{"host_sizes":["4MiB","4096KiB"]}"#,
            "`host_sizes` lists 4MiB twice",
        ),
        (br#"{"host_sizes":["0"]}"#, "not a usable size"),
        (br#"{"paths":["h2d","h2d"]}"#, "`paths` lists h2d twice"),
        // Not an object: no options read from an array's order, no full run for `[]`.
        (b"[]", "a JSON object of options"),
        (
            br#"[["host_ram"],[1],["4MiB"],true]"#,
            "a JSON object of options",
        ),
        (b"7", "a JSON object of options"),
    ] {
        let r = d.send("POST", "/v1/profile/run", body);
        assert_eq!(r.status, 400, "{}", r.text());
        assert!(r.text().contains(needle), "{}", r.text());
    }
    let (_, run) = d.json("/v1/profile/run");
    assert_eq!(run["state"], "idle", "no run was started: {run}");
    let r = d.send("DELETE", "/v1/profile/run", b"");
    assert_eq!(r.status, 409, "nothing to cancel: {}", r.text());
    // Garbage on the wire: a 400 or a closed connection, and the daemon keeps answering.
    for junk in [
        &b"\x00\x01\x02garbage\r\n\r\n"[..],
        b"GET /healthz HTTP/9.9\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n",
        &[b'A'; 70_000][..],
    ] {
        let Target::Tcp(addr) = d.target else {
            unreachable!()
        };
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(TIMEOUT)).unwrap();
        let _ = s.write_all(junk);
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        let head = String::from_utf8_lossy(&buf);
        assert!(
            buf.is_empty() || head.starts_with("HTTP/1.1 4"),
            "{junk:?} → {head}"
        );
    }
    assert_eq!(d.json("/healthz").0, 200);
}

fn unix_socket_dir() -> tempfile::TempDir {
    // Socket paths are limited to about 100 bytes: keep them short.
    tempfile::Builder::new()
        .prefix("hwc")
        .tempdir_in("/tmp")
        .unwrap()
}

#[test]
fn the_unix_socket_is_0660_refuses_a_second_daemon_and_is_removed_at_exit() {
    let sockdir = unix_socket_dir();
    let sock = sockdir.path().join("run/hwceiling.sock");
    let d = Daemon::start(Bind::Unix(sock.clone()), with_day1);
    let meta = std::fs::symlink_metadata(&sock).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    let (status, e) = d.json("/v1/efficiency?path=host_ram_same_numa_gbps&measured_gbps=34.7");
    assert_eq!((status, e["efficiency"].as_f64()), (200, Some(1.0)));
    // A body over the limit: 413 (on a Unix socket the answer is never lost to a reset).
    let big = vec![b' '; 65 * 1024 + 1];
    let r = d.send("POST", "/v1/profile/run", &big);
    assert_eq!(r.status, 413, "{}", r.text());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let second = rt.block_on(async { hwc_daemon::bind_unix(&sock).map(|_| ()) });
    let e = second.unwrap_err().to_string();
    assert!(e.contains("in use by a running daemon"), "{e}");
    d.stop().0.unwrap();
    assert!(!sock.exists(), "socket removed at shutdown");
}

#[test]
fn a_stale_socket_is_replaced_and_other_files_are_not() {
    let sockdir = unix_socket_dir();
    let sock = sockdir.path().join("s.sock");
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists(), "a stale socket file left behind");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let l = hwc_daemon::bind_unix(&sock).unwrap();
        drop(l);
        let file = sockdir.path().join("plain");
        std::fs::write(&file, b"keep me").unwrap();
        let e = hwc_daemon::bind_unix(&file).unwrap_err().to_string();
        assert!(e.contains("not a socket"), "{e}");
        assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
    });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the query, the answer is a 2xx/4xx JSON document.
    #[test]
    fn any_efficiency_query_gets_a_json_answer(
        path in prop_oneof![Just("warm_gpu0_gbps".to_string()), "\\PC{0,40}"],
        measured in prop_oneof![Just("12.5".to_string()), "[-+0-9.eEnaiNf]{0,12}", "\\PC{0,20}"],
        extra in "[a-z=&%0-9]{0,20}",
    ) {
        thread_local! {
            static D: Daemon = Daemon::tcp(with_day1);
        }
        D.with(|d| {
            let q = format!("/v1/efficiency?path={}&measured_gbps={}&{extra}", hwc_daemon::client::encode_query_value(&path), hwc_daemon::client::encode_query_value(&measured));
            let r = d.get(&q);
            prop_assert!(matches!(r.status, 200 | 400 | 404), "{} {}", r.status, r.text());
            let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            prop_assert_eq!(r.status == 200, v.get("efficiency").is_some());
            Ok(())
        })?;
    }
}

#[test]
fn silent_clients_are_dropped_and_do_not_starve_others() {
    let d = Daemon::tcp(|dir, config| {
        with_day1(dir, config);
        config.max_connections = 2;
    });
    let Target::Tcp(addr) = d.target else {
        unreachable!()
    };
    // Two clients that connect and say nothing hold both slots…
    let silent: Vec<std::net::TcpStream> = (0..2)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    let t = std::time::Instant::now();
    // …until the header timeout (500 ms in these tests) closes them; then a request gets in.
    assert_eq!(d.json("/healthz").0, 200);
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    for mut s in silent {
        s.set_read_timeout(Some(TIMEOUT)).unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        let head = String::from_utf8_lossy(&buf);
        assert!(buf.is_empty() || head.starts_with("HTTP/1.1 408"), "{head}");
    }
}

/// Header lines for the fuzzed requests: the hostile ones of issue 32, then anything.
fn header_line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("Content-Type: text/plain".to_string()),
        Just("Content-Type: application/json".to_string()),
        Just("Origin: http://evil.example".to_string()),
        Just("Origin: null".to_string()),
        Just("Accept: application/json;q=0".to_string()),
        Just("Accept: application/yaml;q=0, */*;q=0.5".to_string()),
        Just("Accept: application/openmetrics-text".to_string()),
        Just("Transfer-Encoding: chunked".to_string()),
        Just("Expect: 100-continue".to_string()),
        "[!-9;-~]{1,20}: [ -~]{0,40}",
    ]
}

/// Cases a fuzzing proptest runs: a few seconds' worth in CI, `HWC_FUZZ_CASES` for long local
/// runs.
fn fuzz_cases(default: u32) -> u32 {
    std::env::var("HWC_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(fuzz_cases(96)))]

    /// The HTTP request path, fuzzed over a real socket: arbitrary methods, targets, queries,
    /// `Host`s, headers and bodies, seeded with the hostile cases of issue 32 (a repeated query
    /// parameter, a duplicated JSON key, `text/plain` POSTs, a foreign `Origin` or `Host`,
    /// `q=0`, a body shorter than its `Content-Length`). Every request gets an answer (no panic
    /// drops a connection), never a 5xx; every error is JSON `{"error": …}`; the daemon keeps
    /// answering.
    #[test]
    fn arbitrary_requests_get_an_answer_every_error_json_never_a_5xx(
        method in prop_oneof![
            Just("GET".to_string()),
            Just("POST".to_string()),
            Just("DELETE".to_string()),
            Just("HEAD".to_string()),
            "[A-Z]{1,8}",
        ],
        path in prop_oneof![
            Just("/v1/profile/run".to_string()),
            Just("/v1/efficiency?path=warm_gpu0_gbps&measured_gbps=1".to_string()),
            Just("/v1/efficiency?path=warm_gpu0_gbps&measured_gbps=1&measured_gbps=2".to_string()),
            Just("/v1/profile?format=json&format=yaml".to_string()),
            Just("/v1/profile".to_string()),
            Just("/metrics".to_string()),
            "/[!-~]{0,60}",
            "[ -~]{0,20}",
        ],
        host in prop_oneof![
            Just("localhost".to_string()),
            Just("127.0.0.1".to_string()),
            Just("evil.example".to_string()),
            "[ -~]{0,20}",
        ],
        headers in proptest::collection::vec(header_line(), 0..4),
        body in prop_oneof![
            Just(br#"{"paths":["h2d"],"quick":true,"quick":false}"#.to_vec()),
            Just(br#"{"paths":["warp"]}"#.to_vec()),
            Just(b"[[\"host_ram\"],[1]]".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..200),
        ],
        declared in prop_oneof![Just(None), (0usize..400).prop_map(Some)],
    ) {
        thread_local! {
            static D: Daemon = Daemon::tcp(with_day1);
        }
        D.with(|d| {
            let addr = tcp_addr(d);
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(TIMEOUT)).unwrap();
            let len = declared.unwrap_or(body.len());
            let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n");
            for h in &headers {
                head.push_str(h);
                head.push_str("\r\n");
            }
            head.push_str(&format!("Connection: close\r\nContent-Length: {len}\r\n\r\n"));
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
            let _ = s.shutdown(std::net::Shutdown::Write);
            let mut buf = Vec::new();
            let _ = s.read_to_end(&mut buf);
            let text = String::from_utf8_lossy(&buf);
            let what = format!("{head:?} {:?}", String::from_utf8_lossy(&body));
            let status: Option<u16> = text
                .strip_prefix("HTTP/1.1 ")
                .and_then(|t| t.get(..3)?.parse().ok());
            prop_assert!(status.is_some_and(|s| s < 500), "{what} → {text}");
            // A HEAD answer has no body (its Content-Length is the GET's).
            if status.is_some_and(|s| s >= 400) && method != "HEAD" {
                let error = client::parse_response(&buf)
                    .ok()
                    .and_then(|r| serde_json::from_slice::<serde_json::Value>(&r.body).ok())
                    .is_some_and(|v| v["error"].is_string());
                prop_assert!(error, "{what} → {text}");
            }
            prop_assert_eq!(d.json("/healthz").0, 200);
            Ok(())
        })?;
    }
}

/// Send `request` as it is (headers and all) and read the answer.
fn raw(target: &Target, request: &[u8]) -> client::Response {
    let mut buf = Vec::new();
    match target {
        Target::Tcp(a) => {
            let mut s = std::net::TcpStream::connect(a).unwrap();
            s.set_read_timeout(Some(TIMEOUT)).unwrap();
            s.write_all(request).unwrap();
            s.read_to_end(&mut buf).unwrap();
        }
        Target::Unix(p) => {
            let mut s = std::os::unix::net::UnixStream::connect(p).unwrap();
            s.set_read_timeout(Some(TIMEOUT)).unwrap();
            s.write_all(request).unwrap();
            s.read_to_end(&mut buf).unwrap();
        }
    }
    client::parse_response(&buf)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&buf)))
}

/// `GET path` with these header lines (no `Host` unless given).
fn get_with(target: &Target, path: &str, headers: &[&str]) -> client::Response {
    let mut req = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    raw(target, req.as_bytes())
}

/// The `error` of a JSON error answer (and that it is one).
fn json_error(r: &client::Response) -> String {
    assert_eq!(r.header("content-type"), Some("application/json"), "{r:?}");
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    v["error"].as_str().unwrap().to_string()
}

fn tcp_addr(d: &Daemon) -> std::net::SocketAddr {
    match d.target {
        Target::Tcp(a) => a,
        Target::Unix(_) => unreachable!(),
    }
}

/// Connect and send a request's headers that promise 100 bytes of body, then one byte.
fn stalled_body(addr: std::net::SocketAddr) -> std::net::TcpStream {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(
        b"POST /v1/profile/run HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    )
    .unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s
}

fn answer_of(mut s: std::net::TcpStream) -> client::Response {
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    client::parse_response(&buf)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&buf)))
}

#[test]
fn clients_stalled_in_their_body_get_408_and_do_not_hold_their_connections() {
    let d = Daemon::tcp(|dir, config| {
        with_day1(dir, config);
        config.max_connections = 8;
    });
    let addr = tcp_addr(&d);
    let stalled: Vec<_> = (0..10).map(|_| stalled_body(addr)).collect();
    std::thread::sleep(Duration::from_millis(100));
    // Ten stalled bodies on eight connections: a request still gets in, once the body deadline
    // (the header timeout, 500 ms in these tests) has closed them.
    let t = std::time::Instant::now();
    assert_eq!(d.json("/healthz").0, 200);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    for s in stalled {
        let r = answer_of(s);
        assert_eq!(r.status, 408, "{}", r.text());
        assert!(json_error(&r).contains("did not arrive"), "{}", r.text());
        assert_eq!(r.header("connection"), Some("close"));
    }
}

#[test]
fn shutdown_does_not_wait_for_clients_stalled_in_their_body() {
    let d = Daemon::tcp(|dir, config| {
        with_day1(dir, config);
        config.header_read_timeout = Duration::from_secs(60);
    });
    let addr = tcp_addr(&d);
    let stalled: Vec<_> = (0..3).map(|_| stalled_body(addr)).collect();
    std::thread::sleep(Duration::from_millis(200));
    let t = std::time::Instant::now();
    d.stop().0.unwrap();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    for s in stalled {
        let r = answer_of(s);
        assert_eq!(r.status, 503, "{}", r.text());
        assert!(json_error(&r).contains("shutting down"));
    }
}

#[test]
fn a_post_without_a_json_content_type_is_refused_with_415() {
    let d = Daemon::tcp(with_day1);
    let post = |content_type: Option<&str>, body: &str| {
        let mut req = format!(
            "POST /v1/profile/run HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        if let Some(t) = content_type {
            req.push_str(&format!("Content-Type: {t}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        raw(&d.target, req.as_bytes())
    };
    // What a web page can send without a CORS preflight.
    for t in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let r = post(t, "{}");
        assert_eq!(r.status, 415, "{t:?}: {}", r.text());
        assert!(json_error(&r).contains("Content-Type: application/json"));
    }
    // JSON passes (and is then read: this one is refused for its option).
    let r = post(
        Some("Application/JSON; charset=utf-8"),
        r#"{"paths":["warp"]}"#,
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(json_error(&r).contains("unknown path `warp`"));
    assert_eq!(d.json("/v1/profile/run").1["state"], "idle");
}

#[test]
fn a_request_from_another_origin_is_refused_with_403() {
    let d = Daemon::tcp(with_day1);
    let host = format!("Host: {}", tcp_addr(&d));
    for origin in ["http://evil.example", "null", "https://localhost"] {
        let r = get_with(
            &d.target,
            "/v1/profile",
            &[&host, &format!("Origin: {origin}")],
        );
        assert_eq!(r.status, 403, "{origin}: {}", r.text());
        assert!(json_error(&r).contains("Origin"), "{}", r.text());
    }
    let r = raw(
        &d.target,
        format!("POST /v1/profile/run HTTP/1.1\r\n{host}\r\nOrigin: http://evil.example\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}").as_bytes(),
    );
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(d.json("/v1/profile/run").1["state"], "idle");
    // Its own origin passes.
    let own = format!("Origin: http://{}", tcp_addr(&d));
    assert_eq!(get_with(&d.target, "/healthz", &[&host, &own]).status, 200);
}

#[test]
fn a_host_that_is_not_loopback_or_the_listen_name_is_refused_with_403() {
    let d = Daemon::tcp(|dir, config| {
        with_day1(dir, config);
        config.host_names = vec!["node1.example".into()];
    });
    let port = tcp_addr(&d).port();
    for host in [
        "evil.example",
        "evil.example:80",
        "localhost.evil.example",
        "192.0.2.1",
    ] {
        let r = get_with(&d.target, "/v1/profile", &[&format!("Host: {host}")]);
        assert_eq!(r.status, 403, "{host}: {}", r.text());
        assert!(
            json_error(&r).contains(&format!("Host `{host}`")),
            "{}",
            r.text()
        );
    }
    for host in [
        format!("localhost:{port}"),
        "127.0.0.1".into(),
        format!("127.0.0.1:{port}"),
        "[::1]".into(),
        "node1.example".into(),
    ] {
        let r = get_with(&d.target, "/v1/profile", &[&format!("Host: {host}")]);
        assert_eq!(r.status, 200, "{host}: {}", r.text());
    }
    // No Host at all (HTTP/1.0 style) is not a browser's.
    assert_eq!(get_with(&d.target, "/healthz", &[]).status, 200);
}

#[test]
fn on_the_unix_socket_origin_and_content_type_are_checked_but_not_host() {
    let sockdir = unix_socket_dir();
    let d = Daemon::start(Bind::Unix(sockdir.path().join("s.sock")), with_day1);
    let r = get_with(&d.target, "/healthz", &["Host: anything.example"]);
    assert_eq!(r.status, 200, "{}", r.text());
    let r = get_with(
        &d.target,
        "/healthz",
        &["Host: localhost", "Origin: http://localhost"],
    );
    assert_eq!(r.status, 403, "a socket has no origin: {}", r.text());
    let r = raw(
        &d.target,
        b"POST /v1/profile/run HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
    );
    assert_eq!(r.status, 415, "{}", r.text());
}

#[test]
fn a_load_error_is_forgotten_once_its_file_is_gone() {
    let d = Daemon::tcp(with_day1);
    write_profile(d.dir(), DAY2, "schema_version: 1\nplatform: [oops\n");
    d.wait_for("/healthz", |h| h["last_load_error"].is_string());
    std::fs::remove_file(d.dir().join(DAY2)).unwrap();
    let h = d.wait_for("/healthz", |h| h["last_load_error"].is_null());
    assert_eq!(h["profile"]["file"], DAY1);
}

#[test]
fn the_profile_served_is_the_newest_by_its_recorded_time_not_its_file_name() {
    let d = Daemon::tcp(with_day1);
    // Copied in under a newer date, of a run that finished before DAY1's.
    let copied = "hardware_profile_2026-12-06.yaml";
    write_profile(
        d.dir(),
        copied,
        &profile_yaml(
            "node1",
            "2026-11-01T10:00:00+00:00",
            &[("warm_gpu0_gbps", 1.0)],
        ),
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(d.json("/healthz").1["profile"]["file"], DAY1);
    // A run that finished later is served, whatever its name.
    let later = "hardware_profile_2026-01-01.yaml";
    write_profile(
        d.dir(),
        later,
        &profile_yaml(
            "node1",
            "2026-11-30T10:00:00+00:00",
            &[("warm_gpu0_gbps", 2.0)],
        ),
    );
    d.wait_for("/healthz", |h| h["profile"]["file"] == later);
}

#[test]
fn a_profile_of_another_host_is_not_served() {
    let d = Daemon::tcp(|dir, config| {
        with_day1(dir, config);
        config.hostname = Some("node1".into());
    });
    write_profile(
        d.dir(),
        DAY2,
        &profile_yaml(
            "node9",
            "2026-11-29T10:00:00+00:00",
            &[("warm_gpu0_gbps", 1.0)],
        ),
    );
    let h = d.wait_for("/healthz", |h| h["last_load_error"].is_string());
    let e = h["last_load_error"].as_str().unwrap();
    assert!(
        e.contains(DAY2) && e.contains("host `node9`, not of this machine (`node1`)"),
        "{e}"
    );
    assert_eq!(h["profile"]["file"], DAY1);
    assert_eq!(
        d.json("/v1/efficiency?path=warm_gpu0_gbps&measured_gbps=1")
            .1["profile"]["file"],
        DAY1
    );
}

#[test]
fn a_repeated_query_parameter_or_json_key_is_refused_by_name() {
    let d = Daemon::tcp(with_day1);
    let (status, e) = d.json("/v1/efficiency?path=warm_gpu0_gbps&measured_gbps=1&measured_gbps=2");
    assert_eq!(status, 400, "{e}");
    assert!(e["error"]
        .as_str()
        .unwrap()
        .contains("`measured_gbps` is given more than once"));
    let (status, e) = d.json("/v1/profile?format=json&format=yaml");
    assert_eq!(status, 400, "{e}");
    assert!(e["error"].as_str().unwrap().contains("`format`"));
    let r = d.send(
        "POST",
        "/v1/profile/run",
        br#"{"paths":["h2d"],"quick":true,"quick":false}"#,
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        json_error(&r).contains("duplicate field `quick`"),
        "{}",
        r.text()
    );
    assert_eq!(d.json("/v1/profile/run").1["state"], "idle");
}

#[test]
fn accept_q_values_are_honoured_and_nothing_acceptable_is_406() {
    let d = Daemon::tcp(with_day1);
    let host = "Host: localhost";
    let kind = |accept: &str| {
        let r = get_with(
            &d.target,
            "/v1/profile",
            &[host, &format!("Accept: {accept}")],
        );
        (r.status, r.header("content-type").map(str::to_string))
    };
    let json = Some("application/json".to_string());
    let yaml = Some("application/yaml".to_string());
    assert_eq!(kind("application/json;q=0"), (406, json.clone()));
    assert_eq!(
        kind("application/json; q=0, */*;q=0.1"),
        (200, yaml.clone())
    );
    assert_eq!(
        kind("application/yaml;q=0.5, application/json"),
        (200, json.clone())
    );
    assert_eq!(
        kind("application/json;q=0.4, text/yaml;q=0.6"),
        (200, yaml.clone())
    );
    assert_eq!(kind("*/*;q=0"), (406, json.clone()));
    assert_eq!(kind("application/*"), (200, yaml));
    assert_eq!(kind("text/html, application/json;q=0.9"), (200, json));
    let r = get_with(
        &d.target,
        "/v1/profile",
        &[host, "Accept: application/json;q=0"],
    );
    assert!(json_error(&r).contains("cannot answer"), "{}", r.text());
}

#[test]
fn errors_hyper_answers_itself_are_json_too() {
    let d = Daemon::tcp(with_day1);
    let long = format!(
        "GET /v1/efficiency?path={} HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "a".repeat(70_000)
    );
    let many: String = (0..150).map(|i| format!("X-{i}: y\r\n")).collect();
    let many = format!("GET /healthz HTTP/1.1\r\nHost: localhost\r\n{many}\r\n");
    for (req, status, needle) in [
        (long.as_bytes(), 414, "over 65534 bytes"),
        (many.as_bytes(), 431, "at most 100 fields"),
        (
            &b"GET /healthz HTTP/9.9\r\n\r\n"[..],
            400,
            "malformed request",
        ),
        (
            &b"\x00\x01\x02garbage\r\n\r\n"[..],
            400,
            "malformed request",
        ),
        (
            &b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n"[..],
            400,
            "malformed request",
        ),
    ] {
        let r = raw(&d.target, req);
        assert_eq!(r.status, status, "{}", r.text());
        assert!(json_error(&r).contains(needle), "{}", r.text());
    }
    // Over the body limit, on TCP: 413, JSON.
    let big = vec![b' '; 65 * 1024 + 1];
    let r = d.send("POST", "/v1/profile/run", &big);
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(json_error(&r).contains("max_body_bytes"));
    assert_eq!(d.json("/healthz").0, 200);
}

/// The rules `promtool check metrics` (promlint) applies to the Prometheus text format: every
/// family has one HELP and one TYPE, before its samples, named as the samples are; a counter's
/// name ends in `_total`, no other's does; no type in a name; no camelCase or colons; units in
/// base units, not abbreviated.
fn promtool_problems(text: &str) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut problems = Vec::new();
    let mut help: BTreeSet<&str> = BTreeSet::new();
    let mut types: BTreeMap<&str, &str> = BTreeMap::new();
    let prefixes = [
        "pico", "nano", "micro", "milli", "centi", "deci", "deca", "hecto", "kilo", "kibi", "mega",
        "mebi", "giga", "gibi", "tera", "tebi", "peta", "pebi",
    ];
    let units = [
        "seconds", "bytes", "meters", "grams", "joules", "volts", "amperes", "celsius",
    ];
    let abbreviations = [
        "s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d",
    ];
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or("");
            if !help.insert(name) {
                problems.push(format!("second HELP for {name}"));
            }
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            if types.insert(name, kind).is_some() {
                problems.push(format!("second TYPE for {name}"));
            }
            if !help.contains(name) {
                problems.push(format!("{name}: no help text"));
            }
            if kind == "counter" && !name.ends_with("_total") {
                problems.push(format!(
                    "{name}: counter metrics should have \"_total\" suffix"
                ));
            }
            if kind != "counter" && name.ends_with("_total") {
                problems.push(format!(
                    "{name}: non-counter metrics should not have \"_total\" suffix"
                ));
            }
            let tokens: Vec<&str> = name.split('_').collect();
            for t in &tokens {
                if ["gauge", "counter", "summary", "histogram"].contains(t) {
                    problems.push(format!("{name}: metric name should not include type '{t}'"));
                }
                if abbreviations.contains(t) {
                    problems.push(format!(
                        "{name}: metric names should not contain abbreviated units"
                    ));
                }
                if *t == "percent" {
                    problems.push(format!(
                        "{name}: use base unit \"ratio\" instead of \"percent\""
                    ));
                }
                for p in prefixes {
                    if units.iter().any(|u| *t == format!("{p}{u}")) {
                        problems.push(format!("{name}: use base unit instead of \"{t}\""));
                    }
                }
            }
            if name.contains(':') || name.chars().any(|c| c.is_ascii_uppercase()) {
                problems.push(format!("{name}: colons or camelCase"));
            }
        } else if line.starts_with('#') {
            problems.push(format!("not a HELP or TYPE line: {line}"));
        } else if !line.is_empty() {
            let name = line.split(['{', ' ']).next().unwrap_or("");
            if !types.contains_key(name) {
                problems.push(format!(
                    "{name}: a sample of no family (its TYPE names another)"
                ));
            }
        }
    }
    problems
}

#[test]
fn metrics_pass_promtools_checks_in_base_units_with_the_old_names_deprecated() {
    let d = Daemon::tcp(|dir, _| {
        let mut p = hwc_testkit::ceilings_profile(
            "node1",
            "2026-11-28T10:00:00+00:00",
            &[
                ("warm_gpu0_peak_gbps", 55.5),
                ("warm_gpu0_cross_numa_penalty_pct", 12.5),
            ],
        );
        p.measurements.push(hwc_testkit::h2d_measurement(
            "h2d/cuda-copy/gpu0/local/256MiB/s1",
            55.5,
            2.5,
            20,
        ));
        write_profile(dir, DAY1, &hwc_profile::to_yaml(&p).unwrap());
    });
    // What `curl URL | promtool check metrics` sends; and no Accept at all.
    for headers in [
        &["Host: localhost", "Accept: */*"][..],
        &["Host: localhost"],
    ] {
        let r = get_with(&d.target, "/metrics", headers);
        assert_eq!(r.status, 200);
        assert_eq!(
            r.header("content-type"),
            Some("text/plain; version=0.0.4; charset=utf-8")
        );
        let m = r.text();
        assert_eq!(promtool_problems(&m), Vec::<String>::new(), "{m}");
        for line in [
            "# HELP hwceiling_profile_reloads_total Profiles loaded since the daemon started.",
            "# TYPE hwceiling_profile_reloads_total counter",
            "hwceiling_profile_reloads_total 1",
            r#"hwceiling_ceiling_bytes_per_second{path="warm_gpu0_peak_gbps",gpu="gpu0",numa="local"} 55500000000.0"#,
            r#"hwceiling_ceiling_gbps{path="warm_gpu0_peak_gbps",gpu="gpu0",numa="local"} 55.5"#,
            r#"hwceiling_ceiling_ratio{path="warm_gpu0_cross_numa_penalty_pct",gpu="gpu0",numa="cross"} 0.125"#,
            r#"hwceiling_ceiling_pct{path="warm_gpu0_cross_numa_penalty_pct",gpu="gpu0",numa="cross"} 12.5"#,
            r#"hwceiling_ceiling_source_spread_ratio{path="warm_gpu0_peak_gbps",measurement="h2d/cuda-copy/gpu0/local/256MiB/s1"} 0.025"#,
        ] {
            assert!(m.lines().any(|l| l == line), "missing `{line}` in\n{m}");
        }
        for old in [
            "hwceiling_ceiling_gbps",
            "hwceiling_ceiling_pct",
            "hwceiling_ceiling_source_spread_pct",
        ] {
            assert!(
                m.lines()
                    .any(|l| l.starts_with(&format!("# HELP {old} Deprecated"))),
                "{old}: {m}"
            );
        }
        promtool_check(&m);
    }
}

/// `promtool check metrics` itself, where it is installed (CI installs Debian's `prometheus`;
/// elsewhere this says it skipped).
fn promtool_check(metrics: &str) {
    use std::io::Write;
    let spawned = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let Ok(mut child) = spawned else {
        println!("SKIPPED promtool check: promtool is not installed (Debian package prometheus)");
        return;
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n{metrics}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
