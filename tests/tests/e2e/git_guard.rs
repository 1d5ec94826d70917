//! git beside the token runs no repository-defined command that another session planted: the
//! chains of a common folder redirected while a token session runs, and of a repository in a
//! subfolder of the project with its own filter driver. Each session here holds the token and
//! runs a script the way Claude Code runs git (`git` found on `PATH`); the filter of each
//! planted repository touches a marker. The same session then runs the real git directly
//! (`$RELAY_GIT`, past relay's wrapper): the filter runs, so the marker check can fail.
//!
//! Build the binaries first: `cargo build --workspace --bins`. Linux only (bwrap).
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};

use relay_tests::world::{TokenScript, World};

/// A repository in `dir` with one committed file `f`.
fn repository(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    relay_tests::git(dir, &["init", "-q"]);
    std::fs::write(dir.join("f"), "one\n").unwrap();
    relay_tests::git(dir, &["add", "f"]);
    relay_tests::git(dir, &["commit", "-qm", "one"]);
}

/// Gives the git folder `git_dir` a clean filter `x` for every file that touches `marker`.
fn plant_filter(git_dir: &Path, marker: &Path) {
    let config = std::fs::read_to_string(git_dir.join("config")).unwrap();
    let filter = format!(
        "[filter \"x\"]\n\tclean = \"touch {} && cat\"\n",
        marker.display()
    );
    std::fs::write(git_dir.join("config"), config + &filter).unwrap();
    std::fs::create_dir_all(git_dir.join("info")).unwrap();
    std::fs::write(git_dir.join("info/attributes"), "* filter=x\n").unwrap();
}

/// The script's check of one git command: `f` touched to a new time (same size, so `git
/// status` must read it again, through the filter), the command, then `NAME rc=N` in
/// `seen.txt`, and `NAME ran` when the marker exists (then removed).
fn check(name: &str, command: &str, time: u32) -> String {
    format!(
        "touch -d @{time} f\n{command} >/dev/null 2>&1; echo \"{name} rc=$?\" >> seen.txt\n\
         if [ -e marker ]; then echo \"{name} ran\" >> seen.txt; rm marker; fi\n"
    )
}

/// Issue 31 (3): while a token session runs, a session without the token points the
/// project's `.git/commondir` at a folder of its own whose configuration has a clean filter
/// (and `info/attributes` `* filter=x`), and changes a tracked file. The token session's next
/// `git status` runs no filter: relay's `git` sees the repository is no longer the project's
/// and refuses (exit 128). Before the redirect, the same `git` works in the project's own
/// repository. The control, the real git, runs the filter.
#[test]
fn a_common_folder_redirected_meanwhile_runs_no_filter_beside_the_token() {
    let fx = World::new();
    repository(&fx.project);
    let evil: PathBuf = fx.project.join("evil");
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(fx.project.join(".git"))
        .arg(&evil)
        .status()
        .unwrap();
    assert!(copied.success());
    plant_filter(&evil, &fx.project.join("marker"));
    let body = format!(
        "{own}printf '%s\\n' {evil} > .git/commondir\n{guarded}{control}",
        own = check("own", "git status", 1_000_000_001),
        evil = evil.display(),
        guarded = check("guarded", "git status", 1_000_000_002),
        control = check("control", "\"$RELAY_GIT\" status", 1_000_000_003),
    );
    let seen = fx.run_token_script(&TokenScript::new(&body));
    assert_eq!(
        seen, "own rc=0\nguarded rc=128\ncontrol rc=0\ncontrol ran\n",
        "what the token session's git did"
    );
}

/// Issue 31 (4): a repository in a subfolder of the project, made by a session without the
/// token, with a clean filter in its own `.git/config`: `cd sub && git status` in a token
/// session runs no filter (relay's `git` refuses a repository another session may have
/// written); the control, the real git, runs it.
#[test]
fn a_repository_in_a_subfolder_runs_no_filter_beside_the_token() {
    let fx = World::new();
    repository(&fx.project);
    let sub = fx.project.join("sub");
    repository(&sub);
    plant_filter(&sub.join(".git"), &sub.join("marker"));
    let body = format!(
        "cd sub\n{guarded}{control}mv seen.txt ..\n",
        guarded = check("guarded", "git status", 1_000_000_002),
        control = check("control", "\"$RELAY_GIT\" status", 1_000_000_003),
    );
    let seen = fx.run_token_script(&TokenScript::new(&body));
    assert_eq!(
        seen, "guarded rc=128\ncontrol rc=0\ncontrol ran\n",
        "what the token session's git did"
    );
}
