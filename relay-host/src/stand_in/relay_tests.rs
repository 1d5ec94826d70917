//! The interception path over in-memory streams: what reaches the upstream and what the
//! session gets back, for chosen requests and (proptest) for any bytes a session may send.

use std::io::{self, Cursor, Read, Write};

use proptest::prelude::*;

use super::*;

/// The session's side: what it sends, and what it gets back.
struct Client {
    input: Cursor<Vec<u8>>,
    output: Vec<u8>,
}

impl Read for Client {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        self.input.read(b)
    }
}

impl Write for Client {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.output.write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The API's side: what it got, and the same answer to every request (32 of them, then the
/// end of the connection).
struct Upstream {
    answer: Vec<u8>,
    at: usize,
    got: Vec<u8>,
}

impl Read for Upstream {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        // One byte or a few at a time: the framing must not depend on how reads fall.
        let left = (self.answer.len() * 32).saturating_sub(self.at);
        let n = b.len().min(7).min(left);
        for x in b.iter_mut().take(n) {
            *x = self.answer[self.at % self.answer.len()];
            self.at += 1;
        }
        Ok(n)
    }
}

impl Write for Upstream {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.got.write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/// Runs `input` through the interception path; returns (upstream got, session got).
fn run(input: &[u8], answer: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let host = Host::Name("api.anthropic.com".into());
    let swap = |v: &[u8]| (v == b"Bearer STAND").then(|| Zeroizing::new(b"Bearer REAL".to_vec()));
    let noted = |_: u16, _: &'static str| {};
    let used = |_: u16, _: u64, _: u64| {};
    let x = Exchange {
        host: &host,
        port: 443,
        swap: &swap,
        noted: &noted,
        used: &used,
    };
    let mut c = Client {
        input: Cursor::new(input.to_vec()),
        output: Vec::new(),
    };
    let mut u = Upstream {
        answer: answer.to_vec(),
        at: 0,
        got: Vec::new(),
    };
    let _ = relay(&mut c, &mut u, &x);
    (u.got, c.output)
}

const POST: &[u8] = b"POST /v1/messages HTTP/1.1\r\nHost: api.anthropic.com\r\n\
    Authorization: Bearer STAND\r\nContent-Length: 2\r\n\r\n{}";

#[test]
fn requests_on_one_connection_are_swapped_and_answered_in_turn() {
    let input = [POST, POST].concat();
    let (up, back) = run(&input, OK);
    let expected = b"POST /v1/messages HTTP/1.1\r\nHost: api.anthropic.com\r\n\
        Authorization: Bearer REAL\r\nContent-Length: 2\r\n\r\n{}";
    assert_eq!(up, [&expected[..], expected].concat());
    assert_eq!(back, [OK, OK].concat());
}

#[test]
fn a_chunked_body_goes_on_chunk_by_chunk_and_a_chunked_answer_comes_back() {
    let input = b"POST / HTTP/1.1\r\nHost: api.anthropic.com\r\nTransfer-Encoding: chunked\r\n\r\n\
        3\r\nabc\r\n1;x=y\r\nd\r\n0\r\nX-T: 1\r\n\r\n";
    let answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
        5\r\nevent\r\n0\r\n\r\n";
    let (up, back) = run(input, answer);
    assert_eq!(up, input.to_vec());
    assert_eq!(back, answer.to_vec());
}

#[test]
fn an_interim_answer_passes_before_the_final_one() {
    let answer = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    let (_, back) = run(POST, answer);
    assert_eq!(back, answer.to_vec());
}

/// A request head of exactly [`MAX_HEAD`] bytes (its blank line included) goes on; one byte
/// more is refused with a `400` and nothing of it goes on, however the bytes fall into reads
/// (the whole head arrives before the limit is looked at).
#[test]
fn the_head_limit_holds_at_its_byte() {
    let head = |len: usize| {
        let mut h = b"GET /v1/x HTTP/1.1\r\nHost: api.anthropic.com\r\nX-Pad: ".to_vec();
        h.resize(len - 4, b'a');
        h.extend_from_slice(b"\r\n\r\n");
        h
    };
    let (got, back) = run(&head(MAX_HEAD), OK);
    assert_eq!(got.len(), MAX_HEAD, "the head went on whole");
    assert!(back.starts_with(b"HTTP/1.1 200 OK\r\n"));
    let (got, back) = run(&head(MAX_HEAD + 1), OK);
    assert!(got.is_empty(), "{} bytes went on", got.len());
    assert!(back.starts_with(b"HTTP/1.1 400 Bad Request\r\n"));
}

/// An API host that sends nothing for its idle limit (its read timeout: `EAGAIN`): the
/// session's request is answered `504`, saying so.
#[test]
fn an_idle_api_host_gets_the_request_answered_504() {
    struct Idle(Vec<u8>);
    impl Read for Idle {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            Err(io::ErrorKind::WouldBlock.into())
        }
    }
    impl Write for Idle {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.write(b)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let host = Host::Name("api.anthropic.com".into());
    let swap = |_: &[u8]| None;
    let told = std::cell::RefCell::new(Vec::new());
    let noted = |code: u16, why: &'static str| told.borrow_mut().push((code, why));
    let used = |_: u16, _: u64, _: u64| {};
    let x = Exchange {
        host: &host,
        port: 443,
        swap: &swap,
        noted: &noted,
        used: &used,
    };
    let mut c = Client {
        input: Cursor::new(POST.to_vec()),
        output: Vec::new(),
    };
    let mut u = Idle(Vec::new());
    assert!(relay(&mut c, &mut u, &x).is_err());
    assert!(
        u.0.starts_with(b"POST /v1/messages HTTP/1.1\r\n"),
        "the request went on"
    );
    let back = String::from_utf8_lossy(&c.output);
    assert!(
        back.starts_with("HTTP/1.1 504 Gateway Timeout\r\n"),
        "{back}"
    );
    assert!(
        back.ends_with("relay: the API host sent nothing for 10 minutes\n"),
        "{back}"
    );
    assert_eq!(told.into_inner(), [(504, IDLE_WORDS)]);
}

#[test]
fn a_malformed_request_is_refused_and_nothing_of_it_goes_on() {
    let (up, back) = run(
        b"GET / HTTP/1.1\r\nHost: api.anthropic.com\nX: 1\r\n\r\n",
        OK,
    );
    assert!(up.is_empty());
    assert!(
        back.starts_with(b"HTTP/1.1 400 Bad Request\r\n"),
        "{back:?}"
    );
    // The first request goes, the broken second one does not.
    let input = [POST, b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"].concat();
    let (up, back) = run(&input, OK);
    assert_eq!(
        up.len(),
        POST.len() - 5 + 4,
        "one request: STAND became REAL"
    );
    assert!(back.starts_with(OK) && back[OK.len()..].starts_with(b"HTTP/1.1 400"));
    // A chunk longer than its size ends the connection inside the body.
    let bad = b"POST / HTTP/1.1\r\nHost: api.anthropic.com\r\nTransfer-Encoding: chunked\r\n\r\n\
        1\r\nabc\r\n0\r\n\r\n";
    let (up, _) = run(bad, OK);
    assert!(
        !up.ends_with(b"0\r\n\r\n"),
        "the request never completes upstream"
    );
}

#[test]
fn an_answer_that_is_not_http_ends_the_connection_with_a_502() {
    let (_, back) = run(POST, b"SSH-2.0-OpenSSH\r\n\r\n");
    assert!(
        back.starts_with(b"HTTP/1.1 502 Bad Gateway\r\n"),
        "{back:?}"
    );
    let (_, back) = run(POST, b"HTTP/1.1 101 Switching Protocols\r\n\r\n");
    assert!(back.starts_with(b"HTTP/1.1 502"));
}

/// Reads `got` (what the upstream received) as HTTP/1.1 requests, independently of the code
/// under test: every head must parse whole, every body must follow its framing; only the last
/// request may be cut short (the connection closed inside it). Returns the heads.
fn requests_in(got: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut rest = got;
    let mut heads = Vec::new();
    while !rest.is_empty() {
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut r = httparse::Request::new(&mut headers);
        let n = match r.parse(rest) {
            Ok(httparse::Status::Complete(n)) => n,
            other => return Err(format!("a head that does not parse: {other:?}")),
        };
        let head = &rest[..n];
        if head
            .windows(2)
            .enumerate()
            .any(|(i, w)| w[1] == b'\n' && w[0] != b'\r' && i > 0)
        {
            return Err("a bare LF".into());
        }
        let find = |name: &str| r.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name));
        let length = find("content-length").map(|h| {
            std::str::from_utf8(h.value)
                .unwrap()
                .parse::<usize>()
                .unwrap()
        });
        let chunked = find("transfer-encoding").is_some();
        heads.push(head.to_vec());
        rest = &rest[n..];
        if chunked {
            loop {
                // A size line: hex digits first, CR LF its only line end.
                let Some(end) = rest.windows(2).position(|w| w == b"\r\n") else {
                    return Ok(heads); // cut short
                };
                let line = &rest[..end + 2];
                let strict = line[0].is_ascii_hexdigit() && !line[..end].contains(&b'\n');
                let Ok(httparse::Status::Complete((k, size))) = httparse::parse_chunk_size(line)
                else {
                    return Err("a bad chunk line".into());
                };
                if !strict || k != line.len() {
                    return Err("a bad chunk line".into());
                }
                rest = &rest[k..];
                if size == 0 {
                    let mut t = [httparse::EMPTY_HEADER; 128];
                    match httparse::parse_headers(rest, &mut t) {
                        Ok(httparse::Status::Complete((k, _))) => rest = &rest[k..],
                        Ok(httparse::Status::Partial) => return Ok(heads), // cut short
                        Err(_) => return Err("a bad trailer section".into()),
                    }
                    break;
                }
                let size = size as usize;
                if size.checked_add(2).is_none_or(|need| rest.len() < need) {
                    return Ok(heads); // cut short: the last request
                }
                if &rest[size..size + 2] != b"\r\n" {
                    return Err("a chunk without its CR LF".into());
                }
                rest = &rest[size + 2..];
            }
        } else if let Some(len) = length {
            if rest.len() < len {
                return Ok(heads);
            }
            rest = &rest[len..];
        }
    }
    Ok(heads)
}

/// Pieces of requests, well and badly formed, that the generated sessions are made of.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"POST /v1/messages HTTP/1.1\r\n".to_vec()),
        Just(b"GET / HTTP/1.0\r\n".to_vec()),
        Just(b"Host: api.anthropic.com\r\n".to_vec()),
        Just(b"Host: example.com\r\n".to_vec()),
        Just(b"Authorization: Bearer STAND\r\n".to_vec()),
        Just(b"Authorization: Bearer OTHER\r\n".to_vec()),
        Just(b"Content-Length: 3\r\n".to_vec()),
        Just(b"Content-Length: 18446744073709551615\r\n".to_vec()),
        Just(b"Transfer-Encoding: chunked\r\n".to_vec()),
        Just(b"Connection: close\r\n".to_vec()),
        Just(b"Expect: 100-continue\r\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"3\r\nabc\r\n".to_vec()),
        Just(b"0\r\n\r\n".to_vec()),
        Just(b"ffffffffffffffff\r\n".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..12),
    ]
}

/// A request as a session might send it, right or slightly wrong: a request line, headers
/// (most often the right `Host`), the blank line, then body pieces.
fn request() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        Just(b"POST /v1/messages HTTP/1.1\r\n".to_vec()),
        Just(b"HEAD / HTTP/1.1\r\n".to_vec()),
        Just(b"GET / HTTP/1.0\r\n".to_vec()),
    ];
    let body = prop_oneof![
        Just(b"3\r\nabc\r\n".to_vec()),
        Just(b"1\r\nabc\r\n".to_vec()),
        Just(b"5\nabcde\r\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"0\r\n\r\n".to_vec()),
        Just(b"0\r\nX-T: 1\r\n\r\n".to_vec()),
        Just(b"0\r\nX T\r\n\r\n".to_vec()),
        Just(b"abc".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..8),
    ];
    (
        line,
        any::<bool>(),
        proptest::collection::vec(piece(), 0..4),
        proptest::collection::vec(body, 0..4),
    )
        .prop_map(|(line, host, headers, body)| {
            let host: &[u8] = if host {
                b"Host: api.anthropic.com\r\n"
            } else {
                b""
            };
            [
                line,
                host.to_vec(),
                headers.concat(),
                b"\r\n".to_vec(),
                body.concat(),
            ]
            .concat()
        })
}

fn session() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..256),
        proptest::collection::vec(piece(), 0..24).prop_map(|v| v.concat()),
        proptest::collection::vec(request(), 1..4).prop_map(|v| v.concat()),
    ]
}

fn answer() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(OK.to_vec()),
        Just(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n".to_vec()),
        Just(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n".to_vec()),
        proptest::collection::vec(any::<u8>(), 1..64),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Whatever a session sends and whatever the API answers: nothing panics, the upstream
    /// gets only valid HTTP requests (the last one possibly cut short where the connection
    /// closed), and the real token only in place of this session's stand-in.
    #[test]
    fn only_valid_http_goes_on_and_nothing_panics(input in session(), answer in answer()) {
        let (up, _) = run(&input, &answer);
        let heads = requests_in(&up).map_err(|e| TestCaseError::fail(format!("{e}: {:?}", String::from_utf8_lossy(&up))))?;
        let sent_stand_in = input.windows(12).filter(|w| *w == b"Bearer STAND").count();
        let real = up.windows(11).filter(|w| *w == b"Bearer REAL").count();
        prop_assert!(real <= sent_stand_in);
        for h in &heads {
            let has_real = h.windows(11).any(|w| w == b"Bearer REAL");
            let in_auth = h.windows(26).any(|w| w.eq_ignore_ascii_case(b"authorization: Bearer REAL"));
            prop_assert_eq!(has_real, in_auth);
        }
    }
}
