//! `demo-turn`: one real agent turn, shown to a person. The pinned Claude Code CLI
//! (`RELAY_TEST_CLAUDE`, as `scripts/test` installs it) is launched by the real `relay-host`,
//! sandboxed, with a made-up token on fd 5, against the local Messages API fixture, which plays
//! a script: the Bash tool runs `git status` and writes a file, the Write tool makes another,
//! then a final text. Prints the tool calls and what they returned, the files changed in the
//! project (by `git status` on the host), the hosts the proxy refused, and where the token
//! went (by hash): panics, naming what, if it reached anything but the API.
//!
//! `cargo build --workspace --bins && RELAY_TEST_CLAUDE=.tools/claude-code/node_modules/.bin/claude target/debug/demo-turn`

use relay_tests::agent::{Setup, FINAL};
use relay_tests::messages_api::Step;
use serde_json::json;

fn main() {
    let s = Setup::new(|project, _| {
        vec![
            Step::bash("git status --short; printf 'made by the Bash tool\\n' > from-bash.txt"),
            Step::tool(
                "Write",
                json!({"file_path": project.join("from-write.txt"),
                       "content": "made by the Write tool\n"}),
            ),
            Step::text(FINAL),
        ]
    });
    println!("project: {} (a git repository)", s.project.display());
    let turn = s.turn("Run the scripted demo.");
    s.assert_completed(&turn, 2);
    println!(
        "turn: Claude Code ran it in relay's sandbox in {:.1} s",
        turn.took.as_secs_f64()
    );
    let calls = [
        "Bash: git status --short; printf ... > from-bash.txt",
        "Write: from-write.txt",
    ];
    for (i, call) in calls.iter().enumerate() {
        let results = relay_tests::agent::results_at(&s.api.main_requests(), i + 1);
        let first = results.first().and_then(|r| r.lines().next()).unwrap_or("");
        println!("  tool call {}: {call}\n    returned: {first}", i + 1);
    }
    let status = s.git(&["status", "--short"]);
    println!("files changed (git status on the host):");
    for line in String::from_utf8_lossy(&status.stdout).lines() {
        println!("  {line}");
    }
    println!("hosts refused by the allow-list: {:?}", s.denied());
    s.assert_bearer_everywhere();
    s.assert_no_token_on_disk();
    println!(
        "token: reached only the API ({} requests, each with the token as its Bearer, by hash); \
         no file, log or event holds it",
        s.api.seen().len()
    );
}
