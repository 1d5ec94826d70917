//! The stages of one launch, each a value that owns what the launch carries so far: a
//! [`LaunchPlan`] request → [`Prepared`] (token, programs, session folder) → [`Networked`] →
//! [`Confined`] (the shim's command line) → [`ShimCommand`] → [`Spawned`] → a running
//! [`Session`]. Each is
//! made by its step in [`crate::launch`]; dropping one that did not reach a session removes
//! what the launch made (its session folder, its proxy).

use std::ffi::OsString;
use std::fs::File;
use std::io::BufReader;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use super::programs::Programs;
use super::request::LaunchPlan;
use super::session_folder::SessionFolder;
use super::token::LaunchToken;
use super::wiring::{Gate, ShimWiring};
use crate::net::proxy::Proxy;
use relay_token::sandbox::SandboxNet;

/// A launch plan with its token read, its programs found and its session folder made.
pub(crate) struct Prepared {
    /// The launch plan: the request resolved against the settings.
    pub v: LaunchPlan,
    /// The token file it denies and the token it carries.
    pub token: LaunchToken,
    /// The programs it runs.
    pub programs: Programs,
    /// Its session folder, locked.
    pub folder: SessionFolder,
    /// The launch's own Claude config folder ([`super::claude_config`]).
    pub claude_config: PathBuf,
    /// Stand-in mode: the session CA's certificate in the session folder, which the sandbox
    /// shows read-only at `/run/relay/ca.pem`.
    pub ca_file: Option<PathBuf>,
}

impl Prepared {
    /// True when the launch carries the token.
    pub(crate) fn carries_token(&self) -> bool {
        self.token.carried()
    }

    /// What fd 5 carries: `stand_in` (a stand-in; the real token went to `relay-stand-in`),
    /// `pipe` (the real token) or `none`: the audit row's, the session record's and `ps`'s word.
    pub(crate) fn token_mode(&self) -> &'static str {
        match (self.carries_token(), self.programs.stand_in.is_some()) {
            (false, _) => "none",
            (true, true) => crate::settings::TokenMode::StandIn.word(),
            (true, false) => crate::settings::TokenMode::Pipe.word(),
        }
    }

    /// The project folder (its real path), if any.
    pub(crate) fn project(&self) -> Option<&Path> {
        self.v.project.as_deref()
    }
}

/// A prepared launch with its network: what the sandbox gets (a sandboxed launch only), and the
/// proxy of an allow-list, which ends with the session.
pub(crate) struct Networked {
    /// The launch.
    pub launch: Prepared,
    /// The sandbox's network, for a sandboxed launch.
    pub net: Option<SandboxNet>,
    /// The allow-list's proxy (dropped after the session folder).
    pub proxy: Option<SessionProxy>,
}

/// The command line the shim runs (bwrap around the target, ssh to the remote host, or the
/// target itself), and what the shim hands on with it.
pub(crate) struct SessionArgv {
    /// `bwrap ... -- target` on Linux; the target under `/usr/bin/env` on macOS.
    pub argv: Vec<OsString>,
    /// The resolved profile when bwrap binds by descriptor: it holds the descriptors
    /// ([`relay_token::sandbox::Resolved::bind_fds`], numbered from [`super::confine::BIND_FD_BASE`]).
    pub by_fd: Option<relay_token::sandbox::Resolved>,
    /// `Some(``SANDBOX_STATUS_FD``)` when bwrap reports the sandbox's start there.
    pub status_fd: Option<RawFd>,
    /// bwrap's options (`bwrap --args` [`super::confine::ARGS_FD`]), placed at [`super::confine::ARGS_FD`] in the shim and
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

/// A launch with the command line the shim runs: bwrap around the target, ssh to the remote
/// host, or the target itself.
pub(crate) struct Confined {
    /// The launch.
    pub launch: Prepared,
    /// The allow-list's proxy.
    pub proxy: Option<SessionProxy>,
    /// The shim's command line and what it hands on with it.
    pub argv: SessionArgv,
}

/// A launch with the `relay-shim` command that runs it, and the shim's launch-identity wiring.
pub(crate) struct ShimCommand {
    /// The launch.
    pub launch: Prepared,
    /// The allow-list's proxy.
    pub proxy: Option<SessionProxy>,
    /// The shim's command line and what it hands on with it.
    pub argv: SessionArgv,
    /// The shim's status descriptor and launch identity.
    pub wiring: ShimWiring,
    /// The command.
    pub cmd: Command,
}

/// A launch whose shim was spawned (the token handed over), waiting for `started`.
pub(crate) struct Spawned {
    /// The launch.
    pub launch: Prepared,
    /// The allow-list's proxy.
    pub proxy: Option<SessionProxy>,
    /// The shim's command line; its descriptors are held until the session started.
    pub _argv: SessionArgv,
    /// The shim.
    pub shim: Child,
    /// The shim's status pipe.
    pub status: BufReader<File>,
    /// What judges the status lines (the launch identity).
    pub gate: Gate,
}

/// A session that started, which the host supervises until it ends.
pub(crate) struct Session {
    /// The session id.
    pub id: String,
    /// Whether it runs in a sandbox (bwrap reports a signal as 128 + N).
    pub sandboxed: bool,
    /// The shim.
    pub shim: Child,
    /// The shim's status pipe.
    pub status: BufReader<File>,
    /// The session folder's lock, held while the session runs.
    pub _lock: File,
    /// The allow-list's proxy, which ends with the session.
    pub _proxy: Option<SessionProxy>,
}

/// A session's running allow-list proxy: a thread of relay-host's own, or a stand-in session's
/// `relay-stand-in` ([`super::stand_in`]). Dropping it ends it.
pub(crate) enum SessionProxy {
    /// relay-host's own proxy thread.
    Here(#[allow(dead_code)] Proxy),
    /// A stand-in session's program.
    StandIn(#[allow(dead_code)] super::stand_in_proxy::StandInProxy),
}
