//! PCI config space, parsed (`parse_config`): the PCIe capability (payload and request sizes,
//! relaxed ordering, tags, link capable and trained, port type) and the ACS and AER extended
//! capabilities. Offsets follow the PCI Express Base Specification (PCIe capability: §7.5.3;
//! ACS: §7.7.8; AER: §7.8.4). Reading stops at the bytes given: sysfs `config` returns only the
//! 64-byte header to a reader without root.

use hwc_model::pcie::{Acs, PcieConfig, PortType};
use hwc_model::LinkState;

const CAP_PCIE: u8 = 0x10;
const EXT_AER: u16 = 0x0001;
const EXT_ACS: u16 = 0x000d;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The standard capability `id`'s offset, walking the list from 0x34 (at most 48 steps, so a
/// looped list ends).
fn find_cap(b: &[u8], id: u8) -> Option<usize> {
    let status = u16_at(b, 0x06)?;
    if status & (1 << 4) == 0 {
        return None;
    }
    let mut at = usize::from(*b.get(0x34)? & 0xfc);
    for _ in 0..48 {
        if at < 0x40 {
            return None;
        }
        if *b.get(at)? == id {
            return Some(at);
        }
        at = usize::from(*b.get(at + 1)? & 0xfc);
    }
    None
}

/// The extended capability `id`'s offset, walking from 0x100 (at most 512 steps).
fn find_ext_cap(b: &[u8], id: u16) -> Option<usize> {
    let mut at = 0x100;
    for _ in 0..512 {
        let header = u32_at(b, at)?;
        if header == 0 || header == 0xffff_ffff {
            return None;
        }
        if header & 0xffff == u32::from(id) {
            return Some(at);
        }
        at = (header >> 20) as usize & !3;
        if at < 0x100 {
            return None;
        }
    }
    None
}

/// 128 × 2^code bytes (the encoding of MPS and MRRS); codes 6 and 7 are reserved.
fn size_code(code: u16) -> Option<u32> {
    (code <= 5).then(|| 128u32 << code)
}

fn link(reg: u16) -> Option<LinkState> {
    let gen = u32::from(reg & 0xf);
    let width = u32::from((reg >> 4) & 0x3f);
    (gen > 0 && width > 0).then_some(LinkState { gen, width })
}

/// The facts `config` (a function's config space, as many bytes as could be read) holds.
pub fn parse_config(b: &[u8]) -> PcieConfig {
    let mut c = PcieConfig {
        readable_bytes: b.len() as u32,
        ..PcieConfig::default()
    };
    if b.len() <= 0x40 {
        c.unreadable = Some(format!(
            "only {} bytes of config space readable: the capabilities past the 64-byte header \
             need root",
            b.len()
        ));
        return c;
    }
    if let Some(p) = find_cap(b, CAP_PCIE) {
        let caps = u16_at(b, p + 0x02);
        let devcap = u32_at(b, p + 0x04);
        let devctl = u16_at(b, p + 0x08);
        c.port = caps.map(|r| PortType::from_code(((r >> 4) & 0xf) as u8));
        c.mps_capable_bytes = devcap.and_then(|r| size_code((r & 0x7) as u16));
        if let Some(r) = devctl {
            c.mps_bytes = size_code((r >> 5) & 0x7);
            c.mrrs_bytes = size_code((r >> 12) & 0x7);
            c.relaxed_ordering = Some(r & (1 << 4) != 0);
            c.extended_tags = Some(r & (1 << 8) != 0);
        }
        c.link_capable = u32_at(b, p + 0x0c).and_then(|r| link((r & 0x3ff) as u16));
        c.link_current = u16_at(b, p + 0x12).and_then(link);
        // Device Control 2 exists from capability version 2 on.
        if caps.is_some_and(|r| r & 0xf >= 2) {
            c.tag10_requester = u16_at(b, p + 0x28).map(|r| r & (1 << 12) != 0);
        }
    }
    // A conventional 256-byte space has no extended capabilities: it is complete as it is.
    c.aer = find_ext_cap(b, EXT_AER).is_some();
    c.acs = find_ext_cap(b, EXT_ACS)
        .and_then(|at| Some(Acs::new(u16_at(b, at + 4)?, u16_at(b, at + 6)?)));
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    const H200_GPU: &[u8] = include_bytes!("../tests/fixtures/h200-gpu-config.bin");

    #[test]
    fn the_h200_gpus_config_space() {
        // Read as root on the H200 test machine (a VM: the GPU sits on the root bus).
        let c = parse_config(H200_GPU);
        assert_eq!(c.readable_bytes, 4096);
        assert_eq!(c.port, Some(PortType::Endpoint));
        assert_eq!(c.mps_bytes, Some(256));
        assert_eq!(c.mps_capable_bytes, Some(256));
        assert_eq!(c.mrrs_bytes, Some(4096));
        assert_eq!(c.relaxed_ordering, Some(true));
        assert_eq!(c.extended_tags, Some(true));
        assert_eq!(c.link_capable, Some(LinkState { gen: 5, width: 16 }));
        assert_eq!(c.link_current, Some(LinkState { gen: 5, width: 16 }));
        assert_eq!(c.acs, None, "an endpoint");
        assert_eq!(c.unreadable, None);
    }

    #[test]
    fn the_vm_test_beds_root_port_and_drive() {
        // Read as root in the QEMU test bed (tools/vm): an emulated NVMe drive behind a
        // pcie-root-port, with the emulated IOMMU on (the kernel then enables ACS redirect).
        let port = parse_config(include_bytes!("../tests/fixtures/vm-root-port-config.bin"));
        assert_eq!(port.port, Some(PortType::RootPort));
        assert_eq!((port.mps_bytes, port.mrrs_bytes), (Some(128), Some(128)));
        assert_eq!(port.link_capable, Some(LinkState { gen: 4, width: 32 }));
        assert_eq!(port.link_current, Some(LinkState { gen: 1, width: 1 }));
        assert!(port.aer);
        let acs = port.acs.unwrap();
        assert_eq!((acs.capability, acs.control), (0x5f, 0x1d));
        assert!(acs.p2p_request_redirect && acs.upstream_forwarding);
        let drive = parse_config(include_bytes!("../tests/fixtures/vm-nvme-config.bin"));
        assert_eq!(drive.port, Some(PortType::Endpoint));
        assert_eq!(drive.mps_bytes, Some(128));
        assert_eq!(drive.relaxed_ordering, Some(false));
        assert_eq!(drive.acs, None);
    }

    #[test]
    fn without_root_only_the_header_is_read_and_that_is_said() {
        let c = parse_config(&H200_GPU[..64]);
        assert_eq!(c.mps_bytes, None);
        assert_eq!(c.port, None);
        assert!(
            c.unreadable.as_deref().unwrap().contains("need root"),
            "{c:?}"
        );
        assert!(parse_config(&H200_GPU[..10]).unreadable.is_some());
    }

    /// A switch downstream port with ACS, built byte by byte.
    fn bridge(acs_control: u16) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[0x06] = 1 << 4; // capabilities list
        b[0x34] = 0x40;
        b[0x40] = CAP_PCIE;
        b[0x41] = 0; // last
        b[0x42..0x44].copy_from_slice(&(0x2u16 | (0x6 << 4)).to_le_bytes());
        b[0x44..0x48].copy_from_slice(&0x2u32.to_le_bytes()); // MPS capable 512
        b[0x48..0x4a].copy_from_slice(&((1u16 << 5) | (2 << 12)).to_le_bytes()); // 256, 512
        b[0x4c..0x50].copy_from_slice(&(0x4u32 | (16 << 4)).to_le_bytes());
        b[0x52..0x54].copy_from_slice(&(0x3u16 | (8 << 4)).to_le_bytes()); // trained gen3 x8
                                                                           // AER at 0x100 → ACS at 0x148.
        b[0x100..0x104]
            .copy_from_slice(&(EXT_AER as u32 | (1 << 16) | (0x148 << 20)).to_le_bytes());
        b[0x148..0x14c].copy_from_slice(&(EXT_ACS as u32 | (1 << 16)).to_le_bytes());
        b[0x14c..0x14e].copy_from_slice(&0x5fu16.to_le_bytes());
        b[0x14e..0x150].copy_from_slice(&acs_control.to_le_bytes());
        b
    }

    #[test]
    fn a_switch_port_with_acs_redirect() {
        let c = parse_config(&bridge(0x1d));
        assert_eq!(c.port, Some(PortType::SwitchDownstream));
        assert!(c.port.unwrap().is_switch());
        assert_eq!(
            (c.mps_bytes, c.mps_capable_bytes, c.mrrs_bytes),
            (Some(256), Some(512), Some(512))
        );
        assert_eq!(c.link_capable, Some(LinkState { gen: 4, width: 16 }));
        assert_eq!(c.link_current, Some(LinkState { gen: 3, width: 8 }));
        assert!(c.aer);
        let acs = c.acs.unwrap();
        assert!(acs.p2p_request_redirect);
        assert_eq!(acs.capability, 0x5f);
        assert!(
            !parse_config(&bridge(0x01))
                .acs
                .unwrap()
                .p2p_request_redirect
        );
    }

    #[test]
    fn looped_or_garbage_lists_end() {
        let mut b = bridge(0);
        b[0x41] = 0x40; // the PCIe capability points at itself
        b[0x40] = 0x05;
        assert_eq!(parse_config(&b).port, None);
        let mut b = bridge(0);
        b[0x102] = 0x00;
        b[0x103] = 0x10; // the AER header's next points back at 0x100
        assert_eq!(parse_config(&b).acs, None);
        for n in [0usize, 63, 64, 65, 255, 256, 257, 4095] {
            let _ = parse_config(&vec![0xff; n]);
        }
    }
}
