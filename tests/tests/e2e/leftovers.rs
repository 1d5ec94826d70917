//! Nothing left in the project: the empty mount points Claude Code's own tool sandbox makes in a
//! project (`.env*`, `package.json`, `node_modules/`, `.git/commondir` holding `.` ...) are gone
//! once the session ended; a host killed first leaves them listed, `status` names them and `gc`
//! removes them; a leftover `.git/commondir` from before never blocks the next token launch.
//!
//! Needs the binaries (`cargo build -p relay-host -p relay-shim -p relay-tests --bins`) and, for
//! the real turn, the CLI (see `agent_turn.rs`).

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::{Duration, Instant};

use relay_tests::agent::{entries_under, Setup, FINAL};
use relay_tests::fixture::Layout;
use relay_tests::messages_api::Step;
use relay_tests::world::World;
use serde_json::{json, Value};

/// What the shell makes: the tool sandbox's mount points, empty, and one file of such a name
/// that it fills (`package-lock.json`, which stays). Not `.git/config.worktree`, one of its
/// names too: git reads it as configuration, so the write-deny list holds it (no session
/// writes it, and relay's placeholder goes with the others).
const MAKE: &str = ": > .env; : > .env.local; : > package.json; mkdir -p node_modules/.bin; \
                    printf . > .git/commondir; mkdir .git/remotes; \
                    printf '{\"lockfileVersion\": 3}' > package-lock.json";

/// The deadline of one launch.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(60);

/// The empty entries [`MAKE`] leaves (relative to the project).
const MADE: [&str; 7] = [
    ".env",
    ".env.local",
    "package.json",
    "node_modules/",
    "node_modules/.bin/",
    ".git/commondir",
    ".git/remotes/",
];

/// A world whose project is a git repository, and settings: a sandboxed `shell` template (the
/// project read-write, no network) and a `claude-code` template running the fake agent with the
/// token.
fn world() -> World {
    let f = World::builder()
        .layout(Layout::agent("relay-leftovers."))
        .newline(false)
        .build();
    relay_tests::git(&f.project, &["init", "-q"]);
    f.with_token(vec![
        json!({"id": "shell", "command": ["/bin/sh"], "network": "none",
               "sandbox": {"read_write": ["{project}"]}}),
        json!({"id": "claude-code", "command": [relay_tests::fake_agent()],
               "sandbox": {"read_write": ["{project}"]}}),
    ]);
    f
}

/// A `shell` request running `script` in the project.
fn shell(f: &World, script: &str) -> Value {
    json!({"kind": "terminal", "template": "shell", "project": f.project,
           "extra_args": ["-c", script]})
}

/// `relay-host --json status`, parsed.
fn status(f: &World) -> Value {
    let out = f.host(&["--json", "status"]);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.describe()))
}

/// The session's mount points are gone once it ends; the file it filled stays.
#[test]
fn a_session_leaves_no_empty_mount_point() {
    let f = world();
    let before = entries_under(&f.project);
    let out = f.launch_for(&shell(&f, MAKE), LAUNCH_TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let after = entries_under(&f.project);
    let new: BTreeSet<&str> = after.difference(&before).map(String::as_str).collect();
    assert_eq!(new, BTreeSet::from(["package-lock.json"]));
    assert!(!f.state.join("watched").exists(), "the list is gone");
}

/// A host killed while its session runs leaves the mount points: `status` names them (and
/// removes nothing), `gc` removes them, and the project is as before.
#[test]
fn after_kill_9_status_names_and_gc_removes_the_mount_points() {
    let f = world();
    let before = entries_under(&f.project);
    let script = format!("{MAKE}; : > ready; exec sleep 30");
    let req = f.root.join("request.json");
    std::fs::write(&req, shell(&f, &script).to_string()).unwrap();
    let mut cmd = f.host_cmd();
    cmd.arg("launch")
        .arg(&req)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let ready = f.project.join("ready");
    let start = Instant::now();
    while !ready.exists() && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(ready.exists(), "the session never got ready");
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_file(&ready).unwrap();
    // The session's processes end with the host (status reports nothing while one runs).
    let start = Instant::now();
    let mut r = status(&f);
    while r["leftovers"]["sandbox_mount_points"] == json!([])
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(100));
        r = status(&f);
    }
    let named: BTreeSet<String> = r["leftovers"]["sandbox_mount_points"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    let want: BTreeSet<String> = MADE
        .iter()
        .map(|m| {
            f.project
                .join(m.trim_end_matches('/'))
                .display()
                .to_string()
        })
        .collect();
    assert_eq!(named, want, "{r}");
    let warned = r["warnings"].as_array().unwrap().iter().any(|w| {
        let w = w.as_str().unwrap();
        w.contains("relay-host gc") && w.contains(".git/commondir")
    });
    assert!(warned, "{r}");
    assert!(f.project.join(".env").exists(), "status removed something");

    let out = f.host(&["--json", "gc"]);
    let r: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(r["sandbox_leftovers_removed"], MADE.len(), "{r}");
    let after = entries_under(&f.project);
    let new: BTreeSet<&str> = after.difference(&before).map(String::as_str).collect();
    assert_eq!(new, BTreeSet::from(["package-lock.json"]));
}

/// A `.git/commondir` holding `.` left from before (no list names it) does not block the next
/// token launch: it redirects nothing, so the launch removes it and runs. One that names another
/// folder still refuses it, saying how to recover.
#[test]
fn a_leftover_commondir_does_not_block_the_next_token_launch() {
    let f = world();
    let commondir = f.project.join(".git/commondir");
    std::fs::write(&commondir, ".").unwrap();
    let req = json!({"kind": "claude", "project": f.project});
    let out = f.launch_for(&req, LAUNCH_TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    assert!(!commondir.exists(), "the leftover stayed");

    std::fs::write(&commondir, "/elsewhere\n").unwrap();
    let out = f.launch_for(&req, LAUNCH_TIMEOUT);
    assert_eq!(out.code, Some(64), "{}", out.describe());
    assert!(
        out.stderr.contains("commondir") && out.stderr.contains("remove it"),
        "{}",
        out.describe()
    );
    assert!(commondir.exists(), "a real redirect was removed");
}

/// The real Claude Code with its own tool sandbox forced by the operator's seed settings
/// (`claude-seed/settings.json`, `env.CLAUDE_CODE_SUBPROCESS_ENV_SCRUB`): its Bash call fails
/// inside relay's sandbox and it makes its mount points; once the turn ended the project holds
/// only the file the Write tool made, and the next token launch there runs.
#[test]
fn a_turn_with_claudes_own_sandbox_leaves_only_what_it_wrote() {
    let s = Setup::new(|project, _| {
        vec![
            Step::bash("printf 'not run\\n' > bash.txt"),
            Step::tool(
                "Write",
                json!({"file_path": project.join("written.txt"), "content": "written\n"}),
            ),
            Step::text(FINAL),
        ]
    });
    let seed = s.config.join("claude-seed");
    std::fs::create_dir_all(&seed).unwrap();
    let forced = json!({"env": {"CLAUDE_CODE_SUBPROCESS_ENV_SCRUB": "1"}});
    std::fs::write(seed.join("settings.json"), forced.to_string()).unwrap();
    let before = s.entries();
    let turn = s.turn("Do the scripted work.");
    s.report("claudes_own_sandbox");
    s.assert_completed(&turn, 2);
    let bash = relay_tests::agent::results_at(&s.api.main_requests(), 1);
    assert!(
        bash.iter().any(|r| r.contains("Sandbox is required")),
        "Claude Code's own sandbox did not run: {bash:?}"
    );
    s.assert_left_only(&before, &["written.txt"]);
    let again = s.turn("Do it again.");
    assert_eq!(again.code, Some(0), "{}", again.describe());
    s.assert_no_token_on_disk();
}
