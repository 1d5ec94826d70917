//! The one list of paths no sandboxed session may write, even inside a read-write grant.
//!
//! A session must not change what a later launch runs or reads as configuration. Whatever a
//! shell, git, ssh or Claude Code reads at start-up from the home folder, a project folder or a
//! repository's git folder is therefore kept read-only in every sandbox, and one that does not
//! exist yet is kept from being created (see [`Placeholders`]). The list follows Anthropic's
//! sandbox-runtime, which denies writes to the same dotfiles even inside allowed paths, plus what
//! this launcher itself runs.
//!
//! # Where each entry applies
//!
//! An entry means something only where a later launch reads it, so each belongs to one kind of
//! folder, and [`plan`] lays it only there:
//!
//! - **The home folder**: the whole list ([`HOME`], [`PROJECT`], [`CLAUDE`], the repository
//!   entries and,
//!   for a session without the token, [`NO_TOKEN`]); a missing entry is held by a placeholder.
//!   Shells, git, ssh and the user's own editors and Claude Code read them there.
//! - **The project folder**: the whole list too, but a missing [`HOME`] entry is not held (no
//!   program reads `<project>/.bashrc` unless the project is the home folder; one that exists is
//!   still kept read-only, since a dotfiles link in the home folder may lead to it). For a
//!   session without the token the project's `.claude` folder is kept read-only whole (its
//!   commands, agents and settings, and whatever else Claude Code reads from it).
//! - **Any other read-write grant**: only its repository's entries, when it belongs to one.
//!   Any folder inside any grant can be named as a later launch's project, so [`PROJECT`]
//!   entries at a grant's root would guard one folder of many and none of the others: a later
//!   launch's project is guarded by what that launch does itself (Claude Code runs with
//!   `--setting-sources user` unless the project is trusted; git runs with
//!   [`git_guard`](super::git_guard)'s overrides), not by this list. A repository's git folder
//!   is different: git reads it for every folder inside the repository, so a later launch whose
//!   project is anywhere beneath the grant would read what a session wrote there.
//! - **A repository** (the first `.git` found walking up from a home, project or grant folder,
//!   as git finds it: a `.git` folder without `HEAD` is skipped): its `config`, `config.worktree`, `hooks/`, `info/`, `modules/` and `worktrees/`; a `.git`
//!   *file* (a linked worktree, a submodule) is kept read-only itself. Each existing linked
//!   worktree's and submodule's git folder inside `modules/` and `worktrees/` is writable again
//!   (a commit there writes its index, refs and objects), but for what decides what git runs
//!   there ([`git_dirs::STEERING`](super::git_dirs::STEERING)). In the home folder, the
//!   project and every folder above them up to their repository (all the way up when there is
//!   none) that a grant makes writable, a missing `.git` is held by an empty read-only folder:
//!   git skips an empty `.git` and looks further up, and no session can make a repository there
//!   that a later launch's git would find first.
//! - A grant nested inside another folder of the list adds nothing that folder does not already
//!   cover: every path is laid once.
//!
//! A placeholder for a missing *file* in the project is an empty folder of that name, never an
//! empty file: it holds the name just as well, and `git status` lists no empty folder, so a
//! session's `git add -A` cannot commit it (see [DESIGN.md](https://github.com/relay-token/relay-token/blob/main/docs/DESIGN.md)).
//!
//! ```
//! use relay_token::sandbox::write_deny::{Entry, HOME, NO_TOKEN, PROJECT};
//! assert!(HOME.contains(&Entry::Dir(".ssh")));
//! assert!(HOME.contains(&Entry::Dir(".local/share/claude")));
//! assert!(PROJECT.contains(&Entry::File(".mcp.json")));
//! assert!(NO_TOKEN.contains(&Entry::File(".claude/settings.json")));
//! ```

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::nofollow::{cname, open_dir_at};

/// One entry of the list, relative to the folder it applies in: a file or a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Entry {
    /// A file.
    File(&'static str),
    /// A folder.
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

    fn is_dir(self) -> bool {
        matches!(self, Entry::Dir(_))
    }
}

/// Read from the home folder: shell start-up files, git's user configuration, ripgrep's, ssh's
/// folder, and the folders programs are commonly installed to: `~/.local/bin`, `~/bin`, Claude
/// Code's native installer's versions (`~/.local/bin/claude` links to
/// `~/.local/share/claude/versions/<version>`), and npm's user prefixes (`~/.npm-global`, and
/// `~/.local`'s packages in `~/.local/lib/node_modules`), where a link in a `bin` folder leads.
pub const HOME: &[Entry] = &[
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
    Entry::File(".ripgreprc"),
    Entry::Dir(".ssh"),
    Entry::Dir(".local/bin"),
    Entry::Dir(".local/share/claude"),
    Entry::Dir("bin"),
    Entry::Dir(".npm-global"),
    Entry::Dir(".local/lib/node_modules"),
];

/// Read from a project folder: its submodule list, MCP server list and editor folders.
pub const PROJECT: &[Entry] = &[
    Entry::File(".gitmodules"),
    Entry::File(".mcp.json"),
    Entry::Dir(".vscode"),
    Entry::Dir(".idea"),
];

/// Read from a project folder (and the home folder) by Claude Code: its commands and agents.
pub const CLAUDE: &[Entry] = &[Entry::Dir(".claude/commands"), Entry::Dir(".claude/agents")];

/// Read from a repository's git folder (relative to the folder holding `.git`): its
/// configuration (and `config.worktree`, which git reads as configuration of the main worktree
/// once `extensions.worktreeConfig` is on), hooks, `info/` (attributes, excludes), and the folders of its submodules and
/// linked worktrees (each with a configuration and hooks of its own).
pub const REPOSITORY: &[Entry] = &[
    Entry::File(".git/config"),
    Entry::File(".git/config.worktree"),
    Entry::Dir(".git/hooks"),
    Entry::Dir(".git/info"),
    Entry::Dir(".git/modules"),
    Entry::Dir(".git/worktrees"),
];

/// Also written by no session that gets no token: Claude Code's project settings. A session
/// holding the token may keep writing its own (it gains nothing by arming the next).
pub const NO_TOKEN: &[Entry] = &[
    Entry::File(".claude/settings.json"),
    Entry::File(".claude/settings.local.json"),
];

/// What a folder of the list is to the launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Role {
    /// The home folder.
    Home,
    /// The launch's project folder.
    Project,
    /// Any other read-write grant.
    Grant,
}

/// One path the list names for a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The absolute path.
    pub path: PathBuf,
    /// A folder (else a file).
    pub dir: bool,
    /// When missing, held by a placeholder; when false, kept read-only only if it exists.
    pub hold: bool,
    /// The placeholder is an empty folder even for a file (an empty folder is invisible to
    /// `git status`).
    pub folder_placeholder: bool,
    /// Writable again inside a read-only entry (a linked worktree's or a submodule's git
    /// folder); kept so only if it exists.
    pub writable: bool,
}

/// The paths the list names for one session, by the rule of this module: the entries of each
/// `(folder, role)` and of the repository each belongs to, then `extra` (the operator's
/// additions and the `PATH` folders, each `(path, is_folder)`), held when missing. Every path
/// once, in order. `token`: the session gets the token ([`NO_TOKEN`] does not apply).
///
/// ```
/// use std::path::{Path, PathBuf};
/// use relay_token::sandbox::write_deny::{plan, Role};
/// let dir = tempfile::tempdir()?;
/// let (home, grant) = (dir.path().join("home"), dir.path().join("cache"));
/// std::fs::create_dir_all(grant.join(".git"))?;
/// std::fs::write(grant.join(".git/HEAD"), "ref: refs/heads/main\n")?;
/// std::fs::create_dir_all(&home)?;
/// let all = plan(&[(home.clone(), Role::Home), (grant.clone(), Role::Grant)], false, &[]);
/// let has = |p: PathBuf| all.iter().any(|l| l.path == p);
/// assert!(has(home.join(".ssh")) && has(home.join(".claude/settings.json")));
/// assert!(has(home.join(".git"))); // the home belongs to no repository here
/// assert!(has(grant.join(".git/config")) && !has(grant.join(".bashrc")));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn plan(folders: &[(PathBuf, Role)], token: bool, extra: &[(PathBuf, bool)]) -> Vec<Listed> {
    let mut out = Out::default();
    for (at, role) in folders {
        lay(&mut out, at, *role, token);
    }
    for (p, dir) in extra {
        out.add(p.clone(), *dir, true, false);
    }
    out.list
}

/// A list under construction, each path once.
#[derive(Default)]
struct Out {
    list: Vec<Listed>,
    seen: HashSet<PathBuf>,
}

impl Out {
    fn add(&mut self, path: PathBuf, dir: bool, hold: bool, folder_placeholder: bool) {
        if self.seen.insert(path.clone()) {
            self.list.push(Listed {
                path,
                dir,
                hold,
                folder_placeholder,
                writable: false,
            });
        }
    }

    /// A linked worktree's or a submodule's git folder, writable again, and its steering
    /// entries read-only.
    fn reopen(&mut self, git_dir: PathBuf) {
        for s in super::git_dirs::STEERING {
            self.add(git_dir.join(s.rel), s.dir, s.hold, false);
        }
        let fresh = !self.seen.contains(&git_dir);
        self.add(git_dir, true, false, false);
        if let (true, Some(l)) = (fresh, self.list.last_mut()) {
            l.writable = true;
        }
    }

    fn entries(&mut self, at: &Path, entries: &[Entry], hold: bool, folder_placeholder: bool) {
        for e in entries {
            let fp = folder_placeholder && !e.is_dir();
            self.add(at.join(e.rel()), e.is_dir(), hold, fp);
        }
    }
}

/// The entries of one folder of the list, by its role.
fn lay(out: &mut Out, at: &Path, role: Role, token: bool) {
    match role {
        Role::Home => {
            out.entries(at, HOME, true, false);
            out.entries(at, PROJECT, true, false);
            out.entries(at, CLAUDE, true, false);
            if !token {
                out.entries(at, NO_TOKEN, true, false);
            }
        }
        Role::Project => {
            out.entries(at, HOME, false, false);
            out.entries(at, PROJECT, true, true);
            if token {
                out.entries(at, CLAUDE, true, false);
            } else {
                out.add(at.join(".claude"), true, true, false);
            }
        }
        Role::Grant => {}
    }
    let repo = repository_of(at);
    if role != Role::Grant {
        // Every folder git would look in before the repository it uses (or all the way up):
        // a `.git` a session made in one would be found first. Held there (an empty read-only
        // folder); the caller keeps only those inside a read-write grant.
        let top = repo.as_ref().map(|(t, _)| t.as_path());
        for a in at.ancestors().take_while(|a| Some(*a) != top) {
            out.add(a.join(".git"), true, true, false);
        }
    }
    match repo {
        Some((top, true)) => lay_repository(out, &top),
        Some((top, false)) => {
            out.add(top.join(".git"), false, false, false);
            if let Some(owner) = super::git_dirs::owner_of_git_file(&top.join(".git")) {
                lay_repository(out, &owner);
            }
        }
        None => {}
    }
}

/// A repository's entries (`top` holds its `.git` folder) and its linked git folders'.
fn lay_repository(out: &mut Out, top: &Path) {
    out.entries(top, REPOSITORY, true, false);
    for g in super::git_dirs::linked(&top.join(".git")) {
        out.reopen(g);
    }
}

/// The folder holding the `.git` git would use for `at` (the first found walking up), and
/// whether that `.git` is a folder (else a file: a linked worktree or a submodule). A `.git`
/// folder without `HEAD` is no repository to git, which looks further up: so does this (an
/// empty one is what a placeholder of another session's looks like).
fn repository_of(at: &Path) -> Option<(PathBuf, bool)> {
    for dir in at.ancestors() {
        let git = dir.join(".git");
        match fs::symlink_metadata(&git) {
            Ok(m) if m.is_dir() && fs::symlink_metadata(git.join("HEAD")).is_err() => continue,
            Ok(m) => return Some((dir.to_path_buf(), m.is_dir())),
            Err(_) => continue,
        }
    }
    None
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
    /// record: each reached from `/` without following a link ([`super::nofollow::remove_if`]),
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
        for (p, dev, ino) in self.made.iter().rev() {
            // Reached without following a link, and only while it is still what was made.
            let _ = super::nofollow::remove_if(p, |f| {
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

    fn rels(list: &[Listed], under: &Path) -> Vec<String> {
        list.iter()
            .filter_map(|l| l.path.strip_prefix(under).ok())
            .map(|p| p.display().to_string())
            .collect()
    }

    /// Grants that are no repository add nothing; a grant that is one adds its git folder's
    /// entries once, also when nested in the project; a nested grant inside the project's
    /// repository adds nothing; a `.git` file is kept itself.
    #[test]
    fn grants_add_only_their_repository() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (p, plain, repo, wt) = (
            root.join("p"),
            root.join("plain"),
            root.join("repo"),
            root.join("wt"),
        );
        for d in [
            p.join(".git"),
            plain.clone(),
            repo.join(".git"),
            p.join("sub"),
        ] {
            fs::create_dir_all(d).unwrap();
        }
        fs::create_dir_all(&wt).unwrap();
        fs::write(wt.join(".git"), "gitdir: /elsewhere\n").unwrap();
        for r in [&p, &repo] {
            fs::write(r.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        }
        let folders = [
            (p.clone(), Role::Project),
            (plain.clone(), Role::Grant),
            (repo.clone(), Role::Grant),
            (p.join("sub"), Role::Grant),
            (wt.clone(), Role::Grant),
        ];
        let list = plan(&folders, true, &[]);
        assert!(rels(&list, &plain).is_empty());
        let git: Vec<String> = REPOSITORY.iter().map(|e| e.rel().to_string()).collect();
        assert_eq!(rels(&list, &repo), git);
        assert!(rels(&list, &p.join("sub")).is_empty());
        assert_eq!(rels(&list, &wt), [".git"]);
        let every = list.iter().map(|l| &l.path).collect::<HashSet<_>>();
        assert_eq!(every.len(), list.len(), "a path laid twice");
        // The project: its entries (a missing file held by a folder), its repository's, and no
        // `.git` placeholder (it has one); a missing home entry there is not held.
        let proj = rels(&list, &p);
        assert!(proj.contains(&".git/config".to_string()), "{proj:?}");
        assert!(!proj.contains(&".git".to_string()), "{proj:?}");
        let mcp = list.iter().find(|l| l.path == p.join(".mcp.json")).unwrap();
        assert!(mcp.hold && mcp.folder_placeholder);
        let rc = list.iter().find(|l| l.path == p.join(".bashrc")).unwrap();
        assert!(!rc.hold);
    }

    /// Without the token the project's `.claude` is one entry, whole; with it, its commands and
    /// agents. A project in no repository gets one `.git` folder, held.
    #[test]
    fn claude_folder_and_missing_repository() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().canonicalize().unwrap().join("p");
        fs::create_dir_all(&p).unwrap();
        let no_token = plan(&[(p.clone(), Role::Project)], false, &[]);
        let r = rels(&no_token, &p);
        assert!(r.contains(&".claude".to_string()) && !r.iter().any(|e| e.starts_with(".claude/")));
        let git = no_token.iter().find(|l| l.path == p.join(".git")).unwrap();
        assert!(git.dir && git.hold);
        assert!(!r.iter().any(|e| e.starts_with(".git/")), "{r:?}");
        let token = rels(&plan(&[(p.clone(), Role::Project)], true, &[]), &p);
        assert!(token.contains(&".claude/commands".to_string()));
        assert!(!token.contains(&".claude".to_string()));
        // Every folder above, up to the root, gets its `.git` held too (the caller keeps those
        // a grant makes writable).
        let up = p.parent().unwrap().join(".git");
        assert!(
            no_token.iter().any(|l| l.path == up && l.hold),
            "{no_token:?}"
        );
        assert!(no_token.iter().any(|l| l.path == Path::new("/.git")));
        // An empty `.git` (another session's placeholder) is no repository: still one entry.
        fs::create_dir(p.join(".git")).unwrap();
        let again = rels(&plan(&[(p.clone(), Role::Project)], true, &[]), &p);
        assert!(again.contains(&".git".to_string()), "{again:?}");
        assert!(!again.iter().any(|e| e.starts_with(".git/")), "{again:?}");
    }

    /// A worktree's and a submodule's git folder are writable again inside the read-only
    /// `worktrees/` and `modules/`, with their steering entries read-only.
    #[test]
    fn linked_git_folders_are_reopened() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().canonicalize().unwrap();
        let git = p.join(".git");
        for d in [git.join("worktrees/wt"), git.join("modules/sub")] {
            fs::create_dir_all(d).unwrap();
        }
        fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        fs::write(git.join("modules/sub/HEAD"), "ref: refs/heads/main\n").unwrap();
        let list = plan(&[(p.clone(), Role::Project)], true, &[]);
        let get = |rel: &str| list.iter().find(|l| l.path == p.join(rel)).unwrap();
        for rel in [".git/worktrees", ".git/modules", ".git/modules/sub/config"] {
            assert!(!get(rel).writable, "{rel}");
        }
        assert!(get(".git/worktrees/wt").writable && get(".git/modules/sub").writable);
        assert!(get(".git/worktrees/wt/config.worktree").hold);
        assert!(!get(".git/modules/sub/commondir").hold);
    }
}
