//! A refused launch, recorded: its event, the audit row of the stage it reached, the log line
//! and the answer on stderr (and on stdout with `--json`). A refusal with no state folder is
//! answered all the same.

use serde_json::json;

use crate::launch::error::LaunchError;
use crate::launch::session::audit_row::{AuditRow, Refused};
use crate::state::State;
use crate::Host;

/// Records a refusal ([`refuse`]) and returns its exit code.
pub(crate) fn refused(state: &State, r: &Refused) -> i32 {
    refuse(state, &r.row, &r.error);
    r.error.exit_code().code()
}

/// Records a refusal: the event, the audit row of the stage the launch reached, the log line,
/// the answer on stderr.
fn refuse(state: &State, row: &AuditRow, e: &LaunchError) {
    let message = e.message();
    let answer = answer(e, &message, row.session_id(), state.redactor());
    let _ = state.event(&answer);
    crate::launch::session::answer::print(&answer);
    let _ = state.audit(row.row("error", &message));
    state.log(&format!("launch refused: {e}"));
    crate::human::print_refusal(&answer, state.redactor());
}

/// The answer of a refused launch, its message passed through `redactor`.
fn answer(
    e: &LaunchError,
    message: &str,
    session_id: Option<&str>,
    redactor: &relay_token::Redactor,
) -> serde_json::Value {
    let mut a = crate::launch::session::answer::refused(e, redactor.redact(message), session_id);
    a["ts"] = json!(crate::state::now_secs());
    a
}

/// A refusal with no state folder to record it in: its answer is printed all the same (JSON
/// off a terminal and with `--json`, a sentence and a hint for a person); returns its exit code.
pub(crate) fn refuse_without_state(e: &LaunchError, message: Option<String>) -> i32 {
    let redactor = relay_token::Redactor::default();
    let message = message.unwrap_or_else(|| e.message());
    crate::human::print_refusal(&answer(e, &message, None, &redactor), &redactor);
    e.exit_code().code()
}

/// Refuses a launch that failed before it could be validated (a request that is not JSON):
/// writes the audit row and the event, prints the answer to stderr, returns the exit code.
///
/// ```no_run
/// use relay_host::{Host, launch::refuse_early, launch::plan::request::Request};
/// let host = Host::from_dirs("/c".into(), "/s".into())?;
/// let e = Request::from_json("not json").unwrap_err();
/// assert_eq!(refuse_early(&host, &e.into()), 64);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn refuse_early(host: &Host, e: &LaunchError) -> i32 {
    match State::open(&host.state_dir) {
        Ok(state) => refuse(&state, &AuditRow::early(), e),
        Err(err) => {
            let message = format!(
                "{} (and the state folder {}: {err})",
                e.message(),
                host.state_dir.display()
            );
            return refuse_without_state(e, Some(message));
        }
    }
    e.exit_code().code()
}
