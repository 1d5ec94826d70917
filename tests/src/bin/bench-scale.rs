//! `bench-scale [N]`: what an operator's sandboxed launch costs, beside the tools one would pick
//! instead, all in one run, interleaved round by round (N rounds, default 30), each timed from
//! spawn to exit, on the fake agent (it reads fd 5, records nothing and exits).
//!
//! Every relay series runs in a fresh world of its own (`relay_tests::fixture`): nothing is
//! made beforehand, so each launch makes its write-deny placeholders and removes them when it
//! ends, as an operator's launch does.
//!
//! - `relay claude-code`: the built-in `claude-code` template (its grants, its network
//!   allow-list and proxy), `claude` on `PATH` being the fake agent, in a project that is a git
//!   repository; token on fd 5;
//! - `relay shell`: the built-in `shell` template (read-write `~`, no token), `sh -c true`;
//! - `relay +N rw`: a `claude-code` template with `{project}` and N more read-write grants
//!   (network `none`), for N = 0, 10, 50, 100;
//! - `bwrap bare`: `bwrap --ro-bind / / --dev /dev --proc /proc AGENT`;
//! - `bwrap comparable`: `--unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc
//!   --bind P P AGENT`;
//! - `bwrap replay`: relay's own bwrap command line for the `claude-code` launch, captured from a
//!   real launch (`relay_tests::capture`) and replayed without the host, in a world of its own
//!   where that session keeps running (its proxy socket, temp folder and placeholders are the
//!   replay's bind sources);
//! - `bwrap N binds`: `bwrap --ro-bind / / --dev /dev --proc /proc --bind P P` and N more
//!   `--bind G G`;
//! - peers where installed: `firejail --quiet --noprofile --read-only=/ --read-write=P
//!   --net=none AGENT`, Anthropic's `srt AGENT`, codex's `codex sandbox -c
//!   sandbox_mode="workspace-write" -- AGENT` (in P).
//!
//! Before timing, one launch of each relay world is counted: bwrap's arguments (captured), and
//! the placeholders it made (read while the session runs); each relay series runs once with the
//! agent's record on, to check who got the token (by hash). Then medians and ratios.
//!
//! Use the release build: `cargo build --release --workspace --bins &&
//! target/release/bench-scale 30`. Runs as root (bwrap).

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use relay_tests::capture::{self, Captured};
use relay_tests::world::World;
use relay_tests::{fake_agent, read_records, sha256_hex, spawn_with_fds};
use serde_json::{json, Value};

const BWRAP: &str = "/usr/bin/bwrap";
const TOKEN_VAR: &str = "CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR";
const GRANTS: [usize; 4] = [0, 10, 50, 100];

/// How one series runs.
enum Run {
    /// `relay-host launch REQ` in a world, `PATH` set (the fake agent as `claude`).
    Relay {
        fx: World,
        req: PathBuf,
        path: OsString,
    },
    /// A command with the token file at fd 5.
    Cmd { argv: Vec<OsString> },
    /// relay's captured bwrap command line, with its descriptors.
    Replay {
        fx: World,
        captured: Captured,
        fds: Vec<(OwnedFd, i32)>,
        _live: Live,
    },
}

/// What a series' program reads on fd 5.
#[derive(Clone, Copy, PartialEq)]
enum Fd5 {
    /// The token file's bytes (checked by hash).
    Token,
    /// A stand-in: a token of a setup token's length at least, never the token's hash (the
    /// built-in `claude-code` template as shipped, on Linux).
    StandIn,
    /// Nothing: no fd 5 variable.
    Nothing,
}

struct Series {
    name: String,
    run: Run,
    /// What the program reads on fd 5 (checked once).
    token: Fd5,
}

/// A fresh world: the fixture, the fake agent as `<root>/bin/claude`, the project a git
/// repository with one commit, settings `templates` (none: the built-in ones).
fn world(agent: &Path, templates: Value) -> (World, OsString) {
    let fx = World::agent(agent);
    let bin = fx.root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    relay_tests::copy_program(agent, &bin.join("claude"));
    let mut s = json!({"claude_token_file": "~/.config/acme-ltt/token"});
    if !templates.is_null() {
        s["templates"] = templates;
    }
    std::fs::write(fx.config.join("settings.json"), s.to_string()).unwrap();
    let git = |args: &[&str]| {
        let st = Command::new("git")
            .arg("-C")
            .arg(&fx.project)
            .args(["-c", "user.name=b", "-c", "user.email=b@example.com"])
            .args(args)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(fx.project.join("README"), "bench\n").unwrap();
    git(&["add", "README"]);
    git(&["commit", "-qm", "one"]);
    let path = format!("{}:/usr/bin:/bin", bin.display()).into();
    (fx, path)
}

fn write_request(fx: &World, name: &str, req: Value) -> PathBuf {
    let p = fx.root.join(format!("{name}.json"));
    std::fs::write(&p, req.to_string()).unwrap();
    p
}

fn claude_request(fx: &World, name: &str, extra: &[&str]) -> PathBuf {
    write_request(
        fx,
        name,
        json!({"kind": "claude", "project": fx.project, "sandbox": true, "extra_args": extra}),
    )
}

/// A `shell` launch in `~/proj` (the template grants `~`), a git repository like the project.
fn shell_request(fx: &World, name: &str, script: &str) -> PathBuf {
    let proj = fx.home.join("proj");
    if !proj.exists() {
        std::fs::create_dir_all(&proj).unwrap();
        let st = Command::new("git")
            .args(["init", "-q"])
            .arg(&proj)
            .status()
            .unwrap();
        assert!(st.success());
    }
    write_request(
        fx,
        name,
        json!({"kind": "terminal", "template": "shell", "project": proj, "sandbox": true,
               "extra_args": ["-c", script]}),
    )
}

/// `relay-host launch` in `fx` with `PATH` and the record (empty: stderr, i.e. nowhere).
fn relay(fx: &World, req: &Path, path: &OsString, record: &OsString) -> Command {
    let mut c = fx.launch_cmd(req);
    c.env("PATH", path).env("FAKE_AGENT_RECORD", record);
    c
}

/// What one launch of `req` in `fx` costs in arguments and placeholders: the launch runs with
/// the capturing wrapper as its `bwrap` (`req_sleeping` keeps the session alive a little so
/// the placeholders can be counted while it runs). Returns (bwrap arguments, placeholders in
/// all, placeholders in the project) and the capture.
/// Points the settings' `bwrap` at a capturing wrapper around the real one (captures go to
/// `<root>/capture`) and makes the `claude-code` template's agent sleep `secs` seconds (its
/// command's `--sleep`: a launch with the token may not pass that flag itself), so the session
/// stays up to be counted or replayed; returns that folder, the settings file and its text
/// before.
fn capture_bwrap(fx: &World, secs: &str) -> (PathBuf, PathBuf, Vec<u8>) {
    let dir = fx.root.join("capture");
    std::fs::create_dir_all(&dir).unwrap();
    let file = fx.config.join("settings.json");
    let saved = std::fs::read(&file).unwrap();
    let mut s: Value = serde_json::from_slice(&saved).unwrap();
    s["bwrap"] = json!(capture::wrapper(&dir, Path::new(BWRAP)));
    let command = json!(["claude", "--sleep", secs]);
    match s["templates"].as_array_mut() {
        Some(ts) => ts
            .iter_mut()
            .filter(|t| t["id"] == "claude-code")
            .for_each(|t| t["command"] = command.clone()),
        None => s["templates"] = json!([{"id": "claude-code", "command": command}]),
    }
    std::fs::write(&file, s.to_string()).unwrap();
    (dir, file, saved)
}

fn count(
    fx: &World,
    path: &OsString,
    req_sleeping: &Path,
    project: &Path,
) -> (usize, usize, usize, Captured) {
    let (dir, file, saved) = capture_bwrap(fx, "0.5");
    let mut cmd = relay(fx, req_sleeping, path, &OsString::new());
    let answer = fx.root.join("count.out");
    let out = std::fs::File::create(&answer).unwrap();
    cmd.stdout(out.try_clone().unwrap()).stderr(out);
    let mut child = cmd.spawn().unwrap();
    let list = fx.state.join("placeholders");
    let start = Instant::now();
    let mut made: Vec<String> = Vec::new();
    while start.elapsed() < Duration::from_secs(10) {
        if dir.join("argv").exists() {
            if let Ok(text) = std::fs::read_to_string(&list) {
                made = text.lines().map(str::to_owned).collect();
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = child.wait().unwrap();
    std::fs::write(&file, saved).unwrap();
    let said = std::fs::read_to_string(&answer).unwrap_or_default();
    assert!(st.success(), "the counted launch: {st}: {said}");
    let captured = capture::read(&dir, Path::new(BWRAP));
    let project = format!(" {}/", project.display());
    let in_project = made.iter().filter(|l| l.contains(&project)).count();
    (
        captured.options.len() + 4 + captured.command.len(),
        made.len(),
        in_project,
        captured,
    )
}

/// A session kept running for the replay (its proxy socket, temp folder and placeholders are
/// the replay's bind sources); ended with SIGTERM when dropped.
struct Live(Child);

impl Drop for Live {
    fn drop(&mut self) {
        // SAFETY: kill with the pid of a child this process spawned and has not reaped.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

/// The replay world: the built-in `claude-code` launch captured from a session that keeps
/// running (its proxy, temp folder and placeholders stay the replay's bind sources).
fn replay_series(agent: &Path) -> Series {
    let (fx, path) = world(agent, Value::Null);
    let req = write_request(
        &fx,
        "capture",
        json!({"kind": "claude", "project": fx.project, "sandbox": true,
               "session_id": "capture"}),
    );
    let (dir, file, saved) = capture_bwrap(&fx, "3600");
    let live = Live(relay(&fx, &req, &path, &OsString::new()).spawn().unwrap());
    let start = Instant::now();
    while !dir.join("argv").exists() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The session is up once bwrap runs the agent; then the settings are the world's again.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&file, saved).unwrap();
    let mut captured = capture::read(&dir, Path::new(BWRAP));
    // The replay runs the agent as the timed launch does: without the capture's `--sleep`.
    let at = (captured.command.windows(2))
        .position(|w| w == ["--sleep", "3600"])
        .expect("the captured command has the capture's --sleep");
    captured.command.drain(at..at + 2);
    let fds = captured.numbered_fds(&fx.state.join("sessions/capture/tmp"));
    Series {
        name: "bwrap replay".into(),
        run: Run::Replay {
            fx,
            captured,
            fds,
            _live: live,
        },
        token: Fd5::Token,
    }
}

fn bwrap_cmd(agent: &Path, extra: &[&str], binds: &[PathBuf]) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![BWRAP.into()];
    v.extend(extra.iter().map(OsString::from));
    v.extend(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"].map(OsString::from));
    for b in binds {
        v.extend(["--bind".into(), b.into(), b.into()]);
    }
    v.push(agent.into());
    v
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

impl Series {
    /// Runs once; `record` is where the agent records (empty: nowhere).
    fn run(&self, token_file: &Path, record: &OsString) -> Duration {
        let token = std::fs::File::open(token_file).unwrap();
        let t = Instant::now();
        let mut child: Child = match &self.run {
            Run::Relay { fx, req, path } => relay(fx, req, path, record).spawn().unwrap(),
            Run::Cmd { argv } => {
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..])
                    .env("FAKE_AGENT_RECORD", record)
                    .env(TOKEN_VAR, "5")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
                spawn_with_fds(&mut c, &[(token.as_fd(), 5)]).unwrap()
            }
            Run::Replay { captured, fds, .. } => {
                let five: OsString = "5".into();
                let env = [
                    ("FAKE_AGENT_RECORD", record.as_os_str()),
                    (TOKEN_VAR, &five),
                ];
                captured.spawn(fds, &[(token.as_fd(), 5)], &env)
            }
        };
        let st = child.wait().unwrap();
        let d = t.elapsed();
        assert!(st.success(), "series {}: {st}", self.name);
        d
    }

    /// The world whose token this series hands over (the relay ones' own, else `shared`).
    fn token_file<'a>(&'a self, shared: &'a Path) -> &'a Path {
        match &self.run {
            Run::Relay { fx, .. } | Run::Replay { fx, .. } => &fx.token_file,
            Run::Cmd { .. } => shared,
        }
    }
}

fn median(v: &mut [Duration]) -> f64 {
    v.sort_unstable();
    v[v.len() / 2].as_secs_f64() * 1e3
}

/// One counted launch of a relay world: (world, bwrap arguments, placeholders, in the project).
type Counted = (String, usize, usize, usize);

/// The built-in templates' series: `claude-code` (the token, the allow-list) and `shell`.
fn builtin_series(agent: &Path, series: &mut Vec<Series>, counts: &mut Vec<Counted>) {
    let (fx, path) = world(agent, Value::Null);
    let sleeping = claude_request(&fx, "count", &[]);
    let (args, ph, in_p, _) = count(&fx, &path, &sleeping, &fx.project);
    counts.push(("relay claude-code".into(), args, ph, in_p));
    let req = claude_request(&fx, "timed", &[]);
    series.push(Series {
        name: "relay claude-code".into(),
        run: Run::Relay { fx, req, path },
        token: Fd5::StandIn,
    });

    let (fx, path) = world(agent, Value::Null);
    let sleeping = shell_request(&fx, "count", "sleep 0.5");
    let (args, ph, in_p, _) = count(&fx, &path, &sleeping, &fx.home.join("proj"));
    counts.push(("relay shell".into(), args, ph, in_p));
    let req = shell_request(&fx, "timed", "true");
    series.push(Series {
        name: "relay shell".into(),
        run: Run::Relay { fx, req, path },
        token: Fd5::Nothing,
    });
}

/// bwrap bare and bwrap with a profile comparable to relay's (`project` read-write).
fn bwrap_series(agent: &Path, project: &Path, series: &mut Vec<Series>) {
    series.push(Series {
        name: "bwrap bare".into(),
        run: Run::Cmd {
            argv: bwrap_cmd(agent, &[], &[]),
        },
        token: Fd5::Token,
    });
    series.push(Series {
        name: "bwrap comparable".into(),
        run: Run::Cmd {
            argv: bwrap_cmd(
                agent,
                &["--unshare-all", "--die-with-parent"],
                &[project.to_path_buf()],
            ),
        },
        token: Fd5::Token,
    });
}

/// For each count of [`GRANTS`]: relay with that many more read-write grants, and bwrap with as
/// many `--bind`.
fn grant_series(agent: &Path, series: &mut Vec<Series>, counts: &mut Vec<Counted>) {
    for k in GRANTS {
        let template = |grants: &[PathBuf]| {
            let mut rw = vec![json!("{project}")];
            rw.extend(grants.iter().map(|g| json!(g)));
            // No network: no proxy to hold a stand-in, so the token itself (pipe mode).
            json!([{"id": "claude-code", "command": ["claude"], "network": "none",
                    "token_mode": "pipe", "sandbox": {"read_write": rw}}])
        };
        let (fx, path) = world(agent, Value::Null);
        let gs = fx.grant_folders(k);
        std::fs::write(
            fx.config.join("settings.json"),
            json!({"claude_token_file": "~/.config/acme-ltt/token", "templates": template(&gs)})
                .to_string(),
        )
        .unwrap();
        let sleeping = claude_request(&fx, "count", &[]);
        let (args, ph, in_p, _) = count(&fx, &path, &sleeping, &fx.project);
        counts.push((format!("relay +{k} rw"), args, ph, in_p));
        let mut binds = vec![fx.project.clone()];
        binds.extend(gs.iter().cloned());
        series.push(Series {
            name: format!("bwrap {k} binds"),
            run: Run::Cmd {
                argv: bwrap_cmd(agent, &[], &binds),
            },
            token: Fd5::Token,
        });
        let req = claude_request(&fx, "timed", &[]);
        series.push(Series {
            name: format!("relay +{k} rw"),
            run: Run::Relay { fx, req, path },
            token: Fd5::Token,
        });
    }
}

/// The installed peers (firejail, srt, codex), run in `project` (codex's workspace is the
/// current folder; relay's launches and bwrap name every path absolutely).
fn peer_series(agent: &Path, project: &Path, series: &mut Vec<Series>) {
    let peers: [(&str, Vec<String>); 3] = [
        (
            "firejail",
            vec![
                "--quiet".into(),
                "--noprofile".into(),
                "--read-only=/".into(),
                format!("--read-write={}", project.display()),
                "--net=none".into(),
            ],
        ),
        ("srt", vec![]),
        // codex 0.171: `codex sandbox [-c KEY=VALUE] -- COMMAND`; workspace-write makes the
        // current folder writable, the rest read-only.
        (
            "codex",
            vec![
                "sandbox".into(),
                "-c".into(),
                "sandbox_mode=\"workspace-write\"".into(),
                "--".into(),
            ],
        ),
    ];
    std::env::set_current_dir(project).unwrap();
    for (name, args) in peers {
        match on_path(name) {
            Some(prog) => {
                let mut argv: Vec<OsString> = vec![prog.into()];
                argv.extend(args.iter().map(OsString::from));
                argv.push(agent.to_path_buf().into());
                series.push(Series {
                    name: name.into(),
                    run: Run::Cmd { argv },
                    token: Fd5::Token,
                });
            }
            None => println!("peer {name}: not installed, not measured"),
        }
    }
}

/// One run of each series with the record on: each relay world's agent got its token (or, for
/// a template without one, none); a peer just runs.
fn check_tokens(series: &[Series], peers_token: &Path) {
    println!("\ntoken check (one run each, record on):");
    for s in series {
        let token_file = s.token_file(peers_token);
        let record_file = match &s.run {
            Run::Relay { fx, .. } | Run::Replay { fx, .. } => fx.record.clone(),
            Run::Cmd { .. } => {
                // A peer's sandbox may have nothing writable for the record: it just runs.
                s.run(token_file, &OsString::new());
                println!("  {:<20} ran (a peer: not checked)", s.name);
                continue;
            }
        };
        let _ = std::fs::remove_file(&record_file);
        s.run(token_file, &record_file.clone().into_os_string());
        let want = sha256_hex(&std::fs::read(token_file).unwrap());
        let record = read_records(&record_file).into_iter().next();
        let got = (record.as_ref()).and_then(|r| r["token_sha256"].as_str().map(str::to_owned));
        let bytes = (record.as_ref())
            .and_then(|r| r["token_bytes"].as_u64())
            .unwrap_or(0);
        let ok = match s.token {
            Fd5::Token => got.as_deref() == Some(want.as_str()),
            Fd5::StandIn => {
                got.is_some_and(|g| g != want) && bytes >= ("sk-ant-oat01-".len() + 32) as u64
            }
            Fd5::Nothing => got.is_none(),
        };
        let said = match (s.token, ok) {
            (Fd5::Token, true) => "token received (hash matches)",
            (Fd5::StandIn, true) => "a stand-in received (not the token's hash)",
            (Fd5::Nothing, true) => "no token (as designed)",
            _ => "WRONG",
        };
        println!("  {:<20} {said}", s.name);
        assert!(ok, "{}", s.name);
        let _ = std::fs::remove_file(&record_file);
    }
}

/// The median of each series over `n` interleaved rounds (after one untimed run each).
fn medians(series: &[Series], peers_token: &Path, n: usize) -> Vec<f64> {
    let none = OsString::new();
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); series.len()];
    for s in series {
        s.run(s.token_file(peers_token), &none);
    }
    for round in 0..n {
        for k in 0..series.len() {
            let i = (k + round) % series.len();
            let s = &series[i];
            times[i].push(s.run(s.token_file(peers_token), &none));
        }
    }
    times.iter_mut().map(|v| median(v)).collect()
}

/// The medians' table and the ratios the goals are stated in.
fn report(series: &[Series], med: &[f64], n: usize) {
    let at = |name: &str| series.iter().position(|s| s.name == name).map(|i| med[i]);
    let bare = at("bwrap bare").unwrap();
    let relay_cc = at("relay claude-code").unwrap();
    println!("\nlaunch latency, N={n} interleaved rounds (median ms, spawn to exit)");
    println!(
        "{:<20} {:>9} {:>12} {:>16}",
        "series", "median", "/bwrap bare", "/relay cl-code"
    );
    for (i, s) in series.iter().enumerate() {
        println!(
            "{:<20} {:>9.3} {:>11.2}x {:>15.2}x",
            s.name,
            med[i],
            med[i] / bare,
            med[i] / relay_cc
        );
    }
    let replay = at("bwrap replay").unwrap();
    println!("\nratios (goals in parentheses):");
    println!(
        "  relay claude-code / bwrap bare:   {:.2}x (<= 2.0x)",
        relay_cc / bare
    );
    println!(
        "  relay claude-code / bwrap replay: {:.2}x (<= 1.25x)",
        relay_cc / replay
    );
    for k in GRANTS {
        let r = at(&format!("relay +{k} rw")).unwrap();
        let b = at(&format!("bwrap {k} binds")).unwrap();
        println!(
            "  relay +{k} rw / bwrap {k} binds: {:.2}x (<= 2x at 100)",
            r / b
        );
    }
    for (name, goal) in [("firejail", 1.5), ("codex", 1.5), ("srt", 8.0)] {
        if let Some(m) = at(name) {
            println!(
                "  {name} / relay claude-code: {:.2}x (>= {goal}x)",
                m / relay_cc
            );
        }
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(30);
    let agent = fake_agent();
    println!("relay-host: {}", relay_tests::relay_host().display());
    let mut series: Vec<Series> = Vec::new();
    let mut counts: Vec<Counted> = Vec::new();
    builtin_series(&agent, &mut series, &mut counts);
    series.push(replay_series(&agent));
    // The peers' shared world (a plain folder as the project, the token file).
    let (peers_fx, _) = world(&agent, Value::Null);
    bwrap_series(&agent, &peers_fx.project, &mut series);
    grant_series(&agent, &mut series, &mut counts);
    peer_series(&agent, &peers_fx.project, &mut series);

    println!("\nper launch (one counted launch of each relay world):");
    println!(
        "{:<20} {:>14} {:>14} {:>18}",
        "world", "bwrap args", "placeholders", "in the project"
    );
    for (w, a, ph, inp) in &counts {
        println!("{w:<20} {a:>14} {ph:>14} {inp:>18}");
    }
    check_tokens(&series, &peers_fx.token_file);
    let med = medians(&series, &peers_fx.token_file, n);
    report(&series, &med, n);
}
