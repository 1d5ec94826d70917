//! One real agent turn's installation, shared by the agent-turn tests and `demo-turn`: the
//! pinned Claude Code CLI launched sandboxed by the real `relay-host` with the token on fd 5,
//! playing a script against the local Messages API fixture ([`crate::messages_api`]) in a
//! project that is a git repository; outcomes checked on the host, the credential by hash only.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fixture::{Layout, HOST_PATH};
use crate::install::{self, Install, Installed};
use crate::messages_api::{MessagesApi, Seen, Step};
use crate::sha256_hex;
use crate::world::{Token, World};

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
    /// The turn `child` made: waited for under the turn timeout (killed when it overruns), timed
    /// from `start`.
    pub fn wait(child: std::process::Child, start: Instant) -> Turn {
        let f = crate::run::finish_with(child, TURN_TIMEOUT, &|| false);
        Turn {
            code: f.code,
            killed: f.killed,
            stdout: f.stdout,
            stderr: f.stderr,
            took: start.elapsed(),
        }
    }

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
/// private inside the sandbox), a git project with one commit, the fixture, a token, Claude
/// Code installed one of the ways people install it, and the built-in `claude-code` template
/// as shipped (only its `api_base_url` at the fixture).
pub struct Setup {
    /// The world ([`Layout::claude`], a Claude-shaped token, never printed, in a 0600 file):
    /// the project is a git repository with one commit.
    world: World,
    /// Claude Code as installed: the `claude` relay-host finds on its `PATH`.
    pub installed: Installed,
    /// How Claude Code is installed.
    pub install: Install,
    /// The user relay-host runs as (through `setpriv`; `None`: the test's own, root).
    pub user: Option<u32>,
    /// relay-host's `PATH`: the folder `claude` is in, then [`HOST_PATH`].
    pub path: String,
    /// The Messages API fixture (`api.anthropic.com` itself in [`Setup::internet`]).
    pub api: MessagesApi,
    /// The fake internet relay-host runs in ([`Setup::as_shipped`]), if any.
    #[cfg(target_os = "linux")]
    pub internet: Option<crate::fake_internet::FakeInternet>,
}

/// A setup is its world (`s.token`, `s.home`, `s.project`, ...) and the turn it plays.
impl std::ops::Deref for Setup {
    type Target = World;
    fn deref(&self) -> &World {
        &self.world
    }
}

/// The unprivileged user the `_as_a_user` tests run relay-host as (`nobody`).
pub use crate::world::NOBODY;

impl Setup {
    /// Everything ready for a turn of the script `script` makes of the project's path and the
    /// token's SHA-256: Claude Code from npm, relay-host as root, the Claude config seeded
    /// past onboarding and the project's trust dialog.
    pub fn new(script: impl FnOnce(&Path, &str) -> Vec<Step>) -> Setup {
        Setup::with(Install::Npm, None, script)
    }

    /// As [`Setup::new`], with Claude Code installed by `install` and relay-host run as `user`
    /// (the whole tree handed to that user).
    pub fn with(
        install: Install,
        user: Option<u32>,
        script: impl FnOnce(&Path, &str) -> Vec<Step>,
    ) -> Setup {
        let s = Setup::bare(install, user, script);
        s.seed_claude_config();
        s.hand_over();
        s
    }

    /// As [`Setup::new`], but the relay-owned Claude config is left fresh.
    pub fn fresh(script: impl FnOnce(&Path, &str) -> Vec<Step>) -> Setup {
        Setup::bare(Install::Npm, None, script)
    }

    /// The folders, the token, Claude Code, the fixture, the project and the settings; the
    /// Claude config not seeded, the tree still root's.
    pub fn bare(
        install: Install,
        user: Option<u32>,
        script: impl FnOnce(&Path, &str) -> Vec<Step>,
    ) -> Setup {
        Setup::build(install, user, script, false)
    }

    /// What a new user has: relay-host and Claude Code (installed by `install`, relay-host run
    /// as `user`) in a fake internet ([`crate::fake_internet`]) whose `api.anthropic.com` plays
    /// the script; the settings only `claude_token_file` and the built-in templates as shipped
    /// (no gateway), the Claude config fresh, the tree handed to `user`.
    #[cfg(target_os = "linux")]
    pub fn as_shipped(
        install: Install,
        user: Option<u32>,
        script: impl FnOnce(&Path, &str) -> Vec<Step>,
    ) -> Setup {
        let s = Setup::build(install, user, script, true);
        s.hand_over();
        s
    }

    fn build(
        install: Install,
        user: Option<u32>,
        script: impl FnOnce(&Path, &str) -> Vec<Step>,
        internet: bool,
    ) -> Setup {
        let world = World::builder()
            .layout(Layout::claude("relay-agent-turn."))
            .token(Token::Claude)
            .build();
        let installed = install.install(&world.root, &world.home);
        let script = script(&world.project, &sha256_hex(world.token.as_bytes()));
        #[cfg(target_os = "linux")]
        let (internet, api) = if internet {
            let net = crate::fake_internet::FakeInternet::start();
            let api = net.serve_api(script);
            (Some(net), api)
        } else {
            (None, MessagesApi::start(script))
        };
        #[cfg(not(target_os = "linux"))]
        let api = {
            assert!(!internet, "the fake internet is Linux only");
            MessagesApi::start(script)
        };
        let s = Setup {
            world,
            path: format!("{}:{HOST_PATH}", installed.bin.display()),
            installed,
            install,
            user,
            api,
            #[cfg(target_os = "linux")]
            internet,
        };
        s.init_project();
        s.write_settings_with(json!({}));
        s
    }

    /// Makes `cmd` run in [`Setup::internet`], if any.
    pub fn enter(&self, cmd: &mut Command) {
        #[cfg(target_os = "linux")]
        if let Some(net) = &self.internet {
            net.enter(cmd);
        }
        let _ = cmd;
    }

    /// Hands the whole tree to [`Setup::user`], if any (`chown -R`).
    pub fn hand_over(&self) {
        if let Some(id) = self.user {
            self.world.hand_over(id);
        }
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

    /// `git ARGS` in the project on the host (as root, whoever owns the project).
    pub fn git(&self, args: &[&str]) -> std::process::Output {
        self.git_in(&self.project, args)
    }

    /// `git ARGS` in `dir` on the host (as root, whoever owns it).
    pub fn git_in(&self, dir: &Path, args: &[&str]) -> std::process::Output {
        Command::new("git")
            .args([
                "-c",
                "user.name=Relay Test",
                "-c",
                "user.email=relay@test.invalid",
                "-c",
                "safe.directory=*",
                "-c",
                "protocol.file.allow=always",
            ])
            .args(args)
            .current_dir(dir)
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("run git")
    }

    /// The operator's settings ([`install::shipped_settings`]): the built-in `claude-code`
    /// template as shipped, its `api_base_url` at the fixture, written with
    /// [`World::settings`]; `how` (`json!({})` for none) sets the template's `network` (or
    /// other keys) as given; a turn still checks that the template is the built-in one as shipped
    /// ([`install::assert_as_shipped`]), so `how` can change only its network.
    pub fn write_settings_with(&self, how: Value) {
        let mut settings = install::shipped_settings(&self.api.base_url());
        #[cfg(target_os = "linux")]
        if self.internet.is_some() {
            // As shipped: no gateway, no `upstream_ca_file`; the test CA is in the system
            // bundle, which both Claude Code and stand-in mode's proxy trust.
            settings = install::shipped_settings_as_is();
        }
        for (k, v) in how.as_object().expect("an object") {
            settings["templates"][0][k] = v.clone();
        }
        self.world.settings(settings);
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
        self.launch_in(&self.project, extra_args)
    }

    /// [`Setup::turn`] with `project` as the request's project (a linked worktree, say).
    pub fn turn_in(&self, project: &Path, prompt: &str) -> Turn {
        self.launch_in(project, &print_args(prompt))
    }

    /// A turn through `relay-host launch` in `project` with `extra_args`.
    fn launch_in(&self, project: &Path, extra_args: &[String]) -> Turn {
        let req = self.root.join("request.json");
        let body = json!({
            "kind": "terminal",
            "template": "claude-code",
            "project": project,
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

    /// `relay-host --config-dir C --state-dir S ARGS` in the project folder, as [`Setup::user`],
    /// with [`Setup::path`], the test's HOME and `LANG` only, stdin `/dev/null`, in a process
    /// group of its own.
    pub fn host(&self, args: &[&str]) -> Command {
        let mut cmd = match self.user {
            None => Command::new(crate::relay_host()),
            Some(id) => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={id}"))
                    .arg(format!("--regid={id}"))
                    .arg("--clear-groups")
                    .arg(crate::relay_host());
                c
            }
        };
        self.enter(&mut cmd);
        self.host_setup(&mut cmd, &self.state)
            .env("PATH", &self.path)
            .args(args)
            .current_dir(&self.project)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// `relay-host run --template claude-code` with the tools allowed, in a tmux pane in the
    /// project (as [`Setup::user`], with [`Setup::path`], the test's HOME and a terminal type only), once
    /// the settings are checked to hold the built-in templates as shipped.
    pub fn start_tui(&self) -> crate::tmux::Tmux {
        install::assert_as_shipped(&self.config);
        self.start_tui_as_configured()
    }

    /// [`Setup::start_tui`] on whatever settings were written (a test's control).
    pub fn start_tui_as_configured(&self) -> crate::tmux::Tmux {
        let who = self.user.map_or(String::new(), |id| {
            format!("setpriv --reuid={id} --regid={id} --clear-groups ")
        });
        let line = format!(
            "exec env -i PATH='{}' HOME='{}' TERM=xterm-256color {who}'{}' --config-dir '{}' \
             --state-dir '{}' run --template claude-code -- --permission-mode acceptEdits \
             --allowedTools Bash,Write,Edit,Read",
            self.path,
            self.home.display(),
            crate::relay_host().display(),
            self.config.display(),
            self.state.display()
        );
        // A socket of its own per start: a server just killed may still hold the last one.
        static STARTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = self.root.join(format!("tmux-{n}.sock"));
        crate::tmux::Tmux::start_with(&socket, &self.project, &line, &|c| self.enter(c))
    }

    /// Runs `cmd` under [`TURN_TIMEOUT`] (its group killed then), once the settings are checked
    /// to hold the built-in templates as shipped ([`install::assert_as_shipped`]); checks that
    /// neither stream holds the token.
    pub fn finish(&self, mut cmd: Command) -> Turn {
        install::assert_as_shipped(&self.config);
        let start = Instant::now();
        let child = cmd.spawn().expect("spawn relay-host");
        let turn = Turn::wait(child, start);
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
    /// the project, HOME, the config folder) holds the token, the token file aside
    /// ([`World::assert_no_token_on_disk`]); the scan sees the token there, and the turn's
    /// transcript and the audit log are among the files.
    pub fn assert_no_token_on_disk(&self) {
        // A copy of the npm package's 400 MB binary, which sessions see read-only, is left
        // out of the scan.
        let skip: Vec<PathBuf> = self.installed.copy.iter().cloned().collect();
        let files = self.world.assert_no_token_on_disk(&skip, &[]);
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

    /// Every entry under the project, `.git/` included, as relative paths (a folder's with a
    /// trailing `/`), git's object store aside (`.git/objects/` itself is listed).
    pub fn entries(&self) -> BTreeSet<String> {
        entries_under(&self.project)
    }

    /// The project holds what it held at `before` plus exactly `wrote` (relative paths), and
    /// new git objects: nothing else appeared (no mount point, placeholder or empty file left
    /// by a sandbox) and nothing went away.
    pub fn assert_left_only(&self, before: &BTreeSet<String>, wrote: &[&str]) {
        let after = self.entries();
        let gone: Vec<&String> = before.difference(&after).collect();
        assert!(gone.is_empty(), "the turn removed {gone:?}");
        let new: BTreeSet<&str> = after.difference(before).map(String::as_str).collect();
        let want: BTreeSet<&str> = wrote.iter().copied().collect();
        assert_eq!(
            new, want,
            "the project holds entries the turn did not write"
        );
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

/// The entries under `root` ([`Setup::entries`]).
pub fn entries_under(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let is_dir = std::fs::symlink_metadata(&p).unwrap().is_dir();
            out.insert(format!("{rel}{}", if is_dir { "/" } else { "" }));
            if is_dir && rel != ".git/objects" {
                stack.push(p);
            }
        }
    }
    out
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

/// The file tools' part of a turn: Write makes `written.txt`, Read and Edit change the committed
/// `notes.txt` (`colour: red` to `colour: blue`).
pub fn file_steps(project: &Path) -> Vec<Step> {
    vec![
        Step::tool(
            "Write",
            json!({"file_path": project.join("written.txt"),
                   "content": "written by the Write tool\n"}),
        ),
        Step::tool("Read", json!({"file_path": project.join("notes.txt")})),
        Step::tool(
            "Edit",
            json!({"file_path": project.join("notes.txt"), "old_string": "colour: red",
                   "new_string": "colour: blue"}),
        ),
    ]
}
