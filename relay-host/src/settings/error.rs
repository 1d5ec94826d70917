//! Why settings could not be loaded, and the key path a parser's error happened at.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_path_to_error::{Error, Segment};

/// Settings that could not be loaded.
///
/// ```
/// let err = relay_host::settings::Settings::from_json("{").unwrap_err();
/// assert!(err.to_string().contains("line 1"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum SettingsError {
    /// Both `settings.json` and `settings.toml` exist.
    BothPresent {
        /// The JSON file.
        json: PathBuf,
        /// The TOML file.
        toml: PathBuf,
    },
    /// The file could not be read (or the config folder could not be searched).
    Io {
        /// The file, or the config folder.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// The file does not parse, or holds an unknown key; the message names line and column.
    Parse {
        /// The file (empty when parsed from a string).
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// The file lies where a session could have written it (inside a read-write grant): the
    /// launch cannot be made safe (`sandbox_unavailable`), whatever the file says.
    Reachable {
        /// The file.
        path: PathBuf,
        /// Why it is within a session's reach.
        message: String,
    },
    /// The file parses, but a value is not usable.
    Invalid {
        /// The file (empty when parsed from a string).
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = |p: &Path| {
            if p.as_os_str().is_empty() {
                "settings".to_string()
            } else {
                p.display().to_string()
            }
        };
        match self {
            SettingsError::BothPresent { json, toml } => write!(
                f,
                "both {} and {} exist: keep one",
                json.display(),
                toml.display()
            ),
            SettingsError::Io { path, error } => write!(f, "read {}: {error}", path.display()),
            SettingsError::Parse { path, message } => write!(f, "{}: {message}", at(path)),
            SettingsError::Invalid { path, message } => write!(f, "{}: {message}", at(path)),
            SettingsError::Reachable { path, message } => write!(f, "{}: {message}", at(path)),
        }
    }
}

impl std::error::Error for SettingsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SettingsError::Io { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl SettingsError {
    /// The settings file (or the config folder) the error is about; `None` when parsed from a
    /// string.
    ///
    /// ```
    /// let e = relay_host::settings::Settings::from_json("{").unwrap_err();
    /// assert_eq!(e.path(), None);
    /// ```
    pub fn path(&self) -> Option<&Path> {
        let p = match self {
            SettingsError::BothPresent { json, .. } => json,
            SettingsError::Io { path, .. }
            | SettingsError::Parse { path, .. }
            | SettingsError::Invalid { path, .. }
            | SettingsError::Reachable { path, .. } => path,
        };
        (!p.as_os_str().is_empty()).then_some(p.as_path())
    }

    /// True when the file is fine but lies within a session's reach
    /// ([`SettingsError::Reachable`]): a refusal for safety, not a mistake in the file.
    ///
    /// ```
    /// assert!(!relay_host::settings::Settings::from_json("{").unwrap_err().unsafe_place());
    /// ```
    pub fn unsafe_place(&self) -> bool {
        matches!(self, SettingsError::Reachable { .. })
    }
}

/// A parser's error with the key path it happened at (`templates[0].env.FOO: ...`), up to the
/// first key it could not know (shown as `?`: a trailing comma comes before any key).
pub(super) fn with_path<E: fmt::Display>(e: Error<E>, words: impl Fn(&E) -> String) -> String {
    let mut path = String::new();
    for s in e.path().iter() {
        match s {
            Segment::Unknown => break,
            Segment::Seq { .. } => path += &s.to_string(),
            _ if path.is_empty() => path = s.to_string(),
            _ => path = format!("{path}.{s}"),
        }
    }
    match path.is_empty() {
        true => words(e.inner()),
        false => format!("{path}: {}", words(e.inner())),
    }
}
