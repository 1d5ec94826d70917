//! A checked profile on real paths, ready to render, and the binds, masks and guards it
//! is made of.

use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::ident::{identify, Ident};
use super::{baseline, SandboxError, SandboxNet};

/// Each folder between a grant and `path` (exclusive), bound onto itself (a mount point cannot
/// be renamed), keeping the mode of the innermost bind that covers it.
pub(super) fn guards_between(binds: &[Bind], path: &Path) -> Vec<Bind> {
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

/// A path kept read-only inside the sandbox ([`Profile::protect`](super::Profile::protect)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Protect {
    pub(super) path: PathBuf,
    pub(super) guards: Vec<Bind>,
}

/// A bind of a folder (or file) onto the same path inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Bind {
    pub(super) path: PathBuf,
    pub(super) rw: bool,
}

/// How a token is hidden.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Mask {
    /// The folder holds nothing but the token: an empty read-only mode-000 tmpfs over it.
    Folder(PathBuf),
    /// The file alone: `empty` (a mode-0000 empty file) bound read-only over it.
    File { path: PathBuf, empty: PathBuf },
}

impl Mask {
    pub(super) fn path(&self) -> &Path {
        match self {
            Mask::Folder(p) => p,
            Mask::File { path, .. } => path,
        }
    }
}

/// One resolved deny.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Deny {
    pub(super) given: PathBuf,
    pub(super) real: PathBuf,
    pub(super) mask: Mask,
    pub(super) guards: Vec<Bind>,
}

/// A checked profile on real paths, ready to render.
///
/// Made by [`Profile::resolve`](super::Profile::resolve); renders as a `bwrap` argv ([`Resolved::bwrap_argv`]) or SBPL
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
    pub(super) baseline: Vec<baseline::Base>,
    pub(super) binds: Vec<Bind>,
    pub(super) tmp: Option<PathBuf>,
    pub(super) project: Option<PathBuf>,
    pub(super) denies: Vec<Deny>,
    pub(super) protects: Vec<Protect>,
    /// Every bind source (grants, guards, the temp folder) as checked.
    pub(super) idents: Vec<Ident>,
    /// Set by [`Resolved::bind_by_fd`]: the number of the first bind descriptor in bwrap.
    pub(super) fd_base: Option<std::os::fd::RawFd>,
    pub(super) net: SandboxNet,
    /// Host-made files shown read-only inside ([`Profile::place_file`](super::Profile::place_file)).
    pub(super) placed: Vec<(PathBuf, PathBuf)>,
    /// Empty read-only folders inside ([`Profile::place_empty_dir`](super::Profile::place_empty_dir)).
    pub(super) empty: Vec<PathBuf>,
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

    /// The denied token paths as they were given to [`Profile::deny`](super::Profile::deny), in order.
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

/// What each bind source is, by (device, inode), taken through a descriptor whose path is
/// checked and which is kept: bwrap binds that descriptor ([`Resolved::bind_by_fd`]) or, with an
/// older bwrap, binds by path and the sandbox verifies before its command runs that each mount
/// holds this very object (see `bwrap_argv`).
pub(super) fn identify_sources(
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
