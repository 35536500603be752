//! How a figure was measured, where that can differ between two profiles of one machine: the
//! host RAM copy kernel (`memcpy`, or `streaming`: vector loads and non-temporal stores). A
//! profile written before the streaming kernel existed names none; its host figures were
//! measured with `memcpy`. Two figures measured with different kernels are not held to each
//! other: [`compare`](crate::compare) reports them as changed, never as a regression, and
//! [`qualify`](crate::qualify) neither passes nor fails a baseline rule on their ratio.

use hwc_model::{CeilingOrigin, Measurement, PathId, Profile};

/// The copy kernel of a host RAM measurement (`memcpy` when it names none); `None` for every
/// other path.
pub fn of_measurement(m: &Measurement) -> Option<&str> {
    (m.path == PathId::HostRam).then(|| m.params.copy_kernel_name())
}

/// The copy kernel of the ceiling `key`: that of the measurement it is the median of (read by
/// key from `ceiling_sources`), when that is a host RAM measurement; `None` for a derived or
/// unknown source, another path, or a ceiling the profile lacks.
pub fn of_ceiling<'a>(p: &'a Profile, key: &str) -> Option<&'a str> {
    match p.ceiling_source(key)? {
        CeilingOrigin::Measured(m) => of_measurement(m),
        _ => None,
    }
}

/// The baseline's and the candidate's copy kernels when both sides name one and they differ:
/// the two figures are not comparable.
pub fn changed<'a>(
    baseline: Option<&'a str>,
    candidate: Option<&'a str>,
) -> Option<(&'a str, &'a str)> {
    match (baseline, candidate) {
        (Some(a), Some(b)) if a != b => Some((a, b)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_two_named_and_different_kernels_are_a_change() {
        assert_eq!(
            changed(Some("memcpy"), Some("streaming")),
            Some(("memcpy", "streaming"))
        );
        assert_eq!(changed(Some("memcpy"), Some("memcpy")), None);
        assert_eq!(changed(None, Some("streaming")), None);
        assert_eq!(changed(Some("streaming"), None), None);
    }
}
