//! `bench-launch [N] [--endurance [SEQ [CONC]]]`: what a `relay-host` launch costs, side by side
//! in one run, on the fake agent (it reads fd 5, records to `/dev/null` and exits).
//!
//! Series, interleaved round by round (N rounds, default 200), each timed from spawn to exit:
//! - `direct`: the fake agent exec'd with the token file open at fd 5 (the floor);
//! - `sh launcher`: `sh -c 'exec 5<"$TOKEN_FILE"; CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5 exec
//!   "$AGENT"'`, the operator's shell launcher;
//! - `host unsandboxed`: `relay-host launch` of `{"kind":"claude","sandbox":false}` (host +
//!   shim + agent; by contract this launch carries no token);
//! - `host sandboxed`: the same with `"sandbox":true` (host + shim + bwrap + agent,
//!   token on fd 5);
//! - `bwrap bare`: `bwrap --ro-bind / / AGENT`, token file at fd 5;
//! - `bwrap profile`: the very bwrap command line `relay-host` built for the sandboxed launch
//!   (captured by a wrapper run as the capture launch's `bwrap`: `relay_tests::capture`),
//!   token file at fd 5 and each bind descriptor it names reopened at its number: the
//!   profile's cost without the host;
//! - `bwrap probe`: `bwrap <relay's flags> --ro-bind / / -- true`, the check `relay-host` ran
//!   before each sandboxed launch (now only to word a refusal, or with an older bwrap);
//! - `shim + agent`: `relay-shim --pass-token -- AGENT`, token file at fd 5 (no status pipe): the
//!   shim's share of the host launch.
//!
//! Then memory (C): VmRSS, RssAnon and private (smaps_rollup Private_*) of `relay-host` and
//! `relay-shim` while a sandboxed session sleeps.
//!
//! `--endurance [SEQ [CONC]]` (default 2000 and 32) adds D: SEQ sequential sandboxed launches,
//! the token file rewritten before each and checked by hash in the agent's record, and CONC
//! concurrent ones, each with its own installation and token; then checks that no process of
//! the run is left, no zombie sits under the harness, and the harness's children and descriptors
//! are back to their count; p99 against the median.
//!
//! `RELAY_HOST_B=PATH` adds two series, the host launches again with another build of
//! `relay-host` (a static one, say), timed beside the first in the same rounds.
//! `RELAY_HOST=PATH` measures another build of `relay-host` (its `relay-shim` beside it), for
//! the latency and memory parts.
//!
//! Use the release build: `cargo build --release --workspace --bins &&
//! target/release/bench-launch`. Runs as root (bwrap, `/proc/<pid>/smaps_rollup` of the
//! non-dumpable host).

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use relay_tests::fixture::{children_of, open_fds, processes_with_env, wait_child, zombies_of};
use relay_tests::world::World;
use relay_tests::{
    capture, fake_agent, read_records, sha256_hex, spawn_with_fds, wait_for_records,
};

const BWRAP: &str = "/usr/bin/bwrap";
const TOKEN_VAR: &str = "CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR";
/// The flags `relay_token::sandbox` puts first (and probes with).
const FLAGS: &[&str] = relay_token::sandbox::NAMESPACE_FLAGS;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let endurance = args.iter().position(|a| a == "--endurance");
    let n: usize = args
        .first()
        .filter(|a| !a.starts_with("--"))
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let agent = fake_agent();
    let mut fx = World::agent(&agent);
    // A network of its own without the proxy: the `bwrap profile` series replays the host's
    // bwrap argv, which with an allow-list binds a proxy socket that lives only as long as its
    // session. The proxy's own cost is `bench-network`'s.
    fx.set_network(serde_json::json!("none"));
    if let Some(h) = std::env::var_os("RELAY_HOST") {
        fx.host = h.into();
    }
    println!("relay-host: {}", fx.host.display());
    println!("fake-agent: {}", agent.display());

    let series = Series::new(&fx, &agent);
    series.check_tokens(&fx);
    latency(&series, &fx, n);
    memory(&fx);
    if let Some(i) = endurance {
        let seq = args.get(i + 1).and_then(|s| s.parse().ok()).unwrap_or(2000);
        let conc = args.get(i + 2).and_then(|s| s.parse().ok()).unwrap_or(32);
        endurance_sequential(&agent, seq, &series, &fx);
        endurance_concurrent(&agent, conc);
    }
}

/// The command lines of every series.
struct Series {
    agent: PathBuf,
    req_unsandboxed: PathBuf,
    req_sandboxed: PathBuf,
    /// relay's bwrap argv for the sandboxed launch, ending with the agent.
    profile: capture::Captured,
    /// What that argv names by number: each bind descriptor (`--bind-fd N DEST`, its source
    /// reopened `O_PATH`) and the start report (`--json-status-fd N`, here `/dev/null`).
    profile_fds: Vec<(std::os::fd::OwnedFd, i32)>,
    /// `RELAY_HOST_B`: a second build of `relay-host` timed beside the first (series 8 and 9).
    alt: Option<PathBuf>,
}

impl Series {
    fn new(fx: &World, agent: &Path) -> Series {
        // Capture relay's bwrap command line from a running session. The replay needs every
        // bind source to outlive that session: its folder (kept) and the write-deny entries
        // (made here first, so the host makes no placeholder that goes with the session).
        let project = fx.project.canonicalize().expect("the project folder");
        use relay_token::sandbox::write_deny::{plan, Role};
        for l in plan(&[(project, Role::Project)], true, &[]) {
            let (path, dir) = (l.path, l.dir || l.folder_placeholder);
            if !l.hold {
                continue;
            }
            if dir {
                std::fs::create_dir_all(&path).expect("a write-deny folder");
            } else {
                std::fs::create_dir_all(path.parent().expect("a parent")).expect("its folder");
                std::fs::File::create(&path).expect("a write-deny file");
            }
        }
        let req = fx.request("capture", true, "capture", &[]);
        let mut kept: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&req).unwrap()).unwrap();
        kept["keep"] = serde_json::json!(true);
        std::fs::write(&req, kept.to_string()).unwrap();
        let capture_dir = fx.root.join("capture");
        std::fs::create_dir_all(&capture_dir).unwrap();
        let settings_file = fx.config.join("settings.json");
        let settings = std::fs::read(&settings_file).unwrap();
        let mut with_wrapper: serde_json::Value = serde_json::from_slice(&settings).unwrap();
        with_wrapper["bwrap"] = capture::wrapper(&capture_dir, Path::new(BWRAP))
            .display()
            .to_string()
            .into();
        std::fs::write(&settings_file, with_wrapper.to_string()).unwrap();
        let st = fx.launch_cmd(&req).status().expect("spawn relay-host");
        std::fs::write(&settings_file, settings).unwrap();
        assert!(st.success(), "the capture launch: {st}");
        let profile = capture::read(&capture_dir, Path::new(BWRAP));
        assert!(
            profile.command.iter().any(|a| Path::new(a) == agent),
            "the agent in bwrap's argv"
        );
        let session_tmp = fx.state.join("sessions/capture/tmp");
        let profile_fds = profile.numbered_fds(&session_tmp);
        fx.clear_record();
        Series {
            agent: agent.to_path_buf(),
            req_unsandboxed: fx.request("unsandboxed", false, "bench-unsandboxed", &[]),
            req_sandboxed: fx.request("sandboxed", true, "bench-sandboxed", &[]),
            profile,
            profile_fds,
            alt: std::env::var_os("RELAY_HOST_B").map(PathBuf::from),
        }
    }

    /// Runs series `i` once; `record` is the agent's record file (None: `/dev/null`).
    fn run(&self, i: usize, fx: &World, record: Option<&Path>) -> Duration {
        let rec: OsString = record.map(|p| p.into()).unwrap_or_default();
        let token = std::fs::File::open(&fx.token_file).unwrap();
        let with_fd5 = |cmd: &mut Command| -> Child {
            cmd.env("FAKE_AGENT_RECORD", &rec)
                .env(TOKEN_VAR, "5")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            spawn_with_fds(cmd, &[(token.as_fd(), 5)]).unwrap()
        };
        let t = Instant::now();
        let mut child = match i {
            0 => with_fd5(&mut Command::new(&self.agent)),
            1 => {
                let mut c = Command::new("/bin/sh");
                c.arg("-c")
                    .arg(format!(
                        "exec 5<\"$TOKEN_FILE\"; {TOKEN_VAR}=5 exec \"$AGENT\""
                    ))
                    .env("TOKEN_FILE", &fx.token_file)
                    .env("AGENT", &self.agent)
                    .env("FAKE_AGENT_RECORD", &rec)
                    .env_remove(TOKEN_VAR)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
                c.spawn().unwrap()
            }
            2 | 3 | 8 | 9 => {
                let req = if matches!(i, 2 | 8) {
                    &self.req_unsandboxed
                } else {
                    &self.req_sandboxed
                };
                let mut c = fx.launch_cmd(req);
                if i >= 8 {
                    c = Command::new(self.alt.as_ref().expect("RELAY_HOST_B"));
                    c.args(fx.launch_cmd(req).get_args())
                        .env("HOME", &fx.home)
                        .env_remove(TOKEN_VAR)
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null());
                }
                c.env("FAKE_AGENT_RECORD", &rec).spawn().unwrap()
            }
            4 => {
                let mut c = Command::new(BWRAP);
                c.args(["--ro-bind", "/", "/"]);
                if record.is_some() {
                    // Only for the token check: the record file must be writable.
                    c.arg("--bind").arg(&fx.project).arg(&fx.project);
                }
                with_fd5(c.arg(&self.agent))
            }
            5 => self.spawn_profile(&rec, &token),
            6 => {
                let mut c = Command::new(BWRAP);
                c.args(FLAGS)
                    .args(["--ro-bind", "/", "/", "--", "true"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
                c.spawn().unwrap()
            }
            7 => with_fd5(
                Command::new(relay_tests::relay_shim())
                    .args(["--pass-token", "--"])
                    .arg(&self.agent),
            ),
            _ => unreachable!("series {i}"),
        };
        let st = child.wait().unwrap();
        let d = t.elapsed();
        assert!(st.success(), "series {}: {st}", NAMES[i]);
        d
    }

    /// The `bwrap profile` series: relay's argv, the token file at fd 5 and each descriptor the
    /// argv names at its number.
    fn spawn_profile(&self, rec: &OsString, token: &std::fs::File) -> Child {
        let five: OsString = "5".into();
        let env = [
            ("FAKE_AGENT_RECORD", rec.as_os_str()),
            (TOKEN_VAR, five.as_os_str()),
        ];
        self.profile
            .spawn(&self.profile_fds, &[(token.as_fd(), 5)], &env)
    }

    /// One run of each series with the record on: who got which token.
    fn check_tokens(&self, fx: &World) {
        let want = sha256_hex(std::fs::read(&fx.token_file).unwrap().as_slice());
        println!("\ntoken check (one run each, record on):");
        for (i, name) in self.names().iter().enumerate() {
            if i == 6 {
                continue;
            }
            fx.clear_record();
            self.run(i, fx, Some(&fx.record));
            let recs = read_records(&fx.record);
            let got = recs
                .first()
                .and_then(|r| r["token_sha256"].as_str().map(str::to_owned));
            let verdict = match &got {
                Some(h) if *h == want => "token received (hash matches)",
                Some(_) => "WRONG TOKEN",
                None => "no token (no fd 5 variable)",
            };
            println!("  {name:<18} {verdict}");
            if !matches!(i, 2 | 8) {
                assert_eq!(got.as_deref(), Some(want.as_str()), "{name}");
            }
        }
        fx.clear_record();
    }
}

const NAMES: [&str; 10] = [
    "direct",
    "sh launcher",
    "host unsandboxed",
    "host sandboxed",
    "bwrap bare",
    "bwrap profile",
    "bwrap probe",
    "shim + agent",
    "B: host unsandbxd",
    "B: host sandboxed",
];

impl Series {
    /// The series of this run: the last two only with `RELAY_HOST_B`.
    fn names(&self) -> &'static [&'static str] {
        if self.alt.is_some() {
            &NAMES
        } else {
            &NAMES[..8]
        }
    }
}

/// (min, median, p99, max) in milliseconds.
fn stats(v: &mut [Duration]) -> [f64; 4] {
    v.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let p99 = ((v.len() * 99).div_ceil(100)).clamp(1, v.len()) - 1;
    [ms(v[0]), ms(v[v.len() / 2]), ms(v[p99]), ms(v[v.len() - 1])]
}

fn latency(series: &Series, fx: &World, n: usize) {
    let names = series.names();
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); names.len()];
    // Warm-up: one of each, untimed.
    for i in 0..names.len() {
        series.run(i, fx, None);
    }
    for round in 0..n {
        // Rotate the order each round so no series always follows the same one.
        for k in 0..names.len() {
            let i = (k + round) % names.len();
            times[i].push(series.run(i, fx, None));
        }
    }
    let s: Vec<[f64; 4]> = times.iter_mut().map(|v| stats(v)).collect();
    println!("\nA/B launch latency, N={n} interleaved rounds (ms, spawn to exit)");
    println!(
        "{:<18} {:>8} {:>8} {:>8} {:>8}   {:>8} {:>8}",
        "series", "min", "median", "p99", "max", "/sh", "/bwrap"
    );
    for (i, name) in names.iter().enumerate() {
        println!(
            "{name:<18} {:>8.3} {:>8.3} {:>8.3} {:>8.3}   {:>7.2}x {:>7.2}x",
            s[i][0],
            s[i][1],
            s[i][2],
            s[i][3],
            s[i][1] / s[1][1],
            s[i][1] / s[4][1]
        );
    }
    println!(
        "A  host unsandboxed / sh launcher: {:.2}x (goal <= 1.2x)",
        s[2][1] / s[1][1]
    );
    println!(
        "   host unsandboxed = direct {:.3} + shim hop {:.3} + host {:.3} ms (medians)",
        s[0][1],
        s[7][1] - s[0][1],
        s[2][1] - s[7][1]
    );
    // (label, numerator series, denominator series): medians' ratios.
    let ratios: [(&str, usize, usize); 4] = [
        ("A' host sandboxed / sh launcher:   ", 3, 1),
        ("B  host sandboxed / bwrap profile: ", 3, 5),
        ("B  host sandboxed / bwrap bare:    ", 3, 4),
        ("   bwrap profile / bwrap bare:     ", 5, 4),
    ];
    let goals = ["", " (goal <= 1.25x)", " (goal <= 2.0x)", ""];
    for ((label, num, den), goal) in ratios.iter().zip(goals) {
        println!("{label}{:.2}x{goal}", s[*num][1] / s[*den][1]);
    }
    println!(
        "   host sandboxed - bwrap profile: {:.3} ms (host + shim)",
        s[3][1] - s[5][1]
    );
    if let Some(b) = &series.alt {
        println!(
            "   B build ({}) / A build, medians: unsandboxed {:.2}x, sandboxed {:.2}x",
            b.display(),
            s[8][1] / s[2][1],
            s[9][1] / s[3][1]
        );
    }
}

/// What the harness holds after a series, against what it held before (`fds0`, `kids0`).
fn harness_after(me: i32, fds0: usize, kids0: usize, left: &[i32]) -> String {
    format!(
        "harness fds {} -> {}, children {} -> {}, zombies {:?}, processes left {:?}",
        fds0,
        open_fds(me).unwrap(),
        kids0,
        children_of(me).len(),
        zombies_of(me),
        left
    )
}

/// The stand-in agent recorded one run, and it read `token` (by hash).
fn assert_one_record_of(record: &std::path::Path, token: &str, what: &str) {
    let recs = read_records(record);
    assert_eq!(recs.len(), 1, "{what}: one record");
    assert_eq!(
        recs[0]["token_sha256"],
        sha256_hex(token.as_bytes()),
        "{what}: its own token"
    );
}

/// `(VmRSS, RssAnon, RssFile, Private_Clean + Private_Dirty, Pss)` in KiB.
fn mem_of(pid: i32) -> [u64; 5] {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let field = |text: &str, key: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    [
        field(&status, "VmRSS:"),
        field(&status, "RssAnon:"),
        field(&status, "RssFile:"),
        field(&rollup, "Private_Clean:") + field(&rollup, "Private_Dirty:"),
        field(&rollup, "Pss:"),
    ]
}

/// `BENCH_SMAPS=1`: where a process's private memory lies, by mapping (KiB), largest first.
fn print_private_by_mapping(name: &str, pid: i32) {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut by: Vec<(String, u64)> = Vec::new();
    let mut current = String::new();
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            current = words.nth(4).unwrap_or("[anon]").to_string();
        } else if first == "Private_Clean:" || first == "Private_Dirty:" {
            let kib: u64 = words.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            match by.iter_mut().find(|(n, _)| *n == current) {
                Some((_, k)) => *k += kib,
                None => by.push((current.clone(), kib)),
            }
        }
    }
    by.sort_by_key(|(_, k)| std::cmp::Reverse(*k));
    println!("  {name} private by mapping (KiB):");
    for (n, k) in by.iter().take(8) {
        println!("    {k:>6}  {n}");
    }
}

fn memory(fx: &World) {
    // The agent's own options go in the template's command: a token launch's extra_args take
    // Claude Code's options only.
    fx.set_agent_args(&["--sleep", "30"]);
    let req = fx.request("memory", true, "memory", &[]);
    let mut host_rows = Vec::new();
    let mut shim_rows = Vec::new();
    for _ in 0..5 {
        fx.clear_record();
        let mut host = fx.launch_cmd(&req).spawn().unwrap();
        wait_for_records(&fx.record, 1, Duration::from_secs(30));
        let shim = wait_child(host.id() as i32, Duration::from_secs(10)).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        host_rows.push(mem_of(host.id() as i32));
        if std::env::var_os("BENCH_SMAPS").is_some() {
            print_private_by_mapping("relay-host", host.id() as i32);
            print_private_by_mapping("relay-shim", shim);
        }
        shim_rows.push(mem_of(shim));
        // SAFETY: kill with a pid this process spawned and has not reaped.
        unsafe { libc::kill(host.id() as i32, libc::SIGTERM) };
        host.wait().unwrap();
    }
    println!("\nC  memory while a sandboxed session sleeps, 5 sessions (KiB: min / median / max)");
    println!(
        "{:<11} {:>20} {:>20} {:>20} {:>20} {:>20}",
        "process", "VmRSS", "RssAnon", "RssFile", "Private", "Pss"
    );
    for (name, rows) in [("relay-host", &host_rows), ("relay-shim", &shim_rows)] {
        print!("{name:<11}");
        for k in 0..5 {
            let mut col: Vec<u64> = rows.iter().map(|r| r[k]).collect();
            col.sort_unstable();
            print!(" {:>20}", format!("{}/{}/{}", col[0], col[2], col[4]));
        }
        println!();
    }
    println!("goals (D): Private relay-host <= 1280 KiB, relay-shim <= 614 KiB");
    fx.clear_record();
}

fn endurance_sequential(agent: &Path, count: usize, series: &Series, bare: &World) {
    let fx = World::agent(agent);
    let req = fx.request("endurance", true, "endurance", &[]);
    let me = std::process::id() as i32;
    let (fds0, kids0) = (open_fds(me).unwrap(), children_of(me).len());
    let mut times = Vec::with_capacity(count);
    // The same-run reference: a bare bwrap launch after each, so the machine's own tail shows.
    let mut reference = Vec::with_capacity(count);
    let start = Instant::now();
    for i in 0..count {
        let token = fx.fresh_token();
        fx.clear_record();
        let t = Instant::now();
        let st = fx.launch_cmd(&req).status().unwrap();
        times.push(t.elapsed());
        assert!(st.success(), "launch {i}: {st}");
        assert_one_record_of(&fx.record, &token, &format!("launch {i}"));
        reference.push(series.run(4, bare, None));
    }
    let total = start.elapsed();
    let left = settle(&fx.record);
    let tenth = (count / 10).max(1);
    let first = stats(&mut times[..tenth].to_vec())[1];
    let last = stats(&mut times[count - tenth..].to_vec())[1];
    let r_first = stats(&mut reference[..tenth].to_vec())[1];
    let r_last = stats(&mut reference[count - tenth..].to_vec())[1];
    let s = stats(&mut times);
    let r = stats(&mut reference);
    println!("\nD  endurance: {count} sequential sandboxed launches in {total:.1?} (with the reference), each token rewritten and checked by hash: all ok");
    println!(
        "   ms: min {:.3}  median {:.3}  p99 {:.3}  max {:.3};  p99/median {:.2}x (goal < 3x)",
        s[0],
        s[1],
        s[2],
        s[3],
        s[2] / s[1]
    );
    println!(
        "   reference bwrap bare, ms: min {:.3}  median {:.3}  p99 {:.3}  max {:.3};  p99/median {:.2}x",
        r[0],
        r[1],
        r[2],
        r[3],
        r[2] / r[1]
    );
    println!(
        "   median of the first {tenth}: {first:.3} ms, of the last {tenth}: {last:.3} ms (drift {:.2}x; reference {r_first:.3} -> {r_last:.3} ms, {:.2}x)",
        last / first,
        r_last / r_first
    );
    println!("   {}", harness_after(me, fds0, kids0, &left));
}

fn settle(record: &Path) -> Vec<i32> {
    let needle = record.to_str().unwrap();
    for _ in 0..100 {
        if processes_with_env(needle).is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    processes_with_env(needle)
}

fn endurance_concurrent(agent: &Path, count: usize) {
    let me = std::process::id() as i32;
    let (fds0, kids0) = (open_fds(me).unwrap(), children_of(me).len());
    let fixtures: Vec<World> = (0..count).map(|_| World::agent(agent)).collect();
    let tokens: Vec<String> = fixtures.iter().map(World::fresh_token).collect();
    let start = Instant::now();
    let mut hosts: Vec<(Child, Instant)> = fixtures
        .iter()
        .enumerate()
        .map(|(i, fx)| {
            fx.set_agent_args(&["--sleep", "2"]);
            let req = fx.request("conc", true, &format!("conc-{i}"), &[]);
            (fx.launch_cmd(&req).spawn().unwrap(), Instant::now())
        })
        .collect();
    // Time to the record (the agent started and read its token), and each host's descriptors
    // while its session runs.
    let mut to_record = Vec::new();
    let mut host_fds = Vec::new();
    for (fx, (h, t)) in fixtures.iter().zip(&hosts) {
        wait_for_records(&fx.record, 1, Duration::from_secs(60));
        to_record.push(t.elapsed());
        host_fds.push(open_fds(h.id() as i32).unwrap_or(0));
    }
    for (i, (h, _)) in hosts.iter_mut().enumerate() {
        let st = h.wait().unwrap();
        assert!(st.success(), "concurrent launch {i}: {st}");
    }
    let total = start.elapsed();
    for (i, (fx, token)) in fixtures.iter().zip(&tokens).enumerate() {
        assert_one_record_of(&fx.record, token, &format!("concurrent launch {i}"));
    }
    let left: Vec<i32> = fixtures.iter().flat_map(|f| settle(&f.record)).collect();
    let s = stats(&mut to_record);
    host_fds.sort_unstable();
    println!("\nD  endurance: {count} concurrent sandboxed launches (own installation and token each, agent sleeps 2 s) in {total:.1?}: every token checked by hash, all ok");
    println!(
        "   spawn to record, ms: min {:.1}  median {:.1}  p99 {:.1}  max {:.1}",
        s[0], s[1], s[2], s[3]
    );
    println!(
        "   relay-host fds mid-session: min {} max {};  {}",
        host_fds[0],
        host_fds[host_fds.len() - 1],
        harness_after(me, fds0, kids0, &left)
    );
}
