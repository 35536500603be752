//! The check of the mode: open libcufile's driver with compat mode forbidden, in a process of
//! its own. In-process it cannot be undone: after a refused open, libcufile 1.15 refuses the
//! ordinary open too (5001), as seen on the GPU test machines.
//!
//! The child is this program run again with [`ARG`]; it loads the library `HWC_LIBCUFILE`
//! names, forbids compat mode, opens the driver, and says what happened in its exit status
//! ([`exit_code`]).

use crate::api::{Cufile, Status, PARAM_ALLOW_COMPAT_MODE};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The hidden command-line argument that makes the binary the check's child.
pub const ARG: &str = "__cufile-strict-open";

/// Exit status: opened.
const OPENED: i32 = 0;
/// Exit status: this libcufile cannot forbid compat mode (or could not be loaded).
const CANNOT: i32 = 250;

/// The child's work: its exit status.
pub fn child_main() -> i32 {
    let Some(path) = std::env::var_os("HWC_LIBCUFILE") else {
        return CANNOT;
    };
    let Ok(lib) = Cufile::load(&[path.into()]) else {
        return CANNOT;
    };
    exit_code(strict_open(&lib))
}

/// Forbid compat mode, then open (and close) the driver.
fn strict_open(lib: &Cufile) -> Option<Result<(), Status>> {
    if !lib.set_bool(PARAM_ALLOW_COMPAT_MODE, false) {
        return None;
    }
    let s = lib.driver_open();
    if s.err == 0 {
        lib.driver_close();
        Some(Ok(()))
    } else {
        Some(Err(s))
    }
}

/// The check's result as an exit status: 0 opened; 1–249 refused with libcufile error 5000 + n;
/// [`CANNOT`] otherwise.
pub fn exit_code(r: Option<Result<(), Status>>) -> i32 {
    match r {
        Some(Ok(())) => OPENED,
        Some(Err(s)) if (5001..5250).contains(&s.err) => (s.err - 5000) as i32,
        _ => CANNOT,
    }
}

/// Back from an exit status (`None`: the check could not be made).
pub fn from_exit_code(code: Option<i32>) -> Option<Result<(), Status>> {
    match code? {
        OPENED => Some(Ok(())),
        n @ 1..=249 => Some(Err(Status {
            err: 5000 + n as u32,
            cu_err: 0,
        })),
        _ => None,
    }
}

/// Run the check as a child of `exe` (this program) against the library at `lib`, for at most
/// 60 s: the result, or `None` where it could not be made.
pub fn in_child(exe: &Path, lib: &Path) -> Option<Result<(), Status>> {
    let mut child = Command::new(exe)
        .arg(ARG)
        .env("HWC_LIBCUFILE", lib)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return from_exit_code(status.code()),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_status_carries_the_result_both_ways() {
        let refused = Status {
            err: 5001,
            cu_err: 0,
        };
        for r in [Some(Ok(())), Some(Err(refused)), None] {
            assert_eq!(from_exit_code(Some(exit_code(r))), r);
        }
        // A code past the status range, a signal (no code), a crash: no result.
        let odd = Status {
            err: 7000,
            cu_err: 0,
        };
        assert_eq!(from_exit_code(Some(exit_code(Some(Err(odd))))), None);
        assert_eq!(from_exit_code(None), None);
        assert_eq!(from_exit_code(Some(255)), None);
    }

    #[test]
    fn a_child_that_cannot_run_gives_no_result() {
        assert_eq!(
            in_child(Path::new("/nonexistent/hwceiling"), Path::new("/x")),
            None
        );
        // `true` exits 0 whatever it is given: taken as "opened"; `false` exits 1 → 5001.
        assert_eq!(
            in_child(Path::new("/bin/true"), Path::new("/x")),
            Some(Ok(()))
        );
        assert_eq!(
            in_child(Path::new("/bin/false"), Path::new("/x")),
            Some(Err(Status {
                err: 5001,
                cu_err: 0
            }))
        );
    }
}
