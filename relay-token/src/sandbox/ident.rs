//! What each bind source is: checked through a descriptor reached without following a
//! symlink, and kept so bwrap can bind that very object.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use super::io_words;

/// A bind source as the host checked it: its real path, its `(device, inode)`, and the `O_PATH`
/// descriptor that was checked, kept so bwrap can bind that very object
/// ([`super::Resolved::bind_by_fd`]).
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

/// The object at `real` (a canonical path): an `O_PATH | O_NOFOLLOW` descriptor reached without
/// following any symlink, and its `(device, inode)`. A path component swapped for a symlink
/// since `real` was made canonical is refused, never identified wrongly. Linux only (`O_PATH`);
/// elsewhere it refuses, so a deny is never taken on trust.
///
/// The walk is the kernel's `openat2` with `RESOLVE_NO_SYMLINKS` (Linux 5.6 and later). Where
/// that call is missing (or a filter refuses it), a plain `open` follows and the descriptor's own
/// path (`/proc/self/fd/N`) is read back: it must still be `real`.
#[cfg(target_os = "linux")]
pub(super) fn identify(real: &Path) -> Result<(std::os::fd::OwnedFd, (u64, u64)), Unidentified> {
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
pub(super) fn identify(_real: &Path) -> Result<(std::os::fd::OwnedFd, (u64, u64)), Unidentified> {
    Err(Unidentified::Unsupported)
}

/// Why [`identify`] refused a path.
#[derive(Debug)]
pub(super) enum Unidentified {
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

#[cfg(test)]
mod tests {
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
