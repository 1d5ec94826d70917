//! The shim's command line: its options, their rules and usage errors, and the session id.

use std::ffi::OsString;
use std::fmt;
use std::os::fd::RawFd;
use std::path::PathBuf;

use relay_token::{MAX_PASS_FDS, TOKEN_FD};

use super::identity;
use super::session_id::SessionId;

/// The status descriptor used when `--status-fd` is not given (without `--identity`).
pub const DEFAULT_STATUS_FD: RawFd = 3;

/// The status descriptor used with `--identity` when `--status-fd` is not given (fd 3 then
/// carries the launch secret).
pub const IDENTITY_STATUS_FD: RawFd = 4;

/// The program `--sandbox-profile` runs the target under (macOS).
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// The variable that carries `--session-id` to the target.
pub const SESSION_ID_VAR: &str = "RELAY_SESSION_ID";

/// The one-line synopsis printed with usage errors.
pub const USAGE: &str =
    "usage: relay-shim [--pass-token] [--keep-env NAME]... [--identity] [--pty] \
     [--sandbox-profile PATH] [--status-fd N] [--pass-fds FIRST-LAST] [--sandbox-status-fd N] \
     [--session-id ID] [--cleanup DIR] -- PROGRAM [ARGS...]";

/// The parsed command line of `relay-shim`.
///
/// ```
/// use relay_shim::ShimOptions;
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
    /// `--pass-token`: hand the shim's fd 5 to the target at fd 5, and drop from the target's
    /// environment what [`relay_token::ChildEnv::drops_beside_token`] names (the credentials
    /// Claude Code prefers over the descriptor, a parent session's markers). Without it the
    /// target never gets `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR`.
    pub pass_token: bool,
    /// `--keep-env NAME` (repeatable): a variable of the shim's own environment the target keeps
    /// even though the shim would drop it (a launcher's deliberate choice, such as a template's
    /// `ANTHROPIC_AUTH_TOKEN` with `--pass-token`, or, without it, a template's own
    /// `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR`). With `--pass-token` never that variable,
    /// which then goes beside its descriptor.
    pub keep_env: Vec<String>,
    /// `--identity`: read the launch secret on fd 3 and say Hello on the bridge socket before
    /// anything is started (see [`identity`]). Needs `--session-id`.
    pub identity: bool,
    /// `--pty`: the target leads its own session with fd 0 as its controlling terminal (see
    /// [`pty`](super::pty)).
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
    /// `--cleanup DIR` (absolute): the session folder (`STATE/sessions/ID`) the shim cleans up
    /// when its host was lost before the session ended (DESIGN.md, the flag table).
    pub cleanup: Option<PathBuf>,
    /// The program to run (looked up on `PATH` when it holds no `/`).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

/// A command line `relay-shim` refuses. Its `Display` is one line, without the synopsis.
///
/// ```
/// use relay_shim::{ShimOptions, UsageError};
/// let err = ShimOptions::parse(["--status-fd", "1", "--", "true"]).unwrap_err();
/// assert_eq!(err, UsageError::StatusFdIsStdio(1));
/// assert_eq!(err.to_string(), "--status-fd 1: must not be 0, 1 or 2 (stdio)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
    /// `--keep-env` given an empty name, a name holding `=` or NUL, or the token's variable
    /// together with `--pass-token`.
    BadKeepEnv(String),
    /// `--identity` without `--session-id` (the Hello names the session).
    IdentityWithoutSessionId,
    /// `--sandbox-profile` given a path that is not absolute.
    SandboxProfileNotAbsolute(String),
    /// `--cleanup` given a path that is not absolute.
    CleanupNotAbsolute(String),
    /// `--sandbox-profile` on a system without `sandbox-exec` (anything but macOS).
    SandboxProfileUnsupported,
    /// `--pass-fds` not `FIRST-LAST` (two descriptor numbers, FIRST at most LAST, at most
    /// [`MAX_PASS_FDS`]).
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
            UsageError::BadKeepEnv(v) => write!(
                f,
                "--keep-env {v:?}: must name a variable (no = or NUL), and not {} with \
                 --pass-token",
                relay_token::TOKEN_FD_VAR
            ),
            UsageError::IdentityWithoutSessionId => {
                write!(
                    f,
                    "--identity needs --session-id (the Hello names the session)"
                )
            }
            UsageError::SandboxProfileNotAbsolute(v) => {
                write!(f, "--sandbox-profile {v:?}: must be an absolute path")
            }
            UsageError::CleanupNotAbsolute(v) => {
                write!(f, "--cleanup {v:?}: must be an absolute path")
            }
            UsageError::SandboxProfileUnsupported => write!(
                f,
                "--sandbox-profile is not supported here: {SANDBOX_EXEC} exists on macOS only \
                 (on Linux, wrap the program in bwrap)"
            ),
            UsageError::BadFdRange(v) => write!(
                f,
                "--pass-fds {v:?}: must be FIRST-LAST, two descriptor numbers above 2, at most {}",
                MAX_PASS_FDS
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
pub(super) struct Seen {
    pass_token: bool,
    keep_env: Vec<String>,
    identity: bool,
    pty: bool,
    sandbox_profile: Option<PathBuf>,
    status_fd: Option<RawFd>,
    session_id: Option<SessionId>,
    pass_fds: Option<(RawFd, RawFd)>,
    sandbox_status_fd: Option<RawFd>,
    cleanup: Option<PathBuf>,
}

impl Seen {
    /// Takes one option before `--`; `value` yields its value when it has one.
    pub(super) fn take(
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
            "--keep-env" => {
                self.keep_env.push(keep_env_name(value("--keep-env")?)?);
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
            "--cleanup" => {
                if self.cleanup.is_some() {
                    return Err(UsageError::Repeated("--cleanup"));
                }
                let v = value("--cleanup")?;
                self.cleanup = Some(absolute(v, UsageError::CleanupNotAbsolute)?);
                Ok(())
            }
            "--sandbox-profile" => {
                if self.sandbox_profile.is_some() {
                    return Err(UsageError::Repeated("--sandbox-profile"));
                }
                let v = value("--sandbox-profile")?;
                self.sandbox_profile = Some(absolute(v, UsageError::SandboxProfileNotAbsolute)?);
                Ok(())
            }
            _ => Err(UsageError::UnknownOption(name.to_owned())),
        }
    }

    /// The rules between options, once all are seen.
    pub(super) fn finish(
        self,
        program: OsString,
        args: Vec<OsString>,
    ) -> Result<ShimOptions, UsageError> {
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
        let token_var = relay_token::TOKEN_FD_VAR;
        if self.pass_token && self.keep_env.iter().any(|k| k == token_var) {
            return Err(UsageError::BadKeepEnv(token_var.into()));
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
            keep_env: self.keep_env,
            identity: self.identity,
            pty: self.pty,
            sandbox_profile: self.sandbox_profile,
            status_fd,
            session_id: self.session_id,
            pass_fds: self.pass_fds,
            sandbox_status_fd: self.sandbox_status_fd,
            cleanup: self.cleanup,
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
    /// use relay_shim::{ShimOptions, UsageError};
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

impl ShimOptions {
    /// The command line that [`parse`](Self::parse) reads back as `self`: the flags in one
    /// order (`--status-fd` always written out), `--`, the program and its arguments. relay-host
    /// builds the shim's command line with it, so the two sides cannot drift.
    ///
    /// ```
    /// use relay_shim::{SessionId, ShimOptions};
    /// let opts = ShimOptions::parse(["--pass-token", "--session-id", "s1", "--", "claude"]).unwrap();
    /// let args = opts.to_args();
    /// assert_eq!(args, ["--pass-token", "--status-fd", "3", "--session-id", "s1", "--", "claude"]);
    /// assert_eq!(ShimOptions::parse(args), Ok(opts));
    /// ```
    pub fn to_args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        for (on, flag) in [
            (self.pass_token, "--pass-token"),
            (self.identity, "--identity"),
            (self.pty, "--pty"),
        ] {
            if on {
                a.push(flag.into());
            }
        }
        let mut opt = |name: &str, value: OsString| {
            a.push(name.into());
            a.push(value);
        };
        for name in &self.keep_env {
            opt("--keep-env", name.into());
        }
        if let Some(p) = &self.sandbox_profile {
            opt("--sandbox-profile", p.clone().into_os_string());
        }
        opt("--status-fd", self.status_fd.to_string().into());
        if let Some((lo, hi)) = self.pass_fds {
            opt("--pass-fds", format!("{lo}-{hi}").into());
        }
        if let Some(n) = self.sandbox_status_fd {
            opt("--sandbox-status-fd", n.to_string().into());
        }
        if let Some(id) = &self.session_id {
            opt("--session-id", id.as_str().into());
        }
        if let Some(dir) = &self.cleanup {
            opt("--cleanup", dir.clone().into_os_string());
        }
        a.push("--".into());
        a.push(self.program.clone());
        a.extend(self.args.iter().cloned());
        a
    }
}

/// `--keep-env`'s value: a variable's name (not empty, no `=` or NUL).
fn keep_env_name(v: String) -> Result<String, UsageError> {
    if v.is_empty() || v.contains(['=', '\0']) {
        return Err(UsageError::BadKeepEnv(v));
    }
    Ok(v)
}

/// An option's absolute path, or `err` of the value.
fn absolute(v: String, err: fn(String) -> UsageError) -> Result<PathBuf, UsageError> {
    if !v.starts_with('/') {
        return Err(err(v));
    }
    Ok(PathBuf::from(v))
}

/// A descriptor number: ASCII digits only, fitting an `i32`.
pub(super) fn parse_fd(v: &str) -> Option<RawFd> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// `FIRST-LAST`: two descriptor numbers above 2, FIRST at most LAST, [`MAX_PASS_FDS`] at most
/// in all.
pub(super) fn parse_fd_range(v: &str) -> Option<(RawFd, RawFd)> {
    let (lo, hi) = v.split_once('-')?;
    let (lo, hi) = (parse_fd(lo)?, parse_fd(hi)?);
    (lo > 2 && lo <= hi && ((hi - lo) as usize) < MAX_PASS_FDS).then_some((lo, hi))
}

#[cfg(test)]
mod round_trip {
    use super::*;
    use proptest::prelude::*;

    /// Options as a launcher may build them: each field set or not, values in their ranges.
    fn any_options() -> impl Strategy<Value = ShimOptions> {
        let fd = 6..200i32;
        (
            (any::<bool>(), any::<bool>(), any::<bool>()),
            proptest::option::of(fd.clone()),
            proptest::option::of((0..8i32, 300..400i32)),
            proptest::option::of(fd),
            proptest::option::of("[a-z0-9]{1,16}"),
            "[a-z/]{1,12}",
            proptest::collection::vec(".{0,8}", 0..4),
            proptest::option::of("/[a-z/]{0,12}"),
        )
            .prop_map(
                |((pass_token, identity, pty), status, fds, sb, sid, prog, args, cleanup)| {
                    let status_fd = status.unwrap_or(if identity { 4 } else { 3 });
                    ShimOptions {
                        keep_env: if pass_token {
                            vec!["ANTHROPIC_AUTH_TOKEN".into()]
                        } else {
                            vec![]
                        },
                        pass_token,
                        identity,
                        pty,
                        sandbox_profile: None,
                        status_fd,
                        session_id: sid
                            .or(identity.then(|| "s".into()))
                            .and_then(|s| SessionId::parse(&s)),
                        pass_fds: fds.map(|(lo, n)| (lo + 200, lo + 200 + n)),
                        sandbox_status_fd: sb.filter(|&n| fds.is_none() && n != status_fd),
                        cleanup: cleanup.map(PathBuf::from),
                        program: prog.into(),
                        args: args.into_iter().map(OsString::from).collect(),
                    }
                },
            )
    }

    proptest! {
        /// What the host writes is what the shim reads: parse(to_args(o)) is o.
        #[test]
        fn to_args_reads_back_as_the_same_options(o in any_options()) {
            prop_assert_eq!(ShimOptions::parse(o.to_args()), Ok(o));
        }
    }
}
