//! Paths in folders a session can write, reached the way relay's own hands must reach them:
//! component by component from `/`, each folder opened with `O_NOFOLLOW`, so a symlink a
//! session planted anywhere on the way is never followed; what stands at the end is looked at
//! through its parent's descriptor and removed through the same descriptor, only when it is
//! still what the caller expects.
//!
//! relay-host and relay-shim run outside every sandbox: a path such as
//! `<project>/node_modules/.bin` removed by name would follow a `node_modules` a session
//! replaced with a link to a folder outside every grant. Through this module the removal can
//! only touch an entry of the project's real folder, one the session could have removed itself.
//!
//! ```
//! use relay_token::sandbox::nofollow::{lookup, remove_if};
//! let dir = tempfile::tempdir()?;
//! let real = dir.path().canonicalize()?;
//! std::fs::create_dir_all(real.join("outside/.bin"))?;
//! std::fs::create_dir(real.join("p"))?;
//! std::os::unix::fs::symlink(real.join("outside"), real.join("p/node_modules"))?;
//! // The link on the way is not followed: nothing is found, nothing removed.
//! assert!(lookup(&real.join("p/node_modules/.bin"))?.is_none());
//! assert!(!remove_if(&real.join("p/node_modules/.bin"), |f| f.dir)?);
//! assert!(real.join("outside/.bin").is_dir());
//! # Ok::<(), std::io::Error>(())
//! ```

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Component, Path};

/// What stands at the end of a path reached without following a link.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let real = dir.path().canonicalize()?;
/// let f = relay_token::sandbox::nofollow::lookup(&real)?.unwrap();
/// assert!(f.dir && !f.file && f.head.is_empty());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Found {
    /// Its device.
    pub dev: u64,
    /// Its inode.
    pub ino: u64,
    /// A folder.
    pub dir: bool,
    /// A regular file.
    pub file: bool,
    /// Its size in bytes.
    pub len: u64,
    /// For a regular file of at most [`HEAD_LEN`] bytes, its content (read through a
    /// descriptor opened without following a link); else empty.
    pub head: Vec<u8>,
}

/// How much of a small regular file [`Found::head`] holds.
///
/// ```
/// assert_eq!(relay_token::sandbox::nofollow::HEAD_LEN, 8);
/// ```
pub const HEAD_LEN: u64 = 8;

/// What stands at `path` (absolute), reached from `/` without following a link on the way or
/// at the end; `None` when a link or a non-folder stands on the way, or nothing at the end.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let real = dir.path().canonicalize()?;
/// std::fs::write(real.join("f"), ".")?;
/// let f = relay_token::sandbox::nofollow::lookup(&real.join("f"))?.unwrap();
/// assert!(f.file && f.head == b".");
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn lookup(path: &Path) -> io::Result<Option<Found>> {
    Walk::new().lookup(path)
}

/// Removes `path` (absolute; a folder only when empty) when `expect` accepts what stands there:
/// reached as [`lookup`] reaches it, removed by its name in the parent folder the walk opened.
/// True when it was removed.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let real = dir.path().canonicalize()?;
/// std::fs::write(real.join("f"), "kept")?;
/// assert!(!relay_token::sandbox::nofollow::remove_if(&real.join("f"), |f| f.len == 0)?);
/// std::fs::write(real.join("f"), "")?;
/// assert!(relay_token::sandbox::nofollow::remove_if(&real.join("f"), |f| f.len == 0)?);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn remove_if(path: &Path, expect: impl FnOnce(&Found) -> bool) -> io::Result<bool> {
    Walk::new().remove_if(path, expect)
}

/// Several [`lookup`]s and [`remove_if`]s of paths that share folders, each folder on the way
/// opened once (from `/`, without following a link) and kept open for the next path below it.
/// A folder is reached as the first walk through it reached it: a link put in its place later
/// is never followed, and what this walk removes is only ever an entry of the folder it opened.
///
/// ```
/// use relay_token::sandbox::nofollow::Walk;
/// let dir = tempfile::tempdir()?;
/// let real = dir.path().canonicalize()?;
/// std::fs::create_dir_all(real.join("p/node_modules/.bin"))?;
/// let mut walk = Walk::new();
/// assert!(walk.lookup(&real.join("p/node_modules"))?.unwrap().dir);
/// // Deepest first: the folder's entry, then the folder, through the folders opened once.
/// assert!(walk.remove_if(&real.join("p/node_modules/.bin"), |f| f.dir)?);
/// assert!(walk.remove_if(&real.join("p/node_modules"), |f| f.dir)?);
/// assert!(!real.join("p/node_modules").exists());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct Walk {
    /// The folders opened so far, each with its path from `/` (its `Normal` components).
    opened: Vec<(std::path::PathBuf, OwnedFd)>,
}

impl Walk {
    /// A walk with no folder opened yet.
    ///
    /// ```
    /// let mut walk = relay_token::sandbox::nofollow::Walk::new();
    /// assert!(walk.lookup(std::path::Path::new("/"))?.is_none());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new() -> Walk {
        Walk::default()
    }

    /// [`lookup`], through the folders this walk has opened.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let real = dir.path().canonicalize()?;
    /// std::fs::write(real.join("a"), "")?;
    /// let mut walk = relay_token::sandbox::nofollow::Walk::new();
    /// assert!(walk.lookup(&real.join("a"))?.unwrap().file);
    /// assert!(walk.lookup(&real.join("b"))?.is_none());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn lookup(&mut self, path: &Path) -> io::Result<Option<Found>> {
        let Some((parent, name)) = self.parent(path)? else {
            return Ok(None);
        };
        found_at(&self.opened[parent].1, &name)
    }

    /// [`remove_if`], through the folders this walk has opened; a folder it removes is
    /// forgotten, with every folder opened below it.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let real = dir.path().canonicalize()?;
    /// std::fs::write(real.join("f"), "")?;
    /// let mut walk = relay_token::sandbox::nofollow::Walk::new();
    /// assert!(walk.remove_if(&real.join("f"), |f| f.len == 0)?);
    /// assert!(!walk.remove_if(&real.join("f"), |_| true)?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn remove_if(
        &mut self,
        path: &Path,
        expect: impl FnOnce(&Found) -> bool,
    ) -> io::Result<bool> {
        let Some((parent, name)) = self.parent(path)? else {
            return Ok(false);
        };
        let at = &self.opened[parent].1;
        let Some(found) = found_at(at, &name)? else {
            return Ok(false);
        };
        if !expect(&found) {
            return Ok(false);
        }
        let flag = if found.dir { libc::AT_REMOVEDIR } else { 0 };
        // SAFETY: `name` is NUL-terminated and outlives the call; `at` is an open descriptor.
        if unsafe { libc::unlinkat(at.as_raw_fd(), name.as_ptr(), flag) } == 0 {
            if found.dir {
                use std::os::unix::ffi::OsStrExt;
                let gone = self.opened[parent]
                    .0
                    .join(OsStr::from_bytes(name.as_bytes()));
                self.opened.retain(|(p, _)| !p.starts_with(&gone));
            }
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ENOENT | libc::ENOTEMPTY | libc::EEXIST | libc::ENOTDIR | libc::EISDIR) => {
                Ok(false)
            }
            _ => Err(e),
        }
    }

    /// The parent folder of `path` (its index in `opened`), reached from `/` without following
    /// a link, opening only the folders not yet open, and the last name; `None` when a link or
    /// a non-folder stands on the way (or `path` is `/` or relative).
    fn parent(&mut self, path: &Path) -> io::Result<Option<(usize, CString)>> {
        let names: Vec<&OsStr> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect();
        let Some((last, way)) = names.split_last() else {
            return Ok(None);
        };
        if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
            return Ok(None);
        }
        let mut here = std::path::PathBuf::from("/");
        let mut at = match self.index(&here) {
            Some(i) => i,
            None => self.keep(here.clone(), open_dir_at(None, OsStr::new("/"))?),
        };
        for name in way {
            here.push(name);
            at = match self.index(&here) {
                Some(i) => i,
                None => match open_dir_at(Some(&self.opened[at].1), name) {
                    Ok(fd) => self.keep(here.clone(), fd),
                    Err(e) if not_followed(&e) => return Ok(None),
                    Err(e) => return Err(e),
                },
            };
        }
        Ok(Some((at, cname(last)?)))
    }

    fn index(&self, path: &Path) -> Option<usize> {
        self.opened.iter().position(|(p, _)| p == path)
    }

    fn keep(&mut self, path: std::path::PathBuf, fd: OwnedFd) -> usize {
        self.opened.push((path, fd));
        self.opened.len() - 1
    }
}

/// The content of the regular file at `path` (absolute), reached as [`lookup`] reaches it and
/// opened without following a link (nor blocking on a FIFO put in its place), read up to
/// `limit` bytes; `None` when a link or a non-folder stands on the way, or no regular file at
/// the end; `EFBIG` when it is longer than `limit`. A file a session may replace is read so,
/// whatever it put on the way.
///
/// ```
/// use relay_token::sandbox::nofollow::read_file;
/// let dir = tempfile::tempdir()?;
/// let real = dir.path().canonicalize()?;
/// std::fs::write(real.join("config"), "[core]\n")?;
/// assert_eq!(read_file(&real.join("config"), 64)?.as_deref(), Some(&b"[core]\n"[..]));
/// std::os::unix::fs::symlink("/etc/hostname", real.join("link"))?;
/// assert_eq!(read_file(&real.join("link"), 64)?, None);
/// assert_eq!(read_file(&real.join("config"), 3).unwrap_err().raw_os_error(), Some(libc::EFBIG));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn read_file(path: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
    let mut walk = Walk::new();
    let Some((at, name)) = walk.parent(path)? else {
        return Ok(None);
    };
    let parent = &walk.opened[at].1;
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    // SAFETY: `name` outlives the call; `parent` is an open descriptor.
    let fd = unsafe { libc::openat(parent.as_raw_fd(), name.as_ptr(), flags) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return if not_followed(&e) { Ok(None) } else { Err(e) };
    }
    // SAFETY: `fd` was just returned by openat and is owned by nobody else.
    let f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    if !f.metadata()?.is_file() {
        return Ok(None);
    }
    let mut buf = Vec::new();
    io::Read::read_to_end(&mut io::Read::take(f, limit.saturating_add(1)), &mut buf)?;
    if buf.len() as u64 > limit {
        return Err(io::Error::from_raw_os_error(libc::EFBIG));
    }
    Ok(Some(buf))
}

/// What stands at `name` in `dir` (not followed), with a small regular file's content.
fn found_at(dir: &OwnedFd, name: &CString) -> io::Result<Option<Found>> {
    let Some(st) = stat_at(dir, name, libc::AT_SYMLINK_NOFOLLOW)? else {
        return Ok(None);
    };
    let kind = st.st_mode & libc::S_IFMT;
    // The field types differ between systems (`dev_t` is 32 bits on macOS).
    #[allow(clippy::unnecessary_cast)]
    let (dev, ino) = (st.st_dev as u64, st.st_ino as u64);
    let mut found = Found {
        dev,
        ino,
        dir: kind == libc::S_IFDIR,
        file: kind == libc::S_IFREG,
        len: st.st_size as u64,
        head: Vec::new(),
    };
    if found.file && found.len <= HEAD_LEN {
        found.head = read_head(dir, name, &found)?;
    }
    Ok(Some(found))
}

/// The content of the small regular file `name` in `dir`, opened without following a link
/// (and without blocking on a FIFO put in its place), when it is still `found`.
fn read_head(dir: &OwnedFd, name: &CString, found: &Found) -> io::Result<Vec<u8>> {
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    // SAFETY: `name` outlives the call; `dir` is an open descriptor.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
    if fd < 0 {
        return Ok(Vec::new());
    }
    // SAFETY: `fd` was just returned by openat and is owned by nobody else.
    let f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let m = f.metadata()?;
    use std::os::unix::fs::MetadataExt;
    if (m.dev(), m.ino()) != (found.dev, found.ino) {
        return Ok(Vec::new());
    }
    let mut buf = Vec::new();
    io::Read::read_to_end(&mut io::Read::take(f, HEAD_LEN), &mut buf)?;
    Ok(buf)
}

/// `fstatat(dir, name, flags)`; `None` when nothing stands there.
fn stat_at(dir: &OwnedFd, name: &CString, flags: libc::c_int) -> io::Result<Option<libc::stat>> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `name` outlives the call; `st` is written by fstatat before it is read.
    let rc = unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), st.as_mut_ptr(), flags) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT) => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: fstatat succeeded and filled `st`.
    Ok(Some(unsafe { st.assume_init() }))
}

/// A symlink (`ELOOP`) or a non-folder (`ENOTDIR`) on the way, or nothing (`ENOENT`): not
/// followed, nothing found.
pub(crate) fn not_followed(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ELOOP) | Some(libc::ENOTDIR) | Some(libc::ENOENT)
    )
}

/// `name` as a C string (`EINVAL` when it holds a NUL).
pub(crate) fn cname(name: &OsStr) -> io::Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `openat(dir, name, O_DIRECTORY | O_NOFOLLOW)`; `None` opens `name` as a path.
pub(crate) fn open_dir_at(dir: Option<&OwnedFd>, name: &OsStr) -> io::Result<OwnedFd> {
    let c = cname(name)?;
    let base = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `c` is a NUL-terminated string that outlives the call; `base` is a descriptor we
    // own (or AT_FDCWD).
    let fd = unsafe { libc::openat(base, c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::Walk;

    /// A folder is reached as the walk first reached it: a link put in its place afterwards
    /// leads a later removal nowhere outside (the entry goes from the folder the walk opened).
    #[test]
    fn a_walk_keeps_the_folder_it_opened_and_follows_no_later_link() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(real.join("p")).unwrap();
        std::fs::write(real.join("p/a"), "").unwrap();
        std::fs::write(real.join("p/x"), "").unwrap();
        std::fs::create_dir_all(real.join("outside")).unwrap();
        std::fs::write(real.join("outside/x"), "").unwrap();
        let mut walk = Walk::new();
        assert!(walk.lookup(&real.join("p/a")).unwrap().unwrap().file);
        std::fs::rename(real.join("p"), real.join("moved")).unwrap();
        std::os::unix::fs::symlink(real.join("outside"), real.join("p")).unwrap();
        assert!(walk.remove_if(&real.join("p/x"), |f| f.file).unwrap());
        assert!(real.join("outside/x").exists(), "the link was followed");
        assert!(!real.join("moved/x").exists());
        // A fresh walk does not follow the link at all.
        assert!(Walk::new().lookup(&real.join("p/x")).unwrap().is_none());
    }

    /// A folder the walk removed is forgotten with what it opened below it: one made again
    /// under the same name is reached afresh.
    #[test]
    fn a_removed_folder_is_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(real.join("d/e")).unwrap();
        let mut walk = Walk::new();
        assert!(walk.lookup(&real.join("d/e/f")).unwrap().is_none());
        assert!(walk.remove_if(&real.join("d/e"), |f| f.dir).unwrap());
        assert!(walk.remove_if(&real.join("d"), |f| f.dir).unwrap());
        std::fs::create_dir_all(real.join("d/e")).unwrap();
        std::fs::write(real.join("d/e/f"), "x").unwrap();
        let found = walk.lookup(&real.join("d/e/f")).unwrap().unwrap();
        assert_eq!(found.head, b"x");
    }
}
