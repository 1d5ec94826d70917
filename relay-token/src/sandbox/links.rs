//! Following a token path to its real path, refusing symlinks a sandboxed session could have made.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use super::{io_words, SandboxError};

/// The most symlinks followed on one path (Linux's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// Follows `given` (absolute) one component at a time with `lstat`, the way the kernel would,
/// and returns its real path. Every symlink met is judged by the folder that holds it: when a
/// session could have written that folder ([`makeable`]), the launch is refused.
pub(super) fn real_path(given: &Path, writable: &[PathBuf]) -> Result<PathBuf, SandboxError> {
    let refuse = |reason: String| SandboxError::DenyUnhonourable {
        path: given.to_path_buf(),
        reason,
    };
    let mut rest: VecDeque<OsString> = parts(given).into();
    let mut cur = PathBuf::from("/");
    let mut hops = 0;
    while let Some(part) = rest.pop_front() {
        if part == ".." {
            cur.pop();
            continue;
        }
        let next = cur.join(&part);
        let meta = std::fs::symlink_metadata(&next)
            .map_err(|e| refuse(format!("{next:?}: {}", io_words(&e))))?;
        if meta.file_type().is_symlink() {
            if makeable(&cur, writable) {
                return Err(SandboxError::DenyFollowsLink {
                    path: given.to_path_buf(),
                    link: next,
                });
            }
            hops += 1;
            if hops > MAX_LINKS {
                return Err(refuse("too many levels of symbolic links".into()));
            }
            let target = std::fs::read_link(&next)
                .map_err(|e| refuse(format!("{next:?}: {}", io_words(&e))))?;
            if target.is_absolute() {
                cur = PathBuf::from("/");
            }
            for p in parts(&target).into_iter().rev() {
                rest.push_front(p);
            }
        } else {
            if !rest.is_empty() && !meta.is_dir() {
                return Err(refuse(format!("{next:?}: not a directory")));
            }
            cur = next;
        }
    }
    Ok(cur)
}

/// The components of a path as names, `..` kept, `.` and `/` dropped.
fn parts(p: &Path) -> Vec<OsString> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// Could a sandboxed session have created an entry in `folder` (a real path)? Yes when it lies
/// inside a read-write grant, or is not owned by root, or is writable by group or others (the
/// sticky `/tmp` included), or cannot be examined. Judged by owner and mode bits, never by
/// `access(W_OK)`: for a host running as root every folder would pass that test.
pub(super) fn makeable(folder: &Path, writable: &[PathBuf]) -> bool {
    if writable.iter().any(|w| folder.starts_with(w)) {
        return true;
    }
    match std::fs::metadata(folder) {
        Ok(m) => m.uid() != 0 || m.mode() & 0o022 != 0,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_owned_system_links_are_followed() {
        // /proc/self is a link in a root-owned 0555 folder outside every grant.
        let real = real_path(Path::new("/proc/self/status"), &[]).unwrap();
        assert!(real.starts_with("/proc"));
        assert_ne!(real, Path::new("/proc/self/status"));
    }

    #[test]
    fn sticky_tmp_is_makeable() {
        assert!(makeable(Path::new("/tmp"), &[]));
        assert!(makeable(Path::new("/usr"), &[PathBuf::from("/usr")]));
        assert!(!makeable(Path::new("/usr"), &[PathBuf::from("/usr/local")]));
    }
}
