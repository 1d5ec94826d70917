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
use crate::launch::sandbox::error::SandboxStepError;
use crate::launch::sandbox::SessionArgv;

/// Where bwrap reads its options from (`--args`), in the shim and in bwrap: just below the bind
/// descriptors, so `--pass-fds` hands both on as one range.
pub(crate) const ARGS_FD: RawFd = 9;

/// The first of the bind descriptors in the shim and in bwrap (above the shim's 3, 4 and 5).
pub(crate) const BIND_FD_BASE: RawFd = ARGS_FD + 1;

/// The SBPL profile's file name in the session folder (macOS).
pub(crate) const SBPL_FILE: &str = "profile.sb";

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
