//! The token of one launch: the file every sandboxed launch denies while the setting is set,
//! and the token itself, which only a sandboxed, local Claude launch carries.

use std::path::{Path, PathBuf};

use crate::launch::plan::error::RequestError;
use crate::launch::plan::LaunchPlan;
use crate::launch::prepare::error::{PrepareError, TokenError};
use crate::settings::Settings;
use crate::state::State;
use crate::{reach, Host};
use relay_token::claude_token_path_in;
use relay_token::Redactor;
use relay_token::{read_claude_token, sandbox, ClaudeToken};

/// The token file a launch denies, and the token it carries.
pub(crate) struct LaunchToken {
    path: Option<PathBuf>,
    token: Option<ClaudeToken>,
}

impl LaunchToken {
    /// Resolves and reads the token. Only a sandboxed, local Claude launch carries it, but every
    /// sandboxed launch denies the file while the setting is set. Any error refuses the launch
    /// before anything is written; so does a request that could send the token elsewhere. The
    /// state's redactor learns the token.
    pub(crate) fn read(
        host: &Host,
        state: &State,
        settings: &Settings,
        v: &LaunchPlan,
    ) -> Result<LaunchToken, PrepareError> {
        let path = match v.sandboxed() {
            true => claude_token_path_in(&settings.claude_token_file, Some(&host.home))
                .map_err(TokenError::Path)?,
            false => None,
        };
        let Some(p) = path.as_deref().filter(|_| v.claude()) else {
            return Ok(LaunchToken { path, token: None });
        };
        check_request(v)?;
        let t = read_usable(p)?;
        state.set_redactor(Redactor::new(Some(&t)));
        Ok(LaunchToken {
            path,
            token: Some(t),
        })
    }

    /// True when the launch carries the token.
    pub(crate) fn carried(&self) -> bool {
        self.token.is_some()
    }

    /// The token file the sandbox denies (when the setting names one), and the token, which
    /// moves on to the network step: it hands it over, or gives it to stand-in mode's proxy.
    pub(crate) fn into_parts(self) -> (Option<PathBuf>, Option<ClaudeToken>) {
        (self.path, self.token)
    }
}

/// The token of the file at `path` when a launch would hand it over: it reads as a token, and
/// neither others may read it nor another user owns it. The one verdict on a token file: a
/// launch, `status` and `token check` all take it from here.
pub(crate) fn read_usable(path: &Path) -> Result<ClaudeToken, TokenError> {
    let t = read_claude_token(path).map_err(TokenError::Read)?;
    match reach::token_file_problem(path) {
        Some(e) => Err(TokenError::Exposed(e)),
        None => Ok(t),
    }
}

/// Refuses a token launch whose request could send the token elsewhere: what it adds
/// ([`LaunchPlan::check_token_request`]), or a project whose git data another folder's repository holds.
fn check_request(v: &LaunchPlan) -> Result<(), PrepareError> {
    v.check_token_request()?;
    let project = v.project();
    let redirect = project.and_then(sandbox::git_guard::common_dir_redirect);
    // A `commondir` holding `.` (what Claude Code's own tool sandbox leaves) redirects nothing:
    // removed, not refused.
    if let Some(file) = redirect.filter(|f| !crate::state::leftovers::clear_commondir(f)) {
        let project = project.unwrap_or(&file).to_path_buf();
        return Err(RequestError::GitRedirect { project, file }.into());
    }
    Ok(())
}
