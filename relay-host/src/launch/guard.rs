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
    _proxy: Option<SessionProxy>,
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
            _proxy: proxy,
        }
    }
}
