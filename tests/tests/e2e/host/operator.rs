//! The operator's day (issue 14): storing the token (`token import`, `token check`), a
//! credentials folder, errors with hints on a terminal, folders, a lone `relay-host`, and a state
//! folder that stays small (`gc`).

use std::fs;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::json;

use super::*;

/// A token in the shape `claude setup-token` makes, with a random part.
fn oat_token() -> String {
    let random = || relay_tests::fake_token().replace("acme-fake-token-", "");
    format!("sk-ant-oat01-{}_{}-{}AA", random(), random(), random())
}

/// `relay-host token import ARGS` with `input` on stdin.
fn import(fx: &World, input: &[u8], args: &[&str]) -> Out {
    let mut cmd = fx.host_cmd();
    cmd.args(["token", "import"])
        .args(args)
        .stdin(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    finish(child, TIMEOUT)
}

/// What `setup-token` prints on an 80-column terminal: colours, and the token wrapped.
fn setup_token_output(token: &str) -> Vec<u8> {
    let (a, b) = token.split_at(60);
    format!(
        "\u{1b}[32m✓ Long-lived authentication token created successfully!\u{1b}[39m\r\n\r\n\
         Your OAuth token (valid for 1 year):\r\n\r\n\u{1b}[33m{a}\u{1b}[39m\r\n\u{1b}[33m{b}\
         \u{1b}[39m\r\n\r\n\u{1b}[2mStore this token securely. You won't be able to see it again.\
         \u{1b}[22m\r\n\u{1b}[2mUse this token by setting: export CLAUDE_CODE_OAUTH_TOKEN=<token>\
         \u{1b}[22m\r\n"
    )
    .into_bytes()
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

fn default_token_path(fx: &World) -> PathBuf {
    fx.home.join(".config/claude-ltt/token")
}

fn assert_quiet(out: &Out, token: &str) {
    assert_no_token("stdout", out.stdout.as_bytes(), token);
    assert_no_token("stderr", out.stderr.as_bytes(), token);
}

#[test]
fn import_takes_the_one_token_out_of_setup_token_output() {
    let fx = world();
    let token = oat_token();
    let out = import(&fx, &setup_token_output(&token), &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_quiet(&out, &token);
    let path = default_token_path(&fx);
    let written = fs::read(&path).unwrap();
    assert_eq!(
        sha256_hex(&written),
        sha256_hex(format!("{token}\n").as_bytes())
    );
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    let settings: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(fx.config.join("settings.json")).unwrap())
            .unwrap();
    assert_eq!(
        settings,
        json!({"claude_token_file": "~/.config/claude-ltt/token"})
    );
    let check = fx.host(&["token", "check", "--json"]);
    assert_eq!(check.code, Some(0), "{}", check.stderr);
    let r: serde_json::Value = serde_json::from_str(&check.stdout).unwrap();
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["mode"], "0600");
    assert_eq!(r["links"], 1);
    assert_eq!(r["bytes"], token.len());
    assert_eq!(r["warnings"], json!([]), "{r}");
    assert_quiet(&check, &token);
}

#[test]
fn import_takes_a_bare_token_and_keeps_the_settings_as_they_were() {
    let fx = world();
    let token = oat_token();
    // JSON: the key is added, everything else stays byte for byte.
    let json_text = "{\n    \"bwrap\": \"/usr/bin/bwrap\",\n    \"templates\": []\n}\n";
    fs::write(fx.config.join("settings.json"), json_text).unwrap();
    let out = import(&fx, token.as_bytes(), &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_quiet(&out, &token);
    assert_eq!(
        fs::read_to_string(fx.config.join("settings.json")).unwrap(),
        "{\n    \"claude_token_file\": \"~/.config/claude-ltt/token\",\n    \"bwrap\": \
         \"/usr/bin/bwrap\",\n    \"templates\": []\n}\n"
    );
    // TOML, with a comment and an empty value: only the value changes.
    fs::remove_file(fx.config.join("settings.json")).unwrap();
    let toml_text = "# mine\nclaude_token_file = \"\"\nbwrap = \"/usr/bin/bwrap\"\n";
    fs::write(fx.config.join("settings.toml"), toml_text).unwrap();
    let out = import(&fx, format!("{token}\n").as_bytes(), &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        fs::read_to_string(fx.config.join("settings.toml")).unwrap(),
        "# mine\nclaude_token_file = \"~/.config/claude-ltt/token\"\nbwrap = \"/usr/bin/bwrap\"\n"
    );
    // A set value is left alone, and the file it names is the one written.
    let out = import(&fx, oat_token().as_bytes(), &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("replaced"), "{}", out.stdout);
    assert!(
        !out.stdout.contains("claude_token_file set"),
        "{}",
        out.stdout
    );
}

#[test]
fn import_refuses_no_token_and_several_naming_how_many() {
    let fx = world();
    let (a, b) = (oat_token(), oat_token());
    let cases: [(Vec<u8>, &str); 3] = [
        (
            format!("{a}\n{b}\n").into_bytes(),
            "2 different sk-ant-oat01- tokens",
        ),
        (
            b"hello, this is not it\n".to_vec(),
            "no sk-ant-oat01- token",
        ),
        (
            b"sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA\n".to_vec(),
            "1 other sk-ant- key",
        ),
    ];
    for (input, says) in cases {
        let out = import(&fx, &input, &[]);
        assert_eq!(out.code, Some(64), "{}", out.stderr);
        assert!(out.stderr.contains(says), "{says:?} in {}", out.stderr);
        assert_quiet(&out, &a);
        assert_quiet(&out, &b);
        assert!(
            !default_token_path(&fx).exists(),
            "a refused import wrote a file"
        );
        assert!(!fx.config.join("settings.json").exists());
    }
    // The same token twice is one token.
    let out = import(&fx, format!("{a}\n{a}\n").as_bytes(), &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}

/// A reader in a loop never sees a partial or empty file while imports replace it.
#[test]
fn import_replaces_the_file_atomically() {
    let fx = world();
    let tokens = [oat_token(), oat_token()];
    let path = fx.root.join("tok/token");
    assert_eq!(
        import(
            &fx,
            tokens[0].as_bytes(),
            &["--file", path.to_str().unwrap()]
        )
        .code,
        Some(0)
    );
    let wanted: Vec<String> = tokens
        .iter()
        .map(|t| sha256_hex(format!("{t}\n").as_bytes()))
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (stop, path, wanted) = (stop.clone(), path.clone(), wanted.clone());
        std::thread::spawn(move || {
            let mut reads = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let bytes = fs::read(&path).expect("the file is always there");
                assert!(wanted.contains(&sha256_hex(&bytes)), "a partial file");
                reads += 1;
            }
            reads
        })
    };
    for i in 0..20 {
        let out = import(
            &fx,
            tokens[i % 2].as_bytes(),
            &["--file", path.to_str().unwrap()],
        );
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    assert_eq!(mode(&path), 0o600);
    let left: Vec<_> = fs::read_dir(path.parent().unwrap()).unwrap().collect();
    assert_eq!(left.len(), 1, "temp files left behind: {left:?}");
}

/// `claude_token_file = "$CREDENTIALS_DIRECTORY/NAME"` reads the token from a folder shaped like
/// systemd's (0500 folder, 0400 file), and a launch hands it on; without the variable it names
/// what is missing.
#[test]
fn a_credentials_folder_token_is_read() {
    let mut fx = world();
    let creds = fx.root.join("credentials");
    fs::create_dir(&creds).unwrap();
    let file = creds.join("claude-token");
    fs::write(&file, format!("{}\n", fx.token)).unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o400)).unwrap();
    fs::set_permissions(&creds, fs::Permissions::from_mode(0o500)).unwrap();
    let mut t = claude_template(&[], json!({}), &[]);
    t["sandbox"]["read_write"] = json!(["{project}", "{claude_config}"]);
    fx.settings(
        json!({"claude_token_file": "$CREDENTIALS_DIRECTORY/claude-token",
                       "templates": [t]}),
    );
    let out = fx.host(&["token", "check", "--json"]);
    assert_eq!(out.code, Some(78), "{}", out.stdout);
    assert!(
        out.stderr.contains("CREDENTIALS_DIRECTORY"),
        "{}",
        out.stderr
    );
    fx.host_env
        .insert("CREDENTIALS_DIRECTORY".into(), creds.display().to_string());
    let out = fx.host(&["token", "check", "--json"]);
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let r: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(r["path"], file.display().to_string());
    assert_eq!(r["mode"], "0400");
    let out = fx.launch(&json!({"kind": "claude", "session_id": "c1", "project": fx.project}));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_got_token(&fx.records()[0], &fx.token);
}

/// Session folders go when their session ends: 200 launches leave none; a kept one stays until
/// `gc` finds it older than the retention.
#[test]
fn launches_leave_no_session_folder_and_gc_prunes_kept_ones() {
    let fx = world();
    fx.settings(json!({}));
    let req = json!({"kind": "terminal", "template": "shell", "extra_args": ["-c", "true"]});
    for _ in 0..200 {
        let out = fx.launch(&req);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }
    let sessions = fx.state.join("sessions");
    let left: Vec<_> = fs::read_dir(&sessions).unwrap().collect();
    assert!(left.is_empty(), "{} session folders left", left.len());
    let mut kept = req.clone();
    kept["session_id"] = json!("kept1");
    kept["keep"] = json!(true);
    assert_eq!(fx.launch(&kept).code, Some(0));
    assert!(fx.session_dir("kept1").is_dir());
    let out = fx.host(&["gc", "--json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let r: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        r,
        json!({"removed": 0, "kept": 1, "running": 0, "placeholders_removed": 0,
               "sandbox_leftovers_removed": 0, "host_lost": 0})
    );
    // The session ended eight days ago.
    let eight_days = std::time::Duration::from_secs(8 * 86400);
    fs::File::options()
        .append(true)
        .open(fx.session_dir("kept1").join("keep"))
        .unwrap()
        .set_modified(std::time::SystemTime::now() - eight_days)
        .unwrap();
    let out = fx.host(&["gc", "--json"]);
    let r: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        r,
        json!({"removed": 1, "kept": 0, "running": 0, "placeholders_removed": 0,
               "sandbox_leftovers_removed": 0, "host_lost": 0})
    );
    assert!(!fx.session_dir("kept1").exists());
}

/// `cargo install --locked --path relay-host` installs no relay-shim: with no relay-shim anywhere
/// relay-host runs itself as the shim, and the session gets its token.
#[test]
fn a_lone_relay_host_runs_itself_as_the_shim() {
    let fx = world();
    let host = fx.lone_host("bin", "relay-host");
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let req =
        fx.request_file(&json!({"kind": "claude", "session_id": "l1", "project": fx.project}));
    let out = finish(fx.lone_launch(&host, &req).spawn().unwrap(), TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_started(&fx, "l1", "fd");
    assert_got_token(&fx.records()[0], &fx.token);
    let status = std::process::Command::new(&host)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &fx.home)
        .args([
            "--config-dir",
            fx.config.to_str().unwrap(),
            "status",
            "--json",
        ])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(r["shim"]["path"], host.display().to_string());
}

/// `relay-host ARGS` of the world (see [`World::host_cmd`]) with stderr on a new pseudo-terminal
/// (see [`on_a_terminal`]).
fn host_on_a_terminal(fx: &World, args: &[&str]) -> (i32, String) {
    let mut cmd = fx.host_cmd();
    cmd.args(args);
    on_a_terminal(cmd)
}

/// Panics, showing the terminal, unless it showed `text`.
fn assert_shows(shown: &str, text: &str) {
    assert!(shown.contains(text), "{shown}");
}

/// Runs `cmd` with stderr on a new pseudo-terminal; returns the exit code and what the terminal
/// showed.
pub fn on_a_terminal(mut cmd: std::process::Command) -> (i32, String) {
    let (master, slave) = relay_tests::openpty();
    cmd.stderr(Stdio::from(slave));
    let out = finish(cmd.spawn().unwrap(), TIMEOUT);
    drop(cmd);
    let shown = relay_tests::terminal_shown(master);
    (
        out.code.expect("finish saw an exit code"),
        String::from_utf8_lossy(&shown).replace("\r\n", "\n"),
    )
}

/// A home relay-host cannot keep its state folder in (`HOME` names a file here): `run --json`
/// prints the launch's JSON answer naming the state folder (exit 71, as for a full one), and on
/// a terminal a sentence and a hint.
#[test]
fn run_without_a_usable_home_answers_as_any_refusal() {
    let fx = world();
    let home = fx.root.join("home-file");
    fs::write(&home, "").unwrap();
    let state = home.join(".local/state/relay");
    let cmd = |json: bool| {
        let mut c = std::process::Command::new(relay_tests::relay_host());
        c.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &home)
            .current_dir(&fx.project)
            .args(json.then_some("--json"))
            .args(["run", "--project", fx.project.to_str().unwrap()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let out = finish(cmd(true).spawn().unwrap(), TIMEOUT);
    assert_eq!(out.code, Some(71), "{}", out.stderr);
    let r: serde_json::Value = serde_json::from_str(out.stderr.trim()).expect("one JSON answer");
    assert_eq!(
        (&r["event"], &r["error"]),
        (&json!("launch"), &json!("spawn_failed")),
        "{r}"
    );
    let want = format!("state folder {}: ", state.display());
    assert!(r["message"].as_str().unwrap().starts_with(&want), "{r}");
    let (code, shown) = on_a_terminal(cmd(false));
    assert_eq!(code, 71, "{shown}");
    assert_shows(
        &shown,
        &format!("relay-host: the launch was refused: {want}"),
    );
    assert_shows(
        &shown,
        "\nhint: relay-host keeps its logs and session folders",
    );
}

/// On a terminal a refusal is one sentence and a hint; the event log holds the same JSON answer
/// as off a terminal; `--json` keeps JSON on a terminal too.
#[test]
fn refusals_on_a_terminal_say_what_to_do() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    fs::remove_file(&fx.token_file).unwrap();
    let req =
        fx.request_file(&json!({"kind": "claude", "session_id": "t1", "project": fx.project}));
    let (code, shown) = host_on_a_terminal(&fx, &["launch", req.to_str().unwrap()]);
    assert_eq!(code, 78);
    let want = format!(
        "relay-host: the launch was refused: read claude_token_file {}: no such file or \
         directory (sandbox_unavailable)\nhint: the token file is missing: make one with `claude \
         setup-token`, then store it with `relay-host token import`\n",
        fx.token_file.display()
    );
    assert_eq!(shown, want);
    let event = fx.log("events.jsonl").pop().unwrap();
    assert_eq!(event["error"], "sandbox_unavailable");
    assert_eq!(event["status"], 400);
    let (code, shown) = host_on_a_terminal(&fx, &["--json", "launch", req.to_str().unwrap()]);
    assert_eq!(code, 78);
    let line: serde_json::Value = serde_json::from_str(shown.trim()).unwrap();
    assert_eq!(line, fx.log("events.jsonl").pop().unwrap());
}

/// Each refusal a person meets first has its hint, on a terminal; off a terminal the same
/// refusal is the one JSON line.
#[test]
fn each_common_refusal_has_a_hint() {
    let fx = world();
    let t = claude_template(&[], json!({}), &[]);
    // (settings, request, the hint's words)
    let missing_bwrap = fx.root.join("no-bwrap");
    let cases = [
        (
            json!({"claude_token_file": SETTING, "templates": [t]}),
            json!({"kind": "claude", "project": fx.state}),
            "the current folder is the cause",
        ),
        (
            json!({"claude_token_file": SETTING, "bwrap": missing_bwrap, "templates": [t]}),
            json!({"kind": "claude", "project": fx.project}),
            "install bubblewrap",
        ),
    ];
    fs::create_dir_all(&fx.state).unwrap();
    for (settings, req, hint) in cases {
        fx.settings(settings);
        let p = fx.request_file(&req);
        let (code, shown) = host_on_a_terminal(&fx, &["launch", p.to_str().unwrap()]);
        assert_ne!(code, 0);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines.len(), 2, "{shown}");
        assert!(
            lines[0].starts_with("relay-host: the launch was refused: "),
            "{shown}"
        );
        assert!(
            lines[1].starts_with("hint: ") && lines[1].contains(hint),
            "{shown}"
        );
        let out = fx.launch(&req);
        refusal_line(&out);
    }
    // A host under another name finds no relay-shim anywhere.
    let lone = fx.root.join("lone");
    fs::create_dir(&lone).unwrap();
    let copy = lone.join("relay-host-copy");
    relay_tests::copy_program(&relay_tests::relay_host(), &copy);
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let p = fx.request_file(&json!({"kind": "claude", "project": fx.project}));
    let mut cmd = std::process::Command::new(&copy);
    cmd.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &fx.home)
        .args(["--config-dir", fx.config.to_str().unwrap()])
        .args(["--state-dir", fx.state.to_str().unwrap(), "launch"])
        .arg(&p)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let (code, shown) = on_a_terminal(cmd);
    assert_eq!(code, 71, "{shown}");
    assert_shows(&shown, "relay-shim not found");
    assert_shows(&shown, "\nhint: install relay-shim beside relay-host");
    // A pasted non-token in the file.
    fx.settings(
        json!({"claude_token_file": SETTING, "templates": [claude_template(&[], json!({}), &[])]}),
    );
    fs::write(
        &fx.token_file,
        "{\"claudeAiOauth\": {\"accessToken\": \"x\"}}\n",
    )
    .unwrap();
    let p = fx.request_file(&json!({"kind": "claude", "project": fx.project}));
    let (_, shown) = host_on_a_terminal(&fx, &["launch", p.to_str().unwrap()]);
    // The hint's own example reads as written: the redaction of the refusal leaves it alone.
    assert_shows(
        &shown,
        "hint: the token file must hold the token alone (the one `sk-ant-…` line",
    );
    assert!(!shown.contains("[REDACTED]"), "{shown}");
}

/// A Claude launch that gets no token says so to a person.
#[test]
fn a_claude_launch_without_a_token_says_so() {
    let fx = world();
    fx.settings(json!({"templates": [claude_template(&[], json!({}), &[])]}));
    let (code, shown) = host_on_a_terminal(&fx, &["run", "-p", fx.project.to_str().unwrap()]);
    assert_eq!(code, 0, "{shown}");
    assert_shows(
        &shown,
        "this Claude session gets no token (claude_token_file is not set)",
    );
    let project = fx.project.to_str().unwrap();
    let (_, shown) = host_on_a_terminal(&fx, &["run", "--no-sandbox", "--project", project]);
    assert_shows(&shown, "an unsandboxed launch never gets it");
}

/// A NUL in `extra_args`, an oversized `env` and an array as the request are `invalid_spec`
/// naming the field.
#[test]
fn bad_requests_name_the_field() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let big = "x".repeat(70_000);
    let cases = [
        (
            json!({"kind": "claude", "extra_args": ["ok", "a\u{0}b"]}),
            "extra_args[1]: holds a NUL byte",
        ),
        (
            json!({"kind": "claude", "env": {"BIG": big}}),
            "env: 70005 bytes, more than the 65536",
        ),
        (
            json!([{"kind": "claude"}]),
            "request: must be one JSON object",
        ),
    ];
    for (req, says) in cases {
        let out = fx.launch(&req);
        let msg = assert_refused(&fx, &out, 64, "invalid_spec");
        assert!(msg.starts_with(says), "{says:?}: {msg}");
    }
}

/// XDG folders come before the defaults; a relative RELAY_*_DIR is refused; the read-only
/// commands create no folder.
#[test]
fn folders_follow_xdg_and_reading_creates_nothing() {
    let fx = world();
    let run = |args: &[&str], env: &[(&str, String)]| {
        let mut cmd = std::process::Command::new(relay_tests::relay_host());
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &fx.home)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        finish(cmd.spawn().unwrap(), TIMEOUT)
    };
    let xdg = [
        ("XDG_CONFIG_HOME", fx.root.join("xc").display().to_string()),
        ("XDG_STATE_HOME", fx.root.join("xs").display().to_string()),
    ];
    let out = run(&["status", "--json"], &xdg);
    let r: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        r["config_dir"],
        fx.root.join("xc/relay").display().to_string()
    );
    assert_eq!(
        r["state_dir"],
        fx.root.join("xs/relay").display().to_string()
    );
    for cmd in [
        &["audit"][..],
        &["events"],
        &["status"],
        &["gc"],
        &["token", "check"],
    ] {
        run(cmd, &xdg);
    }
    assert!(
        !fx.root.join("xs").exists(),
        "a read-only command made the state folder"
    );
    assert!(
        !fx.root.join("xc").exists(),
        "a read-only command made the config folder"
    );
    let out = run(&["status"], &[("RELAY_STATE_DIR", "rel/state".into())]);
    assert_eq!(out.code, Some(64));
    assert!(
        out.stderr
            .contains("RELAY_STATE_DIR \\\"rel/state\\\" is relative"),
        "{}",
        out.stderr
    );
}

/// The README's install line and quick start, line by line through `sh -c`, in a fresh home:
/// `cargo install --locked --path relay-host` is played by copying the built `relay-host`,
/// `relay-net-forward` and `relay-stand-in` (what it installs, no `relay-shim`) into
/// `~/.cargo/bin`, and `claude setup-token` (which signs in through a browser) by its printed
/// output; every `relay-host` line (after a `cd DIR &&` where it has one) runs as written.
/// `claude` is the fake agent, which prints what it got on fd 5 (by hash) to stderr: a stand-in
/// (the built-in template's default on Linux), never the token.
#[test]
fn the_readme_operator_walkthrough_runs() {
    let readme =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let block = |section: &str| {
        let at = readme.find(section).expect("the section");
        let start = readme[at..].find("```sh\n").unwrap() + at + 6;
        let end = readme[start..].find("```").unwrap() + start;
        readme[start..end]
            .lines()
            .map(|l| l.split(" #").next().unwrap().trim())
            .collect::<Vec<&str>>()
    };
    let mut lines = block("## Install");
    lines.extend(block("## Quick start"));
    let fx = world();
    let cargo_bin = fx.home.join(".cargo/bin");
    let fake_bin = fx.root.join("fake-bin");
    fs::create_dir_all(&cargo_bin).unwrap();
    fs::create_dir_all(&fake_bin).unwrap();
    fs::create_dir_all(fx.home.join("src/app")).unwrap();
    std::os::unix::fs::symlink(relay_tests::fake_agent(), fake_bin.join("claude")).unwrap();
    let token = oat_token();
    let mut printed = Vec::new();
    let mut ran = 0;
    for line in lines {
        if line == "cargo install --locked --path relay-host" {
            let built = relay_tests::relay_host().parent().unwrap().to_path_buf();
            for p in ["relay-host", "relay-net-forward", "relay-stand-in"] {
                relay_tests::copy_program(&built.join(p), &cargo_bin.join(p));
            }
            continue;
        }
        if line == "claude setup-token" {
            printed = setup_token_output(&token);
            continue;
        }
        let command = line.rsplit("&& ").next().unwrap();
        assert!(
            command.starts_with("relay-host ") && (line == command || line.starts_with("cd ")),
            "an unknown line {line:?}"
        );
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", line])
            .env_clear()
            .env("HOME", &fx.home)
            .env(
                "PATH",
                format!(
                    "{}:{}:/usr/bin:/bin",
                    cargo_bin.display(),
                    fake_bin.display()
                ),
            )
            .current_dir(&fx.home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        child.stdin.take().unwrap().write_all(&printed).unwrap();
        let out = finish(child, TIMEOUT);
        assert_eq!(out.code, Some(0), "{line}: {}{}", out.stdout, out.stderr);
        assert_quiet(&out, &token);
        if command.starts_with("relay-host run") {
            let rec: serde_json::Value = out
                .stderr
                .lines()
                .find_map(|l| serde_json::from_str(l).ok())
                .expect("the agent's record on stderr");
            assert_got_stand_in(&rec, &token);
        }
        ran += 1;
    }
    assert_eq!(ran, 5, "token import, status, run twice and ps");
}

/// On a terminal `token import` asks for the paste and turns echo off first: what the terminal
/// shows never holds the token, and echo is back on afterwards.
#[test]
fn import_on_a_terminal_echoes_nothing() {
    let fx = world();
    let token = oat_token();
    let (master, slave) = relay_tests::openpty();
    let mut cmd = fx.host_cmd();
    cmd.args(["token", "import"])
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave.try_clone().unwrap()));
    let child = cmd.spawn().unwrap();
    drop(cmd);
    let mut term = fs::File::from(master);
    // Wait for the prompt: echo is off once it is shown.
    let mut shown = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&shown).contains("Nothing is shown") {
        let n = term.read(&mut buf).expect("the prompt");
        assert!(n > 0, "the terminal closed before the prompt");
        shown.extend_from_slice(&buf[..n]);
    }
    term.write_all(format!("{token}\n\u{4}").as_bytes())
        .unwrap();
    let out = finish(child, TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // SAFETY: termios is plain old data; tcgetattr fills it from our copy of the terminal.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `t` is a valid, writable termios; `slave` is open.
    assert_eq!(unsafe { libc::tcgetattr(slave.as_raw_fd(), &mut t) }, 0);
    assert_ne!(t.c_lflag & libc::ECHO, 0, "echo was left off");
    drop(slave);
    shown.extend(relay_tests::terminal_shown(term));
    assert_no_token("the terminal", &shown, &token);
    assert_quiet(&out, &token);
    let written = fs::read(default_token_path(&fx)).unwrap();
    assert_eq!(
        sha256_hex(&written),
        sha256_hex(format!("{token}\n").as_bytes())
    );
}

/// `status` says how a launch uses its bwrap: this machine's binds by descriptor and reports its
/// start; a bwrap without those options (a wrapper whose file does not name them) binds by path
/// with the check inside and is probed before each launch. The human form says the same.
#[test]
fn status_says_which_mode_the_bwrap_allows() {
    let fx = world();
    let mode = |fx: &World| {
        let out = fx.host(&["status", "--json"]);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let r: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        (r["bwrap"]["binds"].clone(), r["bwrap"]["start"].clone())
    };
    let t = claude_template(&[], json!({}), &[]);
    fx.settings(json!({"claude_token_file": SETTING, "bwrap": "/usr/bin/bwrap", "templates": [t]}));
    assert_eq!(
        mode(&fx),
        (
            json!("by descriptor (--bind-fd): what bwrap mounts is what the host checked"),
            json!("reported by bwrap (--json-status-fd): no probe before a launch")
        )
    );
    let human = fx.host(&["status"]).stdout;
    assert!(
        human.contains("\n  binds:           by descriptor (--bind-fd)"),
        "{human}"
    );
    let older = fx.root.join("older-bwrap");
    fs::write(&older, "#!/bin/sh\nexec /usr/bin/bwrap \"$@\"\n").unwrap();
    fs::set_permissions(&older, fs::Permissions::from_mode(0o755)).unwrap();
    let t = claude_template(&[], json!({}), &[]);
    fx.settings(json!({"claude_token_file": SETTING, "bwrap": older, "templates": [t]}));
    assert_eq!(
        mode(&fx),
        (
            json!("by path, each mount checked inside the sandbox before the command runs"),
            json!("probed before each launch")
        )
    );
}

/// `status` exits 0 only when the settings, the token file, bwrap, the shim and the claude-code
/// template's command are usable.
#[test]
fn status_exits_78_when_a_part_is_unusable() {
    let fx = world();
    // A claude-code whose command is found (the built-in `claude` is not installed here).
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    assert_eq!(fx.host(&["status"]).code, Some(0));
    fx.settings(json!({"claude_token_file": SETTING, "bwrap": fx.root.join("no-bwrap")}));
    let out = fx.host(&["status", "--json"]);
    assert_eq!(out.code, Some(78));
    let r: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(r["bwrap"]["works"], false, "{r}");
    fs::write(fx.config.join("settings.json"), "{\"claude_token_file\": ").unwrap();
    assert_eq!(fx.host(&["status"]).code, Some(78));
    fx.settings(json!({"claude_token_file": SETTING}));
    fx.write_token("two words");
    let out = fx.host(&["status"]);
    assert_eq!(out.code, Some(78));
    assert!(
        out.stdout
            .contains("hint: the token file must hold the token alone"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("warning: ") || out.stdout.contains("reads as a token: no"));
}

/// A token file written as `NAME=value` (a `.env` habit), whatever the name, is no token: `token
/// check` and `status` fail on it (exit 78), naming why and `relay-host token import` as the fix,
/// and print no byte of it; a launch refuses it.
#[test]
fn a_name_equals_value_token_file_fails_check_and_status() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    for name in ["CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_API_KEY", "x"] {
        let token = oat_token();
        fx.write_token(&format!("{name}={token}\n"));
        for args in [&["token", "check"][..], &["status"][..]] {
            let out = fx.host(args);
            assert_eq!(out.code, Some(78), "{args:?} {name}: {}", out.stdout);
            assert!(
                out.stdout
                    .contains("not a token: a NAME=value line, not the token alone"),
                "{args:?}: {}",
                out.stdout
            );
            assert!(
                out.stdout.contains("relay-host token import"),
                "{args:?}: {}",
                out.stdout
            );
            assert_no_token("stdout", out.stdout.as_bytes(), &token);
            assert_no_token("stderr", out.stderr.as_bytes(), &token);
        }
        let out = fx.host(&["--json", "token", "check"]);
        let r: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(r["ok"], false, "{r}");
    }
}

/// `token check` warns, without refusing, on a shape other than `sk-ant-oat01-` and on a file
/// older than 330 days.
#[test]
fn token_check_warns_on_shape_and_age() {
    let fx = world();
    fx.settings(json!({"claude_token_file": SETTING}));
    let out = fx.host(&["token", "check", "--json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let r: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        r["warnings"],
        json!(["does not start as a `claude setup-token` token does (sk-ant- then oat01-)"])
    );
    fx.write_token(&oat_token());
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(331 * 86400);
    fs::File::options()
        .append(true)
        .open(&fx.token_file)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let out = fx.host(&["token", "check"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout
            .contains("warning: written 331 days ago: setup-token tokens last one year"),
        "{}",
        out.stdout
    );
    assert_no_token("stdout", out.stdout.as_bytes(), &fx.token);
}

/// `audit` prints RFC 3339 times; `--since` and `--session` filter; `events --follow` prints a
/// row appended after it started.
#[test]
fn logs_print_times_filter_and_follow() {
    let fx = world();
    fx.settings(json!({}));
    let req = |id: &str| json!({"kind": "terminal", "template": "shell", "session_id": id, "extra_args": ["-c", "true"]});
    assert_eq!(fx.launch(&req("a1")).code, Some(0));
    assert_eq!(fx.launch(&req("a2")).code, Some(0));
    let out = fx.host(&["audit"]);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stdout);
    for l in &lines {
        let t = l.split(' ').next().unwrap().as_bytes();
        assert_eq!(t.len(), 20, "{l}");
        assert!(t[4] == b'-' && t[10] == b'T' && t[19] == b'Z', "{l}");
        assert!(!l.contains("ts="), "{l}");
    }
    let out = fx.host(&["audit", "--session=a2", "--json"]);
    let rows: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["session_id"], "a2");
    assert_eq!(
        fx.host(&["audit", "--since", "1h"]).stdout.lines().count(),
        2
    );
    assert_eq!(fx.host(&["audit", "--since", "2999-01-01"]).stdout, "");

    let mut follow = fx.host_cmd();
    follow.args(["events", "--follow", "--session", "f1", "--json"]);
    let mut child = follow.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    assert_eq!(fx.launch(&req("f1")).code, Some(0));
    let first: serde_json::Value =
        serde_json::from_str(&rx.recv_timeout(TIMEOUT).unwrap()).unwrap();
    // SAFETY: kill takes integers only; the group is the one this child leads.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
    assert_eq!(first["event"], "launch");
    assert_eq!(first["session_id"], "f1");
    assert_eq!(first["status"], 201);
}

/// The operator's `claude-seed/settings.json` and `CLAUDE.md` are copied (not linked) into each
/// launch's own Claude config folder (in its session folder), never into the relay-owned
/// persistent one; a seed that is a link is not followed; what a session writes over its copy
/// does not reach the next launch, which gets the operator's seed again.
#[test]
fn the_claude_config_folder_is_seeded_at_each_launch() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let seed = fx.config.join("claude-seed");
    fs::create_dir(&seed).unwrap();
    fs::write(seed.join("settings.json"), "{\"theme\": \"dark\"}\n").unwrap();
    std::os::unix::fs::symlink(&fx.token_file, seed.join("CLAUDE.md")).unwrap();
    let req =
        |id: &str| json!({"kind": "claude", "session_id": id, "project": fx.project, "keep": true});
    assert_eq!(fx.launch(&req("s1")).code, Some(0));
    let own = |id: &str| fx.state.join("sessions").join(id).join("claude");
    let copied = own("s1").join("settings.json");
    let meta = fs::symlink_metadata(&copied).unwrap();
    assert!(meta.is_file(), "a copy, not a link");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(
        fs::read_to_string(&copied).unwrap(),
        "{\"theme\": \"dark\"}\n"
    );
    assert!(
        !own("s1").join("CLAUDE.md").exists(),
        "a linked seed was followed"
    );
    assert!(!fx.state.join("claude/settings.json").exists());
    // A session's own change stays in its folder: the next launch gets the seed again.
    fs::write(&copied, "{\"theme\": \"light\"}\n").unwrap();
    assert_eq!(fx.launch(&req("s2")).code, Some(0));
    assert_eq!(
        fs::read_to_string(own("s2").join("settings.json")).unwrap(),
        "{\"theme\": \"dark\"}\n"
    );
    assert!(!fx.state.join("claude/settings.json").exists());
}

/// A token pasted as `claude_token_file`'s value is printed by no command's error.
#[test]
fn a_token_pasted_as_the_setting_is_printed_by_no_error() {
    let fx = world();
    let pasted = oat_token();
    fx.settings(json!({"claude_token_file": pasted}));
    let other = oat_token();
    let outs = [
        fx.host(&["token", "check"]),
        fx.host(&["token", "check", "--json"]),
        import(&fx, other.as_bytes(), &[]),
    ];
    for out in outs {
        assert_eq!(out.code, Some(78), "{}", out.stderr);
        assert!(out.stderr.contains("claude_token_file"), "{}", out.stderr);
        assert_quiet(&out, &pasted);
        assert_quiet(&out, &other);
    }
    // A token-shaped session id in a refused request, on a terminal and not.
    let req = fx.request_file(&json!({"kind": "claude", "session_id": pasted}));
    let out = fx.host(&["launch", req.to_str().unwrap()]);
    assert_eq!(out.code, Some(64), "{}", out.stderr);
    assert_quiet(&out, &pasted);
    let (code, shown) = host_on_a_terminal(&fx, &["launch", req.to_str().unwrap()]);
    assert_eq!(code, 64, "{shown}");
    assert_no_token("the terminal", shown.as_bytes(), &pasted);
}

/// A session (of a `shell` that writes the home: `~` read-write) planted
/// `~/.config/claude-ltt` as a link into a folder it reads: `token import` refuses, naming the
/// link, and writes nothing there.
#[test]
fn import_refuses_a_token_folder_a_session_linked_elsewhere() {
    let fx = world();
    fx.settings(json!({"templates": [relay_tests::home_writing_shell()]}));
    let token = oat_token();
    let trap = fx.home.join("shared");
    fs::create_dir_all(&trap).unwrap();
    fs::create_dir_all(fx.home.join(".config")).unwrap();
    std::os::unix::fs::symlink(&trap, fx.home.join(".config/claude-ltt")).unwrap();
    let out = import(&fx, token.as_bytes(), &[]);
    assert_eq!(out.code, Some(78), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "follows symlink \\\"{}\\\"",
            fx.home.join(".config/claude-ltt").display()
        )),
        "{}",
        out.stderr
    );
    assert_quiet(&out, &token);
    assert_eq!(
        fs::read_dir(&trap).unwrap().count(),
        0,
        "the token was written"
    );
}
