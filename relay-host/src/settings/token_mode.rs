//! A template's `token_mode`: what a token launch hands the session on fd 5. The settings'
//! checks of what stand-in mode needs are `checks`'.

use serde::{Deserialize, Serialize};

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
    pub(crate) fn builtin_claude_code() -> TokenMode {
        if cfg!(target_os = "linux") {
            TokenMode::StandIn
        } else {
            TokenMode::Pipe
        }
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
            assert_eq!(m.word(), word);
            let json = format!("{word:?}");
            assert_eq!(serde_json::from_str::<TokenMode>(&json).unwrap(), m);
        }
    }

    /// `builtin_claude_code`'s example.
    #[test]
    fn builtin_claude_code_doc_example() {
        use crate::settings::{builtin_templates, TokenMode};
        let want = if cfg!(target_os = "linux") {
            TokenMode::StandIn
        } else {
            TokenMode::Pipe
        };
        assert_eq!(TokenMode::builtin_claude_code(), want);
        assert_eq!(builtin_templates()[0].token_mode, want);
    }
}
