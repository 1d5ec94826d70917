//! The sandbox on Linux (and every system but macOS): `bwrap`. The profile gets the no-dump
//! preload, stand-in mode's CA, the git wrapper and the pinned configuration of a token
//! session, the write-deny list kept read-only where a later launch reads it (missing entries
//! held by placeholders); then it is resolved and rendered, with the mount points it needs under
//! `/tmp` made 0700, and handed to bwrap on a descriptor.

use std::ffi::OsString;
use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use super::profile::{expand, mask_own_folders, Inputs, ARGS_FD, BIND_FD_BASE};
use crate::launch::sandbox::error::{ConfineError, SandboxStepError};
use crate::launch::sandbox::SessionArgv;
use crate::launch::spawn_error::spawn_err;
use crate::reach;
use relay_token::sandbox::write_deny;
use relay_token::sandbox::write_deny::Placeholders;
use relay_token::sandbox::{self, Profile};

/// Where a sandbox sees relay's no-dump preload (bound read-only).
pub(crate) const SANDBOX_PRELOAD: &str = "/run/relay/librelay_nodump.so";

/// Where a token session's sandbox sees relay's git wrapper; [`SANDBOX_BIN`] comes first on its
/// `PATH`.
pub(crate) const SANDBOX_GIT: &str = "/run/relay/bin/git";

/// The folder of [`SANDBOX_GIT`].
pub(crate) const SANDBOX_BIN: &str = "/run/relay/bin";

/// Where bwrap reports the sandbox's start (`--json-status-fd`), in bwrap.
pub(crate) const SANDBOX_STATUS_FD: RawFd = 6;

/// The `bwrap` argv: the write-deny list, the relay's folders masked, resolved and rendered;
/// each checked source bound by its descriptor and the start reported on a status descriptor
/// where this bwrap can.
pub(super) fn bwrap_argv(
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
pub(super) fn preload_no_dump(
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
pub(super) fn stand_in_ca(
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
pub(super) fn stand_in_ca(
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
pub(super) fn guard_git(
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
    let template_path = i.launch.v.template().env.get("PATH").map(OsString::from);
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
pub(super) fn hand_over(
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

/// The profile's read-write grants, as real paths.
pub(super) fn real_rw_grants(real: &sandbox::Realpaths, profile: &Profile) -> Vec<PathBuf> {
    profile
        .read_write_grants()
        .iter()
        .map(|g| real.of(g).unwrap_or_else(|_| g.clone()))
        .collect()
}

/// Keeps every write-deny path inside a read-write grant read-only: the built-in list by the
/// rule of [`write_deny`] (where a later launch reads each entry: the home folder, the
/// project, a repository's git folder); the operator's additions; every `PATH` folder that can
/// be kept so. A missing one the rule holds gets a placeholder (made under the state folder's
/// lock) so the session cannot create it.
pub(super) fn deny_writes(
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
pub(super) fn deny_folders(
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
pub(super) fn deny_write(
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
pub(super) fn check_no_link(grant: &Path, path: &Path) -> Result<(), SandboxStepError> {
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

/// Makes, inside the session's temp folder, every mount point bwrap needs under `/tmp` (a grant
/// that lives under `/tmp`), 0700 folders and 0600 files, so bwrap creates none itself (it
/// would make them 0755). The temp folder is fresh and no session runs in it yet.
pub(super) fn make_tmp_mount_points(
    resolved: &sandbox::Resolved,
    session_tmp: &Path,
) -> io::Result<()> {
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
