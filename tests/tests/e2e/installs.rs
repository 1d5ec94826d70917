//! Claude Code installed the way people install it, and its install folders out of every
//! session's reach. The native installer's layout (`~/.local/bin/claude` linking to
//! `~/.local/share/claude/versions/<version>`), an npm global install under a system prefix
//! (outside every grant), and under a user prefix (`~/.npm-global`, `~/.local`) each hold the
//! fake agent where the installer puts `claude`; the built-in `claude-code` template as shipped
//! finds it on `PATH`, the launch starts, and the agent reads what the built-in hands over on
//! fd 5 (a stand-in on Linux, its default mode: checked by hash, not the token). A `shell`
//! session (the built-in template, the whole home read-write) can neither replace nor add what
//! the native installer or an npm user prefix installed, nor write into the installer's
//! versions folder whether it exists or not (a later token launch would run what it wrote), and
//! the next token launch runs the program the operator installed, in the built-in's mode.
//!
//! Needs the built binaries (`cargo build --workspace --bins`) and a working `bwrap`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use relay_tests::fixture::{mkdir, Layout, HOST_PATH};
use relay_tests::run::Out;
use relay_tests::world::{Token, World, SETTING};
use relay_tests::{fake_agent, sha256_hex};
use serde_json::{json, Value};

const TIMEOUT: Duration = Duration::from_secs(60);

/// The version the native layout names its file after.
const VERSION: &str = "2.1.332";

/// One test's world: the project inside the home, a Claude-shaped token, the built-in
/// templates (no `templates` in the settings) and `bin` (made by the layout from the home and
/// the root) first on relay-host's `PATH`.
fn world(bin: impl FnOnce(&Path, &Path) -> PathBuf) -> World {
    let mut w = World::builder()
        .layout(Layout {
            config: "cfg",
            project: "home/proj",
            ..Layout::agent("relay-install.")
        })
        .token(Token::Claude)
        .build();
    let mut settings = json!({"claude_token_file": SETTING});
    if let Some(b) = relay_tests::settings_bwrap() {
        settings["bwrap"] = json!(b);
    }
    w.settings(settings);
    let first = bin(&w.home, &w.root);
    let path = format!("{}:{HOST_PATH}", first.display());
    w.host_env.insert("PATH".into(), path);
    w
}

/// A `claude` launch in the project (the built-in template as shipped): it ran the agent at
/// `real`, which read on fd 5 what the built-in hands over (a stand-in on Linux, the real token
/// staying on the host), with the built-in environment (no auto-updater); no file holds the
/// token.
fn assert_claude_runs(w: &World, real: &Path) {
    let out = w.launch_for(&json!({"kind": "claude", "project": w.project}), TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let rec = out
        .stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("token_fd_var").is_some())
        .unwrap_or_else(|| panic!("no agent record: {}", out.describe()));
    relay_tests::install::assert_fd5_as_shipped(&rec, &w.token);
    assert_eq!(rec["argv"][0], json!(real), "{rec}");
    assert_eq!(rec["env"]["DISABLE_AUTOUPDATER"], "1", "{rec}");
    w.assert_no_token_on_disk(&[], &[]);
}

/// A `shell` session (`/bin/sh -c SCRIPT`, no project); panics unless it ran.
fn shell(w: &World, script: &str) -> Out {
    let script = format!("{script}\necho relay-session-ran");
    let req = json!({"kind": "terminal", "template": "shell", "extra_args": ["-c", script]});
    let out = w.launch_for(&req, TIMEOUT);
    assert!(
        out.stdout.contains("relay-session-ran"),
        "the shell session did not run: {}",
        out.describe()
    );
    out
}

/// Copies the fake agent to `to` (0755), making its folders (0755).
fn place_agent(to: &Path) {
    mkdir(to.parent().unwrap(), 0o755);
    relay_tests::copy_program(&fake_agent(), to);
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The native installer's layout in `home`: the versioned file and the link to it; returns
/// `~/.local/bin`.
fn native_layout(home: &Path) -> PathBuf {
    let version = home.join(".local/share/claude/versions").join(VERSION);
    place_agent(&version);
    let bin = home.join(".local/bin");
    mkdir(&bin, 0o755);
    std::os::unix::fs::symlink(&version, bin.join("claude")).unwrap();
    bin
}

/// An npm global install under `prefix`: the package's binary in
/// `lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe` and the relative link
/// `bin/claude` to it, as npm makes them; returns `<prefix>/bin`.
fn npm_layout(prefix: &Path) -> PathBuf {
    let package = prefix.join("lib/node_modules/@anthropic-ai/claude-code");
    place_agent(&package.join("bin/claude.exe"));
    let bin = prefix.join("bin");
    mkdir(&bin, 0o755);
    let rel = "../lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe";
    std::os::unix::fs::symlink(rel, bin.join("claude")).unwrap();
    bin
}

/// The native installer's `~/.local/bin/claude` -> `~/.local/share/claude/versions/<v>` runs,
/// by its real path, with what the built-in hands over on fd 5.
#[test]
fn the_native_installers_layout_runs() {
    let w = world(|home, _| native_layout(home));
    let real = w.home.join(".local/share/claude/versions").join(VERSION);
    assert_claude_runs(&w, &real.canonicalize().unwrap());
}

/// npm's global install under a system prefix (a root-owned folder outside every grant, as
/// `/usr/local` is) runs.
#[test]
fn an_npm_install_under_a_system_prefix_runs() {
    let w = world(|_, root| npm_layout(&root.join("usr-local")));
    let real = w
        .root
        .join("usr-local/lib/node_modules/@anthropic-ai/claude-code/bin");
    assert_claude_runs(&w, &real.join("claude.exe").canonicalize().unwrap());
}

/// npm's global install under the user prefixes `~/.npm-global` and `~/.local` runs.
#[test]
fn an_npm_install_under_a_user_prefix_runs() {
    for prefix in [".npm-global", ".local"] {
        let w = world(|home, _| npm_layout(&home.join(prefix)));
        let package = w.home.join(prefix).join("lib/node_modules/@anthropic-ai");
        let real = package.join("claude-code/bin/claude.exe");
        assert_claude_runs(&w, &real.canonicalize().unwrap());
    }
}

/// The script that tries to plant a version in the installer's folder, replace the installed
/// one and repoint it, reporting each as `wrote`/`denied`.
fn plant_versions(home: &Path) -> String {
    let versions = home.join(".local/share/claude/versions");
    let v = |name: &str| versions.join(name).display().to_string();
    let attempts = [
        ("mkdir", format!("mkdir -p '{}'", versions.display())),
        ("new", format!("cp /bin/sh '{}'", v("2.1.333"))),
        (
            "replace",
            format!("printf '#!/bin/sh\\n' > '{}'", v(VERSION)),
        ),
        (
            "move",
            format!("mv '{}' '{}'", versions.display(), v("../old")),
        ),
    ];
    let mut script = String::new();
    for (name, cmd) in attempts {
        script.push_str(&format!(
            "if {cmd} 2>/dev/null; then echo 'wrote {name}'; else echo 'denied {name}'; fi\n"
        ));
    }
    script
}

/// A `shell` session cannot write into `~/.local/share/claude` (a new version, the installed
/// one replaced, the folder renamed away), whether the native install exists yet or not, and
/// leaves nothing there; a later claude launch still runs the installed one.
#[test]
fn a_shell_session_cannot_write_the_installers_versions() {
    for installed in [true, false] {
        let w = world(|home, _| match installed {
            true => native_layout(home),
            false => home.join(".local/bin"),
        });
        let share = w.home.join(".local/share/claude");
        let before = relay_tests::entries_under(&w.home).len();
        let out = shell(&w, &plant_versions(&w.home));
        for name in ["new", "replace", "move"] {
            assert!(
                out.stdout.contains(&format!("denied {name}")),
                "installed {installed}: {name} worked: {}",
                out.describe()
            );
        }
        assert!(!share.join("versions/2.1.333").exists());
        assert_eq!(relay_tests::entries_under(&w.home).len(), before);
        if installed {
            let real = share.join("versions").join(VERSION).canonicalize().unwrap();
            assert_eq!(
                sha256_hex(&std::fs::read(&real).unwrap()),
                sha256_hex(&std::fs::read(fake_agent()).unwrap())
            );
            assert_claude_runs(&w, &real);
        } else {
            assert!(!share.exists(), "{}", out.describe());
        }
    }
}

/// One layout: where `claude` is linked from (on `PATH`), the program it links to, and a
/// folder a session would add a new version or package to.
struct Installed {
    bin: PathBuf,
    program: PathBuf,
    sibling: PathBuf,
}

impl Installed {
    fn new(bin: PathBuf, program: PathBuf) -> Installed {
        let sibling = program.parent().unwrap().join("9.9.9");
        Installed {
            bin,
            program,
            sibling,
        }
    }
}

/// The native installer's layout in `home` ([`native_layout`]).
fn native(home: &Path) -> Installed {
    let bin = native_layout(home);
    Installed::new(bin, home.join(".local/share/claude/versions").join(VERSION))
}

/// `npm install -g` into the user prefix `~/.npm-global` ([`npm_layout`]).
fn npm_user_prefix(home: &Path) -> Installed {
    let prefix = home.join(".npm-global");
    let bin = npm_layout(&prefix);
    let program = prefix.join("lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe");
    Installed::new(bin, program)
}

/// The shell script of the attack: overwrite the installed program, remove it, add a sibling
/// version, repoint `bin/claude` at it, move the install folder away; each says whether it
/// worked.
fn attack(i: &Installed) -> String {
    let (p, s, link) = (
        i.program.display(),
        i.sibling.display(),
        i.bin.join("claude"),
    );
    let parent = i.program.parent().unwrap().display().to_string();
    format!(
        "try() {{ if sh -c \"$2\" 2>/dev/null; then echo \"wrote $1\"; else echo \"denied $1\"; fi; }}\n\
         try overwrite \"printf planted > '{p}'\"\n\
         try remove \"rm -f '{p}'\"\n\
         try sibling \"printf planted > '{s}'\"\n\
         try relink \"ln -sfn '{s}' '{link}'\"\n\
         try move \"mv '{parent}' '{parent}.old'\"\n",
        link = link.display()
    )
}

/// A `shell` session tries [`attack`] on the layout `install` makes; every try is denied, the
/// program and its link are as installed, and the next `claude-code` launch runs it with the
/// token (its record holds the token's hash).
fn install_folders_are_out_of_reach(install: fn(&Path) -> Installed) {
    let mut made = None;
    let w = world(|home, _| {
        let i = install(home);
        let bin = i.bin.clone();
        made = Some(i);
        bin
    });
    let i = made.expect("the layout");
    let before = sha256_hex(&std::fs::read(&i.program).unwrap());

    let req = json!({"kind": "terminal", "template": "shell", "project": w.project,
                     "extra_args": ["-c", attack(&i)]});
    let out = w.launch_for(&req, TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    for what in ["overwrite", "remove", "sibling", "relink", "move"] {
        assert!(
            out.stdout.contains(&format!("denied {what}")),
            "{what} worked: {}",
            out.describe()
        );
    }
    assert_eq!(sha256_hex(&std::fs::read(&i.program).unwrap()), before);
    assert!(!i.sibling.exists());
    assert_claude_runs(&w, &i.program.canonicalize().unwrap());
}

/// The native installer's folders (`~/.local/bin`, `~/.local/share/claude`).
#[test]
fn a_session_cannot_replace_a_native_install() {
    install_folders_are_out_of_reach(native);
}

/// An npm user prefix's folders (`~/.npm-global/bin`, `~/.npm-global/lib/node_modules`).
#[test]
fn a_session_cannot_replace_an_npm_user_prefix_install() {
    install_folders_are_out_of_reach(npm_user_prefix);
}

/// Before Claude Code is installed, a `shell` session cannot prepare the native installer's
/// folder (`~/.local/share/claude`, held by a placeholder while the session runs) for a later
/// install to link to, and leaves nothing in the home folder.
#[test]
fn a_session_cannot_prepare_a_native_install() {
    let w = world(|home, _| home.join(".local/bin"));
    let before = relay_tests::agent::entries_under(&w.home);
    let script = format!(
        "if mkdir -p {v} 2>/dev/null && printf planted > {v}/1.0.0 2>/dev/null; \
         then echo wrote; else echo denied; fi",
        v = w.home.join(".local/share/claude/versions").display()
    );
    let req = json!({"kind": "terminal", "template": "shell", "project": w.project,
                     "extra_args": ["-c", script]});
    let out = w.launch_for(&req, TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    assert_eq!(out.stdout.trim(), "denied", "{}", out.describe());
    assert_eq!(relay_tests::agent::entries_under(&w.home), before);
}
