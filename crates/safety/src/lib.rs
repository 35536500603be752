//! System changes a run makes, made safely: PCI driver binding for userspace NVMe drivers
//! (SPDK), hugepages per NUMA node and the hugetlbfs mount they need.
//!
//! The rule: every change is written to a [`journal::Journal`] (fsynced, under
//! `/run/hwceiling/` by default) **before** it is made, with the state it replaces. Restoring
//! replays the journal backwards and is idempotent, so it can run after any prefix of a change
//! (a signal between an unbind and the bind that follows it) and as often as needed:
//! - by the process that made the changes, on normal exit, on error, on SIGINT/SIGTERM and on
//!   panic ([`journal::restore_owned`]);
//! - after SIGKILL, by `hwceiling restore` and by the next run, which refuses to start while a
//!   journal is left ([`journal::left_over`]).
//!
//! A journal is owned by the process holding the `flock` on its lock file; no other process
//! restores it while that one lives, and none is ever killed.
//!
//! Which drives may be bound at all is decided in [`pci::bind_refusals`] (the IOMMU, the IOMMU
//! group, processes holding the device) together with the NVMe write gate of `hwc-bench-nvme`
//! (mounted, partitioned, held, signed).

pub mod holders;
pub mod hugepages;
pub mod journal;
pub mod pci;
pub mod system;

pub use journal::{Change, Journal, JournalError};
pub use pci::{Pci, Sysfs};
pub use system::{Live, System};
