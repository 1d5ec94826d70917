//! The state folder and what lives in it: the folder itself, its logs and session folders
//! ([`folder`], re-exported here), the log readers ([`logs`]), times ([`time`]) and digests
//! (`digest`) as the logs write them, and the empty leftovers Claude Code's own tool sandbox
//! leaves in a project ([`leftovers`]).

pub(crate) mod digest;
pub mod folder;
pub mod leftovers;
pub mod logs;
pub mod time;

pub use folder::*;
