//! The first run of the built-in `claude-code` template in a new project, unattended: relay
//! counts the operator's project as Claude Code's trust answer, so the terminal UI starts at its
//! prompt instead of stopping at the trust dialog (whose cursor starts on "No, exit"). The
//! real Claude Code, a fresh Claude config (nothing seeded by the test), the fixture behind
//! `api_base_url`.
//!
//! Needs the binaries (`cargo build -p relay-host -p relay-shim -p relay-tests --bins`) and the
//! CLI (see `agent_turn.rs`).

use std::time::Duration;

use relay_tests::agent::{Setup, FINAL};
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
    std::fs::write(s.config.join("settings.json"), settings.to_string()).unwrap();
    let tmux = s.start_tui_as_configured();
    let (screen, seen) = tmux.wait(Duration::from_secs(60), &|t| {
        trust_dialog(t) || at_prompt(t)
    });
    assert!(
        seen && trust_dialog(&screen),
        "with trust_project false the trust dialog did not show:\n{screen}"
    );
    drop(tmux);

    s.write_settings();
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
