//! NVMe Identify Controller through the kernel's admin passthrough ioctl, and the parsing of its
//! 4 KiB answer (a pure function over a byte buffer, tested on crafted buffers).
//!
//! MDTS (byte 77) is a power of two in units of the controller's minimum memory page size,
//! `2^(12 + CAP.MPSMIN)`; 0 means no limit. CAP is the controller's first register (BAR0 offset
//! 0), read through a read-only mapping of the PCI function's `resource0` where the kernel allows
//! it; where it does not, the kernel's `max_hw_sectors_kb` (MDTS capped by the driver) stands in,
//! labelled `sysfs`.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Size of an Identify data structure.
pub const IDENTIFY_LEN: usize = 4096;
/// Admin opcode of Identify.
const OPC_IDENTIFY: u8 = 0x06;
/// CNS value of Identify Controller.
const CNS_CONTROLLER: u32 = 1;

/// What hwceiling keeps of Identify Controller.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

#[derive(Debug, thiserror::Error)]
pub enum IdentifyError {
    #[error("Identify answer is {0} bytes, expected {IDENTIFY_LEN}")]
    Short(usize),
    #[error("cannot open {path}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("NVMe admin Identify ioctl on {path} failed: {source}")]
    Ioctl {
        path: String,
        source: std::io::Error,
    },
    #[error("NVMe admin Identify on {path} completed with status {status:#x}")]
    Status { path: String, status: i32 },
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

/// Send Identify Controller to `/dev/nvmeN` (or a namespace of it) and parse the answer.
pub fn identify_controller(dev: &Path) -> Result<IdentifyController, IdentifyError> {
    let path = dev.display().to_string();
    let file = File::open(dev).map_err(|source| IdentifyError::Open {
        path: path.clone(),
        source,
    })?;
    let mut buf = vec![0u8; IDENTIFY_LEN];
    let mut cmd = PassthruCmd {
        opcode: OPC_IDENTIFY,
        addr: buf.as_mut_ptr() as u64,
        data_len: IDENTIFY_LEN as u32,
        cdw10: CNS_CONTROLLER,
        ..PassthruCmd::default()
    };
    // SAFETY: `cmd` is a live, correctly laid out nvme_passthru_cmd; `addr` points to `buf`,
    // which holds `data_len` writable bytes and outlives the call; the fd is open.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), NVME_IOCTL_ADMIN_CMD, &mut cmd) };
    if rc < 0 {
        return Err(IdentifyError::Ioctl {
            path,
            source: std::io::Error::last_os_error(),
        });
    }
    if rc > 0 {
        return Err(IdentifyError::Status { path, status: rc });
    }
    parse_identify_controller(&buf)
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
        }
    }
}
