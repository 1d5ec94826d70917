//! The sandbox of one launch: the session's own command line (`argv`); the facts the sandbox is
//! made from, read once (`facts`); the plan made from them alone (`plan`); the plan laid out on
//! the disk (`layout`) and rendered by one file per system, `bwrap` (every system but macOS)
//! and `seatbelt` (macOS), each the `system` of its build; `confine` runs the three (the step
//! itself, `confine::confine`); what a token session's tools read as configuration
//! (`own_config`); a linked worktree's repository (`git_binds`).

pub(crate) mod argv;
#[cfg(not(target_os = "macos"))]
mod bwrap;
pub(crate) mod confine;
pub mod error;
mod facts;
mod git_binds;
mod git_config;
mod layout;
pub(crate) mod own_config;
pub(crate) mod plan;
#[cfg(target_os = "macos")]
mod seatbelt;
#[cfg(not(target_os = "macos"))]
use bwrap as system;
#[cfg(target_os = "macos")]
use seatbelt as system;

use std::ffi::OsString;
use std::os::fd::RawFd;

/// The command line the shim runs (bwrap around the target, ssh to the remote host, or the
/// target itself), and what the shim hands on with it.
pub(crate) struct SessionArgv {
    /// `bwrap ... -- target` on Linux; the target under `/usr/bin/env` on macOS.
    pub argv: Vec<OsString>,
    /// The resolved profile when bwrap binds by descriptor: it holds the descriptors
    /// ([`relay_token::sandbox::Resolved::bind_fds`], numbered from [`crate::launch::sandbox::confine::BIND_FD_BASE`]).
    pub by_fd: Option<relay_token::sandbox::Resolved>,
    /// `Some(``SANDBOX_STATUS_FD``)` when bwrap reports the sandbox's start there.
    pub status_fd: Option<RawFd>,
    /// bwrap's options (`bwrap --args` [`crate::launch::sandbox::confine::ARGS_FD`]), placed at [`crate::launch::sandbox::confine::ARGS_FD`] in the shim and
    /// handed on to bwrap, which reads and closes it.
    pub args_file: Option<std::os::fd::OwnedFd>,
}

impl SessionArgv {
    /// A command line the shim runs as it is, handing nothing on.
    pub(crate) fn plain(argv: Vec<OsString>) -> SessionArgv {
        SessionArgv {
            argv,
            by_fd: None,
            status_fd: None,
            args_file: None,
        }
    }
}
