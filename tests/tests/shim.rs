//! End-to-end tests of the real `relay-shim` binary with the fake agent as its target.
//! Build the binaries first: `cargo build --workspace --bins`.

use std::io::{BufRead, BufReader, Read};
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use relay_tests::run::default_signals;
use relay_tests::shim::{devnull, pipe_cloexec, record_dir, status_lines, token_pipe, ShimRun};
use relay_tests::{
    fake_agent_arg, fake_token, read_records, relay_shim, sha256_hex, spawn_with_fds,
    wait_for_records,
};
use relay_token::FdMap;
use serde_json::{json, Value};

const TIMEOUT: Duration = Duration::from_secs(20);

/// `relay-shim ARGS` with a clean environment for the token variable and the record file set,
/// and the signals a test sends at their default action whatever this process inherited.
fn shim_cmd(record: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(relay_shim());
    default_signals(&mut cmd)
        .args(args)
        .env("FAKE_AGENT_RECORD", record)
        .env_remove("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR")
        .env_remove("RELAY_SESSION_ID")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs the shim with a status pipe at 3 and `extra` descriptors, to completion.
fn run_shim(cmd: Command, extra: &[(std::os::fd::BorrowedFd<'_>, i32)]) -> ShimRun {
    relay_tests::shim::run(cmd, 3, extra)
}

/// The status lines of a run whose target failed to spawn with `errno`.
fn failed_to_spawn(errno: i32) -> Vec<Value> {
    vec![
        json!({"event": "no_identity"}),
        json!({"event": "spawn_failed", "errno": errno}),
    ]
}

/// The status lines of a run that started the target of the record `rec` and saw it exit
/// with `status`.
fn ran_to_exit(rec: &Value, status: i32) -> Vec<Value> {
    vec![
        json!({"event": "no_identity"}),
        json!({"event": "started", "pid": rec["pid"]}),
        json!({"event": "exit", "status": status}),
    ]
}

#[test]
fn pass_token_hands_exact_bytes_and_only_fds_0125() {
    let (_d, record) = record_dir();
    let token = fake_token();
    let pipe = token_pipe(&token);
    let (n4, n6, n9) = (devnull(), devnull(), devnull());
    let run = run_shim(
        shim_cmd(&record, &["--pass-token", "--", &fake_agent_arg()]),
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
    assert_eq!(run.status, ran_to_exit(rec, 0));
}

#[test]
fn without_pass_token_the_target_gets_no_fd_5() {
    let (_d, record) = record_dir();
    let pipe = token_pipe(&fake_token());
    let n4 = devnull();
    let run = run_shim(
        shim_cmd(&record, &["--", &fake_agent_arg()]),
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
    let (_d, record) = record_dir();
    let mut cmd = shim_cmd(&record, &["--pass-token", "--", &fake_agent_arg()]);
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
    let a = fake_agent_arg();
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
        let (_d, record) = record_dir();
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
    let (_d, record) = record_dir();
    let run = run_shim(
        shim_cmd(
            &record,
            &["--sandbox-profile", "/etc/x.sb", "--", &fake_agent_arg()],
        ),
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
    let (_d, record) = record_dir();
    let run = run_shim(
        shim_cmd(
            &record,
            &[
                "--session-id",
                "s-1.x_y",
                "--",
                &fake_agent_arg(),
                "--exit",
                "7",
            ],
        ),
        &[],
    );
    assert_eq!(run.code, 7);
    let rec = &read_records(&record)[0];
    assert_eq!(rec["session_id"], "s-1.x_y");
    assert_eq!(run.status, ran_to_exit(rec, 7));
}

#[test]
fn status_fd_elsewhere_is_used_and_not_inherited() {
    let (_d, record) = record_dir();
    let (r, w) = pipe_cloexec();
    let mut cmd = shim_cmd(&record, &["--status-fd", "8", "--", &fake_agent_arg()]);
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
    let (r, w) = pipe_cloexec();
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
    let (_d, record) = record_dir();
    let (child, mut status) = start_shim(
        shim_cmd(&record, &["--", &fake_agent_arg(), "--sleep", "30"]),
        &[],
    );
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
    let (d, record) = record_dir();
    let missing = d.path().join("no-such-program");
    let pipe = token_pipe(&fake_token());
    let run = run_shim(
        shim_cmd(&record, &["--pass-token", "--", missing.to_str().unwrap()]),
        &[(pipe.as_fd(), 5)],
    );
    assert_eq!(run.status, failed_to_spawn(2));
    assert_eq!(run.code, 127);
    let run = run_shim(
        shim_cmd(&record, &["--", "relay-no-such-program-on-path"]),
        &[],
    );
    assert_eq!(run.status, failed_to_spawn(2));
    assert_eq!(run.code, 127);
}

#[test]
fn non_executable_file_is_spawn_failed_126() {
    let (d, record) = record_dir();
    let file = d.path().join("not-executable");
    std::fs::write(&file, "#!/bin/sh\nexit 0\n").unwrap();
    let run = run_shim(shim_cmd(&record, &["--", file.to_str().unwrap()]), &[]);
    assert_eq!(run.status, failed_to_spawn(libc::EACCES));
    assert_eq!(run.code, 126);
}

#[test]
fn sigterm_to_the_shim_reaches_the_target() {
    let (d, record) = record_dir();
    let sigfile = d.path().join("signal");
    let (child, mut status) = start_shim(
        shim_cmd(
            &record,
            &[
                "--",
                &fake_agent_arg(),
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

/// A target that traps SIGTERM and goes on running is killed with SIGKILL once the shim's grace
/// period ([`relay_shim::GRACE_SECS`]) has passed: its trap ran (it got the signal first), then
/// the shim reports the kill and exits 137.
#[test]
fn a_target_that_outlives_the_grace_period_is_killed() {
    let (d, record) = record_dir();
    let said = d.path().join("trapped");
    let script = format!(
        "trap 'echo TERM >> {}' TERM; : > {}; while :; do sleep 1; done",
        said.display(),
        d.path().join("ready").display()
    );
    let (child, mut status) = start_shim(shim_cmd(&record, &["--", "sh", "-c", &script]), &[]);
    assert_eq!(next_line(&mut status)["event"], "started");
    let ready = d.path().join("ready");
    assert!(relay_tests::wait_until(TIMEOUT, &|| ready.exists()));
    let asked = std::time::Instant::now();
    // SAFETY: kill takes two integers.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let out = child.wait_with_output().unwrap();
    let took = asked.elapsed();
    assert_eq!(std::fs::read_to_string(&said).unwrap(), "TERM\n");
    assert_eq!(
        out.status.code(),
        Some(137),
        "killed after the grace period"
    );
    assert_eq!(
        next_line(&mut status),
        json!({"event": "exit", "signal": 9})
    );
    eprintln!(
        "ended {took:?} after SIGTERM (grace {} s)",
        relay_shim::GRACE_SECS
    );
}

#[test]
fn shim_holds_no_fd_5_after_the_spawn() {
    let (_d, record) = record_dir();
    let pipe = token_pipe(&fake_token());
    let (child, mut status) = start_shim(
        shim_cmd(
            &record,
            &["--pass-token", "--", &fake_agent_arg(), "--sleep", "30"],
        ),
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
    let (_d, record) = record_dir();
    let token = fake_token();
    let pipe = token_pipe(&token);
    let keep = pipe.try_clone().unwrap(); // close-on-exec duplicate of the read end
    let run = run_shim(
        shim_cmd(
            &record,
            &["--pass-token", "--", &fake_agent_arg(), "--no-read"],
        ),
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
    let (_d, record) = record_dir();
    let token = fake_token();
    let pipe = token_pipe(&token);
    let (r, w) = pipe_cloexec();
    let mut extra = FdMap::new();
    extra.place(w.as_fd(), 3).unwrap();
    let mut cmd = shim_cmd(&record, &["--pass-token", "--", &fake_agent_arg()]);
    extra.place(pipe.as_fd(), relay_token::TOKEN_FD).unwrap();
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

/// `--pass-fds` and `--sandbox-status-fd` are checked before anything starts: each refusal is
/// the parser's error, printed as one line with the synopsis, exit 70, no status line, no target.
#[test]
fn pass_fds_and_sandbox_status_fd_usage_errors_name_the_descriptor() {
    use relay_shim::{ShimOptions, UsageError, USAGE};
    let range = |v: &str| {
        (
            UsageError::BadFdRange(v.to_owned()),
            format!(
                "--pass-fds {v:?}: must be FIRST-LAST, two descriptor numbers above 2, at most \
                 3000"
            ),
        )
    };
    let in_use = |opt: &'static str, fd: i32| {
        (
            UsageError::FdInUse { opt, fd },
            format!("{opt}: fd {fd} is already stdio, the status, the token or the launch secret"),
        )
    };
    let cases: Vec<(Vec<&str>, (UsageError, String))> = vec![
        (vec!["--pass-fds", "7"], range("7")),
        (vec!["--pass-fds", "2-4"], range("2-4")),
        (vec!["--pass-fds", "9-8"], range("9-8")),
        (vec!["--pass-fds=10-3010"], range("10-3010")),
        (vec!["--pass-fds", "a-b"], range("a-b")),
        (vec!["--pass-fds", "-5-6"], range("-5-6")),
        (vec!["--pass-fds", "10-12", "--pass-fds", "10-12"], {
            let e = UsageError::Repeated("--pass-fds");
            let m = "--pass-fds given twice".to_owned();
            (e, m)
        }),
        // The default status descriptor, 3.
        (vec!["--pass-fds", "3-9"], in_use("--pass-fds", 3)),
        (
            vec!["--status-fd", "8", "--pass-fds", "6-9"],
            in_use("--pass-fds", 8),
        ),
        (
            vec!["--pass-token", "--status-fd", "4", "--pass-fds", "5-6"],
            in_use("--pass-fds", 5),
        ),
        (
            vec!["--identity", "--session-id", "s", "--pass-fds", "3-3"],
            in_use("--pass-fds", 3),
        ),
        (
            vec!["--sandbox-status-fd", "1"],
            in_use("--sandbox-status-fd", 1),
        ),
        (
            vec!["--sandbox-status-fd", "3"],
            in_use("--sandbox-status-fd", 3),
        ),
        (
            vec!["--pass-token", "--sandbox-status-fd=5"],
            in_use("--sandbox-status-fd", 5),
        ),
        (
            vec!["--pass-fds", "10-12", "--sandbox-status-fd", "11"],
            in_use("--sandbox-status-fd", 11),
        ),
    ];
    let a = fake_agent_arg();
    let refused = |args: &[&str], stderr: &str| {
        let (_d, record) = record_dir();
        let pipe = token_pipe(&fake_token());
        let run = run_shim(shim_cmd(&record, args), &[(pipe.as_fd(), 5)]);
        assert_eq!(run.code, 70, "{args:?}: stderr {:?}", run.stderr);
        assert_eq!(run.stderr, stderr, "{args:?}");
        assert!(run.status.is_empty(), "{args:?}: {:?}", run.status);
        assert!(!record.exists(), "{args:?}: no target may start");
    };
    for (opts, (err, msg)) in cases {
        let mut args = opts;
        args.extend(["--", a.as_str()]);
        assert_eq!(ShimOptions::parse(args.iter().copied()), Err(err.clone()));
        assert_eq!(err.to_string(), msg, "{args:?}");
        refused(&args, &format!("relay-shim: {msg}\n{USAGE}\n"));
    }
    refused(
        &["--sandbox-status-fd"],
        &format!("relay-shim: --sandbox-status-fd needs a value\n{USAGE}\n"),
    );
    // Not a number: refused, naming its own option.
    let err = ShimOptions::parse(["--sandbox-status-fd", "six", "--", "true"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--sandbox-status-fd \"six\": not a descriptor number"
    );
    refused(
        &["--sandbox-status-fd", "six", "--", &a],
        &format!("relay-shim: {err}\n{USAGE}\n"),
    );
    // The widest range, 3000 descriptors, parses.
    let o = ShimOptions::parse(["--pass-fds", "10-3009", "--", "true"]).unwrap();
    assert_eq!(o.pass_fds, Some((10, 3009)));
    let o =
        ShimOptions::parse(["--sandbox-status-fd", "6", "--pass-fds=10-12", "--", "true"]).unwrap();
    assert_eq!((o.pass_fds, o.sandbox_status_fd), (Some((10, 12)), Some(6)));
}

/// A descriptor of `--pass-fds` that is not open: one stderr line naming it, exit 70, no status
/// line, no target.
#[test]
fn pass_fds_with_a_closed_descriptor_refuses_with_one_line() {
    let (_d, record) = record_dir();
    let mut cmd = shim_cmd(&record, &["--pass-fds", "10-12", "--", &fake_agent_arg()]);
    // Closed in the shim whatever this process holds at 11.
    // SAFETY: close(2) on an int is async-signal-safe and touches no memory.
    unsafe {
        cmd.pre_exec(|| {
            libc::close(11);
            Ok(())
        });
    }
    let (n10, n12) = (devnull(), devnull());
    let run = run_shim(cmd, &[(n10.as_fd(), 10), (n12.as_fd(), 12)]);
    assert_eq!(run.code, 70);
    assert_eq!(
        run.stderr,
        "relay-shim: --pass-fds 10-12: fd 11 is not open\n"
    );
    assert!(run.status.is_empty(), "status: {:?}", run.status);
    assert!(!record.exists(), "no target may start");
}

/// `--pass-fds 10-12` hands the shim's 10, 11 and 12 to the target at the same numbers (the
/// same open files: the target reads each one's content), beside the token at 5 and nothing
/// else (not 4, 9 or 13, which the shim also had).
#[test]
fn pass_fds_hands_exactly_those_descriptors_at_their_numbers() {
    let (d, record) = record_dir();
    let token = fake_token();
    let pipe = token_pipe(&token);
    let file = |name: &str| {
        let p = d.path().join(name);
        std::fs::write(&p, format!("{name}\n")).unwrap();
        std::fs::File::open(p).unwrap()
    };
    let (f10, f11, f12) = (file("ten"), file("eleven"), file("twelve"));
    let (n4, n9, n13) = (devnull(), devnull(), devnull());
    let mut cmd = shim_cmd(
        &record,
        &[
            "--pass-token",
            "--pass-fds",
            "10-12",
            "--",
            &fake_agent_arg(),
            "--sh",
            "cat /dev/fd/10 /dev/fd/11 /dev/fd/12",
        ],
    );
    let (r, w) = pipe_cloexec();
    let child = spawn_with_fds(
        &mut cmd,
        &[
            (w.as_fd(), 3),
            (n4.as_fd(), 4),
            (pipe.as_fd(), 5),
            (n9.as_fd(), 9),
            (f10.as_fd(), 10),
            (f11.as_fd(), 11),
            (f12.as_fd(), 12),
            (n13.as_fd(), 13),
        ],
    )
    .unwrap();
    drop(w);
    let status = status_lines(r);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ten\neleven\ntwelve\n"
    );
    let rec = &read_records(&record)[0];
    assert_eq!(rec["fds"], json!([0, 1, 2, 5, 10, 11, 12]));
    assert_eq!(rec["token_sha256"], sha256_hex(token.as_bytes()));
    assert!(!rec.to_string().contains(&token));
    assert_eq!(status, ran_to_exit(rec, 0));
}

/// The shim keeps no copy of a passed descriptor once the target runs (bwrap closes each bind
/// descriptor once used; a copy in the shim would keep the object open for the session's life).
#[test]
fn the_shim_keeps_no_passed_descriptor_after_the_spawn() {
    let (_d, record) = record_dir();
    let (n10, n11) = (devnull(), devnull());
    let (child, mut status) = start_shim(
        shim_cmd(
            &record,
            &[
                "--pass-fds",
                "10-11",
                "--",
                &fake_agent_arg(),
                "--sleep",
                "30",
            ],
        ),
        &[(n10.as_fd(), 10), (n11.as_fd(), 11)],
    );
    assert_eq!(next_line(&mut status)["event"], "started");
    let recs = wait_for_records(&record, 1, TIMEOUT);
    assert_eq!(recs[0]["fds"], json!([0, 1, 2, 10, 11]));
    let shim_fds: Vec<i32> = std::fs::read_dir(format!("/proc/{}/fd", child.id()))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().parse().unwrap())
        .collect();
    assert!(
        !shim_fds.contains(&10) && !shim_fds.contains(&11),
        "shim fds: {shim_fds:?}"
    );
    // SAFETY: kill takes two integers.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    child.wait_with_output().unwrap();
}

/// True when `r` has something to read (or is at its end) within `ms` milliseconds.
fn readable_within(r: &BufReader<std::fs::File>, ms: i32) -> bool {
    use std::os::fd::AsRawFd;
    if !r.buffer().is_empty() {
        return true;
    }
    let mut pfd = libc::pollfd {
        fd: r.get_ref().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut pfd, 1, ms) > 0 }
}

/// `--sandbox-status-fd 6`: the target gets a pipe at 6 (and nothing else above 2), and the
/// shim says `started` only once a line with `"child-pid"` (bwrap's report that the sandbox
/// exists) came on it, not before; then the exit as usual.
#[test]
fn sandbox_status_fd_says_started_only_after_child_pid() {
    let (d, record) = record_dir();
    let go = d.path().join("go");
    let script = format!(
        "i=0; while [ ! -e '{}' ] && [ $i -lt 1000 ]; do sleep 0.02; i=$((i + 1)); done; \
         printf '{{\"child-pid\": 1}}\\n' >&6",
        go.display()
    );
    let (child, mut status) = start_shim(
        shim_cmd(
            &record,
            &[
                "--sandbox-status-fd",
                "6",
                "--",
                &fake_agent_arg(),
                "--sh",
                &script,
            ],
        ),
        &[],
    );
    let recs = wait_for_records(&record, 1, TIMEOUT);
    assert_eq!(recs[0]["fds"], json!([0, 1, 2, 6]), "the pipe at 6 only");
    // The target runs, but has not reported the sandbox: no `started` yet.
    assert!(
        !readable_within(&status, 500),
        "a status line came before child-pid: {}",
        next_line(&mut status)
    );
    std::fs::write(&go, "").unwrap();
    assert_eq!(
        next_line(&mut status),
        json!({"event": "started", "pid": recs[0]["pid"]})
    );
    assert_eq!(
        next_line(&mut status),
        json!({"event": "exit", "status": 0})
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
}

/// `--sandbox-status-fd 6` with a target that closes the pipe without a `"child-pid"` line
/// (bwrap failing before any sandbox exists): `sandbox_failed` with its status (128 + signal when
/// killed), never `started`, and the shim exits 126.
#[test]
fn sandbox_status_fd_closed_first_is_sandbox_failed_126() {
    for (script, want) in [
        ("exit 3", 3),
        ("printf '{\"exit-code\": 1}\\n' >&6; exit 1", 1),
        ("sleep 0.3; exit 0", 0),
        ("kill -KILL $$", 128 + 9),
    ] {
        let (_d, record) = record_dir();
        let pipe = token_pipe(&fake_token());
        let run = run_shim(
            shim_cmd(
                &record,
                &[
                    "--pass-token",
                    "--sandbox-status-fd",
                    "6",
                    "--",
                    "/bin/sh",
                    "-c",
                    script,
                ],
            ),
            &[(pipe.as_fd(), 5)],
        );
        assert_eq!(
            run.status,
            vec![
                json!({"event": "no_identity"}),
                json!({"event": "sandbox_failed", "status": want}),
            ],
            "{script:?}"
        );
        assert_eq!(run.code, 126, "{script:?}: stderr {:?}", run.stderr);
        assert_eq!(run.stderr, "", "{script:?}");
    }
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
