use super::*;

fn api() -> Host {
    Host::Name("api.anthropic.com".into())
}

fn swap(v: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
    (v == b"Bearer STAND").then(|| Zeroizing::new(b"Bearer REAL".to_vec()))
}

fn req(head: &[u8]) -> Result<Request, Refusal> {
    request(head, &api(), 443, &swap)
}

#[test]
fn a_request_is_rebuilt_with_the_stand_in_swapped() {
    let r = req(
        b"POST /v1/messages?beta=true HTTP/1.1\r\nHost: api.anthropic.com\r\n\
          authorization: Bearer STAND\r\nContent-Length: 12\r\nX-A: a b\r\n\r\n",
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(r.head.to_vec()).unwrap(),
        "POST /v1/messages?beta=true HTTP/1.1\r\nHost: api.anthropic.com\r\n\
         authorization: Bearer REAL\r\nContent-Length: 12\r\nX-A: a b\r\n\r\n"
    );
    assert_eq!(
        (r.body, r.close, r.head_only),
        (Body::Length(12), false, false)
    );
    // Another value (another session's stand-in, an API key) goes as it is.
    let r = req(
        b"GET / HTTP/1.1\r\nHost: api.anthropic.com:443\r\nAuthorization: Bearer OTHER\r\n\r\n",
    )
    .unwrap();
    assert!(r.head.windows(12).any(|w| w == b"Bearer OTHER"));
    assert!(!r.head.windows(4).any(|w| w == b"REAL"));
    assert_eq!(r.body, Body::Empty);
    let r = req(
        b"POST / HTTP/1.1\r\nHost: api.anthropic.com\r\nTransfer-Encoding: chunked\r\n\
                  Connection: close\r\n\r\n",
    )
    .unwrap();
    assert_eq!((r.body, r.close), (Body::Chunked, true));
    let r = req(b"HEAD / HTTP/1.0\r\nHost: api.anthropic.com\r\n\r\n").unwrap();
    assert!(r.head_only && r.close, "HTTP/1.0 ends the connection");
}

#[test]
fn what_is_not_plain_http_1_1_is_refused() {
    for bad in [
        &b"GET / HTTP/1.1\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: api.anthropic.com:8443\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: api.anthropic.com\r\nHost: api.anthropic.com\r\n\r\n",
        b"GET https://api.anthropic.com/ HTTP/1.1\r\nHost: api.anthropic.com\r\n\r\n",
        b"CONNECT / HTTP/1.1\r\nHost: api.anthropic.com\r\n\r\n",
        b"GET / HTTP/2.0\r\nHost: api.anthropic.com\r\n\r\n",
        b"GET / HTTP/1.1\nHost: api.anthropic.com\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: api.anthropic.com\r\nX: a\rb\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: api.anthropic.com\r\nX: a\r\n folded\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: api.anthropic.com\r\nX A: a\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: api.anthropic.com\r\nX: a\x00\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: api.anthropic.com\r\nContent-Length: 1\r\n\
          Transfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: api.anthropic.com\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: api.anthropic.com\r\nContent-Length: +1\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: api.anthropic.com\r\nContent-Length: 1 2\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: api.anthropic.com\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: api.anthropic.com\r\nTransfer-Encoding: chunked\r\n\
          Transfer-Encoding: chunked\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: api.anthropic.com\r\nUpgrade: websocket\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: api.anthropic.com\r\nConnection: keep-alive, Upgrade\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: api.anthropic.com\r\nAuthorization: Bearer STAND\r\n\
          Authorization: Bearer X\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: api.anthropic.com\r\n\r\nextra",
    ] {
        let r = req(bad);
        assert!(r.is_err(), "{:?}", String::from_utf8_lossy(bad));
    }
    let r = req(b"POST / HTTP/1.1\r\nHost: api.anthropic.com\r\nExpect: 100-continue\r\n\r\n");
    assert_eq!(r.err().map(|r| r.code), Some(417));
}

#[test]
fn an_answer_s_body_is_framed_as_http_says() {
    let r = |h: &[u8], head_only| response(h, head_only);
    let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(r(chunked, false).unwrap().body, Body::Chunked);
    assert_eq!(r(chunked, true).unwrap().body, Body::Empty, "to a HEAD");
    let sized = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n";
    assert_eq!(
        r(sized, false).unwrap(),
        Response {
            status: 200,
            body: Body::Length(7),
            close: false
        }
    );
    let open = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
    assert_eq!(r(open, false).unwrap().body, Body::UntilClose);
    assert!(r(open, false).unwrap().close);
    let coded = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\n";
    assert_eq!(r(coded, false).unwrap().body, Body::UntilClose);
    assert_eq!(
        r(
            b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n",
            false
        )
        .unwrap()
        .body,
        Body::Empty
    );
    assert_eq!(
        r(b"HTTP/1.1 100 Continue\r\n\r\n", false).unwrap().status,
        100
    );
    assert!(
        r(
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            false
        )
        .unwrap()
        .close
    );
    assert!(r(b"HTTP/1.1 101 Switching Protocols\r\n\r\n", false).is_err());
    assert!(r(b"HTTP/1.1 200 OK\nX: y\r\n\r\n", false).is_err());
    assert!(r(
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        false
    )
    .is_err());
    assert!(r(b"HTTP/1.1 2000 OK\r\n\r\n", false).is_err());
}

#[test]
fn chunk_lines_and_trailers_are_checked() {
    assert_eq!(chunk_size(b"1a\r\n"), Ok(26));
    assert_eq!(chunk_size(b"0\r\n"), Ok(0));
    assert_eq!(chunk_size(b"5;name=value\r\n"), Ok(5));
    for bad in [
        &b"5\n"[..],
        b"x\r\n",
        b"\r\n",
        b"5\r\nx",
        b"-1\r\n",
        b"5\r\r\n",
        b"fffffffffffffffffff\r\n",
    ] {
        assert!(chunk_size(bad).is_err(), "{bad:?}");
    }
    assert_eq!(trailers(b"\r\n"), Ok(()));
    assert_eq!(trailers(b"X-Sum: 1\r\n\r\n"), Ok(()));
    assert!(trailers(b"X Sum: 1\r\n\r\n").is_err());
    assert!(trailers(b"X-Sum: 1\n\r\n").is_err());
}

#[test]
fn hosts_compare_as_the_allow_list_does() {
    assert_eq!(host_port("API.Anthropic.com.", 443), Some((api(), 443)));
    let ip = Host::Ip("127.0.0.1".parse().unwrap());
    assert_eq!(host_port("127.0.0.1:8443", 443), Some((ip, 8443)));
    let v6 = Host::Ip("::1".parse().unwrap());
    assert_eq!(host_port("[::1]:9", 443), Some((v6.clone(), 9)));
    assert_eq!(host_port("[::1]", 443), Some((v6, 443)));
    for bad in ["", "a:0", "a:+1", "a: 1", "[::1]x", "a b:1", "[::1]:"] {
        assert_eq!(host_port(bad, 443), None, "{bad:?}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]

    /// No input makes a parser panic; what a request parse gives back is itself valid HTTP,
    /// holding the real token only as `Authorization`'s value.
    #[test]
    fn no_bytes_make_a_parser_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
        let _ = response(&bytes, false);
        let _ = chunk_size(&bytes);
        let _ = trailers(&bytes);
        let _ = host_port(&String::from_utf8_lossy(&bytes), 443);
        let mut head = b"POST / HTTP/1.1\r\nHost: api.anthropic.com\r\n".to_vec();
        head.extend_from_slice(&bytes);
        head.extend_from_slice(b"\r\n\r\n");
        for input in [&bytes[..], &head[..]] {
            if let Ok(r) = req(input) {
                let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let parsed = httparse::Request::new(&mut headers).parse(&r.head);
                proptest::prop_assert_eq!(parsed, Ok(httparse::Status::Complete(r.head.len())));
                let real = r.head.windows(11).filter(|w| *w == b"Bearer REAL").count();
                let auth = headers.iter().filter(|h| h.name.eq_ignore_ascii_case("authorization") && h.value == b"Bearer REAL").count();
                proptest::prop_assert_eq!(real, auth);
            }
        }
    }
}
