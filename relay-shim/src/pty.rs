//! `--pty`: the target leads its own session, with its fd 0 as the controlling terminal.
//!
//! For a caller that gives the shim a fresh pseudo-terminal's slave as stdio (not the shim's own
//! controlling terminal: a terminal belongs to one session at a time, and the target does not
//! steal it). The target then is the terminal's foreground process group, so the keys the
//! terminal turns into signals (Ctrl-C, Ctrl-\) reach it.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Arms `cmd` so that its child calls `setsid()` and then `ioctl(0, TIOCSCTTY, 0)` before
/// `exec`. A failure (fd 0 is not a terminal: `ENOTTY`; it is another session's: `EPERM`) is a
/// spawn failure with that errno. Do not also set a process group on `cmd`: a group leader
/// cannot `setsid`, and the new session is a new group anyway (its id is the child's pid).
///
/// ```
/// use std::process::{Command, Stdio};
/// let mut cmd = Command::new("true");
/// cmd.stdin(Stdio::null());
/// relay_shim::pty::lead_session_on_stdin(&mut cmd);
/// let err = cmd.spawn().unwrap_err();
/// assert_eq!(err.raw_os_error(), Some(libc::ENOTTY));
/// ```
pub fn lead_session_on_stdin(cmd: &mut Command) {
    // SAFETY: the hook runs between fork and exec and makes two raw, async-signal-safe system
    // calls (setsid, ioctl); it allocates nothing and builds its errors from errno.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Makes the child of `cmd` lead a new session with no controlling terminal (`setsid` only): a
/// sandboxed program keeps its stdio but can no longer inject input into the terminal
/// (`TIOCSTI` needs it to be the controlling terminal) nor signal the operator's shell's group.
///
/// ```
/// let mut cmd = std::process::Command::new("true");
/// relay_shim::pty::lead_session_without_terminal(&mut cmd);
/// assert!(cmd.status()?.success());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn lead_session_without_terminal(cmd: &mut Command) {
    // SAFETY: the hook runs between fork and exec and makes one raw, async-signal-safe system
    // call (setsid); it allocates nothing and builds its error from errno.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
