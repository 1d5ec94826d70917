//! A project that is a linked worktree (or a submodule's checkout) keeps its repository
//! elsewhere: its `.git` is a file naming a git folder inside another repository's `.git`,
//! whose common folder holds the objects, refs and configuration. Without that folder git
//! cannot run in the project at all (and a commit writes the common folder's objects, refs,
//! logs and `packed-refs.lock`), so a sandbox whose grants do not reach it grants that folder
//! read-write, and nothing of the repository's work tree. It is then a read-write grant like
//! any other: the write-deny list keeps what decides what git runs read-only in it (the
//! repository's `config`, `hooks/`, `info/`, `modules/` and `worktrees/`, and in the project's
//! own git folder what [`relay_token::sandbox::git_dirs::STEERING`] names), as it does for a
//! project's own `.git`.

use std::path::{Path, PathBuf};

use relay_token::sandbox::git_guard;

/// The repository folder to grant read-write for `project` when its `.git` is a file naming a
/// git folder outside every read-write grant (`rw`, real); `None` for other projects.
pub(crate) fn linked_repository(project: &Path, rw: &[PathBuf]) -> Option<PathBuf> {
    let git_dir = linked_git_dir(project)?;
    if rw.iter().any(|g| git_dir.starts_with(g)) {
        return None;
    }
    let common = git_guard::project_common_dir(project)?;
    (!rw.iter().any(|g| common.starts_with(g))).then_some(common)
}

/// The git folder a `.git` file names, for the first `.git` found walking up from `project`
/// (made canonical); `None` when that `.git` is a folder, or there is none.
fn linked_git_dir(project: &Path) -> Option<PathBuf> {
    for dir in project.ancestors() {
        let dot_git = dir.join(".git");
        let Ok(m) = std::fs::symlink_metadata(&dot_git) else {
            continue;
        };
        if !m.is_file() {
            return None;
        }
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let named = dir.join(text.strip_prefix("gitdir:")?.trim());
        return named.canonicalize().ok().filter(|p| p.is_dir());
    }
    None
}
