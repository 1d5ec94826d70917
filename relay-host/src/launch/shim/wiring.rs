//! The wiring of `relay-shim` for a launch: its descriptors and flags (with or without the
//! launch identity), and the gate that lets the launch count as started only once the shim
//! reported `hello_ok` (confirmed by the [`Bridge`] itself) and then `started`.
//!
//! In order: [`ShimWiring::new`] for the launch; the shim's flags take its
//! [`ShimWiring::identity`] and [`ShimWiring::status_fd`]; [`ShimWiring::attach`] places the
//! secret's pipe in the shim's descriptor map; once the shim is spawned, [`ShimWiring::start`]
//! makes the [`Gate`] that judges each status line until `started`.

use relay_shim::identity::{BRIDGE_SOCKET_VAR, SECRET_FD};
use relay_shim::{StatusEvent, DEFAULT_STATUS_FD, IDENTITY_STATUS_FD};
use relay_token::sys;
use relay_token::FdMap;
use serde_json::{json, Value};
use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::path::Path;
use std::process::Command;
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::launch::shim::bridge::{setup_err, Bridge, BridgeError, HelloError};

/// How the host wires `relay-shim` for one launch: with the identity Hello (a provider launch:
/// secret at 3, status at 4) or without (status at 3).
#[derive(Debug)]
pub(crate) struct ShimWiring {
    bridge: Option<(Bridge, OwnedFd)>,
}

impl ShimWiring {
    /// The wiring of a launch; with `identity`, a fresh [`Bridge`] in `state_dir` and the pipe
    /// holding its secret.
    pub(crate) fn new(
        identity: bool,
        state_dir: &Path,
        session_id: &str,
    ) -> Result<Self, BridgeError> {
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
    pub(crate) fn status_fd(&self) -> RawFd {
        match self.bridge {
            Some(_) => IDENTITY_STATUS_FD,
            None => DEFAULT_STATUS_FD,
        }
    }

    /// Whether the shim proves the launch first (its `--identity`).
    pub(crate) fn identity(&self) -> bool {
        self.bridge.is_some()
    }

    /// With the identity: places the secret's pipe at fd 3 in `map` and names the socket in
    /// `cmd`'s environment (call it after the environment is set: the variable must survive an
    /// `env_clear`). Without: nothing.
    pub(crate) fn attach<'a>(
        &'a self,
        cmd: &mut Command,
        map: &mut FdMap<'a>,
    ) -> Result<(), relay_token::PlaceError> {
        if let Some((bridge, secret)) = &self.bridge {
            map.place(secret.as_fd(), SECRET_FD)?;
            cmd.env(BRIDGE_SOCKET_VAR, bridge.socket_path());
        }
        Ok(())
    }

    /// Once the shim is spawned: closes the host's copy of the secret's pipe and lets the bridge
    /// answer (on a thread of its own, for at most `timeout`). The returned [`Gate`] judges the
    /// shim's status lines.
    pub(crate) fn start(self, timeout: Duration) -> Gate {
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
                let _ = tx.send(Err(e.into()));
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
                let _ = fail.send(Err(HelloError::Thread(Arc::new(e))));
            }
        }
        gate
    }
}

/// Judges the shim's status lines of one launch against its bridge. Dropping it stops the
/// bridge (if it still waits) and removes its socket.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    identity: bool,
    verdict: Option<Receiver<Result<(), HelloError>>>,
    confirmed: bool,
    cancel: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
    seen: Vec<StatusEvent>,
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
    pub(crate) fn check(&mut self, event: &StatusEvent) -> Result<(), IdentityRefused> {
        if !self.identity {
            return Ok(());
        }
        let line_shown = event.line().trim_end().to_owned();
        match event {
            StatusEvent::HelloOk { .. } => match self.verdict.as_ref().map(Receiver::try_recv) {
                Some(Ok(Ok(()))) => {
                    self.confirmed = true;
                    self.seen.push(*event);
                    Ok(())
                }
                Some(Ok(Err(e))) => Err(IdentityRefused::HelloRefused {
                    line: line_shown,
                    bridge: e.to_string(),
                }),
                _ => Err(IdentityRefused::NoHello { line: line_shown }),
            },
            StatusEvent::BadSecret { .. }
            | StatusEvent::HelloRefused { .. }
            | StatusEvent::NoIdentity => Err(IdentityRefused::NotProved {
                line: line_shown,
                bridge: self.bridge_note(),
            }),
            StatusEvent::Started { .. } if !self.confirmed => Err(IdentityRefused::Unconfirmed {
                line: line_shown,
                bridge: self.bridge_note(),
            }),
            StatusEvent::Started { .. } => {
                self.seen.push(*event);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The identity events that let the launch through (`hello_ok`, then `started`), each with
    /// `session_id` added, for the host's event log. Empty without the identity.
    pub(crate) fn events(&self, session_id: &str) -> Vec<Value> {
        self.seen
            .iter()
            .map(|event| {
                let mut e = json!({"event": event.name(), "session_id": session_id});
                if let StatusEvent::HelloOk { pid } | StatusEvent::Started { pid } = event {
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
/// use relay_host::launch::error::IdentityRefused;
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

#[cfg(test)]
mod tests {
    use super::*;
    use relay_shim::identity::{say_hello, Refusal};
    use relay_shim::SessionId;
    use std::fs;

    #[test]
    fn it_answers_once_and_then_the_socket_is_gone() {
        let state = tempfile::tempdir().unwrap();
        let w = ShimWiring::new(true, state.path(), "s1").unwrap();
        let (bridge, secret_fd) = w.bridge.as_ref().unwrap();
        let sock = bridge.socket_path().as_os_str().to_owned();
        let secret = {
            let dup = secret_fd.try_clone().unwrap();
            relay_shim::identity::read_secret(dup).unwrap()
        };
        let mut gate = w.start(Duration::from_secs(10));
        let sid = SessionId::parse("s1").unwrap();
        assert_eq!(say_hello(Some(&sock), &sid, &secret), Ok(()));
        assert!(gate.check(&StatusEvent::HelloOk { pid: 7 }).is_ok());
        assert!(gate.check(&StatusEvent::Started { pid: 8 }).is_ok());
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
    fn the_identity_moves_the_status_from_3_to_4() {
        let state = tempfile::tempdir().unwrap();
        let w = ShimWiring::new(false, state.path(), "s1").unwrap();
        assert_eq!((w.identity(), w.status_fd()), (false, 3));
        let w = ShimWiring::new(true, state.path(), "s1").unwrap();
        assert_eq!((w.identity(), w.status_fd()), (true, 4));
    }

    #[test]
    fn status_fd_is_3_without_identity() {
        let state = tempfile::tempdir().unwrap();
        let w = ShimWiring::new(false, state.path(), "s1").unwrap();
        assert_eq!(w.status_fd(), 3);
    }

    #[test]
    fn a_wiring_with_a_bridge_proves_the_identity() {
        let state = tempfile::tempdir().unwrap();
        let w = ShimWiring::new(true, state.path(), "s1").unwrap();
        assert!(w.identity());
    }

    #[test]
    fn attach_places_the_secret_at_3() {
        let state = tempfile::tempdir().unwrap();
        let w = ShimWiring::new(true, state.path(), "s1").unwrap();
        let mut cmd = Command::new("true");
        let mut map = FdMap::new();
        w.attach(&mut cmd, &mut map).unwrap();
        assert_eq!(map.targets(), vec![3]);
    }

    #[test]
    fn without_the_identity_started_passes_at_once() {
        let state = tempfile::tempdir().unwrap();
        let w = ShimWiring::new(false, state.path(), "s1").unwrap();
        let mut gate = w.start(Duration::from_secs(1));
        assert!(gate.check(&StatusEvent::Started { pid: 9 }).is_ok());
    }

    #[test]
    fn with_the_identity_started_before_a_hello_is_refused() {
        let state = tempfile::tempdir().unwrap();
        let w = ShimWiring::new(true, state.path(), "s1").unwrap();
        let mut gate = w.start(Duration::from_secs(1));
        let err = gate.check(&StatusEvent::Started { pid: 9 }).unwrap_err();
        assert!(err.to_string().contains("started"), "{err}");
    }

    #[test]
    fn a_gate_without_the_identity_logs_no_events() {
        let gate = Gate::default();
        assert!(gate.events("s1").is_empty());
    }

    /// The module's order: the shim's flags from the wiring, the status pipe placed, the secret
    /// attached, the child spawned, then the gate judging its status line.
    #[test]
    fn wired_in_order_the_child_gets_the_secret_at_3_and_reports_at_4() {
        use std::io::BufRead;
        let state = tempfile::tempdir().unwrap();
        let wiring = ShimWiring::new(true, state.path(), "s1").unwrap();
        let mut opts = relay_shim::ShimOptions::parse(["--", "claude"]).unwrap();
        (opts.identity, opts.status_fd) = (wiring.identity(), wiring.status_fd());
        let flags: Vec<String> = (opts.to_args().iter())
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(flags.contains(&"--identity".to_string()), "{flags:?}");
        assert!(
            flags.windows(2).any(|w| w == ["--status-fd", "4"]),
            "{flags:?}"
        );
        let (status_r, status_w) = std::io::pipe().unwrap();
        let mut cmd = Command::new("sh");
        let line = r#"{"event":"started","pid":1}"#;
        cmd.args(["-c", &format!("head -c 64 <&3 | wc -c; echo '{line}' >&4")]);
        cmd.stdout(std::process::Stdio::piped());
        let mut map = FdMap::new();
        map.place(status_w.as_fd(), wiring.status_fd()).unwrap();
        wiring.attach(&mut cmd, &mut map).unwrap();
        let child = map.spawn(&mut cmd).unwrap();
        drop(status_w);
        let mut gate = wiring.start(Duration::from_secs(1));
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "64");
        let mut got = String::new();
        std::io::BufReader::new(status_r)
            .read_line(&mut got)
            .unwrap();
        let event = StatusEvent::parse(got.trim_end()).unwrap();
        let err = gate.check(&event).unwrap_err();
        assert!(err.to_string().contains("started"), "{err}");
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
            .check(&StatusEvent::HelloOk { pid: 7 })
            .unwrap_err()
            .to_string();
        assert!(err.contains("the bridge got no Hello"), "{err}");
        for (event, shown) in [
            (
                StatusEvent::BadSecret { reason: "length" },
                r#"{"event":"bad_secret","reason":"length"}"#,
            ),
            (
                StatusEvent::HelloRefused { reason: "timeout" },
                r#"{"event":"hello_refused","reason":"timeout"}"#,
            ),
            (StatusEvent::NoIdentity, r#"{"event":"no_identity"}"#),
        ] {
            let err = start().check(&event).unwrap_err().to_string();
            assert!(err.ends_with(shown), "{err}");
        }
        // A line with words of its own never becomes an event, so never reaches a message.
        assert!(
            StatusEvent::parse(r#"{"event":"hello_refused","reason":"Bearer abc\n"}"#).is_err()
        );
        // A dropped gate stops its bridge at once and leaves nothing behind.
        assert_eq!(fs::read_dir(state.path()).unwrap().count(), 0);
    }
}
