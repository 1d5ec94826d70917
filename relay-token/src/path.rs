//! The setting's value to a path: [`claude_token_path`].
//!
//! `""` means no token; `~/...` is expanded against the home folder; `$CREDENTIALS_DIRECTORY/NAME`
//! against that variable only (systemd's credentials folder of a service); an absolute path is
//! lexically cleaned; anything else is an error that names the key and the value.

use std::ffi::OsString;
use std::fmt;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

/// The settings key whose value names the token file.
pub const SETTING_KEY: &str = "claude_token_file";

/// A `claude_token_file` value that cannot name a token file.
///
/// Its `Display` reads `claude_token_file "<value>": <reason>`.
///
/// ```
/// let err = relay_token::claude_token_path("./tok").unwrap_err();
/// assert_eq!(err.to_string(), r#"claude_token_file "./tok": must be absolute or start with ~/"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenPathError {
    /// The value as it was set.
    pub value: String,
    /// Why it cannot be used.
    pub reason: TokenPathReason,
}

/// Why a `claude_token_file` value cannot be used.
///
/// ```
/// use relay_token::TokenPathReason;
/// let err = relay_token::claude_token_path("~").unwrap_err();
/// assert_eq!(err.reason, TokenPathReason::NotAbsolute);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenPathReason {
    /// Relative, `~` alone, or anything that is neither `/...` nor `~/...`.
    NotAbsolute,
    /// `~user/...`: other users' home folders are not looked up.
    OtherUsersHome,
    /// The value holds a NUL byte.
    NulByte,
    /// `~/...` was given but no home folder is known (`$HOME` unset or not absolute).
    NoHome,
    /// `$CREDENTIALS_DIRECTORY/NAME` was given but the variable is unset or not absolute (the
    /// process is not a systemd service with `LoadCredential=`).
    NoCredentialsDirectory,
    /// `$CREDENTIALS_DIRECTORY/NAME` with a NAME that is not one plain file name.
    CredentialName,
}

impl fmt::Display for TokenPathReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TokenPathReason::NotAbsolute => "must be absolute or start with ~/",
            TokenPathReason::OtherUsersHome => {
                "~user/ is not supported: must be absolute or start with ~/"
            }
            TokenPathReason::NulByte => "holds a NUL byte",
            TokenPathReason::NoHome => "starts with ~/ but HOME is not set to an absolute path",
            TokenPathReason::NoCredentialsDirectory => {
                "names $CREDENTIALS_DIRECTORY, which is not set to an absolute path (set by \
                 systemd for a service with LoadCredential=)"
            }
            TokenPathReason::CredentialName => {
                "$CREDENTIALS_DIRECTORY/NAME takes one plain file name"
            }
        })
    }
}

impl fmt::Display for TokenPathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SETTING_KEY} {:?}: {}", self.value, self.reason)
    }
}

impl std::error::Error for TokenPathError {}

/// Turns a `claude_token_file` value into the token file's path, using `$HOME` for `~/`.
///
/// `Ok(None)` for `""`: no token, every launch behaves as without the feature.
///
/// ```
/// use std::path::Path;
/// use relay_token::claude_token_path;
///
/// assert_eq!(claude_token_path("").unwrap(), None);
/// assert_eq!(claude_token_path("/a/../b//c").unwrap().as_deref(), Some(Path::new("/b/c")));
/// assert!(claude_token_path("tok").is_err());
/// ```
pub fn claude_token_path(value: &str) -> Result<Option<PathBuf>, TokenPathError> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    claude_token_path_in(value, home.as_deref())
}

/// [`claude_token_path`] with the home folder given (for tests and for hosts that know it).
///
/// ```
/// use std::path::Path;
/// use relay_token::claude_token_path_in;
///
/// let p = claude_token_path_in("~/.config/claude-ltt/token", Some(Path::new("/home/me"))).unwrap();
/// assert_eq!(p.as_deref(), Some(Path::new("/home/me/.config/claude-ltt/token")));
/// ```
pub fn claude_token_path_in(
    value: &str,
    home: Option<&Path>,
) -> Result<Option<PathBuf>, TokenPathError> {
    let fail = |reason| {
        Err(TokenPathError {
            value: value.to_string(),
            reason,
        })
    };
    if value.is_empty() {
        return Ok(None);
    }
    if value.contains('\0') {
        return fail(TokenPathReason::NulByte);
    }
    if let Some(name) = value.strip_prefix(CREDENTIALS_PREFIX) {
        let dir = std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from);
        return credential_path(name, dir.as_deref())
            .map(Some)
            .map_err(|reason| TokenPathError {
                value: value.to_string(),
                reason,
            });
    }
    if let Some(rest) = value.strip_prefix("~/") {
        let Some(home) = home.filter(|h| h.is_absolute()) else {
            return fail(TokenPathReason::NoHome);
        };
        return Ok(Some(clean_path(&home.join(rest))));
    }
    if value.starts_with('~') && value.len() > 1 {
        return fail(TokenPathReason::OtherUsersHome);
    }
    if !value.starts_with('/') {
        return fail(TokenPathReason::NotAbsolute);
    }
    Ok(Some(clean_path(Path::new(value))))
}

/// The prefix of a `claude_token_file` value in systemd's credentials folder.
pub const CREDENTIALS_PREFIX: &str = "$CREDENTIALS_DIRECTORY/";

/// `NAME` in the credentials folder `dir` (`$CREDENTIALS_DIRECTORY`): NAME must be one plain
/// file name, `dir` absolute.
pub fn credential_path(name: &str, dir: Option<&Path>) -> Result<PathBuf, TokenPathReason> {
    let Some(dir) = dir.filter(|d| d.is_absolute()) else {
        return Err(TokenPathReason::NoCredentialsDirectory);
    };
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(TokenPathReason::CredentialName);
    }
    Ok(clean_path(&dir.join(name)))
}

/// Lexically cleans an absolute path: drops `.` and empty parts, resolves `..` against what
/// comes before it (never above `/`). No file system access, so symlinks are not resolved.
///
/// ```
/// use std::path::Path;
/// assert_eq!(relay_token::clean_path(Path::new("/a/./b/../c//")), Path::new("/a/c"));
/// ```
pub fn clean_path(path: &Path) -> PathBuf {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                parts.pop();
            }
            Component::Normal(p) => parts.push(p),
        }
    }
    let mut out = PathBuf::from("/");
    for p in parts {
        out.push(p);
    }
    out
}

/// The path's bytes as a NUL-terminated C string, or `None` if it holds a NUL byte.
pub fn to_cstring(path: &Path) -> Option<std::ffi::CString> {
    let bytes = OsString::from(path.as_os_str()).into_vec();
    std::ffi::CString::new(bytes).ok()
}

/// Path depth in components (`/` is 0).
#[cfg(feature = "sandbox")]
pub(crate) fn depth(p: &Path) -> usize {
    p.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names() {
        let dir = Some(Path::new("/run/credentials/relay.service"));
        assert_eq!(
            credential_path("claude-token", dir).unwrap(),
            Path::new("/run/credentials/relay.service/claude-token")
        );
        assert!(credential_path("../x", dir).is_err());
        assert!(credential_path("claude-token", None).is_err());
    }

    fn home() -> Option<&'static Path> {
        Some(Path::new("/home/op"))
    }

    #[test]
    fn table() {
        let ok = |v: &str, want: Option<&str>| {
            assert_eq!(
                claude_token_path_in(v, home()).unwrap(),
                want.map(PathBuf::from),
                "{v}"
            )
        };
        ok("", None);
        ok("~/x", Some("/home/op/x"));
        ok(
            "~/.config/claude-ltt/token",
            Some("/home/op/.config/claude-ltt/token"),
        );
        ok("/a/../b//c", Some("/b/c"));
        ok("/a/./b/", Some("/a/b"));
        let err = |v: &str, msg: &str| {
            assert_eq!(
                claude_token_path_in(v, home()).unwrap_err().to_string(),
                msg,
                "{v:?}"
            )
        };
        err(
            "~",
            r#"claude_token_file "~": must be absolute or start with ~/"#,
        );
        err(
            "~root/x",
            r#"claude_token_file "~root/x": ~user/ is not supported: must be absolute or start with ~/"#,
        );
        err(
            "x",
            r#"claude_token_file "x": must be absolute or start with ~/"#,
        );
        err(
            "./x",
            r#"claude_token_file "./x": must be absolute or start with ~/"#,
        );
        err("a\0b", r#"claude_token_file "a\0b": holds a NUL byte"#);
        assert_eq!(
            clean_path(Path::new("/a/./b/../../c//d/")),
            Path::new("/c/d")
        );
        assert_eq!(clean_path(Path::new("/..")), Path::new("/"));
        assert_eq!(
            claude_token_path_in("~/x", None).unwrap_err().reason,
            TokenPathReason::NoHome
        );
        // Only $CREDENTIALS_DIRECTORY is expanded, and only as the first part.
        err(
            "$HOME/x",
            r#"claude_token_file "$HOME/x": must be absolute or start with ~/"#,
        );
        assert_eq!(
            credential_path("a/b", Some(Path::new("/run/c"))),
            Err(TokenPathReason::CredentialName)
        );
    }
}
