//! The child's environment: [`ChildEnv`].
//!
//! From the parent's environment drop Claude Code's own session markers (`CLAUDECODE`,
//! `CLAUDE_PID`, `CLAUDE_EFFORT`, every `CLAUDE_CODE_*` name) and the relay's secrets
//! (`RELAY_*_TOKEN`, `RELAY_LAUNCH_FD`); for a launch that carries a token also
//! `ANTHROPIC_AUTH_TOKEN` and `ANTHROPIC_API_KEY`, which outrank the descriptor in Claude Code.
//! Then the template's `env` is applied. `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5` is *not* set
//! here: the token pipe sets it beside the descriptor, last ([`TokenPipe`](crate::TokenPipe)).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::process::Command;

/// An environment block for a child, built by the rules above.
///
/// ```
/// use std::collections::BTreeMap;
/// use relay_token::ChildEnv;
///
/// let parent = [("PATH", "/usr/bin"), ("CLAUDE_CODE_ENTRYPOINT", "cli"), ("ANTHROPIC_API_KEY", "k")];
/// let env = ChildEnv::new(parent.iter().map(|(k, v)| (k.into(), v.into())), &BTreeMap::new(), true);
/// assert_eq!(env.get("PATH"), Some("/usr/bin".as_ref()));
/// assert_eq!(env.get("CLAUDE_CODE_ENTRYPOINT"), None);
/// assert_eq!(env.get("ANTHROPIC_API_KEY"), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildEnv {
    vars: BTreeMap<OsString, OsString>,
}

/// Claude Code's credentials that win over a token descriptor (`ANTHROPIC_API_KEY` and
/// `CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR` make it report `"authMethod": "api_key"`), and the
/// descriptor variable itself, which is set only beside its descriptor.
const RIVAL_CREDENTIALS: &[&[u8]] = &[
    b"ANTHROPIC_API_KEY",
    b"ANTHROPIC_AUTH_TOKEN",
    b"CLAUDE_CODE_OAUTH_TOKEN",
    b"CLAUDE_CODE_OAUTH_REFRESH_TOKEN",
    b"CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR",
    b"CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR",
];

/// A parent Claude Code session's markers, or one of the relay's own secrets.
fn marker_or_relay_secret(n: &[u8]) -> bool {
    matches!(
        n,
        b"CLAUDECODE" | b"CLAUDE_PID" | b"CLAUDE_EFFORT" | b"RELAY_LAUNCH_FD"
    ) || (n.starts_with(b"RELAY_") && n.ends_with(b"_TOKEN"))
}

/// True for a name the child never inherits from its parent, whatever the launch.
fn always_dropped(name: &OsStr) -> bool {
    let n = name.as_bytes();
    marker_or_relay_secret(n) || n.starts_with(b"CLAUDE_CODE_")
}

/// True for a name dropped only when the launch carries a token: credentials that would
/// outrank the descriptor in Claude Code (the `CLAUDE_CODE_*` ones are always dropped).
fn dropped_with_token(name: &OsStr) -> bool {
    let n = name.as_bytes();
    !n.starts_with(b"CLAUDE_CODE_") && RIVAL_CREDENTIALS.contains(&n)
}

impl ChildEnv {
    /// Scrubs `parent`, then applies the template's `env`. `carries_token` says whether the
    /// launch hands a token descriptor (it decides the `ANTHROPIC_*` drops).
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use relay_token::ChildEnv;
    /// let mut template = BTreeMap::new();
    /// template.insert("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR".to_string(), "9".to_string());
    /// let env = ChildEnv::new(std::iter::empty(), &template, false);
    /// // Without a token a template's value passes unchanged.
    /// assert_eq!(env.get("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR"), Some("9".as_ref()));
    /// ```
    pub fn new(
        parent: impl IntoIterator<Item = (OsString, OsString)>,
        template: &BTreeMap<String, String>,
        carries_token: bool,
    ) -> ChildEnv {
        let mut vars: BTreeMap<OsString, OsString> = parent
            .into_iter()
            .filter(|(k, _)| !(always_dropped(k) || (carries_token && dropped_with_token(k))))
            .collect();
        for (k, v) in template {
            vars.insert(k.into(), v.into());
        }
        ChildEnv { vars }
    }

    /// [`ChildEnv::new`] over this process's environment.
    ///
    /// ```
    /// let env = relay_token::ChildEnv::from_current(&Default::default(), false);
    /// assert_eq!(env.get("CLAUDECODE"), None);
    /// ```
    pub fn from_current(template: &BTreeMap<String, String>, carries_token: bool) -> ChildEnv {
        ChildEnv::new(std::env::vars_os(), template, carries_token)
    }

    /// True for a name that a child handed a token descriptor never inherits, even from a
    /// launcher that keeps the rest of its environment (Claude Code's settings variables such
    /// as `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC` included): the credentials Claude Code
    /// prefers over the descriptor (`ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`,
    /// `CLAUDE_CODE_OAUTH_TOKEN`, `CLAUDE_CODE_OAUTH_REFRESH_TOKEN`,
    /// `CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR`), the descriptor's variable itself (set only beside
    /// its descriptor), a parent session's markers (`CLAUDECODE`, `CLAUDE_PID`, `CLAUDE_EFFORT`)
    /// and the relay's secrets (`RELAY_*_TOKEN`, `RELAY_LAUNCH_FD`). Every name it names,
    /// [`ChildEnv::new`] drops too for a launch that carries a token.
    ///
    /// [`TokenPipe`](crate::TokenPipe)'s spawns drop these from what the child would inherit;
    /// `relay-shim --pass-token` drops them from its target's environment.
    ///
    /// ```
    /// use relay_token::ChildEnv;
    /// assert!(ChildEnv::drops_beside_token("ANTHROPIC_API_KEY"));
    /// assert!(ChildEnv::drops_beside_token("CLAUDE_CODE_OAUTH_TOKEN"));
    /// assert!(ChildEnv::drops_beside_token("CLAUDECODE"));
    /// assert!(!ChildEnv::drops_beside_token("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"));
    /// assert!(!ChildEnv::drops_beside_token("ANTHROPIC_BASE_URL"));
    /// ```
    pub fn drops_beside_token(name: impl AsRef<OsStr>) -> bool {
        let n = name.as_ref().as_bytes();
        RIVAL_CREDENTIALS.contains(&n) || marker_or_relay_secret(n)
    }

    /// Sets (or replaces) one variable.
    ///
    /// ```
    /// let mut env = relay_token::ChildEnv::default();
    /// env.set("TMPDIR", "/tmp");
    /// assert_eq!(env.get("TMPDIR"), Some("/tmp".as_ref()));
    /// ```
    pub fn set(&mut self, name: impl Into<OsString>, value: impl Into<OsString>) {
        self.vars.insert(name.into(), value.into());
    }

    /// Removes one variable.
    ///
    /// ```
    /// let mut env = relay_token::ChildEnv::default();
    /// env.set("A", "1");
    /// env.remove("A");
    /// assert_eq!(env.get("A"), None);
    /// ```
    pub fn remove(&mut self, name: impl AsRef<OsStr>) {
        self.vars.remove(name.as_ref());
    }

    /// One variable's value.
    ///
    /// ```
    /// assert_eq!(relay_token::ChildEnv::default().get("HOME"), None);
    /// ```
    pub fn get(&self, name: impl AsRef<OsStr>) -> Option<&OsStr> {
        self.vars.get(name.as_ref()).map(OsString::as_os_str)
    }

    /// Every variable, sorted by name.
    ///
    /// ```
    /// assert_eq!(relay_token::ChildEnv::default().iter().count(), 0);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.vars
            .iter()
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// Replaces `cmd`'s whole environment with this one (`env_clear`, then each variable).
    ///
    /// ```
    /// let mut cmd = std::process::Command::new("env");
    /// relay_token::ChildEnv::default().apply(&mut cmd);
    /// ```
    pub fn apply(&self, cmd: &mut Command) {
        cmd.env_clear();
        cmd.envs(self.iter());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_dropped_by_rule() {
        assert!(always_dropped("CLAUDE_CODE_OAUTH_TOKEN".as_ref()));
        assert!(always_dropped("RELAY_HOST_TOKEN".as_ref()));
        assert!(!always_dropped("CLAUDE_CONFIG_DIR".as_ref()));
        assert!(!always_dropped("CLAUDECODE_EXTRA".as_ref()));
        assert!(dropped_with_token("ANTHROPIC_API_KEY".as_ref()));
        assert!(!dropped_with_token("ANTHROPIC_BASE_URL".as_ref()));
        // Every name dropped beside a token is dropped by the full rule of a token launch.
        for n in RIVAL_CREDENTIALS {
            let n = OsStr::from_bytes(n);
            assert!(always_dropped(n) || dropped_with_token(n));
        }
    }
}
