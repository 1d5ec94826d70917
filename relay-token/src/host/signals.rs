//! Signal forwarding for the supervising host: SIGTERM and SIGHUP go to the shim; SIGINT and
//! SIGQUIT are ignored while a session runs (a terminal delivers them to the whole foreground
//! group, the shim included, which forwards them once).

use std::sync::atomic::{AtomicI32, Ordering};

static TARGET: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = TARGET.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; `pid` names the shim this process spawned.
        unsafe { libc::kill(pid, sig) };
    }
}

fn set(sig: libc::c_int, handler: libc::sighandler_t) {
    // SAFETY: `sigaction` is plain old data; zeroed is a valid empty mask and no flags.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler;
    sa.sa_flags = libc::SA_RESTART;
    // SAFETY: `sa` is a valid sigaction; the handler only loads an atomic and calls kill.
    unsafe {
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Starts forwarding SIGTERM and SIGHUP to `pid`, and ignoring SIGINT and SIGQUIT.
pub fn forward_to(pid: i32) {
    TARGET.store(pid, Ordering::SeqCst);
    set(libc::SIGTERM, forward as *const () as libc::sighandler_t);
    set(libc::SIGHUP, forward as *const () as libc::sighandler_t);
    set(libc::SIGINT, libc::SIG_IGN);
    set(libc::SIGQUIT, libc::SIG_IGN);
}

/// Restores the default dispositions.
pub fn stop_forwarding() {
    TARGET.store(0, Ordering::SeqCst);
    for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT, libc::SIGQUIT] {
        set(sig, libc::SIG_DFL);
    }
}
