//! End to end on real (emulated) NVMe drives: boots the QEMU test bed of `tools/vm/` — two NUMA
//! nodes, two PCIe expander root complexes, five NVMe controllers — with this build of
//! hwceiling inside, and checks what hwceiling saw in the real kernel's sysfs and Identify
//! answers, what it measured, and that every way of asking it to write to the drive with a
//! filesystem or the partitioned drive was refused with the drive's bytes unchanged.
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
        bdf_of.insert(e.serial, bdf);
    }
    let part = topo
        .nvme
        .iter()
        .find(|d| d.serial.as_deref().map(str::trim) == Some("HWCPART"))
        .unwrap();
    assert_eq!(part.namespaces[0].partitions.len(), 1);
    assert!(part.in_use, "a partitioned drive is in use");

    // Path 1 and Step 3 in the guest: Identify's MDTS, same-root groups, the BDFs per count.
    let p = profile(&res, "read");
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

    // Path 2 on the blank drive named with the flag.
    let w = profile(&res, "write");
    let writes: Vec<_> = w.measurements_of(PathId::NvmeWrite).collect();
    assert_eq!(writes.len(), 1, "{}", read(&res, "write.txt"));
    assert_eq!(writes[0].params.drives, [bdf_of["HWCN1A"].clone()]);

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
        ] {
            let text = read(&res, &format!("safety-{kind}-{way}.txt"));
            assert!(
                text.contains("rc=1") && text.contains("refused") && text.contains(reason),
                "{kind} {way}: {text}"
            );
        }
        for way in ["noflag", "noflag-target"] {
            let text = read(&res, &format!("safety-{kind}-{way}.txt"));
            assert!(text.contains("rc=0"), "{kind} {way}: {text}");
            let q = profile(&res, &format!("safety-{kind}-{way}"));
            assert_eq!(q.measurements_of(PathId::NvmeWrite).count(), 0);
            assert!(q.waivers_of(PathId::NvmeWrite).next().is_some());
        }
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

    // And not one byte changed: the whole drives, inside the guest and as image files.
    assert_eq!(read(&res, "sums-before.txt"), read(&res, "sums-after.txt"));
    assert_eq!(
        read(&res, "host-sums-before.txt"),
        read(&res, "host-sums-after.txt")
    );
}
