//! The start of one session: spawn the shim with the status pipe at 3 (or 4), the token pipe at
//! 5 and bwrap's bind descriptors from [`confine::BIND_FD_BASE`], wait for its `started`
//! (after a confirmed `hello_ok` with the launch identity). The start is recorded by
//! [`crate::launch::session::started`].

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use relay_shim::StatusEvent;

use crate::launch::sandbox::confine;
use crate::launch::sandbox::SessionArgv;
use crate::launch::shim::error::{ShimError, StartError};
use crate::launch::shim::wiring::Gate;
use crate::launch::shim::{ShimCommand, Spawned};
use crate::launch::spawn_error::spawn_err;
use relay_token::FdMap;
use relay_token::{sys, ClaudeToken, TokenPipe};

/// How long the host waits for the shim's `started` line.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Spawns the shim `s`, handing it the status pipe, the wiring's descriptors, bwrap's
/// descriptors (of `argv`, which the caller holds until the session started) and the token
/// (which is dropped here). The signals the launch's guard holds back stay held in the host; the
/// shim gets them from the start ([`crate::launch::tie`]).
pub(crate) fn spawn(
    s: ShimCommand,
    argv: &SessionArgv,
    token: Option<ClaudeToken>,
) -> Result<Spawned, ShimError> {
    let ShimCommand { wiring, mut cmd } = s;
    let (status_r, status_w) = sys::pipe2_cloexec().map_err(spawn_err("status pipe"))?;
    let mut extra = FdMap::new();
    let placing = |e: relay_token::PlaceError| spawn_err("the shim's descriptors")(e.into());
    extra
        .place(status_w.as_fd(), wiring.status_fd())
        .map_err(placing)?;
    wiring.attach(&mut cmd, &mut extra).map_err(placing)?;
    let bind_fds = argv
        .by_fd
        .as_ref()
        .map(|r| r.bind_fds())
        .unwrap_or_default();
    for &(fd, n) in &bind_fds {
        extra.place(fd, n).map_err(placing)?;
    }
    if let Some(f) = &argv.args_file {
        extra.place(f.as_fd(), confine::ARGS_FD).map_err(placing)?;
    }
    let spawned = spawn_with(&mut cmd, token, extra);
    drop(status_w);
    let shim = spawned?;
    Ok(Spawned {
        shim,
        status: BufReader::new(File::from(status_r)),
        gate: wiring.start(START_TIMEOUT),
    })
}

/// Spawns `cmd` with `extra` placed, and the token on its pipe at 5 when there is one.
fn spawn_with(
    cmd: &mut Command,
    token: Option<ClaudeToken>,
    extra: FdMap<'_>,
) -> Result<Child, ShimError> {
    let spawned = match token {
        Some(t) => {
            let pipe = TokenPipe::new(&t).map_err(spawn_err("token pipe"));
            drop(t);
            pipe?.spawn_with(cmd, extra)
        }
        None => extra.spawn(cmd),
    };
    let shim = Path::new(cmd.get_program()).display().to_string();
    spawned.map_err(|e| spawn_err(format!("spawn {shim}"))(e).into())
}

/// Reads status lines until `started` (its pid) or a failure; `gate` judges each line first.
pub(crate) fn read_started(
    status: &mut BufReader<File>,
    timeout: Duration,
    gate: &mut Gate,
    bwrap: Option<&Path>,
) -> Result<i64, ShimError> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // Lines already buffered (one read can bring several) need no poll.
        let buffered = !status.buffer().is_empty();
        if !buffered && (left.is_zero() || !poll_readable(status.get_ref(), left)) {
            let secs = timeout.as_secs();
            return Err(StartError::Timeout { secs }.into());
        }
        let mut line = String::new();
        match status.read_line(&mut line) {
            Ok(0) => return Err(StartError::ShimEnded.into()),
            Ok(_) => {}
            Err(e) => return Err(spawn_err("status pipe")(e).into()),
        }
        let Ok(event) = StatusEvent::parse(&line) else {
            continue;
        };
        gate.check(&event).map_err(StartError::Identity)?;
        if let Some(end) = judge(&event, bwrap) {
            return end;
        }
    }
}

/// What a status line ends: `started` (its pid), the sandbox's or the program's failure, or
/// nothing (`None`: read on).
fn judge(event: &StatusEvent, bwrap: Option<&Path>) -> Option<Result<i64, ShimError>> {
    match *event {
        StatusEvent::Started { pid } => Some(Ok(i64::from(pid))),
        StatusEvent::SandboxFailed { status } => {
            Some(Err(sandbox_failed(bwrap, i64::from(status))))
        }
        StatusEvent::SpawnFailed { errno } => Some(Err(StartError::Program { errno }.into())),
        _ => None,
    }
}

/// The refusal when bwrap ended before it reported the sandbox: the probe's words when bwrap
/// fails even the plainest sandbox (how to install it), else bwrap's status.
fn sandbox_failed(bwrap: Option<&Path>, status: i64) -> ShimError {
    #[cfg(not(target_os = "macos"))]
    if let Some(Err(e)) = bwrap.map(relay_token::sandbox::probe_bwrap) {
        return e.into();
    }
    let bwrap = bwrap.map(Path::to_path_buf);
    StartError::SandboxEnded { bwrap, status }.into()
}

/// `poll(fd, POLLIN, timeout)`: true when readable (or at EOF/error, which a read reports).
fn poll_readable(f: &File, timeout: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd: f.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    loop {
        // SAFETY: `pfd` is one valid pollfd for the duration of the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc >= 0 {
            return rc > 0;
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return true;
        }
    }
}
