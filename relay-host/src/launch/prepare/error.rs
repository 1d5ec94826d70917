//! Why a launch's preparation failed: its token ([`TokenError`]), a program it runs
//! ([`ProgramError`]), and the step's own error (`PrepareError`) that carries these, the
//! request's refusals found while preparing, the sandbox program's and what could not be made.

use std::error::Error;
use std::fmt;

use crate::launch::plan::error::RequestError;
use crate::launch::refusal::Refusal;
use crate::launch::spawn_error::SpawnError;
use crate::reach::Exposure;
use crate::ShimNotFound;
use relay_token::sandbox::SandboxError;
use relay_token::{TokenFileError, TokenPathError};

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
/// use relay_host::launch::error::{LaunchError, ProgramError, Refusal};
/// let e = ProgramError::CommandNotFound { name: "claude".into() };
/// assert_eq!(e.to_string(), r#"command "claude" not found or not executable (looked on PATH)"#);
/// assert_eq!(LaunchError::Program(e).refusal(), Refusal::SpawnFailed);
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
    pub(crate) fn refusal(&self) -> Refusal {
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

/// Why the preparation step refused a launch; each variant becomes the [`crate::launch::error::LaunchError`]
/// of the same name (`Spawn` its `Spawn`).
#[derive(Debug)]
pub(crate) enum PrepareError {
    /// The request cannot be launched as written (its project's session is running, its
    /// session folder is locked, its project redirects git).
    Request(RequestError),
    /// The token file cannot be resolved, read or trusted.
    Token(TokenError),
    /// A program the launch runs cannot be found or trusted.
    Program(ProgramError),
    /// The sandbox program cannot be found or does not work.
    Sandbox(SandboxError),
    /// A file or folder of the launch could not be made.
    Spawn(SpawnError),
}

macro_rules! from_cause {
    ($($ty:ty => $variant:ident),* $(,)?) => {$(
        impl From<$ty> for PrepareError {
            fn from(e: $ty) -> Self {
                PrepareError::$variant(e)
            }
        }
    )*};
}

from_cause! {
    RequestError => Request,
    TokenError => Token,
    ProgramError => Program,
    SandboxError => Sandbox,
    SpawnError => Spawn,
}

impl From<crate::launch::plan::invalid_spec::InvalidSpec> for PrepareError {
    fn from(e: crate::launch::plan::invalid_spec::InvalidSpec) -> Self {
        PrepareError::Request(RequestError::Invalid(e))
    }
}

impl fmt::Display for PrepareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrepareError::Request(e) => e.fmt(f),
            PrepareError::Token(e) => e.fmt(f),
            PrepareError::Program(e) => e.fmt(f),
            PrepareError::Sandbox(e) => e.fmt(f),
            PrepareError::Spawn(e) => e.fmt(f),
        }
    }
}

impl Error for PrepareError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            PrepareError::Request(e) => e.source(),
            PrepareError::Token(e) => e.source(),
            PrepareError::Program(e) => e.source(),
            PrepareError::Sandbox(e) => e.source(),
            PrepareError::Spawn(e) => e.source(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_failed_to_spawn() {
        assert_eq!(ProgramError::SshNotFound.refusal(), Refusal::SpawnFailed);
    }
}
