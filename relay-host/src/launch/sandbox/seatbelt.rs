//! The sandbox on macOS: the same profile rendered as SBPL for `sandbox-exec`.

use std::ffi::OsString;

use super::profile::{mask_own_folders, Inputs, SBPL_FILE};
use crate::launch::sandbox::error::SandboxStepError;
use crate::launch::spawn_error::spawn_err;
use relay_token::sandbox::write_deny;
use relay_token::sandbox::Profile;

/// The target's argv for a macOS launch: the same profile (grants, protected programs, the
/// write-deny entries that exist, the masks) is rendered as SBPL and written 0600 to
/// [`SBPL_FILE`] in the session folder, which `relay-shim --sandbox-profile` runs the target
/// under (`sandbox-exec`, in a session of its own); the request's variables reach the sandboxed
/// program only, through `/usr/bin/env` inside the sandbox. What this cannot hold is said in
/// `docs/macos.md`: a write-deny entry that does not exist yet is not denied, and nothing of it
/// has run on a Mac.
pub(super) fn sbpl_argv(
    i: &Inputs<'_>,
    mut profile: Profile,
    setenv: &[(OsString, OsString)],
    target: &[OsString],
) -> Result<Vec<OsString>, SandboxStepError> {
    let project = i.launch.project();
    let mut folders = vec![(i.host.home.clone(), write_deny::Role::Home)];
    folders.extend(project.map(|p| (p.to_path_buf(), write_deny::Role::Project)));
    for listed in write_deny::plan(&folders, i.launch.carries_token(), &[]) {
        profile.protect(listed.path);
    }
    mask_own_folders(i.real, i.host, &mut profile)?;
    let resolved = profile.resolve_with(&i.launch.programs.rw_grants, i.real)?;
    let session_dir = i.launch.folder.dir();
    let file = session_dir.join(SBPL_FILE);
    resolved
        .write_sbpl(&file)
        .map_err(spawn_err(file.display()))?;
    let mut command: Vec<OsString> = vec!["/usr/bin/env".into()];
    for (k, v) in setenv {
        let mut kv = k.clone();
        kv.push("=");
        kv.push(v);
        command.push(kv);
    }
    command.extend(target.iter().cloned());
    Ok(command)
}
