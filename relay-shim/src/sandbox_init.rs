//! The sandbox's init, as bwrap reports it on its status descriptor (`--json-status-fd`).

use std::os::fd::OwnedFd;
#[cfg(target_os = "linux")]
use std::os::fd::{AsRawFd, FromRawFd, RawFd};

/// The sandbox's init (bwrap's `child-pid`), held by a pidfd so a later kill never reaches a
/// process that reused its number. Linux only; elsewhere there is no bwrap.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) struct SandboxInit {
    /// Its pid in the shim's namespace (also its process group's id: bwrap's `--new-session`).
    pub(crate) pid: libc::pid_t,
    /// Its pidfd.
    pub(crate) fd: OwnedFd,
}

impl SandboxInit {
    /// The pidfd of the `"child-pid": N` in bwrap's status text, when it can be opened.
    pub(crate) fn from_status(said: &[u8]) -> Option<SandboxInit> {
        let text = std::str::from_utf8(said).ok()?;
        let at = text.find("\"child-pid\"")? + "\"child-pid\"".len();
        let digits: String = text[at..]
            .trim_start_matches([' ', ':'])
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let pid: libc::pid_t = digits.parse().ok().filter(|&p| p > 1)?;
        #[cfg(target_os = "linux")]
        {
            // SAFETY: pidfd_open takes a pid and flags; it returns a new descriptor or -1.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
            // SAFETY: a non-negative result is a descriptor this process now owns, once.
            (fd >= 0).then(|| SandboxInit {
                pid,
                fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
            })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = pid;
            None
        }
    }

    /// SIGKILL to the init (and so to its whole pid namespace); nothing when it has ended.
    pub(crate) fn kill(&self) {
        #[cfg(target_os = "linux")]
        // SAFETY: pidfd_send_signal takes the pidfd this value owns, a signal number, and a null
        // siginfo (as for kill); it cannot reach another process.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.fd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
    }
}
