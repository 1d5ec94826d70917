//! One launch, in the order of `docs/DESIGN.md`: validate → resolve and read the token → find
//! `relay-shim` and the command → create the session folder (the profile's grants must exist to
//! be resolved) → build the profile → spawn `relay-shim` (status pipe at 3, token pipe at 5)
//! around the sandbox command → wait for `started` → answer → supervise until the session ends.
//! A refusal leaves nothing behind but its audit row and its event: the folders this launch
//! created are removed again.

use std::collections::BTreeMap;
use std::ffi::OsString;

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub use super::error::LaunchError;
use super::request::{check_token_request, Request, Validated};
use super::state::{private_dir, State};
use super::{confine, reach, Host};
use crate::env::ChildEnv;
use crate::exit::ExitCode;
use crate::fds::FdMap;
use crate::path::claude_token_path_in;
use crate::redact::Redactor;
use crate::sandbox;
use crate::settings::{Settings, CLAUDE_CONFIG_PLACEHOLDER, PROJECT_PLACEHOLDER};
use crate::{read_claude_token, sys, ClaudeToken, TokenPipe};

/// How long the host waits for the shim's `started` line.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// How the session's stdin is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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
/// use relay_runtime::host::{Host, launch::{launch, Stdin}, request::Request};
/// let host = Host::from_dirs("/etc/relay".into(), "/var/lib/relay".into())?;
/// let code = launch(&host, Request::from_json(r#"{"kind": "claude"}"#)?, Stdin::Inherit);
/// std::process::exit(code);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn launch(host: &Host, request: Request, stdin: Stdin) -> i32 {
    // A supervisor's SIGTERM while the launch prepares would leave half its work behind: it
    // waits for the session's forwarding, or for the refusal's cleanup.
    super::signals::defer();
    let code = launch_deferred(host, request, stdin);
    super::signals::undefer();
    code
}

fn launch_deferred(host: &Host, request: Request, stdin: Stdin) -> i32 {
    let mut state = match State::open(&host.state_dir) {
        Ok(s) => s,
        Err(e) => {
            errln!("relay-host: state folder {}: {e}", host.state_dir.display());
            return ExitCode::Internal.code();
        }
    };
    let mut facts = Facts {
        kind: request.kind.as_str(),
        template: request.template.clone().unwrap_or_default(),
        sandbox: request.sandbox,
        token: false,
        session_id: request.session_id.clone(),
    };
    // A session must never run without its audit row: a state folder that cannot take one
    // (read-only, full, a log that cannot be opened) refuses the launch before anything starts.
    let ready = state
        .check_writable()
        .map_err(|e| LaunchError::SpawnFailed(e.to_string()));
    let code =
        match ready.and_then(|_| prepare_and_spawn(host, &mut state, request, stdin, &mut facts)) {
            Ok(session) => supervise(&state, session),
            Err(e) => {
                refuse(&state, &facts, &e);
                e.exit_code()
            }
        };
    confine::release_placeholders(state.path());
    code
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
    _proxy: Option<crate::net::proxy::Proxy>,
}

fn prepare_and_spawn(
    host: &Host,
    state: &mut State,
    request: Request,
    stdin: Stdin,
    facts: &mut Facts<'_>,
) -> Result<Session, LaunchError> {
    let settings = host
        .settings()
        .map_err(|e| LaunchError::SandboxUnavailable(e.to_string()))?;
    let v = validate(host, state, &settings, request)?;
    facts.template = v.template.id.clone();
    facts.sandbox = v.sandboxed;
    facts.session_id = Some(v.session_id.clone());
    let session_dir = state.session_dir(&v.session_id);
    if super::state::session_locked(&session_dir) {
        return Err(LaunchError::InvalidSpec(format!(
            "session {:?} is already running",
            v.session_id
        )));
    }
    let (token_path, token) = read_token(host, state, &settings, &v)?;
    super::human::note_token(v.claude, v.sandboxed, token.is_some());
    if v.sandboxed {
        super::network::check(&v.template.network(), token.is_some(), &settings)?;
    }
    let programs = resolve_programs(host, &settings, &v, state)?;
    let claude_config = state.claude_config_dir();
    let target = target_argv(
        host,
        &settings,
        &v,
        &programs.command,
        &claude_config,
        token.is_some(),
    );
    let mut folder = SessionFolder::create(state.path(), &session_dir, &claude_config)?;
    if v.request.keep {
        let _ = state.mark_kept(&v.session_id);
    }
    super::state::seed_claude_config(&host.config_dir, &claude_config);
    if v.template.api_base_url.is_some() {
        super::state::seed_onboarding(&claude_config);
    }
    let confined = session_argv(
        host,
        state,
        &settings,
        &v,
        &programs,
        &mut folder,
        token_path.as_deref(),
        token.is_some(),
        target,
    )?;
    let carries_token = token.is_some();
    // A provider launch proves itself to the host: `--identity`, the secret at 3, status at 4.
    let identity = v.request.kind == super::request::Kind::Claude;
    let wiring = super::wiring::ShimWiring::new(identity, state.path(), &v.session_id)
        .map_err(|e| LaunchError::SpawnFailed(e.to_string()))?;
    let cmd = shim_command(
        &settings,
        &v,
        &programs.shim,
        &folder.tmp,
        &claude_config,
        stdin,
        carries_token,
        &confined,
        &wiring,
    );
    let bwrap = programs.bwrap.as_deref();
    spawn_session(
        state, facts, v, cmd, token, folder, wiring, &confined, bwrap,
    )
}

/// The request checked against the settings, its project against the folder rules.
fn validate(
    host: &Host,
    state: &State,
    settings: &Settings,
    request: Request,
) -> Result<Validated, LaunchError> {
    let mut v: Validated = request
        .validate(settings)
        .map_err(|e| LaunchError::InvalidSpec(e.to_string()))?;
    if let Some(p) = &v.request.project {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        let own = [host.config_dir.as_path(), host.state_dir.as_path()];
        let real = super::project::check_project(p, &own, me)
            .map_err(|e| LaunchError::InvalidSpec(e.to_string()))?;
        if v.sandboxed
            && !confine::grants_show(host, &v.template.sandbox, &real, &state.claude_config_dir())?
        {
            return Err(LaunchError::InvalidSpec(format!(
                "project {:?}: no grant of the template {:?} shows it, so the session could not \
                 start there",
                p.display().to_string(),
                v.template.id
            )));
        }
        v.request.project = Some(real);
    }
    Ok(v)
}

/// Resolves and reads the token. Only a sandboxed, local Claude launch carries it, but every
/// sandboxed launch denies the file while the setting is set. Any error refuses the launch
/// before anything is written; so does a request that could send the token elsewhere.
fn read_token(
    host: &Host,
    state: &mut State,
    settings: &Settings,
    v: &Validated,
) -> Result<(Option<PathBuf>, Option<ClaudeToken>), LaunchError> {
    let token_path = if v.sandboxed {
        claude_token_path_in(&settings.claude_token_file, Some(&host.home))
            .map_err(|e| LaunchError::SandboxUnavailable(e.to_string()))?
    } else {
        None
    };
    let Some(p) = token_path.as_deref().filter(|_| v.claude) else {
        return Ok((token_path, None));
    };
    check_token_request(&v.request, &v.template.request_env)
        .map_err(|e| LaunchError::InvalidSpec(e.to_string()))?;
    if let Some(f) = v
        .request
        .project
        .as_deref()
        .and_then(sandbox::git_guard::common_dir_redirect)
    {
        return Err(LaunchError::InvalidSpec(format!(
            "project {:?}: {:?} sends git to another folder's repository data (git makes that \
             file only for a linked worktree, under .git/worktrees; a session may have planted \
             it): remove it to launch with the token",
            v.request
                .project
                .as_deref()
                .unwrap_or(p)
                .display()
                .to_string(),
            f.display().to_string()
        )));
    }
    let t = read_claude_token(p).map_err(|e| LaunchError::SandboxUnavailable(e.to_string()))?;
    if let Some(problem) = reach::token_file_problem(p) {
        return Err(LaunchError::SandboxUnavailable(problem));
    }
    state.set_redactor(Redactor::new(Some(&t)));
    Ok((token_path, Some(t)))
}

/// The programs a launch runs, each found once, as absolute paths.
struct Programs {
    shim: PathBuf,
    command: PathBuf,
    bwrap: Option<PathBuf>,
    /// What that bwrap can do (nothing on macOS, where `bwrap` is `sandbox-exec`).
    features: sandbox::BwrapFeatures,
    ssh: Option<PathBuf>,
    /// Every template's read-write grants, expanded for this launch's project (worked out once:
    /// the programs' checks and the sandbox's link checks share them).
    rw_grants: Vec<PathBuf>,
}

/// Finds relay-shim, the template's command, bwrap (sandboxed) and ssh (remote); refuses one
/// that a session could have planted (inside a read-write grant, outside the folders every
/// sandbox keeps read-only).
fn resolve_programs(
    host: &Host,
    settings: &Settings,
    v: &Validated,
    state: &State,
) -> Result<Programs, LaunchError> {
    let shim = host
        .find_shim(settings)
        .map_err(|e| LaunchError::SpawnFailed(e.to_string()))?;
    // A remote (ssh) launch names a program on the other machine: it is not looked up here.
    let name = &v.template.command[0];
    let command = match &v.request.host {
        Some(_) => PathBuf::from(name),
        None => crate::which::find_program(name).ok_or_else(|| {
            LaunchError::SpawnFailed(format!(
                "command {name:?} not found or not executable (looked on PATH)"
            ))
        })?,
    };
    // The sandbox program, looked for by a sandboxed launch only: bwrap on Linux,
    // sandbox-exec on macOS.
    #[cfg(target_os = "macos")]
    let find = || sandbox::find_sandbox_exec().map(|p| (p, Default::default()));
    #[cfg(not(target_os = "macos"))]
    let find = || find_bwrap(settings);
    let (bwrap, features) = match v.sandboxed {
        true => {
            let (p, f) = find().map_err(|e| LaunchError::SandboxUnavailable(e.to_string()))?;
            (Some(p), f)
        }
        false => (None, Default::default()),
    };
    let ssh = match &v.request.host {
        Some(_) => Some(
            crate::which::find_program("ssh")
                .ok_or_else(|| LaunchError::SpawnFailed("ssh not found on PATH".into()))?,
        ),
        None => None,
    };
    let grants = reach::rw_grants_in(
        host,
        settings,
        v.request.project.as_deref(),
        &state.claude_config_dir(),
        &sandbox::Realpaths::default(),
    );
    let guarded = reach::guarded_folders(host, &grants);
    let local = v.request.host.is_none().then_some(("command", &command));
    let checks = [Some(("relay-shim", &shim)), local]
        .into_iter()
        .flatten()
        .chain(bwrap.iter().map(|b| ("bwrap", b)))
        .chain(ssh.iter().map(|b| ("ssh", b)));
    for (what, p) in checks {
        if let Some(problem) = reach::program_problem(what, p, &grants, &guarded) {
            return Err(LaunchError::SandboxUnavailable(problem));
        }
    }
    let command = match &v.request.host {
        Some(_) => command,
        None => command
            .canonicalize()
            .map_err(|e| LaunchError::SpawnFailed(format!("command {}: {e}", command.display())))?,
    };
    Ok(Programs {
        shim,
        command,
        bwrap,
        features,
        ssh,
        rw_grants: grants,
    })
}

/// The bwrap of the settings (or `PATH`) and what it can do. One that reports the sandbox's
/// start (`--json-status-fd`) is not run beforehand: one that cannot make the sandbox's
/// namespaces (the probe's case) ends before that report ([`sandbox_failed`]). An older one is
/// probed first, as it would only show after the launch was answered. A mount bwrap fails to
/// make after its report ends the session instead (status 1, bwrap's message on its stderr).
#[cfg(not(target_os = "macos"))]
fn find_bwrap(
    settings: &Settings,
) -> Result<(PathBuf, sandbox::BwrapFeatures), sandbox::SandboxError> {
    let path = sandbox::locate_bwrap(settings.bwrap.as_deref())?;
    let features = sandbox::BwrapFeatures::of(&path);
    if !features.json_status {
        sandbox::probe_bwrap(&path)?;
    }
    Ok((path, features))
}

/// The refusal when bwrap ended before it reported the sandbox: the probe's words when bwrap
/// fails even the plainest sandbox (how to install it), else bwrap's status.
fn sandbox_failed(bwrap: Option<&Path>, status: i64) -> LaunchError {
    let Some(bwrap) = bwrap else {
        return LaunchError::SandboxUnavailable(format!(
            "the sandbox ended before it started (status {status})"
        ));
    };
    #[cfg(not(target_os = "macos"))]
    if let Err(e) = sandbox::probe_bwrap(bwrap) {
        return LaunchError::SandboxUnavailable(e.to_string());
    }
    LaunchError::SandboxUnavailable(format!(
        "bwrap {:?} ended with status {status} before the sandbox started; its message is on \
         the session's stderr",
        bwrap.display().to_string()
    ))
}

/// The session's program and its arguments: the template's command (placeholders filled in),
/// `--setting-sources user` for a token launch outside a trusted project, `--resume`, then the
/// request's extra arguments.
fn target_argv(
    host: &Host,
    settings: &Settings,
    v: &Validated,
    program: &Path,
    claude_config: &Path,
    carries_token: bool,
) -> Vec<OsString> {
    let project = v.request.project.as_deref();
    let mut target: Vec<OsString> = vec![program.as_os_str().to_os_string()];
    target.extend(
        v.template.command[1..]
            .iter()
            .map(|a| OsString::from(subst(a, claude_config, project))),
    );
    if carries_token && !trusted(host, settings, project) {
        // A session without the token may have written the project's Claude settings (a base
        // URL, hooks): a launch that carries it reads the relay-owned user settings only.
        target.push("--setting-sources".into());
        target.push("user".into());
    }
    if let (true, Some(r)) = (v.claude, &v.request.resume) {
        target.push("--resume".into());
        target.push(r.into());
    }
    target.extend(v.request.extra_args.iter().map(OsString::from));
    target
}

/// True when the operator listed `project` in `trusted_projects`.
fn trusted(host: &Host, settings: &Settings, project: Option<&Path>) -> bool {
    let Some(project) = project else {
        return false;
    };
    settings.trusted_projects.iter().any(|t| {
        sandbox::expand_grant(t, &host.home, None)
            .ok()
            .map(|p| p.canonicalize().unwrap_or(p))
            .is_some_and(|p| p == project)
    })
}

/// Fills `{claude_config}` and `{project}` in a template value.
fn subst(s: &str, claude_config: &Path, project: Option<&Path>) -> String {
    let mut s = s.replace(CLAUDE_CONFIG_PLACEHOLDER, &claude_config.to_string_lossy());
    if let Some(p) = project {
        s = s.replace(PROJECT_PLACEHOLDER, &p.to_string_lossy());
    }
    s
}

/// The session folder, locked, with a fresh temp folder; removed again if the launch is refused
/// (after the write-deny placeholders the launch made, which may lie in folders it made).
struct SessionFolder {
    tmp: PathBuf,
    made: Made,
    lock: Option<File>,
    state_dir: PathBuf,
    /// The proxy of an allow-list session: it ends with the session.
    proxy: Option<crate::net::proxy::Proxy>,
}

impl SessionFolder {
    /// The launch succeeded: the folder stays, and its lock goes to the session.
    fn keep(mut self) -> File {
        self.made.keep();
        self.lock.take().expect("the lock is taken once")
    }
}

impl Drop for SessionFolder {
    fn drop(&mut self) {
        if self.lock.take().is_some() {
            confine::release_placeholders(&self.state_dir);
        }
    }
}

impl SessionFolder {
    /// Creates the session folder and the relay-owned Claude config folder when missing, locks
    /// the session, and empties its temp folder: a reused session id starts with nothing a
    /// previous session left there (a planted symlink included; nothing is followed).
    fn create(
        state_dir: &Path,
        session_dir: &Path,
        claude_config: &Path,
    ) -> Result<SessionFolder, LaunchError> {
        let tmp = session_dir.join("tmp");
        let failed = |e: io::Error| {
            LaunchError::SpawnFailed(format!("session folder {}: {e}", session_dir.display()))
        };
        let mut made = Made::default();
        made.create_own(session_dir).map_err(failed)?;
        let lock = super::state::lock_session(session_dir).map_err(|e| {
            LaunchError::InvalidSpec(format!("session {}: {e}", session_dir.display()))
        })?;
        match std::fs::symlink_metadata(&tmp) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&tmp).map_err(failed)?,
            Ok(_) => std::fs::remove_file(&tmp).map_err(failed)?,
            Err(_) => {}
        }
        made.create(&tmp)
            .and_then(|_| made.create(claude_config))
            .map_err(failed)?;
        Ok(SessionFolder {
            tmp,
            made,
            lock: Some(lock),
            state_dir: state_dir.to_path_buf(),
            proxy: None,
        })
    }
}

/// The command line the shim runs: bwrap around the target, ssh to the remote host, or the
/// target itself.
#[allow(clippy::too_many_arguments)]
fn session_argv(
    host: &Host,
    state: &State,
    settings: &Settings,
    v: &Validated,
    programs: &Programs,
    folder: &mut SessionFolder,
    token_path: Option<&Path>,
    carries_token: bool,
    target: Vec<OsString>,
) -> Result<confine::Confined, LaunchError> {
    let plain = |argv| confine::Confined {
        argv,
        by_fd: None,
        status_fd: None,
        args_file: None,
    };
    if let Some(bwrap) = &programs.bwrap {
        // The network: the proxy of an allow-list starts here and ends with the session.
        let session_dir = folder.tmp.parent().unwrap_or(&folder.tmp).to_path_buf();
        let (net, proxy) =
            super::network::start(&v.template.network(), &session_dir, state, &v.session_id)?;
        folder.proxy = proxy;
        let real = sandbox::Realpaths::default();
        let inputs = confine::Inputs {
            net,
            host,
            settings,
            v,
            program: &programs.command,
            shim: &programs.shim,
            bwrap,
            features: programs.features,
            session_tmp: &folder.tmp,
            claude_config: &state.claude_config_dir(),
            token_path,
            carries_token,
            real: &real,
            all_rw: &programs.rw_grants,
        };
        // The request's variables reach the sandboxed program only (bwrap's --setenv), never
        // the shim or bwrap, which run outside the sandbox and hold the token's descriptor.
        let setenv: Vec<(OsString, OsString)> = v
            .request
            .env
            .iter()
            .map(|(k, val)| (k.into(), val.into()))
            .collect();
        return confine::sandbox_argv(&inputs, state.path(), &setenv, &target);
    }
    if let (Some(h), Some(ssh)) = (&v.request.host, &programs.ssh) {
        return Ok(plain(ssh_argv(host, ssh, h, target)));
    }
    Ok(plain(target))
}

/// The relay-owned ssh configuration, operator-editable in the config folder (outside every
/// grant: masked in every sandbox).
pub const SSH_CONFIG: &str = "ssh_config";

/// `ssh -F <config> -t -- HOST TARGET...`: the relay-owned config, or `/dev/null` when there is
/// none, so a session-written `~/.ssh/config` (a `ProxyCommand`) is never read.
fn ssh_argv(host: &Host, ssh: &Path, remote: &str, target: Vec<OsString>) -> Vec<OsString> {
    let own = host.config_dir.join(SSH_CONFIG);
    let config = match std::fs::symlink_metadata(&own) {
        Ok(m) if m.is_file() => own,
        _ => PathBuf::from("/dev/null"),
    };
    let mut a: Vec<OsString> = vec![
        ssh.as_os_str().to_os_string(),
        "-F".into(),
        config.into_os_string(),
        "-t".into(),
        "--".into(),
        remote.into(),
    ];
    a.extend(target);
    a
}

/// The `relay-shim` command: its flags, environment, working folder and stdin, and a hook that
/// ties it to the host's life (and, sandboxed, refuses `ptrace` to everything below it).
#[allow(clippy::too_many_arguments)]
fn shim_command(
    settings: &Settings,
    v: &Validated,
    shim: &Path,
    session_tmp: &Path,
    claude_config: &Path,
    stdin: Stdin,
    carries_token: bool,
    confined: &confine::Confined,
    wiring: &super::wiring::ShimWiring,
) -> Command {
    let _ = settings;
    let project = v.request.project.as_deref();
    let mut env_vars: BTreeMap<String, String> = v
        .template
        .env
        .iter()
        .map(|(k, val)| (k.clone(), subst(val, claude_config, project)))
        .collect();
    if !v.sandboxed {
        // Unsandboxed, the request's variables go to the shim's environment too: no token is
        // handed over, and the requester runs its program outside any sandbox anyway.
        env_vars.extend(v.request.env.clone());
    }
    if let Some(g) = &v.template.api_base_url {
        env_vars.insert(crate::settings::BASE_URL_VARIABLE.into(), g.url().into());
    }
    let mut env = ChildEnv::from_current(&env_vars, carries_token);
    if carries_token {
        // git in the session ignores what a session without the token could have planted.
        for (k, val) in sandbox::git_guard::env() {
            env.set(k, val);
        }
    }
    env.set(crate::shim::SESSION_ID_VAR, &v.session_id);
    // bwrap binds the session's temp folder at /tmp; elsewhere (unsandboxed, or macOS, where
    // the profile grants the folder itself) TMPDIR names it.
    if v.sandboxed && cfg!(target_os = "linux") {
        env.set("TMPDIR", "/tmp");
    } else {
        env.set("TMPDIR", session_tmp);
    }
    let mut cmd = Command::new(shim);
    if shim.file_name().is_some_and(|n| n != "relay-shim") {
        // This relay-host itself: started under the name relay-shim, it acts as the shim.
        std::os::unix::process::CommandExt::arg0(&mut cmd, "relay-shim");
    }
    tie_to_host(&mut cmd, v.sandboxed);
    if carries_token {
        cmd.arg("--pass-token");
    }
    if v.sandboxed && cfg!(target_os = "macos") {
        cmd.arg("--sandbox-profile")
            .arg(session_tmp.with_file_name(confine::SBPL_FILE));
    }
    if let Some(range) = passed_fds(confined) {
        cmd.arg("--pass-fds").arg(range);
    }
    if let Some(n) = confined.status_fd {
        cmd.arg("--sandbox-status-fd").arg(n.to_string());
    }
    cmd.args(wiring.args())
        .arg("--session-id")
        .arg(&v.session_id)
        .arg("--")
        .args(&confined.argv);
    env.apply(&mut cmd);
    // bwrap changes folder itself (`--chdir`); sandbox-exec runs where it is started.
    if let (false, Some(p)) = (v.sandboxed && cfg!(target_os = "linux"), project) {
        cmd.current_dir(p);
    }
    if stdin == Stdin::Null {
        cmd.stdin(Stdio::null());
    }
    cmd
}

/// `FIRST-LAST` of the descriptors the shim hands on to bwrap unread: its arguments file at
/// [`confine::ARGS_FD`] and the bind descriptors after it, or `None` when there are none.
fn passed_fds(confined: &confine::Confined) -> Option<String> {
    let binds = confined.by_fd.as_ref().map_or(0, |r| r.bind_fds().len());
    let binds = binds as std::os::fd::RawFd;
    let first = match (&confined.args_file, binds) {
        (Some(_), _) => confine::ARGS_FD,
        (None, 0) => return None,
        (None, _) => confine::BIND_FD_BASE,
    };
    // The bind descriptors follow the arguments file: the last is ARGS_FD + binds.
    Some(format!("{first}-{}", confine::ARGS_FD + binds))
}

/// If the host dies (killed before `started`, or at any time), the shim gets SIGTERM and
/// forwards it to the session: nothing runs on unsupervised. Sandboxed, the shim also installs
/// the no-tracing filter that bwrap and the session inherit (a session could otherwise stop
/// bwrap's init and hang the launch, or read the token out of Claude Code's memory).
fn tie_to_host(cmd: &mut Command, sandboxed: bool) {
    let host_pid = std::process::id() as libc::pid_t;
    // SAFETY: the hook runs between fork and exec and makes raw system calls only (sigprocmask,
    // prctl, getppid, and the filter's two prctl on static data); it allocates nothing and builds its
    // error with `from_raw_os_error` / `last_os_error`.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, move || {
            // The host defers these while it prepares; the shim must get them.
            super::signals::undefer_in_child();
            // Linux only: macOS has no parent-death signal.
            #[cfg(target_os = "linux")]
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The host may have died before the prctl: then nobody would send the signal.
            if libc::getppid() != host_pid {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            // Linux only: the filter guards bwrap's init; macOS has no bwrap.
            #[cfg(target_os = "linux")]
            if sandboxed {
                sandbox::seccomp::install_no_tracing()?;
            }
            #[cfg(not(target_os = "linux"))]
            let _ = sandboxed;
            Ok(())
        });
    }
}

/// Spawns the shim with the status pipe at 3 (or 4), the token pipe at 5 and bwrap's bind
/// descriptors from [`confine::BIND_FD_BASE`], waits for `started`, answers.
#[allow(clippy::too_many_arguments)]
fn spawn_session(
    state: &State,
    facts: &mut Facts<'_>,
    v: Validated,
    mut cmd: Command,
    token: Option<ClaudeToken>,
    mut folder: SessionFolder,
    wiring: super::wiring::ShimWiring,
    confined: &confine::Confined,
    bwrap: Option<&Path>,
) -> Result<Session, LaunchError> {
    // Everything this launch made is recorded by now: a SIGTERM held back ends the host here,
    // leaving what `gc` removes. Not later: forwarded the moment bwrap reports its sandbox, it
    // can reach bwrap before the sandbox's init has tied itself to bwrap's life, and that init
    // would run on alone.
    super::signals::undefer();
    let carries_token = token.is_some();
    let (status_r, status_w) =
        sys::pipe2_cloexec().map_err(|e| LaunchError::SpawnFailed(format!("status pipe: {e}")))?;
    let mut extra = FdMap::new();
    extra.place(status_w.as_fd(), wiring.status_fd());
    wiring.attach(&mut cmd, &mut extra);
    let bind_fds = confined
        .by_fd
        .as_ref()
        .map(|r| r.bind_fds())
        .unwrap_or_default();
    for &(fd, n) in &bind_fds {
        extra.place(fd, n);
    }
    if let Some(f) = &confined.args_file {
        extra.place(f.as_fd(), confine::ARGS_FD);
    }
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
    let shim = cmd.get_program().to_os_string();
    let mut shim_child = spawned.map_err(|e| {
        LaunchError::SpawnFailed(format!("spawn {}: {e}", Path::new(&shim).display()))
    })?;
    facts.token = carries_token;
    // Wait for `started` (after a confirmed `hello_ok` with the identity).
    let mut gate = wiring.start(START_TIMEOUT);
    let mut status = BufReader::new(File::from(status_r));
    match wait_started(&mut status, START_TIMEOUT, &mut gate, bwrap) {
        Ok(pid) => {
            record_started(state, facts, &v, &gate, &folder, pid).inspect_err(|_| {
                // The disk filled (or the log went) since the check: the session is stopped at
                // once rather than run unrecorded.
                stop_at_once(&mut shim_child, pid);
            })?;
            Ok(Session {
                id: v.session_id,
                shim: shim_child,
                status,
                _proxy: folder.proxy.take(),
                _lock: folder.keep(),
            })
        }
        Err(e) => {
            let _ = shim_child.kill();
            let _ = shim_child.wait();
            Err(e)
        }
    }
}

/// Records a session that started: its earlier `ended` mark gone (a kept folder resumed), the
/// identity events and the launch event, the audit row (an error when it cannot be written:
/// the caller stops the session), the log line.
fn record_started(
    state: &State,
    facts: &Facts<'_>,
    v: &Validated,
    gate: &super::wiring::Gate,
    folder: &SessionFolder,
    pid: i64,
) -> Result<(), LaunchError> {
    // Removed only now, so a refused resume leaves the folder as it was.
    let _ = std::fs::remove_file(folder.tmp.with_file_name(super::state::ENDED_MARK));
    for e in gate.events(&v.session_id) {
        let _ = state.event(&e);
    }
    let answer = json!({"event": "launch", "status": 201, "session_id": v.session_id, "pid": pid});
    let _ = state.event(&answer);
    state
        .audit(audit_row(facts, "ok", "started"))
        .map_err(|e| {
            LaunchError::SpawnFailed(format!(
                "{}: {e}; the session was stopped at once, since it could not be recorded",
                state.path().join(super::state::AUDIT_FILE).display()
            ))
        })?;
    state.log(&format!(
        "session {} started: pid {pid}, template {}, sandbox {}, token {}",
        v.session_id,
        v.template.id,
        v.sandboxed,
        if facts.token { "fd" } else { "none" }
    ));
    Ok(())
}

/// Kills a session that started: its program's process group (`pid` leads it; sandboxed, that is
/// bwrap, whose sandbox dies with it) and the shim, and reaps the shim.
fn stop_at_once(shim: &mut std::process::Child, pid: i64) {
    if let Ok(pgid) = libc::pid_t::try_from(pid) {
        if pgid > 1 {
            // SAFETY: kill takes integers only. The group is the session's, led by the pid the
            // shim reported a moment ago; were it already reaped, its number would not be given
            // out again before the kernel's pid counter wraps.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
    let _ = shim.kill();
    let _ = shim.wait();
}

/// Reads status lines until `started` (its pid) or a failure; `gate` judges each line first.
fn wait_started(
    status: &mut BufReader<File>,
    timeout: Duration,
    gate: &mut super::wiring::Gate,
    bwrap: Option<&Path>,
) -> Result<i64, LaunchError> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // Lines already buffered (one read can bring several) need no poll.
        let buffered = !status.buffer().is_empty();
        if !buffered && (left.is_zero() || !poll_readable(status.get_ref(), left)) {
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
        gate.check(&v)
            .map_err(|e| LaunchError::SpawnFailed(e.to_string()))?;
        match v.get("event").and_then(Value::as_str) {
            Some("started") => return Ok(v.get("pid").and_then(Value::as_i64).unwrap_or(-1)),
            Some("sandbox_failed") => {
                let status = v.get("status").and_then(Value::as_i64).unwrap_or(-1);
                return Err(sandbox_failed(bwrap, status));
            }
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
    if let Err(e) = super::signals::forward_to(pid) {
        eprintln!("relay-host: signals will not reach the session: {e}");
    }
    super::signals::undefer();
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
    if let Err(e) = super::signals::stop_forwarding() {
        eprintln!("relay-host: cannot restore signal dispositions: {e}");
    }
    // The exit row and the cleanup are not cut short either ([`launch`] lets them through).
    super::signals::defer();
    let code = match session.shim.wait() {
        Ok(s) => super::exit_code_of(s),
        Err(_) => ExitCode::Internal.code(),
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

/// Refuses a launch that failed before it could be validated (a request that is not JSON):
/// writes the audit row and the event, prints the answer to stderr, returns the exit code.
///
/// ```no_run
/// use relay_runtime::host::{Host, launch::{refuse_early, LaunchError}};
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
        Err(err) => errln!(
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
