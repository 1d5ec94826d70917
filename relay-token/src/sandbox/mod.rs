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

mod bwrap;
pub mod git_guard;
pub mod limits;
mod links;
mod net;
#[cfg(target_os = "linux")]
pub mod nodump;
mod sbpl;
mod seatbelt;
#[cfg(target_os = "linux")]
pub mod seccomp;
pub mod write_deny;

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

pub use bwrap::{find_bwrap, BwrapFeatures, NAMESPACE_FLAGS};
#[cfg(all(feature = "host", not(target_os = "macos")))]
pub(crate) use bwrap::{locate as locate_bwrap, probe as probe_bwrap};
pub use net::{SandboxNet, PROXY_PORT, SANDBOX_FORWARDER, SANDBOX_SOCKET};
pub use seatbelt::{find_sandbox_exec, sandbox_exec_argv, SANDBOX_EXEC};

use crate::path::clean;
use crate::sys::errno_words;

/// The error code a host reports for every [`SandboxError`]: the sandboxed launch is refused.
pub const SANDBOX_UNAVAILABLE: &str = "sandbox_unavailable";

/// The name of the empty, mode-0000 file [`Profile::resolve`] keeps in the state folder and binds
/// over a token that shares its folder with other files.
pub const MASK_FILE_NAME: &str = "deny-mask";

/// Why a sandboxed launch is refused. Every message names paths only, never file contents.
///
/// All variants map to the host's `sandbox_unavailable` refusal ([`SandboxError::code`]).
///
/// ```
/// use std::path::Path;
/// use relay_token::sandbox::{expand_grant, SandboxError};
/// let err = expand_grant("/", Path::new("/home/me"), None).unwrap_err();
/// assert_eq!(err.to_string(), r#"grant "/": granting the whole file system is refused"#);
/// assert_eq!(err.code(), "sandbox_unavailable");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SandboxError {
    /// A grant's value cannot be used (`grant "<value>": <reason>`).
    Grant {
        /// The value as the template gave it.
        value: String,
        /// Why it is refused.
        reason: GrantReason,
    },
    /// A folder of the profile cannot be used (`<role> "<path>": <reason>`).
    Unusable {
        /// What the folder is for: `grant`, `project folder`, `temp folder`, `command folder`,
        /// `state folder`; or `sandbox-exec` when macOS's sandbox is missing.
        role: &'static str,
        /// The path as given.
        path: PathBuf,
        /// Why, in words (`no such file or directory`, `holds control characters`, ...).
        reason: String,
    },
    /// The path to a token crosses a symlink a sandboxed session could have made.
    DenyFollowsLink {
        /// The token path as given.
        path: PathBuf,
        /// The symlink on the way.
        link: PathBuf,
    },
    /// A deny cannot be honoured (`deny "<path>": <reason>`), so the launch is refused.
    DenyUnhonourable {
        /// The token path as given.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// No `bwrap` was found.
    BwrapNotFound {
        /// Where it was looked for, in words.
        looked: String,
    },
    /// The sandbox's command line would exceed a limit of bubblewrap or the kernel
    /// ([`limits::check`]): refused before anything starts.
    TooLarge {
        /// What is counted (`bwrap arguments`, ...).
        what: &'static str,
        /// How many the launch needs.
        needed: u64,
        /// The limit.
        limit: u64,
        /// The limit's name (`bubblewrap's MAX_ARGS`, ...).
        name: &'static str,
    },
    /// A `bwrap` was found but does not work.
    BwrapBroken {
        /// The `bwrap` that was tried.
        path: PathBuf,
        /// What went wrong (exit status and bwrap's first line of complaint, or a timeout).
        detail: String,
    },
}

/// Why a grant's value is refused.
///
/// ```
/// use std::path::Path;
/// use relay_token::sandbox::{expand_grant, GrantReason, SandboxError};
/// let err = expand_grant("src", Path::new("/home/me"), None).unwrap_err();
/// assert!(matches!(err, SandboxError::Grant { reason: GrantReason::NotAbsolute, .. }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GrantReason {
    /// The grant names `/`, the whole file system.
    Root,
    /// Relative, `~` alone, or anything that is not `/...`, `~/...` or `{project}...`.
    NotAbsolute,
    /// `~user/...`: other users' home folders are not looked up.
    OtherUsersHome,
    /// `{project}` was used but the launch has no project folder.
    NoProject,
    /// `~/` was used but the home folder given is not absolute.
    NoHome,
    /// The value holds a control character (a NUL, a newline, ...).
    ControlCharacters,
}

impl fmt::Display for GrantReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GrantReason::Root => "granting the whole file system is refused",
            GrantReason::NotAbsolute => "must be absolute, or start with ~/ or {project}",
            GrantReason::OtherUsersHome => {
                "~user/ is not supported: must be absolute, or start with ~/ or {project}"
            }
            GrantReason::NoProject => "uses {project} but the launch has no project folder",
            GrantReason::NoHome => "starts with ~/ but the home folder is not an absolute path",
            GrantReason::ControlCharacters => "holds control characters",
        })
    }
}

impl fmt::Display for SandboxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SandboxError::Grant { value, reason } => write!(f, "grant {value:?}: {reason}"),
            SandboxError::Unusable { role, path, reason } => {
                write!(f, "{role} {path:?}: {reason}")
            }
            SandboxError::DenyFollowsLink { path, link } => write!(
                f,
                "deny {path:?} follows symlink {link:?}, which a sandboxed session could have made"
            ),
            SandboxError::DenyUnhonourable { path, reason } => {
                write!(f, "deny {path:?}: {reason}")
            }
            SandboxError::BwrapNotFound { looked } => write!(
                f,
                "bwrap not found ({looked}): sandboxed launches are refused; install it with \
                 `apt-get install bubblewrap` (Debian/Ubuntu) or set `bwrap` to its path"
            ),
            SandboxError::TooLarge {
                what,
                needed,
                limit,
                name,
            } => write!(
                f,
                "the sandbox needs {needed} {what}, over the limit of {limit} ({name}): grant \
                 fewer folders"
            ),
            SandboxError::BwrapBroken { path, detail } => write!(
                f,
                "bwrap {path:?} does not work ({detail}): sandboxed launches are refused; install \
                 a working bubblewrap with `apt-get install bubblewrap` and make sure user \
                 namespaces are enabled (sysctl kernel.unprivileged_userns_clone=1)"
            ),
        }
    }
}

impl std::error::Error for SandboxError {}

impl SandboxError {
    /// The host's error code for this refusal: always `sandbox_unavailable`.
    ///
    /// ```
    /// use relay_token::sandbox::{SandboxError, SANDBOX_UNAVAILABLE};
    /// let err = SandboxError::BwrapNotFound { looked: "on PATH".into() };
    /// assert_eq!(err.code(), SANDBOX_UNAVAILABLE);
    /// ```
    pub fn code(&self) -> &'static str {
        SANDBOX_UNAVAILABLE
    }
}

/// True when `s` holds a control character (C0, DEL or C1), or, for bytes that are not UTF-8,
/// a byte below 0x20 or 0x7F.
fn has_control(s: &OsStr) -> bool {
    match s.to_str() {
        Some(text) => text.chars().any(char::is_control),
        None => s.as_bytes().iter().any(|&b| b < 0x20 || b == 0x7f),
    }
}

/// Expands a template's grant against the home folder and the project folder.
///
/// `~/...` is taken against `home`, `{project}` or `{project}/...` against `project`, and an
/// absolute path as it is; the result is lexically cleaned. Refused: a grant that comes to `/`,
/// a relative value, `~` alone, `~user/...`, `{project}` without a project, and a value with
/// control characters. Errors name the value only.
///
/// ```
/// use std::path::Path;
/// use relay_token::sandbox::expand_grant;
///
/// let home = Path::new("/home/me");
/// let project = Path::new("/srv/app");
/// assert_eq!(expand_grant("~/.config", home, None)?, Path::new("/home/me/.config"));
/// assert_eq!(expand_grant("{project}/docs", home, Some(project))?, Path::new("/srv/app/docs"));
/// assert_eq!(expand_grant("/opt/x/../y", home, None)?, Path::new("/opt/y"));
/// assert!(expand_grant("/", home, None).is_err());
/// assert_eq!(expand_grant("~", home, None)?, Path::new("/home/me"));
/// assert!(expand_grant("./src", home, None).is_err());
/// # Ok::<(), relay_token::sandbox::SandboxError>(())
/// ```
pub fn expand_grant(
    value: &str,
    home: &Path,
    project: Option<&Path>,
) -> Result<PathBuf, SandboxError> {
    let fail = |reason| {
        Err(SandboxError::Grant {
            value: value.to_string(),
            reason,
        })
    };
    if has_control(OsStr::new(value)) {
        return fail(GrantReason::ControlCharacters);
    }
    let path = if let Some(rest) = value.strip_prefix("~/").or((value == "~").then_some("")) {
        if !home.is_absolute() {
            return fail(GrantReason::NoHome);
        }
        home.join(rest)
    } else if value.starts_with('~') {
        return fail(if value.len() > 1 {
            GrantReason::OtherUsersHome
        } else {
            GrantReason::NotAbsolute
        });
    } else if let Some(rest) = value.strip_prefix("{project}") {
        if !(rest.is_empty() || rest.starts_with('/')) {
            return fail(GrantReason::NotAbsolute);
        }
        match project {
            Some(p) if p.is_absolute() => p.join(rest.trim_start_matches('/')),
            Some(_) => return fail(GrantReason::NotAbsolute),
            None => return fail(GrantReason::NoProject),
        }
    } else if value.starts_with('/') {
        PathBuf::from(value)
    } else {
        return fail(GrantReason::NotAbsolute);
    };
    if has_control(path.as_os_str()) {
        return fail(GrantReason::ControlCharacters);
    }
    let path = clean(&path);
    if path == Path::new("/") {
        return fail(GrantReason::Root);
    }
    Ok(path)
}

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
    placed: Vec<(PathBuf, &'static str)>,
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
    /// [`nodump`]'s preload in the session folder), read-only at `dest` inside the sandbox.
    /// bwrap only: the macOS rendering has no use for it.
    ///
    /// ```
    /// let mut p = relay_token::sandbox::Profile::new();
    /// p.place_file("/state/session/lib.so".into(), "/run/relay/lib.so");
    /// let argv = p.resolve(&[])?.bwrap_argv(std::path::Path::new("bwrap"), &["true".into()]);
    /// assert!(argv.windows(3).any(|w| w == ["--ro-bind", "/state/session/lib.so", "/run/relay/lib.so"]));
    /// # Ok::<(), relay_token::sandbox::SandboxError>(())
    /// ```
    pub fn place_file(&mut self, src: PathBuf, dest: &'static str) -> &mut Self {
        self.placed.push((src, dest));
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

    /// [`resolve`](Self::resolve) with the launch's own real-path cache.
    pub(crate) fn resolve_with(
        &self,
        all_rw_grants: &[PathBuf],
        real: &Realpaths,
    ) -> Result<Resolved, SandboxError> {
        let baseline = bwrap::baseline();
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
        })
    }

    /// The grants and the command folder, canonical, deduplicated (read-write wins), shallow
    /// first, so a deeper bind is laid over (not hidden by) a shallower one. `/` is refused.
    fn resolve_binds(
        &self,
        baseline: &[bwrap::Base],
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
                .any(|b| matches!(b, bwrap::Base::Dir(base) if real.starts_with(base)));
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
            writable.push(clean(g));
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

/// `p` made canonical (it must exist), in its on-disk spelling; refused when it is not absolute,
/// holds control characters or is not UTF-8, naming `role`.
fn canon(real_of: &Realpaths, role: &'static str, p: &Path) -> Result<PathBuf, SandboxError> {
    let unusable = |reason: String| SandboxError::Unusable {
        role,
        path: p.to_path_buf(),
        reason,
    };
    check_text(p).map_err(|r| unusable(r.into()))?;
    if !p.is_absolute() {
        return Err(unusable("must be an absolute path".into()));
    }
    let real = real_of
        .of(p)
        .and_then(|r| seatbelt::on_disk_spelling(&r))
        .map_err(|e| unusable(io_words(&e)))?;
    check_text(&real).map_err(|r| unusable(format!("its real path {real:?} {r}")))?;
    Ok(real)
}

/// Real paths for one [`Profile::resolve`]: a path whose last component is not a symlink is its
/// folder's real path joined with that name (`lstat` of the name), and each folder is made
/// canonical once, so resolving the many paths under one project walks that project's
/// ancestors once instead of once per path. What it yields is no more trusted than
/// `canonicalize` (a path can change afterwards either way): each bind source is then
/// identified through a descriptor whose own path must still be this one.
#[derive(Default)]
pub(crate) struct Realpaths {
    folders: std::cell::RefCell<Vec<(PathBuf, PathBuf)>>,
}

impl Realpaths {
    /// `p` made canonical (it must exist).
    pub(crate) fn of(&self, p: &Path) -> io::Result<PathBuf> {
        use std::os::unix::ffi::OsStrExt;
        // A trailing `/` or `/.` makes `lstat` follow a final symlink: the long way then.
        let text = p.as_os_str().as_bytes();
        let plain = p.is_absolute() && !text.ends_with(b"/") && !text.ends_with(b"/.");
        if let (true, Some(parent), Some(name)) = (plain, p.parent(), p.file_name()) {
            if !std::fs::symlink_metadata(p)?.file_type().is_symlink() {
                return Ok(self.folder(parent)?.join(name));
            }
        }
        std::fs::canonicalize(p)
    }

    /// The folder `dir` made canonical, once per `Realpaths`.
    fn folder(&self, dir: &Path) -> io::Result<PathBuf> {
        if let Some((_, real)) = self.folders.borrow().iter().find(|(d, _)| d == dir) {
            return Ok(real.clone());
        }
        let real = std::fs::canonicalize(dir)?;
        self.folders
            .borrow_mut()
            .push((dir.to_path_buf(), real.clone()));
        Ok(real)
    }
}

/// A bind source as the host checked it: its real path, its `(device, inode)`, and the `O_PATH`
/// descriptor that was checked, kept so bwrap can bind that very object
/// ([`Resolved::bind_by_fd`]).
#[derive(Debug, Clone)]
pub(crate) struct Ident {
    pub(crate) path: PathBuf,
    pub(crate) id: (u64, u64),
    pub(crate) fd: std::sync::Arc<std::os::fd::OwnedFd>,
}

/// Two idents are equal when they name the same path and object; which descriptor holds the
/// object is not part of it.
impl PartialEq for Ident {
    fn eq(&self, other: &Self) -> bool {
        (&self.path, self.id) == (&other.path, other.id)
    }
}
impl Eq for Ident {}

/// What each bind source is, by (device, inode), taken through a descriptor whose path is
/// checked and which is kept: bwrap binds that descriptor ([`Resolved::bind_by_fd`]) or, with an
/// older bwrap, binds by path and the sandbox verifies before its command runs that each mount
/// holds this very object (see `bwrap_argv`).
fn identify_sources(
    binds: &[Bind],
    denies: &[Deny],
    protects: &[Protect],
    tmp: Option<&Path>,
) -> Result<Vec<Ident>, SandboxError> {
    // SBPL rules are path rules: `sandbox-exec` mounts nothing, so there is no mount to check.
    if !cfg!(target_os = "linux") {
        return Ok(Vec::new());
    }
    let mut idents: Vec<Ident> = Vec::new();
    let protected: Vec<Bind> = protects
        .iter()
        .map(|p| Bind {
            path: p.path.clone(),
            rw: false,
        })
        .collect();
    let sources = binds
        .iter()
        .chain(denies.iter().flat_map(|d| &d.guards))
        .chain(protects.iter().flat_map(|p| &p.guards))
        .chain(&protected)
        .map(|b| (b.path.as_path(), "grant"))
        .chain(tmp.map(|t| (t, "temp folder")));
    let mut seen: std::collections::HashSet<&Path> = std::collections::HashSet::new();
    for (path, role) in sources {
        if !seen.insert(path) {
            continue;
        }
        let (fd, id) = identify(path).map_err(|e| SandboxError::Unusable {
            role,
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        idents.push(Ident {
            path: path.to_path_buf(),
            id,
            fd: std::sync::Arc::new(fd),
        });
    }
    Ok(idents)
}

/// Refuses to write at `path` (a token about to be stored) when the way to it crosses a symlink a
/// sandboxed session could have made (the rule of [`SandboxError::DenyFollowsLink`]): a planted
/// `~/.config/claude-ltt -> <a grant>` would otherwise receive the token where sessions read.
/// Only the part of `path` that exists is walked; `writable` is every read-write grant.
#[cfg(feature = "host")]
pub(crate) fn check_write_path(path: &Path, writable: &[PathBuf]) -> Result<(), SandboxError> {
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

/// Each folder between a grant and `path` (exclusive), bound onto itself (a mount point cannot
/// be renamed), keeping the mode of the innermost bind that covers it.
fn guards_between(binds: &[Bind], path: &Path) -> Vec<Bind> {
    let mut guards = Vec::new();
    let mut anc: Vec<&Path> = path.ancestors().skip(1).collect();
    anc.reverse();
    for a in anc {
        if binds.iter().any(|b| b.path == a) {
            continue;
        }
        if let Some(cover) = binds.iter().rev().find(|b| a.starts_with(&b.path)) {
            guards.push(Bind {
                path: a.to_path_buf(),
                rw: cover.rw,
            });
        }
    }
    guards
}

/// A path kept read-only inside the sandbox ([`Profile::protect`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Protect {
    path: PathBuf,
    guards: Vec<Bind>,
}

/// A bind of a folder (or file) onto the same path inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bind {
    path: PathBuf,
    rw: bool,
}

/// How a token is hidden.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mask {
    /// The folder holds nothing but the token: an empty read-only mode-000 tmpfs over it.
    Folder(PathBuf),
    /// The file alone: `empty` (a mode-0000 empty file) bound read-only over it.
    File { path: PathBuf, empty: PathBuf },
}

impl Mask {
    fn path(&self) -> &Path {
        match self {
            Mask::Folder(p) => p,
            Mask::File { path, .. } => path,
        }
    }
}

/// One resolved deny.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Deny {
    given: PathBuf,
    real: PathBuf,
    mask: Mask,
    guards: Vec<Bind>,
}

/// A checked profile on real paths, ready to render.
///
/// Made by [`Profile::resolve`]; renders as a `bwrap` argv ([`Resolved::bwrap_argv`]) or SBPL
/// text ([`Resolved::sbpl`], [`Resolved::write_sbpl`]). On Linux it holds an `O_PATH`
/// descriptor (close-on-exec) for each bind source it checked, for as long as it (or a clone)
/// lives: what [`Resolved::bind_by_fd`] hands to bwrap.
///
/// ```no_run
/// use std::ffi::OsString;
/// use std::path::{Path, PathBuf};
/// use relay_token::sandbox::Profile;
/// let mut p = Profile::new();
/// p.read_write("/srv/app".into()).project("/srv/app".into());
/// let r = p.resolve(&[PathBuf::from("/srv/app")])?;
/// let argv = r.bwrap_argv(Path::new("/usr/bin/bwrap"), &[OsString::from("/bin/true")]);
/// assert_eq!(argv[0], "/usr/bin/bwrap");
/// # Ok::<(), relay_token::sandbox::SandboxError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    baseline: Vec<bwrap::Base>,
    binds: Vec<Bind>,
    tmp: Option<PathBuf>,
    project: Option<PathBuf>,
    denies: Vec<Deny>,
    protects: Vec<Protect>,
    /// Every bind source (grants, guards, the temp folder) as checked.
    idents: Vec<Ident>,
    /// Set by [`Resolved::bind_by_fd`]: the number of the first bind descriptor in bwrap.
    fd_base: Option<std::os::fd::RawFd>,
    net: SandboxNet,
    /// Host-made files shown read-only inside ([`Profile::place_file`]).
    placed: Vec<(PathBuf, &'static str)>,
}

impl Resolved {
    /// The real paths masked for the denies, in order: the token's folder when it holds nothing
    /// but the token, else the token file.
    ///
    /// ```no_run
    /// # use std::path::PathBuf;
    /// # let r = relay_token::sandbox::Profile::new().resolve(&[])?;
    /// for path in r.masked() {
    ///     println!("masked: {}", path.display());
    /// }
    /// # Ok::<(), relay_token::sandbox::SandboxError>(())
    /// ```
    pub fn masked(&self) -> Vec<PathBuf> {
        self.denies
            .iter()
            .map(|d| d.mask.path().to_path_buf())
            .collect()
    }

    /// The real (canonical) paths of the denied token files, in order.
    ///
    /// ```no_run
    /// # let r = relay_token::sandbox::Profile::new().resolve(&[])?;
    /// assert!(r.denied_real_paths().is_empty());
    /// # Ok::<(), relay_token::sandbox::SandboxError>(())
    /// ```
    pub fn denied_real_paths(&self) -> Vec<PathBuf> {
        self.denies.iter().map(|d| d.real.clone()).collect()
    }

    /// The denied token paths as they were given to [`Profile::deny`], in order.
    ///
    /// ```no_run
    /// # let r = relay_token::sandbox::Profile::new().resolve(&[])?;
    /// assert!(r.denied_paths().is_empty());
    /// # Ok::<(), relay_token::sandbox::SandboxError>(())
    /// ```
    pub fn denied_paths(&self) -> Vec<PathBuf> {
        self.denies.iter().map(|d| d.given.clone()).collect()
    }

    /// Writes [`Resolved::sbpl`] to `path` with mode 0600 (created, or truncated and set to
    /// 0600; a symlink at `path` is refused).
    ///
    /// ```no_run
    /// # let r = relay_token::sandbox::Profile::new().resolve(&[])?;
    /// r.write_sbpl("/var/lib/relay/sessions/s1/profile.sb".as_ref())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_sbpl(&self, path: &Path) -> io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        f.write_all(self.sbpl().as_bytes())?;
        f.sync_all()
    }
}

/// Path depth in components (`/` is 0).
fn depth(p: &Path) -> usize {
    p.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count()
}

/// Refuses control characters and text that is not UTF-8 (SBPL is text).
fn check_text(p: &Path) -> Result<(), &'static str> {
    if has_control(p.as_os_str()) {
        return Err("holds control characters");
    }
    if p.to_str().is_none() {
        return Err("is not valid UTF-8");
    }
    Ok(())
}

/// An I/O error in words (`no such file or directory`), without the `(os error N)` tail.
fn io_words(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => errno_words(n),
        None => e.to_string(),
    }
}

/// The object at `real` (a canonical path): an `O_PATH | O_NOFOLLOW` descriptor reached without
/// following any symlink, and its `(device, inode)`. A path component swapped for a symlink
/// since `real` was made canonical is refused, never identified wrongly. Linux only (`O_PATH`);
/// elsewhere it refuses, so a deny is never taken on trust.
///
/// The walk is the kernel's `openat2` with `RESOLVE_NO_SYMLINKS` (Linux 5.6 and later). Where
/// that call is missing (or a filter refuses it), a plain `open` follows and the descriptor's own
/// path (`/proc/self/fd/N`) is read back: it must still be `real`.
#[cfg(target_os = "linux")]
fn identify(real: &Path) -> Result<(std::os::fd::OwnedFd, (u64, u64)), Unidentified> {
    use std::os::fd::AsRawFd;
    let c = crate::path::to_cstring(real).ok_or(Unidentified::Nul)?;
    let flags = libc::O_PATH | libc::O_NOFOLLOW;
    let (fd, read_back) = match crate::sys::open_no_symlinks(&c, flags) {
        Ok(fd) => (fd, false),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(Unidentified::Swapped),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) => {
            (crate::sys::open(&c, flags).map_err(Unidentified::Io)?, true)
        }
        Err(e) => return Err(Unidentified::Io(e)),
    };
    let st = crate::sys::fstat(&fd).map_err(Unidentified::Io)?;
    if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
        return Err(Unidentified::Swapped);
    }
    if read_back {
        let now = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(Unidentified::Io)?;
        if now != real {
            return Err(Unidentified::Swapped);
        }
    }
    Ok((fd, (st.st_dev as u64, st.st_ino as u64)))
}

/// See the Linux version: without `O_PATH` and `/proc` the check cannot be made, so it refuses.
#[cfg(not(target_os = "linux"))]
fn identify(_real: &Path) -> Result<(std::os::fd::OwnedFd, (u64, u64)), Unidentified> {
    Err(Unidentified::Unsupported)
}

/// Why [`identify`] refused a path.
#[derive(Debug)]
enum Unidentified {
    /// The path holds a NUL byte.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Nul,
    /// A component became a symlink after the path was made canonical.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Swapped,
    /// The open, `fstat` or read-back failed.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Io(io::Error),
    /// Not Linux: no `O_PATH`, no `/proc`.
    #[cfg_attr(target_os = "linux", allow(dead_code))]
    Unsupported,
}

impl fmt::Display for Unidentified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unidentified::Nul => f.write_str("holds a NUL byte"),
            Unidentified::Swapped => {
                f.write_str("changed while it was checked (a symlink was swapped in)")
            }
            Unidentified::Io(e) => f.write_str(&io_words(e)),
            Unidentified::Unsupported => f.write_str(
                "unsupported on this system: identifying a path needs O_PATH and /proc (Linux)",
            ),
        }
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
mod realpaths_tests {
    use super::Realpaths;
    use std::path::Path;

    #[test]
    fn realpaths_agree_with_canonicalize() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f"), "").unwrap();
        std::os::unix::fs::symlink("a/b", root.join("l")).unwrap();
        std::os::unix::fs::symlink("b/f", root.join("a/lf")).unwrap();
        let r = Realpaths::default();
        for p in [
            "a/b/f",
            "l/f",
            "a/lf",
            "l",
            "l/",
            "l/.",
            "a/b/../b/f",
            "a/./b",
        ] {
            let p = root.join(p);
            assert_eq!(
                r.of(&p).unwrap(),
                std::fs::canonicalize(&p).unwrap(),
                "{p:?}"
            );
        }
        assert!(r.of(&root.join("missing")).is_err());
        assert!(r.of(Path::new("relative")).is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn identify_takes_no_symlink_on_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::os::unix::fs::symlink("a", root.join("l")).unwrap();
        std::os::unix::fs::symlink("a/b", root.join("lb")).unwrap();
        let (_, id) = super::identify(&root.join("a/b")).unwrap();
        let meta = std::fs::metadata(root.join("a/b")).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(id, (meta.dev(), meta.ino()));
        let swapped = "changed while it was checked (a symlink was swapped in)";
        let why = |p: &str| super::identify(&root.join(p)).unwrap_err().to_string();
        assert_eq!(why("l/b"), swapped);
        assert_eq!(why("lb"), swapped);
        assert_eq!(why("missing"), "no such file or directory");
    }
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
