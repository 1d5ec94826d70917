//! A launch template: its fields, its sandbox, the placeholders of its grants, and the built-in
//! templates.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::token_mode::TokenMode;
use crate::net::Network;

/// What a Claude launch does in a project where a Claude session already runs (the template's
/// `same_project`): both would share Claude's state in the relay-owned config folder and the
/// project's files.
///
/// ```
/// use relay_host::settings::SameProject;
/// assert_eq!(serde_json::from_str::<SameProject>(r#""refuse""#)?, SameProject::Refuse);
/// assert_eq!(SameProject::default(), SameProject::Warn);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SameProject {
    /// Launch, and say on stderr (and in the host log) which session already runs there.
    #[default]
    Warn,
    /// Refuse the launch (`invalid_spec`), naming the session that runs there.
    Refuse,
    /// Launch without a word.
    Allow,
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
    /// else `"host"` (see `Template::network`).
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
    /// ("Do you trust the files in this folder?"); left out: yes (`Template::trusts_project`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_project: Option<bool>,
    /// What a token launch hands on fd 5 ([`TokenMode`]); left out: the built-in template's
    /// (`TokenMode::builtin_claude_code`), else `"pipe"`. Always written: a choice is kept.
    #[serde(default)]
    pub token_mode: TokenMode,
    /// `true`: the operator accepts that this template's sessions write the home folder, its
    /// configuration or program folders, or a folder above it (see
    /// [`WritePlace`](super::WritePlace)): what its sessions write there, the operator's own
    /// shell and programs may run. Left out: such a grant, or such a project, refuses the
    /// launch. `relay-host status` warns of each template that sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes_home: Option<bool>,
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
    pub(crate) fn trusts_project(&self) -> bool {
        self.trust_project.unwrap_or(true)
    }

    /// Whether the operator accepted that this template's sessions write the home folder
    /// (`writes_home`; `false` when left out).
    pub(crate) fn writes_home(&self) -> bool {
        self.writes_home.unwrap_or(false)
    }

    /// The session's network: the template's own, else the built-in template's of the same id
    /// (`claude-code`: an allow-list of the hosts Claude Code needs), else `"host"`.
    pub(crate) fn network(&self) -> Network {
        let net = self.network.clone().unwrap_or_else(|| {
            (builtins().iter().find(|b| b.id == self.id))
                .and_then(|b| b.network.clone())
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

impl Template {
    /// The API hosts of the template, as `host:port`, where a stand-in session's proxy swaps the
    /// stand-in for the real token: [`ANTHROPIC_API`](crate::stand_in::ANTHROPIC_API), and
    /// the `api_base_url`'s host and port when it is `https://`.
    #[cfg(target_os = "linux")]
    pub(crate) fn api_hosts(&self) -> Vec<String> {
        use crate::stand_in::ANTHROPIC_API;
        let mut hosts = vec![ANTHROPIC_API.to_string()];
        if let Some(g) = self
            .api_base_url
            .as_ref()
            .filter(|g| g.url().starts_with("https://"))
        {
            if g.allow_entry() != ANTHROPIC_API {
                hosts.push(g.allow_entry().to_string());
            }
        }
        hosts
    }
}

/// The variable [`Template::api_base_url`] sets in the child.
pub(crate) const BASE_URL_VARIABLE: &str = "ANTHROPIC_BASE_URL";

/// The project-folder placeholder in grants.
pub(crate) const PROJECT_PLACEHOLDER: &str = "{project}";

/// The placeholder for the launch's own Claude config folder in its session folder (used by the
/// built-in `claude-code` template in its grants and as `CLAUDE_CONFIG_DIR`; see
/// `launch::prepare::claude_config`).
pub(crate) const CLAUDE_CONFIG_PLACEHOLDER: &str = "{claude_config}";

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
const CLAUDE_CODE_ENV: &[(&str, &str)] = &[
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ("DISABLE_AUTOUPDATER", "1"),
];

/// The built-in templates, made once per process ([`builtin_templates`]).
pub(crate) fn builtins() -> &'static [Template] {
    static BUILTINS: std::sync::OnceLock<Vec<Template>> = std::sync::OnceLock::new();
    BUILTINS.get_or_init(builtin_templates)
}

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
            writes_home: None,
        },
        Template {
            id: "shell".into(),
            command: vec!["/bin/sh".into()],
            env: BTreeMap::new(),
            sandbox: Sandbox::Grants(Grants {
                read: vec!["~/".into()],
                read_write: vec![PROJECT_PLACEHOLDER.into()],
            }),
            request_env: vec![],
            network: Some(Network::Host),
            api_base_url: None,
            same_project: None,
            trust_project: None,
            token_mode: TokenMode::Pipe,
            writes_home: None,
        },
    ]
}

#[cfg(test)]
mod tests {
    /// `trusts_project`'s example.
    #[test]
    fn trusts_project_doc_example() {
        let s = crate::settings::Settings::default();
        assert!(s.template("claude-code").unwrap().trusts_project());
        let t: crate::settings::Template =
            serde_json::from_str(r#"{"id": "c", "command": ["claude"], "trust_project": false}"#)
                .unwrap();
        assert!(!t.trusts_project());
    }

    /// `network`'s example.
    #[test]
    fn network_doc_example() {
        use crate::{net::Network, settings::Settings};
        let s = Settings::default();
        assert_eq!(s.template("shell").unwrap().network(), Network::Host);
        assert_eq!(
            s.template("claude-code").unwrap().network().word(),
            "allow-list"
        );
    }

    /// `api_hosts`'s example.
    #[test]
    #[cfg(target_os = "linux")]
    fn api_hosts_doc_example() {
        let t = crate::settings::Settings::default()
            .template("claude-code")
            .unwrap();
        assert_eq!(t.api_hosts(), ["api.anthropic.com:443"]);
    }

    /// `CLAUDE_CODE_ENV`'s example.
    #[test]
    fn claude_code_env_doc_example() {
        let env = super::CLAUDE_CODE_ENV;
        assert!(env.contains(&("DISABLE_AUTOUPDATER", "1")));
        assert!(env
            .iter()
            .all(|(k, _)| *k != "CLAUDE_CODE_SUBPROCESS_ENV_SCRUB"));
    }
}
