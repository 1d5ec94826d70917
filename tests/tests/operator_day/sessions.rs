//! `relay-host ps` and a second Claude launch in a project where one runs.

use super::*;

/// Starts session `id` (the fake agent sleeping 30 s; `sandbox`: with the token, the sleep in
/// the template's command, else in the request's `extra_args`) and waits until `ps` lists it.
fn start(fx: &World, id: &str, sandbox: bool) -> Running {
    let mut req = json!({"kind": "claude", "project": fx.project, "session_id": id,
                         "sandbox": sandbox});
    if sandbox {
        fx.set_agent_args(&["--sleep", "30"]);
    } else {
        req["extra_args"] = json!(["--sleep", "30"]);
    }
    let bg = fx.launch_bg(&req);
    let listed = wait_until(TIMEOUT, &|| ps(fx).iter().any(|s| s["id"] == id));
    assert!(listed, "ps never listed {id}");
    bg
}

#[test]
fn ps_lists_each_running_session_and_no_stale_record() {
    let fx = world();
    assert_eq!(ps(&fx), Vec::<Value>::new(), "nothing runs yet");
    let bg = start(&fx, "ps-one", true);
    let list = ps(&fx);
    assert_eq!(list.len(), 1, "{list:?}");
    let s = &list[0];
    assert_eq!(s["id"], "ps-one");
    assert_eq!(s["template"], "claude-code");
    assert_eq!(s["kind"], "claude");
    assert_eq!(s["project"], json!(fx.project.canonicalize().unwrap()));
    assert_eq!(s["token"], true, "{s}");
    assert_eq!(s["network"], "allow-list", "{s}");
    assert_eq!(s["host_pid"], bg.id() as i32, "{s}");
    let pid = s["pid"].as_i64().unwrap() as i32;
    assert!(descendants(bg.id() as i32).contains(&pid), "{s}");
    let started = s["started"].as_str().unwrap();
    assert!(
        started.len() == 20 && started.ends_with('Z') && started.as_bytes()[10] == b'T',
        "RFC 3339: {started}"
    );
    // The human table: a header, then the session's row.
    let out = fx.host(&["ps"]);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("PROJECT"),
        "{}",
        out.stdout
    );
    assert!(
        lines[1].starts_with("ps-one") && lines[1].contains(started),
        "{}",
        out.stdout
    );
    // `sessions` is the same command.
    assert_eq!(fx.host(&["sessions"]).stdout, out.stdout);

    // A record without a live session (a copy, its folder's lock not held) is not shown.
    let ghost = fx.state.join("sessions/ghost");
    std::fs::create_dir(&ghost).unwrap();
    let record = std::fs::read_to_string(fx.state.join("sessions/ps-one/session.json")).unwrap();
    std::fs::write(
        ghost.join("session.json"),
        record.replace("ps-one", "ghost"),
    )
    .unwrap();
    std::fs::write(ghost.join("lock"), "").unwrap();
    assert_eq!(ps(&fx).len(), 1, "a stale record is not a session");

    // SAFETY: kill takes integers only; the host is this test's child.
    unsafe { libc::kill(bg.id() as i32, libc::SIGTERM) };
    bg.finish(TIMEOUT);
    assert_eq!(ps(&fx), Vec::<Value>::new(), "an ended session is gone");
    assert!(fx.host(&["ps"]).stdout.starts_with("no session runs"));
}

#[test]
fn a_second_claude_launch_in_a_running_project_is_warned_or_refused() {
    let fx = world();
    // The first without the sandboxed token (so it may sleep through its extra_args), the
    // others with it.
    let _first = start(&fx, "first", false);
    // Default ("warn"): the launch runs, and stderr names the session already there.
    let out = finish(host(&fx, &["launch"]).arg(claude_req(&fx, "second")));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let warning: Value = serde_json::from_str(out.stderr.lines().next().unwrap()).unwrap();
    let text = warning["warning"].as_str().expect("a warning line");
    assert!(
        text.contains("session first") && text.contains("relay-host ps"),
        "{text}"
    );
    // "refuse": invalid_spec, naming it; nothing started.
    fx.edit_settings(|s| s["templates"][0]["same_project"] = json!("refuse"));
    let out = finish(host(&fx, &["launch"]).arg(claude_req(&fx, "third")));
    assert_eq!(out.code, Some(64), "{}", out.stderr);
    let answer = out.answer();
    assert_eq!(answer["error"], "invalid_spec", "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.contains("\"first\" already runs there"),
        "{message}"
    );
    assert!(!fx.state.join("sessions/third").exists());
    // "allow": no word.
    fx.edit_settings(|s| s["templates"][0]["same_project"] = json!("allow"));
    let out = finish(host(&fx, &["launch"]).arg(claude_req(&fx, "fourth")));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
}
