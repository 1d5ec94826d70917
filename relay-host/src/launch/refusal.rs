//! The three answers a refused launch gets, said once: its `error`, its `status` and the
//! host's exit code. Every step's error names its [`Refusal`].

use relay_shim::exit::ExitCode;

/// The three answers a refused launch gets: its `error`, its `status` and the host's exit code
/// are said here once.
///
/// ```
/// use relay_host::launch::error::Refusal;
/// let r = Refusal::SandboxUnavailable;
/// assert_eq!((r.code(), r.status(), r.exit_code().code()), ("sandbox_unavailable", 400, 78));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The request cannot be launched as written (400, exit 64).
    InvalidSpec,
    /// The launch cannot be made safe: the token file, the settings, the sandbox (400, exit 78).
    SandboxUnavailable,
    /// The session could not be started (500, exit 71).
    SpawnFailed,
    /// The settings file does not load: it does not parse, holds an unknown key or a value that
    /// cannot be used (400, exit 78, the configuration error of `sysexits.h`).
    SettingsInvalid,
}

impl Refusal {
    /// The answer's `error` field.
    ///
    /// ```
    /// assert_eq!(relay_host::launch::error::Refusal::SpawnFailed.code(), "spawn_failed");
    /// ```
    pub fn code(self) -> &'static str {
        match self {
            Refusal::InvalidSpec => "invalid_spec",
            Refusal::SandboxUnavailable => "sandbox_unavailable",
            Refusal::SpawnFailed => "spawn_failed",
            Refusal::SettingsInvalid => "settings_invalid",
        }
    }

    /// The answer's `status` field.
    ///
    /// ```
    /// assert_eq!(relay_host::launch::error::Refusal::SpawnFailed.status(), 500);
    /// ```
    pub fn status(self) -> u16 {
        match self {
            Refusal::SpawnFailed => 500,
            Refusal::InvalidSpec | Refusal::SandboxUnavailable | Refusal::SettingsInvalid => 400,
        }
    }

    /// The host's exit code.
    ///
    /// ```
    /// use relay_host::launch::error::Refusal;
    /// use relay_shim::exit::ExitCode;
    /// assert_eq!(Refusal::InvalidSpec.exit_code(), ExitCode::Usage);
    /// ```
    pub fn exit_code(self) -> ExitCode {
        match self {
            Refusal::InvalidSpec => ExitCode::Usage,
            Refusal::SandboxUnavailable | Refusal::SettingsInvalid => ExitCode::Unavailable,
            Refusal::SpawnFailed => ExitCode::SpawnFailed,
        }
    }
}
