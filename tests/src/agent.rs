//! One real agent turn's installation, shared by the agent-turn tests and `demo-turn`: the
//! pinned Claude Code CLI launched sandboxed by the real `relay-host` with the token on fd 5,
//! playing a script against the local Messages API fixture ([`crate::messages_api`]) in a
//! project that is a git repository; outcomes checked on the host, the credential by hash only.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fixture::{Folders, Layout};
use crate::messages_api::{MessagesApi, Seen, Step};
use crate::sha256_hex;

/// The longest one turn (one `relay-host launch`) may take before its group is killed.
pub const TURN_TIMEOUT: Duration = Duration::from_secs(120);

/// The final text every script ends with.
pub const FINAL: &str = "Scripted turn finished.";

/// What one turn left.
pub struct Turn {
    /// The exit code, `None` when killed by a signal.
    pub code: Option<i32>,
    /// Whether the turn outlived its timeout and was killed.
    pub killed: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// How long it took.
    pub took: Duration,
}

impl Turn {
    /// Exit, timing and both streams, for a failure message.
    pub fn describe(&self) -> String {
        format!(
            "exit {:?} (killed: {}) after {:?}\nstdout: {}\nstderr: {}",
            self.code, self.killed, self.took, self.stdout, self.stderr
        )
    }

    /// The `--output-format json` result.
    pub fn result(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}): {}", self.describe()))
    }
}

/// One test's installation: folders under a root-owned 0755 folder in `/var/tmp` (`/tmp` is
/// private inside the sandbox), a git project with one commit, the fixture, a token.
pub struct Setup {
    /// The folders ([`Layout::claude`]): the project is a git repository with one commit, the
    /// token file 0600.
    folders: Folders,
    /// The made-up token (never printed).
    pub token: String,
    /// The Claude Code CLI.
    pub claude: PathBuf,
    /// The Messages API fixture.
    pub api: MessagesApi,
}

/// A setup is its folders (`s.home`, `s.project`, ...) and the turn it plays.
impl std::ops::Deref for Setup {
    type Target = Folders;
    fn deref(&self) -> &Folders {
        &self.folders
    }
}

impl Setup {
    /// Everything ready for a turn of the script `script` makes of the project's path and the
    /// token's SHA-256.
    pub fn new(script: impl FnOnce(&Path, &str) -> Vec<Step>) -> Setup {
        let s = Setup::bare(script);
        s.write_settings();
        s.seed_claude_config();
        s
    }

    /// As [`Setup::new`], but the template names the fixture by `api_base_url` alone (no
    /// `ANTHROPIC_BASE_URL`, no network entry) and the Claude config is left fresh.
    pub fn behind_gateway(script: impl FnOnce(&Path, &str) -> Vec<Step>) -> Setup {
        let s = Setup::bare(script);
        s.write_settings_with(json!({"api_base_url": s.api.base_url()}));
        s
    }

    /// The folders, the token, the fixture and the project; no settings yet.
    pub fn bare(script: impl FnOnce(&Path, &str) -> Vec<Step>) -> Setup {
        let claude = crate::claude_cli();
        let folders = Folders::new(Layout::claude("relay-agent-turn."));
        let token = crate::claude_fake_token();
        std::fs::write(&folders.token_file, format!("{token}\n")).unwrap();
        std::fs::set_permissions(&folders.token_file, std::fs::Permissions::from_mode(0o600))
            .unwrap();
        let api = MessagesApi::start(script(&folders.project, &sha256_hex(token.as_bytes())));
        let s = Setup {
            folders,
            token,
            claude,
            api,
        };
        s.init_project();
        s
    }

    /// `git init`, a `notes.txt`, one commit.
    pub fn init_project(&self) {
        std::fs::write(self.project.join("notes.txt"), "colour: red\nsize: small\n").unwrap();
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["add", "notes.txt"],
            &["commit", "-q", "-m", "first"],
        ] {
            let out = self.git(args);
            assert!(out.status.success(), "git {args:?}: {out:?}");
        }
    }

    /// `git ARGS` in the project on the host.
    pub fn git(&self, args: &[&str]) -> std::process::Output {
        Command::new("git")
            .args([
                "-c",
                "user.name=Relay Test",
                "-c",
                "user.email=relay@test.invalid",
            ])
            .args(args)
            .current_dir(&self.project)
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("run git")
    }

    /// The operator's settings: the `claude-code` template runs the CLI with the relay-owned
    /// Claude config, `ANTHROPIC_BASE_URL` at the fixture, the fixture's address alone on the
    /// network allow-list.
    pub fn write_settings(&self) {
        self.write_settings_with(json!({
            "env": {"ANTHROPIC_BASE_URL": self.api.base_url()},
            "network": {"allow": [format!("127.0.0.1:{}", self.api.port())]},
        }));
    }

    /// The template of [`Setup::write_settings`] without the fixture's address, `how` merged in
    /// (its `env` added to the template's).
    pub fn write_settings_with(&self, how: Value) {
        let real = self.claude.canonicalize().expect("the CLI's real path");
        let package = real
            .parent()
            .and_then(Path::parent)
            .expect("the CLI's package folder");
        let mut template = json!({
            "id": "claude-code",
            "command": [self.claude],
            "env": {"CLAUDE_CONFIG_DIR": "{claude_config}"},
            "sandbox": {"read": [package], "read_write": ["{project}", "{claude_config}"]},
        });
        for (k, v) in how.as_object().expect("an object") {
            match (k.as_str(), v.as_object()) {
                ("env", Some(env)) => {
                    for (name, value) in env {
                        template["env"][name] = value.clone();
                    }
                }
                _ => template[k] = v.clone(),
            }
        }
        let settings = json!({
            "claude_token_file": "~/.config/claude-ltt/token",
            "templates": [template],
        });
        std::fs::write(
            self.config.join("settings.json"),
            serde_json::to_vec_pretty(&settings).unwrap(),
        )
        .unwrap();
    }

    /// The relay-owned Claude config folder (in the state folder).
    pub fn claude_config(&self) -> PathBuf {
        self.state.join("claude")
    }

    /// Seeds the relay-owned Claude config's `.claude.json` so the first run skips onboarding
    /// (whose check goes to api.anthropic.com whatever the base URL).
    pub fn seed_claude_config(&self) {
        for d in [&self.state, &self.claude_config()] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let seed = json!({
            "hasCompletedOnboarding": true,
            "numStartups": 1,
            "projects": {self.project.to_str().unwrap(): {
                "hasTrustDialogAccepted": true,
                "hasCompletedProjectOnboarding": true,
            }},
        });
        let path = self.claude_config().join(".claude.json");
        std::fs::write(&path, seed.to_string()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    /// Runs one `-p` turn with `prompt` through `relay-host launch` (kind `terminal`, template
    /// `claude-code`, sandboxed), its tools allowed without a prompt.
    pub fn turn(&self, prompt: &str) -> Turn {
        self.turn_with(&print_args(prompt))
    }

    /// A turn through `relay-host launch` as [`Setup::turn`], with `extra_args` as given (such
    /// as [`print_args`] after `--resume ID`).
    pub fn turn_with(&self, extra_args: &[String]) -> Turn {
        let req = self.root.join("request.json");
        let body = json!({
            "kind": "terminal",
            "template": "claude-code",
            "project": self.project,
            "extra_args": extra_args,
        });
        std::fs::write(&req, body.to_string()).unwrap();
        let launch = ["launch", req.to_str().unwrap()];
        self.finish(self.host(&launch))
    }

    /// The same `-p` turn through `relay-host run --template claude-code -- ARGS` in the
    /// project folder.
    pub fn turn_by_run(&self, prompt: &str) -> Turn {
        let mut args = vec!["run", "--template", "claude-code", "--"];
        let extra = print_args(prompt);
        args.extend(extra.iter().map(String::as_str));
        self.finish(self.host(&args))
    }

    /// `relay-host --config-dir C --state-dir S ARGS` in the project folder, with PATH and the
    /// test's HOME only, stdin `/dev/null`, in a process group of its own.
    pub fn host(&self, args: &[&str]) -> Command {
        let mut cmd =
            crate::host_command(&self.config, &self.state, &self.home, &self.project, args);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        cmd
    }

    /// Runs `cmd` under [`TURN_TIMEOUT`] (its group killed then); checks that neither stream
    /// holds the token.
    pub fn finish(&self, mut cmd: Command) -> Turn {
        let start = Instant::now();
        let child = cmd.spawn().expect("spawn relay-host");
        let f = crate::run::finish_with(child, TURN_TIMEOUT, &|| false);
        let turn = Turn {
            code: f.code,
            killed: f.killed,
            stdout: f.stdout,
            stderr: f.stderr,
            took: start.elapsed(),
        };
        assert!(
            !turn.stdout.contains(&self.token) && !turn.stderr.contains(&self.token),
            "the turn's output holds the token"
        );
        eprintln!("turn took {:?}, exit {:?}", turn.took, turn.code);
        turn
    }

    /// The turn ran to its end: exit 0, not killed, the JSON result is the script's final
    /// text, and the fixture saw every step of the script asked for (main requests numbered
    /// 0..=steps).
    pub fn assert_completed(&self, turn: &Turn, steps: usize) {
        assert!(!turn.killed, "the turn hung: {}", turn.describe());
        assert_eq!(turn.code, Some(0), "{}", turn.describe());
        let result = turn.result();
        assert_eq!(result["is_error"], false, "{result}");
        assert_eq!(result["result"], FINAL, "{result}");
        let main = self.api.main_requests();
        let mut numbers: Vec<usize> = main.iter().filter_map(|s| s.step).collect();
        numbers.dedup();
        assert_eq!(
            numbers,
            (0..=steps).collect::<Vec<_>>(),
            "the main conversation did not walk the script: {main:?}"
        );
    }

    /// Every request the fixture saw carried `Authorization: Bearer <the token>` (by hash) and
    /// no API key; there was at least one.
    pub fn assert_bearer_everywhere(&self) {
        let want = sha256_hex(self.token.as_bytes());
        let seen = self.api.seen();
        assert!(!seen.is_empty(), "the fixture saw no request");
        for s in &seen {
            assert!(s.bearer, "{} {} without a Bearer", s.method, s.path);
            assert_eq!(
                s.authorization_sha256.as_deref(),
                Some(want.as_str()),
                "{} {}: the Bearer is not the token",
                s.method,
                s.path
            );
            assert!(
                s.api_key_sha256.is_none(),
                "{} {}: an API key",
                s.method,
                s.path
            );
        }
    }

    /// No regular file under the test's root (state folder and its logs, the Claude config,
    /// the project, HOME, the config folder) holds the token, the token file aside; the scan
    /// sees the token there, and the turn's transcript is among the files.
    pub fn assert_no_token_on_disk(&self) {
        let scan = crate::scan_for_tokens(&self.root, &self.token_file, &[&self.token]);
        scan.assert_clean(0);
        let files = scan.files;
        // The turn's transcript (its prompts and tool results) is among the files scanned.
        let transcripts = self.claude_config().join("projects");
        assert!(
            files
                .iter()
                .any(|f| f.starts_with(&transcripts) && f.extension().is_some_and(|e| e == "jsonl")),
            "Claude Code wrote no transcript into {}: the scan proves nothing there",
            transcripts.display()
        );
        assert!(files.iter().any(|f| f.ends_with("audit.jsonl")));
    }

    /// The proxy's `network_denied` events so far, as `host:port`.
    pub fn denied(&self) -> Vec<String> {
        self.log("events.jsonl")
            .into_iter()
            .filter(|e| e["event"] == "network_denied")
            .map(|e| format!("{}:{}", e["host"].as_str().unwrap_or("?"), e["port"]))
            .collect()
    }

    /// Prints what the turn tried: the fixture's paths and the refused hosts.
    pub fn report(&self, what: &str) {
        let seen: Vec<String> = self
            .api
            .seen()
            .iter()
            .map(|s| {
                format!(
                    "{} {}{} main={} step={:?} stream={} model={:?}",
                    s.method,
                    s.path,
                    s.query
                        .as_ref()
                        .map(|q| format!("?{q}"))
                        .unwrap_or_default(),
                    s.main,
                    s.step,
                    s.stream,
                    s.model
                )
            })
            .collect();
        eprintln!("{what}: the fixture saw {seen:#?}");
        eprintln!("{what}: the proxy refused {:?}", self.denied());
    }
}

/// Claude Code's arguments for one print-mode turn of `prompt`: its tools allowed without a
/// prompt, the result as JSON.
pub fn print_args(prompt: &str) -> Vec<String> {
    [
        "-p",
        prompt,
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "Bash,Write,Edit,Read",
        "--output-format",
        "json",
    ]
    .map(String::from)
    .to_vec()
}

/// The tool results of the main request answered with step `n` (the results of step `n - 1`).
pub fn results_at(main: &[Seen], n: usize) -> Vec<String> {
    main.iter()
        .find(|s| s.step == Some(n))
        .map(|s| s.tool_results.clone())
        .unwrap_or_default()
}
