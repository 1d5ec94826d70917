//! What a launch prepares before its network and sandbox: the token (`token`), the programs it
//! runs (`programs`), its session folder (`session_folder`) with the write-deny placeholders'
//! lock (`placeholders`), and Claude's own configuration folder ([`claude_config`]) and the
//! configuration a token session's tools read (`own_config`).

pub mod claude_config;
pub mod error;
pub(crate) mod own_config;
pub(crate) mod programs;
pub(crate) mod session_folder;
pub(crate) mod token;

use std::path::{Path, PathBuf};

use crate::launch::plan::request::LaunchPlan;
use programs::Programs;
use session_folder::SessionFolder;
use token::LaunchToken;

/// A launch plan with its token read, its programs found and its session folder made.
pub(crate) struct Prepared {
    /// The launch plan: the request resolved against the settings.
    pub v: LaunchPlan,
    /// The token file it denies and the token it carries.
    pub token: LaunchToken,
    /// The programs it runs.
    pub programs: Programs,
    /// Its session folder, locked.
    pub folder: SessionFolder,
    /// The launch's own Claude config folder ([`crate::launch::prepare::claude_config`]).
    pub claude_config: PathBuf,
}

impl Prepared {
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
        self.v.project.as_deref()
    }
}
