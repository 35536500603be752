//! Linux CPU lists (`0-3,8,10-11`), as sysfs writes them and as hwceiling prints them.

/// CPU ids at or above this are refused as malformed (no kernel supports more).
pub const MAX_CPUS: u32 = 1 << 16;

/// `0-3,8,10-11` → `[0, 1, 2, 3, 8, 10, 11]` (sorted, deduplicated); an empty list is empty;
/// `None` when malformed.
pub fn parse(text: &str) -> Option<Vec<u32>> {
    let text = text.trim();
    let mut cpus = Vec::new();
    if text.is_empty() {
        return Some(cpus);
    }
    for part in text.split(',') {
        let (first, last) = match part.trim().split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?),
            None => {
                let one = part.trim().parse::<u32>().ok()?;
                (one, one)
            }
        };
        if first > last || last >= MAX_CPUS {
            return None;
        }
        cpus.extend(first..=last);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// `[3, 0, 1, 2, 8, 10, 11]` → `0-3,8,10-11`: sorted, deduplicated, runs collapsed.
pub fn format(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        while i + 1 < sorted.len() && sorted[i + 1] == sorted[i] + 1 {
            i += 1;
        }
        parts.push(if sorted[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", sorted[i])
        });
        i += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_formats_kernel_lists() {
        assert_eq!(parse("0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse(""), Some(vec![]));
        assert_eq!(parse("3,1,1"), Some(vec![1, 3]));
        assert_eq!(parse("3-1"), None);
        assert_eq!(parse("0-4294967295"), None);
        assert_eq!(parse("a"), None);
        assert_eq!(parse("1,,2"), None);
        assert_eq!(format(&[3, 0, 1, 2, 8, 10, 11, 11]), "0-3,8,10-11");
        assert_eq!(format(&[5]), "5");
        assert_eq!(format(&[]), "");
    }

    proptest! {
        #[test]
        fn round_trips(set in proptest::collection::btree_set(0u32..4096, 0..200)) {
            let cpus: Vec<u32> = set.into_iter().collect();
            prop_assert_eq!(parse(&format(&cpus)), Some(cpus));
        }

        #[test]
        fn never_panics(text in "\\PC{0,40}") {
            let _ = parse(&text);
        }
    }
}
