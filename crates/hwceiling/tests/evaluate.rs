//! End-to-end: `compare`, `qualify`, `efficiency` and `serve` through the real binary, and
//! hostile files given to every command that reads one.

use hwc_daemon::client::{self, Target};
use hwc_model::Profile;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hwceiling"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run hwceiling")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn one_line_error(o: &Output, code: i32, needle: &str) {
    assert_eq!(o.status.code(), Some(code), "stderr: {}", stderr(o));
    let e = stderr(o);
    assert_eq!(e.trim_end().lines().count(), 1, "not one line: {e}");
    assert!(e.starts_with("hwceiling: "), "{e}");
    assert!(e.contains(needle), "{e}");
}

fn profile(host: &str, ceilings: &[(&str, f64)]) -> Profile {
    let mut p = hwc_testkit::ceilings_profile(host, "2026-11-29T10:05:00+00:00", ceilings);
    p.topology
        .links
        .push(hwc_testkit::gen5_x16_link("gpu0", "0000:00:06.0"));
    p
}

fn write(dir: &Path, name: &str, p: &Profile) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, hwc_profile::to_yaml(p).unwrap()).unwrap();
    path
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn compare_flags_a_regression_with_exit_1_and_passes_within_tolerance() {
    let d = tempfile::tempdir().unwrap();
    let a = write(
        d.path(),
        "a.yaml",
        &profile(
            "node1",
            &[("warm_gpu0_gbps", 53.4), ("host_ram_same_numa_gbps", 34.0)],
        ),
    );
    let b = write(
        d.path(),
        "b.yaml",
        &profile(
            "node2",
            &[("warm_gpu0_gbps", 50.0), ("host_ram_same_numa_gbps", 33.5)],
        ),
    );
    let o = run(&["compare", s(&a), s(&b)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("baseline   node1") && out.contains("candidate  node2"),
        "{out}"
    );
    assert!(
        out.contains("REGRESSION") && out.ends_with("1 regression(s)\n"),
        "{out}"
    );
    let o = run(&["compare", s(&a), s(&b), "--tolerance", "10%"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let o = run(&[
        "compare",
        s(&a),
        s(&b),
        "--tolerance",
        "0.10",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["regressions"], 0);
    assert_eq!(v["tolerance_pct"], 10.0);
    one_line_error(
        &run(&["compare", s(&a), s(&b), "--tolerance", "5"]),
        2,
        "not a tolerance",
    );
    one_line_error(&run(&["compare", s(&a)]), 2, "PROFILE");
    // Two profiles with nothing in them: no rows, not "no regression".
    let empty = write(d.path(), "empty.yaml", &profile("node4", &[]));
    one_line_error(
        &run(&["compare", s(&empty), s(&empty)]),
        1,
        "nothing to compare: neither profile has a ceiling or measurement",
    );
    // A damaged profile (a bandwidth ceiling no run gives) is refused, not compared.
    let bad = write(
        d.path(),
        "bad.yaml",
        &profile("node3", &[("warm_gpu0_gbps", -5.0)]),
    );
    one_line_error(
        &run(&["compare", s(&a), s(&bad)]),
        1,
        "ceiling `warm_gpu0_gbps` is -5, which no run writes: the profile is damaged",
    );
    // Every reader refuses it the same way: `report` and `efficiency` too.
    for args in [
        vec!["report", s(&bad)],
        vec![
            "efficiency",
            "--profile",
            s(&bad),
            "--path",
            "warm_gpu0_gbps",
            "--measured-gbps",
            "1",
        ],
    ] {
        one_line_error(
            &run(&args),
            1,
            "ceiling `warm_gpu0_gbps` is -5, which no run writes: the profile is damaged",
        );
    }
}

#[test]
fn compare_of_a_fleet_names_the_outlier() {
    let d = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (i, g) in [55.0, 55.2, 54.9, 44.0].iter().enumerate() {
        let host = format!("node{i}");
        files.push(write(
            d.path(),
            &format!("{host}.yaml"),
            &profile(&host, &[("warm_gpu0_peak_gbps", *g)]),
        ));
    }
    let args: Vec<&str> = ["compare"]
        .into_iter()
        .chain(files.iter().map(|f| s(f)))
        .collect();
    let o = run(&args);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("fleet      4 nodes"), "{out}");
    assert!(
        out.contains("node3 44.00") && out.contains("WORSE"),
        "{out}"
    );
}

#[test]
fn qualify_gates_a_node_and_writes_junit() {
    let d = tempfile::tempdir().unwrap();
    let good = write(
        d.path(),
        "good.yaml",
        &profile(
            "good",
            &[
                ("warm_gpu0_peak_gbps", 55.6),
                ("host_ram_same_numa_gbps", 34.0),
            ],
        ),
    );
    let slow = write(
        d.path(),
        "slow.yaml",
        &profile("slow", &[("warm_gpu0_peak_gbps", 30.0)]),
    );
    // The spec names it as its baseline.
    write(
        d.path(),
        "golden.yaml",
        &profile("golden", &[("host_ram_same_numa_gbps", 35.0)]),
    );
    let spec = d.path().join("spec.yaml");
    std::fs::write(
        &spec,
        "spec_version: 1\nbaseline: golden.yaml\nrules:\n  - path: warm_gpu0_peak_gbps\n    min_pct_of_link: 80\n  - path: host_ram_same_numa_gbps\n    min_pct_of_baseline: 90\nlinks:\n  - device: gpu*\n    gen: max\n    width: max\n",
    )
    .unwrap();
    let junit = d.path().join("out/junit.xml");
    std::fs::create_dir_all(junit.parent().unwrap()).unwrap();
    let o = run(&[
        "qualify",
        s(&good),
        "--spec",
        s(&spec),
        "--junit",
        s(&junit),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("QUALIFIED: 3 passed, 0 failed, 0 skipped"),
        "{}",
        stdout(&o)
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(r#"tests="3" failures="0""#), "{xml}");

    let o = run(&[
        "qualify",
        s(&slow),
        "--spec",
        s(&spec),
        "--junit",
        s(&junit),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("NOT QUALIFIED: 1 passed, 2 failed"),
        "{}",
        stdout(&o)
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<failure ").count(), 2, "{xml}");
    // --baseline overrides the spec's.
    let o = run(&[
        "qualify",
        s(&good),
        "--spec",
        s(&spec),
        "--baseline",
        s(&good),
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["failed"], 0, "{v}");
    assert!(v["checks"][1]["detail"]
        .as_str()
        .unwrap()
        .contains("34.00 GB/s"));
    // The shipped example spec reads and judges a profile.
    let example =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/qualify-gpu-nvme-node.yaml");
    let o = run(&["qualify", s(&good), "--spec", s(&example)]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "the example needs GPU figures this profile lacks"
    );
    assert!(stdout(&o).contains("SKIP"), "{}", stdout(&o));

    std::fs::write(
        &spec,
        "spec_version: 1\nrules:\n  - path: x\n    min_gbps: 1\n    min_pct: 3\n",
    )
    .unwrap();
    one_line_error(
        &run(&["qualify", s(&good), "--spec", s(&spec)]),
        1,
        "unknown field `min_pct`",
    );
    std::fs::write(
        &spec,
        "spec_version: 1\nrules:\n  - path: x\n    min_pct_of_baseline: 90\n",
    )
    .unwrap();
    one_line_error(
        &run(&["qualify", s(&good), "--spec", s(&spec)]),
        1,
        "no baseline profile was given",
    );
    // A damaged profile or baseline is refused, as `compare` refuses it: its figures would
    // make floors that nothing misses.
    let damaged = write(
        d.path(),
        "damaged.yaml",
        &profile("node3", &[("warm_gpu0_gbps", -16.1)]),
    );
    one_line_error(
        &run(&["qualify", s(&damaged), "--spec", s(&spec)]),
        1,
        "ceiling `warm_gpu0_gbps` is -16.1, which no run writes: the profile is damaged",
    );
    one_line_error(
        &run(&[
            "qualify",
            s(&good),
            "--spec",
            s(&spec),
            "--baseline",
            s(&damaged),
        ]),
        1,
        "damaged.yaml: ceiling `warm_gpu0_gbps` is -16.1",
    );
}

#[test]
fn qualify_junit_failure_types_say_what_happened() {
    let d = tempfile::tempdir().unwrap();
    let node = write(
        d.path(),
        "node.yaml",
        &hwc_testkit::with_host_ram_ceiling(
            profile("node", &[("warm_gpu0_peak_gbps", 30.0)]),
            Some("host-streaming"),
            58.0,
        ),
    );
    write(
        d.path(),
        "golden.yaml",
        &hwc_testkit::with_host_ram_ceiling(profile("golden", &[]), Some("host-memcpy"), 35.0),
    );
    let spec = d.path().join("spec.yaml");
    std::fs::write(
        &spec,
        r#"spec_version: 1
baseline: golden.yaml
rules:
  - name: GPU fast enough
    path: warm_gpu0_peak_gbps
    min_gbps: 20
  - name: GPU at 50 GB/s
    path: warm_gpu0_peak_gbps
    min_gbps: 50
  - name: 'NVMe "raw" <4 drives> & more'
    path: nvme_raw_4drive_read_gbps
    min_gbps: 20
  - name: GPU as the baseline
    path: warm_gpu0_peak_gbps
    min_pct_of_baseline: 90
  - name: host RAM as the baseline
    path: host_ram_same_numa_gbps
    min_pct_of_baseline: 90
  - name: host RAM of the link
    path: host_ram_same_numa_gbps
    min_pct_of_link: 50
  - name: GPU of another link
    path: warm_gpu0_peak_gbps
    min_pct_of_link: 50
    link: gpu7
links:
  - device: "gpu*"
    gen: max
    width: max
  - device: "nvme*"
    gen: 4
"#,
    )
    .unwrap();
    let junit = d.path().join("junit.xml");
    let o = run(&[
        "qualify",
        s(&node),
        "--spec",
        s(&spec),
        "--junit",
        s(&junit),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    let xml = std::fs::read_to_string(&junit).unwrap();
    let cases = hwc_testkit::junit_cases(&xml);
    let types: Vec<(&str, Option<&str>)> = cases
        .iter()
        .map(|(n, f)| (n.as_str(), f.as_ref().map(|(t, _)| t.as_str())))
        .collect();
    assert_eq!(
        types,
        vec![
            ("GPU fast enough", None),
            ("GPU at 50 GB/s", Some("below-floor")),
            (
                r#"NVMe "raw" <4 drives> & more"#,
                Some("missing-in-profile")
            ),
            ("GPU as the baseline", Some("missing-in-baseline")),
            ("host RAM as the baseline", Some("not-comparable")),
            ("host RAM of the link", Some("no-device")),
            ("GPU of another link", Some("no-link")),
            ("gpu0 link (0000:00:06.0)", None),
            ("nvme* link", Some("no-matching-link")),
        ],
        "{xml}"
    );
    assert_eq!(
        xml.matches("<failure ").count(),
        7,
        "every failure is counted once: {xml}"
    );
    let message = |i: usize| cases[i].1.as_ref().unwrap().1.as_str();
    assert!(
        message(1).contains("30.00 GB/s < the floor 50.00 GB/s"),
        "{}",
        message(1)
    );
    assert!(
        message(4).starts_with(
            "not comparable: engine host-memcpy (baseline) → host-streaming (profile); re-baseline"
        ),
        "{}",
        message(4)
    );
    assert!(
        xml.contains(r#"name="NVMe &quot;raw&quot; &lt;4 drives&gt; &amp; more""#),
        "{xml}"
    );
    // The same kinds in the JSON report, beside `outcome`.
    let o = run(&["qualify", s(&node), "--spec", s(&spec), "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let json: Vec<(&str, Option<&str>)> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["failure"].as_str()))
        .collect();
    assert_eq!(json, types);
    assert_eq!(v["checks"][1]["outcome"], "fail");
    assert_eq!(v["failed"], 7);
}

#[test]
fn efficiency_from_a_profile_file() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.yaml",
        &profile("n", &[("warm_gpu0_peak_gbps", 50.0)]),
    );
    let o = run(&[
        "efficiency",
        "--path",
        "warm_gpu0_peak_gbps",
        "--measured-gbps",
        "40",
        "--profile",
        s(&p),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("efficiency  0.800  (40.00 GB/s of the 50.00 GB/s ceiling)"),
        "{}",
        stdout(&o)
    );
    let o = run(&[
        "efficiency",
        "--path",
        "warm_gpu0_peak_gbps",
        "--measured-gbps",
        "40",
        "--profile",
        s(&p),
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["efficiency"], 0.8);
    assert_eq!(
        v["ceiling_source"],
        serde_json::json!({"kind": "unknown"}),
        "no measurement and no source behind this hand-made ceiling: not guessed derived"
    );
    one_line_error(
        &run(&[
            "efficiency",
            "--path",
            "nope_gbps",
            "--measured-gbps",
            "1",
            "--profile",
            s(&p),
        ]),
        1,
        "unknown ceiling `nope_gbps` (known: warm_gpu0_peak_gbps)",
    );
    for bad in ["-1", "NaN", "fast"] {
        one_line_error(
            &run(&[
                "efficiency",
                "--path",
                "x",
                "--measured-gbps",
                bad,
                "--profile",
                s(&p),
            ]),
            2,
            "not a finite, non-negative number",
        );
    }
    let nosock = d.path().join("none.sock");
    one_line_error(
        &run(&[
            "efficiency",
            "--path",
            "x",
            "--measured-gbps",
            "1",
            "--socket",
            s(&nosock),
        ]),
        1,
        "(os error 2) (is `hwceiling serve` running?)",
    );
    // Said once: the error that ends the line is not repeated after it.
    let o = run(&[
        "efficiency",
        "--path",
        "x",
        "--measured-gbps",
        "1",
        "--socket",
        s(&nosock),
    ]);
    assert!(
        stderr(&o).trim_end().ends_with("running?)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn efficiency_prints_the_ceilings_spread_and_n_or_how_it_was_derived() {
    let d = tempfile::tempdir().unwrap();
    let p = hwc_testkit::with_equal_median_gpu_ceilings(
        profile("n", &[]),
        50.0,
        "min of NVMe and H2D: H2D bounds it",
    );
    let f = write(d.path(), "p.yaml", &p);
    let ask = |path: &str| {
        let o = run(&[
            "efficiency",
            "--path",
            path,
            "--measured-gbps",
            "40",
            "--profile",
            s(&f),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    let out = ask("warm_gpu0_peak_gbps");
    assert!(
        out.contains("\nceiling     median of h2d/cuda-copy/gpu0/local/256MiB/s1, ±1.8 %, N=12\n"),
        "{out}"
    );
    let out = ask("dispatcher_cold_1drive_gbps");
    assert!(
        out.contains("\nceiling     derived: min of NVMe and H2D: H2D bounds it\n"),
        "{out}"
    );
}

struct Served {
    child: Option<Child>,
    socket: PathBuf,
}

impl Served {
    fn start(args: &[&str], socket: &Path) -> Served {
        let child = bin()
            .arg("serve")
            .args(args)
            .arg("--socket")
            .arg(socket)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while client::get_json(
            &Target::Unix(socket.into()),
            "/healthz",
            Duration::from_secs(5),
        )
        .is_err()
        {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "serve did not come up"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Served {
            child: Some(child),
            socket: socket.into(),
        }
    }

    fn target(&self) -> Target {
        Target::Unix(self.socket.clone())
    }

    /// SIGTERM; the exit status and stderr.
    fn stop(mut self) -> (Option<i32>, String) {
        let child = self.child.take().expect("running");
        // SAFETY: kill(2) on our own child, which has not been waited for yet.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let out = child.wait_with_output().unwrap();
        (out.status.code(), stderr(&out))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn short_tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("hwc")
        .tempdir_in("/tmp")
        .unwrap()
}

#[test]
fn serve_answers_the_client_and_stops_cleanly_on_sigterm() {
    let d = short_tempdir();
    let out = d.path().join("profiling");
    std::fs::create_dir_all(&out).unwrap();
    write(
        &out,
        "hardware_profile_2026-11-29.yaml",
        &profile("node9", &[("warm_gpu0_peak_gbps", 55.0)]),
    );
    let sock = d.path().join("h.sock");
    // The fixture is of host node9.
    let served = Served::start(&["--output-dir", s(&out), "--hostname", "node9"], &sock);
    let o = run(&[
        "efficiency",
        "--path",
        "warm_gpu0_peak_gbps",
        "--measured-gbps",
        "44",
        "--socket",
        s(&sock),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("efficiency  0.800"), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("hardware_profile_2026-11-29.yaml (node9"),
        "{}",
        stdout(&o)
    );
    let o = run(&[
        "efficiency",
        "--path",
        "warm_gpu9_gbps",
        "--measured-gbps",
        "44",
        "--socket",
        s(&sock),
    ]);
    one_line_error(&o, 1, "known: warm_gpu0_peak_gbps");
    let m = client::get_json(&served.target(), "/metrics", Duration::from_secs(5)).unwrap();
    assert!(
        m.text().contains(
            r#"hwceiling_ceiling_gbps{path="warm_gpu0_peak_gbps",gpu="gpu0",numa="local"} 55.0"#
        ),
        "{}",
        m.text()
    );
    let (code, err) = served.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("SIGTERM") && err.contains("stopped"), "{err}");
    assert!(!sock.exists(), "socket removed");
}

#[test]
fn serve_runs_a_real_profile_on_request() {
    let d = short_tempdir();
    let out = d.path().join("profiling");
    let sock = d.path().join("h.sock");
    let served = Served::start(&["--output-dir", s(&out), "--poll-interval", "0.1"], &sock);
    let body = br#"{"paths":["host_ram"],"host_sizes":["1MiB"],"threads":[1],"quick":true,"allow_contended":true}"#;
    let r = client::request(
        &served.target(),
        "POST",
        "/v1/profile/run",
        &[("Content-Type", "application/json")],
        body,
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(r.status, 202, "{}", r.text());
    // A quick run of a part of the plan: the answer says its profile will not replace a full one.
    assert!(
        r.text()
            .contains("a --quick run narrowed by --paths host_ram, --threads 1, --host-sizes 1MiB"),
        "{}",
        r.text()
    );
    let t = Instant::now();
    let status = loop {
        let r =
            client::get_json(&served.target(), "/v1/profile/run", Duration::from_secs(5)).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        if v["state"] == "finished" {
            break v;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "{v}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status["outcome"], "completed", "{status}");
    let t = Instant::now();
    loop {
        let r = client::get_json(&served.target(), "/v1/profile", Duration::from_secs(5)).unwrap();
        if r.status == 200 {
            // The run's profile, served: its measurements, and (1 MiB being a cache size) no
            // host RAM ceiling.
            let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            let keys: Vec<&str> = v["measurements"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["key"].as_str().unwrap())
                .collect();
            assert!(keys.contains(&"host_ram/host-memcpy/n0-n0/1MiB/t1"), "{v}");
            assert!(
                v["ceilings"].get("host_ram_same_numa_gbps").is_none(),
                "{v}"
            );
            // Served for want of a complete profile, and marked: the options the run recorded
            // are judged as the request was, with the points of this machine's default sweeps
            // that the lists leave out (4 MiB buffers and more; 2 threads and more, where the
            // machine has a second CPU).
            let h = client::get_json(&served.target(), "/healthz", Duration::from_secs(5)).unwrap();
            let h: serde_json::Value = serde_json::from_slice(&h.body).unwrap();
            assert_eq!(h["profile"]["complete"], false, "{h}");
            let by: Vec<&str> = h["profile"]["narrowed_by"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            // The node's own CPU count, from the profile: with two or more, the full sweep
            // has 2 threads, which `--threads 1` leaves out.
            let node_cpus = v["platform"]["numa"][0]["cpus"].as_array().unwrap().len();
            let mut expected = vec!["--paths host_ram"];
            if node_cpus >= 2 {
                expected.push("--threads 1 (leaves out 2");
            }
            expected.push("--host-sizes 1MiB (leaves out 4MiB,");
            assert_eq!(by.len(), expected.len(), "{h}");
            assert!(
                by.iter().zip(&expected).all(|(b, e)| b.starts_with(e)),
                "{h}"
            );
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "profile not served: {}",
            r.text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, err) = served.stop();
    assert_eq!(code, Some(0), "{err}");
    // The log names the run's process by its number, not in Rust's words.
    let started = err
        .lines()
        .find(|l| l.contains("profile run started"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        started.contains(" pid=") && !started.contains("Some("),
        "{started}"
    );
}

#[test]
fn serve_refuses_a_public_address_and_bad_settings() {
    one_line_error(
        &run(&["serve", "--listen", "0.0.0.0:0"]),
        1,
        "--listen-public",
    );
    one_line_error(
        &run(&[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--socket",
            "/tmp/x.sock",
        ]),
        2,
        "cannot be used with",
    );
    one_line_error(
        &run(&["serve", "--poll-interval", "0"]),
        2,
        "`0` is not a number of seconds from 0.01 to 86400",
    );
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("serve.toml");
    // Public listening asked for where a socket is served.
    one_line_error(
        &run(&[
            "serve",
            "--listen-public",
            "--socket",
            s(&d.path().join("hwc.sock")),
        ]),
        1,
        "listen_public applies to a TCP address (--listen), not to the socket",
    );
    // The folder of profiles is a file.
    std::fs::write(&cfg, "").unwrap();
    one_line_error(
        &run(&["serve", "-o", s(&cfg), "--listen", "127.0.0.1:0"]),
        1,
        "serve.toml is not a folder",
    );
    // A poll every nanosecond would spin a CPU on the folder.
    std::fs::write(&cfg, "poll_interval_s = 1e-9\n").unwrap();
    one_line_error(
        &run(&["serve", "--config", s(&cfg)]),
        1,
        "poll_interval_s: `0.000000001` is not a number of seconds from 0.01 to 86400",
    );
    std::fs::write(&cfg, "output_dir = \"x\"\nlisten = \"0.0.0.0:9187\"\n").unwrap();
    one_line_error(&run(&["serve", "--config", s(&cfg)]), 1, "--listen-public");
    std::fs::write(
        &cfg,
        "output_dir = \"x\"\nsocket = \"/tmp/a.sock\"\nlisten = \"127.0.0.1:1\"\n",
    )
    .unwrap();
    one_line_error(&run(&["serve", "--config", s(&cfg)]), 1, "not both");
    std::fs::write(&cfg, "outptu_dir = \"x\"\n").unwrap();
    one_line_error(
        &run(&["serve", "--config", s(&cfg)]),
        1,
        "unknown field `outptu_dir`",
    );
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/serve.example.toml");
    let text = std::fs::read_to_string(example).unwrap();
    // Every key of the example parses; pointed at a busy socket path, serve stops there.
    let busy = d.path().join("busy");
    std::fs::write(&busy, b"").unwrap();
    std::fs::write(
        &cfg,
        text.replace("/run/hwceiling/hwceiling.sock", s(&busy)),
    )
    .unwrap();
    one_line_error(&run(&["serve", "--config", s(&cfg)]), 1, "is not a socket");
}

/// Each level refers to the one before four times: 4^40 nodes if expanded.
fn billion_laughs() -> String {
    let mut s = String::from("schema_version: 1\nl0: &l0 [x, x, x, x]\n");
    for i in 1..40 {
        let p = format!("*l{}", i - 1);
        s.push_str(&format!("l{i}: &l{i} [{p}, {p}, {p}, {p}]\n"));
    }
    s
}

/// Files no command may panic on: each gets one line on stderr and exit 1.
#[test]
fn hostile_files_get_a_one_line_error_from_every_command() {
    let d = tempfile::tempdir().unwrap();
    let good = write(
        d.path(),
        "good.yaml",
        &profile("g", &[("warm_gpu0_gbps", 1.0)]),
    );
    let spec = d.path().join("spec.yaml");
    std::fs::write(
        &spec,
        "spec_version: 1\nrules:\n  - path: warm_gpu0_gbps\n    min_gbps: 1\n",
    )
    .unwrap();
    let huge = {
        let mut s = String::from("schema_version: 1\nwarnings:\n");
        while s.len() <= 17 << 20 {
            s.push_str("  - aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n");
        }
        s
    };
    let cases: Vec<(&str, String, &str)> = vec![
        ("huge", huge, "larger than"),
        (
            "deep",
            format!("schema_version: 1\nplatform: {}", "[".repeat(100_000)),
            "not a valid hwceiling profile",
        ),
        (
            "deep-block",
            format!(
                "schema_version: 1\n{}",
                (0..500)
                    .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
                    .collect::<String>()
            ),
            "not a valid hwceiling profile",
        ),
        (
            "types",
            "schema_version: 1\nprovenance: 7\nplatform: {}\ncpu_features: {}\nwarnings: []\n"
                .into(),
            "not a valid hwceiling profile",
        ),
        (
            "dupes",
            "schema_version: 1\nschema_version: 1\n".into(),
            "not a valid hwceiling profile",
        ),
        (
            "truncated",
            hwc_profile::to_yaml(&profile("t", &[("warm_gpu0_gbps", 1.0)])).unwrap()[..300]
                .to_string(),
            "hwceiling profile",
        ),
        (
            // Cut at a line break just after `ceilings:`: valid YAML, and without the check a
            // valid profile with no measurements, failures or waivers.
            "cut-at-a-line",
            {
                let text = hwc_profile::to_yaml(&profile("t", &[("warm_gpu0_gbps", 1.0)])).unwrap();
                let end = text.find("\nceilings:").unwrap() + "\nceilings:\n".len();
                text[..end].to_string()
            },
            "cut short: no `warnings` field",
        ),
        ("aliases", billion_laughs(), "not a valid hwceiling profile"),
        (
            "future",
            "schema_version: 3\n".into(),
            "newer than this hwceiling reads",
        ),
        ("empty", String::new(), "hwceiling profile"),
    ];
    for (name, text, needle) in &cases {
        let bad = d.path().join(format!("{name}.yaml"));
        std::fs::write(&bad, text).unwrap();
        let b = s(&bad);
        for args in [
            vec!["report", b],
            vec!["compare", s(&good), b],
            vec!["qualify", b, "--spec", s(&spec)],
            vec!["qualify", s(&good), "--spec", s(&spec), "--baseline", b],
            vec![
                "efficiency",
                "--path",
                "warm_gpu0_gbps",
                "--measured-gbps",
                "1",
                "--profile",
                b,
            ],
        ] {
            let o = run(&args);
            assert_eq!(o.status.code(), Some(1), "{name} {args:?}: {}", stderr(&o));
            let e = stderr(&o);
            assert_eq!(e.trim_end().lines().count(), 1, "{name} {args:?}: {e}");
            assert!(e.contains(needle), "{name} {args:?}: {e}");
            assert!(
                e.len() < 600,
                "{name} {args:?}: a short message, not the file: {e}"
            );
        }
        // As a spec.
        let o = run(&["qualify", s(&good), "--spec", b]);
        assert_eq!(o.status.code(), Some(1), "{name} as spec: {}", stderr(&o));
        assert_eq!(
            stderr(&o).trim_end().lines().count(),
            1,
            "{name}: {}",
            stderr(&o)
        );
    }
}

/// `efficiency --profile FILE --path KEY --measured-gbps X`.
fn efficiency_of(profile: &Path, key: &str, measured: &str) -> Output {
    run(&[
        "efficiency",
        "--profile",
        s(profile),
        "--path",
        key,
        "--measured-gbps",
        measured,
    ])
}

const HOSTILE: &str = "n\u{1b}]0;pwned\u{7}\u{0}\u{1b}[2J\n# pwned | x";

/// Nothing a profile or spec holds reaches the terminal as a control character or a line of
/// its own.
fn inert(out: &str) {
    for line in out.lines() {
        assert!(
            !line.chars().any(char::is_control),
            "a control character reached the terminal: {line:?}"
        );
        assert!(!line.starts_with("# pwned"), "an injected line: {out}");
    }
}

#[test]
fn hostile_strings_reach_the_terminal_inert() {
    let d = tempfile::tempdir().unwrap();
    let key = format!("warm_gpu0_gbps{HOSTILE}");
    let a = write(
        d.path(),
        "a.yaml",
        &profile(HOSTILE, &[("warm_gpu0_peak_gbps", 50.0), (&key, 40.0)]),
    );
    let b = write(
        d.path(),
        "b.yaml",
        &profile("b", &[("warm_gpu0_peak_gbps", 50.0), (&key, 20.0)]),
    );
    let o = run(&["compare", s(&a), s(&b)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("pwned"),
        "{}\n{}",
        stdout(&o),
        stderr(&o)
    );
    inert(&stdout(&o));

    let o = efficiency_of(&a, "warm_gpu0_peak_gbps", "1");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("pwned"), "{}", stdout(&o));
    inert(&stdout(&o));

    let spec = d.path().join("spec.yaml");
    // YAML's own escapes, in double quotes.
    let rule = HOSTILE
        .replace('\u{1b}', "\\e")
        .replace('\u{7}', "\\a")
        .replace('\0', "\\0")
        .replace('\n', "\\n");
    std::fs::write(
        &spec,
        format!(
            "spec_version: 1\nname: \"{rule}\"\nrules:\n  - path: \"{rule}\"\n    min_gbps: 1\n  - path: warm_gpu0_peak_gbps\n    min_gbps: 1\n"
        ),
    )
    .unwrap();
    let o = run(&["qualify", s(&a), "--spec", s(&spec)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("pwned"), "{}", stdout(&o));
    inert(&stdout(&o));
}

#[test]
fn figures_print_in_a_bounded_width_and_never_as_negative_zero() {
    let d = tempfile::tempdir().unwrap();
    let a = write(
        d.path(),
        "a.yaml",
        &profile("n", &[("warm_gpu0_peak_gbps", 50.0)]),
    );
    let eff = |measured: &str| {
        let o = efficiency_of(&a, "warm_gpu0_peak_gbps", measured);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    let big = eff("1e308");
    assert!(
        big.starts_with("efficiency  2.000e306  (1.00e308 GB/s of the 50.00 GB/s ceiling)"),
        "{big}"
    );
    assert!(big.lines().all(|l| l.len() < 200), "{big}");
    let zero = eff("-0");
    assert!(
        zero.starts_with("efficiency  0.000  (0.00 GB/s of the 50.00 GB/s ceiling)"),
        "{zero}"
    );
}
