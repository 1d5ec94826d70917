//! What a launch prepares before its network and sandbox: the token (`token`), the programs it
//! runs (`programs`), its session folder (`session_folder`) with the write-deny placeholders'
//! lock (`placeholders`), and Claude's own configuration folder (`claude_config`) and the
//! configuration a token session's tools read (`own_config`).

pub(crate) mod claude_config;
pub(crate) mod error;
pub(crate) mod own_config;
pub(crate) mod programs;
pub(crate) mod session_folder;
pub(crate) mod token;

use std::path::{Path, PathBuf};

use crate::launch::plan::LaunchPlan;
use programs::Programs;
use session_folder::SessionPaths;
use token::LaunchToken;

/// What the prepare step made for a launch plan: its token read, its programs found, its
/// session folder made (owned by the launch's guard) and its Claude config folder.
pub(crate) struct Prepared<'p> {
    /// The launch plan this was prepared for.
    pub v: &'p LaunchPlan,
    /// The token file it denies and the token it carries.
    pub token: LaunchToken,
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
        self.token.carried()
    }

    /// What fd 5 carries: `stand_in` (a stand-in; the real token went to `relay-stand-in`),
    /// `pipe` (the real token) or `none`: the audit row's, the session record's and `ps`'s word.
    pub(crate) fn token_mode(&self) -> &'static str {
        match (self.carries_token(), self.programs.stand_in.is_some()) {
            (false, _) => "none",
            (true, true) => crate::settings::TokenMode::StandIn.word(),
            (true, false) => crate::settings::TokenMode::Pipe.word(),
        }
    }

    /// The project folder (its real path), if any.
    pub(crate) fn project(&self) -> Option<&Path> {
        self.v.project()
    }
}
