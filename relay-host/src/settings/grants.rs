//! A template's grants for one launch: each value of [`Sandbox`]'s `read` and `read_write` with
//! its placeholders filled in ([`expand`]), and whether they show a project ([`Sandbox::shows`]).
//! The launch's plan asks the latter before anything is made; the sandbox step builds its
//! profile from [`Sandbox::expanded`].

use std::error::Error;
use std::fmt;
use std::path::{Path, PathBuf};

use super::write_places::{self, WritePlace};
use super::{Sandbox, CLAUDE_CONFIG_PLACEHOLDER, PROJECT_PLACEHOLDER};
use relay_token::sandbox::{expand_grant, SandboxError};

/// What a grant lets a sandboxed session do with its folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read only (`read`).
    Read,
    /// Read and write (`read_write`).
    ReadWrite,
}

/// A grant (or a write-deny entry) whose value cannot be made a path: it carries
/// [`relay_token::sandbox::expand_grant`]'s error.
#[derive(Debug)]
pub(crate) struct GrantError {
    source: SandboxError,
}

impl GrantError {
    /// The expansion's own error.
    pub(crate) fn into_source(self) -> SandboxError {
        self.source
    }
}

impl fmt::Display for GrantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)
    }
}

impl Error for GrantError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.source)
    }
}

/// A template value (a grant, or an operator's write-deny entry) for this launch:
/// `{claude_config}` and `{project}` filled in, `~` made `home`; `None` for a `{project}` value
/// without a project.
pub(crate) fn expand(
    value: &str,
    home: &Path,
    project: Option<&Path>,
    claude_config: &Path,
) -> Result<Option<PathBuf>, GrantError> {
    if value.starts_with(PROJECT_PLACEHOLDER) && project.is_none() {
        return Ok(None);
    }
    let v = value.replace(CLAUDE_CONFIG_PLACEHOLDER, &claude_config.to_string_lossy());
    match expand_grant(&v, home, project) {
        Ok(p) => Ok(Some(p)),
        Err(source) => Err(GrantError { source }),
    }
}

impl Sandbox {
    /// The grants' values, the read ones first, each with its access (none for `false`).
    pub(crate) fn values(&self) -> Vec<(&str, Access)> {
        let Some(g) = self.grants() else {
            return Vec::new();
        };
        let read = g.read.iter().map(|r| (r.as_str(), Access::Read));
        let rw = g.read_write.iter().map(|r| (r.as_str(), Access::ReadWrite));
        read.chain(rw).collect()
    }

    /// The grants of one launch, expanded ([`expand`]), in [`Sandbox::values`]'s order; a
    /// `{project}` grant of a launch without a project is left out.
    pub(crate) fn expanded(
        &self,
        home: &Path,
        project: Option<&Path>,
        claude_config: &Path,
    ) -> Result<Vec<(PathBuf, Access)>, GrantError> {
        let mut out = Vec::new();
        for (value, access) in self.values() {
            if let Some(p) = expand(value, home, project, claude_config)? {
                out.push((p, access));
            }
        }
        Ok(out)
    }

    /// The first read-write grant that would let a session write where no session may
    /// ([`super::write_places`]): the grant as written, the place it names for
    /// this launch, and why. The launch's own Claude config folder (`claude_config`, in the
    /// state folder) is the relay's and passes; `writes_home` lifts the home's rules.
    pub(crate) fn refused_write(
        &self,
        home: &Path,
        project: Option<&Path>,
        claude_config: &Path,
        writes_home: bool,
    ) -> Result<Option<(String, PathBuf, WritePlace)>, GrantError> {
        let home_real = home.canonicalize().ok();
        for (value, access) in self.values() {
            if access != Access::ReadWrite {
                continue;
            }
            let Some(path) = expand(value, home, project, claude_config)? else {
                continue;
            };
            if path.starts_with(claude_config) {
                continue;
            }
            let real = write_places::real_path(&path);
            let why =
                write_places::refused_write(&path, real.as_deref(), home, home_real.as_deref());
            if let Some(why) = why.filter(|w| !(writes_home && w.in_home())) {
                return Ok(Some((value.to_string(), path, why)));
            }
        }
        Ok(None)
    }

    /// True when a grant (read or read-write) shows `project` (a real path): a grant is made
    /// canonical where it exists.
    pub(crate) fn shows(
        &self,
        home: &Path,
        project: &Path,
        claude_config: &Path,
    ) -> Result<bool, GrantError> {
        for (g, _) in self.expanded(home, Some(project), claude_config)? {
            let real = g.canonicalize().unwrap_or(g);
            if project.starts_with(&real) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Grants;

    fn sandbox(read: &[&str], rw: &[&str]) -> Sandbox {
        Sandbox::Grants(Grants {
            read: read.iter().map(|s| s.to_string()).collect(),
            read_write: rw.iter().map(|s| s.to_string()).collect(),
        })
    }

    /// Read grants first, each with its access; placeholders filled; a `{project}` grant
    /// without a project left out.
    #[test]
    fn expands_in_order_with_access() {
        let s = sandbox(
            &["~/.config", "{project}/docs"],
            &["{claude_config}", "/srv"],
        );
        let (home, cc) = (Path::new("/h"), Path::new("/state/s/claude"));
        let got = s.expanded(home, None, cc).unwrap();
        let want = vec![
            (PathBuf::from("/h/.config"), Access::Read),
            (PathBuf::from("/state/s/claude"), Access::ReadWrite),
            (PathBuf::from("/srv"), Access::ReadWrite),
        ];
        assert_eq!(got, want);
        let with = s.expanded(home, Some(Path::new("/p")), cc).unwrap();
        assert_eq!(with[1], (PathBuf::from("/p/docs"), Access::Read));
        assert!(Sandbox::Off.expanded(home, None, cc).unwrap().is_empty());
    }

    /// A value that is no path is an error carrying the expansion's own.
    #[test]
    fn a_relative_grant_is_an_error_with_its_source() {
        let e = expand("relative", Path::new("/h"), None, Path::new("/c")).unwrap_err();
        assert!(e.source().is_some());
        assert!(matches!(e.into_source(), SandboxError::Grant { .. }));
    }

    /// A grant shows a project inside it, not one beside it.
    #[test]
    fn shows_a_project_inside_a_grant() {
        let s = sandbox(&["/nonexistent-relay/a"], &[]);
        let cc = Path::new("/c");
        let inside = Path::new("/nonexistent-relay/a/p");
        assert!(s.shows(Path::new("/h"), inside, cc).unwrap());
        let beside = Path::new("/nonexistent-relay/b");
        assert!(!s.shows(Path::new("/h"), beside, cc).unwrap());
    }
}
