//! The one `PATH` lookup: a program name to the absolute path of an executable file.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// True for a regular file with an execute bit.
pub fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The first executable `name` in the absolute folders of `PATH` (relative and empty entries,
/// which would mean the current folder, are skipped); a `name` holding a `/` is taken as a path.
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
pub fn path_folders() -> Vec<PathBuf> {
    let var = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&var)
        .filter(|d| d.is_absolute())
        .collect()
}
