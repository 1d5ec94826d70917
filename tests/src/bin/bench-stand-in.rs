//! `bench-stand-in [N] [M]`: what stand-in mode costs a real Claude Code turn, and relay-host's
//! memory with the TLS path (issue 34).
//!
//! Two installations of the built-in `claude-code` template as shipped (Claude Code from npm,
//! relay-host as root): pipe mode (the default; the plain-HTTP Messages API fixture) and
//! stand-in mode (`token_mode: "stand_in"`; the fixture over TLS with a test CA named by
//! `upstream_ca_file`, so relay-host's proxy terminates the session's TLS, swaps the stand-in
//! and speaks TLS upstream). The scripted turn: Bash (rewrites `notes.txt`, `git commit`), Read,
//! Edit, Write, a Bash step that holds only when told, the final text: six API requests.
//!
//! - Time: N rounds (default 10), each one turn per mode, the order alternating by round, timed
//!   from spawn to exit (`relay-host launch` of a `-p` turn). Printed: p25, median, p75 per mode
//!   and the ratio of the medians.
//! - Memory: M turns per mode (default 3) whose fifth step holds; while it holds (after four
//!   API requests through the proxy) `relay-host`'s `/proc/PID/smaps_rollup` is read: Pss and
//!   Private_Dirty, and the same summed over the host-side processes of the session (relay-host
//!   and its descendants outside the sandbox's pid namespace). Printed: the median per mode.
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

    /// One mode's installation.
    struct Mode {
        name: &'static str,
        mode: Option<&'static str>,
        s: Setup,
        _ca: Option<TestCa>,
    }

    impl Mode {
        fn new(name: &'static str, mode: Option<&'static str>) -> Mode {
            let mut s = Setup::with(Install::Npm, None, |_, _| Vec::new());
            let ca = mode.map(|_| TestCa::new());
            let ca_file = s.root.join("upstream-ca.pem");
            s.api = match &ca {
                Some(ca) => {
                    ca.write_pem(&ca_file);
                    MessagesApi::start_tls(script(&s.project), ca)
                }
                None => MessagesApi::start(script(&s.project)),
            };
            let ca_path = ca.as_ref().map(|_| ca_file.as_path());
            stand_in::write_settings(&s, mode, ca_path, json!({}));
            Mode {
                name,
                mode,
                s,
                _ca: ca,
            }
        }

        /// One turn; its time. Panics unless it completed.
        fn turn(&self) -> Duration {
            let t = stand_in::turn(&self.s, self.mode, &print_args("Do the scripted work."));
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
            let mut run =
                stand_in::launch(&self.s, self.mode, &print_args("Do the scripted work."));
            run.wait_for(&p.join(".held"), Duration::from_secs(120));
            let host = run.pid();
            let inside = relay_tests::scan::sandbox_pids(host);
            let outside: Vec<u32> = relay_tests::fixture::descendants(host as i32)
                .into_iter()
                .map(|x| x as u32)
                .filter(|x| !inside.contains(x))
                .collect();
            let own = rollup(host);
            let all = outside
                .iter()
                .map(|&x| rollup(x))
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

    pub fn main() {
        let arg = |i: usize, d: usize| {
            std::env::args()
                .nth(i)
                .and_then(|s| s.parse().ok())
                .unwrap_or(d)
        };
        let (n, m) = (arg(1, 10), arg(2, 3));
        let modes = [
            Mode::new("pipe", None),
            Mode::new("stand-in", Some(STAND_IN)),
        ];
        for md in &modes {
            md.turn();
        }
        let mut times: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
        for round in 0..n {
            for k in 0..2 {
                let i = (k + round) % 2;
                times[i].push(modes[i].turn());
            }
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let q = |v: &[Duration], f: f64| {
            let mut v = v.to_vec();
            v.sort_unstable();
            ms(v[((v.len() - 1) as f64 * f).round() as usize])
        };
        println!("\na real Claude Code turn (6 API requests), N={n} interleaved rounds (ms, spawn to exit)");
        for (i, md) in modes.iter().enumerate() {
            let v = &times[i];
            println!(
                "{:<9} p25 {:>8.1}  median {:>8.1}  p75 {:>8.1}",
                md.name,
                q(v, 0.25),
                q(v, 0.5),
                q(v, 0.75)
            );
        }
        let (p50, s50) = (q(&times[0], 0.5), q(&times[1], 0.5));
        println!(
            "stand-in / pipe (medians): {:.3} ({:+.1} ms)",
            s50 / p50,
            s50 - p50
        );

        println!("\nmemory while a turn holds after 4 API requests, M={m} per mode (KiB, median)");
        println!(
            "{:<9} {:>14} {:>22} {:>16} {:>24}",
            "mode",
            "relay-host Pss",
            "relay-host Priv_Dirty",
            "host side Pss",
            "host side Priv_Dirty"
        );
        for md in &modes {
            let mut rows: Vec<[u64; 4]> = (0..m).map(|_| md.memory()).collect();
            let med = |k: usize, rows: &mut Vec<[u64; 4]>| {
                rows.sort_unstable_by_key(|r| r[k]);
                rows[rows.len() / 2][k]
            };
            let v: Vec<u64> = (0..4).map(|k| med(k, &mut rows)).collect();
            println!(
                "{:<9} {:>14} {:>22} {:>16} {:>24}",
                md.name, v[0], v[1], v[2], v[3]
            );
        }
    }
}
