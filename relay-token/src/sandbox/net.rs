//! The session's network as bwrap renders it: shared, loopback only, or loopback plus the
//! forwarder to the host's checking proxy.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::net::{PROXY_PORT, SANDBOX_FORWARDER, SANDBOX_SOCKET};

/// The network a sandbox gets.
///
/// ```
/// use relay_token::sandbox::SandboxNet;
/// assert_eq!(SandboxNet::default(), SandboxNet::Host);
/// assert_eq!(SandboxNet::Loopback.unshare_flags(), ["--unshare-net"]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SandboxNet {
    /// The host's network (no namespace of its own).
    #[default]
    Host,
    /// A network namespace of its own: only a loopback.
    Loopback,
    /// A loopback namespace, the host's proxy socket and the forwarder that bridges
    /// `127.0.0.1:PORT` inside to it.
    Proxy {
        /// The host's proxy socket (a Unix socket in the session folder).
        socket: PathBuf,
        /// The forwarder's executable (`relay-host`).
        forwarder: PathBuf,
    },
}

impl SandboxNet {
    /// bwrap's namespace flag: `--unshare-net` unless the network is the host's.
    ///
    /// ```
    /// assert!(relay_token::sandbox::SandboxNet::Host.unshare_flags().is_empty());
    /// ```
    pub fn unshare_flags(&self) -> &'static [&'static str] {
        match self {
            SandboxNet::Host => &[],
            _ => &["--unshare-net"],
        }
    }

    /// The read-only binds of the proxy's socket and the forwarder, as bwrap arguments.
    ///
    /// ```
    /// use relay_token::sandbox::SandboxNet;
    /// let n = SandboxNet::Proxy { socket: "/s/net.sock".into(), forwarder: "/bin/relay-host".into() };
    /// assert_eq!(n.binds().len(), 6);
    /// ```
    pub fn binds(&self) -> Vec<OsString> {
        match self {
            SandboxNet::Proxy { socket, forwarder } => vec![
                "--ro-bind".into(),
                forwarder.into(),
                SANDBOX_FORWARDER.into(),
                "--ro-bind".into(),
                socket.into(),
                SANDBOX_SOCKET.into(),
            ],
            _ => Vec::new(),
        }
    }

    /// The variables that point the session's programs at the proxy (upper and lower case:
    /// curl reads only `http_proxy` in lower case), `NO_PROXY` empty.
    ///
    /// ```
    /// use relay_token::sandbox::SandboxNet;
    /// let n = SandboxNet::Proxy { socket: "/s".into(), forwarder: "/f".into() };
    /// assert!(n.env().iter().any(|(k, v)| k == "HTTPS_PROXY" && v == "http://127.0.0.1:3128"));
    /// ```
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let SandboxNet::Proxy { .. } = self else {
            return Vec::new();
        };
        let url = format!("http://127.0.0.1:{PROXY_PORT}");
        let mut out = Vec::new();
        for name in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"] {
            out.push((name.into(), url.clone().into()));
        }
        for name in ["NO_PROXY", "no_proxy"] {
            out.push((name.into(), OsString::new()));
        }
        out
    }

    /// What runs before the command: the forwarder, which listens, then `exec`s the command
    /// (same pid, the command's own argv).
    ///
    /// ```
    /// use relay_token::sandbox::SandboxNet;
    /// let n = SandboxNet::Proxy { socket: "/s".into(), forwarder: "/f".into() };
    /// assert_eq!(n.command_prefix().last().unwrap(), "--");
    /// ```
    pub fn command_prefix(&self) -> Vec<OsString> {
        match self {
            SandboxNet::Proxy { .. } => vec![
                SANDBOX_FORWARDER.into(),
                PROXY_PORT.to_string().into(),
                SANDBOX_SOCKET.into(),
                "--".into(),
            ],
            _ => Vec::new(),
        }
    }
}
