//! Placeholders: the missing entries a session could create, made by the host before the
//! sandbox starts (a mount needs a mount point), recorded in the state folder, and removed once
//! no session runs; every walk by descriptor, following no symlink.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::sandbox::nofollow::{cname, open_dir_at};

/// The file, in the state folder, that lists the placeholders made for missing entries.
pub const PLACEHOLDERS_FILE: &str = "placeholders";

/// Placeholders for listed paths that do not exist yet.
///
/// A missing entry inside a read-write grant could be created by a session, and read by a later
/// launch. bwrap can only keep a path read-only by mounting over it, and a mount needs a mount
/// point, so the host creates the missing path itself (an empty folder or an empty 0600 file,
/// with any missing parent as a plain folder) before the sandbox starts, records each in
/// `<state>/placeholders`, and removes them again once no session is running: a file only while
/// it is still the empty file it made, a folder only while it is empty. Nothing is left in the
/// user's folders afterwards. The caller holds the state folder's lock around both steps.
///
/// ```
/// use relay_token::sandbox::write_deny::Placeholders;
/// let dir = tempfile::tempdir()?;
/// let (state, home) = (dir.path().join("state"), dir.path().join("home"));
/// std::fs::create_dir_all(&state)?;
/// std::fs::create_dir_all(&home)?;
/// let mut ph = Placeholders::open(&state)?;
/// let home = home.canonicalize()?;
/// ph.ensure(&home.join(".ssh"), true)?;
/// assert!(home.join(".ssh").is_dir());
/// ph.remove_all()?;
/// assert!(!home.join(".ssh").exists());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Placeholders {
    file: PathBuf,
    made: Vec<(PathBuf, u64, u64)>,
    /// The record file, opened at the first placeholder made and kept for the rest.
    log: Option<File>,
    /// The folders a walk reached, each by the descriptor the walk opened without following a
    /// symlink: a later walk starts at the deepest one on its way instead of at `/`.
    reached: Vec<(PathBuf, OwnedFd)>,
}

impl Placeholders {
    /// Reads the list kept in `state` (empty when there is none).
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let ph = relay_token::sandbox::write_deny::Placeholders::open(dir.path())?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn open(state: &Path) -> io::Result<Placeholders> {
        let file = state.join(PLACEHOLDERS_FILE);
        let mut made = Vec::new();
        match File::open(&file) {
            Ok(f) => {
                for line in BufReader::new(f).lines() {
                    let line = line?;
                    let mut it = line.splitn(3, ' ');
                    let (Some(dev), Some(ino), Some(p)) = (it.next(), it.next(), it.next()) else {
                        continue;
                    };
                    if let (Ok(dev), Ok(ino)) = (dev.parse(), ino.parse()) {
                        made.push((PathBuf::from(p), dev, ino));
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(Placeholders {
            file,
            made,
            log: None,
            reached: Vec::new(),
        })
    }

    /// Makes sure `path` exists, creating it (a folder when `dir`, else an empty 0600 file) and
    /// any missing parent (a 0700 folder), each recorded. The walk opens every component with
    /// `O_NOFOLLOW` and creates relative to its parent's descriptor, so a symlink a session
    /// planted on the way is never followed. Returns false when `path` cannot be made that way
    /// (a symlink or a file stands on the way).
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let mut ph = relay_token::sandbox::write_deny::Placeholders::open(dir.path())?;
    /// let real = dir.path().canonicalize()?;
    /// assert!(ph.ensure(&real.join("p/.git/config"), false)?);
    /// assert!(real.join("p/.git").is_dir());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn ensure(&mut self, path: &Path, dir: bool) -> io::Result<bool> {
        let names: Vec<&std::ffi::OsStr> = path
            .components()
            .filter_map(|c| match c {
                std::path::Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect();
        if !path.is_absolute() || names.is_empty() {
            return Ok(false);
        }
        let (start, mut at) = self.start_of(path)?;
        let mut sofar: PathBuf = names[..start]
            .iter()
            .fold(PathBuf::from("/"), |p, n| p.join(n));
        for (i, name) in names.iter().enumerate().skip(start) {
            sofar.push(name);
            let last = i + 1 == names.len();
            if last && !dir {
                return match create_file_at(&at, name) {
                    Ok(true) => self.record(&sofar).map(|_| true),
                    Ok(false) => Ok(true),
                    Err(e) if is_not_followed(&e) => Ok(false),
                    Err(e) => Err(e),
                };
            }
            let made = match mkdir_at(&at, name) {
                Ok(made) => made,
                Err(e) if is_not_followed(&e) => return Ok(false),
                Err(e) => return Err(e),
            };
            at = match open_dir_at(Some(&at), name) {
                Ok(fd) => fd,
                Err(e) if is_not_followed(&e) => return Ok(false),
                Err(e) => return Err(e),
            };
            self.reached.push((sofar.clone(), at.try_clone()?));
            if made {
                self.record(&sofar)?;
            }
        }
        Ok(true)
    }

    /// Where a walk to `path` starts: the deepest folder an earlier walk reached on its way (how
    /// many of `path`'s names that folder covers, and a descriptor of it), else `/` (0).
    fn start_of(&self, path: &Path) -> io::Result<(usize, OwnedFd)> {
        let best = self
            .reached
            .iter()
            .filter(|(p, _)| path.starts_with(p) && path != p)
            .max_by_key(|(p, _)| p.components().count());
        match best {
            Some((p, fd)) => Ok((p.components().count() - 1, fd.try_clone()?)),
            None => Ok((0, open_dir_at(None, std::ffi::OsStr::new("/"))?)),
        }
    }

    /// The recorded placeholders' paths, in the order they were made.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let ph = relay_token::sandbox::write_deny::Placeholders::open(dir.path())?;
    /// assert!(ph.paths().is_empty());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn paths(&self) -> Vec<PathBuf> {
        self.made.iter().map(|(p, _, _)| p.clone()).collect()
    }

    fn record(&mut self, p: &Path) -> io::Result<()> {
        let m = fs::symlink_metadata(p)?;
        self.made.push((p.to_path_buf(), m.dev(), m.ino()));
        if self.log.is_none() {
            let f = OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&self.file)?;
            self.log = Some(f);
        }
        // One write for the whole line: a host killed meanwhile leaves it whole or absent.
        let line = format!("{} {} {}\n", m.dev(), m.ino(), p.display());
        self.log
            .as_mut()
            .expect("opened above")
            .write_all(line.as_bytes())
    }

    /// Removes every recorded placeholder that is still what was made (deepest first), and the
    /// record: each reached from `/` without following a link ([`crate::sandbox::nofollow::Walk`]),
    /// so a link a session put on the way leads the removal nowhere. A placeholder someone
    /// filled in meanwhile stays.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let mut ph = relay_token::sandbox::write_deny::Placeholders::open(dir.path())?;
    /// ph.remove_all()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn remove_all(&mut self) -> io::Result<()> {
        let mut walk = crate::sandbox::nofollow::Walk::new();
        for (p, dev, ino) in self.made.iter().rev() {
            // Reached without following a link, and only while it is still what was made.
            let _ = walk.remove_if(p, |f| {
                (f.dev, f.ino) == (*dev, *ino) && (f.dir || (f.file && f.len == 0))
            });
        }
        self.made.clear();
        self.log = None;
        self.reached.clear();
        match fs::remove_file(&self.file) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// A symlink (`ELOOP`) or a non-folder (`ENOTDIR`) on the way: not followed, not made.
fn is_not_followed(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR))
}

/// `mkdirat(dir, name, 0700)`: true when made, false when something already stands there.
fn mkdir_at(dir: &OwnedFd, name: &std::ffi::OsStr) -> io::Result<bool> {
    let c = cname(name)?;
    // SAFETY: `c` outlives the call; `dir` is an open descriptor.
    if unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o700) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EEXIST) => Ok(false),
        _ => Err(e),
    }
}

/// Creates the empty 0600 file `name` in `dir` (`O_EXCL | O_NOFOLLOW`): true when made, false
/// when a regular file already stands there.
fn create_file_at(dir: &OwnedFd, name: &std::ffi::OsStr) -> io::Result<bool> {
    let c = cname(name)?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `c` outlives the call; `dir` is an open descriptor.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags, 0o600 as libc::c_uint) };
    if fd >= 0 {
        // SAFETY: `fd` was just returned by openat and is owned by nobody else.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EEXIST) {
        return Err(e);
    }
    // Something stands there: fine when it is a regular file (not a symlink).
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `c` outlives the call; `st` is written by fstatat before it is read.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatat succeeded and filled `st`.
    let st = unsafe { st.assume_init() };
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => Ok(false),
        _ => Err(io::Error::from_raw_os_error(libc::ELOOP)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A later walk starts at a folder an earlier one reached, and still follows no symlink:
    /// a link planted below that folder is refused, nothing is made where it points.
    #[test]
    fn a_walk_from_a_reached_folder_follows_no_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let (state, elsewhere) = (dir.path().join("state"), dir.path().join("elsewhere"));
        fs::create_dir_all(&state).unwrap();
        fs::create_dir_all(&elsewhere).unwrap();
        let real = dir.path().canonicalize().unwrap();
        let mut ph = Placeholders::open(&state).unwrap();
        assert!(ph.ensure(&real.join("p/.git/config"), false).unwrap());
        std::os::unix::fs::symlink(&elsewhere, real.join("p/link")).unwrap();
        assert!(!ph.ensure(&real.join("p/link/x"), false).unwrap());
        assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
        assert!(ph
            .ensure(&real.join("p/.claude/settings.json"), false)
            .unwrap());
        let made = ph.paths();
        assert_eq!(
            made,
            [
                "p",
                "p/.git",
                "p/.git/config",
                "p/.claude",
                "p/.claude/settings.json"
            ]
            .map(|r| real.join(r))
        );
        fs::remove_file(real.join("p/link")).unwrap();
        ph.remove_all().unwrap();
        assert!(!real.join("p").exists());
    }

    /// A placeholder whose parent was moved outside and replaced by a link to it: removing the
    /// placeholders follows no link, so what the link leads to stays (the placeholder too).
    #[test]
    fn removal_follows_no_link_on_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        let state = real.join("state");
        fs::create_dir_all(&state).unwrap();
        fs::create_dir_all(real.join("p")).unwrap();
        let mut ph = Placeholders::open(&state).unwrap();
        assert!(ph.ensure(&real.join("p/.git/config"), false).unwrap());
        // `p/.git` was made before this walk began only if missing: it is a placeholder too.
        fs::create_dir(real.join("outside")).unwrap();
        fs::rename(real.join("p/.git"), real.join("outside/.git")).unwrap();
        std::os::unix::fs::symlink(real.join("outside/.git"), real.join("p/.git")).unwrap();
        ph.remove_all().unwrap();
        assert!(real.join("outside/.git/config").is_file());
        assert!(fs::symlink_metadata(real.join("p/.git")).is_ok());
    }
}
