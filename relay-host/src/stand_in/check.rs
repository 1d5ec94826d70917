//! `relay-stand-in --check HOST:PORT PATH`: the one request of `relay-host token check
//! --online`, made by this program because stand-in mode's TLS code lives here and nowhere
//! else (relay-host links none). The API host is verified exactly as a stand-in session's proxy
//! verifies it (the same `tls::upstream_config` and `tls::connect`), and its answer is
//! told back as one [`CheckReport`] line on fd 4.
//!
//! Descriptors as in the proxy's mode ([`super::program`]): the token on fd 3 (read to its end,
//! then closed), `upstream_ca_file`'s bytes on fd 5 and the system bundle on fd 6. Exactly one
//! request is sent: `GET PATH` + [`CHECK_PATH`] with `Authorization: Bearer <token>` and
//! `anthropic-beta: oauth-2025-04-20`, as Claude Code sends it at each start (with
//! `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` too), then `Connection: close`. Nothing of the
//! token or the answer's body reaches the report but the API's error type.

use std::ffi::OsString;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use super::http1::{self, Body, MAX_HEAD};
use super::protocol::{CA_FD, REPORT_FD, SYSTEM_CA_FD};
use super::{tls, UPSTREAM_HANDSHAKE_TIMEOUT};
use crate::net::allow::Host;

/// The first argument of the check's command line: `relay-stand-in --check HOST:PORT PATH`.
///
/// ```
/// assert_eq!(relay_host::stand_in::check::FLAG, "--check");
/// ```
pub const FLAG: &str = "--check";

/// The path asked for (after the API base URL's own path): the policy Claude Code fetches
/// with the token at each start, a small `GET` that needs no scope beyond a setup token's.
///
/// ```
/// assert_eq!(relay_host::stand_in::check::CHECK_PATH, "/api/claude_code/policy_limits");
/// ```
pub const CHECK_PATH: &str = "/api/claude_code/policy_limits";

/// The `anthropic-beta` value Claude Code sends with an OAuth token.
const OAUTH_BETA: &str = "oauth-2025-04-20";

/// How long the TCP connection may take (the proxy's own limit).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the answer may take once the request is sent.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// The most of an answer's body read, for its error type.
const MAX_BODY: usize = 16 * 1024;

/// What the check found: the one line `relay-stand-in --check` writes on fd 4.
///
/// ```
/// use relay_host::stand_in::check::CheckReport;
/// let r = CheckReport::Answered { status: 401, error_type: Some("authentication_error".into()) };
/// assert_eq!(CheckReport::parse(&r.line()).unwrap(), r);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CheckReport {
    /// No connection to the host (its name, or the connection): why.
    Unreachable(String),
    /// The host's TLS failed or was not verified: why, in the proxy's words.
    TlsFailed(String),
    /// TLS verified, the request sent, and no HTTP answer came back: why.
    NoAnswer(String),
    /// TLS verified and the API answered: its status and, for a JSON error, its type.
    Answered {
        /// The answer's status.
        status: u16,
        /// The `error.type` of a JSON error body.
        error_type: Option<String>,
    },
    /// The check could not run (its command line, descriptors or trust): why.
    Error(String),
}

/// A line that is no [`CheckReport`].
///
/// ```
/// let e = relay_host::stand_in::check::CheckReport::parse("nope").unwrap_err();
/// assert!(e.to_string().starts_with("not a check report: "), "{e}");
/// ```
#[derive(Debug)]
pub struct CheckReportError(serde_json::Error);

impl fmt::Display for CheckReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a check report: {}", self.0)
    }
}

impl std::error::Error for CheckReportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl CheckReport {
    /// The line as written: JSON and a newline.
    ///
    /// ```
    /// let r = relay_host::stand_in::check::CheckReport::Unreachable("no route".into());
    /// assert_eq!(r.line(), "{\"unreachable\":\"no route\"}\n");
    /// ```
    pub fn line(&self) -> String {
        let mut line = serde_json::to_string(self).unwrap_or_default();
        line.push('\n');
        line
    }

    /// Reads one line (its newline optional).
    ///
    /// ```
    /// use relay_host::stand_in::check::CheckReport;
    /// assert_eq!(CheckReport::parse("{\"error\":\"x\"}").unwrap(), CheckReport::Error("x".into()));
    /// ```
    pub fn parse(line: &str) -> Result<CheckReport, CheckReportError> {
        serde_json::from_str(line.trim_end_matches('\n')).map_err(CheckReportError)
    }
}

/// The check's command line, `FLAG HOST:PORT PATH` (`args` without the program's name), as
/// `relay-stand-in --check` reads it back.
///
/// ```
/// let a = relay_host::stand_in::check::args("api.anthropic.com:443", "");
/// assert_eq!(a, ["--check", "api.anthropic.com:443", ""]);
/// ```
pub fn args(host_port: &str, path: &str) -> Vec<OsString> {
    vec![FLAG.into(), host_port.into(), path.into()]
}

/// True when `args` (without the program's name) ask for the check.
pub(crate) fn asked(args: &[OsString]) -> bool {
    args.first().is_some_and(|a| a == FLAG)
}

/// The whole of `relay-stand-in --check`: the report line on fd 4; returns the exit code (0
/// once the line is written, whatever it says; 78 when the check could not run).
///
/// # Safety
///
/// As [`super::program::run`]'s: called once, from `main`, before any other thread runs; this
/// process owns descriptors 3 to 6 it inherited.
pub(crate) unsafe fn run(args: Vec<OsString>) -> i32 {
    // SAFETY: forwarded from this function's contract.
    let report = match unsafe { super::program::claim(REPORT_FD) } {
        Ok(fd) => std::fs::File::from(fd),
        Err(e) => {
            eprintln!("relay-stand-in: fd {REPORT_FD}: {e}");
            return super::program::CANNOT_START;
        }
    };
    // SAFETY: forwarded from this function's contract (descriptors 3, 5 and 6).
    let outcome = unsafe { check(args) };
    let code = match outcome {
        CheckReport::Error(_) => super::program::CANNOT_START,
        _ => 0,
    };
    let mut report = report;
    match report.write_all(outcome.line().as_bytes()) {
        Ok(()) => code,
        Err(_) => super::program::CANNOT_START,
    }
}

/// Reads the command line and descriptors, then makes the one request.
///
/// # Safety
///
/// As [`run`]'s (descriptors 3, 5 and 6).
unsafe fn check(args: Vec<OsString>) -> CheckReport {
    let failed = |e: &dyn fmt::Display| CheckReport::Error(e.to_string());
    if let Err(e) = crate::harden_process() {
        return failed(&format!("cannot harden the process: {e}"));
    }
    let text: Option<Vec<String>> = args.into_iter().map(|a| a.into_string().ok()).collect();
    let (host, port, path) = match text.as_deref() {
        Some([_, hp, path]) if path.is_empty() || path.starts_with('/') => {
            match http1::host_port(hp, 443) {
                Some((h, p)) if path.bytes().all(|b| b.is_ascii_graphic()) => (h, p, path.clone()),
                _ => return failed(&format!("not host:port and a path: {hp} {path}")),
            }
        }
        _ => return failed(&"usage: relay-stand-in --check HOST:PORT PATH"),
    };
    // SAFETY: forwarded (descriptor 3).
    let token = match unsafe { super::program::read_token() } {
        Ok(t) => t,
        Err(e) => return failed(&e),
    };
    // SAFETY: forwarded (descriptors 5 and 6).
    let trust = unsafe {
        (
            super::program::read_ca(CA_FD),
            super::program::read_ca(SYSTEM_CA_FD),
        )
    };
    let (extra, system) = match trust {
        (Ok(e), Ok(s)) => (e, s),
        (Err(e), _) | (_, Err(e)) => return failed(&e),
    };
    // An empty descriptor: none (webpki's roots for the system's, as in the proxy's mode).
    let (system, extra) = (given(&system), given(&extra));
    let config = match tls::upstream_config(system, extra) {
        Ok(c) => c,
        Err(e) => return failed(&e),
    };
    let tcp = match connect(&host, port) {
        Ok(t) => t,
        Err(why) => return CheckReport::Unreachable(why),
    };
    let handshake = UPSTREAM_HANDSHAKE_TIMEOUT;
    let mut s = match tls::connect(config, &host, tcp, handshake, ANSWER_TIMEOUT) {
        Ok(s) => s,
        Err(e) => return CheckReport::TlsFailed(tls::failure_words(&e).to_string()),
    };
    let request = request_head(&host, port, &path, token.expose_bytes());
    drop(token);
    if let Err(e) = s.write_all(&request).and_then(|()| s.flush()) {
        return CheckReport::NoAnswer(format!("the request could not be sent: {e}"));
    }
    drop(request);
    let answer = read_answer(&mut s);
    tls::close(&mut s);
    answer
}

/// `bytes`, or none when empty.
fn given(bytes: &[u8]) -> Option<&[u8]> {
    (!bytes.is_empty()).then_some(bytes)
}

/// A TCP connection to `host:port`, each of its addresses tried in turn; else why not.
fn connect(host: &Host, port: u16) -> Result<TcpStream, String> {
    let name = host.to_string();
    let addrs: Vec<_> = match (name.as_str(), port).to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(e) => return Err(format!("its name does not resolve: {e}")),
    };
    let mut last = io::Error::from(io::ErrorKind::NotFound);
    for a in &addrs {
        match TcpStream::connect_timeout(a, CONNECT_TIMEOUT) {
            Ok(t) => return Ok(t),
            Err(e) => last = e,
        }
    }
    Err(format!("cannot connect: {last}"))
}

/// The request: `GET`, the host, the token, Claude Code's OAuth beta, and `Connection: close`.
/// It holds the token: wiped when dropped, and sized before the token goes in, so no growth
/// leaves a copy in freed memory.
fn request_head(host: &Host, port: u16, path: &str, token: &[u8]) -> Zeroizing<Vec<u8>> {
    let authority = match (host, port) {
        (Host::Ip(std::net::IpAddr::V6(a)), 443) => format!("[{a}]"),
        (Host::Ip(std::net::IpAddr::V6(a)), p) => format!("[{a}]:{p}"),
        (h, 443) => h.to_string(),
        (h, p) => format!("{h}:{p}"),
    };
    const END: &[u8] = b"\r\nConnection: close\r\n\r\n";
    let start = format!(
        "GET {path}{CHECK_PATH} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: relay-host/{} \
         (token check)\r\nAccept: application/json\r\nanthropic-beta: {OAUTH_BETA}\r\n\
         Authorization: Bearer ",
        env!("CARGO_PKG_VERSION")
    );
    let mut head = Zeroizing::new(Vec::with_capacity(start.len() + token.len() + END.len()));
    head.extend_from_slice(start.as_bytes());
    head.extend_from_slice(token);
    head.extend_from_slice(END);
    head
}

/// The answer's status and, for a JSON error body, its type.
fn read_answer(s: &mut impl Read) -> CheckReport {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return CheckReport::NoAnswer("an answer head too long".into());
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) if buf.is_empty() => {
                return CheckReport::NoAnswer("the API host sent no answer".into())
            }
            Ok(0) => return CheckReport::NoAnswer("the answer ended inside its head".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return CheckReport::NoAnswer("the answer ended inside its head".into())
            }
            Err(e) => return CheckReport::NoAnswer(format!("reading the answer: {e}")),
        }
    };
    let res = match http1::response(&buf[..end], false) {
        Ok(r) => r,
        Err(why) => return CheckReport::NoAnswer(why.to_string()),
    };
    let mut body = buf.split_off(end);
    let want = match res.body {
        Body::Length(n) => usize::try_from(n).unwrap_or(MAX_BODY).min(MAX_BODY),
        Body::Empty => 0,
        // Chunked: the size lines stay in; the error type is read by its key all the same.
        Body::Chunked | Body::UntilClose => MAX_BODY,
    };
    while body.len() < want {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    body.truncate(want);
    CheckReport::Answered {
        status: res.status,
        error_type: error_type(&body),
    }
}

/// `error.type` of an API error body (`{"type":"error","error":{"type":"...",...}}`), when it
/// is one; a chunked body's first chunk is looked in from its first `{`.
fn error_type(body: &[u8]) -> Option<String> {
    let from = body.iter().position(|&b| b == b'{')?;
    let mut de = serde_json::Deserializer::from_slice(&body[from..]).into_iter();
    let v: serde_json::Value = de.next()?.ok()?;
    let t = v["error"]["type"].as_str()?;
    let plain = t.len() <= 64 && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    plain.then(|| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The request names the path, the host (its port when not 443), the beta and the token,
    /// and closes; nothing else.
    #[test]
    fn the_request_is_the_one_get_with_the_token_and_the_oauth_beta() {
        let h = crate::net::allow::normal_host("127.0.0.1").unwrap();
        let head = request_head(&h, 8443, "/gw", b"sk-ant-oat01-x");
        let text = String::from_utf8(head.to_vec()).unwrap();
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            text,
            format!(
                "GET /gw/api/claude_code/policy_limits HTTP/1.1\r\nHost: 127.0.0.1:8443\r\n\
                 User-Agent: relay-host/{version} (token check)\r\nAccept: application/json\r\n\
                 anthropic-beta: oauth-2025-04-20\r\nAuthorization: Bearer sk-ant-oat01-x\r\n\
                 Connection: close\r\n\r\n"
            )
        );
        let v6 = crate::net::allow::normal_host("[::1]").unwrap();
        let head = request_head(&v6, 443, "", b"t");
        assert!(head.starts_with(b"GET /api/claude_code/policy_limits HTTP/1.1\r\nHost: [::1]\r\n"));
    }

    /// The request holding the token is made in one allocation of its exact size, whatever the
    /// gateway's path: no growth leaves a copy of the token in freed memory.
    #[test]
    fn the_request_holding_the_token_is_never_moved() {
        let h = crate::net::allow::normal_host("gw.example").unwrap();
        for path in [String::new(), "/v1".into(), format!("/{}", "p".repeat(600))] {
            let head = request_head(&h, 443, &path, b"sk-ant-oat01-x");
            assert_eq!(head.capacity(), head.len(), "path of {} bytes", path.len());
        }
    }

    /// The answer's status and error type, read from a whole answer, a chunked one and a body
    /// that is no JSON.
    #[test]
    fn the_answer_gives_its_status_and_error_type() {
        let body = br#"{"type":"error","error":{"type":"authentication_error","message":"x"}}"#;
        let whole = [
            format!(
                "HTTP/1.1 401 Unauthorized\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes(),
            body.to_vec(),
        ]
        .concat();
        let got = read_answer(&mut &whole[..]);
        let refused = CheckReport::Answered {
            status: 401,
            error_type: Some("authentication_error".into()),
        };
        assert_eq!(got, refused);
        let chunked = [
            b"HTTP/1.1 401 Unauthorized\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec(),
            format!("{:x}\r\n", body.len()).into_bytes(),
            body.to_vec(),
            b"\r\n0\r\n\r\n".to_vec(),
        ]
        .concat();
        assert_eq!(read_answer(&mut &chunked[..]), refused);
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        let want = CheckReport::Answered {
            status: 200,
            error_type: None,
        };
        assert_eq!(read_answer(&mut &ok[..]), want);
        let none: &[u8] = b"";
        assert_eq!(
            read_answer(&mut &none[..]),
            CheckReport::NoAnswer("the API host sent no answer".into())
        );
    }

    /// `args` is read back by the check's own parse: the flag first.
    #[test]
    fn the_check_is_asked_for_by_its_flag() {
        assert!(asked(&args("h:1", "")));
        assert!(!asked(&["/sock".into(), "--".into()]));
    }
}
