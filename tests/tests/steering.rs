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
//!    clean-up after the session (and `gc`) removes nothing there.
//!
//! Each token session runs a script the way Claude Code runs its tools; the control in the same
//! script shows the planted file is there and would run when consulted.
//!
//! Build the binaries first: `cargo build -p relay-host -p relay-shim -p relay-tests --bins`.
//! Linux only (bwrap).
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Stdio;

use relay_tests::fake_agent;
use relay_tests::fixture::Fixture;
use serde_json::{json, Value};

/// A token launch of a `claude-code` template running `/bin/sh SCRIPT` (written into the
/// project) in the project, with `sandbox`; returns what the script wrote into the
/// project's `seen.txt`.
fn run_token_script(fx: &Fixture, sandbox: Value, body: &str) -> String {
    let script = fx.project.join("script.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ncd {}\n{body}", fx.project.display()),
    )
    .unwrap();
    let settings = json!({
        "claude_token_file": "~/.config/acme-ltt/token",
        "templates": [{
            "id": "claude-code",
            "command": ["/bin/sh", script],
            "sandbox": sandbox,
            "network": {"allow": []},
        }],
    });
    std::fs::write(fx.config.join("settings.json"), settings.to_string()).unwrap();
    let req = fx.request("steer", true, "steer", &[]);
    let out = fx
        .launch(&req)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    std::fs::read_to_string(fx.project.join("seen.txt")).unwrap_or_default()
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

/// The sandbox of a token session that sees the home folder: the project and `~` read-write.
fn home_too() -> Value {
    json!({"read_write": ["{project}", "~/"]})
}

/// Issue 43 (1): git's XDG configuration and attributes in the home folder, which no entry of
/// the write-deny list names, hold a clean filter for every file. A token session that sees
/// `~` runs `git status`: no filter runs; its git still has the operator's identity from
/// `~/.gitconfig` (and nothing else of that file: its `core.fsmonitor` does not reach the
/// session). The control, git told to read the home's files, runs the filter.
#[test]
fn git_configuration_in_the_home_folder_steers_no_token_git() {
    let fx = Fixture::new(&fake_agent());
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
    let seen = run_token_script(&fx, home_too(), &body);
    assert_eq!(
        seen, "guarded rc=0\nOp Erator\nop@example.org\nno-pager\ncontrol rc=0\ncontrol ran\n",
        "what the token session's git did"
    );
}

/// Issue 43 (3): `~/.npmrc` names a `script-shell` that touches a marker. A token session that
/// sees `~` runs `npm test`: the test script runs, the planted shell does not. The control,
/// npm told to read the home's `.npmrc`, runs it.
#[test]
fn npm_configuration_in_the_home_folder_steers_no_token_npm() {
    if relay_token::which::find_program("npm").is_none() {
        eprintln!("SKIP: no npm");
        return;
    }
    let fx = Fixture::new(&fake_agent());
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
    let seen = run_token_script(&fx, home_too(), &body);
    assert_eq!(
        seen, "guarded rc=0\ntested\ncontrol rc=0\ncontrol ran\n",
        "what the token session's npm did"
    );
}

/// Issue 43 (2): with `extensions.worktreeConfig` on (the operator's choice), git reads the
/// main repository's `.git/config.worktree` as configuration. A session writes a clean filter
/// there and `* filter=x` into `.gitattributes`: the write fails (the file is kept read-only
/// like `.git/config`), and `git status` runs no filter. The control, the same filter given as
/// a configuration file by hand, runs.
#[test]
fn the_main_repositorys_config_worktree_is_written_by_no_session() {
    let fx = Fixture::new(&fake_agent());
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
    let seen = run_token_script(&fx, json!({"read_write": ["{project}"]}), &body);
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
fn shell_session(fx: &Fixture, script: &str) -> bool {
    let settings = json!({
        "claude_token_file": "~/.config/acme-ltt/token",
        "templates": [{"id": "shell", "command": ["/bin/sh"], "network": "none",
                       "sandbox": {"read_write": ["{project}"]}}],
    });
    std::fs::write(fx.config.join("settings.json"), settings.to_string()).unwrap();
    let req = json!({"kind": "terminal", "template": "shell", "project": fx.project,
                     "extra_args": ["-c", script]});
    let file = fx.root.join("shell.json");
    std::fs::write(&file, req.to_string()).unwrap();
    fx.launch(&file).status().unwrap().success()
}

/// Issue 43 (4): a session replaces the project's `node_modules` (one of the names relay-host
/// watches for Claude Code's empty mount points) with a link to a folder outside every grant
/// holding an empty `.bin`. When the session ends, relay-host's clean-up reaches
/// `node_modules/.bin` through no link: the folder outside stays. Then `gc`, given the same
/// watched path, removes nothing there either; an empty `.env` in the project, a real leftover,
/// goes.
#[test]
fn a_linked_node_modules_leads_relays_clean_up_nowhere() {
    let fx = Fixture::new(&fake_agent());
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
    let mut gc = std::process::Command::new(&fx.host);
    fx.host_setup(&mut gc, &fx.state).arg("gc");
    let out = gc.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(outside.join(".bin").is_dir(), "gc removed outside/.bin");
    assert!(!env.exists(), "gc left the empty .env");
}
