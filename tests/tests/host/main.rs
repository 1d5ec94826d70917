//! End-to-end tests of the real `relay-host`: the token reaches a sandboxed Claude
//! session on fd 5 and nothing else, every sandboxed launch denies the file, refusals are clean.
//! Build the binaries first: `cargo build --workspace --bins`.
//!
//! Each test makes its own world under a root-owned 0755 folder in `/var/tmp` (not `/tmp`: the
//! sandbox binds a private `/tmp`, and the link checks refuse a token path below a
//! group/other-writable folder that holds a symlink): a home with the token at
//! `~/.config/acme-ltt/token`, a config folder, a state folder and a project folder. `relay-host`
//! runs with a cleared environment (`PATH`, `HOME`, `LANG` only), under a deadline. Linux only
//! (bwrap).
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub use relay_tests::assert_no_token;
pub use relay_tests::fake_agent_arg;
use relay_tests::fixture::{Folders, Layout};
pub use relay_tests::run::Out;
use relay_tests::{fake_token, relay_host, sha256_hex, wait_for_records};
use serde_json::{json, Value};

mod disclosure;
mod identity;
mod inputs;
mod launch;
mod operator;
mod refusals;

/// The deadline of one `relay-host` command.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The variable Claude Code reads the token descriptor from.
pub const VAR: &str = "CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR";

/// The setting every test with a token uses.
pub const SETTING: &str = "~/.config/acme-ltt/token";

/// One test's world: its folders ([`Layout::agent`], the config folder `cfg`, the project
/// `proj`) and how it runs `relay-host`.
pub struct Fx {
    folders: Folders,
    pub token: String,
    /// Where the fake agent records (the template's `FAKE_AGENT_RECORD`, in the project).
    pub record: PathBuf,
    /// Extra variables for `relay-host`'s own environment.
    pub host_env: BTreeMap<String, String>,
    /// Run `relay-host` under umask 0 (to prove it sets its modes itself).
    pub umask0: bool,
    n: std::cell::Cell<u32>,
}

/// A world is its folders (`fx.home`, `fx.project`, ...) and how it runs the host.
impl std::ops::Deref for Fx {
    type Target = Folders;
    fn deref(&self) -> &Folders {
        &self.folders
    }
}

impl Fx {
    /// A fresh world with a fresh token in the file (with a trailing newline, to prove the
    /// trim) and no settings yet.
    #[allow(clippy::new_without_default)] // makes folders and a token: not a default value
    pub fn new() -> Fx {
        let folders = Folders::new(Layout {
            config: "cfg",
            project: "proj",
            ..Layout::agent("relay-host-e2e.")
        });
        let fx = Fx {
            record: folders.project.join("rec.jsonl"),
            token: fake_token(),
            folders,
            host_env: BTreeMap::new(),
            umask0: false,
            n: std::cell::Cell::new(0),
        };
        fx.write_token(&fx.token.clone());
        fx
    }

    /// Rewrites the token file in place (0600, trailing newline).
    pub fn write_token(&self, token: &str) {
        fs::write(&self.token_file, format!("{token}\n")).unwrap();
        fs::set_permissions(&self.token_file, fs::Permissions::from_mode(0o600)).unwrap();
    }

    /// Writes `settings.json`.
    pub fn settings(&self, v: Value) {
        let p = self.config.join("settings.json");
        fs::write(&p, v.to_string()).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    }

    /// The token setting and these templates.
    pub fn with_token(&self, templates: Vec<Value>) {
        self.settings(json!({"claude_token_file": SETTING, "templates": templates}));
    }

    /// A `relay-host` command with a cleared environment and the world's folders.
    pub fn host_cmd(&self) -> Command {
        let mut cmd = Command::new(relay_host());
        self.host_setup(&mut cmd, &self.state)
            .envs(&self.host_env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if self.umask0 {
            // SAFETY: umask is async-signal-safe and touches no memory.
            unsafe {
                cmd.pre_exec(|| {
                    libc::umask(0);
                    Ok(())
                });
            }
        }
        cmd
    }

    /// Writes a request file (0644, so an unprivileged host can read it too).
    pub fn request_file(&self, req: &Value) -> PathBuf {
        self.n.set(self.n.get() + 1);
        let p = self.root.join(format!("req-{}.json", self.n.get()));
        fs::write(&p, req.to_string()).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        p
    }

    /// `relay-host launch REQ.json`, to the end.
    pub fn launch(&self, req: &Value) -> Out {
        let p = self.request_file(req);
        let mut cmd = self.host_cmd();
        cmd.arg("launch").arg(&p);
        finish(cmd.spawn().unwrap(), TIMEOUT)
    }

    /// `relay-host launch REQ.json`, left running (its process group is killed if the test ends
    /// before [`Running::finish`]).
    pub fn launch_bg(&self, req: &Value) -> Running {
        self.launch_bg_with(req, |_| {})
    }

    /// [`Fx::launch_bg`] with `setup` applied to the host's command last (a signal ignored in
    /// it, say).
    pub fn launch_bg_with(&self, req: &Value, setup: impl FnOnce(&mut Command)) -> Running {
        let p = self.request_file(req);
        let mut cmd = self.host_cmd();
        cmd.arg("launch").arg(&p);
        setup(&mut cmd);
        Running(Some(cmd.spawn().unwrap()))
    }

    /// `relay-host ARGS`, to the end.
    pub fn host(&self, args: &[&str]) -> Out {
        let mut cmd = self.host_cmd();
        cmd.args(args);
        finish(cmd.spawn().unwrap(), TIMEOUT)
    }

    /// The fake agent's records (start lines).
    pub fn records(&self) -> Vec<Value> {
        relay_tests::read_records(&self.record)
    }

    /// Waits for `n` start lines.
    pub fn wait_records(&self, n: usize) -> Vec<Value> {
        wait_for_records(&self.record, n, TIMEOUT)
    }

    /// A copy of the built `relay-host` named `name` in the new folder `<root>/<folder>`, where
    /// no `relay-shim` stands beside it.
    pub fn lone_host(&self, folder: &str, name: &str) -> PathBuf {
        let dir = self.root.join(folder);
        fs::create_dir(&dir).unwrap();
        let host = dir.join(name);
        relay_tests::copy_program(&relay_tests::relay_host(), &host);
        host
    }

    /// `HOST --config-dir C --state-dir S launch REQ` for a copied host (see
    /// [`Fx::lone_host`]) on the world's folders ([`Folders::host_setup`]) with `PATH` of
    /// `/usr/bin:/bin` only (no `relay-shim` on it), stdout and stderr piped.
    pub fn lone_launch(&self, host: &Path, req: &Path) -> Command {
        let mut cmd = Command::new(host);
        self.host_setup(&mut cmd, &self.state)
            .env("PATH", "/usr/bin:/bin")
            .arg("launch")
            .arg(req)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// The session folder of `id`.
    pub fn session_dir(&self, id: &str) -> PathBuf {
        self.state.join("sessions").join(id)
    }
}

/// A background `relay-host`; dropped unfinished (a failed assertion), its process group is
/// killed so no session outlives the test.
pub struct Running(Option<Child>);

impl Running {
    /// The host's pid.
    pub fn id(&self) -> u32 {
        self.0.as_ref().unwrap().id()
    }

    /// Waits for the end under `timeout` (see [`finish`]).
    pub fn finish(mut self, timeout: Duration) -> Out {
        finish(self.0.take().unwrap(), timeout)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            // SAFETY: kill takes integers only; the group is the one this child leads.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}

/// A `claude-code` template running the fake agent with `args`, recording into the project,
/// with `env` added and the built-in grants plus `read`.
pub fn claude_template(args: &[&str], env: Value, read: &[&str]) -> Value {
    relay_tests::fake_agent_template(
        args,
        env,
        json!({"read": read, "read_write": ["{project}", "{claude_config}"]}),
    )
}

/// `t` with `token_mode` left out: the built-in `claude-code` template's mode (stand-in mode on
/// Linux), what a user who does not choose gets.
pub fn in_the_default_mode(mut t: Value) -> Value {
    t.as_object_mut().expect("a template").remove("token_mode");
    t
}

/// Waits for `child` under `timeout` (killed with its process group, and a panic, when it
/// overruns), collecting its output; a descendant that keeps a pipe open fails the test instead
/// of hanging it.
pub fn finish(child: Child, timeout: Duration) -> Out {
    let out = relay_tests::run::finish_with(child, timeout, &|| false);
    assert!(!out.killed, "relay-host did not finish within {timeout:?}");
    assert!(
        out.code.is_some(),
        "relay-host killed by signal {:?}",
        out.signal
    );
    out
}

/// The one line a refusal prints to stderr, parsed; panics unless stderr is exactly one JSON
/// line.
pub fn refusal_line(out: &Out) -> Value {
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 1, "one stderr line, got {:?}", out.stderr);
    serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("stderr {:?}: {e}", lines[0]))
}

/// Asserts a refusal: the exit code, the error name, one stderr line, a matching 400/500 event
/// and an `error` audit row; returns the message. (The row's `token` is not checked: a launch
/// refused after the token was read says `fd`, the way it would have passed it.)
pub fn assert_refused(fx: &Fx, out: &Out, code: i32, error: &str) -> String {
    assert_eq!(out.code, Some(code), "exit code; stderr: {}", out.stderr);
    let line = refusal_line(out);
    assert_eq!(line["event"], "launch");
    assert_eq!(line["error"], error, "{line}");
    let status = if error == "spawn_failed" { 500 } else { 400 };
    assert_eq!(line["status"], status);
    let message = line["message"].as_str().expect("a message").to_owned();
    let last_event = fx.log("events.jsonl").pop().expect("an event");
    assert_eq!(last_event, line, "the printed answer is the event");
    let last_audit = fx.log("audit.jsonl").pop().expect("an audit row");
    assert_eq!(last_audit["event"], "session_launch");
    assert_eq!(last_audit["outcome"], "error");
    if error != "spawn_failed" {
        // Refused before any shim was spawned: nobody got the token, whatever was read.
        assert_eq!(last_audit["token"], "none", "{last_audit}");
    }
    message
}

/// A kind `claude` request for the project with session id `id`.
pub fn claude_req(fx: &Fx, id: &str) -> Value {
    json!({"kind": "claude", "session_id": id, "project": fx.project})
}

/// Asserts no session started (no start line) and no session folder is left for `id`.
pub fn assert_nothing_started(fx: &Fx, id: &str) {
    assert!(
        fx.records().is_empty(),
        "a session started: {:?}",
        fx.records()
    );
    assert!(
        !fx.session_dir(id).exists(),
        "{} left behind",
        fx.session_dir(id).display()
    );
}

/// [`assert_nothing_started`], and the state folder holds nothing but the logs
/// ([`assert_only_logs_left`]).
pub fn assert_nothing_left(fx: &Fx, id: &str) {
    assert_nothing_started(fx, id);
    assert_only_logs_left(fx);
}

/// Asserts a refusal left nothing in the state folder but the logs ("a refusal leaves
/// nothing behind but its audit row and event"), on a state folder that held nothing before.
pub fn assert_only_logs_left(fx: &Fx) {
    let mut names: Vec<String> = std::fs::read_dir(&fx.state)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["audit.jsonl", "events.jsonl", "relay-host.log"],
        "a refused launch left something behind"
    );
}

/// Asserts the last launch answered 201 for `id` and its audit row says `token`.
pub fn assert_started(fx: &Fx, id: &str, token: &str) {
    let launches: Vec<Value> = fx
        .log("events.jsonl")
        .into_iter()
        .filter(|e| e["event"] == "launch" && e["session_id"] == id)
        .collect();
    assert_eq!(launches.len(), 1, "one launch event for {id}: {launches:?}");
    assert_eq!(launches[0]["status"], 201, "{}", launches[0]);
    assert!(launches[0]["pid"].as_i64().unwrap() > 0);
    let rows: Vec<Value> = fx
        .log("audit.jsonl")
        .into_iter()
        .filter(|r| r["session_id"] == id)
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["outcome"], "ok");
    assert_eq!(rows[0]["token"], token, "{}", rows[0]);
}

/// Asserts a start line got `token` on fd 5: the variable names 5, the hash and length match,
/// and the descriptors are exactly 0, 1, 2 and 5.
pub fn assert_got_token(rec: &Value, token: &str) {
    assert_eq!(rec["token_fd_var"], "5", "{rec}");
    assert_eq!(rec["env"][VAR], "5");
    assert_eq!(rec["token_sha256"], sha256_hex(token.as_bytes()), "{rec}");
    assert_eq!(rec["token_bytes"], token.len());
    assert_eq!(rec["fds"], json!([0, 1, 2, 5]), "{rec}");
}

/// Asserts a start line got a stand-in for `token` on fd 5 (stand-in mode): the descriptor and
/// its variable, a setup token's length at least, never the token's hash.
pub fn assert_got_stand_in(rec: &Value, token: &str) {
    relay_tests::install::assert_fd5_as_shipped(rec, token);
    assert_eq!(rec["env"][VAR], "5");
    assert_eq!(rec["fds"], json!([0, 1, 2, 5]), "{rec}");
}

/// Asserts a start line got no token: no hash, no descriptor 5 (and the variable as `var`).
pub fn assert_no_token_fd(rec: &Value, var: Option<&str>) {
    match var {
        Some(v) => assert_eq!(rec["token_fd_var"], v, "{rec}"),
        None => {
            assert!(rec.get("token_fd_var").is_none(), "{rec}");
            assert!(rec["env"].get(VAR).is_none(), "{rec}");
        }
    }
    assert!(rec.get("token_sha256").is_none(), "{rec}");
    assert!(rec.get("token_bytes").is_none(), "{rec}");
    assert!(!rec["fds"].as_array().unwrap().contains(&json!(5)), "{rec}");
}
