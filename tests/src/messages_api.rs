//! A local stand-in for the Messages API on `127.0.0.1`, written from the public API
//! documentation, for turns of the real Claude Code against a script.
//!
//! - `POST /v1/messages` (any query string) answers in the shape asked for: a server-sent event
//!   stream (`message_start`, `content_block_start`, `content_block_delta` with `text_delta` or
//!   `input_json_delta`, `content_block_stop`, `message_delta`, `message_stop`) when the body
//!   says `"stream": true`, else one JSON message.
//! - A request whose body offers `tools` is the main conversation: it gets the script's step
//!   numbered by how many assistant turns its `messages` already hold (so a retry gets the same
//!   step, and side calls never advance the script); past the end, a short final text. Any other
//!   messages request (titles, summaries, checks) gets a short text.
//! - A body sent `Content-Encoding: gzip` (Claude Code compresses its messages requests when it
//!   talks to the API without a proxy) is read decompressed (by `gzip -dc`).
//! - `POST /v1/messages/count_tokens` answers a token count; the start-up checks
//!   `GET /api/claude_code/policy_limits` and `GET /api/claude_code/settings` answer an empty
//!   policy and no managed settings, in the shape Claude Code accepts (answered `{}`, Claude
//!   Code 2.1.332 retries the policy for its whole five-second start-up budget); every other path
//!   a `200` with `{}`.
//!
//! Every request is recorded (`Seen`): method, path, a few non-secret headers, and of the
//! credential headers (`Authorization`, less any `Bearer ` prefix, and `x-api-key`) only the
//! SHA-256. The request head is zeroed once read.
//!
//! [`MessagesApi::start`](crate::messages_api::MessagesApi::start) serves plain HTTP; on Linux
//! [`MessagesApi::start_tls`](crate::messages_api::MessagesApi::start_tls) serves the same
//! over TLS with a leaf for `127.0.0.1` signed by a test CA ([`crate::tls::TestCa`]), for the
//! stand-in mode's upstream.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The longest request head read.
const MAX_HEAD: usize = 64 * 1024;
/// The largest request body read (Claude Code's requests carry its whole system prompt and
/// tool list).
const MAX_BODY: usize = 32 * 1024 * 1024;
/// How long a client may take to send a request.
const READ_TIMEOUT: Duration = Duration::from_secs(20);
/// The headers recorded by value (none of them a credential).
const KEPT_HEADERS: [&str; 6] = [
    "user-agent",
    "anthropic-version",
    "anthropic-beta",
    "x-app",
    "content-type",
    "host",
];

/// One scripted answer of the main conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A `tool_use` block for `name` with `input` (stop reason `tool_use`).
    Tool {
        /// The tool's name (`Bash`, `Write`, `Edit`, `Read`).
        name: String,
        /// Its input.
        input: Value,
    },
    /// A final text (stop reason `end_turn`).
    Text(String),
}

impl Step {
    /// A `Bash` tool call running `command`.
    ///
    /// ```
    /// let s = relay_tests::messages_api::Step::bash("git status");
    /// assert!(matches!(s, relay_tests::messages_api::Step::Tool { ref name, .. } if name == "Bash"));
    /// ```
    pub fn bash(command: &str) -> Step {
        Step::tool(
            "Bash",
            json!({"command": command, "description": "Scripted command"}),
        )
    }

    /// A tool call of any tool.
    ///
    /// ```
    /// let s = relay_tests::messages_api::Step::tool("Read", serde_json::json!({"file_path": "/x"}));
    /// # drop(s);
    /// ```
    pub fn tool(name: &str, input: Value) -> Step {
        Step::Tool {
            name: name.to_string(),
            input,
        }
    }

    /// A final text.
    ///
    /// ```
    /// assert_eq!(relay_tests::messages_api::Step::text("done"), relay_tests::messages_api::Step::Text("done".into()));
    /// ```
    pub fn text(text: &str) -> Step {
        Step::Text(text.to_string())
    }
}

/// What the fixture recorded of one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// The method (`POST`, `GET`, ...).
    pub method: String,
    /// The path, without the query string.
    pub path: String,
    /// The query string (after `?`), if any.
    pub query: Option<String>,
    /// The non-secret headers it carried (`user-agent`, `anthropic-version`, `anthropic-beta`,
    /// `x-app`, `content-type`, `host`), names in lower case, in arrival order.
    pub headers: Vec<(String, String)>,
    /// SHA-256 (hex) of the `Authorization` value, less any `Bearer ` prefix.
    pub authorization_sha256: Option<String>,
    /// True when the `Authorization` value started with `Bearer `.
    pub bearer: bool,
    /// SHA-256 (hex) of the `x-api-key` value.
    pub api_key_sha256: Option<String>,
    /// True for a messages request of the main conversation (its body offers `tools`).
    pub main: bool,
    /// The script step it was answered with (main conversation only).
    pub step: Option<usize>,
    /// True when the body asked for a stream.
    pub stream: bool,
    /// The body's `model`, if any.
    pub model: Option<String>,
    /// The text of each `tool_result` block in the body's last message, in order.
    pub tool_results: Vec<String>,
    /// When its head was read.
    pub at: Instant,
}

impl Seen {
    /// The recorded value of header `name` (lower case), if any.
    ///
    /// ```no_run
    /// # let s: relay_tests::messages_api::Seen = unimplemented!();
    /// let ua = s.header("user-agent");
    /// # drop(ua);
    /// ```
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A running fixture; dropping it stops the accepting thread.
#[derive(Debug)]
pub struct MessagesApi {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// The connections accepted so far (a refused TLS handshake counts: an attempt).
    connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    tls: bool,
    /// The listening socket, shut down to wake the accepting thread when dropped.
    sock: TcpListener,
}

/// How the fixture speaks on each connection: plain HTTP, or TLS first.
#[derive(Clone)]
enum Wire {
    Plain,
    #[cfg(target_os = "linux")]
    Tls(Arc<rustls::ServerConfig>),
}

impl MessagesApi {
    /// Binds a free port of `127.0.0.1` and serves `script` (each connection on a thread of its
    /// own).
    ///
    /// ```
    /// let api = relay_tests::messages_api::MessagesApi::start(vec![]);
    /// assert!(api.base_url().starts_with("http://127.0.0.1:"));
    /// assert!(api.seen().is_empty());
    /// ```
    pub fn start(script: Vec<Step>) -> MessagesApi {
        MessagesApi::start_on(script, Wire::Plain)
    }

    /// As [`MessagesApi::start`], over TLS: the leaf for `127.0.0.1` (and `localhost`) that
    /// `ca` signed, ALPN `http/1.1`; [`MessagesApi::base_url`] is `https://127.0.0.1:PORT`.
    ///
    /// ```
    /// let ca = relay_tests::tls::TestCa::new();
    /// let api = relay_tests::messages_api::MessagesApi::start_tls(vec![], &ca);
    /// assert!(api.base_url().starts_with("https://127.0.0.1:"));
    /// ```
    #[cfg(target_os = "linux")]
    pub fn start_tls(script: Vec<Step>, ca: &crate::tls::TestCa) -> MessagesApi {
        MessagesApi::start_on(script, Wire::Tls(ca.server_config()))
    }

    /// As [`MessagesApi::start_tls`], on `sock` (bound by the caller: the fake internet's
    /// `api.anthropic.com:443`, [`crate::fake_internet`]).
    #[cfg(target_os = "linux")]
    pub fn serve_tls(sock: TcpListener, script: Vec<Step>, ca: &crate::tls::TestCa) -> MessagesApi {
        MessagesApi::serve(sock, script, Wire::Tls(ca.server_config()))
    }

    fn start_on(script: Vec<Step>, wire: Wire) -> MessagesApi {
        let sock = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        MessagesApi::serve(sock, script, wire)
    }

    fn serve(sock: TcpListener, script: Vec<Step>, wire: Wire) -> MessagesApi {
        let tls = !matches!(wire, Wire::Plain);
        let port = sock.local_addr().expect("local address").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(AtomicUsize::new(0));
        let script = Arc::new(script);
        let (seen2, stop2) = (Arc::clone(&seen), Arc::clone(&stop));
        let counted = Arc::clone(&connections);
        let listening = sock.try_clone().expect("a second handle on the socket");
        std::thread::spawn(move || {
            for conn in listening.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                counted.fetch_add(1, Ordering::SeqCst);
                let (seen, script) = (Arc::clone(&seen2), Arc::clone(&script));
                let wire = wire.clone();
                std::thread::spawn(move || {
                    let _ = serve_on(conn, &wire, &script, &seen);
                });
            }
        });
        MessagesApi {
            port,
            seen,
            connections,
            stop,
            tls,
            sock,
        }
    }

    /// Its port on `127.0.0.1`.
    ///
    /// ```
    /// assert!(relay_tests::messages_api::MessagesApi::start(vec![]).port() > 0);
    /// ```
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT` (`https://` when served over TLS), for `ANTHROPIC_BASE_URL`.
    ///
    /// ```
    /// let api = relay_tests::messages_api::MessagesApi::start(vec![]);
    /// assert!(api.base_url().ends_with(&api.port().to_string()));
    /// ```
    pub fn base_url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// Every request recorded so far, in the order they were read.
    ///
    /// ```
    /// assert!(relay_tests::messages_api::MessagesApi::start(vec![]).seen().is_empty());
    /// ```
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The connections accepted so far, whether or not a request came on them (a client that
    /// refused the TLS handshake made one too): the attempts to reach the fixture.
    ///
    /// ```
    /// assert_eq!(relay_tests::messages_api::MessagesApi::start(vec![]).connections(), 0);
    /// ```
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// The record itself, shared (the fake internet reads it).
    #[cfg(target_os = "linux")]
    pub(crate) fn log(&self) -> Arc<Mutex<Vec<Seen>>> {
        Arc::clone(&self.seen)
    }

    /// The main conversation's requests recorded so far.
    ///
    /// ```
    /// assert!(relay_tests::messages_api::MessagesApi::start(vec![]).main_requests().is_empty());
    /// ```
    pub fn main_requests(&self) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.main).collect()
    }
}

impl Drop for MessagesApi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread so it sees the flag (on Linux a listening socket shut down
        // fails its blocked accept with EINVAL), wherever the socket was bound.
        wake_listener(&self.sock);
    }
}

/// Shuts `sock` down so that a thread blocked in its `accept` wakes (on Linux with `EINVAL`),
/// from any network namespace.
pub(crate) fn wake_listener(sock: &TcpListener) {
    use std::os::fd::AsRawFd;
    // SAFETY: shutdown(2) on a descriptor the listener owns and keeps open.
    unsafe { libc::shutdown(sock.as_raw_fd(), libc::SHUT_RDWR) };
}

/// Serves one connection (after a TLS handshake, for [`Wire::Tls`]), then closes it.
fn serve_on(
    conn: TcpStream,
    wire: &Wire,
    script: &[Step],
    seen: &Mutex<Vec<Seen>>,
) -> io::Result<()> {
    conn.set_read_timeout(Some(READ_TIMEOUT))?;
    conn.set_write_timeout(Some(READ_TIMEOUT))?;
    match wire {
        Wire::Plain => {
            let mut conn = conn;
            serve(&mut conn, script, seen)?;
            let _ = conn.shutdown(Shutdown::Both);
        }
        #[cfg(target_os = "linux")]
        Wire::Tls(config) => {
            let tls =
                rustls::ServerConnection::new(Arc::clone(config)).map_err(io::Error::other)?;
            let mut s = rustls::StreamOwned::new(tls, conn);
            serve(&mut s, script, seen)?;
            s.conn.send_close_notify();
            let _ = s.flush();
            let _ = s.sock.shutdown(Shutdown::Both);
        }
    }
    Ok(())
}

/// Reads one request, records it, answers it.
fn serve<S: Read + Write>(
    conn: &mut S,
    script: &[Step],
    seen: &Mutex<Vec<Seen>>,
) -> io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(at) = find(&buf, b"\r\n\r\n") {
            break at;
        }
        if buf.len() > MAX_HEAD {
            buf.iter_mut().for_each(|b| *b = 0);
            return Ok(());
        }
        match conn.read(&mut chunk)? {
            0 => {
                buf.iter_mut().for_each(|b| *b = 0);
                return Ok(());
            }
            n => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let mut rest = buf.split_off(head_end + 4);
    let mut head = buf;
    let mut rec = parse_head(&head);
    let length = content_length(&head);
    let chunked = is_chunked(&head);
    let gzipped = header_value(&String::from_utf8_lossy(&head), "content-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("gzip"));
    // The head held the credential: nothing of it outlives the parse.
    head.iter_mut().for_each(|b| *b = 0);
    drop(head);

    let body = if chunked {
        read_chunked(conn, rest)?
    } else {
        let want = length.unwrap_or(0).min(MAX_BODY);
        while rest.len() < want {
            match conn.read(&mut chunk)? {
                0 => break,
                n => rest.extend_from_slice(&chunk[..n]),
            }
        }
        rest
    };
    let body = if gzipped { gunzip(&body) } else { body };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);

    let answer = if rec.method == "POST" && rec.path == "/v1/messages" {
        rec.stream = body["stream"] == true;
        rec.model = body["model"].as_str().map(str::to_string);
        rec.main = body["tools"].as_array().is_some_and(|t| !t.is_empty());
        rec.tool_results = last_tool_results(&body);
        let step = if rec.main {
            let n = body["messages"]
                .as_array()
                .map(|m| m.iter().filter(|m| m["role"] == "assistant").count())
                .unwrap_or(0);
            rec.step = Some(n);
            script
                .get(n)
                .cloned()
                .unwrap_or_else(|| Step::text("The scripted turn is over."))
        } else {
            Step::text("Scripted side answer")
        };
        let model = rec.model.clone().unwrap_or_else(|| "claude-test".into());
        let id = format!("msg_relay_{}", seen.lock().unwrap().len());
        if rec.stream {
            Answer::Stream(sse_events(&id, &model, &step))
        } else {
            Answer::Json(message_json(&id, &model, &step))
        }
    } else if rec.path.ends_with("/count_tokens") {
        Answer::Json(json!({"input_tokens": 42}))
    } else if rec.path == "/api/claude_code/policy_limits" {
        Answer::Json(json!({"restrictions": {}}))
    } else if rec.path == "/api/claude_code/settings" {
        Answer::Json(json!({"uuid": "00000000-0000-4000-8000-000000000000",
                            "checksum": "relay-test-empty", "settings": {}}))
    } else {
        Answer::Json(json!({}))
    };
    seen.lock().unwrap().push(rec);

    match answer {
        Answer::Json(v) => {
            let body = v.to_string();
            write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 request-id: req_relay_test\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )?;
        }
        Answer::Stream(events) => {
            conn.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
                  request-id: req_relay_test\r\nconnection: close\r\n\r\n",
            )?;
            for (name, data) in events {
                write!(conn, "event: {name}\ndata: {data}\n\n")?;
                conn.flush()?;
            }
        }
    }
    Ok(())
}

enum Answer {
    Json(Value),
    Stream(Vec<(&'static str, Value)>),
}

/// The content block of a step, complete (for a non-streaming answer).
fn block(id: &str, step: &Step) -> Value {
    match step {
        Step::Tool { name, input } => {
            json!({"type": "tool_use", "id": format!("toolu_{id}"), "name": name, "input": input})
        }
        Step::Text(t) => json!({"type": "text", "text": t}),
    }
}

fn stop_reason(step: &Step) -> &'static str {
    match step {
        Step::Tool { .. } => "tool_use",
        Step::Text(_) => "end_turn",
    }
}

fn usage() -> Value {
    json!({"input_tokens": 12, "output_tokens": 8, "cache_creation_input_tokens": 0,
           "cache_read_input_tokens": 0})
}

/// A whole message for `step`.
fn message_json(id: &str, model: &str, step: &Step) -> Value {
    json!({
        "id": id, "type": "message", "role": "assistant", "model": model,
        "content": [block(id, step)],
        "stop_reason": stop_reason(step), "stop_sequence": null, "usage": usage(),
    })
}

/// The event stream for `step`: the block's content comes in two deltas, so a client must join
/// them.
fn sse_events(id: &str, model: &str, step: &Step) -> Vec<(&'static str, Value)> {
    let mut ev = vec![(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 12, "output_tokens": 1, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0},
        }}),
    )];
    let (start, parts, kind, field) = match step {
        Step::Tool { name, input } => (
            json!({"type": "tool_use", "id": format!("toolu_{id}"), "name": name, "input": {}}),
            halves(&input.to_string()),
            "input_json_delta",
            "partial_json",
        ),
        Step::Text(t) => (
            json!({"type": "text", "text": ""}),
            halves(t),
            "text_delta",
            "text",
        ),
    };
    ev.push((
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": start}),
    ));
    ev.push(("ping", json!({"type": "ping"})));
    for p in parts {
        ev.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": kind, field: p}}),
        ));
    }
    ev.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    ev.push((
        "message_delta",
        json!({"type": "message_delta",
               "delta": {"stop_reason": stop_reason(step), "stop_sequence": null},
               "usage": {"output_tokens": 8}}),
    ));
    ev.push(("message_stop", json!({"type": "message_stop"})));
    ev
}

/// `s` in two pieces split on a character boundary near its middle.
fn halves(s: &str) -> Vec<String> {
    let mut mid = s.len() / 2;
    while !s.is_char_boundary(mid) {
        mid += 1;
    }
    vec![s[..mid].to_string(), s[mid..].to_string()]
}

/// The text of every `tool_result` block in the last message of a messages request.
fn last_tool_results(body: &Value) -> Vec<String> {
    let Some(last) = body["messages"].as_array().and_then(|m| m.last()) else {
        return Vec::new();
    };
    let Some(blocks) = last["content"].as_array() else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| match &b["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        })
        .collect()
}

/// The request line and the kept headers; the credential headers by hash only.
pub(crate) fn parse_head(head: &[u8]) -> Seen {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let method = first.next().unwrap_or("").to_string();
    let target = first.next().unwrap_or("");
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), Some(q.to_string())),
        None => (target.to_string(), None),
    };
    let mut rec = Seen {
        method,
        path,
        query,
        headers: Vec::new(),
        authorization_sha256: None,
        bearer: false,
        api_key_sha256: None,
        main: false,
        step: None,
        stream: false,
        model: None,
        tool_results: Vec::new(),
        at: Instant::now(),
    };
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim().to_ascii_lowercase();
        let value = value.trim();
        match name.as_str() {
            "authorization" => {
                let bare = value.strip_prefix("Bearer ");
                rec.bearer = bare.is_some();
                rec.authorization_sha256 =
                    Some(crate::sha256_hex(bare.unwrap_or(value).as_bytes()));
            }
            "x-api-key" => rec.api_key_sha256 = Some(crate::sha256_hex(value.as_bytes())),
            n if KEPT_HEADERS.contains(&n) => rec.headers.push((name, value.to_string())),
            _ => {}
        }
    }
    rec
}

fn header_value<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.split("\r\n").skip(1).find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

pub(crate) fn content_length(head: &[u8]) -> Option<usize> {
    header_value(&String::from_utf8_lossy(head), "content-length")?
        .parse()
        .ok()
}

fn is_chunked(head: &[u8]) -> bool {
    header_value(&String::from_utf8_lossy(head), "transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
}

/// Reads a chunked body (`have` holds what came after the head), at most [`MAX_BODY`] bytes
/// and a bounded number of chunks.
fn read_chunked<S: Read>(conn: &mut S, mut have: Vec<u8>) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    for _ in 0..100_000 {
        let Some(line_end) = find(&have, b"\r\n") else {
            if have.len() > 1024 {
                break;
            }
            match conn.read(&mut chunk)? {
                0 => break,
                n => have.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let size_text = String::from_utf8_lossy(&have[..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
        if size == 0 {
            return Ok(body);
        }
        while have.len() < line_end + 2 + size + 2 {
            match conn.read(&mut chunk)? {
                0 => return Ok(body),
                n => have.extend_from_slice(&chunk[..n]),
            }
        }
        body.extend_from_slice(&have[line_end + 2..line_end + 2 + size]);
        if body.len() > MAX_BODY {
            break;
        }
        have.drain(..line_end + 2 + size + 2);
    }
    Ok(body)
}

/// `body` decompressed by `gzip -dc` (empty when it is not gzip).
fn gunzip(body: &[u8]) -> Vec<u8> {
    use std::process::{Command, Stdio};
    let Ok(mut gz) = Command::new("gzip")
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    else {
        return Vec::new();
    };
    let mut input = gz.stdin.take().expect("a piped stdin");
    let body = body.to_vec();
    let feed = std::thread::spawn(move || {
        let _ = input.write_all(&body);
    });
    let out = gz.wait_with_output().map(|o| o.stdout).unwrap_or_default();
    let _ = feed.join();
    out
}

pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `request` raw and returns the whole answer.
    fn exchange(api: &MessagesApi, request: &[u8]) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", api.port())).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(request).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    fn post(path: &str, auth: &str, body: &Value) -> Vec<u8> {
        let body = body.to_string();
        format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    /// The `(event, data)` pairs of an SSE body.
    fn events(answer: &str) -> Vec<(String, Value)> {
        let body = answer.split_once("\r\n\r\n").unwrap().1;
        body.split("\n\n")
            .filter(|e| !e.trim().is_empty())
            .map(|e| {
                let name = e.lines().find_map(|l| l.strip_prefix("event: ")).unwrap();
                let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
                (name.to_string(), serde_json::from_str(data).unwrap())
            })
            .collect()
    }

    #[test]
    fn a_stream_plays_the_script_by_assistant_turns() {
        let api = MessagesApi::start(vec![Step::bash("git status"), Step::text("all done")]);
        let tools = json!([{"name": "Bash", "input_schema": {"type": "object"}}]);
        let first = json!({"model": "m", "stream": true, "tools": tools,
                           "messages": [{"role": "user", "content": "go"}]});
        let answer = exchange(
            &api,
            &post("/v1/messages?beta=true", "Bearer tok-1", &first),
        );
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.contains("content-type: text/event-stream"));
        let ev = events(&answer);
        let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "ping",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        for (n, d) in &ev {
            assert_eq!(d["type"], n.as_str());
        }
        assert_eq!(ev[1].1["content_block"]["name"], "Bash");
        let json_text: String = ev[3..5]
            .iter()
            .map(|(_, d)| {
                assert_eq!(d["delta"]["type"], "input_json_delta");
                d["delta"]["partial_json"].as_str().unwrap().to_string()
            })
            .collect();
        let input: Value = serde_json::from_str(&json_text).unwrap();
        assert_eq!(input["command"], "git status");
        assert_eq!(ev[6].1["delta"]["stop_reason"], "tool_use");

        // The next main request (one assistant turn in) gets the final text, as JSON.
        let second = json!({"model": "m", "tools": tools, "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "clean"}]},
        ]});
        let answer = exchange(&api, &post("/v1/messages", "Bearer tok-1", &second));
        let v: Value = serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap();
        assert_eq!(v["content"][0]["text"], "all done");
        assert_eq!(v["stop_reason"], "end_turn");

        // A side call (no tools) and another path: answered, recorded, the script untouched.
        let side = json!({"model": "m", "messages": [{"role": "user", "content": "title?"}]});
        let answer = exchange(&api, &post("/v1/messages", "Bearer tok-1", &side));
        assert!(answer.contains("Scripted side answer"));
        let answer = exchange(&api, &post("/api/hello", "Bearer tok-1", &json!({})));
        assert!(answer.ends_with("{}"));

        let seen = api.seen();
        assert_eq!(seen.len(), 4);
        assert_eq!(seen[0].query.as_deref(), Some("beta=true"));
        assert_eq!(seen[0].step, Some(0));
        assert_eq!(seen[1].step, Some(1));
        assert_eq!(seen[1].tool_results, ["clean"]);
        assert!(!seen[2].main && seen[2].step.is_none());
        assert_eq!(seen[3].path, "/api/hello");
        for s in &seen {
            assert!(s.bearer);
            assert_eq!(
                s.authorization_sha256.as_deref(),
                Some(crate::sha256_hex(b"tok-1").as_str())
            );
            assert!(
                !format!("{s:?}").contains("tok-1"),
                "a record holds the value"
            );
        }
    }

    #[test]
    fn a_chunked_body_is_read() {
        let api = MessagesApi::start(vec![Step::text("hi")]);
        let body = json!({"model": "m", "tools": [{"name": "Bash"}], "messages": []}).to_string();
        let (a, b) = body.split_at(10);
        let req = format!(
            "POST /v1/messages HTTP/1.1\r\nx-api-key: k\r\nTransfer-Encoding: chunked\r\n\r\n\
             {:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
            a.len(),
            b.len()
        );
        let answer = exchange(&api, req.as_bytes());
        assert!(answer.contains("\"text\":\"hi\""), "{answer}");
        let seen = api.seen();
        assert_eq!(seen[0].api_key_sha256, Some(crate::sha256_hex(b"k")));
        assert!(seen[0].main && seen[0].authorization_sha256.is_none());
    }

    #[test]
    fn curl_gets_a_well_formed_stream() {
        if !std::path::Path::new("/usr/bin/curl").exists() {
            eprintln!("no /usr/bin/curl: the raw-socket test covers the stream");
            return;
        }
        let api = MessagesApi::start(vec![Step::text("from curl")]);
        let body = json!({"model": "m", "stream": true, "tools": [{"name": "Bash"}],
                          "messages": [{"role": "user", "content": "hi"}]});
        let out = std::process::Command::new("/usr/bin/curl")
            .args([
                "-sS",
                "-N",
                "--max-time",
                "10",
                "-H",
                "content-type: application/json",
            ])
            .arg("--data-binary")
            .arg(body.to_string())
            .arg(format!("{}/v1/messages", api.base_url()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.starts_with("event: message_start\n"), "{text}");
        assert!(text.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
        assert!(text.contains("\"text_delta\""));
    }

    /// A gzip-compressed body (as Claude Code sends its messages requests when no proxy is
    /// set) is read as its JSON: the request counts as the main conversation's.
    #[test]
    fn a_gzip_body_is_read() {
        let api = MessagesApi::start(vec![Step::text("unzipped")]);
        let body = json!({"model": "m", "tools": [{"name": "Bash"}], "messages": []}).to_string();
        let mut gz = std::process::Command::new("gzip")
            .arg("-c")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        gz.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
        let packed = gz.wait_with_output().unwrap().stdout;
        let mut req = format!(
            "POST /v1/messages HTTP/1.1\r\nContent-Encoding: gzip\r\n\
             Content-Length: {}\r\n\r\n",
            packed.len()
        )
        .into_bytes();
        req.extend_from_slice(&packed);
        let answer = exchange(&api, &req);
        assert!(answer.contains("\"text\":\"unzipped\""), "{answer}");
        assert!(api.seen()[0].main);
    }

    /// The start-up checks get answers in the shape Claude Code 2.1.332 accepts (an empty
    /// policy, no managed settings), so its start does not wait out their retries.
    #[test]
    fn the_start_up_checks_are_answered_in_shape() {
        let api = MessagesApi::start(vec![]);
        let get = |path: &str| {
            let a = exchange(
                &api,
                format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
            );
            let v: Value = serde_json::from_str(a.split_once("\r\n\r\n").unwrap().1).unwrap();
            v
        };
        assert_eq!(
            get("/api/claude_code/policy_limits"),
            json!({"restrictions": {}})
        );
        let settings = get("/api/claude_code/settings");
        assert!(settings["uuid"].is_string() && settings["checksum"].is_string());
        assert_eq!(settings["settings"], json!({}));
        assert_eq!(get("/api/other"), json!({}));
    }
}
