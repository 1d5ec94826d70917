//! Stand-in mode (docs/DESIGN.md, "Stand-in mode"), all of it but the launch's step, in one
//! place:
//!
//! | part | where |
//! |---|---|
//! | the program `relay-stand-in` ([`main`], called by `bin/relay-stand-in.rs`): the session's allow-list proxy holding the real token | [`program`] |
//! | `relay-stand-in --check`: the one request of `relay-host token check --online` | [`check`] |
//! | what relay-host and the program say to each other: command line, descriptors, reports | [`protocol`] |
//! | the interception: the session CA, TLS both ways, HTTP/1.1, the swap | this module (`StandIn`), `ca.rs`, `tls.rs`, `http1.rs`, `relay.rs`, `token.rs` |
//!
//! The launch's side is its network step's `stand_in.rs` (`launch/network/`): it starts the
//! program, hands it the real token, takes the stand-in and the CA certificate back, then
//! writes each report to the events; beside it, `stand_in_proxy.rs` holds the running program
//! until the session ends and `api_use.rs` counts its `used` reports. The template's setting
//! is `settings/token_mode.rs`, and what it needs is checked in `settings/checks.rs`.
//!
//! The interception runs in `relay-stand-in` only, never in relay-host itself (which uses the
//! protocol, the constants below and `read_ca_file`'s check). A session gets a stand-in on
//! fd 5 (`stand_in_for`); the real token stays in that program, in a `StandIn`
//! that the session's allow-list proxy holds. For a `CONNECT` to one of the session's API hosts
//! the proxy terminates TLS with a leaf of the session's own CA (its key never leaves this
//! process), offers ALPN `http/1.1` only, parses each request with `httparse`, puts the real
//! token in place of the stand-in in `Authorization: Bearer ...` (only there, only for this
//! session's stand-in) and sends the request on over TLS verified against the system trust
//! store (what Claude Code trusts; webpki's roots on a system without one) and the operator's
//! `upstream_ca_file`. Answers stream back as they come. Anything that is not valid HTTP/1.1
//! is refused and the connection closed. The proxy ends with the session, and with it the real
//! token (`StandIn::end`).

mod ca;
pub mod check;
mod error;
mod http1;
pub mod program;
pub mod protocol;
#[cfg(test)]
mod proxy_tests;
mod relay;
mod tls;
mod token;

use std::fmt;
use std::io;
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The whole of `relay-stand-in` (`args` without the program name): with [`check::FLAG`] first
/// the one request of `relay-host token check --online` ([`check`]), else a stand-in session's
/// proxy ([`program::run`]); returns its exit code.
///
/// # Safety
///
/// Called once, from `main`, before any other thread runs: this process owns descriptors 3 to
/// 6 it inherited, and nothing else in it uses them.
///
/// ```no_run
/// // SAFETY: from main, owning fds 3 to 6.
/// let code = unsafe { relay_host::stand_in::main(std::env::args_os().skip(1).collect()) };
/// std::process::exit(code);
/// ```
pub unsafe fn main(args: Vec<std::ffi::OsString>) -> i32 {
    if check::asked(&args) {
        // SAFETY: forwarded from this function's contract.
        unsafe { check::run(args) }
    } else {
        // SAFETY: forwarded from this function's contract.
        unsafe { program::run(args) }
    }
}

use relay_token::ClaudeToken;
use zeroize::Zeroizing;

use crate::net::allow::Host;
pub(crate) use error::StandInError;
pub(crate) use tls::read_ca_file;
pub(crate) use token::stand_in_for;

/// Anthropic's API host, where every session's stand-in is swapped.
pub(crate) const ANTHROPIC_API: &str = concat!(crate::net::anthropic_api_host!(), ":443");

/// Where a stand-in session sees its CA's certificate (bound read-only); `NODE_EXTRA_CA_CERTS`
/// names it.
pub(crate) const SANDBOX_CA: &str = "/run/relay/ca.pem";

/// The variable that names `SANDBOX_CA` to Claude Code (Node).
pub(crate) const CA_VARIABLE: &str = "NODE_EXTRA_CA_CERTS";

/// How long a session may take over its TLS handshake with the proxy.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an API host may take over its TLS handshake: a failure must reach the person
/// within seconds (the connection itself has the proxy's 10 s).
const UPSTREAM_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The status of a request whose API host's TLS failed (`421 Misdirected Request`: this proxy
/// cannot give an answer that is that host's). A 4xx, not a 5xx: Claude Code's start-up
/// fetches (its policy limits, the managed settings) retry every 5xx five times, whatever the
/// answer says, and start the turn only when both are done (18 s with `502`); a 4xx other than
/// 408, 409 and 429 they, and the messages request, do not retry.
pub(crate) const UPSTREAM_TLS_FAILED: u16 = 421;

/// How long a session may take to send the request that a refusal answers (the refusal comes
/// after it: [`relay::refuse_request`]).
const REFUSED_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an API host may send nothing, once its TLS is up (a streamed answer sends pings
/// far more often; a whole answer takes at most 10 minutes).
const IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// One stand-in session's secrets and the TLS set-up of its proxy: the real token, the
/// session's CA, the API hosts and the upstream trust.
pub(crate) struct StandIn {
    stand_in: ClaudeToken,
    real: Mutex<Option<ClaudeToken>>,
    ca: ca::SessionCa,
    hosts: Vec<(Host, u16)>,
    upstream: Arc<rustls::ClientConfig>,
    on_refuse: OnceLock<OnRefuse>,
    on_use: OnceLock<OnUse>,
}

/// A refusal on an intercepted connection, as told to [`StandIn::on_refuse`]'s hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    /// The API host (a name, or an address without brackets).
    pub(crate) host: String,
    /// Its port.
    pub(crate) port: u16,
    /// The status the session got: `400`, `417`, `421` (the API host's TLS failed), `502` or
    /// `504`; `0` when its TLS handshake failed.
    pub(crate) status: u16,
    /// Why, in words (never a byte of the request).
    pub(crate) reason: &'static str,
}

/// Told each [`Refused`].
pub(crate) type OnRefuse = Box<dyn Fn(&Refused) + Send + Sync>;

/// One answer an API host gave a session, counted: never a byte of the request or answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Used {
    /// The API host (a name, or an address without brackets).
    pub(crate) host: String,
    /// Its port.
    pub(crate) port: u16,
    /// The answer's status.
    pub(crate) status: u16,
    /// The bytes of the request sent on (head and body).
    pub(crate) sent: u64,
    /// The bytes of the answer sent back (head and body).
    pub(crate) received: u64,
}

/// Told each [`Used`].
pub(crate) type OnUse = Box<dyn Fn(&Used) + Send + Sync>;

impl crate::net::Interceptor for StandIn {
    fn intercepts(&self, host: &Host, port: u16) -> bool {
        StandIn::intercepts(self, host, port)
    }

    fn serve(
        &self,
        client: UnixStream,
        upstream: TcpStream,
        host: &Host,
        port: u16,
        early: &[u8],
    ) -> io::Result<()> {
        StandIn::serve(self, client, upstream, host, port, early)
    }

    fn end(&self) {
        StandIn::end(self)
    }
}

impl fmt::Debug for StandIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StandIn")
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl StandIn {
    /// A stand-in session for `real` whose upstream trust is webpki's roots and `upstream_ca`
    /// (`StandIn::with_roots` without a system bundle).
    #[cfg(test)]
    pub(crate) fn new(
        real: ClaudeToken,
        api_hosts: &[String],
        upstream_ca: Option<&[u8]>,
    ) -> Result<(Arc<StandIn>, ClaudeToken), StandInError> {
        StandIn::with_roots(real, api_hosts, None, upstream_ca)
    }

    /// A stand-in session for `real`: its stand-in (returned, to go on fd 5), its CA, the API
    /// hosts (`host:port` entries, as [`Template::api_hosts`](crate::settings::Template::api_hosts)
    /// gives them) and the upstream trust: the certificates of the system trust store's bundle
    /// `system` (what Claude Code trusts; `None`: webpki's roots instead) and the PEM
    /// certificates `upstream_ca` (`upstream_ca_file`'s bytes), both as relay-host read them.
    pub(crate) fn with_roots(
        real: ClaudeToken,
        api_hosts: &[String],
        system: Option<&[u8]>,
        upstream_ca: Option<&[u8]>,
    ) -> Result<(Arc<StandIn>, ClaudeToken), StandInError> {
        let mut hosts = Vec::new();
        for entry in api_hosts {
            let hp = http1::host_port(entry, 443);
            hosts.push(hp.ok_or_else(|| StandInError::ApiHost(entry.clone()))?);
        }
        let upstream = tls::upstream_config(system, upstream_ca)?;
        let ca = ca::SessionCa::new()?;
        let stand_in = stand_in_for(&real).map_err(StandInError::Random)?;
        let handed = ClaudeToken::from_bytes(stand_in.expose_bytes())
            .ok_or_else(|| StandInError::Random(io::Error::other("not a token")))?;
        let si = StandIn {
            stand_in,
            real: Mutex::new(Some(real)),
            ca,
            hosts,
            upstream,
            on_refuse: OnceLock::new(),
            on_use: OnceLock::new(),
        };
        Ok((Arc::new(si), handed))
    }

    /// The session CA's certificate, PEM: what the session trusts (`SANDBOX_CA`).
    pub(crate) fn ca_pem(&self) -> &str {
        self.ca.pem()
    }

    /// Ends the session's swap: the real token is dropped (zeroized) and no request gets it
    /// after, even on a connection still open. The proxy calls it when it is dropped.
    pub(crate) fn end(&self) {
        let taken = match self.real.lock() {
            Ok(mut g) => g.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        drop(taken);
    }

    /// True once [`StandIn::end`] ran.
    #[cfg(test)]
    pub(crate) fn ended(&self) -> bool {
        self.real.lock().map(|g| g.is_none()).unwrap_or(true)
    }

    /// Sets what is told of each refusal on an intercepted connection (once; later calls
    /// change nothing): the host, port, the status the session got (`0`: none, its TLS
    /// handshake failed) and why, never a byte of a request.
    pub(crate) fn on_refuse(&self, hook: OnRefuse) {
        let _ = self.on_refuse.set(hook);
    }

    /// Sets what is told of each answer an API host gave (once; later calls change nothing):
    /// the host, port, status and byte counts, never a byte of content.
    pub(crate) fn on_use(&self, hook: OnUse) {
        let _ = self.on_use.set(hook);
    }

    fn note(&self, host: &Host, port: u16, status: u16, reason: &'static str) {
        if let Some(hook) = self.on_refuse.get() {
            let host = host.to_string();
            hook(&Refused {
                host,
                port,
                status,
                reason,
            });
        }
    }

    /// True when a `CONNECT` to `host:port` is intercepted: it names one of the API hosts.
    pub(crate) fn intercepts(&self, host: &Host, port: u16) -> bool {
        self.hosts.iter().any(|(h, p)| h == host && *p == port)
    }

    /// `Authorization`'s value with the real token when `value` is `Bearer <this session's
    /// stand-in>` (the scheme in any case) and the session has not ended; else `None` (the
    /// value is sent as it is).
    fn replacement(&self, value: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
        let (scheme, rest) = (value.get(..7)?, value.get(7..)?);
        if !scheme.eq_ignore_ascii_case(b"bearer ") || !same(rest, self.stand_in.expose_bytes()) {
            return None;
        }
        let guard = self.real.lock().ok()?;
        let real = guard.as_ref()?.expose_bytes();
        let mut v = Zeroizing::new(Vec::with_capacity(7 + real.len()));
        v.extend_from_slice(b"Bearer ");
        v.extend_from_slice(real);
        Some(v)
    }

    /// Serves one intercepted `CONNECT` (the `200` already sent): the session's TLS (`rest`:
    /// what it sent after the `CONNECT` head), the upstream's, and the requests between them.
    pub(crate) fn serve(
        &self,
        client: UnixStream,
        upstream: TcpStream,
        host: &Host,
        port: u16,
        rest: &[u8],
    ) -> io::Result<()> {
        let noted = |status: u16, reason: &'static str| self.note(host, port, status, reason);
        let config = self.ca.server_config(host).map_err(io::Error::other)?;
        client.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
        let mut inside = tls::accept(config, client, rest)
            .inspect_err(|_| noted(0, "the session's TLS handshake with the proxy failed"))?;
        inside.sock.set_read_timeout(None)?;
        // Each piece is written and flushed as it comes: Nagle's wait for an ACK (40 ms
        // against a peer that delays it) would only hold the head back from its body.
        upstream.set_nodelay(true)?;
        let upstream_tls = Arc::clone(&self.upstream);
        let (handshake, idle) = (UPSTREAM_HANDSHAKE_TIMEOUT, IDLE_TIMEOUT);
        let mut outside = match tls::connect(upstream_tls, host, upstream, handshake, idle) {
            Ok(s) => s,
            Err(e) => {
                // Its TLS failed (an unknown certificate, no TLS at all): the session's request,
                // read whole, gets an answer that names the cause and says not to retry, and
                // never goes anywhere.
                let why = tls::failure_words(&e);
                noted(UPSTREAM_TLS_FAILED, why);
                let _ = inside.sock.set_read_timeout(Some(REFUSED_REQUEST_TIMEOUT));
                let code = UPSTREAM_TLS_FAILED;
                let _ = relay::refuse_request(&mut inside, host, port, code, why);
                tls::close(&mut inside);
                return Err(e);
            }
        };
        let swap = |v: &[u8]| self.replacement(v);
        let used = |status: u16, sent: u64, received: u64| {
            if let Some(hook) = self.on_use.get() {
                let (host, port) = (host.to_string(), port);
                hook(&Used {
                    host,
                    port,
                    status,
                    sent,
                    received,
                });
            }
        };
        let x = relay::Exchange {
            host,
            port,
            swap: &swap,
            noted: &noted,
            used: &used,
        };
        let result = relay::relay(&mut inside, &mut outside, &x);
        tls::close(&mut inside);
        tls::close(&mut outside);
        result
    }
}

/// Equal bytes, compared in time that depends on the lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    /// The host the proxy adds the real token for is the one the built-in template's
    /// allow-list names, on HTTPS's port: the two constants say one host.
    #[test]
    fn the_api_host_is_the_built_in_allow_lists() {
        let [host] = crate::net::CLAUDE_CODE_HOSTS else {
            panic!("the built-in allow-list names one host");
        };
        assert_eq!(crate::stand_in::ANTHROPIC_API, format!("{host}:443"));
    }

    /// `Used`'s example.
    #[test]
    fn used_doc_example() {
        let u = crate::stand_in::Used {
            host: "api.anthropic.com".into(),
            port: 443,
            status: 200,
            sent: 812,
            received: 4096,
        };
        assert_eq!(u.status, 200);
    }

    /// `with_roots`'s example.
    #[test]
    fn with_roots_doc_example() {
        use crate::stand_in::StandIn;
        let real = relay_token::ClaudeToken::from_bytes(b"sk-ant-oat01-abc").unwrap();
        let e = StandIn::with_roots(real, &[], Some(b"no PEM here"), None).unwrap_err();
        assert!(e.to_string().contains("the system CA bundle"), "{e}");
    }

    /// `on_use`'s example.
    #[test]
    fn on_use_doc_example() {
        let result = (|| {
            let real = relay_token::ClaudeToken::from_bytes(b"sk-ant-oat01-abc").unwrap();
            let (si, _) = crate::stand_in::StandIn::new(real, &[], None)?;
            si.on_use(Box::new(|u| {
                eprintln!("{} {} {}/{}", u.host, u.status, u.sent, u.received)
            }));
            Ok::<(), crate::stand_in::StandInError>(())
        })();
        result.unwrap();
    }

    /// `StandIn`'s example.
    #[test]
    fn stand_in_doc_example() {
        let result = (|| {
            use crate::stand_in::StandIn;
            use relay_token::ClaudeToken;
            let real = ClaudeToken::from_bytes(b"sk-ant-oat01-real-token-for-the-doc").unwrap();
            let (si, stand_in) = StandIn::new(real, &["api.anthropic.com:443".into()], None)?;
            assert!(stand_in.expose_bytes().starts_with(b"sk-ant-oat01-"));
            assert!(si.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
            si.end();
            Ok::<(), crate::stand_in::StandInError>(())
        })();
        result.unwrap();
    }

    /// `Refused`'s example.
    #[test]
    fn refused_doc_example() {
        let r = crate::stand_in::Refused {
            host: "api.anthropic.com".into(),
            port: 443,
            status: 400,
            reason: "two Authorization headers",
        };
        assert_eq!(r.status, 400);
    }

    /// `new`'s example.
    #[test]
    fn new_doc_example() {
        use crate::stand_in::StandIn;
        let real = relay_token::ClaudeToken::from_bytes(b"sk-ant-oat01-abc").unwrap();
        assert!(StandIn::new(real, &["not a host".into()], None).is_err());
    }

    /// `ca_pem`'s example.
    #[test]
    fn ca_pem_doc_example() {
        let result = (|| {
            let real = relay_token::ClaudeToken::from_bytes(b"sk-ant-oat01-abc").unwrap();
            let (si, _) = crate::stand_in::StandIn::new(real, &[], None)?;
            assert!(si.ca_pem().contains("CERTIFICATE"));
            Ok::<(), crate::stand_in::StandInError>(())
        })();
        result.unwrap();
    }

    /// `end`'s example.
    #[test]
    fn end_doc_example() {
        let result = (|| {
            let real = relay_token::ClaudeToken::from_bytes(b"sk-ant-oat01-abc").unwrap();
            let (si, _) = crate::stand_in::StandIn::new(real, &[], None)?;
            si.end();
            assert!(si.ended());
            Ok::<(), crate::stand_in::StandInError>(())
        })();
        result.unwrap();
    }

    /// `ended`'s example.
    #[test]
    fn ended_doc_example() {
        let result = (|| {
            let real = relay_token::ClaudeToken::from_bytes(b"sk-ant-oat01-abc").unwrap();
            let (si, _) = crate::stand_in::StandIn::new(real, &[], None)?;
            assert!(!si.ended());
            Ok::<(), crate::stand_in::StandInError>(())
        })();
        result.unwrap();
    }

    /// `on_refuse`'s example.
    #[test]
    fn on_refuse_doc_example() {
        let result = (|| {
            let real = relay_token::ClaudeToken::from_bytes(b"sk-ant-oat01-abc").unwrap();
            let (si, _) = crate::stand_in::StandIn::new(real, &[], None)?;
            si.on_refuse(Box::new(|r| {
                eprintln!("{}:{} {} ({})", r.host, r.port, r.status, r.reason)
            }));
            Ok::<(), crate::stand_in::StandInError>(())
        })();
        result.unwrap();
    }
}
