//! The requests of one intercepted connection, one after the other (HTTP/1.1 keep-alive): a
//! request head read and parsed whole ([`http1::request`]) and sent on, its body streamed by
//! its framing, then the answer: its head parsed ([`http1::response`]) and sent back, its body
//! streamed back as it comes (each piece flushed at once: server-sent events pass unbuffered).
//! A request that is not valid HTTP is answered `400` (`417` for `Expect`) and the connection
//! closed; an answer that is not, or a chunk that is not, ends the connection.

use std::io::{self, Read, Write};

use zeroize::Zeroizing;

use super::http1::{self, Body, MAX_HEAD, MAX_LINE};
use crate::net::allow::Host;

/// Why a session got a `504`: the API host sent nothing for the upstream's idle limit (its read
/// timeout, set when its TLS came up).
const IDLE_WORDS: &str = "the API host sent nothing for 10 minutes";

/// The biggest piece of a body copied at once.
const PIECE: usize = 16 * 1024;

/// What one connection's requests are checked against and changed by.
pub(super) struct Exchange<'a> {
    /// The tunnel's host, which each request's `Host` must name.
    pub(crate) host: &'a Host,
    /// The tunnel's port.
    pub(crate) port: u16,
    /// `Authorization`'s replacement, when there is one.
    pub(crate) swap: &'a http1::Swap<'a>,
    /// Told each refusal: the status the session got and why.
    pub(crate) noted: &'a dyn Fn(u16, &'static str),
    /// Told each answer the API host gave: its status, the bytes of the request sent on and of
    /// the answer sent back (counts only, never a byte of either).
    pub(crate) used: &'a dyn Fn(u16, u64, u64),
}

impl Exchange<'_> {
    /// [`refuse`], noted.
    fn refuse(&self, client: &mut impl Write, code: u16, why: &'static str) -> io::Result<()> {
        (self.noted)(code, why);
        refuse(client, code, why)
    }
}

/// A stream with a read buffer: what was read past the part asked for stays for the next.
pub(super) struct Conn<S> {
    s: S,
    buf: Vec<u8>,
    at: usize,
}

impl<S: Read + Write> Conn<S> {
    pub(super) fn new(s: S) -> Conn<S> {
        Conn {
            s,
            buf: Vec::new(),
            at: 0,
        }
    }

    fn unread(&self) -> &[u8] {
        &self.buf[self.at..]
    }

    /// Reads more; 0 at the end (a TLS peer that just closed counts as an end).
    fn fill(&mut self) -> io::Result<usize> {
        if self.at > 0 {
            self.buf.drain(..self.at);
            self.at = 0;
        }
        let mut chunk = [0u8; PIECE];
        let n = match self.s.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
            Err(e) => return Err(e),
        };
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// The bytes up to and with the first `end`, at most `max`; `None` at an end before any
    /// byte. An end inside, or more than `max` (however the bytes fell into reads): an error.
    fn until(&mut self, end: &[u8], max: usize) -> io::Result<Option<Vec<u8>>> {
        let mut from = 0;
        loop {
            if let Some(i) = find(&self.unread()[from..], end) {
                let stop = self.at + from + i + end.len();
                if stop - self.at > max {
                    return Err(invalid("a head or line too long"));
                }
                let part = self.buf[self.at..stop].to_vec();
                self.at = stop;
                return Ok(Some(part));
            }
            from = self.unread().len().saturating_sub(end.len() - 1);
            if self.unread().len() > max {
                return Err(invalid("a head or line too long"));
            }
            if self.fill()? == 0 {
                return match self.unread().is_empty() {
                    true => Ok(None),
                    false => Err(invalid("the connection ended inside a head")),
                };
            }
        }
    }

    /// Copies exactly `n` bytes to `out`, flushing each piece.
    fn copy_exact(&mut self, mut n: u64, out: &mut impl Write) -> io::Result<()> {
        while n > 0 {
            if self.unread().is_empty() && self.fill()? == 0 {
                return Err(invalid("the connection ended inside a body"));
            }
            let take = self
                .unread()
                .len()
                .min(usize::try_from(n).unwrap_or(usize::MAX));
            out.write_all(&self.buf[self.at..self.at + take])?;
            out.flush()?;
            self.at += take;
            n -= take as u64;
        }
        Ok(())
    }

    /// Copies everything to the end of the connection to `out`, flushing each piece.
    fn copy_to_end(&mut self, out: &mut impl Write) -> io::Result<()> {
        loop {
            if !self.unread().is_empty() {
                out.write_all(self.unread())?;
                out.flush()?;
                self.at = self.buf.len();
            }
            if self.fill()? == 0 {
                return Ok(());
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn invalid(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// Serves the requests of `client` (the session's side, decrypted) to `upstream` (the API's)
/// until either ends or sends what is not valid HTTP.
pub(super) fn relay<C, U>(client: C, upstream: U, x: &Exchange<'_>) -> io::Result<()>
where
    C: Read + Write,
    U: Read + Write,
{
    let (mut c, mut u) = (Conn::new(client), Conn::new(upstream));
    loop {
        let head = match c.until(b"\r\n\r\n", MAX_HEAD) {
            Ok(Some(h)) => Zeroizing::new(h),
            Ok(None) => return Ok(()),
            Err(e) => {
                return x
                    .refuse(&mut c.s, 400, "a malformed request head")
                    .and(Err(e))
            }
        };
        let req = match http1::request(&head, x.host, x.port, x.swap) {
            Ok(r) => r,
            Err(r) => return x.refuse(&mut c.s, r.code, r.why),
        };
        if let Err(e) = u.s.write_all(&req.head).and_then(|()| u.s.flush()) {
            return x
                .refuse(&mut c.s, 502, "the API host could not be reached")
                .and(Err(e));
        }
        let mut sent = Counted::new(&mut u.s);
        sent.n = req.head.len() as u64;
        drop(req.head);
        if let Err(e) = send_body(&mut c, &mut sent, req.body) {
            let _ = x.refuse(&mut c.s, 400, "a malformed request body");
            return Err(e);
        }
        let sent = sent.n;
        let mut back = Counted::new(&mut c.s);
        let (more, status) = answer(&mut u, &mut back, req.head_only, x)?;
        if status != 0 {
            (x.used)(status, sent, back.n);
        }
        if !more || req.close {
            return Ok(());
        }
    }
}

/// A request's body, by its framing.
fn send_body<C: Read + Write>(c: &mut Conn<C>, out: &mut impl Write, body: Body) -> io::Result<()> {
    match body {
        Body::Empty => Ok(()),
        Body::Length(n) => c.copy_exact(n, out),
        Body::Chunked => copy_chunked(c, out),
        Body::UntilClose => Err(invalid("a request body without a length")),
    }
}

/// A writer that counts what it passed on.
struct Counted<'a, W> {
    w: &'a mut W,
    n: u64,
}

impl<'a, W: Write> Counted<'a, W> {
    fn new(w: &'a mut W) -> Counted<'a, W> {
        Counted { w, n: 0 }
    }
}

impl<W: Write> Write for Counted<'_, W> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let k = self.w.write(b)?;
        self.n += k as u64;
        Ok(k)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

/// The answer to one request: interim (`1xx`) heads, then the final head and its body. Returns
/// whether the connection may carry another request, and the API host's final status (`0`:
/// relay answered instead).
fn answer<U, C>(
    u: &mut Conn<U>,
    client: &mut C,
    head_only: bool,
    x: &Exchange,
) -> io::Result<(bool, u16)>
where
    U: Read + Write,
    C: Write,
{
    let mut sent = false;
    loop {
        let head = match u.until(b"\r\n\r\n", MAX_HEAD) {
            Ok(Some(h)) => h,
            Ok(None) if !sent => {
                return x
                    .refuse(client, 502, "the API host sent no answer")
                    .map(|()| (false, 0))
            }
            Ok(None) => return Ok((false, 0)),
            Err(e) if !sent && super::error::timed_out(&e) => {
                return x.refuse(client, 504, IDLE_WORDS).and(Err(e))
            }
            Err(e) if !sent => return x.refuse(client, 502, "a malformed answer").and(Err(e)),
            Err(e) => return Err(e),
        };
        let res = match http1::response(&head, head_only) {
            Ok(r) => r,
            Err(why) => return x.refuse(client, 502, why).map(|()| (false, 0)),
        };
        client.write_all(&head)?;
        client.flush()?;
        sent = true;
        if (100..200).contains(&res.status) {
            continue;
        }
        match res.body {
            Body::Empty => {}
            Body::Length(n) => u.copy_exact(n, client)?,
            Body::Chunked => copy_chunked(u, client)?,
            Body::UntilClose => u.copy_to_end(client)?,
        }
        return Ok((!res.close, res.status));
    }
}

/// Chunks as they come, each size line and the trailer section checked, each piece flushed.
fn copy_chunked<S: Read + Write>(from: &mut Conn<S>, out: &mut impl Write) -> io::Result<()> {
    loop {
        let line = from
            .until(b"\r\n", MAX_LINE)?
            .ok_or_else(|| invalid("the connection ended inside a body"))?;
        let size = http1::chunk_size(&line).map_err(invalid)?;
        out.write_all(&line)?;
        if size == 0 {
            return copy_trailers(from, out);
        }
        from.copy_exact(size, out)?;
        let end = from.until(b"\r\n", 2)?;
        if end.as_deref() != Some(b"\r\n") {
            return Err(invalid("a chunk longer than its size"));
        }
        out.write_all(b"\r\n")?;
        out.flush()?;
    }
}

/// The trailer section after the last chunk, up to its blank line, checked whole first.
fn copy_trailers<S: Read + Write>(from: &mut Conn<S>, out: &mut impl Write) -> io::Result<()> {
    let mut section = Vec::new();
    loop {
        let line = from
            .until(b"\r\n", MAX_LINE)?
            .ok_or_else(|| invalid("the connection ended inside a trailer"))?;
        section.extend_from_slice(&line);
        if section.len() > MAX_HEAD {
            return Err(invalid("a trailer section too long"));
        }
        if line == b"\r\n" {
            break;
        }
    }
    http1::trailers(&section).map_err(invalid)?;
    out.write_all(&section)?;
    out.flush()
}

/// A short plain-text answer from relay; the caller then closes the connection.
pub(super) fn refuse(client: &mut impl Write, code: u16, why: &str) -> io::Result<()> {
    client.write_all(crate::net::plain_answer(code, why).as_bytes())?;
    client.flush()
}

/// [`refuse`] with `x-should-retry: false`, which Claude Code heeds: a failure a retry cannot
/// mend (the API host's certificate) reaches the person at once instead of after its retries.
pub(super) fn refuse_final(client: &mut impl Write, code: u16, why: &str) -> io::Result<()> {
    let answer = crate::net::plain_answer(code, why).replacen(
        "\r\nConnection: close",
        "\r\nx-should-retry: false\r\nConnection: close",
        1,
    );
    client.write_all(answer.as_bytes())?;
    client.flush()
}

/// Reads the session's next request whole, head and body (dropped: nothing of it goes
/// anywhere), then answers it with [`refuse_final`]. An answer sent before the request is read,
/// or a close with its body still unread (the kernel then resets the connection), reaches
/// Claude Code as a reset connection, which it retries for some 20 seconds; an answer to its
/// request saying `x-should-retry: false` ends the turn at once. A request that does not parse
/// gets the same answer.
pub(super) fn refuse_request<S: Read + Write>(
    client: S,
    host: &Host,
    port: u16,
    code: u16,
    why: &str,
) -> io::Result<()> {
    let mut c = Conn::new(client);
    if let Ok(Some(head)) = c.until(b"\r\n\r\n", MAX_HEAD) {
        let head = Zeroizing::new(head);
        if let Ok(req) = http1::request(&head, host, port, &|_| None) {
            let _ = send_body(&mut c, &mut io::sink(), req.body);
        }
    }
    refuse_final(&mut c.s, code, why)
}

#[cfg(test)]
#[path = "relay_tests.rs"]
mod tests;
