//! The logic of `relay-shim`: run one program with a token descriptor it never reads.
//!
//! ```text
//! relay-shim [--pass-token] [--keep-env NAME]... [--identity] [--pty] [--sandbox-profile PATH] [--status-fd N]
//!            [--pass-fds FIRST-LAST] [--sandbox-status-fd N] [--session-id ID] -- PROGRAM [ARGS...]
//! ```
//!
//! The shim's descriptors, by layout (the target always gets 0, 1, 2 and, with
//! `--pass-token`, 5; never 3 or 4):
//!
//! | layout                       | fd 3        | fd 4   | fd 5  |
//! |------------------------------|-------------|--------|-------|
//! | `--identity --pass-token`    | secret      | status | token |
//! | `--pass-token`               | status      | —      | token |
//! | neither                      | status      | —      | —     |
//!
//! - The target gets fds 0, 1, 2 and, with `--pass-token`, fd 5 (the shim's own fd 5, handed on
//!   unread) with `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5`, both set by the library's one
//!   placement (as [`relay_token::TokenPipe`] does), which also drops from the target's
//!   environment the names of [`relay_token::ChildEnv::drops_beside_token`] (`ANTHROPIC_API_KEY`,
//!   `ANTHROPIC_AUTH_TOKEN`, `CLAUDE_CODE_OAUTH_TOKEN`, `CLAUDECODE`, ...), save those named by
//!   `--keep-env NAME`. Without `--pass-token` the target gets no fd 5, even when the shim had
//!   one, and no `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR` either (unless the launcher keeps its
//!   own value with `--keep-env CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR`).
//! - `--identity` (needs `--session-id`): before anything is started, the shim reads the launch
//!   secret from fd 3 and closes it, then says Hello on the socket named by
//!   `RELAY_BRIDGE_SOCKET` and waits for the bridge's OK (see [`identity`]). A failure starts
//!   nothing, closes fd 5 unread and exits 78. The status descriptor then defaults to 4.
//! - Status lines (JSON, one `write` each) go to the status descriptor (default 3, or 4 with
//!   `--identity`): first `{"event":"no_identity"}` (without `--identity`),
//!   `{"event":"hello_ok","pid":SHIM_PID}`, or `{"event":"bad_secret","reason":R}` /
//!   `{"event":"hello_refused","reason":R}` (then nothing else); then
//!   `{"event":"started","pid":P}` and `{"event":"exit","status":S}` or
//!   `{"event":"exit","signal":G}`; or `{"event":"spawn_failed","errno":E}`. No line ever holds
//!   the secret. When the status descriptor is not open the shim runs without status lines. The
//!   status descriptor is close-on-exec in the shim, so the target never inherits it. A write
//!   that fails (the reader went away) stops further status lines; the target is not disturbed.
//! - The target runs in its own process group (with `--pty`, its own session whose controlling
//!   terminal is its fd 0; see [`pty`]). SIGHUP, SIGINT, SIGTERM and SIGQUIT received by
//!   the shim are forwarded to that group (to the target alone if the group is gone); with
//!   `--sandbox-status-fd`, once bwrap has reported the sandbox's init, to the init's group
//!   instead, where the sandboxed program runs (bwrap itself is not signalled: its death would
//!   take the sandbox down with SIGKILL). [`GRACE_SECS`] after the first SIGHUP, SIGINT or
//!   SIGTERM (a terminal's Ctrl-C excepted), what is left is killed (SIGKILL to the init, and so to its whole pid namespace,
//!   and to the target's group). A signal that was ignored when the shim started stays ignored
//!   (and is not forwarded), as shells do.
//! - Started in the foreground of a terminal (one of fds 0, 1, 2 is a terminal whose foreground
//!   group is the shim's) and without `--pty`, the shim makes the target's group the foreground
//!   group (the child does it before exec), so an interactive target can read the terminal
//!   instead of being stopped by SIGTTIN; job control passes through (Ctrl-Z stops the shim's
//!   own group with the same signal so the caller's shell sees the job stop; `fg` hands the
//!   terminal back to the target and continues it); the terminal is given back to the shim's
//!   group when the target ends. Without a terminal, stops of the target are not acted upon.
//! - `--pass-fds FIRST-LAST`: the shim's descriptors FIRST to LAST (each open) are handed to the
//!   target at the same numbers, unread (bwrap's bind descriptors, named in its command line).
//! - `--sandbox-status-fd N` (the target is `bwrap ... --json-status-fd N`): the target gets a
//!   pipe at N, and the shim says `started` only once bwrap reports on it that the sandbox's
//!   namespaces exist (`child-pid`). If the pipe closes first, bwrap failed before any sandbox
//!   existed: the shim waits for it and says `{"event":"sandbox_failed","status":S}` (S bwrap's
//!   exit status, or 128 + signal) instead of `started`, and exits 126. With this option the shim
//!   is also (Linux) a child subreaper, and once bwrap has ended it SIGKILLs the sandbox's init
//!   (held by a pidfd from `child-pid`) and any child it still has: bwrap killed just after it made
//!   the sandbox cannot leave the sandbox running alone.
//! - `--sandbox-profile PATH` (absolute): on macOS the target runs under
//!   `/usr/bin/sandbox-exec -f PATH -- PROGRAM ARGS...`; elsewhere the option is refused.
//! - `--session-id ID` (`[A-Za-z0-9._-]{1,64}`, not starting with `.` or `-`) is exported to the target as
//!   [`SESSION_ID_VAR`] (`RELAY_SESSION_ID`). `RELAY_BRIDGE_SOCKET` and `RELAY_LAUNCH_FD` are
//!   removed from the target's environment; nothing else is changed.
//! - Exit: the target's status; 128 + signal when it was killed; 127 when the program was not
//!   found; 126 on other spawn failures; 78 when the launch identity fails; 70 on a usage or
//!   internal error (nothing started).
//!
//! ```no_run
//! // The whole of relay-shim's main:
//! // SAFETY: called once, from main; this process owns its inherited fds 3, 5 and status fd.
//! let code = unsafe { relay_shim::run_cli(std::env::args_os().skip(1)) };
//! std::process::exit(code);
//! ```

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::exit::ExitCode;
use relay_token::sys;
use relay_token::{FdMap, TOKEN_FD};

mod cleanup;
pub mod exit;
pub mod forwarder;
pub mod heap;
pub mod identity;
mod options;
pub mod pty;
mod sandbox_init;
mod session_id;
mod signals;
mod status;
mod terminal;

pub use options::{
    ShimOptions, UsageError, DEFAULT_STATUS_FD, IDENTITY_STATUS_FD, SANDBOX_EXEC, SESSION_ID_VAR,
    USAGE,
};
use sandbox_init::SandboxInit;
pub use session_id::SessionId;
use signals::*;
pub use signals::{FORWARDED_SIGNALS, GRACE_SECS};
use status::*;
pub use status::{StatusEvent, StatusLineError};
use terminal::*;

/// Parses `args` (the arguments after the program name) and runs the shim: the whole of
/// `relay-shim`. Usage errors go to stderr (the error and the synopsis) and return
/// [`ExitCode::Internal`] (70); `--help` prints the synopsis to stdout and returns 0. Returns the exit code.
///
/// # Safety
///
/// Same as [`run`]: the calling process owns its descriptors 3 and 5 and the status descriptor
/// (they were inherited and nothing else in the process uses them); call it once, from `main`.
///
/// ```no_run
/// // SAFETY: called once, from main; this process owns its inherited fds 3, 5 and status fd.
/// let code = unsafe { relay_shim::run_cli(std::env::args_os().skip(1)) };
/// std::process::exit(code);
/// ```
pub unsafe fn run_cli<I>(args: I) -> i32
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    if matches!(args.first().and_then(|a| a.to_str()), Some("-h" | "--help")) {
        println!("{USAGE}");
        return 0;
    }
    match ShimOptions::parse(args) {
        // SAFETY: forwarded from this function's own contract.
        Ok(opts) => unsafe { run(&opts) },
        Err(e) => {
            eprintln!("relay-shim: {e}\n{USAGE}");
            ExitCode::Internal.code()
        }
    }
}

/// Runs the target described by `opts` and waits for it; returns the shim's exit code.
///
/// Takes over descriptor 5 (with `pass_token`), `opts.status_fd` and, with `identity`, fd 3:
/// fd 5 and the status descriptor are marked close-on-exec and closed by the time this returns
/// (fd 5 as soon as the spawn returns, or unread when the identity fails); fd 3 is read and
/// closed before anything starts. Installs handlers for [`FORWARDED_SIGNALS`] that forward
/// them to the target's group.
///
/// # Safety
///
/// The calling process must own descriptor 5 (with `pass_token`), fd 3 (with `identity`) and
/// `opts.status_fd` when they are open: nothing else in the process may use or close them. In
/// practice: call it once, from the `main` of a process that inherited them.
///
/// ```
/// use std::os::fd::IntoRawFd;
/// use relay_shim::{run, ShimOptions};
///
/// let (mut r, w) = std::io::pipe()?;
/// let mut opts = ShimOptions::parse(["--", "sh", "-c", "exit 3"]).unwrap();
/// opts.status_fd = w.into_raw_fd(); // handed over: `run` closes it
/// // SAFETY: the status descriptor was just handed over; fd 5 is not involved (no pass_token).
/// assert_eq!(unsafe { run(&opts) }, 3);
/// let mut lines = String::new();
/// std::io::Read::read_to_string(&mut r, &mut lines)?;
/// assert!(lines.starts_with("{\"event\":\"no_identity\"}\n{\"event\":\"started\",\"pid\":"));
/// assert!(lines.ends_with("{\"event\":\"exit\",\"status\":3}\n"));
/// # Ok::<(), std::io::Error>(())
/// ```
pub unsafe fn run(opts: &ShimOptions) -> i32 {
    // The host (the parent) this shim starts under: if it is gone when the session ends, the
    // shim does its cleanup.
    let cleanup = cleanup::Cleanup::new(opts.cleanup.as_deref());
    // The token descriptor first: refuse before anything is started.
    // SAFETY: forwarded from this function's own contract.
    let token_fd = match unsafe { claim_token_fd(opts.pass_token) } {
        Ok(fd) => fd,
        Err(code) => return code,
    };
    // SAFETY: as above; the parser keeps the status descriptor off fd 5 with pass_token and
    // off fd 3 with identity.
    let mut status = match unsafe { StatusOut::claim(opts.status_fd) } {
        Ok(s) => s,
        Err(code) => return code,
    };
    // SAFETY: as above; the parser keeps the range off every descriptor claimed above.
    let passed = match unsafe { claim_passed_fds(opts.pass_fds) } {
        Ok(fds) => fds,
        Err(code) => return code,
    };
    // SAFETY: as above (fd 3 with identity).
    let first = unsafe { identify(opts) };
    status.send(first);
    if first.exit_code() != 0 {
        // Nothing started: the token descriptor is closed unread.
        drop(token_fd);
        return first.exit_code();
    }

    let mut cmd = target_command(opts);
    if let Err(e) = install_forwarders() {
        eprintln!("relay-shim: cannot install signal handlers: {e}");
        return ExitCode::Internal.code();
    }
    let tty = hand_terminal_to_target(&mut cmd, opts);
    let fds = TargetFds {
        token: token_fd,
        passed,
        sandbox_status: opts.sandbox_status_fd,
    };
    if opts.sandbox_status_fd.is_some() {
        // A sandbox whose bwrap dies early is reparented here, not to init: see `end_orphans`.
        become_subreaper();
    }
    let (pid, sandbox_status) = match spawn_target(&mut cmd, fds, tty, &opts.program) {
        Ok(spawned) => spawned,
        Err(event) => {
            status.send(event);
            return event.exit_code();
        }
    };
    // Kept open until the end: bwrap writes its exit there too.
    let (_sandbox_status, sandbox_init) = match wait_sandbox(sandbox_status, pid, tty) {
        Ok(found) => found,
        Err(event) => {
            end_orphans();
            status.send(event);
            return event.exit_code();
        }
    };
    if let Some(init) = &sandbox_init {
        crate::forwarder::set_sandbox_init(init.pid, init.fd.as_raw_fd());
    }
    status.send(StatusEvent::Started { pid: pid as u32 });

    supervise(pid, tty, sandbox_init, &mut status, cleanup.as_ref())
}

/// After `started`: waits for the target to end, ends what the sandbox left (its init, orphans),
/// takes the terminal back, sends the final status line and runs the cleanup; returns the
/// shim's exit code.
fn supervise(
    pid: libc::pid_t,
    tty: Option<RawFd>,
    sandbox_init: Option<SandboxInit>,
    status: &mut StatusOut,
    cleanup: Option<&cleanup::Cleanup>,
) -> i32 {
    heap::trim_heap();
    let waited = wait_exit(pid, tty);
    crate::forwarder::cancel_kill();
    // bwrap ended: so must its sandbox. bwrap killed in the moment after it made the sandbox,
    // before the sandbox's init tied itself to bwrap's life, leaves that init running alone.
    if let Some(init) = sandbox_init {
        init.kill();
    }
    end_orphans();
    if let Some(tty) = tty {
        take_terminal_back(tty);
    }
    let event = match waited {
        Ok(ev) => ev,
        Err(e) => {
            eprintln!("relay-shim: waiting for pid {pid}: {e}");
            return ExitCode::Internal.code();
        }
    };
    status.send(event);
    if let Some(c) = cleanup {
        c.after(event);
    }
    event.exit_code()
}

/// With `pass_token`: checks that fd 5 is open and takes it (close-on-exec for the shim).
/// Without: `None`. On failure, prints one stderr line and returns [`ExitCode::Internal`] (70).
///
/// # Safety
///
/// The process owns its fd 5 when `pass_token` is set (see [`run`]).
unsafe fn claim_token_fd(pass_token: bool) -> Result<Option<OwnedFd>, i32> {
    if !pass_token {
        return Ok(None);
    }
    // SAFETY: forwarded from this function's own contract.
    unsafe {
        claim_fd(TOKEN_FD, || {
            "--pass-token: fd 5 is not open (it must hold the token pipe)".into()
        })
    }
    .map(Some)
}

/// With `range`: checks that each descriptor in it is open and takes it (close-on-exec for the
/// shim; the target gets it at the same number). On failure, prints one stderr line and returns
/// [`ExitCode::Internal`] (70).
///
/// # Safety
///
/// The process owns the descriptors of `range` and nothing else in it holds them (see [`run`]).
unsafe fn claim_passed_fds(range: Option<(RawFd, RawFd)>) -> Result<Vec<OwnedFd>, i32> {
    let Some((lo, hi)) = range else {
        return Ok(Vec::new());
    };
    (lo..=hi)
        // SAFETY: forwarded from this function's own contract.
        .map(|n| unsafe { claim_fd(n, || format!("--pass-fds {lo}-{hi}: fd {n} is not open")) })
        .collect()
}

/// Takes descriptor `n`, close-on-exec for the shim. When it is not open, prints
/// `relay-shim: ` and `not_open()` on stderr and returns [`ExitCode::Internal`] (70).
///
/// # Safety
///
/// The process owns `n` when it is open, and nothing else in it holds it.
unsafe fn claim_fd(n: RawFd, not_open: impl FnOnce() -> String) -> Result<OwnedFd, i32> {
    if sys::fd_flags(n).is_err() {
        eprintln!("relay-shim: {}", not_open());
        return Err(ExitCode::Internal.code());
    }
    // SAFETY: fd `n` is open (checked above) and, by this function's contract, ours.
    let fd = unsafe { OwnedFd::from_raw_fd(n) };
    if let Err(e) = sys::set_cloexec(fd.as_fd(), true) {
        eprintln!("relay-shim: fd {n}: cannot mark close-on-exec: {e}");
        return Err(ExitCode::Internal.code());
    }
    Ok(fd)
}

/// The launch identity, before anything is started: `no_identity` without `--identity`;
/// else the secret from fd 3 (closed whatever happens) and the Hello on the bridge socket,
/// giving `hello_ok`, or `bad_secret` / `hello_refused` (with one stderr line).
///
/// # Safety
///
/// With `opts.identity`, the process owns its fd 3 (see [`run`]).
unsafe fn identify(opts: &ShimOptions) -> StatusEvent {
    if !opts.identity {
        return StatusEvent::NoIdentity;
    }
    // SAFETY: forwarded from this function's own contract.
    let secret = match unsafe { identity::take_secret() } {
        Ok(s) => s,
        Err(e) => {
            eprintln!("relay-shim: --identity: fd 3 holds no launch secret: {e}");
            return StatusEvent::BadSecret { reason: e.reason() };
        }
    };
    let Some(session) = &opts.session_id else {
        // The parser refuses this pair; a caller that built the options itself gets no start.
        eprintln!(
            "relay-shim: --identity: {}",
            UsageError::IdentityWithoutSessionId
        );
        return StatusEvent::HelloRefused {
            reason: "no_session_id",
        };
    };
    let socket = std::env::var_os(identity::BRIDGE_SOCKET_VAR);
    match identity::say_hello(socket.as_deref(), session, &secret) {
        Ok(()) => StatusEvent::HelloOk {
            pid: std::process::id(),
        },
        Err(e) => {
            eprintln!("relay-shim: --identity: the Hello was refused: {e}");
            StatusEvent::HelloRefused { reason: e.reason() }
        }
    }
}

/// The target's command: the program (under `sandbox-exec` with `--sandbox-profile`), its
/// arguments, its own process group (or, with `--pty`, its own session), `RELAY_SESSION_ID`,
/// and none of the shim's bridge variables.
fn target_command(opts: &ShimOptions) -> Command {
    let (program, wrapper) = target_argv(opts);
    let mut cmd = Command::new(program);
    cmd.args(wrapper).args(&opts.args);
    cmd.env_remove(identity::BRIDGE_SOCKET_VAR)
        .env_remove(identity::LAUNCH_FD_VAR);
    if opts.pass_token {
        // The token's spawn drops the inherited credentials that would outrank fd 5
        // (`ChildEnv::drops_beside_token`), except what the caller set on `cmd`: the names the
        // launcher asked to keep are set here, so they stay.
        for name in &opts.keep_env {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
    } else if !opts.keep_env.iter().any(|k| k == relay_token::TOKEN_FD_VAR) {
        // The variable never reaches a target without its descriptor, unless the launcher
        // says it set it on purpose (`--keep-env`).
        cmd.env_remove(relay_token::TOKEN_FD_VAR);
    }
    if opts.pty {
        pty::lead_session_on_stdin(&mut cmd);
    } else if opts.sandbox_profile.is_some() {
        // A sandboxed target leads a session with no terminal (as bwrap's --new-session does on
        // Linux): it cannot push keystrokes into the operator's terminal with TIOCSTI.
        pty::lead_session_without_terminal(&mut cmd);
    } else {
        cmd.process_group(0);
    }
    if let Some(id) = &opts.session_id {
        cmd.env(SESSION_ID_VAR, id.as_str());
    }
    cmd
}

/// The program to exec and the arguments that come before `opts.args`: the program itself, or
/// `sandbox-exec -f PROFILE -- PROGRAM` with `--sandbox-profile`.
///
/// ```
/// use relay_shim::{target_argv, ShimOptions};
/// let mut opts = ShimOptions::parse(["--", "claude", "-p"]).unwrap();
/// assert_eq!(target_argv(&opts), ("claude".as_ref(), vec![]));
/// opts.sandbox_profile = Some("/s/p.sb".into());
/// let (program, before) = target_argv(&opts);
/// assert_eq!(program, "/usr/bin/sandbox-exec");
/// assert_eq!(before, ["-f", "/s/p.sb", "--", "claude"]);
/// ```
pub fn target_argv(opts: &ShimOptions) -> (&OsStr, Vec<&OsStr>) {
    match &opts.sandbox_profile {
        Some(profile) => (
            OsStr::new(SANDBOX_EXEC),
            vec![
                OsStr::new("-f"),
                profile.as_os_str(),
                OsStr::new("--"),
                &opts.program,
            ],
        ),
        None => (&opts.program, Vec::new()),
    }
}

/// The descriptors the target gets besides stdio.
struct TargetFds {
    /// The token, at fd 5.
    token: Option<OwnedFd>,
    /// `--pass-fds`, each at its own number.
    passed: Vec<OwnedFd>,
    /// `--sandbox-status-fd`: the number bwrap reports the sandbox's start on.
    sandbox_status: Option<RawFd>,
}

/// Spawns the target with its descriptors and closes the shim's copies of the token and the
/// passed ones at once, success or not. Returns the target's pid and, with a sandbox status
/// descriptor, the read end of its pipe; or the `spawn_failed` event (with one stderr line).
fn spawn_target(
    cmd: &mut Command,
    fds: TargetFds,
    tty: Option<RawFd>,
    program: &OsStr,
) -> Result<(libc::pid_t, Option<OwnedFd>), StatusEvent> {
    let pipe = match fds.sandbox_status.map(|_| sys::pipe2_cloexec()).transpose() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("relay-shim: sandbox status pipe: {e}");
            return Err(StatusEvent::SpawnFailed {
                errno: e.raw_os_error().unwrap_or(libc::EMFILE),
            });
        }
    };
    let mut map = FdMap::new();
    // The options were checked for collisions when parsed; a refusal here is an internal error.
    let mut placed: io::Result<()> = Ok(());
    for fd in &fds.passed {
        placed = placed.and_then(|()| Ok(map.place(fd.as_fd(), fd.as_raw_fd()).map(drop)?));
    }
    if let (Some((_, w)), Some(n)) = (&pipe, fds.sandbox_status) {
        placed = placed.and_then(|()| Ok(map.place(w.as_fd(), n).map(drop)?));
    }
    let spawned = match (placed, &fds.token) {
        (Err(e), _) => Err(e),
        (Ok(()), Some(fd)) => relay_token::spawn_with_token_fd(cmd, fd.as_fd(), map),
        (Ok(()), None) => map.spawn(cmd),
    };
    // Our copies of the token and passed descriptors (and the pipe's write end) go now.
    let read_end = pipe.map(|(r, _)| r);
    drop(fds);
    match spawned {
        Ok(child) => {
            let pid = child.id() as libc::pid_t;
            // The child's stdio is inherited: dropping `Child` closes nothing and does not wait.
            drop(child);
            crate::forwarder::set_target(pid);
            Ok((pid, read_end))
        }
        Err(e) => {
            // The child may have taken the terminal before its exec failed.
            if let Some(tty) = tty {
                take_terminal_back(tty);
            }
            let errno = e.raw_os_error().unwrap_or(libc::EINVAL);
            eprintln!(
                "relay-shim: cannot run {}: {}",
                show(program),
                sys::errno_words(errno)
            );
            Err(StatusEvent::SpawnFailed { errno })
        }
    }
}

/// With a sandbox status pipe: reads it until bwrap reports the sandbox's namespaces
/// (`"child-pid"`), and returns the pipe (bwrap writes its exit there later). If the pipe ends
/// first, bwrap failed before any sandbox existed: waits for it and returns `sandbox_failed`
/// with its status. Without one, nothing to wait for.
fn wait_sandbox(
    status: Option<OwnedFd>,
    pid: libc::pid_t,
    tty: Option<RawFd>,
) -> Result<(Option<OwnedFd>, Option<SandboxInit>), StatusEvent> {
    let Some(status) = status else {
        return Ok((None, None));
    };
    let mut said: Vec<u8> = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        match sys::read(status.as_fd(), &mut buf) {
            Ok(0) => break,
            Ok(n) => {
                said.extend_from_slice(&buf[..n]);
                if said.windows(11).any(|w| w == b"\"child-pid\"") {
                    let init = SandboxInit::from_status(&said);
                    return Ok((Some(status), init));
                }
                if said.len() > 4096 {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let status = match wait_exit(pid, tty) {
        Ok(StatusEvent::Exited { status }) => status,
        Ok(StatusEvent::Signaled { signal }) => 128 + signal,
        _ => ExitCode::Internal.code(),
    };
    Err(StatusEvent::SandboxFailed { status })
}

/// Makes the shim the reaper of its descendants whose parent dies (Linux; elsewhere nothing).
fn become_subreaper() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER, 1) takes integers only; a failure is ignored (the
    // orphan then goes to init, as before).
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// Once the target has been reaped, any child the shim still has is a sandbox's init that bwrap
/// left behind (killed in the moment between making the sandbox and the init tying itself to
/// bwrap's life): SIGKILL it (its whole pid namespace goes with it) and reap it. Bounded: at most
/// 64 children, each waited for.
fn end_orphans() {
    #[cfg(target_os = "linux")]
    {
        let me = std::process::id();
        let Ok(list) = std::fs::read_to_string(format!("/proc/{me}/task/{me}/children")) else {
            return;
        };
        for pid in list
            .split_whitespace()
            .filter_map(|p| p.parse::<libc::pid_t>().ok())
            .take(64)
        {
            // SAFETY: kill and waitpid take integers and a valid pointer; `pid` is this
            // process's own unreaped child, so its number cannot have been reused.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                let mut raw = 0;
                libc::waitpid(pid, &mut raw, 0);
            }
        }
    }
}

/// A program name for an error line.
fn show(p: &OsStr) -> String {
    format!("{:?}", p.to_string_lossy())
}

/// Waits for `pid` to exit. The pid is withdrawn from the signal handler *before* the child is
/// reaped (`waitid(WNOWAIT)` first), so a late signal can never hit a recycled pid.
///
/// With a terminal (`tty`), job control passes through: when the target stops (Ctrl-Z, or a
/// read from the background), the shim takes the terminal back and stops its own group with the
/// same signal, so the caller's shell sees the job stop; once continued, it gives the terminal
/// back to the target if the shim is in the foreground (`fg`), and continues the target's group.
/// Without a terminal a stopped target is simply waited for.
fn wait_exit(pid: libc::pid_t, tty: Option<RawFd>) -> io::Result<StatusEvent> {
    let mut flags = libc::WEXITED | libc::WNOWAIT;
    if tty.is_some() {
        flags |= libc::WSTOPPED;
    }
    loop {
        let mut info = sys::waitid(pid, flags)?;
        if info.si_code != libc::CLD_STOPPED {
            break;
        }
        // A stop: consume the event (WNOWAIT left it), then pass it on.
        // SAFETY: as above.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WSTOPPED | libc::WNOHANG,
            )
        };
        if rc != 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
        if let Some(tty) = tty {
            // SAFETY: si_status of a CLD_STOPPED siginfo is the stop signal.
            let sig = unsafe { info.si_status() };
            take_terminal_back(tty);
            // SAFETY: kill takes integers; 0 is the shim's own group. Returns once continued
            // (or at once when the group is orphaned and the stop is discarded).
            unsafe { libc::kill(0, if sig > 0 { sig } else { libc::SIGTSTP }) };
            // SAFETY: getpgrp and tcgetpgrp take integers only.
            if unsafe { libc::tcgetpgrp(tty) == libc::getpgrp() } {
                give_terminal(tty, pid);
            }
            crate::forwarder::forward(pid, libc::SIGCONT);
        }
    }
    crate::forwarder::clear_target();
    crate::forwarder::clear_sandbox_init();
    let mut raw: libc::c_int = 0;
    loop {
        // SAFETY: `raw` is valid for writes.
        let rc = unsafe { libc::waitpid(pid, &mut raw, 0) };
        if rc == pid {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    if libc::WIFSIGNALED(raw) {
        Ok(StatusEvent::Signaled {
            signal: libc::WTERMSIG(raw),
        })
    } else {
        Ok(StatusEvent::Exited {
            status: libc::WEXITSTATUS(raw),
        })
    }
}
