//! End to end on real (emulated) NVMe drives: boots the QEMU test bed of `tools/vm/` — two NUMA
//! nodes, two PCIe expander root complexes, five NVMe controllers — with this build of
//! hwceiling inside, and checks what hwceiling saw in the real kernel's sysfs and Identify
//! answers, what it measured, and that every way of asking it to write to the drive with a
//! filesystem or the partitioned drive was refused with the drive's bytes unchanged. It runs
//! the long drive tests with seconds-long knobs (read cache and power states on a blank drive,
//! gc-settle on the blank drive named for writes, refused on the two with data), and detects and
//! reads as a user without privileges, which must end in waivers and sysfs facts, not failures.
//! It also holds `merge`'s rule for carrying write ceilings (`hwc_model::carry`) to real profiles:
//! a write run's write ceilings describe the drives a read-only run of the same machine saw.
//!
//! Before any of that, the guest loads vfio's and uio's modules under QEMU's emulated IOMMU and
//! binds nothing: the test checks the IOMMU is on, vfio-pci is registered and each blank drive
//! has an IOMMU group (what SPDK's userspace driver needs).
//!
//! Skips (printing `SKIPPED: …`) only when the Debian packages of the bed cannot be fetched.

use hwc_model::{PathId, Profile, Topology};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The profile a run inside the VM wrote under `/out/<run>/`.
fn profile(dir: &Path, run: &str) -> Profile {
    let name = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with(&format!("{run}__hardware_profile_")) && n.ends_with(".yaml"))
        .unwrap_or_else(|| panic!("no profile from the `{run}` run"));
    hwc_profile::from_yaml(&read(dir, &name)).unwrap()
}

struct Expect {
    serial: &'static str,
    node: u32,
    root: &'static str,
    mdts: u64,
}

const DRIVES: [Expect; 5] = [
    Expect {
        serial: "HWCN0A",
        node: 0,
        root: "0000:10",
        mdts: 128 << 10,
    },
    Expect {
        serial: "HWCN0B",
        node: 0,
        root: "0000:10",
        mdts: 256 << 10,
    },
    Expect {
        serial: "HWCFS",
        node: 0,
        root: "0000:10",
        mdts: 512 << 10,
    },
    Expect {
        serial: "HWCN1A",
        node: 1,
        root: "0000:20",
        mdts: 512 << 10,
    },
    Expect {
        serial: "HWCPART",
        node: 1,
        root: "0000:20",
        mdts: 128 << 10,
    },
];

#[test]
fn nvme_drives_in_a_vm_are_seen_measured_and_protected() {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nvme-vm");
    let run = Command::new(repo().join("tools/vm/run.sh"))
        .arg(env!("CARGO_BIN_EXE_hwceiling"))
        .arg(&out)
        .output()
        .expect("tools/vm/run.sh could not start");
    if run.status.code() == Some(3) {
        println!(
            "SKIPPED: the VM test bed's Debian packages could not be fetched: {}",
            String::from_utf8_lossy(&run.stderr).trim()
        );
        return;
    }
    let console = std::fs::read_to_string(out.join("console.log")).unwrap_or_default();
    assert!(
        run.status.success(),
        "the test bed failed: {}\n--- console tail ---\n{}",
        String::from_utf8_lossy(&run.stderr),
        &console[console.len().saturating_sub(4000)..]
    );
    let res = out.join("results");
    println!("VM ran {} s", read(&res, "vm-seconds.txt").trim());

    // What `detect` saw in the guest's sysfs, matched by serial (the kernel numbers
    // controllers in probe order, not by slot).
    let topo: Topology = serde_json::from_str(&read(&res, "detect.json")).unwrap();
    assert_eq!(topo.nvme.len(), 5, "{:#?}", topo.nvme);
    let mut bdf_of: BTreeMap<&str, String> = BTreeMap::new();
    for e in &DRIVES {
        let d = topo
            .nvme
            .iter()
            .find(|d| d.serial.as_deref().map(str::trim) == Some(e.serial))
            .unwrap_or_else(|| panic!("{} not detected", e.serial));
        assert_eq!(d.model.as_deref().map(str::trim), Some("QEMU NVMe Ctrl"));
        assert_eq!(d.firmware_rev.as_deref().map(str::trim), Some("7.2.22"));
        assert_eq!(d.numa_node, Some(e.node), "{} NUMA node", e.serial);
        assert_eq!(d.root.as_deref(), Some(e.root), "{} root complex", e.serial);
        assert_eq!(d.driver.as_deref(), Some("nvme"));
        let bdf = d.bdf.clone().unwrap();
        // Behind the expander: bus 0x11.. on node 0's root, 0x21.. on node 1's.
        assert!(bdf.starts_with(&format!("0000:{}", &e.root[5..6])), "{bdf}");
        // Read as root: each drive's PCIe path from its function up to its root port, every
        // hop's MPS, MRRS and link, and the smallest MPS with the TLP-adjusted limits.
        let path = topo
            .topology
            .pcie_paths
            .iter()
            .find(|p| p.device == d.name)
            .unwrap_or_else(|| panic!("no PCIe path for {}", d.name));
        assert_eq!(path.hops[0].bdf, bdf);
        assert!(path.hops.len() >= 2, "{path:#?}");
        assert_eq!(
            path.hops.last().unwrap().config.port,
            Some(hwc_model::pcie::PortType::RootPort),
            "{path:#?}"
        );
        for h in &path.hops {
            let c = &h.config;
            assert!(c.unreadable.is_none(), "{path:#?}");
            assert!(c.mps_bytes.is_some() && c.mrrs_bytes.is_some(), "{path:#?}");
            assert!(c.link_current.is_some(), "{path:#?}");
        }
        let link = topo
            .topology
            .links
            .iter()
            .find(|l| l.device == d.name)
            .unwrap();
        assert!(
            link.min_mps_bytes.is_some() && link.tlp_write_gbps.is_some(),
            "{link:?}"
        );
        bdf_of.insert(e.serial, bdf);
    }
    // What SPDK's userspace driver needs, as the guest had it before any test step: the
    // emulated IOMMU on, vfio-pci registered (nothing bound to it), and an IOMMU group for each
    // blank drive, still driven by the kernel's nvme driver.
    let iommu = read(&res, "iommu.txt");
    println!("--- iommu.txt ---\n{}", iommu.trim_end());
    let field = |key: &str| {
        iommu
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
            .unwrap_or_else(|| panic!("no `{key}` in iommu.txt:\n{iommu}"))
    };
    let drivers: Vec<&str> = field("pci_drivers").split_whitespace().collect();
    assert!(drivers.contains(&"vfio-pci"), "{iommu}");
    assert!(drivers.contains(&"nvme"), "{iommu}");
    if std::env::var("HWC_VM_IOMMU").as_deref() != Ok("0") {
        assert_eq!(field("iommu"), "on", "{iommu}");
        assert!(field("cmdline").contains("intel_iommu=on"), "{iommu}");
        for serial in ["HWCN0A", "HWCN0B", "HWCN1A"] {
            let line = iommu
                .lines()
                .find(|l| l.starts_with("nvme ") && l.contains(&format!(" serial={serial} ")))
                .unwrap_or_else(|| panic!("{serial} not in iommu.txt:\n{iommu}"));
            assert!(
                line.contains(&format!(" bdf={} ", bdf_of[serial])),
                "{line}"
            );
            let group = line.split_once(" iommu_group=").map(|(_, g)| g.trim());
            assert!(
                group.is_some_and(|g| g.parse::<u32>().is_ok()),
                "{serial} has no IOMMU group: {line}"
            );
            let own = format!("  member {} driver=nvme ", bdf_of[serial]);
            assert!(
                iommu.lines().any(|l| l.starts_with(&own)),
                "{serial} is in its group, bound to nvme:\n{iommu}"
            );
        }
    }
    assert!(
        !iommu
            .lines()
            .any(|l| l.contains("driver=vfio-pci") || l.contains("driver=uio_pci_generic")),
        "init.sh binds nothing: {iommu}"
    );

    let part = topo
        .nvme
        .iter()
        .find(|d| d.serial.as_deref().map(str::trim) == Some("HWCPART"))
        .unwrap();
    assert_eq!(part.namespaces[0].partitions.len(), 1);
    assert!(part.in_use, "a partitioned drive is in use");

    // Path 1 and Step 3 in the guest: Identify's MDTS, same-root groups, the BDFs per count.
    let p = profile(&res, "read");
    // The run named three of the five drives: it records the two it left out (by kernel name),
    // and is narrowed by that and by --paths, so `serve` would not let it replace a full run.
    let mut left_out: Vec<&str> = p.provenance.options["drives_left_out"].split(',').collect();
    left_out.sort_unstable();
    let mut expected: Vec<&str> = topo
        .nvme
        .iter()
        .filter(|d| {
            let serial = d.serial.as_deref().map(str::trim);
            serial == Some("HWCFS") || serial == Some("HWCPART")
        })
        .map(|d| d.name.as_str())
        .collect();
    expected.sort_unstable();
    assert_eq!(left_out, expected);
    let narrowed_by = p.provenance.narrowed_by();
    assert!(
        narrowed_by.contains(&"--paths nvme_read".to_string())
            && narrowed_by
                .iter()
                .any(|n| n.starts_with("--drives ") && n.contains("leaves out")),
        "{narrowed_by:?}"
    );
    for e in &DRIVES {
        let d = p
            .nvme
            .drives
            .iter()
            .find(|d| d.serial.as_deref().map(str::trim) == Some(e.serial))
            .unwrap();
        assert_eq!(d.mdts_bytes, Some(e.mdts), "{} MDTS", e.serial);
        assert!(d.mdts_source.as_deref().unwrap().starts_with("identify"));
        assert_eq!(
            d.vwc_enabled,
            Some(true),
            "QEMU reports a volatile write cache"
        );
    }
    let mut root10 = vec![
        bdf_of["HWCN0A"].clone(),
        bdf_of["HWCN0B"].clone(),
        bdf_of["HWCFS"].clone(),
    ];
    root10.sort();
    let mut root20 = vec![bdf_of["HWCN1A"].clone(), bdf_of["HWCPART"].clone()];
    root20.sort();
    assert_eq!(p.nvme.same_root_groups["0000:10"], root10);
    assert_eq!(p.nvme.same_root_groups["0000:20"], root20);
    assert_eq!(
        p.nvme.read_drives_used["1_drive"],
        [bdf_of["HWCN0A"].clone()]
    );
    assert_eq!(
        p.nvme.read_drives_used["2_drive"],
        [bdf_of["HWCN0A"].clone(), bdf_of["HWCN0B"].clone()],
        "two drives of one root complex"
    );
    assert_eq!(p.nvme.read_drives_used["3_drive"].len(), 3);
    for k in ["1_drive", "2_drive", "3_drive"] {
        assert!(p.nvme.raw_read_gbps[k] > 0.0, "{k}");
    }
    assert_eq!(p.measurements_of(PathId::NvmeRead).count(), 9 + 12);
    assert!(p
        .measurements_of(PathId::NvmeRead)
        .all(|m| m.latency_p50_us.is_some() && m.latency_p99_us >= m.latency_p50_us));
    for serial in ["HWCN0A", "HWCN0B", "HWCN1A"] {
        let d = p
            .nvme
            .drives
            .iter()
            .find(|d| d.serial.as_deref().map(str::trim) == Some(serial))
            .unwrap();
        assert!(d.read_latency_qd1_us.is_some() && d.read_latency_qd32_p99_us.is_some());
    }
    assert!(p.ceilings.contains_key("nvme_raw_1drive_read_gbps"));
    assert_eq!(
        p.nvme
            .io_size_sweep_read_gbps
            .as_ref()
            .unwrap()
            .points
            .len(),
        2
    );

    // Identify's power state descriptors and Get Features, as root: QEMU 7.2 reports one
    // operational state and no APST.
    for d in &p.nvme.drives {
        assert!(
            !d.power_states.is_empty(),
            "{}: {:?}",
            d.name,
            d.power_states
        );
        assert!(!d.power_states[0].non_operational);
        assert_eq!(d.apst_supported, Some(false), "{}", d.name);
        let f = d.power_features.as_ref().unwrap();
        assert_eq!(f.current_power_state, Some(0), "{}: {f:?}", d.name);
        assert!(
            f.not_readable.iter().any(|n| n.contains("APSTA = 0")),
            "{f:?}"
        );
    }
    // Without --nvme-long-tests, each read-only long test is waived naming the flag.
    for test in ["read-cache", "power-states"] {
        assert!(
            p.waivers_of(PathId::NvmeRead)
                .any(|w| w.scope.as_deref() == Some(test)
                    && w.reason.contains(&format!("--nvme-long-tests {test}"))),
            "{test}"
        );
    }

    // The read-only long tests on one blank drive, with seconds-long knobs.
    let text = read(&res, "long.txt");
    assert!(text.contains("rc=0"), "{text}");
    let l = profile(&res, "long");
    let n0a = &bdf_of["HWCN0A"];
    let d = l
        .nvme
        .drives
        .iter()
        .find(|d| d.bdf.as_ref() == Some(n0a))
        .unwrap();
    let t = l.nvme.long_tests.iter().find(|t| &t.device == n0a).unwrap();
    let rc = t.read_cache.as_ref().expect("read-cache measured");
    assert_eq!((rc.hot_latency_us.n, rc.cold_latency_us.n), (5, 5));
    assert!(rc.hot_latency_us.median > 0.0 && rc.cold_latency_us.median > 0.0);
    assert_eq!(d.cache_speedup, Some(rc.cache_speedup));
    assert_eq!(d.has_read_cache, Some(rc.cache_speedup >= 1.5));
    assert_eq!(
        rc.cache_speedup,
        rc.cold_latency_us.median / rc.hot_latency_us.median
    );
    println!(
        "read-cache {n0a}: hot {:.1} µs ±{:.1} % N={}, cold {:.1} µs ±{:.1} % N={}, speedup {:.2}, has_read_cache {}",
        rc.hot_latency_us.median,
        rc.hot_latency_us.spread_pct,
        rc.hot_latency_us.n,
        rc.cold_latency_us.median,
        rc.cold_latency_us.spread_pct,
        rc.cold_latency_us.n,
        rc.cache_speedup,
        rc.has_read_cache
    );
    let ps = t.power_states.as_ref().expect("power-states measured");
    assert_eq!(ps.baseline_latency_us.n, 10);
    let gaps: Vec<f64> = ps.gaps.iter().map(|g| g.idle_s).collect();
    assert_eq!(gaps, [0.01, 0.1, 0.5, 1.0], "capped at 1 s");
    assert!(ps
        .gaps
        .iter()
        .all(|g| g.latency_us.n == 3 && g.latency_us.median > 0.0));
    assert_eq!(
        d.power_state_transition_at_s,
        Some(ps.power_state_transition_at_s),
        "measured: present, a number or null"
    );
    // QEMU's drives report no APST and one operational state: whatever latency step the host
    // causes (TCG's first reads after idle are slower), it is not the drive's transition.
    assert_eq!(ps.drive_can_change_power_state, Some(false));
    assert_eq!(ps.power_state_transition_at_s, None);
    println!(
        "power-states {n0a}: baseline {:.1} µs ±{:.1} % N={}; latency step at {:?} s, transition at {:?} s",
        ps.baseline_latency_us.median,
        ps.baseline_latency_us.spread_pct,
        ps.baseline_latency_us.n,
        ps.latency_step_at_s,
        ps.power_state_transition_at_s
    );
    for g in &ps.gaps {
        println!(
            "  idle {} s: {:.1} µs ±{:.1} % N={} ({:.2}× baseline)",
            g.idle_s, g.latency_us.median, g.latency_us.spread_pct, g.latency_us.n, g.vs_baseline
        );
    }
    for key in [
        format!("nvme_read/io-uring/read-cache/{}/hot", d.name),
        format!("nvme_read/io-uring/power-states/{}/idle-1s", d.name),
    ] {
        assert!(l.measurement(&key).is_some(), "{key}");
    }

    // Path 2 and gc-settle on the blank drive named with the flag.
    let w = profile(&res, "write");
    let writes: Vec<_> = w
        .measurements_of(PathId::NvmeWrite)
        .filter(|m| {
            m.spec
                .nvme()
                .is_some_and(|s| s.test == hwc_model::NvmeTest::Sweep)
        })
        .collect();
    assert_eq!(writes.len(), 1, "{}", read(&res, "write.txt"));
    assert_eq!(writes[0].spec.drives(), [bdf_of["HWCN1A"].clone()]);
    let n1a = &bdf_of["HWCN1A"];
    let g = w
        .nvme
        .long_tests
        .iter()
        .find(|t| &t.device == n1a)
        .and_then(|t| t.gc_settle.as_ref())
        .unwrap_or_else(|| panic!("gc-settle did not run: {}", read(&res, "write.txt")));
    assert_eq!(g.write_intervals_mbps.len(), 4);
    assert!(g.write_intervals_mbps.iter().all(|&m| m > 0.0));
    assert_eq!(
        g.sustained_write_mbps.n, 2,
        "the last third of 4 intervals, rounded up"
    );
    assert_eq!(g.baseline_latency_us.n, 5 * 32);
    assert_eq!(
        g.probe_region_bytes,
        Some(64 << 20),
        "the probes read the whole 64 MiB drive, written once before the baseline"
    );
    assert!(
        (1..=6).contains(&g.settle_probes.len()),
        "{:?}",
        g.settle_probes
    );
    assert_eq!(
        g.settled_at_s.is_some(),
        g.recommended_gc_settle_s.is_some()
    );
    if g.settled_at_s.is_none() {
        assert_eq!(g.settle_probes.len(), 6, "probes at 0..=5 s");
    }
    let d = w
        .nvme
        .drives
        .iter()
        .find(|d| d.bdf.as_ref() == Some(n1a))
        .unwrap();
    assert_eq!(d.sustained_write_mbps, Some(g.sustained_write_mbps.median));
    assert_eq!(d.recommended_gc_settle_s, Some(g.recommended_gc_settle_s));
    let m = w
        .measurements_of(PathId::NvmeWrite)
        .find(|m| m.key.contains("/gc-settle/"))
        .unwrap();
    assert_eq!(m.spec.drives(), std::slice::from_ref(n1a));
    println!(
        "gc-settle {n1a}: sustained write {:.1} MB/s ±{:.1} % N={} (intervals {:?}); baseline {:.1} µs ±{:.1} % N={}; settled at {:?} s, recommended {:?} s",
        g.sustained_write_mbps.median,
        g.sustained_write_mbps.spread_pct,
        g.sustained_write_mbps.n,
        g.write_intervals_mbps.iter().map(|m| format!("{m:.0}")).collect::<Vec<_>>(),
        g.baseline_latency_us.median,
        g.baseline_latency_us.spread_pct,
        g.baseline_latency_us.n,
        g.settled_at_s,
        g.recommended_gc_settle_s
    );
    for p in &g.settle_probes {
        println!(
            "  probe at {:.2} s: {:.1} µs ±{:.1} % N={}",
            p.at_s, p.latency_us.median, p.latency_us.spread_pct, p.latency_us.n
        );
    }

    // Every way to ask for writes to the drives that hold data was refused, with the reason.
    for kind in ["FS", "PART"] {
        let reason = if kind == "FS" {
            "ext2/3/4 signature at byte 0x438"
        } else {
            "it has partitions"
        };
        for way in [
            "serial",
            "namespace",
            "controller",
            "bdf",
            "target",
            "with-blank",
            "write-drives",
            "gc",
            "gc-write-drives",
        ] {
            let text = read(&res, &format!("safety-{kind}-{way}.txt"));
            assert!(
                text.contains("rc=1") && text.contains("refused") && text.contains(reason),
                "{kind} {way}: {text}"
            );
        }
        for way in ["noflag", "noflag-target", "gc-noflag"] {
            let text = read(&res, &format!("safety-{kind}-{way}.txt"));
            assert!(text.contains("rc=0"), "{kind} {way}: {text}");
            let q = profile(&res, &format!("safety-{kind}-{way}"));
            assert_eq!(q.measurements_of(PathId::NvmeWrite).count(), 0);
            assert!(q.waivers_of(PathId::NvmeWrite).next().is_some());
            assert!(q.nvme.long_tests.is_empty());
        }
        let q = profile(&res, &format!("safety-{kind}-gc-noflag"));
        assert!(
            q.waivers_of(PathId::NvmeWrite)
                .any(|w| w.scope.as_deref() == Some("gc-settle")
                    && w.reason.contains("writes were not allowed")),
            "{:?}",
            q.waived
        );
    }
    let text = read(&res, "safety-PART-partition.txt");
    assert!(
        text.contains("rc=1") && text.contains("is a partition"),
        "{text}"
    );
    let text = read(&res, "safety-PART-partition-target.txt");
    assert!(text.contains("rc=1") && text.contains("refused"), "{text}");
    let text = read(&res, "safety-FS-mounted.txt");
    assert!(text.contains("rc=1") && text.contains("mounted"), "{text}");
    let text = read(&res, "safety-write-not-read.txt");
    assert!(
        text.contains("rc=1") && text.contains("which --drives leaves out"),
        "{text}"
    );

    // Writes named apart from the reads, while a drive is mounted: every drive is read, the
    // mounted one too; only the drive named is written; no drive selection narrows the run.
    let text = read(&res, "apart.txt");
    assert!(text.contains("rc=0"), "{text}");
    let a = profile(&res, "apart");
    assert_eq!(a.provenance.options["write_drives"], "HWCN1A");
    let mut not_written: Vec<&str> = a.provenance.options["write_drives_left_out"]
        .split(',')
        .collect();
    not_written.sort_unstable();
    let mut others: Vec<&str> = topo
        .nvme
        .iter()
        .filter(|d| d.serial.as_deref().map(str::trim) != Some("HWCN1A"))
        .map(|d| d.name.as_str())
        .collect();
    others.sort_unstable();
    assert_eq!(not_written, others, "the drives not written are named");
    let before = read(&res, "apart-sums-before.txt");
    assert_eq!(before.lines().count(), 2, "{before}");
    assert_eq!(
        before,
        read(&res, "apart-sums-after.txt"),
        "the drives only read keep their bytes"
    );
    assert!(!a.provenance.options.contains_key("drives"));
    let narrowed_by = a.provenance.narrowed_by();
    assert!(
        narrowed_by.contains(&"--paths nvme_read,nvme_write".to_string())
            && !narrowed_by.iter().any(|n| n.contains("drives")),
        "the test's knobs narrow it, no drive selection does: {narrowed_by:?}"
    );
    let mut all: Vec<String> = bdf_of.values().cloned().collect();
    all.sort();
    let mut read_all = a.nvme.read_drives_used["5_drive"].clone();
    read_all.sort();
    assert_eq!(read_all, all, "every drive read, the mounted one too");
    assert!(a
        .measurements_of(PathId::NvmeRead)
        .any(|m| m.spec.drives() == [bdf_of["HWCFS"].clone()]));
    let written: Vec<_> = a.measurements_of(PathId::NvmeWrite).collect();
    assert!(!written.is_empty(), "{text}");
    assert!(
        written
            .iter()
            .all(|m| m.spec.drives() == [bdf_of["HWCN1A"].clone()]),
        "{written:?}"
    );
    // `merge`'s rule for carrying a write run's write ceilings into a later read-only profile,
    // on two real profiles of this machine: the write ceilings describe the drives the read-only
    // run saw (the same serials, model, firmware, link, format and place).
    let read_only = profile(&res, "read");
    match hwc_model::carry::write_carry(&read_only, &a) {
        Some(hwc_model::carry::WriteCarry::Carried { keys, drives }) => {
            assert_eq!(drives, ["HWCN1A"]);
            assert!(
                keys.iter().any(|k| k == "nvme_raw_1drive_write_gbps"),
                "{keys:?}"
            );
        }
        other => panic!("the write ceilings are not carried: {other:?}"),
    }

    // A user without privileges: sysfs detection works; Identify, Get Features and the reads
    // are refused by the kernel and end as sysfs facts and waivers with the remedy.
    let id = read(&res, "nonroot-id.txt");
    assert!(id.starts_with("uid=1000"), "{id}");
    assert!(read(&res, "nonroot-detect.err").contains("rc=0"));
    let nt: Topology = serde_json::from_str(&read(&res, "nonroot-detect.json")).unwrap();
    assert_eq!(nt.nvme.len(), 5);
    assert!(nt
        .nvme
        .iter()
        .all(|d| d.serial.is_some() && d.numa_node.is_some()));
    // Without root only the config header is readable: each hop says so and guesses nothing.
    for path in &nt.topology.pcie_paths {
        for h in &path.hops {
            assert!(
                h.config.unreadable.is_some() && h.config.mps_bytes.is_none(),
                "{path:#?}"
            );
        }
    }
    assert!(nt.topology.links.iter().all(|l| l.min_mps_bytes.is_none()));
    let text = read(&res, "nonroot.txt");
    assert!(
        text.contains("rc=0") && text.contains("0 measured"),
        "{text}"
    );
    let q = profile(&res, "nonroot");
    assert_eq!(q.measurements.len(), 0);
    let waived: Vec<_> = q.waivers_of(PathId::NvmeRead).collect();
    for case in ["latency", "read-cache", "power-states", "1drive"] {
        assert!(
            waived
                .iter()
                .any(|w| w.scope.as_deref().is_some_and(|s| s.contains(case))
                    && w.reason.contains("Permission denied")
                    && w.hint.as_deref().is_some_and(|h| h.contains("disk"))),
            "{case}: {waived:?}"
        );
    }
    for d in &q.nvme.drives {
        assert_eq!(d.mdts_source.as_deref(), Some("sysfs"), "{}", d.name);
        assert!(d.mdts_bytes.is_some() && d.power_states.is_empty());
        let f = d.power_features.as_ref().unwrap();
        assert!(
            f.not_readable
                .iter()
                .any(|n| n.contains("Permission denied")),
            "{f:?}"
        );
    }
    assert!(q.provenance.environment["nvme_identify_failed"]
        .value
        .contains("Permission denied"));

    bind_and_restore(&res);
    spdk_engine_binds_for_its_cases_only(&res);

    // And not one byte changed: the whole drives, inside the guest and as image files.
    assert_eq!(read(&res, "sums-before.txt"), read(&res, "sums-after.txt"));
    assert_eq!(
        read(&res, "host-sums-before.txt"),
        read(&res, "host-sums-after.txt")
    );
}

/// `hwceiling bind` in the guest (tools/vm/bind-test.sh): drives with data or in use refused and
/// untouched; the blank drives on vfio-pci with hugepages while the command runs; a signal at
/// every step, a second signal and SIGKILL + `hwceiling restore` each leave every drive back on
/// `nvme`, the hugepages as they were and no journal; no drive's bytes changed.
fn bind_and_restore(res: &Path) {
    let before = read(res, "bind-state-before.txt");
    let before = before.trim();
    assert_eq!(
        before, "drivers nvme nvme journal none hugepages 0 0",
        "the guest's start"
    );
    let line = |text: &str, prefix: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line in:\n{text}"))
            .trim()
            .to_string()
    };
    for (case, why) in [
        ("fs", "it carries data: ext2/3/4 signature at byte 0x438"),
        ("fs-with-blank", "nvme"),
        ("fs-mounted", "it is mounted or in use as swap (/mnt)"),
        ("part", "it has partitions (nvme"),
        ("held", "sleep (pid "),
        (
            "uio",
            "no IOMMU protection): accept that with --allow-no-iommu",
        ),
    ] {
        let t = read(res, &format!("bind-refuse-{case}.txt"));
        assert!(
            t.contains("rc=1") && t.contains("refused to hand to"),
            "{case}:\n{t}"
        );
        assert!(t.contains(why), "{case}: no `{why}`:\n{t}");
        assert_eq!(
            t.lines().last().unwrap().trim(),
            before,
            "{case} changed nothing:\n{t}"
        );
    }
    assert!(read(res, "bind-refuse-part.txt").contains("MBR partition table signature"));
    assert!(read(res, "bind-refuse-fs-with-blank.txt").contains("HWCFS"));

    let ok = read(res, "bind-ok.txt");
    assert!(
        ok.contains("inside vfio-pci vfio-pci vfio-groups 2 hugetlbfs 1 hugepages 4 4"),
        "both drives on vfio-pci, each node with its 8 MiB of hugepages, hugetlbfs mounted:\n{ok}"
    );
    assert!(
        ok.contains("moved from nvme to vfio-pci") && ok.contains("rc=7"),
        "{ok}"
    );
    assert_eq!(ok.lines().last().unwrap().trim(), before, "{ok}");

    // (case, what the system looked like when the signal was sent)
    for (case, at) in [
        ("hugepages-term", "drivers nvme nvme"),
        ("recorded-int", "journal left"),
        ("unbound-term", "drivers none nvme journal left"),
        ("bound-int", "drivers vfio-pci nvme journal left"),
        (
            "running-term",
            "drivers vfio-pci nvme journal left hugepages 4 0",
        ),
        ("second-term", "drivers none nvme journal left"),
    ] {
        let t = read(res, &format!("bind-sig-{case}.txt"));
        assert!(t.contains("rc=130"), "{case}: exit 130:\n{t}");
        assert!(
            line(&t, "at-signal ").contains(at),
            "{case}: signalled at `{at}`:\n{t}"
        );
        assert_eq!(line(&t, "after "), before, "{case}: all put back:\n{t}");
    }
    let t = read(res, "bind-sig-second-term.txt");
    assert!(t.contains("restored: 0000:11:00.0 is back on nvme"), "{t}");

    let t = read(res, "bind-kill.txt");
    assert_eq!(
        line(&t, "after-kill "),
        "drivers vfio-pci nvme journal left hugepages 4 0",
        "{t}"
    );
    assert!(
        t.contains("profile-rc=1") && t.contains("run `hwceiling restore` first"),
        "{t}"
    );
    assert!(
        t.contains("0000:11:00.0 is back on nvme") && t.contains("restore-rc=0"),
        "{t}"
    );
    assert_eq!(line(&t, "after-restore "), before, "{t}");

    assert_eq!(
        read(res, "bind-sums-before.txt"),
        read(res, "bind-sums-after.txt"),
        "no drive's bytes changed"
    );
}

/// The spdk-perf engine in a profile, with a stand-in perf (tools/vm/fake-perf.sh; the CI machine
/// has no SPDK): the drives are on vfio-pci whenever "perf" runs and back on `nvme` after, with
/// the hugepages as they were and no journal; the profile records each drive's driver at the end;
/// a SIGTERM while "perf" runs puts everything back too.
fn spdk_engine_binds_for_its_cases_only(res: &Path) {
    let before = "drivers nvme nvme journal none hugepages 0 0";
    let t = read(res, "spdk-fake.txt");
    assert!(t.contains("rc=0"), "{t}");
    assert!(t.contains(&format!("after {before}")), "{t}");
    let seen = read(res, "fake-perf-seen.txt");
    let (a, b) = ("0000:11:00.0", "0000:21:00.0");
    for bdf in [a, b] {
        assert!(seen.contains(&format!("{bdf} vfio-pci")), "{seen}");
    }
    // Every perf run of the first profile, and the interrupted one's (its drive only).
    assert!(
        seen.lines().all(|l| l.ends_with(" vfio-pci")),
        "a drive was not on vfio-pci while perf ran:\n{seen}"
    );
    let p = profile(res, "spdkfake");
    let engine = |m: &&hwc_model::Measurement| m.engine.as_str() == "spdk-perf";
    // 3 latency probes per drive, 1 and 2 drives at 128 KiB QD 16; the kernel's too.
    assert_eq!(p.measurements.iter().filter(engine).count(), 8);
    assert_eq!(
        p.measurements
            .iter()
            .filter(|m| m.engine.as_str() == "io-uring")
            .count(),
        8
    );
    let end = &p.provenance.environment["spdk.drivers_at_end"];
    assert_eq!(end.value, format!("{a}=nvme,{b}=nvme"));
    assert!(
        end.about
            .as_deref()
            .is_some_and(|s| s.contains("is back on nvme")
                && s.contains("hugetlbfs at /dev/hugepages is unmounted")),
        "{end:?}"
    );

    // One signal (the run stops and puts back), and two (perf is stopped, everything put back
    // at once).
    for case in ["spdk-term.txt", "spdk-term2.txt"] {
        let t = read(res, case);
        let line = |prefix: &str| {
            t.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .unwrap_or_else(|| panic!("no `{prefix}` line in:\n{t}"))
                .trim()
                .to_string()
        };
        assert!(
            line("at-signal ").starts_with("drivers vfio-pci nvme journal left"),
            "{case}: signalled while perf ran:\n{t}"
        );
        assert_eq!(line("after "), before, "{case}: all put back:\n{t}");
        assert!(t.contains("rc=130"), "{case}: {t}");
    }
    assert!(
        read(res, "spdk-term2.txt").contains("restored: 0000:11:00.0 is back on nvme"),
        "the second signal restored at once"
    );

    // --leave-bound: left on vfio-pci and journaled, said in the profile; the next run refuses
    // until `hwceiling restore`, which puts it back.
    let t = read(res, "spdk-leave.txt");
    assert!(t.contains("rc=0\n"), "{t}");
    assert!(
        t.contains("after-run drivers vfio-pci nvme journal left"),
        "left bound:\n{t}"
    );
    assert!(
        t.contains("next-rc=1") && t.contains("run `hwceiling restore` first"),
        "the next run refuses and names the fix:\n{t}"
    );
    assert!(t.contains("restore-rc=0"), "{t}");
    assert!(t.contains(&format!("after-restore {before}")), "{t}");
    let p = profile(res, "spdkleave");
    let end = &p.provenance.environment["spdk.drivers_at_end"];
    assert_eq!(end.value, format!("{a}=vfio-pci"));
    assert!(
        end.about
            .as_deref()
            .is_some_and(|s| s.contains("--leave-bound")),
        "{end:?}"
    );
}
