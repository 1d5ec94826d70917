//! The write-deny placeholders' life: a launch makes them under the state folder's lock
//! ([`lock`]); the last session of the state folder to end removes them ([`release`]); `status`
//! reports and `gc` removes those a killed host left ([`leftover`]).

use std::fs::File;
use std::io;
use std::path::Path;

use relay_token::sandbox::write_deny::{self, Placeholders};

/// The placeholders' lock (an exclusive `flock` on the state folder itself, so no lock file is
/// left behind): held while placeholders are made, and while they are removed.
pub(crate) fn lock(state_dir: &Path) -> io::Result<File> {
    crate::state::lock_dir(state_dir)
}

/// Removes the placeholders once no session of this state folder runs any more (the last
/// session to end removes them; `gc` removes those a killed host left), and with them the empty
/// mount points Claude Code's own tool sandbox left in the projects ([`crate::state::leftovers`]).
/// Called after a launch is refused, after a session ends (with this launch's own session lock
/// already released) and by `gc`. Returns how many listed placeholders and leftovers it removed.
pub(crate) fn release(state_dir: &Path) -> Released {
    let none = Released::default();
    let watched = state_dir.join(crate::state::leftovers::WATCHED_FILE);
    if !state_dir.join(write_deny::PLACEHOLDERS_FILE).exists() && !watched.exists() {
        return none;
    }
    let Ok(_lock) = lock(state_dir) else {
        return none;
    };
    if any_session_running(state_dir) {
        return none;
    }
    let before = listed(state_dir);
    // The mount points first: one inside a placeholder folder (`.claude/.cc-writes`) goes, then
    // the placeholder folder can.
    let leftovers =
        crate::state::leftovers::release(state_dir, &all_listed(state_dir)).unwrap_or(0);
    if let Ok(mut ph) = Placeholders::open(state_dir) {
        let _ = ph.remove_all();
    }
    let placeholders = before
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_err())
        .count();
    Released {
        placeholders,
        leftovers,
    }
}

/// What [`release`] removed.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Released {
    /// Write-deny placeholders.
    pub placeholders: usize,
    /// Empty mount points of Claude Code's own tool sandbox.
    pub leftovers: usize,
}

/// True while a session of this state folder holds its folder's lock.
fn any_session_running(state_dir: &Path) -> bool {
    let sessions = state_dir.join(crate::state::SESSIONS_DIR);
    std::fs::read_dir(&sessions)
        .map(|rd| {
            rd.flatten()
                .any(|e| crate::state::session_locked(&e.path()))
        })
        .unwrap_or(false)
}

/// The placeholders `<state>/placeholders` lists that still exist (not followed when links).
fn listed(state_dir: &Path) -> Vec<std::path::PathBuf> {
    all_listed(state_dir)
        .into_iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect()
}

/// Every placeholder `<state>/placeholders` lists.
fn all_listed(state_dir: &Path) -> Vec<std::path::PathBuf> {
    Placeholders::open(state_dir)
        .map(|ph| ph.paths())
        .unwrap_or_default()
}

/// The placeholders a host that ended without removing them left (listed, still there, and no
/// session of this state folder running): what `status` reports and `gc` removes. Empty while a
/// session runs, since its placeholders are then in use.
pub(crate) fn leftover(state_dir: &Path) -> Vec<std::path::PathBuf> {
    if any_session_running(state_dir) {
        return Vec::new();
    }
    listed(state_dir)
}

/// The empty mount points of Claude Code's own tool sandbox a host that ended without removing
/// them left ([`crate::state::leftovers::pending`], and no session of this state folder running): what
/// `status` names and `gc` removes.
pub(crate) fn sandbox_leftovers(state_dir: &Path) -> Vec<std::path::PathBuf> {
    if any_session_running(state_dir) {
        return Vec::new();
    }
    crate::state::leftovers::pending(state_dir, &all_listed(state_dir))
}
