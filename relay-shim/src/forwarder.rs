//! The one signal forwarder, for the host (signals to the shim) and the shim (signals to its
//! target's process group).
//!
//! A [`Forwarder`] says which signals go on, to a process or its group, and whether a
//! terminal's SIGINT is dropped, and whether a signal ignored on entry stays ignored (as a shell's
//! `nohup` or `trap '' HUP` asked; a child inherits that), and how long after an ending signal
//! (SIGTERM, SIGHUP, SIGINT) what is left is killed. [`Forwarder::install`] checks every
//! `sigaction`. A signal that arrives before there is a target is queued and sent once
//! [`set_target`] names one. Once [`set_sandbox_init`] names a sandbox's init (bwrap's
//! `child-pid`), signals go to the init's process group, where the sandboxed program runs (bwrap's
//! `--new-session` makes the init a session and group leader; the program is its child in that
//! group), rather than to bwrap, whose death would take the sandbox down with SIGKILL. The
//! handlers are async-signal-safe: atomics, `kill`, `alarm`, `pidfd_send_signal` and `errno`
//! only.
//!
//! ```
//! use relay_shim::forwarder::{self, Forwarder};
//! let fw = Forwarder {
//!     signals: &[libc::SIGUSR2],
//!     to_group: false,
//!     drop_terminal_sigint: false,
//!     keep_ignored: true,
//!     kill_after: 0,
//! };
//! fw.install()?;
//! let mut child = std::process::Command::new("sleep").arg("5").spawn()?;
//! forwarder::set_target(child.id() as i32);
//! // SAFETY: kill takes integers; this process signals itself.
//! unsafe { libc::kill(std::process::id() as i32, libc::SIGUSR2) };
//! let status = child.wait()?;
//! forwarder::clear_target();
//! fw.restore()?;
//! use std::os::unix::process::ExitStatusExt;
//! assert_eq!(status.signal(), Some(libc::SIGUSR2));
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

use relay_token::sys;

/// The pid signals go to while it can be signalled (0 before a spawn and once it has exited).
static TARGET: AtomicI32 = AtomicI32::new(0);
/// Whether a signal goes to the target's process group first.
static TO_GROUP: AtomicBool = AtomicBool::new(false);
/// Whether a SIGINT the kernel raised for a terminal is dropped.
static DROP_TERMINAL_SIGINT: AtomicBool = AtomicBool::new(false);
/// Signals received while there was no target, one bit per signal number.
static PENDING: AtomicU64 = AtomicU64::new(0);
/// The sandbox's init whose process group signals go to (0: none).
static SANDBOX_INIT: AtomicI32 = AtomicI32::new(0);
/// A pidfd of the sandbox's init, for the kill once the grace period is over (-1: none).
static SANDBOX_INIT_FD: AtomicI32 = AtomicI32::new(-1);
/// Seconds from an ending signal to the kill of what is left (0: never).
static KILL_AFTER: AtomicU32 = AtomicU32::new(0);
/// Whether the kill is already scheduled (the first ending signal starts the grace period).
static KILL_ARMED: AtomicBool = AtomicBool::new(false);

/// The signals that ask the target to end, and start the grace period of
/// [`Forwarder::kill_after`].
pub const ENDING_SIGNALS: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGHUP, libc::SIGINT];

/// The `si_code` of a signal the kernel raised itself, as for a terminal's Ctrl-C: Linux's
/// `SI_KERNEL`; macOS gives such a signal no sender code, 0 (unverified: no Mac here).
#[cfg(target_os = "linux")]
const FROM_TERMINAL: libc::c_int = libc::SI_KERNEL;
#[cfg(not(target_os = "linux"))]
const FROM_TERMINAL: libc::c_int = 0;

/// Which signals go on, and how.
#[derive(Debug, Clone, Copy)]
pub struct Forwarder {
    /// The signals forwarded (each below 64).
    pub signals: &'static [libc::c_int],
    /// Send to the target's process group (`kill(-pid)`, or the pid alone once the group is
    /// gone) rather than to the process.
    pub to_group: bool,
    /// Drop a SIGINT a terminal raised (the kernel's `SI_KERNEL`): the terminal delivers it to
    /// the whole foreground group, the target included. A process's `kill -INT` still goes on.
    pub drop_terminal_sigint: bool,
    /// Leave a signal that was ignored on entry ignored, rather than forward it.
    pub keep_ignored: bool,
    /// Seconds after the first of [`ENDING_SIGNALS`] a process sent is forwarded until what is
    /// left is killed with SIGKILL: the sandbox's init (and so its whole pid namespace) and the
    /// target's group. A SIGINT a terminal raised (Ctrl-C) starts no grace period. 0: no kill
    /// follows. Uses `alarm` and a SIGALRM handler.
    pub kill_after: u32,
}

impl Forwarder {
    /// Installs the handler for each of [`signals`](Self::signals) (`SA_RESTART`); with
    /// [`keep_ignored`](Self::keep_ignored), one ignored on entry stays ignored.
    ///
    /// ```
    /// # use relay_shim::forwarder::Forwarder;
    /// let fw = Forwarder {
    ///     signals: &[libc::SIGUSR1],
    ///     to_group: true,
    ///     drop_terminal_sigint: false,
    ///     keep_ignored: true,
    ///     kill_after: 0,
    /// };
    /// fw.install()?;
    /// fw.restore()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn install(&self) -> io::Result<()> {
        TO_GROUP.store(self.to_group, Ordering::SeqCst);
        DROP_TERMINAL_SIGINT.store(self.drop_terminal_sigint, Ordering::SeqCst);
        KILL_AFTER.store(self.kill_after, Ordering::SeqCst);
        KILL_ARMED.store(false, Ordering::SeqCst);
        if self.kill_after > 0 {
            set(
                libc::SIGALRM,
                on_grace_over as *const () as libc::sighandler_t,
                0,
            )?;
        }
        for &sig in self.signals {
            let old = set(
                sig,
                on_signal as *const () as libc::sighandler_t,
                libc::SA_SIGINFO,
            )?;
            if self.keep_ignored && old.sa_sigaction == libc::SIG_IGN {
                // SAFETY: restores the disposition just read; the pointer is valid.
                if unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) } != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }

    /// Gives each forwarded signal its default action back (with
    /// [`keep_ignored`](Self::keep_ignored), one still ignored as on entry stays so). Queued
    /// signals are dropped.
    ///
    /// ```
    /// # use relay_shim::forwarder::Forwarder;
    /// let fw = Forwarder {
    ///     signals: &[libc::SIGUSR1],
    ///     to_group: false,
    ///     drop_terminal_sigint: false,
    ///     keep_ignored: true,
    ///     kill_after: 0,
    /// };
    /// fw.restore()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn restore(&self) -> io::Result<()> {
        if self.kill_after > 0 {
            // SAFETY: alarm takes an integer; 0 cancels a scheduled kill.
            unsafe { libc::alarm(0) };
            set(libc::SIGALRM, libc::SIG_DFL, 0)?;
        }
        KILL_AFTER.store(0, Ordering::SeqCst);
        for &sig in self.signals {
            let old = set(sig, libc::SIG_DFL, 0)?;
            if self.keep_ignored && old.sa_sigaction == libc::SIG_IGN {
                set(sig, libc::SIG_IGN, 0)?;
            }
        }
        PENDING.store(0, Ordering::SeqCst);
        Ok(())
    }
}

/// Sets `handler` for `sig` (`SA_RESTART` and `flags`, an empty mask); returns the old action.
fn set(
    sig: libc::c_int,
    handler: libc::sighandler_t,
    flags: libc::c_int,
) -> io::Result<libc::sigaction> {
    // SAFETY: `sigaction` is plain old data; all-zero is a valid empty action.
    let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    new.sa_sigaction = handler;
    new.sa_flags = libc::SA_RESTART | flags;
    // SAFETY: `new.sa_mask` is a valid sigset_t to initialise; both pointers refer to valid
    // `sigaction` values; the handler is async-signal-safe.
    let rc = unsafe {
        libc::sigemptyset(&mut new.sa_mask);
        libc::sigaction(sig, &new, &mut old)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old)
}

/// Ignores `sig` (checked), as the host does with SIGQUIT while a session runs.
///
/// ```
/// relay_shim::forwarder::ignore(libc::SIGUSR1)?;
/// relay_shim::forwarder::default_action(libc::SIGUSR1)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn ignore(sig: libc::c_int) -> io::Result<()> {
    set(sig, libc::SIG_IGN, 0).map(drop)
}

/// Gives `sig` its default action back (checked).
///
/// ```
/// relay_shim::forwarder::default_action(libc::SIGUSR1)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn default_action(sig: libc::c_int) -> io::Result<()> {
    set(sig, libc::SIG_DFL, 0).map(drop)
}

/// Names the target and sends it the signals queued while there was none. Async-signal-safe.
///
/// ```
/// relay_shim::forwarder::set_target(0); // no target: signals are queued
/// ```
pub fn set_target(pid: libc::pid_t) {
    TARGET.store(pid, Ordering::SeqCst);
    if pid > 0 {
        flush_pending(pid);
    }
}

/// No target any more (it exited, or is about to be reaped): a signal now is queued, never sent
/// to a process that reused the pid.
///
/// ```
/// relay_shim::forwarder::clear_target();
/// ```
pub fn clear_target() {
    TARGET.store(0, Ordering::SeqCst);
}

/// The handler: forward to the target, or queue the signal until there is one.
extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: __errno_location returns this thread's errno slot; reading and restoring it keeps
    // the interrupted code's errno intact.
    let errno = unsafe { *sys::errno_slot() };
    // SAFETY: installed with SA_SIGINFO, so the kernel passes a valid siginfo (or, defensively,
    // a null one, read as "sent by a process"); only its `si_code` is read.
    let from_terminal = !info.is_null() && unsafe { (*info).si_code } == FROM_TERMINAL;
    let dropped =
        sig == libc::SIGINT && from_terminal && DROP_TERMINAL_SIGINT.load(Ordering::SeqCst);
    if !dropped {
        let pid = TARGET.load(Ordering::SeqCst);
        if pid > 0 {
            forward(pid, sig);
            // A terminal's Ctrl-C is an interrupt the program may survive (a shell's prompt),
            // not a request to end: it starts no grace period.
            if !(sig == libc::SIGINT && from_terminal) {
                arm_kill(sig);
            }
        } else if (0..64).contains(&sig) {
            PENDING.fetch_or(1 << sig, Ordering::SeqCst);
            // The target may have been named between the load and the store: flush here too.
            // The swap in flush_pending makes sure each queued signal is sent once.
            let pid = TARGET.load(Ordering::SeqCst);
            if pid > 0 {
                flush_pending(pid);
            }
        }
    }
    // SAFETY: as above.
    unsafe { *sys::errno_slot() = errno };
}

/// Sends the queued signals. Async-signal-safe.
fn flush_pending(pid: libc::pid_t) {
    let bits = PENDING.swap(0, Ordering::SeqCst);
    for sig in 1..64 {
        if bits & (1 << sig) != 0 {
            forward(pid, sig);
            arm_kill(sig);
        }
    }
}

/// After an ending signal went on: schedules the kill of what is left, once (the first one
/// starts the grace period; a later one does not prolong it). Async-signal-safe.
fn arm_kill(sig: libc::c_int) {
    let secs = KILL_AFTER.load(Ordering::SeqCst);
    if secs > 0 && ENDING_SIGNALS.contains(&sig) && !KILL_ARMED.swap(true, Ordering::SeqCst) {
        // SAFETY: alarm takes an integer and touches no memory.
        unsafe { libc::alarm(secs) };
    }
}

/// SIGALRM: the grace period is over; SIGKILL to the sandbox's init (its whole pid namespace
/// goes with it) and to the target's group. Async-signal-safe.
extern "C" fn on_grace_over(_sig: libc::c_int) {
    // SAFETY: as in `on_signal`.
    let errno = unsafe { *sys::errno_slot() };
    if !KILL_ARMED.load(Ordering::SeqCst) {
        return;
    }
    // A sandbox's init is named only on Linux (bwrap; pidfds are Linux's).
    #[cfg(target_os = "linux")]
    let fd = SANDBOX_INIT_FD.load(Ordering::SeqCst);
    #[cfg(target_os = "linux")]
    if fd >= 0 {
        // SAFETY: the descriptor is the init's pidfd, open while it is named here
        // ([`clear_sandbox_init`] withdraws it before it is closed, on this same thread);
        // pidfd_send_signal takes it, a signal number and a null siginfo.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd,
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
    }
    let pid = TARGET.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill takes integers and touches no memory.
        if unsafe { libc::kill(-pid, libc::SIGKILL) } != 0 {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    // SAFETY: as above.
    unsafe { *sys::errno_slot() = errno };
}

/// Names the sandbox's init (`pid`, and a pidfd of it the caller keeps open until
/// [`clear_sandbox_init`]): from now on signals go to the init's process group, where the
/// sandboxed program runs, and the kill after the grace period reaches the init by its pidfd.
/// Async-signal-safe.
///
/// ```
/// relay_shim::forwarder::set_sandbox_init(0, -1); // none
/// relay_shim::forwarder::clear_sandbox_init();
/// ```
pub fn set_sandbox_init(pid: libc::pid_t, pidfd: libc::c_int) {
    SANDBOX_INIT_FD.store(pidfd, Ordering::SeqCst);
    SANDBOX_INIT.store(pid, Ordering::SeqCst);
}

/// No sandbox's init any more (it ended, or its pidfd is about to be closed): signals go to the
/// target's group again.
///
/// ```
/// relay_shim::forwarder::clear_sandbox_init();
/// ```
pub fn clear_sandbox_init() {
    SANDBOX_INIT.store(0, Ordering::SeqCst);
    SANDBOX_INIT_FD.store(-1, Ordering::SeqCst);
}

/// Cancels a kill scheduled by an ending signal (the target has ended).
///
/// ```
/// relay_shim::forwarder::cancel_kill();
/// ```
pub fn cancel_kill() {
    if KILL_ARMED.swap(false, Ordering::SeqCst) {
        // SAFETY: alarm takes an integer; 0 cancels.
        unsafe { libc::alarm(0) };
    }
}

/// Sends `sig` to `pid` the configured way: to the process group of the sandbox's init once one
/// is named ([`set_sandbox_init`]: the sandboxed program's group; the init itself, pid 1 of its
/// namespace, takes no signal it has no handler for); else to `pid`'s group first (`kill(-pid)`,
/// or `kill(pid)` once the group is gone), or the process. Async-signal-safe.
///
/// ```
/// let mut child = std::process::Command::new("sleep").arg("5").spawn()?;
/// relay_shim::forwarder::forward(child.id() as i32, libc::SIGTERM);
/// use std::os::unix::process::ExitStatusExt;
/// assert_eq!(child.wait()?.signal(), Some(libc::SIGTERM));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn forward(pid: libc::pid_t, sig: libc::c_int) {
    let init = SANDBOX_INIT.load(Ordering::SeqCst);
    // SAFETY: kill takes two integers and touches no memory. The init's number stays named only
    // while bwrap, its parent and reaper, runs: the shim withdraws it as soon as bwrap has ended,
    // before reaping bwrap.
    if init > 1 && unsafe { libc::kill(-init, sig) } == 0 {
        return;
    }
    // SAFETY: kill takes two integers and touches no memory.
    if !TO_GROUP.load(Ordering::SeqCst) || unsafe { libc::kill(-pid, sig) } != 0 {
        // SAFETY: as above.
        unsafe { libc::kill(pid, sig) };
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn a_signal_before_the_target_is_sent_to_it_once_named() {
        let fw = Forwarder {
            signals: &[libc::SIGUSR1],
            to_group: false,
            drop_terminal_sigint: false,
            keep_ignored: true,
            kill_after: 0,
        };
        clear_target();
        fw.install().unwrap();
        // SAFETY: raise takes an integer; the handler installed above queues it.
        assert_eq!(unsafe { libc::raise(libc::SIGUSR1) }, 0);
        assert_ne!(PENDING.load(Ordering::SeqCst) & (1 << libc::SIGUSR1), 0);
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        set_target(child.id() as i32);
        let status = child.wait().unwrap();
        clear_target();
        fw.restore().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGUSR1));
        assert_eq!(PENDING.load(Ordering::SeqCst), 0);
    }
}
