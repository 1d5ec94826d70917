//! A test certificate authority for the TLS side of the tests (Linux only): a fresh CA key and
//! self-signed certificate per [`TestCa`](crate::tls::TestCa), a leaf for `127.0.0.1` and
//! `localhost` it signs, the rustls server configuration of the Messages API fixture
//! ([`crate::messages_api::MessagesApi::start_tls`]), and a client configuration that trusts the CA
//! alone (a test that talks to the fixture straight from the host), and [`OkApi`](crate::tls::OkApi),
//! a keep-alive TLS server that answers every request `200` and records each one's line and
//! credential by hash (the proxy's tests and its per-request bench).
//!
//! The CA's certificate is written to a file ([`TestCa::write_pem`](crate::tls::TestCa::write_pem))
//! that relay-host's settings name as `upstream_ca_file`: relay-host trusts the fixture only
//! through it.

use std::path::Path;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A test CA and the `127.0.0.1` leaf it signed (keys held in this process only).
pub struct TestCa {
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    leaf_der: CertificateDer<'static>,
    leaf_key: Vec<u8>,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

impl Default for TestCa {
    fn default() -> Self {
        TestCa::new()
    }
}

/// ring's provider: the one TLS implementation the workspace builds.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TestCa {
    /// A fresh CA (`relay test CA`, may sign leaves) and its leaf for `127.0.0.1` and
    /// `localhost`.
    ///
    /// ```
    /// let ca = relay_tests::tls::TestCa::new();
    /// assert!(ca.pem().starts_with("-----BEGIN CERTIFICATE-----"));
    /// assert_ne!(ca.pem(), relay_tests::tls::TestCa::new().pem());
    /// ```
    pub fn new() -> TestCa {
        TestCa::for_names(&[])
    }

    /// As [`TestCa::new`], the leaf also for each of `names` (the fake internet's hosts).
    ///
    /// ```
    /// let ca = relay_tests::tls::TestCa::for_names(&["api.anthropic.com"]);
    /// assert!(ca.pem().starts_with("-----BEGIN CERTIFICATE-----"));
    /// ```
    pub fn for_names(names: &[&str]) -> TestCa {
        let ca_key = KeyPair::generate().expect("a CA key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        ca.distinguished_name
            .push(DnType::CommonName, "relay test CA");
        let ca_cert = ca.self_signed(&ca_key).expect("a self-signed CA");
        let issuer = Issuer::new(ca, ca_key);

        let leaf_key = KeyPair::generate().expect("a leaf key");
        let dns = std::iter::once("localhost").chain(names.iter().copied());
        let mut leaf =
            CertificateParams::new(dns.map(str::to_string).collect::<Vec<_>>()).expect("leaf");
        leaf.subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        leaf.distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer).expect("a signed leaf");
        TestCa {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().clone(),
            leaf_der: leaf_cert.der().clone(),
            leaf_key: leaf_key.serialize_der(),
        }
    }

    /// The CA's certificate, PEM.
    ///
    /// ```
    /// assert!(relay_tests::tls::TestCa::new().pem().contains("END CERTIFICATE"));
    /// ```
    pub fn pem(&self) -> String {
        self.ca_pem.clone()
    }

    /// Writes the CA's certificate (PEM) to `path`, for `upstream_ca_file`.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let ca = relay_tests::tls::TestCa::new();
    /// ca.write_pem(&dir.path().join("ca.pem"));
    /// assert_eq!(std::fs::read_to_string(dir.path().join("ca.pem"))?, ca.pem());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_pem(&self, path: &Path) {
        std::fs::write(path, &self.ca_pem)
            .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    /// The fixture's server configuration: the leaf, ALPN `http/1.1` only.
    ///
    /// ```
    /// let cfg = relay_tests::tls::TestCa::new().server_config();
    /// assert_eq!(cfg.alpn_protocols, [b"http/1.1".to_vec()]);
    /// ```
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.clone()));
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(vec![self.leaf_der.clone()], key)
            .expect("the leaf and its key");
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(cfg)
    }

    /// A client configuration that trusts this CA only, ALPN `http/1.1`.
    ///
    /// ```
    /// let cfg = relay_tests::tls::TestCa::new().client_config();
    /// assert_eq!(cfg.alpn_protocols, [b"http/1.1".to_vec()]);
    /// ```
    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca_der.clone()).expect("the CA as a root");
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(cfg)
    }
}

/// Sends `request` (a whole HTTP/1.1 request) over TLS to `127.0.0.1:port`, trusting `ca` only,
/// and returns the whole answer (the server closes the connection after it).
///
/// ```
/// use relay_tests::messages_api::MessagesApi;
/// let ca = relay_tests::tls::TestCa::new();
/// let api = MessagesApi::start_tls(vec![], &ca);
/// let answer = relay_tests::tls::exchange(&ca, api.port(), b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n")?;
/// assert!(answer.starts_with("HTTP/1.1 200 OK"));
/// assert_eq!(api.seen()[0].path, "/x");
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn exchange(ca: &TestCa, port: u16, request: &[u8]) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1")
        .map_err(std::io::Error::other)?
        .to_owned();
    let conn =
        rustls::ClientConnection::new(ca.client_config(), name).map_err(std::io::Error::other)?;
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port))?;
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(20)))?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    s.write_all(request)?;
    s.flush()?;
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) => {}
        // A server that closes without close_notify: what came is the answer.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
        Err(e) => return Err(e),
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// One request [`OkApi`] read: its request line (method, path and query, version), the SHA-256
/// of its `Authorization` value less any `Bearer ` prefix, and whether it asked for a protocol
/// upgrade (an `Upgrade` header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OkSeen {
    /// The request line.
    pub line: String,
    /// SHA-256 (hex) of the `Authorization` value, less `Bearer `.
    pub authorization_sha256: Option<String>,
    /// An `Upgrade` header came with it.
    pub upgrade: bool,
}

/// A keep-alive TLS server on `127.0.0.1` with `ca`'s leaf: every request head (bodies are
/// not read: send none) on a connection is recorded ([`OkSeen`]) and answered `200` with `ok`,
/// the connection kept for the next one.
///
/// ```
/// let ca = relay_tests::tls::TestCa::new();
/// let api = relay_tests::tls::OkApi::start(&ca);
/// let two = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
/// let answer = relay_tests::tls::exchange(&ca, api.port(), two)?;
/// assert_eq!(answer.matches("HTTP/1.1 200 OK").count(), 2);
/// assert_eq!(api.seen()[1].line, "GET /b HTTP/1.1");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct OkApi {
    port: u16,
    seen: Arc<std::sync::Mutex<Vec<OkSeen>>>,
}

impl OkApi {
    /// Starts the server (its threads live as long as the test process).
    pub fn start(ca: &TestCa) -> OkApi {
        OkApi::answering(ca, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    }

    /// As [`OkApi::start`], every request answered with `answer` (a whole HTTP answer with its
    /// `Content-Length`): the API's refusal of a token, say.
    ///
    /// ```no_run
    /// let ca = relay_tests::tls::TestCa::new();
    /// let api = relay_tests::tls::OkApi::answering(&ca, relay_tests::tls::TOKEN_REFUSED);
    /// assert!(api.port() > 0);
    /// ```
    pub fn answering(ca: &TestCa, answer: &'static [u8]) -> OkApi {
        let sock = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = sock.local_addr().expect("its address").port();
        let config = ca.server_config();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for tcp in sock.incoming().flatten() {
                let (config, log) = (Arc::clone(&config), Arc::clone(&log));
                std::thread::spawn(move || ok_connection(tcp, config, &log, answer));
            }
        });
        OkApi { port, seen }
    }

    /// Its port on `127.0.0.1`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The requests read so far, in order.
    pub fn seen(&self) -> Vec<OkSeen> {
        self.seen.lock().unwrap().clone()
    }
}

/// The Messages API's answer to a token it does not accept (Claude Code 2.1.332 shows it as
/// `401 Invalid bearer token`).
pub const TOKEN_REFUSED: &[u8] = b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n\
Content-Length: 89\r\n\r\n{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\
\"message\":\"Invalid bearer token\"}}";

/// Serves one connection of [`OkApi`] until it ends or asks to close.
fn ok_connection(
    tcp: std::net::TcpStream,
    config: Arc<rustls::ServerConfig>,
    log: &std::sync::Mutex<Vec<OkSeen>>,
    answer: &[u8],
) {
    use std::io::{BufRead, Write};
    let _ = tcp.set_nodelay(true);
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut r = std::io::BufReader::new(rustls::StreamOwned::new(conn, tcp));
    loop {
        let mut lines = Vec::new();
        let mut line = String::new();
        while r.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
            lines.push(std::mem::take(&mut line));
        }
        if line != "\r\n" || lines.is_empty() {
            return;
        }
        let header = |name: &str| {
            lines[1..].iter().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
        };
        let auth = header("authorization").map(|v| {
            let v = v.strip_prefix("Bearer ").unwrap_or(&v);
            crate::sha256_hex(v.as_bytes())
        });
        let close = header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        log.lock().unwrap().push(OkSeen {
            line: lines[0].trim_end().to_string(),
            authorization_sha256: auth,
            upgrade: header("upgrade").is_some(),
        });
        if r.get_mut()
            .write_all(answer)
            .and_then(|_| r.get_mut().flush())
            .is_err()
            || close
        {
            let _ = r.get_mut().flush();
            return;
        }
    }
}
