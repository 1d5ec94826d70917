//! The operator's day (issue 35), end to end with the real binaries: what runs (`ps`), templates
//! that extend the built-in ones (`templates`), a `status` that runs a launch's checks, settings
//! errors that name the key, hints by cause, RFC 3339 times, resume through relay, and nothing
//! left in the project after `kill -9` of the host. Build the binaries first:
//! `cargo build -p relay-host -p relay-shim -p relay-tests --bins`. Linux only (bwrap).
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use relay_tests::fixture::descendants;
use relay_tests::run::{finish_with, Out};
use relay_tests::world::World;
use serde_json::{json, Value};

mod crash;
mod hints;
mod release;
mod resume;
mod sessions;
mod settings_errors;
mod status;
mod templates;
mod times;

/// The deadline of one `relay-host` command.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// A `relay-host ARGS` command on the fixture's folders, stdout and stderr piped.
pub fn host(fx: &World, args: &[&str]) -> Command {
    let mut cmd = Command::new(&fx.host);
    fx.host_setup(&mut cmd, &fx.state)
        .env("FAKE_AGENT_RECORD", &fx.record)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs `cmd` to its end under [`TIMEOUT`].
pub fn finish(cmd: &mut Command) -> Out {
    let out = finish_with(cmd.spawn().unwrap(), TIMEOUT, &|| false);
    assert!(!out.killed, "relay-host did not finish within {TIMEOUT:?}");
    out
}

/// `relay-host ARGS` to its end.
pub fn run(fx: &World, args: &[&str]) -> Out {
    finish(&mut host(fx, args))
}

/// Writes `settings.json` (0644).
pub fn settings(fx: &World, v: &Value) {
    std::fs::write(fx.config.join("settings.json"), v.to_string()).unwrap();
}

/// Writes a request file `<root>/<name>.json`.
pub fn request(fx: &World, name: &str, req: &Value) -> std::path::PathBuf {
    let p = fx.root.join(format!("{name}.json"));
    std::fs::write(&p, req.to_string()).unwrap();
    p
}

/// A host left running; killed with its process group when dropped unfinished.
pub struct Bg(pub Option<Child>);

impl Bg {
    /// `relay-host launch REQ` in the background.
    pub fn launch(fx: &World, req: &Path) -> Bg {
        let mut cmd = host(fx, &["launch"]);
        cmd.arg(req);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        Bg(Some(cmd.spawn().unwrap()))
    }

    /// The host's pid.
    pub fn pid(&self) -> i32 {
        self.0.as_ref().unwrap().id() as i32
    }

    /// Waits for the end.
    pub fn finish(mut self) -> Out {
        let out = finish_with(self.0.take().unwrap(), TIMEOUT, &|| false);
        assert!(!out.killed, "relay-host did not finish within {TIMEOUT:?}");
        out
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            // SAFETY: kill takes integers only; the group is the one this child leads.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}

/// Waits (bounded by `timeout`, polling every 20 ms) until `cond` holds; false on timeout.
pub fn wait_until(timeout: Duration, cond: &dyn Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < timeout {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// `ps --json`, parsed.
pub fn ps(fx: &World) -> Vec<Value> {
    let out = run(fx, &["--json", "ps"]);
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

/// A kind `claude` request for the fixture's project (sandboxed, with the token: no
/// `extra_args`, which a token launch limits to Claude Code's own flags).
pub fn claude_req(fx: &World, id: &str) -> std::path::PathBuf {
    request(
        fx,
        id,
        &json!({"kind": "claude", "project": fx.project, "session_id": id}),
    )
}

/// The fixture's settings with the `claude-code` template's command given `args` after the fake
/// agent.
pub fn agent_args(fx: &World, args: &[&str]) {
    let path = fx.config.join("settings.json");
    let mut s: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut command = vec![json!(relay_tests::fake_agent_arg())];
    command.extend(args.iter().map(|a| json!(a)));
    s["templates"][0]["command"] = json!(command);
    settings(fx, &s);
}
