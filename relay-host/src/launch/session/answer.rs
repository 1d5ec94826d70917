//! `relay-host launch`'s answers, one shape whatever the path: the `launch` row when the
//! session starts or is refused, the `exit` row when it ends. Each is stored in `events.jsonl`
//! and, with `--json`, also written to stdout as one line (one `write`), so a launcher reads the
//! pid and the session id from the answer itself. The rows follow `docs/schema/` (JSON Schema,
//! draft 2020-12) and carry [`ANSWER_VERSION`].
//!
//! - `session_id` of a refusal: the request's own when it is a valid id, else the one made for
//!   the launch once it was accepted; `null` when none was given (or the one given is not a
//!   valid id) and none was made.
//! - `field` of a refusal names the request's field at fault (`extra_args[2]`, `env.FOO`,
//!   `project`) where there is one.
//! - The `exit` row holds `code` (relay-host's exit code) and exactly one of `status` (the
//!   session's exit status) or `signal` (the signal that ended it), sandboxed or not: bwrap
//!   reports a sandboxed program killed by signal N as status 128 + N, read back as `signal`.

use serde_json::{json, Value};

use relay_shim::StatusEvent;

use crate::launch::error::{LaunchError, RequestError};
use crate::launch::plan::invalid_spec::InvalidSpec;
use crate::launch::plan::request::valid_session_id;
use crate::launch::prepare::token_mode::TokenMode;

/// The `version` of every answer row; it grows when a field changes meaning or goes away.
const ANSWER_VERSION: u32 = 1;

/// The answer of a session that started; `token_mode` says how the session holds Claude's
/// credential (`pipe`: the token on fd 5, `stand_in`: a stand-in on fd 5 and the token in
/// `relay-stand-in`, `none`).
pub(crate) fn started(session_id: &str, pid: i64, token_mode: &TokenMode, template: &str) -> Value {
    json!({
        "event": "launch",
        "version": ANSWER_VERSION,
        "status": 201,
        "session_id": session_id,
        "pid": pid,
        "token_mode": token_mode.word(),
        "template": template,
    })
}

/// The answer of a refused launch; `message` is already redacted.
pub(crate) fn refused(e: &LaunchError, message: String, session_id: Option<&str>) -> Value {
    let mut a = json!({
        "event": "launch",
        "version": ANSWER_VERSION,
        "status": e.status(),
        "error": e.code(),
        "message": message,
        "session_id": session_id.filter(|id| valid_session_id(id)),
    });
    if let Some(f) = field(e) {
        a["field"] = json!(f);
    }
    a
}

/// The answer of a session that ended: relay-host's exit `code` and the shim's last word.
pub(crate) fn ended(
    session_id: &str,
    code: i32,
    last: Option<StatusEvent>,
    sandboxed: bool,
) -> Value {
    let mut a = json!({
        "event": "exit",
        "version": ANSWER_VERSION,
        "session_id": session_id,
        "code": code,
    });
    match last {
        // bwrap's own exit for a program a signal killed (`128 + N`, N a signal number).
        Some(StatusEvent::Exited { status }) if sandboxed && (129..=192).contains(&status) => {
            a["signal"] = json!(status - 128)
        }
        Some(StatusEvent::Exited { status }) => a["status"] = json!(status),
        Some(StatusEvent::Signaled { signal }) => a["signal"] = json!(signal),
        _ => {}
    }
    a
}

/// The request's field a refusal concerns, where there is one: `template`, `session_id`,
/// `resume`, `project`, `host`, `env.NAME`, `env`, `extra_args[I]`, `extra_args`.
pub(crate) fn field(e: &LaunchError) -> Option<String> {
    let LaunchError::Request(r) = e else {
        return None;
    };
    let spec = match r {
        RequestError::Invalid(spec) => spec,
        RequestError::ProjectNotGranted { .. }
        | RequestError::ProjectBusy { .. }
        | RequestError::GitRedirect { .. } => return Some("project".into()),
        RequestError::SessionRunning { .. } | RequestError::SessionLock { .. } => {
            return Some("session_id".into())
        }
        // A project no session may write is the request's; a template's own grant is not.
        RequestError::WritesWhereCodeRuns { grant, .. } => {
            let project = grant.starts_with(crate::settings::PROJECT_PLACEHOLDER);
            return project.then(|| "project".into());
        }
    };
    use InvalidSpec::*;
    Some(match spec {
        ClaudeTemplate { .. } | TerminalWithoutTemplate | KindTemplate { .. } => "template".into(),
        UnknownTemplate(_) => "template".into(),
        SessionId(_) => "session_id".into(),
        Resume(_) => "resume".into(),
        ProjectNotAbsolute(_) | Project { .. } => "project".into(),
        Host(_) => "host".into(),
        EnvEntry(k) | EnvTokenVar(k) | EnvNotAllowed(k) | EnvPrefix { name: k, .. } => {
            format!("env.{k}")
        }
        ArgNul(i) | Arg { index: i, .. } => format!("extra_args[{i}]"),
        TooBig { field, .. } => (*field).into(),
        // The request as a whole: no one field.
        Array | NotJson(_) | Shape(_) | Read(_) | TooLarge | NotUtf8 => return None,
    })
}

/// With `--json`, writes `answer` to stdout as one line (one `write`); a launcher reads it
/// there. Without `--json` nothing is written: a person reads the session itself.
pub(crate) fn print(answer: &Value) {
    if crate::human::json_answers() {
        let _ = crate::human::write_out(format_args!("{answer}\n"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::error::StartError;

    #[test]
    fn a_started_launch_is_answered_201_with_its_token_mode() {
        let a = started("s-1", 4242, &TokenMode::Pipe, "claude-code");
        assert_eq!(a["status"], 201);
        assert_eq!(a["version"], 1);
        assert_eq!(a["token_mode"], "pipe");
    }

    #[test]
    fn a_refused_launch_is_answered_500_without_an_invalid_session_id() {
        let e = LaunchError::Start(StartError::ShimEnded);
        let a = refused(&e, "m".into(), Some("../x"));
        let got = (a["status"].as_u64(), a["session_id"].is_null());
        assert_eq!(got, (Some(500), true));
    }

    #[test]
    fn a_running_session_refusal_concerns_the_session_id() {
        let e = LaunchError::Request(RequestError::SessionRunning {
            session_id: "s".into(),
        });
        assert_eq!(field(&e).as_deref(), Some("session_id"));
    }

    #[test]
    fn a_sandboxed_exit_over_128_is_the_signal() {
        let a = ended("s-1", 137, Some(StatusEvent::Exited { status: 137 }), true);
        assert_eq!((a["signal"].as_i64(), a.get("status")), (Some(9), None));
        let a = ended("s-1", 3, Some(StatusEvent::Exited { status: 3 }), false);
        assert_eq!(a["status"], 3);
    }
}
