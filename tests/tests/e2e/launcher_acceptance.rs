//! Acceptance the project keeps: `tests/acceptance/launcher.py`, a launcher written in Python
//! (stdlib only) from the documented protocol alone, drives the real `relay-shim` and
//! `relay-host launch --json`, checks every row of DESIGN.md's environment table for the shim
//! and each answer; each answer line it read is then checked here against
//! `docs/schema/launch-answer.schema.json`, and every row of `events.jsonl` against
//! `docs/schema/events.schema.json`.

use std::path::Path;
use std::process::Command;

use relay_tests::schema::Schema;
use relay_tests::world::World;

#[test]
fn a_python_launcher_from_the_docs_alone_gets_what_they_say() {
    let fx = World::agent(&relay_tests::fake_agent());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("acceptance/launcher.py");
    let out = Command::new("python3")
        .arg(&script)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("RELAY_SHIM", relay_tests::relay_shim())
        .env("RELAY_HOST", &fx.host)
        .env("FAKE_AGENT", relay_tests::fake_agent())
        .env("CONFIG_DIR", &fx.config)
        .env("STATE_DIR", &fx.state)
        .env("HOME", &fx.home)
        .env("PROJECT", &fx.project)
        .env("FAKE_AGENT_RECORD", &fx.record)
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\n{stdout}");
    let answers = Schema::load("launch-answer.schema.json");
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("an answer line is JSON"))
        .collect();
    assert!(lines.len() >= 9, "{stdout}");
    for a in &lines {
        answers.assert_valid(a);
    }
    let events = Schema::load("events.schema.json");
    for row in fx.log("events.jsonl") {
        events.assert_valid(&row);
    }
}

#[test]
fn the_validator_refuses_what_the_schema_refuses() {
    let answers = Schema::load("launch-answer.schema.json");
    let ok = serde_json::json!({"event": "exit", "version": 1, "session_id": "s1", "code": 137,
                                "signal": 9, "ts": 1});
    answers.assert_valid(&ok);
    for bad in [
        serde_json::json!({"event": "exit", "version": 1, "session_id": "s1", "code": 137,
                           "status": 137, "signal": 9, "ts": 1}),
        serde_json::json!({"event": "exit", "session_id": "s1", "code": 137, "status": 137, "ts": 1}),
        serde_json::json!({"event": "launch", "version": 1, "status": 201, "session_id": "-x",
                           "pid": 3, "token_mode": "pipe", "template": "t", "ts": 1}),
        serde_json::json!({"event": "launch", "version": 1, "status": 400, "error": "invalid_spec",
                           "message": "m", "ts": 1}),
    ] {
        assert!(!answers.errors(&bad).is_empty(), "{bad} passed");
    }
    let request = Schema::load("launch-request.schema.json");
    request.assert_valid(
        &serde_json::json!({"kind": "claude", "project": "/p", "extra_args": ["-p"]}),
    );
    assert!(!request
        .errors(&serde_json::json!({"kind": "claude", "claude_token": "x"}))
        .is_empty());
}
