//! The logic of `relay-shim`. (Under construction.)

use std::ffi::OsString;

/// `relay-shim`'s entry point; returns the exit code.
///
/// ```no_run
/// relay_token::shim::main(Vec::new());
/// ```
pub fn main(_args: Vec<OsString>) -> i32 {
    70
}
