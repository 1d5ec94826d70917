//! `relay-shim [--pass-token] [--identity] [--pty] [--sandbox-profile PATH] [--status-fd N]
//! [--session-id ID] -- PROGRAM [ARGS...]`
//!
//! Runs PROGRAM with fds 0, 1, 2 and, with `--pass-token`, its own fd 5 (unread); with
//! `--identity` it first proves the launch with the secret on fd 3 (the Hello on the bridge
//! socket); reports on the status descriptor and forwards signals. All logic lives in
//! the `relay_shim` library.
fn main() {
    // SAFETY: called once, from main; this process owns the fds 3 and 5 and the status fd it
    // inherited, and nothing else in it uses them.
    let code = unsafe { relay_shim::run_cli(std::env::args_os().skip(1)) };
    std::process::exit(code);
}
