//! The project folder a launch runs in: it must be an existing folder of the host's user,
//! neither a system folder nor inside the relay's own folders.
//!
//! A template grants `{project}`, often read-write, so the project decides what a session may
//! write: `/etc` would hand the host's configuration to it, and the state folder the relay-owned
//! Claude settings that every later launch reads.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::launch::plan::request::{InvalidSpec, ProjectRule};

/// Folders that may never be a project, nor hold one.
const SYSTEM_TREES: &[&str] = &[
    "/etc", "/usr", "/bin", "/sbin", "/boot", "/dev", "/proc", "/sys",
];

/// Folders that may not be a project themselves (a folder inside them may).
const SYSTEM_FOLDERS: &[&str] = &[
    "/", "/var", "/home", "/tmp", "/var/tmp", "/opt", "/srv", "/mnt", "/media",
];

/// Checks `given` and returns its real path. `own` are the relay's config and state folders;
/// `euid` the host's user.
pub(crate) fn check_project(
    given: &Path,
    own: &[&Path],
    euid: u32,
) -> Result<PathBuf, InvalidSpec> {
    let refuse = |rule: ProjectRule| InvalidSpec::Project {
        path: given.to_path_buf(),
        rule,
    };
    if given.as_os_str().as_bytes().contains(&0) {
        return Err(refuse(ProjectRule::Nul));
    }
    let real = given
        .canonicalize()
        .map_err(|e| refuse(ProjectRule::Resolve(e)))?;
    let meta = std::fs::metadata(&real).map_err(|e| refuse(ProjectRule::Metadata(e)))?;
    if !meta.is_dir() {
        return Err(refuse(ProjectRule::NotAFolder));
    }
    if is_system(&real, euid) {
        return Err(refuse(ProjectRule::System));
    }
    for o in own {
        let o = o.canonicalize().unwrap_or_else(|_| o.to_path_buf());
        if real.starts_with(&o) {
            return Err(refuse(ProjectRule::InOwnFolder(o)));
        }
    }
    if meta.uid() != euid {
        return Err(refuse(ProjectRule::Owner {
            uid: meta.uid(),
            euid,
        }));
    }
    Ok(real)
}

fn is_system(real: &Path, euid: u32) -> bool {
    let top_lib = real
        .components()
        .nth(1)
        .and_then(|c| c.as_os_str().to_str())
        .is_some_and(|n| n.starts_with("lib"));
    top_lib
        || SYSTEM_TREES.iter().any(|t| real.starts_with(t))
        || SYSTEM_FOLDERS.iter().any(|f| real == Path::new(f))
        || (euid != 0 && real == Path::new("/root"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_system_folder_is_refused_and_an_own_folder_resolves() {
        let e = check_project(Path::new("/etc"), &[], 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"project "/etc": a system folder cannot be a project"#
        );
        let dir = tempfile::tempdir().unwrap();
        let me = std::fs::metadata(dir.path()).unwrap().uid();
        let real = dir.path().canonicalize().unwrap();
        assert_eq!(check_project(dir.path(), &[], me).unwrap(), real);
    }

    #[test]
    fn system_folders() {
        for p in [
            "/",
            "/etc",
            "/etc/ssh",
            "/usr/local",
            "/lib",
            "/lib64",
            "/var",
            "/proc/self",
            "/sys",
            "/boot",
            "/dev",
        ] {
            assert!(is_system(Path::new(p), 1000), "{p}");
        }
        assert!(is_system(Path::new("/root"), 1000));
        assert!(!is_system(Path::new("/root"), 0));
        assert!(!is_system(Path::new("/var/tmp/x"), 1000));
        assert!(!is_system(Path::new("/home/me/src"), 1000));
    }
}
