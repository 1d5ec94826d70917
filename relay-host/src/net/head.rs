//! The rules both proxies read an HTTP/1 head by, said once: the allow-list proxy's
//! ([`super::proxy`]) and stand-in mode's interception (`stand_in/http1.rs`). Every line ends in
//! CR LF ([`crlf_only`]), checked before `httparse` sees the bytes: it (like many servers) reads
//! a lone LF as a line end, so a header value holding `\nHost: other` could make an upstream see
//! a header the proxy never checked. A request head is then parsed whole by `httparse`
//! ([`request_head`]).

/// Why [`crlf_only`] refused.
pub(crate) const BARE_CR_OR_LF: &str = "a bare CR or LF";

/// Refuses a CR that does not start a CR LF, and an LF that does not end one.
pub(crate) fn crlf_only(bytes: &[u8]) -> Result<(), &'static str> {
    let bare = bytes.iter().enumerate().any(|(i, &b)| match b {
        b'\r' => bytes.get(i + 1) != Some(&b'\n'),
        b'\n' => i == 0 || bytes[i - 1] != b'\r',
        _ => false,
    });
    match bare {
        true => Err(BARE_CR_OR_LF),
        false => Ok(()),
    }
}

/// A request head as `httparse` read it: the request line's parts and the headers.
pub(crate) struct RequestHead<'h, 'b> {
    /// The method.
    pub(crate) method: &'b str,
    /// The request target, as written.
    pub(crate) target: &'b str,
    /// HTTP/1's minor version.
    pub(crate) minor: u8,
    /// The headers, in order.
    pub(crate) headers: &'h [httparse::Header<'b>],
}

/// Reads the request head `head` (up to and with its blank line) into `headers` (as many as
/// may be held): CR LF line ends only ([`crlf_only`]), then `httparse`, which must take every
/// byte of it.
pub(crate) fn request_head<'h, 'b>(
    head: &'b [u8],
    headers: &'h mut [httparse::Header<'b>],
) -> Result<RequestHead<'h, 'b>, &'static str> {
    crlf_only(head)?;
    let mut req = httparse::Request::new(headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(n)) if n == head.len() => {}
        _ => return Err("a malformed request head"),
    }
    let httparse::Request {
        method,
        path,
        version,
        headers,
    } = req;
    let (Some(method), Some(target), Some(minor)) = (method, path, version) else {
        return Err("a malformed request line");
    };
    Ok(RequestHead {
        method,
        target,
        minor,
        headers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_cr_lf_ends_a_line() {
        for ok in [&b""[..], b"a", b"a\r\nb\r\n\r\n", b"\r\n"] {
            assert_eq!(crlf_only(ok), Ok(()), "{:?}", String::from_utf8_lossy(ok));
        }
        for bad in [
            &b"\n"[..],
            b"\r",
            b"a\nb",
            b"a\rb",
            b"a\r\r\n",
            b"a\r\n\n",
            b"a\n\r",
            b"x\r",
        ] {
            assert_eq!(crlf_only(bad), Err(BARE_CR_OR_LF), "{bad:?}");
        }
    }

    #[test]
    fn a_request_head_is_parsed_whole() {
        let mut h = [httparse::EMPTY_HEADER; 4];
        let r = request_head(b"GET /a HTTP/1.0\r\nHost: x\r\n\r\n", &mut h).unwrap();
        assert_eq!((r.method, r.target, r.minor), ("GET", "/a", 0));
        assert_eq!((r.headers.len(), r.headers[0].value), (1, &b"x"[..]));
        for (bad, why) in [
            (
                &b"GET / HTTP/1.1\r\nX: a\nHost: b\r\n\r\n"[..],
                BARE_CR_OR_LF,
            ),
            (
                b"GET / HTTP/1.1\r\nHost: x\r\n\r\nmore",
                "a malformed request head",
            ),
            (b"GET / HTTP/1.1\r\nHost: x\r\n", "a malformed request head"),
            (
                b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n",
                "a malformed request head",
            ),
        ] {
            let mut h = [httparse::EMPTY_HEADER; 4];
            let got = request_head(bad, &mut h).err();
            assert_eq!(got, Some(why), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
