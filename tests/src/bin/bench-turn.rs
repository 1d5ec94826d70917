//! `bench-turn [N] [T]`: what the person feels (issue 51): a real Claude Code turn and the
//! terminal UI's start, directly, under bare bwrap, and through relay in both token modes, all
//! in one fake internet, interleaved in one run.
//!
//! One installation ([`Setup::as_shipped`]: the pinned Claude Code from npm, relay-host as
//! root, the built-in `claude-code` template as shipped) in a fake Anthropic internet
//! ([`relay_tests::fake_internet`]: `api.anthropic.com` is a local TLS server the system bundle
//! trusts). Four series, each the same `claude` program with the same arguments:
//!
//! - `direct`: Claude Code on the host, in the fake internet, with the built-in template's
//!   environment (`CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`, `DISABLE_AUTOUPDATER=1`, a Claude
//!   config folder of its own, onboarded and trusting the project, fresh each round), `PATH`,
//!   `HOME`, `LANG`, the token on fd 5 (`CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5`);
//! - `bwrap`: the same under bare bubblewrap (the one relay runs) with a profile like relay's
//!   (new user, pid, ipc, uts and cgroup namespaces, `/` read-only, a fresh `/dev`, `/proc` and
//!   `/tmp`, the project and the config folder read-write, dies with its parent, a new
//!   session), the network shared (the fake internet's);
//! - `replay`: bare bubblewrap with relay's own profile: the options and the environment
//!   `relay-host` gave bwrap for a pipe-mode launch of the template with `"network": "host"`
//!   (captured once, [`relay_tests::capture::session_wrapper`]: every mount and write-deny
//!   entry, git's wrapper, the no-dump preload, the pinned configuration), replayed without
//!   relay's programs around it: a copy of that session's folder as it stood at its start
//!   (its Claude config folder as relay seeded it) and the project's placeholders made afresh
//!   before each round and removed after it; the network shared. What relay adds over it is
//!   its own programs' share: the launch and the end, the forwarder and the proxy. Print mode
//!   only: the capture is a print-mode launch with the bench's environment, while the UI's
//!   launches start from `env -i` in their pane;
//! - `pipe`: `relay-host run --template claude-code -- ARGS` with `"token_mode": "pipe"`;
//! - `stand-in`: the same as shipped (stand-in mode, the default).
//!
//! Print mode: N rounds (default 6), each one `-p` turn per series (one Bash call, then the
//! final text; `--output-format json`), the order rotating by round, timed from spawn to exit.
//! Each turn is split by the fake API's clock: spawn to its first request (the start), first to
//! last request (the requests), last request to exit (the end). Before timing, one turn of each
//! series must complete (exit 0, the scripted final text, the Bash call's line written).
//!
//! Terminal UI: T rounds (default 3; 0 skips it) of the UI started in a tmux pane (160x50),
//! timed from the start of tmux to the first screen showing the prompt (polled every 20 ms),
//! then `/exit`.
//!
//! Printed: each series' p25, median and p75, and the ratio of each median to `direct`'s, to
//! `bwrap`'s and, for relay's series, to `replay`'s.
//!
//! `bench-turn N T L`: first L rounds (default 0) of the launch alone, relay's series only: the
//! same installation with the fake agent as the template's command (it reads fd 5 and exits),
//! `relay-host run --template claude-code`, spawn to exit; printed: medians and the stand-in
//! launch over the pipe launch.
//!
//! Use the release build, as root:
//! `cargo build --release -p relay-host -p relay-shim -p relay-tests --bins &&
//! RELAY_TEST_CLAUDE=$PWD/.tools/claude-code/node_modules/.bin/claude target/release/bench-turn`.
//!
//! By hand, for tracing one turn: `bench-turn --once SERIES` runs one print-mode turn of one
//! series (`--once-tui SERIES`: one start of the UI) and prints what the fake internet saw, when.
//! `BENCH_TURN_B=DIR` adds the series `pipe B` and `stand-in B`: the `relay-host` in DIR
//! (another build, its `relay-shim` and `relay-stand-in` beside it) in the same installation.
//! `BENCH_TURN_DEBUG=1` turns on Claude Code's debug log (`DEBUG=1`, its folder in the project's
//! `.debug/`, in every series' environment), `BENCH_TURN_KEEP=DIR` copies it out before the
//! installation is removed, `BENCH_TURN_ARGS` adds arguments to every series' turn (a relay
//! request refuses Claude Code's debug options: use them with `direct` and `bwrap`), `BENCH_TURN_SHOW=1` prints each turn's output.

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("bench-turn: the fake internet is Linux only");
}

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(target_os = "linux")]
mod linux {
    use std::os::fd::AsFd;
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use relay_tests::agent::{print_args, Setup, FINAL};
    use relay_tests::fake_internet::FakeInternet;
    use relay_tests::install::Install;
    use relay_tests::messages_api::Step;
    use relay_tests::tmux::{at_prompt, Tmux};
    use serde_json::{json, Value};

    /// The file each turn's Bash call appends a line to.
    const RUNS: &str = "runs.txt";

    /// The prompt of the print-mode turn.
    const PROMPT: &str = "Run the scripted command.";

    /// The series, in the order of the first round.
    const BASE: [&str; 5] = ["direct", "bwrap", "replay", "pipe", "stand-in"];

    /// True for a series run through `relay-host`.
    fn is_relay(name: &str) -> bool {
        name.starts_with("pipe") || name.starts_with("stand-in")
    }

    /// With `BENCH_TURN_B=DIR` (a folder holding another build's `relay-host`, `relay-shim`
    /// and `relay-stand-in`): two more series, `pipe B` and `stand-in B`, that build's
    /// `relay-host` in the same installation, for a before/after in one run.
    fn b_dir() -> Option<PathBuf> {
        std::env::var_os("BENCH_TURN_B").map(PathBuf::from)
    }

    /// The series of this run: [`BASE`], then the `B` series when [`b_dir`] is set.
    fn all_series() -> &'static [&'static str] {
        static S: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
        S.get_or_init(|| {
            let mut v = BASE.to_vec();
            if b_dir().is_some() {
                v.extend(["pipe B", "stand-in B"]);
            }
            v
        })
    }

    /// The built-in template's environment (besides `CLAUDE_CONFIG_DIR`).
    const TEMPLATE_ENV: [(&str, &str); 2] = [
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
    ];

    /// The longest one turn or one start of the UI may take.
    const LIMIT: Duration = Duration::from_secs(120);

    pub fn main() {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let b = Bench::new();
        let once = args.first().map(String::as_str);
        if matches!(once, Some("--once" | "--once-tui")) {
            b.once(once == Some("--once-tui"), args.get(1).map(String::as_str));
            return;
        }
        let n: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(6);
        let tui: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3);
        let launches: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
        if launches > 0 {
            b.launches(launches);
            if n == 0 && tui == 0 {
                let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
                println!("\nload average at the end: {}", load.trim());
                return;
            }
        }
        println!("claude: {}", b.s.installed.claude.display());
        println!("bwrap: {}", b.bwrap.display());
        for (i, name) in all_series().iter().enumerate() {
            let t = b.turn(i, true);
            println!(
                "  {name:<9} checked: the turn completed ({:.0} ms)",
                ms(t.took)
            );
        }
        let mut turns: Vec<Vec<Turn>> = vec![Vec::new(); all_series().len()];
        for round in 0..n {
            for k in 0..all_series().len() {
                let i = (k + round) % all_series().len();
                turns[i].push(b.turn(i, false));
            }
            eprintln!("print mode: round {} of {n} done", round + 1);
        }
        let mut starts: Vec<Vec<Duration>> = vec![Vec::new(); all_series().len()];
        for round in 0..tui {
            for k in 0..all_series().len() {
                let i = (k + round) % all_series().len();
                // The replay is print mode only (see `tui`).
                if all_series()[i] != "replay" {
                    starts[i].push(b.tui(i));
                }
            }
            eprintln!("terminal UI: round {} of {tui} done", round + 1);
        }
        println!("\nprint mode, N={n} interleaved rounds (ms, spawn to exit)");
        let took: Vec<Vec<Duration>> = turns
            .iter()
            .map(|v| v.iter().map(|t| t.took).collect())
            .collect();
        table(&took);
        println!("\nprint mode, each turn by the fake API's clock (median ms)");
        println!(
            "{:<9} {:>10} {:>10} {:>10}",
            "series", "start", "requests", "end"
        );
        for (i, name) in all_series().iter().enumerate() {
            let v = &turns[i];
            let part = |f: &dyn Fn(&Turn) -> Duration| {
                let mut d: Vec<Duration> = v.iter().map(f).collect();
                quantile(&mut d, 0.5)
            };
            println!(
                "{name:<9} {:>10.1} {:>10.1} {:>10.1}",
                part(&|t| t.first),
                part(&|t| t.last - t.first),
                part(&|t| t.took - t.last)
            );
        }
        if tui > 0 {
            println!("\nterminal UI, T={tui} interleaved rounds (ms, start to its prompt)");
            table(&starts);
        }
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!("\nload average at the end: {}", load.trim());
    }

    /// Prints p25, median, p75 of each series and each median over `direct`'s and `bwrap`'s.
    /// A series without samples (the replay in the UI's rounds) is left out.
    fn table(series: &[Vec<Duration>]) {
        let mut medians = Vec::new();
        for (i, name) in all_series().iter().enumerate() {
            let mut v = series[i].clone();
            if v.is_empty() {
                medians.push(f64::NAN);
                continue;
            }
            let (a, m, c) = (
                quantile(&mut v, 0.25),
                quantile(&mut v, 0.5),
                quantile(&mut v, 0.75),
            );
            medians.push(m);
            println!("{name:<9} p25 {a:>9.1}  median {m:>9.1}  p75 {c:>9.1}");
        }
        for (i, name) in all_series().iter().enumerate().skip(1) {
            if medians[i].is_nan() {
                continue;
            }
            let over_bwrap = if i > 1 {
                format!(", / bwrap {:.3}", medians[i] / medians[1])
            } else {
                String::new()
            };
            let over_replay = if is_relay(name) && !medians[2].is_nan() {
                format!(", / replay {:.3}", medians[i] / medians[2])
            } else {
                String::new()
            };
            println!(
                "{name:<9} / direct {:.3}{over_bwrap}{over_replay}",
                medians[i] / medians[0]
            );
        }
    }

    fn ms(d: Duration) -> f64 {
        d.as_secs_f64() * 1e3
    }

    /// The `f` quantile of `v` in ms (sorts `v`).
    fn quantile(v: &mut [Duration], f: f64) -> f64 {
        v.sort_unstable();
        ms(v[((v.len() - 1) as f64 * f).round() as usize])
    }

    /// One print-mode turn's times, from its spawn.
    #[derive(Clone)]
    struct Turn {
        start: Instant,
        took: Duration,
        first: Duration,
        last: Duration,
    }

    struct Bench {
        s: Setup,
        bwrap: PathBuf,
        /// The direct series' Claude config folder (made afresh each run).
        direct_config: PathBuf,
        /// The `replay` series' capture.
        replay: Replay,
    }

    /// relay's bwrap profile for a pipe-mode launch with the host's network, captured once and
    /// moved onto a copy of its session folder.
    struct Replay {
        captured: relay_tests::capture::Captured,
        /// The session folder as it stood at the sandbox's start.
        pristine: PathBuf,
        /// Where each round's copy of it is made (the path the moved profile names).
        live: PathBuf,
        /// relay's command before the request's arguments: Claude Code and the template's own.
        command: Vec<std::ffi::OsString>,
        /// The project's write-deny entries relay made as placeholders for that launch, each
        /// with whether it is a folder: made before each round, removed after it.
        placeholders: Vec<(PathBuf, bool)>,
    }

    impl Bench {
        fn new() -> Bench {
            // As the agent-turn tests: the relay-owned Claude config seeded past onboarding and
            // the project's trust dialog.
            let s = Setup::as_shipped(Install::Npm, None, |_, _| {
                vec![
                    Step::bash(&format!("echo turn >> {RUNS}")),
                    Step::text(FINAL),
                ]
            });
            s.seed_claude_config();
            let bwrap = relay_tests::settings_bwrap().unwrap_or_else(|| "/usr/bin/bwrap".into());
            let direct_config = s.root.join("direct-claude");
            let replay = Replay::capture(&s, &bwrap);
            Bench {
                s,
                bwrap,
                direct_config,
                replay,
            }
        }

        /// By hand: one print-mode turn (`--once SERIES`) or one start of the UI (`--once-tui
        /// SERIES`, default `stand-in`), and what the fake internet saw, when; with
        /// `BENCH_TURN_KEEP=DIR`, Claude Code's debug log copied out.
        fn once(&self, tui: bool, series: Option<&str>) {
            let series = series.unwrap_or("stand-in");
            let i = all_series()
                .iter()
                .position(|s| *s == series)
                .unwrap_or_else(|| panic!("a series of {:?}", all_series()));
            if tui {
                let start = Instant::now();
                let took = self.tui(i);
                println!("{series}: at the prompt after {:.1} ms", ms(took));
                println!("{}", self.net().report(start));
                println!("relay refused {:?}", self.s.denied());
            } else {
                let t = self.turn(i, false);
                println!(
                    "{series}: {:.1} ms (first request at {:.1}, last at {:.1})",
                    ms(t.took),
                    ms(t.first),
                    ms(t.last)
                );
                println!("{}", self.net().report(t.start));
                self.s.report(series);
            }
            if let Some(keep) = std::env::var_os("BENCH_TURN_KEEP") {
                let _ = Command::new("cp")
                    .arg("-r")
                    .arg(self.s.project.join(".debug"))
                    .arg(keep)
                    .status();
            }
        }

        /// By hand (`BENCH_TURN_DEBUG=1`): Claude Code's debug log of each turn in the
        /// project's `.debug/` (left out of git).
        fn debug_dir(&self) -> Option<String> {
            std::env::var_os("BENCH_TURN_DEBUG")?;
            let dir = self.s.project.join(".debug");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(self.s.project.join(".git/info/exclude"), ".debug/\n").unwrap();
            Some(dir.to_str().unwrap().to_string())
        }

        fn net(&self) -> &FakeInternet {
            self.s.internet.as_ref().expect("the fake internet")
        }

        /// A fresh Claude config folder for the direct and bwrap series, seeded as relay's.
        fn fresh_direct_config(&self) {
            let _ = std::fs::remove_dir_all(&self.direct_config);
            std::fs::create_dir_all(&self.direct_config).unwrap();
            std::fs::set_permissions(&self.direct_config, std::fs::Permissions::from_mode(0o700))
                .unwrap();
            let seed = std::fs::read(self.s.claude_config().join(".claude.json")).unwrap();
            let mut v: Value = serde_json::from_slice(&seed).unwrap();
            // Relay's copy names the project as relay does; the direct run uses the same path.
            v["projects"] = json!({self.s.project.to_str().unwrap(): {
                "hasTrustDialogAccepted": true,
                "hasCompletedProjectOnboarding": true,
            }});
            // A fresh config offers the terminal UI's fullscreen renderer before the prompt
            // (Claude Code 2.1.332 does on a config that recorded its first start); relay's
            // session config records no first start, so its UI never offers it. Seen thrice:
            // never offered.
            v["fullscreenUpsellSeenCount"] = json!(3);
            std::fs::write(self.direct_config.join(".claude.json"), v.to_string()).unwrap();
        }

        /// Sets the template's token mode for the relay series `i`.
        fn mode(&self, i: usize) {
            let mut how = if all_series()[i].starts_with("pipe") {
                json!({"token_mode": "pipe"})
            } else {
                json!({})
            };
            if let Some(dir) = self.debug_dir() {
                let mut env: serde_json::Map<String, Value> = TEMPLATE_ENV
                    .iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect();
                env.insert("CLAUDE_CONFIG_DIR".into(), json!("{claude_config}"));
                env.insert("DEBUG".into(), json!("1"));
                env.insert("CLAUDE_CODE_DEBUG_LOGS_DIR".into(), json!(dir));
                how["env"] = Value::Object(env);
            }
            self.s.write_settings_with(how);
        }

        /// The command of series `i` running `claude ARGS` (stdio not set).
        fn command(&self, i: usize, args: &[String]) -> Command {
            let claude = &self.s.installed.claude;
            match all_series()[i] {
                "direct" | "bwrap" => {
                    self.fresh_direct_config();
                    let mut cmd = if all_series()[i] == "direct" {
                        Command::new(claude)
                    } else {
                        let mut c = Command::new(&self.bwrap);
                        let (p, cfg) = (&self.s.project, &self.direct_config);
                        c.args([
                            "--unshare-user",
                            "--unshare-pid",
                            "--unshare-ipc",
                            "--unshare-uts",
                            "--unshare-cgroup-try",
                            "--die-with-parent",
                            "--new-session",
                            "--cap-drop",
                            "ALL",
                            "--ro-bind",
                            "/",
                            "/",
                            "--dev",
                            "/dev",
                            "--proc",
                            "/proc",
                            "--tmpfs",
                            "/tmp",
                        ])
                        .arg("--bind")
                        .args([p, p])
                        .arg("--bind")
                        .args([cfg, cfg])
                        .arg("--chdir")
                        .arg(p)
                        .arg("--")
                        .arg(claude);
                        c
                    };
                    cmd.args(args)
                        .env_clear()
                        .env("PATH", &self.s.path)
                        .env("HOME", &self.s.home)
                        .env("LANG", "C.UTF-8")
                        .env("CLAUDE_CONFIG_DIR", &self.direct_config)
                        .env("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR", "5")
                        .envs(TEMPLATE_ENV)
                        .envs(
                            self.debug_dir()
                                .map(|d| [("DEBUG", "1".into()), ("CLAUDE_CODE_DEBUG_LOGS_DIR", d)])
                                .into_iter()
                                .flatten(),
                        )
                        .current_dir(&self.s.project);
                    self.s.enter(&mut cmd);
                    cmd
                }
                "replay" => {
                    self.replay.fresh(&self.s.project);
                    let mut argv = self.replay.command.clone();
                    argv.extend(args.iter().map(Into::into));
                    let mut c = self.replay.captured.bwrap_command(&argv);
                    c.env_clear()
                        .envs(self.replay.captured.env.iter().filter_map(|kv| {
                            let kv = kv.to_str()?;
                            kv.split_once('=')
                        }))
                        .current_dir(&self.s.project);
                    self.s.enter(&mut c);
                    c
                }
                _ => {
                    self.mode(i);
                    let mut run = vec!["run", "--template", "claude-code", "--"];
                    run.extend(args.iter().map(String::as_str));
                    self.command_for(i, &run)
                }
            }
        }

        /// `relay-host ARGS` for the relay series `i` (the `B` build's for a `B` series).
        fn command_for(&self, i: usize, run: &[&str]) -> Command {
            let cmd = self.s.host(run);
            match b_dir() {
                Some(dir) if all_series()[i].ends_with(" B") => {
                    let mut b = Command::new(dir.join("relay-host"));
                    b.args(cmd.get_args());
                    for (k, v) in cmd.get_envs() {
                        match v {
                            Some(v) => b.env(k, v),
                            None => b.env_remove(k),
                        };
                    }
                    if let Some(d) = cmd.get_current_dir() {
                        b.current_dir(d);
                    }
                    self.s.enter(&mut b);
                    b
                }
                _ => cmd,
            }
        }

        /// One print-mode turn of series `i`; with `check`, asserts it completed.
        fn turn(&self, i: usize, check: bool) -> Turn {
            let runs = self.runs();
            let mut args = print_args(PROMPT);
            args.extend(
                std::env::var("BENCH_TURN_ARGS")
                    .ok()
                    .iter()
                    .flat_map(|a| a.split(' ').map(String::from)),
            );
            let mut cmd = self.command(i, &args);
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let token = std::fs::File::open(&self.s.token_file).unwrap();
            let held = self.held_fds(i);
            let mut fds: Vec<(std::os::fd::BorrowedFd<'_>, i32)> = vec![(token.as_fd(), 5)];
            fds.extend(held.iter().map(|(fd, n)| (fd.as_fd(), *n)));
            let start = Instant::now();
            let child = relay_tests::spawn_with_fds(&mut cmd, &fds).unwrap();
            let out = relay_tests::run::finish_with(child, LIMIT, &|| false);
            let took = start.elapsed();
            drop((token, held));
            let what = all_series()[i];
            if what == "replay" {
                self.replay.clean();
            }
            if std::env::var_os("BENCH_TURN_SHOW").is_some() {
                eprintln!("{what}: {}", out.describe());
            }
            if check || out.code != Some(0) {
                assert_eq!(out.code, Some(0), "{what}: {}", out.describe());
                let v: Value = serde_json::from_str(out.stdout.trim())
                    .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {}", out.describe()));
                assert_eq!(v["result"], FINAL, "{what}: {v}");
                assert_eq!(self.runs(), runs + 1, "{what}: the Bash call did not run");
                assert!(!out.stdout.contains(&self.s.token) && !out.stderr.contains(&self.s.token));
            }
            let hits: Vec<Instant> = (self.net().hits().iter())
                .map(|h| h.at)
                .filter(|at| *at >= start)
                .collect();
            let since = |at: Option<&Instant>| at.map_or(took, |a| a.duration_since(start));
            Turn {
                start,
                took,
                first: since(hits.first()),
                last: since(hits.last()),
            }
        }

        /// L rounds of the launch alone, the relay series only: the same template with the fake
        /// agent as its command (it reads fd 5 and exits), spawn to exit, interleaved; prints
        /// medians and the stand-in launch over the pipe launch (each build's).
        fn launches(&self, l: usize) {
            let relay: Vec<usize> = (0..all_series().len())
                .filter(|&i| is_relay(all_series()[i]))
                .collect();
            let agent = relay_tests::fake_agent_arg();
            let run = |i: usize| -> Duration {
                let mut how = if all_series()[i].starts_with("pipe") {
                    json!({"token_mode": "pipe"})
                } else {
                    json!({})
                };
                how["command"] = json!([agent]);
                self.s.write_settings_with(how);
                let mut cmd = self.command_for(i, &["run", "--template", "claude-code"]);
                cmd.env("FAKE_AGENT_RECORD", "/dev/null")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped());
                let token = std::fs::File::open(&self.s.token_file).unwrap();
                let start = Instant::now();
                let child = relay_tests::spawn_with_fds(&mut cmd, &[(token.as_fd(), 5)]).unwrap();
                let out = child.wait_with_output().unwrap();
                let took = start.elapsed();
                assert!(
                    out.status.success(),
                    "{}: {}",
                    all_series()[i],
                    String::from_utf8_lossy(&out.stderr)
                );
                took
            };
            for &i in &relay {
                run(i);
            }
            let mut times: Vec<Vec<Duration>> = vec![Vec::new(); all_series().len()];
            for round in 0..l {
                for k in 0..relay.len() {
                    let i = relay[(k + round) % relay.len()];
                    times[i].push(run(i));
                }
            }
            println!(
                "\nthe launch alone, L={l} interleaved rounds (ms, spawn to exit, fake agent)"
            );
            let mut med = vec![0.0; all_series().len()];
            for &i in &relay {
                let mut v = times[i].clone();
                let (a, m, c) = (
                    quantile(&mut v, 0.25),
                    quantile(&mut v, 0.5),
                    quantile(&mut v, 0.75),
                );
                med[i] = m;
                println!(
                    "{:<10} p25 {a:>7.1}  median {m:>7.1}  p75 {c:>7.1}",
                    all_series()[i]
                );
            }
            for (p, si) in relay.iter().zip(relay.iter().skip(1)).step_by(2) {
                println!(
                    "{} / {}: {:.3}",
                    all_series()[*si],
                    all_series()[*p],
                    med[*si] / med[*p]
                );
            }
            self.mode(
                (all_series().iter())
                    .position(|s| *s == "stand-in")
                    .expect("the stand-in series"),
            );
        }

        /// The descriptors series `i` gets besides the token: for `replay`, the options file at
        /// bwrap's `--args` number and each descriptor the options name at its own.
        fn held_fds(&self, i: usize) -> Vec<(std::os::fd::OwnedFd, i32)> {
            if all_series()[i] != "replay" {
                return Vec::new();
            }
            let c = &self.replay.captured;
            let mut fds = vec![c.options_fd()];
            fds.extend(c.numbered_fds(&self.replay.live.join("tmp")));
            fds
        }

        /// The lines of the project's [`RUNS`].
        fn runs(&self) -> usize {
            std::fs::read_to_string(self.s.project.join(RUNS)).map_or(0, |t| t.lines().count())
        }

        /// One start of the terminal UI of series `i` in a tmux pane: the time to its prompt.
        fn tui(&self, i: usize) -> Duration {
            let args: Vec<String> = [
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                "Bash,Write,Edit,Read",
            ]
            .map(String::from)
            .to_vec();
            // The replay's environment is a print-mode launch's (the bench's own around it);
            // the UI's launches start from `env -i` in the pane: no fair replay of them.
            assert!(all_series()[i] != "replay", "the replay is print mode only");
            let cmd = self.command(i, &args);
            // The pane's line: the command's environment and arguments, its token on fd 5.
            let quote =
                |s: &std::ffi::OsStr| format!("'{}'", s.to_str().unwrap().replace('\'', "'\\''"));
            let env: Vec<String> = cmd
                .get_envs()
                .filter_map(|(k, v)| Some(format!("{}={}", k.to_str()?, quote(v?))))
                .collect();
            let argv: Vec<String> = std::iter::once(cmd.get_program())
                .chain(cmd.get_args())
                .map(quote)
                .collect();
            let line = format!(
                "exec 5<{}; exec env -i TERM=xterm-256color {} {}",
                quote(self.s.token_file.as_os_str()),
                env.join(" "),
                argv.join(" ")
            );
            static STARTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let socket = self.s.root.join(format!("tmux-{n}.sock"));
            let dir = cmd
                .get_current_dir()
                .map_or_else(|| self.s.project.clone(), Path::to_path_buf);
            let start = Instant::now();
            let tmux = Tmux::start_with(&socket, &dir, &line, &|c| self.s.enter(c));
            let took = loop {
                let screen = tmux.screen();
                if at_prompt(&screen) {
                    break start.elapsed();
                }
                assert!(
                    start.elapsed() < LIMIT,
                    "{}: no prompt after {LIMIT:?}:\n{screen}",
                    all_series()[i]
                );
                std::thread::sleep(Duration::from_millis(20));
            };
            tmux.run(&["send-keys", "-t", "turn", "-l", "/exit"]);
            std::thread::sleep(Duration::from_millis(300));
            tmux.run(&["send-keys", "-t", "turn", "Enter"]);
            assert!(
                tmux.gone(Duration::from_secs(30)),
                "{}: the UI did not end after /exit",
                all_series()[i]
            );
            took
        }
    }

    impl Replay {
        /// One print-mode turn through relay in pipe mode with the host's network, its bwrap a
        /// wrapper that keeps the options, the environment and the session folder; the turn
        /// must complete. The settings are written as shipped again afterwards.
        fn capture(s: &Setup, bwrap: &Path) -> Replay {
            let dir = s.root.join("replay");
            std::fs::create_dir_all(&dir).unwrap();
            let wrapper = relay_tests::capture::session_wrapper(&dir, bwrap);
            s.write_settings_with(json!({"token_mode": "pipe", "network": "host"}));
            s.edit_settings(|v| {
                v["token_network"] = json!("host");
                v["bwrap"] = json!(wrapper);
            });
            let args = print_args(PROMPT);
            let mut run = vec!["run", "--template", "claude-code", "--"];
            run.extend(args.iter().map(String::as_str));
            let mut cmd = s.host(&run);
            cmd.stdin(Stdio::null());
            let token = std::fs::File::open(&s.token_file).unwrap();
            let child = relay_tests::spawn_with_fds(&mut cmd, &[(token.as_fd(), 5)]).unwrap();
            let out = relay_tests::run::finish_with(child, LIMIT, &|| false);
            assert_eq!(out.code, Some(0), "the capture's turn: {}", out.describe());
            s.write_settings_with(json!({}));
            let captured = relay_tests::capture::read(&dir, bwrap);
            let config = (captured.env.iter())
                .find_map(|kv| kv.to_str()?.strip_prefix("CLAUDE_CONFIG_DIR="))
                .map(PathBuf::from)
                .expect("CLAUDE_CONFIG_DIR in the captured environment");
            let session = config.parent().expect("the session folder").to_path_buf();
            let (pristine, live) = (dir.join("session"), dir.join("live"));
            let captured = captured.moved_to(&session, &live);
            let tail: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
            let keep = captured.command.len() - tail.len();
            assert_eq!(captured.command[keep..], tail[..], "the captured command");
            let command = captured.command[..keep].to_vec();
            // What relay made as placeholders: the bind destinations the project lacks now,
            // each a file where the write-deny list makes a file's placeholder, else a folder.
            use relay_token::sandbox::write_deny::{plan, Role};
            let project = s.project.canonicalize().unwrap();
            let listed = plan(&[(project.clone(), Role::Project)], true, &[]);
            let o = &captured.options;
            let placeholders = (0..o.len())
                .filter(|&k| o[k] == "--bind-fd" || o[k] == "--ro-bind-fd")
                .map(|k| PathBuf::from(&o[k + 2]))
                .filter(|p| p.starts_with(&project) && std::fs::symlink_metadata(p).is_err())
                .map(|p| {
                    let file =
                        (listed.iter()).any(|l| l.path == p && !(l.dir || l.folder_placeholder));
                    (p, !file)
                })
                .collect();
            Replay {
                captured,
                pristine,
                live,
                command,
                placeholders,
            }
        }

        /// Before a round: the session folder's copy made afresh, the placeholders made.
        fn fresh(&self, project: &Path) {
            let _ = std::fs::remove_dir_all(&self.live);
            let st = Command::new("cp")
                .arg("-a")
                .arg(&self.pristine)
                .arg(&self.live)
                .status()
                .unwrap();
            assert!(st.success(), "cp -a {}", self.pristine.display());
            for (p, dir) in &self.placeholders {
                assert!(p.starts_with(project));
                if *dir {
                    std::fs::create_dir(p).unwrap();
                } else {
                    std::fs::write(p, "").unwrap();
                }
            }
        }

        /// After a round: the placeholders removed (deepest first).
        fn clean(&self) {
            for (p, dir) in self.placeholders.iter().rev() {
                if *dir {
                    let _ = std::fs::remove_dir(p);
                } else {
                    let _ = std::fs::remove_file(p);
                }
            }
        }
    }
}
