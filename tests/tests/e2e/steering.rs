//! Nothing outside the project steers a token session, and what relay removes stays within the
//! session's own reach (issue 43). Each case is an attack a session without the token (the
//! `shell` template, `~` read-write) or a tool inside a token session could make:
//!
//! 1. git's XDG configuration (`~/.config/git/{config,attributes}`) with a clean filter: a
//!    token session's `git status` runs no filter, and git there still has the operator's
//!    `user.name` and `user.email`;
//! 2. `.git/config.worktree` of the main repository (with `extensions.worktreeConfig` on): no
//!    session can write it, and a token session's `git status` runs no filter;
//! 3. `~/.npmrc` naming a `script-shell`: a token session's `npm test` does not run it;
//! 4. a `node_modules` replaced with a link to a folder outside every grant: relay-host's
//!    clean-up after the session (and `gc`) removes nothing there;
//! 5. a session in project A writes trust answers for project B and for `/`: only A's comes back;
//! 6. a `--continue` launch in A gets A's transcripts only, and what it writes into B's folder
//!    does not come back over B's;
//! 7. a sparse 200 MiB transcript is not written out into the state folder, and the log says so.
//!
//! Item 1 also with the real Claude Code (its own start-up `git status`); item 5 with it in
//! `first_run.rs` (the trust dialog of B still shows). Each token session
//! otherwise runs a script the way Claude Code runs its tools; the control in the same
//! script shows the planted file is there and would run when consulted.
//!
//! Build the binaries first: `cargo build -p relay-host -p relay-shim -p relay-tests --bins`.
//! Linux only (bwrap).
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Command;

use relay_tests::world::{TokenScript, World, SCRIPT_TIMEOUT};
use serde_json::{json, Value};

/// A world whose `relay-host` runs as root or (`user`) as that uid and gid with no groups,
/// the whole tree handed to it before each run.
fn world(user: Option<u32>) -> World {
    World::builder().user(user).build()
}

// Each case as root and as uid 65534 (bwrap makes a user namespace there).

#[test]
fn home_git_configuration_as_root() {
    git_configuration_in_the_home_folder_steers_no_token_git(None)
}

#[test]
fn home_git_configuration_as_a_user() {
    git_configuration_in_the_home_folder_steers_no_token_git(Some(65534))
}

#[test]
fn home_npm_configuration_as_root() {
    npm_configuration_in_the_home_folder_steers_no_token_npm(None)
}

#[test]
fn home_npm_configuration_as_a_user() {
    npm_configuration_in_the_home_folder_steers_no_token_npm(Some(65534))
}

#[test]
fn pinned_folders_as_root() {
    the_pinned_configuration_folders_are_empty_and_nothing_writes_them(None)
}

#[test]
fn pinned_folders_as_a_user() {
    the_pinned_configuration_folders_are_empty_and_nothing_writes_them(Some(65534))
}

#[test]
fn config_worktree_as_root() {
    the_main_repositorys_config_worktree_is_written_by_no_session(None)
}

#[test]
fn config_worktree_as_a_user() {
    the_main_repositorys_config_worktree_is_written_by_no_session(Some(65534))
}

#[test]
fn linked_node_modules_as_root() {
    a_linked_node_modules_leads_relays_clean_up_nowhere(None)
}

#[test]
fn linked_node_modules_as_a_user() {
    a_linked_node_modules_leads_relays_clean_up_nowhere(Some(65534))
}

#[test]
fn trust_for_its_own_project_as_root() {
    a_session_answers_the_trust_question_for_its_own_project_only(None)
}

#[test]
fn trust_for_its_own_project_as_a_user() {
    a_session_answers_the_trust_question_for_its_own_project_only(Some(65534))
}

#[test]
fn continue_own_transcripts_as_root() {
    continue_hands_a_session_its_own_projects_transcripts_only(None)
}

#[test]
fn continue_own_transcripts_as_a_user() {
    continue_hands_a_session_its_own_projects_transcripts_only(Some(65534))
}

#[test]
fn sparse_transcript_as_root() {
    a_sparse_transcript_is_refused_and_said(None)
}

#[test]
fn sparse_transcript_as_a_user() {
    a_sparse_transcript_is_refused_and_said(Some(65534))
}

/// A repository in `dir` with one committed file `f`.
fn repository(dir: &Path) {
    relay_tests::git(dir, &["init", "-q"]);
    std::fs::write(dir.join("f"), "one\n").unwrap();
    relay_tests::git(dir, &["add", "f"]);
    relay_tests::git(dir, &["commit", "-qm", "one"]);
}

/// A clean filter `x` that touches `marker`, as git configuration.
fn filter(marker: &Path) -> String {
    format!(
        "[filter \"x\"]\n\tclean = \"touch {} && cat\"\n",
        marker.display()
    )
}

/// The script's check of one command: `f` touched to a new time (so `git status` reads it
/// again, through any filter), the command, then `NAME rc=N` in `seen.txt`, and `NAME ran`
/// when the marker exists (then removed).
fn check(name: &str, command: &str, time: u32) -> String {
    format!(
        "touch -d @{time} f\n{command} >/dev/null 2>&1; echo \"{name} rc=$?\" >> seen.txt\n\
         if [ -e marker ]; then echo \"{name} ran\" >> seen.txt; rm marker; fi\n"
    )
}

/// The sandbox of a token session that sees the home folder: the project and `~` read-write
/// (with `"writes_home": true`, which the operator must say for it).
fn home_too() -> Value {
    json!({"read_write": ["{project}", "~/"]})
}

/// Issue 43 (1): git's XDG configuration and attributes in the home folder, which no entry of
/// the write-deny list names, hold a clean filter for every file. A token session that sees
/// `~` runs `git status`: no filter runs; its git still has the operator's identity from
/// `~/.gitconfig` (and nothing else of that file: its `core.fsmonitor` does not reach the
/// session). The control, git told to read the home's files, runs the filter.
fn git_configuration_in_the_home_folder_steers_no_token_git(user: Option<u32>) {
    let fx = world(user);
    repository(&fx.project);
    let marker = fx.project.join("marker");
    let xdg = fx.home.join(".config/git");
    std::fs::create_dir_all(&xdg).unwrap();
    std::fs::write(xdg.join("config"), filter(&marker)).unwrap();
    std::fs::write(xdg.join("attributes"), "* filter=x\n").unwrap();
    std::fs::write(
        fx.home.join(".gitconfig"),
        "[user]\n\tname = Op Erator\n\temail = op@example.org\n[core]\n\tpager = steered\n",
    )
    .unwrap();
    let control = format!(
        "GIT_CONFIG_GLOBAL={h}/.config/git/config XDG_CONFIG_HOME={h}/.config git status",
        h = fx.home.display()
    );
    let body = format!(
        "{guarded}git config user.name >> seen.txt; git config user.email >> seen.txt\n\
         git config core.pager >> seen.txt || echo no-pager >> seen.txt\n{control}",
        guarded = check("guarded", "git status", 1_000_000_001),
        control = check("control", &control, 1_000_000_002),
    );
    let seen = fx.run_token_script(&TokenScript::new(&body).sandbox(home_too()).writes_home());
    assert_eq!(
        seen, "guarded rc=0\nOp Erator\nop@example.org\nno-pager\ncontrol rc=0\ncontrol ran\n",
        "what the token session's git did"
    );
}

/// Issue 43 (3): `~/.npmrc` names a `script-shell` that touches a marker. A token session that
/// sees `~` runs `npm test`: the test script runs, the planted shell does not. The control,
/// npm told to read the home's `.npmrc`, runs it.
fn npm_configuration_in_the_home_folder_steers_no_token_npm(user: Option<u32>) {
    if relay_token::which::find_program("npm").is_none() {
        eprintln!("SKIP: no npm");
        return;
    }
    let fx = world(user);
    let marker = fx.project.join("marker");
    let shell = fx.home.join("evil.sh");
    std::fs::write(
        &shell,
        format!(
            "#!/bin/sh\ntouch {}\nexec /bin/sh \"$@\"\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&shell, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        fx.home.join(".npmrc"),
        format!("script-shell={}\n", shell.display()),
    )
    .unwrap();
    std::fs::write(
        fx.project.join("package.json"),
        r#"{"name": "p", "version": "1.0.0", "scripts": {"test": "echo tested > tested.txt"}}"#,
    )
    .unwrap();
    std::fs::write(fx.project.join("f"), "").unwrap();
    let control = format!(
        "NPM_CONFIG_USERCONFIG={}/.npmrc npm test",
        fx.home.display()
    );
    let body = format!(
        "export npm_config_update_notifier=false npm_config_offline=true\n{guarded}\
         cat tested.txt >> seen.txt\n{control}",
        guarded = check("guarded", "npm test", 1_000_000_001),
        control = check("control", &control, 1_000_000_002),
    );
    let seen = fx.run_token_script(&TokenScript::new(&body).sandbox(home_too()).writes_home());
    assert_eq!(
        seen, "guarded rc=0\ntested\ncontrol rc=0\ncontrol ran\n",
        "what the token session's npm did"
    );
}

/// A token session's `XDG_CONFIG_HOME`, and its `HOME` beside a template that writes the home,
/// are empty folders of the sandbox's own that nothing inside can write: a file, a folder and
/// a mode change are each refused, in both. (Where a session could write them, every tool that
/// follows the XDG rule, or a shell's start-up files, would read what it put there.)
fn the_pinned_configuration_folders_are_empty_and_nothing_writes_them(user: Option<u32>) {
    let fx = world(user);
    let body = "for d in \"$XDG_CONFIG_HOME\" \"$HOME\"; do\n\
                n=$(ls -A \"$d\" | wc -l)\n\
                touch \"$d/f\" 2>/dev/null && w=wrote || w=refused\n\
                mkdir \"$d/x\" 2>/dev/null && m=made || m=refused\n\
                chmod 777 \"$d\" 2>/dev/null && c=changed || c=refused\n\
                echo \"$d entries=$n file=$w folder=$m mode=$c\" >> seen.txt\n\
                done\n";
    let writer = json!({"id": "shell", "command": ["/bin/sh"], "network": "none",
                        "sandbox": {"read_write": ["~/", "{project}"]}, "writes_home": true});
    let seen = fx.run_token_script(&TokenScript::new(body).beside(writer));
    assert_eq!(
        seen,
        "/run/relay/config entries=0 file=refused folder=refused mode=refused\n\
         /run/relay/home entries=0 file=refused folder=refused mode=refused\n",
        "what a token session could do to its pinned folders"
    );
}

/// Issue 43 (2): with `extensions.worktreeConfig` on (the operator's choice), git reads the
/// main repository's `.git/config.worktree` as configuration. A session writes a clean filter
/// there and `* filter=x` into `.gitattributes`: the write fails (the file is kept read-only
/// like `.git/config`), and `git status` runs no filter. The control, the same filter given as
/// a configuration file by hand, runs.
fn the_main_repositorys_config_worktree_is_written_by_no_session(user: Option<u32>) {
    let fx = world(user);
    repository(&fx.project);
    relay_tests::git(
        &fx.project,
        &["config", "extensions.worktreeConfig", "true"],
    );
    let marker = fx.project.join("marker");
    let control = format!("git -c filter.x.clean='touch {}' status", marker.display());
    let body = format!(
        "printf '{filter}' > .git/config.worktree; echo \"plant rc=$?\" >> seen.txt\n\
         echo '* filter=x' > .gitattributes\n{guarded}{control}",
        filter = filter(&marker).replace('\n', "\\n").replace('\t', "\\t"),
        guarded = check("guarded", "git status", 1_000_000_001),
        control = check("control", &control, 1_000_000_002),
    );
    let seen = fx.run_token_script(&TokenScript::new(&body));
    assert_eq!(
        seen, "plant rc=2\nguarded rc=0\ncontrol rc=0\ncontrol ran\n",
        "what the token session's git did"
    );
    assert_eq!(
        std::fs::symlink_metadata(fx.project.join(".git/config.worktree"))
            .ok()
            .map(|m| m.len()),
        None,
        "the placeholder is gone after the session"
    );
}

/// A `shell` request (the project read-write, no network) running `script` in the project;
/// true when the launch succeeded.
fn shell_session(fx: &World, script: &str) -> bool {
    fx.with_token(vec![
        json!({"id": "shell", "command": ["/bin/sh"], "network": "none",
                              "sandbox": {"read_write": ["{project}"]}}),
    ]);
    let req = json!({"kind": "terminal", "template": "shell", "project": fx.project,
                     "extra_args": ["-c", script]});
    fx.launch_for(&req, SCRIPT_TIMEOUT).code == Some(0)
}

/// Issue 43 (4): a session replaces the project's `node_modules` (one of the names relay-host
/// watches for Claude Code's empty mount points) with a link to a folder outside every grant
/// holding an empty `.bin`. When the session ends, relay-host's clean-up reaches
/// `node_modules/.bin` through no link: the folder outside stays. Then `gc`, given the same
/// watched path, removes nothing there either; an empty `.env` in the project, a real leftover,
/// goes.
fn a_linked_node_modules_leads_relays_clean_up_nowhere(user: Option<u32>) {
    let fx = world(user);
    let outside = fx.root.join("outside");
    std::fs::create_dir_all(outside.join(".bin")).unwrap();
    let script = format!("ln -s {} node_modules", outside.display());
    assert!(shell_session(&fx, &script));
    assert!(
        outside.join(".bin").is_dir(),
        "the session's clean-up removed outside/.bin"
    );
    assert!(!fx.state.join("watched").exists(), "the list is gone");
    // `gc` after a host that left the list behind: the same paths, and a real leftover.
    let bin = fx.project.join("node_modules/.bin");
    let env = fx.project.join(".env");
    std::fs::write(&env, "").unwrap();
    let list = format!("{}\n{}\n", env.display(), bin.display());
    std::fs::write(fx.state.join("watched"), list).unwrap();
    let out = fx.host(&["gc"]);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    assert!(outside.join(".bin").is_dir(), "gc removed outside/.bin");
    assert!(!env.exists(), "gc left the empty .env");
}

/// A token launch in `project` of a template running `/bin/sh SCRIPT ARGS...` (the script in
/// the root's `scripts/`, granted read-only) with its own Claude config folder
/// (`CLAUDE_CONFIG_DIR`, read-write), as the built-in template has it; true when it succeeded.
fn claude_config_session(fx: &World, project: &Path, body: &str, args: &[&str]) -> bool {
    let scripts = fx.root.join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    let script = scripts.join("script.sh");
    std::fs::write(&script, format!("#!/bin/sh\nC=$CLAUDE_CONFIG_DIR\n{body}")).unwrap();
    fx.with_token(vec![json!({
        "id": "claude-code",
        "command": ["/bin/sh", script],
        "env": {"CLAUDE_CONFIG_DIR": "{claude_config}"},
        "sandbox": {"read": [scripts], "read_write": ["{project}", "{claude_config}"]},
        "network": {"allow": []},
    })]);
    let req = json!({"kind": "claude", "project": project, "sandbox": true,
                     "extra_args": args});
    let out = fx.launch_for(&req, SCRIPT_TIMEOUT);
    if out.code != Some(0) {
        eprintln!("{}", out.stderr);
    }
    out.code == Some(0)
}

/// A second project folder beside the fixture's, made canonical.
fn other_project(fx: &World) -> std::path::PathBuf {
    let other = fx.root.join("other");
    std::fs::create_dir_all(&other).unwrap();
    other.canonicalize().unwrap()
}

/// Issue 43 (5): a token session in project A writes into its own `.claude.json` that project
/// B (and the root, above every project) answered the trust question; relay carries back A's
/// answer only, so a later launch in B asks again.
fn a_session_answers_the_trust_question_for_its_own_project_only(user: Option<u32>) {
    let fx = world(user);
    let (a, b) = (fx.project.canonicalize().unwrap(), other_project(&fx));
    let trust = json!({"hasTrustDialogAccepted": true});
    let planted = json!({"projects": {
        a.to_str().unwrap(): trust, b.to_str().unwrap(): trust, "/": trust}});
    let body = format!("printf '%s' '{planted}' > \"$C/.claude.json\"\n");
    assert!(claude_config_session(&fx, &a, &body, &[]));
    let kept: Value =
        serde_json::from_slice(&std::fs::read(fx.state.join("claude/.claude.json")).unwrap())
            .unwrap();
    assert_eq!(
        kept,
        json!({"projects": {a.to_str().unwrap(): trust}}),
        "what relay carried back"
    );
}

/// Issue 43 (6): project B's conversation is in the state folder (from a session in B). A
/// `--continue` launch in project A sees only A's folder of transcripts; what it writes into
/// B's folder (a rewrite of B's transcript, a planted one) does not come back: B's stored
/// transcript is as B's session left it.
fn continue_hands_a_session_its_own_projects_transcripts_only(user: Option<u32>) {
    let fx = world(user);
    let (a, b) = (fx.project.canonicalize().unwrap(), other_project(&fx));
    let (fa, fb) = (
        relay_tests::transcript_folder(&a),
        relay_tests::transcript_folder(&b),
    );
    let write = |folder: &str, name: &str, text: &str| {
        format!(
            "mkdir -p \"$C/projects/{folder}\"; echo '{text}' > \"$C/projects/{folder}/{name}\"\n"
        )
    };
    assert!(claude_config_session(
        &fx,
        &b,
        &write(&fb, "b.jsonl", "{\"b\":1}"),
        &[]
    ));
    assert!(claude_config_session(
        &fx,
        &a,
        &write(&fa, "a.jsonl", "{\"a\":1}"),
        &[]
    ));
    let seen = fx.project.join("seen.txt");
    let body = format!(
        "(cd \"$C/projects\" && ls -d -- */*) > {seen}\n{}{}",
        write(&fb, "b.jsonl", "{\"rewritten\":1}"),
        write(&fb, "planted.jsonl", "{\"planted\":1}"),
        seen = seen.display(),
    );
    assert!(claude_config_session(&fx, &a, &body, &["--continue"]));
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap(),
        format!("{fa}/a.jsonl\n"),
        "what the --continue launch got"
    );
    let stored = fx.state.join("claude/projects").join(&fb);
    assert_eq!(
        std::fs::read_to_string(stored.join("b.jsonl")).unwrap(),
        "{\"b\":1}\n"
    );
    assert!(
        !stored.join("planted.jsonl").exists(),
        "a planted transcript came back"
    );
}

/// Issue 43 (7): a session leaves a sparse 200 MiB transcript (no disk of its own) beside a
/// real one: the real one comes back, the sparse one does not, and the state log says so.
fn a_sparse_transcript_is_refused_and_said(user: Option<u32>) {
    let fx = world(user);
    let a = fx.project.canonicalize().unwrap();
    let fa = relay_tests::transcript_folder(&a);
    let body = format!(
        "mkdir -p \"$C/projects/{fa}\"; echo '{{}}' > \"$C/projects/{fa}/ok.jsonl\"\n\
         truncate -s 200M \"$C/projects/{fa}/big.jsonl\"\n"
    );
    assert!(claude_config_session(&fx, &a, &body, &[]));
    let stored = fx.state.join("claude/projects").join(&fa);
    assert!(stored.join("ok.jsonl").is_file());
    assert!(
        !stored.join("big.jsonl").exists(),
        "the sparse transcript was written out"
    );
    let log = std::fs::read_to_string(fx.state.join("relay-host.log")).unwrap_or_default();
    assert!(
        log.contains(&format!("transcript {fa}/big.jsonl (209715200 bytes"))
            && log.contains("sparse"),
        "{log}"
    );
}

/// Issue 43 (1) with the real Claude Code 2.1.332 and the built-in template as shipped: the
/// home folder is a git repository whose tracked file was touched, with a clean filter in
/// git's XDG configuration and attributes. Claude Code's own start-up `git status` would run
/// the filter with the home as its project; since issue 50 the home is no project of a
/// sandboxed template (its session could write the shells' files), so the turn is refused
/// before anything runs, naming the way out, and no filter ran. The control, git on the host
/// reading those files, runs it.
#[test]
fn claudes_own_git_status_runs_no_filter_from_the_home_folder() {
    use relay_tests::agent::{Setup, FINAL};
    use relay_tests::messages_api::Step;
    let s = Setup::new(|_, _| vec![Step::text(FINAL)]);
    let home = s.home.canonicalize().unwrap();
    for args in [
        &["init", "-q"][..],
        &["config", "user.email", "op@example.org"],
        &["config", "user.name", "Op"],
    ] {
        assert!(s.git_in(&home, args).status.success());
    }
    std::fs::write(home.join("f"), "one\n").unwrap();
    assert!(s.git_in(&home, &["add", "f"]).status.success());
    assert!(s.git_in(&home, &["commit", "-qm", "one"]).status.success());
    let marker = home.join("marker");
    let xdg = home.join(".config/git");
    std::fs::create_dir_all(&xdg).unwrap();
    std::fs::write(xdg.join("config"), filter(&marker)).unwrap();
    std::fs::write(xdg.join("attributes"), "* filter=x\n").unwrap();
    let touched = Command::new("touch")
        .args(["-d", "@1000000001"])
        .arg(home.join("f"))
        .status()
        .unwrap();
    assert!(touched.success());
    s.hand_over();
    let turn = s.turn_in(&home, "Say hello.");
    assert_eq!(turn.code, Some(64), "{}", turn.describe());
    assert!(
        turn.stderr.contains("it is the home folder") && turn.stderr.contains("writes_home"),
        "{}",
        turn.describe()
    );
    assert!(
        !marker.exists(),
        "Claude Code's git ran the home folder's filter"
    );
    let control = s.git_in(&home, &["status"]);
    assert!(control.status.success());
    assert!(marker.exists(), "the control ran no filter");
}
