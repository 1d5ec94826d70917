//! HTTP/1.1 as the interception path reads it, every part by `httparse`: a request head (the
//! one that is sent on is rebuilt from what parsed, with `Authorization` swapped where it is
//! this session's stand-in), a response head, a chunk-size line and a trailer section. Every
//! line must end in CR LF; a byte HTTP does not allow, a body whose end is not told by one
//! `Content-Length` or `Transfer-Encoding: chunked`, a protocol upgrade, `Expect` or a second
//! `Authorization` is refused.

use zeroize::Zeroizing;

use crate::net::allow::{normal_host, Host};
use crate::net::head::{crlf_only, request_head};

/// The longest head (request or response line and headers) or trailer section.
pub(super) const MAX_HEAD: usize = 64 * 1024;
/// The longest chunk-size line.
pub(super) const MAX_LINE: usize = 4096;
/// Headers one head may hold.
const MAX_HEADERS: usize = 128;

/// How a message's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Body {
    /// No body.
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// Chunks, up to the last one and the trailer section.
    Chunked,
    /// Everything up to the end of the connection (a response only).
    UntilClose,
}

/// What replaces an `Authorization` value, given it (`None`: it goes as it is).
pub(super) type Swap<'a> = dyn Fn(&[u8]) -> Option<Zeroizing<Vec<u8>>> + 'a;

/// A refused request: the status the session gets and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Refusal {
    /// `400`, or `417` for `Expect`.
    pub(crate) code: u16,
    /// Why, in words (no byte of the request).
    pub(crate) why: &'static str,
}

const fn bad(why: &'static str) -> Refusal {
    Refusal { code: 400, why }
}

/// A request that parsed, as it is sent on.
pub(super) struct Request {
    /// The head sent upstream (it may hold the real token: wiped on drop).
    pub(crate) head: Zeroizing<Vec<u8>>,
    /// Its body's framing.
    pub(crate) body: Body,
    /// `HEAD`: the answer has no body whatever its headers say.
    pub(crate) head_only: bool,
    /// The connection ends after this exchange (`Connection: close`, or HTTP/1.0).
    pub(crate) close: bool,
}

/// What the request's headers say, gathered while they are written out.
#[derive(Default)]
struct Seen {
    host: bool,
    length: Option<u64>,
    chunked: bool,
    close: bool,
    authorization: bool,
}

/// Parses the request head `head` (up to and with its blank line) of a connection to
/// `host:port`, and rebuilds it for upstream: `Authorization`'s value replaced by `swap`'s
/// answer when it has one.
pub(super) fn request(
    head: &[u8],
    host: &Host,
    port: u16,
    swap: &Swap<'_>,
) -> Result<Request, Refusal> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let req = request_head(head, &mut headers).map_err(bad)?;
    let (method, path, minor) = (req.method, req.target, req.minor);
    if !path.starts_with('/') || method == "CONNECT" {
        return Err(bad("only origin-form requests (a path) go through"));
    }
    let mut out = Zeroizing::new(Vec::with_capacity(head.len() + 256));
    out.extend_from_slice(format!("{method} {path} HTTP/1.{minor}\r\n").as_bytes());
    let mut seen = Seen::default();
    for h in req.headers.iter() {
        let value = check_header(h, &mut seen, host, port)?;
        let swapped = match value {
            HeaderValue::Authorization => swap(h.value),
            HeaderValue::Other => None,
        };
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(swapped.as_deref().map_or(h.value, |v| v.as_slice()));
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if !seen.host {
        return Err(bad("no Host header"));
    }
    let body = match (seen.chunked, seen.length) {
        (true, Some(_)) => return Err(bad("both Content-Length and Transfer-Encoding")),
        (true, None) => Body::Chunked,
        (false, Some(0) | None) => Body::Empty,
        (false, Some(n)) => Body::Length(n),
    };
    Ok(Request {
        head: out,
        body,
        head_only: method == "HEAD",
        close: seen.close || minor == 0,
    })
}

enum HeaderValue {
    Authorization,
    Other,
}

/// Checks one request header and notes what it says.
fn check_header(
    h: &httparse::Header<'_>,
    seen: &mut Seen,
    host: &Host,
    port: u16,
) -> Result<HeaderValue, Refusal> {
    let name = h.name.to_ascii_lowercase();
    match name.as_str() {
        "host" => {
            let same = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| host_port(v, 443))
                .is_some_and(|(h2, p2)| &h2 == host && p2 == port);
            if seen.host || !same {
                return Err(bad("the Host header differs from the tunnel's host"));
            }
            seen.host = true;
        }
        "content-length" => {
            let n = digits(h.value).ok_or(bad("a malformed Content-Length"))?;
            if seen.length.is_some_and(|m| m != n) {
                return Err(bad("two Content-Length headers"));
            }
            seen.length = Some(n);
        }
        "transfer-encoding" => {
            if seen.chunked || !h.value.eq_ignore_ascii_case(b"chunked") {
                return Err(bad("a Transfer-Encoding other than one chunked"));
            }
            seen.chunked = true;
        }
        "connection" => {
            for t in tokens(h.value) {
                if t.eq_ignore_ascii_case(b"close") {
                    seen.close = true;
                } else if t.eq_ignore_ascii_case(b"upgrade") {
                    return Err(bad("protocol upgrades do not go through"));
                }
            }
        }
        "upgrade" => return Err(bad("protocol upgrades do not go through")),
        "expect" => {
            let code = 417;
            let why = "Expect is not supported: send the body with the head";
            return Err(Refusal { code, why });
        }
        "authorization" => {
            if seen.authorization {
                return Err(bad("two Authorization headers"));
            }
            seen.authorization = true;
            return Ok(HeaderValue::Authorization);
        }
        _ => {}
    }
    Ok(HeaderValue::Other)
}

/// A response head that parsed: its status, body framing and whether the connection ends
/// after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Response {
    /// The status code.
    pub(crate) status: u16,
    /// Its body's framing.
    pub(crate) body: Body,
    /// The connection ends after it.
    pub(crate) close: bool,
}

/// Parses the response head `head` to a request (`head_only`: to a `HEAD`). A `101` (a
/// switch away from HTTP) is refused.
pub(super) fn response(head: &[u8], head_only: bool) -> Result<Response, &'static str> {
    crlf_only(head)?;
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut res = httparse::Response::new(&mut headers);
    match res.parse(head) {
        Ok(httparse::Status::Complete(n)) if n == head.len() => {}
        _ => return Err("a malformed response head"),
    }
    let (Some(status), Some(minor)) = (res.code, res.version) else {
        return Err("a malformed status line");
    };
    if status == 101 {
        return Err("a protocol switch");
    }
    let (mut length, mut chunked, mut coded, mut close) = (None, false, false, minor == 0);
    for h in res.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        match name.as_str() {
            "content-length" => {
                let n = digits(h.value).ok_or("a malformed Content-Length")?;
                if length.is_some_and(|m| m != n) {
                    return Err("two Content-Length headers");
                }
                length = Some(n);
            }
            "transfer-encoding" => {
                coded = true;
                chunked = tokens(h.value)
                    .last()
                    .is_some_and(|t| t.eq_ignore_ascii_case(b"chunked"));
            }
            "connection" => close |= tokens(h.value).any(|t| t.eq_ignore_ascii_case(b"close")),
            _ => {}
        }
    }
    let body = if head_only || (100..200).contains(&status) || status == 204 || status == 304 {
        Body::Empty
    } else if chunked {
        Body::Chunked
    } else if coded {
        Body::UntilClose
    } else {
        match length {
            Some(0) => Body::Empty,
            Some(n) => Body::Length(n),
            None => Body::UntilClose,
        }
    };
    let close = close || body == Body::UntilClose;
    Ok(Response {
        status,
        body,
        close,
    })
}

/// The size of the chunk whose size line (with its CR LF) is `line`.
pub(super) fn chunk_size(line: &[u8]) -> Result<u64, &'static str> {
    crlf_only(line)?;
    // `httparse` takes an empty line as size 0: a size has at least one hex digit.
    if !line.first().is_some_and(u8::is_ascii_hexdigit) {
        return Err("a malformed chunk size");
    }
    match httparse::parse_chunk_size(line) {
        Ok(httparse::Status::Complete((n, size))) if n == line.len() => Ok(size),
        _ => Err("a malformed chunk size"),
    }
}

/// Checks a trailer section (the lines after the last chunk, with the blank line that ends
/// it).
pub(super) fn trailers(section: &[u8]) -> Result<(), &'static str> {
    crlf_only(section)?;
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    match httparse::parse_headers(section, &mut headers) {
        Ok(httparse::Status::Complete((n, _))) if n == section.len() => Ok(()),
        _ => Err("a malformed trailer section"),
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`, as an allow-list compares it.
pub(super) fn host_port(v: &str, default_port: u16) -> Option<(Host, u16)> {
    let (host, port) = match v.strip_prefix('[') {
        Some(rest) => {
            let (h, after) = rest.split_once(']')?;
            match after {
                "" => (h, None),
                a => (h, Some(a.strip_prefix(':')?)),
            }
        }
        None => match v.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (v, None),
        },
    };
    let port = match port {
        None => default_port,
        Some(p) if p.bytes().all(|b| b.is_ascii_digit()) => p.parse().ok().filter(|&n| n > 0)?,
        Some(_) => return None,
    };
    Some((normal_host(host)?, port))
}

/// A decimal number of at most 19 digits (nothing else: no sign, no space).
fn digits(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// The comma-separated tokens of a header value, trimmed.
fn tokens(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',')
        .map(|t| t.trim_ascii())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
#[path = "http1_tests.rs"]
mod tests;
