//! Stand-in mode's inputs are out of every session's reach: `upstream_ca_file` is read by
//! relay-host once per launch, checked against every read-write grant (the launch's own project
//! included) by its path as written, each symlink on the way and its real path, and handed to
//! `relay-stand-in` as bytes; a CA file a session could write (in the launch's project, or
//! through a link in `~`, the `shell` template's grant) refuses the launch before anything
//! starts. End to end with the real binaries and no Claude.
//!
//! Run: `cargo test -p relay-tests --test e2e -- stand_in_inputs::`. Linux only (bwrap's namespaces).
#![cfg(target_os = "linux")]

use std::path::Path;

use relay_tests::fake_agent;
use relay_tests::run::Out;
use relay_tests::tls::TestCa;
use relay_tests::world::{World, SCRIPT_TIMEOUT};
use serde_json::json;

/// The session: it records that it ran and what fd 5 held (its hash).
fn script(fx: &World) -> std::path::PathBuf {
    let p = fx.project.display();
    let text = format!("#!/bin/sh\ncat <&5 | sha256sum | cut -d' ' -f1 > {p}/fd5.sha\n");
    let path = fx.project.join("probe.sh");
    std::fs::write(&path, text).unwrap();
    path
}

/// A stand-in template running `script`, `upstream_ca_file` at `ca`.
fn settings(fx: &World, script: &Path, ca: &Path) {
    let s = json!({
        "claude_token_file": "~/.config/acme-ltt/token",
        "upstream_ca_file": ca,
        "templates": [{
            "id": "claude-code",
            "command": ["/bin/sh", script],
            "sandbox": {"read_write": ["{project}"]},
            "network": {"allow": []},
            "api_base_url": "https://127.0.0.1:9",
            "token_mode": "stand_in",
        }],
    });
    fx.settings(s);
}

fn status(fx: &World) -> serde_json::Value {
    let out = std::process::Command::new(&fx.host)
        .arg("--config-dir")
        .arg(&fx.config)
        .arg("--state-dir")
        .arg(&fx.state)
        .args(["status", "--json"])
        .env("HOME", &fx.home)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_default()
}

/// The launch was refused as `sandbox_unavailable` with `words`, and nothing ran.
fn assert_refused(fx: &World, out: &Out, words: &str) {
    let stderr = &out.stderr;
    assert_eq!(out.code, Some(78), "{stderr}");
    assert!(stderr.contains("sandbox_unavailable"), "{stderr}");
    assert!(stderr.contains(words), "{stderr}");
    assert!(!fx.project.join("fd5.sha").exists(), "the session ran");
}

/// A CA file inside the folder that a stand-in launch then takes as its project: relay-host's
/// settings check (no project) accepts it, and the launch, whose project is a read-write grant
/// of its own, refuses it, naming the file and the grant; nothing starts. The same file outside
/// every grant: the session runs.
#[test]
fn a_ca_file_in_the_launchs_own_project_refuses_the_launch() {
    let fx = World::agent(&fake_agent());
    fx.fresh_token();
    let probe = script(&fx);
    let ca = fx.project.join("ca.pem");
    TestCa::new().write_pem(&ca);
    settings(&fx, &probe, &ca);
    assert!(status(&fx)["settings_error"].is_null(), "no project yet");
    let out = fx.launch_session("inproject", &[], SCRIPT_TIMEOUT);
    let words = format!(
        "upstream_ca_file {c}: {c} lies inside the read-write grant {p}, where a session could \
         add a CA of its own",
        c = ca.display(),
        p = fx.project.display()
    );
    assert_refused(&fx, &out, &words);
    // Outside every grant: it runs.
    let outside = fx.root.join("ca.pem");
    std::fs::rename(&ca, &outside).unwrap();
    settings(&fx, &probe, &outside);
    let out = fx.launch_session("outside", &[], SCRIPT_TIMEOUT);
    assert!((out.code == Some(0)), "{out:?}");
    assert!(fx.project.join("fd5.sha").exists(), "the session ran");
}

/// `upstream_ca_file` written as a symlink in `~` (the read-write grant of a `shell` template
/// that writes the home, `"writes_home": true`) to a file outside every grant: a session could
/// repoint the link, so `status` names it and a launch is refused before anything starts.
#[test]
fn a_ca_file_reached_through_a_link_a_session_could_repoint_is_refused() {
    let fx = World::agent(&fake_agent());
    fx.fresh_token();
    let probe = script(&fx);
    let real = fx.root.join("ca.pem");
    TestCa::new().write_pem(&real);
    let link = fx.home.join("ca.pem");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    settings(&fx, &probe, &link);
    fx.edit_settings(|s| {
        let shell = json!({"id": "shell", "sandbox": {"read_write": ["~/"]}, "writes_home": true});
        s["templates"].as_array_mut().unwrap().push(shell);
    });
    let words = format!(
        "upstream_ca_file {l}: {l} lies inside the read-write grant {h}",
        l = link.display(),
        h = fx.home.display()
    );
    let status = status(&fx);
    let error = status["settings_error"].as_str().unwrap_or_default();
    assert!(error.contains(&words), "{status}");
    let out = fx.launch_session("link", &[], SCRIPT_TIMEOUT);
    assert_refused(&fx, &out, &words);
}
