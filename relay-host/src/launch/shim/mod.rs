//! The shim of one launch: its wiring ([`wiring`]) with the launch identity's bridge
//! ([`bridge`]), its command (`shim_command`) and its start (`start`).

pub mod bridge;
pub mod error;
pub(crate) mod shim_command;
pub(crate) mod start;
pub mod wiring;

use std::fs::File;
use std::io::BufReader;
use std::process::{Child, Command};

use crate::launch::network::SessionProxy;
use crate::launch::prepare::Prepared;
use crate::launch::sandbox::SessionArgv;
use wiring::{Gate, ShimWiring};

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
    /// What fd 5 carries, when the launch carries the token.
    pub token: Option<relay_token::ClaudeToken>,
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
