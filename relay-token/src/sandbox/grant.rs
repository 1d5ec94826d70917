//! A grant's value as written in settings, expanded to a path.

use crate::path::clean_path;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{GrantReason, SandboxError};

/// True when `s` holds a control character (C0, DEL or C1), or, for bytes that are not UTF-8,
/// a byte below 0x20 or 0x7F.
pub(super) fn has_control(s: &OsStr) -> bool {
    match s.to_str() {
        Some(text) => text.chars().any(char::is_control),
        None => s.as_bytes().iter().any(|&b| b < 0x20 || b == 0x7f),
    }
}

/// Expands a template's grant against the home folder and the project folder.
///
/// `~/...` is taken against `home`, `{project}` or `{project}/...` against `project`, and an
/// absolute path as it is; the result is lexically cleaned. Refused: a grant that comes to `/`,
/// a relative value, `~` alone, `~user/...`, `{project}` without a project, and a value with
/// control characters. Errors name the value only.
///
/// ```
/// use std::path::Path;
/// use relay_token::sandbox::expand_grant;
///
/// let home = Path::new("/home/me");
/// let project = Path::new("/srv/app");
/// assert_eq!(expand_grant("~/.config", home, None)?, Path::new("/home/me/.config"));
/// assert_eq!(expand_grant("{project}/docs", home, Some(project))?, Path::new("/srv/app/docs"));
/// assert_eq!(expand_grant("/opt/x/../y", home, None)?, Path::new("/opt/y"));
/// assert!(expand_grant("/", home, None).is_err());
/// assert_eq!(expand_grant("~", home, None)?, Path::new("/home/me"));
/// assert!(expand_grant("./src", home, None).is_err());
/// # Ok::<(), relay_token::sandbox::SandboxError>(())
/// ```
pub fn expand_grant(
    value: &str,
    home: &Path,
    project: Option<&Path>,
) -> Result<PathBuf, SandboxError> {
    let fail = |reason| {
        Err(SandboxError::Grant {
            value: value.to_string(),
            reason,
        })
    };
    if has_control(OsStr::new(value)) {
        return fail(GrantReason::ControlCharacters);
    }
    let path = if let Some(rest) = value.strip_prefix("~/").or((value == "~").then_some("")) {
        if !home.is_absolute() {
            return fail(GrantReason::NoHome);
        }
        home.join(rest)
    } else if value.starts_with('~') {
        return fail(if value.len() > 1 {
            GrantReason::OtherUsersHome
        } else {
            GrantReason::NotAbsolute
        });
    } else if let Some(rest) = value.strip_prefix("{project}") {
        if !(rest.is_empty() || rest.starts_with('/')) {
            return fail(GrantReason::NotAbsolute);
        }
        match project {
            Some(p) if p.is_absolute() => p.join(rest.trim_start_matches('/')),
            Some(_) => return fail(GrantReason::NotAbsolute),
            None => return fail(GrantReason::NoProject),
        }
    } else if value.starts_with('/') {
        PathBuf::from(value)
    } else {
        return fail(GrantReason::NotAbsolute);
    };
    if has_control(path.as_os_str()) {
        return fail(GrantReason::ControlCharacters);
    }
    let path = clean_path(&path);
    if path == Path::new("/") {
        return fail(GrantReason::Root);
    }
    Ok(path)
}
