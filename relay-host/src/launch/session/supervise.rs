//! A started session, supervised until it ends: the host forwards the supervisor's signals to
//! the shim, reads the shim's last word, and records the exit.

use std::io::BufRead;

use serde_json::json;

use crate::launch::guard::Guard;
use crate::launch::prepare::claude_config;
use crate::launch::shim::Session;
use crate::state::State;
use relay_shim::exit::ExitCode;
use relay_shim::StatusEvent;
use relay_token::sys;

/// Waits for the session to end: forwards SIGTERM and SIGHUP to the shim, ignores SIGINT and
/// SIGQUIT (the terminal delivers those to the shim directly), records the exit. The launch's
/// `guard` lets the signals it held back through once they are forwarded, and holds them back
/// again for the exit row and the cleanup.
pub(crate) fn supervise(state: &State, mut session: Session, guard: &Guard) -> i32 {
    let pid = session.shim.id() as i32;
    if let Err(e) = crate::launch::signals::forward_to(pid) {
        eprintln!("relay-host: signals will not reach the session: {e}");
    }
    guard.let_signals_through();
    // The launch's setup is done; what it freed need not stay this host's memory while the
    // session runs.
    relay_shim::heap::trim_heap();
    let mut last: Option<StatusEvent> = None;
    let mut line = String::new();
    while session.status.read_line(&mut line).unwrap_or(0) > 0 {
        if let Ok(e @ (StatusEvent::Exited { .. } | StatusEvent::Signaled { .. })) =
            StatusEvent::parse(&line)
        {
            last = Some(e);
        }
        line.clear();
    }
    // Wait for the shim's exit without reaping it, stop forwarding, then reap: a signal that
    // arrives in between must not reach another process that reused the pid. The signals are
    // held back first: the exit row and the cleanup are not cut short, not even by one that
    // arrives as the default dispositions come back (the guard lets them through when the
    // launch ends).
    let _ = sys::waitid(pid, libc::WEXITED | libc::WNOWAIT);
    guard.hold_signals();
    if let Err(e) = crate::launch::signals::stop_forwarding() {
        eprintln!("relay-host: cannot restore signal dispositions: {e}");
    }
    let code = match session.shim.wait() {
        Ok(s) => crate::exit_code_of(s),
        Err(_) => ExitCode::Internal.code(),
    };
    session.kept.end_proxy();
    // The terminal as found, before anything is said on it.
    crate::launch::session::terminal::restore();
    let mut ev = crate::launch::session::answer::ended(&session.id, code, last, session.sandboxed);
    ev["ts"] = json!(crate::state::now_secs());
    say_who_stopped(state, &session.id, &mut ev);
    let _ = state.event(&ev);
    crate::launch::session::answer::print(&ev);
    state.log(&format!("session {} ended: exit code {code}", session.id));
    carry_back(state, &session.id);
    state.end_session(&session.id);
    code
}

/// The session's Claude config carried back to the persistent folder; what is refused or fails
/// is logged.
fn carry_back(state: &State, id: &str) {
    let launch_dir = claude_config::launch_dir(&state.session_dir(id));
    match claude_config::carry_back(&launch_dir, &state.claude_config_dir()) {
        Ok(refused) => {
            for r in refused {
                state.log(&format!("session {id}: {r}"));
            }
        }
        Err(e) => {
            state.log(&format!(
                "session {id}: Claude config not carried back: {e}"
            ));
        }
    }
}

/// When `relay-host stop` ended the session: says so on stderr (by whom, when) and in its `exit`
/// event (`stopped_by`).
fn say_who_stopped(state: &State, id: &str, ev: &mut serde_json::Value) {
    let dir = state.session_dir(id);
    if let Some((uid, at)) = crate::launch::session::stop::stopped_by(&dir) {
        errln!("relay-host: session {id} was stopped by `relay-host stop` (uid {uid}, at {at})");
        ev["stopped_by"] = json!({"uid": uid, "at": at});
    }
}
