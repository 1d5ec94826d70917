//! The per-request cost of the interception on a kept-alive connection: one curl run makes
//! `n` requests (`GET`, no body, an answer of 2 bytes) on one connection to a keep-alive TLS
//! fixture ([`relay_tests::tls::OkApi`]), timed by curl per request (`time_total` of each
//! transfer that reused the connection). Series, rotating round by round:
//! - `direct`: curl on the host straight to the fixture, with the real token;
//! - `stand-in`: curl inside a stand-in session (the template's command is a shell script that
//!   reads fd 5), through its proxy: the session's forwarder, `relay-stand-in` (TLS with the
//!   session CA's leaf, the stand-in swapped for the real token, TLS upstream);
//! - `pipe`: the same session in pipe mode: the forwarder and the allow-list proxy's tunnel.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::linux::{spread, PIPE};
use relay_tests::stand_in::STAND_IN;
use relay_tests::tls::{OkApi, TestCa};
use relay_tests::world::World;
use serde_json::json;

/// What curl writes per transfer: connections it made for it, its total time (s).
const WRITE_OUT: &str = "%{num_connects} %{time_total}\\n";

/// The installation: the fixture, its token, the API, the curl config and the session's script.
struct Bench {
    fx: World,
    token: String,
    api: OkApi,
    urls: PathBuf,
    script: PathBuf,
}

impl Bench {
    fn new(n: usize) -> Bench {
        let fx = World::agent(&relay_tests::fake_agent());
        let token = fx.fresh_token();
        let ca = TestCa::new();
        let api = OkApi::start(&ca);
        ca.write_pem(&fx.project.join("test-ca.pem"));
        ca.write_pem(&fx.root.join("upstream-ca.pem"));
        let urls = fx.project.join("urls.conf");
        let port = api.port();
        let conf: String = (0..n)
            .map(|i| format!("url = \"https://127.0.0.1:{port}/k/{i}\"\noutput = \"/dev/null\"\n"))
            .collect();
        std::fs::write(&urls, conf).unwrap();
        let p = fx.project.display();
        let text = format!(
            "#!/bin/sh\nt=$(cat <&5)\nca={p}/test-ca.pem\n[ -e /run/relay/ca.pem ] && ca=/run/relay/ca.pem\n\
             curl -sS --http1.1 --cacert \"$ca\" \
             -H \"Authorization: Bearer $t\" -w '{WRITE_OUT}' -K {p}/urls.conf > {p}/times.txt 2> {p}/curl.err\n"
        );
        let script = fx.project.join("keepalive.sh");
        std::fs::write(&script, text).unwrap();
        Bench {
            fx,
            token,
            api,
            urls,
            script,
        }
    }

    /// The template runs the script in `mode`.
    fn settings(&self, mode: &str) {
        let s = json!({
            "claude_token_file": "~/.config/acme-ltt/token",
            "upstream_ca_file": self.fx.root.join("upstream-ca.pem"),
            "templates": [{
                "id": "claude-code",
                "command": ["/bin/sh", self.script],
                "sandbox": {"read_write": ["{project}"]},
                "network": {"allow": []},
                "api_base_url": format!("https://127.0.0.1:{}", self.api.port()),
                "token_mode": mode,
            }],
        });
        self.fx.settings(s);
    }

    /// One session in `mode`: the per-request times (µs) of the transfers that reused the
    /// connection, or why there are none.
    fn session(&self, mode: &str, round: usize) -> Result<Vec<f64>, String> {
        self.settings(mode);
        let times = self.fx.project.join("times.txt");
        let _ = std::fs::remove_file(&times);
        let req = self
            .fx
            .request("ka", true, &format!("ka-{mode}-{round}"), &[]);
        let out = self.fx.launch_cmd(&req).output().unwrap();
        if !out.status.success() {
            let err = std::fs::read_to_string(self.fx.project.join("curl.err"));
            let err = err.unwrap_or_default();
            let first = err.lines().next().unwrap_or_default();
            return Err(format!("{mode}: {}: {first}", out.status));
        }
        reused(&times)
    }

    /// The same curl on the host, straight to the fixture.
    fn direct(&self) -> Result<Vec<f64>, String> {
        let times = self.fx.root.join("direct-times.txt");
        let out = Command::new("curl")
            .args(["-s", "--http1.1", "--cacert"])
            .arg(self.fx.project.join("test-ca.pem"))
            .arg("-H")
            .arg(format!("Authorization: Bearer {}", self.token))
            .args(["-w", &WRITE_OUT.replace("\\n", "\n"), "-K"])
            .arg(&self.urls)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdout(std::fs::File::create(&times).unwrap())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        if !out.success() {
            return Err(format!("direct curl: {out}"));
        }
        reused(&times)
    }
}

/// The times (µs) of the transfers in curl's output at `path` that made no connection.
fn reused(path: &Path) -> Result<Vec<f64>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: Vec<f64> = (text.lines())
        .filter_map(|l| l.split_once(' '))
        .filter(|(c, _)| *c == "0")
        .filter_map(|(_, t)| t.parse::<f64>().ok())
        .map(|t| t * 1e6)
        .collect();
    match v.is_empty() {
        true => Err(format!("no reused transfer in {text:?}")),
        false => Ok(v),
    }
}

/// `rounds` rounds of `n` kept-alive requests per series; prints p25, median, p75 per series
/// and the medians' differences.
pub fn run(rounds: usize, n: usize) {
    if rounds == 0 {
        return;
    }
    let w = Bench::new(n);
    let names = ["direct", "stand-in", "pipe"];
    let mut all: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    // Each round's median per series (NaN: that session failed).
    let mut medians: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut failed: Vec<String> = Vec::new();
    for round in 0..rounds {
        for j in 0..names.len() {
            let i = (j + round) % names.len();
            let got = match i {
                0 => w.direct(),
                1 => w.session(STAND_IN, round),
                _ => w.session(PIPE, round),
            };
            match got {
                Ok(v) => {
                    medians[i].push(spread(&v)[1]);
                    all[i].extend(v);
                }
                Err(e) => {
                    medians[i].push(f64::NAN);
                    failed.push(e);
                }
            }
        }
    }
    let real = relay_tests::sha256_hex(w.token.as_bytes());
    let with_token = (w.api.seen().iter())
        .filter(|r| r.authorization_sha256.as_ref() == Some(&real))
        .count();
    println!(
        "\n{n} requests on one kept-alive connection, {rounds} rounds (µs per request, reused \
         connection only; the fixture saw the real token {with_token} times)"
    );
    let direct = spread(&all[0])[1];
    for (name, v) in names.iter().zip(&all).filter(|(_, v)| !v.is_empty()) {
        let [a, b, c] = spread(v);
        println!(
            "{name:<9} p25 {a:>8.1}  median {b:>8.1}  p75 {c:>8.1}  ({} requests; median - \
             direct {:+.1} µs, {:.2}x)",
            v.len(),
            b - direct,
            b / direct
        );
    }
    for (i, name) in names.iter().enumerate().skip(1) {
        let diff: Vec<f64> = (medians[i].iter().zip(&medians[0]))
            .map(|(x, d)| x - d)
            .filter(|x| !x.is_nan())
            .collect();
        if !diff.is_empty() {
            let [a, b, c] = spread(&diff);
            println!(
                "{name} - direct, round by round (each round's medians): p25 {a:+.1}  median \
                 {b:+.1}  p75 {c:+.1} µs"
            );
        }
    }
    for e in failed {
        println!("failed: {e}");
    }
}
