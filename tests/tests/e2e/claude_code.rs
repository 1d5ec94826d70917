//! End-to-end tests with the real consumer: the pinned Claude Code CLI, run by the real
//! `relay-host` in the real sandbox, reports that it is logged in from the token on fd 5.
//!
//! Needs the binaries (`cargo build --workspace --bins`) and the CLI: `$RELAY_TEST_CLAUDE`, else
//! `<workspace>/.tools/claude-code/node_modules/.bin/claude`, which `scripts/test` installs. A
//! missing CLI fails the tests (it never skips them). `claude auth status` runs offline.
//!
//! Every folder lives under a root-owned 0755 folder in `/var/tmp`: `/tmp` is private inside the
//! sandbox, and the link checks refuse a token path through a folder others may write.

use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use relay_tests::fixture::Layout;
use relay_tests::run::{finish_with, Out};
use relay_tests::spawn_with_fds;
use relay_tests::world::{Token, World};
use relay_token::{ClaudeToken, TokenPipe};
use serde_json::{json, Value};

/// The longest any one run of `relay-host` or `claude` may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// The version `scripts/test` installs.
const PINNED_VERSION: &str = "2.1.332";

/// The Claude Code CLI ([`relay_tests::claude_cli`]: `$RELAY_TEST_CLAUDE`, else the
/// project-local install). Panics, saying to run `scripts/test`, when it is missing or does not
/// run; notes a version other than the pinned one.
fn claude_cli() -> PathBuf {
    let path = relay_tests::claude_cli();
    let mut cmd = Command::new(&path);
    cmd.arg("--version");
    let out = finish(spawn(&mut cmd), "claude --version");
    if out.code != Some(0) {
        panic!(
            "{} --version failed ({:?}): {}. Run `scripts/test` to reinstall the pinned CLI",
            path.display(),
            out.code,
            out.stderr
        );
    }
    if !out.stdout.starts_with(&format!("{PINNED_VERSION} ")) {
        eprintln!(
            "note: {} is {:?}, not the pinned {PINNED_VERSION}",
            path.display(),
            out.stdout.trim()
        );
    }
    path
}

/// Prepares `cmd` to run in a process group of its own, stdin `/dev/null`, stdout and stderr on
/// pipes, and spawns it.
fn spawn(cmd: &mut Command) -> Child {
    prepare(cmd);
    cmd.spawn()
        .unwrap_or_else(|e| panic!("spawn {:?}: {e}", cmd.get_program()))
}

fn prepare(cmd: &mut Command) {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
}

/// Waits for `child` and both its streams to end, at most [`RUN_TIMEOUT`]. On a hang it kills
/// the child's whole process group (so `relay-shim` goes too, and `bwrap` with it: it dies with
/// its parent) and panics with what the streams held so far.
fn finish(child: Child, what: &str) -> Out {
    let out = finish_with(child, RUN_TIMEOUT, &|| false);
    assert!(
        !out.killed,
        "{what}: it did not end within {} s; killed its process group. {}",
        RUN_TIMEOUT.as_secs(),
        out.describe()
    );
    out
}

/// One test's world: [`Layout::claude`] under a root-owned 0755 folder in `/var/tmp`, no token
/// file yet (each test writes its tokens, by rename, as an atomic writer does:
/// [`World::replace_token`]), every one remembered for the final scan.
fn world() -> World {
    World::builder()
        .layout(Layout::claude("relay-claude-code."))
        .token(Token::Claude)
        .written(false)
        .build()
}

/// The settings: `claude_token_file` as given, and the `claude-code` template running the CLI
/// with the relay-owned Claude config folder. Grants: the CLI's package folder read-only, the
/// project and the Claude config folder read-write, and with `grant_home` HOME read-write too
/// (`"writes_home": true`).
/// `claude auth status` needs no HOME (with `CLAUDE_CONFIG_DIR` set it writes only there);
/// granting it puts the token's folder inside a read-write grant, so the deny must win over the
/// grant with the real consumer running.
fn claude_settings(claude_token_file: &str, grant_home: bool) -> Value {
    let claude = claude_cli();
    let real = claude.canonicalize().expect("the CLI's real path");
    // .../@anthropic-ai/claude-code/bin/claude.exe -> .../@anthropic-ai/claude-code
    let package = real
        .parent()
        .and_then(Path::parent)
        .expect("the CLI's package folder");
    let mut read_write = vec!["{project}", "{claude_config}"];
    if grant_home {
        read_write.push("~/");
    }
    let mut template = json!({
        "id": "claude-code",
        "command": [claude],
        "env": {"CLAUDE_CONFIG_DIR": "{claude_config}"},
        "sandbox": {
            "read": [package],
            "read_write": read_write,
        },
    });
    if grant_home {
        // A grant of the whole home is refused unless the operator says so.
        template["writes_home"] = json!(true);
    }
    json!({
        "claude_token_file": claude_token_file,
        "templates": [template],
    })
}

/// `relay-host ARGS` in the project folder ([`World::host_cmd`]: an environment of `PATH`,
/// the fresh HOME and `LANG` only, so nothing of the developer's own login leaks in).
fn host_in_project(fx: &World, args: &[&str]) -> Command {
    let mut cmd = fx.host_cmd();
    cmd.current_dir(&fx.project).args(args);
    cmd
}

/// The `terminal` request for the `claude-code` template with `extra_args`.
fn claude_code_req(fx: &World, extra_args: &[&str]) -> Value {
    fx.terminal_req("claude-code", extra_args)
}

/// The relay-owned Claude config folder (in the state folder).
fn claude_config(fx: &World) -> PathBuf {
    fx.state.join("claude")
}

/// Checks that the last audit row is a started, sandboxed `claude-code` launch with `token` as
/// given (`"fd"` or `"none"`).
fn assert_last_launch(fx: &World, token: &str, what: &str) {
    let rows = fx.log("audit.jsonl");
    let row = rows
        .last()
        .unwrap_or_else(|| panic!("{what}: no audit row"));
    assert_eq!(row["outcome"], "ok", "{what}: {row}");
    assert_eq!(row["template"], "claude-code", "{what}: {row}");
    assert_eq!(row["sandbox"], true, "{what}: {row}");
    assert_eq!(row["token"], token, "{what}: {row}");
}

/// Checks `auth status --json` output: logged in with the OAuth token, no API key, and the
/// launch's own config folder.
fn assert_logged_in_by_oauth(fx: &World, out: &Out, what: &str) {
    assert_eq!(out.code, Some(0), "{what}: {}", out.describe());
    let v = out.json(what);
    assert_eq!(v["loggedIn"], true, "{what}: {v}");
    assert_eq!(v["authMethod"], "oauth_token", "{what}: {v}");
    assert!(v.get("apiKeySource").is_none(), "{what}: {v}");
    // The launch's own folder (`<state>/sessions/<id>/claude`), never the persistent one.
    let dir = PathBuf::from(v["configDirectory"].as_str().unwrap_or_default());
    assert!(
        dir.starts_with(fx.state.join("sessions")) && dir.ends_with("claude"),
        "{what}: Claude Code did not use the launch's own config folder: {v}"
    );
}

/// Checks `auth status --json` output of a session that got no token: logged out (Claude Code
/// 2.1.332 exits 1 then).
fn assert_logged_out(out: &Out, what: &str) {
    let v = out.json(what);
    assert_eq!(v["loggedIn"], false, "{what}: {v}");
    assert_eq!(v["authMethod"], "none", "{what}: {v}");
    assert_eq!(out.code, Some(1), "{what}: {}", out.describe());
}

/// `relay-host launch` of kind `terminal`, template `claude-code`, sandboxed, HOME granted
/// read-write (so the token's folder lies inside a grant): Claude Code is logged in from the
/// descriptor; a second launch after the file was replaced with another token is too; an empty
/// token file refuses the launch (the file is read at each launch); with the setting empty the
/// same launch is logged out; no file holds a token afterwards.
#[test]
fn launch_claude_code_is_logged_in_from_fd5() {
    let fx = world();
    let setting = "~/.config/claude-ltt/token";
    fx.settings(claude_settings(setting, true));
    let status = ["auth", "status", "--json"];

    fx.replace_token();
    let out = fx.launch_for(&claude_code_req(&fx, &status), RUN_TIMEOUT);
    assert_logged_in_by_oauth(&fx, &out, "first launch");
    assert_last_launch(&fx, "fd", "first launch");

    fx.replace_token();
    let out = fx.launch_for(&claude_code_req(&fx, &status), RUN_TIMEOUT);
    assert_logged_in_by_oauth(&fx, &out, "second launch");
    assert_last_launch(&fx, "fd", "second launch");

    // The file is read again at each launch: emptied, it refuses the launch before Claude runs.
    std::fs::write(&fx.token_file, "").unwrap();
    let out = fx.launch_for(&claude_code_req(&fx, &status), RUN_TIMEOUT);
    assert_eq!(out.code, Some(78), "{}", out.describe());
    assert!(out.stdout.is_empty(), "Claude Code ran: {}", out.describe());
    assert!(
        out.stderr.contains("sandbox_unavailable") && out.stderr.contains("empty"),
        "{}",
        out.describe()
    );
    let rows = fx.log("audit.jsonl");
    assert_eq!(rows.last().unwrap()["outcome"], "error");

    // Negative control: without the setting the same launch is logged out.
    fx.replace_token();
    fx.settings(claude_settings("", true));
    let out = fx.launch_for(&claude_code_req(&fx, &status), RUN_TIMEOUT);
    assert_logged_out(&out, "launch without claude_token_file");
    assert_last_launch(&fx, "none", "launch without claude_token_file");

    // No file holds a token this test wrote; Claude Code wrote into the config folder.
    fx.assert_no_token_on_disk(&[], &[&claude_config(&fx), &fx.state]);
}

/// `relay-host run --template claude-code -- auth status --json` (the project is the current
/// folder; no HOME grant): logged in from the descriptor; with the setting empty, logged out;
/// no file holds a token afterwards.
#[test]
fn run_claude_code_is_logged_in_from_fd5() {
    let fx = world();
    fx.settings(claude_settings("~/.config/claude-ltt/token", false));
    fx.replace_token();
    let args = [
        "run",
        "--template",
        "claude-code",
        "--",
        "auth",
        "status",
        "--json",
    ];

    let out = fx.finish(host_in_project(&fx, &args), RUN_TIMEOUT);
    assert_logged_in_by_oauth(&fx, &out, "relay-host run");
    assert_last_launch(&fx, "fd", "relay-host run");

    fx.settings(claude_settings("", false));
    let out = fx.finish(host_in_project(&fx, &args), RUN_TIMEOUT);
    assert_logged_out(&out, "relay-host run without claude_token_file");
    assert_last_launch(&fx, "none", "relay-host run without claude_token_file");

    // No file holds a token this test wrote; Claude Code wrote into the config folder.
    fx.assert_no_token_on_disk(&[], &[&claude_config(&fx), &fx.state]);
}

/// Tokens in `relay-host`'s own environment (`ANTHROPIC_AUTH_TOKEN`, `CLAUDE_CODE_OAUTH_TOKEN`,
/// `ANTHROPIC_API_KEY`) do not reach the session: Claude Code names the descriptor as its
/// token's source. Controls: Claude Code run directly with the same variables and the same
/// descriptor names them instead, so the check can fail.
#[test]
fn inherited_tokens_do_not_outrank_fd5() {
    let fx = world();
    fx.settings(claude_settings("~/.config/claude-ltt/token", true));
    let token = fx.replace_token();
    let bogus = [
        ("ANTHROPIC_AUTH_TOKEN", "bogus"),
        ("CLAUDE_CODE_OAUTH_TOKEN", "bogus"),
        ("ANTHROPIC_API_KEY", "bogus"),
    ];

    // Controls: each variable outranks the descriptor when it reaches Claude Code.
    let control_config = fx.root.join("control-claude-config");
    std::fs::create_dir(&control_config).unwrap();
    let claude = claude_cli();
    let control = |vars: &[(&str, &str)], expect: &str| {
        let mut cmd = Command::new(&claude);
        cmd.args(["auth", "status", "--text"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &fx.home)
            .env("CLAUDE_CONFIG_DIR", &control_config)
            .env("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR", "5")
            .envs(vars.iter().copied());
        prepare(&mut cmd);
        let pipe = TokenPipe::new(&ClaudeToken::from_bytes(token.as_bytes()).unwrap())
            .unwrap()
            .into_fd();
        let child = spawn_with_fds(&mut cmd, &[(pipe.as_fd(), 5)]).expect("spawn claude");
        drop(pipe);
        let out = finish(child, "claude auth status --text (control)");
        assert_eq!(out.code, Some(0), "control: {}", out.describe());
        assert!(
            out.stdout.lines().any(|l| l == expect),
            "control with {vars:?}: wanted the line {expect:?}: {}",
            out.describe()
        );
    };
    control(&bogus, "Auth token: ANTHROPIC_AUTH_TOKEN");
    control(
        &[("CLAUDE_CODE_OAUTH_TOKEN", "bogus")],
        "Auth token: CLAUDE_CODE_OAUTH_TOKEN",
    );
    control(&[], "Auth token: CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR");

    let req = fx.request_file(&claude_code_req(&fx, &["auth", "status", "--text"]));
    let mut cmd = host_in_project(&fx, &["launch", req.to_str().unwrap()]);
    cmd.envs(bogus);
    let out = fx.finish(cmd, RUN_TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let auth: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("Auth token:") || l.starts_with("API key:"))
        .collect();
    assert_eq!(
        auth,
        ["Auth token: CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR"],
        "{}",
        out.describe()
    );
    assert_last_launch(&fx, "fd", "launch with tokens in the environment");

    let req = fx.request_file(&claude_code_req(&fx, &["auth", "status", "--json"]));
    let mut cmd = host_in_project(&fx, &["launch", req.to_str().unwrap()]);
    cmd.envs(bogus);
    let out = fx.finish(cmd, RUN_TIMEOUT);
    assert_logged_in_by_oauth(&fx, &out, "launch with tokens in the environment (--json)");

    // No file holds a token this test wrote; Claude Code wrote into the config folder.
    fx.assert_no_token_on_disk(&[], &[&claude_config(&fx), &fx.state]);
}

/// The built-in `claude-code` template (command `claude` found on PATH, the project and the
/// relay-owned Claude config folder read-write, nothing else granted): `relay-host run` and a
/// `launch` of kind `claude` without a template are logged in from the descriptor; with the
/// setting empty, logged out.
#[test]
fn builtin_template_is_logged_in_from_fd5() {
    let fx = world();
    fx.settings(json!({"claude_token_file": "~/.config/claude-ltt/token"}));
    fx.replace_token();
    // `claude` on PATH, whatever the CLI's own file is called.
    let bin = fx.root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(claude_cli(), bin.join("claude")).unwrap();
    let mut path = vec![bin];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let path = std::env::join_paths(path).unwrap();

    let run_args = ["run", "--", "auth", "status", "--json"];
    let mut cmd = host_in_project(&fx, &run_args);
    cmd.env("PATH", &path);
    let out = fx.finish(cmd, RUN_TIMEOUT);
    assert_logged_in_by_oauth(&fx, &out, "relay-host run, built-in template");
    assert_last_launch(&fx, "fd", "relay-host run, built-in template");

    let req = fx.root.join("claude-request.json");
    std::fs::write(
        &req,
        json!({"kind": "claude", "extra_args": ["auth", "status", "--json"]}).to_string(),
    )
    .unwrap();
    let mut cmd = host_in_project(&fx, &["launch", req.to_str().unwrap()]);
    cmd.env("PATH", &path);
    let out = fx.finish(cmd, RUN_TIMEOUT);
    assert_logged_in_by_oauth(&fx, &out, "launch of kind claude, built-in template");
    assert_last_launch(&fx, "fd", "launch of kind claude, built-in template");

    fx.settings(json!({"claude_token_file": ""}));
    let mut cmd = host_in_project(&fx, &run_args);
    cmd.env("PATH", &path);
    let out = fx.finish(cmd, RUN_TIMEOUT);
    assert_logged_out(
        &out,
        "relay-host run, built-in template, no claude_token_file",
    );
    assert_last_launch(&fx, "none", "relay-host run, built-in template, no token");

    // No file holds a token this test wrote; Claude Code wrote into the config folder.
    fx.assert_no_token_on_disk(&[], &[&claude_config(&fx), &fx.state]);
}

/// A `401` in the Messages API's shape: Claude Code gives up at once.
const UNAUTHORIZED: &str = "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n\
    Content-Length: 71\r\nConnection: close\r\n\r\n\
    {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"no\"}}";

/// A token session with a network allow-list, the real Claude Code inside: pointed by the
/// project's `.claude/settings.json` at an unlisted listener (B), its request is refused by the
/// proxy (an event names B's port) and B receives nothing; pointed at the listed listener (A),
/// its message request arrives at A through the proxy (the proxy's `Connection: close` on it:
/// Claude Code honours `HTTP_PROXY`) with `Authorization: Bearer` and the token's hash.
#[test]
fn claude_code_reaches_only_listed_hosts_through_the_proxy() {
    use relay_tests::listener::{bearer, Listener};
    let fx = world();
    let token = fx.replace_token();
    let (a, b) = (Listener::start(UNAUTHORIZED), Listener::start(UNAUTHORIZED));
    fx.settings(claude_settings("~/.config/claude-ltt/token", false));
    fx.edit_settings(|settings| {
        settings["templates"][0]["network"] = json!({"allow": [format!("127.0.0.1:{}", a.port)]});
        // Pipe mode (the opt-out): the real token goes through the plain proxy, as asserted
        // below; stand-in mode would send A the stand-in.
        settings["templates"][0]["token_mode"] = json!("pipe");
        // The base URL comes from the project's own settings, which a token launch reads only
        // in a project the operator trusts.
        settings["trusted_projects"] = json!([fx.project]);
    });
    std::fs::create_dir_all(fx.project.join(".claude")).unwrap();
    let point_at = |port: u16| {
        let s = json!({"env": {"ANTHROPIC_BASE_URL": format!("http://127.0.0.1:{port}")}});
        std::fs::write(fx.project.join(".claude/settings.json"), s.to_string()).unwrap();
    };

    point_at(b.port);
    let out = fx.launch_for(&claude_code_req(&fx, &["-p", "hello there"]), RUN_TIMEOUT);
    assert_ne!(out.code, Some(0), "{}", out.describe());
    assert_eq!(b.connections(), 0, "B was reached");
    let events = fx.log("events.jsonl");
    assert!(
        events.iter().any(|e| e["event"] == "network_denied"
            && e["host"] == "127.0.0.1"
            && e["port"] == u64::from(b.port)),
        "no refusal of B: {events:?}"
    );

    point_at(a.port);
    let out = fx.launch_for(&claude_code_req(&fx, &["-p", "hello there"]), RUN_TIMEOUT);
    assert_ne!(out.code, Some(0), "{}", out.describe());
    let heads = a.heads();
    let messages: Vec<&String> = heads
        .iter()
        .filter(|h| h.starts_with("POST /v1/messages"))
        .collect();
    assert!(
        !messages.is_empty(),
        "no message request at A: {} heads",
        heads.len()
    );
    let want = relay_tests::sha256_hex(token.as_bytes());
    for h in &messages {
        let got = bearer(h).map(|t| relay_tests::sha256_hex(t.as_bytes()));
        assert_eq!(
            got.as_deref(),
            Some(want.as_str()),
            "the bearer is not the token"
        );
        assert!(
            h.lines()
                .any(|l| l.eq_ignore_ascii_case("connection: close")),
            "the request did not pass the proxy"
        );
    }
    assert_eq!(b.connections(), 0, "B was reached");
    // No file holds a token this test wrote; Claude Code wrote into the config folder.
    fx.assert_no_token_on_disk(&[], &[&claude_config(&fx), &fx.state]);
}

/// Each regular file under `dir` with the SHA-256 of its bytes, by path.
fn file_hashes(dir: &Path) -> std::collections::BTreeMap<PathBuf, String> {
    relay_tests::files_under(dir)
        .into_iter()
        .map(|f| {
            let hash = relay_tests::sha256_hex(&std::fs::read(&f).unwrap());
            (f, hash)
        })
        .collect()
}

/// Issue 31: a token launch's request that names a Claude Code subcommand (`mcp add-json -s
/// user ...`, which would write a server into the relay-owned `.claude.json` for every later
/// session to start) is refused `invalid_spec` (64) naming the argument, and no file of the
/// Claude config folder changed; so is the subcommand after `--`, which Claude Code runs all the
/// same. Stopped by the grammar of a token launch's `extra_args`.
#[test]
fn a_requests_subcommand_never_runs_with_the_token() {
    let fx = world();
    fx.settings(claude_settings("~/.config/claude-ltt/token", false));
    fx.replace_token();
    // A first session: the config folder holds what Claude Code writes.
    let out = fx.launch_for(
        &claude_code_req(&fx, &["auth", "status", "--json"]),
        RUN_TIMEOUT,
    );
    assert_logged_in_by_oauth(&fx, &out, "auth status");
    let before = file_hashes(&claude_config(&fx));
    assert!(!before.is_empty());
    let server = r#"{"type":"stdio","command":"/bin/sh","args":["-c","true"]}"#;
    for (args, named) in [
        (
            &["mcp", "add-json", "-s", "user", "planted", server][..],
            "extra_args[0] \"mcp\"",
        ),
        (
            &["--verbose", "--", "mcp", "add-json", "planted", server],
            "extra_args[2] \"mcp\"",
        ),
    ] {
        let out = fx.launch_for(&claude_code_req(&fx, args), RUN_TIMEOUT);
        assert_eq!(out.code, Some(64), "{args:?}: {}", out.describe());
        let line: Value = serde_json::from_str(out.stderr.trim()).unwrap();
        assert_eq!(line["error"], "invalid_spec", "{line}");
        let msg = line["message"].as_str().unwrap();
        assert!(msg.starts_with(named), "{msg}");
        assert_eq!(
            file_hashes(&claude_config(&fx)),
            before,
            "{args:?}: the Claude config folder changed"
        );
    }
    // No file holds a token this test wrote; Claude Code wrote into the config folder.
    fx.assert_no_token_on_disk(&[], &[&claude_config(&fx), &fx.state]);
}

/// Claude Code's own `--version` (refused before: not on the allow-list) passes a token launch
/// and runs the real CLI, which prints its version.
#[test]
fn claudes_version_flag_runs_with_the_token() {
    let fx = world();
    fx.settings(claude_settings("~/.config/claude-ltt/token", false));
    fx.replace_token();
    let out = fx.launch_for(&claude_code_req(&fx, &["--version"]), RUN_TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    assert_eq!(out.stdout.trim(), format!("{PINNED_VERSION} (Claude Code)"));
    // No file holds a token this test wrote; Claude Code wrote into the config folder.
    fx.assert_no_token_on_disk(&[], &[&claude_config(&fx), &fx.state]);
}
