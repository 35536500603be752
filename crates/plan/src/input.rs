//! The values a caller may ask the planner for, checked the same way wherever they come from:
//! `hwceiling profile`'s flags and the daemon's `POST /v1/profile/run` body. A value that can
//! never run on any machine (0 threads, queue depth 0, a 1-byte O_DIRECT read) or is listed
//! twice (two cases with one key) is refused here; a value this machine cannot run (more
//! threads than a node's CPUs, buffers larger than its memory, a size that is not a whole number
//! of a drive's logical blocks) is planned as a waiver with that reason (see [`crate::plan`]).
//!
//! Messages name the value, not the flag: the caller says which flag or field it was.

use hwc_model::{size_label, MIB};

/// The most host memcpy threads a case may ask for (`--threads`, `threads`).
pub const MAX_HOST_THREADS: u32 = 4096;
/// The deepest NVMe queue a case may ask for (`--queue-depths`): every queue slot holds one
/// block-sized buffer, and io_uring rings stop at 32768 entries (`IORING_MAX_ENTRIES`); Linux's
/// NVMe driver gives each hardware queue 1024 entries by default, so a deeper software queue
/// only waits longer.
pub const MAX_QUEUE_DEPTH: u32 = 4096;
/// NVMe block sizes are whole multiples of this (`--nvme-sizes`): O_DIRECT I/O must be whole
/// logical blocks, and 512 bytes is the smallest logical block there is (a drive formatted with
/// 4 KiB blocks needs multiples of 4096: the plan waives the other sizes on it, with that
/// reason).
pub const NVME_BLOCK_ALIGN: u64 = 512;
/// The largest NVMe block size (`--nvme-sizes`): 32 times the spec's largest (8 MiB), far above
/// any drive's maximum transfer (the kernel splits larger I/O), and well under Linux's 2 GiB
/// limit on one read or write.
pub const MAX_NVME_BLOCK: u64 = 256 * MIB;
/// The fewest bytes per drive per NVMe repetition (`--nvme-bytes`): room for the latency probe's,
/// the read-cache test's and the gc-settle test's I/O on a `--target` hwceiling creates with
/// that size.
pub const MIN_NVME_BYTES: u64 = MIB;

/// `4MiB`, `1GiB`, `512KiB`, `4096` (bytes), `2M`, `1G`: a size of at least one byte.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (examples: 4MiB, 1GiB, 4096)"))?;
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        _ => {
            return Err(format!(
                "`{s}`: unknown unit `{unit}` (use KiB, MiB or GiB)"
            ))
        }
    };
    match n.checked_mul(mult) {
        Some(0) | None => Err(format!("`{s}` is not a usable size")),
        Some(v) => Ok(v),
    }
}

/// A count from 1 to `max` (`what`: "thread count", "queue depth"), `shown` as the user gave it.
fn check_count(v: u32, shown: &str, what: &str, max: u32) -> Result<u32, String> {
    if (1..=max).contains(&v) {
        Ok(v)
    } else {
        Err(format!("`{shown}`: a {what} must be from 1 to {max}"))
    }
}

/// A count from 1 to `max` on the command line (see [`check_count`]).
fn parse_count(s: &str, what: &str, max: u32) -> Result<u32, String> {
    let v: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a {what} (1 to {max})"))?;
    check_count(v, s, what, max)
}

/// A host memcpy thread count: 1 to [`MAX_HOST_THREADS`].
pub fn check_host_threads(t: u32) -> Result<u32, String> {
    check_count(t, &t.to_string(), "thread count", MAX_HOST_THREADS)
}

/// [`check_host_threads`] of a command-line value.
pub fn parse_host_threads(s: &str) -> Result<u32, String> {
    parse_count(s, "thread count", MAX_HOST_THREADS)
}

/// An NVMe queue depth: 1 to [`MAX_QUEUE_DEPTH`].
pub fn check_queue_depth(q: u32) -> Result<u32, String> {
    check_count(q, &q.to_string(), "queue depth", MAX_QUEUE_DEPTH)
}

/// [`check_queue_depth`] of a command-line value.
pub fn parse_queue_depth(s: &str) -> Result<u32, String> {
    parse_count(s, "queue depth", MAX_QUEUE_DEPTH)
}

/// An NVMe block size: a multiple of [`NVME_BLOCK_ALIGN`] up to [`MAX_NVME_BLOCK`] (`shown` as
/// the user gave it).
fn check_nvme_size_shown(b: u64, shown: &str) -> Result<u64, String> {
    if !b.is_multiple_of(NVME_BLOCK_ALIGN) {
        Err(format!(
            "`{shown}`: an NVMe block size must be a multiple of {NVME_BLOCK_ALIGN} bytes \
             (O_DIRECT I/O is whole logical blocks)"
        ))
    } else if b > MAX_NVME_BLOCK {
        Err(format!(
            "`{shown}`: an NVMe block size must be at most {}",
            size_label(MAX_NVME_BLOCK)
        ))
    } else {
        Ok(b)
    }
}

/// An NVMe block size in bytes (see [`parse_nvme_size`]).
pub fn check_nvme_size(b: u64) -> Result<u64, String> {
    check_nvme_size_shown(b, &b.to_string())
}

/// An NVMe block size on the command line: a multiple of [`NVME_BLOCK_ALIGN`] up to
/// [`MAX_NVME_BLOCK`].
pub fn parse_nvme_size(s: &str) -> Result<u64, String> {
    check_nvme_size_shown(parse_size(s)?, s)
}

/// Bytes per drive per NVMe repetition: at least [`MIN_NVME_BYTES`].
pub fn parse_nvme_bytes(s: &str) -> Result<u64, String> {
    let b = parse_size(s)?;
    if b < MIN_NVME_BYTES {
        Err(format!(
            "`{s}`: bytes per drive per repetition must be at least {}",
            size_label(MIN_NVME_BYTES)
        ))
    } else {
        Ok(b)
    }
}

/// Bytes per drive per repetition against the block sizes: a repetition holds at least one I/O
/// of every size (else it would move more than asked, and a `--target` created with that many
/// bytes would hold less than one block).
pub fn check_nvme_bytes(bytes: u64, sizes: &[u64]) -> Result<(), String> {
    match sizes.iter().copied().max() {
        Some(largest) if bytes < largest => Err(format!(
            "{} per drive per repetition is less than one {} block: a repetition must hold at \
             least one I/O of every block size",
            size_label(bytes),
            size_label(largest)
        )),
        _ => Ok(()),
    }
}

/// The first value listed more than once.
pub fn first_repeat<T: PartialEq>(values: &[T]) -> Option<&T> {
    values
        .iter()
        .enumerate()
        .find(|(i, v)| values[..*i].contains(v))
        .map(|(_, v)| v)
}

/// `Err("lists X twice")` when a value is listed more than once (`show` writes it), for the
/// caller to put after its flag or field name: a value twice would plan two cases under one key
/// (or, for drives, one drive twice).
pub fn no_repeats<T: PartialEq>(values: &[T], show: impl Fn(&T) -> String) -> Result<(), String> {
    match first_repeat(values) {
        Some(v) => Err(format!("lists {} twice", show(v))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hwc_model::KIB;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("0").is_err());
        assert!(parse_size("4 TB").is_err());
        assert!(parse_size("lots").unwrap_err().contains("not a size"));
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn thread_counts_run_from_one_to_the_limit() {
        assert_eq!(parse_host_threads("1"), Ok(1));
        assert_eq!(parse_host_threads("4096"), Ok(4096));
        for bad in ["0", "4097", "-1", "many", ""] {
            let e = parse_host_threads(bad).unwrap_err();
            assert!(
                e.contains("1 to 4096") || e.contains("from 1 to 4096"),
                "{e}"
            );
        }
        assert!(check_host_threads(0).is_err());
    }

    #[test]
    fn queue_depths_run_from_one_to_the_limit() {
        assert_eq!(parse_queue_depth("16"), Ok(16));
        assert_eq!(parse_queue_depth("4096"), Ok(4096));
        for bad in ["0", "4097", "100000", "x"] {
            let e = parse_queue_depth(bad).unwrap_err();
            assert!(e.contains("queue depth"), "{e}");
        }
    }

    #[test]
    fn nvme_block_sizes_are_whole_sectors_within_the_limit() {
        assert_eq!(parse_nvme_size("512"), Ok(512));
        assert_eq!(parse_nvme_size("4KiB"), Ok(4 * KIB));
        assert_eq!(parse_nvme_size("256MiB"), Ok(256 * MIB));
        for bad in ["1B", "100", "4097", "1000"] {
            let e = parse_nvme_size(bad).unwrap_err();
            assert!(e.contains("multiple of 512 bytes"), "{bad}: {e}");
        }
        let e = parse_nvme_size("257MiB").unwrap_err();
        assert!(e.contains("at most 256MiB"), "{e}");
        assert!(parse_nvme_size("1GiB").is_err());
        assert!(parse_nvme_size("0").is_err());
    }

    #[test]
    fn nvme_bytes_hold_at_least_one_io_of_every_size() {
        assert_eq!(parse_nvme_bytes("1MiB"), Ok(MIB));
        assert!(parse_nvme_bytes("4KiB")
            .unwrap_err()
            .contains("at least 1MiB"));
        assert!(check_nvme_bytes(8 * MIB, &[4 * KIB, 8 * MIB]).is_ok());
        let e = check_nvme_bytes(4 * MIB, &[4 * KIB, 8 * MIB]).unwrap_err();
        assert!(e.contains("4MiB") && e.contains("one 8MiB block"), "{e}");
        assert!(check_nvme_bytes(MIB, &[]).is_ok());
    }

    #[test]
    fn repeats_are_found_and_named() {
        assert_eq!(first_repeat(&[1, 2, 3]), None);
        assert_eq!(first_repeat(&[1, 2, 1, 2]), Some(&1));
        assert_eq!(first_repeat::<u32>(&[]), None);
        let e = no_repeats(&[MIB, 4 * KIB, MIB], |&b| size_label(b)).unwrap_err();
        assert_eq!(e, "lists 1MiB twice");
        assert!(no_repeats(&["a", "b"], |s| s.to_string()).is_ok());
    }
}
