//! Which way libcufile moves data on this node, decided from what the driver says and from a
//! second open with compat mode forbidden. A mode counts as direct only on positive evidence:
//! anything unproven is compat, so a bounce is never passed off as GPUDirect.

use crate::api::{DriverProps, Status, DRIVER_NOT_INITIALIZED};

/// `dcontrolflags` bit: compat mode allowed.
const ALLOW_COMPAT_BIT: u32 = 1 << 1;

/// How cuFile reads reach the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// GPUDirect Storage through the nvidia-fs kernel module.
    Nvfs,
    /// GPUDirect through the kernel's PCI P2PDMA (CUDA 12.8 and later, no nvidia-fs).
    P2pdma,
    /// Compatibility mode: a POSIX read into host memory inside libcufile, then a copy.
    Compat,
}

impl Mode {
    /// The name `gds.mode` records.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Nvfs => "nvfs",
            Mode::P2pdma => "p2pdma",
            Mode::Compat => "compat",
        }
    }

    pub fn direct(self) -> bool {
        self != Mode::Compat
    }

    /// How a figure of this mode is labelled.
    pub fn label(self) -> &'static str {
        match self {
            Mode::Nvfs => "GPUDirect Storage (nvidia-fs)",
            Mode::P2pdma => "GPUDirect Storage (PCI P2PDMA)",
            Mode::Compat => "cuFile compat mode: a POSIX bounce inside libcufile, not GPUDirect",
        }
    }
}

/// What the driver told us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    /// The open with compat mode forbidden: `None` where the library cannot forbid it.
    pub strict_open: Option<Result<(), Status>>,
    /// Properties after the ordinary open.
    pub props: DriverProps,
    /// `use_pci_p2pdma` as the library reads its configuration.
    pub p2pdma_enabled: Option<bool>,
}

/// The mode and, in words, why.
pub fn decide(e: &Evidence) -> (Mode, String) {
    let nvfs = (e.props.nvfs_major, e.props.nvfs_minor) != (0, 0);
    let compat_allowed = e.props.dcontrolflags & ALLOW_COMPAT_BIT != 0;
    let facts = format!(
        "nvidia-fs {}.{}, dcontrolflags {:#x} (compat {}), use_pci_p2pdma {}",
        e.props.nvfs_major,
        e.props.nvfs_minor,
        e.props.dcontrolflags,
        if compat_allowed {
            "allowed"
        } else {
            "forbidden"
        },
        e.p2pdma_enabled
            .map_or("unknown".to_string(), |b| b.to_string()),
    );
    match &e.strict_open {
        Some(Err(s)) => {
            let why = if s.err == DRIVER_NOT_INITIALIZED {
                "with compat mode forbidden the driver does not open (5001: nvidia-fs not loaded)"
                    .to_string()
            } else {
                format!(
                    "with compat mode forbidden the driver does not open ({})",
                    crate::api::describe(*s)
                )
            };
            (Mode::Compat, format!("{why}; {facts}"))
        }
        Some(Ok(())) if nvfs => (
            Mode::Nvfs,
            format!("the driver opens with compat mode forbidden; {facts}"),
        ),
        Some(Ok(())) if e.p2pdma_enabled == Some(true) => (
            Mode::P2pdma,
            format!("the driver opens with compat mode forbidden and P2PDMA on; {facts}"),
        ),
        Some(Ok(())) => (
            Mode::Compat,
            format!(
                "the driver opens with compat mode forbidden, yet neither nvidia-fs nor P2PDMA \
                 is on: taken as compat; {facts}"
            ),
        ),
        None if nvfs && !compat_allowed => (
            Mode::Nvfs,
            format!("compat mode is off and nvidia-fs is loaded; {facts}"),
        ),
        None => (
            Mode::Compat,
            format!(
                "this libcufile cannot forbid compat mode for a check, and nothing proves a \
                 direct route: taken as compat; {facts}"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(major: u32, control: u32) -> DriverProps {
        DriverProps {
            nvfs_major: major,
            dcontrolflags: control,
            ..DriverProps::default()
        }
    }

    #[test]
    fn only_positive_evidence_makes_a_mode_direct() {
        let refused = Status {
            err: 5001,
            cu_err: 0,
        };
        // The H200 machine: no nvidia-fs, compat allowed, the strict open fails with 5001.
        let (m, why) = decide(&Evidence {
            strict_open: Some(Err(refused)),
            props: props(0, 0x2),
            p2pdma_enabled: Some(false),
        });
        assert_eq!(m, Mode::Compat);
        assert!(
            why.contains("5001") && why.contains("nvidia-fs 0.0"),
            "{why}"
        );
        let ok = Some(Ok(()));
        let e = |strict: Option<Result<(), Status>>, major, p2p| Evidence {
            strict_open: strict,
            props: props(major, 0x2),
            p2pdma_enabled: p2p,
        };
        assert_eq!(decide(&e(ok, 2, None)).0, Mode::Nvfs);
        assert_eq!(decide(&e(ok, 0, Some(true))).0, Mode::P2pdma);
        assert_eq!(decide(&e(ok, 0, Some(false))).0, Mode::Compat);
        // nvidia-fs loaded, but a strict open that fails still means the reads bounce.
        assert_eq!(decide(&e(Some(Err(refused)), 2, None)).0, Mode::Compat);
        // No way to forbid compat: direct only where compat is off and nvidia-fs is there.
        assert_eq!(decide(&e(None, 2, None)).0, Mode::Compat);
        let mut strict_off = e(None, 2, None);
        strict_off.props.dcontrolflags = 0;
        assert_eq!(decide(&strict_off).0, Mode::Nvfs);
        assert!(!Mode::Compat.direct() && Mode::Nvfs.direct() && Mode::P2pdma.direct());
        assert!(Mode::Compat.label().contains("not GPUDirect"));
    }
}
