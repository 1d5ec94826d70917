//! `relay-net-forward`: the allow-list's forwarder inside a sandbox, as a program of its own
//! (a few hundred KiB, started in every allow-list session) instead of all of `relay-host`
//! started under that name. All of it is [`relay_host::net::forward::run`].
fn main() {
    let code = relay_host::net::forward::run(std::env::args_os().skip(1).collect());
    std::process::exit(code);
}
