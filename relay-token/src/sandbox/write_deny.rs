//! The one list of paths no sandboxed session may write, even inside a read-write grant.
//!
//! A session must not change what a later launch runs or reads as configuration. Whatever a
//! shell, git, ssh or Claude Code reads at start-up from the home folder or a project folder is
//! therefore kept read-only in every sandbox, and one that does not exist yet is kept from being
//! created (see [`Placeholders`]). The list follows Anthropic's sandbox-runtime, which denies
//! writes to the same dotfiles even inside allowed paths, plus what this launcher itself runs.
//!
//! ```
//! use relay_token::sandbox::write_deny::{Entry, ALWAYS, NO_TOKEN};
//! assert!(ALWAYS.contains(&Entry::Dir(".ssh")));
//! assert!(NO_TOKEN.contains(&Entry::File(".claude/settings.json")));
//! ```

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// One entry of the list, relative to an anchor (the home folder, the project folder, or the
/// root of a read-write grant): a file or a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// A file (a missing one is kept from being created by an empty placeholder file).
    File(&'static str),
    /// A folder (a missing one by an empty placeholder folder).
    Dir(&'static str),
}

impl Entry {
    /// The relative path.
    ///
    /// ```
    /// use relay_token::sandbox::write_deny::Entry;
    /// assert_eq!(Entry::Dir(".git/hooks").rel(), ".git/hooks");
    /// ```
    pub fn rel(self) -> &'static str {
        match self {
            Entry::File(p) | Entry::Dir(p) => p,
        }
    }
}

/// Written by no session of any template: shell start-up files, git's configuration, hooks,
/// `info/` (attributes, excludes), and the folders of its submodules and linked worktrees
/// (each with a configuration and hooks of its own),
/// editor folders, Claude Code's project commands and agents, MCP server lists, ssh's folder,
/// and the folders programs are commonly installed to (`~/.local/bin`, `~/bin`).
pub const ALWAYS: &[Entry] = &[
    Entry::File(".bashrc"),
    Entry::File(".bash_profile"),
    Entry::File(".bash_login"),
    Entry::File(".profile"),
    Entry::File(".zshrc"),
    Entry::File(".zprofile"),
    Entry::File(".zshenv"),
    Entry::File(".zlogin"),
    Entry::File(".config/fish/config.fish"),
    Entry::File(".gitconfig"),
    Entry::File(".gitmodules"),
    Entry::File(".ripgreprc"),
    Entry::File(".mcp.json"),
    Entry::Dir(".git/hooks"),
    Entry::File(".git/config"),
    Entry::Dir(".git/info"),
    Entry::Dir(".git/modules"),
    Entry::Dir(".git/worktrees"),
    Entry::Dir(".vscode"),
    Entry::Dir(".idea"),
    Entry::Dir(".claude/commands"),
    Entry::Dir(".claude/agents"),
    Entry::Dir(".ssh"),
    Entry::Dir(".local/bin"),
    Entry::Dir("bin"),
];

/// Also written by no session that gets no token: Claude Code's project settings. A session
/// holding the token may keep writing its own (it gains nothing by arming the next).
pub const NO_TOKEN: &[Entry] = &[
    Entry::File(".claude/settings.json"),
    Entry::File(".claude/settings.local.json"),
];

/// The absolute paths the list names for one session: every entry under every anchor (the home
/// folder, the project folder, each read-write grant), then `extra` (the operator's additions,
/// and the `PATH` folders) as given. Deduplicated, in order.
///
/// ```
/// use std::path::{Path, PathBuf};
/// use relay_token::sandbox::write_deny::paths;
/// let anchors = [PathBuf::from("/home/me")];
/// let all = paths(&anchors, false, &[(PathBuf::from("/opt/tools/bin"), true)]);
/// assert!(all.contains(&(PathBuf::from("/home/me/.ssh"), true)));
/// assert!(all.contains(&(PathBuf::from("/home/me/.claude/settings.json"), false)));
/// assert!(all.contains(&(PathBuf::from("/opt/tools/bin"), true)));
/// ```
pub fn paths(anchors: &[PathBuf], token: bool, extra: &[(PathBuf, bool)]) -> Vec<(PathBuf, bool)> {
    let mut out: Vec<(PathBuf, bool)> = Vec::new();
    let lists: &[&[Entry]] = if token {
        &[ALWAYS]
    } else {
        &[ALWAYS, NO_TOKEN]
    };
    for a in anchors {
        for e in lists.iter().flat_map(|l| l.iter()) {
            let p = (a.join(e.rel()), matches!(e, Entry::Dir(_)));
            if !out.iter().any(|(q, _)| *q == p.0) {
                out.push(p);
            }
        }
    }
    for (p, dir) in extra {
        if !out.iter().any(|(q, _)| q == p) {
            out.push((p.clone(), *dir));
        }
    }
    out
}

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
        Ok(Placeholders { file, made })
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
        let mut at = open_dir_at(None, std::ffi::OsStr::new("/"))?;
        let mut sofar = PathBuf::from("/");
        for (i, name) in names.iter().enumerate() {
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
            if made {
                self.record(&sofar)?;
            }
        }
        Ok(true)
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
        let mut f = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&self.file)?;
        // One write for the whole line: a host killed meanwhile leaves it whole or absent.
        let line = format!("{} {} {}\n", m.dev(), m.ino(), p.display());
        f.write_all(line.as_bytes())
    }

    /// Removes every recorded placeholder that is still what was made (deepest first), and the
    /// record. A placeholder someone filled in meanwhile stays.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let mut ph = relay_token::sandbox::write_deny::Placeholders::open(dir.path())?;
    /// ph.remove_all()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn remove_all(&mut self) -> io::Result<()> {
        for (p, dev, ino) in self.made.iter().rev() {
            let Ok(m) = fs::symlink_metadata(p) else {
                continue;
            };
            if (m.dev(), m.ino()) != (*dev, *ino) {
                continue;
            }
            let _ = if m.is_dir() {
                fs::remove_dir(p)
            } else if m.is_file() && m.len() == 0 {
                fs::remove_file(p)
            } else {
                Ok(())
            };
        }
        self.made.clear();
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

fn cname(name: &std::ffi::OsStr) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `openat(dir, name, O_DIRECTORY | O_NOFOLLOW)`; `None` opens `name` as a path.
fn open_dir_at(dir: Option<&OwnedFd>, name: &std::ffi::OsStr) -> io::Result<OwnedFd> {
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
