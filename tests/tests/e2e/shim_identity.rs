//! End-to-end tests of the real `relay-shim` in each descriptor layout, with `--identity`
//! against a test bridge, and with `--pty` under a pseudo-terminal. Build the binaries first:
//! `cargo build --workspace --bins`.
//!
//! The launch secret is treated like the token: compared, never printed.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use relay_tests::run::default_signals;
use relay_tests::shim::{devnull, pipe_cloexec, record_dir, token_pipe, ShimRun};
use relay_tests::{
    fake_agent_arg, fake_token, read_records, relay_shim, sha256_hex, spawn_with_fds,
    wait_for_records,
};
use serde_json::{json, Value};

const TIMEOUT: Duration = Duration::from_secs(30);
const SESSION: &str = "s-7.id";

/// A fresh secret: 64 lowercase hex digits.
fn new_secret() -> String {
    sha256_hex(fake_token().as_bytes())
}

/// A pipe's read end holding `bytes`, write end closed.
fn filled_pipe(bytes: &[u8]) -> OwnedFd {
    let (r, mut w) = std::io::pipe().unwrap();
    std::io::Write::write_all(&mut w, bytes).unwrap();
    r.into()
}

/// What the test bridge answers.
#[derive(Clone, Copy, Debug)]
enum Answer {
    Ok,
    Error,
    WrongServiceId,
    RelayPidZero,
    OverLong,
    Silent,
}

/// A bridge that takes one connection, reads one line and answers as told; `join` gives the
/// line it got (None: nobody connected).
struct TestBridge {
    _dir: tempfile::TempDir,
    path: PathBuf,
    thread: JoinHandle<Option<Value>>,
    stop: Arc<AtomicBool>,
}

impl TestBridge {
    fn new(answer: Answer) -> TestBridge {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bridge.sock");
        let listener = UnixListener::bind(&path).unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || serve(listener, answer, &flag));
        TestBridge {
            _dir: dir,
            path,
            thread,
            stop,
        }
    }

    /// The line it got; call it once the shim has ended (a dial it made is taken first).
    fn join(self) -> Option<Value> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

fn serve(listener: UnixListener, answer: Answer, stop: &AtomicBool) -> Option<Value> {
    let start = Instant::now();
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(_) if stop.load(Ordering::SeqCst) || start.elapsed() > TIMEOUT => return None,
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    stream.set_nonblocking(false).unwrap();
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).unwrap();
    let got: Value = serde_json::from_str(&line).expect("the Hello is JSON");
    let ok = |sid: &str, pid: u32| {
        json!({"type": "OK", "data": {"kind": "project_session", "service_id": sid,
                                      "relay_pid": pid}})
        .to_string()
            + "\n"
    };
    let reply = match answer {
        Answer::Ok => ok(SESSION, std::process::id()),
        Answer::Error => "{\"type\":\"Error\",\"data\":{\"message\":\"no\"}}\n".to_owned(),
        Answer::WrongServiceId => ok("another-session", std::process::id()),
        Answer::RelayPidZero => ok(SESSION, 0),
        Answer::OverLong => "a".repeat(70_000) + "\n",
        Answer::Silent => {
            // Hold the line open until the shim gives up and closes it.
            let mut rest = Vec::new();
            let _ = (&stream).read_to_end(&mut rest);
            return Some(got);
        }
    };
    let _ = (&stream).write_all(reply.as_bytes());
    Some(got)
}

/// Asserts the bridge got the Hello for [`SESSION`] with `secret`.
fn assert_hello(got: &Value, secret: &str) {
    assert_eq!(got["type"], "Hello");
    assert_eq!(got["kind"], "project_session");
    assert_eq!(got["name"], SESSION);
    assert!(got["token"] == secret, "the Hello carries another secret");
    assert_eq!(got.as_object().unwrap().len(), 4, "four fields");
}

/// Runs `relay-shim ARGS` with `fds` placed, its status pipe at `status_fd`, to the end.
fn run_shim(
    record: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    fds: &[(BorrowedFd<'_>, i32)],
    status_fd: i32,
) -> ShimRun {
    let mut cmd = Command::new(relay_shim());
    cmd.args(args)
        .env("FAKE_AGENT_RECORD", record)
        .env_remove("RELAY_BRIDGE_SOCKET")
        .env_remove("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    relay_tests::shim::run(cmd, status_fd, fds)
}

/// The three layouts (identity with and without the token, a terminal launch's `[status, nil,
/// token]`, and no token at all): the target holds exactly {0, 1, 2, 5} or {0, 1, 2}, whatever
/// else the shim had (leftovers at 4, 6 and 9), and the identity's variables never reach it.
#[test]
fn each_layout_gives_the_target_exactly_its_descriptors() {
    let cases: [(&str, bool, bool, Value); 4] = [
        ("identity + token", true, true, json!([0, 1, 2, 5])),
        ("identity", true, false, json!([0, 1, 2])),
        ("terminal + token", false, true, json!([0, 1, 2, 5])),
        ("no token", false, false, json!([0, 1, 2])),
    ];
    for (name, identity, token_on, want) in cases {
        let (_d, record) = record_dir();
        let bridge = TestBridge::new(Answer::Ok);
        let secret = new_secret();
        let token = fake_token();
        let (secret_r, pipe) = (filled_pipe(secret.as_bytes()), token_pipe(&token));
        let (n4, n6, n9) = (devnull(), devnull(), devnull());
        let a = fake_agent_arg();
        let mut args = vec!["--session-id", SESSION];
        let mut fds = vec![(n6.as_fd(), 6), (n9.as_fd(), 9)];
        if identity {
            args.push("--identity");
            fds.push((secret_r.as_fd(), 3));
        } else {
            fds.push((n4.as_fd(), 4));
        }
        if token_on {
            args.push("--pass-token");
            fds.push((pipe.as_fd(), 5));
        }
        args.extend(["--", &a]);
        let sock = bridge.path.to_str().unwrap().to_owned();
        let env = [
            ("RELAY_BRIDGE_SOCKET", sock.as_str()),
            ("RELAY_LAUNCH_FD", "3"),
        ];
        let run = run_shim(&record, &args, &env, &fds, if identity { 4 } else { 3 });
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        let rec = &read_records(&record)[0];
        assert_eq!(rec["fds"], want, "{name}");
        assert!(
            rec["env"].get("RELAY_BRIDGE_SOCKET").is_none(),
            "{name}: {rec}"
        );
        assert!(rec["env"].get("RELAY_LAUNCH_FD").is_none(), "{name}: {rec}");
        if token_on {
            assert_eq!(rec["token_sha256"], sha256_hex(token.as_bytes()), "{name}");
        }
        let first = if identity {
            json!({"event": "hello_ok", "pid": run.pid})
        } else {
            json!({"event": "no_identity"})
        };
        assert_eq!(
            run.status,
            [
                first,
                json!({"event": "started", "pid": rec["pid"]}),
                json!({"event": "exit", "status": 0}),
            ],
            "{name}"
        );
        let all = format!("{:?}{}{}", run.status, run.stderr, rec);
        assert!(!all.contains(&secret), "{name}: the secret leaked");
        if identity {
            assert_hello(&bridge.join().expect("a Hello"), &secret);
        } else {
            assert!(
                bridge.join().is_none(),
                "{name}: no Hello without --identity"
            );
        }
    }
}

/// Runs an identity launch with `secret` on fd 3 against `bridge` (its socket, or `socket`),
/// with a token on fd 5; checks that nothing started and fd 5 was never read, and returns the
/// run.
fn refused_run(secret: &[u8], socket: Option<&str>) -> ShimRun {
    let (_d, record) = record_dir();
    let token = fake_token();
    let pipe = token_pipe(&token);
    let keep = pipe.try_clone().unwrap();
    let secret_r = filled_pipe(secret);
    let a = fake_agent_arg();
    let args = [
        "--identity",
        "--pass-token",
        "--session-id",
        SESSION,
        "--",
        &a,
    ];
    let env: Vec<(&str, &str)> = socket
        .map(|s| ("RELAY_BRIDGE_SOCKET", s))
        .into_iter()
        .collect();
    let run = run_shim(
        &record,
        &args,
        &env,
        &[(secret_r.as_fd(), 3), (pipe.as_fd(), 5)],
        4,
    );
    drop(pipe);
    assert_eq!(run.code, 78, "stderr: {}", run.stderr);
    assert!(!record.exists(), "no target may start");
    assert_eq!(run.status.len(), 1, "{:?}", run.status);
    assert_eq!(run.stderr.lines().count(), 1, "{:?}", run.stderr);
    // Every byte of the token is still in its pipe: the shim never read fd 5.
    let mut left = Vec::new();
    std::fs::File::from(keep).read_to_end(&mut left).unwrap();
    assert_eq!(sha256_hex(&left), sha256_hex(token.as_bytes()));
    let secret_text = String::from_utf8_lossy(secret);
    if secret.len() >= 16 {
        let all = format!("{:?}{}", run.status, run.stderr);
        assert!(!all.contains(&*secret_text), "the secret leaked");
    }
    run
}

/// A secret of 63 or 65 bytes, upper-case hex, or not hex: `bad_secret`, exit 78, no Hello,
/// nothing started, fd 5 unread.
#[test]
fn a_bad_secret_starts_nothing_and_says_no_hello() {
    let good = new_secret();
    let cases: [(String, &str); 5] = [
        (good[..63].to_owned(), "length"),
        (format!("{good}a"), "length"),
        (
            good.to_uppercase().replace(char::is_numeric, "A"),
            "not_lowercase_hex",
        ),
        (
            good.replace('a', "g").replacen(char::is_numeric, "g", 1),
            "not_lowercase_hex",
        ),
        (String::new(), "length"),
    ];
    for (secret, reason) in cases {
        let bridge = TestBridge::new(Answer::Ok);
        let run = refused_run(secret.as_bytes(), Some(bridge.path.to_str().unwrap()));
        assert_eq!(
            run.status,
            [json!({"event": "bad_secret", "reason": reason})],
            "secret of {} bytes",
            secret.len()
        );
        assert!(run.stderr.contains("fd 3"), "{}", run.stderr);
        assert!(
            bridge.join().is_none(),
            "a bad secret never reaches the bridge"
        );
    }
}

/// A bridge that answers an error, another `service_id`, `relay_pid` 0 or an over-long line,
/// a missing socket and an unset variable: `hello_refused`, exit 78, nothing started.
#[test]
fn a_bridge_that_does_not_confirm_refuses_the_launch() {
    for (answer, reason) in [
        (Answer::Error, "not_ok"),
        (Answer::WrongServiceId, "not_ok"),
        (Answer::RelayPidZero, "not_ok"),
        (Answer::OverLong, "too_long"),
    ] {
        let bridge = TestBridge::new(answer);
        let secret = new_secret();
        let run = refused_run(secret.as_bytes(), Some(bridge.path.to_str().unwrap()));
        assert_eq!(
            run.status,
            [json!({"event": "hello_refused", "reason": reason})],
            "{answer:?}"
        );
        assert_hello(&bridge.join().expect("a Hello"), &secret);
    }
    let secret = new_secret();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such.sock");
    let run = refused_run(secret.as_bytes(), Some(missing.to_str().unwrap()));
    assert_eq!(
        run.status,
        [json!({"event": "hello_refused", "reason": "connect"})]
    );
    let run = refused_run(secret.as_bytes(), None);
    assert_eq!(
        run.status,
        [json!({"event": "hello_refused", "reason": "no_socket"})]
    );
    assert!(run.stderr.contains("RELAY_BRIDGE_SOCKET"), "{}", run.stderr);
}

/// A bridge that says nothing: the shim gives up after 10 s with `hello_refused`, exit 78.
#[test]
fn a_silent_bridge_refuses_the_launch() {
    let bridge = TestBridge::new(Answer::Silent);
    let secret = new_secret();
    let run = refused_run(secret.as_bytes(), Some(bridge.path.to_str().unwrap()));
    assert_eq!(
        run.status,
        [json!({"event": "hello_refused", "reason": "timeout"})]
    );
    assert_hello(&bridge.join().expect("a Hello"), &secret);
}

/// `(pgrp, session, tty_nr, tpgid)` of `pid`, from `/proc/PID/stat`.
fn session_of(pid: i64) -> (i64, i64, u64, i64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    // state ppid pgrp session tty_nr tpgid
    (
        f[2].parse().unwrap(),
        f[3].parse().unwrap(),
        f[4].parse().unwrap(),
        f[5].parse().unwrap(),
    )
}

/// `--pty` under a pseudo-terminal: the target leads its own session (its sid and pgid are its
/// pid), the terminal is its controlling terminal with the target in the foreground, and
/// Ctrl-C typed on the terminal reaches it.
#[test]
fn pty_target_leads_a_session_on_the_terminal_and_gets_ctrl_c() {
    let (dir, record) = record_dir();
    let (master, slave) = relay_tests::openpty();
    let st = std::fs::File::from(slave.try_clone().unwrap())
        .metadata()
        .unwrap();
    let (major, minor) = (
        libc::major(std::os::unix::fs::MetadataExt::rdev(&st)) as u64,
        libc::minor(std::os::unix::fs::MetadataExt::rdev(&st)) as u64,
    );
    let sigfile = dir.path().join("signal");
    let mut cmd = Command::new(relay_shim());
    // The terminal's SIGINT must reach the target: not ignored by inheritance.
    default_signals(&mut cmd)
        .args(["--pty", "--", &fake_agent_arg(), "--record-signal"])
        .arg(&sigfile)
        .args(["--sleep", "30"])
        .env("FAKE_AGENT_RECORD", &record)
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave.try_clone().unwrap()));
    let (r, w) = pipe_cloexec();
    let child = spawn_with_fds(&mut cmd, &[(w.as_fd(), 3)]).unwrap();
    drop((w, cmd, slave));
    let mut status = BufReader::new(std::fs::File::from(r));
    let mut next = || {
        let mut line = String::new();
        status.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    };
    assert_eq!(next(), json!({"event": "no_identity"}));
    let started = next();
    assert_eq!(started["event"], "started");
    let pid = started["pid"].as_i64().unwrap();
    wait_for_records(&record, 1, TIMEOUT); // its SIGINT handler is in place
    let (pgrp, sid, tty_nr, tpgid) = session_of(pid);
    assert_eq!((pgrp, sid), (pid, pid), "the target leads its own session");
    let tty_major = (tty_nr >> 8) & 0xfff;
    let tty_minor = (tty_nr & 0xff) | ((tty_nr >> 12) & 0xfff00);
    assert_eq!(
        (tty_major, tty_minor),
        (major, minor),
        "its terminal is the pty"
    );
    assert_eq!(tpgid, pid, "it is the terminal's foreground group");
    let shim_sid = session_of(child.id() as i64).1;
    assert_ne!(shim_sid, pid, "the shim stays in its own session");
    // Through a second descriptor: closing it leaves the master open (closing the last one
    // would hang the terminal up, a SIGHUP racing the SIGINT).
    let mut input = std::fs::File::from(master.try_clone().unwrap());
    std::io::Write::write_all(&mut input, b"\x03").unwrap();
    assert_eq!(next(), json!({"event": "exit", "status": 130}));
    assert_eq!(std::fs::read_to_string(&sigfile).unwrap(), "2\n");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
}

/// `--pty` with a stdin that is no terminal: the spawn fails with `ENOTTY` (126), nothing runs.
#[test]
fn pty_without_a_terminal_is_spawn_failed() {
    let (_d, record) = record_dir();
    let run = run_shim(&record, &["--pty", "--", &fake_agent_arg()], &[], &[], 3);
    assert_eq!(
        run.status,
        [
            json!({"event": "no_identity"}),
            json!({"event": "spawn_failed", "errno": libc::ENOTTY}),
        ]
    );
    assert_eq!(run.code, 126);
    assert!(!record.exists());
}
