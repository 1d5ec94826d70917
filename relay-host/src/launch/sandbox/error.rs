//! Why the sandbox cannot keep what it must read-only or masked ([`ConfineError`]), and the
//! sandbox step's own error ([`SandboxStepError`]) that carries it, the sandbox profile's and
//! what could not be made.

use std::error::Error;
use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::launch::refusal::Refusal;
use crate::launch::spawn_error::SpawnError;
use relay_token::sandbox::SandboxError;

/// Why the sandbox cannot keep what it must read-only or masked.
///
/// ```
/// use relay_host::launch::error::{ConfineError, LaunchError, Refusal};
/// let e = ConfineError::PlaceholderRaced { path: "/h/.bashrc".into() };
/// assert_eq!(LaunchError::Confine(e).refusal(), Refusal::SandboxUnavailable);
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
    pub(crate) fn refusal(&self) -> Refusal {
        match self {
            ConfineError::NoDump { source, .. }
                if source.kind() != io::ErrorKind::PermissionDenied =>
            {
                Refusal::SpawnFailed
            }
            ConfineError::NoDump { .. }
            | ConfineError::WriteDenySymlink { .. }
            | ConfineError::Placeholder { .. }
            | ConfineError::PlaceholderRaced { .. }
            | ConfineError::Placeholders(_)
            | ConfineError::GrantInOwnFolder { .. } => Refusal::SandboxUnavailable,
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

/// Why the sandbox step refused a launch; each variant becomes the
/// [`crate::launch::error::LaunchError`] of the same name (`Spawn` its `Spawn`).
#[derive(Debug)]
pub(crate) enum SandboxStepError {
    /// What the sandbox must keep read-only or mask.
    Confine(ConfineError),
    /// The sandbox's profile or its program.
    Sandbox(SandboxError),
    /// A file or folder the sandbox needs could not be made.
    Spawn(SpawnError),
}

impl From<ConfineError> for SandboxStepError {
    fn from(e: ConfineError) -> Self {
        SandboxStepError::Confine(e)
    }
}

impl From<SandboxError> for SandboxStepError {
    fn from(e: SandboxError) -> Self {
        SandboxStepError::Sandbox(e)
    }
}

impl From<SpawnError> for SandboxStepError {
    fn from(e: SpawnError) -> Self {
        SandboxStepError::Spawn(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_no_dump_preload_refused_permission_is_unavailable_else_failed_to_spawn() {
        let e = ConfineError::NoDump {
            dir: "/s".into(),
            source: io::ErrorKind::Other.into(),
        };
        assert_eq!(e.refusal(), Refusal::SpawnFailed);
        let e = ConfineError::NoDump {
            dir: "/s".into(),
            source: io::ErrorKind::PermissionDenied.into(),
        };
        assert_eq!(e.refusal(), Refusal::SandboxUnavailable);
    }
}
