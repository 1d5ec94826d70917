//! What one launch must undo if it is refused, and the supervisor's signals it holds back, owned
//! in one place from the launch's start to its end. The guard holds, as the steps make them: the
//! folders made for the session (`made`), the session's lock, and the allow-list's proxy
//! (relay-host's thread, or stand-in mode's `relay-stand-in`). Undone ([`Guard::undo`]), it
//! releases them in that order: the lock, then the write-deny placeholders no running session
//! needs (they may lie in folders the launch made), then the folders, then the proxy. Kept when
//! the session starts ([`Guard::keep`]), the lock and the proxy go to the session and end with
//! it. The guard names no step's type (the proxy is held as what ends when dropped), so every
//! step can be handed it.

use std::any::Any;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::state::private_dir;

/// What a launch must undo until its session starts, and the signals it holds back meanwhile.
/// Dropped, it undoes what it still holds and lets the signals through.
pub(crate) struct Guard {
    /// The state folder, once open: its placeholders are released when the launch is undone or
    /// ends.
    state_dir: Option<PathBuf>,
    /// The session folder's lock, once taken.
    lock: Option<File>,
    /// The folders made for the session, removed when the launch is undone.
    made: Made,
    /// The allow-list's proxy, once the network step started one; ended when dropped.
    proxy: Option<Box<dyn Any>>,
}

/// What a started session holds until it ends: the session folder's lock and the allow-list's
/// proxy.
pub(crate) struct Kept {
    _lock: Option<File>,
    proxy: Option<Box<dyn Any>>,
}

impl Kept {
    /// The session ended: its proxy ends now (what it noted told), before the session's `exit`
    /// row; the lock stays until the session's cleanup is done.
    pub(crate) fn end_proxy(&mut self) {
        drop(self.proxy.take());
    }
}

impl Guard {
    /// The guard of a launch that starts: SIGTERM, SIGHUP and SIGINT are held back from now on
    /// ([`crate::launch::signals`]). A supervisor's signal while the launch prepares would leave
    /// half its work behind: it waits for the session's forwarding, or for the refusal's
    /// cleanup.
    pub(crate) fn begin() -> Guard {
        crate::launch::signals::defer();
        Guard {
            state_dir: None,
            lock: None,
            made: Made::default(),
            proxy: None,
        }
    }

    /// The launch's state folder is open: its placeholders are released when the launch is
    /// undone after it took the session's lock ([`Guard::undo`]), and when it ends
    /// ([`Guard::ended`]).
    pub(crate) fn opened(&mut self, state_dir: &Path) {
        self.state_dir = Some(state_dir.to_path_buf());
    }

    /// Creates `dir` (mode 0700) when it is missing, remembering it and every missing parent
    /// it made (such as `sessions/` on a first launch), outermost first: removed when the
    /// launch is undone, and then only while still empty, so a concurrent launch's files in a
    /// shared folder are never touched.
    pub(crate) fn make_dir(&mut self, dir: &Path) -> io::Result<()> {
        self.made.create_as(dir, false)
    }

    /// [`Guard::make_dir`] for a folder only this launch uses (its session folder): removed with
    /// its content.
    pub(crate) fn make_own_dir(&mut self, dir: &Path) -> io::Result<()> {
        self.made.create_as(dir, true)
    }

    /// The session folder's `lock`, taken: released first when the launch is undone.
    pub(crate) fn hold_lock(&mut self, lock: File) {
        self.lock = Some(lock);
    }

    /// The network step started `proxy` (ended when dropped): it ends with the launch, or with
    /// its session.
    pub(crate) fn hold_proxy(&mut self, proxy: Box<dyn Any>) {
        self.proxy = Some(proxy);
    }

    /// Lets the held-back signals through once the started session's signals are forwarded to
    /// its shim: one held back meanwhile (while the sandbox started) is forwarded now, and ends
    /// the session the normal way. Never earlier: at its default action it would end the host
    /// with the session unsupervised, its `exit` row left to `gc`.
    pub(crate) fn let_signals_through(&self) {
        crate::launch::signals::undefer();
    }

    /// Holds the signals back again: the session ended, and its exit row and cleanup are not
    /// cut short.
    pub(crate) fn hold_signals(&self) {
        crate::launch::signals::defer();
    }

    /// The session started: its folders stay; the lock and the proxy go to the session.
    pub(crate) fn keep(&mut self) -> Kept {
        self.made.keep();
        Kept {
            _lock: self.lock.take(),
            proxy: self.proxy.take(),
        }
    }

    /// The launch was refused: the session's lock goes, then (the lock was taken) the
    /// placeholders no running session needs, then the folders made for it (deepest first),
    /// then the proxy. Nothing is left but the refusal's row and event, which are written after.
    pub(crate) fn undo(&mut self) {
        if let Some(lock) = self.lock.take() {
            drop(lock);
            self.release_placeholders();
        }
        self.made.remove();
        drop(self.proxy.take());
    }

    /// The launch ended (refused, or its session over, with the session's lock released): the
    /// write-deny placeholders no running session needs go ([`crate::launch::placeholders`]),
    /// and with them those a killed host left.
    pub(crate) fn ended(&self) {
        self.release_placeholders();
    }

    fn release_placeholders(&self) {
        if let Some(state_dir) = &self.state_dir {
            crate::launch::placeholders::release(state_dir);
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.lock.is_some() || !self.made.0.is_empty() || self.proxy.is_some() {
            self.undo();
        }
        crate::launch::signals::undefer();
    }
}

/// Folders one launch created, removed again (deepest first) unless the launch succeeds. Only
/// the session's own folder is removed with its content; a shared folder this launch happened to
/// create (`sessions/`, the Claude config folder) is removed only while it is still empty.
#[derive(Default)]
struct Made(Vec<(PathBuf, bool)>);

impl Made {
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

    fn remove(&mut self) {
        for (d, whole) in self.0.drain(..).rev() {
            let _ = if whole {
                std::fs::remove_dir_all(d)
            } else {
                std::fs::remove_dir(d)
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::prepare::session_folder;
    use crate::state::session_locked;

    /// A session folder under a fresh state folder, its guard, and the paths it made.
    fn guarded(state: &Path) -> (Guard, PathBuf, PathBuf) {
        let session = state.join("sessions").join("s1");
        let claude = state.join("claude");
        let mut guard = Guard::begin();
        guard.opened(state);
        session_folder::create(&session, &claude, &mut guard).unwrap();
        (guard, session, claude)
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
        let (mut guard, session, claude) = guarded(state.path());
        let kept = guard.keep();
        drop(guard);
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
