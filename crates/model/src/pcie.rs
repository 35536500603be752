//! What a PCI function's config space says about how it moves data: the PCIe capability's
//! payload and request sizes, ordering and tag settings, its link as capable and as trained,
//! its port type, and on bridges the ACS controls that decide whether peer-to-peer requests are
//! redirected through the root complex. Read by `hwc-topology` from sysfs `config`; beyond the
//! first 64 bytes that file needs root, and what could not be read is said, never guessed.

use crate::setting::LinkState;
use serde::{Deserialize, Serialize};

/// A function's place in the PCIe hierarchy (the PCIe capability's device/port type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PortType {
    Endpoint,
    LegacyEndpoint,
    RootPort,
    SwitchUpstream,
    SwitchDownstream,
    PcieToPciBridge,
    PciToPcieBridge,
    RcIntegratedEndpoint,
    RcEventCollector,
    /// A type code the PCIe specification does not define.
    Other,
}

impl PortType {
    /// From the PCIe capability register's bits 7:4.
    pub fn from_code(code: u8) -> PortType {
        match code {
            0x0 => PortType::Endpoint,
            0x1 => PortType::LegacyEndpoint,
            0x4 => PortType::RootPort,
            0x5 => PortType::SwitchUpstream,
            0x6 => PortType::SwitchDownstream,
            0x7 => PortType::PcieToPciBridge,
            0x8 => PortType::PciToPcieBridge,
            0x9 => PortType::RcIntegratedEndpoint,
            0xa => PortType::RcEventCollector,
            _ => PortType::Other,
        }
    }

    /// A switch's port (upstream or downstream), as opposed to the root's.
    pub fn is_switch(self) -> bool {
        matches!(self, PortType::SwitchUpstream | PortType::SwitchDownstream)
    }
}

/// The ACS extended capability: what the port can do and what is enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Acs {
    /// ACS Capability register (bits: 0 source validation, 1 translation blocking, 2 P2P
    /// request redirect, 3 P2P completion redirect, 4 upstream forwarding, 5 egress control,
    /// 6 direct translated P2P).
    pub capability: u16,
    /// ACS Control register (the same bits, as enabled).
    pub control: u16,
    /// P2P Request Redirect enabled: peer-to-peer requests below this port go up to the root
    /// complex (or IOMMU) and back instead of across the switch.
    pub p2p_request_redirect: bool,
    pub p2p_completion_redirect: bool,
    pub upstream_forwarding: bool,
}

impl Acs {
    pub fn new(capability: u16, control: u16) -> Acs {
        Acs {
            capability,
            control,
            p2p_request_redirect: control & (1 << 2) != 0,
            p2p_completion_redirect: control & (1 << 3) != 0,
            upstream_forwarding: control & (1 << 4) != 0,
        }
    }
}

/// The config-space facts of one function. Each field is absent where the bytes that hold it
/// could not be read (`readable_bytes`) or the function has no such capability.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PcieConfig {
    /// How many bytes of config space could be read (64 without root; 256 or 4096 with).
    pub readable_bytes: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<PortType>,
    /// Max Payload Size, as set (Device Control) and as capable (Device Capabilities).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mps_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mps_capable_bytes: Option<u32>,
    /// Max Read Request Size, as set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mrrs_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relaxed_ordering: Option<bool>,
    /// Extended (8-bit) tags enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_tags: Option<bool>,
    /// 10-bit tag requester enabled (Device Control 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag10_requester: Option<bool>,
    /// The link as capable (Link Capabilities) and as trained (Link Status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_capable: Option<LinkState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_current: Option<LinkState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acs: Option<Acs>,
    /// Has the Advanced Error Reporting capability (its counters are in sysfs `aer_dev_*`).
    #[serde(default)]
    pub aer: bool,
    /// What could not be read, in words (`only 64 of 4096 bytes readable: …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

/// Bytes of data per TLP header, sequence, LCRC and framing: a 4-DW (64-bit address) memory
/// write, as a device's DMA writes into host or GPU memory are sent.
pub const POSTED_OVERHEAD_BYTES: u32 = 24;
/// The same for a completion with data (a 3-DW header): how a DMA read's data comes back.
pub const COMPLETION_OVERHEAD_BYTES: u32 = 20;
/// In flit mode a TLP carries only its header (framing, sequence and CRC are the flit's): 16
/// bytes for a 4-DW memory write, 12 for a completion.
pub const FLIT_POSTED_OVERHEAD_BYTES: u32 = 16;
pub const FLIT_COMPLETION_OVERHEAD_BYTES: u32 = 12;
/// Of a flit's 256 bytes, those that carry TLPs (the rest: 6 of DLLPs, 8 of CRC, 6 of FEC).
const FLIT_TLP_BYTES: f64 = 236.0;
/// Of a flit's 256 bytes, those that carry TLPs and DLLPs (what [`crate::pcie_theoretical_gbps`]
/// counts).
const FLIT_LINK_BYTES: f64 = 242.0;

/// A link at `speed_gts` carries its TLPs in 256-byte flits (PCIe 6.0 and later, 64 GT/s and
/// faster). A PCIe 6.0 pair trained at a lower speed may use flits too; that is not modelled.
pub fn flit_mode(speed_gts: f64) -> bool {
    speed_gts > 63.99
}

/// The TLP-adjusted limit of a link, GB/s per direction: the bytes the link carries for TLPs
/// (`link_gbps` is [`crate::pcie_theoretical_gbps`]; in flit mode 236 of its 242 bytes a flit),
/// times the share of each TLP that is payload, `mps / (mps + overhead)`. A model of the wire
/// (docs/pcie.md), not a measurement: it leaves out DLLPs (acks, flow-control updates) and
/// ordered sets outside flit mode.
pub fn tlp_limit_gbps(link_gbps: f64, speed_gts: f64, mps_bytes: u32, write: bool) -> f64 {
    let flit = flit_mode(speed_gts);
    let (tlp_gbps, overhead) = match (flit, write) {
        (false, true) => (link_gbps, POSTED_OVERHEAD_BYTES),
        (false, false) => (link_gbps, COMPLETION_OVERHEAD_BYTES),
        (true, true) => (
            link_gbps * FLIT_TLP_BYTES / FLIT_LINK_BYTES,
            FLIT_POSTED_OVERHEAD_BYTES,
        ),
        (true, false) => (
            link_gbps * FLIT_TLP_BYTES / FLIT_LINK_BYTES,
            FLIT_COMPLETION_OVERHEAD_BYTES,
        ),
    };
    tlp_gbps * f64::from(mps_bytes) / f64::from(mps_bytes + overhead)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tlp_limit_of_a_gen5_x16_link_at_256_byte_payloads() {
        // 63.015 GB/s encoded; 256 / (256 + 24) of it for writes, 256 / 276 for completions.
        let w = tlp_limit_gbps(63.015, 32.0, 256, true);
        assert!((w - 57.614).abs() < 0.001, "{w}");
        let r = tlp_limit_gbps(63.015, 32.0, 256, false);
        assert!((r - 58.449).abs() < 0.001, "{r}");
        assert!(tlp_limit_gbps(63.015, 32.0, 128, true) < w);
    }

    #[test]
    fn a_gen6_link_carries_tlps_in_flits() {
        assert!(!flit_mode(32.0) && flit_mode(64.0) && flit_mode(128.0));
        // Gen6 x16: 121 GB/s of TLPs and DLLPs, 236/242 of it TLPs (118 GB/s), and of those
        // 256 / (256 + 16) payload for writes, 256 / (256 + 12) for completions.
        let link = crate::pcie_theoretical_gbps(64.0, 16);
        let w = tlp_limit_gbps(link, 64.0, 256, true);
        assert!((w - 118.0 * 256.0 / 272.0).abs() < 1e-9, "{w}");
        let r = tlp_limit_gbps(link, 64.0, 256, false);
        assert!((r - 118.0 * 256.0 / 268.0).abs() < 1e-9, "{r}");
    }

    #[test]
    fn acs_bits_read_as_named() {
        let a = Acs::new(0x5f, 0x1d);
        assert!(a.p2p_request_redirect && a.p2p_completion_redirect && a.upstream_forwarding);
        assert!(!Acs::new(0x5f, 0x01).p2p_request_redirect);
    }
}
