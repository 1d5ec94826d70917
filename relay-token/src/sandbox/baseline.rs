//! The system baseline every sandbox sees read-only: `/usr`, `/etc`, the `/lib*`, `/bin` and
//! `/sbin`, as they exist on this machine (a folder, or a symlink such as Debian's `/bin ->
//! usr/bin`).

use std::path::PathBuf;

/// The system baseline, bound read-only where it exists.
const BASELINE: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];

/// One entry of the system baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Base {
    /// A real folder, bound read-only onto itself.
    Dir(PathBuf),
    /// A symlink (Debian's `/bin -> usr/bin`), recreated as the same symlink.
    Link { path: PathBuf, target: PathBuf },
}

/// The baseline entries that exist on this machine.
pub(super) fn baseline() -> Vec<Base> {
    let mut out = Vec::new();
    for p in BASELINE {
        let path = PathBuf::from(p);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(&path) {
                    out.push(Base::Link { path, target });
                }
            }
            Ok(m) if m.is_dir() => out.push(Base::Dir(path)),
            _ => {}
        }
    }
    out
}
