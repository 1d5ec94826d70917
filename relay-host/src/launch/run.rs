//! One launch, in the order of `docs/DESIGN.md`, and nothing but the order: validate → resolve
//! and read the token → check the network against it → find `relay-shim` and the command, and
//! create the session folder (the profile's grants must exist to be resolved) → the network →
//! build the profile → the shim's command → spawn `relay-shim` (status pipe at 3, token pipe at
//! 5) around the sandbox command → wait for `started` → answer → supervise until the session
//! ends. Each step's body is in its step's folder; each borrows what came before and returns
//! what it made, and the token moves on by value from the step that reads it to the one that
//! hands it over. The launch's [`Guard`] holds the supervisor's signals back and owns what a
//! refusal must undo; a refusal is recorded with the audit row of the stage it reached, and
//! leaves nothing behind but that row and its event.

use crate::launch::context::Launch;
pub use crate::launch::error::LaunchError;
use crate::launch::guard::Guard;
use crate::launch::network;
use crate::launch::plan::request::Request;
use crate::launch::plan::LaunchPlan;
use crate::launch::prepare::{self, claude_config, Prepared};
use crate::launch::sandbox::{confine, SessionArgv};
use crate::launch::session::audit_row::{AuditRow, Refused};
use crate::launch::session::refused::{refuse_without_state, refused};
use crate::launch::session::{sessions, started, supervise, terminal};
pub use crate::launch::shim::shim_command::Stdin;
use crate::launch::shim::{shim_command, start, Session, Spawned};
use crate::settings::Settings;
use crate::state::State;
use crate::Host;

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
    let mut guard = Guard::begin();
    terminal::save();
    let code = launch_guarded(host, request, stdin, &mut guard);
    // A refused launch leaves no record: the next launch in its project may be checked.
    sessions::release_project();
    terminal::restore();
    // The signals held back go through now.
    drop(guard);
    code
}

/// [`launch_session`] under its `guard`: the state folder opened, the launch accepted, its
/// session started and supervised; a refusal recorded once the guard undid the launch.
fn launch_guarded(
    host: &Host,
    request: Request,
    stdin: Stdin,
    guard: &mut Guard,
) -> (i32, Option<String>) {
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
    guard.opened(state.path());
    let row = AuditRow::of_request(&request);
    let (settings, plan) = match accept(host, &state, request) {
        Ok(accepted) => accepted,
        Err(e) => {
            guard.ended();
            return (refused(&state, &row.refused(e)), None);
        }
    };
    let cx = Launch::new(host, settings, state);
    let outcome = match start_session(&cx, plan, stdin, guard) {
        Ok(session) => {
            let id = session.id.clone();
            let code = supervise::supervise(&cx.state, session, guard);
            (code, Some(id))
        }
        Err(r) => {
            guard.undo();
            (refused(&cx.state, &r), None)
        }
    };
    guard.ended();
    outcome
}

/// The state folder checked, the settings read, the request validated into the launch's plan
/// (its project checked against the folder rules and the template's grants).
fn accept(
    host: &Host,
    state: &State,
    request: Request,
) -> Result<(Settings, LaunchPlan), LaunchError> {
    // A session must never run without its audit row: a state folder that cannot take one
    // (read-only, full, a log that cannot be opened) refuses the launch before anything starts.
    state.check_writable().map_err(LaunchError::State)?;
    let settings = host.settings()?;
    let v = request.validate(&settings)?;
    let claude_config = claude_config::launch_dir(&state.session_dir(v.session_id()));
    let plan = LaunchPlan::resolve(v, host, &claude_config)?;
    Ok((settings, plan))
}

/// The accepted launch, step by step, up to its running session. A refusal carries the audit
/// row of the stage it reached (the token only once handed over); the caller has the guard
/// undo the launch before it is recorded.
fn start_session(
    cx: &Launch,
    plan: LaunchPlan,
    stdin: Stdin,
    guard: &mut Guard,
) -> Result<Session, Box<Refused>> {
    let row = AuditRow::of_validated(&plan);
    let (prepared, argv, spawned) =
        spawn_shim(cx, &plan, stdin, guard).map_err(|e| row.refused(e))?;
    let row = row.spawned(&prepared.token_mode);
    let session = started::wait_started(&cx.state, &row, &prepared, spawned, guard);
    // bwrap's descriptors were held until the session started (or failed to).
    drop(argv);
    session.map_err(|e| row.refused(e))
}

/// The launch's steps up to its spawned shim: checked → the token read → the network checked
/// against it → prepared → networked → confined → the shim's command → spawned, the token
/// handed over. Returns the sandbox's command line too: it holds bwrap's descriptors until the
/// session started.
fn spawn_shim<'p>(
    cx: &Launch,
    plan: &'p LaunchPlan,
    stdin: Stdin,
    guard: &mut Guard,
) -> Result<(Prepared<'p>, SessionArgv, Spawned), LaunchError> {
    sessions::check_launch(&cx.state, plan)?;
    let token = prepare::token(cx, plan)?;
    network::check_launch(plan, token.carried(), &cx.settings)?;
    let (prepared, token) = prepare::prepare(cx, plan, token, guard)?;
    let networked = network::connect::connect(cx, &prepared, token, guard)?;
    let argv = confine::confine(cx, &prepared, &networked)?;
    let shim = shim_command::command(cx, &prepared, &argv, stdin)?;
    let spawned = start::spawn(shim, &argv, networked.handed.token)?;
    Ok((prepared, argv, spawned))
}
