//! `relay-host stop ID` (or `--all`): ends running sessions, gently then firmly, as `docker
//! stop` does. Each session gets a mark in its folder (`stopped`: who stopped it and when, which
//! its `relay-host run` reports once the session ended), then SIGTERM to its shim, which forwards
//! it to the program (inside the sandbox, the program's process group) and kills what is left
//! after its grace period ([`relay_shim::GRACE_SECS`]). Should a session still run
//! [`FIRM_AFTER`] later, `stop` kills its process group (sandboxed: bwrap, whose sandbox dies
//! with it) with SIGKILL; with `--now` it does so at once. The shim then reports the end, and the
//! launch's host ends the session as for any other end: a stand-in session's `relay-stand-in`
//! (its proxy, and the real token) goes with it, the audit row and the folder's lock follow.
//! `stop` waits (up to [`WAIT`]) until each is gone.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::launch::session::sessions::{running, Record};
use crate::state::SESSIONS_DIR;

/// How long `stop` waits for a stopped session's host to finish.
const WAIT: Duration = Duration::from_secs(15);

/// How long after the SIGTERM `stop` kills a session that still runs: the shim's grace period
/// and 2 s more (the shim kills it itself at the grace period's end).
const FIRM_AFTER: Duration = Duration::from_secs(relay_shim::GRACE_SECS as u64 + 2);

/// The mark `stop` leaves in a session's folder: `{"uid": U, "at": RFC 3339}`.
const STOPPED_MARK: &str = "stopped";

/// `relay-host stop`: ends the running session `id`, or every running session (`all`), gently
/// (SIGTERM, then SIGKILL after the grace period) or, with `now`, at once; exit 0 when each is
/// gone, 64 for an id that names no running session (or neither an id nor `--all`), 70 when one
/// outlived the wait.
pub(crate) fn stop(
    host: &crate::Host,
    id: Option<&str>,
    all: bool,
    now: bool,
    json_out: bool,
) -> i32 {
    let list = running(&host.state_dir);
    let chosen: Vec<Record> = match (id, all) {
        (Some(id), false) => list.into_iter().filter(|r| r.id == id).collect(),
        (None, true) => list,
        _ => {
            crate::human::print_error(
                "stop: give a session id (relay-host ps lists them), or --all for every one",
            );
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
        mark(&host.state_dir, r);
        match now {
            true => kill(r),
            false => terminate(r),
        }
    }
    let left = wait_gone(host, &chosen, now);
    report(&chosen, &left, json_out)
}

/// Waits until every one of `chosen` is gone (at most [`WAIT`]), killing those that still run
/// [`FIRM_AFTER`] the SIGTERM; returns the ids of those that still run.
fn wait_gone(host: &crate::Host, chosen: &[Record], mut killed: bool) -> Vec<String> {
    let start = Instant::now();
    let mut left: Vec<&Record> = chosen.iter().collect();
    while !left.is_empty() && start.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(20));
        let now = running(&host.state_dir);
        left.retain(|r| now.iter().any(|n| n.id == r.id));
        if !killed && start.elapsed() >= FIRM_AFTER {
            left.iter().for_each(|r| kill(r));
            killed = true;
        }
    }
    left.iter().map(|r| r.id.clone()).collect()
}

/// Prints what was stopped and what still runs; the exit code.
fn report(chosen: &[Record], left: &[String], json_out: bool) -> i32 {
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
        for id in left {
            crate::human::print_error(&format!(
                "stop: session {id} still runs after {} s",
                WAIT.as_secs()
            ));
        }
    }
    match left.is_empty() {
        true => 0,
        false => relay_shim::exit::ExitCode::Internal.code(),
    }
}

/// Leaves the `stopped` mark in the session's folder: this process's uid and the time. A mark
/// that cannot be written costs only the stopped run's explanation.
fn mark(state_dir: &Path, r: &Record) {
    let dir = state_dir.join(SESSIONS_DIR).join(&r.id);
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let text = json!({"uid": uid, "at": crate::state::time::now_rfc3339()}).to_string();
    let _ = std::fs::write(dir.join(STOPPED_MARK), text);
}

/// Who stopped the session whose folder is `dir` and when (`uid`, RFC 3339 time), when
/// `relay-host stop` did.
pub(crate) fn stopped_by(dir: &Path) -> Option<(u32, String)> {
    let text = std::fs::read_to_string(dir.join(STOPPED_MARK)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let uid = u32::try_from(v["uid"].as_u64()?).ok()?;
    Some((uid, v["at"].as_str()?.to_string()))
}

/// SIGTERM to the session's shim, which forwards it to the program and kills what is left after
/// its grace period.
fn terminate(r: &Record) {
    if let Ok(pid) = libc::pid_t::try_from(r.shim_pid) {
        if pid > 1 {
            // SAFETY: kill takes integers only. The shim is the running session's (its record's
            // lock is held and its shim alive a moment ago).
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
}

/// Kills the session's process group (its program leads it; sandboxed, bwrap).
fn kill(r: &Record) {
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
        assert_eq!(stop(&host, Some("s1"), false, false, false), 64);
        assert_eq!(stop(&host, None, false, false, false), 64);
        assert_eq!(stop(&host, None, true, false, true), 0);
    }
}
