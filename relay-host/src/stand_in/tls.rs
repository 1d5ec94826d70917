//! The TLS of stand-in mode, with rustls on ring: the server side toward the session (the
//! session CA's leaf, ALPN `http/1.1` only), the client side toward the API (the system trust
//! store's certificates, or webpki's roots without one, and `upstream_ca_file`'s; ALPN
//! `http/1.1`), and reading that file.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::ops::{Deref, DerefMut};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};
use rustls::{ConnectionCommon, SideData, StreamOwned};

use super::StandInError;
use crate::net::allow::Host;

/// The only application protocol either side offers.
const HTTP11: &[u8] = b"http/1.1";

/// The largest `upstream_ca_file` read.
const MAX_CA_FILE: u64 = 4 << 20;

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates of a PEM file of CA certificates (`upstream_ca_file`): PEM, at least one.
/// Only PEM is parsed here (what relay-host checks when it reads the settings, without any TLS
/// code); that each can be a trust anchor is checked when the stand-in
/// session starts.
pub(crate) fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, StandInError> {
    let io_err = |source| StandInError::CaFile {
        path: path.to_path_buf(),
        source,
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_CA_FILE + 1).read_to_end(&mut bytes))
        .map_err(io_err)?;
    pem_certificates(&bytes, path)
}

/// The PEM certificates in `bytes` (the file `path`'s, named in the error): at least one, at
/// most 4 MiB.
fn pem_certificates(
    bytes: &[u8],
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, StandInError> {
    let content = |why: String| StandInError::CaFileContent {
        path: path.to_path_buf(),
        why,
    };
    if bytes.len() as u64 > MAX_CA_FILE {
        return Err(content("larger than 4 MiB".into()));
    }
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| content(format!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(content("holds no PEM certificate".into()));
    }
    Ok(certs)
}

/// The certificates of `upstream_ca_file`'s bytes as relay-host read and handed them, each
/// checked to be usable as a trust anchor.
pub(super) fn anchors(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, StandInError> {
    let label = Path::new("(as relay-host handed it)");
    let certs = pem_certificates(pem, label)?;
    let mut roots = RootCertStore::empty();
    for c in &certs {
        roots
            .add(c.clone())
            .map_err(|e| StandInError::CaFileContent {
                path: label.to_path_buf(),
                why: format!("a certificate that cannot be a CA: {e}"),
            })?;
    }
    Ok(certs)
}

/// The roots of the system trust store's bundle `system` as relay-host handed it: each of its
/// certificates that can be a trust anchor (a bundle may hold one that cannot; rustls skips it,
/// as OpenSSL does), at least one; `None`: webpki's roots (a system without a bundle).
pub(super) fn roots(system: Option<&[u8]>) -> Result<RootCertStore, StandInError> {
    let Some(pem) = system else {
        return Ok(RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        });
    };
    let certs = bundle_certificates(pem);
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(StandInError::SystemBundle(
            "holds no usable CA certificate".into(),
        ));
    }
    Ok(roots)
}

/// The client side toward the API hosts, as every use of stand-in mode's TLS builds it: the
/// system bundle `system` ([`roots`]; `None`: webpki's roots) and `upstream_ca_file`'s bytes
/// `extra` ([`anchors`]).
pub(super) fn upstream_config(
    system: Option<&[u8]>,
    extra: Option<&[u8]>,
) -> Result<Arc<ClientConfig>, StandInError> {
    let extra = match extra {
        Some(pem) => anchors(pem)?,
        None => Vec::new(),
    };
    client_config(roots(system)?, extra).map_err(StandInError::Tls)
}

/// The `CERTIFICATE` sections of a PEM bundle, as DER; a section whose base64 does not decode is
/// skipped (as one that cannot be a trust anchor is). The bundle is public, so it is decoded
/// with a plain base64 decoder: pki-types' PEM reader decodes in constant time (it may read a
/// private key), which took about a third of `relay-stand-in`'s start on a 220 KB system bundle.
fn bundle_certificates(pem: &[u8]) -> Vec<CertificateDer<'static>> {
    use base64::Engine;
    use memchr::memmem::Finder;
    const BEGIN: &[u8] = b"-----BEGIN CERTIFICATE-----";
    const END: &[u8] = b"-----END CERTIFICATE-----";
    let (begin, end) = (Finder::new(BEGIN), Finder::new(END));
    let mut out = Vec::new();
    let mut rest = pem;
    while let Some(at) = begin.find(rest) {
        let body = &rest[at + BEGIN.len()..];
        let Some(stop) = end.find(body) else { break };
        // Its lines' base64, each line's white space trimmed.
        let mut text = Vec::with_capacity(stop);
        let mut from = 0;
        for nl in memchr::memchr_iter(b'\n', &body[..stop]).chain([stop]) {
            text.extend_from_slice(body[from..nl].trim_ascii());
            from = nl + 1;
        }
        if let Ok(der) = base64::engine::general_purpose::STANDARD.decode(&text) {
            out.push(CertificateDer::from(der));
        }
        rest = &body[stop + END.len()..];
    }
    out
}

/// The server side for one leaf: TLS 1.3 and 1.2, no client certificate, `http/1.1` only.
pub(super) fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let mut c = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    c.alpn_protocols = vec![HTTP11.to_vec()];
    Ok(Arc::new(c))
}

/// The client side toward the API: `roots` ([`roots`]) and `extra`, `http/1.1`.
pub(super) fn client_config(
    mut roots: RootCertStore,
    extra: Vec<CertificateDer<'static>>,
) -> Result<Arc<ClientConfig>, rustls::Error> {
    for c in extra {
        roots.add(c)?;
    }
    let mut c = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = vec![HTTP11.to_vec()];
    Ok(Arc::new(c))
}

/// The session's TLS: `early` (what it sent right after the `CONNECT` head) first, then the
/// handshake on `client`.
pub(super) fn accept(
    config: Arc<ServerConfig>,
    client: UnixStream,
    mut early: &[u8],
) -> io::Result<StreamOwned<ServerConnection, UnixStream>> {
    let mut conn = ServerConnection::new(config).map_err(io::Error::other)?;
    while !early.is_empty() {
        conn.read_tls(&mut early)?;
        conn.process_new_packets().map_err(io::Error::other)?;
    }
    let mut s = StreamOwned::new(conn, client);
    // Until the handshake is done (or the session's side ends: an error).
    s.conn.complete_io(&mut s.sock)?;
    if s.conn.is_handshaking() {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(s)
}

/// The upstream's TLS on `tcp`, verified for `host` (a name or an address): the handshake
/// done within `handshake`; then each read may wait `idle` at most.
pub(super) fn connect(
    config: Arc<ClientConfig>,
    host: &Host,
    tcp: TcpStream,
    handshake: Duration,
    idle: Duration,
) -> io::Result<StreamOwned<ClientConnection, TcpStream>> {
    let name = match host {
        Host::Ip(ip) => ServerName::IpAddress((*ip).into()),
        other => ServerName::try_from(other.to_string()).map_err(io::Error::other)?,
    };
    let conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
    let mut s = StreamOwned::new(conn, tcp);
    s.sock.set_read_timeout(Some(handshake))?;
    s.sock.set_write_timeout(Some(handshake))?;
    s.conn.complete_io(&mut s.sock)?;
    if s.conn.is_handshaking() {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    s.sock.set_read_timeout(Some(idle))?;
    s.sock.set_write_timeout(Some(idle))?;
    Ok(s)
}

/// Why the upstream's TLS failed, in words for the person: the certificate's fault (an unknown
/// issuer, expired, not yet valid, another name's, otherwise refused), a handshake that took too
/// long, or a peer that does not speak TLS. Each names `upstream_ca_file`.
pub(super) fn failure_words(e: &io::Error) -> &'static str {
    use rustls::CertificateError as C;
    let tls = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    match tls {
        Some(rustls::Error::InvalidCertificate(c)) => match c {
            // A CA of the same name as a trusted one, whose signature does not verify, is an
            // unknown issuer all the same.
            C::UnknownIssuer | C::BadSignature => concat!(
                "the API host's TLS failed: its certificate is from an unknown issuer (a TLS ",
                "proxy on the way? put its CA in the system trust store or in relay-host's ",
                "upstream_ca_file setting)"
            ),
            C::Expired | C::ExpiredContext { .. } => concat!(
                "the API host's TLS failed: its certificate has expired (or this machine's ",
                "clock is wrong); relay-host trusts the system's roots and upstream_ca_file"
            ),
            C::NotValidYet | C::NotValidYetContext { .. } => concat!(
                "the API host's TLS failed: its certificate is not valid yet (or this machine's ",
                "clock is wrong); relay-host trusts the system's roots and upstream_ca_file"
            ),
            C::NotValidForName | C::NotValidForNameContext { .. } => concat!(
                "the API host's TLS failed: its certificate is for another name (name mismatch); ",
                "relay-host trusts the system's roots and upstream_ca_file"
            ),
            _ => concat!(
                "the API host's TLS failed: its certificate was refused; relay-host trusts the ",
                "system's roots and upstream_ca_file"
            ),
        },
        Some(_) => concat!(
            "the API host's TLS failed: a TLS error; relay-host trusts the system's roots and ",
            "upstream_ca_file"
        ),
        None if super::error::timed_out(e) => concat!(
            "the API host's TLS handshake took longer than 10 s; relay-host trusts the ",
            "system's roots and upstream_ca_file"
        ),
        None => concat!(
            "the API host's TLS failed: the connection ended (not TLS?); relay-host trusts the ",
            "system's roots and upstream_ca_file"
        ),
    }
}

/// Sends `close_notify`, as far as the peer still takes it.
pub(super) fn close<C, D, S>(s: &mut StreamOwned<C, S>)
where
    C: DerefMut + Deref<Target = ConnectionCommon<D>>,
    D: SideData,
    S: Read + Write,
{
    s.conn.send_close_notify();
    let _ = s.conn.complete_io(&mut s.sock);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::CertificateError as C;

    /// Each cause of a failed upstream handshake has its own words, each naming
    /// `upstream_ca_file`.
    #[test]
    fn each_tls_failure_is_named_with_the_setting_that_fixes_it() {
        let words = |c: C| {
            let e = io::Error::new(
                io::ErrorKind::InvalidData,
                rustls::Error::InvalidCertificate(c),
            );
            failure_words(&e)
        };
        let cases = [
            (words(C::UnknownIssuer), "from an unknown issuer"),
            (words(C::BadSignature), "from an unknown issuer"),
            (words(C::Expired), "has expired"),
            (words(C::NotValidForName), "(name mismatch)"),
            (words(C::NotValidYet), "not valid yet"),
            (words(C::Revoked), "was refused"),
            (
                failure_words(&io::ErrorKind::WouldBlock.into()),
                "longer than 10 s",
            ),
            (
                failure_words(&io::ErrorKind::UnexpectedEof.into()),
                "(not TLS?)",
            ),
        ];
        for (w, cause) in cases {
            assert!(w.contains(cause), "{w}");
            assert!(w.contains("upstream_ca_file"), "{w}");
        }
    }

    /// The bundle's certificates are those pki-types' PEM reader finds, in order: in the system
    /// bundle when there is one, and in a bundle with CR LF line ends, text around the sections,
    /// a section of another kind and one whose base64 is broken (both skipped).
    #[test]
    fn a_bundle_gives_the_certificates_pki_types_reads() {
        let pki = |pem: &[u8]| {
            CertificateDer::pem_slice_iter(pem)
                .filter_map(Result::ok)
                .collect::<Vec<_>>()
        };
        if let Ok(system) = std::fs::read("/etc/ssl/certs/ca-certificates.crt") {
            let got = bundle_certificates(&system);
            assert!(got.len() > 10, "{}", got.len());
            assert_eq!(got, pki(&system));
        }
        let ca = |cn: &str| {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, cn);
            params.self_signed(&key).unwrap().pem()
        };
        let (a, b) = (ca("a"), ca("b"));
        let mixed = format!(
            "# a comment\n{}\n-----BEGIN TRUSTED CERTIFICATE-----\nAAAA\n-----END TRUSTED \
             CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\n!!notbase64!!\n-----END \
             CERTIFICATE-----\n{}trailing text\n",
            a.replace('\n', "\r\n"),
            b
        );
        let got = bundle_certificates(mixed.as_bytes());
        assert_eq!(got.len(), 2);
        assert_eq!(got, pki(mixed.as_bytes()));
        assert_eq!(got, [pki(a.as_bytes()), pki(b.as_bytes())].concat());
    }

    /// `read_ca_file`'s example.
    #[test]
    fn read_ca_file_doc_example() {
        let e = crate::stand_in::read_ca_file("/nonexistent/ca.pem".as_ref()).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("upstream_ca_file /nonexistent/ca.pem: "));
    }
}
