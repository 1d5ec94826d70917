//! The `relay-host` command line: its clap definitions (`args`), the dispatch of a parsed
//! command (`dispatch`), and one module per command family: launches and logs (`commands`),
//! `status` ([`status`], `checks`), `templates` ([`templates_cmd`]), `token import` and
//! `token check` (`token_file`, `token_online` for `--online`, `settings_edit`, `tty`), `demo` (`demo`), the resume
//! hint (`resume`) and the generated completions and man pages (`docs`).

pub(crate) mod args;
pub(crate) mod checks;
pub(crate) mod commands;
pub(crate) mod demo;
pub(crate) mod dispatch;
pub(crate) mod docs;
pub(crate) mod ps;
pub(crate) mod resume;
pub(crate) mod settings_edit;
pub mod status;
pub mod templates_cmd;
pub(crate) mod token_file;
#[cfg(target_os = "linux")]
pub(crate) mod token_online;
pub(crate) mod tty;

pub(crate) use commands::{gc, launch_file, print_log, run, token_check, token_import};
