//! Why stand-in mode cannot be set up.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why stand-in mode cannot be set up.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum StandInError {
    /// An API host that is not `host:port`.
    ApiHost(String),
    /// No random bytes for the stand-in.
    Random(io::Error),
    /// The session's CA or a leaf could not be made.
    Certificate(rcgen::Error),
    /// The TLS set-up refused a key or a certificate.
    Tls(rustls::Error),
    /// `upstream_ca_file` could not be read.
    CaFile {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// `upstream_ca_file` holds no usable certificate.
    CaFileContent {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The system trust store's bundle, as relay-host handed it, holds no usable certificate.
    SystemBundle(String),
}

impl fmt::Display for StandInError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StandInError::ApiHost(h) => {
                write!(f, "stand-in mode: the API host {h:?} is not host:port")
            }
            StandInError::Random(e) => write!(f, "stand-in mode: no random bytes: {e}"),
            StandInError::Certificate(e) => write!(f, "stand-in mode: the session's CA: {e}"),
            StandInError::Tls(e) => write!(f, "stand-in mode: TLS set-up: {e}"),
            StandInError::CaFile { path, source } => {
                write!(f, "upstream_ca_file {}: {source}", path.display())
            }
            StandInError::CaFileContent { path, why } => {
                write!(f, "upstream_ca_file {}: {why}", path.display())
            }
            StandInError::SystemBundle(why) => {
                write!(f, "the system CA bundle (as relay-host handed it): {why}")
            }
        }
    }
}

impl std::error::Error for StandInError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StandInError::Random(e) | StandInError::CaFile { source: e, .. } => Some(e),
            StandInError::Certificate(e) => Some(e),
            StandInError::Tls(e) => Some(e),
            _ => None,
        }
    }
}

impl From<rcgen::Error> for StandInError {
    fn from(e: rcgen::Error) -> StandInError {
        StandInError::Certificate(e)
    }
}

/// A read or write that ran past its timeout (`SO_RCVTIMEO` and `SO_SNDTIMEO` say `EAGAIN`).
pub(super) fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    /// `StandInError`'s example.
    #[test]
    fn stand_in_error_doc_example() {
        let e = crate::stand_in::StandInError::ApiHost("x y".into());
        assert_eq!(
            e.to_string(),
            "stand-in mode: the API host \"x y\" is not host:port"
        );
    }
}
