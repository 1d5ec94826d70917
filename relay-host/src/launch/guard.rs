//! What one launch must undo if it is refused, owned in one place: the session folder it made
//! (with every folder made for it, and the write-deny placeholders), the session's lock, and
//! the allow-list's proxy (relay-host's thread, or stand-in mode's `relay-stand-in`). Dropped,
//! it undoes them in that order; kept when the session starts, the lock and the proxy go to the
//! session and end with it.

use std::fs::File;

use crate::launch::network::SessionProxy;
use crate::launch::prepare::session_folder::SessionFolder;

/// What a launch must undo until its session starts.
pub(crate) struct Guard {
    /// The session folder, locked; removed on drop unless kept. Dropped first.
    folder: SessionFolder,
    /// The allow-list's proxy, once the network step started one; ended on drop.
    proxy: Option<SessionProxy>,
}

/// What a started session holds until it ends: the session folder's lock and the allow-list's
/// proxy.
pub(crate) struct Kept {
    _lock: File,
    proxy: Option<SessionProxy>,
}

impl Kept {
    /// The session ended: its proxy ends now (what it noted told), before the session's `exit`
    /// row; the lock stays until the session's cleanup is done.
    pub(crate) fn end_proxy(&mut self) {
        drop(self.proxy.take());
    }
}

impl Guard {
    /// The guard of a launch whose session folder was just made.
    pub(crate) fn new(folder: SessionFolder) -> Guard {
        Guard {
            folder,
            proxy: None,
        }
    }

    /// The network step started `proxy`: it ends with the launch, or with its session.
    pub(crate) fn hold_proxy(&mut self, proxy: SessionProxy) {
        self.proxy = Some(proxy);
    }

    /// The session started: its folder stays; the lock and the proxy go to the session.
    pub(crate) fn keep(self) -> Kept {
        let Guard { folder, proxy } = self;
        Kept {
            _lock: folder.keep(),
            proxy,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::session_locked;

    /// A session folder under a fresh state folder, its guard, and the paths it made.
    fn guarded(state: &std::path::Path) -> (Guard, std::path::PathBuf, std::path::PathBuf) {
        let session = state.join("sessions").join("s1");
        let claude = state.join("claude");
        let folder = SessionFolder::create(state, &session, &claude).unwrap();
        (Guard::new(folder), session, claude)
    }

    /// A refused launch's guard removes the session folder, every folder made for it (the
    /// first launch's `sessions/`, the Claude config folder) and its lock; a folder that was
    /// there before stays.
    #[test]
    fn a_dropped_guard_undoes_the_launch() {
        let state = tempfile::tempdir().unwrap();
        let (guard, session, claude) = guarded(state.path());
        assert!(session.join("tmp").is_dir() && claude.is_dir());
        assert!(session_locked(&session));
        drop(guard);
        assert!(!session.exists() && !claude.exists());
        assert!(!state.path().join("sessions").exists());
        assert!(state.path().is_dir());
    }

    /// A started session's guard is kept: the folder stays, locked until what the session
    /// keeps is dropped with it.
    #[test]
    fn a_kept_guard_leaves_the_folder_locked_for_the_session() {
        let state = tempfile::tempdir().unwrap();
        let (guard, session, claude) = guarded(state.path());
        let kept = guard.keep();
        assert!(session.join("tmp").is_dir() && claude.is_dir());
        assert!(session_locked(&session));
        drop(kept);
        // A child another test thread forks holds the lock's descriptor until its exec closes
        // it: the lock goes within moments.
        let unlocked = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            !session_locked(&session)
        });
        assert!(
            unlocked,
            "the folder stayed locked after the kept guard was dropped"
        );
        assert!(session.join("tmp").is_dir());
    }
}
