//! A launch's network: the check that a token launch does not share the host's network unless
//! the settings say so, and the proxy an allow-list session gets (started with the session,
//! ended with it); the step itself is `connect`.
//! A stand-in session's own `relay-stand-in` is started here too (`stand_in`), and its API
//! use counted (`api_use`), and a token its API host refuses noted (`token_refused`).

pub(crate) mod api_use;
pub(crate) mod connect;
mod deny_notes;
pub(crate) mod stand_in;
pub(crate) mod stand_in_proxy;
pub(crate) mod token_refused;

use std::error::Error;
use std::fmt;
use std::io;
use std::path::Path;

#[cfg(target_os = "linux")]
use serde_json::json;

use crate::launch::plan::LaunchPlan;
use crate::net::proxy::{Denied, Proxy};
use crate::net::{network_rules, token_network_allowed, HostNetworkRefused, Network};
use crate::settings::Settings;
use crate::state::State;
use relay_token::sandbox::SandboxNet;

/// The name of the proxy's socket in the session folder.
const SOCKET_NAME: &str = "net.sock";

/// [`check`] for a launch of `v`, which is sandboxed (any other has no network of its own).
pub(crate) fn check_launch(
    v: &LaunchPlan,
    carries_token: bool,
    settings: &Settings,
) -> Result<(), NetworkError> {
    match v.sandboxed() {
        true => check(v.network(), carries_token, settings),
        false => Ok(()),
    }
}

/// Refuses (`sandbox_unavailable`) a sandboxed launch that carries the token with `network:
/// "host"` unless the settings hold `"token_network": "host"`, and one whose allow-list has a
/// wildcard entry unless they hold `"token_wildcards": true`.
pub(crate) fn check(
    network: &Network,
    carries_token: bool,
    settings: &Settings,
) -> Result<(), NetworkError> {
    let rules = network_rules(network);
    if !cfg!(target_os = "linux") && !rules.shares_host {
        // No network namespace to put the session in: refused, never run on the host's network.
        let network = network.word();
        return Err(NetworkError::NeedsNamespace { network });
    }
    token_network_allowed(network, carries_token, settings.token_network)
        .map_err(NetworkError::HostNetwork)?;
    let hosts = match (rules.proxied, carries_token && !settings.token_wildcards) {
        (Some(list), true) => list.wildcards(),
        (Some(_), false) | (None, true) | (None, false) => Vec::new(),
    };
    match hosts.is_empty() {
        true => Ok(()),
        false => Err(NetworkError::Wildcards { hosts }),
    }
}

/// The sandbox's network for `network`, and the running proxy when it is an allow-list: bound
/// at `session_dir/net.sock`, each refusal written to the events as `network_denied` with the
/// session, host, port, reason and what would allow it (`allow_with`). When `served`, a stand-in
/// session's `relay-stand-in` already listens there: no proxy is started here. A proxy that
/// cannot be set up refuses the launch (`sandbox_unavailable`, with the reason); there is no
/// fall back to the host's network.
pub(crate) fn start(
    network: &Network,
    forwarder: Option<&Path>,
    session_dir: &Path,
    state: &State,
    session_id: &str,
    served: bool,
) -> Result<(SandboxNet, Option<HereProxy>), NetworkError> {
    let list = match network {
        Network::Host => return Ok((SandboxNet::Host, None)),
        Network::None => return Ok((SandboxNet::Loopback, None)),
        Network::Allow(list) => list.clone(),
    };
    let forwarder = forwarder
        .map(Path::to_path_buf)
        .ok_or_else(|| NetworkError::Proxy {
            what: "the forwarder".into(),
            source: io::Error::new(io::ErrorKind::NotFound, "not found"),
        })?;
    let refuse = |what: String| move |source: io::Error| NetworkError::Proxy { what, source };
    let socket = session_socket(session_dir);
    let inside = crate::net::relay_inside();
    let proxy = match served {
        true => None,
        false => {
            // A socket left by an earlier run of this session id (the session folder is the
            // host's, and this launch holds the session's lock).
            let _ = std::fs::remove_file(&socket);
            let events = State::open(state.path()).map_err(refuse("state folder".into()))?;
            // A refused host is the session's text: it may spell the token (`CONNECT
            // <token>.x:443`).
            events.set_redactor(state.redactor().clone());
            let notes = std::sync::Arc::new(deny_notes::DenyNotes::new(events, session_id));
            let noted = notes.clone();
            let on_deny = Box::new(move |d: &Denied| {
                noted.denied(&d.host, d.port.into(), d.reason, &d.allow_with());
            });
            let p = Proxy::start_with(&socket, list, on_deny, None)
                .map_err(refuse(format!("socket {}", socket.display())))?;
            Some(HereProxy { proxy: p, notes })
        }
    };
    let net = SandboxNet::Proxy {
        socket,
        forwarder,
        inside,
    };
    Ok((net, proxy))
}

/// Where a session's proxy listens: [`SOCKET_NAME`] in its session folder.
pub(crate) fn session_socket(session_dir: &Path) -> std::path::PathBuf {
    session_dir.join(SOCKET_NAME)
}

/// Refuses an allow-list launch whose proxy socket path is longer than a Unix socket takes (a
/// deep state folder), before anything starts, in pipe and stand-in mode alike (the proxy is
/// relay-host's or `relay-stand-in`'s); other networks need no socket.
pub(crate) fn check_socket(network: &Network, socket: &Path) -> Result<(), NetworkError> {
    use std::os::unix::ffi::OsStrExt;
    let room = std::mem::size_of::<libc::sockaddr_un>()
        - std::mem::offset_of!(libc::sockaddr_un, sun_path);
    let proxied = crate::net::network_rules(network).proxied.is_some();
    if !proxied || socket.as_os_str().as_bytes().len() < room {
        return Ok(());
    }
    Err(NetworkError::Proxy {
        what: format!("socket {}", socket.display()),
        source: io::Error::new(
            io::ErrorKind::InvalidInput,
            "path must be shorter than SUN_LEN",
        ),
    })
}

/// A request a stand-in session's proxy refused on an intercepted connection: the
/// `stand_in_refused` event (the session, host, port, the status the session got and why) and
/// the log line.
#[cfg(target_os = "linux")]
pub(crate) fn note_refused(
    events: &State,
    id: &str,
    host: &str,
    port: u64,
    status: u64,
    reason: &str,
) {
    let _ = events.event(&json!({
        "event": "stand_in_refused",
        "session_id": id,
        "host": host,
        "port": port,
        "status": status,
        "reason": reason,
    }));
    events.log(&format!(
        "session {id}: stand-in proxy refused a request to {host}:{port} ({status}: {reason})"
    ));
}

/// Why the session's network cannot be made as the template asks (`sandbox_unavailable`).
///
/// ```
/// use relay_host::launch::error::NetworkError;
/// let e = NetworkError::Wildcards { hosts: vec![".example.com".into()] };
/// assert!(e.to_string().starts_with("a launch with the token may reach .example.com only"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum NetworkError {
    /// This system has no network namespace for a network other than the host's.
    NeedsNamespace {
        /// The network's word (`none`, `allow-list`).
        network: &'static str,
    },
    /// A token launch on the host's network without the operator's setting.
    HostNetwork(HostNetworkRefused),
    /// A token launch whose allow-list has wildcards without the operator's setting.
    Wildcards {
        /// The wildcard entries.
        hosts: Vec<String>,
    },
    /// The allow-list's proxy cannot be set up.
    Proxy {
        /// What failed, with its path.
        what: String,
        /// The error.
        source: io::Error,
    },
}

impl fmt::Display for NetworkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetworkError::NeedsNamespace { network } => write!(
                f,
                "network {network:?} needs a network namespace of the session's own (Linux); on \
                 this system a template can use \"host\" only"
            ),
            NetworkError::HostNetwork(e) => write!(f, "{e}"),
            NetworkError::Wildcards { hosts } => write!(
                f,
                "a launch with the token may reach {} only when the settings say \
                 \"token_wildcards\": true (a wildcard covers hosts other people control); \
                 list the exact host names instead",
                hosts.join(", ")
            ),
            NetworkError::Proxy { what, source } => write!(
                f,
                "the network allow-list needs a proxy, which cannot be set up: {what}: {source}"
            ),
        }
    }
}

impl Error for NetworkError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            NetworkError::HostNetwork(e) => Some(e),
            NetworkError::Proxy { source, .. } => Some(source),
            NetworkError::NeedsNamespace { .. } | NetworkError::Wildcards { .. } => None,
        }
    }
}

/// What a launch's network step made: what the sandbox gets (a sandboxed launch only) and
/// what the launch hands over. The proxy of an allow-list it starts goes to the launch's
/// guard ([`crate::launch::guard`]), and ends with the session.
pub(crate) struct Networked {
    /// The sandbox's network, for a sandboxed launch.
    pub net: Option<SandboxNet>,
    /// What the launch hands over.
    pub handed: Handed,
}

/// What a launch hands its session: the token on fd 5 (the real one, or stand-in mode's
/// stand-in), and in stand-in mode the session CA's certificate the sandbox shows.
#[derive(Default)]
pub(crate) struct Handed {
    /// What fd 5 carries, when the launch carries the token.
    pub token: Option<relay_token::ClaudeToken>,
    /// Stand-in mode: the session CA's certificate in the session folder, shown read-only at
    /// `/run/relay/ca.pem`.
    pub ca_file: Option<std::path::PathBuf>,
}

/// relay-host's own proxy thread of one session, and the refusals it noted: dropped, the proxy
/// stops, then what was left out of the logs is told ([`deny_notes::DenyNotes::finish`]).
pub(crate) struct HereProxy {
    proxy: Proxy,
    notes: std::sync::Arc<deny_notes::DenyNotes>,
}

impl Drop for HereProxy {
    fn drop(&mut self) {
        self.proxy.stop();
        self.notes.finish();
    }
}

/// A session's running allow-list proxy: a thread of relay-host's own, or a stand-in session's
/// `relay-stand-in` ([`crate::launch::network::stand_in`]). Dropping it ends it.
pub(crate) enum SessionProxy {
    /// relay-host's own proxy thread.
    Here(#[allow(dead_code)] HereProxy),
    /// A stand-in session's program.
    StandIn(#[allow(dead_code)] crate::launch::network::stand_in_proxy::StandInProxy),
}
