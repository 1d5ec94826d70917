//! Every hint a person can cause is one that works when followed: each case below causes a
//! refusal on a terminal, reads its `hint:` line, runs the command the hint shows (its last
//! `...` span) as a person would (through `sh -c`, `relay-host` on `PATH`), and checks that the
//! cause is gone.

use std::io::Write;

use super::*;

/// `cmd` with its stderr on a terminal (a pty), `stdin` written to it: its exit code, its
/// stdout, and what the terminal showed.
fn on_a_terminal(mut cmd: Command, stdin: &[u8]) -> (Option<i32>, String, String) {
    let (master, slave) = relay_tests::openpty();
    cmd.stderr(Stdio::from(slave)).stdin(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = finish_with(child, TIMEOUT, &|| false);
    assert!(!out.killed, "did not finish within {TIMEOUT:?}");
    drop(cmd);
    let shown = relay_tests::terminal_shown(master);
    let shown = String::from_utf8_lossy(&shown).replace("\r\n", "\n");
    (out.code, out.stdout, shown)
}

/// A command line run as a person runs it: `sh -c LINE` in `dir`, with the world's folders
/// (`RELAY_CONFIG_DIR`, `RELAY_STATE_DIR`), its `HOME`, relay-host's environment and the built
/// `relay-host` first on `PATH`, stderr on a terminal.
pub fn as_a_person(
    fx: &World,
    line: &str,
    dir: &Path,
    stdin: &[u8],
) -> (Option<i32>, String, String) {
    let bin = relay_tests::relay_host().parent().unwrap().to_path_buf();
    let mut cmd = Command::new("/bin/sh");
    relay_tests::run::default_signals(&mut cmd)
        .args(["-c", line])
        .env_clear()
        .env("HOME", &fx.home)
        .env(
            "PATH",
            format!("{}:{}", bin.display(), relay_tests::fixture::HOST_PATH),
        )
        .env("LANG", "C.UTF-8")
        .env("RELAY_CONFIG_DIR", &fx.config)
        .env("RELAY_STATE_DIR", &fx.state)
        .envs(&fx.host_env)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .process_group(0);
    on_a_terminal(cmd, stdin)
}

/// The `hint:` line of what a terminal showed (panics when there is none).
fn hint_of(shown: &str) -> String {
    shown
        .lines()
        .find_map(|l| l.strip_prefix("hint: "))
        .unwrap_or_else(|| panic!("no hint: {shown}"))
        .to_string()
}

/// The command a hint shows: its last `...` span.
fn command_of(hint: &str) -> String {
    hint.split('`')
        .rev()
        .nth(1)
        .unwrap_or_else(|| panic!("no command in the hint: {hint}"))
        .to_string()
}

use std::os::unix::process::CommandExt;

/// Settings with the token file and `extra` (the world's bwrap kept).
fn set_settings(fx: &World, extra: Value) {
    let mut s = json!({"claude_token_file": "~/.config/acme-ltt/token"});
    if let Some(bwrap) = relay_tests::settings_bwrap() {
        s["bwrap"] = json!(bwrap);
    }
    s.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    fx.settings(s);
}

#[test]
fn a_settings_error_points_at_templates_which_prints_the_built_ins() {
    let fx = world();
    std::fs::write(fx.config.join("settings.json"), "{\"claude_token_file\": ").unwrap();
    let (code, _, shown) = as_a_person(&fx, "relay-host status", &fx.home, b"");
    assert_eq!(code, Some(78), "{shown}");
    let (code, _, shown) = as_a_person(&fx, "relay-host run", &fx.project, b"");
    assert_eq!(code, Some(78), "{shown}");
    let hint = hint_of(&shown);
    assert!(!hint.contains("key and line named"), "{hint}");
    assert!(hint.contains("`relay-host templates`"), "{hint}");
    // Followed: the built-in templates, and the reason they are the built-ins alone.
    let (code, stdout, shown) = as_a_person(&fx, "relay-host templates", &fx.home, b"");
    assert_eq!(code, Some(78), "{shown}");
    assert_eq!(stdout, relay_host::cli::templates_cmd::builtins_json());
    assert!(
        shown.contains("the settings do not load: these are the built-in templates alone"),
        "{shown}"
    );
}

#[test]
fn claudes_p_habit_given_to_relay_shows_the_prompt_after_the_double_dash() {
    let fx = world();
    let line = "relay-host run -p \"explain this repo\"";
    let (code, _, shown) = as_a_person(&fx, line, &fx.project, b"");
    assert_eq!(code, Some(64), "{shown}");
    let hint = hint_of(&shown);
    let command = command_of(&hint);
    assert_eq!(
        command, "relay-host run -- -p 'explain this repo'",
        "{hint}"
    );
    let (code, _, shown) = as_a_person(&fx, &command, &fx.project, b"");
    assert_eq!(code, Some(0), "{command}: {shown}");
    let rec = relay_tests::read_records(&fx.record)
        .pop()
        .expect("a record");
    let argv: Vec<&str> = rec["argv"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        argv.windows(2).any(|w| w == ["-p", "explain this repo"]),
        "{argv:?}"
    );
}

#[test]
fn a_project_that_does_not_exist_is_made_by_the_hints_command() {
    let fx = world();
    let missing = fx.project.join("new app");
    let line = format!("relay-host run --project '{}'", missing.display());
    let (code, _, shown) = as_a_person(&fx, &line, &fx.home, b"");
    assert_eq!(code, Some(64), "{shown}");
    let hint = hint_of(&shown);
    let mkdir = hint
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("{hint}"))
        .to_string();
    assert_eq!(mkdir, format!("mkdir -p '{}'", missing.display()), "{hint}");
    let (code, _, shown) = as_a_person(&fx, &mkdir, &fx.home, b"");
    assert_eq!(code, Some(0), "{shown}");
    let (code, _, shown) = as_a_person(&fx, &line, &fx.home, b"");
    assert_eq!(code, Some(0), "{line}: {shown}");
}

#[test]
fn a_token_file_owned_by_another_user_is_replaced_by_the_hints_import() {
    let fx = world();
    std::os::unix::fs::chown(&fx.token_file, Some(65534), Some(65534)).unwrap();
    let (code, _, shown) = as_a_person(&fx, "relay-host run", &fx.project, b"");
    assert_eq!(code, Some(78), "{shown}");
    let hint = hint_of(&shown);
    assert!(hint.contains("belongs to another user"), "{hint}");
    let import = hint
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("{hint}"))
        .to_string();
    assert_eq!(import, "relay-host token import", "{hint}");
    let token = relay_tests::claude_fake_token();
    let (code, _, shown) = as_a_person(&fx, &import, &fx.home, format!("{token}\n").as_bytes());
    assert_eq!(code, Some(0), "{shown}");
    let (code, _, shown) = as_a_person(&fx, "relay-host token check", &fx.home, b"");
    assert_eq!(code, Some(0), "{shown}");
    let (code, _, shown) = as_a_person(&fx, "relay-host run", &fx.project, b"");
    assert_eq!(code, Some(0), "{shown}");
}

#[test]
fn no_claude_on_path_at_run_says_what_status_says() {
    let fx = world();
    // The built-in claude-code template as shipped, whose `claude` is not on PATH here.
    set_settings(&fx, json!({}));
    let (code, _, shown) = as_a_person(&fx, "relay-host run", &fx.project, b"");
    assert_eq!(code, Some(71), "{shown}");
    let hint = hint_of(&shown);
    let (_, status, _) = as_a_person(&fx, "relay-host status", &fx.home, b"");
    assert!(
        status.contains(&format!("hint: {hint}")),
        "run's hint {hint:?} is not status's: {status}"
    );
    assert!(
        hint.contains("npm install -g @anthropic-ai/claude-code"),
        "{hint}"
    );
    // Followed by its other half: the template's command set to Claude's path.
    set_settings(
        &fx,
        json!({"templates": [{"id": "claude-code", "command": [relay_tests::fake_agent()]}]}),
    );
    let (code, _, shown) = as_a_person(&fx, "relay-host status", &fx.home, b"");
    assert!(!shown.contains("not found or not executable"), "{shown}");
    let _ = code;
}

#[test]
fn an_anthropic_base_url_in_a_stand_in_templates_env_is_refused_naming_the_ways_out() {
    let fx = world();
    let t = |extra: Value| {
        let mut t = json!({"id": "claude-code",
            "env": {"ANTHROPIC_BASE_URL": "https://gateway.example"}});
        t.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"templates": [t]})
    };
    set_settings(&fx, t(json!({})));
    let out = fx.host(&["--json", "status"]);
    assert_eq!(out.code, Some(78), "{}", out.stdout);
    let r = out.json("status --json");
    let settings = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "settings")
        .unwrap_or_else(|| panic!("{r}"))
        .clone();
    let detail = settings.to_string();
    for part in [
        "ANTHROPIC_BASE_URL",
        "api_base_url",
        "\\\"token_mode\\\": \\\"pipe\\\"",
    ] {
        assert!(detail.contains(part), "{part}: {detail}");
    }
    // Followed: with "token_mode": "pipe" the settings load.
    set_settings(&fx, t(json!({"token_mode": "pipe"})));
    let out = fx.host(&["--json", "status"]);
    let r = out.json("status --json");
    let settings = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "settings")
        .unwrap()
        .clone();
    assert_eq!(settings["ok"], true, "{settings}");
}
