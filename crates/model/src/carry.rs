//! Write ceilings carried from an older run.
//!
//! The NVMe write sweep destroys what a drive holds, so a node is write-profiled when its drives
//! are blank (at bring-up) and read-profiled after that. A later read-only profile is the one to
//! serve (its reads are fresh), but it has no write ceilings. Those of the newest write run may
//! stand in for them, as long as they describe the drives the machine has now: the same host,
//! and every drive that run wrote still there, recognised by its serial number, as it was: the
//! same model and firmware, and (where both runs recorded them) link, block size, capacity,
//! whether it has a volatile write cache, PCIe root and NUMA node. A serial number, model or
//! firmware that is blank counts as not recorded, and a serial number on two drives of a run
//! recognises neither. [`write_carry`] is that rule; [`merge`] applies it once, when a user
//! runs `hwceiling merge`, and writes each carried ceiling into the newer profile marked
//! `carried_from` that run, so the file says what it holds. They were measured on blank drives:
//! drives that hold data since may write slower.

use crate::ceiling::CarriedFrom;
use crate::plan::PathId;
use crate::profile::{Completeness, NvmeDriveProfile, Profile};

/// What becomes of an older run's write ceilings beside a newer profile without any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteCarry {
    /// They stand in: these keys, from the older profile, measured on the drives with these
    /// serial numbers (blank then).
    Carried {
        keys: Vec<String>,
        drives: Vec<String>,
    },
    /// They do not describe the machine the newer profile ran on, and why (one phrase).
    Refused { reason: String },
}

/// The host a profile ran on (`platform.hostname`, else `provenance.hostname`).
pub fn host_of(p: &Profile) -> Option<&str> {
    p.platform
        .hostname
        .as_deref()
        .or(p.provenance.hostname.as_deref())
}

/// The keys of `p`'s ceilings of the NVMe write sweep (their records say path `nvme_write`).
pub fn write_ceilings(p: &Profile) -> impl Iterator<Item = &String> {
    p.ceilings.keys().filter(|k| {
        p.ceiling_record(k)
            .is_some_and(|r| r.meta.path == Some(PathId::NvmeWrite))
    })
}

/// True when `p` has a ceiling of the NVMe write sweep.
pub fn has_write_ceilings(p: &Profile) -> bool {
    write_ceilings(p).next().is_some()
}

/// The write ceilings of `older` that may be served beside `newer`'s. `None` when there is
/// nothing to decide: `newer` has write ceilings of its own (a write run's, fresher), or `older`
/// has none.
pub fn write_carry(newer: &Profile, older: &Profile) -> Option<WriteCarry> {
    if has_write_ceilings(newer) {
        return None;
    }
    let keys: Vec<String> = write_ceilings(older).cloned().collect();
    if keys.is_empty() {
        return None;
    }
    Some(match written_drives_now(newer, older) {
        Ok(drives) => WriteCarry::Carried { keys, drives },
        Err(reason) => WriteCarry::Refused { reason },
    })
}

/// Why [`merge`] carries nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    #[error("nothing to carry: the newer profile has write ceilings of its own")]
    NewerHasWrites,
    #[error("nothing to carry: the older profile has no write ceilings")]
    OlderHasNoWrites,
    #[error(
        "the {which} profile is of {why}: write ceilings are carried only from a complete run \
         to a complete run"
    )]
    Incomplete { which: &'static str, why: String },
    #[error("the older profile's write ceilings do not describe the newer run's drives: {0}")]
    Refused(String),
    #[error("the newer profile already holds measurement `{0}`, which a carried ceiling names")]
    Clash(String),
    #[error(
        "the older profile's write ceilings were themselves carried from {0}: merge from that \
         write run"
    )]
    CarriedAgain(String),
}

/// `newer` with the write ceilings of `older` (whose file is named `older_file`) carried in,
/// where [`write_carry`] accepts them: each with its record, marked
/// [`crate::CeilingRecord::carried_from`], and the measurements its source names (with their
/// engines' declarations where `newer` lacks them), so the result reads as a profile on its
/// own. Returns it with the keys carried.
pub fn merge(
    newer: &Profile,
    older: &Profile,
    older_file: &str,
) -> Result<(Profile, Vec<String>), MergeError> {
    for (which, p) in [("newer", newer), ("older", older)] {
        let c = Completeness::of(p);
        if !c.complete() {
            return Err(MergeError::Incomplete {
                which,
                why: c.describe(),
            });
        }
    }
    // A merged profile lists no drives it wrote: its write ceilings come from the run it names.
    if let Some(c) = write_ceilings(older)
        .filter_map(|k| older.ceiling_record(k)?.carried_from.as_ref())
        .next()
    {
        return Err(MergeError::CarriedAgain(c.file.clone()));
    }
    let (keys, drives) = match write_carry(newer, older) {
        None if has_write_ceilings(newer) => return Err(MergeError::NewerHasWrites),
        None => return Err(MergeError::OlderHasNoWrites),
        Some(WriteCarry::Refused { reason }) => return Err(MergeError::Refused(reason)),
        Some(WriteCarry::Carried { keys, drives }) => (keys, drives),
    };
    let from = CarriedFrom {
        file: older_file.to_string(),
        finished_at: older.provenance.finished_at.clone(),
        drives,
    };
    let mut out = newer.clone();
    for key in &keys {
        let (Some(&value), Some(record)) = (older.ceilings.get(key), older.ceiling_record(key))
        else {
            continue;
        };
        let mut record = record.clone();
        let named: Vec<&String> = match &record.source {
            Some(crate::CeilingSource::Measured { measurement }) => vec![measurement],
            Some(crate::CeilingSource::Derived { inputs, .. }) => inputs.iter().collect(),
            None => vec![],
        };
        for name in named {
            let Some(m) = older.measurement(name) else {
                continue;
            };
            match out.measurement(name) {
                Some(have) if have == m => continue,
                Some(_) => return Err(MergeError::Clash(name.clone())),
                None => {}
            }
            if out.engine(&m.engine).is_none() {
                if let Some(decl) = older.engine(&m.engine) {
                    out.engines.push(decl.clone());
                }
            }
            out.measurements.push(m.clone());
        }
        record.carried_from = Some(from.clone());
        out.ceilings.insert(key.clone(), value);
        out.ceiling_records.insert(key.clone(), record);
    }
    Ok((out, keys))
}

/// The serial numbers of the drives `older` wrote, when each is in `newer`'s run as it was
/// then; else why not.
fn written_drives_now(newer: &Profile, older: &Profile) -> Result<Vec<String>, String> {
    match (host_of(newer), host_of(older)) {
        (Some(n), Some(o)) if n == o => {}
        (Some(n), Some(o)) => return Err(format!("its run was on host {o}, this one on {n}")),
        _ => return Err("a profile does not name its host".to_string()),
    }
    // Drives are listed by BDF, or by controller name where they have none (the plan's key).
    let mut written: Vec<&str> = older
        .nvme
        .write_drives_used
        .values()
        .flatten()
        .map(String::as_str)
        .collect();
    written.sort_unstable();
    written.dedup();
    if written.is_empty() {
        return Err("it does not list the drives it wrote".to_string());
    }
    let mut serials = Vec::new();
    for key in written {
        let Some(then) = older
            .nvme
            .drives
            .iter()
            .find(|d| d.bdf.as_deref() == Some(key) || d.name == key)
        else {
            return Err(format!("it wrote {key}, which its drive list lacks"));
        };
        let Some(serial) = recorded(&then.serial) else {
            return Err(format!(
                "it wrote {key} ({}), whose serial number it does not record",
                then.name
            ));
        };
        if with_serial(older, serial).count() > 1 {
            return Err(format!(
                "serial number {serial} names more than one drive of its run"
            ));
        }
        if serials.contains(&serial) {
            continue; // the same drive, listed under another key
        }
        let mut now = with_serial(newer, serial);
        let (Some(now), None) = (now.next(), now.next()) else {
            return Err(match with_serial(newer, serial).count() {
                0 => format!("drive {serial}, which it wrote, is not among this run's drives"),
                _ => format!("serial number {serial} names more than one drive of this run"),
            });
        };
        if let Some(what) = changed(then, now) {
            return Err(format!("drive {serial}, which it wrote, {what}"));
        }
        serials.push(serial);
    }
    let mut serials: Vec<String> = serials.into_iter().map(str::to_string).collect();
    serials.sort();
    Ok(serials)
}

/// A text field as recorded: trimmed, `None` when blank (Identify pads with spaces, and a
/// drive may leave a field empty).
fn recorded(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// The drives of `p` whose serial number is `serial`.
fn with_serial<'a>(p: &'a Profile, serial: &'a str) -> impl Iterator<Item = &'a NvmeDriveProfile> {
    p.nvme
        .drives
        .iter()
        .filter(move |d| recorded(&d.serial) == Some(serial))
}

/// What differs between a drive then and now that its write bandwidth depends on, in words
/// (`has other firmware now (1.0 then, 2.0 now)`); `None` when nothing does. The model and
/// firmware must be known both times; the rest is compared where both runs recorded it.
fn changed(then: &NvmeDriveProfile, now: &NvmeDriveProfile) -> Option<String> {
    fn show<T: std::fmt::Display>(v: &Option<T>) -> String {
        v.as_ref().map_or("unknown".into(), |v| v.to_string())
    }
    fn differ<T: PartialEq + std::fmt::Display>(
        what: &str,
        then: &Option<T>,
        now: &Option<T>,
    ) -> Option<String> {
        (then.is_some() && now.is_some() && then != now)
            .then(|| format!("has {what} now ({} then, {} now)", show(then), show(now)))
    }
    for (what, then, now) in [
        ("model", &then.model, &now.model),
        ("firmware revision", &then.firmware_rev, &now.firmware_rev),
    ] {
        let (Some(then), Some(now)) = (recorded(then), recorded(now)) else {
            return Some(format!("has no recorded {what} in one of the runs"));
        };
        if then != now {
            return Some(format!("has another {what} now ({then} then, {now} now)"));
        }
    }
    differ("another link generation", &then.pcie_gen, &now.pcie_gen)
        .or_else(|| differ("another link width", &then.pcie_width, &now.pcie_width))
        .or_else(|| differ("another block size", &then.block_size, &now.block_size))
        .or_else(|| differ("another capacity (TB)", &then.capacity_tb, &now.capacity_tb))
        .or_else(|| {
            differ(
                "another volatile write cache presence",
                &then.vwc_enabled,
                &now.vwc_enabled,
            )
        })
        .or_else(|| differ("another PCIe root", &then.root, &now.root))
        .or_else(|| differ("another NUMA node", &then.numa_node, &now.numa_node))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::NvmeDriveProfile;

    fn drive(bdf: &str, serial: Option<&str>, firmware: &str) -> NvmeDriveProfile {
        NvmeDriveProfile {
            bdf: Some(bdf.into()),
            name: format!("nvme-{bdf}"),
            model: Some("Samsung PM1743".into()),
            firmware_rev: Some(firmware.into()),
            serial: serial.map(Into::into),
            ..Default::default()
        }
    }

    fn profile(host: &str, drives: Vec<NvmeDriveProfile>) -> Profile {
        use crate::profile::*;
        Profile {
            schema_version: crate::SCHEMA_VERSION,
            provenance: Provenance::default(),
            platform: crate::topology::Platform {
                hostname: Some(host.into()),
                ..Default::default()
            },
            cpu_features: Default::default(),
            gpus: Default::default(),
            nvme: NvmeProfile {
                drives,
                ..Default::default()
            },
            bar1: Default::default(),
            pci_bar: Default::default(),
            gdrcopy: GdrcopyProfile::default(),
            gds: GdsProfile::default(),
            host_ram: HostRamProfile::default(),
            topology: Default::default(),
            engines: vec![],
            ceilings: [("nvme_raw_1drive_read_gbps".to_string(), 6.9)].into(),
            ceiling_records: Default::default(),
            measurements: vec![],
            failures: vec![],
            waived: vec![],
            tools: vec![],
            warnings: vec![],
        }
    }

    /// A write run on `host` that wrote the drives at `bdfs` (1- and 2-drive counts).
    fn write_run(host: &str, drives: Vec<NvmeDriveProfile>, bdfs: &[&str]) -> Profile {
        let mut p = profile(host, drives);
        p.ceilings.insert("nvme_raw_1drive_write_gbps".into(), 5.1);
        p.ceilings.insert("nvme_raw_2drive_write_gbps".into(), 10.0);
        p.ceilings
            .insert("nvme_optimal_write_chunk_bytes".into(), 131072.0);
        // Records as the builder writes them (what the keys name).
        p.ceiling_records = p
            .ceilings
            .iter()
            .map(|(k, v)| {
                let record = crate::CeilingRecord {
                    carried_from: None,
                    value: *v,
                    meta: crate::v1::ceiling_meta(k, None),
                    engine: Some(crate::EngineId::new("io-uring")),
                    source: None,
                };
                (k.clone(), record)
            })
            .collect();
        p.nvme
            .write_drives_used
            .insert("1_drive".into(), vec![bdfs[0].to_string()]);
        p.nvme.write_drives_used.insert(
            "2_drive".into(),
            bdfs.iter().map(|b| b.to_string()).collect(),
        );
        p
    }

    fn two_drives(firmware: &str) -> Vec<NvmeDriveProfile> {
        vec![
            drive("0000:41:00.0", Some("S1"), firmware),
            drive("0000:42:00.0", Some("S2"), firmware),
        ]
    }

    const BDFS: [&str; 2] = ["0000:41:00.0", "0000:42:00.0"];

    /// Every write ceiling of [`write_run`], carried, measured on both drives.
    fn carried_both() -> Option<WriteCarry> {
        Some(WriteCarry::Carried {
            keys: vec![
                "nvme_optimal_write_chunk_bytes".into(),
                "nvme_raw_1drive_write_gbps".into(),
                "nvme_raw_2drive_write_gbps".into(),
            ],
            drives: vec!["S1".into(), "S2".into()],
        })
    }

    #[test]
    fn carries_every_write_ceiling_to_a_read_only_run_of_the_same_drives() {
        let older = write_run("node7", two_drives("1.0"), &BDFS);
        // The drives were renumbered (other BDFs): the serials recognise them.
        let newer = profile(
            "node7",
            vec![
                drive("0000:81:00.0", Some("S2"), "1.0"),
                drive("0000:82:00.0", Some("S1"), "1.0"),
                drive("0000:83:00.0", Some("S3"), "1.0"),
            ],
        );
        assert_eq!(write_carry(&newer, &older), carried_both());
    }

    #[test]
    fn nothing_to_decide_when_the_newer_run_wrote_or_the_older_did_not() {
        let older = write_run("node7", two_drives("1.0"), &BDFS);
        let newer_writer = write_run("node7", two_drives("1.0"), &BDFS[..1]);
        assert_eq!(write_carry(&newer_writer, &older), None);
        let read_only = profile("node7", two_drives("1.0"));
        assert_eq!(write_carry(&read_only, &read_only.clone()), None);
    }

    #[test]
    fn refuses_what_does_not_describe_the_machine_now() {
        let older = write_run("node7", two_drives("1.0"), &BDFS);
        let refused = |newer: &Profile, older: &Profile| match write_carry(newer, older) {
            Some(WriteCarry::Refused { reason }) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            refused(&profile("node8", two_drives("1.0")), &older),
            "its run was on host node7, this one on node8"
        );
        let one_gone = profile("node7", two_drives("1.0")[..1].to_vec());
        assert_eq!(
            refused(&one_gone, &older),
            "drive S2, which it wrote, is not among this run's drives"
        );
        assert_eq!(
            refused(&profile("node7", two_drives("2.0")), &older),
            "drive S1, which it wrote, has another firmware revision now (1.0 then, 2.0 now)"
        );
        let mut other_model = two_drives("1.0");
        other_model[1].model = Some("Kioxia CM7".into());
        assert_eq!(
            refused(&profile("node7", other_model), &older),
            "drive S2, which it wrote, has another model now (Samsung PM1743 then, Kioxia CM7 now)"
        );
        let mut narrower = two_drives("1.0");
        for d in &mut narrower {
            d.pcie_width = Some(4);
        }
        let mut wide = two_drives("1.0");
        for d in &mut wide {
            d.pcie_width = Some(8);
        }
        assert_eq!(
            refused(
                &profile("node7", narrower),
                &write_run("node7", wide, &BDFS)
            ),
            "drive S1, which it wrote, has another link width now (8 then, 4 now)"
        );
        let mut no_firmware = two_drives("1.0");
        no_firmware[1].firmware_rev = None;
        assert_eq!(
            refused(&profile("node7", no_firmware), &older),
            "drive S2, which it wrote, has no recorded firmware revision in one of the runs"
        );
        let mut no_serial = two_drives("1.0");
        no_serial[0].serial = None;
        let older_unnamed = write_run("node7", no_serial, &BDFS);
        assert_eq!(
            refused(&profile("node7", two_drives("1.0")), &older_unnamed),
            "it wrote 0000:41:00.0 (nvme-0000:41:00.0), whose serial number it does not record"
        );
        let mut unlisted = older.clone();
        unlisted.nvme.write_drives_used.clear();
        assert_eq!(
            refused(&profile("node7", two_drives("1.0")), &unlisted),
            "it does not list the drives it wrote"
        );
        let mut nameless = profile("node7", two_drives("1.0"));
        nameless.platform.hostname = None;
        assert_eq!(
            refused(&nameless, &older),
            "a profile does not name its host"
        );
        // The host recorded in the provenance stands in for the platform's.
        nameless.provenance.hostname = Some("node7".into());
        assert!(matches!(
            write_carry(&nameless, &older),
            Some(WriteCarry::Carried { .. })
        ));
    }

    #[test]
    fn a_blank_field_is_not_recorded_and_a_shared_serial_recognises_no_drive() {
        let refused = |newer: &Profile, older: &Profile| match write_carry(newer, older) {
            Some(WriteCarry::Refused { reason }) => reason,
            other => panic!("{other:?}"),
        };
        // A blank serial (Identify's padding, trimmed) written then is no serial: it would
        // recognise any other blank-serial drive, a replacement in another slot, say.
        let mut blank = two_drives("1.0");
        blank[0].serial = Some("   ".into());
        let mut replaced = two_drives("1.0");
        replaced[0].serial = Some(String::new());
        replaced[0].bdf = Some("0000:81:00.0".into());
        assert_eq!(
            refused(
                &profile("node7", replaced),
                &write_run("node7", blank, &BDFS)
            ),
            "it wrote 0000:41:00.0 (nvme-0000:41:00.0), whose serial number it does not record"
        );
        // Blank firmware is no firmware, even on both sides.
        let mut blank_firmware = two_drives(" ");
        blank_firmware[0].firmware_rev = Some("1.0".into());
        assert_eq!(
            refused(
                &profile("node7", blank_firmware.clone()),
                &write_run("node7", blank_firmware, &BDFS)
            ),
            "drive S2, which it wrote, has no recorded firmware revision in one of the runs"
        );
        // Two drives written with one serial (a vendor that repeats them): not two drives now.
        let mut shared = two_drives("1.0");
        shared[1].serial = Some("S1".into());
        assert_eq!(
            refused(
                &profile("node7", two_drives("1.0")[..1].to_vec()),
                &write_run("node7", shared.clone(), &BDFS)
            ),
            "serial number S1 names more than one drive of its run"
        );
        // One drive written, but two drives of this run report its serial: which is it?
        let older = write_run("node7", two_drives("1.0"), &BDFS[..1]);
        assert_eq!(
            refused(&profile("node7", shared), &older),
            "serial number S1 names more than one drive of this run"
        );
        // Padding around a serial is not part of it.
        let mut padded = two_drives("1.0");
        padded[0].serial = Some(" S1 ".into());
        assert!(matches!(
            write_carry(&profile("node7", padded), &older),
            Some(WriteCarry::Carried { drives, .. }) if drives == ["S1"]
        ));
    }

    #[test]
    fn a_drive_without_a_bdf_is_known_by_its_name() {
        let mut drives = two_drives("1.0");
        drives[0].bdf = None;
        let older = write_run("node7", drives, &["nvme-0000:41:00.0", "0000:42:00.0"]);
        assert_eq!(
            write_carry(&profile("node7", two_drives("1.0")), &older),
            carried_both()
        );
    }

    #[test]
    fn merge_writes_the_carried_ceilings_into_the_newer_profile_marked_with_their_run() {
        let mut older = write_run("node7", two_drives("1.0"), &BDFS);
        older.provenance.finished_at = "2026-11-28T10:00:00+00:00".into();
        let newer = profile("node7", two_drives("1.0"));
        let (merged, keys) = merge(&newer, &older, "hardware_profile_2026-11-28.yaml").unwrap();
        let Some(WriteCarry::Carried { keys: want, .. }) = carried_both() else {
            unreachable!()
        };
        assert_eq!(keys, want);
        for key in &keys {
            assert_eq!(merged.ceilings[key], older.ceilings[key]);
            let r = merged.ceiling_record(key).unwrap();
            assert_eq!(
                r.carried_from,
                Some(CarriedFrom {
                    file: "hardware_profile_2026-11-28.yaml".into(),
                    finished_at: "2026-11-28T10:00:00+00:00".into(),
                    drives: vec!["S1".into(), "S2".into()],
                })
            );
        }
        // The newer run's own ceilings are as they were, and nothing else is carried.
        assert_eq!(merged.ceilings["nvme_raw_1drive_read_gbps"], 6.9);
        assert_eq!(merged.ceilings.len(), newer.ceilings.len() + keys.len());
        // Merged again: it has write ceilings now, so there is nothing to carry.
        assert_eq!(
            merge(&merged, &older, "x.yaml").unwrap_err(),
            MergeError::NewerHasWrites
        );
        // A later read-only run is merged from the write run, not from the merged profile.
        let later = profile("node7", two_drives("1.0"));
        assert_eq!(
            merge(&later, &merged, "merged.yaml").unwrap_err(),
            MergeError::CarriedAgain("hardware_profile_2026-11-28.yaml".into())
        );
    }

    #[test]
    fn merge_refuses_other_drives_incomplete_runs_and_an_older_run_without_writes() {
        let older = write_run("node7", two_drives("1.0"), &BDFS);
        assert_eq!(
            merge(&profile("node7", two_drives("2.0")), &older, "o.yaml").unwrap_err(),
            MergeError::Refused(
                "drive S1, which it wrote, has another firmware revision now (1.0 then, 2.0 now)"
                    .into()
            )
        );
        assert_eq!(
            merge(&profile("node8", two_drives("1.0")), &older, "o.yaml").unwrap_err(),
            MergeError::Refused("its run was on host node7, this one on node8".into())
        );
        let read_only = profile("node7", two_drives("1.0"));
        assert_eq!(
            merge(&read_only, &read_only, "o.yaml").unwrap_err(),
            MergeError::OlderHasNoWrites
        );
        let mut interrupted = older.clone();
        interrupted.provenance.interrupted = true;
        assert!(matches!(
            merge(&read_only, &interrupted, "o.yaml").unwrap_err(),
            MergeError::Incomplete { which: "older", .. }
        ));
    }
}
