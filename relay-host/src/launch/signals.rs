//! The supervising host's signals, on the one forwarder ([`relay_shim::forwarder`]), and the
//! signals it holds back while a launch prepares and its sandbox starts. SIGTERM and SIGHUP go to
//! the shim. SIGINT sent by a process (a supervisor's `kill -INT PID`, off a terminal) goes to
//! the shim as well, so it ends the session like SIGTERM; SIGINT from a terminal (Ctrl-C,
//! `si_code` `SI_KERNEL`) is ignored, since the terminal delivers it to the whole foreground
//! group, the shim included, which forwards it once. SIGQUIT is ignored while a session runs.

use relay_shim::forwarder::{self as signals, Forwarder};

/// The host's forwarding: SIGTERM, SIGHUP and a process's SIGINT to the shim (the process, not
/// its group: the shim forwards to the session's group itself).
const TO_THE_SHIM: Forwarder = Forwarder {
    signals: &[libc::SIGTERM, libc::SIGHUP, libc::SIGINT],
    to_group: false,
    drop_terminal_sigint: true,
    keep_ignored: false,
    kill_after: 0,
};

/// Starts forwarding SIGTERM, SIGHUP and a process's SIGINT to `pid`, and ignoring a terminal's
/// SIGINT and SIGQUIT. On an error (a `sigaction` refused) the signals keep their default
/// action, which ends the host; the shim then ends the session, as the host's death signal.
pub fn forward_to(pid: i32) -> std::io::Result<()> {
    signals::set_target(pid);
    TO_THE_SHIM.install()?;
    signals::ignore(libc::SIGQUIT)
}

/// Restores the default dispositions.
pub fn stop_forwarding() -> std::io::Result<()> {
    signals::clear_target();
    TO_THE_SHIM.restore()?;
    signals::default_action(libc::SIGQUIT)
}

/// The signals a supervisor ends a session with, which a launch defers while it prepares and its
/// sandbox starts.
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

/// Holds SIGTERM, SIGHUP and SIGINT back while a launch prepares and its sandbox starts
/// (placeholders made one by one and recorded, a session folder, a proxy, the shim waited for):
/// one that arrives stays pending until [`undefer`], once the started session's signals are
/// forwarded (then it ends the session the normal way), or after a refusal has been recorded and
/// cleaned up, when its default action ends the host. Threads started meanwhile (the proxy's,
/// the bridge's) keep them blocked. A child inherits the mask: the shim's spawn lets them through
/// again ([`undefer_in_child`]).
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
