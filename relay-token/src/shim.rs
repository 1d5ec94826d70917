//! The logic of `relay-shim`: run one program with a token descriptor it never reads.
//!
//! ```text
//! relay-shim [--pass-token] [--identity] [--pty] [--sandbox-profile PATH] [--status-fd N]
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
//!   placement (as [`crate::TokenPipe`] does). Without `--pass-token` the target gets no fd 5,
//!   even when the shim had one.
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
//!   the shim are forwarded to that group (to the target alone if the group is gone). A signal
//!   that was ignored when the shim started stays ignored (and is not forwarded), as shells do.
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
//! let code = unsafe { relay_token::shim::run_cli(std::env::args_os().skip(1)) };
//! std::process::exit(code);
//! ```

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use crate::fds::{FdMap, TOKEN_FD};
use crate::sys;

pub mod identity;
pub mod pty;

/// The status descriptor used when `--status-fd` is not given (without `--identity`).
pub const DEFAULT_STATUS_FD: RawFd = 3;

/// The status descriptor used with `--identity` when `--status-fd` is not given (fd 3 then
/// carries the launch secret).
pub const IDENTITY_STATUS_FD: RawFd = 4;

/// The program `--sandbox-profile` runs the target under (macOS).
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// Exit code for a usage error or an internal error; nothing was started.
pub const EXIT_USAGE: i32 = crate::exit::ExitCode::Internal.code();

/// Exit code when the program was not found (`ENOENT`).
pub const EXIT_NOT_FOUND: i32 = crate::exit::ExitCode::NotFound.code();

/// Exit code for any other spawn failure (not executable, ...).
pub const EXIT_CANNOT_EXEC: i32 = crate::exit::ExitCode::CannotExec.code();

/// The variable that carries `--session-id` to the target.
pub const SESSION_ID_VAR: &str = "RELAY_SESSION_ID";

/// The one-line synopsis printed with usage errors.
pub const USAGE: &str = "usage: relay-shim [--pass-token] [--identity] [--pty] \
     [--sandbox-profile PATH] [--status-fd N] [--pass-fds FIRST-LAST] [--sandbox-status-fd N] \
     [--session-id ID] -- PROGRAM [ARGS...]";

/// The signals the shim forwards to the target's process group.
pub const FORWARDED_SIGNALS: [libc::c_int; 4] =
    [libc::SIGHUP, libc::SIGINT, libc::SIGTERM, libc::SIGQUIT];

/// A session id: 1 to 64 bytes of `[A-Za-z0-9._-]`, not starting with `.` (no hidden or parent
/// folder) nor `-` (never read as an option where it is passed on). The one rule, for
/// `--session-id` and for a request's `session_id` and `resume` alike.
///
/// ```
/// use relay_token::shim::SessionId;
/// assert_eq!(SessionId::parse("s-42.a_b").unwrap().as_str(), "s-42.a_b");
/// assert!(SessionId::parse("").is_none());
/// assert!(SessionId::parse("a b").is_none());
/// assert!(SessionId::parse(&"x".repeat(65)).is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionId(String);

impl SessionId {
    /// The id, if `s` follows the rule.
    ///
    /// ```
    /// use relay_token::shim::SessionId;
    /// assert!(SessionId::parse("abc").is_some());
    /// assert!(SessionId::parse("-rf").is_none());
    /// assert!(SessionId::parse(".hidden").is_none());
    /// ```
    pub fn parse(s: &str) -> Option<SessionId> {
        let ok = (1..=64).contains(&s.len())
            && !s.starts_with(['.', '-'])
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        ok.then(|| SessionId(s.to_owned()))
    }

    /// The id as text.
    ///
    /// ```
    /// assert_eq!(relay_token::shim::SessionId::parse("abc").unwrap().as_str(), "abc");
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The parsed command line of `relay-shim`.
///
/// ```
/// use relay_token::shim::ShimOptions;
/// let opts = ShimOptions::parse(["--pass-token", "--", "claude", "-p", "hi"]).unwrap();
/// assert!(opts.pass_token);
/// assert_eq!(opts.status_fd, 3);
/// assert_eq!(opts.program, "claude");
/// assert_eq!(opts.args, ["-p", "hi"]);
/// let opts = ShimOptions::parse(["--identity", "--session-id", "s1", "--", "claude"]).unwrap();
/// assert_eq!((opts.identity, opts.status_fd), (true, 4));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShimOptions {
    /// `--pass-token`: hand the shim's fd 5 to the target at fd 5.
    pub pass_token: bool,
    /// `--identity`: read the launch secret on fd 3 and say Hello on the bridge socket before
    /// anything is started (see [`identity`]). Needs `--session-id`.
    pub identity: bool,
    /// `--pty`: the target leads its own session with fd 0 as its controlling terminal (see
    /// [`pty`]).
    pub pty: bool,
    /// `--sandbox-profile PATH` (absolute; macOS only): run the target under
    /// `/usr/bin/sandbox-exec -f PATH --`.
    pub sandbox_profile: Option<PathBuf>,
    /// `--status-fd N`: where status lines go (default [`DEFAULT_STATUS_FD`], or
    /// [`IDENTITY_STATUS_FD`] with `--identity`); never 0, 1, 2, nor 5 with `--pass-token`,
    /// nor 3 with `--identity`.
    pub status_fd: RawFd,
    /// `--session-id ID`: exported to the target as [`SESSION_ID_VAR`].
    pub session_id: Option<SessionId>,
    /// `--pass-fds FIRST-LAST`: descriptors handed to the target at the same numbers.
    pub pass_fds: Option<(RawFd, RawFd)>,
    /// `--sandbox-status-fd N`: the target (bwrap) reports the sandbox's start on a pipe at N.
    pub sandbox_status_fd: Option<RawFd>,
    /// The program to run (looked up on `PATH` when it holds no `/`).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

/// A command line `relay-shim` refuses. Its `Display` is one line, without the synopsis.
///
/// ```
/// use relay_token::shim::{ShimOptions, UsageError};
/// let err = ShimOptions::parse(["--status-fd", "1", "--", "true"]).unwrap_err();
/// assert_eq!(err, UsageError::StatusFdIsStdio(1));
/// assert_eq!(err.to_string(), "--status-fd 1: must not be 0, 1 or 2 (stdio)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsageError {
    /// An option the shim does not know, before `--`.
    UnknownOption(String),
    /// An option given twice.
    Repeated(&'static str),
    /// An option that needs a value came last.
    MissingValue(&'static str),
    /// `--status-fd` given something that is not a descriptor number.
    StatusFdNotANumber(String),
    /// `--sandbox-status-fd` given something that is not a descriptor number.
    SandboxStatusFdNotANumber(String),
    /// `--status-fd` 0, 1 or 2.
    StatusFdIsStdio(RawFd),
    /// `--status-fd 5` together with `--pass-token`.
    StatusFdIsTokenFd,
    /// `--status-fd 3` together with `--identity`.
    StatusFdIsSecretFd,
    /// `--session-id` outside `[A-Za-z0-9._-]{1,64}`.
    BadSessionId(String),
    /// `--identity` without `--session-id` (the Hello names the session).
    IdentityWithoutSessionId,
    /// `--sandbox-profile` given a path that is not absolute.
    SandboxProfileNotAbsolute(String),
    /// `--sandbox-profile` on a system without `sandbox-exec` (anything but macOS).
    SandboxProfileUnsupported,
    /// `--pass-fds` not `FIRST-LAST` (two descriptor numbers, FIRST at most LAST, at most 240).
    BadFdRange(String),
    /// A descriptor of `--pass-fds` or `--sandbox-status-fd` that stdio, the status, the token,
    /// the launch secret or the other option already uses.
    FdInUse {
        /// The option.
        opt: &'static str,
        /// The descriptor.
        fd: RawFd,
    },
    /// No `--` before the program (an argument that is not an option came first, or none).
    MissingSeparator,
    /// Nothing (or an empty name) after `--`.
    MissingProgram,
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsageError::UnknownOption(a) => {
                write!(f, "unknown option {a:?} (the program goes after --)")
            }
            UsageError::Repeated(o) => write!(f, "{o} given twice"),
            UsageError::MissingValue(o) => write!(f, "{o} needs a value"),
            UsageError::SandboxStatusFdNotANumber(v) => {
                write!(f, "--sandbox-status-fd {v:?}: not a descriptor number")
            }
            UsageError::StatusFdNotANumber(v) => {
                write!(f, "--status-fd {v:?}: not a descriptor number")
            }
            UsageError::StatusFdIsStdio(n) => {
                write!(f, "--status-fd {n}: must not be 0, 1 or 2 (stdio)")
            }
            UsageError::StatusFdIsTokenFd => {
                write!(f, "--status-fd 5: fd 5 carries the token with --pass-token")
            }
            UsageError::StatusFdIsSecretFd => {
                write!(
                    f,
                    "--status-fd 3: fd 3 carries the launch secret with --identity"
                )
            }
            UsageError::BadSessionId(v) => {
                write!(
                    f,
                    "--session-id {v:?}: must be 1 to 64 of A-Z a-z 0-9 . _ - (not starting with . or -)"
                )
            }
            UsageError::IdentityWithoutSessionId => {
                write!(
                    f,
                    "--identity needs --session-id (the Hello names the session)"
                )
            }
            UsageError::SandboxProfileNotAbsolute(v) => {
                write!(f, "--sandbox-profile {v:?}: must be an absolute path")
            }
            UsageError::SandboxProfileUnsupported => write!(
                f,
                "--sandbox-profile is not supported here: {SANDBOX_EXEC} exists on macOS only \
                 (on Linux, wrap the program in bwrap)"
            ),
            UsageError::BadFdRange(v) => write!(
                f,
                "--pass-fds {v:?}: must be FIRST-LAST, two descriptor numbers above 2, at most 240"
            ),
            UsageError::FdInUse { opt, fd } => write!(
                f,
                "{opt}: fd {fd} is already stdio, the status, the token or the launch secret"
            ),
            UsageError::MissingSeparator => write!(f, "missing -- before the program"),
            UsageError::MissingProgram => write!(f, "no program after --"),
        }
    }
}

impl std::error::Error for UsageError {}

/// The options seen so far, while parsing.
#[derive(Default)]
struct Seen {
    pass_token: bool,
    identity: bool,
    pty: bool,
    sandbox_profile: Option<PathBuf>,
    status_fd: Option<RawFd>,
    session_id: Option<SessionId>,
    pass_fds: Option<(RawFd, RawFd)>,
    sandbox_status_fd: Option<RawFd>,
}

impl Seen {
    /// Takes one option before `--`; `value` yields its value when it has one.
    fn take(
        &mut self,
        name: &str,
        has_inline: bool,
        value: &mut dyn FnMut(&'static str) -> Result<String, UsageError>,
    ) -> Result<(), UsageError> {
        let flag = |set: &mut bool, opt: &'static str| {
            if std::mem::replace(set, true) {
                return Err(UsageError::Repeated(opt));
            }
            Ok(())
        };
        match name {
            "--pass-token" if !has_inline => flag(&mut self.pass_token, "--pass-token"),
            "--identity" if !has_inline => flag(&mut self.identity, "--identity"),
            "--pty" if !has_inline => flag(&mut self.pty, "--pty"),
            "--status-fd" => {
                if self.status_fd.is_some() {
                    return Err(UsageError::Repeated("--status-fd"));
                }
                let v = value("--status-fd")?;
                let n = parse_fd(&v).ok_or(UsageError::StatusFdNotANumber(v))?;
                if n <= 2 {
                    return Err(UsageError::StatusFdIsStdio(n));
                }
                self.status_fd = Some(n);
                Ok(())
            }
            "--session-id" => {
                if self.session_id.is_some() {
                    return Err(UsageError::Repeated("--session-id"));
                }
                let v = value("--session-id")?;
                self.session_id = Some(SessionId::parse(&v).ok_or(UsageError::BadSessionId(v))?);
                Ok(())
            }
            "--pass-fds" => {
                if self.pass_fds.is_some() {
                    return Err(UsageError::Repeated("--pass-fds"));
                }
                let v = value("--pass-fds")?;
                self.pass_fds = Some(parse_fd_range(&v).ok_or(UsageError::BadFdRange(v))?);
                Ok(())
            }
            "--sandbox-status-fd" => {
                if self.sandbox_status_fd.is_some() {
                    return Err(UsageError::Repeated("--sandbox-status-fd"));
                }
                let v = value("--sandbox-status-fd")?;
                let n = parse_fd(&v).ok_or(UsageError::SandboxStatusFdNotANumber(v))?;
                self.sandbox_status_fd = Some(n);
                Ok(())
            }
            "--sandbox-profile" => {
                if self.sandbox_profile.is_some() {
                    return Err(UsageError::Repeated("--sandbox-profile"));
                }
                let v = value("--sandbox-profile")?;
                if !v.starts_with('/') {
                    return Err(UsageError::SandboxProfileNotAbsolute(v));
                }
                self.sandbox_profile = Some(PathBuf::from(v));
                Ok(())
            }
            _ => Err(UsageError::UnknownOption(name.to_owned())),
        }
    }

    /// The rules between options, once all are seen.
    fn finish(self, program: OsString, args: Vec<OsString>) -> Result<ShimOptions, UsageError> {
        let default_fd = if self.identity {
            IDENTITY_STATUS_FD
        } else {
            DEFAULT_STATUS_FD
        };
        let status_fd = self.status_fd.unwrap_or(default_fd);
        if self.pass_token && status_fd == TOKEN_FD {
            return Err(UsageError::StatusFdIsTokenFd);
        }
        if self.identity && status_fd == identity::SECRET_FD {
            return Err(UsageError::StatusFdIsSecretFd);
        }
        if self.identity && self.session_id.is_none() {
            return Err(UsageError::IdentityWithoutSessionId);
        }
        if self.sandbox_profile.is_some() && !cfg!(target_os = "macos") {
            return Err(UsageError::SandboxProfileUnsupported);
        }
        // Descriptors the shim already uses: stdio, the status, the token, the launch secret.
        let used = |n: RawFd| {
            n <= 2
                || n == status_fd
                || (self.pass_token && n == TOKEN_FD)
                || (self.identity && n == identity::SECRET_FD)
        };
        if let Some((lo, hi)) = self.pass_fds {
            if let Some(fd) = (lo..=hi).find(|&n| used(n)) {
                return Err(UsageError::FdInUse {
                    opt: "--pass-fds",
                    fd,
                });
            }
        }
        if let Some(fd) = self.sandbox_status_fd {
            let passed = self
                .pass_fds
                .is_some_and(|(lo, hi)| (lo..=hi).contains(&fd));
            if used(fd) || passed {
                return Err(UsageError::FdInUse {
                    opt: "--sandbox-status-fd",
                    fd,
                });
            }
        }
        Ok(ShimOptions {
            pass_token: self.pass_token,
            identity: self.identity,
            pty: self.pty,
            sandbox_profile: self.sandbox_profile,
            status_fd,
            session_id: self.session_id,
            pass_fds: self.pass_fds,
            sandbox_status_fd: self.sandbox_status_fd,
            program,
            args,
        })
    }
}

impl ShimOptions {
    /// Parses the arguments after the program name. Options come before `--`, in any order,
    /// as `--opt VALUE` or `--opt=VALUE`; everything after `--` is the program and its
    /// arguments, taken as they are.
    ///
    /// ```
    /// use relay_token::shim::{ShimOptions, UsageError};
    /// let o = ShimOptions::parse(["--status-fd=7", "--session-id", "s1", "--", "sh", "-c", "--"]).unwrap();
    /// assert_eq!((o.status_fd, o.session_id.unwrap().as_str()), (7, "s1"));
    /// assert_eq!(o.args, ["-c", "--"]);
    /// assert_eq!(ShimOptions::parse(["true"]), Err(UsageError::MissingSeparator));
    /// assert_eq!(
    ///     ShimOptions::parse(["--pass-token", "--status-fd", "5", "--", "true"]),
    ///     Err(UsageError::StatusFdIsTokenFd)
    /// );
    /// assert_eq!(
    ///     ShimOptions::parse(["--identity", "--session-id", "s", "--status-fd", "3", "--", "true"]),
    ///     Err(UsageError::StatusFdIsSecretFd)
    /// );
    /// ```
    pub fn parse<I>(args: I) -> Result<ShimOptions, UsageError>
    where
        I: IntoIterator,
        I::Item: Into<OsString>,
    {
        let mut it = args.into_iter().map(Into::into);
        let mut seen = Seen::default();
        let mut separated = false;
        while let Some(arg) = it.next() {
            let text = arg.to_string_lossy();
            let (name, inline) = match text.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n.to_owned(), Some(v.to_owned())),
                _ => (text.clone().into_owned(), None),
            };
            if name == "--" && inline.is_none() {
                separated = true;
                break;
            }
            if !text.starts_with('-') {
                return Err(UsageError::MissingSeparator);
            }
            let has_inline = inline.is_some();
            let mut value = |opt: &'static str| -> Result<String, UsageError> {
                match inline.clone() {
                    Some(v) => Ok(v),
                    None => it
                        .next()
                        .map(|v| v.to_string_lossy().into_owned())
                        .ok_or(UsageError::MissingValue(opt)),
                }
            };
            seen.take(&name, has_inline, &mut value)
                .map_err(|e| match e {
                    UsageError::UnknownOption(_) => {
                        UsageError::UnknownOption(text.clone().into_owned())
                    }
                    e => e,
                })?;
        }
        if !separated {
            return Err(UsageError::MissingSeparator);
        }
        let program = it.next().ok_or(UsageError::MissingProgram)?;
        if program.is_empty() {
            return Err(UsageError::MissingProgram);
        }
        seen.finish(program, it.collect())
    }
}

/// A descriptor number: ASCII digits only, fitting an `i32`.
fn parse_fd(v: &str) -> Option<RawFd> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// `FIRST-LAST`: two descriptor numbers above 2, FIRST at most LAST, 240 at most in all.
fn parse_fd_range(v: &str) -> Option<(RawFd, RawFd)> {
    let (lo, hi) = v.split_once('-')?;
    let (lo, hi) = (parse_fd(lo)?, parse_fd(hi)?);
    (lo > 2 && lo <= hi && hi - lo < 240).then_some((lo, hi))
}

/// One status line, as written to the status descriptor.
///
/// ```
/// use relay_token::shim::StatusEvent;
/// assert_eq!(StatusEvent::Started { pid: 42 }.line(), "{\"event\":\"started\",\"pid\":42}\n");
/// assert_eq!(StatusEvent::Signaled { signal: 9 }.line(), "{\"event\":\"exit\",\"signal\":9}\n");
/// assert_eq!(
///     StatusEvent::HelloRefused { reason: "timeout" }.line(),
///     "{\"event\":\"hello_refused\",\"reason\":\"timeout\"}\n"
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusEvent {
    /// `{"event":"no_identity"}`: the first line without `--identity`.
    NoIdentity,
    /// `{"event":"hello_ok","pid":P}`: the bridge confirmed the launch (`P` is the shim's pid).
    HelloOk {
        /// The shim's own pid.
        pid: u32,
    },
    /// `{"event":"bad_secret","reason":R}`: fd 3 did not hold a launch secret; nothing runs.
    BadSecret {
        /// One of [`identity::SecretError::reason`]'s words.
        reason: &'static str,
    },
    /// `{"event":"hello_refused","reason":R}`: the bridge did not confirm; nothing runs.
    HelloRefused {
        /// One of [`identity::Refusal::reason`]'s words.
        reason: &'static str,
    },
    /// `{"event":"started","pid":P}`: the target runs.
    Started {
        /// The target's pid (also its process group id).
        pid: u32,
    },
    /// `{"event":"spawn_failed","errno":E}`: nothing runs.
    SpawnFailed {
        /// The `errno` of the failed spawn (2 for a program not found).
        errno: i32,
    },
    /// `{"event":"sandbox_failed","status":S}`: with `--sandbox-status-fd`, bwrap ended before
    /// it reported the sandbox's namespaces; nothing ran inside.
    SandboxFailed {
        /// bwrap's exit status, or 128 + the signal that killed it.
        status: i32,
    },
    /// `{"event":"exit","status":S}`: the target exited.
    Exited {
        /// Its exit status.
        status: i32,
    },
    /// `{"event":"exit","signal":G}`: the target was killed by a signal.
    Signaled {
        /// The signal number.
        signal: i32,
    },
}

impl StatusEvent {
    /// The JSON line, newline included.
    ///
    /// ```
    /// use relay_token::shim::StatusEvent;
    /// assert_eq!(StatusEvent::Exited { status: 3 }.line(), "{\"event\":\"exit\",\"status\":3}\n");
    /// assert_eq!(StatusEvent::NoIdentity.line(), "{\"event\":\"no_identity\"}\n");
    /// ```
    pub fn line(&self) -> String {
        match *self {
            StatusEvent::NoIdentity => "{\"event\":\"no_identity\"}\n".to_owned(),
            StatusEvent::HelloOk { pid } => format!("{{\"event\":\"hello_ok\",\"pid\":{pid}}}\n"),
            StatusEvent::BadSecret { reason } => {
                format!("{{\"event\":\"bad_secret\",\"reason\":\"{reason}\"}}\n")
            }
            StatusEvent::HelloRefused { reason } => {
                format!("{{\"event\":\"hello_refused\",\"reason\":\"{reason}\"}}\n")
            }
            StatusEvent::Started { pid } => format!("{{\"event\":\"started\",\"pid\":{pid}}}\n"),
            StatusEvent::SpawnFailed { errno } => {
                format!("{{\"event\":\"spawn_failed\",\"errno\":{errno}}}\n")
            }
            StatusEvent::SandboxFailed { status } => {
                format!("{{\"event\":\"sandbox_failed\",\"status\":{status}}}\n")
            }
            StatusEvent::Exited { status } => {
                format!("{{\"event\":\"exit\",\"status\":{status}}}\n")
            }
            StatusEvent::Signaled { signal } => {
                format!("{{\"event\":\"exit\",\"signal\":{signal}}}\n")
            }
        }
    }

    /// The shim's exit code for this event: the status, 128 + signal, 127 for `ENOENT`, 126 for
    /// another spawn failure or a sandbox that failed to start, 78 for an identity failure; 0 for an event that is not final
    /// (`no_identity`, `hello_ok`, `started`).
    ///
    /// ```
    /// use relay_token::shim::StatusEvent;
    /// assert_eq!(StatusEvent::Signaled { signal: 15 }.exit_code(), 143);
    /// assert_eq!(StatusEvent::SpawnFailed { errno: libc::ENOENT }.exit_code(), 127);
    /// assert_eq!(StatusEvent::SpawnFailed { errno: libc::EACCES }.exit_code(), 126);
    /// assert_eq!(StatusEvent::BadSecret { reason: "length" }.exit_code(), 78);
    /// ```
    pub fn exit_code(&self) -> i32 {
        match *self {
            StatusEvent::NoIdentity | StatusEvent::HelloOk { .. } | StatusEvent::Started { .. } => {
                0
            }
            StatusEvent::BadSecret { .. } | StatusEvent::HelloRefused { .. } => {
                identity::EXIT_IDENTITY
            }
            StatusEvent::SpawnFailed { errno } if errno == libc::ENOENT => EXIT_NOT_FOUND,
            StatusEvent::SpawnFailed { .. } | StatusEvent::SandboxFailed { .. } => EXIT_CANNOT_EXEC,
            StatusEvent::Exited { status } => status,
            StatusEvent::Signaled { signal } => 128 + signal,
        }
    }
}

/// Where status lines go: the claimed status descriptor, or nowhere.
struct StatusOut {
    fd: Option<OwnedFd>,
}

impl StatusOut {
    /// Takes the status descriptor `fd` (close-on-exec for the shim); not open means no status
    /// lines. On failure, prints one stderr line and returns [`EXIT_USAGE`].
    ///
    /// # Safety
    ///
    /// The process owns `fd` when it is open (see [`run`]), and it is not fd 5 when fd 5 was
    /// claimed.
    unsafe fn claim(fd: RawFd) -> Result<StatusOut, i32> {
        if sys::fd_flags(fd).is_err() {
            return Ok(StatusOut { fd: None });
        }
        // SAFETY: the descriptor is open and, by this function's contract, ours.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        if let Err(e) = sys::set_cloexec(owned.as_fd(), true) {
            eprintln!("relay-shim: status fd {fd}: cannot mark close-on-exec: {e}");
            return Err(EXIT_USAGE);
        }
        Ok(StatusOut { fd: Some(owned) })
    }

    /// Writes one line with one `write`; on failure stops writing (the reader is gone).
    fn send(&mut self, event: StatusEvent) {
        if let Some(fd) = &self.fd {
            if sys::write_all(fd, event.line().as_bytes()).is_err() {
                self.fd = None;
            }
        }
    }
}

/// Parses `args` (the arguments after the program name) and runs the shim: the whole of
/// `relay-shim`. Usage errors go to stderr (the error and the synopsis) and return
/// [`EXIT_USAGE`]; `--help` prints the synopsis to stdout and returns 0. Returns the exit code.
///
/// # Safety
///
/// Same as [`run`]: the calling process owns its descriptors 3 and 5 and the status descriptor
/// (they were inherited and nothing else in the process uses them); call it once, from `main`.
///
/// ```no_run
/// // SAFETY: called once, from main; this process owns its inherited fds 3, 5 and status fd.
/// let code = unsafe { relay_token::shim::run_cli(std::env::args_os().skip(1)) };
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
            EXIT_USAGE
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
/// use relay_token::shim::{run, ShimOptions};
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
        return EXIT_USAGE;
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
    status.send(StatusEvent::Started { pid: pid as u32 });

    let waited = wait_exit(pid, tty);
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
            return EXIT_USAGE;
        }
    };
    status.send(event);
    event.exit_code()
}

/// A terminal launch: the target's own group must be the terminal's foreground group, or it is
/// stopped (SIGTTIN/SIGTTOU) as soon as it reads the terminal or sets its modes. The child takes
/// the terminal itself, after std's setpgid and before exec, so no read can come first. With
/// `--pty` (or `--sandbox-profile`) the target leads a session of its own instead. Returns the
/// terminal, if any.
fn hand_terminal_to_target(cmd: &mut Command, opts: &ShimOptions) -> Option<RawFd> {
    if opts.pty || opts.sandbox_profile.is_some() {
        return None;
    }
    let tty = foreground_tty()?;
    // SAFETY: the hook runs between fork and exec and makes raw, async-signal-safe calls only
    // (getpid, sigprocmask, tcsetpgrp); it allocates nothing and captures one integer. A failure
    // to take the terminal is not a spawn failure: it is ignored.
    unsafe {
        cmd.pre_exec(move || {
            give_terminal(tty, libc::getpid());
            Ok(())
        });
    }
    Some(tty)
}

/// With `pass_token`: checks that fd 5 is open and takes it (close-on-exec for the shim).
/// Without: `None`. On failure, prints one stderr line and returns [`EXIT_USAGE`].
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
/// [`EXIT_USAGE`].
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
/// `relay-shim: ` and `not_open()` on stderr and returns [`EXIT_USAGE`].
///
/// # Safety
///
/// The process owns `n` when it is open, and nothing else in it holds it.
unsafe fn claim_fd(n: RawFd, not_open: impl FnOnce() -> String) -> Result<OwnedFd, i32> {
    if sys::fd_flags(n).is_err() {
        eprintln!("relay-shim: {}", not_open());
        return Err(EXIT_USAGE);
    }
    // SAFETY: fd `n` is open (checked above) and, by this function's contract, ours.
    let fd = unsafe { OwnedFd::from_raw_fd(n) };
    if let Err(e) = sys::set_cloexec(fd.as_fd(), true) {
        eprintln!("relay-shim: fd {n}: cannot mark close-on-exec: {e}");
        return Err(EXIT_USAGE);
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
/// use relay_token::shim::{target_argv, ShimOptions};
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
    for fd in &fds.passed {
        map.place(fd.as_fd(), fd.as_raw_fd());
    }
    if let (Some((_, w)), Some(n)) = (&pipe, fds.sandbox_status) {
        map.place(w.as_fd(), n);
    }
    let spawned = match &fds.token {
        Some(fd) => crate::pipe::spawn_with_token_fd(cmd, fd.as_fd(), map),
        None => map.spawn(cmd),
    };
    // Our copies of the token and passed descriptors (and the pipe's write end) go now.
    let read_end = pipe.map(|(r, _)| r);
    drop(fds);
    match spawned {
        Ok(child) => {
            let pid = child.id() as libc::pid_t;
            // The child's stdio is inherited: dropping `Child` closes nothing and does not wait.
            drop(child);
            CHILD_PID.store(pid, Ordering::SeqCst);
            flush_pending(pid);
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
        _ => EXIT_USAGE,
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

/// The sandbox's init (bwrap's `child-pid`), held by a pidfd so a later kill never reaches a
/// process that reused its number. Linux only; elsewhere there is no bwrap.
struct SandboxInit(#[cfg_attr(not(target_os = "linux"), allow(dead_code))] OwnedFd);

impl SandboxInit {
    /// The pidfd of the `"child-pid": N` in bwrap's status text, when it can be opened.
    fn from_status(said: &[u8]) -> Option<SandboxInit> {
        let text = std::str::from_utf8(said).ok()?;
        let at = text.find("\"child-pid\"")? + "\"child-pid\"".len();
        let digits: String = text[at..]
            .trim_start_matches([' ', ':'])
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let pid: libc::pid_t = digits.parse().ok().filter(|&p| p > 1)?;
        #[cfg(target_os = "linux")]
        {
            // SAFETY: pidfd_open takes a pid and flags; it returns a new descriptor or -1.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
            // SAFETY: a non-negative result is a descriptor this process now owns, once.
            (fd >= 0).then(|| SandboxInit(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = pid;
            None
        }
    }

    /// SIGKILL to the init (and so to its whole pid namespace); nothing when it has ended.
    fn kill(&self) {
        #[cfg(target_os = "linux")]
        // SAFETY: pidfd_send_signal takes the pidfd this value owns, a signal number, and a null
        // siginfo (as for kill); it cannot reach another process.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.0.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
    }
}

/// A program name for an error line.
fn show(p: &OsStr) -> String {
    format!("{:?}", p.to_string_lossy())
}

/// The target's pid while it can be signalled (0 before the spawn and once it has exited).
static CHILD_PID: AtomicI32 = AtomicI32::new(0);

/// Forwarded signals received while no target was running yet, one bit per signal number.
static PENDING: AtomicU64 = AtomicU64::new(0);

/// Installs [`on_signal`] for each forwarded signal, with `SA_RESTART`, except those that were
/// ignored on entry: they stay ignored (and the target inherits that, as from a shell).
fn install_forwarders() -> io::Result<()> {
    for &sig in &FORWARDED_SIGNALS {
        // SAFETY: `sigaction` is plain old data; all-zero is a valid starting value.
        let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: `sigaction` is plain old data.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        new.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        new.sa_flags = libc::SA_RESTART;
        // SAFETY: `new.sa_mask` is a valid sigset_t to initialise.
        unsafe { libc::sigemptyset(&mut new.sa_mask) };
        // SAFETY: both pointers refer to valid `sigaction` values; the handler is
        // async-signal-safe (atomics and `kill` only).
        if unsafe { libc::sigaction(sig, &new, &mut old) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if old.sa_sigaction == libc::SIG_IGN {
            // SAFETY: restores the disposition just read; the pointer is valid.
            if unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// The handler: forward to the target's group, or remember the signal until there is one.
/// Async-signal-safe: atomics, `kill` and `errno` only.
extern "C" fn on_signal(sig: libc::c_int) {
    // SAFETY: __errno_location returns this thread's errno slot; reading and restoring it keeps
    // the interrupted code's errno intact.
    let errno = unsafe { *sys::errno_slot() };
    let pid = CHILD_PID.load(Ordering::SeqCst);
    if pid > 0 {
        forward(pid, sig);
    } else if (0..64).contains(&sig) {
        PENDING.fetch_or(1 << sig, Ordering::SeqCst);
        // The spawn may have completed between the load and the store: flush here too. The swap
        // in flush_pending makes sure each pending signal is sent once.
        let pid = CHILD_PID.load(Ordering::SeqCst);
        if pid > 0 {
            flush_pending(pid);
        }
    }
    // SAFETY: as above.
    unsafe { *sys::errno_slot() = errno };
}

/// Sends the signals received before the spawn. Async-signal-safe.
fn flush_pending(pid: libc::pid_t) {
    let bits = PENDING.swap(0, Ordering::SeqCst);
    for &sig in &FORWARDED_SIGNALS {
        if bits & (1 << sig) != 0 {
            forward(pid, sig);
        }
    }
}

/// `kill(-pid, sig)`, or `kill(pid, sig)` when the group is gone. Async-signal-safe.
fn forward(pid: libc::pid_t, sig: libc::c_int) {
    // SAFETY: kill takes two integers and touches no memory.
    if unsafe { libc::kill(-pid, sig) } != 0 {
        // SAFETY: as above.
        unsafe { libc::kill(pid, sig) };
    }
}

/// The first of fds 0, 1, 2 that is a terminal whose foreground process group is the shim's
/// own: the shim was started in the foreground of a terminal (a `relay-host run`).
fn foreground_tty() -> Option<RawFd> {
    // SAFETY: getpgrp takes nothing and cannot fail.
    let own = unsafe { libc::getpgrp() };
    // SAFETY: isatty and tcgetpgrp take an int fd and touch no memory of ours.
    (0..=2).find(|&fd| unsafe { libc::isatty(fd) == 1 && libc::tcgetpgrp(fd) == own })
}

/// `tcsetpgrp(tty, pgrp)` with SIGTTOU blocked (a caller outside the foreground group would be
/// stopped otherwise). Errors are ignored. Async-signal-safe: sigprocmask and tcsetpgrp only.
fn give_terminal(tty: RawFd, pgrp: libc::pid_t) {
    // SAFETY: sigset_t is plain old data, initialised by sigemptyset before use.
    let mut block: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above; filled by sigprocmask.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: the pointers refer to valid sigset_t values owned by this frame; tcsetpgrp takes
    // integers only.
    unsafe {
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGTTOU);
        libc::sigprocmask(libc::SIG_BLOCK, &block, &mut old);
        libc::tcsetpgrp(tty, pgrp);
        libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

/// Makes the shim's own group the terminal's foreground group again.
fn take_terminal_back(tty: RawFd) {
    // SAFETY: getpgrp takes nothing and cannot fail.
    give_terminal(tty, unsafe { libc::getpgrp() });
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
            forward(pid, libc::SIGCONT);
        }
    }
    CHILD_PID.store(0, Ordering::SeqCst);
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
