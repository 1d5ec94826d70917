//! `bench-stand-in [N] [M]`: what stand-in mode costs a real Claude Code turn, and relay-host's
//! memory with the TLS path (issue 34).
//!
//! Three installations (Claude Code from npm, relay-host as root), each a series:
//! - `pipe`: the built-in `claude-code` template as shipped (pipe mode, the real token on fd 5)
//!   against the plain-HTTP Messages API fixture;
//! - `pipe+TLS`: pipe mode against the fixture over TLS, Claude Code trusting the test CA through
//!   `NODE_EXTRA_CA_CERTS` added to the template's environment (the proxy tunnels the TLS as it
//!   does to api.anthropic.com): what pipe mode costs against a real, TLS, API;
//! - `stand-in`: the template as shipped with `token_mode: "stand_in"`, the fixture over TLS,
//!   the test CA in `upstream_ca_file`: relay-host's proxy terminates the session's TLS, swaps
//!   the stand-in and speaks TLS upstream.
//!
//! The scripted turn: Bash (rewrites `notes.txt`, `git commit`), Read, Edit, Write, a Bash step
//! that holds only when told, the final text (six steps of the main conversation).
//!
//! - Time: N rounds (default 10), each one turn per series, the order rotating by round, timed
//!   from spawn to exit (`relay-host launch` of a `-p` turn). Printed: p25, median, p75 per
//!   series and the ratios of stand-in's median to the others'.
//! - Memory: M turns per series (default 5) whose fifth step holds; while it holds (after four
//!   requests of the main conversation through the proxy) `/proc/PID/smaps_rollup` is read:
//!   relay-host's Pss and Private_Dirty, and the same summed over the host side of the session
//!   (relay-host and its descendants outside the sandbox's pid namespace). Printed: medians.
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
mod linux {
    use std::path::Path;
    use std::time::Duration;

    use relay_tests::agent::{print_args, Setup, FINAL};
    use relay_tests::install::Install;
    use relay_tests::messages_api::{MessagesApi, Step};
    use relay_tests::stand_in::{self, STAND_IN};
    use relay_tests::tls::TestCa;
    use serde_json::json;

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
    struct Series {
        name: &'static str,
        mode: Option<&'static str>,
        /// The template is the shipped one (else `pipe+TLS`: `NODE_EXTRA_CA_CERTS` added).
        shipped: bool,
        s: Setup,
        _ca: Option<TestCa>,
    }

    impl Series {
        /// `tls`: the fixture over TLS; in pipe mode Claude Code then trusts the test CA through
        /// `NODE_EXTRA_CA_CERTS` (its copy in the project), in stand-in mode relay-host through
        /// `upstream_ca_file`.
        fn new(name: &'static str, mode: Option<&'static str>, tls: bool) -> Series {
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
            let shipped = !(tls && mode.is_none());
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
            let ca_path = (tls && mode.is_some()).then_some(ca_file.as_path());
            stand_in::write_settings(&s, mode, ca_path, extra);
            Series {
                name,
                mode,
                shipped,
                s,
                _ca: ca,
            }
        }

        fn launch(&self) -> stand_in::Running {
            let args = print_args("Do the scripted work.");
            match self.shipped {
                true => stand_in::launch(&self.s, self.mode, &args),
                false => stand_in::launch_as_configured(&self.s, &args),
            }
        }

        /// One turn; its time. Panics unless it completed.
        fn turn(&self) -> Duration {
            let t = self.launch().finish();
            assert_eq!(t.code, Some(0), "{}: {}", self.name, t.describe());
            assert_eq!(
                t.result()["result"],
                FINAL,
                "{}: {}",
                self.name,
                t.describe()
            );
            t.took
        }

        /// One held turn: relay-host's `(Pss, Private_Dirty)` and the host side's, in KiB.
        fn memory(&self) -> [u64; 4] {
            let p = &self.s.project;
            for f in [".held", ".go"] {
                let _ = std::fs::remove_file(p.join(f));
            }
            std::fs::write(p.join(".hold"), "").unwrap();
            let mut run = self.launch();
            run.wait_for(&p.join(".held"), Duration::from_secs(120));
            let host = run.pid();
            let inside = relay_tests::scan::sandbox_pids(host);
            let own = rollup(host);
            let all = relay_tests::fixture::descendants(host as i32)
                .into_iter()
                .map(|x| x as u32)
                .filter(|x| !inside.contains(x))
                .map(rollup)
                .fold([0, 0], |a, b| [a[0] + b[0], a[1] + b[1]]);
            std::fs::write(p.join(".go"), "").unwrap();
            let t = run.finish();
            std::fs::remove_file(p.join(".hold")).unwrap();
            assert_eq!(t.code, Some(0), "{}: {}", self.name, t.describe());
            [own[0], own[1], all[0], all[1]]
        }
    }

    /// `(Pss, Private_Dirty)` of `pid` in KiB, from `smaps_rollup`.
    fn rollup(pid: u32) -> [u64; 2] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        [field("Pss:"), field("Private_Dirty:")]
    }

    /// The `f` quantile of `v`, in ms.
    fn quantile(v: &[Duration], f: f64) -> f64 {
        let mut v = v.to_vec();
        v.sort_unstable();
        v[((v.len() - 1) as f64 * f).round() as usize].as_secs_f64() * 1e3
    }

    /// N rounds of one turn per series, the order rotating; prints the times.
    fn time(series: &[Series], n: usize) {
        for s in series {
            s.turn();
        }
        let k = series.len();
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); k];
        for round in 0..n {
            for j in 0..k {
                let i = (j + round) % k;
                times[i].push(series[i].turn());
            }
        }
        println!(
            "\na real Claude Code turn (six scripted steps), N={n} rounds (ms, spawn to exit)"
        );
        for (s, v) in series.iter().zip(&times) {
            println!(
                "{:<9} p25 {:>8.1}  median {:>8.1}  p75 {:>8.1}",
                s.name,
                quantile(v, 0.25),
                quantile(v, 0.5),
                quantile(v, 0.75)
            );
        }
        let last = quantile(&times[k - 1], 0.5);
        for (s, v) in series.iter().zip(&times).take(k - 1) {
            let b = quantile(v, 0.5);
            println!(
                "{} / {} (medians): {:.3} ({:+.1} ms)",
                series[k - 1].name,
                s.name,
                last / b,
                last - b
            );
        }
    }

    /// M held turns per series; prints the medians of the memory figures.
    fn memory(series: &[Series], m: usize) {
        println!("\nmemory while a turn holds after four steps, M={m} per series (KiB, median)");
        println!(
            "{:<9} {:>14} {:>22} {:>14} {:>22}",
            "series",
            "relay-host Pss",
            "relay-host Priv_Dirty",
            "host side Pss",
            "host side Priv_Dirty"
        );
        for s in series {
            let mut rows: Vec<[u64; 4]> = (0..m).map(|_| s.memory()).collect();
            let mut med = |c: usize| {
                rows.sort_unstable_by_key(|r| r[c]);
                rows[rows.len() / 2][c]
            };
            let v: Vec<u64> = (0..4).map(&mut med).collect();
            println!(
                "{:<9} {:>14} {:>22} {:>14} {:>22}",
                s.name, v[0], v[1], v[2], v[3]
            );
        }
    }

    pub fn main() {
        let arg = |i: usize, d: usize| {
            std::env::args()
                .nth(i)
                .and_then(|s| s.parse().ok())
                .unwrap_or(d)
        };
        let series = [
            Series::new("pipe", None, false),
            Series::new("pipe+TLS", None, true),
            Series::new("stand-in", Some(STAND_IN), true),
        ];
        time(&series, arg(1, 10));
        memory(&series, arg(2, 5));
    }
}
