//! The host's side of the launch identity: a per-launch bridge socket that answers the shim's
//! Hello, and the wiring of `relay-shim` for it.
//!
//! A provider launch (kind `claude`) runs the shim with `--identity`: a fresh secret (64 hex
//! digits from the OS random source) on a pipe at the shim's fd 3, status at fd 4, the token at
//! fd 5, and `RELAY_BRIDGE_SOCKET` naming a socket in a fresh 0700 folder of the state folder
//! (the socket itself 0600). The bridge answers one connection only: the OK line when it is the
//! Hello for this session with this secret, an error line otherwise; then the socket and its
//! folder are removed. The launch counts as started only once the shim reported `hello_ok` and
//! then `started`, and `hello_ok` is believed only when the bridge confirmed the Hello itself.
//! Other launches keep the layout `[status, nil, token]` and no Hello.
//!
//! The shim's side of the wiring and the gate are in [`crate::launch::shim::wiring`].

use std::fmt;
use std::fs::{self, DirBuilder};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use relay_shim::identity::{ok_line, read_line, LaunchSecret, LineError, HELLO_KIND};
use relay_token::sys;

/// The socket's file name inside its per-launch folder.
const SOCKET_NAME: &str = "hello.sock";

/// Why the bridge could not be set up. Names paths only.
#[derive(Debug)]
pub struct BridgeError {
    what: String,
    source: io::Error,
}

impl fmt::Display for BridgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "launch bridge: {}: {}", self.what, self.source)
    }
}

impl std::error::Error for BridgeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

pub(super) fn setup_err(what: impl fmt::Display) -> impl FnOnce(io::Error) -> BridgeError {
    let what = what.to_string();
    move |source| BridgeError { what, source }
}

/// Why the bridge did not confirm a launch. Never holds a byte of what the peer sent.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub(crate) enum HelloError {
    /// Nobody connected, or no whole line came, before the deadline.
    Timeout,
    /// The launch gave up waiting (the bridge was dropped).
    Cancelled,
    /// The line is longer than 64 KiB.
    TooLong,
    /// The peer closed the connection before a whole line.
    Closed,
    /// A system call failed.
    Io(Arc<io::Error>),
    /// The bridge's thread could not be started.
    Thread(Arc<io::Error>),
    /// The line is not a Hello (not JSON, another `type` or `kind`, other fields).
    NotHello,
    /// A Hello for another session.
    WrongSession,
    /// A Hello with the wrong secret.
    WrongSecret,
}

impl fmt::Display for HelloError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HelloError::Timeout => write!(f, "no Hello before the deadline"),
            HelloError::Cancelled => write!(f, "the launch stopped waiting for the Hello"),
            HelloError::TooLong => write!(f, "the Hello line is longer than 64 KiB"),
            HelloError::Closed => write!(f, "the connection closed before a whole Hello"),
            HelloError::Io(e) => write!(f, "{e}"),
            HelloError::Thread(e) => write!(f, "bridge thread: {e}"),
            HelloError::NotHello => write!(f, "the line is not a Hello"),
            HelloError::WrongSession => write!(f, "the Hello names another session"),
            HelloError::WrongSecret => write!(f, "the Hello carries the wrong secret"),
        }
    }
}

impl std::error::Error for HelloError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HelloError::Io(e) | HelloError::Thread(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

/// Equal when of the same kind; two system-call failures when their error kinds and numbers are.
impl PartialEq for HelloError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (HelloError::Io(a), HelloError::Io(b))
            | (HelloError::Thread(a), HelloError::Thread(b)) => {
                a.kind() == b.kind() && a.raw_os_error() == b.raw_os_error()
            }
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

impl Eq for HelloError {}

impl From<io::Error> for HelloError {
    fn from(e: io::Error) -> Self {
        HelloError::Io(Arc::new(e))
    }
}

/// The Hello as it comes on the wire; every field borrows from the (zeroized) line, so the
/// secret is never copied. A string with escapes does not borrow and is refused.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HelloWire<'a> {
    #[serde(rename = "type")]
    kind_of_line: &'a str,
    kind: &'a str,
    name: &'a str,
    token: &'a str,
}

/// One launch's bridge: a listening socket in a fresh 0700 folder of the state folder, the
/// launch's secret and its session id. Dropping it removes the socket and the folder.
pub(crate) struct Bridge {
    dir: PathBuf,
    socket: PathBuf,
    listener: UnixListener,
    secret: LaunchSecret,
    session_id: String,
}

impl fmt::Debug for Bridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bridge")
            .field("socket", &self.socket)
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.socket);
        let _ = fs::remove_dir(&self.dir);
    }
}

impl Bridge {
    /// A bridge for `session_id`: a fresh secret, and a socket `bridge-<random>/hello.sock`
    /// (folder 0700, socket 0600) in `state_dir`, which must exist.
    pub(crate) fn open(state_dir: &Path, session_id: &str) -> Result<Bridge, BridgeError> {
        let name = LaunchSecret::generate().map_err(setup_err("/dev/urandom"))?;
        let name = String::from_utf8_lossy(&name.expose()[..16]).into_owned();
        let dir = state_dir.join(format!("bridge-{name}"));
        DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(setup_err(dir.display()))?;
        let socket = dir.join(SOCKET_NAME);
        let made = (|| {
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
                .map_err(setup_err(dir.display()))?;
            let listener = UnixListener::bind(&socket).map_err(setup_err(socket.display()))?;
            fs::set_permissions(&socket, fs::Permissions::from_mode(0o600))
                .and_then(|_| listener.set_nonblocking(true))
                .map_err(setup_err(socket.display()))?;
            let secret = LaunchSecret::generate().map_err(setup_err("/dev/urandom"))?;
            Ok((listener, secret))
        })();
        match made {
            Ok((listener, secret)) => Ok(Bridge {
                dir,
                socket,
                listener,
                secret,
                session_id: session_id.to_owned(),
            }),
            Err(e) => {
                let _ = fs::remove_file(&socket);
                let _ = fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// The socket's path (the value of `RELAY_BRIDGE_SOCKET`).
    pub(crate) fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// A pipe's read end holding the secret, its write end already closed (64 bytes, below any
    /// pipe's capacity: the write never blocks).
    pub(crate) fn secret_pipe(&self) -> io::Result<OwnedFd> {
        // Under the spawn lock, like the token pipe: the write end must not be closed under a
        // concurrent spawn that found its number busy.
        let _serial = relay_token::spawn_lock();
        let (read, write) = sys::pipe2_cloexec()?;
        sys::write_all(&write, self.secret.expose())?;
        drop(write);
        Ok(read)
    }

    /// Checks one Hello line against this launch: the shape, the session id, the secret.
    fn verify(&self, line: &[u8]) -> Result<(), HelloError> {
        let hello: HelloWire<'_> =
            serde_json::from_slice(line).map_err(|_| HelloError::NotHello)?;
        if hello.kind_of_line != "Hello" || hello.kind != HELLO_KIND {
            return Err(HelloError::NotHello);
        }
        if hello.name != self.session_id {
            return Err(HelloError::WrongSession);
        }
        if !self.secret.matches(hello.token.as_bytes()) {
            return Err(HelloError::WrongSecret);
        }
        Ok(())
    }

    /// Waits (until `deadline`, or until `cancel` is readable or closed) for one connection,
    /// reads one line, checks it, calls `verdict` with the outcome and only then answers: the
    /// OK line (with this process's pid as `relay_pid`) or an error line. Answers once: the
    /// bridge takes no other connection.
    pub(crate) fn answer_once(
        &self,
        deadline: Instant,
        cancel: BorrowedFd<'_>,
        verdict: impl FnOnce(&Result<(), HelloError>),
    ) -> Result<(), HelloError> {
        let mut stream = match self.accept(deadline, cancel) {
            Ok(stream) => stream,
            Err(e) => {
                let e = Err(e);
                verdict(&e);
                return e;
            }
        };
        let result = match read_line(&mut stream, deadline) {
            Ok(line) => self.verify(&line),
            Err(LineError::Timeout) => Err(HelloError::Timeout),
            Err(LineError::TooLong) => Err(HelloError::TooLong),
            Err(LineError::Closed) => Err(HelloError::Closed),
            Err(LineError::Io(e)) => Err(e.into()),
        };
        // The verdict is known before the answer leaves: a `hello_ok` the shim reports can
        // never come before it.
        verdict(&result);
        let answer = match &result {
            Ok(()) => ok_line(&self.session_id, std::process::id()),
            Err(_) => "{\"type\":\"Error\",\"data\":{\"message\":\"hello refused\"}}\n".to_owned(),
        };
        let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
        let _ = stream.write_all(answer.as_bytes());
        result
    }

    /// Accepts one connection before `deadline`, unless `cancel` becomes readable first.
    fn accept(&self, deadline: Instant, cancel: BorrowedFd<'_>) -> Result<UnixStream, HelloError> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(HelloError::Timeout);
            }
            let mut fds = [
                libc::pollfd {
                    fd: self.listener.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: cancel.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: `fds` is an array of two valid pollfd for the duration of the call.
            let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e.into());
            }
            if fds[1].revents != 0 {
                return Err(HelloError::Cancelled);
            }
            match self.listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false).map_err(HelloError::from)?;
                    return Ok(stream);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use relay_shim::identity::{say_hello, Refusal};
    use relay_shim::SessionId;
    use std::os::fd::AsFd;

    type Verdict = Result<(), HelloError>;

    fn hello(bridge: &Bridge, session: &str, secret: &LaunchSecret) -> Result<(), Refusal> {
        let sock = bridge.socket_path().as_os_str().to_owned();
        say_hello(Some(&sock), &SessionId::parse(session).unwrap(), secret)
    }

    /// Runs `client` against a bridge for `s1` answering once; returns both outcomes and what
    /// the verdict callback saw.
    fn exchange(
        client: impl FnOnce(&Bridge, &LaunchSecret) -> Result<(), Refusal> + Send,
    ) -> (Verdict, Result<(), Refusal>, Option<Verdict>) {
        let state = tempfile::tempdir().unwrap();
        let bridge = Bridge::open(state.path(), "s1").unwrap();
        let secret = relay_shim::identity::read_secret(bridge.secret_pipe().unwrap()).unwrap();
        let (cancel_r, _cancel_w) = sys::pipe2_cloexec().unwrap();
        let mut seen = None;
        let deadline = Instant::now() + Duration::from_secs(10);
        let (served, asked) = std::thread::scope(|s| {
            let c = s.spawn(|| client(&bridge, &secret));
            let served = bridge.answer_once(deadline, cancel_r.as_fd(), |v| seen = Some(v.clone()));
            (served, c.join().unwrap())
        });
        (served, asked, seen)
    }

    #[test]
    fn the_right_hello_is_confirmed_and_answered_ok() {
        let (served, asked, seen) = exchange(|b, s| hello(b, "s1", s));
        assert_eq!(served, Ok(()));
        assert_eq!(asked, Ok(()));
        assert_eq!(seen, Some(Ok(())));
    }

    #[test]
    fn a_wrong_secret_is_refused_on_both_sides() {
        let wrong = LaunchSecret::generate().unwrap();
        let (served, asked, seen) = exchange(|b, _| hello(b, "s1", &wrong));
        assert_eq!(served, Err(HelloError::WrongSecret));
        assert_eq!(asked, Err(Refusal::NotOk));
        assert_eq!(seen, Some(Err(HelloError::WrongSecret)));
    }

    #[test]
    fn another_sessions_hello_is_refused() {
        let (served, asked, _) = exchange(|b, s| hello(b, "s2", s));
        assert_eq!(served, Err(HelloError::WrongSession));
        assert_eq!(asked, Err(Refusal::NotOk));
    }

    #[test]
    fn lines_that_are_not_the_hello_are_refused() {
        // (type, kind, extra fields); `None` is a line that is not JSON at all.
        let cases = [
            None,
            Some(("Hola", "project_session", "")),
            Some(("Hello", "other", "")),
            Some(("Hello", "project_session", ",\"x\":1")),
        ];
        let line = |case: Option<(&str, &str, &str)>, s: &LaunchSecret| match case {
            None => "not json\n".to_owned(),
            Some((t, k, extra)) => format!(
                "{{\"type\":\"{t}\",\"kind\":\"{k}\",\"name\":\"s1\",\"token\":\"{}\"{extra}}}\n",
                String::from_utf8(s.expose().to_vec()).unwrap()
            ),
        };
        for case in cases {
            let (served, asked, _) = exchange(|b, s| {
                let mut c = UnixStream::connect(b.socket_path()).unwrap();
                c.write_all(line(case, s).as_bytes()).unwrap();
                let line = read_line(&mut c, Instant::now() + Duration::from_secs(10));
                assert!(!line.unwrap().starts_with(b"{\"type\":\"OK\""));
                Ok(())
            });
            assert_eq!(served, Err(HelloError::NotHello));
            assert_eq!(asked, Ok(()));
        }
    }

    #[test]
    fn an_over_long_line_is_refused() {
        let (served, _, _) = exchange(|b, _| {
            let mut c = UnixStream::connect(b.socket_path()).unwrap();
            let _ = c.write_all(&vec![b'a'; 70_000]);
            Ok(())
        });
        assert_eq!(served, Err(HelloError::TooLong));
    }

    #[test]
    fn the_socket_is_the_owners_alone_and_goes_with_the_bridge() {
        use std::os::unix::fs::PermissionsExt;
        let state = tempfile::tempdir().unwrap();
        let bridge = Bridge::open(state.path(), "s1").unwrap();
        let mode = fs::metadata(bridge.socket_path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let folder = bridge.socket_path().parent().unwrap().to_path_buf();
        drop(bridge);
        assert!(!folder.exists());
    }

    #[test]
    fn the_socket_is_named_hello_sock() {
        let state = tempfile::tempdir().unwrap();
        let bridge = Bridge::open(state.path(), "s1").unwrap();
        assert!(bridge.socket_path().ends_with("hello.sock"));
    }

    #[test]
    fn the_secret_pipe_holds_64_bytes() {
        let state = tempfile::tempdir().unwrap();
        let bridge = Bridge::open(state.path(), "s1").unwrap();
        let secret = relay_shim::identity::read_secret(bridge.secret_pipe().unwrap()).unwrap();
        assert_eq!(secret.expose().len(), 64);
    }

    #[test]
    fn nobody_connecting_before_the_deadline_is_a_timeout() {
        let state = tempfile::tempdir().unwrap();
        let bridge = Bridge::open(state.path(), "s1").unwrap();
        let (cancel_r, _cancel_w) = sys::pipe2_cloexec().unwrap();
        let soon = Instant::now() + Duration::from_millis(50);
        let got = bridge.answer_once(soon, cancel_r.as_fd(), |_| ());
        assert_eq!(got, Err(HelloError::Timeout));
    }

    #[test]
    fn a_wrong_secret_is_said_in_words() {
        assert_eq!(
            HelloError::WrongSecret.to_string(),
            "the Hello carries the wrong secret"
        );
    }

    #[test]
    fn the_secret_is_fresh_and_never_shown() {
        let state = tempfile::tempdir().unwrap();
        let a = Bridge::open(state.path(), "s1").unwrap();
        let b = Bridge::open(state.path(), "s1").unwrap();
        assert!(!a.secret.matches(b.secret.expose()));
        assert_ne!(a.socket_path(), b.socket_path());
        let shown = format!("{a:?}");
        let text = String::from_utf8(a.secret.expose().to_vec()).unwrap();
        assert!(!shown.contains(&text), "{shown}");
        use std::os::unix::fs::PermissionsExt;
        let dir = a.socket_path().parent().unwrap();
        assert_eq!(
            fs::metadata(dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
    }
}
