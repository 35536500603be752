//! The tolerance of a comparison: `5%` or `0.05`, a fraction of the reference value.

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// A relative tolerance as a fraction (0.05 = 5 %).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
pub struct Tolerance(f64);

impl Tolerance {
    /// A fraction in [0, 1).
    pub fn from_fraction(f: f64) -> Option<Self> {
        (f.is_finite() && (0.0..1.0).contains(&f)).then_some(Tolerance(f))
    }

    pub fn fraction(self) -> f64 {
        self.0
    }
}

impl Default for Tolerance {
    /// 5 %: about the run-to-run spread of a well-measured ceiling.
    fn default() -> Self {
        Tolerance(0.05)
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.0 * 100.0)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a tolerance: write a percentage below 100 (5%) or a fraction below 1 (0.05)")]
pub struct BadTolerance(pub String);

impl FromStr for Tolerance {
    type Err = BadTolerance;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let bad = || BadTolerance(s.to_string());
        let fraction = match t.strip_suffix('%') {
            Some(pct) => pct.trim().parse::<f64>().map_err(|_| bad())? / 100.0,
            None => t.parse::<f64>().map_err(|_| bad())?,
        };
        Tolerance::from_fraction(fraction).ok_or_else(bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_and_fraction_forms_agree() {
        assert_eq!("5%".parse::<Tolerance>().unwrap().fraction(), 0.05);
        assert_eq!(" 2.5 % ".parse::<Tolerance>().unwrap().fraction(), 0.025);
        assert_eq!("0.05".parse::<Tolerance>().unwrap().fraction(), 0.05);
        assert_eq!("0".parse::<Tolerance>().unwrap().fraction(), 0.0);
        for bad in ["5", "100%", "-1%", "NaN", "inf", "", "%", "five"] {
            let e = bad.parse::<Tolerance>().unwrap_err().to_string();
            assert!(e.contains("not a tolerance"), "{bad}: {e}");
        }
        assert_eq!(Tolerance::default().to_string(), "5%");
    }
}
