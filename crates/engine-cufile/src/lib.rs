//! GPUDirect Storage (spec Path 6): NVMe → GPU reads through libcufile, loaded at run time, and
//! the POSIX bounce baseline beside them (O_DIRECT `pread` into pinned host memory on the GPU's
//! node, then a copy to the GPU), measured by the same engine on the same drives or `--target`.
//!
//! - Each case reads with `queue_depth` threads per drive, each with one read of the block
//!   size in flight (threads, not cuFile's batch API), over the drive's blocks in order.
//! - libcufile runs in one of three modes: GPUDirect through nvidia-fs, through the kernel's
//!   PCI P2PDMA, or compat mode, a POSIX bounce inside libcufile. The engine opens the driver
//!   with compat mode forbidden in a child process ([`strict`]) and as configured in its own,
//!   reads its properties, and labels
//!   every cuFile figure with the mode ([`mode::decide`]: direct only on positive evidence).
//! - The GPU buffer is checked once per case, outside the timed region, against an O_DIRECT
//!   read of the same block; the idle guard refuses a GPU another process computes on.

mod api;
mod engine;
pub mod mode;
pub mod strict;

pub use api::{candidates, describe, Cufile, Status};
pub use engine::{CufileEngine, GpuSlot, StrictOpen, DEFAULT_BYTES_PER_DRIVE, ENGINE};
use hwc_model::{CellKind, EngineDecl, Library, Needs, PathId};

/// The engine's declaration.
pub fn decl() -> EngineDecl {
    EngineDecl {
        id: ENGINE,
        title: "cuFile reads into GPU memory (labelled with libcufile's mode), beside a POSIX \
                bounce baseline"
            .into(),
        paths: vec![PathId::Gds],
        cells: vec![CellKind::Sweep],
        needs: Needs {
            gpu: true,
            libraries: vec![Library {
                name: "libcuda".into(),
                install_hint: None,
            }],
            ..Needs::default()
        },
        hardware: true,
        default_on: true,
    }
}
