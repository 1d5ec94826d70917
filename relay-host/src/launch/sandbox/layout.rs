//! The sandbox's plan laid out on the disk: the files it places written into the session
//! folder, the write-deny list kept (by each system's rule), the relay's own folders masked, and
//! the profile resolved against the file system. What is decided is decided in `plan`; here it
//! is made.

use std::path::PathBuf;

use super::plan::{own_masks, SandboxPlan, Staged, SANDBOX_GIT, SANDBOX_PRELOAD};
use super::system;
use crate::launch::sandbox::error::{ConfineError, SandboxStepError};
use crate::launch::sandbox::own_config;
use crate::launch::spawn_error::spawn_err;
use relay_token::sandbox::{git_guard, Profile, Realpaths, Resolved};

/// Makes what `plan` names and resolves its profile (`real`: the launch's real paths).
pub(crate) fn lay_out(plan: &SandboxPlan, real: &Realpaths) -> Result<Resolved, SandboxStepError> {
    let mut profile = plan.profile();
    for file in &plan.files {
        place(plan, file, &mut profile)?;
    }
    let writable = system::deny_writes(plan, &mut profile)?;
    let mut grants = plan.real_grants();
    grants.extend((writable.iter()).map(|p| real.of(p).unwrap_or_else(|_| p.clone())));
    for own in own_masks(&grants, &plan.own)? {
        profile.deny(own);
    }
    Ok(profile.resolve_with(&plan.all_rw_grants, real)?)
}

/// Writes one file of the plan into the session folder (which no sandbox reaches) and places
/// it read-only: the no-dump preload, git's wrapper, the pinned configuration; stand-in mode's
/// CA is already written. An empty configuration folder or home is the sandbox's own, placed
/// empty and read-only.
fn place(plan: &SandboxPlan, file: &Staged, profile: &mut Profile) -> Result<(), SandboxStepError> {
    let dir = plan.session_dir.as_path();
    let placed: Vec<(PathBuf, PathBuf)> = match file {
        Staged::NoDump => {
            let so = system::write_no_dump(dir).map_err(|source| {
                let dir = dir.to_path_buf();
                ConfineError::NoDump { dir, source }
            })?;
            vec![(so, SANDBOX_PRELOAD.into())]
        }
        Staged::StandInCa(ca) => vec![(ca.file.clone(), ca.at.into())],
        Staged::GitWrapper => {
            let wrapper = git_guard::write_wrapper(dir).map_err(spawn_err("git's wrapper"))?;
            vec![(wrapper, SANDBOX_GIT.into())]
        }
        Staged::OwnConfig => {
            let home = plan.home.as_path();
            let (gitconfig, at) = crate::launch::sandbox::own_config::place(dir, home)?;
            profile.place_empty_dir(own_config::SANDBOX_CONFIG_HOME);
            vec![(gitconfig, at.into())]
        }
        Staged::EmptyHome => {
            profile.place_empty_dir(own_config::SANDBOX_HOME);
            Vec::new()
        }
        Staged::GitConfigs(dirs) => super::git_config::write_copies(dirs, dir)
            .map_err(spawn_err("the repository's configuration"))?,
    };
    for (src, at) in placed {
        profile.place_file(src, at);
    }
    Ok(())
}
