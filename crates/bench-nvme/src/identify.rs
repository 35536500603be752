//! NVMe Identify Controller through the kernel's admin passthrough ioctl, and the parsing of its
//! 4 KiB answer (a pure function over a byte buffer, tested on crafted buffers).
//!
//! MDTS (byte 77) is a power of two in units of the controller's minimum memory page size,
//! `2^(12 + CAP.MPSMIN)`; 0 means no limit. CAP is the controller's first register (BAR0 offset
//! 0), read through a read-only mapping of the PCI function's `resource0` where the kernel allows
//! it; where it does not, the kernel's `max_hw_sectors_kb` (MDTS capped by the driver) stands in,
//! labelled `sysfs`.
//!
//! The power state descriptors (NPSS + 1 of 32 bytes from byte 2048) and APSTA (byte 265) come
//! from the same answer; Get Features (admin opcode 0x0A) reads the APST table (FID 0x0C) and the
//! current power state (FID 0x02). The kernel lets only CAP_SYS_ADMIN send Get Features.

use hwc_model::topology::{ApstTransition, PowerFeatures, PowerStateDescriptor};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Size of an Identify data structure.
pub const IDENTIFY_LEN: usize = 4096;
/// Admin opcode of Identify.
const OPC_IDENTIFY: u8 = 0x06;
/// Admin opcode of Get Features.
const OPC_GET_FEATURES: u8 = 0x0a;
/// Feature identifiers.
const FID_POWER_MANAGEMENT: u32 = 0x02;
const FID_APST: u32 = 0x0c;
/// Size of the APST data structure: 32 entries of 8 bytes.
pub const APST_LEN: usize = 256;
/// CNS value of Identify Controller.
const CNS_CONTROLLER: u32 = 1;

/// What hwceiling keeps of Identify Controller.
#[derive(Debug, Clone, PartialEq)]
pub struct IdentifyController {
    pub vendor_id: u16,
    /// Serial number, trailing spaces removed.
    pub serial: String,
    pub model: String,
    pub firmware_rev: String,
    /// Raw MDTS (byte 77): log2 of the limit in minimum-page units; 0 = no limit.
    pub mdts: u8,
    /// VWC byte 525 bit 0: a volatile write cache is present.
    pub vwc_present: bool,
    /// APSTA byte 265 bit 0: autonomous power state transitions are supported.
    pub apst_supported: bool,
    /// The power state descriptors, NPSS (byte 263) + 1 of them.
    pub power_states: Vec<PowerStateDescriptor>,
}

#[derive(Debug, thiserror::Error)]
pub enum IdentifyError {
    #[error("Identify answer is {0} bytes, expected {IDENTIFY_LEN}")]
    Short(usize),
    #[error("cannot open {path}: {cause}")]
    Open { path: String, cause: std::io::Error },
    #[error("NVMe admin Identify ioctl on {path} failed: {cause}")]
    Ioctl { path: String, cause: std::io::Error },
    #[error("NVMe admin Identify on {path} completed with status {status:#x}")]
    Status { path: String, status: i32 },
}

/// One power state descriptor (32 bytes): MP (bytes 0–1) in units of 0.01 W, or 0.0001 W when
/// MXPS (byte 3 bit 0) is set; NOPS (byte 3 bit 1); ENLAT (bytes 4–7) and EXLAT (bytes 8–11), µs.
pub fn parse_power_state(state: u8, d: &[u8; 32]) -> PowerStateDescriptor {
    let mp = u16::from_le_bytes([d[0], d[1]]);
    let scale = if d[3] & 1 == 1 { 1e-4 } else { 1e-2 };
    PowerStateDescriptor {
        state,
        max_power_w: f64::from(mp) * scale,
        non_operational: d[3] & 2 == 2,
        entry_latency_us: u32::from_le_bytes([d[4], d[5], d[6], d[7]]),
        exit_latency_us: u32::from_le_bytes([d[8], d[9], d[10], d[11]]),
    }
}

/// The used entries of an APST data structure (Get Features FID 0x0C) for a controller with
/// `states` power states: entry n (8 bytes, little-endian) holds ITPS in bits 7:3 and ITPT (ms)
/// in bits 31:8; ITPT = 0 means no transition from state n.
pub fn parse_apst(buf: &[u8], states: usize) -> Vec<ApstTransition> {
    buf.chunks_exact(8)
        .take(states.min(32))
        .enumerate()
        .filter_map(|(n, e)| {
            let dw = u32::from_le_bytes([e[0], e[1], e[2], e[3]]);
            let idle_ms = dw >> 8;
            // Masked to 5 bits: the cast cannot truncate; n < 32 likewise.
            (idle_ms > 0).then_some(ApstTransition {
                from_state: n as u8,
                to_state: ((dw >> 3) & 0x1f) as u8,
                idle_ms,
            })
        })
        .collect()
}

fn ascii_field(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim_end_matches([' ', '\0'])
        .trim_start()
        .to_string()
}

/// Parse an Identify Controller data structure.
pub fn parse_identify_controller(buf: &[u8]) -> Result<IdentifyController, IdentifyError> {
    if buf.len() < IDENTIFY_LEN {
        return Err(IdentifyError::Short(buf.len()));
    }
    Ok(IdentifyController {
        vendor_id: u16::from_le_bytes([buf[0], buf[1]]),
        serial: ascii_field(&buf[4..24]),
        model: ascii_field(&buf[24..64]),
        firmware_rev: ascii_field(&buf[64..72]),
        mdts: buf[77],
        vwc_present: buf[525] & 1 == 1,
        apst_supported: buf[265] & 1 == 1,
        // NPSS is zero-based; at most 32 descriptors fit in bytes 2048..3072.
        power_states: (0..=buf[263].min(31))
            .zip(buf[2048..3072].as_chunks::<32>().0)
            .map(|(n, d)| parse_power_state(n, d))
            .collect(),
    })
}

/// CAP.MPSMIN (bits 51:48): the minimum memory page size is `2^(12 + MPSMIN)`.
pub fn cap_mpsmin(cap: u64) -> u8 {
    // Masked to 4 bits: the cast cannot truncate.
    ((cap >> 48) & 0xf) as u8
}

/// MDTS in bytes; `None` when MDTS = 0 (no limit) or the value does not fit in 64 bits.
pub fn mdts_bytes(mdts: u8, mpsmin: u8) -> Option<u64> {
    if mdts == 0 {
        return None;
    }
    let shift = u32::from(mdts) + 12 + u32::from(mpsmin);
    1u64.checked_shl(shift).filter(|_| shift < 64)
}

/// `struct nvme_passthru_cmd` (linux/nvme_ioctl.h), 72 bytes.
#[repr(C)]
#[derive(Default)]
struct PassthruCmd {
    opcode: u8,
    flags: u8,
    rsvd1: u16,
    nsid: u32,
    cdw2: u32,
    cdw3: u32,
    metadata: u64,
    addr: u64,
    metadata_len: u32,
    data_len: u32,
    cdw10: u32,
    cdw11: u32,
    cdw12: u32,
    cdw13: u32,
    cdw14: u32,
    cdw15: u32,
    timeout_ms: u32,
    result: u32,
}

/// `_IOWR('N', 0x41, struct nvme_admin_cmd)`.
const NVME_IOCTL_ADMIN_CMD: libc::c_ulong =
    (3 << 30) | ((std::mem::size_of::<PassthruCmd>() as libc::c_ulong) << 16) | (0x4e << 8) | 0x41;

/// Send one admin command whose data (`buf`) flows from the controller; returns the
/// completion's dword 0, or the ioctl's error (`Err(Ok(status))` for an NVMe status).
fn admin_read(file: &File, opcode: u8, cdw10: u32, buf: &mut [u8]) -> Result<u32, AdminError> {
    let mut cmd = PassthruCmd {
        opcode,
        addr: buf.as_mut_ptr() as u64,
        data_len: u32::try_from(buf.len()).unwrap_or(u32::MAX),
        cdw10,
        ..PassthruCmd::default()
    };
    // SAFETY: `cmd` is a live, correctly laid out nvme_passthru_cmd; `addr` points to `buf`,
    // which holds `data_len` writable bytes and outlives the call; the fd is open. Both
    // opcodes used here (Identify, Get Features) only read from the controller.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), NVME_IOCTL_ADMIN_CMD, &mut cmd) };
    if rc < 0 {
        return Err(AdminError::Os(std::io::Error::last_os_error()));
    }
    if rc > 0 {
        return Err(AdminError::Status(rc));
    }
    Ok(cmd.result)
}

enum AdminError {
    Os(std::io::Error),
    Status(i32),
}

/// Send Identify Controller to `/dev/nvmeN` (or a namespace of it) and parse the answer.
pub fn identify_controller(dev: &Path) -> Result<IdentifyController, IdentifyError> {
    let path = dev.display().to_string();
    let file = File::open(dev).map_err(|cause| IdentifyError::Open {
        path: path.clone(),
        cause,
    })?;
    let mut buf = vec![0u8; IDENTIFY_LEN];
    match admin_read(&file, OPC_IDENTIFY, CNS_CONTROLLER, &mut buf) {
        Ok(_) => parse_identify_controller(&buf),
        Err(AdminError::Os(cause)) => Err(IdentifyError::Ioctl { path, cause }),
        Err(AdminError::Status(status)) => Err(IdentifyError::Status { path, status }),
    }
}

/// Read APST (FID 0x0C) and Power Management (FID 0x02) with Get Features (current values) from
/// `/dev/nvmeN`, for a controller with `states` power states. What cannot be read is recorded
/// as `not readable: <reason>` (the kernel sends Get Features for CAP_SYS_ADMIN only).
pub fn power_features(dev: &Path, states: usize, apst_supported: bool) -> PowerFeatures {
    let mut f = PowerFeatures::default();
    let why = |e: AdminError| match e {
        AdminError::Os(e) if e.raw_os_error() == Some(libc::EACCES) => {
            format!("{e} (Get Features needs CAP_SYS_ADMIN: run as root)")
        }
        AdminError::Os(e) => e.to_string(),
        AdminError::Status(s) => format!("the controller answered status {s:#x}"),
    };
    let file = match File::open(dev) {
        Ok(file) => file,
        Err(e) => {
            f.not_readable.push(format!(
                "not readable: power features: cannot open {}: {e}",
                dev.display()
            ));
            return f;
        }
    };
    if apst_supported {
        let mut buf = vec![0u8; APST_LEN];
        match admin_read(&file, OPC_GET_FEATURES, FID_APST, &mut buf) {
            Ok(dw0) => {
                f.apst_enabled = Some(dw0 & 1 == 1);
                f.apst_transitions = parse_apst(&buf, states);
            }
            Err(e) => f
                .not_readable
                .push(format!("not readable: APST: {}", why(e))),
        }
    } else {
        f.not_readable
            .push("not readable: APST: the controller does not support it (APSTA = 0)".into());
    }
    match admin_read(&file, OPC_GET_FEATURES, FID_POWER_MANAGEMENT, &mut []) {
        // Bits 4:0: the power state.
        Ok(dw0) => f.current_power_state = Some((dw0 & 0x1f) as u8),
        Err(e) => f
            .not_readable
            .push(format!("not readable: power management: {}", why(e))),
    }
    f
}

/// Read the controller's CAP register through a read-only mapping of BAR0
/// (`/sys/bus/pci/devices/<bdf>/resource0`). Fails where the kernel refuses the mapping (a BAR
/// claimed by a driver under `CONFIG_IO_STRICT_DEVMEM`, lockdown, no privilege).
pub fn read_cap(pci_dir: &Path) -> std::io::Result<u64> {
    let file = File::open(pci_dir.join("resource0"))?;
    let len = 4096usize;
    // SAFETY: a fresh shared read-only mapping of the first page of BAR0; checked for
    // MAP_FAILED; unmapped below before returning.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    let base = ptr.cast::<u32>();
    // SAFETY: offsets 0 and 4 lie in the mapped page; MMIO registers are read with volatile
    // 32-bit loads (two halves of the 64-bit CAP, as drivers on 32-bit buses do).
    let (lo, hi) = unsafe { (base.read_volatile(), base.add(1).read_volatile()) };
    // SAFETY: unmapping the mapping created above, exactly once.
    unsafe { libc::munmap(ptr, len) };
    let cap = (u64::from(hi) << 32) | u64::from(lo);
    if cap == u64::MAX {
        return Err(std::io::Error::other(
            "CAP reads as all ones (device not responding)",
        ));
    }
    Ok(cap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn crafted(serial: &str, model: &str, fw: &str, mdts: u8, vwc: u8) -> Vec<u8> {
        let mut b = vec![0u8; IDENTIFY_LEN];
        b[0] = 0x86;
        b[1] = 0x80;
        let put = |b: &mut Vec<u8>, at: usize, len: usize, s: &str| {
            let mut field = vec![b' '; len];
            field[..s.len()].copy_from_slice(s.as_bytes());
            b[at..at + len].copy_from_slice(&field);
        };
        put(&mut b, 4, 20, serial);
        put(&mut b, 24, 40, model);
        put(&mut b, 64, 8, fw);
        b[77] = mdts;
        b[525] = vwc;
        b
    }

    #[test]
    fn parses_the_fields_qemu_reports() {
        let id = parse_identify_controller(&crafted("HWCN0A", "QEMU NVMe Ctrl", "7.2.22", 5, 0x07))
            .unwrap();
        assert_eq!(id.vendor_id, 0x8086);
        assert_eq!(id.serial, "HWCN0A");
        assert_eq!(id.model, "QEMU NVMe Ctrl");
        assert_eq!(id.firmware_rev, "7.2.22");
        assert_eq!(id.mdts, 5);
        assert!(id.vwc_present);
        let id = parse_identify_controller(&crafted("S", "M", "F", 0, 0x06)).unwrap();
        assert!(!id.vwc_present, "only bit 0 says a cache is present");
    }

    #[test]
    fn power_state_descriptors_and_apsta() {
        let mut b = crafted("S", "M", "F", 5, 0);
        b[263] = 2; // NPSS: three states
        b[265] = 1; // APSTA
        let psd = |b: &mut Vec<u8>, n: usize, mp: u16, flags: u8, enlat: u32, exlat: u32| {
            let at = 2048 + 32 * n;
            b[at..at + 2].copy_from_slice(&mp.to_le_bytes());
            b[at + 3] = flags;
            b[at + 4..at + 8].copy_from_slice(&enlat.to_le_bytes());
            b[at + 8..at + 12].copy_from_slice(&exlat.to_le_bytes());
        };
        psd(&mut b, 0, 825, 0, 0, 0);
        psd(&mut b, 1, 35_000, 1, 1000, 1500); // MXPS: units of 0.0001 W
        psd(&mut b, 2, 5, 2, 2000, 10_000); // non-operational
        let id = parse_identify_controller(&b).unwrap();
        assert!(id.apst_supported);
        assert_eq!(id.power_states.len(), 3);
        let ps = &id.power_states;
        assert!((ps[0].max_power_w - 8.25).abs() < 1e-9);
        assert!((ps[1].max_power_w - 3.5).abs() < 1e-9);
        assert_eq!(
            (ps[1].entry_latency_us, ps[1].exit_latency_us),
            (1000, 1500)
        );
        assert!(!ps[1].non_operational && ps[2].non_operational);
        assert_eq!((ps[2].state, ps[2].exit_latency_us), (2, 10_000));
        assert!(
            !parse_identify_controller(&crafted("S", "M", "F", 5, 0))
                .unwrap()
                .apst_supported
        );
    }

    #[test]
    fn the_apst_table_keeps_entries_with_an_idle_time() {
        let mut buf = vec![0u8; APST_LEN];
        // State 0 → 3 after 100 ms; state 1: no transition; state 3 → 4 after 2000 ms.
        buf[0..4].copy_from_slice(&((100u32 << 8) | (3 << 3)).to_le_bytes());
        buf[24..28].copy_from_slice(&((2000u32 << 8) | (4 << 3)).to_le_bytes());
        // An entry beyond the controller's states is ignored.
        buf[40..44].copy_from_slice(&((7u32 << 8) | (1 << 3)).to_le_bytes());
        let t = parse_apst(&buf, 5);
        assert_eq!(
            t,
            [
                ApstTransition {
                    from_state: 0,
                    to_state: 3,
                    idle_ms: 100
                },
                ApstTransition {
                    from_state: 3,
                    to_state: 4,
                    idle_ms: 2000
                }
            ]
        );
        assert_eq!(parse_apst(&buf, 6).len(), 3);
        assert!(parse_apst(&buf, 0).is_empty());
    }

    #[test]
    fn short_answers_are_refused() {
        assert!(matches!(
            parse_identify_controller(&[0u8; 100]),
            Err(IdentifyError::Short(100))
        ));
    }

    #[test]
    fn mdts_is_in_minimum_page_units() {
        assert_eq!(mdts_bytes(5, 0), Some(128 * 1024));
        assert_eq!(mdts_bytes(7, 0), Some(512 * 1024));
        // A controller whose minimum page is 16 KiB (MPSMIN = 2).
        assert_eq!(mdts_bytes(5, 2), Some(512 * 1024));
        assert_eq!(mdts_bytes(0, 0), None, "0 = no limit");
        assert_eq!(mdts_bytes(255, 15), None);
        assert_eq!(cap_mpsmin(0x0002_0000_0000_0000), 2);
        assert_eq!(cap_mpsmin(0x00f0_0000_0000_0000), 0, "MPSMAX is not MPSMIN");
    }

    #[test]
    fn the_ioctl_number_matches_the_kernel_header() {
        assert_eq!(std::mem::size_of::<PassthruCmd>(), 72);
        assert_eq!(NVME_IOCTL_ADMIN_CMD, 0xC048_4E41);
    }

    proptest! {
        #[test]
        fn parsing_never_panics_and_keeps_byte_77(bytes in proptest::collection::vec(any::<u8>(), IDENTIFY_LEN)) {
            let id = parse_identify_controller(&bytes).unwrap();
            prop_assert_eq!(id.mdts, bytes[77]);
            prop_assert_eq!(id.vwc_present, bytes[525] & 1 == 1);
            prop_assert_eq!(id.power_states.len(), usize::from(bytes[263].min(31)) + 1);
            prop_assert!(id.power_states.iter().all(|p| p.max_power_w >= 0.0 && p.max_power_w <= 655.35));
        }

        #[test]
        fn apst_parsing_never_panics_and_keeps_only_timed_entries(bytes in proptest::collection::vec(any::<u8>(), 0..300), states in 0usize..40) {
            let t = parse_apst(&bytes, states);
            prop_assert!(t.len() <= states.min(32));
            prop_assert!(t.iter().all(|e| e.idle_ms > 0 && e.to_state < 32 && usize::from(e.from_state) < states));
        }
    }
}
