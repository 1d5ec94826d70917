//! The sandbox of one launch as a plan: what the profile grants, keeps read-only and denies,
//! which files relay places in it, the variables the sandboxed program gets in their final
//! order, and how bwrap is told. Made by [`plan`] from [`Facts`] alone (what the disk and the
//! process environment said, gathered once by `facts::gather`), so every decision is here and
//! none of it touches a disk; `layout` then makes what it names. The plan holds what either
//! system reads; a macOS build never reads bwrap's part ([`BwrapPlan`]).
#![cfg_attr(target_os = "macos", allow(dead_code))]

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use crate::launch::sandbox::error::ConfineError;
use crate::settings::grants::Access;
use relay_token::sandbox::write_deny::Role;
use relay_token::sandbox::{git_guard, BwrapFeatures, Profile, SandboxNet};

#[cfg(test)]
mod tests;

/// Where a sandbox sees relay's no-dump preload (bound read-only).
pub(crate) const SANDBOX_PRELOAD: &str = "/run/relay/librelay_nodump.so";

/// Where a token session's sandbox sees relay's git wrapper; [`SANDBOX_BIN`] comes first on its
/// `PATH`.
pub(crate) const SANDBOX_GIT: &str = "/run/relay/bin/git";

/// The folder of [`SANDBOX_GIT`].
pub(crate) const SANDBOX_BIN: &str = "/run/relay/bin";

/// Where bwrap reports the sandbox's start (`--json-status-fd`), in bwrap.
pub(crate) const SANDBOX_STATUS_FD: RawFd = 6;

/// The program that makes the sandbox, and so what the plan can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum System {
    /// `bwrap` (every system but macOS): files placed, variables set, missing write-deny
    /// entries held by placeholders.
    Bwrap,
    /// `sandbox-exec` (macOS): the profile and the request's variables only.
    Seatbelt,
}

/// One of the template's grants for this launch: as expanded, its real path, its access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    pub path: PathBuf,
    pub real: PathBuf,
    pub access: Access,
}

/// One of the relay's own folders (the config or the state folder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnFolder {
    pub path: PathBuf,
    pub real: PathBuf,
    /// It is a folder on the host.
    pub exists: bool,
}

/// The host's git, for the wrapper of a token session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Git {
    /// The real git (found on the host's `PATH`).
    pub program: PathBuf,
    /// The project's repository's common folder.
    pub common: Option<PathBuf>,
    /// Its linked worktrees' and submodules' git folders.
    pub linked: Vec<PathBuf>,
}

/// Stand-in mode's session CA: its file on the host, where the sandbox shows it, and the
/// variable that names it there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StandInCa {
    pub file: PathBuf,
    pub at: &'static str,
    pub variable: &'static str,
}

/// What a sandbox's plan is made from: plain values, read from the disk and the process's
/// environment by `facts::gather` before any decision.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    /// The program that makes the sandbox.
    pub system: System,
    /// The template's grants, expanded ([`crate::settings::Sandbox::expanded`]).
    pub grants: Vec<Grant>,
    /// A linked worktree's repository no read-write grant reaches (`git_binds`), real.
    pub linked_repository: Option<PathBuf>,
    /// The folder of the session's command.
    pub command_dir: Option<PathBuf>,
    /// The session's temp folder (the sandbox's `/tmp`).
    pub tmp: PathBuf,
    /// The project, real.
    pub project: Option<PathBuf>,
    /// The token file, denied.
    pub token_file: Option<PathBuf>,
    /// The launch hands the session the token.
    pub carries_token: bool,
    /// The state folder: the token's mask file, and the placeholders' lock.
    pub state_dir: PathBuf,
    /// The session's folder, where relay writes what it places (no sandbox reaches it).
    pub session_dir: PathBuf,
    /// The session's network.
    pub net: SandboxNet,
    /// The folders of the programs that later run with the token.
    pub programs: Vec<PathBuf>,
    /// The home folder as given.
    pub home: PathBuf,
    /// The home folder's real path, where it has one.
    pub home_real: Option<PathBuf>,
    /// The relay's config and state folders.
    pub own: Vec<OwnFolder>,
    /// Stand-in mode's CA.
    pub stand_in_ca: Option<StandInCa>,
    /// This build carries the no-dump preload.
    pub nodump: bool,
    /// The host's git, when there is one.
    pub git: Option<Git>,
    /// The template's `PATH`.
    pub template_path: Option<OsString>,
    /// The host's `PATH` (relay-host's own environment).
    pub host_path: Option<OsString>,
    /// The request's variables, in order.
    pub request_env: Vec<(OsString, OsString)>,
    /// The write-deny list's additions: the operator's entries and the `PATH` folders kept
    /// read-only, each `(path, is_folder)`.
    pub write_deny_extra: Vec<(PathBuf, bool)>,
    /// What this bwrap can do.
    pub features: BwrapFeatures,
    /// The sandbox program.
    pub bwrap: PathBuf,
    /// Every template's read-write grants, expanded (what a session could have written).
    pub all_rw_grants: Vec<PathBuf>,
    /// A template of the settings writes the home (`"writes_home": true`).
    pub home_written: bool,
}

/// A file relay makes for the sandbox and places read-only in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Staged {
    /// The no-dump preload, at [`SANDBOX_PRELOAD`].
    NoDump,
    /// Stand-in mode's CA (already written).
    StandInCa(StandInCa),
    /// git's wrapper, at [`SANDBOX_GIT`].
    GitWrapper,
    /// The pinned configuration (`launch::sandbox::own_config`).
    OwnConfig,
    /// The empty home of a token session beside a template that writes the home
    /// (`own_config::pin_home`).
    EmptyHome,
    /// The kept copies of the project repository's configurations (`git_config`), each over
    /// the `config` of one of these git folders: the repository's common folder, then its
    /// linked worktrees' and submodules'.
    GitConfigs(Vec<PathBuf>),
}

/// The write-deny list of one launch: the folders it applies in, by role, and its additions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WriteDeny {
    pub folders: Vec<(PathBuf, Role)>,
    pub extra: Vec<(PathBuf, bool)>,
    pub token: bool,
}

/// The sandbox of one launch, decided.
#[derive(Debug, Clone)]
pub(crate) struct SandboxPlan {
    /// The grants in order: the template's, then a linked worktree's repository.
    pub grants: Vec<Grant>,
    /// The command's folder, shown read-only.
    pub command_dir: Option<PathBuf>,
    /// The session's temp folder, the sandbox's `/tmp`.
    pub tmp: PathBuf,
    /// The working folder.
    pub project: Option<PathBuf>,
    /// Denied: the token file.
    pub deny: Vec<PathBuf>,
    /// Kept read-only where a grant shows them: the programs' folders.
    pub protect: Vec<PathBuf>,
    /// The state folder: the token's mask file, and the placeholders' lock.
    pub state_dir: PathBuf,
    /// Where relay writes what it places.
    pub session_dir: PathBuf,
    /// The session's network.
    pub net: SandboxNet,
    /// What relay places, in order.
    pub files: Vec<Staged>,
    /// The sandboxed program's variables, in order (a later one wins).
    pub setenv: Vec<(OsString, OsString)>,
    /// The write-deny list's folders and additions.
    pub write_deny: WriteDeny,
    /// The relay's own folders, masked where a grant shows them ([`own_masks`]).
    pub own: Vec<OwnFolder>,
    /// The home folder, whose git files name the operator (the pinned configuration).
    pub home: PathBuf,
    /// Every template's read-write grants: a link in them a session could have made.
    pub all_rw_grants: Vec<PathBuf>,
    /// What bwrap alone reads.
    pub bwrap: BwrapPlan,
}

/// What only bwrap reads of a plan (macOS's `sandbox-exec` has none of it).
#[derive(Debug, Clone)]
pub(crate) struct BwrapPlan {
    /// The sandbox program.
    pub program: PathBuf,
    /// The read-write grants, real: the write-deny list applies inside these, and git's
    /// wrapper knows them as shared.
    pub shared: Vec<PathBuf>,
    /// bwrap binds each checked source by its descriptor.
    pub bind_fd: bool,
    /// bwrap reports the sandbox's start here (`--json-status-fd`).
    pub status_fd: Option<RawFd>,
}

/// The plan for `f`: nothing read, nothing made.
pub(crate) fn plan(f: &Facts) -> SandboxPlan {
    let bwrap = f.system == System::Bwrap;
    let mut grants = f.grants.clone();
    if let (true, Some(common)) = (bwrap, &f.linked_repository) {
        let (path, real) = (common.clone(), common.clone());
        grants.push(Grant {
            path,
            real,
            access: Access::ReadWrite,
        });
    }
    let shared = shared(&grants);
    let (files, setenv) = match f.system {
        System::Bwrap => staged(f, &shared),
        System::Seatbelt => (Vec::new(), f.request_env.clone()),
    };
    SandboxPlan {
        command_dir: f.command_dir.clone(),
        tmp: f.tmp.clone(),
        project: f.project.clone(),
        deny: f.token_file.iter().cloned().collect(),
        protect: f.programs.clone(),
        state_dir: f.state_dir.clone(),
        session_dir: f.session_dir.clone(),
        net: f.net.clone(),
        files,
        setenv,
        write_deny: write_deny(f, &shared),
        own: f.own.clone(),
        home: f.home.clone(),
        all_rw_grants: f.all_rw_grants.clone(),
        bwrap: BwrapPlan {
            program: f.bwrap.clone(),
            bind_fd: bwrap && f.features.bind_fd,
            status_fd: (bwrap && f.features.json_status).then_some(SANDBOX_STATUS_FD),
            shared,
        },
        grants,
    }
}

/// The read-write grants among `grants`, real, in order.
pub(crate) fn shared(grants: &[Grant]) -> Vec<PathBuf> {
    let rw = grants.iter().filter(|g| g.access == Access::ReadWrite);
    rw.map(|g| g.real.clone()).collect()
}

/// What a bwrap sandbox gets placed, and its variables after the request's: for a launch that
/// gets the token the no-dump preload (`LD_PRELOAD`, after the request's so none replaces it),
/// git's wrapper first on `PATH` where the host has git, and the pinned configuration; stand-in
/// mode's CA (its variable replacing a request's). Other launches get the request's only.
fn staged(f: &Facts, shared: &[PathBuf]) -> (Vec<Staged>, Vec<(OsString, OsString)>) {
    let (mut files, mut env) = (Vec::new(), f.request_env.clone());
    let token = f.carries_token;
    if token && f.nodump {
        files.push(Staged::NoDump);
        env.push(("LD_PRELOAD".into(), SANDBOX_PRELOAD.into()));
    }
    if let Some(ca) = &f.stand_in_ca {
        env.retain(|(k, _)| k != ca.variable);
        env.push((ca.variable.into(), ca.at.into()));
        files.push(Staged::StandInCa(ca.clone()));
    }
    if let (true, Some(git)) = (token, &f.git) {
        files.push(Staged::GitWrapper);
        // Every folder a grant shows, read-only ones too: any folder can be another launch's
        // project, so any repository there may hold a configuration of a session's.
        let mut shown: Vec<PathBuf> = f.grants.iter().map(|g| g.real.clone()).collect();
        shown.extend(
            shared
                .iter()
                .filter(|s| !shown.contains(s))
                .cloned()
                .collect::<Vec<_>>(),
        );
        env.extend(git_env(f, git, &shown));
        if let Some(common) = &git.common {
            let mut dirs = vec![common.clone()];
            dirs.extend(git.linked.iter().cloned());
            files.push(Staged::GitConfigs(dirs));
        }
    }
    if token {
        files.push(Staged::OwnConfig);
        crate::launch::sandbox::own_config::pin_env(&mut env);
    }
    if token && f.home_written {
        files.push(Staged::EmptyHome);
        crate::launch::sandbox::own_config::pin_home(&mut env);
    }
    (files, env)
}

/// git's wrapper's variables ([`git_guard::wrapper_env`], [`git_guard::linked_env`]) and
/// `PATH` with [`SANDBOX_BIN`] first: before the template's `PATH`, else the host's.
fn git_env(f: &Facts, git: &Git, shared: &[PathBuf]) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    for (k, v) in git_guard::wrapper_env(&git.program, git.common.as_deref(), shared) {
        env.push((k.into(), v));
    }
    let (k, v) = git_guard::linked_env(&git.linked);
    env.push((k.into(), v));
    let path = (f.template_path.clone())
        .or_else(|| f.host_path.clone())
        .unwrap_or_else(|| "/usr/bin:/bin".into());
    let mut first = OsString::from(SANDBOX_BIN);
    first.push(":");
    first.push(path);
    env.push(("PATH".into(), first));
    env
}

/// The write-deny list's folders: with bwrap the home folder (real), the project, then every
/// read-write grant not already one of them, none inside the relay's own folders, and the
/// additions; with sandbox-exec the home folder and the project alone.
fn write_deny(f: &Facts, shared: &[PathBuf]) -> WriteDeny {
    let token = f.carries_token;
    if f.system == System::Seatbelt {
        let mut folders = vec![(f.home.clone(), Role::Home)];
        folders.extend(f.project.iter().map(|p| (p.clone(), Role::Project)));
        let extra = Vec::new();
        return WriteDeny {
            folders,
            extra,
            token,
        };
    }
    let mut folders: Vec<(PathBuf, Role)> = Vec::new();
    folders.extend(f.home_real.iter().map(|h| (h.clone(), Role::Home)));
    folders.extend(f.project.iter().map(|p| (p.clone(), Role::Project)));
    for g in shared {
        if !folders.iter().any(|(folder, _)| folder == g) {
            folders.push((g.clone(), Role::Grant));
        }
    }
    folders.retain(|(a, _)| !f.own.iter().any(|o| a.starts_with(&o.real)));
    let extra = f.write_deny_extra.clone();
    WriteDeny {
        folders,
        extra,
        token,
    }
}

impl SandboxPlan {
    /// The profile the plan starts from: its grants, the command's folder, `/tmp`, the project,
    /// the token's deny, the state folder, the network and the programs kept read-only.
    pub(crate) fn profile(&self) -> Profile {
        let mut profile = Profile::new();
        for g in &self.grants {
            match g.access {
                Access::Read => profile.read(g.path.clone()),
                Access::ReadWrite => profile.read_write(g.path.clone()),
            };
        }
        if let Some(dir) = &self.command_dir {
            profile.command_dir(dir.clone());
        }
        profile.tmp(self.tmp.clone());
        if let Some(p) = &self.project {
            profile.project(p.clone());
        }
        for d in &self.deny {
            profile.deny(d.clone());
        }
        profile.state_dir(self.state_dir.clone());
        profile.network(self.net.clone());
        for p in &self.protect {
            profile.protect(p.clone());
        }
        profile
    }

    /// The grants' real paths, the read ones first.
    pub(crate) fn real_grants(&self) -> Vec<PathBuf> {
        let read = self.grants.iter().filter(|g| g.access == Access::Read);
        let rw = self.grants.iter().filter(|g| g.access == Access::ReadWrite);
        read.chain(rw).map(|g| g.real.clone()).collect()
    }
}

impl BwrapPlan {
    /// The read-write grant (real) a listed write-deny path lies in, if any: bwrap keeps it
    /// read-only there.
    pub(crate) fn holder(&self, path: &Path) -> Option<&Path> {
        self.shared
            .iter()
            .find(|g| path.starts_with(g))
            .map(PathBuf::as_path)
    }
}

/// The relay's own folders masked inside any grant that would show them: a session must not
/// read other sessions' files in the state folder, nor rewrite the settings (and so drop the
/// deny) for the next launch. A mask also binds every folder between the grant and it onto
/// itself, so no parent can be renamed away and replaced. A grant inside such a folder refuses
/// the launch. `grants`: every grant of the profile, real.
pub(crate) fn own_masks(
    grants: &[PathBuf],
    own: &[OwnFolder],
) -> Result<Vec<PathBuf>, ConfineError> {
    let mut masks = Vec::new();
    for o in own {
        if !o.exists || !grants.iter().any(|g| o.real.starts_with(g)) {
            continue;
        }
        if let Some(g) = grants.iter().find(|g| g.starts_with(&o.real)) {
            let (grant, own) = (g.clone(), o.path.clone());
            return Err(ConfineError::GrantInOwnFolder { grant, own });
        }
        masks.push(o.path.clone());
    }
    Ok(masks)
}
