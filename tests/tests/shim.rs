//! End-to-end tests of the real `relay-shim` binary with the fake agent as its target.
//! Build the binaries first: `cargo build --workspace --bins`.

use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use relay_tests::{
    fake_agent, fake_token, read_records, relay_shim, sha256_hex, spawn_with_fds, wait_for_records,
};
use relay_token::{ClaudeToken, FdMap, TokenPipe};
use serde_json::{json, Value};

const TIMEOUT: Duration = Duration::from_secs(20);

/// A token pipe's read end holding `token` (write end closed).
fn token_pipe(token: &str) -> OwnedFd {
    TokenPipe::new(&ClaudeToken::from_bytes(token.as_bytes()).unwrap())
        .unwrap()
        .into_fd()
}

/// `relay-shim ARGS` with a clean environment for the token variable and the record file set.
fn shim_cmd(record: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(relay_shim());
    cmd.args(args)
        .env("FAKE_AGENT_RECORD", record)
        .env_remove("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR")
        .env_remove("RELAY_SESSION_ID")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn agent() -> String {
    fake_agent().to_str().unwrap().to_owned()
}

/// Reads every status line until EOF (the shim closed it) as JSON.
fn status_lines(r: OwnedFd) -> Vec<Value> {
    let mut text = String::new();
    std::fs::File::from(r).read_to_string(&mut text).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("status {l:?}: {e}")))
        .collect()
}

struct Run {
    code: i32,
    stderr: String,
    status: Vec<Value>,
}

/// Runs the shim with a status pipe at 3 and `extra` descriptors, to completion.
fn run_shim(mut cmd: Command, extra: &[(std::os::fd::BorrowedFd<'_>, i32)]) -> Run {
    let (r, w) = pipe_cloexec().unwrap();
    let mut fds = vec![(w.as_fd(), 3)];
    fds.extend_from_slice(extra);
    let child = spawn_with_fds(&mut cmd, &fds).unwrap();
    drop(fds);
    drop(w);
    let status = status_lines(r);
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().expect("shim killed by a signal"),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        status,
    }
}

fn tmp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("record.jsonl");
    (dir, record)
}

fn devnull() -> std::fs::File {
    std::fs::File::open("/dev/null").unwrap()
}

#[test]
fn pass_token_hands_exact_bytes_and_only_fds_0125() {
    let (_d, record) = tmp();
    let token = fake_token();
    let pipe = token_pipe(&token);
    let (n4, n6, n9) = (devnull(), devnull(), devnull());
    let run = run_shim(
        shim_cmd(&record, &["--pass-token", "--", &agent()]),
        &[
            (n4.as_fd(), 4),
            (pipe.as_fd(), 5),
            (n6.as_fd(), 6),
            (n9.as_fd(), 9),
        ],
    );
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let recs = read_records(&record);
    assert_eq!(recs.len(), 1);
    let rec = &recs[0];
    assert_eq!(rec["token_fd_var"], "5");
    assert_eq!(rec["token_error"], Value::Null);
    assert_eq!(rec["token_sha256"], sha256_hex(token.as_bytes()));
    assert_eq!(rec["token_bytes"], token.len());
    assert_eq!(rec["fds"], json!([0, 1, 2, 5]));
    assert_eq!(
        rec["env"]["CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR"], "5",
        "the variable rides with the descriptor"
    );
    assert!(
        !rec.to_string().contains(&token),
        "the record holds no token"
    );
    assert_eq!(
        run.status,
        vec![
            json!({"event": "no_identity"}),
            json!({"event": "started", "pid": rec["pid"]}),
            json!({"event": "exit", "status": 0}),
        ]
    );
}

#[test]
fn without_pass_token_the_target_gets_no_fd_5() {
    let (_d, record) = tmp();
    let pipe = token_pipe(&fake_token());
    let n4 = devnull();
    let run = run_shim(
        shim_cmd(&record, &["--", &agent()]),
        &[(n4.as_fd(), 4), (pipe.as_fd(), 5)],
    );
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let rec = &read_records(&record)[0];
    assert_eq!(rec["fds"], json!([0, 1, 2]));
    assert_eq!(rec["token_fd_var"], Value::Null);
    assert_eq!(rec["token_sha256"], Value::Null);
}

#[test]
fn pass_token_with_fd_5_closed_refuses_with_one_line() {
    let (_d, record) = tmp();
    let mut cmd = shim_cmd(&record, &["--pass-token", "--", &agent()]);
    // Closed in the shim whatever this process holds at 5 (a descriptor the CI runner left
    // open and inheritable, say): the test makes its own precondition.
    // SAFETY: close(2) on an int is async-signal-safe and touches no memory.
    unsafe {
        cmd.pre_exec(|| {
            libc::close(5);
            Ok(())
        });
    }
    let run = run_shim(cmd, &[]);
    assert_eq!(run.code, 70);
    assert_eq!(run.stderr.lines().count(), 1, "stderr: {:?}", run.stderr);
    assert!(run.stderr.contains("fd 5"), "stderr: {:?}", run.stderr);
    assert!(run.status.is_empty(), "status: {:?}", run.status);
    assert!(!record.exists(), "no target may start");
}

#[test]
fn usage_errors_exit_70_and_start_nothing() {
    let a = agent();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--status-fd", "5", "--pass-token", "--", &a],
        vec!["--pass-token", "--status-fd=5", "--", &a],
        vec!["--status-fd", "0", "--", &a],
        vec!["--status-fd", "1", "--", &a],
        vec!["--status-fd", "2", "--", &a],
        vec!["--status-fd", "three", "--", &a],
        vec!["--status-fd", "-4", "--", &a],
        vec!["--status-fd"],
        vec![&a],
        vec!["--pass-token", &a],
        vec!["--"],
        vec!["--pass-token", "--"],
        vec!["--session-id", "no spaces", "--", &a],
        vec!["--bogus", "--", &a],
        vec![],
        vec![
            "--identity",
            "--session-id",
            "s",
            "--status-fd",
            "3",
            "--",
            &a,
        ],
        vec!["--identity", "--session-id", "s", "--status-fd=3", "--", &a],
        vec!["--identity", "--", &a],
        vec!["--identity", "--identity", "--session-id", "s", "--", &a],
        vec!["--pty=1", "--", &a],
        vec!["--sandbox-profile", "relative.sb", "--", &a],
        vec!["--sandbox-profile"],
    ];
    for args in cases {
        let (_d, record) = tmp();
        let pipe = token_pipe(&fake_token());
        let run = run_shim(shim_cmd(&record, &args), &[(pipe.as_fd(), 5)]);
        assert_eq!(run.code, 70, "{args:?}: stderr {:?}", run.stderr);
        assert!(
            run.stderr.contains("usage: relay-shim"),
            "{args:?}: {:?}",
            run.stderr
        );
        assert!(run.status.is_empty(), "{args:?}: {:?}", run.status);
        assert!(!record.exists(), "{args:?}: no target may start");
    }
}

/// `--sandbox-profile` exists for macOS's `sandbox-exec`; elsewhere it is refused, saying so.
#[cfg(not(target_os = "macos"))]
#[test]
fn sandbox_profile_is_refused_off_macos() {
    let (_d, record) = tmp();
    let run = run_shim(
        shim_cmd(&record, &["--sandbox-profile", "/etc/x.sb", "--", &agent()]),
        &[],
    );
    assert_eq!(run.code, 70);
    assert!(
        run.stderr.starts_with(
            "relay-shim: --sandbox-profile is not supported here: /usr/bin/sandbox-exec exists \
             on macOS only"
        ),
        "{:?}",
        run.stderr
    );
    assert!(run.status.is_empty());
    assert!(!record.exists());
}

#[test]
fn status_reports_exit_status_and_session_id() {
    let (_d, record) = tmp();
    let run = run_shim(
        shim_cmd(
            &record,
            &["--session-id", "s-1.x_y", "--", &agent(), "--exit", "7"],
        ),
        &[],
    );
    assert_eq!(run.code, 7);
    let rec = &read_records(&record)[0];
    assert_eq!(rec["session_id"], "s-1.x_y");
    assert_eq!(
        run.status,
        vec![
            json!({"event": "no_identity"}),
            json!({"event": "started", "pid": rec["pid"]}),
            json!({"event": "exit", "status": 7}),
        ]
    );
}

#[test]
fn status_fd_elsewhere_is_used_and_not_inherited() {
    let (_d, record) = tmp();
    let (r, w) = pipe_cloexec().unwrap();
    let mut cmd = shim_cmd(&record, &["--status-fd", "8", "--", &agent()]);
    let child = spawn_with_fds(&mut cmd, &[(w.as_fd(), 8)]).unwrap();
    drop(w);
    let status = status_lines(r);
    assert_eq!(child.wait_with_output().unwrap().status.code(), Some(0));
    let rec = &read_records(&record)[0];
    assert_eq!(rec["fds"], json!([0, 1, 2]));
    assert_eq!(status[0], json!({"event": "no_identity"}));
    assert_eq!(status[1], json!({"event": "started", "pid": rec["pid"]}));
}

/// Spawns the shim (status pipe at 3) and returns it with a line reader on the status pipe,
/// past the first line (`no_identity`).
fn start_shim(
    mut cmd: Command,
    extra: &[(std::os::fd::BorrowedFd<'_>, i32)],
) -> (Child, BufReader<std::fs::File>) {
    let (r, w) = pipe_cloexec().unwrap();
    let mut fds = vec![(w.as_fd(), 3)];
    fds.extend_from_slice(extra);
    let child = spawn_with_fds(&mut cmd, &fds).unwrap();
    drop(fds);
    drop(w);
    let mut status = BufReader::new(std::fs::File::from(r));
    assert_eq!(next_line(&mut status), json!({"event": "no_identity"}));
    (child, status)
}

fn next_line(r: &mut BufReader<std::fs::File>) -> Value {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("status {line:?}: {e}"))
}

#[test]
fn target_killed_by_sigkill_reports_the_signal() {
    let (_d, record) = tmp();
    let (child, mut status) =
        start_shim(shim_cmd(&record, &["--", &agent(), "--sleep", "30"]), &[]);
    let started = next_line(&mut status);
    assert_eq!(started["event"], "started");
    let pid = started["pid"].as_i64().unwrap() as libc::pid_t;
    // SAFETY: kill takes two integers.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    assert_eq!(
        next_line(&mut status),
        json!({"event": "exit", "signal": 9})
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(128 + 9));
}

#[test]
fn missing_program_is_spawn_failed_enoent_127() {
    let (d, record) = tmp();
    let missing = d.path().join("no-such-program");
    let pipe = token_pipe(&fake_token());
    let run = run_shim(
        shim_cmd(&record, &["--pass-token", "--", missing.to_str().unwrap()]),
        &[(pipe.as_fd(), 5)],
    );
    assert_eq!(
        run.status,
        vec![
            json!({"event": "no_identity"}),
            json!({"event": "spawn_failed", "errno": 2})
        ]
    );
    assert_eq!(run.code, 127);
    let run = run_shim(
        shim_cmd(&record, &["--", "relay-no-such-program-on-path"]),
        &[],
    );
    assert_eq!(
        run.status,
        vec![
            json!({"event": "no_identity"}),
            json!({"event": "spawn_failed", "errno": 2})
        ]
    );
    assert_eq!(run.code, 127);
}

#[test]
fn non_executable_file_is_spawn_failed_126() {
    let (d, record) = tmp();
    let file = d.path().join("not-executable");
    std::fs::write(&file, "#!/bin/sh\nexit 0\n").unwrap();
    let run = run_shim(shim_cmd(&record, &["--", file.to_str().unwrap()]), &[]);
    assert_eq!(
        run.status,
        vec![
            json!({"event": "no_identity"}),
            json!({"event": "spawn_failed", "errno": libc::EACCES})
        ]
    );
    assert_eq!(run.code, 126);
}

#[test]
fn sigterm_to_the_shim_reaches_the_target() {
    let (d, record) = tmp();
    let sigfile = d.path().join("signal");
    let (child, mut status) = start_shim(
        shim_cmd(
            &record,
            &[
                "--",
                &agent(),
                "--record-signal",
                sigfile.to_str().unwrap(),
                "--sleep",
                "30",
            ],
        ),
        &[],
    );
    assert_eq!(next_line(&mut status)["event"], "started");
    // The handler is installed before the record is written.
    wait_for_records(&record, 1, TIMEOUT);
    // SAFETY: kill takes two integers.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(std::fs::read_to_string(&sigfile).unwrap(), "15\n");
    assert_eq!(out.status.code(), Some(143), "the target's own status");
    assert_eq!(
        next_line(&mut status),
        json!({"event": "exit", "status": 143})
    );
}

#[test]
fn shim_holds_no_fd_5_after_the_spawn() {
    let (_d, record) = tmp();
    let pipe = token_pipe(&fake_token());
    let (child, mut status) = start_shim(
        shim_cmd(&record, &["--pass-token", "--", &agent(), "--sleep", "30"]),
        &[(pipe.as_fd(), 5)],
    );
    drop(pipe);
    assert_eq!(next_line(&mut status)["event"], "started");
    let recs = wait_for_records(&record, 1, TIMEOUT);
    assert!(recs[0]["token_sha256"].is_string());
    let shim_fds: Vec<i32> = std::fs::read_dir(format!("/proc/{}/fd", child.id()))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().parse().unwrap())
        .collect();
    assert!(!shim_fds.contains(&5), "shim fds: {shim_fds:?}");
    assert!(
        shim_fds.contains(&3),
        "the status fd stays with the shim: {shim_fds:?}"
    );
    // SAFETY: kill takes two integers.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    child.wait_with_output().unwrap();
}

#[test]
fn shim_never_reads_fd_5() {
    let (_d, record) = tmp();
    let token = fake_token();
    let pipe = token_pipe(&token);
    let keep = pipe.try_clone().unwrap(); // close-on-exec duplicate of the read end
    let run = run_shim(
        shim_cmd(&record, &["--pass-token", "--", &agent(), "--no-read"]),
        &[(pipe.as_fd(), 5)],
    );
    drop(pipe);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(read_records(&record)[0]["token_read"], false);
    let mut left = String::new();
    std::fs::File::from(keep).read_to_string(&mut left).unwrap();
    assert_eq!(left, token, "every byte is still in the pipe");
}

#[test]
fn fdmap_spawned_shim_works_too() {
    // The way relay-host spawns it: the library's placement, token at 5 with its variable.
    let (_d, record) = tmp();
    let token = fake_token();
    let pipe = token_pipe(&token);
    let (r, w) = pipe_cloexec().unwrap();
    let mut extra = FdMap::new();
    extra.place(w.as_fd(), 3);
    let mut cmd = shim_cmd(&record, &["--pass-token", "--", &agent()]);
    extra.place(pipe.as_fd(), relay_token::TOKEN_FD);
    cmd.env(relay_token::TOKEN_FD_VAR, "5");
    let child = extra.spawn(&mut cmd).unwrap();
    drop((pipe, w));
    let status = status_lines(r);
    assert_eq!(child.wait_with_output().unwrap().status.code(), Some(0));
    let rec = &read_records(&record)[0];
    assert_eq!(rec["token_sha256"], sha256_hex(token.as_bytes()));
    assert_eq!(rec["fds"], json!([0, 1, 2, 5]));
    assert_eq!(status.len(), 3);
}

/// A pseudo-terminal session run by util-linux `script`: what the test writes goes to the
/// terminal (so Ctrl-Z is a real SIGTSTP), what the session prints is collected.
struct Terminal {
    child: Child,
    input: std::process::ChildStdin,
    output: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Terminal {
    fn start(command: &str) -> Terminal {
        let mut child = Command::new("script")
            .args(["-qfec", command, "/dev/null"])
            .env("TERM", "dumb")
            .env("PS1", "$ ")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("util-linux script (package bsdutils)");
        let input = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let output = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = std::sync::Arc::clone(&output);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Terminal {
            child,
            input,
            output,
        }
    }

    fn send(&mut self, text: &str) {
        use std::io::Write;
        self.input.write_all(text.as_bytes()).unwrap();
        self.input.flush().unwrap();
    }

    /// Waits until the output holds `marker`; panics with the output on timeout.
    fn expect(&mut self, marker: &str) {
        let start = std::time::Instant::now();
        while !self.output.lock().unwrap().contains(marker) {
            if start.elapsed() > TIMEOUT {
                let _ = self.child.kill();
                panic!(
                    "no {marker:?} on the terminal; it shows:\n{}",
                    self.output.lock().unwrap()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn finish(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn terminal_launch_target_owns_the_terminal_and_gives_it_back() {
    // Without the hand-over the target's read from the terminal stops it (SIGTTIN) for good.
    let shim = relay_shim();
    let mut term = Terminal::start(&format!(
        "{} -- sh -c 'read x; echo \"got-$x\"; exit 3'; echo \"rc=$? $(ps -o pgid=,tpgid= -p $$)\"",
        shim.display()
    ));
    term.send("hello\n");
    term.expect("got-hello");
    term.expect("rc=3 ");
    // The caller's group has the terminal again: pgid == tpgid.
    let out = term.output.lock().unwrap().clone();
    let line = out
        .lines()
        .find(|l| l.starts_with("rc=3 "))
        .unwrap()
        .to_owned();
    let ids: Vec<&str> = line["rc=3 ".len()..].split_whitespace().collect();
    assert_eq!(ids.len(), 2, "{line:?}");
    assert_eq!(ids[0], ids[1], "terminal not given back: {line:?}");
    term.finish();
}

#[test]
fn terminal_job_control_passes_through_ctrl_z_and_fg() {
    let shim = relay_shim();
    let mut term = Terminal::start("bash --norc --noprofile -i");
    term.send("echo \"ready-$((40+2))\"\n");
    term.expect("ready-42");
    // The target says it runs before it reads (the sum, not the typed `$((5+5))` echoed back,
    // is the sign). It took the terminal before its exec, so from then on Ctrl-Z reaches its
    // group. Sent any earlier, Ctrl-Z reaches bash, which ignores it, and the terminal flushes
    // the input not yet read: on a loaded machine the command line itself was lost that way.
    term.send(&format!(
        "{} -- sh -c 'echo \"armed-$((5+5))\"; read x; echo \"got-$x\"; exit 3'\n",
        shim.display()
    ));
    term.expect("armed-10");
    term.send("\x1a");
    term.expect("Stopped");
    term.send("echo \"stopped-jobs-$(jobs -s | wc -l)-$((1+1))\"\n");
    term.expect("stopped-jobs-1-2");
    // Typed ahead: bash reads up to the end of `fg` only; the line waits in the terminal for
    // the target's read once it has the terminal again.
    term.send("fg\n");
    term.send("hello\n");
    term.expect("got-hello");
    term.send("echo \"rc-$?-$((2+2))\"\n");
    term.expect("rc-3-4");
    term.send("exit\n");
    term.finish();
}

/// A close-on-exec pipe as `(read end, write end)`.
fn pipe_cloexec() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    std::io::pipe().map(|(r, w)| (r.into(), w.into()))
}
