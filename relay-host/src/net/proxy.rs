//! The host side of a session's network: a proxy on a Unix socket that takes `CONNECT
//! host:port` and plain `http://` requests in absolute form, checks each destination against the
//! session's [`AllowList`], resolves a name once and connects to the address it checked.
//! Refused: `403` and a [`Denied`] report (the host and port only, never a header or a body).
//! It ends when the [`Proxy`] is dropped: the listener is closed and its socket file removed.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::allow::{normal_host, Host};
use super::{AllowList, Intercept};

/// The longest request head read (request line and headers).
const MAX_HEAD: usize = 64 * 1024;
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one connection attempt to an upstream address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; more are answered `503`.
const MAX_CONNECTIONS: usize = 256;
/// The stack of each proxy thread: they copy through an 8 KiB buffer and parse one head, so a
/// small stack keeps the host's footprint (and a scan of its memory) small.
pub(super) const THREAD_STACK: usize = 128 * 1024;

/// A refused destination, as reported to the caller's hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Denied {
    /// The host as the request named it (normalised: lower case, no trailing dot).
    pub(crate) host: String,
    /// The port.
    pub(crate) port: u16,
    /// Why: `not on the allow-list`, or `resolves only to local addresses`.
    pub(crate) reason: &'static str,
}

/// Called for each refused destination.
pub(crate) type OnDeny = Box<dyn Fn(&Denied) + Send + Sync>;

/// A running proxy. Dropping it stops it: no new connection is taken, the socket file is
/// removed.
#[derive(Debug)]
pub(crate) struct Proxy {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    intercept: Option<Intercept>,
}

struct Ctx {
    list: AllowList,
    on_deny: OnDeny,
    live: AtomicUsize,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    intercept: Option<Intercept>,
}

impl Proxy {
    /// Binds `path` (which must not exist; its folder should be the host's only) and serves in
    /// a thread of this process. The listener is close-on-exec: no child inherits it. For a
    /// stand-in session (`intercept`), a `CONNECT` to one of its API hosts is intercepted
    /// ([`crate::stand_in`]); dropping the proxy ends the stand-in's swap.
    pub(crate) fn start_with(
        path: &Path,
        list: AllowList,
        on_deny: OnDeny,
        intercept: Option<Intercept>,
    ) -> io::Result<Proxy> {
        let listener = UnixListener::bind(path)?;
        let stop = Arc::new(AtomicBool::new(false));
        // Off Linux there is no interception: the type is uninhabited (and `Copy`).
        #[cfg_attr(not(target_os = "linux"), allow(clippy::clone_on_copy))]
        let shared = intercept.clone();
        let ctx = Arc::new(Ctx {
            list,
            on_deny,
            live: AtomicUsize::new(0),
            intercept: shared,
        });
        let stop_seen = Arc::clone(&stop);
        let thread = thread::Builder::new()
            .name("relay-proxy".into())
            .stack_size(THREAD_STACK)
            .spawn(move || accept_loop(listener, ctx, stop_seen))?;
        Ok(Proxy {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
            intercept,
        })
    }
}

impl Proxy {
    /// Stops accepting and waits for the accepting thread; the socket is removed. Done once
    /// (dropping a stopped proxy does nothing more).
    pub fn stop(&mut self) {
        if self.stop.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wake the accept: it sees the flag and returns, closing the listener.
        let woke = UnixStream::connect(&self.path).is_ok();
        if let (true, Some(t)) = (woke, self.thread.take()) {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
        #[cfg(target_os = "linux")]
        if let Some(i) = &self.intercept {
            i.end();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listener: UnixListener, ctx: Arc<Ctx>, stop: Arc<AtomicBool>) {
    // Wait in poll(2), not in accept(2): a blocked accept holds the lowest free descriptor
    // number reserved, and the launch's descriptor placement, running meanwhile in another
    // thread, would find that number neither free nor open.
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    loop {
        let mut pfd = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid pollfd for the duration of the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, -1) };
        if stop.load(Ordering::SeqCst) {
            return;
        }
        if rc <= 0 {
            continue;
        }
        let Ok((client, _)) = listener.accept() else {
            continue;
        };
        if client.set_nonblocking(false).is_err() {
            continue;
        }
        let ctx = Arc::clone(&ctx);
        if ctx.live.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            ctx.live.fetch_sub(1, Ordering::SeqCst);
            let _ = reply(&client, 503, "too many connections");
            continue;
        }
        let count = Arc::clone(&ctx);
        let spawned = thread::Builder::new()
            .name("relay-proxy-conn".into())
            .stack_size(THREAD_STACK)
            .spawn(move || {
                let _ = serve(client, &ctx);
                ctx.live.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            // The connection went with the closure, unserved.
            count.live.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// What a request asks for.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    connect: bool,
    host: String,
    port: u16,
    /// For `http://`: the head to send upstream (origin-form, `Connection: close`, the one
    /// `Host` the checked one).
    head: Vec<u8>,
    /// For `http://`: the length of the request's body (`Content-Length`, else none).
    body_len: u64,
}

fn serve(mut client: UnixStream, ctx: &Ctx) -> io::Result<()> {
    client.set_read_timeout(Some(HEAD_TIMEOUT))?;
    let (head, rest) = match read_head(&mut client)? {
        Some(x) => x,
        None => return reply(&client, 400, "no request head"),
    };
    let target = match parse_head(&head) {
        Ok(t) => t,
        Err(why) => return reply(&client, 400, why),
    };
    let Some(host) = normal_host(&target.host) else {
        return reply(&client, 400, "not a host name or address");
    };
    let default_port = if target.connect { 443 } else { 80 };
    let addrs = if ctx.list.allows_host(&host, target.port, default_port) {
        resolve(&host, target.port, &ctx.list)
    } else {
        Err("not on the allow-list")
    };
    let addrs = match addrs {
        Ok(a) => a,
        Err(reason) if reason == UNRESOLVED => return reply(&client, 502, reason),
        Err(reason) => {
            (ctx.on_deny)(&Denied {
                host: host.to_string(),
                port: target.port,
                reason,
            });
            return reply(
                &client,
                403,
                &refusal(&host.to_string(), target.port, reason),
            );
        }
    };
    let Some(mut upstream) = addrs
        .iter()
        .find_map(|a| TcpStream::connect_timeout(a, CONNECT_TIMEOUT).ok())
    else {
        return reply(&client, 502, "cannot connect");
    };
    client.set_read_timeout(None)?;
    if target.connect {
        client.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")?;
        #[cfg(target_os = "linux")]
        if let Some(i) = (ctx.intercept.as_ref()).filter(|i| i.intercepts(&host, target.port)) {
            return i.serve(client, upstream, &host, target.port, &rest);
        }
        upstream.write_all(&rest)?;
        return super::splice(client, upstream);
    }
    one_request(client, upstream, &target, &rest)
}

/// A plain `http://` request: its checked head, exactly its body, then the answer back. Bytes
/// after the body (a second request pipelined behind the first) are never sent: they would
/// reach the upstream unchecked.
fn one_request(
    mut client: UnixStream,
    mut upstream: TcpStream,
    target: &Target,
    rest: &[u8],
) -> io::Result<()> {
    if rest.len() as u64 > target.body_len {
        return reply(&client, 400, "one request per connection");
    }
    upstream.write_all(&target.head)?;
    upstream.write_all(rest)?;
    let more = target.body_len - rest.len() as u64;
    let sent = io::copy(&mut (&mut client).take(more), &mut upstream)?;
    if sent < more {
        return Ok(());
    }
    let _ = upstream.shutdown(Shutdown::Write);
    let _ = io::copy(&mut upstream, &mut client);
    let _ = client.shutdown(Shutdown::Write);
    Ok(())
}

const UNRESOLVED: &str = "does not resolve";

/// The addresses to connect to: an address as given; a name resolved once, less every local
/// address (loopback, link-local, unspecified, multicast) that is not listed as an address.
fn resolve(host: &Host, port: u16, list: &AllowList) -> Result<Vec<SocketAddr>, &'static str> {
    match host {
        Host::Ip(ip) => Ok(vec![SocketAddr::new(*ip, port)]),
        Host::Name(name) => {
            let all: Vec<SocketAddr> = (name.as_str(), port)
                .to_socket_addrs()
                .map_err(|_| UNRESOLVED)?
                .collect();
            let ok: Vec<SocketAddr> = all
                .into_iter()
                .filter(|a| !is_local(a.ip()) || list.lists_ip(a.ip()))
                .collect();
            if ok.is_empty() {
                Err("resolves only to local addresses")
            } else {
                Ok(ok)
            }
        }
        _ => Err("is neither a name nor an address"),
    }
}

fn is_local(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(a) => {
            a.is_loopback()
                || a.is_unspecified()
                || a.is_link_local()
                || a.is_multicast()
                || a.is_broadcast()
        }
        IpAddr::V6(a) => {
            a.is_loopback()
                || a.is_unspecified()
                || a.is_multicast()
                || (a.segments()[0] & 0xffc0) == 0xfe80
        }
    }
}

/// Reads up to the end of the head (`\r\n\r\n`); returns the head and what came after it.
fn read_head(client: &mut UnixStream) -> io::Result<Option<(Vec<u8>, Vec<u8>)>> {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = find(&buf[from..], b"\r\n\r\n") {
            let end = from + i + 4;
            let rest = buf.split_off(end);
            return Ok(Some((buf, rest)));
        }
        if buf.len() > MAX_HEAD {
            return Ok(None);
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Headers one request head may hold.
const MAX_HEADERS: usize = 100;

/// The request line and headers: `CONNECT host:port` (port 443 when left out), or `METHOD
/// http://host[:port]/path` (port 80), rewritten to origin-form with `Connection: close` and
/// without the proxy's own headers. The head is parsed by `httparse` (a byte HTTP does not
/// allow in a method, a target, a header name or value is refused) after every line end is
/// checked to be CR LF: a bare LF, which `httparse` reads as a line end, could make an
/// upstream see a header the proxy never checked.
fn parse_head(head: &[u8]) -> Result<Target, &'static str> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let req = match super::head::request_head(head, &mut headers) {
        Err(super::head::BARE_CR_OR_LF) => return Err("a bare CR or LF in the request head"),
        r => r?,
    };
    let (method, target, minor) = (req.method, req.target, req.minor);
    if method == "CONNECT" {
        let (host, port) = authority(target, 443)?;
        return Ok(Target {
            connect: true,
            host,
            port,
            head: Vec::new(),
            body_len: 0,
        });
    }
    let Some(rest) = strip_prefix_ignore_case(target, "http://") else {
        return Err("only CONNECT and http:// requests in absolute form are proxied");
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (auth, path) = rest.split_at(end);
    let (host, port) = authority(auth, 80)?;
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('/') => p.to_string(),
        p => format!("/{p}"),
    };
    let out = format!("{method} {path} HTTP/1.{minor}\r\n");
    let (out, body_len) = forwarded_headers(out, req.headers, &host, port)?;
    Ok(Target {
        connect: false,
        host,
        port,
        head: out.into_bytes(),
        body_len,
    })
}

/// Appends the headers sent upstream to `out` (the proxy's own dropped, the one `Host` the
/// checked one, `Connection: close` last); returns the head and the body's length.
fn forwarded_headers(
    mut out: String,
    headers: &[httparse::Header<'_>],
    host: &str,
    port: u16,
) -> Result<(String, u64), &'static str> {
    let mut body_len: Option<u64> = None;
    let mut host_seen = false;
    for h in headers {
        let value = std::str::from_utf8(h.value).map_err(|_| "a header value is not text")?;
        let (name, value) = (h.name.to_ascii_lowercase(), value.trim());
        match name.as_str() {
            "proxy-connection" | "proxy-authorization" | "connection" | "keep-alive" => continue,
            "host" => {
                // The one host the request names is the one checked: a `Host` naming another
                // site would be served by an upstream that hosts both.
                let same = authority(value, 80)
                    .is_ok_and(|(h, p)| h.eq_ignore_ascii_case(host) && p == port);
                if host_seen || !same {
                    return Err("the Host header differs from the request's host");
                }
                host_seen = true;
            }
            "content-length" => {
                let n = value
                    .parse::<u64>()
                    .map_err(|_| "a malformed Content-Length")?;
                if body_len.is_some_and(|m| m != n) {
                    return Err("two Content-Length headers");
                }
                body_len = Some(n);
            }
            "transfer-encoding" => return Err("a request body must have a Content-Length"),
            _ => {}
        }
        out.push_str(&format!("{}: {value}\r\n", h.name));
    }
    if !host_seen {
        let shown = if port == 80 {
            host.to_string()
        } else {
            format!("{host}:{port}")
        };
        out.push_str(&format!("Host: {shown}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    Ok((out, body_len.unwrap_or(0)))
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`; refuses user info (`user@host`).
fn authority(a: &str, default_port: u16) -> Result<(String, u16), &'static str> {
    if a.contains('@') || a.is_empty() {
        return Err("a malformed host");
    }
    let (host, port) = if let Some(rest) = a.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or("a malformed host")?;
        (format!("[{h}]"), after.strip_prefix(':'))
    } else {
        match a.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (a.to_string(), None),
        }
    };
    let port = match port {
        None => default_port,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or("a malformed port")?,
    };
    Ok((host, port))
}

impl Denied {
    /// The allow-list entry that would let this destination through: `host:port`, an IPv6
    /// address in brackets.
    #[cfg(test)]
    pub(crate) fn entry(&self) -> String {
        entry(&self.host, self.port)
    }

    /// What would allow it, in words: the entry and the setting that takes it.
    pub(crate) fn allow_with(&self) -> String {
        allow_with(&self.host, self.port)
    }
}

/// `host:port`, an IPv6 address in brackets.
fn entry(host: &str, port: u16) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(a)) => format!("[{a}]:{port}"),
        _ => format!("{host}:{port}"),
    }
}

/// The setting that would allow `host:port`.
fn allow_with(host: &str, port: u16) -> String {
    format!(
        "add \"{}\" to the template's network allow-list (\"network\": {{\"allow\": [...]}}) \
         in relay-host's settings",
        entry(host, port)
    )
}

/// The text of a `403`: relay refused it, which destination, why, and what would allow it.
fn refusal(host: &str, port: u16, reason: &str) -> String {
    format!(
        "{} refused by relay's network allow-list for this session ({reason}); to allow it, {}",
        entry(host, port),
        allow_with(host, port)
    )
}

/// A short plain-text answer, then the connection is closed.
fn reply(mut client: &UnixStream, code: u16, msg: &str) -> io::Result<()> {
    client.write_all(super::plain_answer(code, msg).as_bytes())?;
    client.shutdown(Shutdown::Both)
}

#[cfg(test)]
#[path = "proxy_socket_tests.rs"]
mod socket_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// The refusal names relay, the destination, the reason and the setting that allows it.
    #[test]
    fn the_refusal_says_who_what_and_how_to_allow_it() {
        assert_eq!(
            refusal("example.com", 443, "not on the allow-list"),
            "example.com:443 refused by relay's network allow-list for this session (not on the \
             allow-list); to allow it, add \"example.com:443\" to the template's network \
             allow-list (\"network\": {\"allow\": [...]}) in relay-host's settings"
        );
        assert!(refusal("::1", 80, "x").starts_with("[::1]:80 refused"));
    }

    #[test]
    fn connect_and_absolute_form_are_parsed() {
        let t = parse_head(b"CONNECT api.example.com:8443 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(
            (t.connect, t.host.as_str(), t.port),
            (true, "api.example.com", 8443)
        );
        let t = parse_head(
            b"POST http://127.0.0.1:9/v1/messages?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\
              Proxy-Connection: keep-alive\r\nConnection: keep-alive\r\nAuthorization: a\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            (t.connect, t.host.as_str(), t.port),
            (false, "127.0.0.1", 9)
        );
        assert_eq!(
            String::from_utf8(t.head).unwrap(),
            "POST /v1/messages?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nAuthorization: a\r\n\
             Connection: close\r\n\r\n"
        );
        let t = parse_head(b"GET http://[::1] HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("[::1]", 80));
        // No Host: the checked one is added; a body's length is kept to forward exactly it.
        assert_eq!(
            String::from_utf8(t.head).unwrap(),
            "GET / HTTP/1.1\r\nHost: [::1]\r\nConnection: close\r\n\r\n"
        );
        let t = parse_head(
            b"PUT http://A.example:81/ HTTP/1.1\r\nhost: a.EXAMPLE:81\r\nContent-Length: 5\r\n\r\n",
        )
        .unwrap();
        assert_eq!((t.port, t.body_len), (81, 5));
    }

    #[test]
    fn other_forms_are_refused() {
        for bad in [
            &b"GET / HTTP/1.1\r\n\r\n"[..],
            b"GET https://a/ HTTP/1.1\r\n\r\n",
            b"GET http://user@a/ HTTP/1.1\r\n\r\n",
            b"CONNECT a:0 HTTP/1.1\r\n\r\n",
            b"CONNECT a:99999 HTTP/1.1\r\n\r\n",
            b"CONNECT  a:1 HTTP/1.1\r\n\r\n",
            // A Host naming another site than the one checked, or two of them.
            b"GET http://a.example/ HTTP/1.1\r\nHost: b.example\r\n\r\n",
            b"GET http://a.example/ HTTP/1.1\r\nHost: a.example:8080\r\n\r\n",
            b"GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",
            // Bodies whose end the proxy could not tell.
            b"POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST http://a.example/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"POST http://a.example/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            // A bare LF or CR, in a value or as a line end; bytes no header may hold.
            b"GET http://a.example/ HTTP/1.1\r\nX-A: a\nHost: b.example\r\n\r\n",
            b"GET http://a.example/ HTTP/1.1\r\nX-A: a\rHost: b.example\r\n\r\n",
            b"GET http://a.example/ HTTP/1.1\nX-A: a\r\n\r\n",
            b"GET http://a.example/ HTTP/1.1\r\nX-A: a\x00b\r\n\r\n",
            b"GET http://a.example/ HTTP/1.1\r\nX A: a\r\n\r\n",
            b"GET http://a.example/ HTTP/1.1\r\nX-A : a\r\n\r\n",
            b"GET http://a.example/ HTTP/1.1\r\nX-A: a\r\n folded\r\n\r\n",
            b"GET http://a.example/\x7f HTTP/1.1\r\n\r\n",
            b"G(T http://a.example/ HTTP/1.1\r\n\r\n",
            b"GET http://a.example/ HTTP/2.0\r\n\r\n",
        ] {
            assert!(
                parse_head(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn local_addresses_are_local() {
        for a in [
            "127.0.0.1",
            "::1",
            "0.0.0.0",
            "169.254.169.254",
            "fe80::1",
            "::ffff:127.0.0.2",
        ] {
            assert!(is_local(a.parse().unwrap()), "{a}");
        }
        for a in ["1.1.1.1", "2606:4700::1111", "10.0.0.1"] {
            assert!(!is_local(a.parse().unwrap()), "{a}");
        }
    }

    /// `Denied`'s example.
    #[test]
    fn denied_doc_example() {
        let d = crate::net::proxy::Denied {
            host: "example.com".into(),
            port: 443,
            reason: "not on the allow-list",
        };
        assert_eq!(d.port, 443);
    }

    /// `entry`'s example.
    #[test]
    fn entry_doc_example() {
        use crate::net::proxy::Denied;
        let d = Denied {
            host: "::1".into(),
            port: 8080,
            reason: "not on the allow-list",
        };
        assert_eq!(d.entry(), "[::1]:8080");
    }

    /// `allow_with`'s example.
    #[test]
    fn allow_with_doc_example() {
        use crate::net::proxy::Denied;
        let d = Denied {
            host: "example.com".into(),
            port: 443,
            reason: "not on the allow-list",
        };
        assert!(d.allow_with().contains("\"example.com:443\""));
    }
}
