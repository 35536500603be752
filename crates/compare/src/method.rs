//! How a figure was measured: its engine (`host-memcpy`, `host-streaming`, `cuda-copy`, …). Two
//! figures measured by different engines are not held to each other: [`compare`](crate::compare)
//! reports them as changed, never as a regression, and [`qualify`](crate::qualify) neither passes
//! nor fails a baseline rule on their ratio.

use hwc_model::{CeilingOrigin, Measurement, Profile};

/// The engine of a measurement.
pub fn of_measurement(m: &Measurement) -> Option<&str> {
    Some(m.engine.as_str())
}

/// The engine of the ceiling `key`: that of the measurement it is the median of (read by key
/// from its record); `None` for a derived or unknown source, or a ceiling the profile
/// lacks.
pub fn of_ceiling<'a>(p: &'a Profile, key: &str) -> Option<&'a str> {
    match p.ceiling_source(key)? {
        CeilingOrigin::Measured(m) => of_measurement(m),
        _ => None,
    }
}

/// The baseline's and the candidate's engines when both sides name one and they differ:
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
    fn only_two_named_and_different_engines_are_a_change() {
        let (m, s) = ("host-memcpy", "host-streaming");
        assert_eq!(changed(Some(m), Some(s)), Some((m, s)));
        assert_eq!(changed(Some(m), Some(m)), None);
        assert_eq!(changed(None, Some(s)), None);
        assert_eq!(changed(Some(s), None), None);
    }
}
