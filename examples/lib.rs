//! Examples of embedding `relay-token`; the code is in the three example targets.
//!
//! - `ltt` (`examples/ltt.rs`): the operator's "007" launcher on the library. Reads
//!   `~/.config/claude-ltt/token` (or `--token-file PATH`; private, as relay-host requires),
//!   becomes `claude` with the token on fd 5 and the environment less the credentials that would
//!   outrank it (Claude's settings variables kept), a drop-in for the shell script
//!   (`cargo install --locked --path examples --example ltt`):
//!   `cargo run --example ltt -- [--token-file PATH] [--claude PROGRAM] [--] [CLAUDE ARGS...]`.
//! - `embed` (`examples/embed.rs`): the smallest correct embedding, about thirty lines:
//!   `cargo run --example embed -- TOKEN_FILE PROGRAM [ARGS...]`.
//! - `tokio` (`examples/tokio.rs`): the same through `tokio::process::Command`, prepared with
//!   `TokenPipe::attach`: `cargo run --example tokio -- TOKEN_FILE PROGRAM [ARGS...]`.
//!
//! All three hand the token over on a pipe and never in an environment or argv. The limit: the program
//! that receives the token, and every tool it runs, can read it.
