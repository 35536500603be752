//! How many hardware work queues the CUDA driver gives a context
//! (`CUDA_DEVICE_MAX_CONNECTIONS`, 1–32, driver default 8), chosen before the driver starts.
//!
//! Streams are multiplexed onto that many hardware queues. With 32 instead of the default 8,
//! small copies (128 KiB H2D, duplex up to 1 MiB, L2-resident D2D) ran 1–4 % faster on the H200
//! test machines and large ones did not move (evidence: docs/gpu-method.md and
//! `tools/gpu-reference/README.md`). A ceiling is the best the hardware does, so a measuring process asks for 32 unless the user
//! set the variable; the profile records which (`cuda.device_max_connections`).
//!
//! The driver reads the variable once, when it initialises, and the process environment is not
//! thread-safe: [`configure`] must run first thing in `main`, before any other thread exists.

use hwc_model::Setting;
use std::ffi::OsStr;
use std::sync::OnceLock;

/// The variable the CUDA driver reads.
pub const VAR: &str = "CUDA_DEVICE_MAX_CONNECTIONS";
/// What a measuring process asks for when the user did not say: the driver's maximum.
pub const CONNECTIONS: u32 = 32;

/// Where the process's setting came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connections {
    /// Unset before: this process set it to [`CONNECTIONS`].
    Chosen(u32),
    /// The user's value, left as it was (the driver validates it).
    FromEnvironment(String),
}

impl Connections {
    /// The decision for the variable's current value (pure). Empty counts as unset (`VAR=`
    /// is the shell's way to clear it).
    pub fn decide(current: Option<&OsStr>) -> Self {
        match current.filter(|v| !v.is_empty()) {
            Some(v) => Connections::FromEnvironment(v.to_string_lossy().into_owned()),
            None => Connections::Chosen(CONNECTIONS),
        }
    }

    /// The setting as the profile records it: the value, and who chose it.
    pub fn describe(&self) -> Setting {
        match self {
            Connections::Chosen(n) => Setting::about(
                n.to_string(),
                format!(
                    "set by hwceiling because {VAR} was unset; the driver's default is 8: more \
                     hardware queues measured faster small and duplex copies"
                ),
            ),
            Connections::FromEnvironment(v) if in_range(v) => {
                Setting::about(v.clone(), "from the environment, left as the user set it")
            }
            Connections::FromEnvironment(v) => Setting::about(
                v.clone(),
                "from the environment, left as the user set it; not a number from 1 to 32, so \
                 what the driver made of it is not known",
            ),
        }
    }
}

/// A value the driver documents: a whole number from 1 to 32.
fn in_range(v: &str) -> bool {
    v.parse::<u32>().is_ok_and(|n| (1..=32).contains(&n))
}

/// The record for a process that [`configure`]d (`configured`) or did not, with the variable's
/// current value (pure).
pub fn record(configured: Option<&Connections>, current: Option<&OsStr>) -> Setting {
    match (configured, current.filter(|v| !v.is_empty())) {
        (Some(c), _) => c.describe(),
        (None, Some(v)) => {
            Connections::FromEnvironment(v.to_string_lossy().into_owned()).describe()
        }
        (None, None) => Setting::about(
            "unset",
            "the driver's default (8); this process did not choose it",
        ),
    }
}

static CONFIGURED: OnceLock<Connections> = OnceLock::new();

/// Ask the driver for [`CONNECTIONS`] hardware queues unless the user set [`VAR`]; returns what
/// the process now runs with. Later calls return the first call's decision.
///
/// # Safety
/// Changes the process environment: no other thread may exist (or read the environment)
/// while it runs, and the CUDA driver must not have been initialised yet.
pub unsafe fn configure() -> Connections {
    CONFIGURED
        .get_or_init(|| {
            let decision = Connections::decide(std::env::var_os(VAR).as_deref());
            if let Connections::Chosen(n) = decision {
                std::env::set_var(VAR, n.to_string());
            }
            decision
        })
        .clone()
}

/// The environment record's value: [`configure`]'s decision, or, when the process never called
/// it (a library user), the variable as found.
pub fn recorded() -> Setting {
    record(CONFIGURED.get(), std::env::var_os(VAR).as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_means_we_choose_the_maximum() {
        assert_eq!(Connections::decide(None), Connections::Chosen(32));
        let d = Connections::Chosen(32).describe();
        assert_eq!(d.value, "32");
        assert!(d.to_string().starts_with("32 (set by hwceiling"), "{d}");
    }

    #[test]
    fn a_user_value_is_kept_verbatim() {
        let d = Connections::decide(Some(OsStr::new("1")));
        assert_eq!(d, Connections::FromEnvironment("1".into()));
        assert!(d
            .describe()
            .to_string()
            .starts_with("1 (from the environment"));
        // Even a value the driver will reject is the user's to fix, not ours to replace, and
        // the record says it may not have taken effect.
        for bad in ["abc", "64", "0"] {
            let d = Connections::decide(Some(OsStr::new(bad)));
            assert_eq!(d, Connections::FromEnvironment(bad.into()));
            let s = d.describe();
            assert_eq!(s.value, bad);
            assert!(s.to_string().contains("not a number from 1 to 32"), "{bad}");
        }
        assert!(!Connections::decide(Some(OsStr::new("32")))
            .describe()
            .to_string()
            .contains("not a number"));
    }

    #[test]
    fn an_empty_value_counts_as_unset() {
        assert_eq!(
            Connections::decide(Some(OsStr::new(""))),
            Connections::Chosen(32)
        );
        assert_eq!(record(None, Some(OsStr::new(""))).value, "unset");
    }

    #[test]
    fn the_record_says_who_chose() {
        let chosen = Connections::Chosen(32);
        // A configured process reports its decision, whatever the variable reads now.
        assert_eq!(
            record(Some(&chosen), Some(OsStr::new("32"))),
            chosen.describe()
        );
        // A library user that never configured: the variable as found, or the driver default.
        assert!(record(None, Some(OsStr::new("8")))
            .to_string()
            .starts_with("8 (from the environment"));
        assert_eq!(
            record(None, None).to_string(),
            "unset (the driver's default (8); this process did not choose it)"
        );
    }
}
