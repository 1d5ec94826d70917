//! The launch identity: the secret on fd 3 and the Hello over the bridge socket.
//!
//! A launch that asks the shim for `--identity` hands it a fresh secret on a pipe at fd 3 (64
//! lowercase hex digits, then EOF) and names a Unix socket in [`BRIDGE_SOCKET_VAR`]. The shim
//! reads the secret, closes fd 3, dials the socket and sends one line:
//!
//! ```text
//! {"type":"Hello","kind":"project_session","name":"<session id>","token":"<secret>"}
//! ```
//!
//! and requires one line back within [`HELLO_TIMEOUT`], at most [`MAX_LINE`] bytes:
//!
//! ```text
//! {"type":"OK","data":{"kind":"project_session","service_id":"<session id>","relay_pid":N}}
//! ```
//!
//! with `N > 0`. Anything else refuses the launch before the target is started. The secret is
//! handled like the token: held in zeroized buffers, compared in constant time, never written
//! anywhere but the pipe and the socket.

use std::ffi::OsStr;
use std::fmt;
use std::io::{self, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use zeroize::Zeroizing;

use super::session_id::SessionId;
use relay_token::sys;

/// The descriptor the shim reads the secret from with `--identity`.
pub const SECRET_FD: RawFd = 3;

/// The length of a launch secret: 64 lowercase hex digits (32 random bytes).
pub const SECRET_LEN: usize = 64;

/// The variable that names the bridge socket the shim says Hello on.
pub const BRIDGE_SOCKET_VAR: &str = "RELAY_BRIDGE_SOCKET";

/// The variable that names a launch descriptor; the shim never passes it on.
pub const LAUNCH_FD_VAR: &str = "RELAY_LAUNCH_FD";

/// The `kind` of the Hello and of its answer.
pub const HELLO_KIND: &str = "project_session";

/// How long the shim waits for the answer to its Hello (and the bridge for the Hello line).
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest line either side reads, newline included: 64 KiB.
pub const MAX_LINE: usize = 64 * 1024;

/// The shim's exit code when the launch identity fails; nothing was started.
pub const EXIT_IDENTITY: i32 = crate::exit::ExitCode::Unavailable.code();

/// A launch secret: exactly 64 lowercase hex digits, zeroized when dropped. The bytes live on
/// the heap and are written there in place, so moving the value leaves no copy on the stack.
/// `Debug` shows no byte of it, and it is neither `Clone` nor `Display`.
///
/// ```
/// use relay_shim::identity::LaunchSecret;
/// let s = LaunchSecret::parse(&[b'a'; 64]).unwrap();
/// assert!(s.matches(&[b'a'; 64]));
/// assert!(!s.matches(&[b'b'; 64]));
/// assert_eq!(format!("{s:?}"), "LaunchSecret([redacted])");
/// assert!(LaunchSecret::parse(&[b'A'; 64]).is_err());
/// ```
pub struct LaunchSecret(Box<Zeroizing<[u8; SECRET_LEN]>>);

impl fmt::Debug for LaunchSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LaunchSecret([redacted])")
    }
}

/// Why the bytes on fd 3 are not a launch secret. Never holds a byte of them.
///
/// ```
/// use relay_shim::identity::{LaunchSecret, SecretError};
/// assert_eq!(LaunchSecret::parse(&[b'0'; 63]).unwrap_err(), SecretError::Length(63));
/// assert_eq!(SecretError::NotLowercaseHex.reason(), "not_lowercase_hex");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecretError {
    /// fd 3 could not be read (the errno).
    Unreadable(i32),
    /// Not 64 bytes (65 means "more than 64").
    Length(usize),
    /// 64 bytes, but not all of `0-9a-f`.
    NotLowercaseHex,
}

impl SecretError {
    /// Every word [`reason`](Self::reason) gives: what a status line's reader accepts.
    ///
    /// ```
    /// use relay_shim::identity::SecretError;
    /// assert!(SecretError::REASONS.contains(&SecretError::NotLowercaseHex.reason()));
    /// ```
    pub const REASONS: &'static [&'static str] = &["unreadable", "length", "not_lowercase_hex"];

    /// The word the status line carries (`unreadable`, `length`, `not_lowercase_hex`).
    ///
    /// ```
    /// assert_eq!(relay_shim::identity::SecretError::Length(0).reason(), "length");
    /// ```
    pub fn reason(&self) -> &'static str {
        match self {
            SecretError::Unreadable(_) => "unreadable",
            SecretError::Length(_) => "length",
            SecretError::NotLowercaseHex => "not_lowercase_hex",
        }
    }
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretError::Unreadable(e) => write!(f, "cannot read it: {}", sys::errno_words(*e)),
            SecretError::Length(n) if *n > SECRET_LEN => {
                write!(f, "more than {SECRET_LEN} bytes")
            }
            SecretError::Length(n) => write!(f, "{n} bytes, not {SECRET_LEN}"),
            SecretError::NotLowercaseHex => write!(f, "not lowercase hex"),
        }
    }
}

impl std::error::Error for SecretError {}

impl LaunchSecret {
    /// The secret, if `bytes` are exactly 64 of `0-9a-f`.
    ///
    /// ```
    /// use relay_shim::identity::LaunchSecret;
    /// assert!(LaunchSecret::parse(&[b'f'; 64]).is_ok());
    /// assert!(LaunchSecret::parse(&[b'g'; 64]).is_err());
    /// ```
    pub fn parse(bytes: &[u8]) -> Result<LaunchSecret, SecretError> {
        if bytes.len() != SECRET_LEN {
            return Err(SecretError::Length(bytes.len()));
        }
        if !bytes.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(SecretError::NotLowercaseHex);
        }
        let mut s = Box::new(Zeroizing::new([0u8; SECRET_LEN]));
        s.copy_from_slice(bytes);
        Ok(LaunchSecret(s))
    }

    /// A fresh secret: 32 bytes from the OS random source (`/dev/urandom`), in hex.
    ///
    /// ```
    /// use relay_shim::identity::LaunchSecret;
    /// let (a, b) = (LaunchSecret::generate()?, LaunchSecret::generate()?);
    /// assert!(!a.matches(b.expose()));
    /// assert!(LaunchSecret::parse(a.expose()).is_ok());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn generate() -> io::Result<LaunchSecret> {
        let mut raw = Zeroizing::new([0u8; SECRET_LEN / 2]);
        let random = sys::open(c"/dev/urandom", libc::O_RDONLY)?;
        let mut n = 0;
        while n < raw.len() {
            match sys::read(&random, &mut raw[n..])? {
                0 => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                k => n += k,
            }
        }
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut s = Box::new(Zeroizing::new([0u8; SECRET_LEN]));
        for (i, b) in raw.iter().enumerate() {
            s[2 * i] = HEX[usize::from(b >> 4)];
            s[2 * i + 1] = HEX[usize::from(b & 15)];
        }
        Ok(LaunchSecret(s))
    }

    /// True when `other` is this secret; compared in constant time over the secret's length.
    ///
    /// ```
    /// let s = relay_shim::identity::LaunchSecret::parse(&[b'1'; 64]).unwrap();
    /// assert!(!s.matches(b"1"));
    /// ```
    pub fn matches(&self, other: &[u8]) -> bool {
        if other.len() != SECRET_LEN {
            return false;
        }
        let diff = self.0.iter().zip(other).fold(0u8, |d, (a, b)| d | (a ^ b));
        std::hint::black_box(diff) == 0
    }

    /// The 64 hex digits: for the pipe writer and the Hello line only.
    ///
    /// ```
    /// let s = relay_shim::identity::LaunchSecret::parse(&[b'2'; 64]).unwrap();
    /// assert_eq!(s.expose().len(), 64);
    /// ```
    pub fn expose(&self) -> &[u8] {
        &self.0[..]
    }
}

/// Reads the secret from `fd` to EOF (at most 65 bytes, so a longer one is seen as such) and
/// closes `fd`, whatever happens.
///
/// ```
/// use std::io::Write;
/// use relay_shim::identity::read_secret;
/// let (r, mut w) = std::io::pipe()?;
/// w.write_all(&[b'c'; 64])?;
/// drop(w);
/// assert!(read_secret(r.into()).is_ok());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn read_secret(fd: OwnedFd) -> Result<LaunchSecret, SecretError> {
    let mut buf = Zeroizing::new([0u8; SECRET_LEN + 1]);
    let mut n = 0;
    while n < buf.len() {
        match sys::read(&fd, &mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Err(SecretError::Unreadable(e.raw_os_error().unwrap_or(0))),
        }
    }
    drop(fd);
    LaunchSecret::parse(&buf[..n])
}

/// Takes the shim's fd 3 and reads the secret from it ([`read_secret`]); `Unreadable(EBADF)`
/// when fd 3 is not open.
///
/// # Safety
///
/// The calling process owns its fd 3 (it was inherited for this purpose, and nothing else in
/// the process uses it); it is closed by the time this returns.
///
/// ```no_run
/// // SAFETY: called once from the shim, which inherited fd 3 for the secret.
/// let secret = unsafe { relay_shim::identity::take_secret() };
/// # drop(secret);
/// ```
pub unsafe fn take_secret() -> Result<LaunchSecret, SecretError> {
    if let Err(e) = sys::fd_flags(SECRET_FD) {
        return Err(SecretError::Unreadable(
            e.raw_os_error().unwrap_or(libc::EBADF),
        ));
    }
    // SAFETY: fd 3 is open (checked above) and, by this function's contract, ours alone.
    read_secret(unsafe { OwnedFd::from_raw_fd(SECRET_FD) })
}

/// The Hello line, newline included, in a zeroized buffer of exact size (it holds the secret).
/// The session id is `[A-Za-z0-9._-]` and the secret hex, so nothing needs escaping.
///
/// ```
/// use relay_shim::{identity::{hello_line, LaunchSecret}, SessionId};
/// let line = hello_line(&SessionId::parse("s1").unwrap(), &LaunchSecret::parse(&[b'0'; 64]).unwrap());
/// let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
/// assert_eq!((v["type"].as_str(), v["name"].as_str()), (Some("Hello"), Some("s1")));
/// ```
pub fn hello_line(session: &SessionId, secret: &LaunchSecret) -> Zeroizing<Vec<u8>> {
    let parts: [&[u8]; 7] = [
        b"{\"type\":\"Hello\",\"kind\":\"",
        HELLO_KIND.as_bytes(),
        b"\",\"name\":\"",
        session.as_str().as_bytes(),
        b"\",\"token\":\"",
        secret.expose(),
        b"\"}\n",
    ];
    let mut line = Zeroizing::new(Vec::with_capacity(parts.iter().map(|p| p.len()).sum()));
    for p in parts {
        line.extend_from_slice(p);
    }
    line
}

/// The bridge's answer to a right Hello, newline included.
///
/// ```
/// let line = relay_shim::identity::ok_line("s1", 42);
/// assert_eq!(line, "{\"type\":\"OK\",\"data\":{\"kind\":\"project_session\",\"service_id\":\"s1\",\"relay_pid\":42}}\n");
/// ```
pub fn ok_line(session_id: &str, relay_pid: u32) -> String {
    // Written out, so the keys keep the documented order; the id is escaped as a JSON string.
    format!(
        "{{\"type\":\"OK\",\"data\":{{\"kind\":\"{HELLO_KIND}\",\"service_id\":{},\
         \"relay_pid\":{relay_pid}}}}}\n",
        Value::from(session_id)
    )
}

/// Why the Hello did not get the OK answer. Its [`reason`](Refusal::reason) goes into the
/// `hello_refused` status line; nothing from the bridge's answer is ever echoed.
///
/// ```
/// use relay_shim::identity::Refusal;
/// assert_eq!(Refusal::Timeout.reason(), "timeout");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// [`BRIDGE_SOCKET_VAR`] is unset or empty.
    NoSocket,
    /// The socket could not be dialled (the errno).
    Connect(i32),
    /// The Hello could not be sent (the errno).
    Send(i32),
    /// No whole line came back within [`HELLO_TIMEOUT`].
    Timeout,
    /// The answer is longer than [`MAX_LINE`].
    TooLong,
    /// The bridge closed the connection before a whole line.
    Closed,
    /// The line is not the OK answer for this session (an error, another `service_id`, a
    /// `relay_pid` that is not a positive integer, not JSON).
    NotOk,
}

impl Refusal {
    /// Every word [`reason`](Self::reason) gives: what a status line's reader accepts.
    ///
    /// ```
    /// use relay_shim::identity::Refusal;
    /// assert!(Refusal::REASONS.contains(&Refusal::Timeout.reason()));
    /// ```
    pub const REASONS: &'static [&'static str] = &[
        "no_socket",
        "connect",
        "send",
        "timeout",
        "too_long",
        "closed",
        "not_ok",
    ];

    /// The word the status line carries.
    ///
    /// ```
    /// assert_eq!(relay_shim::identity::Refusal::NotOk.reason(), "not_ok");
    /// ```
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::NoSocket => "no_socket",
            Refusal::Connect(_) => "connect",
            Refusal::Send(_) => "send",
            Refusal::Timeout => "timeout",
            Refusal::TooLong => "too_long",
            Refusal::Closed => "closed",
            Refusal::NotOk => "not_ok",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NoSocket => write!(f, "{BRIDGE_SOCKET_VAR} is not set"),
            Refusal::Connect(e) => write!(f, "cannot dial the bridge: {}", sys::errno_words(*e)),
            Refusal::Send(e) => write!(f, "cannot send the Hello: {}", sys::errno_words(*e)),
            Refusal::Timeout => write!(f, "no answer within {} s", HELLO_TIMEOUT.as_secs()),
            Refusal::TooLong => write!(f, "the answer is longer than {MAX_LINE} bytes"),
            Refusal::Closed => write!(f, "the bridge closed the connection"),
            Refusal::NotOk => write!(f, "the bridge did not confirm this session"),
        }
    }
}

impl std::error::Error for Refusal {}

/// Why [`read_line`] got no line.
#[derive(Debug)]
pub enum LineError {
    /// Nothing whole before the deadline.
    Timeout,
    /// More than [`MAX_LINE`] bytes without a newline.
    TooLong,
    /// The peer closed the connection first.
    Closed,
    /// A read failed.
    Io(io::Error),
}

/// Reads one line (without its newline) from `stream` before `deadline`, at most
/// [`MAX_LINE`] bytes with the newline, into a zeroized buffer allocated once. Bytes after the
/// newline are dropped.
///
/// ```
/// use std::io::Write;
/// use std::os::unix::net::UnixStream;
/// let (mut a, mut b) = UnixStream::pair()?;
/// a.write_all(b"hi\nrest")?;
/// let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
/// assert_eq!(&relay_shim::identity::read_line(&mut b, deadline).unwrap()[..], b"hi");
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn read_line(
    stream: &mut UnixStream,
    deadline: Instant,
) -> Result<Zeroizing<Vec<u8>>, LineError> {
    let mut buf = Zeroizing::new(vec![0u8; MAX_LINE]);
    let mut n = 0;
    loop {
        if n == buf.len() {
            return Err(LineError::TooLong);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(LineError::Timeout);
        }
        stream.set_read_timeout(Some(left)).map_err(LineError::Io)?;
        let k = match stream.read(&mut buf[n..]) {
            Ok(0) => return Err(LineError::Closed),
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(LineError::Timeout)
            }
            Err(e) => return Err(LineError::Io(e)),
        };
        if let Some(i) = buf[n..n + k].iter().position(|&b| b == b'\n') {
            buf.truncate(n + i);
            return Ok(buf);
        }
        n += k;
    }
}

/// True when `line` is the OK answer for `session`: `type` `OK`, `data.kind`
/// [`HELLO_KIND`], `data.service_id` the session id, `data.relay_pid` an integer above 0.
///
/// ```
/// use relay_shim::{identity::{ok_line, is_ok_answer}, SessionId};
/// let s = SessionId::parse("s1").unwrap();
/// assert!(is_ok_answer(ok_line("s1", 7).trim_end().as_bytes(), &s));
/// assert!(!is_ok_answer(ok_line("s2", 7).trim_end().as_bytes(), &s));
/// assert!(!is_ok_answer(ok_line("s1", 0).trim_end().as_bytes(), &s));
/// ```
pub fn is_ok_answer(line: &[u8], session: &SessionId) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return false;
    };
    let data = &v["data"];
    v["type"] == "OK"
        && data["kind"] == HELLO_KIND
        && data["service_id"] == session.as_str()
        && data["relay_pid"].as_u64().is_some_and(|p| p > 0)
}

/// Says Hello on the bridge socket `socket` (the value of [`BRIDGE_SOCKET_VAR`]) for `session`
/// with `secret`, and waits up to [`HELLO_TIMEOUT`] for the OK answer.
///
/// ```no_run
/// use relay_shim::{identity::{say_hello, LaunchSecret}, SessionId};
/// let secret = LaunchSecret::generate()?;
/// let sock = std::env::var_os("RELAY_BRIDGE_SOCKET");
/// say_hello(sock.as_deref(), &SessionId::parse("s1").unwrap(), &secret)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn say_hello(
    socket: Option<&OsStr>,
    session: &SessionId,
    secret: &LaunchSecret,
) -> Result<(), Refusal> {
    let deadline = Instant::now() + HELLO_TIMEOUT;
    let socket = socket.filter(|s| !s.is_empty()).ok_or(Refusal::NoSocket)?;
    let errno = |e: io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let mut stream =
        UnixStream::connect(Path::new(socket)).map_err(|e| Refusal::Connect(errno(e)))?;
    stream
        .set_write_timeout(Some(HELLO_TIMEOUT))
        .and_then(|_| stream.write_all(&hello_line(session, secret)))
        .map_err(|e| Refusal::Send(errno(e)))?;
    match read_line(&mut stream, deadline) {
        Ok(line) if is_ok_answer(&line, session) => Ok(()),
        Ok(_) => Err(Refusal::NotOk),
        Err(LineError::Timeout) => Err(Refusal::Timeout),
        Err(LineError::TooLong) => Err(Refusal::TooLong),
        Err(LineError::Closed) | Err(LineError::Io(_)) => Err(Refusal::Closed),
    }
}
