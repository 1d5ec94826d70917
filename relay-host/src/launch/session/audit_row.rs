//! A launch's audit row, built from the stage the launch reached: the request's own words
//! before it was validated, the template and session it resolved to after, and whether the
//! token was handed over once the shim was spawned.

use serde_json::{json, Value};

use crate::launch::error::LaunchError;
use crate::launch::plan::request::Request;
use crate::launch::plan::LaunchPlan;
use crate::launch::prepare::token_mode::TokenMode;

/// What a launch is about, as far as it got.
#[derive(Debug, Clone)]
pub(crate) struct AuditRow {
    kind: &'static str,
    template: String,
    sandbox: bool,
    /// What fd 5 carried: `stand_in`, `pipe` (the real token) or `none`.
    token_mode: TokenMode,
    session_id: Option<String>,
}

/// A refused launch: why, and the row of the stage it reached.
pub(crate) struct Refused {
    /// Why.
    pub error: LaunchError,
    /// The audit row of the stage it reached.
    pub row: AuditRow,
}

impl AuditRow {
    /// A launch refused before its request was read.
    pub(crate) fn early() -> AuditRow {
        AuditRow {
            kind: "",
            template: String::new(),
            sandbox: false,
            token_mode: TokenMode::None,
            session_id: None,
        }
    }

    /// A launch with its request read, not yet validated.
    pub(crate) fn of_request(r: &Request) -> AuditRow {
        AuditRow {
            kind: r.kind.as_str(),
            template: r.template.clone().unwrap_or_default(),
            sandbox: r.sandbox,
            token_mode: TokenMode::None,
            session_id: r.session_id.clone(),
        }
    }

    /// A validated launch, which has not handed the token over (yet).
    pub(crate) fn of_validated(v: &LaunchPlan) -> AuditRow {
        AuditRow {
            kind: v.kind().as_str(),
            template: v.template().id.clone(),
            sandbox: v.sandboxed(),
            token_mode: TokenMode::None,
            session_id: Some(v.session_id().to_string()),
        }
    }

    /// The row once the shim was spawned: `token_mode` says what fd 5 carried
    /// ([`crate::launch::prepare::Prepared::token_mode`]).
    pub(crate) fn spawned(self, token_mode: &TokenMode) -> AuditRow {
        let token_mode = token_mode.clone();
        AuditRow { token_mode, ..self }
    }

    /// The launch refused with `error` at this stage (boxed: the error and the row are large).
    pub(crate) fn refused(&self, error: LaunchError) -> Box<Refused> {
        Box::new(Refused {
            error,
            row: self.clone(),
        })
    }

    /// The session id, once known.
    pub(crate) fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// How the token went: `fd` (the real token or a stand-in: see [`AuditRow::token_mode`])
    /// or `none`.
    pub(crate) fn token_word(&self) -> &'static str {
        match self.token_mode.carries_token() {
            true => "fd",
            false => "none",
        }
    }

    /// What fd 5 carried: `stand_in`, `pipe` or `none`.
    pub(crate) fn token_mode(&self) -> &'static str {
        self.token_mode.word()
    }

    /// The `session_launch` row with its outcome and message.
    pub(crate) fn row(&self, outcome: &str, message: &str) -> Value {
        json!({
            "event": "session_launch",
            "outcome": outcome,
            "kind": self.kind,
            "template": self.template,
            "sandbox": self.sandbox,
            "token": self.token_word(),
            "token_mode": self.token_mode.word(),
            "session_id": self.session_id,
            "message": message,
        })
    }
}
