//! `relay-host demo`. (Under construction.)

use std::ffi::OsString;

/// Runs the demo; returns the exit code.
///
/// ```no_run
/// relay_token::host::demo::run(false);
/// ```
pub fn run(_json: bool) -> i32 {
    eprintln!("relay-host demo: not yet implemented");
    70
}

/// The demo's probe, run inside the sandbox.
///
/// ```no_run
/// relay_token::host::demo::probe(Vec::new());
/// ```
pub fn probe(_args: Vec<OsString>) -> i32 {
    70
}
