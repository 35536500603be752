//! Standard output and standard error, written without ever panicking (`println!` and
//! `eprintln!` panic when the write fails; the crate denies them).
//!
//! - A reader that went away (EPIPE: `| head`, a closed pipe) is not an error: output stops
//!   quietly and the command goes on to its own exit status (`qualify`'s and `compare`'s verdict
//!   stays 0 or 1). SIGPIPE stays ignored, as Rust sets it before `main`: a write to a closed
//!   pipe or socket returns EPIPE rather than killing the process (the daemon's connections
//!   rely on that too).
//! - Any other write error on standard output (`> /dev/full`: ENOSPC, EIO) is a
//!   [`StdoutError`]: one line on stderr, exit 1.
//! - Standard error is best effort: when it cannot be written there is nowhere left to say so.

use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once standard output's reader went away: later output is dropped.
static STDOUT_GONE: AtomicBool = AtomicBool::new(false);

/// Standard output could not be written, for another reason than its reader going away.
#[derive(Debug)]
pub struct StdoutError(std::io::Error);

impl std::fmt::Display for StdoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot write to standard output: {}", self.0)
    }
}

impl std::error::Error for StdoutError {}

/// Write `text` to standard output, and flush it.
pub fn print(text: &str) -> Result<(), StdoutError> {
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => {
            STDOUT_GONE.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => Err(StdoutError(e)),
    }
}

/// Write `line` and a newline to standard output.
pub fn println(line: &str) -> Result<(), StdoutError> {
    print(&format!("{line}\n"))
}

/// Write one line to standard error, ignoring a failure (see the module's notes).
pub fn eprint_line(args: std::fmt::Arguments) {
    let _ = writeln!(std::io::stderr().lock(), "{args}");
}

/// `eprintln!` that never panics.
macro_rules! say {
    ($($t:tt)*) => {
        $crate::out::eprint_line(format_args!($($t)*))
    };
}
pub(crate) use say;

/// Write `line` to standard output where what it reports is done already: a failure is said on
/// stderr (once) and the command goes on.
pub fn println_or_warn(line: &str) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if let Err(e) = println(line) {
        if !WARNED.swap(true, Ordering::Relaxed) {
            say!("hwceiling: warning: {e}");
        }
    }
}
