//! Why a request cannot be launched as written (`invalid_spec`, exit 64), one variant per rule,
//! each naming the field and the value it refused. The words are the answer's message.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A request that cannot be launched: the answer is `invalid_spec` (exit 64).
///
/// ```
/// let e = relay_host::launch::plan::request::Request::from_json("not json").unwrap_err();
/// assert!(e.to_string().starts_with("request is not valid JSON"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum InvalidSpec {
    /// The request is a JSON array, not one object.
    Array,
    /// The text is not JSON.
    NotJson(serde_json::Error),
    /// JSON of the wrong shape: an unknown field, a wrong type.
    Shape(serde_json::Error),
    /// The request could not be read.
    Read(io::Error),
    /// Over 1 MiB.
    TooLarge,
    /// Not UTF-8.
    NotUtf8,
    /// `kind "claude"` with a template other than `claude-code`.
    ClaudeTemplate {
        /// The built-in template's id.
        expected: &'static str,
        /// The template the request named.
        given: String,
    },
    /// `kind "terminal"` without a template.
    TerminalWithoutTemplate,
    /// A kind named with another kind's template.
    KindTemplate {
        /// The kind.
        kind: &'static str,
        /// The template the request named.
        given: String,
    },
    /// No template of that id.
    UnknownTemplate(String),
    /// A session id outside the rule.
    SessionId(String),
    /// A `resume` value that is not a session id.
    Resume(String),
    /// A relative project.
    ProjectNotAbsolute(PathBuf),
    /// The project breaks a rule of [`ProjectRule`].
    Project {
        /// The project as the request gave it.
        path: PathBuf,
        /// The rule.
        rule: ProjectRule,
    },
    /// A `host` that is not a host name.
    Host(String),
    /// An `env` entry that is not a variable name and value.
    EnvEntry(String),
    /// An `env` entry naming the token descriptor's variable.
    EnvTokenVar(String),
    /// An `extra_args` entry holding a NUL byte.
    ArgNul(usize),
    /// `env` or `extra_args` larger than the request may hold.
    TooBig {
        /// `env` or `extra_args`.
        field: &'static str,
        /// Its size.
        bytes: usize,
        /// The most it may hold.
        max: usize,
    },
    /// A token launch's `env` entry with a forbidden prefix.
    EnvPrefix {
        /// The variable.
        name: String,
        /// The prefix.
        prefix: &'static str,
    },
    /// A token launch's `env` entry not in the template's `request_env`.
    EnvNotAllowed(String),
    /// A token launch's `extra_args` entry that Claude Code's grammar and relay's classification
    /// of its options refuse.
    Arg {
        /// Its index in `extra_args`.
        index: usize,
        /// The argument.
        arg: String,
        /// The rule it breaks.
        rule: crate::launch::plan::claude_args::ArgRule,
    },
}

/// The rule a project breaks.
///
/// ```
/// use relay_host::launch::plan::request::ProjectRule;
/// assert_eq!(ProjectRule::NotAFolder.to_string(), "not a folder");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ProjectRule {
    /// The path holds a NUL byte.
    Nul,
    /// It does not resolve (the errno in words).
    Resolve(io::Error),
    /// Its metadata cannot be read once resolved.
    Metadata(io::Error),
    /// Not a folder.
    NotAFolder,
    /// A system folder or inside one.
    System,
    /// Inside the relay's own config or state folder.
    InOwnFolder(PathBuf),
    /// Owned by another user.
    Owner {
        /// The folder's owner.
        uid: u32,
        /// The host's user.
        euid: u32,
    },
}

impl fmt::Display for ProjectRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProjectRule::Nul => f.write_str("holds a NUL byte, which no path can"),
            // An error without an errno says its own words.
            ProjectRule::Resolve(e) => match e.raw_os_error() {
                Some(n) => f.write_str(&relay_token::sys::errno_words(n)),
                None => write!(f, "{e}"),
            },
            ProjectRule::Metadata(e) => write!(f, "{e}"),
            ProjectRule::NotAFolder => f.write_str("not a folder"),
            ProjectRule::System => f.write_str("a system folder cannot be a project"),
            ProjectRule::InOwnFolder(o) => write!(
                f,
                "lies inside the relay's own folder {:?}",
                o.display().to_string()
            ),
            ProjectRule::Owner { uid, euid } => write!(
                f,
                "owned by uid {uid}, not by the user relay-host runs as (uid {euid})"
            ),
        }
    }
}

impl fmt::Display for InvalidSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use InvalidSpec::*;
        match self {
            Array => {
                f.write_str("request: must be one JSON object ({\"kind\": ...}), not an array")
            }
            NotJson(e) => write!(f, "request is not valid JSON: {e}"),
            Shape(e) => write!(f, "request: {e}"),
            Read(e) => write!(f, "request: {e}"),
            TooLarge => f.write_str("request: larger than 1 MiB"),
            NotUtf8 => f.write_str("request: not UTF-8"),
            ClaudeTemplate { expected, given } => {
                write!(
                    f,
                    "kind \"claude\" takes the {expected:?} template, not {given:?}"
                )
            }
            TerminalWithoutTemplate => f.write_str("kind \"terminal\" needs a template"),
            KindTemplate { kind, given } => write!(
                f,
                "kind {kind:?} takes the template of its own name, not {given:?}"
            ),
            UnknownTemplate(t) => write!(f, "no template {t:?} is defined"),
            SessionId(id) => write!(
                f,
                "session_id {id:?}: use 1 to 64 of A-Z a-z 0-9 . _ - (not starting with . or -)"
            ),
            Resume(r) => write!(f, "resume {r:?}: not a session id, or given with continue"),
            ProjectNotAbsolute(p) => {
                write!(f, "project {:?}: must be absolute", p.display().to_string())
            }
            Project { path, rule } => {
                write!(f, "project {:?}: {rule}", path.display().to_string())
            }
            Host(h) => write!(f, "host {h:?}: not a host name"),
            EnvEntry(k) => write!(f, "env {k:?}: not a variable name and value"),
            EnvTokenVar(k) => write!(
                f,
                "env {k:?}: only the host names a token descriptor, beside the descriptor"
            ),
            ArgNul(i) => write!(f, "extra_args[{i}]: holds a NUL byte"),
            TooBig { field, bytes, max } => write!(
                f,
                "{field}: {bytes} bytes, more than the {max} a request may hold"
            ),
            EnvPrefix { name, prefix } => write!(
                f,
                "env {name:?}: a launch that carries the token may not set {prefix}* variables"
            ),
            EnvNotAllowed(k) => write!(
                f,
                "env {k:?}: not in the template's request_env list, so a launch that carries the \
                 token may not set it"
            ),
            Arg { index, arg, rule } => {
                write!(f, "extra_args[{index}] {arg:?}: {rule}")
            }
        }
    }
}

impl std::error::Error for InvalidSpec {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InvalidSpec::NotJson(e) | InvalidSpec::Shape(e) => Some(e),
            InvalidSpec::Read(e) => Some(e),
            InvalidSpec::Project {
                rule: ProjectRule::Resolve(e) | ProjectRule::Metadata(e),
                ..
            } => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;

    #[test]
    fn each_rule_keeps_its_words_and_its_source() {
        let missing = io::Error::from_raw_os_error(libc::ENOENT);
        let e = InvalidSpec::Project {
            path: "/x/y".into(),
            rule: ProjectRule::Resolve(missing),
        };
        assert_eq!(
            e.to_string(),
            r#"project "/x/y": no such file or directory"#
        );
        let io = e.source().and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(io.and_then(io::Error::raw_os_error), Some(libc::ENOENT));
        let e = InvalidSpec::TooBig {
            field: "env",
            bytes: 70000,
            max: 65536,
        };
        assert_eq!(
            e.to_string(),
            "env: 70000 bytes, more than the 65536 a request may hold"
        );
        assert!(e.source().is_none());
        let owner = ProjectRule::Owner { uid: 7, euid: 0 };
        assert_eq!(
            owner.to_string(),
            "owned by uid 7, not by the user relay-host runs as (uid 0)"
        );
    }
}
