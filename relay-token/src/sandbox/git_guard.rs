//! What git ignores in a session that holds the token.
//!
//! A session without the token may write most of a project's `.git` folder and the project's
//! files. git follows much of what it finds there: a `core.fsmonitor` program in a
//! configuration it reads through a redirect of the repository's common folder, a
//! configuration of a folder that a planted gitlink in the index points at, hooks wherever
//! `core.hooksPath` says. Claude Code runs `git status` on its own, so whatever that runs,
//! runs beside the token. The write-deny list ([`write_deny`](super::write_deny)) keeps the
//! repository's own configuration, hooks, `info/`, `modules/` and `worktrees/` read-only;
//! these overrides make git in a token session ignore the rest of what decides what it runs.
//!
//! They are set as git's command-line configuration (`GIT_CONFIG_COUNT`, `GIT_CONFIG_KEY_n`,
//! `GIT_CONFIG_VALUE_n`), which git reads after every file, so no configuration file can undo
//! them, and which git passes on to the git it starts inside a submodule.
//!
//! ```
//! use relay_token::sandbox::git_guard::{env, OVERRIDES};
//! let vars = env();
//! assert_eq!(vars[0], ("GIT_CONFIG_COUNT".to_string(), OVERRIDES.len().to_string()));
//! assert!(vars.contains(&("GIT_CONFIG_KEY_0".to_string(), "core.fsmonitor".to_string())));
//! ```

/// Each override, `(key, value)`, with why.
pub const OVERRIDES: &[(&str, &str)] = &[
    // The file-system monitor hook: a program named by configuration, run by `git status`.
    ("core.fsmonitor", "false"),
    // Hooks from a folder named by configuration (the repository's own hooks are read-only).
    ("core.hooksPath", "/dev/null"),
    // `git status` and `git diff` look inside no gitlinked folder, so a gitlink planted in the
    // index cannot point git at a folder with a configuration of the session's.
    ("diff.ignoreSubmodules", "all"),
    // No command recurses into submodules.
    ("submodule.recurse", "false"),
    // A bare repository planted in the project is used only when named (`--git-dir`).
    ("safe.bareRepository", "explicit"),
];

/// The variables that set [`OVERRIDES`]: `GIT_CONFIG_COUNT`, then each key and value.
///
/// ```
/// let vars = relay_token::sandbox::git_guard::env();
/// assert!(vars.contains(&("GIT_CONFIG_VALUE_1".to_string(), "/dev/null".to_string())));
/// ```
pub fn env() -> Vec<(String, String)> {
    let mut out = vec![("GIT_CONFIG_COUNT".to_string(), OVERRIDES.len().to_string())];
    for (i, (k, v)) in OVERRIDES.iter().enumerate() {
        out.push((format!("GIT_CONFIG_KEY_{i}"), k.to_string()));
        out.push((format!("GIT_CONFIG_VALUE_{i}"), v.to_string()));
    }
    out
}

/// Why git in `project` would read another folder's repository data than the project's own: a
/// `commondir` file in the main `.git` folder above or at `project`. git creates that file
/// only in a linked worktree's folder under `.git/worktrees/`; in a main repository it is a
/// redirect a session planted (to a copy with a configuration of its own). `None` when there
/// is none. The first `.git` found walking up from `project` is the one git uses.
///
/// ```
/// use relay_token::sandbox::git_guard::common_dir_redirect;
/// let dir = tempfile::tempdir()?;
/// std::fs::create_dir_all(dir.path().join(".git"))?;
/// assert_eq!(common_dir_redirect(dir.path()), None);
/// std::fs::write(dir.path().join(".git/commondir"), "/elsewhere\n")?;
/// assert_eq!(common_dir_redirect(dir.path()), Some(dir.path().join(".git/commondir")));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn common_dir_redirect(project: &std::path::Path) -> Option<std::path::PathBuf> {
    for dir in project.ancestors() {
        let dot_git = dir.join(".git");
        match std::fs::symlink_metadata(&dot_git) {
            Ok(m) if m.is_dir() => {
                let f = dot_git.join("commondir");
                return std::fs::symlink_metadata(&f).is_ok().then_some(f);
            }
            Ok(_) => return None,
            Err(_) => continue,
        }
    }
    None
}
