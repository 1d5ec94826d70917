//! The status protocol: the one-line JSON events the shim writes to its status descriptor, and
//! their reader. [`StatusEvent::line`] writes a line and [`StatusEvent::parse`] reads one back,
//! so the shim and relay-host speak through this one type.

use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};

use crate::exit::ExitCode;
use relay_token::sys;

use super::identity;
use serde_json::Value;

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

impl StatusEvent {
    /// Reads one status line (its newline optional): the event [`line`](Self::line) wrote. A
    /// line that is not one of the events, misses a field, holds a number out of range or a
    /// `reason` that is not one of the shim's words is refused, so no other text passes as an
    /// event.
    ///
    /// ```
    /// use relay_shim::{StatusEvent, StatusLineError};
    /// let e = StatusEvent::HelloRefused { reason: "timeout" };
    /// assert_eq!(StatusEvent::parse(&e.line()), Ok(e));
    /// assert_eq!(
    ///     StatusEvent::parse(r#"{"event":"hello_refused","reason":"Bearer x"}"#),
    ///     Err(StatusLineError::Field("reason"))
    /// );
    /// ```
    pub fn parse(line: &str) -> Result<StatusEvent, StatusLineError> {
        let v: Value = serde_json::from_str(line).map_err(|_| StatusLineError::NotJson)?;
        let event = v
            .get("event")
            .and_then(Value::as_str)
            .ok_or(StatusLineError::NotJson)?;
        let int = |k: &'static str| {
            v.get(k)
                .and_then(Value::as_i64)
                .and_then(|n| i32::try_from(n).ok())
                .ok_or(StatusLineError::Field(k))
        };
        let pid = || {
            v.get("pid")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or(StatusLineError::Field("pid"))
        };
        let reason = |words: &'static [&'static str]| {
            let given = v.get("reason").and_then(Value::as_str);
            words
                .iter()
                .find(|w| Some(**w) == given)
                .copied()
                .ok_or(StatusLineError::Field("reason"))
        };
        Ok(match event {
            "no_identity" => StatusEvent::NoIdentity,
            "hello_ok" => StatusEvent::HelloOk { pid: pid()? },
            "bad_secret" => StatusEvent::BadSecret {
                reason: reason(identity::SecretError::REASONS)?,
            },
            "hello_refused" => StatusEvent::HelloRefused {
                reason: reason(identity::Refusal::REASONS)?,
            },
            "started" => StatusEvent::Started { pid: pid()? },
            "spawn_failed" => StatusEvent::SpawnFailed {
                errno: int("errno")?,
            },
            "sandbox_failed" => StatusEvent::SandboxFailed {
                status: int("status")?,
            },
            "exit" if v.get("signal").is_some() => StatusEvent::Signaled {
                signal: int("signal")?,
            },
            "exit" => StatusEvent::Exited {
                status: int("status")?,
            },
            _ => return Err(StatusLineError::UnknownEvent),
        })
    }

    /// The event's name, as its line carries it (`"exit"` for both ways a target ends).
    ///
    /// ```
    /// assert_eq!(relay_shim::StatusEvent::Signaled { signal: 9 }.name(), "exit");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            StatusEvent::NoIdentity => "no_identity",
            StatusEvent::HelloOk { .. } => "hello_ok",
            StatusEvent::BadSecret { .. } => "bad_secret",
            StatusEvent::HelloRefused { .. } => "hello_refused",
            StatusEvent::Started { .. } => "started",
            StatusEvent::SpawnFailed { .. } => "spawn_failed",
            StatusEvent::SandboxFailed { .. } => "sandbox_failed",
            StatusEvent::Exited { .. } | StatusEvent::Signaled { .. } => "exit",
        }
    }
}

/// Why [`StatusEvent::parse`] refused a line.
///
/// ```
/// use relay_shim::{StatusEvent, StatusLineError};
/// assert_eq!(StatusEvent::parse("hello"), Err(StatusLineError::NotJson));
/// assert_eq!(StatusEvent::parse(r#"{"event":"party"}"#), Err(StatusLineError::UnknownEvent));
/// assert_eq!(StatusEvent::parse(r#"{"event":"started"}"#), Err(StatusLineError::Field("pid")));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusLineError {
    /// Not a JSON object with an `event` word.
    NotJson,
    /// An event the protocol does not have.
    UnknownEvent,
    /// The named field is missing or out of range.
    Field(&'static str),
}

impl std::fmt::Display for StatusLineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatusLineError::NotJson => f.write_str("not a status line"),
            StatusLineError::UnknownEvent => f.write_str("an unknown event"),
            StatusLineError::Field(k) => write!(f, "field {k:?} missing or invalid"),
        }
    }
}

impl std::error::Error for StatusLineError {}

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
    /// The process owns `fd` when it is open (see [`crate::run`]), and it is not fd 5 when fd 5 was
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_event() -> impl Strategy<Value = StatusEvent> {
        let secret = proptest::sample::select(identity::SecretError::REASONS);
        let refusal = proptest::sample::select(identity::Refusal::REASONS);
        prop_oneof![
            Just(StatusEvent::NoIdentity),
            any::<u32>().prop_map(|pid| StatusEvent::HelloOk { pid }),
            secret.prop_map(|reason| StatusEvent::BadSecret { reason }),
            refusal.prop_map(|reason| StatusEvent::HelloRefused { reason }),
            any::<u32>().prop_map(|pid| StatusEvent::Started { pid }),
            any::<i32>().prop_map(|errno| StatusEvent::SpawnFailed { errno }),
            any::<i32>().prop_map(|status| StatusEvent::SandboxFailed { status }),
            any::<i32>().prop_map(|status| StatusEvent::Exited { status }),
            any::<i32>().prop_map(|signal| StatusEvent::Signaled { signal }),
        ]
    }

    proptest! {
        /// Every event the shim writes reads back as itself, by the same type on both sides.
        #[test]
        fn every_status_line_reads_back_as_its_event(e in any_event()) {
            let line = e.line();
            prop_assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
            prop_assert_eq!(StatusEvent::parse(&line), Ok(e));
            let named = format!("\"event\":\"{}\"", e.name());
            prop_assert!(line.contains(&named), "{} lacks {}", line, named);
        }

        /// Whatever a line holds, reading it never panics, and what it yields writes back to
        /// an event of the same name.
        #[test]
        fn no_line_makes_the_reader_panic(line in ".{0,80}") {
            if let Ok(e) = StatusEvent::parse(&line) {
                prop_assert_eq!(StatusEvent::parse(&e.line()), Ok(e));
            }
        }
    }
}
