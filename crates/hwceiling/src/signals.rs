//! SIGINT/SIGTERM set a flag; the runner stops the case in flight before its next repetition
//! (it is kept as failed: interrupted), system changes are restored, and the run's files are
//! written with what finished. A second signal exits at once, after restoring the system
//! changes the run made (drives bound to a userspace driver, hugepages): the handler only wakes
//! a thread that does that (restoring is not async-signal-safe), then exits 130.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

pub static CANCEL: AtomicBool = AtomicBool::new(false);
/// The write end of the pipe the restoring thread waits on; -1 before [`install`].
static WAKE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_sig: libc::c_int) {
    if CANCEL.swap(true, Ordering::SeqCst) {
        let fd = WAKE.load(Ordering::SeqCst);
        if fd >= 0 {
            let b = 1u8;
            // SAFETY: write(2) is async-signal-safe; one byte from a live stack variable.
            if unsafe { libc::write(fd, (&b as *const u8).cast(), 1) } == 1 {
                return;
            }
        }
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(130) };
    }
}

/// On the second signal: restore what this process changed on the system, then exit 130.
fn restore_and_exit(read_fd: libc::c_int) {
    let mut b = 0u8;
    loop {
        // SAFETY: a read of one byte into a live stack variable from a pipe this thread owns.
        let n = unsafe { libc::read(read_fd, (&mut b as *mut u8).cast(), 1) };
        if n == 1 {
            break;
        }
        if n == 0 {
            return;
        }
    }
    // Drives this process holds through SPDK's driver cannot leave vfio-pci while it lives:
    // the unbind would wait for ever. Exit at once; the journal stays for `hwceiling restore`.
    #[cfg(feature = "spdk")]
    if hwc_engine_spdk::native::holds_drives() {
        crate::out::say!(
            "hwceiling: stopped; the native SPDK engine held the drives in this process, so they \
             are still on vfio-pci: run `hwceiling restore` to put them back"
        );
        // SAFETY: ends the process; the kernel releases the devices with it.
        unsafe { libc::_exit(130) };
    }
    // An SPDK perf process still holding the drives would keep them from leaving vfio-pci.
    hwc_engine_spdk::perf::stop_running_perf();
    crate::report_restore(hwc_safety::journal::restore_owned());
    // SAFETY: ends the process without running other threads' code; what is left to flush
    // is the running record, saved after every case.
    unsafe { libc::_exit(130) };
}

/// Install the handlers for SIGINT and SIGTERM.
pub fn install() {
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into a live array of two.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == 0 {
        let read_fd = fds[0];
        if std::thread::Builder::new()
            .name("hwc-signal-restore".into())
            .spawn(move || restore_and_exit(read_fd))
            .is_ok()
        {
            WAKE.store(fds[1], Ordering::SeqCst);
        }
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a handler that only touches atomics and calls
        // write/_exit (async-signal-safe); sa_mask empty; installing for signals we own.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}
