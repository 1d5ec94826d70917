//! `relay-host`: launches Claude Code sessions that start logged in with a token handed on fd 5.
//! The command line is parsed here ([`args`]) and handed to `relay_runtime::host` ([`dispatch`]);
//! started under the name `relay-shim` (or as `relay-host __shim`), it acts as the shim.

mod args;
mod dispatch;
mod docs;

use std::ffi::OsString;
use std::path::Path;

fn main() {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let called = argv.first().map(Path::new).and_then(Path::file_name);
    let rest = || argv.iter().skip(1).cloned();
    let code = if called.is_some_and(|n| n == relay_token::net::FORWARDER_NAME) {
        // Inside an allow-list sandbox: the forwarder between 127.0.0.1 and the host's proxy.
        relay_runtime::net::forward::run(rest().collect())
    } else if called.is_some_and(|n| n == "relay-shim") {
        // SAFETY: called once, from the entry point, before anything else runs: this process
        // owns the fd 5 and status fd it inherited, and nothing else in it uses them.
        unsafe { relay_runtime::shim::run_cli(rest()) }
    } else {
        match argv.get(1).and_then(|a| a.to_str()) {
            // SAFETY: as above.
            Some("__shim") => unsafe { relay_runtime::shim::run_cli(rest().skip(1)) },
            Some(relay_runtime::host::demo::PROBE_COMMAND) => {
                relay_runtime::host::demo::probe(rest().skip(1).collect())
            }
            _ => dispatch::main(argv),
        }
    };
    std::process::exit(code);
}
