//! A session's start, recorded: the host waits for the shim's `started`
//! ([`crate::launch::shim::start::read_started`]), then writes what a started session leaves
//! for the operator (its events, its answer, its record, its audit row and log line); a start
//! it cannot record is stopped at once.

use serde_json::json;
use std::process::Child;

use crate::launch::error::{LaunchError, StartError};
use crate::launch::guard::Guard;
use crate::launch::prepare::Prepared;
use crate::launch::session::audit_row::AuditRow;
use crate::launch::shim::start::{read_started, START_TIMEOUT};
use crate::launch::shim::{Session, Spawned};
use crate::state::State;

/// Waits for the `started` of the shim `s` spawned for `launch` and records it; the launch's
/// `guard` is kept then. A shim that fails first is killed and reaped, and one whose start
/// cannot be recorded is stopped at once; the guard then undoes the launch.
pub(crate) fn wait_started(
    state: &State,
    row: &AuditRow,
    launch: &Prepared,
    s: Spawned,
    guard: &mut Guard,
) -> Result<Session, LaunchError> {
    let started = start(state, row, launch, s);
    match started {
        Ok(s) => Ok(Session {
            id: launch.v.session_id().to_string(),
            sandboxed: launch.v.sandboxed(),
            shim: s.shim,
            status: s.status,
            kept: guard.keep(),
        }),
        Err(e) => {
            guard.undo();
            Err(e)
        }
    }
}

/// [`wait_started`]'s wait and record, the guard aside.
fn start(
    state: &State,
    row: &AuditRow,
    launch: &Prepared,
    mut s: Spawned,
) -> Result<Spawned, LaunchError> {
    let bwrap = launch.programs.bwrap.clone();
    let pid = match read_started(&mut s.status, START_TIMEOUT, &mut s.gate, bwrap.as_deref()) {
        Ok(pid) => pid,
        Err(e) => {
            let _ = s.shim.kill();
            let _ = s.shim.wait();
            return Err(e.into());
        }
    };
    record_started(state, row, launch, &s, pid).inspect_err(|_| {
        // The disk filled (or the log went) since the check: the session is stopped at once
        // rather than run unrecorded.
        stop_at_once(&mut s.shim, pid);
    })?;
    Ok(s)
}

/// Records a session that started: its earlier `ended` mark gone (a kept folder resumed), the
/// identity events and the launch event, the audit row (an error when it cannot be written:
/// the caller stops the session), the log line.
fn record_started(
    state: &State,
    row: &AuditRow,
    launch: &Prepared,
    s: &Spawned,
    pid: i64,
) -> Result<(), LaunchError> {
    let v = launch.v;
    // Removed only now, so a refused resume leaves the folder as it was.
    let _ = std::fs::remove_file(launch.folder.dir().join(crate::state::ENDED_MARK));
    for e in s.gate.events(v.session_id()) {
        let _ = state.event(&e);
    }
    let mode = &launch.token_mode;
    let mut answer =
        crate::launch::session::answer::started(v.session_id(), pid, mode, &v.template().id);
    answer["ts"] = json!(crate::state::now_secs());
    let _ = state.event(&answer);
    let record = crate::launch::session::sessions::Record::of(v, pid, s.shim.id(), mode);
    let _ = record.write(launch.folder.dir());
    // The record exists: the next launch in the project may be checked (it sees this one).
    crate::launch::session::sessions::release_project();
    state.audit(row.row("ok", "started")).map_err(|source| {
        let audit = state.path().join(crate::state::AUDIT_FILE);
        StartError::Unrecorded { audit, source }
    })?;
    crate::launch::session::answer::print(&answer);
    state.log(&format!(
        "session {} started: pid {pid}, template {}, sandbox {}, token {} ({})",
        v.session_id(),
        v.template().id,
        v.sandboxed(),
        row.token_word(),
        row.token_mode()
    ));
    Ok(())
}

/// Kills a session that started: its program's process group (`pid` leads it; sandboxed, that is
/// bwrap, whose sandbox dies with it) and the shim, and reaps the shim.
fn stop_at_once(shim: &mut Child, pid: i64) {
    if let Ok(pgid) = libc::pid_t::try_from(pid) {
        if pgid > 1 {
            // SAFETY: kill takes integers only. The group is the session's, led by the pid the
            // shim reported a moment ago; were it already reaped, its number would not be given
            // out again before the kernel's pid counter wraps.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
    let _ = shim.kill();
    let _ = shim.wait();
}
