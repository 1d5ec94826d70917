//! One launch, in the order of `docs/DESIGN.md`: validate → resolve and read the token → find
//! `relay-shim` and the command → create the session folder (the profile's grants must exist to
//! be resolved) → the network → build the profile → spawn `relay-shim` (status pipe at 3, token
//! pipe at 5) around the sandbox command → wait for `started` → answer → supervise until the
//! session ends. Each step borrows what came before and returns what it made (its type in its
//! step's folder); a refusal is recorded with the audit row of the stage it reached, and leaves
//! nothing behind but that row and its event: the launch's `Guard` removes the folders it
//! created and ends its proxy.

use std::ffi::OsString;
use std::io::BufRead;
use std::path::Path;

use serde_json::json;

use crate::launch::context::Launch;
pub use crate::launch::error::LaunchError;
use crate::launch::error::{RequestError, StartError};
use crate::launch::guard::Guard;
use crate::launch::network::{stand_in, Handed, Networked, SessionProxy};
use crate::launch::plan::request::Request;
use crate::launch::plan::LaunchPlan;
use crate::launch::prepare::claude_config;
use crate::launch::prepare::programs;
use crate::launch::prepare::session_folder::SessionFolder;
use crate::launch::prepare::token::LaunchToken;
use crate::launch::prepare::Prepared;
use crate::launch::sandbox::argv;
use crate::launch::sandbox::confine;
use crate::launch::sandbox::SessionArgv;
use crate::launch::session::audit_row::{AuditRow, Refused};
pub use crate::launch::shim::shim_command::Stdin;
use crate::launch::shim::start;
use crate::launch::shim::wiring::ShimWiring;
use crate::launch::shim::{Session, ShimCommand, Spawned};
use crate::settings::Settings;
use crate::state::State;
use crate::Host;
use relay_shim::exit::ExitCode;
use relay_shim::StatusEvent;
use relay_token::sandbox::{self, SandboxNet};
use relay_token::{sys, ClaudeToken};

/// Launches `request` and supervises the session until it ends. Returns the host's exit code:
/// the session's own, or the refusal's code. Every outcome is written to the audit and event
/// logs; a refusal is also printed to stderr.
///
/// ```no_run
/// use relay_host::{Host, launch::{launch, Stdin}, launch::plan::request::Request};
/// let host = Host::from_dirs("/etc/relay".into(), "/var/lib/relay".into())?;
/// let code = launch(&host, Request::from_json(r#"{"kind": "claude"}"#)?, Stdin::Inherit);
/// std::process::exit(code);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn launch(host: &Host, request: Request, stdin: Stdin) -> i32 {
    launch_session(host, request, stdin).0
}

/// [`launch`], and the id of the session that ran (none when the launch was refused).
pub(crate) fn launch_session(host: &Host, request: Request, stdin: Stdin) -> (i32, Option<String>) {
    // A supervisor's SIGTERM while the launch prepares would leave half its work behind: it
    // waits for the session's forwarding, or for the refusal's cleanup.
    crate::launch::signals::defer();
    crate::launch::session::terminal::save();
    let code = launch_deferred(host, request, stdin);
    // A refused launch leaves no record: the next launch in its project may be checked.
    crate::launch::session::sessions::release_project();
    crate::launch::session::terminal::restore();
    crate::launch::signals::undefer();
    code
}

fn launch_deferred(host: &Host, request: Request, stdin: Stdin) -> (i32, Option<String>) {
    let state = match State::open(&host.state_dir) {
        Ok(s) => s,
        Err(e) => {
            let e = LaunchError::State(std::io::Error::new(
                e.kind(),
                format!("state folder {}: {e}", host.state_dir.display()),
            ));
            return (refuse_without_state(&e, None), None);
        }
    };
    let row = AuditRow::of_request(&request);
    let (settings, plan) = match accept(host, &state, request) {
        Ok(accepted) => accepted,
        Err(e) => {
            crate::launch::placeholders::release(state.path());
            return (refused(&state, &row.refused(e)), None);
        }
    };
    let cx = Launch::new(host, settings, state);
    match start_session(&cx, plan, stdin) {
        Ok(session) => {
            let id = session.id.clone();
            (supervise(&cx.state, session), Some(id))
        }
        Err(r) => (refused(&cx.state, &r), None),
    }
}

/// Records a refusal ([`refuse`]) and returns its exit code.
fn refused(state: &State, r: &Refused) -> i32 {
    refuse(state, &r.row, &r.error);
    r.error.exit_code().code()
}

/// The accepted launch, step by step, up to its running session: each step borrows what came
/// before and returns what it made; the launch's [`Guard`] owns what a refusal must undo until
/// the session starts. A refusal carries the audit row of the stage it reached (the token only
/// once handed over).
fn start_session(cx: &Launch, plan: LaunchPlan, stdin: Stdin) -> Result<Session, Box<Refused>> {
    let row = AuditRow::of_validated(&plan);
    let (mut prepared, mut guard) = prepare(cx, &plan).map_err(|e| row.refused(e))?;
    let (argv, spawned) =
        spawn_shim(cx, &mut prepared, &mut guard, stdin).map_err(|e| row.refused(e))?;
    let row = row.spawned(prepared.token_mode());
    let session =
        crate::launch::session::started::wait_started(&cx.state, &row, &prepared, spawned, guard);
    // bwrap's descriptors were held until the session started (or failed to).
    drop(argv);
    session.map_err(|e| row.refused(e))
}

/// The state folder checked, the settings read, the request validated.
fn accept(
    host: &Host,
    state: &State,
    request: Request,
) -> Result<(Settings, LaunchPlan), LaunchError> {
    // A session must never run without its audit row: a state folder that cannot take one
    // (read-only, full, a log that cannot be opened) refuses the launch before anything starts.
    state.check_writable().map_err(LaunchError::State)?;
    let settings = host.settings()?;
    let v = validate(host, state, &settings, request)?;
    Ok((settings, v))
}

/// A prepared launch's steps up to its spawned shim: networked → confined → the shim's command
/// → spawned, the token handed over. Returns the sandbox's command line too: it holds bwrap's
/// descriptors until the session started.
fn spawn_shim(
    cx: &Launch,
    prepared: &mut Prepared,
    guard: &mut Guard,
    stdin: Stdin,
) -> Result<(SessionArgv, Spawned), LaunchError> {
    let token = prepared.token.take();
    let networked = connect(cx, prepared, token, guard)?;
    let argv = confine(cx, prepared, &networked)?;
    let shim = shim_command(cx, prepared, &argv, stdin)?;
    let spawned = start::spawn(shim, &argv, networked.handed.token)?;
    Ok((argv, spawned))
}

/// The request checked against the settings, its project against the folder rules and the
/// template's grants: the launch's plan.
fn validate(
    host: &Host,
    state: &State,
    settings: &Settings,
    request: Request,
) -> Result<LaunchPlan, LaunchError> {
    let v = request.validate(settings)?;
    let session_dir = state.session_dir(v.session_id());
    let claude_config = claude_config::launch_dir(&session_dir);
    Ok(LaunchPlan::resolve(v, host, &claude_config)?)
}

/// The token read, the network checked against it, the programs found, the session folder
/// made (and marked kept, and the Claude config seeded): the folder goes to the launch's guard.
fn prepare<'p>(cx: &Launch, v: &'p LaunchPlan) -> Result<(Prepared<'p>, Guard), LaunchError> {
    let (host, state, settings) = (cx.host, &cx.state, &cx.settings);
    let session_dir = state.session_dir(v.session_id());
    if crate::state::session_locked(&session_dir) {
        let session_id = v.session_id().to_string();
        return Err(RequestError::SessionRunning { session_id }.into());
    }
    crate::launch::session::sessions::check_same_project(state, v)?;
    let token = LaunchToken::read(host, state, settings, v)?;
    crate::human::note_token(v.claude(), v.sandboxed(), token.carried());
    if v.sandboxed() {
        crate::launch::network::check(&v.template().network(), token.carried(), settings)?;
    }
    let claude_config = claude_config::launch_dir(&session_dir);
    let programs = programs::resolve(host, settings, v, &claude_config, token.carried())?;
    let folder = SessionFolder::create(state.path(), &session_dir, &state.claude_config_dir())?;
    let paths = folder.paths();
    let guard = Guard::new(folder);
    if v.keep() {
        let _ = state.mark_kept(v.session_id());
    }
    seed_claude_config(cx, v, &claude_config, token.carried())?;
    let prepared = Prepared {
        v,
        token,
        programs,
        folder: paths,
        claude_config,
    };
    Ok((prepared, guard))
}

/// The launch's own Claude config folder ([`claude_config`]), seeded from the operator's
/// `claude-seed/`, relay's defaults and the persistent folder's named state. Onboarding is
/// answered for a Claude launch that carries the token (the login it would ask for is on fd 5)
/// and behind a gateway (its checks go to Anthropic, which the allow-list does not reach).
fn seed_claude_config(
    cx: &Launch,
    v: &LaunchPlan,
    launch_dir: &Path,
    carries_token: bool,
) -> Result<(), LaunchError> {
    let seed = claude_config::Seed {
        config_dir: &cx.host.config_dir,
        persistent: &cx.state.claude_config_dir(),
        onboard: (v.claude() && carries_token) || v.template().api_base_url.is_some(),
        resume: v.resumes(),
        trust: v.project().filter(|_| v.template().trusts_project()),
        project: v.project(),
    };
    let what = format!("Claude config folder {}", launch_dir.display());
    claude_config::seed(launch_dir, &seed)
        .map_err(|e| crate::launch::spawn_error::spawn_err(what)(e).into())
}

/// The network of a sandboxed launch: the proxy of an allow-list starts here and goes to the
/// launch's guard (it ends with the session); in stand-in mode it is the session's
/// `relay-stand-in`, which takes the real `token` ([`crate::launch::network::stand_in`]).
fn connect(
    cx: &Launch,
    launch: &Prepared,
    token: Option<ClaudeToken>,
    guard: &mut Guard,
) -> Result<Networked, LaunchError> {
    let plain = |token| Handed {
        token,
        ca_file: None,
    };
    if launch.programs.bwrap.is_none() {
        let (net, handed) = (None, plain(token));
        return Ok(Networked { net, handed });
    }
    let socket = crate::launch::network::session_socket(launch.folder.dir());
    let network = launch.v.template().network();
    crate::launch::network::check_socket(&network, &socket)?;
    let handed = match (token, launch.programs.stand_in.as_deref()) {
        (Some(real), Some(program)) => {
            let s = stand_in::begin(launch, program, real, cx, &socket)?;
            guard.hold_proxy(SessionProxy::StandIn(s.proxy));
            let (token, ca_file) = (Some(s.token), Some(s.ca_file));
            Handed { token, ca_file }
        }
        (token, _) => plain(token),
    };
    let (net, proxy) = crate::launch::network::start(
        &network,
        launch.programs.forwarder.as_deref(),
        launch.folder.dir(),
        &cx.state,
        launch.v.session_id(),
        // Stand-in mode's relay-stand-in (which made the CA) already serves the socket.
        handed.ca_file.is_some(),
    )?;
    if let Some(p) = proxy {
        guard.hold_proxy(SessionProxy::Here(p));
    }
    let net = Some(net);
    Ok(Networked { net, handed })
}

/// The command line the shim runs: the sandbox (or ssh) around the session's own
/// ([`argv::target_argv`]).
fn confine(cx: &Launch, launch: &Prepared, n: &Networked) -> Result<SessionArgv, LaunchError> {
    let target = argv::target_argv(cx.host, &cx.settings, launch);
    session_argv(
        cx,
        launch,
        n.net.clone(),
        n.handed.ca_file.as_deref(),
        target,
    )
}

/// bwrap around the target (sandboxed), ssh to the remote host, or the target itself.
fn session_argv(
    cx: &Launch,
    launch: &Prepared,
    net: Option<SandboxNet>,
    ca_file: Option<&Path>,
    target: Vec<OsString>,
) -> Result<SessionArgv, LaunchError> {
    if let (Some(bwrap), Some(net)) = (&launch.programs.bwrap, net) {
        let real = sandbox::Realpaths::default();
        let inputs = confine::Inputs {
            host: cx.host,
            settings: &cx.settings,
            launch,
            ca_file,
            bwrap,
            net,
            real: &real,
        };
        // The request's variables reach the sandboxed program only (bwrap's --setenv), never
        // the shim or bwrap, which run outside the sandbox and hold the token's descriptor.
        let setenv: Vec<(OsString, OsString)> = (launch.v.env().iter())
            .map(|(k, val)| (k.into(), val.into()))
            .collect();
        return Ok(confine::sandbox_argv(
            &inputs,
            cx.state.path(),
            &setenv,
            &target,
        )?);
    }
    if let (Some(h), Some(ssh)) = (launch.v.ssh_host(), &launch.programs.ssh) {
        return Ok(SessionArgv::plain(argv::ssh_argv(cx.host, ssh, h, target)));
    }
    Ok(SessionArgv::plain(target))
}

/// The shim's wiring (a provider launch proves itself to the host: `--identity`, the secret at
/// 3, status at 4) and its command around `argv`.
fn shim_command(
    cx: &Launch,
    launch: &Prepared,
    argv: &SessionArgv,
    stdin: Stdin,
) -> Result<ShimCommand, LaunchError> {
    let v = launch.v;
    let identity = v.kind().proves_identity();
    let wiring =
        ShimWiring::new(identity, cx.state.path(), v.session_id()).map_err(StartError::Bridge)?;
    let cmd = crate::launch::shim::shim_command::shim_command(launch, argv, stdin, &wiring);
    Ok(ShimCommand { wiring, cmd })
}

/// Records a refusal: the event, the audit row of the stage the launch reached, the log line,
/// the answer on stderr.
fn refuse(state: &State, row: &AuditRow, e: &LaunchError) {
    let message = e.message();
    let answer = answer(e, &message, row.session_id(), state.redactor());
    let _ = state.event(&answer);
    crate::launch::session::answer::print(&answer);
    let _ = state.audit(row.row("error", &message));
    state.log(&format!("launch refused: {e}"));
    crate::human::print_refusal(&answer, state.redactor());
}

/// The answer of a refused launch, its message passed through `redactor`.
fn answer(
    e: &LaunchError,
    message: &str,
    session_id: Option<&str>,
    redactor: &relay_token::Redactor,
) -> serde_json::Value {
    let mut a = crate::launch::session::answer::refused(e, redactor.redact(message), session_id);
    a["ts"] = json!(crate::state::now_secs());
    a
}

/// A refusal with no state folder to record it in: its answer is printed all the same (JSON
/// off a terminal and with `--json`, a sentence and a hint for a person); returns its exit code.
fn refuse_without_state(e: &LaunchError, message: Option<String>) -> i32 {
    let redactor = relay_token::Redactor::default();
    let message = message.unwrap_or_else(|| e.message());
    crate::human::print_refusal(&answer(e, &message, None, &redactor), &redactor);
    e.exit_code().code()
}

/// Waits for the session to end: forwards SIGTERM and SIGHUP to the shim, ignores SIGINT and
/// SIGQUIT (the terminal delivers those to the shim directly), records the exit.
fn supervise(state: &State, mut session: Session) -> i32 {
    let pid = session.shim.id() as i32;
    if let Err(e) = crate::launch::signals::forward_to(pid) {
        eprintln!("relay-host: signals will not reach the session: {e}");
    }
    crate::launch::signals::undefer();
    // The launch's setup is done; what it freed need not stay this host's memory while the
    // session runs.
    relay_shim::heap::trim_heap();
    let mut last: Option<StatusEvent> = None;
    let mut line = String::new();
    while session.status.read_line(&mut line).unwrap_or(0) > 0 {
        if let Ok(e @ (StatusEvent::Exited { .. } | StatusEvent::Signaled { .. })) =
            StatusEvent::parse(&line)
        {
            last = Some(e);
        }
        line.clear();
    }
    // Wait for the shim's exit without reaping it, stop forwarding, then reap: a signal that
    // arrives in between must not reach another process that reused the pid.
    let _ = sys::waitid(pid, libc::WEXITED | libc::WNOWAIT);
    if let Err(e) = crate::launch::signals::stop_forwarding() {
        eprintln!("relay-host: cannot restore signal dispositions: {e}");
    }
    // The exit row and the cleanup are not cut short either ([`launch`] lets them through).
    crate::launch::signals::defer();
    let code = match session.shim.wait() {
        Ok(s) => crate::exit_code_of(s),
        Err(_) => ExitCode::Internal.code(),
    };
    session.kept.end_proxy();
    // The terminal as found, before anything is said on it.
    crate::launch::session::terminal::restore();
    let mut ev = crate::launch::session::answer::ended(&session.id, code, last, session.sandboxed);
    ev["ts"] = json!(crate::state::now_secs());
    say_who_stopped(state, &session.id, &mut ev);
    let _ = state.event(&ev);
    crate::launch::session::answer::print(&ev);
    state.log(&format!("session {} ended: exit code {code}", session.id));
    let launch_dir = claude_config::launch_dir(&state.session_dir(&session.id));
    match claude_config::carry_back(&launch_dir, &state.claude_config_dir()) {
        Ok(refused) => {
            for r in refused {
                state.log(&format!("session {}: {r}", session.id));
            }
        }
        Err(e) => {
            state.log(&format!(
                "session {}: Claude config not carried back: {e}",
                session.id
            ));
        }
    }
    state.end_session(&session.id);
    code
}

/// When `relay-host stop` ended the session: says so on stderr (by whom, when) and in its `exit`
/// event (`stopped_by`).
fn say_who_stopped(state: &State, id: &str, ev: &mut serde_json::Value) {
    let dir = state.session_dir(id);
    if let Some((uid, at)) = crate::launch::session::stop::stopped_by(&dir) {
        errln!("relay-host: session {id} was stopped by `relay-host stop` (uid {uid}, at {at})");
        ev["stopped_by"] = json!({"uid": uid, "at": at});
    }
}

/// Refuses a launch that failed before it could be validated (a request that is not JSON):
/// writes the audit row and the event, prints the answer to stderr, returns the exit code.
///
/// ```no_run
/// use relay_host::{Host, launch::refuse_early, launch::plan::request::Request};
/// let host = Host::from_dirs("/c".into(), "/s".into())?;
/// let e = Request::from_json("not json").unwrap_err();
/// assert_eq!(refuse_early(&host, &e.into()), 64);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn refuse_early(host: &Host, e: &LaunchError) -> i32 {
    match State::open(&host.state_dir) {
        Ok(state) => refuse(&state, &AuditRow::early(), e),
        Err(err) => {
            let message = format!(
                "{} (and the state folder {}: {err})",
                e.message(),
                host.state_dir.display()
            );
            return refuse_without_state(e, Some(message));
        }
    }
    e.exit_code().code()
}
