//! `relay-host`: launches Claude Code sessions that start logged in with a token handed on fd 5.
//! All of it is the `relay_host` library's [`relay_host::run_main`]; started under the name
//! `relay-shim` (or as `relay-host __shim`) it acts as the shim, whose logic is `relay_shim`'s.
fn main() {
    // SAFETY: called once, from main, before anything else runs: this process owns the
    // descriptors it inherited, and nothing else in it uses them.
    let code = unsafe { relay_host::run_main(std::env::args_os().collect()) };
    std::process::exit(code);
}
