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
//! ```no_run
//! use relay_token::host::bridge::ShimWiring;
//! use relay_token::FdMap;
//! let wiring = ShimWiring::new(true, "/var/lib/relay".as_ref(), "s1")?;
//! let mut cmd = std::process::Command::new("relay-shim");
//! cmd.args(wiring.args()).args(["--session-id", "s1", "--", "claude"]);
//! let (status_r, status_w) = std::io::pipe()?;
//! let mut map = FdMap::new();
//! # use std::os::fd::AsFd;
//! map.place(status_w.as_fd(), wiring.status_fd());
//! wiring.attach(&mut cmd, &mut map);
//! let child = map.spawn(&mut cmd)?;
//! let mut gate = wiring.start(std::time::Duration::from_secs(10));
//! // For each status line `v`: gate.check(&v)?; until `started`.
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::fs::{self, DirBuilder};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};

use crate::fds::FdMap;
use crate::shim::identity::{
    ok_line, read_line, LaunchSecret, LineError, BRIDGE_SOCKET_VAR, HELLO_KIND, SECRET_FD,
};
use crate::shim::{DEFAULT_STATUS_FD, IDENTITY_STATUS_FD};
use crate::sys;

/// The socket's file name inside its per-launch folder.
pub const SOCKET_NAME: &str = "hello.sock";

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

fn setup_err(what: impl fmt::Display) -> impl FnOnce(io::Error) -> BridgeError {
    let what = what.to_string();
    move |source| BridgeError { what, source }
}

/// Why the bridge did not confirm a launch. Never holds a byte of what the peer sent.
///
/// ```
/// use relay_token::host::bridge::HelloError;
/// assert_eq!(HelloError::WrongSecret.to_string(), "the Hello carries the wrong secret");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HelloError {
    /// Nobody connected, or no whole line came, before the deadline.
    Timeout,
    /// The launch gave up waiting (the bridge was dropped).
    Cancelled,
    /// The line is longer than 64 KiB.
    TooLong,
    /// The peer closed the connection before a whole line.
    Closed,
    /// A system call failed (its words).
    Io(String),
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
            HelloError::NotHello => write!(f, "the line is not a Hello"),
            HelloError::WrongSession => write!(f, "the Hello names another session"),
            HelloError::WrongSecret => write!(f, "the Hello carries the wrong secret"),
        }
    }
}

impl std::error::Error for HelloError {}

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
pub struct Bridge {
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
    ///
    /// ```
    /// # use std::os::unix::fs::PermissionsExt;
    /// let state = tempfile::tempdir()?;
    /// let bridge = relay_token::host::bridge::Bridge::open(state.path(), "s1")?;
    /// let mode = std::fs::metadata(bridge.socket_path())?.permissions().mode() & 0o777;
    /// assert_eq!(mode, 0o600);
    /// let folder = bridge.socket_path().parent().unwrap().to_path_buf();
    /// drop(bridge);
    /// assert!(!folder.exists());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(state_dir: &Path, session_id: &str) -> Result<Bridge, BridgeError> {
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
    ///
    /// ```
    /// let state = tempfile::tempdir()?;
    /// let bridge = relay_token::host::bridge::Bridge::open(state.path(), "s1")?;
    /// assert!(bridge.socket_path().ends_with("hello.sock"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// A pipe's read end holding the secret, its write end already closed (64 bytes, below any
    /// pipe's capacity: the write never blocks).
    ///
    /// ```
    /// let state = tempfile::tempdir()?;
    /// let bridge = relay_token::host::bridge::Bridge::open(state.path(), "s1")?;
    /// let secret = relay_token::shim::identity::read_secret(bridge.secret_pipe()?)?;
    /// assert_eq!(secret.expose().len(), 64);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn secret_pipe(&self) -> io::Result<OwnedFd> {
        // Under the spawn lock, like the token pipe: the write end must not be closed under a
        // concurrent spawn that found its number busy.
        let _serial = crate::fds::spawn_lock();
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
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use relay_token::host::bridge::{Bridge, HelloError};
    /// let state = tempfile::tempdir()?;
    /// let bridge = Bridge::open(state.path(), "s1")?;
    /// let (_cancel_r, cancel_w) = std::io::pipe()?;
    /// # use std::os::fd::AsFd;
    /// let soon = Instant::now() + Duration::from_millis(50);
    /// assert_eq!(bridge.answer_once(soon, _cancel_r.as_fd(), |_| ()), Err(HelloError::Timeout));
    /// # drop(cancel_w);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn answer_once(
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
            Err(LineError::Io(e)) => Err(HelloError::Io(e.to_string())),
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
                return Err(HelloError::Io(e.to_string()));
            }
            if fds[1].revents != 0 {
                return Err(HelloError::Cancelled);
            }
            match self.listener.accept() {
                Ok((stream, _)) => {
                    stream
                        .set_nonblocking(false)
                        .map_err(|e| HelloError::Io(e.to_string()))?;
                    return Ok(stream);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(HelloError::Io(e.to_string())),
            }
        }
    }
}

/// How the host wires `relay-shim` for one launch: with the identity Hello (a provider launch:
/// secret at 3, status at 4) or without (status at 3).
#[derive(Debug)]
pub struct ShimWiring {
    bridge: Option<(Bridge, OwnedFd)>,
}

impl ShimWiring {
    /// The wiring of a launch; with `identity`, a fresh [`Bridge`] in `state_dir` and the pipe
    /// holding its secret.
    ///
    /// ```
    /// let state = tempfile::tempdir()?;
    /// let w = relay_token::host::bridge::ShimWiring::new(false, state.path(), "s1")?;
    /// assert_eq!((w.args(), w.status_fd()), (vec!["--status-fd", "3"], 3));
    /// let w = relay_token::host::bridge::ShimWiring::new(true, state.path(), "s1")?;
    /// assert_eq!((w.args(), w.status_fd()), (vec!["--identity", "--status-fd", "4"], 4));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(identity: bool, state_dir: &Path, session_id: &str) -> Result<Self, BridgeError> {
        if !identity {
            return Ok(ShimWiring { bridge: None });
        }
        let bridge = Bridge::open(state_dir, session_id)?;
        let secret = bridge
            .secret_pipe()
            .map_err(setup_err("the secret's pipe"))?;
        Ok(ShimWiring {
            bridge: Some((bridge, secret)),
        })
    }

    /// Where the shim writes its status lines: 4 with the identity, else 3.
    ///
    /// ```
    /// # let state = tempfile::tempdir()?;
    /// let w = relay_token::host::bridge::ShimWiring::new(false, state.path(), "s1")?;
    /// assert_eq!(w.status_fd(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn status_fd(&self) -> RawFd {
        match self.bridge {
            Some(_) => IDENTITY_STATUS_FD,
            None => DEFAULT_STATUS_FD,
        }
    }

    /// The shim's options for this layout (`--identity` and `--status-fd N`).
    ///
    /// ```
    /// # let state = tempfile::tempdir()?;
    /// let w = relay_token::host::bridge::ShimWiring::new(true, state.path(), "s1")?;
    /// assert_eq!(w.args()[0], "--identity");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn args(&self) -> Vec<&'static str> {
        match self.bridge {
            Some(_) => vec!["--identity", "--status-fd", "4"],
            None => vec!["--status-fd", "3"],
        }
    }

    /// With the identity: places the secret's pipe at fd 3 in `map` and names the socket in
    /// `cmd`'s environment (call it after the environment is set: the variable must survive an
    /// `env_clear`). Without: nothing.
    ///
    /// ```
    /// # let state = tempfile::tempdir()?;
    /// let w = relay_token::host::bridge::ShimWiring::new(true, state.path(), "s1")?;
    /// let mut cmd = std::process::Command::new("true");
    /// let mut map = relay_token::FdMap::new();
    /// w.attach(&mut cmd, &mut map);
    /// assert_eq!(map.targets(), vec![3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn attach<'a>(&'a self, cmd: &mut Command, map: &mut FdMap<'a>) {
        if let Some((bridge, secret)) = &self.bridge {
            cmd.env(BRIDGE_SOCKET_VAR, bridge.socket_path());
            map.place(secret.as_fd(), SECRET_FD);
        }
    }

    /// Once the shim is spawned: closes the host's copy of the secret's pipe and lets the bridge
    /// answer (on a thread of its own, for at most `timeout`). The returned [`Gate`] judges the
    /// shim's status lines.
    ///
    /// ```
    /// # let state = tempfile::tempdir()?;
    /// let w = relay_token::host::bridge::ShimWiring::new(false, state.path(), "s1")?;
    /// let mut gate = w.start(std::time::Duration::from_secs(1));
    /// assert!(gate.check(&serde_json::json!({"event": "started", "pid": 9})).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start(self, timeout: Duration) -> Gate {
        let Some((bridge, secret)) = self.bridge else {
            return Gate::default();
        };
        drop(secret);
        let (tx, rx) = mpsc::channel();
        let mut gate = Gate::default();
        gate.identity = true;
        gate.verdict = Some(rx);
        let cancel = match sys::pipe2_cloexec() {
            Ok(pair) => pair,
            Err(e) => {
                let _ = tx.send(Err(HelloError::Io(e.to_string())));
                return gate;
            }
        };
        let (cancel_r, cancel_w) = cancel;
        let deadline = Instant::now() + timeout;
        let fail = tx.clone();
        let spawned = std::thread::Builder::new()
            .name("relay-bridge".into())
            .spawn(move || {
                let _ = bridge.answer_once(deadline, cancel_r.as_fd(), |v| {
                    let _ = tx.send(v.clone());
                });
            });
        match spawned {
            Ok(handle) => {
                gate.thread = Some(handle);
                gate.cancel = Some(cancel_w);
            }
            Err(e) => {
                let _ = fail.send(Err(HelloError::Io(format!("bridge thread: {e}"))));
            }
        }
        gate
    }
}

/// Judges the shim's status lines of one launch against its bridge. Dropping it stops the
/// bridge (if it still waits) and removes its socket.
#[derive(Debug, Default)]
pub struct Gate {
    identity: bool,
    verdict: Option<Receiver<Result<(), HelloError>>>,
    confirmed: bool,
    cancel: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
    seen: Vec<Value>,
}

impl Drop for Gate {
    fn drop(&mut self) {
        drop(self.cancel.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Gate {
    /// Checks one status line. Without the identity every line passes. With it: `hello_ok`
    /// passes only when the bridge confirmed the Hello; `bad_secret`, `hello_refused` and
    /// `no_identity` refuse the launch; `started` passes only after a confirmed `hello_ok`.
    /// The error is the refusal's message, naming the event the shim reported.
    ///
    /// ```
    /// # let state = tempfile::tempdir()?;
    /// let w = relay_token::host::bridge::ShimWiring::new(true, state.path(), "s1")?;
    /// let mut gate = w.start(std::time::Duration::from_secs(1));
    /// let err = gate.check(&serde_json::json!({"event": "started", "pid": 9})).unwrap_err();
    /// assert!(err.to_string().contains("started"), "{err}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check(&mut self, line: &Value) -> Result<(), IdentityRefused> {
        if !self.identity {
            return Ok(());
        }
        let event = line.get("event").and_then(Value::as_str).unwrap_or("");
        let line_shown = shown(line);
        match event {
            "hello_ok" => match self.verdict.as_ref().map(Receiver::try_recv) {
                Some(Ok(Ok(()))) => {
                    self.confirmed = true;
                    self.seen.push(line.clone());
                    Ok(())
                }
                Some(Ok(Err(e))) => Err(IdentityRefused::HelloRefused {
                    line: line_shown,
                    bridge: e.to_string(),
                }),
                _ => Err(IdentityRefused::NoHello { line: line_shown }),
            },
            "bad_secret" | "hello_refused" | "no_identity" => Err(IdentityRefused::NotProved {
                line: line_shown,
                bridge: self.bridge_note(),
            }),
            "started" if !self.confirmed => Err(IdentityRefused::Unconfirmed {
                line: line_shown,
                bridge: self.bridge_note(),
            }),
            "started" => {
                self.seen.push(line.clone());
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The identity events that let the launch through (`hello_ok`, then `started`), each with
    /// `session_id` added, for the host's event log. Empty without the identity.
    ///
    /// ```
    /// let gate = relay_token::host::bridge::Gate::default();
    /// assert!(gate.events("s1").is_empty());
    /// ```
    pub fn events(&self, session_id: &str) -> Vec<Value> {
        self.seen
            .iter()
            .map(|v| {
                let mut e = json!({"event": v["event"], "session_id": session_id});
                if let Some(pid) = v.get("pid").and_then(Value::as_u64) {
                    e["pid"] = json!(pid);
                }
                e
            })
            .collect()
    }

    /// What the bridge saw, when it already judged: `"; the bridge: ..."`.
    fn bridge_note(&self) -> String {
        match self.verdict.as_ref().map(Receiver::try_recv) {
            Some(Ok(Err(e))) => format!("; the bridge: {e}"),
            _ => String::new(),
        }
    }
}

/// Why a launch with the identity Hello is refused: the shim's status line (as shown in a refusal: its
/// `event` and `reason` words only) and what the bridge said.
///
/// ```
/// use relay_token::host::bridge::IdentityRefused;
/// let e = IdentityRefused::NoHello { line: r#"{"event":"hello_ok"}"#.into() };
/// assert_eq!(e.to_string(), r#"relay-shim reported {"event":"hello_ok"}, but the bridge got no Hello"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdentityRefused {
    /// The shim said its Hello was accepted, but the bridge refused it.
    HelloRefused {
        /// The status line, as shown.
        line: String,
        /// The bridge's reason.
        bridge: String,
    },
    /// The shim said its Hello was accepted, but the bridge got none.
    NoHello {
        /// The status line, as shown.
        line: String,
    },
    /// The shim could not prove the launch.
    NotProved {
        /// The status line, as shown.
        line: String,
        /// `; the bridge: REASON`, or empty.
        bridge: String,
    },
    /// The shim started its program without a confirmed Hello.
    Unconfirmed {
        /// The status line, as shown.
        line: String,
        /// `; the bridge: REASON`, or empty.
        bridge: String,
    },
}

impl std::fmt::Display for IdentityRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdentityRefused::HelloRefused { line, bridge } => write!(
                f,
                "relay-shim reported {line}, but the bridge refused its Hello: {bridge}"
            ),
            IdentityRefused::NoHello { line } => {
                write!(f, "relay-shim reported {line}, but the bridge got no Hello")
            }
            IdentityRefused::NotProved { line, bridge } => write!(
                f,
                "relay-shim could not prove the launch: it reported {line}{bridge}"
            ),
            IdentityRefused::Unconfirmed { line, bridge } => write!(
                f,
                "relay-shim reported {line} without a confirmed Hello{bridge}"
            ),
        }
    }
}

impl std::error::Error for IdentityRefused {}

/// A status line as a refusal message shows it: its `event` and `reason` only, and only when
/// they are short words, so a shim cannot write arbitrary text into the host's logs.
fn shown(line: &Value) -> String {
    let word = |k: &str| {
        line.get(k)
            .and_then(Value::as_str)
            .filter(|s| s.len() <= 32 && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
    };
    let mut v = json!({"event": word("event").unwrap_or("?")});
    if let Some(r) = word("reason") {
        v["reason"] = json!(r);
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shim::identity::{say_hello, Refusal};
    use crate::shim::SessionId;

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
        let secret = crate::shim::identity::read_secret(bridge.secret_pipe().unwrap()).unwrap();
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
    fn it_answers_once_and_then_the_socket_is_gone() {
        let state = tempfile::tempdir().unwrap();
        let w = ShimWiring::new(true, state.path(), "s1").unwrap();
        let (bridge, secret_fd) = w.bridge.as_ref().unwrap();
        let sock = bridge.socket_path().as_os_str().to_owned();
        let secret = {
            let dup = secret_fd.try_clone().unwrap();
            crate::shim::identity::read_secret(dup).unwrap()
        };
        let mut gate = w.start(Duration::from_secs(10));
        let sid = SessionId::parse("s1").unwrap();
        assert_eq!(say_hello(Some(&sock), &sid, &secret), Ok(()));
        assert!(gate.check(&json!({"event": "hello_ok", "pid": 7})).is_ok());
        assert!(gate.check(&json!({"event": "started", "pid": 8})).is_ok());
        assert_eq!(
            gate.events("s1"),
            [
                json!({"event": "hello_ok", "session_id": "s1", "pid": 7}),
                json!({"event": "started", "session_id": "s1", "pid": 8}),
            ]
        );
        drop(gate);
        assert!(matches!(
            say_hello(Some(&sock), &sid, &secret),
            Err(Refusal::Connect(_))
        ));
        assert_eq!(
            fs::read_dir(state.path()).unwrap().count(),
            0,
            "nothing left"
        );
    }

    #[test]
    fn hello_ok_without_a_hello_and_refusals_stop_the_launch() {
        let state = tempfile::tempdir().unwrap();
        let start = || {
            ShimWiring::new(true, state.path(), "s1")
                .unwrap()
                .start(Duration::from_secs(10))
        };
        let err = start()
            .check(&json!({"event": "hello_ok", "pid": 7}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("the bridge got no Hello"), "{err}");
        for line in [
            json!({"event": "bad_secret", "reason": "length"}),
            json!({"event": "hello_refused", "reason": "timeout"}),
            json!({"event": "no_identity"}),
        ] {
            let err = start().check(&line).unwrap_err().to_string();
            assert!(err.contains(&shown(&line)), "{err}");
        }
        let err = start()
            .check(&json!({"event": "hello_refused", "reason": "Bearer abc\n"}))
            .unwrap_err()
            .to_string();
        assert!(err.ends_with("{\"event\":\"hello_refused\"}"), "{err}");
        // A dropped gate stops its bridge at once and leaves nothing behind.
        assert_eq!(fs::read_dir(state.path()).unwrap().count(), 0);
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
