//! `bench-network [N]`: what a session's network costs, side by side in one run, on the fake
//! agent (it reads fd 5, records to `/dev/null` and exits).
//!
//! Three installations, the same `claude-code` template (fake agent, read-write `{project}`) but
//! for its `network`, each launched with `relay-host launch` of a token session, interleaved
//! round by round (N rounds, default 200), timed from spawn to exit:
//! - `host`: `"network": "host"` (with `"token_network": "host"`): today's shared network;
//! - `none`: `"network": "none"`: a namespace of its own (bwrap `--unshare-net`);
//! - `allow-list`: `{"allow": ["api.anthropic.com"]}`: the namespace, the host's proxy on its
//!   Unix socket (started and ended with the session) and the forwarder inside;
//! - `host + GET`, `allow-list + GET`: the session is `curl` fetching one small answer from a
//!   listener on the host's `127.0.0.1` (listed): directly, and through forwarder and proxy.
//!
//! Use the release build: `cargo build --release --workspace --bins &&
//! target/release/bench-network`. Runs as root (bwrap).

use std::process::Stdio;
use std::time::{Duration, Instant};

use relay_tests::fake_agent;
use relay_tests::listener::{Listener, HELLO};
use relay_tests::world::World;
use serde_json::{json, Value};

const NAMES: [&str; 5] = [
    "host",
    "none",
    "allow-list",
    "host + GET",
    "allow-list + GET",
];

fn install(network: Value, command: Value) -> World {
    let fx = World::agent(&fake_agent());
    let settings = json!({
        "claude_token_file": "~/.config/acme-ltt/token",
        "token_network": "host",
        "templates": [{
            "id": "claude-code",
            "command": command,
            "sandbox": {"read_write": ["{project}"]},
            "network": network,
        }],
    });
    std::fs::write(fx.config.join("settings.json"), settings.to_string()).unwrap();
    fx
}

/// One launch, spawn to exit; panics unless it exits 0.
fn run(fx: &World, req: &std::path::Path) -> Duration {
    let mut cmd = fx.launch_cmd(req);
    cmd.env("FAKE_AGENT_RECORD", "/dev/null")
        .stderr(Stdio::inherit());
    let t = Instant::now();
    let status = cmd.status().expect("spawn relay-host");
    let d = t.elapsed();
    assert!(status.success(), "launch failed: {status}");
    d
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let listener = Listener::start(HELLO);
    let url = format!("http://127.0.0.1:{}/", listener.port);
    let agent = json!([fake_agent()]);
    let curl = json!(["/usr/bin/curl", "-sf", "-o", "/dev/null", url]);
    let listed = json!({"allow": [format!("127.0.0.1:{}", listener.port)]});
    let fxs = [
        install(json!("host"), agent.clone()),
        install(json!("none"), agent.clone()),
        install(json!({"allow": ["api.anthropic.com"]}), agent),
        install(json!("host"), curl.clone()),
        install(listed, curl),
    ];
    let reqs: Vec<_> = fxs
        .iter()
        .map(|fx| fx.request("bench", true, "bench", &[]))
        .collect();
    for (fx, req) in fxs.iter().zip(&reqs) {
        run(fx, req);
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); NAMES.len()];
    for round in 0..n {
        for k in 0..NAMES.len() {
            let i = (k + round) % NAMES.len();
            times[i].push(run(&fxs[i], &reqs[i]));
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut med = [0.0f64; NAMES.len()];
    println!("session network, N={n} interleaved rounds (ms, spawn to exit)");
    println!(
        "{:<18} {:>8} {:>8} {:>8} {:>8}",
        "series", "min", "median", "p90", "/host"
    );
    for (i, v) in times.iter_mut().enumerate() {
        v.sort_unstable();
        med[i] = ms(v[v.len() / 2]);
        println!(
            "{:<18} {:>8.3} {:>8.3} {:>8.3} {:>7.2}x",
            NAMES[i],
            ms(v[0]),
            med[i],
            ms(v[(v.len() * 9 / 10).min(v.len() - 1)]),
            med[i] / med[if i < 3 { 0 } else { 3 }]
        );
    }
    println!(
        "allow-list / host: {:.2}x (+{:.3} ms); none / host: {:.2}x",
        med[2] / med[0],
        med[2] - med[0],
        med[1] / med[0]
    );
    println!(
        "allow-list + GET / host + GET: {:.2}x (+{:.3} ms); {} requests reached the listener",
        med[4] / med[3],
        med[4] - med[3],
        listener.connections()
    );
}
