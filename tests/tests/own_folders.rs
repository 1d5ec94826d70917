//! The host's own config and state folders inside a `shell` session's read-write `~`: known
//! defects, described in docs/THREAT-MODEL.md (residual risks). Ignored until they are fixed;
//! run them with `cargo test -p relay-tests --test own_folders -- --ignored`.
//!
//! Needs the built `relay-host` and `relay-shim` and a working `bwrap`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A throwaway home with the default config and state folders and a token file.
struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
    settings: PathBuf,
}

fn home(token_setting: &str) -> Home {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let token = home.join(token_setting.trim_start_matches("~/"));
    std::fs::create_dir_all(token.parent().unwrap()).unwrap();
    std::fs::write(&token, "sk-ant-oat01-own-folders-test\n").unwrap();
    let config = home.join(".config/relay");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::create_dir_all(home.join(".local/state/relay")).unwrap();
    let settings = config.join("settings.json");
    let text = format!("{{\"claude_token_file\": \"{token_setting}\"}}\n");
    std::fs::write(&settings, text).unwrap();
    Home {
        _dir: dir,
        home,
        settings,
    }
}

/// `relay-host run --template shell` in `h`, running `script` in the sandbox.
fn shell(h: &Home, script: &str) -> (i32, String) {
    let out = Command::new(relay_tests::relay_host())
        .args(["run", "--template", "shell", "--project"])
        .arg(&h.home)
        .args(["--", "-c", script])
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
    (out.status.code().unwrap_or(-1), text)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

#[test]
#[ignore = "known defect: the deny's guard on ~/.config is laid read-write over the read-only \
            bind of ~/.config/relay (sandbox/bwrap.rs lays guards after all grants)"]
fn a_shell_session_cannot_rewrite_the_settings() {
    let h = home("~/.config/claude-ltt/token");
    let before = read(&h.settings);
    let (_, text) = shell(&h, &format!("echo '{{}}' > '{}'", h.settings.display()));
    assert_eq!(
        read(&h.settings),
        before,
        "settings rewritten from a session: {text}"
    );
}

#[test]
#[ignore = "known defect: the folders between a grant and the host's own folders are not bound \
            onto themselves, so a session can rename one and plant new settings"]
fn a_shell_session_cannot_plant_settings_by_renaming_an_ancestor() {
    let h = home("~/secrets/token");
    let before = read(&h.settings);
    let c = h.home.join(".config");
    let script = format!(
        "mv '{c}' '{c}.moved' && mkdir -p '{c}/relay' && echo '{{}}' > '{c}/relay/settings.json'",
        c = c.display()
    );
    let (_, text) = shell(&h, &script);
    assert_eq!(
        read(&h.settings),
        before,
        "settings planted from a session: {text}"
    );
}

#[test]
fn the_token_file_stays_masked_in_a_shell_session() {
    // The control for the two above: the same setup, and the token itself is hidden.
    for setting in ["~/.config/claude-ltt/token", "~/secrets/token"] {
        let h = home(setting);
        let token = h.home.join(setting.trim_start_matches("~/"));
        let (code, text) = shell(&h, &format!("cat '{}'", token.display()));
        assert_ne!(code, 0, "{setting}: {text}");
        assert!(
            !text.contains("sk-ant-oat01-own-folders-test"),
            "{setting}: {text}"
        );
    }
}
