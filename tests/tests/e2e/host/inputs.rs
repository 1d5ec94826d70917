//! "Bad input gets a clear error": one line, the refusal's exit code, nothing started.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use super::*;

/// Settings that do not parse: 78, one line naming the file, line and column.
#[test]
fn settings_that_do_not_parse_refuse_with_line_and_column() {
    let fx = world();
    let p = fx.config.join("settings.json");
    fs::write(
        &p,
        "{\n  \"claude_token_file\": \"~/x\",\n  \"templates\": [}\n",
    )
    .unwrap();
    let out = fx.launch(&fx.claude_req("x1"));
    let msg = assert_refused(&fx, &out, 78, "settings_invalid");
    assert!(msg.starts_with(&format!("{}: ", p.display())), "{msg}");
    assert!(msg.contains("line 3 column 17"), "{msg}");
    assert_nothing_left(&fx, "x1");
}

/// A template with no command: 78, one line naming the template.
#[test]
fn a_template_with_no_command_refuses() {
    let fx = world();
    fx.settings(json!({"claude_token_file": SETTING,
                       "templates": [{"id": "claude-code", "command": []}]}));
    let out = fx.launch(&fx.claude_req("x2"));
    let msg = assert_refused(&fx, &out, 78, "settings_invalid");
    assert!(msg.contains("\"claude-code\": command is empty"), "{msg}");
    assert_nothing_left(&fx, "x2");
}

/// A `bwrap` setting that is not executable: 78, one line naming it, nothing left behind.
#[test]
fn a_bwrap_setting_that_is_not_executable_refuses() {
    let fx = world();
    let fake = fx.root.join("bwrap");
    fs::write(&fake, "#!/bin/sh\nexit 0\n").unwrap();
    fs::set_permissions(&fake, fs::Permissions::from_mode(0o644)).unwrap();
    fx.settings(json!({"claude_token_file": SETTING, "bwrap": fake,
                       "templates": [claude_template(&[], json!({}), &[])]}));
    let out = fx.launch(&fx.claude_req("x3"));
    let msg = assert_refused(&fx, &out, 78, "sandbox_unavailable");
    assert!(msg.contains(&fake.display().to_string()), "{msg}");
    assert_no_token("stderr", out.stderr.as_bytes(), &fx.token);
    assert_nothing_left(&fx, "x3");
}

/// A request that is not JSON, from a file and on stdin: 64, one line.
#[test]
fn a_request_that_is_not_json_is_invalid_spec() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let p = fx.root.join("req.txt");
    fs::write(&p, "kind=claude\n").unwrap();
    let out = fx.host(&["launch", p.to_str().unwrap()]);
    let msg = assert_refused(&fx, &out, 64, "invalid_spec");
    assert!(msg.starts_with("request is not valid JSON"), "{msg}");

    let mut cmd = fx.host_cmd();
    cmd.args(["launch", "-"])
        .stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"{\"kind\": \"claude\",").unwrap();
    }
    let out = finish(child, TIMEOUT);
    let msg = assert_refused(&fx, &out, 64, "invalid_spec");
    assert!(msg.starts_with("request is not valid JSON"), "{msg}");
    assert!(fx.records().is_empty());
}

/// A session id already running: 64, one line, and the second does not start.
#[test]
fn a_session_id_already_running_is_invalid_spec() {
    let fx = world();
    fx.with_token(vec![claude_template(&["--sleep", "20"], json!({}), &[])]);
    let first = fx.launch_bg(&fx.claude_req("dup"));
    fx.wait_records(1);
    let out = fx.launch(&fx.claude_req("dup"));
    let msg = assert_refused(&fx, &out, 64, "invalid_spec");
    assert!(
        msg.contains("\"dup\"") && msg.contains("already running"),
        "{msg}"
    );
    assert!(
        fx.session_dir("dup").join("lock").is_file(),
        "the refusal removed the running session's folder"
    );
    assert_eq!(fx.records().len(), 1, "the second launch started a session");
    // End the first: the host forwards SIGTERM to the session and exits 128 + 15.
    // SAFETY: kill takes integers only; the pid is our running child's.
    assert_eq!(unsafe { libc::kill(first.id() as i32, libc::SIGTERM) }, 0);
    let done = first.finish(TIMEOUT);
    assert_eq!(done.code, Some(128 + libc::SIGTERM), "{}", done.stderr);
    assert_eq!(fx.records().len(), 1);
}

/// A template whose program does not exist: `spawn_failed` (500, exit 71), nothing started.
#[test]
fn a_missing_program_is_spawn_failed() {
    let fx = world();
    let mut t = claude_template(&[], json!({}), &[]);
    t["command"] = json!(["/nonexistent/agent"]);
    fx.with_token(vec![t]);
    let out = fx.launch(&fx.claude_req("x6"));
    let msg = assert_refused(&fx, &out, 71, "spawn_failed");
    assert!(msg.contains("/nonexistent/agent"), "{msg}");
    assert_no_token("stderr", out.stderr.as_bytes(), &fx.token);
    assert_nothing_left(&fx, "x6");
}

/// No `relay-shim` beside the host, on `PATH` or at the `shim` setting: the launch is refused
/// with a message naming each place it looked.
#[test]
fn a_missing_relay_shim_refuses_saying_where_it_looked() {
    let fx = world();
    // Under another name: a lone `relay-host` runs itself as the shim (see below).
    let host = fx.lone_host("lone", "relay-host-copy");
    let lone = host.parent().unwrap();
    let missing = fx.root.join("no-such-shim");
    fx.settings(json!({"claude_token_file": SETTING, "shim": missing,
                       "templates": [claude_template(&[], json!({}), &[])]}));
    let req = fx.request_file(&fx.claude_req("x7"));
    let out = finish(fx.lone_launch(&host, &req).spawn().unwrap(), TIMEOUT);
    let msg = assert_refused(&fx, &out, 71, "spawn_failed");
    for place in [
        lone.join("relay-shim").display().to_string(),
        "relay-shim on PATH".to_string(),
        format!("{} (the shim setting)", missing.display()),
    ] {
        assert!(msg.contains(&place), "{place:?} not in {msg}");
    }
    assert_nothing_left(&fx, "x7");
}

/// The folders come from the flags, else `$RELAY_CONFIG_DIR` / `$RELAY_STATE_DIR`, else
/// `~/.config/relay` and `~/.local/state/relay` (as `status --json` reports them).
#[test]
fn folders_come_from_flags_then_the_environment_then_the_defaults() {
    let fx = world();
    let status = |flags: &[&str], env: &[(&str, &str)]| -> serde_json::Value {
        let mut cmd = std::process::Command::new(relay_tests::relay_host());
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &fx.home)
            .envs(env.iter().copied())
            .args(flags)
            .args(["status", "--json"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let out = finish(cmd.spawn().unwrap(), TIMEOUT);
        // A fresh home: no token set and no `claude` installed, so no Claude session would
        // start logged in (78); the folders are reported all the same.
        assert_eq!(out.code, Some(78), "{}", out.stderr);
        serde_json::from_str(&out.stdout).unwrap()
    };
    let h = fx.home.display().to_string();
    let r = status(&[], &[]);
    assert_eq!(r["config_dir"], format!("{h}/.config/relay"));
    assert_eq!(r["state_dir"], format!("{h}/.local/state/relay"));
    let env = [
        ("RELAY_CONFIG_DIR", "/e/cfg"),
        ("RELAY_STATE_DIR", "/e/state"),
    ];
    let r = status(&[], &env);
    assert_eq!(r["config_dir"], "/e/cfg");
    assert_eq!(r["state_dir"], "/e/state");
    let r = status(&["--config-dir", "/f/cfg", "--state-dir", "/f/state"], &env);
    assert_eq!(r["config_dir"], "/f/cfg");
    assert_eq!(r["state_dir"], "/f/state");
}
