//! Running the real `relay-shim` by hand, as the shim tests do: the descriptors it is handed
//! (a token pipe, `/dev/null` leftovers, a status pipe) and what one run left.

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::process::Command;

use relay_token::{ClaudeToken, TokenPipe};
use serde_json::Value;

/// A token pipe's read end holding `token` (write end closed).
///
/// ```
/// let fd = relay_tests::shim::token_pipe(&relay_tests::fake_token());
/// # drop(fd);
/// ```
pub fn token_pipe(token: &str) -> OwnedFd {
    TokenPipe::new(&ClaudeToken::from_bytes(token.as_bytes()).unwrap())
        .unwrap()
        .into_fd()
}

/// `/dev/null`, opened for reading (a leftover descriptor to hand a program).
///
/// ```
/// let f = relay_tests::shim::devnull();
/// # drop(f);
/// ```
pub fn devnull() -> std::fs::File {
    std::fs::File::open("/dev/null").unwrap()
}

/// A pipe, both ends close-on-exec, as `(read end, write end)`.
///
/// ```
/// let (r, w) = relay_tests::shim::pipe_cloexec();
/// # drop((r, w));
/// ```
pub fn pipe_cloexec() -> (OwnedFd, OwnedFd) {
    let (r, w) = std::io::pipe().unwrap();
    (r.into(), w.into())
}

/// A fresh temporary folder and the path of a fake agent's record file in it (not made).
///
/// ```
/// let (_dir, record) = relay_tests::shim::record_dir();
/// assert!(!record.exists());
/// ```
pub fn record_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("record.jsonl");
    (dir, record)
}

/// Reads every status line until EOF (the shim closed its end) as JSON; panics on a line that
/// is not JSON.
///
/// ```
/// let (r, w) = relay_tests::shim::pipe_cloexec();
/// drop(w);
/// assert!(relay_tests::shim::status_lines(r).is_empty());
/// ```
pub fn status_lines(r: OwnedFd) -> Vec<Value> {
    let mut text = String::new();
    std::fs::File::from(r).read_to_string(&mut text).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("status {l:?}: {e}")))
        .collect()
}

/// What one shim run left.
#[derive(Debug)]
pub struct ShimRun {
    /// The exit code (a run killed by a signal panics in [`run`]).
    pub code: i32,
    /// The shim's pid.
    pub pid: u32,
    /// Its standard error (empty unless piped).
    pub stderr: String,
    /// Its status lines.
    pub status: Vec<Value>,
}

/// Spawns `cmd` (a `relay-shim` command line) with its status pipe at `status_fd` and `fds` at
/// their numbers, reads the status lines to the end, and waits for it.
///
/// ```no_run
/// let mut cmd = std::process::Command::new(relay_tests::relay_shim());
/// cmd.args(["--", "true"]);
/// let run = relay_tests::shim::run(cmd, 3, &[]);
/// assert_eq!(run.code, 0);
/// ```
pub fn run(mut cmd: Command, status_fd: RawFd, fds: &[(BorrowedFd<'_>, RawFd)]) -> ShimRun {
    let (r, w) = pipe_cloexec();
    let mut all = vec![(w.as_fd(), status_fd)];
    all.extend_from_slice(fds);
    let child = crate::spawn_with_fds(&mut cmd, &all).unwrap();
    drop(all);
    drop(w);
    let pid = child.id();
    let status = status_lines(r);
    let out = child.wait_with_output().unwrap();
    ShimRun {
        code: out.status.code().expect("shim killed by a signal"),
        pid,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        status,
    }
}
