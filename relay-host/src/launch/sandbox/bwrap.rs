//! The sandbox on Linux (and every system but macOS): `bwrap`. The plan's write-deny list is
//! kept read-only inside the read-write grants (missing entries held by placeholders); the
//! resolved profile is rendered, with the mount points it needs under `/tmp` made 0700, and
//! handed to bwrap on a descriptor.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use super::confine::{ARGS_FD, BIND_FD_BASE};
use super::plan::{SandboxPlan, StandInCa, System};
use crate::launch::sandbox::error::{ConfineError, SandboxStepError};
use crate::launch::sandbox::SessionArgv;
use crate::launch::spawn_error::spawn_err;
use crate::settings::write_places;
use relay_token::sandbox::write_deny;
use relay_token::sandbox::write_deny::Placeholders;
use relay_token::sandbox::{self, Profile};

/// The program that makes the sandbox here.
pub(super) const SYSTEM: System = System::Bwrap;

/// This build carries the no-dump preload ([`sandbox::nodump`]).
pub(super) const NODUMP: bool = sandbox::nodump::AVAILABLE;

/// Stand-in mode's CA, shown read-only at [`crate::stand_in::SANDBOX_CA`] and named by
/// [`crate::stand_in::CA_VARIABLE`].
pub(super) fn stand_in_ca(file: Option<&Path>) -> Option<StandInCa> {
    use crate::stand_in::{CA_VARIABLE, SANDBOX_CA};
    file.map(|f| StandInCa {
        file: f.to_path_buf(),
        at: SANDBOX_CA,
        variable: CA_VARIABLE,
    })
}

/// Writes the no-dump preload into the session folder `dir` ([`sandbox::nodump::write_into`]).
pub(super) fn write_no_dump(dir: &Path) -> io::Result<PathBuf> {
    sandbox::nodump::write_into(dir)
}

/// The `bwrap` argv around `target` for the laid-out `plan` (`resolved`): each checked source
/// bound by its descriptor and the start reported on a status descriptor where the plan says.
pub(super) fn render(
    plan: &SandboxPlan,
    mut resolved: sandbox::Resolved,
    target: &[OsString],
) -> Result<SessionArgv, SandboxStepError> {
    make_tmp_mount_points(&resolved, &plan.tmp).map_err(spawn_err("temp folder"))?;
    if plan.bwrap.bind_fd {
        resolved.bind_by_fd(BIND_FD_BASE);
    }
    let mut options = resolved.bwrap_options(&plan.setenv);
    if let Some(n) = plan.bwrap.status_fd {
        options.splice(0..0, ["--json-status-fd".into(), n.to_string().into()]);
    }
    let command = resolved.bwrap_command(target);
    let bind_fds = resolved.bind_fds().len();
    sandbox::limits::check(&options, &command, bind_fds, ARGS_FD)?;
    let (argv, args_file) = hand_over(&plan.bwrap.program, options, command)?;
    let by_fd = (bind_fds > 0).then_some(resolved);
    Ok(SessionArgv {
        argv,
        by_fd,
        status_fd: plan.bwrap.status_fd,
        args_file: Some(args_file),
    })
}

/// bwrap's command line, `bwrap --args ARGS_FD -- COMMAND`, and its options in an in-memory
/// file.
fn hand_over(
    bwrap: &Path,
    options: Vec<OsString>,
    command: Vec<OsString>,
) -> Result<(Vec<OsString>, std::os::fd::OwnedFd), SandboxStepError> {
    let file = sandbox::limits::args_file(&options).map_err(spawn_err("bwrap's arguments file"))?;
    let mut argv: Vec<OsString> = vec![bwrap.as_os_str().to_os_string()];
    argv.extend(["--args".into(), ARGS_FD.to_string().into()]);
    argv.push("--".into());
    argv.extend(command);
    Ok((argv, file))
}

/// Keeps every write-deny path inside a read-write grant read-only: the plan's folders and
/// additions by the rule of [`write_deny`] (where a later launch reads each entry: the home
/// folder, the project, a repository's git folder). A missing one the rule holds gets a
/// placeholder (made under the state folder's lock) so the session cannot create it. Returns
/// the folders granted read-write again (a linked worktree's git folder).
pub(super) fn deny_writes(
    plan: &SandboxPlan,
    profile: &mut Profile,
) -> Result<Vec<PathBuf>, SandboxStepError> {
    let wd = &plan.write_deny;
    let list = write_deny::plan(&wd.folders, wd.token, &wd.extra);
    let state_dir = plan.state_dir.as_path();
    let _lock = crate::launch::placeholders::lock(state_dir).map_err(spawn_err(format_args!(
        "state folder {}",
        state_dir.display()
    )))?;
    if let Some(p) = &plan.project {
        crate::state::leftovers::watch(state_dir, p).map_err(ConfineError::Placeholders)?;
    }
    let mut ph = Placeholders::open(state_dir).map_err(ConfineError::Placeholders)?;
    let home_real = plan.home.canonicalize().ok();
    let mut writable = Vec::new();
    for mut listed in list {
        if let Some(g) = plan.bwrap.holder(&listed.path) {
            // relay makes nothing in the operator's home: inside a grant of the home itself (a
            // template that sets `writes_home`), a missing entry is not held by a placeholder,
            // which the operator's own programs would find there while the session runs.
            // A path inside a project or another grant in the home is held as before.
            let in_home = |g: &PathBuf| {
                let why = write_places::refused_write(g, None, &plan.home, home_real.as_deref());
                why.is_some_and(|w| w.in_home())
            };
            let mut holders = plan
                .bwrap
                .shared
                .iter()
                .filter(|g| listed.path.starts_with(g));
            if holders.all(in_home) {
                listed.hold = false;
            }
            writable.extend(deny_write(profile, &mut ph, g, &listed)?);
        }
    }
    Ok(writable)
}

/// Keeps a listed path (inside the read-write grant `grant`) read-only: a regular file on the
/// way (a git worktree's `.git` file) is kept so instead; a symlink on the way refuses the
/// launch (a session could replace the link itself); a missing path gets a placeholder when the
/// list holds it ([`write_deny::Listed::hold`]), else is left alone. A folder writable again
/// inside a read-only entry is granted so, and returned.
fn deny_write(
    profile: &mut Profile,
    ph: &mut Placeholders,
    grant: &Path,
    listed: &write_deny::Listed,
) -> Result<Option<PathBuf>, SandboxStepError> {
    let path = listed.path.as_path();
    if listed.writable {
        // Checked like any listed path: no symlink on the way from the grant.
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
            check_no_link(grant, path)?;
            profile.read_write(path.to_path_buf());
            return Ok(Some(path.to_path_buf()));
        }
        return Ok(None);
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
            return Ok(None);
        }
    }
    if std::fs::symlink_metadata(path).is_err() {
        if !listed.hold {
            return Ok(None);
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
    Ok(None)
}

/// Refuses a symlink between `grant` and `path` (a session could replace it).
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

/// Makes, inside the session's temp folder, every mount point bwrap needs under `/tmp` (a grant
/// that lives under `/tmp`), 0700 folders and 0600 files, so bwrap creates none itself (it
/// would make them 0755). The temp folder is fresh and no session runs in it yet.
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
