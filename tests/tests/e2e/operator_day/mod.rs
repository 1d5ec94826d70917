//! The operator's day (issue 35), end to end with the real binaries: what runs (`ps`), templates
//! that extend the built-in ones (`templates`), a `status` that runs a launch's checks, settings
//! errors that name the key, hints by cause, RFC 3339 times, resume through relay, and nothing
//! left in the project after `kill -9` of the host. Build the binaries first:
//! `cargo build -p relay-host -p relay-shim -p relay-tests --bins`. Linux only (bwrap).
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use relay_tests::fixture::descendants;
use relay_tests::run::{finish_with, Out};
pub use relay_tests::wait_until;
use relay_tests::world::{Running, World};
use serde_json::{json, Value};

mod crash;
mod hints;
mod hints_followed;
mod release;
mod resume;
mod sessions;
mod settings_errors;
mod status;
mod templates;
mod times;

/// The deadline of one `relay-host` command.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// One test's world: [`World::agent`], the fake agent recording through `FAKE_AGENT_RECORD`
/// in relay-host's environment.
pub fn world() -> World {
    let mut w = World::agent(&relay_tests::fake_agent());
    let record = w.record.display().to_string();
    w.host_env.insert("FAKE_AGENT_RECORD".into(), record);
    w
}

/// A `relay-host ARGS` command on the world ([`World::host_cmd`]), stdout and stderr piped.
pub fn host(fx: &World, args: &[&str]) -> Command {
    let mut cmd = fx.host_cmd();
    cmd.args(args);
    cmd
}

/// Runs `cmd` to its end under [`TIMEOUT`].
pub fn finish(cmd: &mut Command) -> Out {
    let out = finish_with(cmd.spawn().unwrap(), TIMEOUT, &|| false);
    assert!(!out.killed, "relay-host did not finish within {TIMEOUT:?}");
    out
}

/// `ps --json`, parsed.
pub fn ps(fx: &World) -> Vec<Value> {
    let out = fx.host(&["--json", "ps"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    serde_json::from_str::<Value>(&out.stdout)
        .unwrap_or_else(|e| panic!("ps --json {:?}: {e}", out.stdout))
        .as_array()
        .unwrap()
        .clone()
}

/// The processes below `pid` whose command name is `name`.
pub fn named_below(pid: i32, name: &str) -> Vec<i32> {
    descendants(pid)
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == name)
        })
        .collect()
}

/// A kind `claude` request file for the world's project (sandboxed, with the token: no
/// `extra_args`, which a token launch limits to Claude Code's own flags).
pub fn claude_req(fx: &World, id: &str) -> std::path::PathBuf {
    fx.request_file(&fx.claude_req(id))
}
