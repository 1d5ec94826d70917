//! Stand-in mode's proxy end to end, without Claude: an upstream API served over TLS on
//! 127.0.0.1 with a test CA (the host trusts it through `upstream_ca_file`), a session that
//! `CONNECT`s through the proxy and speaks TLS with its session CA. The upstream sees the real
//! token (by its SHA-256) only for this session's stand-in sent to an API host, while the
//! session runs. Run: `cargo test -p relay-host --lib stand_in::proxy_tests`.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, StreamOwned};
use sha2::{Digest, Sha256};

use crate::net::proxy::Proxy;
use crate::net::AllowList;
use crate::stand_in::StandIn;
use relay_token::ClaudeToken;

const REAL: &[u8] = b"sk-ant-oat01-REAL-token-of-the-stand-in-proxy-test-0123456789abcdefAA";

fn sha(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// What the upstream saw of one request: its path and the SHA-256 of its bearer token.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    path: String,
    bearer: Option<String>,
    body: Vec<u8>,
}

/// A TLS "Messages API" on 127.0.0.1 whose certificate a test CA signed.
struct Upstream {
    port: u16,
    ca_pem: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Upstream {
    /// `gate`: what `/stream` waits for between its two events (the session saw the first).
    fn start(gate: Option<Receiver<()>>) -> Upstream {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone()], der)
            .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (config, log) = (Arc::new(config), Arc::clone(&seen));
        let gate = Arc::new(Mutex::new(gate));
        std::thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let (config, log, gate) =
                    (Arc::clone(&config), Arc::clone(&log), Arc::clone(&gate));
                std::thread::spawn(move || serve(config, tcp, &log, &gate));
            }
        });
        Upstream {
            port,
            ca_pem: ca_cert.pem(),
            seen,
        }
    }

    fn entry(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// One connection of the upstream: requests with a `Content-Length` or chunked body, each
/// answered with chunked events (`/stream`: the second only once the gate opens).
fn serve(
    config: Arc<ServerConfig>,
    tcp: TcpStream,
    log: &Mutex<Vec<Seen>>,
    gate: &Mutex<Option<Receiver<()>>>,
) {
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut r = BufReader::new(StreamOwned::new(conn, tcp));
    while let Some(seen) = read_request(&mut r) {
        let stream = seen.path == "/stream";
        log.lock().unwrap().push(seen);
        let w = r.get_mut();
        let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
        let _ = w.write_all(b"d\r\nevent: first\n\r\n");
        let _ = w.flush();
        if stream {
            if let Some(g) = gate.lock().unwrap().as_ref() {
                // The test fails (below) rather than hangs when the first event never came.
                let _ = g.recv_timeout(Duration::from_secs(60));
            }
        }
        let _ = w.write_all(b"c\r\nevent: last\n\r\n0\r\n\r\n");
        let _ = w.flush();
    }
}

fn read_request<R: BufRead>(r: &mut R) -> Option<Seen> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let n = r.read_until(b'\n', &mut head).ok()?;
        if n == 0 {
            return None;
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    req.parse(&head).ok()?;
    let value = |name: &str| {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.to_vec())
    };
    let bearer = value("authorization").map(|v| sha(v.strip_prefix(b"Bearer ").unwrap_or(&v)));
    let mut body = Vec::new();
    if let Some(n) = value("content-length") {
        let n: usize = String::from_utf8(n).ok()?.parse().ok()?;
        body.resize(n, 0);
        r.read_exact(&mut body).ok()?;
    } else if value("transfer-encoding").is_some() {
        loop {
            let mut line = String::new();
            r.read_line(&mut line).ok()?;
            let size = usize::from_str_radix(line.trim_end(), 16).ok()?;
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    let path = req.path?.to_string();
    Some(Seen { path, bearer, body })
}

/// A session's connection: `CONNECT` through the proxy's socket, then TLS trusting `roots`.
fn session(
    proxy: &Path,
    target: &str,
    roots: &str,
) -> io::Result<StreamOwned<ClientConnection, UnixStream>> {
    session_offering(proxy, target, roots, b"http/1.1")
}

/// [`session`], its client offering `alpn` alone.
fn session_offering(
    proxy: &Path,
    target: &str,
    roots: &str,
    alpn: &[u8],
) -> io::Result<StreamOwned<ClientConnection, UnixStream>> {
    let mut s = UnixStream::connect(proxy)?;
    write!(s, "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n")?;
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        answer.push(byte[0]);
    }
    if !answer.starts_with(b"HTTP/1.1 200") {
        return Err(io::Error::other(
            String::from_utf8_lossy(&answer).into_owned(),
        ));
    }
    let mut store = RootCertStore::empty();
    store
        .add(CertificateDer::from_pem_slice(roots.as_bytes()).unwrap())
        .unwrap();
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let conn = ClientConnection::new(Arc::new(config), name).unwrap();
    let mut tls = StreamOwned::new(conn, s);
    tls.conn.complete_io(&mut tls.sock)?;
    Ok(tls)
}

/// Sends one request with `bearer` (if any) and reads the answer's head and body to its last
/// chunk (`first`: told once the first event arrived).
fn exchange<S: Read + Write>(
    tls: &mut S,
    port: u16,
    path: &str,
    bearer: Option<&[u8]>,
    first: Option<&Sender<()>>,
) -> io::Result<String> {
    let mut req = format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n").into_bytes();
    if let Some(b) = bearer {
        req.extend_from_slice(b"Authorization: Bearer ");
        req.extend_from_slice(b);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"Content-Length: 2\r\n\r\n{}");
    tls.write_all(&req)?;
    tls.flush()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"0\r\n\r\n") {
        let n = tls.read(&mut buf)?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        if let (Some(tx), true) = (first, got.windows(12).any(|w| w == b"event: first")) {
            let _ = tx.send(());
        }
    }
    Ok(String::from_utf8_lossy(&got).into_owned())
}

struct Setup {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    api: Upstream,
    other: Upstream,
    stand_in: Vec<u8>,
    session_ca: String,
    refused: Arc<Mutex<Vec<crate::stand_in::Refused>>>,
    proxy: Option<Proxy>,
    first: Sender<()>,
}

/// An API upstream (gated `/stream`), another allowed upstream, and a stand-in session's proxy
/// that trusts both test CAs (`trust`: else webpki's roots only).
fn setup(trust: bool) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let (first, gate) = mpsc::channel();
    let api = Upstream::start(Some(gate));
    let other = Upstream::start(None);
    let both = format!("{}{}", api.ca_pem, other.ca_pem);
    let real = ClaudeToken::from_bytes(REAL).unwrap();
    let ca = trust.then_some(both.as_bytes());
    let (si, handed) = StandIn::new(real, &[api.entry()], ca).unwrap();
    let session_ca = si.ca_pem().to_string();
    let refused = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&refused);
    si.on_refuse(Box::new(move |r| log.lock().unwrap().push(r.clone())));
    let list = AllowList::parse(&[api.entry(), other.entry()]).unwrap();
    let socket = dir.path().join("net.sock");
    let proxy = Proxy::start_with(&socket, list, Box::new(|_| {}), Some(si)).unwrap();
    let stand_in = handed.expose_bytes().to_vec();
    Setup {
        _dir: dir,
        socket,
        api,
        other,
        stand_in,
        session_ca,
        refused,
        proxy: Some(proxy),
        first,
    }
}

#[test]
fn the_api_host_gets_the_real_token_in_place_of_the_stand_in_and_answers_stream_back() {
    let s = setup(true);
    let mut tls = session(&s.socket, &s.api.entry(), &s.session_ca).expect("a TLS session");
    assert_eq!(tls.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    let port = s.api.port;
    let a = exchange(&mut tls, port, "/v1/messages", Some(&s.stand_in), None).unwrap();
    assert!(
        a.starts_with("HTTP/1.1 200 OK\r\n") && a.contains("event: last"),
        "{a}"
    );
    // The same connection, a second request: a streamed answer whose second event the upstream
    // sends only once the session got the first (the proxy buffers nothing).
    let a = exchange(&mut tls, port, "/stream", Some(&s.stand_in), Some(&s.first)).unwrap();
    assert!(
        a.contains("event: first") && a.contains("event: last"),
        "{a}"
    );
    let seen = s.api.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for r in &seen {
        assert_eq!(r.bearer.as_deref(), Some(sha(REAL).as_str()), "{}", r.path);
        assert_eq!(r.body, b"{}");
    }
    assert_ne!(
        sha(&s.stand_in),
        sha(REAL),
        "the session holds another value"
    );
}

#[test]
fn no_other_value_host_or_time_yields_the_real_token() {
    let s = setup(true);
    let port = s.api.port;
    // Another session's stand-in, and no Authorization at all: passed on as they are.
    let dir = tempfile::tempdir().unwrap();
    let other_real =
        ClaudeToken::from_bytes(b"sk-ant-oat01-another-real-token-0123456789").unwrap();
    let (_other, other_stand_in) = StandIn::new(other_real, &[s.api.entry()], None).unwrap();
    let mut tls = session(&s.socket, &s.api.entry(), &s.session_ca).unwrap();
    exchange(
        &mut tls,
        port,
        "/other",
        Some(other_stand_in.expose_bytes()),
        None,
    )
    .unwrap();
    exchange(&mut tls, port, "/none", None, None).unwrap();
    let seen = s.api.seen();
    assert_eq!(
        seen[0].bearer.as_deref(),
        Some(sha(other_stand_in.expose_bytes()).as_str())
    );
    assert_eq!(seen[1].bearer, None);
    // Another allowed host is a plain tunnel: the session CA does not verify there, and the
    // stand-in reaches it as it is.
    assert!(
        session(&s.socket, &s.other.entry(), &s.session_ca).is_err(),
        "not intercepted"
    );
    let mut plain = session(&s.socket, &s.other.entry(), &s.other.ca_pem).unwrap();
    exchange(&mut plain, s.other.port, "/x", Some(&s.stand_in), None).unwrap();
    assert_eq!(
        s.other.seen()[0].bearer.as_deref(),
        Some(sha(&s.stand_in).as_str())
    );
    // The host's own network: the stand-in sent straight to the API host is itself.
    let mut direct = direct_session(&s.api);
    exchange(&mut direct, port, "/direct", Some(&s.stand_in), None).unwrap();
    // The session ended (its proxy dropped): a connection still open sends the stand-in only,
    // and no new one is taken.
    let mut s = s;
    drop(s.proxy.take());
    exchange(&mut tls, port, "/after", Some(&s.stand_in), None).unwrap();
    assert!(UnixStream::connect(&s.socket).is_err());
    let seen = s.api.seen();
    let real = sha(REAL);
    assert!(
        seen.iter()
            .all(|r| r.bearer.as_deref() != Some(real.as_str())),
        "{seen:?}"
    );
    assert_eq!(seen.len(), 4, "{seen:?}");
    drop(dir);
}

#[test]
fn what_is_not_http_or_not_trusted_upstream_is_refused() {
    let s = setup(true);
    let mut tls = session(&s.socket, &s.api.entry(), &s.session_ca).unwrap();
    tls.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\nAuthorization: Bearer ")
        .unwrap();
    tls.write_all(&s.stand_in).unwrap();
    tls.write_all(b"\r\n\r\n").unwrap();
    let mut a = String::new();
    let _ = tls.read_to_string(&mut a);
    assert!(a.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{a}");
    assert!(s.api.seen().is_empty());
    // Each refusal is told (host, port, status, reason), never a byte of the request.
    let told = refusals(&s, 1);
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(
        (told[0].host.as_str(), told[0].port, told[0].status),
        ("127.0.0.1", s.api.port, 400)
    );
    // HTTP/2 alone is not spoken: the handshake fails.
    let h2 = session_offering(&s.socket, &s.api.entry(), &s.session_ca, b"h2");
    assert!(h2.is_err(), "an h2-only client is refused");
    let told = refusals(&s, 2);
    assert_eq!(
        told.last().map(|r| r.status),
        Some(0),
        "a failed handshake is told: {told:?}"
    );
    // Upstream TLS is verified: without upstream_ca_file the test CA is no root. The session
    // hears at once why (an unknown issuer) and which setting fixes it, in a 4xx (which Claude
    // Code's start-up fetches do not retry, as they do every 5xx) saying not to retry (Claude
    // Code's messages requests heed x-should-retry), and so is the host.
    let s = setup(false);
    let mut tls = session(&s.socket, &s.api.entry(), &s.session_ca).unwrap();
    let asked = std::time::Instant::now();
    let a = exchange(
        &mut tls,
        s.api.port,
        "/v1/messages",
        Some(&s.stand_in),
        None,
    )
    .unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    assert!(a.starts_with("HTTP/1.1 421 Misdirected Request\r\n"), "{a}");
    assert!(a.contains("\r\nx-should-retry: false\r\n"), "{a}");
    let why = "the API host's TLS failed: its certificate is from an unknown issuer (a TLS proxy \
               on the way? put its CA in the system trust store or in relay-host's \
               upstream_ca_file setting)";
    assert!(a.ends_with(&format!("\r\n\r\nrelay: {why}\n")), "{a}");
    assert!(s.api.seen().is_empty());
    let told = refusals(&s, 1);
    assert_eq!(told.last().map(|r| r.reason), Some(why));
}

/// An untrusted API host's refusal answers the session's request once it has been read whole,
/// head and body (dropped, never sent on): answered before its body came, or closed with the
/// body unread (which resets the connection), the request fails as a reset connection, which
/// Claude Code retries, instead of as the refusal (`421`, `x-should-retry: false`) it heeds. The
/// body comes in two writes; the answer comes after the second, and a 1 MiB body is taken
/// whole.
#[test]
fn an_untrusted_api_hosts_refusal_answers_the_whole_request() {
    let s = setup(false);
    let mut tls = session(&s.socket, &s.api.entry(), &s.session_ca).unwrap();
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 4\r\n\r\n{{}}",
        s.api.port
    );
    tls.write_all(head.as_bytes()).unwrap();
    tls.flush().unwrap();
    tls.sock
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 4096];
    let early = tls.read(&mut buf);
    assert!(
        early
            .as_ref()
            .is_err_and(|e| e.kind() == io::ErrorKind::WouldBlock),
        "an answer before the request's body came: {:?}",
        early.map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
    );
    tls.sock.set_read_timeout(None).unwrap();
    tls.write_all(b"{}").unwrap();
    tls.flush().unwrap();
    let mut a = String::new();
    let _ = tls.read_to_string(&mut a);
    assert!(a.starts_with("HTTP/1.1 421 Misdirected Request\r\n"), "{a}");
    assert!(a.contains("\r\nx-should-retry: false\r\n"), "{a}");

    let mut tls = session(&s.socket, &s.api.entry(), &s.session_ca).unwrap();
    let body = vec![b'x'; 1 << 20];
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\n\r\n",
        s.api.port,
        body.len()
    );
    tls.write_all(head.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    tls.write_all(&body)
        .and_then(|()| tls.flush())
        .expect("the whole body taken");
    let mut a = String::new();
    let _ = tls.read_to_string(&mut a);
    assert!(a.starts_with("HTTP/1.1 421 Misdirected Request\r\n"), "{a}");
    assert!(s.api.seen().is_empty());
}

/// The refusals the proxy has told, once there are `n` of them: the proxy's thread tells a
/// refusal after the client has seen its end (the answer, or the failed handshake), so the test
/// waits for it (up to 30 s, then takes what is there).
fn refusals(s: &Setup, n: usize) -> Vec<crate::stand_in::Refused> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let told = s.refused.lock().unwrap().clone();
        if told.len() >= n || std::time::Instant::now() > deadline {
            return told;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// TLS straight to the upstream, from the host's network.
fn direct_session(u: &Upstream) -> StreamOwned<ClientConnection, TcpStream> {
    let mut store = RootCertStore::empty();
    store
        .add(CertificateDer::from_pem_slice(u.ca_pem.as_bytes()).unwrap())
        .unwrap();
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store)
        .with_no_client_auth();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let conn = ClientConnection::new(Arc::new(config), name).unwrap();
    StreamOwned::new(conn, TcpStream::connect(("127.0.0.1", u.port)).unwrap())
}
