//! The one `PATH` lookup: a program name to the absolute path of an executable file. The sandbox
//! finds `bwrap` with it; a launcher finds its session's program with it, so both agree.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// True for a regular file with an execute bit.
///
/// ```
/// assert!(relay_token::which::is_executable("/bin/sh".as_ref()));
/// assert!(!relay_token::which::is_executable("/etc".as_ref()));
/// ```
pub fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The first executable `name` in the absolute folders of `PATH` (relative and empty entries,
/// which would mean the current folder, are skipped); a `name` holding a `/` is taken as a path.
///
/// ```
/// let sh = relay_token::which::find_program("sh").expect("sh on PATH");
/// assert!(sh.is_absolute());
/// assert_eq!(relay_token::which::find_program("/no/such/program"), None);
/// ```
pub fn find_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return is_executable(&p).then_some(p);
    }
    path_folders()
        .into_iter()
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

/// The absolute folders of `PATH`, in order.
///
/// ```
/// assert!(relay_token::which::path_folders().iter().all(|d| d.is_absolute()));
/// ```
pub fn path_folders() -> Vec<PathBuf> {
    let var = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&var)
        .filter(|d| d.is_absolute())
        .collect()
}
