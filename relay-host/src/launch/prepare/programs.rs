//! The programs a launch runs, each found once as an absolute path: `relay-shim`, the
//! template's command, bwrap (sandboxed), the allow-list's forwarder (sandboxed with an
//! allow-list) and ssh (remote); one a session could have planted is refused.

use std::path::PathBuf;

use crate::launch::plan::LaunchPlan;
use crate::launch::prepare::error::{PrepareError, ProgramError};
use crate::launch::prepare::token_mode::TokenMode;
use crate::launch::spawn_error::spawn_err;
use crate::net::network_rules;
use crate::reach;
use crate::settings::Settings;
use crate::Host;
use relay_token::sandbox;

/// The programs a launch runs, each found once, as absolute paths.
pub(crate) struct Programs {
    /// `relay-shim` (or this `relay-host`, which acts as it).
    pub shim: PathBuf,
    /// The template's command (a name on the other machine for a remote launch).
    pub command: PathBuf,
    /// bwrap (sandbox-exec on macOS), for a sandboxed launch.
    pub bwrap: Option<PathBuf>,
    /// What that bwrap can do (nothing on macOS, where `bwrap` is `sandbox-exec`).
    #[cfg_attr(target_os = "macos", allow(dead_code))]
    pub features: sandbox::BwrapFeatures,
    /// ssh, for a remote launch.
    pub ssh: Option<PathBuf>,
    /// The allow-list's forwarder ([`crate::net::forwarder_program`]), for a sandboxed launch
    /// with an allow-list: it `exec`s the session's program, descriptors and all.
    pub forwarder: Option<PathBuf>,
    /// Every template's read-write grants, expanded for this launch's project (worked out once:
    /// the programs' checks and the sandbox's link checks share them).
    pub rw_grants: Vec<PathBuf>,
}

/// Finds relay-shim, the template's command, bwrap (sandboxed), ssh (remote), the forwarder
/// (an allow-list) and, deciding the session's token mode for a launch that `carries_token`,
/// `relay-stand-in` (stand-in mode); refuses one that a session could have planted (inside a
/// read-write grant, outside the folders every sandbox keeps read-only).
pub(crate) fn resolve(
    host: &Host,
    settings: &Settings,
    v: &LaunchPlan,
    claude_config: &std::path::Path,
    carries_token: bool,
) -> Result<(Programs, TokenMode), PrepareError> {
    let shim = host.find_shim(settings).map_err(ProgramError::Shim)?;
    let command = find_command(v)?;
    let (bwrap, features) = match v.sandboxed() {
        true => find_sandbox(settings).map(|(p, f)| (Some(p), f))?,
        false => (None, Default::default()),
    };
    let ssh = match v.ssh_host() {
        Some(_) => Some(relay_token::which::find_program("ssh").ok_or(ProgramError::SshNotFound)?),
        None => None,
    };
    let rw_grants = reach::rw_grants_in(
        &host.home,
        settings,
        v.project(),
        claude_config,
        &sandbox::Realpaths::default(),
    );
    let network = v.network();
    let forwarder = match (v.sandboxed(), network_rules(network).proxied) {
        (true, Some(_)) => Some(
            crate::net::forwarder_program()
                .map_err(spawn_err("relay-host's own path".to_string()))?,
        ),
        (true, None) | (false, Some(_)) | (false, None) => None,
    };
    let token_mode = TokenMode::decide(v, carries_token, find_stand_in)?;
    let programs = Programs {
        shim,
        command,
        bwrap,
        features,
        ssh,
        forwarder,
        rw_grants,
    };
    check_planted(host, v, &programs, &token_mode)?;
    Ok((real_command(v, programs)?, token_mode))
}

/// `relay-stand-in` beside relay-host, which must be there and runnable.
fn find_stand_in() -> Result<PathBuf, PrepareError> {
    let p =
        crate::net::stand_in_program().map_err(spawn_err("relay-host's own path".to_string()))?;
    match relay_token::which::is_executable(&p) {
        true => Ok(p),
        false => Err(spawn_err(format!("stand-in mode needs {}", p.display()))(
            std::io::Error::new(std::io::ErrorKind::NotFound, "not found"),
        )
        .into()),
    }
}

/// The template's command on `PATH`; a remote (ssh) launch names a program on the other
/// machine: it is not looked up here.
fn find_command(v: &LaunchPlan) -> Result<PathBuf, ProgramError> {
    let name = &v.template().command[0];
    match v.ssh_host() {
        Some(_) => Ok(PathBuf::from(name)),
        None => relay_token::which::find_program(name)
            .ok_or_else(|| ProgramError::CommandNotFound { name: name.clone() }),
    }
}

/// The sandbox program: bwrap on Linux, sandbox-exec on macOS.
fn find_sandbox(
    settings: &Settings,
) -> Result<(PathBuf, sandbox::BwrapFeatures), sandbox::SandboxError> {
    #[cfg(target_os = "macos")]
    let _ = settings;
    #[cfg(target_os = "macos")]
    return sandbox::find_sandbox_exec().map(|p| (p, Default::default()));
    #[cfg(not(target_os = "macos"))]
    return find_bwrap(settings);
}

/// Refuses a program a session could have planted.
fn check_planted(
    host: &Host,
    v: &LaunchPlan,
    p: &Programs,
    token_mode: &TokenMode,
) -> Result<(), ProgramError> {
    let guarded = reach::guarded_folders(&host.home, &p.rw_grants);
    let local = v
        .ssh_host()
        .is_none()
        .then_some(("command", p.command.as_path()));
    let checks = [Some(("relay-shim", p.shim.as_path())), local]
        .into_iter()
        .flatten()
        .chain(p.bwrap.as_deref().map(|b| ("bwrap", b)))
        .chain(token_mode.programs())
        .chain(p.forwarder.as_deref().map(|f| ("relay-net-forward", f)))
        .chain(p.ssh.as_deref().map(|b| ("ssh", b)));
    for (what, path) in checks {
        if let Some(e) = reach::program_problem(what, path, &p.rw_grants, &guarded) {
            return Err(ProgramError::Planted(e));
        }
    }
    Ok(())
}

/// A local command by its real path.
fn real_command(v: &LaunchPlan, mut p: Programs) -> Result<Programs, PrepareError> {
    if v.ssh_host().is_none() {
        p.command = p
            .command
            .canonicalize()
            .map_err(spawn_err(format!("command {}", p.command.display())))?;
    }
    Ok(p)
}

/// The bwrap of the settings (or `PATH`) and what it can do. One that reports the sandbox's
/// start (`--json-status-fd`) is not run beforehand: one that cannot make the sandbox's
/// namespaces (the probe's case) ends before that report ([`crate::launch::shim::start`]). An older one is
/// probed first, as it would only show after the launch was answered. A mount bwrap fails to
/// make after its report ends the session instead (status 1, bwrap's message on its stderr).
#[cfg(not(target_os = "macos"))]
fn find_bwrap(
    settings: &Settings,
) -> Result<(PathBuf, sandbox::BwrapFeatures), sandbox::SandboxError> {
    let path = sandbox::locate_bwrap(settings.bwrap.as_deref())?;
    let features = sandbox::BwrapFeatures::of(&path);
    // Also probed where this machine's settings block user namespaces: the refusal then says
    // relay's sentence first, before bwrap's own line reaches the session's stderr.
    if !features.json_status || crate::userns::blocked_by_settings() {
        sandbox::probe_bwrap(&path)?;
    }
    Ok((path, features))
}
