//! `relay-runtime`: the code of the `relay-host` and `relay-shim` programs, built on
//! [`relay_token`]. It is not published and not a semver surface: an embedder uses
//! `relay-token` (the token, its pipe, the sandbox profile, the allow-list) and writes its own
//! launcher; this crate is how relay's own launcher is written.
//!
//! | feature | modules |
//! |---|---|
//! | `shim` | [`shim`] (`relay-shim`'s logic), [`exit`], [`signals`] (the one signal forwarder) |
//! | `host` | [`settings`], [`host`] (`relay-host`'s logic), [`net`] (the allow-list's proxy and forwarder); brings `shim` |
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "host")]
mod digest;
#[cfg(feature = "shim")]
pub mod exit;
#[cfg(feature = "host")]
pub mod host;
#[cfg(feature = "host")]
pub mod net;
#[cfg(feature = "host")]
pub mod settings;
#[cfg(feature = "shim")]
pub mod shim;
#[cfg(feature = "shim")]
pub mod signals;

// The core's items and internals under the paths this crate's modules were written with.
#[allow(unused_imports)]
use relay_token::__runtime::{env, fds, path, pipe, read, redact, sys, token, which};
#[allow(unused_imports)]
use relay_token::{
    read_claude_token, sandbox, ChildEnv, ClaudeToken, FdMap, Redactor, TokenFileError,
    TokenPathError, TokenPipe, TOKEN_FD, TOKEN_FD_VAR,
};
