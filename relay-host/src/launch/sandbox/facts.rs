//! What the sandbox's plan is made from, read once: the launch's grants expanded and made real,
//! the programs' folders, the host's git and `PATH`, the write-deny list's additions. The only
//! place the sandbox step reads the launch ([`Inputs`]), the disk and the process's environment
//! before it lays the plan out.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::plan::{self, Facts, Git, Grant, OwnFolder};
use super::system;
use crate::launch::prepare::Prepared;
use crate::launch::sandbox::error::SandboxStepError;
use crate::settings::grants::{self, GrantError};
use crate::settings::Settings;
use crate::Host;
use relay_token::sandbox::{self, git_guard};

/// What the sandbox of one launch is built from: the launch as prepared (its request, token,
/// programs and session folder), its sandbox program and network.
pub(crate) struct Inputs<'a> {
    pub host: &'a Host,
    pub settings: &'a Settings,
    pub launch: &'a Prepared<'a>,
    /// Stand-in mode: the session CA's certificate, which the sandbox shows read-only.
    pub ca_file: Option<&'a Path>,
    /// The launch's sandbox program (bwrap; `sandbox-exec` on macOS).
    pub bwrap: &'a Path,
    pub net: relay_token::sandbox::SandboxNet,
    /// The launch's real paths, each folder made canonical once.
    pub real: &'a sandbox::Realpaths,
}

impl From<GrantError> for SandboxStepError {
    fn from(e: GrantError) -> Self {
        SandboxStepError::Sandbox(e.into_source())
    }
}

/// The facts of the launch `i` (its request's variables `setenv`, the state folder
/// `state_dir`).
pub(crate) fn gather(
    i: &Inputs<'_>,
    state_dir: &Path,
    setenv: &[(OsString, OsString)],
) -> Result<Facts, SandboxStepError> {
    let (l, template) = (i.launch, i.launch.v.template());
    let (home, project) = (&i.host.home, l.project());
    let real = |p: &Path| i.real.of(p).unwrap_or_else(|_| p.to_path_buf());
    let mut grants = Vec::new();
    for (path, access) in (template.sandbox).expanded(home, project, &l.claude_config)? {
        let real = real(&path);
        grants.push(Grant { path, real, access });
    }
    let mut shared = plan::shared(&grants);
    let linked_repository = project.and_then(|p| super::git_binds::linked_repository(p, &shared));
    shared.extend(linked_repository.clone());
    let own = [&i.host.config_dir, &i.host.state_dir].map(|p| OwnFolder {
        path: p.clone(),
        real: real(p),
        exists: p.is_dir(),
    });
    let git = relay_token::which::find_program("git").map(|program| {
        let common = project.and_then(git_guard::project_common_dir);
        let linked = (common.as_deref())
            .map(sandbox::git_dirs::linked)
            .unwrap_or_default();
        Git {
            program,
            common,
            linked,
        }
    });
    Ok(Facts {
        system: system::SYSTEM,
        grants,
        linked_repository,
        command_dir: l.programs.command.parent().map(Path::to_path_buf),
        tmp: l.folder.tmp().to_path_buf(),
        project: project.map(Path::to_path_buf),
        token_file: l.token_file.clone(),
        carries_token: l.carries_token(),
        state_dir: state_dir.to_path_buf(),
        session_dir: l.folder.dir().to_path_buf(),
        net: i.net.clone(),
        programs: programs_to_protect(i),
        home: home.clone(),
        home_real: i.real.of(home).ok(),
        own: own.into(),
        stand_in_ca: system::stand_in_ca(i.ca_file),
        nodump: system::NODUMP,
        git,
        template_path: template.env.get("PATH").map(OsString::from),
        host_path: std::env::var_os("PATH"),
        request_env: setenv.to_vec(),
        write_deny_extra: write_deny_extra(i, &shared)?,
        features: l.programs.features,
        bwrap: i.bwrap.to_path_buf(),
        all_rw_grants: l.programs.rw_grants.clone(),
        home_written: i.settings.all_templates().iter().any(|t| t.writes_home()),
    })
}

/// The write-deny list's additions: the operator's entries (a trailing `/` a folder), then
/// every `PATH` folder that can be kept read-only inside the read-write grants `shared`.
fn write_deny_extra(
    i: &Inputs<'_>,
    shared: &[PathBuf],
) -> Result<Vec<(PathBuf, bool)>, SandboxStepError> {
    let (l, home) = (i.launch, &i.host.home);
    let mut extra: Vec<(PathBuf, bool)> = Vec::new();
    for value in &i.settings.write_deny {
        let dir = value.ends_with('/');
        if let Some(p) = grants::expand(value, home, l.project(), &l.claude_config)? {
            extra.push((p, dir));
        }
    }
    for d in crate::reach::kept_path_folders(shared) {
        extra.push((d, true));
    }
    Ok(extra)
}

/// The folders of the programs a later launch runs with the token: this executable, the shim,
/// bwrap, ssh, and each template's command, both where they were found and where their links
/// lead. Kept read-only in every sandbox that shows them.
fn programs_to_protect(i: &Inputs<'_>) -> Vec<PathBuf> {
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
        let real = i.real.of(&p).ok();
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
