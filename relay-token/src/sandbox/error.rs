//! Why a sandboxed launch is refused, in words that name paths only.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::sys::errno_words;

/// Why a sandboxed launch is refused. Every message names paths only, never file contents.
///
/// Every variant means the sandboxed launch cannot be made safely: a launcher refuses it (relay-host
/// answers `sandbox_unavailable`) and never runs it unsandboxed.
///
/// ```
/// use std::path::Path;
/// use relay_token::sandbox::{expand_grant, SandboxError};
/// let err = expand_grant("/", Path::new("/home/me"), None).unwrap_err();
/// assert_eq!(err.to_string(), r#"grant "/": granting the whole file system is refused"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SandboxError {
    /// A grant's value cannot be used (`grant "<value>": <reason>`).
    Grant {
        /// The value as the template gave it.
        value: String,
        /// Why it is refused.
        reason: GrantReason,
    },
    /// A folder of the profile cannot be used (`<role> "<path>": <reason>`).
    Unusable {
        /// What the folder is for: `grant`, `project folder`, `temp folder`, `command folder`,
        /// `state folder`; or `sandbox-exec` when macOS's sandbox is missing.
        role: &'static str,
        /// The path as given.
        path: PathBuf,
        /// Why, in words (`no such file or directory`, `holds control characters`, ...).
        reason: String,
    },
    /// The path to a token crosses a symlink a sandboxed session could have made.
    DenyFollowsLink {
        /// The token path as given.
        path: PathBuf,
        /// The symlink on the way.
        link: PathBuf,
    },
    /// A deny cannot be honoured (`deny "<path>": <reason>`), so the launch is refused.
    DenyUnhonourable {
        /// The token path as given.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// No `bwrap` was found.
    BwrapNotFound {
        /// Where it was looked for, in words.
        looked: String,
    },
    /// The sandbox's command line would exceed a limit of bubblewrap or the kernel
    /// ([`limits::check`](super::limits::check)): refused before anything starts.
    TooLarge {
        /// What is counted (`bwrap arguments`, ...).
        what: &'static str,
        /// How many the launch needs.
        needed: u64,
        /// The limit.
        limit: u64,
        /// The limit's name (`bubblewrap's MAX_ARGS`, ...).
        name: &'static str,
    },
    /// A `bwrap` was found but does not work.
    BwrapBroken {
        /// The `bwrap` that was tried.
        path: PathBuf,
        /// What went wrong (exit status and bwrap's first line of complaint, or a timeout).
        detail: String,
    },
}

/// Why a grant's value is refused.
///
/// ```
/// use std::path::Path;
/// use relay_token::sandbox::{expand_grant, GrantReason, SandboxError};
/// let err = expand_grant("src", Path::new("/home/me"), None).unwrap_err();
/// assert!(matches!(err, SandboxError::Grant { reason: GrantReason::NotAbsolute, .. }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GrantReason {
    /// The grant names `/`, the whole file system.
    Root,
    /// Relative, `~` alone, or anything that is not `/...`, `~/...` or `{project}...`.
    NotAbsolute,
    /// `~user/...`: other users' home folders are not looked up.
    OtherUsersHome,
    /// `{project}` was used but the launch has no project folder.
    NoProject,
    /// `~/` was used but the home folder given is not absolute.
    NoHome,
    /// The value holds a control character (a NUL, a newline, ...).
    ControlCharacters,
}

impl fmt::Display for GrantReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GrantReason::Root => "granting the whole file system is refused",
            GrantReason::NotAbsolute => "must be absolute, or start with ~/ or {project}",
            GrantReason::OtherUsersHome => {
                "~user/ is not supported: must be absolute, or start with ~/ or {project}"
            }
            GrantReason::NoProject => "uses {project} but the launch has no project folder",
            GrantReason::NoHome => "starts with ~/ but the home folder is not an absolute path",
            GrantReason::ControlCharacters => "holds control characters",
        })
    }
}

impl fmt::Display for SandboxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SandboxError::Grant { value, reason } => write!(f, "grant {value:?}: {reason}"),
            SandboxError::Unusable { role, path, reason } => {
                write!(f, "{role} {path:?}: {reason}")
            }
            SandboxError::DenyFollowsLink { path, link } => write!(
                f,
                "deny {path:?} follows symlink {link:?}, which a sandboxed session could have made"
            ),
            SandboxError::DenyUnhonourable { path, reason } => {
                write!(f, "deny {path:?}: {reason}")
            }
            SandboxError::BwrapNotFound { looked } => write!(
                f,
                "bwrap not found ({looked}): sandboxed launches are refused; install it with \
                 `apt-get install bubblewrap` (Debian/Ubuntu) or set `bwrap` to its path"
            ),
            SandboxError::TooLarge {
                what,
                needed,
                limit,
                name,
            } => write!(
                f,
                "the sandbox needs {needed} {what}, over the limit of {limit} ({name}): grant \
                 fewer folders"
            ),
            SandboxError::BwrapBroken { path, detail } => write!(
                f,
                "bwrap {path:?} does not work: sandboxed launches are refused; install a working \
                 bubblewrap with `apt-get install bubblewrap`, with user namespaces allowed; its \
                 test run said: {detail}"
            ),
        }
    }
}

impl std::error::Error for SandboxError {}

/// An I/O error in words (`no such file or directory`), without the `(os error N)` tail.
pub(super) fn io_words(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => errno_words(n),
        None => e.to_string(),
    }
}
