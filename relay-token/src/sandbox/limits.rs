//! The limits a sandbox's command line meets, checked before anything starts, and bwrap's
//! options handed over in a file instead of on the command line.
//!
//! bwrap's options go to it through `--args FD` (an in-memory file, NUL-separated), so
//! the command lines of `relay-shim` and `bwrap` stay a few arguments long however many folders a
//! template grants: the kernel's limits on `execve` (`MAX_ARG_STRLEN` for one argument, `ARG_MAX`
//! for all) never meet the profile. What is left are the limits no file avoids, each refused
//! with [`SandboxError::TooLarge`] naming it: bubblewrap's own count of the arguments it parses
//! ([`BWRAP_MAX_ARGS`]), the descriptors the bind sources take (`RLIMIT_NOFILE`, and
//! [`MAX_PASS_FDS`]), and, with a bwrap that binds by path, the in-sandbox check's arguments.
//!
//! ```
//! use relay_token::sandbox::limits::{check, BWRAP_MAX_ARGS};
//! let options = vec![std::ffi::OsString::from("--unshare-user"); BWRAP_MAX_ARGS];
//! let err = check(&options, &[], 0, 10).unwrap_err();
//! assert!(err.to_string().contains("bubblewrap's MAX_ARGS"));
//! ```

use std::ffi::OsString;
use std::os::fd::RawFd;

use super::SandboxError;

/// bubblewrap's limit on the arguments it parses, its command line and every `--args` file
/// together (`MAX_ARGS` in bubblewrap 0.8 to 0.11).
pub const BWRAP_MAX_ARGS: usize = 9000;

/// The kernel's limit on one argument of `execve` (`MAX_ARG_STRLEN`: 32 pages of 4 KiB).
pub const MAX_ARG_STRLEN: usize = 32 * 4096;

pub use crate::MAX_PASS_FDS;

/// The arguments bwrap parses besides `options`: `bwrap`, `--args`, its number and `--`.
const AROUND: usize = 4;

/// Checks a sandbox's command line against every limit it can meet: `options` (bwrap's options,
/// handed over in a file), `command` (what follows `--`, on the command line of `relay-shim`,
/// `bwrap` and the sandboxed program), `bind_fds` descriptors placed from `first_fd` on.
///
/// ```
/// use std::ffi::OsString;
/// use relay_token::sandbox::limits::check;
/// assert!(check(&[OsString::from("--unshare-user")], &[OsString::from("/bin/true")], 3, 10).is_ok());
/// let long = OsString::from("x".repeat(200_000));
/// let err = check(&[], &[long], 0, 10).unwrap_err();
/// assert!(err.to_string().contains("MAX_ARG_STRLEN"));
/// ```
pub fn check(
    options: &[OsString],
    command: &[OsString],
    bind_fds: usize,
    first_fd: RawFd,
) -> Result<(), SandboxError> {
    let too_large = |what, needed: usize, limit: usize, name| {
        Err(SandboxError::TooLarge {
            what,
            needed: needed as u64,
            limit: limit as u64,
            name,
        })
    };
    let args = options.len() + AROUND + command.len();
    if args > BWRAP_MAX_ARGS {
        return too_large(
            "bwrap arguments",
            args,
            BWRAP_MAX_ARGS,
            "bubblewrap's MAX_ARGS",
        );
    }
    let longest = command.iter().map(|a| a.len() + 1).max().unwrap_or(0);
    if longest > MAX_ARG_STRLEN {
        return too_large(
            "bytes in one argument of the sandboxed command (the in-sandbox check of a bwrap \
             without --bind-fd)",
            longest,
            MAX_ARG_STRLEN,
            "the kernel's MAX_ARG_STRLEN",
        );
    }
    let total: usize = command.iter().map(|a| a.len() + 1).sum();
    let arg_max = arg_max();
    if total > arg_max {
        return too_large(
            "bytes of arguments for the sandboxed command",
            total,
            arg_max,
            "half the kernel's ARG_MAX, the rest kept for the environment",
        );
    }
    if bind_fds > MAX_PASS_FDS {
        return too_large(
            "descriptors (one per bound source)",
            bind_fds,
            MAX_PASS_FDS,
            "relay-shim's MAX_PASS_FDS",
        );
    }
    let highest = first_fd as usize + bind_fds;
    let nofile = open_files_limit();
    if bind_fds > 0 && highest >= nofile {
        return too_large(
            "descriptor numbers (one per bound source)",
            highest + 1,
            nofile,
            "this process's RLIMIT_NOFILE; raise it with ulimit -n",
        );
    }
    Ok(())
}

/// Half of `sysconf(_SC_ARG_MAX)` (the other half is left to the environment), or 64 KiB when
/// it cannot be read.
fn arg_max() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_ARG_MAX) };
    if n > 0 {
        n as usize / 2
    } else {
        64 << 10
    }
}

/// The soft `RLIMIT_NOFILE`: the lowest descriptor number this process cannot have.
fn open_files_limit() -> usize {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into `rl`, which outlives the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return 1024;
    }
    usize::try_from(rl.rlim_cur).unwrap_or(usize::MAX)
}

/// bwrap's options as its `--args` file reads them (each NUL-terminated), in a close-on-exec
/// in-memory file (`memfd_create`), read from its start.
///
/// ```
/// use std::io::Read;
/// let fd = relay_token::sandbox::limits::args_file(&["--chdir".into(), "/srv".into()])?;
/// let mut text = Vec::new();
/// std::fs::File::from(fd).read_to_end(&mut text)?;
/// assert_eq!(text, b"--chdir\0/srv\0");
/// # Ok::<(), std::io::Error>(())
/// ```
#[cfg(target_os = "linux")]
pub fn args_file(options: &[OsString]) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let mut bytes: Vec<u8> = Vec::with_capacity(options.iter().map(|o| o.len() + 1).sum());
    for o in options {
        bytes.extend_from_slice(o.as_bytes());
        bytes.push(0);
    }
    crate::sys::memfd_with(c"relay-bwrap-args", &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each limit refuses with its own name, at the first count past it, never below.
    #[test]
    fn each_limit_is_named_just_past_it() {
        let opt = |n: usize| vec![OsString::from("--bind-fd"); n];
        assert!(check(&opt(BWRAP_MAX_ARGS - AROUND), &[], 0, 10).is_ok());
        let e = check(&opt(BWRAP_MAX_ARGS - AROUND + 1), &[], 0, 10).unwrap_err();
        assert!(
            matches!(
                e,
                SandboxError::TooLarge {
                    needed: 9001,
                    limit: 9000,
                    ..
                }
            ),
            "{e}"
        );
        let arg = |n: usize| vec![OsString::from("x".repeat(n - 1))];
        assert!(check(&[], &arg(MAX_ARG_STRLEN), 0, 10).is_ok());
        let e = check(&[], &arg(MAX_ARG_STRLEN + 1), 0, 10).unwrap_err();
        assert!(e.to_string().contains("MAX_ARG_STRLEN"), "{e}");
        let e = check(&[], &[], MAX_PASS_FDS + 1, 10).unwrap_err();
        assert!(e.to_string().contains("MAX_PASS_FDS"), "{e}");
        let nofile = open_files_limit();
        if nofile <= MAX_PASS_FDS {
            let e = check(&[], &[], nofile - 10, 10).unwrap_err();
            assert!(e.to_string().contains("RLIMIT_NOFILE"), "{e}");
        }
        assert!(check(&[], &[], 100, 10).is_ok() || nofile <= 110);
    }
}
