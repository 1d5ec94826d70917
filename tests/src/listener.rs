//! A TCP listener on `127.0.0.1` that records every connection and request head, and answers
//! each with one fixed response: the allowed and the refused destination of the network tests.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
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
