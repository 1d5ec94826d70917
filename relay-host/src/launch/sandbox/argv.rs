//! The session's own command line: the template's command with its placeholders filled in and
//! what the launch adds to it, and ssh around it for a remote launch.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::launch::prepare::Prepared;
use crate::settings::{Settings, CLAUDE_CONFIG_PLACEHOLDER, PROJECT_PLACEHOLDER};
use crate::Host;
use relay_token::sandbox;

/// The relay-owned ssh configuration, operator-editable in the config folder (outside every
/// grant: masked in every sandbox).
pub const SSH_CONFIG: &str = "ssh_config";

/// The session's program and its arguments: the template's command (placeholders filled in),
/// `--setting-sources user` for a token launch outside a trusted project or with `--add-dir`,
/// `--resume`, then the request's extra arguments (a token launch's as
/// [`crate::launch::plan::claude_args::for_claude`] hands them).
pub(crate) fn target_argv(host: &Host, settings: &Settings, launch: &Prepared) -> Vec<OsString> {
    let (v, project) = (&launch.v, launch.project());
    let program = &launch.programs.command;
    let mut target: Vec<OsString> = vec![program.as_os_str().to_os_string()];
    target.extend(
        v.template().command[1..]
            .iter()
            .map(|a| OsString::from(subst(a, &launch.claude_config, project))),
    );
    let adds_dirs = crate::launch::plan::claude_args::adds_dirs(v.extra_args());
    if launch.carries_token() && (adds_dirs || !trusted(host, settings, project)) {
        // A session without the token may have written the project's Claude settings (a base
        // URL, hooks), or an added folder's agents and skills: a launch that carries it reads
        // the relay-owned user settings only.
        target.push("--setting-sources".into());
        target.push("user".into());
    }
    if let (true, Some(r)) = (v.claude(), &v.resume()) {
        target.push("--resume".into());
        target.push(r.into());
    }
    if v.claude() && v.continue_last() {
        target.push("--continue".into());
    }
    if launch.carries_token() {
        // As checked: a one-word prompt for the terminal UI is kept from reading as a command.
        let args = crate::launch::plan::claude_args::for_claude(v.extra_args());
        target.extend(args.into_iter().map(OsString::from));
    } else {
        target.extend(v.extra_args().iter().map(OsString::from));
    }
    target
}

/// True when the operator listed `project` in `trusted_projects`.
fn trusted(host: &Host, settings: &Settings, project: Option<&Path>) -> bool {
    let Some(project) = project else {
        return false;
    };
    settings.trusted_projects.iter().any(|t| {
        sandbox::expand_grant(t, &host.home, None)
            .ok()
            .map(|p| p.canonicalize().unwrap_or(p))
            .is_some_and(|p| p == project)
    })
}

/// Fills `{claude_config}` and `{project}` in a template value.
pub(crate) fn subst(s: &str, claude_config: &Path, project: Option<&Path>) -> String {
    let mut s = s.replace(CLAUDE_CONFIG_PLACEHOLDER, &claude_config.to_string_lossy());
    if let Some(p) = project {
        s = s.replace(PROJECT_PLACEHOLDER, &p.to_string_lossy());
    }
    s
}

/// `ssh -F <config> -t -- HOST TARGET...`: the relay-owned config, or `/dev/null` when there is
/// none, so a session-written `~/.ssh/config` (a `ProxyCommand`) is never read.
pub(crate) fn ssh_argv(
    host: &Host,
    ssh: &Path,
    remote: &str,
    target: Vec<OsString>,
) -> Vec<OsString> {
    let own = host.config_dir.join(SSH_CONFIG);
    let config = match std::fs::symlink_metadata(&own) {
        Ok(m) if m.is_file() => own,
        _ => PathBuf::from("/dev/null"),
    };
    let mut a: Vec<OsString> = vec![
        ssh.as_os_str().to_os_string(),
        "-F".into(),
        config.into_os_string(),
        "-t".into(),
        "--".into(),
        remote.into(),
    ];
    a.extend(target);
    a
}
