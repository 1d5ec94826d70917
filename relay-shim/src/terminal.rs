//! The terminal: who holds the foreground of the shim's controlling terminal, and handing it
//! to the target and back.

use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::options::ShimOptions;

/// A terminal launch: the target's own group must be the terminal's foreground group, or it is
/// stopped (SIGTTIN/SIGTTOU) as soon as it reads the terminal or sets its modes. The child takes
/// the terminal itself, after std's setpgid and before exec, so no read can come first. With
/// `--pty` (or `--sandbox-profile`) the target leads a session of its own instead. Returns the
/// terminal, if any.
pub(super) fn hand_terminal_to_target(cmd: &mut Command, opts: &ShimOptions) -> Option<RawFd> {
    if opts.pty || opts.sandbox_profile.is_some() {
        return None;
    }
    let tty = foreground_tty()?;
    // SAFETY: the hook runs between fork and exec and makes raw, async-signal-safe calls only
    // (getpid, sigprocmask, tcsetpgrp); it allocates nothing and captures one integer. A failure
    // to take the terminal is not a spawn failure: it is ignored.
    unsafe {
        cmd.pre_exec(move || {
            give_terminal(tty, libc::getpid());
            Ok(())
        });
    }
    Some(tty)
}

/// The first of fds 0, 1, 2 that is a terminal whose foreground process group is the shim's
/// own: the shim was started in the foreground of a terminal (a `relay-host run`).
pub(super) fn foreground_tty() -> Option<RawFd> {
    // SAFETY: getpgrp takes nothing and cannot fail.
    let own = unsafe { libc::getpgrp() };
    // SAFETY: isatty and tcgetpgrp take an int fd and touch no memory of ours.
    (0..=2).find(|&fd| unsafe { libc::isatty(fd) == 1 && libc::tcgetpgrp(fd) == own })
}

/// `tcsetpgrp(tty, pgrp)` with SIGTTOU blocked (a caller outside the foreground group would be
/// stopped otherwise). Errors are ignored. Async-signal-safe: sigprocmask and tcsetpgrp only.
pub(super) fn give_terminal(tty: RawFd, pgrp: libc::pid_t) {
    // SAFETY: sigset_t is plain old data, initialised by sigemptyset before use.
    let mut block: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above; filled by sigprocmask.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: the pointers refer to valid sigset_t values owned by this frame; tcsetpgrp takes
    // integers only.
    unsafe {
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGTTOU);
        libc::sigprocmask(libc::SIG_BLOCK, &block, &mut old);
        libc::tcsetpgrp(tty, pgrp);
        libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

/// Makes the shim's own group the terminal's foreground group again.
pub(super) fn take_terminal_back(tty: RawFd) {
    // SAFETY: getpgrp takes nothing and cannot fail.
    give_terminal(tty, unsafe { libc::getpgrp() });
}
