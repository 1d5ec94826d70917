//! After `kill -9` of the host, the shim cleans up: the project and the home hold only what they
//! held before, the session folder (and its socket) is gone, and the loss is recorded, before
//! any `gc`.

use super::*;
use relay_tests::fixture::alive;
use relay_tests::paths_under;

#[test]
fn after_kill_9_of_the_host_the_shim_leaves_nothing_in_the_project() {
    let fx = world();
    let (home_before, project_before) = (paths_under(&fx.home), paths_under(&fx.project));
    // A sandboxed shell with home and project read-write (it says `writes_home`; placeholders
    // in the project, none in the home) behind an allow-list (the proxy's socket in the session
    // folder).
    fx.settings(json!({"templates": [{"id": "shell", "command": ["/bin/sh"],
                                      "network": {"allow": ["127.0.0.1:9"]},
                                      "sandbox": {"read_write": ["~/", "{project}"]},
                                      "writes_home": true}]}));
    let bg = fx.launch_bg(&json!({"kind": "terminal", "template": "shell",
                                  "project": fx.project, "session_id": "k9",
                                  "extra_args": ["-c", "sleep 30"]}));
    assert!(
        wait_until(TIMEOUT, &|| !named_below(bg.id() as i32, "sleep")
            .is_empty()),
        "the session's sleep never ran"
    );
    let session = descendants(bg.id() as i32);
    assert_ne!(
        paths_under(&fx.project),
        project_before,
        "the launch made placeholders"
    );
    assert!(
        fx.state.join("sessions/k9/net.sock").exists(),
        "the proxy's socket"
    );

    // SAFETY: kill takes integers only; the host is this test's child.
    assert_eq!(unsafe { libc::kill(bg.id() as i32, libc::SIGKILL) }, 0);
    let ended = wait_until(Duration::from_secs(10), &|| {
        !session.iter().any(|&p| alive(p))
    });
    assert!(ended, "the session outlived its host");
    drop(bg);

    // Before any gc: nothing left.
    assert_eq!(
        paths_under(&fx.project),
        project_before,
        "a placeholder stayed in the project"
    );
    assert_eq!(
        paths_under(&fx.home),
        home_before,
        "a placeholder stayed in the home"
    );
    assert!(
        !fx.state.join("sessions/k9").exists(),
        "the session folder (and socket) stayed"
    );
    assert!(
        !fx.state.join("placeholders").exists(),
        "the placeholders' list stayed"
    );
    // The loss recorded once, by the shim, with the session's own end.
    let exits: Vec<Value> = fx
        .log("events.jsonl")
        .into_iter()
        .filter(|e| e["event"] == "exit")
        .collect();
    assert_eq!(exits.len(), 1, "{exits:?}");
    assert_eq!(exits[0]["session_id"], "k9");
    assert_eq!(exits[0]["outcome"], "host_lost", "{exits:?}");
    assert_eq!(exits[0]["code"], Value::Null);
    // The shim forwarded the host's death signal (SIGTERM) to the program inside the sandbox,
    // which died of it: bwrap reports that as its exit status, 128 + 15.
    assert_eq!(
        exits[0]["status"], 143,
        "SIGTERM forwarded by the shim: {exits:?}"
    );
    // status names no leftover, gc finds nothing to do.
    let r = fx.host(&["--json", "status"]).json("status --json");
    assert_eq!(r["leftovers"]["placeholders"], json!([]), "{r}");
    assert_eq!(r["leftovers"]["session_folders"], json!([]), "{r}");
    assert_eq!(r["leftovers"]["lost_sessions"], json!([]), "{r}");
    let gc = fx.host(&["--json", "gc"]).json("gc --json");
    assert_eq!(
        (gc["removed"].clone(), gc["host_lost"].clone()),
        (json!(0), json!(0)),
        "{gc}"
    );
}

#[test]
fn after_kill_9_of_the_host_a_conversation_is_kept_for_gc_to_carry_back() {
    let fx = world();
    let project_before = paths_under(&fx.project);
    // Claude Code's folder of the project's transcripts: only that folder comes back.
    let folder = relay_tests::transcript_folder(&fx.project.canonicalize().unwrap());
    let write = format!(
        "mkdir -p \"$CLAUDE_CONFIG_DIR/projects/{folder}\" && \
         echo '{{}}' > \"$CLAUDE_CONFIG_DIR/projects/{folder}/c0ffee.jsonl\" && sleep 30"
    );
    let t = relay_tests::fake_agent_template(
        &["--sh", &write],
        json!({}),
        json!({"read_write": ["{project}", "{claude_config}"]}),
    );
    fx.with_token(vec![t]);
    let bg = fx.launch_bg(&fx.claude_req("c9"));
    assert!(
        wait_until(TIMEOUT, &|| !named_below(bg.id() as i32, "sleep")
            .is_empty()),
        "the session's sleep never ran"
    );
    let session = descendants(bg.id() as i32);
    // SAFETY: kill takes integers only; the host is this test's child.
    assert_eq!(unsafe { libc::kill(bg.id() as i32, libc::SIGKILL) }, 0);
    let ended = wait_until(Duration::from_secs(10), &|| {
        !session.iter().any(|&p| alive(p))
    });
    assert!(ended, "the session outlived its host");
    drop(bg);
    let mut project_after = paths_under(&fx.project);
    project_after.retain(|p| p != "rec.jsonl");
    assert_eq!(
        project_after, project_before,
        "a placeholder stayed in the project"
    );
    // The session folder holds the conversation only (and which project it is of), until gc
    // carries it back.
    let left: Vec<String> = std::fs::read_dir(fx.state.join("sessions/c9"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut left = left;
    left.sort();
    assert_eq!(
        left,
        ["claude", "claude-project", "ended"],
        "only the conversation is kept"
    );
    let gc = fx.host(&["--json", "gc"]).json("gc --json");
    assert_eq!(gc["removed"], 1, "{gc}");
    assert!(!fx.state.join("sessions/c9").exists());
    assert!(
        fx.state
            .join(format!("claude/projects/{folder}/c0ffee.jsonl"))
            .is_file(),
        "gc carried the conversation back for a later --resume"
    );
}
