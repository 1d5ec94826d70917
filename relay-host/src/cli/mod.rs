//! The `relay-host` command line: its clap definitions (`args`), the dispatch of a parsed
//! command (`dispatch`), and one module per command family: launches and logs ([`commands`]),
//! `status` ([`status`], [`checks`]), `templates` ([`templates_cmd`]), `token import` and
//! `token check` ([`token_file`], `settings_edit`, [`tty`]), `demo` ([`demo`]), the resume
//! hint ([`resume`]) and the generated completions and man pages (`docs`).

pub(crate) mod args;
pub mod checks;
pub mod commands;
pub mod demo;
pub(crate) mod dispatch;
pub(crate) mod docs;
pub mod resume;
pub(crate) mod settings_edit;
pub mod status;
pub mod templates_cmd;
pub mod token_file;
pub mod tty;

pub use commands::*;
