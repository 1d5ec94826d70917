//! Why a launch was refused: one error per stage of a launch, each with its typed source, from
//! which the answer's `error` and `status` and the host's exit code derive ([`Refusal`]).

use std::error::Error;
use std::fmt;
use std::io;
use std::path::PathBuf;

use super::bridge::BridgeError;
pub use super::network::NetworkError;
use super::request::InvalidSpec;
use super::wiring::IdentityRefused;
use crate::reach::Exposure;
use crate::settings::SettingsError;
use crate::ShimNotFound;
use relay_shim::exit::ExitCode;
use relay_token::sandbox::SandboxError;
use relay_token::{TokenFileError, TokenPathError};

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

/// Why a launch was refused, by the stage that refused it. Its text is `code: message`; the
/// message names paths only, never a token byte.
///
/// ```
/// use relay_host::{launch::error::LaunchError, launch::request::Request};
/// let e = LaunchError::from(Request::from_json("[]").unwrap_err());
/// assert_eq!((e.code(), e.exit_code().code(), e.status()), ("invalid_spec", 64, 400));
/// assert!(e.message().starts_with("request: must be one JSON object"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum LaunchError {
    /// The state folder cannot take the launch's audit row (`spawn_failed`).
    State(io::Error),
    /// The settings cannot be read (`settings_invalid`) or trusted (`sandbox_unavailable`).
    Settings(SettingsError),
    /// The request cannot be launched as written (`invalid_spec`).
    Request(RequestError),
    /// The token file cannot be resolved, read or trusted (`sandbox_unavailable`).
    Token(TokenError),
    /// A program the launch runs cannot be found or trusted.
    Program(ProgramError),
    /// The session's network cannot be made as the template asks (`sandbox_unavailable`).
    Network(NetworkError),
    /// The sandbox program or the sandbox's profile (`sandbox_unavailable`).
    Sandbox(SandboxError),
    /// What the sandbox must keep read-only or mask (`sandbox_unavailable`, but see
    /// [`ConfineError::NoDump`]).
    Confine(ConfineError),
    /// A file, folder or pipe of the launch could not be made (`spawn_failed`).
    Spawn {
        /// What was being made, with its path.
        what: String,
        /// The error.
        source: io::Error,
    },
    /// The shim did not start the session.
    Start(StartError),
}

/// How a [`LaunchError::Spawn`] for `what` is made from an `io::Error`.
pub(crate) fn spawn_err(what: impl fmt::Display) -> impl FnOnce(io::Error) -> LaunchError {
    let what = what.to_string();
    move |source| LaunchError::Spawn { what, source }
}

impl LaunchError {
    /// Which answer the refusal gets.
    ///
    /// ```
    /// use relay_host::launch::error::{LaunchError, Refusal, StartError};
    /// assert_eq!(LaunchError::Start(StartError::ShimEnded).refusal(), Refusal::SpawnFailed);
    /// ```
    pub fn refusal(&self) -> Refusal {
        match self {
            LaunchError::Request(_) => Refusal::InvalidSpec,
            LaunchError::Settings(e) if !e.unsafe_place() => Refusal::SettingsInvalid,
            LaunchError::Settings(_)
            | LaunchError::Token(_)
            | LaunchError::Network(_)
            | LaunchError::Sandbox(_) => Refusal::SandboxUnavailable,
            LaunchError::State(_) | LaunchError::Spawn { .. } => Refusal::SpawnFailed,
            LaunchError::Program(e) => e.refusal(),
            LaunchError::Confine(e) => e.refusal(),
            LaunchError::Start(e) => e.refusal(),
        }
    }

    /// The answer's `error` field.
    ///
    /// ```
    /// # use relay_host::launch::error::{LaunchError, StartError};
    /// assert_eq!(LaunchError::Start(StartError::ShimEnded).code(), "spawn_failed");
    /// ```
    pub fn code(&self) -> &'static str {
        self.refusal().code()
    }

    /// The answer's `status` field.
    ///
    /// ```
    /// # use relay_host::launch::error::{LaunchError, StartError};
    /// assert_eq!(LaunchError::Start(StartError::ShimEnded).status(), 500);
    /// ```
    pub fn status(&self) -> u16 {
        self.refusal().status()
    }

    /// The host's exit code for this refusal.
    ///
    /// ```
    /// # use relay_host::launch::error::{LaunchError, StartError};
    /// assert_eq!(LaunchError::Start(StartError::ShimEnded).exit_code().code(), 71);
    /// ```
    pub fn exit_code(&self) -> ExitCode {
        self.refusal().exit_code()
    }

    /// The message: the text after `code: ` (paths only, never a token byte).
    ///
    /// ```
    /// # use relay_host::launch::error::{LaunchError, StartError};
    /// let e = LaunchError::Start(StartError::ShimEnded);
    /// assert_eq!(e.message(), "relay-shim ended before the session started");
    /// ```
    pub fn message(&self) -> String {
        match self {
            LaunchError::State(e) => e.to_string(),
            LaunchError::Settings(e) => e.to_string(),
            LaunchError::Request(e) => e.to_string(),
            LaunchError::Token(e) => e.to_string(),
            LaunchError::Program(e) => e.to_string(),
            LaunchError::Network(e) => e.to_string(),
            LaunchError::Sandbox(e) => e.to_string(),
            LaunchError::Confine(e) => e.to_string(),
            LaunchError::Spawn { what, source } => format!("{what}: {source}"),
            LaunchError::Start(e) => e.to_string(),
        }
    }
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code(), self.message())
    }
}

impl Error for LaunchError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(match self {
            LaunchError::State(e) => e,
            LaunchError::Settings(e) => e,
            LaunchError::Request(e) => e,
            LaunchError::Token(e) => e,
            LaunchError::Program(e) => e,
            LaunchError::Network(e) => e,
            LaunchError::Sandbox(e) => e,
            LaunchError::Confine(e) => e,
            LaunchError::Spawn { source, .. } => source,
            LaunchError::Start(e) => e,
        })
    }
}

macro_rules! from_stage {
    ($($ty:ty => $variant:ident),* $(,)?) => {$(
        impl From<$ty> for LaunchError {
            fn from(e: $ty) -> Self {
                LaunchError::$variant(e)
            }
        }
    )*};
}

from_stage! {
    SettingsError => Settings,
    RequestError => Request,
    TokenError => Token,
    ProgramError => Program,
    NetworkError => Network,
    SandboxError => Sandbox,
    ConfineError => Confine,
    StartError => Start,
}

impl From<InvalidSpec> for LaunchError {
    fn from(e: InvalidSpec) -> Self {
        LaunchError::Request(RequestError::Invalid(e))
    }
}

/// Why the request cannot be launched as written (`invalid_spec`).
///
/// ```
/// use relay_host::launch::error::RequestError;
/// let e = RequestError::SessionRunning { session_id: "s1".into() };
/// assert_eq!(e.to_string(), r#"session "s1" is already running"#);
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum RequestError {
    /// The request, its project or what it adds to a token launch.
    Invalid(InvalidSpec),
    /// No grant of the template shows the project.
    ProjectNotGranted {
        /// The project as the request gave it.
        project: PathBuf,
        /// The template's id.
        template: String,
    },
    /// A session of that id is running.
    SessionRunning {
        /// The session id.
        session_id: String,
    },
    /// A Claude session already runs in the project, and the template's `same_project` is
    /// `"refuse"`.
    ProjectBusy {
        /// The project (its real path).
        project: PathBuf,
        /// The session that runs there.
        session_id: String,
    },
    /// The session folder's lock cannot be taken.
    SessionLock {
        /// The session folder.
        dir: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The project's `.git` file sends git to another folder's repository data.
    GitRedirect {
        /// The project.
        project: PathBuf,
        /// The file that redirects.
        file: PathBuf,
    },
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Invalid(e) => write!(f, "{e}"),
            RequestError::ProjectNotGranted { project, template } => write!(
                f,
                "project {:?}: no grant of the template {template:?} shows it, so the session \
                 could not start there",
                project.display().to_string()
            ),
            RequestError::SessionRunning { session_id } => {
                write!(f, "session {session_id:?} is already running")
            }
            RequestError::ProjectBusy {
                project,
                session_id,
            } => write!(
                f,
                "project {:?}: Claude session {session_id:?} already runs there (the template's \
                 same_project is \"refuse\")",
                project.display().to_string()
            ),
            RequestError::SessionLock { dir, source } => {
                write!(f, "session {}: {source}", dir.display())
            }
            RequestError::GitRedirect { project, file } => write!(
                f,
                "project {:?}: {:?} sends git to another folder's repository data (git makes that \
                 file only for a linked worktree, under .git/worktrees; a session may have planted \
                 it): remove it to launch with the token",
                project.display().to_string(),
                file.display().to_string()
            ),
        }
    }
}

impl Error for RequestError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            RequestError::Invalid(e) => Some(e),
            RequestError::SessionLock { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Why the token file cannot be used (`sandbox_unavailable`).
///
/// ```
/// use relay_host::{launch::error::TokenError, reach::Exposure};
/// let e = TokenError::Exposed(Exposure::TokenMode { path: "/t".into(), mode: 0o640 });
/// assert!(e.to_string().ends_with("chmod 600 it"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum TokenError {
    /// The `claude_token_file` setting names no usable path.
    Path(TokenPathError),
    /// The file cannot be read as a token.
    Read(TokenFileError),
    /// Others may read it, or another user owns it.
    Exposed(Exposure),
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenError::Path(e) => write!(f, "{e}"),
            TokenError::Read(e) => write!(f, "{e}"),
            TokenError::Exposed(e) => write!(f, "{e}"),
        }
    }
}

impl Error for TokenError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(match self {
            TokenError::Path(e) => e,
            TokenError::Read(e) => e,
            TokenError::Exposed(e) => e,
        })
    }
}

/// Why a program the launch runs cannot be used.
///
/// ```
/// use relay_host::launch::error::{ProgramError, Refusal};
/// let e = ProgramError::CommandNotFound { name: "claude".into() };
/// assert_eq!(e.refusal(), Refusal::SpawnFailed);
/// assert_eq!(e.to_string(), r#"command "claude" not found or not executable (looked on PATH)"#);
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ProgramError {
    /// `relay-shim` was found nowhere (`spawn_failed`).
    Shim(ShimNotFound),
    /// The template's command is not on `PATH` (`spawn_failed`).
    CommandNotFound {
        /// The command's name.
        name: String,
    },
    /// A remote launch finds no `ssh` (`spawn_failed`).
    SshNotFound,
    /// A session could have planted the program (`sandbox_unavailable`).
    Planted(Exposure),
}

impl ProgramError {
    /// Which answer the refusal gets.
    ///
    /// ```
    /// use relay_host::launch::error::{ProgramError, Refusal};
    /// assert_eq!(ProgramError::SshNotFound.refusal(), Refusal::SpawnFailed);
    /// ```
    pub fn refusal(&self) -> Refusal {
        match self {
            ProgramError::Planted(_) => Refusal::SandboxUnavailable,
            _ => Refusal::SpawnFailed,
        }
    }
}

impl fmt::Display for ProgramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProgramError::Shim(e) => write!(f, "{e}"),
            ProgramError::CommandNotFound { name } => write!(
                f,
                "command {name:?} not found or not executable (looked on PATH)"
            ),
            ProgramError::SshNotFound => write!(f, "ssh not found on PATH"),
            ProgramError::Planted(e) => write!(f, "{e}"),
        }
    }
}

impl Error for ProgramError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ProgramError::Shim(e) => Some(e),
            ProgramError::Planted(e) => Some(e),
            _ => None,
        }
    }
}

/// Why the sandbox cannot keep what it must read-only or masked.
///
/// ```
/// use relay_host::launch::error::{ConfineError, Refusal};
/// let e = ConfineError::PlaceholderRaced { path: "/h/.bashrc".into() };
/// assert_eq!(e.refusal(), Refusal::SandboxUnavailable);
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfineError {
    /// A write-deny entry is, or passes through, a symlink inside a read-write grant.
    WriteDenySymlink {
        /// The symlink.
        path: PathBuf,
        /// The read-write grant.
        grant: PathBuf,
    },
    /// A missing write-deny entry's placeholder cannot be made.
    Placeholder {
        /// The entry.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// Something on the way to a placeholder changed while it was made.
    PlaceholderRaced {
        /// The entry.
        path: PathBuf,
    },
    /// The placeholders' list cannot be opened.
    Placeholders(io::Error),
    /// A grant lies inside one of the relay's own folders that a grant also shows.
    GrantInOwnFolder {
        /// The grant.
        grant: PathBuf,
        /// The relay's folder.
        own: PathBuf,
    },
    /// The no-dump preload cannot be written into the session folder: `sandbox_unavailable`
    /// when it is refused permission, else `spawn_failed`.
    NoDump {
        /// The session folder.
        dir: PathBuf,
        /// The error.
        source: io::Error,
    },
}

impl ConfineError {
    /// Which answer the refusal gets.
    ///
    /// ```
    /// use relay_host::launch::error::{ConfineError, Refusal};
    /// let e = ConfineError::NoDump { dir: "/s".into(), source: std::io::ErrorKind::Other.into() };
    /// assert_eq!(e.refusal(), Refusal::SpawnFailed);
    /// ```
    pub fn refusal(&self) -> Refusal {
        match self {
            ConfineError::NoDump { source, .. }
                if source.kind() != io::ErrorKind::PermissionDenied =>
            {
                Refusal::SpawnFailed
            }
            _ => Refusal::SandboxUnavailable,
        }
    }
}

impl fmt::Display for ConfineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let q = |p: &PathBuf| p.display().to_string();
        match self {
            ConfineError::WriteDenySymlink { path, grant } => write!(
                f,
                "write-deny {:?} is a symlink inside the read-write grant {:?}, which a session \
                 could replace; make it a real file or folder, or narrow the grant",
                q(path),
                q(grant)
            ),
            ConfineError::Placeholder { path, source } => write!(
                f,
                "write-deny {:?}: cannot make its placeholder: {source}",
                q(path)
            ),
            ConfineError::PlaceholderRaced { path } => write!(
                f,
                "write-deny {:?}: something on the way changed while it was made",
                q(path)
            ),
            ConfineError::Placeholders(e) => write!(f, "{e}"),
            ConfineError::GrantInOwnFolder { grant, own } => write!(
                f,
                "grant {:?} lies inside the relay's own folder {:?}, which a grant of this \
                 template also shows; move the folder out (--config-dir, --state-dir) or narrow \
                 the grant",
                q(grant),
                q(own)
            ),
            ConfineError::NoDump { dir, source } => {
                write!(f, "session folder {}: {source}", dir.display())
            }
        }
    }
}

impl Error for ConfineError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ConfineError::Placeholder { source, .. } | ConfineError::NoDump { source, .. } => {
                Some(source)
            }
            ConfineError::Placeholders(e) => Some(e),
            _ => None,
        }
    }
}

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
    ///
    /// ```
    /// use relay_host::launch::error::{Refusal, StartError};
    /// let e = StartError::SandboxEnded { bwrap: None, status: 1 };
    /// assert_eq!(e.refusal(), Refusal::SandboxUnavailable);
    /// ```
    pub fn refusal(&self) -> Refusal {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal keeps what refused it: its source is the typed error (a sandbox error with its
    /// own code, the system call's errno), and its words are that error's.
    #[test]
    fn a_refusal_keeps_its_typed_source_and_its_words() {
        let sandbox = SandboxError::BwrapNotFound {
            looked: "PATH".into(),
        };
        let e = LaunchError::from(sandbox.clone());
        let source = e.source().and_then(|s| s.downcast_ref::<SandboxError>());
        assert_eq!(source, Some(&sandbox));
        assert_eq!(e.code(), "sandbox_unavailable");
        assert_eq!(e.to_string(), format!("sandbox_unavailable: {sandbox}"));

        let e = spawn_err("status pipe")(io::Error::from_raw_os_error(libc::EMFILE));
        let errno = e
            .source()
            .and_then(|s| s.downcast_ref::<io::Error>())
            .and_then(io::Error::raw_os_error);
        assert_eq!(errno, Some(libc::EMFILE));
        assert_eq!((e.code(), e.status()), ("spawn_failed", 500));
        assert!(e.message().starts_with("status pipe: "), "{e}");

        let e = LaunchError::from(ConfineError::NoDump {
            dir: "/s".into(),
            source: io::Error::from_raw_os_error(libc::EACCES),
        });
        assert_eq!(
            (e.code(), e.exit_code()),
            ("sandbox_unavailable", ExitCode::Unavailable)
        );
        assert!(e.source().and_then(|s| s.source()).is_some());
    }
}
