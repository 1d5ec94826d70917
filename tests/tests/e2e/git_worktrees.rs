//! git in a token session works in the projects people have: a project that is a linked
//! worktree (its repository elsewhere, granted or not) and a project with a submodule. The
//! session (a script in place of the agent, running `git` from `PATH` as Claude Code does)
//! runs `git status`, `git commit` and `git log`; the commits are then in the host's
//! repositories. A `shell` session (read-write `~`) still cannot write what decides what git
//! runs in a worktree's or a submodule's git folder, nor add one.
//!
//! Build the binaries first: `cargo build --workspace --bins`. Linux only (bwrap).
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};

use relay_tests::fake_agent;
use relay_tests::world::{ScriptAt, TokenScript, World};
use serde_json::json;

/// A token session's script in `project` running `body` (its output into `$seen`, beside the
/// project), with `{project}` and `extra` read-write and git's identity given.
fn git_script(project: &Path, extra: &[&Path], body: &str) -> TokenScript {
    let mut rw = vec![json!("{project}")];
    rw.extend(extra.iter().map(|p| json!(p)));
    TokenScript::new(body)
        .at(ScriptAt::Beside)
        .project(project)
        .sandbox(json!({"read_write": rw}))
        .prelude(
            "exec >>\"$seen\" 2>&1\n\
             git() { command git -c user.name=a -c user.email=a@example.invalid \"$@\"; }\n",
        )
}

/// A repository in `dir` with one committed file `f`.
fn repository(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    relay_tests::git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("f"), "one\n").unwrap();
    relay_tests::git(dir, &["add", "f"]);
    relay_tests::git(dir, &["commit", "-qm", "one"]);
}

/// The session's steps: status, a commit of a new file `name`, log; each step's exit code.
fn commit_steps(name: &str) -> String {
    format!(
        "git status >/dev/null; echo \"status rc=$?\"\n\
         echo new > {name} && git add {name} && git commit -qm {name}; echo \"commit rc=$?\"\n\
         git log --format=%s | head -1\n"
    )
}

/// A main repository with a linked worktree `wt` on branch `wt`: (main, worktree).
fn main_and_worktree(under: &Path) -> (PathBuf, PathBuf) {
    let main = under.join("main");
    repository(&main);
    let wt = under.join("wt");
    relay_tests::git(
        &main,
        &["worktree", "add", "-q", "-b", "wt", wt.to_str().unwrap()],
    );
    (main, wt)
}

/// A project that is a linked worktree, its main repository granted or not: git status,
/// commit and log work, and the commit is on the worktree's branch in the host's repository.
#[test]
fn git_commits_in_a_linked_worktree() {
    for grant_main in [false, true] {
        let fx = World::new();
        let (main, wt) = main_and_worktree(&fx.root);
        let extra: Vec<&Path> = if grant_main { vec![&main] } else { vec![] };
        let seen = fx.run_token_script(&git_script(&wt, &extra, &commit_steps("g")));
        assert_eq!(
            seen, "status rc=0\ncommit rc=0\ng\n",
            "main granted {grant_main}: what git did"
        );
        let log = relay_tests::git(&main, &["log", "--format=%s", "wt"]);
        assert_eq!(log, "g\none\n", "main granted {grant_main}");
        // The worktree's steering files were never writable: unchanged, none added.
        let own = main.join(".git/worktrees/wt");
        assert!(!own.join("config.worktree").exists());
    }
}

/// A project holding a submodule: a commit inside the submodule and one in the project work,
/// and both are in the host's repositories.
#[test]
fn git_commits_in_a_submodule() {
    let fx = World::new();
    let upstream = fx.root.join("upstream");
    repository(&upstream);
    repository(&fx.project);
    let add = ["-c", "protocol.file.allow=always", "submodule", "add", "-q"];
    let mut args: Vec<&str> = add.to_vec();
    args.extend([upstream.to_str().unwrap(), "sub"]);
    relay_tests::git(&fx.project, &args);
    relay_tests::git(&fx.project, &["commit", "-qm", "sub"]);
    let body = format!("cd sub\n{}cd ..\n{}", commit_steps("s"), commit_steps("p"));
    let seen = fx.run_token_script(&git_script(&fx.project, &[], &body));
    assert_eq!(
        seen, "status rc=0\ncommit rc=0\ns\nstatus rc=0\ncommit rc=0\np\n",
        "what git did"
    );
    let sub_log = relay_tests::git(&fx.project.join("sub"), &["log", "--format=%s"]);
    assert_eq!(sub_log, "s\none\n");
    let log = relay_tests::git(&fx.project, &["log", "--format=%s"]);
    assert_eq!(log, "p\nsub\none\n");
}

/// `shell` sessions (read-write `~`) whose projects are a linked worktree and a project with a
/// submodule try to arm git for a later token session: a filter in the worktree's
/// `config.worktree`, the submodule's `config`, a hook, a `commondir` redirect, a new worktree's
/// or submodule's git folder. Every write is refused and nothing is changed. (A submodule's
/// missing `commondir` is not held: `redirected_submodule_runs_no_filter` shows what a token
/// session's git does with one.)
#[test]
fn a_shell_session_cannot_arm_git_through_worktrees_or_submodules() {
    let fx = World::agent(&fake_agent());
    let (main, wt) = main_and_worktree(&fx.home);
    let project = fx.home.join("proj");
    let upstream = fx.root.join("upstream");
    repository(&upstream);
    repository(&project);
    let mut args = vec!["-c", "protocol.file.allow=always", "submodule", "add", "-q"];
    args.extend([upstream.to_str().unwrap(), "sub"]);
    relay_tests::git(&project, &args);
    let wt_git = main.join(".git/worktrees/wt");
    let sub_git = project.join(".git/modules/sub");
    let in_wt = [
        ("config.worktree", wt_git.join("config.worktree")),
        ("wt-commondir", wt_git.join("commondir")),
        (
            "new-worktree",
            main.join(".git/worktrees/other/config.worktree"),
        ),
        ("main-config", main.join(".git/config")),
    ];
    let in_project = [
        ("sub-config", sub_git.join("config")),
        ("sub-hook", sub_git.join("hooks/pre-commit")),
        ("new-module", project.join(".git/modules/other/config")),
    ];
    shell_cannot_write(&fx, &wt, &in_wt);
    shell_cannot_write(&fx, &project, &in_project);
}

/// A `shell` session with `project` appends a filter to each of `targets` (making its folder
/// first): each write is refused and leaves the file as it was.
fn shell_cannot_write(fx: &World, project: &Path, targets: &[(&str, PathBuf)]) {
    let filter = "[filter \\\"x\\\"]\\n\\tclean = touch /tmp/armed\\n";
    let before: Vec<Option<Vec<u8>>> = targets.iter().map(|(_, p)| std::fs::read(p).ok()).collect();
    let mut script = String::new();
    for (name, p) in targets {
        script.push_str(&format!(
            "mkdir -p '{d}' 2>/dev/null; if printf \"{filter}\" >> '{p}' 2>/dev/null; then echo 'wrote {name}'; else echo 'denied {name}'; fi\n",
            d = p.parent().unwrap().display(),
            p = p.display()
        ));
    }
    script.push_str("echo relay-session-ran\n");
    let req = json!({"kind": "terminal", "template": "shell", "project": project,
        "extra_args": ["-c", script]});
    let out = fx.launch(&req);
    let stdout = &out.stdout;
    assert!(stdout.contains("relay-session-ran"), "{}", out.describe());
    for ((name, p), was) in targets.iter().zip(before) {
        assert!(
            stdout.contains(&format!("denied {name}")),
            "{name} was writable: {stdout}"
        );
        assert_eq!(std::fs::read(p).ok(), was, "{name} changed");
    }
}

/// A submodule's git folder has no `commondir`; one planted there (a session may create it:
/// git fails on an empty placeholder) names a copy with a clean filter. A token session's `git
/// status` in the submodule refuses (exit 128) and runs no filter; the real git, the control,
/// runs it.
#[test]
fn redirected_submodule_runs_no_filter() {
    let fx = World::new();
    let upstream = fx.root.join("upstream");
    repository(&upstream);
    repository(&fx.project);
    let mut args = vec!["-c", "protocol.file.allow=always", "submodule", "add", "-q"];
    args.extend([upstream.to_str().unwrap(), "sub"]);
    relay_tests::git(&fx.project, &args);
    let sub_git = fx.project.join(".git/modules/sub");
    let evil = sub_git.join("evil");
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(&sub_git)
        .arg(fx.root.join("copy"))
        .status()
        .unwrap();
    assert!(copied.success());
    std::fs::rename(fx.root.join("copy"), &evil).unwrap();
    let marker = fx.root.join("out/marker");
    let config = std::fs::read_to_string(evil.join("config")).unwrap();
    let filter = format!(
        "[filter \"x\"]\n\tclean = \"touch {} && cat\"\n",
        marker.display()
    );
    std::fs::write(evil.join("config"), config + &filter).unwrap();
    std::fs::create_dir_all(evil.join("info")).unwrap();
    std::fs::write(evil.join("info/attributes"), "* filter=x\n").unwrap();
    std::fs::write(sub_git.join("commondir"), "evil\n").unwrap();
    let m = marker.display();
    let body = format!(
        "cd sub\ntouch -d @1000000001 f\ngit status >/dev/null 2>&1; echo \"guarded rc=$?\"\n\
         [ -e {m} ] && echo 'guarded ran' && rm {m}\n\
         touch -d @1000000002 f\n\"$RELAY_GIT\" status >/dev/null 2>&1; echo \"control rc=$?\"\n\
         [ -e {m} ] && echo 'control ran'\n"
    );
    let seen = fx.run_token_script(&git_script(&fx.project, &[], &body));
    assert_eq!(seen, "guarded rc=128\ncontrol rc=0\ncontrol ran\n");
}
