//! Local HTTP listeners on `127.0.0.1` for the network and attack tests:
//! - [`Listener`] records every connection and request head and answers each with one fixed
//!   response: the allowed and the refused destination of the network tests;
//! - [`AuthListener`] stands in for an attacker's endpoint: it answers every request `400` (a
//!   JSON API error, so a client gives up) and keeps, per credential header it receives
//!   (`Authorization`, with any `Bearer ` prefix removed, and `x-api-key`), only the SHA-256 of
//!   the value, never the value.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// A running listener (it lives as long as the test process).
#[derive(Debug)]
pub struct Listener {
    /// Its port on `127.0.0.1`.
    pub port: u16,
    connections: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
}

/// `200 OK` with the body `hello`.
pub const HELLO: &str = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";

impl Listener {
    /// Listens on a free port of `127.0.0.1`; answers every request head with `response`, then
    /// closes the connection.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// let l = relay_tests::listener::Listener::start(relay_tests::listener::HELLO);
    /// let mut s = std::net::TcpStream::connect(("127.0.0.1", l.port))?;
    /// s.write_all(b"GET / HTTP/1.1\r\n\r\n")?;
    /// let mut answer = String::new();
    /// s.read_to_string(&mut answer)?;
    /// assert!(answer.ends_with("hello"));
    /// assert_eq!(l.connections(), 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn start(response: &'static str) -> Listener {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = l.local_addr().expect("local address").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (c, h) = (Arc::clone(&connections), Arc::clone(&heads));
        thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                c.fetch_add(1, Ordering::SeqCst);
                let h = Arc::clone(&h);
                thread::spawn(move || {
                    let head = read_head(&mut s);
                    h.lock().unwrap().push(head);
                    let _ = s.write_all(response.as_bytes());
                });
            }
        });
        Listener {
            port,
            connections,
            heads,
        }
    }

    /// How many connections it accepted.
    ///
    /// ```
    /// let l = relay_tests::listener::Listener::start(relay_tests::listener::HELLO);
    /// assert_eq!(l.connections(), 0);
    /// ```
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// The request heads it read (request line and headers), in arrival order.
    ///
    /// ```
    /// let l = relay_tests::listener::Listener::start(relay_tests::listener::HELLO);
    /// assert!(l.heads().is_empty());
    /// ```
    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

fn read_head(s: &mut TcpStream) -> String {
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    let mut b = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// The value after `Bearer ` in a head's `Authorization` header (any case), if any.
///
/// ```
/// let head = "POST / HTTP/1.1\r\nauthorization: Bearer abc\r\n\r\n";
/// assert_eq!(relay_tests::listener::bearer(head), Some("abc"));
/// ```
pub fn bearer(head: &str) -> Option<&str> {
    head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        if !name.trim().eq_ignore_ascii_case("authorization") {
            return None;
        }
        value.trim().strip_prefix("Bearer ")
    })
}

/// The cap on one request's header block.
const HEAD_CAP: usize = 64 * 1024;

/// A running listener; dropping it stops the accepting thread.
#[derive(Debug)]
pub struct AuthListener {
    port: u16,
    hashes: Arc<Mutex<Vec<String>>>,
    requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl AuthListener {
    /// Binds a free port on `127.0.0.1` and starts accepting on a thread.
    ///
    /// ```
    /// let l = relay_tests::listener::AuthListener::start();
    /// assert!(l.url().starts_with("http://127.0.0.1:"));
    /// assert_eq!(l.requests(), 0);
    /// ```
    pub fn start() -> AuthListener {
        let sock = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = sock.local_addr().unwrap().port();
        let hashes = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, r, s) = (hashes.clone(), requests.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in sock.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(conn) = conn {
                    let found = serve(conn);
                    // The hashes first: a reader that sees the count sees them.
                    h.lock().unwrap().extend(found);
                    r.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        AuthListener {
            port,
            hashes,
            requests,
            stop,
        }
    }

    /// `http://127.0.0.1:PORT`.
    ///
    /// ```
    /// let l = relay_tests::listener::AuthListener::start();
    /// assert!(l.url().ends_with(&l.port().to_string()));
    /// ```
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The port.
    ///
    /// ```
    /// assert!(relay_tests::listener::AuthListener::start().port() > 0);
    /// ```
    pub fn port(&self) -> u16 {
        self.port
    }

    /// How many connections were served.
    ///
    /// ```
    /// let l = relay_tests::listener::AuthListener::start();
    /// std::net::TcpStream::connect(("127.0.0.1", l.port()))?.shutdown(std::net::Shutdown::Both)?;
    /// for _ in 0..500 { if l.requests() == 1 { break } std::thread::sleep(std::time::Duration::from_millis(10)) }
    /// assert_eq!(l.requests(), 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// The SHA-256 (hex) of every credential value received so far, in order.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// let l = relay_tests::listener::AuthListener::start();
    /// let mut c = std::net::TcpStream::connect(("127.0.0.1", l.port()))?;
    /// c.write_all(b"GET / HTTP/1.1\r\nAuthorization: Bearer abc\r\n\r\n")?;
    /// c.read_to_end(&mut Vec::new())?;
    /// for _ in 0..500 { if l.requests() == 1 { break } std::thread::sleep(std::time::Duration::from_millis(10)) }
    /// assert_eq!(l.credential_hashes(), [relay_tests::sha256_hex(b"abc")]);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn credential_hashes(&self) -> Vec<String> {
        self.hashes.lock().unwrap().clone()
    }
}

impl Drop for AuthListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Reads one request's header block, answers 400, returns the credential hashes.
fn serve(mut conn: TcpStream) -> Vec<String> {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while head.len() < HEAD_CAP && !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut found = Vec::new();
    for line in text.split("\r\n").skip(1) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim().to_ascii_lowercase();
        if name == "authorization" || name == "x-api-key" {
            let value = value.trim();
            let value = value.strip_prefix("Bearer ").unwrap_or(value);
            found.push(crate::sha256_hex(value.as_bytes()));
        }
    }
    head.iter_mut().for_each(|b| *b = 0);
    let body = br#"{"type":"error","error":{"type":"invalid_request_error","message":"relay test listener"}}"#;
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(answer.as_bytes());
    let _ = conn.write_all(body);
    found
}
