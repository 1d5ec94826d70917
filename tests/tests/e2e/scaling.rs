//! Launches whose profile is large, and what a launch leaves in the user's folders: a launch
//! with many read-write grants runs (the write-deny list is laid only where a later launch reads
//! it, so the command line grows by one bind per grant), and a session in a repository sees a
//! clean `git status` (every placeholder the host makes in the project is an empty folder, which
//! git does not list), with nothing left on the host afterwards.
//!
//! Runs the real `relay-host`, `relay-shim` and `bwrap` on the fake agent. Build the binaries
//! first: `cargo build --workspace --bins`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use relay_tests::git;
use relay_tests::run::finish_with;
use relay_tests::world::World;
use relay_tests::{fake_agent, files_under, read_records, sha256_hex};
use serde_json::{json, Value};

/// The deadline of one launch.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(60);

/// Sets the `claude-code` template's read-write grants to `{project}` and `grants`.
fn set_grants(fx: &World, grants: &[PathBuf]) {
    let path = fx.config.join("settings.json");
    let mut s: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut rw = vec![json!("{project}")];
    rw.extend(grants.iter().map(|g| json!(g)));
    s["templates"][0]["sandbox"]["read_write"] = Value::Array(rw);
    std::fs::write(&path, s.to_string()).unwrap();
}

/// A sandboxed launch with 100 read-write grants besides the project runs, and its agent gets
/// the token (by hash); no grant holds anything afterwards. (Before: the write-deny list was
/// laid under every grant, 2,600 placeholders and over 9,000 bwrap arguments, and the launch
/// failed.)
#[test]
fn a_launch_with_100_read_write_grants_runs() {
    let fx = World::agent(&fake_agent());
    let grants = fx.grant_folders(100);
    set_grants(&fx, &grants);
    let token = fx.fresh_token();
    let req = fx.request("many", true, "many", &[]);
    let out = fx.launch_file(&req, LAUNCH_TIMEOUT);
    let (code, text) = (out.code, format!("{}{}", out.stdout, out.stderr));
    assert_eq!(code, Some(0), "the launch: {text}");
    let recs = read_records(&fx.record);
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(
        recs[0]["token_sha256"],
        sha256_hex(token.as_bytes()),
        "{text}"
    );
    for g in &grants {
        assert!(
            files_under(g).is_empty(),
            "{} holds {:?}",
            g.display(),
            files_under(g)
        );
    }
}

/// Every entry under `dir` (recursively, not following links, `.git/objects` and the record
/// left out), as `relative path` plus `/` for a folder.
fn entries(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = relay_tests::entries_under(dir)
        .into_iter()
        .filter(|(rel, _)| !rel.starts_with(".git/objects") && rel != "record.jsonl")
        .map(|(rel, t)| if t.is_dir() { format!("{rel}/") } else { rel })
        .collect();
    out.sort();
    out
}

/// A session in a repository project runs `git status`: it lists nothing of the host's making
/// (the untracked-files list holds only the files the test and the agent write). While the session runs,
/// every entry the host added to the project is an empty folder (in `.git/`, the empty
/// `config.worktree` held read-only); afterwards the project is as
/// it was. (Before: the host made empty files such as `.bashrc`, `.gitconfig` and `.mcp.json`
/// in the project, `git status` listed them, and `git add -A` would have committed them.)
#[test]
fn a_session_in_a_repository_sees_a_clean_git_status() {
    let fx = World::agent(&fake_agent());
    git(&fx.project, &["init", "-q"]);
    std::fs::write(fx.project.join("README"), "hi\n").unwrap();
    git(&fx.project, &["add", "README"]);
    git(&fx.project, &["commit", "-qm", "one"]);
    let before = entries(&fx.project);
    let script = "sleep 1; git status --porcelain --untracked-files=all \
                  | grep -v -e '^?? status.txt$' -e '^?? record.jsonl$' > status.txt; \
                  echo done >> status.txt";
    // A token launch's request passes no agent flag: the template's command carries the script.
    let path = fx.config.join("settings.json");
    let mut settings: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let agent = settings["templates"][0]["command"][0].clone();
    settings["templates"][0]["command"] = json!([agent, "--sh", script]);
    std::fs::write(&path, settings.to_string()).unwrap();
    let req = fx.request("git", true, "git", &[]);
    let mut cmd = fx.launch_cmd(&req);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    relay_tests::wait_for_records(&fx.record, 1, LAUNCH_TIMEOUT);
    let during = entries(&fx.project);
    let out = finish_with(child, LAUNCH_TIMEOUT, &|| false);
    assert_eq!(out.code, Some(0), "{} {}", out.stdout, out.stderr);
    let added: Vec<&String> = during.iter().filter(|e| !before.contains(e)).collect();
    assert!(
        !added.is_empty(),
        "the host made no placeholder: {during:?}"
    );
    // In the working tree only empty folders; in `.git/` the one file git reads only when
    // `extensions.worktreeConfig` is on (held read-only, empty, so git reads nothing from it).
    for e in &added {
        assert!(
            e.ends_with('/') || *e == ".git/config.worktree",
            "the host made the file {e} in the project"
        );
    }
    let status = std::fs::read_to_string(fx.project.join("status.txt")).unwrap();
    assert_eq!(status, "done\n", "git status in the session");
    std::fs::remove_file(fx.project.join("status.txt")).unwrap();
    assert_eq!(entries(&fx.project), before, "left in the project");
}

/// A launch whose sandbox would need more arguments than bubblewrap parses (3,001 read-write
/// grants: three per bind, over its 9,000) is refused before anything starts, as
/// `sandbox_unavailable` naming the limit, and leaves no placeholder. (Before: binding by path
/// past 240 sources, then `spawn_failed` "Argument list too long".)
#[test]
fn a_launch_over_bubblewraps_argument_limit_is_refused_naming_it() {
    let fx = World::agent(&fake_agent());
    let grants = fx.grant_folders(3001);
    set_grants(&fx, &grants);
    let req = fx.request("over", true, "over", &[]);
    let out = fx.launch_file(&req, LAUNCH_TIMEOUT);
    let (code, text) = (out.code, format!("{}{}", out.stdout, out.stderr));
    let answer: Value = text
        .lines()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(|v| v["error"].is_string())
        })
        .unwrap_or_else(|| panic!("no error answer: {text}"));
    assert_eq!(answer["error"], "sandbox_unavailable", "{text}");
    let msg = answer["message"].as_str().unwrap();
    assert!(
        msg.contains("bwrap arguments, over the limit of 9000 (bubblewrap's MAX_ARGS)"),
        "{msg}"
    );
    assert_ne!(code, Some(0));
    assert!(read_records(&fx.record).is_empty(), "the agent ran");
    assert!(!fx.state.join("placeholders").exists(), "placeholders left");
}

/// A `shell` session (read-write `~`) in a project that is no repository cannot make one where
/// a later launch's git in that project would find it: neither in the project (`.git`) nor in
/// the folder above it (`~/src/.git`), by `mkdir` or by `git init`; afterwards neither exists.
/// (Before the write-deny round: `~/src/.git` was nobody's anchor, so `git init ~/src` worked,
/// and a later token launch's `git status` in `~/src/app` would have read its configuration.)
#[test]
fn a_session_cannot_make_a_repository_that_its_projects_git_would_find() {
    let fx = World::agent(&fake_agent());
    let src = fx.home.join("src");
    let app = src.join("app");
    std::fs::create_dir_all(&app).unwrap();
    let result = app.join("result.txt");
    let script = format!(
        "cd '{app}'; for d in '{src}' '{app}'; do mkdir \"$d/.git/x\" 2>/dev/null && echo \
         \"made $d/.git/x\"; git init -q \"$d\" 2>/dev/null && echo \"git init $d\"; done; \
         git rev-parse --show-toplevel 2>/dev/null || echo 'no repository'; echo end",
        app = app.display(),
        src = src.display()
    );
    let req = fx.root.join("shell.json");
    std::fs::write(
        &req,
        json!({"kind": "terminal", "template": "shell", "project": app, "sandbox": true,
               "extra_args": ["-c", format!("({script}) > '{}'", result.display())]})
        .to_string(),
    )
    .unwrap();
    let out = fx.launch_file(&req, LAUNCH_TIMEOUT);
    let (code, text) = (out.code, format!("{}{}", out.stdout, out.stderr));
    assert_eq!(code, Some(0), "{text}");
    let said = std::fs::read_to_string(&result).unwrap();
    assert_eq!(
        said, "no repository\nend\n",
        "the session made a repository"
    );
    for d in [&src, &app] {
        assert!(
            !d.join(".git").exists(),
            "{} left",
            d.join(".git").display()
        );
    }
}
