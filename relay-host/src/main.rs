//! `relay-host`: launches Claude Code sessions that start logged in with a token handed on fd 5.
//! All logic lives in `relay_token::host`; this binary only passes its arguments along.
fn main() {
    std::process::exit(relay_token::host::main(std::env::args_os().collect()));
}
