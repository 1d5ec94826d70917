//! `relay-stand-in`: a stand-in session's proxy, started by relay-host for that session only,
//! so that stand-in mode's TLS code is in this program and not in every relay-host. All of it
//! is [`relay_host::stand_in::main`]: the proxy, or with `--check` the one request of `relay-host
//! token check --online`.
#[cfg(target_os = "linux")]
fn main() {
    // SAFETY: called once, from main, before any thread starts; relay-host hands this process
    // fds 3 to 6, and nothing else in it uses them.
    let code = unsafe { relay_host::stand_in::main(std::env::args_os().skip(1).collect()) };
    std::process::exit(code);
}

/// Stand-in mode is Linux only.
#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("relay-stand-in: stand-in mode is Linux only");
    std::process::exit(78);
}
