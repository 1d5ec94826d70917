//! `bench-stand-in [N] [M] [K] [C]`: what stand-in mode costs, in one run (issues 34 and 42).
//!
//! Three installations of the built-in `claude-code` template (Claude Code from npm, relay-host
//! as root), each a series:
//! - `pipe`: the template with `token_mode: "pipe"` (the real token on fd 5) against the
//!   plain-HTTP Messages API fixture;
//! - `pipe+TLS`: pipe mode against the fixture over TLS, Claude Code trusting the test CA through
//!   `NODE_EXTRA_CA_CERTS` added to the template's environment (the proxy tunnels the TLS as it
//!   does to api.anthropic.com): what pipe mode costs against a real, TLS, API;
//! - `stand-in`: the template with `token_mode: "stand_in"`, the fixture over TLS, the test CA
//!   in `upstream_ca_file`: `relay-stand-in` terminates the session's TLS, swaps the stand-in
//!   and speaks TLS upstream.
//!
//! The scripted turn: Bash (rewrites `notes.txt`, `git commit`), Read, Edit, Write, a Bash step
//! that holds only when told, the final text (six steps of the main conversation).
//!
//! - Time: N rounds (default 10), each one turn per series, the order rotating by round, timed
//!   from spawn to exit (`relay-host launch` of a `-p` turn). Printed: p25, median, p75 per
//!   series, the ratio of stand-in's median to the others', and the spread of the ratio taken
//!   round by round (the turns of one round ran back to back, under the same load).
//! - Memory: M turns per series (default 5) whose fifth step holds; while it holds (after four
//!   requests of the main conversation through the proxy) `/proc/PID/smaps_rollup` is read:
//!   relay-host's Pss and Private_Dirty, `relay-stand-in`'s Pss and Rss, and the Pss summed
//!   over the host side of the session (relay-host and its descendants outside the sandbox's pid
//!   namespace). Printed: medians.
//! - Kept-alive requests (`keepalive.rs`): K rounds (default 5) of 200 requests on one kept
//!   connection, direct to a TLS fixture and from inside a session through its proxy.
//! - Ten at once (`concurrent.rs`): C rounds (default 2) of ten concurrent held turns per mode,
//!   the Pss of every process of every session summed.
//!
//! Use the release build, as root, with the pinned CLI:
//! `cargo build --release -p relay-host -p relay-shim -p relay-tests --bins &&
//! RELAY_TEST_CLAUDE=$PWD/.tools/claude-code/node_modules/.bin/claude target/release/bench-stand-in`.

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("bench-stand-in: stand-in mode runs on Linux only");
}

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(target_os = "linux")]
mod concurrent;
#[cfg(target_os = "linux")]
mod keepalive;

#[cfg(target_os = "linux")]
mod linux {
    use std::path::Path;
    use std::time::Duration;

    use relay_tests::agent::{print_args, Setup, FINAL};
    use relay_tests::install::Install;
    use relay_tests::messages_api::{MessagesApi, Step};
    use relay_tests::stand_in::{self, STAND_IN};
    use relay_tests::tls::TestCa;
    use serde_json::json;

    /// `token_mode` for pipe mode, said outright (whatever the built-in template's default).
    pub const PIPE: &str = "pipe";

    /// The step that holds while `.hold` exists, until `.go` does (at most 100 s).
    const HOLD: &str = "if [ -e .hold ]; then touch .held; i=0; \
        while [ ! -e .go ] && [ $i -lt 500 ]; do sleep 0.2; i=$((i+1)); done; fi; echo held";

    /// The scripted turn.
    fn script(project: &Path) -> Vec<Step> {
        vec![
            Step::bash(
                "printf 'colour: red\\nsize: small\\n' > notes.txt && date +%s%N > bash-made.txt && \
                 git add -A notes.txt bash-made.txt && git -c user.name=B -c user.email=b@b.invalid \
                 commit -q -m round && git log --oneline | wc -l",
            ),
            Step::tool("Read", json!({"file_path": project.join("notes.txt")})),
            Step::tool(
                "Edit",
                json!({"file_path": project.join("notes.txt"), "old_string": "colour: red",
                       "new_string": "colour: blue"}),
            ),
            Step::tool(
                "Write",
                json!({"file_path": project.join("written.txt"), "content": "written\n"}),
            ),
            Step::bash(HOLD),
            Step::text(FINAL),
        ]
    }

    /// One series' installation.
    pub struct Series {
        pub name: &'static str,
        mode: &'static str,
        /// The template is the shipped one (else `pipe+TLS`: `NODE_EXTRA_CA_CERTS` added).
        shipped: bool,
        s: Setup,
        _ca: Option<TestCa>,
    }

    impl Series {
        /// `tls`: the fixture over TLS; in pipe mode Claude Code then trusts the test CA through
        /// `NODE_EXTRA_CA_CERTS` (its copy in the project), in stand-in mode relay-stand-in
        /// through `upstream_ca_file`.
        pub fn new(name: &'static str, mode: &'static str, tls: bool) -> Series {
            let mut s = Setup::with(Install::Npm, None, |_, _| Vec::new());
            let ca = tls.then(TestCa::new);
            let ca_file = s.root.join("upstream-ca.pem");
            s.api = match &ca {
                Some(ca) => {
                    ca.write_pem(&ca_file);
                    MessagesApi::start_tls(script(&s.project), ca)
                }
                None => MessagesApi::start(script(&s.project)),
            };
            let shipped = !(tls && mode == PIPE);
            let extra = if shipped {
                json!({})
            } else {
                let in_project = s.project.join("test-ca.pem");
                std::fs::copy(&ca_file, &in_project).unwrap();
                let shipped = relay_tests::install::shipped("claude-code");
                let mut env = serde_json::to_value(shipped).unwrap()["env"].clone();
                env["NODE_EXTRA_CA_CERTS"] = json!(in_project);
                json!({"template": {"env": env}})
            };
            let ca_path = (tls && mode == STAND_IN).then_some(ca_file.as_path());
            s.settings(stand_in::settings(
                &s.api.base_url(),
                Some(mode),
                ca_path,
                extra,
            ));
            Series {
                name,
                mode,
                shipped,
                s,
                _ca: ca,
            }
        }

        /// The three series of the bench.
        pub fn all() -> [Series; 3] {
            [
                Series::new("pipe", PIPE, false),
                Series::new("pipe+TLS", PIPE, true),
                Series::new("stand-in", STAND_IN, true),
            ]
        }

        fn launch(&self) -> stand_in::Running {
            let args = print_args("Do the scripted work.");
            match self.shipped {
                true => stand_in::launch(&self.s, Some(self.mode), &args),
                false => stand_in::launch_as_configured(&self.s, &args),
            }
        }

        /// One turn; its time. Panics unless it completed.
        fn turn(&self) -> Duration {
            let t = self.launch().finish();
            assert_eq!(t.code, Some(0), "{}: {}", self.name, t.describe());
            let result = &t.result()["result"];
            assert_eq!(result, FINAL, "{}: {}", self.name, t.describe());
            t.took
        }

        /// A turn that will hold at its fifth step (four requests of the main conversation
        /// done), started.
        pub fn start_held(&self) -> stand_in::Running {
            let p = &self.s.project;
            for f in [".held", ".go"] {
                let _ = std::fs::remove_file(p.join(f));
            }
            std::fs::write(p.join(".hold"), "").unwrap();
            self.launch()
        }

        /// Waits until a [`Series::start_held`] turn holds.
        pub fn wait_held(&self, run: &mut stand_in::Running) {
            run.wait_for(&self.s.project.join(".held"), Duration::from_secs(300));
        }

        /// A turn held at its fifth step.
        fn hold(&self) -> stand_in::Running {
            let mut run = self.start_held();
            self.wait_held(&mut run);
            run
        }

        /// Lets a [`Series::hold`] turn go on to its end; panics unless it completed.
        pub fn release(&self, mut run: stand_in::Running) {
            let p = &self.s.project;
            std::fs::write(p.join(".go"), "").unwrap();
            let t = run.finish();
            std::fs::remove_file(p.join(".hold")).unwrap();
            assert_eq!(t.code, Some(0), "{}: {}", self.name, t.describe());
        }

        /// One held turn: relay-host's Pss and Private_Dirty, relay-stand-in's Pss and Rss (0
        /// in pipe mode), the host side's Pss, in KiB.
        fn memory(&self) -> [u64; 5] {
            let run = self.hold();
            let host = run.pid();
            let inside = relay_tests::scan::sandbox_pids(host);
            let own = rollup(host);
            let mut stand_in = [0; 3];
            let mut all = 0;
            for pid in relay_tests::fixture::descendants(host as i32) {
                let pid = pid as u32;
                if inside.contains(&pid) {
                    continue;
                }
                let m = rollup(pid);
                all += m[0];
                if comm(pid) == "relay-stand-in" {
                    stand_in = m;
                }
            }
            self.release(run);
            [own[0], own[2], stand_in[0], stand_in[1], all]
        }
    }

    pub use relay_tests::scan::comm;

    /// `(Pss, Rss, Private_Dirty)` of `pid` in KiB, from `smaps_rollup` (0 for a process gone).
    pub fn rollup(pid: u32) -> [u64; 3] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        [field("Pss:"), field("Rss:"), field("Private_Dirty:")]
    }

    /// The `f` quantile of `v`.
    pub fn quantile(v: &[f64], f: f64) -> f64 {
        let mut v = v.to_vec();
        v.sort_unstable_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * f).round() as usize]
    }

    /// p25, median, p75 of `v`.
    pub fn spread(v: &[f64]) -> [f64; 3] {
        [0.25, 0.5, 0.75].map(|f| quantile(v, f))
    }

    /// N rounds of one turn per series, the order rotating; prints the times and the ratios.
    fn time(series: &[Series], n: usize) {
        if n == 0 {
            return;
        }
        for s in series {
            s.turn();
        }
        let k = series.len();
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); k];
        for round in 0..n {
            for j in 0..k {
                let i = (j + round) % k;
                times[i].push(series[i].turn().as_secs_f64() * 1e3);
            }
        }
        println!(
            "\na real Claude Code turn (six scripted steps), N={n} rounds (ms, spawn to exit)"
        );
        for (s, v) in series.iter().zip(&times) {
            let [a, b, c] = spread(v);
            println!("{:<9} p25 {a:>8.1}  median {b:>8.1}  p75 {c:>8.1}", s.name);
        }
        let last = &times[k - 1];
        let m = quantile(last, 0.5);
        for (s, v) in series.iter().zip(&times).take(k - 1) {
            let b = quantile(v, 0.5);
            let per_round: Vec<f64> = last.iter().zip(v).map(|(x, y)| x / y).collect();
            let [a, r, c] = spread(&per_round);
            println!(
                "{} / {}: medians {:.3} ({:+.1} ms); round by round p25 {a:.3} median {r:.3} \
                 p75 {c:.3}",
                series[k - 1].name,
                s.name,
                m / b,
                m - b
            );
        }
    }

    /// M held turns per series; prints the medians of the memory figures.
    fn memory(series: &[Series], m: usize) {
        if m == 0 {
            return;
        }
        println!("\nmemory while a turn holds after four steps, M={m} per series (KiB, median)");
        println!(
            "{:<9} {:>14} {:>16} {:>18} {:>18} {:>14}",
            "series",
            "relay-host Pss",
            "relay-host PrivD",
            "relay-stand-in Pss",
            "relay-stand-in Rss",
            "host side Pss"
        );
        for s in series {
            let mut rows: Vec<[u64; 5]> = (0..m).map(|_| s.memory()).collect();
            let mut med = |c: usize| {
                rows.sort_unstable_by_key(|r| r[c]);
                rows[rows.len() / 2][c]
            };
            let v: Vec<u64> = (0..5).map(&mut med).collect();
            println!(
                "{:<9} {:>14} {:>16} {:>18} {:>18} {:>14}",
                s.name, v[0], v[1], v[2], v[3], v[4]
            );
        }
    }

    fn load() -> String {
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default()
    }

    pub fn main() {
        let arg = |i: usize, d: usize| {
            std::env::args()
                .nth(i)
                .and_then(|s| s.parse().ok())
                .unwrap_or(d)
        };
        let series = Series::all();
        println!("load average at the start: {}", load());
        time(&series, arg(1, 10));
        println!("load average: {}", load());
        memory(&series, arg(2, 5));
        println!("load average: {}", load());
        super::keepalive::run(arg(3, 5), 200);
        println!("load average: {}", load());
        super::concurrent::run(arg(4, 2), 10);
        println!("load average at the end: {}", load());
    }
}
