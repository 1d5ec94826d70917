//! The sandbox of one launch, in three moves: the facts read once (`facts`), the plan made from
//! them alone (`plan`: the profile's grants, what it keeps read-only and denies, the files
//! placed, the variables in their final order), and the plan laid out on the disk (`layout`)
//! and rendered by the system's file: `bwrap` (every system but macOS) or `seatbelt` (macOS).
//!
//! In order: the template's grants, the command's folder, the private `/tmp`, the project; the
//! programs that later run with the token kept read-only; the write-deny list
//! ([`relay_token::sandbox::write_deny`]) kept read-only where a later launch reads it (the
//! home folder, the project, the repositories of these and of each read-write grant), missing
//! entries held by placeholders; the token and the relay's own folders masked; then the
//! profile is resolved and rendered, with the mount points it needs under `/tmp` made 0700.

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::path::Path;

pub(crate) use super::facts::Inputs;
use crate::launch::context::Launch;
use crate::launch::network::Networked;
use crate::launch::prepare::Prepared;
use crate::launch::sandbox::argv;
use crate::launch::sandbox::error::SandboxStepError;
use crate::launch::sandbox::SessionArgv;
use relay_token::sandbox::{Realpaths, SandboxNet};

/// Where bwrap reads its options from (`--args`), in the shim and in bwrap: just below the bind
/// descriptors, so `--pass-fds` hands both on as one range.
pub(crate) const ARGS_FD: RawFd = 9;

/// The first of the bind descriptors in the shim and in bwrap (above the shim's 3, 4 and 5).
pub(crate) const BIND_FD_BASE: RawFd = ARGS_FD + 1;

/// The SBPL profile's file name in the session folder (macOS).
pub(crate) const SBPL_FILE: &str = "profile.sb";

/// The command line the shim runs for the prepared `launch` on its network `n`: the sandbox (or
/// ssh) around the session's own ([`argv::target_argv`]).
pub(crate) fn confine(
    cx: &Launch,
    launch: &Prepared,
    n: &Networked,
) -> Result<SessionArgv, SandboxStepError> {
    let target = argv::target_argv(cx.host, &cx.settings, launch);
    let ca_file = n.handed.ca_file.as_deref();
    session_argv(cx, launch, n.net.clone(), ca_file, target)
}

/// bwrap around the target (sandboxed), ssh to the remote host, or the target itself.
fn session_argv(
    cx: &Launch,
    launch: &Prepared,
    net: Option<SandboxNet>,
    ca_file: Option<&Path>,
    target: Vec<OsString>,
) -> Result<SessionArgv, SandboxStepError> {
    if let (Some(bwrap), Some(net)) = (&launch.programs.bwrap, net) {
        let real = Realpaths::default();
        let inputs = Inputs {
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
        return sandbox_argv(&inputs, cx.state.path(), &setenv, &target);
    }
    if let (Some(h), Some(ssh)) = (launch.v.ssh_host(), &launch.programs.ssh) {
        return Ok(SessionArgv::plain(argv::ssh_argv(cx.host, ssh, h, target)));
    }
    Ok(SessionArgv::plain(target))
}

/// The sandbox's command line around `target`, `setenv` reaching the sandboxed program only:
/// `bwrap` on Linux, what `relay-shim --sandbox-profile` runs under `sandbox-exec` on macOS.
pub(crate) fn sandbox_argv(
    i: &Inputs<'_>,
    state_dir: &Path,
    setenv: &[(OsString, OsString)],
    target: &[OsString],
) -> Result<SessionArgv, SandboxStepError> {
    let facts = super::facts::gather(i, state_dir, setenv)?;
    let plan = super::plan::plan(&facts);
    let resolved = super::layout::lay_out(&plan, i.real)?;
    super::system::render(&plan, resolved, target)
}
