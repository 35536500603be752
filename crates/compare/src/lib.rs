//! Reads ceiling profiles against a measurement, against each other and against a bring-up spec:
//! [`efficiency`] (measured / ceiling), [`compare`] (two runs, or a fleet's medians and outliers),
//! [`qualify`] (pass/fail per rule and link) and its [`junit`] XML.
//!
//! Pure: profiles and specs in, reports and text out. Files, exit codes and HTTP live in the
//! binary and the daemon.

pub mod compare;
pub mod efficiency;
pub mod junit;
pub mod method;
pub mod qualify;
pub mod settings;
pub mod source;
pub mod tolerance;

pub use compare::{compare_fleet, compare_pair, FleetReport, Node, PairReport};
pub use efficiency::{efficiency, Efficiency, EfficiencyError};
pub use qualify::{parse_spec, qualify, QualifyReport, Spec, SpecError};
pub use source::Source;
pub use tolerance::Tolerance;
