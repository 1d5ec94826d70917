//! `relay-host stop ID` (or `--all`): ends running sessions at once. The session's process
//! group (its program; sandboxed, bwrap, whose sandbox dies with it) is killed; its shim then
//! reports the end, and the launch's host ends the session as for any other end: a stand-in
//! session's `relay-stand-in` (its proxy, and the real token) goes with it, the audit row and
//! the folder's lock follow. `stop` waits (up to 10 s) until each is gone.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::launch::session::sessions::{running, Record};

/// How long `stop` waits for a stopped session's host to finish.
const WAIT: Duration = Duration::from_secs(10);

/// `relay-host stop`: ends the running session `id`, or every running session (`all`); exit 0
/// when each is gone, 64 for an id that names no running session (or neither an id nor
/// `--all`), 70 when one outlived the wait.
pub(crate) fn stop(host: &crate::Host, id: Option<&str>, all: bool, json_out: bool) -> i32 {
    let list = running(&host.state_dir);
    let chosen: Vec<Record> = match (id, all) {
        (Some(id), false) => list.into_iter().filter(|r| r.id == id).collect(),
        (None, true) => list,
        _ => {
            crate::human::print_error("stop: give a session id (see relay-host ps), or --all");
            return relay_shim::exit::ExitCode::Usage.code();
        }
    };
    if let (Some(id), true) = (id, chosen.is_empty()) {
        crate::human::print_error(&format!(
            "stop: no running session {id:?} (relay-host ps lists them)"
        ));
        return relay_shim::exit::ExitCode::Usage.code();
    }
    for r in &chosen {
        end(r);
    }
    let deadline = Instant::now() + WAIT;
    let mut left: Vec<String> = chosen.iter().map(|r| r.id.clone()).collect();
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        let now = running(&host.state_dir);
        left.retain(|id| now.iter().any(|r| &r.id == id));
    }
    let stopped: Vec<&str> = (chosen.iter())
        .map(|r| r.id.as_str())
        .filter(|id| !left.iter().any(|l| l == id))
        .collect();
    if json_out {
        outln!("{}", json!({"stopped": stopped, "still_running": left}));
    } else {
        for id in &stopped {
            outln!("stopped {id}");
        }
        for id in &left {
            crate::human::print_error(&format!("stop: session {id} still runs after 10 s"));
        }
    }
    match left.is_empty() {
        true => 0,
        false => relay_shim::exit::ExitCode::Internal.code(),
    }
}

/// Kills the session's process group (its program leads it).
fn end(r: &Record) {
    let Ok(pgid) = libc::pid_t::try_from(r.pid) else {
        return;
    };
    if pgid > 1 {
        // SAFETY: kill takes integers only. The group is the running session's (its record's
        // lock is held and its shim alive a moment ago), led by the pid its shim reported.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_that_names_no_running_session_is_a_usage_error() {
        let state = tempfile::tempdir().unwrap();
        let host = crate::Host::from_dirs("/nonexistent".into(), state.path().into()).unwrap();
        assert_eq!(stop(&host, Some("s1"), false, false), 64);
        assert_eq!(stop(&host, None, false, false), 64);
        assert_eq!(stop(&host, None, true, true), 0);
    }
}
