//! A fake Anthropic internet (Linux, root): a private network namespace holding only `lo`,
//! where the hosts Claude Code talks to ([`HOSTS`]) are served over TLS on port 443 by this
//! process, and a command run inside it ([`FakeInternet::enter`]) sees, in a private mount
//! namespace, an `/etc/hosts` that names them and a system CA bundle that trusts the test CA.
//!
//! - Each host has an address of its own, `192.0.2.N` (TEST-NET-1: not a local address, so
//!   relay's proxy, which refuses loopback, connects to it); the namespace routes the whole
//!   `192.0.2.0/24` to `lo`, so nothing leaves the machine (there is no other interface).
//! - `/etc/hosts` is the fake internet's names first, then the machine's own file;
//!   `/etc/ssl/certs/ca-certificates.crt` is the machine's bundle plus the test CA. Both are
//!   bind-mounted in the command's own mount namespace (propagation private), so its
//!   descendants (relay-host, its proxies, bwrap, which binds `/etc` from there, and the
//!   sandboxed Claude Code) see them, and the machine does not.
//! - `api.anthropic.com` is the Messages API fixture ([`FakeInternet::serve_api`]); every other
//!   host answers `GET /api/hello` and `GET /v1/oauth/hello` with `200` and JSON, everything
//!   else with a plain `404`.
//! - Every request is recorded ([`Hit`]): when, the host (by the address it came to, not by
//!   what the client claimed), method, path, and the credential headers by SHA-256 only.
//!
//! The namespace lives as long as this value or a process inside it; the servers stop when it
//! is dropped.
//!
//! ```no_run
//! use relay_tests::fake_internet::{FakeInternet, API};
//! use relay_tests::messages_api::Step;
//! let net = FakeInternet::start();
//! let api = net.serve_api(vec![Step::text("done")]);
//! let mut cmd = std::process::Command::new("curl");
//! cmd.args(["-s", "https://platform.claude.com/v1/oauth/hello"]);
//! net.enter(&mut cmd);
//! assert!(cmd.status()?.success());
//! assert_eq!(net.hits()[0].host, "platform.claude.com");
//! # drop(api);
//! # Ok::<(), std::io::Error>(())
//! ```

use std::ffi::CString;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::messages_api::{find, parse_head, wake_listener, MessagesApi, Seen, Step};
use crate::tls::TestCa;

/// The hosts served, in the order of their addresses (`192.0.2.1` is `api.anthropic.com`).
pub const HOSTS: [&str; 7] = [
    API,
    "platform.claude.com",
    "claude.ai",
    "downloads.claude.ai",
    "github.com",
    "raw.githubusercontent.com",
    "registry.npmjs.org",
];

/// The Messages API's host.
pub const API: &str = "api.anthropic.com";

/// The paths answered `200` on every host but the API (first-run onboarding's checks).
pub const HELLO_PATHS: [&str; 2] = ["/api/hello", "/v1/oauth/hello"];

/// The system CA bundle the command sees replaced.
const BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// How long a client may take to send a request.
const TIMEOUT: Duration = Duration::from_secs(20);
/// The longest request head (and the most body) read.
const MAX_READ: usize = 1 << 20;

/// A credential header of one request, by hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// `authorization` or `x-api-key`.
    pub header: &'static str,
    /// True for `Authorization: Bearer ...`.
    pub bearer: bool,
    /// SHA-256 (hex) of the value (less `Bearer `).
    pub sha256: String,
}

/// One request the fake internet answered.
#[derive(Debug, Clone)]
pub struct Hit {
    /// When its head was read.
    pub at: Instant,
    /// The host it reached (by the address it came to).
    pub host: &'static str,
    /// Its method.
    pub method: String,
    /// Its path, without the query.
    pub path: String,
    /// The credential headers it carried.
    pub credentials: Vec<Credential>,
}

impl Hit {
    fn new(host: &'static str, s: &Seen) -> Hit {
        let auth = s.authorization_sha256.as_ref().map(|h| Credential {
            header: "authorization",
            bearer: s.bearer,
            sha256: h.clone(),
        });
        let key = s.api_key_sha256.as_ref().map(|h| Credential {
            header: "x-api-key",
            bearer: false,
            sha256: h.clone(),
        });
        Hit {
            at: s.at,
            host,
            method: s.method.clone(),
            path: s.path.clone(),
            credentials: auth.into_iter().chain(key).collect(),
        }
    }
}

/// The running fake internet (see the module).
pub struct FakeInternet {
    dir: tempfile::TempDir,
    netns: OwnedFd,
    ca: TestCa,
    hits: Arc<Mutex<Vec<Hit>>>,
    api_log: OnceLock<Arc<Mutex<Vec<Seen>>>>,
    sites: Vec<TcpListener>,
    stop: Arc<AtomicBool>,
}

/// The address of [`HOSTS`]`[i]`.
fn address(i: usize) -> String {
    format!("192.0.2.{}", i + 1)
}

impl FakeInternet {
    /// Makes the namespace, the files and every host's server but the API's
    /// ([`FakeInternet::serve_api`]). Panics when it cannot (not root, no `ip`).
    pub fn start() -> FakeInternet {
        let dir = tempfile::Builder::new()
            .prefix("relay-fake-internet.")
            .tempdir_in("/var/tmp")
            .expect("a folder in /var/tmp");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let ca = TestCa::for_names(&HOSTS);
        let netns = new_namespace().expect("a network namespace (root and `ip` needed)");
        let mut net = FakeInternet {
            dir,
            netns,
            ca,
            hits: Arc::default(),
            api_log: OnceLock::new(),
            sites: Vec::new(),
            stop: Arc::default(),
        };
        net.write_files();
        for (i, host) in HOSTS.iter().enumerate().skip(1) {
            let sock = net.in_namespace(|| TcpListener::bind((address(i).as_str(), 443)));
            let sock = sock.unwrap_or_else(|e| panic!("bind {}:443: {e}", address(i)));
            net.serve_site(host, &sock);
            net.sites.push(sock);
        }
        net
    }

    /// Serves `script` as `api.anthropic.com` ([`MessagesApi::serve_tls`]); once only.
    pub fn serve_api(&self, script: Vec<Step>) -> MessagesApi {
        let sock = self.in_namespace(|| TcpListener::bind((address(0).as_str(), 443)));
        let api = MessagesApi::serve_tls(sock.expect("bind the API's address"), script, &self.ca);
        assert!(
            self.api_log.set(api.log()).is_ok(),
            "the API is served once"
        );
        api
    }

    /// Runs `f` on a thread inside the namespace (a socket it makes stays there).
    pub fn in_namespace<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let fd = self.netns.as_raw_fd();
        std::thread::scope(|s| {
            s.spawn(move || {
                // SAFETY: setns(2) of this thread only, on a namespace descriptor we hold.
                let r = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
                assert_eq!(r, 0, "setns: {}", io::Error::last_os_error());
                f()
            })
            .join()
            .expect("the namespace thread")
        })
    }

    /// Makes `cmd` run inside: in the network namespace, and in a mount namespace of its own
    /// where `/etc/hosts` and the system CA bundle are the fake internet's. For `setpriv ...`
    /// too: this happens as root, before the program starts.
    pub fn enter(&self, cmd: &mut Command) {
        let netns = self.netns.as_raw_fd();
        let c = |p: &Path| CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        let binds = [
            (c(&self.hosts_file()), c("/etc/hosts".as_ref())),
            (c(&self.bundle_file()), c(BUNDLE.as_ref())),
        ];
        // SAFETY: between fork and exec the closure makes only system calls (no allocation,
        // no lock) on descriptors and strings made before the fork.
        unsafe {
            cmd.pre_exec(move || enter_namespaces(netns, &binds));
        }
    }

    /// The test CA's certificate (PEM file), for a stand-in mode's `upstream_ca_file`.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The `/etc/hosts` a command inside sees.
    pub fn hosts_file(&self) -> PathBuf {
        self.dir.path().join("hosts")
    }

    /// The CA bundle a command inside sees at `/etc/ssl/certs/ca-certificates.crt`.
    pub fn bundle_file(&self) -> PathBuf {
        self.dir.path().join("ca-certificates.crt")
    }

    /// Every request so far on every host, in the order their heads were read.
    pub fn hits(&self) -> Vec<Hit> {
        let mut all = self.hits.lock().unwrap().clone();
        if let Some(log) = self.api_log.get() {
            all.extend(log.lock().unwrap().iter().map(|s| Hit::new(API, s)));
        }
        all.sort_by_key(|h| h.at);
        all
    }

    /// The requests so far, one a line: milliseconds since `since`, host, method, path, and
    /// `bearer`/`key` for a credential (its hash's first 8 digits).
    pub fn report(&self, since: Instant) -> String {
        let line = |h: &Hit| {
            let creds: Vec<String> = (h.credentials.iter())
                .map(|c| format!("{}:{}", c.header, &c.sha256[..8]))
                .collect();
            let ms = h.at.saturating_duration_since(since).as_millis();
            format!(
                "{ms:>6} ms {} {} {} {}",
                h.host,
                h.method,
                h.path,
                creds.join(" ")
            )
        };
        self.hits().iter().map(line).collect::<Vec<_>>().join("\n")
    }

    /// The credential hashed `sha256` reached `api.anthropic.com` (at least once) and nowhere
    /// else, only as `Authorization: Bearer`.
    pub fn assert_only_bearer_to_api(&self, sha256: &str) {
        let hits = self.hits();
        let carrying: Vec<&Hit> = (hits.iter())
            .filter(|h| h.credentials.iter().any(|c| c.sha256 == sha256))
            .collect();
        assert!(!carrying.is_empty(), "the credential reached no host");
        for h in carrying {
            assert_eq!(h.host, API, "{} {} {} carried it", h.host, h.method, h.path);
            for c in h.credentials.iter().filter(|c| c.sha256 == sha256) {
                assert!(c.bearer && c.header == "authorization", "{h:?}");
            }
        }
    }

    fn write_files(&self) {
        let mut hosts: String = (HOSTS.iter().enumerate())
            .map(|(i, h)| format!("{} {h}\n", address(i)))
            .collect();
        hosts.push_str(&std::fs::read_to_string("/etc/hosts").unwrap_or_default());
        let mut bundle = std::fs::read_to_string(BUNDLE).unwrap_or_default();
        bundle.push('\n');
        bundle.push_str(&self.ca.pem());
        for (path, text) in [
            (self.hosts_file(), hosts),
            (self.bundle_file(), bundle),
            (self.ca_file(), self.ca.pem()),
        ] {
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }

    /// Accepts on `sock` (a thread per connection) as `host`.
    fn serve_site(&self, host: &'static str, sock: &TcpListener) {
        let sock = sock.try_clone().expect("a second handle on the socket");
        let (cfg, hits, stop) = (
            self.ca.server_config(),
            self.hits.clone(),
            self.stop.clone(),
        );
        std::thread::spawn(move || {
            for conn in sock.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (cfg, hits) = (cfg.clone(), hits.clone());
                std::thread::spawn(move || serve_site_once(conn, cfg, host, &hits));
            }
        });
    }
}

impl Drop for FakeInternet {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.sites.iter().for_each(wake_listener);
    }
}

/// A new network namespace with `lo` up and `192.0.2.0/24` local, made on a thread of its own
/// (network namespaces are per thread); its descriptor.
fn new_namespace() -> io::Result<OwnedFd> {
    std::thread::spawn(|| {
        // SAFETY: unshare(2) of this thread's network namespace only; the thread ends here.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        for args in [
            &["link", "set", "lo", "up"][..],
            &["route", "add", "local", "192.0.2.0/24", "dev", "lo"],
        ] {
            // A child made from this thread starts in its namespace.
            let out = Command::new("ip").args(args).output()?;
            if !out.status.success() {
                return Err(io::Error::other(format!("ip {args:?}: {out:?}")));
            }
        }
        Ok(std::fs::File::open("/proc/thread-self/ns/net")?.into())
    })
    .join()
    .expect("the namespace thread")
}

/// In a child before exec: joins the network namespace `netns`, makes a private mount
/// namespace and bind-mounts each `(file, over)`.
fn enter_namespaces(netns: i32, binds: &[(CString, CString)]) -> io::Result<()> {
    let check = |r: libc::c_int| {
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    let null = std::ptr::null();
    // SAFETY: plain system calls on a descriptor and NUL-terminated strings that live on.
    unsafe {
        check(libc::setns(netns, libc::CLONE_NEWNET))?;
        check(libc::unshare(libc::CLONE_NEWNS))?;
        let flags = libc::MS_REC | libc::MS_PRIVATE;
        check(libc::mount(null, c"/".as_ptr(), null, flags, null as _))?;
        for (from, over) in binds {
            check(libc::mount(
                from.as_ptr(),
                over.as_ptr(),
                null,
                libc::MS_BIND,
                null as _,
            ))?;
        }
    }
    Ok(())
}

/// Reads one request on `conn` (TLS), records it as `host`, answers it, closes.
fn serve_site_once(
    conn: TcpStream,
    cfg: Arc<rustls::ServerConfig>,
    host: &'static str,
    hits: &Mutex<Vec<Hit>>,
) {
    let _ = conn.set_read_timeout(Some(TIMEOUT));
    let _ = conn.set_write_timeout(Some(TIMEOUT));
    let Ok(tls) = rustls::ServerConnection::new(cfg) else {
        return;
    };
    let mut s = rustls::StreamOwned::new(tls, conn);
    let Ok(Some(seen)) = read_request(&mut s) else {
        return;
    };
    let hello = HELLO_PATHS.contains(&seen.path.as_str()) && seen.method == "GET";
    hits.lock().unwrap().push(Hit::new(host, &seen));
    let (status, ctype, body) = if hello {
        ("200 OK", "application/json", "{\"message\":\"hello\"}")
    } else {
        ("404 Not Found", "text/plain", "not found\n")
    };
    let _ = write!(
        s,
        "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    s.conn.send_close_notify();
    let _ = s.flush();
    let _ = s.sock.shutdown(Shutdown::Both);
}

/// One request's head (zeroed once parsed) and as much of its body as it says it has (read
/// and dropped); `None` when the client closed first.
fn read_request<S: Read>(conn: &mut S) -> io::Result<Option<Seen>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let end = loop {
        if let Some(at) = find(&buf, b"\r\n\r\n") {
            break at + 4;
        }
        let n = conn.read(&mut chunk)?;
        if n == 0 || buf.len() > MAX_READ {
            buf.iter_mut().for_each(|b| *b = 0);
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let seen = parse_head(&buf[..end]);
    let length = crate::messages_api::content_length(&buf[..end]).unwrap_or(0);
    let mut got = buf.len() - end;
    buf.iter_mut().for_each(|b| *b = 0);
    while got < length.min(MAX_READ) {
        match conn.read(&mut chunk)? {
            0 => break,
            n => got += n,
        }
    }
    Ok(Some(seen))
}
