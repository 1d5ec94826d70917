//! The sandbox of one launch: its profile, what it keeps out of a session's reach, and the
//! `bwrap` command line.
//!
//! In order: the template's grants, the command's folder, the private `/tmp`, the project; the
//! programs that later run with the token kept read-only ([`programs_to_protect`]); the
//! write-deny list ([`relay_token::sandbox::write_deny`]) kept read-only where a later launch reads it
//! (the home folder, the project, the repositories of these and of each read-write grant),
//! missing entries held by placeholders; the token and the relay's own folders masked; then the
//! profile is resolved and rendered, with the mount points it needs under `/tmp` made 0700.

use std::ffi::OsString;
#[cfg(not(target_os = "macos"))]
use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use crate::launch::sandbox::error::{ConfineError, SandboxStepError};
use crate::launch::spawn_error::spawn_err;
use crate::launch::{prepare::Prepared, sandbox::SessionArgv};
use crate::reach;
use crate::settings::{Sandbox, Settings, CLAUDE_CONFIG_PLACEHOLDER, PROJECT_PLACEHOLDER};
use crate::Host;
use relay_token::sandbox::write_deny;

/// Where a sandbox sees relay's no-dump preload (bound read-only).
#[cfg(not(target_os = "macos"))]
pub(crate) const SANDBOX_PRELOAD: &str = "/run/relay/librelay_nodump.so";

/// Where a token session's sandbox sees relay's git wrapper; [`SANDBOX_BIN`] comes first on its
/// `PATH`.
#[cfg(not(target_os = "macos"))]
pub(crate) const SANDBOX_GIT: &str = "/run/relay/bin/git";

/// The folder of [`SANDBOX_GIT`].
#[cfg(not(target_os = "macos"))]
pub(crate) const SANDBOX_BIN: &str = "/run/relay/bin";
#[cfg(not(target_os = "macos"))]
use relay_token::sandbox::write_deny::Placeholders;
use relay_token::sandbox::{self, Profile};

/// What the sandbox of one launch is built from: the launch as prepared (its request, token,
/// programs and session folder), its sandbox program and network.
pub(crate) struct Inputs<'a> {
    pub host: &'a Host,
    pub settings: &'a Settings,
    pub launch: &'a Prepared,
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

/// Where bwrap reports the sandbox's start (`--json-status-fd`), in bwrap.
#[cfg(not(target_os = "macos"))]
pub(crate) const SANDBOX_STATUS_FD: RawFd = 6;

/// The sandbox's command line around `target`, `setenv` reaching the sandboxed program only:
/// `bwrap` on Linux, what `relay-shim --sandbox-profile` runs under `sandbox-exec` on macOS.
pub(crate) fn sandbox_argv(
    i: &Inputs<'_>,
    state_dir: &Path,
    setenv: &[(OsString, OsString)],
    target: &[OsString],
) -> Result<SessionArgv, SandboxStepError> {
    let profile = base_profile(i, state_dir)?;
    #[cfg(target_os = "macos")]
    return Ok(SessionArgv::plain(sbpl_argv(i, profile, setenv, target)?));
    #[cfg(not(target_os = "macos"))]
    return bwrap_argv(i, profile, state_dir, setenv, target);
}

/// The `bwrap` argv: the write-deny list, the relay's folders masked, resolved and rendered;
/// each checked source bound by its descriptor and the start reported on a status descriptor
/// where this bwrap can.
#[cfg(not(target_os = "macos"))]
fn bwrap_argv(
    i: &Inputs<'_>,
    mut profile: Profile,
    state_dir: &Path,
    setenv: &[(OsString, OsString)],
    target: &[OsString],
) -> Result<SessionArgv, SandboxStepError> {
    if let Some(p) = i.launch.project() {
        crate::launch::sandbox::git_binds::bind_linked_repository(&mut profile, p, i.real);
    }
    let rw: Vec<PathBuf> = real_rw_grants(i.real, &profile);
    let setenv = &preload_no_dump(i, &mut profile, setenv)?;
    let setenv = &stand_in_ca(i, &mut profile, setenv);
    let setenv = &guard_git(i, &mut profile, setenv, &rw)?;
    let (token, dir) = (i.launch.carries_token(), i.launch.folder.dir());
    let setenv =
        &crate::launch::prepare::own_config::pin(token, dir, &i.host.home, &mut profile, setenv)?;
    deny_writes(i, &mut profile, state_dir, &rw)?;
    mask_own_folders(i.real, i.host, &mut profile)?;
    let mut resolved = profile.resolve_with(&i.launch.programs.rw_grants, i.real)?;
    make_tmp_mount_points(&resolved, i.launch.folder.tmp()).map_err(spawn_err("temp folder"))?;
    if i.launch.programs.features.bind_fd {
        resolved.bind_by_fd(BIND_FD_BASE);
    }
    let mut options = resolved.bwrap_options(setenv);
    let status_fd = i
        .launch
        .programs
        .features
        .json_status
        .then_some(SANDBOX_STATUS_FD);
    if let Some(n) = status_fd {
        options.splice(0..0, ["--json-status-fd".into(), n.to_string().into()]);
    }
    let command = resolved.bwrap_command(target);
    let bind_fds = resolved.bind_fds().len();
    sandbox::limits::check(&options, &command, bind_fds, ARGS_FD)?;
    let (argv, args_file) = hand_over(i.bwrap, options, command)?;
    let by_fd = (bind_fds > 0).then_some(resolved);
    Ok(SessionArgv {
        argv,
        by_fd,
        status_fd,
        args_file,
    })
}

/// A launch that gets the token preloads [`sandbox::nodump`] into its program, so the tools
/// the program runs cannot read the token out of its memory: the preload is written into the
/// session folder (which no sandbox reaches), shown read-only at
/// [`SANDBOX_PRELOAD`], and named by `LD_PRELOAD`, set last so a request's
/// variables cannot replace it. Other launches are left as they are.
#[cfg(not(target_os = "macos"))]
fn preload_no_dump(
    i: &Inputs<'_>,
    profile: &mut Profile,
    setenv: &[(OsString, OsString)],
) -> Result<Vec<(OsString, OsString)>, SandboxStepError> {
    let mut env = setenv.to_vec();
    if i.launch.carries_token() && sandbox::nodump::AVAILABLE {
        let session_dir = i.launch.folder.dir();
        let so = sandbox::nodump::write_into(session_dir).map_err(|source| {
            let dir = session_dir.to_path_buf();
            ConfineError::NoDump { dir, source }
        })?;
        profile.place_file(so, SANDBOX_PRELOAD);
        env.push(("LD_PRELOAD".into(), SANDBOX_PRELOAD.into()));
    }
    Ok(env)
}

/// A stand-in launch shows its session CA's certificate read-only at
/// [`crate::stand_in::SANDBOX_CA`] and names it in `NODE_EXTRA_CA_CERTS`, set after the
/// request's variables so none replaces it. Other launches are left as they are.
#[cfg(target_os = "linux")]
fn stand_in_ca(
    i: &Inputs<'_>,
    profile: &mut Profile,
    setenv: &[(OsString, OsString)],
) -> Vec<(OsString, OsString)> {
    use crate::stand_in::{CA_VARIABLE, SANDBOX_CA};
    let mut env = setenv.to_vec();
    if let Some(ca) = i.ca_file {
        profile.place_file(ca.to_path_buf(), SANDBOX_CA);
        env.retain(|(k, _)| k != CA_VARIABLE);
        env.push((CA_VARIABLE.into(), SANDBOX_CA.into()));
    }
    env
}

/// No stand-in mode on this system.
#[cfg(all(not(target_os = "linux"), not(target_os = "macos")))]
fn stand_in_ca(
    _: &Inputs<'_>,
    _: &mut Profile,
    setenv: &[(OsString, OsString)],
) -> Vec<(OsString, OsString)> {
    setenv.to_vec()
}

/// A launch that gets the token runs git through [`sandbox::git_guard`]'s wrapper: written
/// into the session folder, shown read-only at [`SANDBOX_GIT`], its folder
/// first on `PATH` (so Claude Code's own `git status` goes through it too), told the real git,
/// the project's repository and the read-write grants (`rw`), where other sessions may write.
/// Other launches, and a host without git, are left as they are.
#[cfg(not(target_os = "macos"))]
fn guard_git(
    i: &Inputs<'_>,
    profile: &mut Profile,
    setenv: &[(OsString, OsString)],
    rw: &[PathBuf],
) -> Result<Vec<(OsString, OsString)>, SandboxStepError> {
    use sandbox::git_guard;
    let mut env = setenv.to_vec();
    let real = relay_token::which::find_program("git");
    let (true, Some(real)) = (i.launch.carries_token(), real) else {
        return Ok(env);
    };
    let wrapper =
        git_guard::write_wrapper(i.launch.folder.dir()).map_err(spawn_err("git's wrapper"))?;
    profile.place_file(wrapper, SANDBOX_GIT);
    let common = i.launch.project().and_then(git_guard::project_common_dir);
    for (k, v) in git_guard::wrapper_env(&real, common.as_deref(), rw) {
        env.push((k.into(), v));
    }
    let linked = common
        .as_deref()
        .map(sandbox::git_dirs::linked)
        .unwrap_or_default();
    let (k, v) = git_guard::linked_env(&linked);
    env.push((k.into(), v));
    let template_path = i.launch.v.template.env.get("PATH").map(OsString::from);
    let path = template_path
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_else(|| "/usr/bin:/bin".into());
    let mut first = OsString::from(SANDBOX_BIN);
    first.push(":");
    first.push(path);
    env.push(("PATH".into(), first));
    Ok(env)
}

/// bwrap's command line: on Linux `bwrap --args ARGS_FD -- COMMAND`, the options in an
/// in-memory file; elsewhere all on the command line.
#[cfg(not(target_os = "macos"))]
fn hand_over(
    bwrap: &Path,
    options: Vec<OsString>,
    command: Vec<OsString>,
) -> Result<(Vec<OsString>, Option<std::os::fd::OwnedFd>), SandboxStepError> {
    let mut argv: Vec<OsString> = vec![bwrap.as_os_str().to_os_string()];
    #[cfg(target_os = "linux")]
    let file = {
        let file =
            sandbox::limits::args_file(&options).map_err(spawn_err("bwrap's arguments file"))?;
        argv.extend(["--args".into(), ARGS_FD.to_string().into()]);
        Some(file)
    };
    #[cfg(not(target_os = "linux"))]
    let file = {
        argv.extend(options);
        None
    };
    argv.push("--".into());
    argv.extend(command);
    Ok((argv, file))
}

/// The target's argv for a macOS launch: the same profile (grants, protected programs, the
/// write-deny entries that exist, the masks) is rendered as SBPL and written 0600 to
/// [`SBPL_FILE`] in the session folder, which `relay-shim --sandbox-profile` runs the target
/// under (`sandbox-exec`, in a session of its own); the request's variables reach the sandboxed
/// program only, through `/usr/bin/env` inside the sandbox. What this cannot hold is said in
/// `docs/macos.md`: a write-deny entry that does not exist yet is not denied, and nothing of it
/// has run on a Mac.
#[cfg(target_os = "macos")]
fn sbpl_argv(
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

/// The SBPL profile's file name in the session folder (macOS).
pub(crate) const SBPL_FILE: &str = "profile.sb";

/// What every sandbox of a launch starts from, on either system: the template's profile, the
/// state folder for a file mask, the network, and the programs that later hold the token kept
/// read-only.
fn base_profile(i: &Inputs<'_>, state_dir: &Path) -> Result<Profile, SandboxStepError> {
    let mut profile = template_profile(i)?;
    profile.state_dir(state_dir.to_path_buf());
    profile.network(i.net.clone());
    for folder in programs_to_protect(i, i.real) {
        profile.protect(folder);
    }
    Ok(profile)
}

/// The template's grants, the command's folder, `/tmp`, the project and the token's deny.
fn template_profile(i: &Inputs<'_>) -> Result<Profile, SandboxStepError> {
    let project = i.launch.project();
    let mut profile = Profile::new();
    for (value, rw) in template_grants(&i.launch.v.template.sandbox) {
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

fn template_grants(sandbox: &Sandbox) -> Vec<(&str, bool)> {
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

/// The profile's read-write grants, as real paths.
#[cfg(not(target_os = "macos"))]
fn real_rw_grants(real: &sandbox::Realpaths, profile: &Profile) -> Vec<PathBuf> {
    profile
        .read_write_grants()
        .iter()
        .map(|g| real.of(g).unwrap_or_else(|_| g.clone()))
        .collect()
}

/// The folders of the programs a later launch runs with the token: this executable, the shim,
/// bwrap, ssh, and each template's command, both where they were found and where their links
/// lead. Kept read-only in every sandbox that shows them.
fn programs_to_protect(i: &Inputs<'_>, real_of: &sandbox::Realpaths) -> Vec<PathBuf> {
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

/// Keeps every write-deny path inside a read-write grant read-only: the built-in list by the
/// rule of [`write_deny`] (where a later launch reads each entry: the home folder, the
/// project, a repository's git folder); the operator's additions; every `PATH` folder that can
/// be kept so. A missing one the rule holds gets a placeholder (made under the state folder's
/// lock) so the session cannot create it.
#[cfg(not(target_os = "macos"))]
fn deny_writes(
    i: &Inputs<'_>,
    profile: &mut Profile,
    state_dir: &Path,
    rw: &[PathBuf],
) -> Result<(), SandboxStepError> {
    let project = i.launch.project();
    // The relay's own folders (the relay-owned Claude config folder is a grant) are masked from
    // every session but the one they serve: no list applies inside them.
    let own: Vec<PathBuf> = [&i.host.config_dir, &i.host.state_dir]
        .iter()
        .map(|p| i.real.of(p).unwrap_or_else(|_| p.to_path_buf()))
        .collect();
    let folders = deny_folders(i, rw, &own);
    let mut extra: Vec<(PathBuf, bool)> = Vec::new();
    for value in &i.settings.write_deny {
        let dir = value.ends_with('/');
        if let Some(p) = expand(i.host, value, project, &i.launch.claude_config)? {
            extra.push((p, dir));
        }
    }
    for d in reach::kept_path_folders(rw) {
        extra.push((d, true));
    }
    let list = write_deny::plan(&folders, i.launch.carries_token(), &extra);
    let _lock = crate::launch::placeholders::lock(state_dir).map_err(spawn_err(format_args!(
        "state folder {}",
        state_dir.display()
    )))?;
    if let Some(p) = project {
        crate::state::leftovers::watch(state_dir, p).map_err(ConfineError::Placeholders)?;
    }
    let mut ph = Placeholders::open(state_dir).map_err(ConfineError::Placeholders)?;
    for listed in list {
        if let Some(g) = rw.iter().find(|g| listed.path.starts_with(g)) {
            deny_write(profile, &mut ph, g, &listed)?;
        }
    }
    Ok(())
}

/// The folders the write-deny list applies in, each with its role: the home folder, the
/// project, then every read-write grant not inside one of those (a nested one adds nothing but
/// its own repository, which the walk from it finds); none inside the relay's own folders.
#[cfg(not(target_os = "macos"))]
fn deny_folders(
    i: &Inputs<'_>,
    rw: &[PathBuf],
    own: &[PathBuf],
) -> Vec<(PathBuf, write_deny::Role)> {
    use write_deny::Role;
    let project = i.launch.project();
    let mut folders: Vec<(PathBuf, Role)> = Vec::new();
    folders.extend(i.real.of(&i.host.home).ok().map(|h| (h, Role::Home)));
    folders.extend(project.map(|p| (p.to_path_buf(), Role::Project)));
    let mut seen: std::collections::HashSet<PathBuf> =
        folders.iter().map(|(f, _)| f.clone()).collect();
    for g in rw {
        if seen.insert(g.clone()) {
            folders.push((g.clone(), Role::Grant));
        }
    }
    folders.retain(|(a, _)| !own.iter().any(|o| a.starts_with(o)));
    folders
}

/// Keeps a listed path (inside the read-write grant `grant`) read-only: a regular file on the
/// way (a git worktree's `.git` file) is kept so instead; a symlink on the way refuses the
/// launch (a session could replace the link itself); a missing path gets a placeholder when the
/// list holds it ([`write_deny::Listed::hold`]), else is left alone.
#[cfg(not(target_os = "macos"))]
fn deny_write(
    profile: &mut Profile,
    ph: &mut Placeholders,
    grant: &Path,
    listed: &write_deny::Listed,
) -> Result<(), SandboxStepError> {
    let path = listed.path.as_path();
    if listed.writable {
        // Checked like any listed path: no symlink on the way from the grant.
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
            check_no_link(grant, path)?;
            profile.read_write(path.to_path_buf());
        }
        return Ok(());
    }
    let mut p = grant.to_path_buf();
    let rel = path.strip_prefix(grant).unwrap_or(Path::new(""));
    for c in rel.components() {
        p.push(c);
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            break;
        };
        if m.file_type().is_symlink() {
            let grant = grant.to_path_buf();
            return Err(ConfineError::WriteDenySymlink { path: p, grant }.into());
        }
        if m.is_file() && p != path {
            profile.protect(p);
            return Ok(());
        }
    }
    if std::fs::symlink_metadata(path).is_err() {
        if !listed.hold {
            return Ok(());
        }
        let folder = listed.dir || listed.folder_placeholder;
        let made = ph.ensure(path, folder).map_err(|source| {
            let path = path.to_path_buf();
            ConfineError::Placeholder { path, source }
        })?;
        if !made {
            let path = path.to_path_buf();
            return Err(ConfineError::PlaceholderRaced { path }.into());
        }
    }
    profile.protect(path.to_path_buf());
    Ok(())
}

/// Refuses a symlink between `grant` and `path` (a session could replace it).
#[cfg(not(target_os = "macos"))]
fn check_no_link(grant: &Path, path: &Path) -> Result<(), SandboxStepError> {
    let mut p = grant.to_path_buf();
    for c in path
        .strip_prefix(grant)
        .unwrap_or(Path::new(""))
        .components()
    {
        p.push(c);
        if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
            let grant = grant.to_path_buf();
            return Err(ConfineError::WriteDenySymlink { path: p, grant }.into());
        }
    }
    Ok(())
}

/// The host's own folders are masked inside any grant that would show them: a session must not
/// read other sessions' files in the state folder, nor rewrite the settings (and so drop the
/// deny) for the next launch. A mask also binds every folder between the grant and it onto
/// itself, so no parent can be renamed away and replaced.
fn mask_own_folders(
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

/// Makes, inside the session's temp folder, every mount point bwrap needs under `/tmp` (a grant
/// that lives under `/tmp`), 0700 folders and 0600 files, so bwrap creates none itself (it
/// would make them 0755). The temp folder is fresh and no session runs in it yet.
#[cfg(not(target_os = "macos"))]
fn make_tmp_mount_points(resolved: &sandbox::Resolved, session_tmp: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    for (target, is_dir) in resolved.mount_targets() {
        let Ok(rel) = target.strip_prefix("/tmp") else {
            continue;
        };
        if rel.as_os_str().is_empty() {
            continue;
        }
        let host_side = session_tmp.join(rel);
        let parent = if is_dir {
            host_side.as_path()
        } else {
            host_side.parent().unwrap_or(session_tmp)
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
        if !is_dir && std::fs::symlink_metadata(&host_side).is_err() {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&host_side)?;
        }
    }
    Ok(())
}
