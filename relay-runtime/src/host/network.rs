//! A launch's network: the check that a token launch does not share the host's network unless
//! the settings say so, and the proxy an allow-list session gets (started with the session,
//! ended with it).

use std::path::Path;

use serde_json::json;

use super::error::LaunchError;
use super::state::State;
use crate::net::proxy::{Denied, Proxy};
use crate::net::{token_network_allowed, Network};
use crate::sandbox::SandboxNet;
use crate::settings::Settings;

/// The name of the proxy's socket in the session folder.
pub const SOCKET_NAME: &str = "net.sock";

/// Refuses (`sandbox_unavailable`) a sandboxed launch that carries the token with `network:
/// "host"` unless the settings hold `"token_network": "host"`, and one whose allow-list has a
/// wildcard entry unless they hold `"token_wildcards": true`.
///
/// ```
/// use relay_runtime::{host::network::check, net::Network, settings::Settings};
/// assert!(check(&Network::Host, true, &Settings::default()).is_err());
/// assert!(check(&Network::Host, false, &Settings::default()).is_ok());
/// ```
pub fn check(
    network: &Network,
    carries_token: bool,
    settings: &Settings,
) -> Result<(), LaunchError> {
    if !cfg!(target_os = "linux") && *network != Network::Host {
        // No network namespace to put the session in: refused, never run on the host's network.
        return Err(LaunchError::SandboxUnavailable(format!(
            "network {:?} needs a network namespace of the session's own (Linux); on this \
             system a template can use \"host\" only",
            network.word()
        )));
    }
    token_network_allowed(network, carries_token, settings.token_network)
        .map_err(|e| LaunchError::SandboxUnavailable(e.to_string()))?;
    match network {
        Network::Allow(list) if carries_token && !settings.token_wildcards => {
            match list.wildcards().as_slice() {
                [] => Ok(()),
                w => Err(LaunchError::SandboxUnavailable(format!(
                    "a launch with the token may reach {} only when the settings say \
                     \"token_wildcards\": true (a wildcard covers hosts other people control); \
                     list the exact host names instead",
                    w.join(", ")
                ))),
            }
        }
        _ => Ok(()),
    }
}

/// The sandbox's network for `network`, and the running proxy when it is an allow-list: bound
/// at `session_dir/net.sock`, each refusal written to the events as `network_denied` with the
/// session, host and port. A proxy that cannot be set up refuses the launch
/// (`sandbox_unavailable`, with the reason); there is no fall back to the host's network.
///
/// ```no_run
/// use relay_runtime::{host::{network::start, state::State}, net::Network};
/// let dir = tempfile::tempdir()?;
/// let state = State::open(dir.path())?;
/// let (net, proxy) = start(&Network::None, dir.path(), &state, "s1")?;
/// assert!(proxy.is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn start(
    network: &Network,
    session_dir: &Path,
    state: &State,
    session_id: &str,
) -> Result<(SandboxNet, Option<Proxy>), LaunchError> {
    let list = match network {
        Network::Host => return Ok((SandboxNet::Host, None)),
        Network::None => return Ok((SandboxNet::Loopback, None)),
        Network::Allow(list) => list.clone(),
        // A network this build does not know: none at all.
        _ => return Ok((SandboxNet::Loopback, None)),
    };
    let refuse = |what: String| {
        LaunchError::SandboxUnavailable(format!(
            "the network allow-list needs a proxy, which cannot be set up: {what}"
        ))
    };
    let forwarder = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| refuse(format!("relay-host's own path: {e}")))?;
    let socket = session_dir.join(SOCKET_NAME);
    // A socket left by an earlier run of this session id (the session folder is the host's,
    // and this launch holds the session's lock).
    let _ = std::fs::remove_file(&socket);
    let mut events = State::open(state.path()).map_err(|e| refuse(format!("state folder: {e}")))?;
    // A refused host is the session's text: it may spell the token (`CONNECT <token>.x:443`).
    events.set_redactor(state.redactor().clone());
    let id = session_id.to_string();
    let on_deny = Box::new(move |d: &Denied| {
        let _ = events.event(&json!({
            "event": "network_denied",
            "session_id": id,
            "host": d.host,
            "port": d.port,
            "reason": d.reason,
        }));
        events.log(&format!(
            "session {id}: network refused {}:{} ({})",
            d.host, d.port, d.reason
        ));
    });
    let proxy = Proxy::start(&socket, list, on_deny)
        .map_err(|e| refuse(format!("socket {}: {e}", socket.display())))?;
    Ok((SandboxNet::Proxy { socket, forwarder }, Some(proxy)))
}
