//! The host's settings: [`Settings`], read from `settings.json` or `settings.toml`.
//!
//! Both formats carry the same keys; both files present is an error, and so is an unknown key.
//! `claude_token_file` is left out of a written file when it is empty, so a file that never set
//! it round-trips byte-identical.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::net::{Network, TokenNetwork};

// A settings file's template entry and how it extends a built-in template (the merge rule).
#[path = "template_entry.rs"]
mod entry;
pub use entry::SameProject;
#[path = "settings_error.rs"] // Why settings could not be loaded.
mod error;
#[path = "token_mode.rs"] // `token_mode` and the checks stand-in mode needs.
mod token_mode;
use error::with_path;
pub use error::SettingsError;
pub use token_mode::TokenMode;

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
    /// `template_entry.rs`, and the README).
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

/// A launch template.
///
/// ```
/// use relay_host::settings::{Sandbox, Template};
/// let t: Template = serde_json::from_str(r#"{"id": "shell", "command": ["/bin/sh"], "sandbox": false}"#).unwrap();
/// assert_eq!(t.sandbox, Sandbox::Off);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Template {
    /// The template's id (`claude-code`, `shell`, ...).
    pub id: String,
    /// The program and its first arguments.
    pub command: Vec<String>,
    /// Variables set in the child after the parent's environment is scrubbed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The sandbox: grants, or `false` for none.
    #[serde(default)]
    pub sandbox: Sandbox,
    /// Variable names a request may set on a launch that carries the token (empty: none).
    /// `LD_*`, `ANTHROPIC_*`, `CLAUDE*` and `NODE_OPTIONS` are refused even when listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_env: Vec<String>,
    /// The network of a sandboxed session; left out, the built-in template's of the same id,
    /// else `"host"` (see [`Template::network`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// The API gateway Claude Code talks to instead of Anthropic's API: set as
    /// `ANTHROPIC_BASE_URL` in the child, and its `host:port` added to the template's
    /// allow-list. Only settings can name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_base_url: Option<crate::net::Gateway>,
    /// What a Claude launch does in a project where a Claude session already runs: `"warn"`
    /// (left out), `"refuse"` or `"allow"` (see [`SameProject`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_project: Option<SameProject>,
    /// Whether the launch's project counts as Claude Code's answer to its trust dialog
    /// ("Do you trust the files in this folder?"); left out: yes ([`Template::trusts_project`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_project: Option<bool>,
    /// What a token launch hands on fd 5 ([`TokenMode`]); left out: the built-in template's
    /// ([`TokenMode::builtin_claude_code`]), else `"pipe"`. Always written: a choice is kept.
    #[serde(default)]
    pub token_mode: TokenMode,
}

impl Template {
    /// Whether relay marks the launch's project trusted in the launch's own Claude config
    /// (`projects.<project>.hasTrustDialogAccepted`), so a session does not stop at Claude
    /// Code's trust dialog: the template's `trust_project`, `true` when left out. The operator
    /// chose the project (`--project`, or the request's `project`); the dialog guards the
    /// project's own Claude settings, hooks and MCP servers, which a launch with the token reads
    /// only for the operator's `trusted_projects` anyway; and an unattended session stopped at
    /// the dialog (its cursor on "No, exit") ends with exit 1 and no hint. `false` leaves the
    /// question to the person at the terminal.
    ///
    /// ```
    /// let s = relay_host::settings::Settings::default();
    /// assert!(s.template("claude-code").unwrap().trusts_project());
    /// let t: relay_host::settings::Template =
    ///     serde_json::from_str(r#"{"id": "c", "command": ["claude"], "trust_project": false}"#).unwrap();
    /// assert!(!t.trusts_project());
    /// ```
    pub fn trusts_project(&self) -> bool {
        self.trust_project.unwrap_or(true)
    }

    /// The session's network: the template's own, else the built-in template's of the same id
    /// (`claude-code`: an allow-list of the hosts Claude Code needs), else `"host"`.
    ///
    /// ```
    /// use relay_host::{net::Network, settings::Settings};
    /// let s = Settings::default();
    /// assert_eq!(s.template("shell").unwrap().network(), Network::Host);
    /// assert_eq!(s.template("claude-code").unwrap().network().word(), "allow-list");
    /// ```
    pub fn network(&self) -> Network {
        let net = self.network.clone().unwrap_or_else(|| {
            builtin_templates()
                .into_iter()
                .find(|b| b.id == self.id)
                .and_then(|b| b.network)
                .unwrap_or(Network::Host)
        });
        match (net, &self.api_base_url) {
            (Network::Allow(list), Some(g)) => Network::Allow(list.including(g.entry())),
            (net @ Network::Allow(_), None) | (net @ (Network::Host | Network::None), _) => net,
        }
    }
}

/// A template's sandbox: `false`, or the folders it grants.
///
/// ```
/// use relay_host::settings::Sandbox;
/// let s: Sandbox = serde_json::from_str(r#"{"read": ["~/.config"], "read_write": ["{project}"]}"#).unwrap();
/// assert!(matches!(s, Sandbox::Grants(_)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Sandbox {
    /// `false`: the template runs unsandboxed.
    #[serde(serialize_with = "off::serialize")]
    Off,
    /// The grants of a sandboxed template.
    Grants(Grants),
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox::Grants(Grants::default())
    }
}

impl Sandbox {
    /// The grants of a sandboxed template, `None` for `false` (every kind named: a kind added
    /// later does not compile until it is decided here).
    pub(crate) fn grants(&self) -> Option<&Grants> {
        match self {
            Sandbox::Off => None,
            Sandbox::Grants(g) => Some(g),
        }
    }
}

/// Folders a sandboxed template may read, or read and write. Each is `~/...`, absolute, or
/// starts with `{project}`.
///
/// ```
/// let g = relay_host::settings::Grants::default();
/// assert!(g.read.is_empty() && g.read_write.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    /// Read-only grants.
    #[serde(default)]
    pub read: Vec<String>,
    /// Read-write grants.
    #[serde(default)]
    pub read_write: Vec<String>,
}

mod off {
    use serde::Serializer;

    pub fn serialize<S: Serializer>(s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(false)
    }
}

// Not `untagged` on the way in: an untagged enum's error ("data did not match any variant")
// names neither an unknown key inside the grants nor why `true` is refused.
impl<'de> Deserialize<'de> for Sandbox {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Sandbox, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Sandbox;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("false or grants (read, read_write)")
            }

            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Sandbox, E> {
                match v {
                    false => Ok(Sandbox::Off),
                    true => Err(E::custom(
                        "sandbox: true is the default; give grants or false",
                    )),
                }
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Sandbox, A::Error> {
                Grants::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(Sandbox::Grants)
            }
        }
        d.deserialize_any(V)
    }
}

/// The two file names settings are read from.
pub const FILE_NAMES: [&str; 2] = ["settings.json", "settings.toml"];

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
            .or_else(|| builtin_templates().into_iter().find(|t| t.id == id))
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
        token_mode::problem(self).map_or(Ok(()), |m| Err(invalid(m)))
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

/// The variable [`Template::api_base_url`] sets in the child.
pub const BASE_URL_VARIABLE: &str = "ANTHROPIC_BASE_URL";

/// The project-folder placeholder in grants.
pub const PROJECT_PLACEHOLDER: &str = "{project}";

/// The placeholder for the launch's own Claude config folder in its session folder (used by the
/// built-in `claude-code` template in its grants and as `CLAUDE_CONFIG_DIR`; see
/// [`crate::launch::prepare::claude_config`]).
pub const CLAUDE_CONFIG_PLACEHOLDER: &str = "{claude_config}";

/// The built-in `claude-code` template's environment, besides `CLAUDE_CONFIG_DIR`. Each variable
/// was measured with Claude Code 2.1.332 inside relay's sandbox (docs/session-host.md, "The
/// built-in template's environment"), and only those that change something are set:
///
/// - `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`: no telemetry, error reports, feature flags,
///   version checks or auto-updates. Without it a session's start tries `registry.npmjs.org`
///   and `raw.githubusercontent.com` (refused by the allow-list) and queues about 330 KB of
///   unsent telemetry in the Claude config. It implies `DISABLE_TELEMETRY` and
///   `DISABLE_ERROR_REPORTING`, which add nothing beside it and are not set.
/// - `DISABLE_AUTOUPDATER=1`: the auto-updater stays off also where an organisation's managed
///   settings name a download mirror (which turns it back on despite the variable above): a
///   session does not replace the program later launches run.
///
/// `CLAUDE_CODE_SUBPROCESS_ENV_SCRUB` is left unset (off): it forces Claude Code's own tool
/// sandbox, which cannot start inside relay's, and every Bash call then fails.
///
/// ```
/// let env = relay_host::settings::CLAUDE_CODE_ENV;
/// assert!(env.contains(&("DISABLE_AUTOUPDATER", "1")));
/// assert!(env.iter().all(|(k, _)| *k != "CLAUDE_CODE_SUBPROCESS_ENV_SCRUB"));
/// ```
pub const CLAUDE_CODE_ENV: &[(&str, &str)] = &[
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ("DISABLE_AUTOUPDATER", "1"),
];

/// The built-in templates: `claude-code` and `shell`.
///
/// ```
/// let ids: Vec<String> = relay_host::settings::builtin_templates().into_iter().map(|t| t.id).collect();
/// assert_eq!(ids, ["claude-code", "shell"]);
/// ```
pub fn builtin_templates() -> Vec<Template> {
    let mut claude_env: BTreeMap<String, String> = CLAUDE_CODE_ENV
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    claude_env.insert(
        "CLAUDE_CONFIG_DIR".to_string(),
        CLAUDE_CONFIG_PLACEHOLDER.to_string(),
    );
    vec![
        Template {
            id: "claude-code".into(),
            command: vec!["claude".into()],
            env: claude_env,
            sandbox: Sandbox::Grants(Grants {
                read: vec![],
                read_write: vec![PROJECT_PLACEHOLDER.into(), CLAUDE_CONFIG_PLACEHOLDER.into()],
            }),
            request_env: vec![],
            network: Some(crate::net::claude_code_network()),
            api_base_url: None,
            same_project: None,
            trust_project: None,
            token_mode: TokenMode::builtin_claude_code(),
        },
        Template {
            id: "shell".into(),
            command: vec!["/bin/sh".into()],
            env: BTreeMap::new(),
            sandbox: Sandbox::Grants(Grants {
                read: vec![],
                read_write: vec!["~/".into()],
            }),
            request_env: vec![],
            network: Some(Network::Host),
            api_base_url: None,
            same_project: None,
            trust_project: None,
            token_mode: TokenMode::Pipe,
        },
    ]
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
