//! What a launch could not make (a file, a folder, a pipe, a process): its name with its path,
//! and the error. Every step that makes something reports it so, and a refusal answers it
//! `spawn_failed` ([`crate::launch::error::LaunchError::Spawn`]).

use std::error::Error;
use std::fmt;
use std::io;

/// A file, folder, pipe or process of the launch that could not be made.
#[derive(Debug)]
pub(crate) struct SpawnError {
    /// What was being made, with its path.
    pub what: String,
    /// The error.
    pub source: io::Error,
}

/// How a [`SpawnError`] for `what` is made from an `io::Error`.
pub(crate) fn spawn_err(what: impl fmt::Display) -> impl FnOnce(io::Error) -> SpawnError {
    let what = what.to_string();
    move |source| SpawnError { what, source }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.source)
    }
}

impl Error for SpawnError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.source)
    }
}
