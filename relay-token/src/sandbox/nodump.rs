//! The preload that keeps a token session's program out of its own tools' reach.
//!
//! Claude Code holds the token in its memory, and the tools it runs are its children: same
//! user, same sandbox. The seccomp filter ([`super::seccomp`]) refuses `ptrace` and
//! `process_vm_readv`, but a filter cannot see paths, and `/proc/PID/mem` is the third door to
//! the same memory. The kernel opens it (like `environ` and `fd/`) only to a process that passes
//! the ptrace access check, and that check fails for a process without `CAP_SYS_PTRACE` when
//! the target is *not dumpable*. Exec makes every program dumpable again, so the program must
//! clear the flag itself: [`PRELOAD`] is a shared object whose only code is a constructor that
//! calls `prctl(PR_SET_DUMPABLE, 0)`, and a launcher places it read-only in the sandbox (`place_file`)
//! and preloads it (`LD_PRELOAD`) into the program of a launch that gets the token. Every sandbox drops
//! all capabilities, as root too, so nothing inside can pass the check.
//!
//! What it does not cover: a statically linked program (the dynamic loader never runs; the
//! pinned Claude Code is dynamically linked against glibc, and the tools'-view turn of the test
//! suite measures the result), and a program that sets the flag back itself.
//!
//! ```
//! # if relay_token::sandbox::nodump::AVAILABLE {
//! let so = relay_token::sandbox::nodump::PRELOAD;
//! assert_eq!(&so[..4], b"\x7fELF");
//! assert!(so.len() < 16 * 1024);
//! # }
//! ```

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The shared object (an ELF `.so` of about 2 KiB, built from `preload/nodump.rs` for this
/// target by the crate's build script).
#[cfg(relay_nodump)]
pub static PRELOAD: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/librelay_nodump.so"));
/// The shared object: empty, since the build script builds none for this target
/// ([`AVAILABLE`] is false).
#[cfg(not(relay_nodump))]
pub static PRELOAD: &[u8] = &[];

/// Whether this build carries the preload: Linux on x86_64 and aarch64.
///
/// ```
/// # #[cfg(target_arch = "x86_64")]
/// assert!(relay_token::sandbox::nodump::AVAILABLE);
/// ```
pub const AVAILABLE: bool = cfg!(relay_nodump);

/// The preload's file name in a session folder on the host.
pub const FILE_NAME: &str = "librelay_nodump.so";

/// Writes [`PRELOAD`] as a new file [`FILE_NAME`] (0600, like every file of the state folder;
/// the sandbox sees it read-only) in `dir`, a session folder no sandbox can reach, and returns
/// its path. A file already there is replaced, never followed. A folder on a `noexec` mount is
/// refused (`PermissionDenied`): the dynamic loader could not map the preload from there and
/// would start the program without it. A build without the preload ([`AVAILABLE`] false) is
/// refused (`Unsupported`).
///
/// ```
/// # if relay_token::sandbox::nodump::AVAILABLE {
/// let dir = tempfile::tempdir()?;
/// let p = relay_token::sandbox::nodump::write_into(dir.path())?;
/// assert_eq!(std::fs::read(&p)?, relay_token::sandbox::nodump::PRELOAD);
/// # }
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn write_into(dir: &Path) -> io::Result<PathBuf> {
    if !AVAILABLE {
        return Err(io::ErrorKind::Unsupported.into());
    }
    let path = dir.join(FILE_NAME);
    match fs::remove_file(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    f.write_all(PRELOAD)?;
    if crate::sys::fstatvfs(&f)?.f_flag & libc::ST_NOEXEC != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "on a noexec mount: the preload that keeps the token out of its tools' reach cannot be mapped from there",
        ));
    }
    Ok(path)
}

#[cfg(all(test, relay_nodump))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_preload_is_written_private_and_replaces_what_was_there() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(super::FILE_NAME), b"planted").unwrap();
        let p = super::write_into(dir.path()).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), super::PRELOAD);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
