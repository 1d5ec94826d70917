//! Signal forwarding for the supervising host: SIGTERM and SIGHUP go to the shim. SIGINT sent
//! by a process (a supervisor's `kill -INT PID`, off a terminal) goes to the shim as well, so it
//! ends the session like SIGTERM; SIGINT from a terminal (Ctrl-C, `si_code` `SI_KERNEL`) is
//! ignored, since the terminal delivers it to the whole foreground group, the shim included,
//! which forwards it once. SIGQUIT is ignored while a session runs.

use std::sync::atomic::{AtomicI32, Ordering};

static TARGET: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = TARGET.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; `pid` names the shim this process spawned.
        unsafe { libc::kill(pid, sig) };
    }
}

/// The `si_code` of a signal the kernel raised itself, as for a terminal's Ctrl-C: Linux's
/// `SI_KERNEL`; macOS gives such a signal no sender code, 0 (unverified: no Mac here).
#[cfg(target_os = "linux")]
const FROM_TERMINAL: libc::c_int = libc::SI_KERNEL;
#[cfg(not(target_os = "linux"))]
const FROM_TERMINAL: libc::c_int = 0;

/// SIGINT's handler: forwards it unless a terminal sent it (the kernel's `SI_KERNEL`; a process's
/// `kill` gives `SI_USER`, `sigqueue` `SI_QUEUE`, `tgkill` `SI_TKILL`).
extern "C" fn forward_unless_terminal(
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    _context: *mut libc::c_void,
) {
    // SAFETY: installed with SA_SIGINFO, so the kernel passes a valid siginfo (or, defensively,
    // a null one, read as "sent by a process"); only its `si_code` is read.
    let from_terminal = !info.is_null() && unsafe { (*info).si_code } == FROM_TERMINAL;
    if !from_terminal {
        forward(sig);
    }
}

fn set(sig: libc::c_int, handler: libc::sighandler_t) {
    set_flags(sig, handler, 0);
}

fn set_flags(sig: libc::c_int, handler: libc::sighandler_t, flags: libc::c_int) {
    // SAFETY: `sigaction` is plain old data; zeroed is a valid empty mask and no flags.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler;
    sa.sa_flags = libc::SA_RESTART | flags;
    // SAFETY: `sa` is a valid sigaction; the handlers only read the siginfo, load an atomic and
    // call kill.
    unsafe {
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Starts forwarding SIGTERM, SIGHUP and a process's SIGINT to `pid`, and ignoring a terminal's
/// SIGINT and SIGQUIT.
pub fn forward_to(pid: i32) {
    TARGET.store(pid, Ordering::SeqCst);
    set(libc::SIGTERM, forward as *const () as libc::sighandler_t);
    set(libc::SIGHUP, forward as *const () as libc::sighandler_t);
    set_flags(
        libc::SIGINT,
        forward_unless_terminal as *const () as libc::sighandler_t,
        libc::SA_SIGINFO,
    );
    set(libc::SIGQUIT, libc::SIG_IGN);
}

/// Restores the default dispositions.
pub fn stop_forwarding() {
    TARGET.store(0, Ordering::SeqCst);
    for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT, libc::SIGQUIT] {
        set(sig, libc::SIG_DFL);
    }
}

/// The signals a supervisor ends a session with, which a launch defers while it prepares.
const DEFERRED: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGHUP, libc::SIGINT];

fn mask(how: libc::c_int) {
    // SAFETY: `set` is plain old data, filled by sigemptyset/sigaddset before pthread_sigmask
    // reads it; the calls take valid pointers for their duration.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in DEFERRED {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(how, &set, std::ptr::null_mut());
    }
}

/// Holds SIGTERM, SIGHUP and SIGINT back while a launch prepares (placeholders made one by one
/// and recorded, a session folder, a proxy): one that arrives stays pending until [`undefer`],
/// just before the shim is spawned (then the host ends with everything it made recorded, for
/// `gc`) or after a refusal has been recorded and cleaned up, when its default action ends the
/// host. Threads started meanwhile (the
/// proxy's, the bridge's) keep them blocked. A child inherits the mask: the shim's spawn lets
/// them through again ([`undefer_in_child`]).
pub fn defer() {
    mask(libc::SIG_BLOCK);
}

/// Lets the signals [`defer`] held back through (a pending one is delivered now).
pub fn undefer() {
    mask(libc::SIG_UNBLOCK);
}

/// [`undefer`] between fork and exec: the child (the shim, and through it bwrap and the session)
/// must get SIGTERM from the parent-death signal and the forwarding. Async-signal-safe: it
/// allocates nothing and calls sigemptyset, sigaddset and sigprocmask only.
pub(crate) fn undefer_in_child() {
    // SAFETY: as in `mask`; sigprocmask acts on the one thread a forked child has.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in DEFERRED {
            libc::sigaddset(&mut set, sig);
        }
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}
