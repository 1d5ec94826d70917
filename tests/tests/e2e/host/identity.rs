//! The launch identity: a kind `claude` launch runs the shim with `--identity` (secret at 3,
//! status at 4, token at 5) and starts only after the bridge confirmed the shim's Hello.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Stdio;

use serde_json::{json, Value};

use super::*;

/// The events of one session, by name, in order.
fn events_of(fx: &World, id: &str) -> Vec<Value> {
    fx.log("events.jsonl")
        .into_iter()
        .filter(|e| e["session_id"] == id)
        .collect()
}

/// No `bridge-*` folder (nor its socket) is left in the state folder.
fn assert_no_bridge_left(fx: &World) {
    let left: Vec<String> = fs::read_dir(&fx.state)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("bridge-"))
        .collect();
    assert!(left.is_empty(), "bridge folders left: {left:?}");
}

/// A kind `claude` launch: `hello_ok` (the shim's pid), then `started` (the session's), then
/// the 201 answer; the session gets the token on fd 5 and neither fd 3 nor 4, and no bridge
/// variable. A terminal launch of the same template keeps the old layout: no Hello.
#[test]
fn a_claude_launch_says_hello_before_it_starts() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let out = fx.launch(&fx.claude_req("h1"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let rec = &fx.wait_records(1)[0];
    assert_got_token(rec, &fx.token); // fds exactly [0, 1, 2, 5]
    assert!(rec["env"].get("RELAY_BRIDGE_SOCKET").is_none(), "{rec}");
    let events = events_of(&fx, "h1");
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["hello_ok", "started", "launch", "exit"],
        "{events:?}"
    );
    let (shim, session) = (&events[0]["pid"], &events[1]["pid"]);
    assert!(shim.as_i64().unwrap() > 0 && session.as_i64().unwrap() > 0);
    assert_ne!(
        shim, session,
        "hello_ok names the shim, started the session"
    );
    assert_eq!(events[2]["pid"], *session);
    assert_started(&fx, "h1", "fd");
    assert_no_bridge_left(&fx);

    let out = fx.launch(&json!({"kind": "terminal", "template": "claude-code",
                               "session_id": "h2", "project": fx.project}));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_got_token(&fx.wait_records(2)[1], &fx.token);
    let names: Vec<Value> = events_of(&fx, "h2")
        .iter()
        .map(|e| e["event"].clone())
        .collect();
    assert_eq!(names, [json!("launch"), json!("exit")]);
}

/// A `relay-shim` stand-in beside the host that never says Hello, but claims `hello_ok` (or
/// reports `started` alone) and then keeps running: the launch is refused `spawn_failed`,
/// naming the event, and nothing is left running or behind.
#[test]
fn a_shim_that_skips_the_hello_is_refused() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let host = fx.lone_host("lone", "relay-host");
    let lone = host.parent().unwrap();
    let cases = [
        (
            "printf '{\"event\":\"hello_ok\",\"pid\":%d}\\n' $$ >&4\n",
            "the bridge got no Hello",
        ),
        ("", "without a confirmed Hello"),
    ];
    for (i, (claim, says)) in cases.iter().enumerate() {
        let stand_in = lone.join("relay-shim");
        fs::write(
            &stand_in,
            format!(
                "#!/bin/sh\n{claim}printf '{{\"event\":\"started\",\"pid\":%d}}\\n' $$ >&4\n\
                 exec sleep 30\n"
            ),
        )
        .unwrap();
        fs::set_permissions(&stand_in, fs::Permissions::from_mode(0o755)).unwrap();
        let id = format!("stand-in-{i}");
        let req = fx.request_file(&fx.claude_req(&id));
        let out = finish(fx.lone_launch(&host, &req).spawn().unwrap(), TIMEOUT);
        let msg = assert_refused(&fx, &out, 71, "spawn_failed");
        assert!(msg.contains(says), "{msg}");
        assert!(!fx.session_dir(&id).exists(), "session folder left behind");
        assert!(fx.records().is_empty(), "{:?}", fx.records());
        let running = relay_tests::fixture::processes_with_env(fx.record.to_str().unwrap());
        assert!(running.is_empty(), "left running: {running:?}");
        assert_only_logs_left(&fx);
    }
}

/// The real shim handed a wrong secret on fd 3 (a wrapper beside the host swaps it): it says
/// Hello, the bridge refuses it, the shim reports `hello_refused` and the launch is refused
/// with both sides' words; nothing started.
#[test]
fn a_hello_with_the_wrong_secret_is_refused() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let host = fx.lone_host("lone", "relay-host");
    let lone = host.parent().unwrap();
    let wrong = lone.join("wrong-secret");
    fs::write(&wrong, "0".repeat(64)).unwrap();
    let wrapper = lone.join("relay-shim");
    fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec 3<'{}'\nexec '{}' \"$@\"\n",
            wrong.display(),
            relay_tests::relay_shim().display()
        ),
    )
    .unwrap();
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)).unwrap();
    let req = fx.request_file(&fx.claude_req("w1"));
    let mut out = finish(fx.lone_launch(&host, &req).spawn().unwrap(), TIMEOUT);
    // The shim's own diagnostic shares the session's stderr; the host's answer is the rest.
    let (shim_lines, host_lines): (Vec<&str>, Vec<&str>) = out
        .stderr
        .lines()
        .partition(|l| l.starts_with("relay-shim: "));
    assert_eq!(
        shim_lines,
        ["relay-shim: --identity: the Hello was refused: the bridge did not confirm this session"]
    );
    out.stderr = host_lines.join("\n");
    let msg = assert_refused(&fx, &out, 71, "spawn_failed");
    assert!(
        msg.contains("{\"event\":\"hello_refused\",\"reason\":\"not_ok\"}"),
        "{msg}"
    );
    assert!(msg.contains("the Hello carries the wrong secret"), "{msg}");
    assert!(fx.records().is_empty(), "{:?}", fx.records());
    assert_only_logs_left(&fx);
}

/// Two status lines that arrive in one read (`no_identity` and `started`, written at once by a
/// stand-in shim that then keeps running) are both seen: the launch answers 201 at once rather
/// than waiting on the pipe for a line that is already buffered.
#[test]
fn status_lines_read_together_are_all_seen() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let host = fx.lone_host("lone", "relay-host");
    let lone = host.parent().unwrap();
    let stand_in = lone.join("relay-shim");
    fs::write(
        &stand_in,
        "#!/bin/sh\nprintf '{\"event\":\"no_identity\"}\\n{\"event\":\"started\",\"pid\":%d}\\n' \
         $$ >&3\nexec sleep 60\n",
    )
    .unwrap();
    fs::set_permissions(&stand_in, fs::Permissions::from_mode(0o755)).unwrap();
    let req = fx.request_file(&json!({"kind": "terminal", "template": "claude-code",
                                      "session_id": "t1", "project": fx.project}));
    let mut cmd = fx.lone_launch(&host, &req);
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let running = Running::new(cmd.spawn().unwrap());
    let start = std::time::Instant::now();
    let answer = loop {
        if let Some(a) = events_of(&fx, "t1")
            .into_iter()
            .find(|e| e["event"] == "launch")
        {
            break a;
        }
        assert!(start.elapsed() < TIMEOUT, "no answer");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(answer["status"], 201, "{answer}");
    drop(running);
}
