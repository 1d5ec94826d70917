//! The sandbox profile and its renderings (bubblewrap on Linux, SBPL on macOS).
//!
//! One [`Profile`] holds what a session may see: read grants, read-write grants, the token files
//! it must never open (denies), the project folder (its working folder), the session's temp
//! folder (its private `/tmp`) and the folder of the command it runs. [`Profile::resolve`] turns
//! it into a [`Resolved`] profile on real (canonical) paths: it follows every symlink on the way
//! to a token, refuses a link that a sandboxed session could have made, and decides how the token
//! is masked. [`Resolved`] then renders as a `bwrap` argv ([`Resolved::bwrap_argv`]) or as SBPL
//! text for macOS `sandbox-exec` ([`Resolved::sbpl`]).
//!
//! ```no_run
//! use std::ffi::OsString;
//! use std::path::{Path, PathBuf};
//! use relay_token::sandbox::{expand_grant, find_bwrap, Profile};
//!
//! let home = Path::new("/home/me");
//! let project = Path::new("/home/me/src/app");
//! let mut profile = Profile::new();
//! profile
//!     .read_write(expand_grant("{project}", home, Some(project))?)
//!     .read(expand_grant("~/.config", home, None)?)
//!     .deny(PathBuf::from("/home/me/.config/claude-ltt/token"))
//!     .project(project.to_path_buf())
//!     .tmp(PathBuf::from("/home/me/.local/state/relay/sessions/s1/tmp"))
//!     .command_dir(PathBuf::from("/usr/bin"));
//! // All templates' read-write grants: a link in any of them could have been made by a session.
//! let all_rw = vec![project.to_path_buf(), home.to_path_buf()];
//! let resolved = profile.resolve(&all_rw)?;
//! let bwrap = find_bwrap(None)?;
//! let argv = resolved.bwrap_argv(&bwrap, &[OsString::from("claude")]);
//! # drop(argv);
//! # Ok::<(), relay_token::sandbox::SandboxError>(())
//! ```
//!
//! Where the token's folder holds nothing but the token, the whole folder is masked (an empty,
//! mode-000, read-only tmpfs), so a token replaced by rename stays hidden from sessions already
//! running. Otherwise the file alone is masked by a read-only bind of an empty mode-0000 file that
//! [`Profile::resolve`] keeps in the host-only folder given by [`Profile::state_dir`].

// The modules marked `doc(hidden)` below are relay's programs' own (the git guard, the write-deny
// list, bwrap's limits, the no-dump preload, seccomp, paths reached without following links):
// public for relay-host and relay-shim, not the embedder's documented surface.
mod baseline;
mod bwrap;
mod bwrap_probe;
mod error;
#[doc(hidden)]
pub mod git_dirs;
#[doc(hidden)]
pub mod git_guard;
mod grant;
mod ident;
#[doc(hidden)]
pub mod limits;
mod links;
mod net;
#[cfg(target_os = "linux")]
#[doc(hidden)]
pub mod nodump;
#[doc(hidden)]
pub mod nofollow;
mod realpaths;
mod resolved;
mod sbpl;
mod seatbelt;
#[cfg(target_os = "linux")]
#[doc(hidden)]
pub mod seccomp;
#[doc(hidden)]
pub mod write_deny;

use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub use bwrap::NAMESPACE_FLAGS;
pub use bwrap_probe::{find_bwrap, BwrapFeatures};
#[cfg(not(target_os = "macos"))]
pub use bwrap_probe::{locate as locate_bwrap, probe as probe_bwrap};
use error::io_words;
pub use error::{GrantReason, SandboxError};
pub use grant::expand_grant;
use ident::Ident;
pub use net::{ProxyInside, SandboxNet};
pub use realpaths::Realpaths;
use realpaths::{canon, check_text};
pub use resolved::Resolved;
use resolved::{guards_between, identify_sources, Bind, Deny, Mask, Protect};
pub use seatbelt::{find_sandbox_exec, sandbox_exec_argv, SANDBOX_EXEC};

use crate::path::{clean_path, depth};

/// The name of the empty, mode-0000 file [`Profile::resolve`] keeps in the state folder and binds
/// over a token that shares its folder with other files.
pub const MASK_FILE_NAME: &str = "deny-mask";

/// What a session may see, before it is checked against the file system.
///
/// Built with the setters; [`Profile::resolve`] checks it and gives the [`Resolved`] form that
/// renders. Every path must be absolute (use [`expand_grant`] for template values).
///
/// ```
/// use std::path::PathBuf;
/// use relay_token::sandbox::Profile;
/// let mut p = Profile::new();
/// p.read(PathBuf::from("/usr/share/doc")).read_write(PathBuf::from("/srv/app"));
/// assert_eq!(p.read_grants(), [PathBuf::from("/usr/share/doc")]);
/// assert_eq!(p.read_write_grants(), [PathBuf::from("/srv/app")]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    read: Vec<PathBuf>,
    read_write: Vec<PathBuf>,
    deny: Vec<PathBuf>,
    project: Option<PathBuf>,
    tmp: Option<PathBuf>,
    command_dir: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    protect: Vec<PathBuf>,
    net: SandboxNet,
    placed: Vec<(PathBuf, PathBuf)>,
    empty: Vec<PathBuf>,
}

impl Profile {
    /// An empty profile: the system baseline only, read-only, and a private empty `/tmp`.
    ///
    /// ```
    /// let p = relay_token::sandbox::Profile::new();
    /// assert!(p.denies().is_empty());
    /// ```
    pub fn new() -> Profile {
        Profile::default()
    }

    /// Grants `p` (a folder or a file) read-only.
    ///
    /// ```
    /// let mut p = relay_token::sandbox::Profile::new();
    /// p.read("/srv/docs".into());
    /// ```
    pub fn read(&mut self, p: PathBuf) -> &mut Self {
        self.read.push(p);
        self
    }

    /// Grants `p` (a folder or a file) read-write.
    ///
    /// ```
    /// let mut p = relay_token::sandbox::Profile::new();
    /// p.read_write("/srv/app".into());
    /// ```
    pub fn read_write(&mut self, p: PathBuf) -> &mut Self {
        self.read_write.push(p);
        self
    }

    /// Denies the token file at `token_path`: no path inside the sandbox reaches it.
    ///
    /// ```
    /// let mut p = relay_token::sandbox::Profile::new();
    /// p.deny("/home/me/.config/claude-ltt/token".into());
    /// assert_eq!(p.denies().len(), 1);
    /// ```
    pub fn deny(&mut self, token_path: PathBuf) -> &mut Self {
        self.deny.push(token_path);
        self
    }

    /// Keeps `path` (a file or folder that runs with the token later, such as `relay-shim` or
    /// `claude`) read-only inside the sandbox when a grant would show it, and binds every folder
    /// between that grant and it onto itself, so a session can neither rewrite it nor rename a
    /// parent away and plant another. A path no grant shows (or that does not exist) is left
    /// alone: the sandbox cannot reach it.
    ///
    /// ```
    /// let mut p = relay_token::sandbox::Profile::new();
    /// p.read_write("/home/me".into()).protect("/home/me/.local/bin".into());
    /// ```
    pub fn protect(&mut self, path: PathBuf) -> &mut Self {
        self.protect.push(path);
        self
    }

    /// The project folder: the session's working folder (`--chdir`). It is not granted by this
    /// call; templates grant it with `{project}`.
    ///
    /// ```
    /// let mut p = relay_token::sandbox::Profile::new();
    /// p.project("/srv/app".into());
    /// ```
    pub fn project(&mut self, p: PathBuf) -> &mut Self {
        self.project = Some(p);
        self
    }

    /// The session's temp folder, bound read-write as the sandbox's private `/tmp` (on macOS:
    /// granted read-write; the host points `TMPDIR` at it). Without it `/tmp` is an empty tmpfs.
    ///
    /// ```
    /// let mut p = relay_token::sandbox::Profile::new();
    /// p.tmp("/var/lib/relay/sessions/s1/tmp".into());
    /// ```
    pub fn tmp(&mut self, p: PathBuf) -> &mut Self {
        self.tmp = Some(p);
        self
    }

    /// The folder of the resolved command, bound read-only.
    ///
    /// ```
    /// let mut p = relay_token::sandbox::Profile::new();
    /// p.command_dir("/opt/claude/bin".into());
    /// ```
    pub fn command_dir(&mut self, p: PathBuf) -> &mut Self {
        self.command_dir = Some(p);
        self
    }

    /// A host-only folder (the session's folder in the state folder, say), outside every grant
    /// and not group- or other-writable, where [`Profile::resolve`] keeps the empty mode-0000
    /// file ([`MASK_FILE_NAME`]) it binds over a token that shares its folder with other files.
    /// Needed only then: without it such a deny refuses the launch.
    ///
    /// ```
    /// let mut p = relay_token::sandbox::Profile::new();
    /// p.state_dir("/root/.local/state/relay/sessions/s1".into());
    /// ```
    pub fn state_dir(&mut self, p: PathBuf) -> &mut Self {
        self.state_dir = Some(p);
        self
    }

    /// The session's network (default: the host's).
    ///
    /// ```
    /// let mut p = relay_token::sandbox::Profile::new();
    /// p.network(relay_token::sandbox::SandboxNet::Loopback);
    /// ```
    pub fn network(&mut self, net: SandboxNet) -> &mut Self {
        self.net = net;
        self
    }

    /// Shows the host file `src`, one the host made where no sandbox reaches (such as
    /// [`nodump`]'s preload in the session folder), read-only at `dest` inside the sandbox,
    /// bound after every grant, so it also stands over a file a grant shows (a copy in place of
    /// the original); a protected path ([`protect`](Self::protect)) it stands over is then not
    /// bound itself, its guards are. bwrap only: the macOS rendering has no use for it.
    ///
    /// ```
    /// let mut p = relay_token::sandbox::Profile::new();
    /// p.place_file("/state/session/lib.so".into(), "/run/relay/lib.so");
    /// let argv = p.resolve(&[])?.bwrap_argv(std::path::Path::new("bwrap"), &["true".into()]);
    /// assert!(argv.windows(3).any(|w| w == ["--ro-bind", "/state/session/lib.so", "/run/relay/lib.so"]));
    /// # Ok::<(), relay_token::sandbox::SandboxError>(())
    /// ```
    pub fn place_file(&mut self, src: PathBuf, dest: impl Into<PathBuf>) -> &mut Self {
        self.placed.push((src, dest.into()));
        self
    }

    /// Shows an empty folder at `dest` inside the sandbox that nothing inside can write: a
    /// fresh tmpfs mounted there and remounted read-only (the sandbox holds no capability to
    /// mount it again), so no host folder is made for it. For a place a program reads its
    /// configuration from, emptied on purpose. bwrap only, like
    /// [`place_file`](Self::place_file).
    ///
    /// ```
    /// let mut p = relay_token::sandbox::Profile::new();
    /// p.place_empty_dir("/run/relay/config");
    /// let argv = p.resolve(&[])?.bwrap_argv(std::path::Path::new("bwrap"), &["true".into()]);
    /// assert!(argv.windows(4).any(|w| w == ["--tmpfs", "/run/relay/config", "--remount-ro", "/run/relay/config"]));
    /// # Ok::<(), relay_token::sandbox::SandboxError>(())
    /// ```
    pub fn place_empty_dir(&mut self, dest: impl Into<PathBuf>) -> &mut Self {
        self.empty.push(dest.into());
        self
    }

    /// The read-only grants, as given.
    ///
    /// ```
    /// assert!(relay_token::sandbox::Profile::new().read_grants().is_empty());
    /// ```
    pub fn read_grants(&self) -> &[PathBuf] {
        &self.read
    }

    /// The read-write grants, as given.
    ///
    /// ```
    /// assert!(relay_token::sandbox::Profile::new().read_write_grants().is_empty());
    /// ```
    pub fn read_write_grants(&self) -> &[PathBuf] {
        &self.read_write
    }

    /// The denied token paths, as given.
    ///
    /// ```
    /// assert!(relay_token::sandbox::Profile::new().denies().is_empty());
    /// ```
    pub fn denies(&self) -> &[PathBuf] {
        &self.deny
    }

    /// Checks the profile against the file system and gives the form that renders.
    ///
    /// Every folder is made canonical (it must exist). A grant that comes to `/`, or any path
    /// with control characters or that is not UTF-8 (SBPL is text), is refused. For each deny the
    /// path is followed component by component: a symlink whose folder a sandboxed session could
    /// have written refuses the launch ([`SandboxError::DenyFollowsLink`]). Such a folder is one
    /// inside any of `all_rw_grants` (pass every template's read-write grants, expanded; this
    /// profile's own are added), or not owned by root, or writable by group or others. Then the
    /// token's real folder is masked whole when it holds nothing but the token, else the file.
    ///
    /// ```no_run
    /// use std::path::PathBuf;
    /// use relay_token::sandbox::Profile;
    /// let mut p = Profile::new();
    /// p.read_write("/srv/home".into()).deny("/srv/home/.config/claude-ltt/token".into());
    /// let resolved = p.resolve(&[PathBuf::from("/srv/home")])?;
    /// assert_eq!(resolved.masked()[0], PathBuf::from("/srv/home/.config/claude-ltt"));
    /// # Ok::<(), relay_token::sandbox::SandboxError>(())
    /// ```
    pub fn resolve(&self, all_rw_grants: &[PathBuf]) -> Result<Resolved, SandboxError> {
        self.resolve_with(all_rw_grants, &Realpaths::default())
    }

    /// [`resolve`](Self::resolve) with the launch's own real-path cache, so a launch that
    /// resolves more than one profile (or checks paths before) makes each folder canonical
    /// once.
    ///
    /// ```no_run
    /// use std::path::PathBuf;
    /// use relay_token::sandbox::{Profile, Realpaths};
    /// let real = Realpaths::default();
    /// let mut p = Profile::new();
    /// p.read_write("/srv/project".into());
    /// let resolved = p.resolve_with(&[PathBuf::from("/srv/project")], &real)?;
    /// # Ok::<(), relay_token::sandbox::SandboxError>(())
    /// ```
    pub fn resolve_with(
        &self,
        all_rw_grants: &[PathBuf],
        real: &Realpaths,
    ) -> Result<Resolved, SandboxError> {
        let baseline = baseline::baseline();
        let binds = self.resolve_binds(&baseline, real)?;
        let tmp = self
            .tmp
            .as_deref()
            .map(|t| canon(real, "temp folder", t))
            .transpose()?;
        let project = self
            .project
            .as_deref()
            .map(|p| canon(real, "project folder", p))
            .transpose()?;
        let writable = self.writable(real, all_rw_grants, &binds, tmp.as_deref());
        let denies = self
            .deny
            .iter()
            .map(|d| self.resolve_deny(d, &binds, &writable))
            .collect::<Result<Vec<_>, _>>()?;
        let protects = self.resolve_protects(real, &binds, &denies);
        let idents = identify_sources(&binds, &denies, &protects, tmp.as_deref())?;
        Ok(Resolved {
            baseline,
            binds,
            tmp,
            project,
            denies,
            protects,
            idents,
            fd_base: None,
            net: self.net.clone(),
            placed: self.placed.clone(),
            empty: self.empty.clone(),
        })
    }

    /// The grants and the command folder, canonical, deduplicated (read-write wins), shallow
    /// first, so a deeper bind is laid over (not hidden by) a shallower one. `/` is refused.
    fn resolve_binds(
        &self,
        baseline: &[baseline::Base],
        real_of: &Realpaths,
    ) -> Result<Vec<Bind>, SandboxError> {
        let mut binds: Vec<Bind> = Vec::new();
        let mut at: std::collections::HashMap<PathBuf, usize> = std::collections::HashMap::new();
        let mut add = |path: PathBuf, rw: bool| match at.get(&path) {
            Some(&i) => binds[i].rw |= rw,
            None => {
                at.insert(path.clone(), binds.len());
                binds.push(Bind { path, rw });
            }
        };
        for (list, rw) in [(&self.read, false), (&self.read_write, true)] {
            for g in list {
                let real = canon(real_of, "grant", g)?;
                if real == Path::new("/") {
                    return Err(SandboxError::Grant {
                        value: g.display().to_string(),
                        reason: GrantReason::Root,
                    });
                }
                add(real, rw);
            }
        }
        if let Some(d) = &self.command_dir {
            let real = canon(real_of, "command folder", d)?;
            if real == Path::new("/") {
                return Err(SandboxError::Unusable {
                    role: "command folder",
                    path: d.clone(),
                    reason: "binding the whole file system is refused".into(),
                });
            }
            let in_baseline = baseline
                .iter()
                .any(|b| matches!(b, baseline::Base::Dir(base) if real.starts_with(base)));
            if !in_baseline && !binds.iter().any(|b| b.path == real) {
                binds.push(Bind {
                    path: real,
                    rw: false,
                });
            }
        }
        binds.sort_by(|a, b| {
            depth(&a.path)
                .cmp(&depth(&b.path))
                .then(a.path.cmp(&b.path))
        });
        Ok(binds)
    }

    /// Every folder a session could write: all templates' read-write grants (as given and
    /// real), this profile's own, and its temp folder.
    fn writable(
        &self,
        real_of: &Realpaths,
        all_rw_grants: &[PathBuf],
        binds: &[Bind],
        tmp: Option<&Path>,
    ) -> Vec<PathBuf> {
        let mut writable: Vec<PathBuf> = Vec::new();
        for g in all_rw_grants.iter().chain(&self.read_write) {
            writable.push(clean_path(g));
            if let Ok(real) = real_of.of(g) {
                writable.push(real);
            }
        }
        writable.extend(binds.iter().filter(|b| b.rw).map(|b| b.path.clone()));
        writable.extend(tmp.map(Path::to_path_buf));
        writable
    }

    /// The protected paths a grant shows (and no mask hides): read-only, with the folders above
    /// them guarded.
    fn resolve_protects(
        &self,
        real_of: &Realpaths,
        binds: &[Bind],
        denies: &[Deny],
    ) -> Vec<Protect> {
        let mut protects: Vec<Protect> = Vec::new();
        for p in &self.protect {
            let Ok(real) = real_of.of(p).and_then(|r| seatbelt::on_disk_spelling(&r)) else {
                continue;
            };
            let hidden = denies.iter().any(|d| match &d.mask {
                Mask::Folder(dir) => real.starts_with(dir),
                Mask::File { path, .. } => &real == path,
            });
            if hidden
                || !binds.iter().any(|b| real.starts_with(&b.path))
                || protects.iter().any(|q| q.path == real)
            {
                continue;
            }
            protects.push(Protect {
                guards: guards_between(binds, &real),
                path: real,
            });
        }
        protects
    }

    fn resolve_deny(
        &self,
        given: &Path,
        binds: &[Bind],
        writable: &[PathBuf],
    ) -> Result<Deny, SandboxError> {
        let refuse = |reason: String| SandboxError::DenyUnhonourable {
            path: given.to_path_buf(),
            reason,
        };
        check_text(given).map_err(|r| refuse(r.into()))?;
        if !given.is_absolute() {
            return Err(refuse("must be an absolute path".into()));
        }
        let real = links::real_path(given, writable)?;
        // The rule must name the path as the disk spells it (macOS matches case exactly).
        let real = seatbelt::on_disk_spelling(&real).map_err(|e| refuse(io_words(&e)))?;
        check_text(&real).map_err(|r| refuse(format!("its real path {real:?} {r}")))?;
        let (Some(folder), Some(name)) = (real.parent(), real.file_name()) else {
            return Err(refuse("names the root folder".into()));
        };
        let meta = std::fs::symlink_metadata(&real).map_err(|e| refuse(io_words(&e)))?;
        let dedicated = meta.is_file() && folder != Path::new("/") && {
            let mut entries = std::fs::read_dir(folder)
                .map_err(|e| refuse(format!("its folder {folder:?}: {}", io_words(&e))))?;
            let first = entries
                .next()
                .transpose()
                .map_err(|e| refuse(io_words(&e)))?;
            let second = entries
                .next()
                .transpose()
                .map_err(|e| refuse(io_words(&e)))?;
            matches!((first, second), (Some(f), None) if f.file_name() == name)
        };
        let mask = if meta.is_dir() {
            Mask::Folder(real.clone())
        } else if dedicated {
            Mask::Folder(folder.to_path_buf())
        } else {
            let Some(state) = &self.state_dir else {
                return Err(refuse(
                    "its folder holds other files, and no state folder was given for the \
                     empty file that masks it"
                        .into(),
                ));
            };
            Mask::File {
                path: real.clone(),
                empty: ensure_mask_file(state, writable)?,
            }
        };
        let masked = mask.path().to_path_buf();

        let guards = guards_between(binds, &masked);
        Ok(Deny {
            given: given.to_path_buf(),
            real,
            mask,
            guards,
        })
    }
}

/// Refuses to write at `path` (a token about to be stored) when the way to it crosses a symlink a
/// sandboxed session could have made (the rule of [`SandboxError::DenyFollowsLink`]): a planted
/// `~/.config/claude-ltt -> <a grant>` would otherwise receive the token where sessions read.
/// Only the part of `path` that exists is walked; `writable` is every read-write grant.
///
/// ```
/// use std::path::{Path, PathBuf};
/// let home = tempfile::tempdir()?;
/// let target = home.path().join(".config/claude-ltt/token");
/// relay_token::sandbox::check_write_path(&target, &[home.path().to_path_buf()])?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn check_write_path(path: &Path, writable: &[PathBuf]) -> Result<(), SandboxError> {
    let existing = path
        .ancestors()
        .find(|a| std::fs::symlink_metadata(a).is_ok())
        .unwrap_or(Path::new("/"));
    match links::real_path(existing, writable) {
        Err(SandboxError::DenyFollowsLink { link, .. }) => Err(SandboxError::DenyFollowsLink {
            path: path.to_path_buf(),
            link,
        }),
        other => other.map(|_| ()),
    }
}

/// Makes sure `<state>/deny-mask` is an empty regular file of mode 0000 owned by this user with
/// one link, replacing whatever else is there, and returns its path.
fn ensure_mask_file(state: &Path, writable: &[PathBuf]) -> Result<PathBuf, SandboxError> {
    let unusable = |reason: String| SandboxError::Unusable {
        role: "state folder",
        path: state.to_path_buf(),
        reason,
    };
    check_text(state).map_err(|r| unusable(r.into()))?;
    let real = std::fs::canonicalize(state).map_err(|e| unusable(io_words(&e)))?;
    if writable.iter().any(|w| real.starts_with(w)) {
        return Err(unusable(
            "lies inside a read-write grant, where a session could replace the mask".into(),
        ));
    }
    let meta = std::fs::metadata(&real).map_err(|e| unusable(io_words(&e)))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        return Err(unusable(
            "must be a folder owned by this user, not writable by group or others".into(),
        ));
    }
    let file = real.join(MASK_FILE_NAME);
    if let Ok(m) = std::fs::symlink_metadata(&file) {
        let good = m.is_file()
            && m.len() == 0
            && m.mode() & 0o7777 == 0
            && m.nlink() == 1
            && m.uid() == me;
        if good {
            return Ok(file);
        }
        std::fs::remove_file(&file).map_err(|e| unusable(io_words(&e)))?;
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o000)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&file)
        .map_err(|e| unusable(io_words(&e)))?;
    f.set_permissions(std::fs::Permissions::from_mode(0o000))
        .map_err(|e| unusable(io_words(&e)))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants() {
        let home = Path::new("/home/op");
        let proj = Some(Path::new("/srv/p"));
        let ok = |v: &str, want: &str| {
            assert_eq!(expand_grant(v, home, proj).unwrap(), Path::new(want), "{v}")
        };
        ok("~/x", "/home/op/x");
        ok("~", "/home/op");
        ok("/a/../b//c/", "/b/c");
        ok("{project}", "/srv/p");
        ok("{project}/d", "/srv/p/d");
        let err = |v: &str, msg: &str| {
            assert_eq!(
                expand_grant(v, home, proj).unwrap_err().to_string(),
                msg,
                "{v:?}"
            )
        };
        err(
            "/",
            r#"grant "/": granting the whole file system is refused"#,
        );
        err(
            "/a/..",
            r#"grant "/a/..": granting the whole file system is refused"#,
        );
        err(
            "~/../..",
            r#"grant "~/../..": granting the whole file system is refused"#,
        );
        err(
            "src",
            r#"grant "src": must be absolute, or start with ~/ or {project}"#,
        );
        err(
            "~root/x",
            r#"grant "~root/x": ~user/ is not supported: must be absolute, or start with ~/ or {project}"#,
        );
        err(
            "{project}x",
            r#"grant "{project}x": must be absolute, or start with ~/ or {project}"#,
        );
        err("/a\nb", r#"grant "/a\nb": holds control characters"#);
        err("/a\0b", r#"grant "/a\0b": holds control characters"#);
        assert_eq!(
            expand_grant("{project}", home, None).unwrap_err(),
            SandboxError::Grant {
                value: "{project}".into(),
                reason: GrantReason::NoProject
            }
        );
    }
}
