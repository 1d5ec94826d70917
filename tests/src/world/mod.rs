//! The one world every end-to-end test stands in: a throwaway installation's folders
//! ([`crate::fixture::Folders`]), its token (written, remembered, checked for by hash), its
//! `settings.json`, how it runs `relay-host` (as root or as another user, a cleared
//! environment, under a deadline), a script in place of the agent in a token session, and the
//! token assertions (no token on disk, the logs included, or in an output; what fd 5 carried,
//! by hash).
//!
//! [`World::builder`] makes the variations: the layout, which token (a fake one, a Claude-shaped
//! one, none yet), the settings to start with (none, or a `claude-code` template running the
//! fake agent: [`World::agent`]), the user `relay-host` runs as. Fixtures with more to them (the
//! real Claude Code's [`crate::agent::Setup`], an install layout, an attack harness) hold a
//! world rather than folders of their own.

mod base;
mod run;
mod script;
mod tokens;

pub use base::{Builder, Token, World, NOBODY, SCRIPT_TIMEOUT, SETTING, TIMEOUT, VAR};
pub use run::{finish, Running};
pub use script::{ScriptAt, TokenScript};
pub use tokens::{assert_got_stand_in, assert_got_token, assert_no_token_fd};
