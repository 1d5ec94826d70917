//! A template's `token_mode` and the settings checks stand-in mode needs: a sandboxed template
//! with a network allow-list (the proxy that swaps the token is the allow-list's), Linux, an
//! `https://` gateway when one is named, and a readable `upstream_ca_file`.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Settings, Template};
use crate::net::network_rules;

/// What a token launch of the template hands the session on fd 5: the real token (`"pipe"`,
/// a template's default, and the built-in `claude-code`'s on macOS), or a fresh stand-in per
/// session that the host's proxy replaces by the real token in the `Authorization` header of
/// requests to the API hosts only (`"stand_in"`, the built-in `claude-code`'s default on Linux;
/// see docs/DESIGN.md, "Stand-in mode").
///
/// ```
/// use relay_host::settings::TokenMode;
/// assert_eq!(serde_json::from_str::<TokenMode>(r#""stand_in""#)?, TokenMode::StandIn);
/// assert_eq!(TokenMode::default(), TokenMode::Pipe);
/// assert_eq!(TokenMode::StandIn.word(), "stand_in");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenMode {
    /// The real token on fd 5, as relay always did.
    #[default]
    Pipe,
    /// A stand-in on fd 5; the real token stays in the host's memory.
    StandIn,
}

impl TokenMode {
    /// The setting's word: `pipe` or `stand_in`.
    ///
    /// ```
    /// assert_eq!(relay_host::settings::TokenMode::Pipe.word(), "pipe");
    /// ```
    pub fn word(self) -> &'static str {
        match self {
            TokenMode::Pipe => "pipe",
            TokenMode::StandIn => "stand_in",
        }
    }

    /// The built-in `claude-code` template's mode: `stand_in` on Linux (the real token stays
    /// on the host), `pipe` elsewhere (stand-in mode needs the Linux allow-list proxy).
    ///
    /// ```
    /// use relay_host::settings::{builtin_templates, TokenMode};
    /// let want = if cfg!(target_os = "linux") { TokenMode::StandIn } else { TokenMode::Pipe };
    /// assert_eq!(TokenMode::builtin_claude_code(), want);
    /// assert_eq!(builtin_templates()[0].token_mode, want);
    /// ```
    pub fn builtin_claude_code() -> TokenMode {
        if cfg!(target_os = "linux") {
            TokenMode::StandIn
        } else {
            TokenMode::Pipe
        }
    }

    /// True for `pipe`.
    ///
    /// ```
    /// assert!(relay_host::settings::TokenMode::Pipe.is_pipe());
    /// ```
    pub fn is_pipe(&self) -> bool {
        !self.hands_stand_in()
    }

    /// True when a token launch hands the session a stand-in and keeps the real token on the
    /// host (every mode named: a mode added later does not compile until it is decided here).
    pub(crate) fn hands_stand_in(self) -> bool {
        match self {
            TokenMode::Pipe => false,
            TokenMode::StandIn => true,
        }
    }
}

/// The first problem of the settings' token modes, or `None`: a template whose stand-in mode
/// cannot work ([`stand_in_problem`]), a plain gateway that could be impersonated
/// ([`gateway_problem`]), an unusable `upstream_ca_file` ([`ca_file_problem`]).
pub(super) fn problem(s: &Settings) -> Option<String> {
    (s.templates.iter().find_map(stand_in_problem))
        .or_else(|| gateway_problem(s))
        .or_else(|| ca_file_problem(s))
}

/// Why a template's `token_mode: "stand_in"` cannot work, or `None`.
fn stand_in_problem(t: &Template) -> Option<String> {
    if !t.token_mode.hands_stand_in() {
        return None;
    }
    let id = &t.id;
    if !cfg!(target_os = "linux") {
        return Some(format!(
            "template {id:?}: token_mode \"stand_in\" needs the network allow-list's proxy, which \
             runs on Linux only; on this system use token_mode \"pipe\" (or leave it out)"
        ));
    }
    if t.sandbox.grants().is_none() || network_rules(&t.network()).proxied.is_none() {
        return Some(format!(
            "template {id:?}: token_mode \"stand_in\" needs a sandboxed template with a network \
             allow-list (\"network\": {{\"allow\": [...]}}): its proxy is what adds the real \
             token; or give the template \"token_mode\": \"pipe\" (the real token on fd 5)"
        ));
    }
    if t.api_base_url
        .as_ref()
        .is_some_and(|g| !g.url().starts_with("https://"))
    {
        return Some(format!(
            "template {id:?}: token_mode \"stand_in\" swaps the token inside TLS only: give \
             api_base_url as https://, or give the template \"token_mode\": \"pipe\" (the real \
             token on fd 5)"
        ));
    }
    None
}

/// Why a plain `http://` gateway could be impersonated, or `None`: `http://` is allowed to
/// this machine's loopback only, and a session of a template that shares the host's network
/// (`"network": "host"`, or `"sandbox": false`) can listen on a loopback port itself while the
/// gateway is down, and so receive every request with the token. Such a gateway is used only
/// while every template has a network of its own.
fn gateway_problem(s: &Settings) -> Option<String> {
    let all = crate::reach::templates(s);
    let (t, g) = all.iter().find_map(|t| {
        let g = t.api_base_url.as_ref()?;
        g.url().starts_with("http://").then_some((t, g))
    })?;
    let open = all
        .iter()
        .find(|u| u.sandbox.grants().is_none() || network_rules(&u.network()).shares_host)?;
    Some(format!(
        "template {:?}: api_base_url {:?} is plain http:// on this machine's loopback, where a \
         session of template {:?} (it shares the host's network) could listen in the gateway's \
         place and receive the token; give template {:?} \"network\": \"none\" or an \
         allow-list, or use an https:// gateway",
        t.id,
        g.url(),
        open.id,
        open.id
    ))
}

/// Why `upstream_ca_file` cannot be used, or `None`: not absolute, unreadable, or no PEM
/// certificate in it. The message names the file.
fn ca_file_problem(s: &Settings) -> Option<String> {
    let p = s.upstream_ca_file.as_deref()?;
    if !p.is_absolute() {
        let shown = p.display().to_string();
        return Some(format!("upstream_ca_file {shown:?}: give an absolute path"));
    }
    check_ca_file(p)
}

/// The file's problem, in words that name it.
#[cfg(target_os = "linux")]
fn check_ca_file(p: &Path) -> Option<String> {
    crate::stand_in::read_ca_file(p)
        .err()
        .map(|e| e.to_string())
}

/// The file's problem, in words that name it (read only: no stand-in mode here).
#[cfg(not(target_os = "linux"))]
fn check_ca_file(p: &Path) -> Option<String> {
    let e = std::fs::read(p).err()?;
    Some(format!("upstream_ca_file {}: {e}", p.display()))
}

impl Template {
    /// The API hosts of the template, as `host:port`, where a stand-in session's proxy swaps the
    /// stand-in for the real token: [`ANTHROPIC_API`](crate::stand_in::ANTHROPIC_API), and
    /// the `api_base_url`'s host and port when it is `https://`.
    ///
    /// ```
    /// let t = relay_host::settings::Settings::default().template("claude-code").unwrap();
    /// assert_eq!(t.api_hosts(), ["api.anthropic.com:443"]);
    /// ```
    #[cfg(target_os = "linux")]
    pub fn api_hosts(&self) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::TokenMode;

    /// Every token mode, each once; `expected` names each (a mode added later does not compile
    /// until it is decided there; list it here too).
    const ALL: [TokenMode; 2] = [TokenMode::Pipe, TokenMode::StandIn];

    /// What each mode should decide: (hands a stand-in, the word).
    fn expected(m: TokenMode) -> (bool, &'static str) {
        match m {
            TokenMode::Pipe => (false, "pipe"),
            TokenMode::StandIn => (true, "stand_in"),
        }
    }

    #[test]
    fn every_token_mode_gets_its_own_decisions() {
        for m in ALL {
            let (stand_in, word) = expected(m);
            assert_eq!(m.hands_stand_in(), stand_in, "{m:?}");
            assert_eq!(m.is_pipe(), !stand_in, "{m:?}");
            assert_eq!(m.word(), word);
            let json = format!("{word:?}");
            assert_eq!(serde_json::from_str::<TokenMode>(&json).unwrap(), m);
        }
    }
}
