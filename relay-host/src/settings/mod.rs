//! The host's settings: [`Settings`], read from `settings.json` or `settings.toml`.
//!
//! Both formats carry the same keys; both files present is an error, and so is an unknown key.
//! `claude_token_file` is left out of a written file when it is empty, so a file that never set
//! it round-trips byte-identical.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::net::TokenNetwork;

mod checks;
// A settings file's template entry and how it extends a built-in template (the merge rule).
mod entry;
// Why settings could not be loaded.
mod error;
// A template's grants for one launch, expanded.
pub(crate) mod grants;
mod template;
mod token_mode;
pub(crate) mod write_places;
use error::with_path;
pub use error::SettingsError;
pub use template::{builtin_templates, Grants, SameProject, Sandbox, Template};
pub(crate) use template::{BASE_URL_VARIABLE, CLAUDE_CONFIG_PLACEHOLDER, PROJECT_PLACEHOLDER};
pub use token_mode::TokenMode;
pub use write_places::WritePlace;

/// The settings of `relay-host`.
///
/// ```
/// use relay_host::settings::Settings;
/// let s = Settings::from_json(r#"{"claude_token_file": "~/.config/claude-ltt/token"}"#).unwrap();
/// assert_eq!(s.claude_token_file, "~/.config/claude-ltt/token");
/// assert_eq!(Settings::from_toml(r#"claude_token_file = "~/.config/claude-ltt/token""#).unwrap(), s);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The token file (`""`: no token). See [`relay_token::claude_token_path`].
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub claude_token_file: String,
    /// Templates, effective: an entry with the id of a built-in one extends it (the rule:
    /// `settings/entry.rs`, and docs/relay-host.md).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "entry::deserialize"
    )]
    pub templates: Vec<Template>,
    /// The `bwrap` to use instead of the one on `PATH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bwrap: Option<PathBuf>,
    /// The `relay-shim` to use when none is beside `relay-host` or on `PATH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shim: Option<PathBuf>,
    /// Paths no session may write, added to the built-in list
    /// ([`relay_token::sandbox::write_deny`]): `~/...`, absolute, or `{project}/...`; a trailing `/`
    /// names a folder. The built-in list cannot be shortened.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write_deny: Vec<String>,
    /// Project folders (`~/...` or absolute) whose own Claude Code settings a launch that carries
    /// the token may read. Elsewhere such a launch runs Claude Code with `--setting-sources
    /// user`: a session without the token may have written the project's settings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trusted_projects: Vec<String>,
    /// `"host"`: a launch with the token may run with `network: "host"` (else it is refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_network: Option<TokenNetwork>,
    /// `true`: a launch with the token may use a network allow-list with wildcard entries
    /// (`*.example.com`, which covers hosts other people control); else it is refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub token_wildcards: bool,
    /// A PEM file (absolute path) of CA certificates trusted for upstream TLS in stand-in mode
    /// ([`TokenMode::StandIn`]) besides the webpki roots: a corporate TLS proxy's, a test's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_ca_file: Option<PathBuf>,
}

/// The two file names settings are read from.
pub(crate) const FILE_NAMES: [&str; 2] = ["settings.json", "settings.toml"];

impl Settings {
    /// Parses JSON settings.
    ///
    /// ```
    /// let err = relay_host::settings::Settings::from_json(r#"{"colour": 1}"#).unwrap_err();
    /// assert!(err.to_string().contains("colour"));
    /// ```
    pub fn from_json(text: &str) -> Result<Settings, SettingsError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let parsed = serde_path_to_error::deserialize(&mut de)
            .map_err(|e| with_path(e, serde_json::Error::to_string))
            .and_then(|s: Settings| de.end().map(|()| s).map_err(|e| e.to_string()));
        let s = parsed.map_err(|message| SettingsError::Parse {
            path: PathBuf::new(),
            message,
        })?;
        s.validate(Path::new(""))?;
        Ok(s)
    }

    /// Parses TOML settings.
    ///
    /// ```
    /// let s = relay_host::settings::Settings::from_toml("").unwrap();
    /// assert_eq!(s, Default::default());
    /// ```
    pub fn from_toml(text: &str) -> Result<Settings, SettingsError> {
        let parsed = toml::Deserializer::parse(text)
            .map_err(|e| one_line(&e.to_string()))
            .and_then(|de| {
                serde_path_to_error::deserialize(de)
                    .map_err(|e| with_path(e, |e| one_line(&e.to_string())))
            });
        let s: Settings = parsed.map_err(|message| SettingsError::Parse {
            path: PathBuf::new(),
            message,
        })?;
        s.validate(Path::new(""))?;
        Ok(s)
    }

    /// Loads `settings.json` or `settings.toml` from `config_dir`; neither present gives the
    /// defaults; both present is an error naming both.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join("relay-settings-doc-none");
    /// let s = relay_host::settings::Settings::load(&dir).unwrap();
    /// assert_eq!(s, Default::default());
    /// ```
    pub fn load(config_dir: &Path) -> Result<Settings, SettingsError> {
        Ok(Settings::load_with_path(config_dir)?.0)
    }

    /// [`Settings::load`], also returning the file it read (`None` for the defaults).
    ///
    /// ```
    /// let dir = std::env::temp_dir().join("relay-settings-doc-none2");
    /// let (_, file) = relay_host::settings::Settings::load_with_path(&dir).unwrap();
    /// assert_eq!(file, None);
    /// ```
    pub fn load_with_path(config_dir: &Path) -> Result<(Settings, Option<PathBuf>), SettingsError> {
        let json = config_dir.join(FILE_NAMES[0]);
        let toml_path = config_dir.join(FILE_NAMES[1]);
        // A dangling symlink counts as present (and fails to read): a session that deleted the
        // target must not turn the settings into the defaults, which deny nothing.
        let present = |p: &Path| std::fs::symlink_metadata(p).is_ok();
        // A folder that cannot be searched is not "no settings": the error names it.
        if let Err(error) = std::fs::symlink_metadata(&json) {
            if error.kind() != std::io::ErrorKind::NotFound {
                let path = config_dir.to_path_buf();
                return Err(SettingsError::Io { path, error });
            }
        }
        let (has_json, has_toml) = (present(&json), present(&toml_path));
        if has_json && has_toml {
            return Err(SettingsError::BothPresent {
                json,
                toml: toml_path,
            });
        }
        let path = if has_json {
            json
        } else if has_toml {
            toml_path
        } else {
            return Ok((Settings::default(), None));
        };
        let text = read_settings_file(&path).map_err(|error| SettingsError::Io {
            path: path.clone(),
            error,
        })?;
        let parsed = if has_json {
            Settings::from_json(&text)
        } else {
            Settings::from_toml(&text)
        };
        let s = parsed.map_err(|e| match e {
            SettingsError::Parse { message, .. } => SettingsError::Parse {
                path: path.clone(),
                message,
            },
            SettingsError::Invalid { message, .. } => SettingsError::Invalid {
                path: path.clone(),
                message,
            },
            other => other,
        })?;
        Ok((s, Some(path)))
    }

    /// The settings as pretty JSON, with a final newline.
    ///
    /// ```
    /// let s = relay_host::settings::Settings::default();
    /// assert_eq!(s.to_json(), "{}\n");
    /// ```
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("settings serialize");
        s.push('\n');
        s
    }

    /// The settings as TOML.
    ///
    /// ```
    /// let s = relay_host::settings::Settings::default();
    /// assert_eq!(s.to_toml(), "");
    /// ```
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("settings serialize")
    }

    /// The template with this id: one from the settings, else the built-in one.
    ///
    /// ```
    /// let s = relay_host::settings::Settings::default();
    /// assert_eq!(s.template("shell").unwrap().command, vec!["/bin/sh".to_string()]);
    /// assert!(s.template("nope").is_none());
    /// ```
    pub fn template(&self, id: &str) -> Option<Template> {
        self.templates
            .iter()
            .find(|t| t.id == id)
            .cloned()
            .or_else(|| template::builtins().iter().find(|t| t.id == id).cloned())
    }

    /// Every template a launch can name: each built-in one (as the settings give it, else as
    /// shipped), then the settings' own.
    ///
    /// ```
    /// let all = relay_host::settings::Settings::default().all_templates();
    /// assert_eq!(all.len(), 2);
    /// ```
    pub fn all_templates(&self) -> Vec<Template> {
        let builtins = template::builtins();
        let mut all: Vec<_> = builtins
            .iter()
            .map(|b| self.template(&b.id).unwrap_or_else(|| b.clone()))
            .collect();
        all.extend(
            (self.templates.iter())
                .filter(|t| builtins.iter().all(|b| b.id != t.id))
                .cloned(),
        );
        all
    }

    fn validate(&self, path: &Path) -> Result<(), SettingsError> {
        let invalid = |message: String| SettingsError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        for (i, t) in self.templates.iter().enumerate() {
            if t.id.is_empty() {
                return Err(invalid(format!("templates[{i}]: empty id")));
            }
            if t.command.is_empty() || t.command[0].is_empty() {
                return Err(invalid(format!("template {:?}: command is empty", t.id)));
            }
            if self.templates[..i].iter().any(|o| o.id == t.id) {
                return Err(invalid(format!("template {:?} defined twice", t.id)));
            }
            if let Some(n) = t.command.iter().position(|a| a.contains('\0')) {
                return Err(invalid(format!(
                    "template {:?}: command[{n}] holds a NUL byte",
                    t.id
                )));
            }
            if let Some(k) = t.env.iter().find_map(|(k, v)| {
                (k.is_empty() || k.contains(['=', '\0']) || v.contains('\0')).then_some(k)
            }) {
                return Err(invalid(format!(
                    "template {:?}: env {k:?}: a name must be one or more characters without '=' \
                     or NUL, a value without NUL",
                    t.id
                )));
            }
            if t.api_base_url.is_some() {
                if t.env.contains_key(BASE_URL_VARIABLE) {
                    return Err(invalid(format!(
                        "template {:?}: api_base_url and env.{BASE_URL_VARIABLE} both set; keep api_base_url",
                        t.id
                    )));
                }
                if !crate::net::network_rules(&t.network()).reaches_out {
                    return Err(invalid(format!(
                        "template {:?}: api_base_url with network \"none\": no gateway is reachable",
                        t.id
                    )));
                }
            }
        }
        let all = self.all_templates();
        let ca = self.upstream_ca_file.as_deref();
        checks::problem(&self.templates, &all, ca).map_or(Ok(()), |m| Err(invalid(m)))
    }
}

/// The largest settings file read (and the largest request): 1 MiB.
pub const MAX_SETTINGS_BYTES: usize = 1 << 20;

/// Reads a settings file the way the token file is read: opened `O_NONBLOCK` (a FIFO answers at
/// once instead of hanging every launch), a regular file only (not `/dev/zero`), at most
/// [`MAX_SETTINGS_BYTES`], UTF-8.
fn read_settings_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)?;
    let invalid = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    if !f.metadata()?.is_file() {
        return Err(invalid("not a regular file"));
    }
    let mut bytes = Vec::new();
    f.take(MAX_SETTINGS_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > MAX_SETTINGS_BYTES {
        return Err(invalid("larger than 1 MiB"));
    }
    String::from_utf8(bytes).map_err(|_| invalid("not UTF-8"))
}

/// A multi-line parser message (toml's: a header, the quoted source line with a `N | ` gutter,
/// a caret line, the reason) as one line: the header and the reason, without the excerpt.
fn one_line(s: &str) -> String {
    let is_gutter = |l: &str| {
        l.split_once('|')
            .is_some_and(|(n, _)| n.trim().chars().all(|c| c.is_ascii_digit()))
    };
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !is_gutter(l) && !l.chars().all(|c| c == '^' || c == ' '))
        .collect::<Vec<_>>()
        .join(": ")
}
