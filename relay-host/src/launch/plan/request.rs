//! A launch request, as `relay-host launch` reads it, and its validation.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use crate::settings::{Settings, Template};

/// The kinds of session a request may ask for.
///
/// ```
/// use relay_host::launch::plan::request::Kind;
/// let k: Kind = serde_json::from_str("\"claude\"").unwrap();
/// assert_eq!(k, Kind::Claude);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Kind {
    /// Claude Code, from the `claude-code` template.
    Claude,
    /// Any template, in a terminal (`claude-code` makes it a Claude launch).
    Terminal,
    /// The `pi` template.
    Pi,
    /// The `codex` template.
    Codex,
    /// The `chat` template.
    Chat,
}

impl Kind {
    /// The kind's name as it is written in a request.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Claude => "claude",
            Kind::Terminal => "terminal",
            Kind::Pi => "pi",
            Kind::Codex => "codex",
            Kind::Chat => "chat",
        }
    }

    /// Every kind, each once (a unit test checks each one's decisions by an exhaustive match, so
    /// a kind added later does not compile until it is decided there and listed here).
    #[cfg(test)]
    pub(crate) const ALL: [Kind; 5] = [
        Kind::Claude,
        Kind::Terminal,
        Kind::Pi,
        Kind::Codex,
        Kind::Chat,
    ];

    /// True for the kinds that run Claude Code when their template is `claude-code` (its
    /// flags, config folder and resumed conversations): `claude` and `terminal`.
    pub(crate) fn may_run_claude(self) -> bool {
        match self {
            Kind::Claude | Kind::Terminal => true,
            Kind::Pi | Kind::Codex | Kind::Chat => false,
        }
    }

    /// True for the kinds whose shim proves itself to the host (`--identity`): `claude`.
    pub(crate) fn proves_identity(self) -> bool {
        match self {
            Kind::Claude => true,
            Kind::Terminal | Kind::Pi | Kind::Codex | Kind::Chat => false,
        }
    }
}

/// The id of the template Claude launches use.
pub(crate) const CLAUDE_TEMPLATE: &str = "claude-code";

/// A launch request. Unknown keys (such as `claude_token`: only the host sets a token) are
/// refused.
///
/// ```
/// use relay_host::launch::plan::request::Request;
/// let r = Request::from_json(r#"{"kind": "claude", "project": "/srv/p"}"#).unwrap();
/// assert!(r.sandbox);
/// assert!(Request::from_json(r#"{"kind": "claude", "claude_token": "x"}"#).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The kind of session.
    pub kind: Kind,
    /// The template id (may be left out for `claude` and for the kinds named after a template).
    #[serde(default)]
    pub template: Option<String>,
    /// The session id: `[A-Za-z0-9._-]`, 1 to 64 characters; generated when left out.
    #[serde(default)]
    pub session_id: Option<String>,
    /// A Claude conversation to resume (`--resume <id>` for Claude launches).
    #[serde(default)]
    pub resume: Option<String>,
    /// Continue the project's most recent Claude conversation (`--continue` for Claude
    /// launches); not with `resume`.
    #[serde(default, rename = "continue")]
    pub continue_last: bool,
    /// The project folder (absolute).
    #[serde(default)]
    pub project: Option<PathBuf>,
    /// Arguments appended to the template's command.
    #[serde(default)]
    pub extra_args: Vec<String>,
    /// Variables set after the template's env.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Sandboxed (the default) or not.
    #[serde(default = "yes")]
    pub sandbox: bool,
    /// Run on another machine over ssh (never gets the token).
    #[serde(default)]
    pub host: Option<String>,
    /// Keep the session folder after the session ends, for a later `resume` (`gc` removes it
    /// once older than the retention); by default it is removed when the session ends.
    #[serde(default)]
    pub keep: bool,
}

fn yes() -> bool {
    true
}

pub use crate::launch::plan::claude_args::ArgRule;
pub use crate::launch::plan::invalid_spec::{InvalidSpec, ProjectRule};

/// True for a usable session id: 1 to 64 of `[A-Za-z0-9._-]`, not starting with `.` (no hidden
/// or parent folder) nor `-` (never read as an option where it is passed on).
pub(crate) fn valid_session_id(id: &str) -> bool {
    relay_shim::SessionId::parse(id).is_some()
}

/// A request checked against the settings, before its project is: what
/// [`Request::validate`] makes and the launch plan is made from. Its project
/// is the folder as the request gave it; the plan holds the real one, checked once.
///
/// ```
/// use relay_host::launch::plan::request::Request;
/// let r = Request::from_json(r#"{"kind": "terminal", "template": "shell", "session_id": "s1"}"#)?;
/// assert!(r.validate(&Default::default()).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Validated {
    pub(super) kind: Kind,
    pub(super) template: Template,
    pub(super) claude: bool,
    pub(super) sandboxed: bool,
    pub(super) session_id: String,
    pub(super) project: Option<PathBuf>,
    pub(super) resume: Option<String>,
    pub(super) continue_last: bool,
    pub(super) extra_args: Vec<String>,
    pub(super) env: BTreeMap<String, String>,
    pub(super) ssh_host: Option<String>,
    pub(super) keep: bool,
}

impl Validated {
    /// The session id (given or generated).
    pub(crate) fn session_id(&self) -> &str {
        &self.session_id
    }
}

impl Request {
    /// Parses a request; an error is `invalid_spec`.
    ///
    /// ```
    /// let e = relay_host::launch::plan::request::Request::from_json(r#"{"kind": "claude", "colour": 1}"#).unwrap_err();
    /// assert!(e.to_string().contains("colour"));
    /// ```
    pub fn from_json(text: &str) -> Result<Request, InvalidSpec> {
        if text.trim_start().starts_with('[') {
            return Err(InvalidSpec::Array);
        }
        serde_json::from_str(text).map_err(|e| {
            if e.is_syntax() || e.is_eof() {
                InvalidSpec::NotJson(e)
            } else {
                InvalidSpec::Shape(e)
            }
        })
    }

    /// Checks the request against the settings and picks the template.
    ///
    /// ```
    /// use relay_host::launch::plan::request::Request;
    /// let r = Request::from_json(r#"{"kind": "pi", "template": "claude-code"}"#).unwrap();
    /// assert!(r.validate(&Default::default()).is_err());
    /// ```
    pub fn validate(self, settings: &Settings) -> Result<Validated, InvalidSpec> {
        let template_id = match (self.kind, self.template.as_deref()) {
            (Kind::Claude, None) | (Kind::Claude, Some(CLAUDE_TEMPLATE)) => CLAUDE_TEMPLATE,
            (Kind::Claude, Some(t)) => {
                return Err(InvalidSpec::ClaudeTemplate {
                    expected: CLAUDE_TEMPLATE,
                    given: t.to_string(),
                })
            }
            (Kind::Terminal, Some(t)) => t,
            (Kind::Terminal, None) => return Err(InvalidSpec::TerminalWithoutTemplate),
            (k @ (Kind::Pi | Kind::Codex | Kind::Chat), None) => k.as_str(),
            (k @ (Kind::Pi | Kind::Codex | Kind::Chat), Some(t)) if t == k.as_str() => t,
            (k @ (Kind::Pi | Kind::Codex | Kind::Chat), Some(t)) => {
                return Err(InvalidSpec::KindTemplate {
                    kind: k.as_str(),
                    given: t.to_string(),
                })
            }
        };
        let Some(template) = settings.template(template_id) else {
            return Err(InvalidSpec::UnknownTemplate(template_id.to_string()));
        };
        let session_id = match &self.session_id {
            Some(id) if valid_session_id(id) => id.clone(),
            Some(id) => return Err(InvalidSpec::SessionId(id.clone())),
            None => new_session_id(),
        };
        if let Some(r) = &self.resume {
            if !valid_session_id(r) || self.continue_last {
                return Err(InvalidSpec::Resume(r.clone()));
            }
        }
        if let Some(p) = &self.project {
            if !p.is_absolute() {
                return Err(InvalidSpec::ProjectNotAbsolute(p.clone()));
            }
        }
        if let Some(h) = &self.host {
            if h.is_empty() || h.starts_with('-') || h.chars().any(|c| c.is_control() || c == ' ') {
                return Err(InvalidSpec::Host(h.clone()));
            }
        }
        check_sizes(&self)?;
        for (k, val) in &self.env {
            if k.is_empty() || k.contains('=') || k.contains('\0') || val.contains('\0') {
                return Err(InvalidSpec::EnvEntry(k.clone()));
            }
            if k == relay_token::TOKEN_FD_VAR {
                return Err(InvalidSpec::EnvTokenVar(k.clone()));
            }
        }
        let claude = template.id == CLAUDE_TEMPLATE && self.kind.may_run_claude();
        let sandboxed = self.sandbox && self.host.is_none() && template.sandbox.grants().is_some();
        Ok(Validated {
            kind: self.kind,
            template,
            claude,
            sandboxed,
            session_id,
            project: self.project,
            resume: self.resume,
            continue_last: self.continue_last,
            extra_args: self.extra_args,
            env: self.env,
            ssh_host: self.host,
            keep: self.keep,
        })
    }
}

/// Reads a request's text: at most 1 MiB ([`crate::settings::MAX_SETTINGS_BYTES`]), UTF-8; a
/// larger one is `invalid_spec` without reading the rest.
pub(crate) fn read_request(r: impl std::io::Read) -> Result<String, InvalidSpec> {
    use std::io::Read;
    let max = crate::settings::MAX_SETTINGS_BYTES;
    let mut bytes = Vec::new();
    r.take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(InvalidSpec::Read)?;
    if bytes.len() > max {
        return Err(InvalidSpec::TooLarge);
    }
    String::from_utf8(bytes).map_err(|_| InvalidSpec::NotUtf8)
}

/// Variable names a token launch's request may never set, whatever a template allows: the
/// loader's (`LD_*`), the API client's (`ANTHROPIC_*`), Claude Code's own (`CLAUDE*`) and Node's
/// options. Each can send the token elsewhere or run code beside it.
pub(crate) const NEVER_ENV_PREFIXES: &[&str] = &["LD_", "ANTHROPIC_", "CLAUDE", "NODE_OPTIONS"];

/// The most bytes a request's `env` (names and values) or `extra_args` may hold together: well
/// below the kernel's limit on an exec's arguments and environment.
const MAX_REQUEST_BYTES: usize = 65536;

/// Refuses `extra_args` with a NUL byte (an exec cannot carry it) and an `env` or `extra_args`
/// larger than [`MAX_REQUEST_BYTES`], naming the field.
fn check_sizes(r: &Request) -> Result<(), InvalidSpec> {
    if let Some(i) = r.extra_args.iter().position(|a| a.contains('\0')) {
        return Err(InvalidSpec::ArgNul(i));
    }
    let env: usize = r.env.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    let args: usize = r.extra_args.iter().map(|a| a.len() + 1).sum();
    for (field, n) in [("env", env), ("extra_args", args)] {
        if n > MAX_REQUEST_BYTES {
            return Err(InvalidSpec::TooBig {
                field,
                bytes: n,
                max: MAX_REQUEST_BYTES,
            });
        }
    }
    Ok(())
}

/// A fresh random session id (`s-` and 16 hex digits).
pub(crate) fn new_session_id() -> String {
    let mut buf = [0u8; 8];
    if relay_token::sys::random_bytes(&mut buf).is_err() {
        let t = crate::state::now_secs() ^ ((std::process::id() as u64) << 32);
        buf = t.to_le_bytes();
    }
    let mut s = String::from("s-");
    for b in buf {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Sandbox;

    /// What each kind should decide: (may run Claude Code, proves itself to the host, the
    /// template it takes when the request names none).
    fn expected(k: Kind) -> (bool, bool, Option<&'static str>) {
        match k {
            Kind::Claude => (true, true, Some(CLAUDE_TEMPLATE)),
            Kind::Terminal => (true, false, None),
            Kind::Pi => (false, false, Some("pi")),
            Kind::Codex => (false, false, Some("codex")),
            Kind::Chat => (false, false, Some("chat")),
        }
    }

    /// Every template sandbox kind, each once; `sandboxed` names each (a kind added later does
    /// not compile until it is decided there; list it here too).
    fn every_sandbox() -> [Sandbox; 2] {
        [Sandbox::Off, Sandbox::Grants(Default::default())]
    }

    /// Whether a launch of a template with this sandbox runs sandboxed.
    fn sandboxed(s: &Sandbox) -> bool {
        match s {
            Sandbox::Off => false,
            Sandbox::Grants(_) => true,
        }
    }

    #[test]
    fn every_sandbox_kind_decides_whether_a_launch_is_sandboxed() {
        for sandbox in every_sandbox() {
            let mut settings = Settings::default();
            let mut t: Template =
                serde_json::from_str(r#"{"id": "t", "command": ["/bin/sh"]}"#).unwrap();
            t.sandbox = sandbox.clone();
            settings.templates.push(t);
            let r = r#"{"kind": "terminal", "template": "t"}"#;
            let plan = Request::from_json(r).unwrap().validate(&settings).unwrap();
            assert_eq!(plan.sandboxed, sandboxed(&sandbox), "{sandbox:?}");
            assert_eq!(
                sandbox.grants().is_some(),
                sandboxed(&sandbox),
                "{sandbox:?}"
            );
        }
    }

    #[test]
    fn a_session_id_keeps_to_its_rule() {
        assert!(valid_session_id("s-1"));
        assert!(!valid_session_id("../x"));
        assert!(!valid_session_id("-rf"));
        assert!(!valid_session_id(""));
    }

    #[test]
    fn a_fresh_session_id_keeps_to_the_rule() {
        let id = new_session_id();
        assert!(valid_session_id(&id));
    }

    #[test]
    fn a_request_over_1_mib_is_refused_unread() {
        assert_eq!(read_request(&b"{}"[..]).unwrap(), "{}");
        let big = vec![b' '; (1 << 20) + 1];
        assert_eq!(
            read_request(&big[..]).unwrap_err().to_string(),
            "request: larger than 1 MiB"
        );
    }

    #[test]
    fn a_kind_is_named_as_a_request_writes_it() {
        assert_eq!(Kind::Terminal.as_str(), "terminal");
    }

    #[test]
    fn every_kind_gets_its_own_decisions() {
        let names: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names, ["claude", "terminal", "pi", "codex", "chat"]);
        let settings = Settings::default();
        for k in Kind::ALL {
            let (claude, identity, template) = expected(k);
            assert_eq!(k.may_run_claude(), claude, "{k:?}");
            assert_eq!(k.proves_identity(), identity, "{k:?}");
            let json = format!(r#"{{"kind": "{}"}}"#, k.as_str());
            let picked = Request::from_json(&json).unwrap().validate(&settings);
            match template {
                Some(t) if settings.template(t).is_some() => {
                    let plan = picked.unwrap();
                    assert_eq!(plan.template.id, t, "{k:?}");
                    assert_eq!(plan.claude, claude && t == CLAUDE_TEMPLATE, "{k:?}");
                }
                Some(t) => assert!(
                    matches!(picked, Err(InvalidSpec::UnknownTemplate(ref id)) if id == t),
                    "{k:?}"
                ),
                None => assert!(
                    matches!(picked, Err(InvalidSpec::TerminalWithoutTemplate)),
                    "{k:?}"
                ),
            }
            let json = format!(r#"{{"kind": "{}", "template": "shell"}}"#, k.as_str());
            let other = Request::from_json(&json).unwrap().validate(&settings);
            assert_eq!(other.is_ok(), k == Kind::Terminal, "{k:?}");
        }
    }
}
