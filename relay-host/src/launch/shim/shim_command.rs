//! The `relay-shim` command of one launch: its flags, environment, working folder and stdin,
//! and a hook that ties it to the host's life (and, sandboxed, refuses `ptrace` to everything
//! below it).

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use crate::launch::context::Launch;
use crate::launch::prepare::Prepared;
use crate::launch::sandbox::argv::subst;
use crate::launch::sandbox::confine;
use crate::launch::sandbox::SessionArgv;
use crate::launch::shim::error::{ShimError, StartError};
use crate::launch::shim::wiring::ShimWiring;
use crate::launch::shim::ShimCommand;
use relay_shim::{SessionId, ShimOptions};
use relay_token::sandbox;
use relay_token::ChildEnv;
use std::os::fd::RawFd;

/// How the session's stdin is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stdin {
    /// The host's own stdin (a terminal launch, or a request read from a file).
    Inherit,
    /// `/dev/null` (the request came on stdin).
    Null,
}

/// The shim's wiring (a provider launch proves itself to the host: `--identity`, the secret at
/// 3, status at 4) and its command around `argv`.
pub(crate) fn command(
    cx: &Launch,
    launch: &Prepared,
    argv: &SessionArgv,
    stdin: Stdin,
) -> Result<ShimCommand, ShimError> {
    let v = launch.v;
    let identity = v.kind().proves_identity();
    let wiring =
        ShimWiring::new(identity, cx.state.path(), v.session_id()).map_err(StartError::Bridge)?;
    let cmd = shim_command(launch, argv, stdin, &wiring);
    Ok(ShimCommand { wiring, cmd })
}

/// The `relay-shim` command that runs the prepared `launch` in `argv` (the sandbox's command
/// line): the environment ([`shim_env`]), the flags, the working folder and stdin.
pub(crate) fn shim_command(
    launch: &Prepared,
    argv: &SessionArgv,
    stdin: Stdin,
    wiring: &ShimWiring,
) -> Command {
    let v = launch.v;
    let shim = &launch.programs.shim;
    let mut cmd = Command::new(shim);
    if shim.file_name().is_some_and(|n| n != "relay-shim") {
        // This relay-host itself: started under the name relay-shim, it acts as the shim.
        std::os::unix::process::CommandExt::arg0(&mut cmd, "relay-shim");
    }
    crate::launch::tie::tie_to_host(&mut cmd, v.sandboxed());
    cmd.args(shim_options(launch, argv, wiring).to_args());
    shim_env(launch).apply(&mut cmd);
    // bwrap changes folder itself (`--chdir`); sandbox-exec runs where it is started.
    if let (false, Some(p)) = (v.sandboxed() && cfg!(target_os = "linux"), launch.project()) {
        cmd.current_dir(p);
    }
    if stdin == Stdin::Null {
        cmd.stdin(Stdio::null());
    }
    cmd
}

/// The shim's command line for `launch` in `session`, as the shim's own [`ShimOptions`] type,
/// so what the host writes is what the shim parses.
fn shim_options(launch: &Prepared, session: &SessionArgv, wiring: &ShimWiring) -> ShimOptions {
    let v = launch.v;
    let mut argv = session.argv.iter().cloned();
    ShimOptions {
        pass_token: launch.carries_token(),
        keep_env: kept_template_credentials(launch),
        identity: wiring.identity(),
        pty: false,
        sandbox_profile: (v.sandboxed() && cfg!(target_os = "macos"))
            .then(|| launch.folder.dir().join(confine::SBPL_FILE)),
        status_fd: wiring.status_fd(),
        session_id: SessionId::parse(v.session_id()),
        pass_fds: passed_fds(session),
        sandbox_status_fd: session.status_fd,
        // If the host is lost (`kill -9`), the shim cleans up after the session.
        cleanup: Some(launch.folder.dir().to_path_buf()),
        program: argv.next().unwrap_or_default(),
        args: argv.collect(),
    }
}

/// The template's own variables that relay-shim would drop: with `--pass-token` the credentials
/// outranking the descriptor (`ChildEnv::drops_beside_token`), without it the descriptor's
/// variable. The template set them on purpose, after the inherited environment was scrubbed,
/// so the shim keeps them (without a token a template's value passes unchanged).
fn kept_template_credentials(launch: &Prepared) -> Vec<String> {
    let token_var = relay_token::TOKEN_FD_VAR;
    let carries_token = launch.carries_token();
    (launch.v.template().env.keys())
        .filter(|k| match carries_token {
            true => ChildEnv::drops_beside_token(k) && k.as_str() != token_var,
            false => k.as_str() == token_var,
        })
        .cloned()
        .collect()
}

/// The shim's environment: the template's variables (placeholders filled in), unsandboxed the
/// request's too, the gateway's base URL, git's guard for a token launch, the session id and
/// `TMPDIR`.
fn shim_env(launch: &Prepared) -> ChildEnv {
    let v = launch.v;
    let carries_token = launch.carries_token();
    let mut env_vars: BTreeMap<String, String> = v
        .template()
        .env
        .iter()
        .map(|(k, val)| {
            (
                k.clone(),
                subst(val, &launch.claude_config, launch.project()),
            )
        })
        .collect();
    if !v.sandboxed() {
        // Unsandboxed, the request's variables go to the shim's environment too: no token is
        // handed over, and the requester runs its program outside any sandbox anyway.
        env_vars.extend(v.env().clone());
    }
    if let Some(g) = &v.template().api_base_url {
        env_vars.insert(crate::settings::BASE_URL_VARIABLE.into(), g.url().into());
    }
    let mut env = ChildEnv::from_current(&env_vars, carries_token);
    if carries_token {
        // git in the session ignores what a session without the token could have planted.
        for (k, val) in sandbox::git_guard::env() {
            env.set(k, val);
        }
    }
    env.set(relay_shim::SESSION_ID_VAR, v.session_id());
    // bwrap binds the session's temp folder at /tmp; elsewhere (unsandboxed, or macOS, where
    // the profile grants the folder itself) TMPDIR names it.
    if v.sandboxed() && cfg!(target_os = "linux") {
        env.set("TMPDIR", "/tmp");
    } else {
        env.set("TMPDIR", launch.folder.tmp());
    }
    env
}

/// The first and last of the descriptors the shim hands on to bwrap unread: its arguments file
/// at [`confine::ARGS_FD`] and the bind descriptors after it, or `None` when there are none.
fn passed_fds(argv: &SessionArgv) -> Option<(RawFd, RawFd)> {
    let binds = argv.by_fd.as_ref().map_or(0, |r| r.bind_fds().len());
    let binds = binds as std::os::fd::RawFd;
    let first = match (&argv.args_file, binds) {
        (Some(_), _) => confine::ARGS_FD,
        (None, 0) => return None,
        (None, _) => confine::BIND_FD_BASE,
    };
    // The bind descriptors follow the arguments file: the last is ARGS_FD + binds.
    Some((first, confine::ARGS_FD + binds))
}
