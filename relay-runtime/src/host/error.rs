//! Why a launch was refused: the one error type of a launch, from which the answer's `error`
//! and `status` and the host's exit code derive.

use std::fmt;

use crate::exit::ExitCode;

/// Why a launch was refused, with the answer's `error` and the host's exit code.
///
/// ```
/// use relay_runtime::host::error::LaunchError;
/// let e = LaunchError::InvalidSpec("request: unknown field `claude_token`".into());
/// assert_eq!((e.code(), e.exit_code(), e.status()), ("invalid_spec", 64, 400));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LaunchError {
    /// The request cannot be launched as written (400, exit 64).
    InvalidSpec(String),
    /// The launch cannot be made safe: the token file, the settings, the sandbox (400, exit 78).
    SandboxUnavailable(String),
    /// The session could not be started (500, exit 71).
    SpawnFailed(String),
}

impl LaunchError {
    /// The answer's `error` field.
    ///
    /// ```
    /// # use relay_runtime::host::error::LaunchError;
    /// assert_eq!(LaunchError::SpawnFailed(String::new()).code(), "spawn_failed");
    /// ```
    pub fn code(&self) -> &'static str {
        match self {
            LaunchError::InvalidSpec(_) => "invalid_spec",
            LaunchError::SandboxUnavailable(_) => "sandbox_unavailable",
            LaunchError::SpawnFailed(_) => "spawn_failed",
        }
    }

    /// The answer's `status` field.
    ///
    /// ```
    /// # use relay_runtime::host::error::LaunchError;
    /// assert_eq!(LaunchError::SandboxUnavailable(String::new()).status(), 400);
    /// ```
    pub fn status(&self) -> u16 {
        match self {
            LaunchError::SpawnFailed(_) => 500,
            _ => 400,
        }
    }

    /// The host's exit code for this refusal.
    ///
    /// ```
    /// # use relay_runtime::host::error::LaunchError;
    /// assert_eq!(LaunchError::SandboxUnavailable(String::new()).exit_code(), 78);
    /// ```
    pub fn exit_code(&self) -> i32 {
        match self {
            LaunchError::InvalidSpec(_) => ExitCode::Usage.code(),
            LaunchError::SandboxUnavailable(_) => ExitCode::Unavailable.code(),
            LaunchError::SpawnFailed(_) => ExitCode::SpawnFailed.code(),
        }
    }

    /// The message (paths only, never a token byte).
    ///
    /// ```
    /// # use relay_runtime::host::error::LaunchError;
    /// assert_eq!(LaunchError::SpawnFailed("x".into()).message(), "x");
    /// ```
    pub fn message(&self) -> &str {
        match self {
            LaunchError::InvalidSpec(m)
            | LaunchError::SandboxUnavailable(m)
            | LaunchError::SpawnFailed(m) => m,
        }
    }
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code(), self.message())
    }
}

impl std::error::Error for LaunchError {}
