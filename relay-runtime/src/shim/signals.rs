//! Signal forwarding: the signals the shim passes to its target's process group, queued while
//! no target runs yet.

use std::io;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use crate::sys;

/// The signals the shim forwards to the target's process group.
pub const FORWARDED_SIGNALS: [libc::c_int; 4] =
    [libc::SIGHUP, libc::SIGINT, libc::SIGTERM, libc::SIGQUIT];
/// The target's pid while it can be signalled (0 before the spawn and once it has exited).
pub(super) static CHILD_PID: AtomicI32 = AtomicI32::new(0);

/// Forwarded signals received while no target was running yet, one bit per signal number.
pub(super) static PENDING: AtomicU64 = AtomicU64::new(0);

/// Installs [`on_signal`] for each forwarded signal, with `SA_RESTART`, except those that were
/// ignored on entry: they stay ignored (and the target inherits that, as from a shell).
pub(super) fn install_forwarders() -> io::Result<()> {
    for &sig in &FORWARDED_SIGNALS {
        // SAFETY: `sigaction` is plain old data; all-zero is a valid starting value.
        let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: `sigaction` is plain old data.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        new.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        new.sa_flags = libc::SA_RESTART;
        // SAFETY: `new.sa_mask` is a valid sigset_t to initialise.
        unsafe { libc::sigemptyset(&mut new.sa_mask) };
        // SAFETY: both pointers refer to valid `sigaction` values; the handler is
        // async-signal-safe (atomics and `kill` only).
        if unsafe { libc::sigaction(sig, &new, &mut old) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if old.sa_sigaction == libc::SIG_IGN {
            // SAFETY: restores the disposition just read; the pointer is valid.
            if unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// The handler: forward to the target's group, or remember the signal until there is one.
/// Async-signal-safe: atomics, `kill` and `errno` only.
extern "C" fn on_signal(sig: libc::c_int) {
    // SAFETY: __errno_location returns this thread's errno slot; reading and restoring it keeps
    // the interrupted code's errno intact.
    let errno = unsafe { *sys::errno_slot() };
    let pid = CHILD_PID.load(Ordering::SeqCst);
    if pid > 0 {
        forward(pid, sig);
    } else if (0..64).contains(&sig) {
        PENDING.fetch_or(1 << sig, Ordering::SeqCst);
        // The spawn may have completed between the load and the store: flush here too. The swap
        // in flush_pending makes sure each pending signal is sent once.
        let pid = CHILD_PID.load(Ordering::SeqCst);
        if pid > 0 {
            flush_pending(pid);
        }
    }
    // SAFETY: as above.
    unsafe { *sys::errno_slot() = errno };
}

/// Sends the signals received before the spawn. Async-signal-safe.
pub(super) fn flush_pending(pid: libc::pid_t) {
    let bits = PENDING.swap(0, Ordering::SeqCst);
    for &sig in &FORWARDED_SIGNALS {
        if bits & (1 << sig) != 0 {
            forward(pid, sig);
        }
    }
}

/// `kill(-pid, sig)`, or `kill(pid, sig)` when the group is gone. Async-signal-safe.
pub(super) fn forward(pid: libc::pid_t, sig: libc::c_int) {
    // SAFETY: kill takes two integers and touches no memory.
    if unsafe { libc::kill(-pid, sig) } != 0 {
        // SAFETY: as above.
        unsafe { libc::kill(pid, sig) };
    }
}
