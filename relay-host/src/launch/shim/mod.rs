//! The shim of one launch: its wiring (`wiring`) with the launch identity's bridge
//! (`bridge`), its command (`shim_command`) and its start (`start`).

pub(crate) mod bridge;
pub(crate) mod error;
pub(crate) mod shim_command;
pub(crate) mod start;
pub(crate) mod wiring;

use std::fs::File;
use std::io::BufReader;
use std::process::{Child, Command};

use crate::launch::guard::Kept;
use wiring::{Gate, ShimWiring};

/// The `relay-shim` command that runs a launch, and the shim's launch-identity wiring.
pub(crate) struct ShimCommand {
    /// The shim's status descriptor and launch identity.
    pub wiring: ShimWiring,
    /// The command.
    pub cmd: Command,
}

/// A launch's shim, spawned (the token handed over), waiting for `started`.
pub(crate) struct Spawned {
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
    /// The session folder's lock and the allow-list's proxy, held while the session runs.
    pub kept: Kept,
}
