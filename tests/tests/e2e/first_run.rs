//! The first run of the built-in `claude-code` template in a new project, unattended: relay
//! counts the operator's project as Claude Code's trust answer, so the terminal UI starts at its
//! prompt instead of stopping at the trust dialog (whose cursor starts on "No, exit"). The
//! real Claude Code, a fresh Claude config (nothing seeded by the test), the fixture behind
//! `api_base_url`.
//!
//! And the trust answer belongs to its own project (issue 43, item 5): a session in project A
//! that writes into its own Claude config that project B is trusted does not answer B's trust
//! question for a later launch in B.
//!
//! Needs the binaries (`cargo build -p relay-host -p relay-shim -p relay-tests --bins`) and the
//! CLI (see `agent_turn.rs`).

use std::time::Duration;

use relay_tests::agent::{results_at, Setup, FINAL};
use relay_tests::messages_api::Step;
use relay_tests::tmux::at_prompt;

/// The trust dialog's own words (2.1.332).
fn trust_dialog(screen: &str) -> bool {
    screen.contains("No, exit")
}

/// The template as shipped (`trust_project` left out): the terminal UI of a fresh config
/// reaches its prompt with no trust dialog, and a typed prompt runs a turn whose Bash tool
/// writes into the project. Control: the same start with the template's `trust_project: false`
/// stops at the dialog.
#[test]
fn the_operators_project_is_claudes_trust_answer() {
    let s = Setup::fresh(|_, _| {
        vec![
            Step::bash("printf 'first run\\n' > first-run.txt"),
            Step::text(FINAL),
        ]
    });

    let mut settings = relay_tests::install::shipped_settings(&s.api.base_url());
    settings["templates"][0]["trust_project"] = serde_json::json!(false);
    s.settings(settings);
    let tmux = s.start_tui_as_configured();
    let (screen, seen) = tmux.wait(Duration::from_secs(60), &|t| {
        trust_dialog(t) || at_prompt(t)
    });
    assert!(
        seen && trust_dialog(&screen),
        "with trust_project false the trust dialog did not show:\n{screen}"
    );
    drop(tmux);

    s.write_settings_with(serde_json::json!({}));
    let tmux = s.start_tui();
    let (screen, ready) = tmux.wait(Duration::from_secs(60), &|t| {
        trust_dialog(t) || at_prompt(t)
    });
    assert!(
        ready && !trust_dialog(&screen),
        "the terminal UI stopped at the trust dialog:\n{screen}"
    );
    tmux.run(&["send-keys", "-t", "turn", "-l", "Run the scripted command."]);
    std::thread::sleep(Duration::from_millis(300));
    tmux.run(&["send-keys", "-t", "turn", "Enter"]);
    let file = s.project.join("first-run.txt");
    let (screen, done) = tmux.wait(Duration::from_secs(60), &|t| {
        t.contains(FINAL) && file.is_file()
    });
    s.report("the_operators_project_is_claudes_trust_answer");
    assert!(done, "the turn did not finish on screen:\n{screen}");
    tmux.run(&["send-keys", "-t", "turn", "-l", "/exit"]);
    std::thread::sleep(Duration::from_millis(300));
    tmux.run(&["send-keys", "-t", "turn", "Enter"]);
    assert!(
        tmux.gone(Duration::from_secs(20)),
        "relay-host did not end after /exit"
    );
    drop(tmux);
    s.assert_bearer_everywhere();
    s.assert_no_token_on_disk();
}

/// The Bash step that marks `project` trusted in the session's own Claude config
/// (`$CLAUDE_CONFIG_DIR/.claude.json`), then prints the projects the file names.
fn trust_elsewhere(project: &std::path::Path) -> Step {
    Step::bash(&format!(
        "python3 - <<'EOF'\nimport json, os\n\
         p = os.path.join(os.environ['CLAUDE_CONFIG_DIR'], '.claude.json')\n\
         d = json.load(open(p))\n\
         d.setdefault('projects', {{}})[{:?}] = {{'hasTrustDialogAccepted': True}}\n\
         json.dump(d, open(p, 'w'))\nprint('projects:', sorted(d['projects']))\nEOF",
        project.to_str().expect("a UTF-8 path")
    ))
}

/// The terminal UI in the fixture's project (B) with the template's `trust_project: false`:
/// true when it stops at the trust dialog, false when it reaches its prompt.
fn asks_for_trust(s: &Setup, settings: &serde_json::Value) -> bool {
    s.settings(settings.clone());
    let tmux = s.start_tui_as_configured();
    let (screen, seen) = tmux.wait(Duration::from_secs(60), &|t| {
        trust_dialog(t) || at_prompt(t)
    });
    assert!(seen, "neither the trust dialog nor the prompt:\n{screen}");
    eprintln!("{screen}");
    trust_dialog(&screen)
}

/// Issue 43 (5) with the real Claude Code: a print-mode turn in project A, whose Bash tool
/// writes `projects["<B>"].hasTrustDialogAccepted = true` into its own `.claude.json`; then the
/// terminal UI in project B (template `trust_project: false`) still shows B's trust dialog.
/// Control: B's answer written into the state folder's carried config (as a session in B would
/// leave it) is honoured, and the dialog does not show.
#[test]
fn a_session_in_one_project_does_not_answer_anothers_trust_question() {
    let mut b = None;
    let s = Setup::fresh(|project, _| {
        let project = project.canonicalize().unwrap();
        b = Some(project.clone());
        vec![trust_elsewhere(&project), Step::text(FINAL)]
    });
    let b = b.unwrap();
    let a = s.root.join("project-a");
    std::fs::create_dir(&a).unwrap();
    let turn = s.turn_in(&a, "Run the scripted command.");
    s.report("trust_elsewhere");
    s.assert_completed(&turn, 1);
    let printed = results_at(&s.api.main_requests(), 1).join("\n");
    assert!(
        printed.contains(&format!("'{}'", b.display())),
        "the session's .claude.json did not name project B: {printed}"
    );

    let mut settings = relay_tests::install::shipped_settings(&s.api.base_url());
    settings["templates"][0]["trust_project"] = serde_json::json!(false);
    assert!(
        asks_for_trust(&s, &settings),
        "a session in project A answered project B's trust question"
    );

    let carried = s.claude_config().join(".claude.json");
    let mut state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&carried).unwrap()).unwrap();
    state["projects"][b.to_str().unwrap()] = serde_json::json!({"hasTrustDialogAccepted": true});
    std::fs::write(&carried, state.to_string()).unwrap();
    assert!(
        !asks_for_trust(&s, &settings),
        "the control: B's own carried answer did not skip the dialog"
    );
    s.assert_no_token_on_disk();
}
