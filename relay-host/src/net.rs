//! The network allow-list's moving parts: the host-side [`proxy`] that checks each destination
//! and the in-sandbox [`forward`]er that bridges a session's loopback to it. What a template may
//! reach ([`Network`], [`AllowList`]) is `relay_token::net`'s, re-exported here.

pub mod forward;
pub mod proxy;

pub use relay_token::net::*;

/// Copies both ways between a Unix-socket connection and a TCP one until each side has ended,
/// closing each write side as its reader ends: the proxy (session to upstream) and the
/// in-sandbox forwarder (program to the host's proxy) both bridge this way.
pub(crate) fn splice(
    unix: std::os::unix::net::UnixStream,
    tcp: std::net::TcpStream,
) -> std::io::Result<()> {
    use std::net::Shutdown;
    let (mut from_unix, mut to_tcp) = (unix.try_clone()?, tcp.try_clone()?);
    let up = std::thread::Builder::new()
        .name("relay-net-splice".into())
        .stack_size(proxy::THREAD_STACK)
        .spawn(move || {
            let _ = std::io::copy(&mut from_unix, &mut to_tcp);
            let _ = to_tcp.shutdown(Shutdown::Write);
        })?;
    let (mut from_tcp, mut to_unix) = (tcp, unix);
    let _ = std::io::copy(&mut from_tcp, &mut to_unix);
    let _ = to_unix.shutdown(Shutdown::Write);
    let _ = up.join();
    Ok(())
}
