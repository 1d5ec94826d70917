//! `relay-token`: hand a long-term Claude Code token to a sandboxed session on a pipe at fd 5.
//!
//! The token made by `claude setup-token` lives in a file (`claude_token_file`). At each launch
//! [`read_claude_token`] reads it with strict checks into a [`ClaudeToken`] (a `secrecy` type that
//! never reaches `Debug` or `Display`), [`TokenPipe`] writes the bytes into a pipe whose write end
//! is closed at once, and the child gets the read end at fd 5 with
//! `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5`. The token never rides in an environment or argv.
//!
//! ```no_run
//! use relay_token::{claude_token_path, read_claude_token, TokenPipe};
//! use std::process::Command;
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let path = claude_token_path("~/.config/claude-ltt/token")?.ok_or("no token file")?;
//!     let token = read_claude_token(&path)?; // strict, read afresh; errors name the path only
//!     let pipe = TokenPipe::new(&token)?; // pipe2(O_CLOEXEC), every byte written, write end closed
//!     drop(token); // zeroized: the bytes now live only in the pipe
//!
//!     // fd 5 + the variable; inherited credentials that would outrank them (ANTHROPIC_API_KEY,
//!     // CLAUDE_CODE_OAUTH_TOKEN, ...) are dropped, Claude's settings variables kept.
//!     let mut claude = Command::new("claude");
//!     claude.args(["auth", "status", "--json"]);
//!     let status = pipe.spawn(&mut claude)?.wait()?;
//!     std::process::exit(status.code().unwrap_or(1));
//! }
//! ```
//!
//! The rules the code relies on (the descriptor table, the read rules, the sandbox's mount
//! order, the shim's status protocol) are written down in the repository's
//! [DESIGN.md](https://github.com/relay-token/relay-token/blob/main/docs/DESIGN.md).
//!
//! # Features
//!
//! With default features the crate is the embedder's core and depends on `libc`, `secrecy` and
//! `zeroize` only: the secret type ([`ClaudeToken`]), the strict reader ([`read_claude_token`]),
//! the setting's value to a path ([`claude_token_path`]), the filled pipe ([`TokenPipe`], also
//! for a `tokio` launcher through [`TokenPipe::attach`]), descriptor placement ([`FdMap`]), the
//! child's environment ([`ChildEnv`]) and log-line redaction ([`Redactor`]). It builds for Linux
//! and macOS. The programs' logic sits behind features:
//!
//! | feature | modules | brings |
//! |---|---|---|
//! | `sandbox` | `sandbox` (the profile, its bwrap and SBPL renderings) | nothing |
//! | `net` | `net` (what a template may reach: the allow-list, an API gateway) | `sandbox`, serde |
//!
//! Two small modules hold what a launcher built on the crate needs to say each rule the crate's
//! way: [`sys`] (the system-call wrappers) and, with `sandbox`, `which` (the one `PATH`
//! lookup). `relay-host` and `relay-shim` are built on this crate; their logic (settings,
//! requests, the launch, the shim, the allow-list's proxy) lives in their own crates' libraries,
//! not here.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod env;
mod fds;
mod path;
mod pipe;
mod read;
mod redact;
// The system calls relay's own programs (relay-host, relay-shim) make through this crate: public
// for them, not part of the embedder's documented surface.
#[doc(hidden)]
pub mod sys;
mod token;

#[cfg(feature = "net")]
pub mod net;
#[cfg(feature = "sandbox")]
pub mod sandbox;
// How relay's programs find a program on `PATH`: theirs, not the embedder's documented surface.
#[cfg(feature = "sandbox")]
#[doc(hidden)]
pub mod which;

pub use env::ChildEnv;
pub use fds::{open_fds, spawn_lock, FdMap, PlaceError, MAX_PASS_FDS, TOKEN_FD};
pub use path::{
    claude_token_path, claude_token_path_in, clean_path, TokenPathError, TokenPathReason,
};
pub use pipe::{spawn_with_token_fd, AttachedToken, TokenPipe, TOKEN_FD_VAR};
pub use read::{
    read_claude_token, read_private_claude_token, token_file_exposure, token_shape, TokenFileError,
    TokenFileReason, MAX_TOKEN_BYTES,
};
pub use redact::{Redactor, MASK};
pub use token::ClaudeToken;
