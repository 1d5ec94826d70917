//! The host's own config and state folders inside the read-write `~` of a `shell` template
//! that writes the home (`"writes_home": true`): the
//! session can neither rewrite the settings (directly, or by renaming a parent away and planting
//! new ones) nor read another session's files in the state folder. See docs/THREAT-MODEL.md.
//!
//! Needs the built `relay-host` and `relay-shim` and a working `bwrap`.

use std::path::{Path, PathBuf};
use std::process::Command;

use relay_tests::fixture::Layout;
use relay_tests::world::{Token, World};
use serde_json::json;

/// A world whose config and state folders are relay-host's defaults in the home
/// (`~/.config/relay`, `~/.local/state/relay`, inside a `shell` session's read-write `~`), a
/// Claude-shaped token at `~/TOKEN_DIR/token` and settings naming it only.
fn home(token_dir: &'static str) -> World {
    let w = World::builder()
        .layout(Layout {
            config: "home/.config/relay",
            token_dir,
            ..Layout::agent("relay-own-folders.")
        })
        .token(Token::Claude)
        .build();
    std::fs::create_dir_all(w.home.join(".local/state/relay")).unwrap();
    // A `shell` that writes the whole home: the operator said so (`writes_home`).
    let shell = json!({"id": "shell", "sandbox": {"read_write": ["~/", "{project}"]},
                       "writes_home": true});
    w.settings(json!({"claude_token_file": format!("~/{token_dir}/token"),
                      "templates": [shell]}));
    w
}

/// The settings file in `h`'s default config folder.
fn settings_file(h: &World) -> PathBuf {
    h.config.join("settings.json")
}

/// `relay-host run --template shell` in `h`, running `script` in the sandbox. Panics unless the
/// session really ran (a refused launch would make every "cannot" below pass without testing).
fn shell(h: &World, script: &str) -> (i32, String) {
    let script = format!("{script}\nrc=$?; echo relay-session-ran; exit $rc");
    let out = Command::new(relay_tests::relay_host())
        .args(["run", "--keep", "--template", "shell", "--project"])
        .arg(&h.home)
        .args(["--", "-c", &script])
        .env("HOME", &h.home)
        .env_remove("RELAY_CONFIG_DIR")
        .env_remove("RELAY_STATE_DIR")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("relay-session-ran"),
        "the shell session did not run: {text}"
    );
    (out.status.code().unwrap_or(-1), text)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn a_shell_session_cannot_rewrite_the_settings() {
    let h = home(".config/claude-ltt");
    let before = read(&settings_file(&h));
    let (_, text) = shell(
        &h,
        &format!("echo '{{}}' > '{}'", settings_file(&h).display()),
    );
    assert_eq!(
        read(&settings_file(&h)),
        before,
        "settings rewritten from a session: {text}"
    );
}

#[test]
fn a_shell_session_cannot_plant_settings_by_renaming_an_ancestor() {
    let h = home("secrets");
    let before = read(&settings_file(&h));
    let c = h.home.join(".config");
    let script = format!(
        "mv '{c}' '{c}.moved' && mkdir -p '{c}/relay' && echo '{{}}' > '{c}/relay/settings.json'",
        c = c.display()
    );
    let (_, text) = shell(&h, &script);
    assert_eq!(
        read(&settings_file(&h)),
        before,
        "settings planted from a session: {text}"
    );
}

#[test]
fn the_token_file_stays_masked_in_a_shell_session() {
    // The control for the two above: the same setup, and the token itself is hidden.
    for setting in [".config/claude-ltt", "secrets"] {
        let h = home(setting);
        let (code, text) = shell(&h, &format!("cat '{}'", h.token_file.display()));
        assert_ne!(code, 0, "{setting}: {text}");
        relay_tests::assert_no_token(setting, text.as_bytes(), &h.token);
    }
}

#[test]
fn a_shell_session_cannot_read_another_sessions_files() {
    let h = home(".config/claude-ltt");
    let (code, text) = shell(&h, "echo private-note-of-session-one > \"$TMPDIR/note\"");
    assert_eq!(code, 0, "{text}");
    let sessions = h.home.join(".local/state/relay/sessions");
    let notes: Vec<PathBuf> = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().path().join("tmp/note"))
        .filter(|p| p.exists())
        .collect();
    assert_eq!(notes.len(), 1, "the first session's note on the host side");
    let (code, text) = shell(&h, &format!("cat '{}'", notes[0].display()));
    assert_ne!(code, 0, "{text}");
    assert!(!text.contains("private-note-of-session-one"), "{text}");
}

#[test]
fn a_shell_session_cannot_replace_a_program_that_later_gets_the_token() {
    // The claude-code template runs a program under ~ (granted read-write to `shell`): a shell
    // session must not be able to rewrite it, nor rename its folder away and plant another.
    let h = home(".config/claude-ltt");
    let bin = h.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let program = bin.join("agent");
    relay_tests::copy_program(&relay_tests::fake_agent(), &program);
    h.settings(json!({
        "claude_token_file": "~/.config/claude-ltt/token",
        "templates": [
            {"id": "claude-code", "command": [program], "sandbox": {"read_write": ["{project}"]}},
            {"id": "shell", "sandbox": {"read_write": ["~/", "{project}"]}, "writes_home": true},
        ],
    }));
    let before = std::fs::read(&program).unwrap();
    let script = format!(
        "cp /bin/true '{p}'; printf x >> '{p}'; rm -f '{p}'; mv '{b}' '{b}.moved'; \
         mkdir -p '{b}' && cp /bin/true '{p}'",
        p = program.display(),
        b = bin.display()
    );
    let (_, text) = shell(&h, &script);
    assert!(
        !h.home.join("bin.moved").exists(),
        "the folder was renamed away: {text}"
    );
    assert_eq!(
        std::fs::read(&program).unwrap(),
        before,
        "the program was replaced from a session: {text}"
    );
}
