//! Running a command under macOS `sandbox-exec`, and the path spelling its rules must use.

use std::ffi::OsString;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{io_words, SandboxError};

/// Where macOS keeps `sandbox-exec`. It is looked for here only, never on `PATH`, so a folder a
/// session can write cannot put another program in its place.
///
/// ```
/// assert_eq!(relay_token::sandbox::SANDBOX_EXEC, "/usr/bin/sandbox-exec");
/// ```
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// [`SANDBOX_EXEC`] when it is there as an executable file. Without it a sandboxed launch is
/// refused (`sandbox_unavailable`), never run unsandboxed.
///
/// ```
/// use std::path::Path;
/// use relay_token::sandbox::{find_sandbox_exec, SANDBOX_EXEC};
/// match find_sandbox_exec() {
///     Ok(path) => assert_eq!(path, Path::new(SANDBOX_EXEC)),
///     Err(e) => assert!(e.to_string().contains("sandboxed launches are refused")),
/// }
/// ```
pub fn find_sandbox_exec() -> Result<PathBuf, SandboxError> {
    executable(Path::new(SANDBOX_EXEC))
}

fn executable(path: &Path) -> Result<PathBuf, SandboxError> {
    let unusable = |reason: String| SandboxError::Unusable {
        role: "sandbox-exec",
        path: path.to_path_buf(),
        reason: format!("{reason}: sandboxed launches are refused"),
    };
    let meta = std::fs::metadata(path).map_err(|e| unusable(io_words(&e)))?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(unusable("not an executable file".into()));
    }
    Ok(path.to_path_buf())
}

/// The argv that runs `command` (program first) under the SBPL profile in the file `profile`:
/// `/usr/bin/sandbox-exec -f PROFILE -- PROGRAM ARGS...`. The `--` keeps a program whose name
/// starts with `-` from being read as an option of `sandbox-exec`.
///
/// ```
/// use std::ffi::OsString;
/// use std::path::Path;
/// use relay_token::sandbox::sandbox_exec_argv;
///
/// let argv = sandbox_exec_argv(
///     Path::new("/Users/me/.local/state/relay/sessions/s1/profile.sb"),
///     &[OsString::from("/opt/homebrew/bin/claude"), OsString::from("--help")],
/// );
/// assert_eq!(
///     argv,
///     [
///         "/usr/bin/sandbox-exec",
///         "-f",
///         "/Users/me/.local/state/relay/sessions/s1/profile.sb",
///         "--",
///         "/opt/homebrew/bin/claude",
///         "--help",
///     ]
/// );
/// ```
pub fn sandbox_exec_argv(profile: &Path, command: &[OsString]) -> Vec<OsString> {
    let mut argv = Vec::with_capacity(command.len() + 4);
    argv.push(OsString::from(SANDBOX_EXEC));
    argv.push(OsString::from("-f"));
    argv.push(profile.as_os_str().to_os_string());
    argv.push(OsString::from("--"));
    argv.extend(command.iter().cloned());
    argv
}

/// `real` (an existing, canonical path) as the file system spells it. APFS and HFS+ are usually
/// case-insensitive, but `sandbox-exec` compares a rule's path with the on-disk spelling, so a
/// deny written `~/.Config/...` for the folder `~/.config` would match nothing. On macOS the
/// spelling is read back with `fcntl(F_GETPATH)` on a descriptor opened without following a
/// final symlink; elsewhere `real` is returned as it is.
pub(super) fn on_disk_spelling(real: &Path) -> io::Result<PathBuf> {
    #[cfg(target_os = "macos")]
    {
        f_getpath(real)
    }
    #[cfg(not(target_os = "macos"))]
    {
        Ok(real.to_path_buf())
    }
}

#[cfg(target_os = "macos")]
fn f_getpath(real: &Path) -> io::Result<PathBuf> {
    use std::ffi::{CStr, OsStr};
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;

    // O_NONBLOCK: a FIFO at `real` must not block the host; nothing is read through `file`.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(real)?;
    let mut buf = [0 as libc::c_char; libc::MAXPATHLEN as usize];
    // SAFETY: `file` is an open descriptor for the whole call, and F_GETPATH writes at most
    // MAXPATHLEN bytes (NUL included) into `buf`, which holds exactly that many.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETPATH, buf.as_mut_ptr()) } == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: on success F_GETPATH leaves a NUL-terminated string in `buf`.
    let text = unsafe { CStr::from_ptr(buf.as_ptr()) };
    Ok(PathBuf::from(OsStr::from_bytes(text.to_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_keeps_the_command_after_the_separator() {
        let cmd = [
            OsString::from("-rf"),
            OsString::from("a b"),
            OsString::new(),
        ];
        let argv = sandbox_exec_argv(Path::new("/s/p.sb"), &cmd);
        assert_eq!(
            argv,
            [
                "/usr/bin/sandbox-exec",
                "-f",
                "/s/p.sb",
                "--",
                "-rf",
                "a b",
                ""
            ]
        );
        let argv = sandbox_exec_argv(Path::new("/s/p.sb"), &[]);
        assert_eq!(argv, ["/usr/bin/sandbox-exec", "-f", "/s/p.sb", "--"]);
    }

    #[test]
    fn sandbox_exec_must_be_an_executable_file() {
        assert_eq!(
            executable(Path::new("/bin/sh")).unwrap(),
            Path::new("/bin/sh")
        );
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("sandbox-exec");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        for (path, why) in [
            (plain.clone(), "not an executable file"),
            (dir.path().to_path_buf(), "not an executable file"),
            (dir.path().join("missing"), "no such file or directory"),
        ] {
            let err = executable(&path).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("sandbox-exec {path:?}: {why}: sandboxed launches are refused")
            );
        }
    }

    #[cfg(target_os = "macos")]
    #[test]
    fn spelling_is_read_back_from_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(real.join("Config")).unwrap();
        std::fs::write(real.join("Config/Token"), "x").unwrap();
        let asked = real.join("config/TOKEN");
        match std::fs::metadata(&asked) {
            // A case-insensitive volume: the rule must name the spelling on disk.
            Ok(_) => assert_eq!(on_disk_spelling(&asked).unwrap(), real.join("Config/Token")),
            // A case-sensitive volume: no other spelling reaches the file.
            Err(_) => assert!(on_disk_spelling(&asked).is_err()),
        }
        assert_eq!(on_disk_spelling(&real).unwrap(), real);
    }
}
