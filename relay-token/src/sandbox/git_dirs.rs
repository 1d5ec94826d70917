//! The git folders of a repository's linked worktrees and submodules, and what in each decides
//! what git runs.
//!
//! A linked worktree keeps its index, `HEAD` and logs in `.git/worktrees/<name>/`, a submodule
//! its whole repository in `.git/modules/<name>/`: a commit there writes a lock file beside the
//! index, so the folder itself must be writable. What git reads there that decides what it runs
//! ([`STEERING`]: the configuration, hooks, `info/`, the redirects `commondir` and `gitdir`, and
//! a submodule's own `modules/` and `worktrees/`) stays read-only; the `modules/` and `worktrees/`
//! folders themselves stay read-only too, so no session adds a git folder there that a later
//! `git submodule update` or `git worktree add` would adopt.
//!
//! ```
//! use relay_token::sandbox::git_dirs::{linked, STEERING};
//! let dir = tempfile::tempdir()?;
//! let git = dir.path().join(".git");
//! std::fs::create_dir_all(git.join("modules/a/b"))?;
//! std::fs::write(git.join("modules/a/b/HEAD"), "ref: refs/heads/main\n")?;
//! std::fs::create_dir_all(git.join("worktrees/wt"))?;
//! assert_eq!(linked(&git), [git.join("worktrees/wt"), git.join("modules/a/b")]);
//! assert!(STEERING.iter().any(|s| s.rel == "config"));
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fs;
use std::path::{Path, PathBuf};

/// One entry of a linked worktree's or a submodule's git folder that decides what git runs.
///
/// ```
/// let hooks = relay_token::sandbox::git_dirs::STEERING.iter().find(|s| s.rel == "hooks");
/// assert!(hooks.is_some_and(|h| h.dir && h.hold));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Steering {
    /// The path relative to the git folder.
    pub rel: &'static str,
    /// A folder (else a file).
    pub dir: bool,
    /// When missing, held by a placeholder (an empty folder, or an empty file, which git reads
    /// as an empty configuration); when false, kept read-only only if it exists: git fails on
    /// an empty `commondir` or `gitdir`, and relay's git refuses a redirected common folder.
    pub hold: bool,
}

const fn entry(rel: &'static str, dir: bool, hold: bool) -> Steering {
    Steering { rel, dir, hold }
}

/// What stays read-only in each linked worktree's and submodule's git folder.
///
/// ```
/// let gitdir = relay_token::sandbox::git_dirs::STEERING.iter().find(|s| s.rel == "gitdir");
/// assert!(gitdir.is_some_and(|g| !g.hold));
/// ```
pub const STEERING: &[Steering] = &[
    entry("config", false, true),
    entry("config.worktree", false, true),
    entry("hooks", true, true),
    entry("info", true, true),
    entry("modules", true, true),
    entry("worktrees", true, false),
    entry("commondir", false, false),
    entry("gitdir", false, false),
];

/// How deep a submodule's name may nest folders (`a/b/c`) before the walk gives up.
const MAX_DEPTH: usize = 8;

/// The git folders of `git_dir`'s linked worktrees (each folder in `worktrees/`) and
/// submodules (each folder holding `HEAD` under `modules/`, whose names may hold `/`), then,
/// the same way, those of each submodule; none through a symlink. Empty when there are none.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// assert!(relay_token::sandbox::git_dirs::linked(dir.path()).is_empty());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn linked(git_dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = subfolders(&git_dir.join("worktrees"));
    let mut modules = Vec::new();
    find_modules(&git_dir.join("modules"), 0, &mut modules);
    for m in modules {
        let nested = linked(&m);
        out.push(m);
        out.extend(nested);
    }
    out
}

/// The real folders (not symlinks) directly in `dir`.
fn subfolders(dir: &Path) -> Vec<PathBuf> {
    let Ok(list) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = list
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// Every folder under `dir` that holds `HEAD` (a submodule's git folder), not looking inside
/// one.
fn find_modules(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth >= MAX_DEPTH {
        return;
    }
    for d in subfolders(dir) {
        if fs::symlink_metadata(d.join("HEAD")).is_ok() {
            out.push(d);
        } else {
            find_modules(&d, depth + 1, out);
        }
    }
}

/// The repository (the folder holding its `.git` folder) whose git folder holds the git folder
/// the `.git` file `dot_git` names (a linked worktree's, a submodule's), made canonical; `None`
/// when it names none inside a repository's `.git`.
///
/// ```
/// use relay_token::sandbox::git_dirs::owner_of_git_file;
/// let dir = tempfile::tempdir()?;
/// let main = dir.path().canonicalize()?.join("main");
/// std::fs::create_dir_all(main.join(".git/worktrees/wt"))?;
/// std::fs::write(main.join(".git/HEAD"), "ref: refs/heads/main\n")?;
/// let wt = dir.path().join("wt");
/// std::fs::create_dir(&wt)?;
/// std::fs::write(wt.join(".git"), format!("gitdir: {}\n", main.join(".git/worktrees/wt").display()))?;
/// assert_eq!(owner_of_git_file(&wt.join(".git")), Some(main));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn owner_of_git_file(dot_git: &Path) -> Option<PathBuf> {
    let text = fs::read_to_string(dot_git).ok()?;
    let named = dot_git.parent()?.join(text.strip_prefix("gitdir:")?.trim());
    let real = named.canonicalize().ok()?;
    real.ancestors()
        .skip(1)
        .find(|a| {
            a.file_name() == Some(std::ffi::OsStr::new(".git"))
                && fs::symlink_metadata(a.join("HEAD")).is_ok()
        })
        .and_then(Path::parent)
        .map(Path::to_path_buf)
}
