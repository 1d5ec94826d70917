//! The logic of `relay-host`: settings, templates, launches, status and the logs, the allow-list's
//! proxy and forwarder, and the command line. The binary is [`run_main`] and nothing else.
//!
//! The program is three programs by the name it is started under, as one binary:
//!
//! | started as | runs |
//! |---|---|
//! | `relay-host` | the command line (parsed here, then one function of [`cli`] per command) |
//! | `relay-shim`, or `relay-host __shim` | [`relay_shim::run_cli`], the shim's library, in-process |
//! | `relay-net-forward` | [`net::forward::run`], the allow-list's in-sandbox forwarder |
//!
//! Stand-in mode's proxy is not among them: `relay-stand-in` is a program of its own
//! ([`stand_in::program::run`], Linux), so that relay-host links none of its TLS code.
//!
//! Built on [`relay_token`] (the token, its pipe, the sandbox profile, the allow-list) and
//! [`relay_shim`] (the shim, its exit codes, the one signal forwarder).
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

use std::path::Path;

use crate::cli::{demo, dispatch};

/// `println!` for a command's report: through [`human::write_out`], so a closed stdout never
/// panics; evaluates to the write's `io::Result`.
macro_rules! try_outln {
    ($($arg:tt)*) => {
        $crate::human::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// [`try_outln!`] whose failure is left to [`human::stdout_error`] (the command's exit code).
macro_rules! outln {
    ($($arg:tt)*) => {{
        let _ = try_outln!($($arg)*);
    }};
}

/// `eprintln!` through [`human::write_err`]: a closed stderr never panics.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::human::write_err(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub mod cli;
mod harden;
mod host;
pub mod human;
pub mod launch;
pub mod net;
pub mod reach;
pub mod settings;
#[cfg(target_os = "linux")]
pub mod stand_in;
pub(crate) mod state;
mod userns;

pub(crate) use harden::harden_process;
pub use host::{exit_code_of, Host, ShimNotFound};

/// The whole of the `relay-host` program: `argv` is its command line, program name first. Picks
/// the program by the name it was started under (the table above) and returns its exit code.
///
/// # Safety
///
/// Call it once, from `main`, before anything else in the process runs: started as the shim,
/// the process owns the descriptors it inherited (the token at 5, the status descriptor, the
/// identity secret at 3) and nothing else in it may use those numbers.
///
/// ```no_run
/// // The whole of relay-host's main:
/// // SAFETY: called once, from main, before anything else runs.
/// let code = unsafe { relay_host::run_main(std::env::args_os().collect()) };
/// std::process::exit(code);
/// ```
pub unsafe fn run_main(argv: Vec<std::ffi::OsString>) -> i32 {
    let called = argv.first().map(Path::new).and_then(Path::file_name);
    let rest = || argv.iter().skip(1).cloned();
    if called.is_some_and(|n| n == net::FORWARDER_NAME) {
        // Inside an allow-list sandbox: the forwarder between 127.0.0.1 and the host's proxy.
        return net::forward::run(rest().collect());
    }
    if called.is_some_and(|n| n == "relay-shim") {
        // SAFETY: the caller's contract: this process owns what it inherited.
        return unsafe { relay_shim::run_cli(rest()) };
    }
    match argv.get(1).and_then(|a| a.to_str()) {
        // SAFETY: as above.
        Some("__shim") => unsafe { relay_shim::run_cli(rest().skip(1)) },
        Some(demo::PROBE_COMMAND) => demo::probe(rest().skip(1).collect()),
        _ => dispatch::main(argv),
    }
}
