//! git in the projects people have, end to end: real turns of Claude Code (the built-in
//! template as shipped) that commit in a linked worktree and in a project with a submodule,
//! the commits in the host's repositories; and relay's git running only in the git folders the
//! launch found, never in one a session made inside a submodule's writable git folder. (The
//! scripted commits and the write-deny rules of worktrees and submodules are
//! `git_worktrees.rs`'s.)
//!
//! Needs the binaries (`cargo build -p relay-host -p relay-shim -p relay-tests --bins`) and, for
//! the real turns, the CLI (see `agent_turn.rs`). Linux only (bwrap).
#![cfg(target_os = "linux")]

use std::path::Path;

use relay_tests::agent::{results_at, Setup, FINAL};
use relay_tests::git;
use relay_tests::messages_api::Step;
use relay_tests::world::{ScriptAt, TokenScript, World};

/// A repository in `dir` with one committed file `f`.
fn repository(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("f"), "one\n").unwrap();
    git(dir, &["add", "f"]);
    git(dir, &["commit", "-qm", "one"]);
}

/// The project a repository with the submodule `sub` (cloned from `<root>/subsrc`), committed.
fn submodule_world(project: &Path, root: &Path) {
    let src = root.join("subsrc");
    repository(&src);
    if !project.join(".git").exists() {
        repository(project);
    }
    git(
        project,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            src.to_str().unwrap(),
            "sub",
        ],
    );
    git(project, &["commit", "-qm", "add sub"]);
}

/// `NAME rc=N` into `$seen` after `command` (its output dropped).
fn step(name: &str, command: &str) -> String {
    format!("{command} >/dev/null 2>&1; echo \"{name} rc=$?\" >> \"$seen\"\n")
}

/// The script's commit: a file written, added, committed.
fn commit(name: &str, file: &str) -> String {
    step(
        name,
        &format!(
            "printf 'x\\n' > {file} && git add {file} && git -c user.name=R -c \
             user.email=r@x commit -qm '{name}'"
        ),
    )
}

/// In a project with a submodule, a session makes a git folder of its own inside the
/// submodule's (which is writable, so that commits work there): a copy with a configuration of
/// its own, and a folder whose `.git` names it. relay's git refuses to run there (128): it pins
/// only the git folders the launch found. Controls: in the submodule itself relay's git runs
/// (`git status`, a commit), and the real git runs in the planted folder. Red before: relay's
/// git took any git folder under `.git/modules` that is its own common folder.
#[test]
fn a_git_folder_planted_in_a_submodules_runs_no_git_beside_the_token() {
    let fx = World::new();
    submodule_world(&fx.project, &fx.root);
    let modules = fx.project.join(".git/modules");
    let mut body = String::from("cd sub\n");
    body += &step("sub-status", "git status");
    body += &commit("sub-commit", "g");
    body += "cd ..\n";
    let planted = modules.join("sub/planted");
    body += &format!(
        "cp -a '{m}/sub' /tmp/copy && rm -rf /tmp/copy/planted && \
         printf '[core]\\n\\trepositoryformatversion = 0\\n' > /tmp/copy/config && \
         cp -a /tmp/copy '{p}' && mkdir other && printf 'gitdir: {p}\\n' > other/.git && \
         cd other\n",
        m = modules.display(),
        p = planted.display()
    );
    body += &step("planted", "git status");
    body += &step("planted-real", "\"$RELAY_GIT\" status");
    let seen = fx.run_token_script(&TokenScript::new(&body).at(ScriptAt::Beside));
    assert_eq!(
        seen,
        "sub-status rc=0\nsub-commit rc=0\nplanted rc=128\nplanted-real rc=0\n"
    );
    let sub = fx.project.join("sub");
    assert_eq!(git(&sub, &["log", "--format=%s"]), "sub-commit\none\n");
}

/// A real turn of Claude Code (the built-in template as shipped) in a linked worktree of the
/// setup's repository: its Bash tool commits, the commit is on the worktree's branch on the
/// host.
#[test]
fn a_turn_in_a_linked_worktree_commits() {
    let s = Setup::new(|_, _| {
        vec![
            Step::bash(&bash_commit("from the worktree turn")),
            Step::text(FINAL),
        ]
    });
    let wt = s.root.join("wt");
    let out = s.git(&["worktree", "add", "-q", "-b", "wt", wt.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let turn = s.turn_in(&wt, "Do the scripted work.");
    s.report("a_turn_in_a_linked_worktree_commits");
    s.assert_completed(&turn, 1);
    let results = results_at(&s.api.main_requests(), 1);
    assert!(results.iter().any(|r| r.contains("rc=0")), "{results:?}");
    let log = s.git(&["log", "--format=%s", "wt"]);
    assert_eq!(
        String::from_utf8_lossy(&log.stdout),
        "from the worktree turn\nfirst\n",
        "{log:?}"
    );
    s.assert_no_token_on_disk();
}

/// A real turn in a project with a submodule: its Bash tool commits in the submodule, then the
/// new submodule commit in the superproject; both are in the host's repositories.
#[test]
fn a_turn_with_a_submodule_commits() {
    let command = format!(
        "cd sub && {} && cd .. && git add sub && git -c user.name=R -c user.email=r@x commit \
         -qm 'bump sub' && echo super=$?",
        bash_commit("from the submodule turn")
    );
    let s = Setup::new(move |_, _| vec![Step::bash(&command), Step::text(FINAL)]);
    submodule_world(&s.project, &s.root);
    let turn = s.turn("Do the scripted work.");
    s.report("a_turn_with_a_submodule_commits");
    s.assert_completed(&turn, 1);
    let results = results_at(&s.api.main_requests(), 1);
    assert!(results.iter().any(|r| r.contains("super=0")), "{results:?}");
    let sub = s.git_in(&s.project.join("sub"), &["log", "--format=%s"]);
    assert_eq!(
        String::from_utf8_lossy(&sub.stdout),
        "from the submodule turn\none\n",
        "{sub:?}"
    );
    let sup = s.git(&["log", "--format=%s"]);
    assert_eq!(
        String::from_utf8_lossy(&sup.stdout),
        "bump sub\nadd sub\nfirst\n",
        "{sup:?}"
    );
    s.assert_no_token_on_disk();
}

/// The Bash command of the real turns: a file, `git status`, `git add`, `git commit -m MESSAGE`,
/// `git log`, and `rc=N` of the commit.
fn bash_commit(message: &str) -> String {
    format!(
        "printf 'turn\\n' > turn.txt && git status --short && git add turn.txt && git -c \
         user.name=R -c user.email=r@x commit -qm '{message}'; echo rc=$?; git log --oneline"
    )
}
