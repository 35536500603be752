//! Pure parsers for the text formats sysfs and procfs use. Odd input gives `None` (or is
//! skipped), never a panic.

use hwc_model::topology::Bar;

/// Linux `IORESOURCE_PREFETCH`.
pub const IORESOURCE_PREFETCH: u64 = 0x0000_2000;
/// Linux `IORESOURCE_MEM_64`.
pub const IORESOURCE_MEM_64: u64 = 0x0010_0000;

/// CPU lists are parsed where every crate can share it; a hostile `0-4294967295` is refused
/// there rather than allocating gigabytes.
pub use hwc_model::cpulist::{parse as parse_cpulist, MAX_CPUS};

/// Parses a CPU mask as sysfs writes it (`local_cpus`: comma-separated 32-bit hex words, most
/// significant first, e.g. `0000,000000ff,ffffffff`) into sorted CPU ids.
pub fn parse_cpumask(text: &str) -> Option<Vec<u32>> {
    let words: Vec<&str> = text.trim().split(',').collect();
    if words.len() > (MAX_CPUS / 32) as usize {
        return None;
    }
    let mut cpus = Vec::new();
    for (i, word) in words.iter().rev().enumerate() {
        let word = word.trim();
        if word.is_empty() || word.len() > 8 {
            return None;
        }
        let bits = u32::from_str_radix(word, 16).ok()?;
        let base = u32::try_from(i).ok()? * 32;
        cpus.extend((0..32).filter(|b| bits & (1 << b) != 0).map(|b| base + b));
    }
    Some(cpus)
}

/// Parses a PCIe link speed (`32.0 GT/s PCIe`, `5 GT/s`) into GT/s; `Unknown` gives `None`.
pub fn parse_link_speed(text: &str) -> Option<f64> {
    let mut words = text.split_whitespace();
    let speed: f64 = words.next()?.parse().ok()?;
    let unit = words.next()?;
    (unit.starts_with("GT/s") && speed.is_finite() && speed > 0.0).then_some(speed)
}

/// Parses a size with an optional binary suffix (`48K`, `2M`, `1G`, `512`) into bytes.
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, shift) = match text.char_indices().last()? {
        (i, 'K') => (&text[..i], 10),
        (i, 'M') => (&text[..i], 20),
        (i, 'G') => (&text[..i], 30),
        _ => (text, 0),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// Parses `0x…` hex (or bare hex) into a number.
pub fn parse_hex(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    u64::from_str_radix(digits, 16).ok()
}

/// Parses a PCI function's `resource` file into its BARs (the first six lines; unassigned
/// BARs, whose start is 0, are left out).
pub fn parse_resource(text: &str) -> Vec<Bar> {
    text.lines()
        .take(6)
        .zip(0u32..)
        .filter_map(|(line, index)| parse_bar(line, index))
        .collect()
}

fn parse_bar(line: &str, index: u32) -> Option<Bar> {
    let mut fields = line.split_whitespace().map(parse_hex);
    let (start, end, flags) = (fields.next()??, fields.next()??, fields.next()??);
    if start == 0 || end < start {
        return None;
    }
    Some(Bar {
        index,
        size_bytes: (end - start).checked_add(1)?,
        prefetchable: flags & IORESOURCE_PREFETCH != 0,
        is_64bit: flags & IORESOURCE_MEM_64 != 0,
    })
}

/// A `Key: value [kB]` file (`/proc/meminfo`, a node's `meminfo`): the number after `key:`.
/// Lines may carry a prefix (`Node 0 MemTotal:`).
pub fn meminfo_value(text: &str, key: &str) -> Option<u64> {
    let needle = format!("{key}:");
    text.lines().find_map(|line| {
        let (_, rest) = line.split_once(needle.as_str())?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Decodes the octal escapes `/proc/mounts` uses in paths (`\040` is a space).
pub fn decode_mount_path(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)))
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The host name without its domain; `None` when blank.
pub fn short_hostname(text: &str) -> Option<String> {
    let short = text.trim().split('.').next()?.trim();
    (!short.is_empty()).then(|| short.to_string())
}

/// `PRETTY_NAME` from an os-release file, unquoted.
pub fn os_pretty_name(text: &str) -> Option<String> {
    let value = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("PRETTY_NAME="))?
        .trim();
    let unquoted = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(value);
    (!unquoted.is_empty()).then(|| unquoted.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use hwc_model::cpulist::format as format_cpulist;

    /// Writes ids as a sysfs CPU mask of `words` 32-bit words.
    fn format_cpumask(cpus: &[u32], words: usize) -> String {
        let mut mask = vec![0u32; words];
        for &c in cpus {
            mask[c as usize / 32] |= 1 << (c % 32);
        }
        mask.iter()
            .rev()
            .map(|w| format!("{w:08x}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    #[test]
    fn cpulists() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpulist(""), Some(vec![]));
        assert_eq!(parse_cpulist("\n"), Some(vec![]));
        assert_eq!(parse_cpulist("3,1,1"), Some(vec![1, 3]));
        assert_eq!(parse_cpulist("3-1"), None);
        assert_eq!(parse_cpulist("0-4294967295"), None);
        assert_eq!(parse_cpulist("a"), None);
        assert_eq!(parse_cpulist("1,,2"), None);
    }

    #[test]
    fn cpumasks() {
        assert_eq!(parse_cpumask("ffff\n"), Some((0..16).collect()));
        assert_eq!(parse_cpumask("00000000,0000000f"), Some(vec![0, 1, 2, 3]));
        assert_eq!(
            parse_cpumask("0000,000000ff,ffffffff"),
            Some((0..40).collect())
        );
        assert_eq!(parse_cpumask("1,00000000"), Some(vec![32]));
        assert_eq!(parse_cpumask("0"), Some(vec![]));
        assert_eq!(parse_cpumask("xyz"), None);
        assert_eq!(parse_cpumask("123456789"), None);
        assert_eq!(parse_cpumask(""), None);
    }

    #[test]
    fn link_speeds() {
        assert_eq!(parse_link_speed("32.0 GT/s PCIe\n"), Some(32.0));
        assert_eq!(parse_link_speed("2.5 GT/s"), Some(2.5));
        assert_eq!(parse_link_speed("5 GT/s"), Some(5.0));
        assert_eq!(parse_link_speed("Unknown"), None);
        assert_eq!(parse_link_speed("Unknown speed"), None);
        assert_eq!(parse_link_speed("NaN GT/s"), None);
        assert_eq!(parse_link_speed("0 GT/s"), None);
        assert_eq!(parse_link_speed("16"), None);
    }

    #[test]
    fn sizes_and_hex() {
        assert_eq!(parse_size("48K"), Some(48 * 1024));
        assert_eq!(parse_size("266240K\n"), Some(266_240 * 1024));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999999999999G"), None);
        assert_eq!(parse_hex("0x030200"), Some(0x030200));
        assert_eq!(parse_hex("ff"), Some(0xff));
        assert_eq!(parse_hex("0xzz"), None);
    }

    #[test]
    fn resource_file_of_the_h200() {
        let text = "0x0000104002000000 0x0000104002ffffff 0x000000000014220c\n\
                    0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
                    0x0000100000000000 0x0000103fffffffff 0x000000000014220c\n\
                    0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
                    0x0000104000000000 0x0000104001ffffff 0x000000000014220c\n\
                    0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
                    0x00000000fe000000 0x00000000fe07ffff 0x0000000000046200\n";
        let bars = parse_resource(text);
        let sizes: Vec<(u32, u64)> = bars.iter().map(|b| (b.index, b.size_bytes)).collect();
        assert_eq!(sizes, vec![(0, 16 << 20), (2, 256 << 30), (4, 32 << 20)]);
        assert!(bars.iter().all(|b| b.prefetchable && b.is_64bit));
        let io = parse_resource("0x000000000000e000 0x000000000000e01f 0x0000000000040101\n");
        assert_eq!(io.len(), 1);
        assert!(!io[0].prefetchable && !io[0].is_64bit);
        assert!(parse_resource("garbage\n0x10 0x1 0x0\n0x10").is_empty());
    }

    #[test]
    fn meminfo_values() {
        let text = "MemTotal:       24684084 kB\nHugePages_Total:       0\n";
        assert_eq!(meminfo_value(text, "MemTotal"), Some(24_684_084));
        assert_eq!(meminfo_value(text, "HugePages_Total"), Some(0));
        assert_eq!(meminfo_value(text, "MemFree"), None);
        let node = "Node 1 MemTotal:       16777216 kB\nNode 1 MemFree: 1 kB";
        assert_eq!(meminfo_value(node, "MemTotal"), Some(16_777_216));
    }

    #[test]
    fn mount_paths_and_names() {
        assert_eq!(decode_mount_path("/mnt/my\\040disk"), "/mnt/my disk");
        assert_eq!(decode_mount_path("/a\\134b"), "/a\\b");
        assert_eq!(decode_mount_path("/trailing\\"), "/trailing\\");
        assert_eq!(decode_mount_path("/x\\9"), "/x\\9");
        assert_eq!(decode_mount_path("/x\\+12"), "/x\\+12");
        assert_eq!(
            short_hostname("node1.example.org\n").as_deref(),
            Some("node1")
        );
        assert_eq!(short_hostname("  \n"), None);
        let os = "NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n";
        assert_eq!(
            os_pretty_name(os).as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(
            os_pretty_name("PRETTY_NAME=Plain").as_deref(),
            Some("Plain")
        );
        assert_eq!(os_pretty_name("NAME=x"), None);
    }

    proptest! {
        #[test]
        fn cpulist_round_trips(set in proptest::collection::btree_set(0u32..2048, 0..200)) {
            let cpus: Vec<u32> = set.into_iter().collect();
            prop_assert_eq!(parse_cpulist(&format_cpulist(&cpus)), Some(cpus));
        }

        #[test]
        fn cpumask_round_trips(set in proptest::collection::btree_set(0u32..256, 0..100)) {
            let cpus: Vec<u32> = set.into_iter().collect();
            prop_assert_eq!(parse_cpumask(&format_cpumask(&cpus, 8)), Some(cpus));
        }

        #[test]
        fn parsers_never_panic(text in "\\PC{0,40}") {
            let _ = parse_cpulist(&text);
            let _ = parse_cpumask(&text);
            let _ = parse_link_speed(&text);
            let _ = parse_size(&text);
            let _ = parse_resource(&text);
            let _ = decode_mount_path(&text);
        }
    }
}
