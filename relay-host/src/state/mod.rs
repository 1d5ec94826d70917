//! The state folder and what lives in it: the folder itself, its logs and session folders
//! ([`folder`], re-exported here), the log readers ([`logs`]), times ([`time`]) and digests
//! (`digest`) as the logs write them, and the empty leftovers Claude Code's own tool sandbox
//! leaves in a project ([`leftovers`]).

pub(crate) mod digest;
pub(crate) mod folder;
pub(crate) mod leftovers;
pub(crate) mod logs;
pub(crate) mod time;

pub(crate) use folder::{
    append_private, gc_sessions, host_lost, lock_dir, lock_session, now_secs, private_dir,
    seed_claude_config, session_locked, State, AUDIT_FILE, CLAUDE_CONFIG_DIR, CLAUDE_STATE_FILE,
    DEFAULT_RETENTION_DAYS, ENDED_MARK, EVENTS_FILE, KEEP_MARK, SESSIONS_DIR,
};
