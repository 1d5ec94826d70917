//! The session folder of one launch: created and locked with a fresh temp folder, and removed
//! again, with every folder the launch made, unless the launch succeeds.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::launch::plan::error::RequestError;
use crate::launch::prepare::error::PrepareError;
use crate::launch::spawn_error::spawn_err;
use crate::state::private_dir;

/// The session folder, locked, with a fresh temp folder; removed again if the launch is refused
/// (after the write-deny placeholders the launch made, which may lie in folders it made).
pub(crate) struct SessionFolder {
    tmp: PathBuf,
    made: Made,
    lock: Option<File>,
    state_dir: PathBuf,
}

impl SessionFolder {
    /// Creates the session folder and the relay-owned Claude config folder when missing, locks
    /// the session, and empties its temp folder: a reused session id starts with nothing a
    /// previous session left there (a planted symlink included; nothing is followed).
    pub(crate) fn create(
        state_dir: &Path,
        session_dir: &Path,
        claude_config: &Path,
    ) -> Result<SessionFolder, PrepareError> {
        let tmp = session_dir.join("tmp");
        let failed = || spawn_err(format!("session folder {}", session_dir.display()));
        let mut made = Made::default();
        made.create_own(session_dir).map_err(failed())?;
        let lock = crate::state::lock_session(session_dir).map_err(|source| {
            let dir = session_dir.to_path_buf();
            RequestError::SessionLock { dir, source }
        })?;
        match std::fs::symlink_metadata(&tmp) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&tmp).map_err(failed())?,
            Ok(_) => std::fs::remove_file(&tmp).map_err(failed())?,
            Err(_) => {}
        }
        made.create(&tmp)
            .and_then(|_| made.create(claude_config))
            .map_err(failed())?;
        Ok(SessionFolder {
            tmp,
            made,
            lock: Some(lock),
            state_dir: state_dir.to_path_buf(),
        })
    }

    /// Where the session folder and its temp folder are, for the steps that use them.
    pub(crate) fn paths(&self) -> SessionPaths {
        SessionPaths {
            tmp: self.tmp.clone(),
        }
    }

    /// The launch succeeded: the folder stays, and its lock goes to the session.
    pub(crate) fn keep(mut self) -> File {
        self.made.keep();
        self.lock.take().expect("the lock is taken once")
    }
}

/// Where a launch's session folder is, and its temp folder (the [`SessionFolder`] itself is
/// owned by the launch's guard).
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

impl Drop for SessionFolder {
    fn drop(&mut self) {
        if self.lock.take().is_some() {
            crate::launch::placeholders::release(&self.state_dir);
        }
    }
}

/// Folders one launch created, removed again (deepest first) unless the launch succeeds. Only
/// the session's own folder is removed with its content; a shared folder this launch happened to
/// create (`sessions/`, the Claude config folder) is removed only while it is still empty, so a
/// concurrent launch's files in it are never touched.
#[derive(Default)]
struct Made(Vec<(PathBuf, bool)>);

impl Made {
    /// Creates `dir` (mode 0700) when it is missing, remembering it and every missing parent
    /// it made (such as `sessions/` on a first launch), outermost first.
    fn create(&mut self, dir: &Path) -> io::Result<()> {
        self.create_as(dir, false)
    }

    /// [`Made::create`] for a folder only this launch uses: removed with its content.
    fn create_own(&mut self, dir: &Path) -> io::Result<()> {
        self.create_as(dir, true)
    }

    fn create_as(&mut self, dir: &Path, own: bool) -> io::Result<()> {
        let missing: Vec<PathBuf> = dir
            .ancestors()
            .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
            .map(Path::to_path_buf)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        private_dir(dir)?;
        for m in missing.into_iter().rev() {
            let whole = own && m == dir;
            self.0.push((m, whole));
        }
        Ok(())
    }

    fn keep(&mut self) {
        self.0.clear();
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        for (d, whole) in self.0.iter().rev() {
            let _ = if *whole {
                std::fs::remove_dir_all(d)
            } else {
                std::fs::remove_dir(d)
            };
        }
    }
}
