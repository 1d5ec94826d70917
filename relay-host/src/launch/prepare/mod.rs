//! What a launch prepares before its network and sandbox: the token (`token`), the session's
//! token mode decided once (`token_mode`), the programs it runs (`programs`), its session folder
//! (`session_folder`), and Claude's own configuration folder (`claude_config`). [`token()`] reads
//! the token; [`prepare`] makes the rest.

pub(crate) mod claude_config;
pub(crate) mod error;
pub(crate) mod programs;
pub(crate) mod session_folder;
pub(crate) mod token;
pub(crate) mod token_mode;

use std::path::{Path, PathBuf};

use crate::launch::context::Launch;
use crate::launch::guard::Guard;
use crate::launch::plan::LaunchPlan;
use crate::launch::spawn_error::spawn_err;
use error::PrepareError;
use programs::Programs;
use relay_token::ClaudeToken;
use session_folder::SessionPaths;
use token::LaunchToken;
use token_mode::TokenMode;

/// What the prepare step made for a launch plan: its token mode decided, its programs found,
/// its session folder made (owned by the launch's guard) and its Claude config folder. The
/// token itself is not here: it moves on from [`prepare`] to the network step.
pub(crate) struct Prepared<'p> {
    /// The launch plan this was prepared for.
    pub v: &'p LaunchPlan,
    /// The token file the sandbox denies, when the setting names one.
    pub token_file: Option<PathBuf>,
    /// What fd 5 carries.
    pub token_mode: TokenMode,
    /// The programs it runs.
    pub programs: Programs,
    /// Where its session folder is.
    pub folder: SessionPaths,
    /// The launch's own Claude config folder ([`crate::launch::prepare::claude_config`]).
    pub claude_config: PathBuf,
}

impl Prepared<'_> {
    /// True when the launch carries the token.
    pub(crate) fn carries_token(&self) -> bool {
        self.token_mode.carries_token()
    }

    /// The project folder (its real path), if any.
    pub(crate) fn project(&self) -> Option<&Path> {
        self.v.project()
    }
}

/// The token of a launch of `v` resolved and read ([`LaunchToken::read`]), and said to a person.
pub(crate) fn token(cx: &Launch, v: &LaunchPlan) -> Result<LaunchToken, PrepareError> {
    let token = LaunchToken::read(cx.host, &cx.state, &cx.settings, v)?;
    crate::human::note_token(v.claude(), v.sandboxed(), token.carried());
    Ok(token)
}

/// The programs found (the token mode decided), the session folder made (each folder made and
/// its lock go to the launch's `guard`) and marked kept, and the Claude config seeded. Returns
/// what was prepared and the `token`, which moves on.
pub(crate) fn prepare<'p>(
    cx: &Launch,
    v: &'p LaunchPlan,
    token: LaunchToken,
    guard: &mut Guard,
) -> Result<(Prepared<'p>, Option<ClaudeToken>), PrepareError> {
    let (host, state, settings) = (cx.host, &cx.state, &cx.settings);
    let carries_token = token.carried();
    let session_dir = state.session_dir(v.session_id());
    let claude_config = claude_config::launch_dir(&session_dir);
    let (programs, token_mode) =
        programs::resolve(host, settings, v, &claude_config, carries_token)?;
    let folder = session_folder::create(&session_dir, &state.claude_config_dir(), guard)?;
    if v.keep() {
        let _ = state.mark_kept(v.session_id());
    }
    seed_claude_config(cx, v, &claude_config, carries_token)?;
    let (token_file, token) = token.into_parts();
    let prepared = Prepared {
        v,
        token_file,
        token_mode,
        programs,
        folder,
        claude_config,
    };
    Ok((prepared, token))
}

/// The launch's own Claude config folder ([`claude_config`]), seeded from the operator's
/// `claude-seed/`, relay's defaults and the persistent folder's named state. Onboarding is
/// answered for a Claude launch that carries the token (the login it would ask for is on fd 5)
/// and behind a gateway (its checks go to Anthropic, which the allow-list does not reach).
fn seed_claude_config(
    cx: &Launch,
    v: &LaunchPlan,
    launch_dir: &Path,
    carries_token: bool,
) -> Result<(), PrepareError> {
    let seed = claude_config::Seed {
        config_dir: &cx.host.config_dir,
        persistent: &cx.state.claude_config_dir(),
        onboard: (v.claude() && carries_token) || v.template().api_base_url.is_some(),
        resume: v.resumes(),
        trust: v.project().filter(|_| v.template().trusts_project()),
        project: v.project(),
    };
    let what = format!("Claude config folder {}", launch_dir.display());
    Ok(claude_config::seed(launch_dir, &seed).map_err(spawn_err(what))?)
}
