//! SPDK for hwceiling: the `spdk-perf` engine ([`perf`]), which runs SPDK's `spdk_nvme_perf` on
//! drives it hands to vfio-pci for its cases; with the `native` feature, the `spdk-native` engine
//! (`native`: SPDK's NVMe driver linked in, our own pollers); and [`perf_output`], a pure parser
//! of what perf prints.

#[cfg(feature = "native")]
pub mod native;
pub mod perf;
pub mod perf_output;

pub use perf::{decl, locate, Binder, BoundDrive, Finished, SpdkPerf, TcpTarget, ENGINE};
