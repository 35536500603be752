//! How many hugepages a userspace NVMe driver needs, and the page size it takes them in.

/// The page size hwceiling reserves: 2 MiB, the size every x86-64 kernel offers at run time
/// (1 GiB pages usually need reserving at boot).
pub const PAGE_KIB: u64 = 2048;

/// Pages of [`PAGE_KIB`] that hold `bytes`, rounded up.
pub fn pages_for(bytes: u64) -> u64 {
    bytes.div_ceil(PAGE_KIB * 1024)
}
