//! Why the shim did not start a session ([`StartError`]), and the shim step's own error
//! (`ShimError`) that carries it, the sandbox program's failure and what could not be made.

use std::error::Error;
use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::launch::refusal::Refusal;
use crate::launch::shim::bridge::BridgeError;
use crate::launch::shim::wiring::IdentityRefused;
use crate::launch::spawn_error::SpawnError;
use relay_token::sandbox::SandboxError;

/// Why the shim did not report the session started.
///
/// ```
/// use relay_host::launch::error::StartError;
/// let e = StartError::Timeout { secs: 10 };
/// assert_eq!(e.to_string(), "relay-shim did not report started within 10 s");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum StartError {
    /// The launch identity's bridge cannot be set up (`spawn_failed`).
    Bridge(BridgeError),
    /// The launch identity was refused (`spawn_failed`).
    Identity(IdentityRefused),
    /// No `started` within the time (`spawn_failed`).
    Timeout {
        /// The time, in seconds.
        secs: u64,
    },
    /// The shim ended before `started` (`spawn_failed`).
    ShimEnded,
    /// The session's program could not be run (`spawn_failed`).
    Program {
        /// The errno the shim reported.
        errno: i32,
    },
    /// The sandbox ended before it reported its start (`sandbox_unavailable`).
    SandboxEnded {
        /// The bwrap that ran, or `None` when no sandbox program is known.
        bwrap: Option<PathBuf>,
        /// Its exit status.
        status: i64,
    },
    /// The audit row of a started session could not be written; the session was stopped
    /// (`spawn_failed`).
    Unrecorded {
        /// The audit file.
        audit: PathBuf,
        /// The error.
        source: io::Error,
    },
}

impl StartError {
    /// Which answer the refusal gets.
    pub(crate) fn refusal(&self) -> Refusal {
        match self {
            StartError::SandboxEnded { .. } => Refusal::SandboxUnavailable,
            _ => Refusal::SpawnFailed,
        }
    }
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Bridge(e) => write!(f, "{e}"),
            StartError::Identity(e) => write!(f, "{e}"),
            StartError::Timeout { secs } => {
                write!(f, "relay-shim did not report started within {secs} s")
            }
            StartError::ShimEnded => write!(f, "relay-shim ended before the session started"),
            StartError::Program { errno } => write!(
                f,
                "the session's program could not be started: {}",
                relay_token::sys::errno_words(*errno)
            ),
            StartError::SandboxEnded {
                bwrap: None,
                status,
            } => write!(f, "the sandbox ended before it started (status {status})"),
            StartError::SandboxEnded {
                bwrap: Some(bwrap),
                status,
            } => write!(
                f,
                "bwrap {:?} ended with status {status} before the sandbox started; its message \
                 is on the session's stderr",
                bwrap.display().to_string()
            ),
            StartError::Unrecorded { audit, source } => write!(
                f,
                "{}: {source}; the session was stopped at once, since it could not be recorded",
                audit.display()
            ),
        }
    }
}

impl Error for StartError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            StartError::Bridge(e) => Some(e),
            StartError::Identity(e) => Some(e),
            StartError::Unrecorded { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Why the shim step refused a launch; each variant becomes the
/// [`crate::launch::error::LaunchError`] of the same name (`Spawn` its `Spawn`).
#[derive(Debug)]
pub(crate) enum ShimError {
    /// The shim did not report the session started.
    Start(StartError),
    /// bwrap ended before its sandbox, and fails even the plainest one.
    Sandbox(SandboxError),
    /// A pipe or the shim's process could not be made.
    Spawn(SpawnError),
}

impl From<StartError> for ShimError {
    fn from(e: StartError) -> Self {
        ShimError::Start(e)
    }
}

impl From<SandboxError> for ShimError {
    fn from(e: SandboxError) -> Self {
        ShimError::Sandbox(e)
    }
}

impl From<SpawnError> for ShimError {
    fn from(e: SpawnError) -> Self {
        ShimError::Spawn(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_that_ended_is_unavailable_and_the_rest_failed_to_spawn() {
        let e = StartError::SandboxEnded {
            bwrap: None,
            status: 1,
        };
        assert_eq!(e.refusal(), Refusal::SandboxUnavailable);
        assert_eq!(StartError::ShimEnded.refusal(), Refusal::SpawnFailed);
    }
}
