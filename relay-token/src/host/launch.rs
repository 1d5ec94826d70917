//! One launch, in the order of the contract's §9: validate → resolve and read the token → find
//! `relay-shim` and the command → create the session folder (the profile's grants must exist to
//! be resolved) → build the profile → spawn `relay-shim` (status pipe at 3, token pipe at 5)
//! around the sandbox command → wait for `started` → answer → supervise until the session ends.
//! A refusal leaves nothing behind but its audit row and its event: the folders this launch
//! created are removed again.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::request::{Request, Validated};
use super::state::{private_dir, State};
use super::Host;
use crate::env::ChildEnv;
use crate::fds::FdMap;
use crate::path::claude_token_path_in;
use crate::redact::Redactor;
use crate::sandbox::{self, Profile};
use crate::settings::{Sandbox, CLAUDE_CONFIG_PLACEHOLDER, PROJECT_PLACEHOLDER};
use crate::{read_claude_token, sys, TokenPipe};

/// How long the host waits for the shim's `started` line.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The descriptor the shim reads its status pipe from.
pub const STATUS_FD: i32 = 3;

/// Why a launch was refused, with the answer's `error` and the host's exit code.
///
/// ```
/// use relay_token::host::launch::LaunchError;
/// let e = LaunchError::InvalidSpec("request: unknown field `claude_token`".into());
/// assert_eq!((e.code(), e.exit_code(), e.status()), ("invalid_spec", 64, 400));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchError {
    /// The request cannot be launched as written (400, exit 64).
    InvalidSpec(String),
    /// The launch cannot be made safe: the token file, the settings, the sandbox (400, exit 78).
    SandboxUnavailable(String),
    /// The session could not be started (500, exit 71).
    SpawnFailed(String),
}

impl LaunchError {
    /// The answer's `error` field.
    ///
    /// ```
    /// # use relay_token::host::launch::LaunchError;
    /// assert_eq!(LaunchError::SpawnFailed(String::new()).code(), "spawn_failed");
    /// ```
    pub fn code(&self) -> &'static str {
        match self {
            LaunchError::InvalidSpec(_) => "invalid_spec",
            LaunchError::SandboxUnavailable(_) => "sandbox_unavailable",
            LaunchError::SpawnFailed(_) => "spawn_failed",
        }
    }

    /// The answer's `status` field.
    ///
    /// ```
    /// # use relay_token::host::launch::LaunchError;
    /// assert_eq!(LaunchError::SandboxUnavailable(String::new()).status(), 400);
    /// ```
    pub fn status(&self) -> u16 {
        match self {
            LaunchError::SpawnFailed(_) => 500,
            _ => 400,
        }
    }

    /// The host's exit code for this refusal.
    ///
    /// ```
    /// # use relay_token::host::launch::LaunchError;
    /// assert_eq!(LaunchError::SandboxUnavailable(String::new()).exit_code(), 78);
    /// ```
    pub fn exit_code(&self) -> i32 {
        match self {
            LaunchError::InvalidSpec(_) => 64,
            LaunchError::SandboxUnavailable(_) => 78,
            LaunchError::SpawnFailed(_) => 71,
        }
    }

    /// The message (paths only, never a token byte).
    ///
    /// ```
    /// # use relay_token::host::launch::LaunchError;
    /// assert_eq!(LaunchError::SpawnFailed("x".into()).message(), "x");
    /// ```
    pub fn message(&self) -> &str {
        match self {
            LaunchError::InvalidSpec(m)
            | LaunchError::SandboxUnavailable(m)
            | LaunchError::SpawnFailed(m) => m,
        }
    }
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code(), self.message())
    }
}

impl std::error::Error for LaunchError {}

/// How the session's stdin is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stdin {
    /// The host's own stdin (a terminal launch, or a request read from a file).
    Inherit,
    /// `/dev/null` (the request came on stdin).
    Null,
}

/// What the launch is about, for the audit row.
struct Facts<'a> {
    kind: &'a str,
    template: String,
    sandbox: bool,
    token: bool,
    session_id: Option<String>,
}

/// Launches `request` and supervises the session until it ends. Returns the host's exit code:
/// the session's own, or the refusal's code. Every outcome is written to the audit and event
/// logs; a refusal is also printed to stderr.
///
/// ```no_run
/// use relay_token::host::{Host, launch::{launch, Stdin}, request::Request};
/// let host = Host::from_dirs("/etc/relay".into(), "/var/lib/relay".into())?;
/// let code = launch(&host, Request::from_json(r#"{"kind": "claude"}"#)?, Stdin::Inherit);
/// std::process::exit(code);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn launch(host: &Host, request: Request, stdin: Stdin) -> i32 {
    let mut state = match State::open(&host.state_dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("relay-host: state folder {}: {e}", host.state_dir.display());
            return 70;
        }
    };
    let mut facts = Facts {
        kind: request.kind.as_str(),
        template: request.template.clone().unwrap_or_default(),
        sandbox: request.sandbox,
        token: false,
        session_id: request.session_id.clone(),
    };
    match prepare_and_spawn(host, &mut state, request, stdin, &mut facts) {
        Ok(session) => supervise(&state, session),
        Err(e) => {
            refuse(&state, &facts, &e);
            e.exit_code()
        }
    }
}

fn refuse(state: &State, facts: &Facts<'_>, e: &LaunchError) {
    let answer = json!({
        "event": "launch",
        "status": e.status(),
        "error": e.code(),
        "message": state.redactor().redact(e.message()),
        "session_id": facts.session_id,
    });
    let _ = state.event(&answer);
    let _ = state.audit(audit_row(facts, "error", e.message()));
    state.log(&format!("launch refused: {e}"));
    super::human::print_refusal(&answer, state.redactor());
}

fn audit_row(facts: &Facts<'_>, outcome: &str, message: &str) -> Value {
    json!({
        "event": "session_launch",
        "outcome": outcome,
        "kind": facts.kind,
        "template": facts.template,
        "sandbox": facts.sandbox,
        "token": if facts.token { "fd" } else { "none" },
        "session_id": facts.session_id,
        "message": message,
    })
}

/// A spawned session the host supervises.
struct Session {
    id: String,
    shim: std::process::Child,
    status: BufReader<File>,
    _lock: File,
}

fn prepare_and_spawn(
    host: &Host,
    state: &mut State,
    request: Request,
    stdin: Stdin,
    facts: &mut Facts<'_>,
) -> Result<Session, LaunchError> {
    // 1. Validate.
    let settings = host
        .settings()
        .map_err(|e| LaunchError::SandboxUnavailable(e.to_string()))?;
    let v: Validated = request
        .validate(&settings)
        .map_err(|e| LaunchError::InvalidSpec(e.to_string()))?;
    facts.template = v.template.id.clone();
    facts.sandbox = v.sandboxed;
    facts.session_id = Some(v.session_id.clone());
    let session_dir = state.session_dir(&v.session_id);
    if session_running(&session_dir) {
        return Err(LaunchError::InvalidSpec(format!(
            "session {:?} is already running",
            v.session_id
        )));
    }
    // 2. Resolve and read the token. Only a sandboxed, local Claude launch carries it, but every
    //    sandboxed launch denies the file while the setting is set.
    let token_path = if v.sandboxed {
        claude_token_path_in(&settings.claude_token_file, Some(&host.home))
            .map_err(|e| LaunchError::SandboxUnavailable(e.to_string()))?
    } else {
        None
    };
    let token = match (&token_path, v.claude) {
        (Some(p), true) => {
            let t =
                read_claude_token(p).map_err(|e| LaunchError::SandboxUnavailable(e.to_string()))?;
            state.set_redactor(Redactor::new(Some(&t)));
            Some(t)
        }
        _ => None,
    };
    // The audit row says `token: "fd"` only once a shim holding it was spawned.
    let carries_token = token.is_some();
    super::human::note_token(v.claude, v.sandboxed, carries_token);

    // The programs: relay-shim, and the template's command.
    let shim = host
        .find_shim(&settings)
        .map_err(LaunchError::SpawnFailed)?;
    // A remote (ssh) launch names a program on the other machine: it is not looked up here.
    let program = match &v.request.host {
        Some(_) => PathBuf::from(&v.template.command[0]),
        None => resolve_command(&v.template.command[0]).map_err(LaunchError::SpawnFailed)?,
    };

    // The command line.
    let project = v.request.project.clone();
    let claude_config = state.claude_config_dir();
    let subst = |s: &str| -> String {
        let mut s = s.replace(CLAUDE_CONFIG_PLACEHOLDER, &claude_config.to_string_lossy());
        if let Some(p) = &project {
            s = s.replace(PROJECT_PLACEHOLDER, &p.to_string_lossy());
        }
        s
    };
    let mut target: Vec<OsString> = vec![program.clone().into()];
    target.extend(
        v.template.command[1..]
            .iter()
            .map(|a| OsString::from(subst(a))),
    );
    if let (true, Some(r)) = (v.claude, &v.request.resume) {
        target.push("--resume".into());
        target.push(r.into());
    }
    target.extend(v.request.extra_args.iter().map(OsString::from));
    // 3. The session folder and the relay-owned Claude config folder: the profile's grants
    //    must exist to be resolved. Whatever this launch creates is removed if it is refused.
    let session_tmp = session_dir.join("tmp");
    let mut made = Made::default();
    made.create_own(&session_dir)
        .and_then(|_| made.create(&session_tmp))
        .and_then(|_| made.create(&claude_config))
        .map_err(|e| {
            LaunchError::SpawnFailed(format!("session folder {}: {e}", session_dir.display()))
        })?;
    let lock = lock_session(&session_dir)
        .map_err(|e| LaunchError::InvalidSpec(format!("session {:?}: {e}", v.session_id)))?;
    if v.request.keep {
        let _ = state.mark_kept(&v.session_id);
    }

    // 4. The profile, and the command line around it.
    let argv: Vec<OsString> = if v.sandboxed {
        let bwrap = sandbox::find_bwrap(settings.bwrap.as_deref())
            .map_err(|e| LaunchError::SandboxUnavailable(e.to_string()))?;
        let mut profile = build_profile(
            host,
            &v,
            &program,
            &session_tmp,
            &claude_config,
            token_path.as_deref(),
        )?;
        profile.state_dir(state.path().to_path_buf());
        // Programs that run with the token later stay read-only inside any grant that shows
        // them, so a session without the token cannot replace one for the next Claude launch:
        // relay-host, relay-shim (both outside the sandbox), and every template's command.
        for folder in programs_to_protect(&settings, &shim) {
            profile.protect(folder);
        }
        let all_rw = all_rw_grants(host, &settings, project.as_deref(), &claude_config)?;
        // The host's own folders are masked inside any grant that would show them: a session
        // must not read other sessions' files in the state folder, nor rewrite the settings
        // (and so drop the deny) for the next launch. A mask also binds every folder between
        // the grant and it onto itself, so no parent can be renamed away and replaced.
        let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let grants: Vec<PathBuf> = profile
            .read_grants()
            .iter()
            .chain(profile.read_write_grants())
            .map(|g| real(g))
            .collect();
        for own in [&host.config_dir, &host.state_dir] {
            let own_real = real(own);
            if !own.is_dir() || !grants.iter().any(|g| own_real.starts_with(g)) {
                continue;
            }
            if let Some(g) = grants.iter().find(|g| g.starts_with(&own_real)) {
                return Err(LaunchError::SandboxUnavailable(format!(
                    "grant {:?} lies inside the relay's own folder {:?}, which a grant of this \
                     template also shows; move the folder out (--config-dir, --state-dir) or \
                     narrow the grant",
                    g.display().to_string(),
                    own.display().to_string()
                )));
            }
            profile.deny(own.clone());
        }
        let resolved = profile
            .resolve(&all_rw)
            .map_err(|e| LaunchError::SandboxUnavailable(e.to_string()))?;
        // The request's variables reach the sandboxed program only (bwrap's --setenv), never
        // the shim or bwrap, which run outside the sandbox and hold the token's descriptor: a
        // request may name LD_PRELOAD.
        let setenv: Vec<(OsString, OsString)> = v
            .request
            .env
            .iter()
            .map(|(k, val)| (k.into(), val.into()))
            .collect();
        resolved.bwrap_argv_with_env(&bwrap, &setenv, &target)
    } else if let Some(h) = &v.request.host {
        let mut a: Vec<OsString> = vec!["ssh".into(), "-t".into(), "--".into(), h.into()];
        a.extend(target);
        a
    } else {
        target
    };

    super::state::seed_claude_config(&host.config_dir, &claude_config);
    // 5. Spawn relay-shim with the status pipe at 3 and the token pipe at 5.
    let mut env_vars: BTreeMap<String, String> = v
        .template
        .env
        .iter()
        .map(|(k, val)| (k.clone(), subst(val)))
        .collect();
    if !v.sandboxed {
        // Unsandboxed, the request's variables go to the shim's environment too: no token is
        // handed over, and the requester runs its program outside any sandbox anyway.
        env_vars.extend(v.request.env.clone());
    }
    let mut env = ChildEnv::from_current(&env_vars, token.is_some());
    env.set("RELAY_SESSION_ID", &v.session_id);
    if v.sandboxed {
        env.set("TMPDIR", "/tmp");
    } else {
        env.set("TMPDIR", &session_tmp);
    }
    let mut cmd = Command::new(&shim);
    if shim.file_name().is_some_and(|n| n != "relay-shim") {
        // This relay-host itself: started under the name relay-shim, it acts as the shim.
        std::os::unix::process::CommandExt::arg0(&mut cmd, "relay-shim");
    }
    // If the host dies (killed before `started`, or at any time), the shim gets SIGTERM and
    // forwards it to the session: nothing runs on unsupervised.
    // SAFETY: the hook runs between fork and exec and makes two raw system calls (prctl,
    // getppid); it allocates nothing and builds its error with `from_raw_os_error`.
    let host_pid = std::process::id() as libc::pid_t;
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The host may have died before the prctl: then nobody would send the signal.
            if libc::getppid() != host_pid {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    if token.is_some() {
        cmd.arg("--pass-token");
    }
    cmd.arg("--status-fd")
        .arg(STATUS_FD.to_string())
        .arg("--session-id")
        .arg(&v.session_id)
        .arg("--")
        .args(&argv);
    env.apply(&mut cmd);
    if let (false, Some(p)) = (v.sandboxed, &project) {
        cmd.current_dir(p);
    }
    if stdin == Stdin::Null {
        cmd.stdin(Stdio::null());
    }
    let (status_r, status_w) =
        sys::pipe2_cloexec().map_err(|e| LaunchError::SpawnFailed(format!("status pipe: {e}")))?;
    let mut extra = FdMap::new();
    extra.place(status_w.as_fd(), STATUS_FD);
    let spawned = match token {
        Some(t) => {
            let pipe = TokenPipe::new(&t)
                .map_err(|e| LaunchError::SpawnFailed(format!("token pipe: {e}")));
            drop(t);
            pipe?.spawn_with(&mut cmd, extra)
        }
        None => extra.spawn(&mut cmd),
    };
    drop(status_w);
    let mut shim_child =
        spawned.map_err(|e| LaunchError::SpawnFailed(format!("spawn {}: {e}", shim.display())))?;
    facts.token = carries_token;

    // 6. Wait for `started`.
    let mut status = BufReader::new(File::from(status_r));
    match wait_started(&mut status, START_TIMEOUT) {
        Ok(pid) => {
            let answer =
                json!({"event": "launch", "status": 201, "session_id": v.session_id, "pid": pid});
            let _ = state.event(&answer);
            let _ = state.audit(audit_row(facts, "ok", "started"));
            state.log(&format!(
                "session {} started: pid {pid}, template {}, sandbox {}, token {}",
                v.session_id,
                v.template.id,
                v.sandboxed,
                if facts.token { "fd" } else { "none" }
            ));
            made.keep();
            Ok(Session {
                id: v.session_id,
                shim: shim_child,
                status,
                _lock: lock,
            })
        }
        Err(e) => {
            let _ = shim_child.kill();
            let _ = shim_child.wait();
            drop(lock);
            Err(e)
        }
    }
}

/// Reads status lines until `started` (its pid) or a failure.
fn wait_started(status: &mut BufReader<File>, timeout: Duration) -> Result<i64, LaunchError> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || !poll_readable(status.get_ref(), left) {
            return Err(LaunchError::SpawnFailed(format!(
                "relay-shim did not report started within {} s",
                timeout.as_secs()
            )));
        }
        let mut line = String::new();
        match status.read_line(&mut line) {
            Ok(0) => {
                return Err(LaunchError::SpawnFailed(
                    "relay-shim ended before the session started".into(),
                ))
            }
            Ok(_) => {}
            Err(e) => return Err(LaunchError::SpawnFailed(format!("status pipe: {e}"))),
        }
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match v.get("event").and_then(Value::as_str) {
            Some("started") => return Ok(v.get("pid").and_then(Value::as_i64).unwrap_or(-1)),
            Some("spawn_failed") => {
                let errno = v.get("errno").and_then(Value::as_i64).unwrap_or(0) as i32;
                return Err(LaunchError::SpawnFailed(format!(
                    "the session's program could not be started: {}",
                    sys::errno_words(errno)
                )));
            }
            _ => continue,
        }
    }
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

/// Waits for the session to end: forwards SIGTERM and SIGHUP to the shim, ignores SIGINT and
/// SIGQUIT (the terminal delivers those to the shim directly), records the exit.
fn supervise(state: &State, mut session: Session) -> i32 {
    let pid = session.shim.id() as i32;
    super::signals::forward_to(pid);
    let mut last: Option<Value> = None;
    let mut line = String::new();
    while session.status.read_line(&mut line).unwrap_or(0) > 0 {
        if let Ok(v) = serde_json::from_str::<Value>(&line) {
            if v.get("event").and_then(Value::as_str) == Some("exit") {
                last = Some(v);
            }
        }
        line.clear();
    }
    // Wait for the shim's exit without reaping it, stop forwarding, then reap: a signal that
    // arrives in between must not reach another process that reused the pid.
    let _ = sys::waitid(pid, libc::WEXITED | libc::WNOWAIT);
    super::signals::stop_forwarding();
    let code = match session.shim.wait() {
        Ok(s) => super::exit_code_of(s),
        Err(_) => 70,
    };
    let mut ev = json!({"event": "exit", "session_id": session.id, "code": code});
    if let Some(Value::Object(m)) = last {
        for k in ["status", "signal"] {
            if let Some(x) = m.get(k) {
                ev[k] = x.clone();
            }
        }
    }
    let _ = state.event(&ev);
    state.log(&format!("session {} ended: exit code {code}", session.id));
    state.end_session(&session.id);
    code
}

fn session_running(dir: &Path) -> bool {
    match File::open(dir.join("lock")) {
        Ok(f) => {
            // SAFETY: flock on a descriptor we own; LOCK_NB never blocks.
            let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
            rc != 0
        }
        Err(_) => false,
    }
}

fn lock_session(dir: &Path) -> io::Result<File> {
    let f = super::state::append_private(&dir.join("lock"))?;
    // SAFETY: flock on a descriptor we own; LOCK_NB never blocks.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "is already running",
        ));
    }
    Ok(f)
}

/// The folders of the programs a later launch runs with the token: this executable, the shim,
/// and each template's command, both where `PATH` finds it and where its links lead.
fn programs_to_protect(settings: &crate::settings::Settings, shim: &Path) -> Vec<PathBuf> {
    let mut programs: Vec<PathBuf> = Vec::new();
    programs.extend(std::env::current_exe().ok());
    programs.push(shim.to_path_buf());
    let mut templates = crate::settings::builtin_templates();
    templates.retain(|b| settings.templates.iter().all(|t| t.id != b.id));
    templates.extend(settings.templates.iter().cloned());
    for t in &templates {
        programs.extend(t.command.first().and_then(|c| find_command(c)));
    }
    let mut folders: Vec<PathBuf> = Vec::new();
    for p in programs {
        let real = p.canonicalize().ok();
        for f in [Some(p), real].into_iter().flatten() {
            if let Some(dir) = f.parent() {
                if !folders.iter().any(|d| d == dir) {
                    folders.push(dir.to_path_buf());
                }
            }
        }
    }
    folders
}

/// Finds `name` on `PATH` (or takes it as a path when it holds a `/`), as found (not resolved).
fn find_command(name: &str) -> Option<PathBuf> {
    let found = if name.contains('/') {
        Some(PathBuf::from(name))
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .find(|p| is_executable(p))
        })
    };
    found.filter(|p| is_executable(p))
}

/// Finds `name` on `PATH` (or takes it as a path when it holds a `/`), canonical.
fn resolve_command(name: &str) -> Result<PathBuf, String> {
    let Some(p) = find_command(name) else {
        return Err(format!(
            "command {name:?} not found or not executable (looked on PATH)"
        ));
    };
    p.canonicalize()
        .map_err(|e| format!("command {}: {e}", p.display()))
}

pub(crate) fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn expand(
    host: &Host,
    value: &str,
    project: Option<&Path>,
    claude_config: &Path,
) -> Result<Option<PathBuf>, LaunchError> {
    if value.contains(CLAUDE_CONFIG_PLACEHOLDER) {
        let v = value.replace(CLAUDE_CONFIG_PLACEHOLDER, &claude_config.to_string_lossy());
        return sandbox::expand_grant(&v, &host.home, project)
            .map(Some)
            .map_err(|e| LaunchError::SandboxUnavailable(e.to_string()));
    }
    if value.starts_with(PROJECT_PLACEHOLDER) && project.is_none() {
        return Ok(None);
    }
    sandbox::expand_grant(value, &host.home, project)
        .map(Some)
        .map_err(|e| LaunchError::SandboxUnavailable(e.to_string()))
}

fn build_profile(
    host: &Host,
    v: &Validated,
    program: &Path,
    session_tmp: &Path,
    claude_config: &Path,
    token_path: Option<&Path>,
) -> Result<Profile, LaunchError> {
    let project = v.request.project.as_deref();
    let mut profile = Profile::new();
    if let Sandbox::Grants(g) = &v.template.sandbox {
        for r in &g.read {
            if let Some(p) = expand(host, r, project, claude_config)? {
                profile.read(p);
            }
        }
        for r in &g.read_write {
            if let Some(p) = expand(host, r, project, claude_config)? {
                profile.read_write(p);
            }
        }
    }
    if let Some(dir) = program.parent() {
        profile.command_dir(dir.to_path_buf());
    }
    profile.tmp(session_tmp.to_path_buf());
    if let Some(p) = project {
        profile.project(p.to_path_buf());
    }
    if let Some(t) = token_path {
        profile.deny(t.to_path_buf());
    }
    Ok(profile)
}

/// Every template's read-write grants, expanded for this launch: a link in any of them is one a
/// sandboxed session could have made.
fn all_rw_grants(
    host: &Host,
    settings: &crate::settings::Settings,
    project: Option<&Path>,
    claude_config: &Path,
) -> Result<Vec<PathBuf>, LaunchError> {
    let mut out = Vec::new();
    let mut templates = crate::settings::builtin_templates();
    templates.retain(|b| settings.templates.iter().all(|t| t.id != b.id));
    templates.extend(settings.templates.iter().cloned());
    for t in templates {
        if let Sandbox::Grants(g) = &t.sandbox {
            for r in &g.read_write {
                if let Some(p) = expand(host, r, project, claude_config)? {
                    out.push(p);
                }
            }
        }
    }
    Ok(out)
}

/// Refuses a launch that failed before it could be validated (a request that is not JSON):
/// writes the audit row and the event, prints the answer to stderr, returns the exit code.
///
/// ```no_run
/// use relay_token::host::{Host, launch::{refuse_early, LaunchError}};
/// let host = Host::from_dirs("/c".into(), "/s".into())?;
/// let code = refuse_early(&host, &LaunchError::InvalidSpec("request is not valid JSON".into()));
/// assert_eq!(code, 64);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn refuse_early(host: &Host, e: &LaunchError) -> i32 {
    let facts = Facts {
        kind: "",
        template: String::new(),
        sandbox: false,
        token: false,
        session_id: None,
    };
    match State::open(&host.state_dir) {
        Ok(state) => refuse(&state, &facts, e),
        Err(err) => eprintln!(
            "relay-host: {e} (and the state folder {}: {err})",
            host.state_dir.display()
        ),
    }
    e.exit_code()
}

/// Folders one launch created, removed again (deepest first) unless the launch succeeds. Only
/// the session's own folder is removed with its content; a shared folder this launch happened to
/// create (`sessions/`, the Claude config folder) is removed only while it is still empty, so a
/// concurrent launch's files in it are never touched.
#[derive(Default)]
struct Made(Vec<(PathBuf, bool)>);

impl Made {
    /// Creates `dir` (mode 0700) when it is missing, remembering it and every missing parent
    /// it made (such as `sessions/` on a first launch), outermost first.
    fn create(&mut self, dir: &Path) -> io::Result<()> {
        self.create_as(dir, false)
    }

    /// [`Made::create`] for a folder only this launch uses: removed with its content.
    fn create_own(&mut self, dir: &Path) -> io::Result<()> {
        self.create_as(dir, true)
    }

    fn create_as(&mut self, dir: &Path, own: bool) -> io::Result<()> {
        let missing: Vec<PathBuf> = dir
            .ancestors()
            .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
            .map(Path::to_path_buf)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        private_dir(dir)?;
        for m in missing.into_iter().rev() {
            let whole = own && m == dir;
            self.0.push((m, whole));
        }
        Ok(())
    }

    fn keep(&mut self) {
        self.0.clear();
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        for (d, whole) in self.0.iter().rev() {
            let _ = if *whole {
                std::fs::remove_dir_all(d)
            } else {
                std::fs::remove_dir(d)
            };
        }
    }
}
