//! `relay-shim [--pass-token] [--status-fd N] [--session-id ID] -- PROGRAM [ARGS...]`
//!
//! Runs PROGRAM with fds 0, 1, 2 and, with `--pass-token`, its own fd 5 (unread); reports on the
//! status descriptor and forwards signals. All logic lives in `relay_token::shim`.
fn main() {
    // SAFETY: called once, from main; this process owns the fd 5 and status fd it inherited, and
    // nothing else in it uses them.
    let code = unsafe { relay_token::shim::run_cli(std::env::args_os().skip(1)) };
    std::process::exit(code);
}
