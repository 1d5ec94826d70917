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
//! Those overrides cannot name every driver: a filter, a `textconv` or a diff or merge driver
//! is configured under a name of the repository's choosing (`filter.<name>.clean`), and git has
//! no switch that ignores them all. So the `git` a token session finds first on `PATH` is
//! [`WRAPPER`], placed read-only in a folder of the launcher's choosing: it asks the real git (`rev-parse`, which
//! runs no driver, filter, hook or monitor) which repository a command would use. In the
//! project's own repository (whose hooks and `info/` the write-deny list keeps read-only, and
//! whose configuration a launcher shows as a copy holding only keys it allows), it runs git
//! with that repository pinned (`GIT_DIR`, `GIT_COMMON_DIR`, `GIT_WORK_TREE`), so a
//! `commondir` or a `.git` another session writes meanwhile redirects nothing. A repository
//! anywhere else the launcher shows the sandbox (in any folder it names in
//! `RELAY_GIT_SHARED`: every grant, read-only ones too, since any folder can be another
//! launch's project) is refused: its configuration may be another session's. Elsewhere (the
//! session's private `/tmp`) git runs as it is.
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

/// The wrapper, a POSIX shell script. It reads `RELAY_GIT` (the real git), `RELAY_GIT_COMMON_DIR`
/// (the project's repository, if any) and `RELAY_GIT_SHARED` (the folders where a repository
/// may hold another session's configuration, one a line): see [`wrapper_env`].
///
/// ```
/// assert!(relay_token::sandbox::git_guard::WRAPPER.starts_with("#!/bin/sh\n"));
/// ```
pub const WRAPPER: &str = include_str!("git_wrapper.sh");

/// Writes [`WRAPPER`] as `git` (0700: the owner runs it) into `dir` (a folder no sandbox reaches, such as the
/// session folder); returns its path, to be shown read-only inside the sandbox, in a folder
/// that comes first on the session's `PATH`. Whatever stands at `dir/git` already (a kept
/// session's folder reused under its id holds the last launch's wrapper, or whatever was put in
/// its place) is removed first, and the wrapper is a new file: `dir` is opened without following
/// a link, and the old entry is unlinked and the new one made relative to that descriptor
/// (`O_EXCL | O_NOFOLLOW`), so no link in the way is ever followed.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let p = relay_token::sandbox::git_guard::write_wrapper(dir.path())?;
/// assert_eq!(std::fs::read_to_string(&p)?, relay_token::sandbox::git_guard::WRAPPER);
/// // A folder reused: the link that stands there now is replaced, not followed.
/// std::fs::remove_file(&p)?;
/// std::os::unix::fs::symlink("/etc/hostname", &p)?;
/// relay_token::sandbox::git_guard::write_wrapper(dir.path())?;
/// assert!(std::fs::symlink_metadata(&p)?.is_file());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn write_wrapper(dir: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
    use std::io::Write;
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::fs::OpenOptionsExt;
    let folder = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)?;
    let name = c"git";
    // SAFETY: `folder` is an open folder descriptor and `name` a NUL-terminated string, both
    // alive for the call; unlinkat never follows a link in its last component.
    if unsafe { libc::unlinkat(folder.as_raw_fd(), name.as_ptr(), 0) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(e);
        }
    }
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: as above; the mode is passed as the variadic argument O_CREAT reads.
    let fd = unsafe {
        libc::openat(
            folder.as_raw_fd(),
            name.as_ptr(),
            flags,
            0o700 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat and is owned by nothing else.
    let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
    f.write_all(WRAPPER.as_bytes())?;
    Ok(dir.join("git"))
}

/// The variables [`WRAPPER`] reads: the real git, the common folder of the project's
/// repository (empty when it has none) and the folders where a repository may hold another
/// session's configuration (every folder the sandbox is shown), one a line.
///
/// ```
/// use std::path::{Path, PathBuf};
/// let env = relay_token::sandbox::git_guard::wrapper_env(
///     Path::new("/usr/bin/git"), Some(Path::new("/p/.git")), &[PathBuf::from("/p")]);
/// assert_eq!(env[1], ("RELAY_GIT_COMMON_DIR".to_string(), "/p/.git".into()));
/// ```
pub fn wrapper_env(
    real_git: &std::path::Path,
    common_dir: Option<&std::path::Path>,
    shared: &[std::path::PathBuf],
) -> Vec<(String, std::ffi::OsString)> {
    let mut lines = std::ffi::OsString::new();
    for s in shared {
        lines.push(s);
        lines.push("\n");
    }
    vec![
        ("RELAY_GIT".to_string(), real_git.into()),
        (
            "RELAY_GIT_COMMON_DIR".to_string(),
            common_dir.map(|c| c.into()).unwrap_or_default(),
        ),
        ("RELAY_GIT_SHARED".to_string(), lines),
    ]
}

/// The variable that tells [`WRAPPER`] the git folders of the project's repository's linked
/// worktrees and submodules the launch found ([`super::git_dirs::linked`]), one a line:
/// `RELAY_GIT_LINKED`. The wrapper pins a worktree's or a submodule's git folder only when it is
/// one of these, never a folder a session made beside them (a submodule's git folder is
/// writable, so a session can make a copy with a configuration of its own inside it).
///
/// ```
/// use std::path::PathBuf;
/// let (k, v) = relay_token::sandbox::git_guard::linked_env(&[PathBuf::from("/p/.git/modules/s")]);
/// assert_eq!((k.as_str(), v.to_str()), ("RELAY_GIT_LINKED", Some("/p/.git/modules/s\n")));
/// ```
pub fn linked_env(linked: &[std::path::PathBuf]) -> (String, std::ffi::OsString) {
    let mut lines = std::ffi::OsString::new();
    for d in linked {
        lines.push(d);
        lines.push("\n");
    }
    ("RELAY_GIT_LINKED".to_string(), lines)
}

/// The common folder of the repository git uses in `project` (the first `.git` found walking
/// up; a `.git` file names a linked worktree's or a submodule's git folder, whose `commondir`
/// names the common one), made canonical; `None` when there is none.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let p = dir.path().canonicalize()?;
/// std::fs::create_dir_all(p.join(".git"))?;
/// std::fs::write(p.join(".git/HEAD"), "ref: refs/heads/main\n")?;
/// std::fs::create_dir(p.join("sub"))?;
/// let common = relay_token::sandbox::git_guard::project_common_dir(&p.join("sub"));
/// assert_eq!(common, Some(p.join(".git")));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn project_common_dir(project: &std::path::Path) -> Option<std::path::PathBuf> {
    for dir in project.ancestors() {
        let dot_git = dir.join(".git");
        let Ok(m) = std::fs::symlink_metadata(&dot_git) else {
            continue;
        };
        let git_dir = if m.is_dir() {
            if std::fs::symlink_metadata(dot_git.join("HEAD")).is_err() {
                continue;
            }
            dot_git
        } else {
            let text = std::fs::read_to_string(&dot_git).ok()?;
            dir.join(text.strip_prefix("gitdir:")?.trim())
        };
        let common = match std::fs::read_to_string(git_dir.join("commondir")) {
            Ok(c) => git_dir.join(c.trim()),
            Err(_) => git_dir,
        };
        return common.canonicalize().ok();
    }
    None
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    /// The real git on the test's `PATH`.
    fn real_git() -> std::path::PathBuf {
        crate::which::find_program("git").expect("git on PATH")
    }

    /// The wrapper needs nothing but `sh` and the real git (the shell's own built-ins quote and
    /// split): with an empty `PATH`, a command in the project's repository still runs pinned,
    /// its global options (a quote and a space in a value) passed on intact to each git it runs.
    /// In a work tree it asks git once (`rev-parse` with `--show-toplevel`), then runs the
    /// command: two programs per call, not three (Claude Code makes about ten git calls a
    /// turn). In the git folder itself, where `--show-toplevel` fails, it asks again without it
    /// and runs the command pinned, without a work tree (`--bare`).
    #[test]
    fn the_wrapper_runs_no_program_but_git() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let repo = root.join("p");
        std::fs::create_dir(&repo).unwrap();
        let git = real_git();
        let ok = Command::new(&git)
            .args(["init", "-q"])
            .current_dir(&repo)
            .status()
            .unwrap();
        assert!(ok.success());
        let log = root.join("calls");
        // A git that records each call (its arguments and GIT_DIR) with built-ins only.
        let recorder = root.join("recording-git");
        std::fs::write(
            &recorder,
            format!(
                "#!/bin/sh\nprintf '%s|' \"GIT_DIR=$GIT_DIR\" \"GIT_WORK_TREE=$GIT_WORK_TREE\" \"$@\" >> '{}'\nprintf '\\n' >> '{}'\n\
                 exec '{}' \"$@\"\n",
                log.display(),
                log.display(),
                git.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&recorder, std::fs::Permissions::from_mode(0o755)).unwrap();
        let wrapper = super::write_wrapper(&root).unwrap();
        let empty = root.join("empty-bin");
        std::fs::create_dir(&empty).unwrap();
        let gitdir = repo.join(".git");
        let run = |cwd: &std::path::Path| {
            let _ = std::fs::remove_file(&log);
            let out = Command::new("/bin/sh")
                .arg(&wrapper)
                .args(["-c", "user.name=O'Brien the 2nd", "config", "user.name"])
                .env_clear()
                .env("PATH", &empty)
                .env("HOME", &root)
                .env("RELAY_GIT", &recorder)
                .env("RELAY_GIT_COMMON_DIR", &gitdir)
                .env("RELAY_GIT_SHARED", format!("{}\n", root.display()))
                .current_dir(cwd)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            assert_eq!(String::from_utf8_lossy(&out.stdout), "O'Brien the 2nd\n");
            std::fs::read_to_string(&log).unwrap()
        };
        let ask = "GIT_DIR=|GIT_WORK_TREE=|-c|user.name=O'Brien the 2nd|rev-parse|\
                   --path-format=absolute|--git-dir|--git-common-dir|--is-inside-work-tree|";
        let calls = run(&repo);
        let want = [
            format!("{ask}--show-toplevel|"),
            format!(
                "GIT_DIR={}|GIT_WORK_TREE={}|-c|user.name=O'Brien the 2nd|config|user.name|",
                gitdir.display(),
                repo.display()
            ),
        ];
        assert_eq!(calls.lines().collect::<Vec<_>>(), want, "{calls}");
        let calls = run(&gitdir);
        let want = [
            format!("{ask}--show-toplevel|"),
            ask.to_string(),
            format!(
                "GIT_DIR={}|GIT_WORK_TREE=|--bare|-c|user.name=O'Brien the 2nd|config|user.name|",
                gitdir.display()
            ),
        ];
        assert_eq!(calls.lines().collect::<Vec<_>>(), want, "{calls}");
    }
}
