//! What a session's fd 5 carries, decided once when the launch is prepared: nothing, the real
//! token, or a stand-in (the real token then goes to the session's `relay-stand-in`). The
//! answer, the session record, the audit row and the log line all read it ([`TokenMode::word`]);
//! the template's setting it is decided from is [`crate::settings::TokenMode`].

use std::path::{Path, PathBuf};

use crate::launch::plan::LaunchPlan;
use crate::net::network_rules;
use crate::settings::TokenMode as Setting;

/// What a launch hands its session on fd 5.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TokenMode {
    /// The launch carries no token: nothing on fd 5.
    None,
    /// The real token on fd 5.
    Pipe,
    /// A fresh stand-in on fd 5; the real token goes to `program` (`relay-stand-in`), the
    /// session's allow-list proxy, which swaps it in for the API hosts only.
    StandIn {
        /// `relay-stand-in`, found beside relay-host.
        program: PathBuf,
    },
}

impl TokenMode {
    /// The mode of a launch of `v` that `carries_token`: stand-in mode when its template asks
    /// for it and it is sandboxed with an allow-list (the settings refuse stand-in mode
    /// otherwise), its program found by `find_stand_in`; the real token on fd 5 when it carries
    /// the token otherwise; nothing when it does not.
    pub(crate) fn decide<E>(
        v: &LaunchPlan,
        carries_token: bool,
        find_stand_in: impl FnOnce() -> Result<PathBuf, E>,
    ) -> Result<TokenMode, E> {
        if !carries_token {
            return Ok(TokenMode::None);
        }
        let proxied = || v.sandboxed() && network_rules(v.network()).proxied.is_some();
        Ok(match v.template().token_mode {
            Setting::StandIn if proxied() => TokenMode::StandIn {
                program: find_stand_in()?,
            },
            Setting::StandIn | Setting::Pipe => TokenMode::Pipe,
        })
    }

    /// True when fd 5 carries the token (the real one or a stand-in).
    pub(crate) fn carries_token(&self) -> bool {
        match self {
            TokenMode::None => false,
            TokenMode::Pipe | TokenMode::StandIn { .. } => true,
        }
    }

    /// The mode's word in the answer, the session record (`ps`), the audit row and the log:
    /// `none`, `pipe` or `stand_in` (the setting's words, [`Setting::word`]).
    pub(crate) fn word(&self) -> &'static str {
        match self {
            TokenMode::None => "none",
            TokenMode::Pipe => Setting::Pipe.word(),
            TokenMode::StandIn { .. } => Setting::StandIn.word(),
        }
    }

    /// The programs a session in this mode runs besides its own: `relay-stand-in` in stand-in
    /// mode, as (what, path).
    pub(crate) fn programs(&self) -> Option<(&'static str, &Path)> {
        match self {
            TokenMode::StandIn { program } => Some(("relay-stand-in", program)),
            TokenMode::None | TokenMode::Pipe => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TokenMode;

    #[test]
    fn each_mode_has_its_word_and_carries_the_token_but_none() {
        let stand_in = TokenMode::StandIn {
            program: "/usr/lib/relay/relay-stand-in".into(),
        };
        let got: Vec<_> = [TokenMode::None, TokenMode::Pipe, stand_in]
            .iter()
            .map(|m| (m.word(), m.carries_token()))
            .collect();
        let want = [("none", false), ("pipe", true), ("stand_in", true)];
        assert_eq!(got, want);
    }
}
