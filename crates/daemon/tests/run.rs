//! `POST /v1/profile/run` with a stand-in for `hwceiling profile` (a shell script that behaves
//! like it: a running record, a profile written atomically, exit 130 after SIGTERM).

mod common;
use common::{profile_yaml, Daemon};
use std::path::Path;
use std::time::{Duration, Instant};

/// `$2` is the run's configuration, in the output folder, and `$4` the result file
/// (`--run-config FILE --result-file FILE`). The run waits for a `go` file.
const FAKE_PROFILE: &str = r#"
dir="$(dirname "$2")"
result="$4"
cp "$2" "$dir/config.json"
trap 'echo "$@" > "$dir/stopped"; exit 130' TERM
printf '{"plan":{"cases":[1,2,3]},"results":[{"measurement":{"key":"host_ram/host-memcpy/n0-n0/1MiB/t1"}}],"failures":[],"waived":[]}' > "$dir/hardware_raw_2026-11-30.partial.json"
while [ ! -e "$dir/go" ]; do sleep 0.02; done
cp "$dir/next.yaml" "$dir/.tmp-profile"
ln "$dir/.tmp-profile" "$dir/hardware_profile_2026-11-30.yaml"
rm -f "$dir/.tmp-profile" "$dir/hardware_raw_2026-11-30.partial.json"
echo "1 measured, 0 waived, 0 failed"
printf '{"profile":"%s","report":"r.md","raw":"r.json","interrupted":false}' "$dir/hardware_profile_2026-11-30.yaml" > "$result"
"#;

fn fake(script: &'static str) -> impl FnOnce(&Path, &mut hwc_daemon::Config) {
    move |dir, config| {
        std::fs::write(
            dir.join("next.yaml"),
            profile_yaml(
                "fresh",
                "2026-11-30T08:00:00+00:00",
                &[("warm_gpu0_gbps", 50.0)],
            ),
        )
        .unwrap();
        config.run.program = "/bin/sh".into();
        config.run.args = vec!["-c".into(), script.into(), "fake-hwceiling".into()];
        config.run.grace = Duration::from_secs(5);
    }
}

#[test]
fn one_run_at_a_time_with_progress_then_its_profile_is_served() {
    let d = Daemon::tcp(fake(FAKE_PROFILE));
    assert_eq!(d.json("/v1/profile/run").1["state"], "idle");
    let r = d.send(
        "POST",
        "/v1/profile/run",
        br#"{"paths":["host_ram"],"quick":true}"#,
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let started: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(started["state"], "running");
    assert_eq!(started["request"]["paths"][0], "host_ram");
    // Its profile will not replace a full one, and the answer says so.
    let note = started["note"].as_str().unwrap_or_default();
    assert!(
        note.starts_with("a --quick run narrowed by --paths host_ram: its profile will not"),
        "{started}"
    );

    let busy = d.send("POST", "/v1/profile/run", b"");
    assert_eq!(busy.status, 409, "{}", busy.text());
    assert!(busy.text().contains("already in progress"));

    let v = d.wait_for("/v1/profile/run", |v| v["progress"].is_object());
    assert_eq!(v["progress"]["cases_done"], 1);
    assert_eq!(v["progress"]["cases_total"], 3);
    assert_eq!(
        v["progress"]["last_case"],
        "host_ram/host-memcpy/n0-n0/1MiB/t1"
    );
    assert!(d
        .get("/metrics")
        .text()
        .lines()
        .any(|l| l == "hwceiling_profile_run_active 1.0"));

    std::fs::write(d.dir().join("go"), b"").unwrap();
    let v = d.wait_for("/v1/profile/run", |v| v["state"] == "finished");
    assert_eq!(v["outcome"], "completed", "{v}");
    assert_eq!(v["exit_code"], 0);
    assert!(v["profile"]
        .as_str()
        .unwrap()
        .ends_with("hardware_profile_2026-11-30.yaml"));
    assert!(
        !d.dir().join(".hwceiling-run-1.json").exists(),
        "the result file is removed once read"
    );
    // The watcher serves what the run wrote.
    d.wait_for("/healthz", |h| h["profile"]["hostname"] == "fresh");
    // And a new run may start.
    std::fs::remove_file(d.dir().join("go")).unwrap();
    let r = d.send("POST", "/v1/profile/run", b"{}");
    assert_eq!(r.status, 202, "{}", r.text());
    // Once it runs (its SIGTERM handler is set), a stop is clean.
    d.wait_for("/v1/profile/run", |v| v["progress"].is_object());
    let r = d.send("DELETE", "/v1/profile/run", b"");
    assert_eq!(r.status, 202, "{}", r.text());
    let v = d.wait_for("/v1/profile/run", |v| v["state"] == "finished");
    assert_eq!(v["outcome"], "interrupted", "{v}");
    assert_eq!(v["id"], 2);
}

#[test]
fn arguments_reach_the_profile_command() {
    let d = Daemon::tcp(fake(FAKE_PROFILE));
    let r = d.send(
        "POST",
        "/v1/profile/run",
        br#"{"paths":["host_ram"],"threads":[1,2],"host_sizes":["1MiB"],"allow_contended":true}"#,
    );
    assert_eq!(r.status, 202, "{}", r.text());
    d.wait_for("/v1/profile/run", |v| v["progress"].is_object());
    assert_eq!(d.send("DELETE", "/v1/profile/run", b"").status, 202);
    d.wait_for("/v1/profile/run", |v| v["state"] == "finished");
    let argv = std::fs::read_to_string(d.dir().join("stopped")).unwrap();
    let dir = d.dir().display().to_string();
    assert_eq!(
        argv.trim(),
        format!("--run-config {dir}/.hwceiling-run-1.config.json --result-file {dir}/.hwceiling-run-1.json")
    );
    // The run the child was given, typed.
    let config: hwc_model::RunConfig =
        serde_json::from_slice(&std::fs::read(d.dir().join("config.json")).unwrap()).unwrap();
    let mut want = hwc_model::RunConfig::new(d.dir());
    want.paths = Some(vec![hwc_model::PathId::HostRam]);
    want.threads = Some(vec![1, 2]);
    want.host_sizes = Some(vec![1 << 20]);
    want.allow_contended = true;
    assert_eq!(config, want);
    assert!(
        !d.dir().join(".hwceiling-run-1.config.json").exists(),
        "the configuration is removed once the run has exited"
    );
}

#[test]
fn shutdown_stops_the_run_cleanly_before_returning() {
    let d = Daemon::tcp(fake(FAKE_PROFILE));
    assert_eq!(d.send("POST", "/v1/profile/run", b"").status, 202);
    d.wait_for("/v1/profile/run", |v| v["progress"].is_object());
    let t = Instant::now();
    let (result, dir) = d.stop();
    result.unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "SIGTERM, not the grace timeout"
    );
    let argv = std::fs::read_to_string(dir.path().join("stopped")).unwrap();
    assert!(
        argv.starts_with("--run-config"),
        "the run got SIGTERM: {argv}"
    );
    assert!(
        !dir.path().join("hardware_profile_2026-11-30.yaml").exists(),
        "a stopped run writes no profile of its own here"
    );
}

#[test]
fn a_run_that_ignores_sigterm_is_killed_after_the_grace_period() {
    const STUBBORN: &str = r#"
trap '' TERM
printf '{"plan":{"cases":[1]},"results":[],"failures":[],"waived":[]}' > "$(dirname "$2")/hardware_raw_2026-11-30.partial.json"
while :; do sleep 0.02; done
"#;
    let d = Daemon::tcp(|dir, config| {
        fake(STUBBORN)(dir, config);
        config.run.grace = Duration::from_millis(300);
    });
    assert_eq!(d.send("POST", "/v1/profile/run", b"").status, 202);
    d.wait_for("/v1/profile/run", |v| v["progress"].is_object());
    assert_eq!(d.send("DELETE", "/v1/profile/run", b"").status, 202);
    let (_, v) = d.json("/v1/profile/run");
    assert_eq!(v["cancelling"], true, "{v}");
    let v = d.wait_for("/v1/profile/run", |v| v["state"] == "finished");
    assert_eq!(v["outcome"], "killed", "{v}");
}

#[test]
fn a_program_that_cannot_start_is_a_500_and_leaves_the_daemon_idle() {
    let d = Daemon::tcp(|_, config| {
        config.run.program = "/nonexistent/hwceiling".into();
    });
    let r = d.send("POST", "/v1/profile/run", b"");
    assert_eq!(r.status, 500, "{}", r.text());
    assert!(r.text().contains("cannot start /nonexistent/hwceiling"));
    assert_eq!(d.json("/v1/profile/run").1["state"], "idle");
}

#[test]
fn a_failing_run_reports_its_last_error_line() {
    const FAILS: &str =
        r#"echo "hwceiling: error: output folder $(dirname $2) is not writable" >&2; exit 1"#;
    let d = Daemon::tcp(fake(FAILS));
    assert_eq!(d.send("POST", "/v1/profile/run", b"").status, 202);
    let v = d.wait_for("/v1/profile/run", |v| v["state"] == "finished");
    assert_eq!(
        (v["outcome"].as_str(), v["exit_code"].as_i64()),
        (Some("failed"), Some(1))
    );
    assert!(
        v["error"].as_str().unwrap().contains("is not writable"),
        "{v}"
    );
}
