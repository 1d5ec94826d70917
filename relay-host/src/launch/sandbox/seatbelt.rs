//! The sandbox on macOS: the plan's profile rendered as SBPL for `sandbox-exec`. What this
//! cannot hold is said in `docs/macos.md`: a write-deny entry that does not exist yet is not
//! denied, and nothing of it has run on a Mac.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use super::confine::SBPL_FILE;
use super::plan::{SandboxPlan, StandInCa, System};
use crate::launch::sandbox::error::SandboxStepError;
use crate::launch::sandbox::SessionArgv;
use crate::launch::spawn_error::spawn_err;
use relay_token::sandbox::{write_deny, Profile, Resolved};

/// The program that makes the sandbox here.
pub(super) const SYSTEM: System = System::Seatbelt;

/// No no-dump preload on this system.
pub(super) const NODUMP: bool = false;

/// No stand-in mode on this system.
pub(super) fn stand_in_ca(_: Option<&Path>) -> Option<StandInCa> {
    None
}

/// No no-dump preload on this system (the plan never asks for one here).
pub(super) fn write_no_dump(_: &Path) -> io::Result<PathBuf> {
    Err(io::ErrorKind::Unsupported.into())
}

/// Keeps every write-deny entry of the plan's list read-only where it exists (SBPL denies by
/// path; nothing is held by a placeholder). Grants nothing read-write again.
pub(super) fn deny_writes(
    plan: &SandboxPlan,
    profile: &mut Profile,
) -> Result<Vec<PathBuf>, SandboxStepError> {
    let wd = &plan.write_deny;
    for listed in write_deny::plan(&wd.folders, wd.token, &wd.extra) {
        profile.protect(listed.path);
    }
    Ok(Vec::new())
}

/// The target's argv for a macOS launch: the resolved profile is rendered as SBPL and written
/// 0600 to [`SBPL_FILE`] in the session folder, which `relay-shim --sandbox-profile` runs the
/// target under (`sandbox-exec`, in a session of its own); the plan's variables reach the
/// sandboxed program only, through `/usr/bin/env` inside the sandbox.
pub(super) fn render(
    plan: &SandboxPlan,
    resolved: Resolved,
    target: &[OsString],
) -> Result<SessionArgv, SandboxStepError> {
    let file = plan.session_dir.join(SBPL_FILE);
    resolved
        .write_sbpl(&file)
        .map_err(spawn_err(file.display()))?;
    let mut command: Vec<OsString> = vec!["/usr/bin/env".into()];
    for (k, v) in &plan.setenv {
        let mut kv = k.clone();
        kv.push("=");
        kv.push(v);
        command.push(kv);
    }
    command.extend(target.iter().cloned());
    Ok(SessionArgv::plain(command))
}
