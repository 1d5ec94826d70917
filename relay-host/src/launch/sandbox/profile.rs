//! The profile every sandbox of a launch starts from, on either system: the template's grants
//! with their placeholders expanded, the command's folder, the network, the programs that later
//! run with the token kept read-only, and the relay's own folders masked.

use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use crate::launch::prepare::Prepared;
use crate::launch::sandbox::error::{ConfineError, SandboxStepError};
use crate::settings::{Sandbox, Settings, CLAUDE_CONFIG_PLACEHOLDER, PROJECT_PLACEHOLDER};
use crate::Host;
use relay_token::sandbox::{self, Profile};

/// What the sandbox of one launch is built from: the launch as prepared (its request, token,
/// programs and session folder), its sandbox program and network.
pub(crate) struct Inputs<'a> {
    pub host: &'a Host,
    pub settings: &'a Settings,
    pub launch: &'a Prepared<'a>,
    /// Stand-in mode: the session CA's certificate, which the sandbox shows read-only.
    #[cfg_attr(target_os = "macos", allow(dead_code))]
    pub ca_file: Option<&'a Path>,
    /// The launch's sandbox program (bwrap; `sandbox-exec` on macOS).
    pub bwrap: &'a Path,
    pub net: relay_token::sandbox::SandboxNet,
    /// The launch's real paths, each folder made canonical once.
    pub real: &'a sandbox::Realpaths,
}

/// Where bwrap reads its options from (`--args`), in the shim and in bwrap: just below the bind
/// descriptors, so `--pass-fds` hands both on as one range.
pub(crate) const ARGS_FD: RawFd = 9;

/// The first of the bind descriptors in the shim and in bwrap (above the shim's 3, 4 and 5).
pub(crate) const BIND_FD_BASE: RawFd = ARGS_FD + 1;

/// What every sandbox of a launch starts from, on either system: the template's profile, the
/// state folder for a file mask, the network, and the programs that later hold the token kept
/// read-only.
pub(super) fn base_profile(i: &Inputs<'_>, state_dir: &Path) -> Result<Profile, SandboxStepError> {
    let mut profile = template_profile(i)?;
    profile.state_dir(state_dir.to_path_buf());
    profile.network(i.net.clone());
    for folder in programs_to_protect(i, i.real) {
        profile.protect(folder);
    }
    Ok(profile)
}

/// The template's grants, the command's folder, `/tmp`, the project and the token's deny.
pub(super) fn template_profile(i: &Inputs<'_>) -> Result<Profile, SandboxStepError> {
    let project = i.launch.project();
    let mut profile = Profile::new();
    for (value, rw) in template_grants(&i.launch.v.template().sandbox) {
        if let Some(p) = expand(i.host, value, project, &i.launch.claude_config)? {
            if rw {
                profile.read_write(p);
            } else {
                profile.read(p);
            }
        }
    }
    if let Some(dir) = i.launch.programs.command.parent() {
        profile.command_dir(dir.to_path_buf());
    }
    profile.tmp(i.launch.folder.tmp().to_path_buf());
    if let Some(p) = project {
        profile.project(p.to_path_buf());
    }
    if let Some(t) = i.launch.token.path() {
        profile.deny(t.to_path_buf());
    }
    Ok(profile)
}

pub(super) fn template_grants(sandbox: &Sandbox) -> Vec<(&str, bool)> {
    match sandbox {
        Sandbox::Off => Vec::new(),
        Sandbox::Grants(g) => g
            .read
            .iter()
            .map(|r| (r.as_str(), false))
            .chain(g.read_write.iter().map(|r| (r.as_str(), true)))
            .collect(),
    }
}

/// A template's grant for this launch: `None` for a `{project}` grant without a project.
pub(crate) fn expand(
    host: &Host,
    value: &str,
    project: Option<&Path>,
    claude_config: &Path,
) -> Result<Option<PathBuf>, SandboxStepError> {
    if value.starts_with(PROJECT_PLACEHOLDER) && project.is_none() {
        return Ok(None);
    }
    let v = value.replace(CLAUDE_CONFIG_PLACEHOLDER, &claude_config.to_string_lossy());
    Ok(Some(sandbox::expand_grant(&v, &host.home, project)?))
}

/// True when a grant of the template (read or read-write) shows `project`.
pub(crate) fn grants_show(
    host: &Host,
    sandbox: &Sandbox,
    project: &Path,
    claude_config: &Path,
) -> Result<bool, SandboxStepError> {
    for (value, _) in template_grants(sandbox) {
        if let Some(g) = expand(host, value, Some(project), claude_config)? {
            let real = g.canonicalize().unwrap_or(g);
            if project.starts_with(&real) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The folders of the programs a later launch runs with the token: this executable, the shim,
/// bwrap, ssh, and each template's command, both where they were found and where their links
/// lead. Kept read-only in every sandbox that shows them.
pub(super) fn programs_to_protect(i: &Inputs<'_>, real_of: &sandbox::Realpaths) -> Vec<PathBuf> {
    let mut programs: Vec<PathBuf> = Vec::new();
    programs.extend(std::env::current_exe().ok());
    programs.push(i.launch.programs.shim.clone());
    programs.push(i.bwrap.to_path_buf());
    programs.extend(relay_token::which::find_program("ssh"));
    for t in i.settings.all_templates() {
        programs.extend(
            t.command
                .first()
                .and_then(|c| relay_token::which::find_program(c)),
        );
    }
    let mut folders: Vec<PathBuf> = Vec::new();
    for p in programs {
        let real = real_of.of(&p).ok();
        for f in [Some(p), real].into_iter().flatten() {
            if let Some(dir) = f.parent() {
                if !folders.iter().any(|d| d == dir) {
                    folders.push(dir.to_path_buf());
                }
            }
        }
    }
    folders
}

/// The host's own folders are masked inside any grant that would show them: a session must not
/// read other sessions' files in the state folder, nor rewrite the settings (and so drop the
/// deny) for the next launch. A mask also binds every folder between the grant and it onto
/// itself, so no parent can be renamed away and replaced.
pub(super) fn mask_own_folders(
    real_of: &sandbox::Realpaths,
    host: &Host,
    profile: &mut Profile,
) -> Result<(), SandboxStepError> {
    let real = |p: &Path| real_of.of(p).unwrap_or_else(|_| p.to_path_buf());
    let grants: Vec<PathBuf> = profile
        .read_grants()
        .iter()
        .chain(profile.read_write_grants())
        .map(|g| real(g))
        .collect();
    for own in [&host.config_dir, &host.state_dir] {
        let own_real = real(own);
        if !own.is_dir() || !grants.iter().any(|g| own_real.starts_with(g)) {
            continue;
        }
        if let Some(g) = grants.iter().find(|g| g.starts_with(&own_real)) {
            let (grant, own) = (g.clone(), own.clone());
            return Err(ConfineError::GrantInOwnFolder { grant, own }.into());
        }
        profile.deny(own.clone());
    }
    Ok(())
}

/// The SBPL profile's file name in the session folder (macOS).
pub(crate) const SBPL_FILE: &str = "profile.sb";
