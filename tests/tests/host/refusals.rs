//! Launches the host must refuse, and what a refusal leaves behind.

use std::fs;
use std::os::unix::fs::{chown, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::process::Command;

use serde_json::json;

use crate::*;

/// Asserts no session started: no start line and no folder for `id`.
fn assert_nothing_started(fx: &Fx, id: &str) {
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

/// Issue 5 (8): a missing token file refuses a sandboxed Claude launch with
/// `sandbox_unavailable` (78) naming the path; no start line, an `error` audit row, no session
/// folder.
#[test]
fn a_missing_token_file_refuses_the_launch() {
    let fx = Fx::new();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    fs::remove_file(&fx.token_path).unwrap();
    let out = fx.launch(&json!({"kind": "claude", "session_id": "m1", "project": fx.proj}));
    let msg = assert_refused(&fx, &out, 78, "sandbox_unavailable");
    assert_eq!(
        msg,
        format!(
            "read claude_token_file {}: no such file or directory",
            fx.token_path.display()
        )
    );
    let audit = fx.log("audit.jsonl").pop().unwrap();
    assert_eq!(audit["message"], msg);
    assert_eq!(audit["session_id"], "m1");
    assert_nothing_started(&fx, "m1");
    assert_only_logs_left(&fx);
    // `status` says the same, naming the setting as stored.
    let out = fx.host(&["status", "--json"]);
    assert_eq!(out.code, 78, "an unusable token file: {}", out.stderr);
    let status: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(status["claude_token_file"], SETTING);
    assert_eq!(status["token"]["ok"], false, "{status}");
    assert_eq!(status["token"]["error"], msg);
}

/// Issue 5 (9): a token file relay-host cannot read (it runs as uid 65534, the file is root's
/// 0600) refuses the same way; the message and the audit row hold the path, never the token.
#[test]
fn an_unreadable_token_file_refuses_the_launch() {
    let fx = Fx::new();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    // Folders the unprivileged host can use; the token stays root's, 0600.
    let nobody = Some(65534);
    fs::create_dir(&fx.state).unwrap();
    fs::set_permissions(&fx.state, fs::Permissions::from_mode(0o700)).unwrap();
    chown(&fx.state, nobody, nobody).unwrap();
    chown(&fx.proj, nobody, nobody).unwrap();
    assert_eq!(
        fs::metadata(&fx.token_path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let req = fx.request_file(&json!({"kind": "claude", "session_id": "n1", "project": fx.proj}));
    let mut cmd = fx.host_cmd();
    let host_args: Vec<std::ffi::OsString> = cmd.get_args().map(|a| a.to_owned()).collect();
    let mut wrapped = Command::new("setpriv");
    wrapped
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(cmd.get_program())
        .args(host_args)
        .arg("launch")
        .arg(&req);
    wrapped.env_clear();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            wrapped.env(k, v);
        }
    }
    wrapped.process_group(0);
    cmd = wrapped;
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = finish(cmd.spawn().unwrap(), TIMEOUT);
    let msg = assert_refused(&fx, &out, 78, "sandbox_unavailable");
    assert_eq!(
        msg,
        format!(
            "read claude_token_file {}: permission denied",
            fx.token_path.display()
        )
    );
    let audit = fx.log("audit.jsonl").pop().unwrap();
    assert_eq!(audit["message"], msg);
    assert_no_token("stderr", out.stderr.as_bytes(), &fx.token);
    assert_no_token(
        "audit",
        &fs::read(fx.state.join("audit.jsonl")).unwrap(),
        &fx.token,
    );
    assert_nothing_started(&fx, "n1");
    // The refusal was written by the unprivileged host itself.
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        fs::metadata(fx.state.join("audit.jsonl")).unwrap().uid(),
        65534
    );
}

/// Issue 5 (12): a request carrying `claude_token`, an unknown key, a bad session id, or kind
/// `pi` with the claude-code template is `invalid_spec` (64), and starts nothing.
#[test]
fn bad_requests_are_invalid_spec() {
    let fx = Fx::new();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let p = fx.proj.clone();
    let cases = [
        (
            json!({"kind": "claude", "project": p, "claude_token": "sk-ant-oat01-x"}),
            "claude_token",
        ),
        (
            json!({"kind": "claude", "project": p, "colour": "blue"}),
            "colour",
        ),
        (
            json!({"kind": "claude", "project": p, "session_id": "../escape"}),
            "session_id",
        ),
        (
            json!({"kind": "claude", "project": p, "session_id": ""}),
            "session_id",
        ),
        (
            json!({"kind": "claude", "project": p, "session_id": "--pass-token"}),
            "session_id",
        ),
        (
            json!({"kind": "claude", "project": p, "resume": "-x"}),
            "resume",
        ),
        (
            json!({"kind": "pi", "template": "claude-code", "project": p}),
            "pi",
        ),
    ];
    for (req, word) in cases {
        let out = fx.launch(&req);
        let msg = assert_refused(&fx, &out, 64, "invalid_spec");
        assert!(msg.contains(word), "{msg:?} should name {word:?}");
        assert!(!msg.contains("sk-ant-oat01-x"), "{msg:?} echoes the value");
        assert!(fx.records().is_empty());
    }
    let sessions = fx.state.join("sessions");
    let left = fs::read_dir(&sessions).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "session folders left behind");
}

/// A token path that crosses a symlink a sandboxed session could have made (here in the
/// home, which the `shell` template grants read-write) refuses the launch, naming the link.
#[test]
fn a_token_path_through_a_makeable_symlink_refuses_the_launch() {
    let fx = Fx::new();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let real = fx.home.join("real-ltt");
    fs::rename(fx.token_path.parent().unwrap(), &real).unwrap();
    let link = fx.home.join(".config/acme-ltt");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = fx.launch(&json!({"kind": "claude", "session_id": "l1", "project": fx.proj}));
    let msg = assert_refused(&fx, &out, 78, "sandbox_unavailable");
    assert!(
        msg.contains(&format!("follows symlink \"{}\"", link.display())),
        "{msg}"
    );
    assert_no_token("stderr", out.stderr.as_bytes(), &fx.token);
    assert_nothing_started(&fx, "l1");
    assert_only_logs_left(&fx);
}
