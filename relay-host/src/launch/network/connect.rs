//! The network step of one launch: none but the host's when the launch is not sandboxed, else
//! the sandbox's network, with the allow-list's proxy (or stand-in mode's `relay-stand-in`)
//! started and held by the launch's guard.

use relay_token::ClaudeToken;

use crate::launch::context::Launch;
use crate::launch::guard::Guard;
use crate::launch::network::stand_in::{self, StandInError};
use crate::launch::network::{
    check_socket, session_socket, start, Handed, NetworkError, Networked, SessionProxy,
};
use crate::launch::prepare::token_mode::TokenMode;
use crate::launch::prepare::Prepared;

/// The network of a launch: none but the host's when it is not sandboxed; the proxy of an
/// allow-list starts here and goes to the launch's `guard` (it ends with the session); in
/// stand-in mode it is the session's `relay-stand-in`, which takes the real `token`
/// ([`stand_in`]). What the session is handed moves on: the token, or its stand-in.
pub(crate) fn connect(
    cx: &Launch,
    launch: &Prepared,
    token: Option<ClaudeToken>,
    guard: &mut Guard,
) -> Result<Networked, ConnectError> {
    let plain = |token| Handed {
        token,
        ca_file: None,
    };
    if launch.programs.bwrap.is_none() {
        let (net, handed) = (None, plain(token));
        return Ok(Networked { net, handed });
    }
    let socket = session_socket(launch.folder.dir());
    let network = launch.v.network();
    check_socket(network, &socket)?;
    let handed = match (token, &launch.token_mode) {
        (Some(real), TokenMode::StandIn { program }) => {
            let s = stand_in::begin(launch, program, real, cx, &socket)?;
            guard.hold_proxy(Box::new(SessionProxy::StandIn(s.proxy)));
            let (token, ca_file) = (Some(s.token), Some(s.ca_file));
            Handed { token, ca_file }
        }
        (token, TokenMode::None | TokenMode::Pipe | TokenMode::StandIn { .. }) => plain(token),
    };
    let (net, proxy) = start(
        network,
        launch.programs.forwarder.as_deref(),
        launch.folder.dir(),
        &cx.state,
        launch.v.session_id(),
        // Stand-in mode's relay-stand-in (which made the CA) already serves the socket.
        handed.ca_file.is_some(),
    )?;
    if let Some(p) = proxy {
        guard.hold_proxy(Box::new(SessionProxy::Here(p)));
    }
    let net = Some(net);
    Ok(Networked { net, handed })
}

/// Why the network step refused a launch: its network, or stand-in mode's program; each
/// becomes the [`crate::launch::error::LaunchError`] of its own.
#[derive(Debug)]
pub(crate) enum ConnectError {
    /// The network cannot be made as the template asks.
    Network(NetworkError),
    /// Stand-in mode's `relay-stand-in` cannot start.
    StandIn(StandInError),
}

impl From<NetworkError> for ConnectError {
    fn from(e: NetworkError) -> Self {
        ConnectError::Network(e)
    }
}

impl From<StandInError> for ConnectError {
    fn from(e: StandInError) -> Self {
        ConnectError::StandIn(e)
    }
}
