//! Claude Code's install folders are out of every session's reach, as `~/.local/bin` is: a
//! `shell` session (the built-in template, the whole home read-write) can neither replace nor
//! add what the native installer (`~/.local/share/claude/versions/<v>`, linked from
//! `~/.local/bin/claude`) or an npm user prefix (`~/.npm-global/lib/node_modules/...`, linked
//! from `~/.npm-global/bin/claude`) installed, and the next token launch runs the program the
//! operator installed (the fake agent standing in for Claude Code), in the built-in's mode (a
//! stand-in on Linux).
//!
//! Needs the binaries (`cargo build -p relay-host -p relay-shim -p relay-tests --bins`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use relay_tests::fixture::{Folders, Layout, HOST_PATH};
use relay_tests::run::{finish_with, Out};
use relay_tests::{fake_agent, relay_host, sha256_hex};
use serde_json::{json, Value};

/// One layout: where `claude` is linked from (on `PATH`), the program it links to, and a
/// folder a session would add a new version or package to.
struct Installed {
    bin: PathBuf,
    program: PathBuf,
    sibling: PathBuf,
}

/// The native installer's layout in `home`, the fake agent as version 1.0.0.
fn native(home: &Path) -> Installed {
    let versions = home.join(".local/share/claude/versions");
    let program = versions.join("1.0.0");
    place(&program, home.join(".local/bin"), &program)
}

/// `npm install -g` into the user prefix `~/.npm-global`, the fake agent as the package's
/// binary, `bin/claude` a relative link to it.
fn npm_user_prefix(home: &Path) -> Installed {
    let prefix = home.join(".npm-global");
    let program = prefix.join("lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe");
    let link = Path::new("../lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe");
    place(&program, prefix.join("bin"), link)
}

/// Copies the fake agent to `program` and links `bin/claude` to `target`.
fn place(program: &Path, bin: PathBuf, target: &Path) -> Installed {
    std::fs::create_dir_all(program.parent().unwrap()).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    relay_tests::copy_program(&fake_agent(), program);
    std::os::unix::fs::symlink(target, bin.join("claude")).unwrap();
    let sibling = program.parent().unwrap().join("9.9.9");
    let program = program.to_path_buf();
    Installed {
        bin,
        program,
        sibling,
    }
}

/// Runs `relay-host launch` of `req` on `f` with `PATH` = `bin`, then [`HOST_PATH`].
fn launch(f: &Folders, bin: &Path, req: Value) -> Out {
    let file = f.root.join("request.json");
    std::fs::write(&file, req.to_string()).unwrap();
    let mut cmd = Command::new(relay_host());
    f.host_setup(&mut cmd, &f.state)
        .env("PATH", format!("{}:{HOST_PATH}", bin.display()))
        .args(["launch", file.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    finish_with(cmd.spawn().unwrap(), Duration::from_secs(60), &|| false)
}

/// One test's folders (the project inside the home, which the built-in `shell` template
/// grants read-write), a token, and settings whose `claude-code` template runs `claude` from
/// `PATH` (recording into `{project}/rec.jsonl`); returns the folders and the token.
fn world() -> (Folders, String) {
    let f = Folders::new(Layout {
        project: "home/proj",
        ..Layout::agent("relay-installs.")
    });
    let token = relay_tests::claude_fake_token();
    std::fs::write(&f.token_file, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&f.token_file, PermissionsExt::from_mode(0o600)).unwrap();
    let template = json!({
        "id": "claude-code",
        "command": ["claude"],
        "env": {"FAKE_AGENT_RECORD": "{project}/rec.jsonl", "CLAUDE_CONFIG_DIR": "{claude_config}"},
        "sandbox": {"read_write": ["{project}", "{claude_config}"]},
    });
    let settings =
        json!({"claude_token_file": "~/.config/acme-ltt/token", "templates": [template]});
    std::fs::write(f.config.join("settings.json"), settings.to_string()).unwrap();
    (f, token)
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
/// program and its link are as installed, and the next `claude-code` launch runs it, handing it
/// what the built-in hands over (a stand-in on Linux: its record holds another hash).
fn install_folders_are_out_of_reach(install: fn(&Path) -> Installed) {
    let (f, token) = world();
    let i = install(&f.home);
    let before = sha256_hex(&std::fs::read(&i.program).unwrap());

    let req = json!({"kind": "terminal", "template": "shell", "project": f.project,
                     "extra_args": ["-c", attack(&i)]});
    let out = launch(&f, &i.bin, req);
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

    let out = launch(&f, &i.bin, json!({"kind": "claude", "project": f.project}));
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let recs = relay_tests::read_records(&f.project.join("rec.jsonl"));
    let rec = recs.last().expect("the installed program ran");
    relay_tests::install::assert_fd5_as_shipped(rec, &token);
    relay_tests::scan_for_tokens(&f.root, &f.token_file, &[&token]).assert_clean(0);
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
    let (f, _) = world();
    let bin = f.home.join(".local/bin");
    let before = relay_tests::agent::entries_under(&f.home);
    let script = format!(
        "if mkdir -p {v} 2>/dev/null && printf planted > {v}/1.0.0 2>/dev/null; \
         then echo wrote; else echo denied; fi",
        v = f.home.join(".local/share/claude/versions").display()
    );
    let req = json!({"kind": "terminal", "template": "shell", "project": f.project,
                     "extra_args": ["-c", script]});
    let out = launch(&f, &bin, req);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    assert_eq!(out.stdout.trim(), "denied", "{}", out.describe());
    assert_eq!(relay_tests::agent::entries_under(&f.home), before);
}
