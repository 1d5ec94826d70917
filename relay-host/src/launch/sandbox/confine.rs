//! The sandbox of one launch: its profile, what it keeps out of a session's reach, and the
//! `bwrap` command line.
//!
//! In order: the template's grants, the command's folder, the private `/tmp`, the project; the
//! programs that later run with the token kept read-only ([`programs_to_protect`]); the
//! write-deny list ([`relay_token::sandbox::write_deny`]) kept read-only where a later launch reads it
//! (the home folder, the project, the repositories of these and of each read-write grant),
//! missing entries held by placeholders; the token and the relay's own folders masked; then the
//! profile is resolved and rendered, with the mount points it needs under `/tmp` made 0700.
//!
//! One file per system: the profile both start from (`profile`), `bwrap` (`bwrap`, every
//! system but macOS) and `sandbox-exec` (`seatbelt`, macOS).

use std::ffi::OsString;
use std::path::Path;

pub(crate) use super::profile::{grants_show, Inputs, ARGS_FD, BIND_FD_BASE, SBPL_FILE};
use crate::launch::sandbox::error::SandboxStepError;
use crate::launch::sandbox::SessionArgv;

/// The sandbox's command line around `target`, `setenv` reaching the sandboxed program only:
/// `bwrap` on Linux, what `relay-shim --sandbox-profile` runs under `sandbox-exec` on macOS.
pub(crate) fn sandbox_argv(
    i: &Inputs<'_>,
    state_dir: &Path,
    setenv: &[(OsString, OsString)],
    target: &[OsString],
) -> Result<SessionArgv, SandboxStepError> {
    let profile = super::profile::base_profile(i, state_dir)?;
    #[cfg(target_os = "macos")]
    return Ok(SessionArgv::plain(super::seatbelt::sbpl_argv(
        i, profile, setenv, target,
    )?));
    #[cfg(not(target_os = "macos"))]
    return super::bwrap::bwrap_argv(i, profile, state_dir, setenv, target);
}
