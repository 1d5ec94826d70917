//! The status protocol: the one-line JSON events the shim writes to its status descriptor.

use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};

use crate::exit::ExitCode;
use relay_token::sys;

use super::identity;

/// One status line, as written to the status descriptor.
///
/// ```
/// use relay_shim::StatusEvent;
/// assert_eq!(StatusEvent::Started { pid: 42 }.line(), "{\"event\":\"started\",\"pid\":42}\n");
/// assert_eq!(StatusEvent::Signaled { signal: 9 }.line(), "{\"event\":\"exit\",\"signal\":9}\n");
/// assert_eq!(
///     StatusEvent::HelloRefused { reason: "timeout" }.line(),
///     "{\"event\":\"hello_refused\",\"reason\":\"timeout\"}\n"
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StatusEvent {
    /// `{"event":"no_identity"}`: the first line without `--identity`.
    NoIdentity,
    /// `{"event":"hello_ok","pid":P}`: the bridge confirmed the launch (`P` is the shim's pid).
    HelloOk {
        /// The shim's own pid.
        pid: u32,
    },
    /// `{"event":"bad_secret","reason":R}`: fd 3 did not hold a launch secret; nothing runs.
    BadSecret {
        /// One of [`identity::SecretError::reason`]'s words.
        reason: &'static str,
    },
    /// `{"event":"hello_refused","reason":R}`: the bridge did not confirm; nothing runs.
    HelloRefused {
        /// One of [`identity::Refusal::reason`]'s words.
        reason: &'static str,
    },
    /// `{"event":"started","pid":P}`: the target runs.
    Started {
        /// The target's pid (also its process group id).
        pid: u32,
    },
    /// `{"event":"spawn_failed","errno":E}`: nothing runs.
    SpawnFailed {
        /// The `errno` of the failed spawn (2 for a program not found).
        errno: i32,
    },
    /// `{"event":"sandbox_failed","status":S}`: with `--sandbox-status-fd`, bwrap ended before
    /// it reported the sandbox's namespaces; nothing ran inside.
    SandboxFailed {
        /// bwrap's exit status, or 128 + the signal that killed it.
        status: i32,
    },
    /// `{"event":"exit","status":S}`: the target exited.
    Exited {
        /// Its exit status.
        status: i32,
    },
    /// `{"event":"exit","signal":G}`: the target was killed by a signal.
    Signaled {
        /// The signal number.
        signal: i32,
    },
}

impl StatusEvent {
    /// The JSON line, newline included.
    ///
    /// ```
    /// use relay_shim::StatusEvent;
    /// assert_eq!(StatusEvent::Exited { status: 3 }.line(), "{\"event\":\"exit\",\"status\":3}\n");
    /// assert_eq!(StatusEvent::NoIdentity.line(), "{\"event\":\"no_identity\"}\n");
    /// ```
    pub fn line(&self) -> String {
        match *self {
            StatusEvent::NoIdentity => "{\"event\":\"no_identity\"}\n".to_owned(),
            StatusEvent::HelloOk { pid } => format!("{{\"event\":\"hello_ok\",\"pid\":{pid}}}\n"),
            StatusEvent::BadSecret { reason } => {
                format!("{{\"event\":\"bad_secret\",\"reason\":\"{reason}\"}}\n")
            }
            StatusEvent::HelloRefused { reason } => {
                format!("{{\"event\":\"hello_refused\",\"reason\":\"{reason}\"}}\n")
            }
            StatusEvent::Started { pid } => format!("{{\"event\":\"started\",\"pid\":{pid}}}\n"),
            StatusEvent::SpawnFailed { errno } => {
                format!("{{\"event\":\"spawn_failed\",\"errno\":{errno}}}\n")
            }
            StatusEvent::SandboxFailed { status } => {
                format!("{{\"event\":\"sandbox_failed\",\"status\":{status}}}\n")
            }
            StatusEvent::Exited { status } => {
                format!("{{\"event\":\"exit\",\"status\":{status}}}\n")
            }
            StatusEvent::Signaled { signal } => {
                format!("{{\"event\":\"exit\",\"signal\":{signal}}}\n")
            }
        }
    }

    /// The shim's exit code for this event: the status, 128 + signal, 127 for `ENOENT`, 126 for
    /// another spawn failure or a sandbox that failed to start, 78 for an identity failure; 0 for an event that is not final
    /// (`no_identity`, `hello_ok`, `started`).
    ///
    /// ```
    /// use relay_shim::StatusEvent;
    /// assert_eq!(StatusEvent::Signaled { signal: 15 }.exit_code(), 143);
    /// assert_eq!(StatusEvent::SpawnFailed { errno: libc::ENOENT }.exit_code(), 127);
    /// assert_eq!(StatusEvent::SpawnFailed { errno: libc::EACCES }.exit_code(), 126);
    /// assert_eq!(StatusEvent::BadSecret { reason: "length" }.exit_code(), 78);
    /// ```
    pub fn exit_code(&self) -> i32 {
        match *self {
            StatusEvent::NoIdentity | StatusEvent::HelloOk { .. } | StatusEvent::Started { .. } => {
                0
            }
            StatusEvent::BadSecret { .. } | StatusEvent::HelloRefused { .. } => {
                identity::EXIT_IDENTITY
            }
            StatusEvent::SpawnFailed { errno } if errno == libc::ENOENT => {
                ExitCode::NotFound.code()
            }
            StatusEvent::SpawnFailed { .. } | StatusEvent::SandboxFailed { .. } => {
                ExitCode::CannotExec.code()
            }
            StatusEvent::Exited { status } => status,
            StatusEvent::Signaled { signal } => 128 + signal,
        }
    }
}

/// Where status lines go: the claimed status descriptor, or nowhere.
pub(super) struct StatusOut {
    fd: Option<OwnedFd>,
}

impl StatusOut {
    /// Takes the status descriptor `fd` (close-on-exec for the shim); not open means no status
    /// lines. On failure, prints one stderr line and returns [`ExitCode::Internal`] (70).
    ///
    /// # Safety
    ///
    /// The process owns `fd` when it is open (see [`run`]), and it is not fd 5 when fd 5 was
    /// claimed.
    pub(super) unsafe fn claim(fd: RawFd) -> Result<StatusOut, i32> {
        if sys::fd_flags(fd).is_err() {
            return Ok(StatusOut { fd: None });
        }
        // SAFETY: the descriptor is open and, by this function's contract, ours.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        if let Err(e) = sys::set_cloexec(owned.as_fd(), true) {
            eprintln!("relay-shim: status fd {fd}: cannot mark close-on-exec: {e}");
            return Err(ExitCode::Internal.code());
        }
        Ok(StatusOut { fd: Some(owned) })
    }

    /// Writes one line with one `write`; on failure stops writing (the reader is gone).
    pub(super) fn send(&mut self, event: StatusEvent) {
        if let Some(fd) = &self.fd {
            if sys::write_all(fd, event.line().as_bytes()).is_err() {
                self.fd = None;
            }
        }
    }
}
