//! Why a request cannot be launched as written (`invalid_spec`): the plan's own refusals beside
//! the rule-by-rule [`InvalidSpec`].

use std::error::Error;
use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::launch::plan::invalid_spec::InvalidSpec;

/// Why the request cannot be launched as written (`invalid_spec`).
///
/// ```
/// use relay_host::launch::error::RequestError;
/// let e = RequestError::SessionRunning { session_id: "s1".into() };
/// assert_eq!(e.to_string(), r#"session "s1" is already running"#);
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum RequestError {
    /// The request, its project or what it adds to a token launch.
    Invalid(InvalidSpec),
    /// No grant of the template shows the project.
    ProjectNotGranted {
        /// The project as the request gave it.
        project: PathBuf,
        /// The template's id.
        template: String,
    },
    /// A session of that id is running.
    SessionRunning {
        /// The session id.
        session_id: String,
    },
    /// A Claude session already runs in the project, and the template's `same_project` is
    /// `"refuse"`.
    ProjectBusy {
        /// The project (its real path).
        project: PathBuf,
        /// The session that runs there.
        session_id: String,
    },
    /// The session folder's lock cannot be taken.
    SessionLock {
        /// The session folder.
        dir: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A read-write grant of a sandboxed template (its `{project}` grant: the project) would let
    /// the session write where the operator's programs or the host run code or read
    /// configuration.
    WritesWhereCodeRuns {
        /// The template's id.
        template: String,
        /// The grant as written (`~/`, `{project}`, ...).
        grant: String,
        /// The place it names for this launch.
        path: PathBuf,
        /// Why no session writes there.
        why: crate::settings::WritePlace,
    },
    /// The project's `.git` file sends git to another folder's repository data.
    GitRedirect {
        /// The project.
        project: PathBuf,
        /// The file that redirects.
        file: PathBuf,
    },
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Invalid(e) => write!(f, "{e}"),
            RequestError::ProjectNotGranted { project, template } => write!(
                f,
                "project {:?}: no grant of the template {template:?} shows it, so the session \
                 could not start there",
                project.display().to_string()
            ),
            RequestError::SessionRunning { session_id } => {
                write!(f, "session {session_id:?} is already running")
            }
            RequestError::ProjectBusy {
                project,
                session_id,
            } => write!(
                f,
                "project {:?}: Claude session {session_id:?} already runs there (the template's \
                 same_project is \"refuse\")",
                project.display().to_string()
            ),
            RequestError::SessionLock { dir, source } => {
                write!(f, "session {}: {source}", dir.display())
            }
            RequestError::WritesWhereCodeRuns {
                template,
                grant,
                path,
                why,
            } => {
                let way_out = if why.in_home() {
                    "grant a project folder instead (a folder of your own work, such as ~/src/app), \
                     or set \"writes_home\": true on the template to accept that risk"
                } else {
                    "grant a project folder of your own work instead"
                };
                let what = match grant.starts_with(crate::settings::PROJECT_PLACEHOLDER) {
                    true => "project",
                    false => "read-write grant",
                };
                write!(
                    f,
                    "{what} {:?} (template {template:?}, grant {grant:?}): no session may write \
                     there: {why}; {way_out}",
                    path.display().to_string()
                )
            }
            RequestError::GitRedirect { project, file } => write!(
                f,
                "project {:?}: {:?} sends git to another folder's repository data (git makes that \
                 file only for a linked worktree, under .git/worktrees; a session may have planted \
                 it): remove it to launch with the token",
                project.display().to_string(),
                file.display().to_string()
            ),
        }
    }
}

impl Error for RequestError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            RequestError::Invalid(e) => Some(e),
            RequestError::SessionLock { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Why a launch cannot be planned: the request as written ([`RequestError`]), or a template
/// grant that cannot be expanded while the project is checked against the grants.
#[derive(Debug)]
pub(crate) enum PlanError {
    /// The request, its project, or a project no grant shows.
    Request(RequestError),
    /// A template grant could not be expanded.
    Grant(crate::settings::grants::GrantError),
}

impl From<RequestError> for PlanError {
    fn from(e: RequestError) -> Self {
        PlanError::Request(e)
    }
}

impl From<crate::settings::grants::GrantError> for PlanError {
    fn from(e: crate::settings::grants::GrantError) -> Self {
        PlanError::Grant(e)
    }
}
