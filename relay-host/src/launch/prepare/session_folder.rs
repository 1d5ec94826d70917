//! The session folder of one launch: created and locked with a fresh temp folder. What it made
//! and its lock go to the launch's guard ([`crate::launch::guard`]), which removes them again
//! unless the launch succeeds.

use std::path::{Path, PathBuf};

use crate::launch::guard::Guard;
use crate::launch::plan::error::RequestError;
use crate::launch::prepare::error::PrepareError;
use crate::launch::spawn_error::spawn_err;

/// Creates the session folder and the relay-owned Claude config folder when missing, locks
/// the session, and empties its temp folder: a reused session id starts with nothing a
/// previous session left there (a planted symlink included; nothing is followed). Each folder
/// made and the lock go to `guard`.
pub(crate) fn create(
    session_dir: &Path,
    claude_config: &Path,
    guard: &mut Guard,
) -> Result<SessionPaths, PrepareError> {
    let tmp = session_dir.join("tmp");
    let failed = || spawn_err(format!("session folder {}", session_dir.display()));
    guard.make_own_dir(session_dir).map_err(failed())?;
    let lock = crate::state::lock_session(session_dir).map_err(|source| {
        let dir = session_dir.to_path_buf();
        RequestError::SessionLock { dir, source }
    })?;
    guard.hold_lock(lock);
    match std::fs::symlink_metadata(&tmp) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(&tmp).map_err(failed())?,
        Ok(_) => std::fs::remove_file(&tmp).map_err(failed())?,
        Err(_) => {}
    }
    guard
        .make_dir(&tmp)
        .and_then(|_| guard.make_dir(claude_config))
        .map_err(failed())?;
    Ok(SessionPaths { tmp })
}

/// Where a launch's session folder is, and its temp folder (what it made is owned by the launch's
/// guard).
pub(crate) struct SessionPaths {
    tmp: PathBuf,
}

impl SessionPaths {
    /// The session's temp folder (`/tmp` in its sandbox).
    pub(crate) fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// The session folder itself.
    pub(crate) fn dir(&self) -> &Path {
        self.tmp.parent().unwrap_or(&self.tmp)
    }
}
