//! The fault battery (issue 24): the host's own failures and its operators' mistakes, with the
//! real binaries in throwaway folders under `/var/tmp`. Every loop is bounded in count and time.
//! Build the binaries first: `cargo build -p relay-host -p relay-shim -p relay-tests --bins`.
//! Linux only (bwrap). `docs/RELIABILITY.md` lists each fault and its test.
#![cfg(target_os = "linux")]

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use relay_tests::fixture::Fixture;
use relay_tests::run::{finish_with, Finished};

/// The deadline of one `relay-host` command.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A `relay-host` command on the fixture's folders with a small fixed environment, in its own
/// process group (so a deadline kills it with its children), stdio on `/dev/null`.
fn host_cmd(fx: &Fixture) -> Command {
    let mut cmd = Command::new(&fx.host);
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .env("HOME", &fx.home)
        .env("LANG", "C.UTF-8")
        .env("FAKE_AGENT_RECORD", &fx.record)
        .arg("--config-dir")
        .arg(&fx.config)
        .arg("--state-dir")
        .arg(&fx.state)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    cmd
}

/// Runs `cmd` to its end under [`TIMEOUT`]; panics when the deadline killed it.
fn finish(cmd: &mut Command) -> Finished {
    let f = finish_with(cmd.spawn().unwrap(), TIMEOUT, &|| false);
    assert!(!f.killed, "relay-host did not finish within {TIMEOUT:?}");
    f
}

/// A pipe whose read end is already closed: the write end, as a `Stdio`.
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 just made both; each is owned once, here.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Stdio::from(write)
}

/// Some rows in both logs, so `audit` and `events` have lines to print (a refused launch writes
/// one of each; a few make the output longer than one write).
fn fill_logs(fx: &Fixture) {
    let bad = fx.root.join("bad.json");
    std::fs::write(&bad, r#"{"kind": "claude", "no_such_field": 1}"#).unwrap();
    for _ in 0..3 {
        let f = finish(host_cmd(fx).arg("launch").arg(&bad));
        assert_eq!(f.code(), Some(64), "a refused launch: {}", f.stderr);
    }
}

#[test]
fn a_closed_stdout_or_stderr_pipe_never_panics_the_host() {
    let fx = Fixture::new(&relay_tests::fake_agent());
    fill_logs(&fx);
    let commands: [&[&str]; 6] = [
        &["--json", "audit"],
        &["audit"],
        &["--json", "events"],
        &["events"],
        &["--json", "status"],
        &["status"],
    ];
    for args in commands {
        let plain = finish(host_cmd(&fx).args(args));
        assert_eq!(
            plain.code(),
            Some(0),
            "{args:?} on /dev/null: {}",
            plain.stderr
        );
        // stdout a closed pipe: the report cannot be written; the command says so on stderr
        // and exits 70 (an internal error), without a panic or a signal.
        let mut cmd = host_cmd(&fx);
        cmd.args(args).stdout(closed_pipe()).stderr(Stdio::piped());
        let f = finish(&mut cmd);
        assert_eq!(f.signal(), None, "{args:?}: killed by a signal");
        assert!(!f.stderr.contains("panicked"), "{args:?}: {}", f.stderr);
        assert_eq!(f.code(), Some(70), "{args:?}: stderr {}", f.stderr);
        assert!(
            f.stderr.contains("cannot write to stdout") && f.stderr.contains("Broken pipe"),
            "{args:?}: {}",
            f.stderr
        );
        // stderr a closed pipe as well: nothing can be said, and still no abort.
        let mut cmd = host_cmd(&fx);
        cmd.args(args).stdout(closed_pipe()).stderr(closed_pipe());
        let f = finish(&mut cmd);
        assert_eq!(
            f.signal(),
            None,
            "{args:?}: killed by a signal (both closed)"
        );
        assert_eq!(f.code(), Some(70), "{args:?}: both closed");
    }
    // A refusal whose stderr is a closed pipe keeps its own exit code.
    let bad = fx.root.join("bad.json");
    let mut cmd = host_cmd(&fx);
    cmd.arg("launch").arg(&bad).stderr(closed_pipe());
    let f = finish(&mut cmd);
    assert_eq!(f.signal(), None, "launch refusal: killed by a signal");
    assert_eq!(f.code(), Some(64), "launch refusal with stderr closed");
}

#[test]
fn a_nul_byte_in_the_project_is_refused_with_a_reason() {
    let fx = Fixture::new(&relay_tests::fake_agent());
    let req = fx.root.join("nul.json");
    // `\u0000` in JSON: a NUL inside the project path.
    let project = format!("{}/a\\u0000b", fx.project.display());
    std::fs::write(
        &req,
        format!(r#"{{"kind": "claude", "project": "{project}", "sandbox": true}}"#),
    )
    .unwrap();
    let mut cmd = host_cmd(&fx);
    cmd.args(["--json", "launch"])
        .arg(&req)
        .stderr(Stdio::piped());
    let f = finish(&mut cmd);
    assert_eq!(f.code(), Some(64), "{}", f.stderr);
    let line: serde_json::Value = serde_json::from_str(f.stderr.trim()).unwrap();
    assert_eq!(line["error"], "invalid_spec", "{line}");
    assert_eq!(
        line["message"],
        format!(
            "project {:?}: holds a NUL byte, which no path can",
            format!("{}/a\0b", fx.project.display())
        ),
        "{line}"
    );
    assert!(
        relay_tests::read_records(&fx.record).is_empty(),
        "nothing started"
    );
}
