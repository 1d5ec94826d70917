//! The empty entries Claude Code's own tool sandbox leaves in a project, removed again.
//!
//! Turned on inside relay's sandbox (by a settings file, or `CLAUDE_CODE_SUBPROCESS_ENV_SCRUB`),
//! Claude Code 2.1.332's tool sandbox makes the mount points of its nested bubblewrap in the
//! working folder and its git folder ([`NAMES`]: empty files such as `.env` and `package.json`,
//! empty folders such as `node_modules/`, and `.git/commondir` holding `.`), fails to start, and
//! leaves them behind. An empty `package.json` is no valid manifest, and a `commondir` in a main
//! git folder makes relay refuse every later token launch there.
//!
//! So a sandboxed launch with a project records which of these names are missing when it starts
//! ([`watch`], in `<state>/watched`, under the placeholders' lock), and once no session of the
//! state folder runs any more (the same moment the write-deny placeholders go), each recorded
//! path that is now an empty leftover ([`is_leftover`]: an empty regular file, an empty folder,
//! a `commondir` holding `.`) is removed ([`release`], before the placeholders, which are left to
//! their own list); `status` names those a killed host left and `gc` removes them. A file of one of these names that the session filled is kept: only
//! what a session cannot have meant to write goes.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use relay_token::sandbox::nofollow;

/// The names (relative to the project) Claude Code 2.1.332's tool sandbox makes as mount points,
/// as measured inside relay's sandbox; a folder's entries come after the folder, so removing in
/// reverse order empties it first.
#[cfg(target_os = "linux")]
pub(crate) const NAMES: &[&str] = &[
    ".env",
    ".env.local",
    ".env.development",
    ".env.development.local",
    ".env.test",
    ".env.test.local",
    ".env.production",
    ".env.production.local",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    "bunfig.toml",
    "package.json",
    "package-lock.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "node_modules",
    "node_modules/.bin",
    ".claude",
    ".claude/.cc-writes",
    ".git/commondir",
    ".git/config.worktree",
    ".git/NOTES_MERGE_WORKTREE",
    ".git/glab-cli",
    ".git/remotes",
];

/// The file, in the state folder, that lists the watched paths (one a line).
pub(crate) const WATCHED_FILE: &str = "watched";

/// True when `path` is what the tool sandbox leaves: an empty regular file, an empty folder, or
/// a `commondir` holding `.` (the git folder itself: no redirect). Links are never leftovers,
/// nor is anything reached through one: `walk` reaches it ([`nofollow::Walk::lookup`]), through
/// the folders it has already opened.
pub(crate) fn is_leftover(walk: &mut nofollow::Walk, path: &Path) -> bool {
    match walk.lookup(path) {
        Ok(Some(f)) if f.dir => fs::read_dir(path).is_ok_and(|mut d| d.next().is_none()),
        Ok(Some(f)) => leftover_file(path, &f),
        _ => false,
    }
}

/// True when `found`, at `path`, is a leftover file: empty, or a `commondir` holding `.`.
fn leftover_file(path: &Path, found: &nofollow::Found) -> bool {
    if !found.file {
        return false;
    }
    if path.file_name().is_some_and(|n| n == "commondir") {
        return found.head == b"." || found.head == b".\n";
    }
    found.len == 0
}

/// Removes `path` when it is a leftover: reached from `/` without following a link (a
/// `node_modules` a session replaced with a link to a folder outside every grant leads the
/// removal nowhere), a folder only when empty, a file only while [`leftover_file`] holds.
fn remove_leftover(walk: &mut nofollow::Walk, path: &Path) -> bool {
    (walk.remove_if(path, |f| f.dir || leftover_file(path, f))).unwrap_or(false)
}

/// Records, for a launch in `project`, the [`NAMES`] missing there now (appended to
/// `<state>/watched`). The caller holds the placeholders' lock.
#[cfg(target_os = "linux")]
pub(crate) fn watch(state_dir: &Path, project: &Path) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut lines = String::new();
    for name in NAMES {
        let p = project.join(name);
        if fs::symlink_metadata(&p).is_err() && !p.to_string_lossy().contains('\n') {
            lines.push_str(&p.to_string_lossy());
            lines.push('\n');
        }
    }
    if lines.is_empty() {
        return Ok(());
    }
    let mut f = fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(state_dir.join(WATCHED_FILE))?;
    // One write: a host killed meanwhile leaves whole lines.
    f.write_all(lines.as_bytes())
}

/// The paths `<state>/watched` lists, in order (none when there is no list).
pub(crate) fn watched(state_dir: &Path) -> Vec<PathBuf> {
    fs::read_to_string(state_dir.join(WATCHED_FILE))
        .map(|t| t.lines().map(PathBuf::from).collect())
        .unwrap_or_default()
}

/// The watched paths that are leftovers now, each once, in the order they would be removed (a
/// folder's entries first): [`is_leftover`], a folder counting as empty when all it holds would
/// go before it. Paths in `skip` (the write-deny placeholders, which go their own way) are left
/// out.
pub(crate) fn pending(state_dir: &Path, skip: &[PathBuf]) -> Vec<PathBuf> {
    pending_in(&mut nofollow::Walk::new(), state_dir, skip)
}

/// [`pending`], through the folders `walk` has opened (the watched paths share a few).
fn pending_in(walk: &mut nofollow::Walk, state_dir: &Path, skip: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in watched(state_dir).into_iter().rev() {
        if out.contains(&p) || skip.contains(&p) {
            continue;
        }
        let goes = match walk.lookup(&p) {
            Ok(Some(f)) if f.dir => {
                fs::read_dir(&p).is_ok_and(|d| d.flatten().all(|e| out.contains(&e.path())))
            }
            _ => is_leftover(walk, &p),
        };
        if goes {
            out.push(p);
        }
    }
    out
}

/// Removes the [`pending`] leftovers (but those in `skip`), in order, then the list; returns how
/// many it removed. The caller holds the placeholders' lock and has made sure no session of the
/// state folder runs.
pub(crate) fn release(state_dir: &Path, skip: &[PathBuf]) -> io::Result<usize> {
    let mut walk = nofollow::Walk::new();
    let mut removed = 0;
    for p in pending_in(&mut walk, state_dir, skip) {
        removed += usize::from(remove_leftover(&mut walk, &p));
    }
    match fs::remove_file(state_dir.join(WATCHED_FILE)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(removed),
    }
}

/// Removes `file` (the `.git/commondir` a token launch would refuse) when it is a leftover
/// ([`is_leftover`]: it holds `.`, so it redirects nothing); true when it is gone.
pub(crate) fn clear_commondir(file: &Path) -> bool {
    file.file_name().is_some_and(|n| n == "commondir")
        && remove_leftover(&mut nofollow::Walk::new(), file)
}

#[cfg(test)]
mod tests {
    use relay_token::sandbox::nofollow::Walk;

    /// A state folder watching a fresh project (`watch`), both in a new temporary folder.
    #[cfg(target_os = "linux")]
    fn watched_project(
    ) -> std::io::Result<(tempfile::TempDir, std::path::PathBuf, std::path::PathBuf)> {
        let dir = tempfile::tempdir()?;
        let (state, project) = (dir.path().join("s"), dir.path().join("p"));
        std::fs::create_dir_all(&state)?;
        std::fs::create_dir_all(&project)?;
        crate::state::leftovers::watch(&state, &project)?;
        Ok((dir, state, project))
    }

    /// `leftovers`'s example.
    #[test]
    #[cfg(target_os = "linux")]
    fn leftovers_doc_example() {
        let result = (|| {
            use crate::state::leftovers::{is_leftover, NAMES};
            let dir = tempfile::tempdir()?;
            std::fs::write(dir.path().join("package.json"), "")?;
            assert!(is_leftover(
                &mut Walk::new(),
                &dir.path().join("package.json")
            ));
            std::fs::write(dir.path().join("package.json"), "{}")?;
            assert!(!is_leftover(
                &mut Walk::new(),
                &dir.path().join("package.json")
            ));
            assert!(NAMES.contains(&".git/commondir"));
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `is_leftover`'s example.
    #[test]
    fn is_leftover_doc_example() {
        let result = (|| {
            let dir = tempfile::tempdir()?;
            let c = dir.path().join("commondir");
            std::fs::write(&c, ".")?;
            assert!(crate::state::leftovers::is_leftover(&mut Walk::new(), &c));
            std::fs::write(&c, "../..\n")?;
            assert!(!crate::state::leftovers::is_leftover(&mut Walk::new(), &c));
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `watch`'s example.
    #[test]
    #[cfg(target_os = "linux")]
    fn watch_doc_example() {
        let result = (|| {
            let (_dir, state, project) = watched_project()?;
            assert!(crate::state::leftovers::watched(&state).contains(&project.join(".env")));
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `watched`'s example.
    #[test]
    fn watched_doc_example() {
        assert!(crate::state::leftovers::watched(std::path::Path::new("/nonexistent")).is_empty());
    }

    /// `pending`'s example.
    #[test]
    #[cfg(target_os = "linux")]
    fn pending_doc_example() {
        let result = (|| {
            let (_dir, state, project) = watched_project()?;
            std::fs::create_dir_all(project.join("node_modules/.bin"))?;
            let p = crate::state::leftovers::pending(&state, &[]);
            assert_eq!(
                p,
                [
                    project.join("node_modules/.bin"),
                    project.join("node_modules")
                ]
            );
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `release`'s example.
    #[test]
    #[cfg(target_os = "linux")]
    fn release_doc_example() {
        let result = (|| {
            let (_dir, state, project) = watched_project()?;
            std::fs::create_dir_all(project.join("node_modules/.bin"))?;
            std::fs::write(project.join(".env"), "")?;
            std::fs::write(project.join("package.json"), "{\"name\": \"mine\"}")?;
            assert_eq!(crate::state::leftovers::release(&state, &[])?, 3);
            assert!(!project.join("node_modules").exists() && !project.join(".env").exists());
            assert!(project.join("package.json").exists());
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `clear_commondir`'s example.
    #[test]
    fn clear_commondir_doc_example() {
        let result = (|| {
            let dir = tempfile::tempdir()?;
            let c = dir.path().join("commondir");
            std::fs::write(&c, ".")?;
            assert!(crate::state::leftovers::clear_commondir(&c));
            assert!(!c.exists());
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }
}
