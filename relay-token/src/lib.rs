//! `relay-token`: hand a long-term Claude Code token to a sandboxed session on a pipe at fd 5.
//!
//! The token made by `claude setup-token` lives in a file (`claude_token_file`). At each launch
//! [`read_claude_token`] reads it with strict checks into a [`ClaudeToken`] (a `secrecy` type that
//! never reaches `Debug` or `Display`), [`TokenPipe`] writes the bytes into a pipe whose write end
//! is closed at once, and the child gets the read end at fd 5 with
//! `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5`. The token never rides in an environment or argv.
//!
//! ```no_run
//! use std::process::Command;
//! use relay_token::{read_claude_token, TokenPipe};
//!
//! let token = read_claude_token("/home/me/.config/claude-ltt/token".as_ref())?;
//! let pipe = TokenPipe::new(&token)?;
//! drop(token); // the bytes now live only in the pipe
//! let mut child = pipe.spawn(Command::new("claude").arg("auth").arg("status"))?;
//! child.wait()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Modules, one concern each: [`token`] (the secret type), [`path`] (the setting's value to a
//! path), [`read`] (the strict reader), [`pipe`] (the filled pipe), [`fds`] (descriptor placement
//! in a child, async-signal-safe), [`env`](mod@env) (the child's environment), [`settings`],
//! [`sandbox`] (bubblewrap and SBPL), [`redact`] (log lines), [`shim`] and [`host`] (the logic of
//! the two binaries).
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod digest;
pub mod env;
pub mod fds;
pub mod host;
pub mod net;
pub mod path;
pub mod pipe;
pub mod read;
pub mod redact;
pub mod sandbox;
pub mod settings;
pub mod shim;
pub mod sys;
pub mod token;
mod which;

pub use fds::{FdMap, TOKEN_FD};
pub use path::{claude_token_path, TokenPathError};
pub use pipe::{TokenPipe, TOKEN_FD_VAR};
pub use read::{read_claude_token, TokenFileError, TokenFileReason};
pub use token::ClaudeToken;
