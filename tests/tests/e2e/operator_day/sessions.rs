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

/// True once the process `pid` (a child of this test, not reaped) has ended.
fn exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rfind(')')
            .is_some_and(|i| s[i + 1..].trim_start().starts_with('Z'))
    })
}

/// Two Claude launches in one project started at the same moment, three times for each rule:
/// with `"same_project": "refuse"` exactly one runs and the other is refused (64, naming the
/// one that runs); with `"warn"` both run and exactly one is warned. The check and the record
/// are one step (a per-project lock held from before the check until the record exists).
#[test]
fn same_project_holds_for_launches_started_at_the_same_moment() {
    for rule in ["refuse", "warn"] {
        for round in 0..3 {
            let fx = world();
            fx.set_agent_args(&["--sleep", "30"]);
            fx.edit_settings(|s| s["templates"][0]["same_project"] = json!(rule));
            let (a, b) = (format!("a{round}"), format!("b{round}"));
            let (ra, rb) = (
                fx.request_file(&fx.claude_req(&a)),
                fx.request_file(&fx.claude_req(&b)),
            );
            let hosts = [
                Running::new(host(&fx, &["launch"]).arg(&ra).spawn().unwrap()),
                Running::new(host(&fx, &["launch"]).arg(&rb).spawn().unwrap()),
            ];
            let settled = || {
                let ended = hosts.iter().filter(|h| exited(h.id())).count();
                ps(&fx).len() + ended == 2
            };
            assert!(
                wait_until(TIMEOUT, &settled),
                "{rule} {round}: never settled"
            );
            let listed = ps(&fx).len();
            for h in &hosts {
                // SAFETY: kill takes integers only; the host is this test's child.
                unsafe { libc::kill(h.id() as i32, libc::SIGTERM) };
            }
            let outs: Vec<Out> = hosts.into_iter().map(|h| h.finish(TIMEOUT)).collect();
            let what = format!("{rule}, round {round}: {listed} listed; {outs:?}");
            if rule == "refuse" {
                assert_eq!(listed, 1, "{what}");
                let refused: Vec<&Out> = outs.iter().filter(|o| o.code == Some(64)).collect();
                assert_eq!(refused.len(), 1, "{what}");
                assert!(refused[0].stderr.contains("already runs there"), "{what}");
            } else {
                assert_eq!(listed, 2, "{what}");
                let warned = outs.iter().filter(|o| o.stderr.contains("warning")).count();
                assert_eq!(warned, 1, "{what}");
            }
        }
    }
}
