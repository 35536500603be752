//! PCI addresses in one spelling: CUDA says `0000:00:06.0`, NVML `00000000:00:06.0`, sysfs
//! `0000:00:06.0`, people `00:06.0` or upper case. Everything is compared in sysfs's form.

/// Normalise a PCI address to sysfs's form: lower-case hex, a domain of at least 4 digits,
/// `DDDD:BB:DD.F`. A missing domain is domain 0. `None` when it is not a PCI address.
///
/// `"00000000:00:06.0"` → `"0000:00:06.0"`, `"3B:00.0"` → `"0000:3b:00.0"`.
pub fn normalize_bdf(text: &str) -> Option<String> {
    let text = text.trim();
    let (rest, function) = text.rsplit_once('.')?;
    let mut parts = rest.rsplit(':');
    let device = parts.next()?;
    let bus = parts.next()?;
    let domain = parts.next();
    if parts.next().is_some() {
        return None;
    }
    let domain = match domain {
        Some(d) => parse_hex(d, 8, u32::MAX)?,
        None => 0,
    };
    let bus = parse_hex(bus, 2, 0xff)?;
    let device = parse_hex(device, 2, 0x1f)?;
    let function = parse_hex(function, 1, 7)?;
    Some(format!("{domain:04x}:{bus:02x}:{device:02x}.{function:x}"))
}

fn parse_hex(field: &str, max_digits: usize, max_value: u32) -> Option<u32> {
    if field.is_empty() || field.len() > max_digits {
        return None;
    }
    let value = u32::from_str_radix(field, 16).ok()?;
    (value <= max_value).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::normalize_bdf;

    #[test]
    fn nvml_cuda_and_short_forms_agree() {
        assert_eq!(
            normalize_bdf("00000000:00:06.0").as_deref(),
            Some("0000:00:06.0")
        );
        assert_eq!(
            normalize_bdf("0000:00:06.0").as_deref(),
            Some("0000:00:06.0")
        );
        assert_eq!(
            normalize_bdf("0000:3B:00.0").as_deref(),
            Some("0000:3b:00.0")
        );
        assert_eq!(normalize_bdf(" 3b:00.1\n").as_deref(), Some("0000:3b:00.1"));
        // Large domains (VMD, Hyper-V) keep all their digits.
        assert_eq!(
            normalize_bdf("10000:E1:00.0").as_deref(),
            Some("10000:e1:00.0")
        );
    }

    #[test]
    fn garbage_is_not_an_address() {
        for bad in [
            "",
            "gpu0",
            "0000:00:06",
            "0000:00:20.0",
            "0000:00:06.8",
            "0000:100:06.0",
            "0:0:0:00:06.0",
            "zz:00.0",
        ] {
            assert_eq!(normalize_bdf(bad), None, "{bad:?}");
        }
    }
}
