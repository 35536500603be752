//! Test fixtures shared by the crates' tests: profiles built in memory through the real
//! profile builder, so a model change reaches every test, and a reader of the JUnit files
//! `qualify --junit` writes. A dev-dependency only.

use hwc_model::topology::LinkTheory;
use hwc_model::{CeilingSource, Measurement, Plan, Profile, Provenance, Topology};

/// A new temporary folder on storage, for a test's `--target` files (hwceiling refuses a target in
/// memory): the system's temporary folder, else `/var/tmp`, else the current folder (a package's
/// own under `cargo test`), the first that does not lie in memory. Panics, naming the fix, where
/// none does.
pub fn storage_tempdir() -> tempfile::TempDir {
    let mut tried = Vec::new();
    let candidates = [
        Some(std::env::temp_dir()),
        Some(std::path::PathBuf::from("/var/tmp")),
        std::env::current_dir().ok(),
    ];
    for base in candidates.into_iter().flatten() {
        if base.is_dir() && hwc_bench_nvme::memory_filesystem(&base).is_none() {
            if let Ok(d) = tempfile::tempdir_in(&base) {
                return d;
            }
        }
        tried.push(base.display().to_string());
    }
    panic!(
        "no temporary folder on storage ({} lie in memory or cannot be written): set TMPDIR to \
         a folder on a drive",
        tried.join(", ")
    )
}

/// A provenance for a run that finished at `finished_at` (RFC 3339).
pub fn provenance(finished_at: &str) -> Provenance {
    Provenance {
        tool: "hwceiling".into(),
        version: "0.1.0".into(),
        git_revision: "abc".into(),
        started_at: finished_at.into(),
        finished_at: finished_at.into(),
        date: finished_at.get(..10).unwrap_or(finished_at).into(),
        command_line: "hwceiling profile".into(),
        ..Provenance::default()
    }
}

/// A profile of host `host` with nothing measured and the given `ceilings`.
pub fn ceilings_profile(host: &str, finished_at: &str, ceilings: &[(&str, f64)]) -> Profile {
    let mut topo = Topology::default();
    topo.platform.hostname = Some(host.to_string());
    let mut p = hwc_profile::build(
        &topo,
        &Plan::default(),
        &[],
        &[],
        &[],
        &[],
        provenance(finished_at),
    );
    p.ceilings = ceilings.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    unsourced(p)
}

/// An H200's link as `detect` reports it: Gen5 x16 at its maximum.
pub fn gen5_x16_link(device: &str, bdf: &str) -> LinkTheory {
    let gbps = hwc_model::pcie_theoretical_gbps(32.0, 16);
    LinkTheory {
        device: device.into(),
        bdf: bdf.into(),
        gen: 5,
        width: 16,
        max_gen: Some(5),
        max_width: Some(16),
        theoretical_gbps: gbps,
        max_theoretical_gbps: Some(gbps),
        degraded: false,
        basis: Default::default(),
        detected: None,
        min_mps_bytes: None,
        tlp_write_gbps: None,
        tlp_read_gbps: None,
    }
}

/// A gpu0 H2D measurement `key` (of the CUDA copy engine, 1 MiB, one stream, host memory on
/// node 0) with this median, spread and repetition count (min and max at the median). Built
/// through serde, so optional fields added to the model need no change.
pub fn h2d_measurement(key: &str, median: f64, spread_pct: f64, n: u32) -> Measurement {
    serde_json::from_value(serde_json::json!({
        "key": key,
        "path": "h2d",
        "engine": "cuda-copy",
        "cell": key,
        "spec": {
            "kind": "gpu_copy", "gpu": "gpu0", "size_bytes": 1u64 << 20, "streams": 1,
            "host_memory": "pinned", "host_node": 0, "cpu_node": 0,
        },
        "bytes_per_rep": 1u64 << 20,
        "gbps": { "median": median, "min": median, "max": median, "spread_pct": spread_pct, "n": n },
        "warmup": 2,
    }))
    .expect("a valid measurement")
}

/// `p` with a `host_ram_same_numa_gbps` ceiling (`gbps`) that is the median of a 1 GiB,
/// 16-thread host RAM measurement by `engine` (`host-memcpy` where `None`), named as its source.
pub fn with_host_ram_ceiling(mut p: Profile, engine: Option<&str>, gbps: f64) -> Profile {
    let engine = engine.unwrap_or("host-memcpy");
    let cell = "n0-n0/1GiB/t16";
    let key = format!("host_ram/{engine}/{cell}");
    let m: Measurement = serde_json::from_value(serde_json::json!({
        "key": key,
        "path": "host_ram",
        "engine": engine,
        "cell": cell,
        "spec": {
            "kind": "host_copy", "size_bytes": 1u64 << 30, "threads": 16, "cpu_node": 0,
            "src_node": 0, "dst_node": 0,
        },
        "bytes_per_rep": 1u64 << 30,
        "gbps": { "median": gbps, "min": gbps, "max": gbps, "spread_pct": 5.0, "n": 12 },
        "warmup": 2,
    }))
    .expect("a valid measurement");
    p.ceilings.insert("host_ram_same_numa_gbps".into(), gbps);
    p.measurements.push(m);
    with_sources(
        p,
        &[("host_ram_same_numa_gbps", CeilingSource::measured(key))],
    )
}

/// `p` with `warm_gpu0_peak_gbps` and `dispatcher_cold_1drive_gbps` ceilings of `gbps`, and
/// two gpu0 H2D measurements of that same median (4 MiB × 4 streams ±0.2 %, 256 MiB ±1.8 %,
/// N=12): the peak's source names the 256 MiB one, the cold ceiling is derived (`how`). Looking
/// a ceiling's source up by value instead of by key would pick the wrong measurement.
pub fn with_equal_median_gpu_ceilings(mut p: Profile, gbps: f64, how: &str) -> Profile {
    p.ceilings.insert("warm_gpu0_peak_gbps".into(), gbps);
    p.ceilings
        .insert("dispatcher_cold_1drive_gbps".into(), gbps);
    for (key, spread) in [
        ("h2d/cuda-copy/gpu0/local/4MiB/s4", 0.2),
        ("h2d/cuda-copy/gpu0/local/256MiB/s1", 1.8),
    ] {
        p.measurements.push(h2d_measurement(key, gbps, spread, 12));
    }
    with_sources(
        p,
        &[
            (
                "warm_gpu0_peak_gbps",
                CeilingSource::measured("h2d/cuda-copy/gpu0/local/256MiB/s1"),
            ),
            (
                "dispatcher_cold_1drive_gbps",
                CeilingSource::derived(how, vec![]),
            ),
        ],
    )
}

/// `p` with records of these ceilings (already in `p.ceilings`) coming from these sources, as
/// the profile builder writes them; what each ceiling is comes from the version 1 catalogue of
/// its key ([`hwc_model::v1::ceiling_meta`]), the engine from its measurement.
pub fn with_sources(mut p: Profile, sources: &[(&str, CeilingSource)]) -> Profile {
    for (key, source) in sources {
        let value = *p
            .ceilings
            .get(*key)
            .unwrap_or_else(|| panic!("with_sources: no ceiling {key}"));
        let measured = match source {
            CeilingSource::Measured { measurement } => p.measurement(measurement),
            CeilingSource::Derived { .. } => None,
        };
        let record = hwc_model::CeilingRecord {
            carried_from: None,
            value,
            meta: hwc_model::v1::ceiling_meta(key, measured.map(|m| m.path)),
            engine: measured.map(|m| m.engine.clone()),
            source: Some(source.clone()),
        };
        p.ceiling_records.insert(key.to_string(), record);
    }
    p
}

/// `p` as a version 1 profile written before ceiling sources were recorded reads: each ceiling
/// has a record (what its key names) without a source, so readers fall back to what its key and
/// figures tell ([`hwc_model::v1::unrecorded_origin`]).
pub fn unsourced(mut p: Profile) -> Profile {
    p.ceiling_records.clear();
    record_missing(p)
}

/// `p` with a record without a source for each ceiling that has no record of its value.
fn record_missing(mut p: Profile) -> Profile {
    for (key, value) in &p.ceilings {
        if p.ceiling_record(key).is_none() {
            let record = hwc_model::CeilingRecord {
                carried_from: None,
                value: *value,
                meta: hwc_model::v1::ceiling_meta(key, None),
                engine: None,
                source: None,
            };
            p.ceiling_records.insert(key.clone(), record);
        }
    }
    p
}

/// `p` as a run that recorded these options would have it (`provenance.options`, as `hwceiling
/// profile` records them: `quick: "true"` for `--quick`, `paths: "h2d"` for `--paths h2d`, …).
pub fn with_options(mut p: Profile, options: &[(&str, &str)]) -> Profile {
    p.provenance
        .options
        .extend(options.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    p
}

/// `p` with NVMe drives `0000:41:00.0`, `0000:42:00.0`, … holding these serial numbers (model
/// `PM1743`, firmware `1.0`) and a one-drive read ceiling; with `write_gbps`, also what a write
/// run on the first drive gives: its write ceilings and `nvme.write_drives_used`.
pub fn with_nvme(mut p: Profile, serials: &[&str], write_gbps: Option<f64>) -> Profile {
    let bdf = |i: usize| format!("0000:{:02x}:00.0", 0x41 + i);
    p.nvme.drives = serials
        .iter()
        .enumerate()
        .map(|(i, serial)| hwc_model::profile::NvmeDriveProfile {
            bdf: Some(bdf(i)),
            name: format!("nvme{i}"),
            model: Some("PM1743".into()),
            firmware_rev: Some("1.0".into()),
            serial: Some(serial.to_string()),
            ..Default::default()
        })
        .collect();
    p.ceilings.insert("nvme_raw_1drive_read_gbps".into(), 6.9);
    if let Some(gbps) = write_gbps {
        p.ceilings.insert("nvme_raw_1drive_write_gbps".into(), gbps);
        p.ceilings
            .insert("nvme_optimal_write_chunk_bytes".into(), 131072.0);
        p.nvme
            .write_drives_used
            .insert("1_drive".into(), vec![bdf(0)]);
    }
    record_missing(p)
}

/// Each `<testcase>` of a JUnit document: its name, and its `<failure>`'s type and message
/// (`None` when it did not fail). Panics on XML that is not well formed, on a testcase without
/// a name or a failure without a type or message, and on a failure whose text is not its
/// message (the writer puts the message in both).
pub fn junit_cases(xml: &str) -> Vec<(String, Option<(String, String)>)> {
    let doc = roxmltree::Document::parse(xml).unwrap_or_else(|e| panic!("{e}: {xml}"));
    doc.descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|case| {
            let failure = case
                .children()
                .find(|n| n.has_tag_name("failure"))
                .map(|f| {
                    assert_eq!(f.text(), f.attribute("message"), "{xml}");
                    (
                        f.attribute("type").expect("a failure type").to_string(),
                        f.attribute("message")
                            .expect("a failure message")
                            .to_string(),
                    )
                });
            let name = case.attribute("name").expect("a testcase name").to_string();
            (name, failure)
        })
        .collect()
}

/// The names in `dir`, sorted (what a test expects a command to have left there).
pub fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Make a FIFO at `path`: a file that is not a regular file, which tests use in place of a device
/// node (never `/dev/…`).
pub fn mkfifo(path: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call; mkfifo only reads it.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo {}", path.display());
}

/// A report without the lines that link its charts (`- Chart: …`), and without the blank lines
/// their going leaves doubled: what `hwceiling report` prints to standard output of a profile
/// whose run wrote that report with charts.
pub fn without_chart_links(md: &str) -> String {
    let mut s: String = md
        .split_inclusive('\n')
        .filter(|l| !l.starts_with("Charts: "))
        .collect();
    while s.contains("\n\n\n") {
        s = s.replace("\n\n\n", "\n\n");
    }
    s
}
