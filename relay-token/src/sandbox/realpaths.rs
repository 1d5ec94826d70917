//! Real paths, each folder made canonical once per launch.

use std::io;
use std::path::{Path, PathBuf};

use super::grant::has_control;
use super::{io_words, seatbelt, SandboxError};

/// `p` made canonical (it must exist), in its on-disk spelling; refused when it is not absolute,
/// holds control characters or is not UTF-8, naming `role`.
pub(super) fn canon(
    real_of: &Realpaths,
    role: &'static str,
    p: &Path,
) -> Result<PathBuf, SandboxError> {
    let unusable = |reason: String| SandboxError::Unusable {
        role,
        path: p.to_path_buf(),
        reason,
    };
    check_text(p).map_err(|r| unusable(r.into()))?;
    if !p.is_absolute() {
        return Err(unusable("must be an absolute path".into()));
    }
    let real = real_of
        .of(p)
        .and_then(|r| seatbelt::on_disk_spelling(&r))
        .map_err(|e| unusable(io_words(&e)))?;
    check_text(&real).map_err(|r| unusable(format!("its real path {real:?} {r}")))?;
    Ok(real)
}

/// Real paths for one [`Profile::resolve`](super::Profile::resolve): a path whose last component is not a symlink is its
/// folder's real path joined with that name (`lstat` of the name), and each folder is made
/// canonical once, so resolving the many paths under one project walks that project's
/// ancestors once instead of once per path. What it yields is no more trusted than
/// `canonicalize` (a path can change afterwards either way): each bind source is then
/// identified through a descriptor whose own path must still be this one.
#[derive(Default)]
pub struct Realpaths {
    folders: std::cell::RefCell<Vec<(PathBuf, PathBuf)>>,
}

impl Realpaths {
    /// `p` made canonical (it must exist).
    ///
    /// ```
    /// let real = relay_token::sandbox::Realpaths::default();
    /// assert_eq!(real.of("/".as_ref())?, std::path::Path::new("/"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn of(&self, p: &Path) -> io::Result<PathBuf> {
        use std::os::unix::ffi::OsStrExt;
        // A trailing `/` or `/.` makes `lstat` follow a final symlink: the long way then.
        let text = p.as_os_str().as_bytes();
        let plain = p.is_absolute() && !text.ends_with(b"/") && !text.ends_with(b"/.");
        if let (true, Some(parent), Some(name)) = (plain, p.parent(), p.file_name()) {
            if !std::fs::symlink_metadata(p)?.file_type().is_symlink() {
                return Ok(self.folder(parent)?.join(name));
            }
        }
        std::fs::canonicalize(p)
    }

    /// The folder `dir` made canonical, once per `Realpaths`.
    fn folder(&self, dir: &Path) -> io::Result<PathBuf> {
        if let Some((_, real)) = self.folders.borrow().iter().find(|(d, _)| d == dir) {
            return Ok(real.clone());
        }
        let real = std::fs::canonicalize(dir)?;
        self.folders
            .borrow_mut()
            .push((dir.to_path_buf(), real.clone()));
        Ok(real)
    }
}

/// Refuses control characters and text that is not UTF-8 (SBPL is text).
pub(super) fn check_text(p: &Path) -> Result<(), &'static str> {
    if has_control(p.as_os_str()) {
        return Err("holds control characters");
    }
    if p.to_str().is_none() {
        return Err("is not valid UTF-8");
    }
    Ok(())
}

#[cfg(test)]
mod realpaths_tests {
    use super::Realpaths;
    use std::path::Path;

    #[test]
    fn realpaths_agree_with_canonicalize() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f"), "").unwrap();
        std::os::unix::fs::symlink("a/b", root.join("l")).unwrap();
        std::os::unix::fs::symlink("b/f", root.join("a/lf")).unwrap();
        let r = Realpaths::default();
        for p in [
            "a/b/f",
            "l/f",
            "a/lf",
            "l",
            "l/",
            "l/.",
            "a/b/../b/f",
            "a/./b",
        ] {
            let p = root.join(p);
            assert_eq!(
                r.of(&p).unwrap(),
                std::fs::canonicalize(&p).unwrap(),
                "{p:?}"
            );
        }
        assert!(r.of(&root.join("missing")).is_err());
        assert!(r.of(Path::new("relative")).is_err());
    }
}
