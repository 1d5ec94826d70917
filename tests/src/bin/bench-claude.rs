//! `bench-claude [N]`: what a `relay-host` launch adds to a real Claude Code start (goal C).
//!
//! The pinned CLI (`RELAY_TEST_CLAUDE`, as `scripts/test` installs it) runs `auth status --json`,
//! which starts the whole CLI, reads the token from fd 5 and answers offline. Series, interleaved
//! round by round (N rounds, default 40), each timed from spawn to exit:
//! - `claude direct`: the CLI with the token file open at fd 5 and
//!   `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5` (the shell launcher's way, no sandbox);
//! - `claude via relay`: `relay-host launch` of a `terminal` request for a `claude-code`
//!   template running the same CLI, sandboxed (host → shim → bwrap → CLI), token on fd 5.
//!
//! Before timing, one run of each must report `"loggedIn": true` with `authMethod`
//! `oauth_token` (the token itself is never printed). The overhead is the difference of the
//! medians over the direct median; the noise is the spread of the direct series itself
//! (p25 to p75 over its median).
//!
//! Use the release build, as root: `cargo build --release --workspace --bins &&
//! RELAY_TEST_CLAUDE=.tools/claude-code/node_modules/.bin/claude target/release/bench-claude`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use relay_tests::fixture::Layout;
use relay_tests::world::{Token, World};
use relay_tests::{relay_host, spawn_with_fds};
use serde_json::{json, Value};

const TOKEN_VAR: &str = "CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR";
const STATUS: [&str; 3] = ["auth", "status", "--json"];

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let claude = PathBuf::from(
        std::env::var_os("RELAY_TEST_CLAUDE").expect("RELAY_TEST_CLAUDE names the Claude Code CLI"),
    );
    let fx = Fx::new(&claude);
    println!("claude: {}", claude.display());
    for (name, run) in [("claude direct", 0), ("claude via relay", 1)] {
        let out = fx.run(run, true);
        let v: Value = serde_json::from_slice(&out).unwrap_or(Value::Null);
        assert_eq!(v["loggedIn"], json!(true), "{name}: not logged in");
        assert_eq!(
            v["authMethod"],
            json!("oauth_token"),
            "{name}: not by the token"
        );
        println!("  {name:<17} logged in by the token on fd 5");
    }
    let mut times: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    fx.run(0, false);
    fx.run(1, false);
    for round in 0..n {
        for k in 0..2 {
            let i = (k + round) % 2;
            let t = Instant::now();
            fx.run(i, false);
            times[i].push(t.elapsed());
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let q = |v: &mut Vec<Duration>, f: f64| {
        v.sort_unstable();
        ms(v[((v.len() - 1) as f64 * f).round() as usize])
    };
    let (d50, r50) = (q(&mut times[0], 0.5), q(&mut times[1], 0.5));
    let (d25, d75) = (q(&mut times[0], 0.25), q(&mut times[0], 0.75));
    println!("\nC  a real Claude Code start, N={n} interleaved rounds (ms, spawn to exit)");
    for (name, i) in [("claude direct", 0), ("claude via relay", 1)] {
        let v = &mut times[i];
        println!(
            "{name:<18} p25 {:>8.3}  median {:>8.3}  p75 {:>8.3}",
            q(v, 0.25),
            q(v, 0.5),
            q(v, 0.75)
        );
    }
    println!(
        "C  overhead: {:.3} ms = {:.2}% of the direct start (goal <= 1.5%); noise of the direct \
         series (p75 - p25) / median: {:.1}%",
        r50 - d50,
        (r50 - d50) / d50 * 100.0,
        (d75 - d25) / d50 * 100.0
    );
}

/// One installation: a [`World`] ([`Layout::claude`], a Claude-shaped token) whose
/// `claude-code` template runs the CLI, the request of `auth status`, and a Claude config folder
/// of its own for the direct series.
struct Fx {
    w: World,
    claude: PathBuf,
    direct_config: PathBuf,
    request: PathBuf,
}

impl Fx {
    fn new(claude: &Path) -> Fx {
        let w = World::builder()
            .layout(Layout::claude("relay-bench-claude."))
            .token(Token::Claude)
            .build();
        let direct_config = w.root.join("direct-claude-config");
        std::fs::create_dir_all(&direct_config).unwrap();
        let real = claude.canonicalize().expect("the CLI's real path");
        let package = real.parent().and_then(Path::parent).expect("its package");
        w.settings(json!({
            "claude_token_file": "~/.config/claude-ltt/token",
            "templates": [{
                "id": "claude-code",
                "command": [claude],
                "env": {"CLAUDE_CONFIG_DIR": "{claude_config}"},
                "sandbox": {"read": [package], "read_write": ["{project}", "{claude_config}"]},
            }],
        }));
        let request = w.request_file(&w.terminal_req("claude-code", &STATUS));
        Fx {
            w,
            claude: claude.to_path_buf(),
            direct_config,
            request,
        }
    }

    /// Runs series `i` once; returns its stdout when `keep` (else it goes to `/dev/null`).
    fn run(&self, i: usize, keep: bool) -> Vec<u8> {
        let mut cmd = match i {
            0 => {
                let mut c = Command::new(&self.claude);
                c.args(STATUS)
                    .env("CLAUDE_CONFIG_DIR", &self.direct_config)
                    .env(TOKEN_VAR, "5");
                c
            }
            _ => {
                let mut c = Command::new(relay_host());
                c.arg("--config-dir")
                    .arg(&self.w.config)
                    .arg("--state-dir")
                    .arg(&self.w.state)
                    .arg("launch")
                    .arg(&self.request)
                    .env_remove(TOKEN_VAR);
                c
            }
        };
        cmd.env("HOME", &self.w.home)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .stdout(if keep { Stdio::piped() } else { Stdio::null() });
        let token = std::fs::File::open(&self.w.token_file).unwrap();
        let child = if i == 0 {
            use std::os::fd::AsFd;
            spawn_with_fds(&mut cmd, &[(token.as_fd(), 5)]).unwrap()
        } else {
            cmd.spawn().unwrap()
        };
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "series {i}: {}", out.status);
        out.stdout
    }
}
