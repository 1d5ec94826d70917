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

use std::path::PathBuf;

pub use relay_tests::assert_no_token;
pub use relay_tests::fake_agent_arg;
use relay_tests::fixture::Layout;
pub use relay_tests::run::Out;
use relay_tests::sha256_hex;
pub use relay_tests::world::{
    assert_got_stand_in, assert_got_token, assert_no_token_fd, finish, Running, World, SETTING,
    TIMEOUT, VAR,
};
use serde_json::{json, Value};

mod disclosure;
mod identity;
mod inputs;
mod launch;
mod operator;
mod refusals;

/// One test's world ([`World`]): [`Layout::agent`] with the config folder `cfg` and the
/// project `proj`, a fresh token in the file (with a trailing newline, to prove the trim), no
/// settings yet.
pub fn world() -> World {
    World::builder()
        .layout(Layout {
            config: "cfg",
            project: "proj",
            ..Layout::agent("relay-host-e2e.")
        })
        .build()
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
pub fn assert_refused(fx: &World, out: &Out, code: i32, error: &str) -> String {
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

/// Asserts no session started (no start line) and no session folder is left for `id`.
pub fn assert_nothing_started(fx: &World, id: &str) {
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
pub fn assert_nothing_left(fx: &World, id: &str) {
    assert_nothing_started(fx, id);
    assert_only_logs_left(fx);
}

/// Asserts a refusal left nothing in the state folder but the logs ("a refusal leaves
/// nothing behind but its audit row and event"), on a state folder that held nothing before.
pub fn assert_only_logs_left(fx: &World) {
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
pub fn assert_started(fx: &World, id: &str, token: &str) {
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
