//! `run --resume ID` and `run --continue` through relay, and the line that says how to resume
//! through relay after a Claude session.

use super::*;

/// `cmd` with its stderr on a terminal (a pty): its exit code and what the terminal showed.
fn on_a_terminal(mut cmd: Command) -> (Option<i32>, String) {
    let (master, slave) = relay_tests::openpty();
    cmd.stderr(Stdio::from(slave));
    let out = finish(&mut cmd);
    drop(cmd);
    let shown = relay_tests::terminal_shown(master);
    (
        out.code,
        String::from_utf8_lossy(&shown).replace("\r\n", "\n"),
    )
}

#[test]
fn run_resumes_and_continues_through_relay_and_says_how_after_a_session() {
    let fx = world();
    // The agent writes a conversation where Claude Code keeps them.
    // ... in the project's own folder: only that folder comes back.
    // A project whose path has a space in it: the line that says how to resume quotes it.
    let project_dir = fx.project.join("my app");
    std::fs::create_dir(&project_dir).unwrap();
    let folder = relay_tests::transcript_folder(&project_dir.canonicalize().unwrap());
    let write = format!(
        "mkdir -p \"$CLAUDE_CONFIG_DIR/projects/{folder}\" && \
         echo '{{}}' > \"$CLAUDE_CONFIG_DIR/projects/{folder}/0b5e-conv.jsonl\""
    );
    let t = relay_tests::fake_agent_template(
        &["--sh", &write],
        json!({}),
        json!({"read_write": ["{project}", "{claude_config}"]}),
    );
    fx.settings(json!({"claude_token_file": "~/.config/acme-ltt/token", "templates": [t]}));
    let record = project_dir.join("rec.jsonl");
    let project = project_dir.to_str().unwrap();

    let (code, shown) = on_a_terminal(host(&fx, &["run", "-p", project, "--resume", "abc123"]));
    assert_eq!(code, Some(0), "{shown}");
    let rec = relay_tests::read_records(&record)
        .pop()
        .expect("a start line");
    let argv: Vec<&str> = rec["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        argv.windows(2).any(|w| w == ["--resume", "abc123"]),
        "{argv:?}"
    );
    assert_eq!(rec["token_fd_var"], "5", "logged in: {rec}");
    let want = format!(
        "relay-host run --project '{}' --resume 0b5e-conv",
        project_dir.canonicalize().unwrap().display()
    );
    assert!(shown.contains(&want), "{shown}");
    // Followed as printed, from another folder: the conversation resumes in that project.
    let (code, _, followed) = super::hints_followed::as_a_person(&fx, &want, &fx.home, b"");
    assert_eq!(code, Some(0), "{want}: {followed}");
    let rec = relay_tests::read_records(&record).pop().unwrap();
    assert!(
        rec["argv"]
            .as_array()
            .unwrap()
            .windows(2)
            .any(|w| w == [json!("--resume"), json!("0b5e-conv")]),
        "{rec}"
    );
    assert!(
        shown.contains("outside the sandbox, without the token"),
        "{shown}"
    );

    let (code, shown) = on_a_terminal(host(&fx, &["run", "-p", project, "--continue"]));
    assert_eq!(code, Some(0), "{shown}");
    let rec = relay_tests::read_records(&record).pop().unwrap();
    assert!(
        rec["argv"]
            .as_array()
            .unwrap()
            .contains(&json!("--continue")),
        "{rec}"
    );
    assert_eq!(rec["token_fd_var"], "5", "{rec}");

    let out = fx.host(&["run", "-p", project, "--continue", "--resume", "x"]);
    assert_eq!(out.code, Some(64), "{}", out.stderr);
}
