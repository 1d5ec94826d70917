//! The session's network as bwrap renders it: shared, loopback only, or loopback plus a
//! forwarder to the launcher's checking proxy.

use std::ffi::OsString;
use std::path::PathBuf;

/// Where a session sees the parts of a proxied network: the launcher chooses them (relay-host
/// uses folders of `/run/relay`), the profile only binds and names them.
///
/// ```
/// use relay_token::sandbox::ProxyInside;
/// let inside = ProxyInside {
///     socket: "/run/me/net.sock".into(),
///     forwarder: "/run/me/forward".into(),
///     port: 8080,
/// };
/// assert_eq!(inside.url(), "http://127.0.0.1:8080");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyInside {
    /// Where the session sees the launcher's proxy socket.
    pub socket: PathBuf,
    /// Where the session sees the forwarder's executable.
    pub forwarder: PathBuf,
    /// The port the forwarder listens on (`127.0.0.1`, inside the session's own network
    /// namespace, so it clashes with nothing on the host).
    pub port: u16,
}

impl ProxyInside {
    /// The proxy's URL as the session's programs are told it.
    ///
    /// ```
    /// let i = relay_token::sandbox::ProxyInside { socket: "/s".into(), forwarder: "/f".into(), port: 3128 };
    /// assert_eq!(i.url(), "http://127.0.0.1:3128");
    /// ```
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// The network a sandbox gets.
///
/// ```
/// use relay_token::sandbox::SandboxNet;
/// assert_eq!(SandboxNet::default(), SandboxNet::Host);
/// assert_eq!(SandboxNet::Loopback.unshare_flags(), ["--unshare-net"]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SandboxNet {
    /// The host's network (no namespace of its own).
    #[default]
    Host,
    /// A network namespace of its own: only a loopback.
    Loopback,
    /// A loopback namespace, the launcher's proxy socket and the forwarder that bridges
    /// `127.0.0.1:PORT` inside to it.
    Proxy {
        /// The launcher's proxy socket (a Unix socket on the host).
        socket: PathBuf,
        /// The forwarder's executable on the host.
        forwarder: PathBuf,
        /// Where the session sees both, and the forwarder's port.
        inside: ProxyInside,
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
            SandboxNet::Loopback | SandboxNet::Proxy { .. } => &["--unshare-net"],
        }
    }

    /// The read-only binds of the proxy's socket and the forwarder, as bwrap arguments.
    ///
    /// ```
    /// use relay_token::sandbox::{ProxyInside, SandboxNet};
    /// let inside = ProxyInside { socket: "/run/me/s".into(), forwarder: "/run/me/f".into(), port: 1 };
    /// let n = SandboxNet::Proxy { socket: "/s/net.sock".into(), forwarder: "/bin/fwd".into(), inside };
    /// assert_eq!(n.binds().len(), 6);
    /// ```
    pub fn binds(&self) -> Vec<OsString> {
        match self {
            SandboxNet::Proxy {
                socket,
                forwarder,
                inside,
            } => vec![
                "--ro-bind".into(),
                forwarder.into(),
                inside.forwarder.clone().into(),
                "--ro-bind".into(),
                socket.into(),
                inside.socket.clone().into(),
            ],
            SandboxNet::Host | SandboxNet::Loopback => Vec::new(),
        }
    }

    /// The variables that point the session's programs at the proxy (upper and lower case:
    /// curl reads only `http_proxy` in lower case), `NO_PROXY` empty.
    ///
    /// ```
    /// use relay_token::sandbox::{ProxyInside, SandboxNet};
    /// let inside = ProxyInside { socket: "/s".into(), forwarder: "/f".into(), port: 3128 };
    /// let n = SandboxNet::Proxy { socket: "/s".into(), forwarder: "/f".into(), inside };
    /// assert!(n.env().iter().any(|(k, v)| k == "HTTPS_PROXY" && v == "http://127.0.0.1:3128"));
    /// ```
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let inside = match self {
            SandboxNet::Proxy { inside, .. } => inside,
            SandboxNet::Host | SandboxNet::Loopback => return Vec::new(),
        };
        let url = inside.url();
        let mut out = Vec::new();
        for name in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"] {
            out.push((name.into(), url.clone().into()));
        }
        for name in ["NO_PROXY", "no_proxy"] {
            out.push((name.into(), OsString::new()));
        }
        out
    }

    /// What runs before the command: the forwarder (`FORWARDER PORT SOCKET --`), which
    /// listens, then `exec`s the command (same pid, the command's own argv).
    ///
    /// ```
    /// use relay_token::sandbox::{ProxyInside, SandboxNet};
    /// let inside = ProxyInside { socket: "/s".into(), forwarder: "/f".into(), port: 1 };
    /// let n = SandboxNet::Proxy { socket: "/s".into(), forwarder: "/f".into(), inside };
    /// assert_eq!(n.command_prefix().last().unwrap(), "--");
    /// ```
    pub fn command_prefix(&self) -> Vec<OsString> {
        match self {
            SandboxNet::Proxy { inside, .. } => vec![
                inside.forwarder.clone().into(),
                inside.port.to_string().into(),
                inside.socket.clone().into(),
                "--".into(),
            ],
            SandboxNet::Host | SandboxNet::Loopback => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::path::Path;

    use super::*;
    use crate::sandbox::Profile;

    const SANDBOX_SOCKET: &str = "/run/x/net.sock";
    const SANDBOX_FORWARDER: &str = "/run/x/forward";

    /// Every sandbox network, each once; `expected` names each (one added later does not
    /// compile until it is decided there; list it here too).
    fn every_net() -> [SandboxNet; 3] {
        let inside = ProxyInside {
            socket: SANDBOX_SOCKET.into(),
            forwarder: SANDBOX_FORWARDER.into(),
            port: 3128,
        };
        let (socket, forwarder) = ("/s/net.sock".into(), "/bin/fwd".into());
        let proxy = SandboxNet::Proxy {
            socket,
            forwarder,
            inside,
        };
        [SandboxNet::Host, SandboxNet::Loopback, proxy]
    }

    /// What each network should render: (its own namespace, binds, proxy variables, a
    /// forwarder before the command).
    fn expected(n: &SandboxNet) -> (bool, usize, usize, usize) {
        match n {
            SandboxNet::Host => (false, 0, 0, 0),
            SandboxNet::Loopback => (true, 0, 0, 0),
            SandboxNet::Proxy { .. } => (true, 6, 6, 4),
        }
    }

    #[test]
    fn every_sandbox_network_renders_its_own_parts() {
        for n in every_net() {
            let (own, binds, env, prefix) = expected(&n);
            assert_eq!(n.unshare_flags() == ["--unshare-net"], own, "{n:?}");
            assert_eq!(n.binds().len(), binds, "{n:?}");
            assert_eq!(n.env().len(), env, "{n:?}");
            assert_eq!(n.command_prefix().len(), prefix, "{n:?}");
        }
    }

    fn argv(net: SandboxNet) -> Vec<OsString> {
        let mut p = Profile::new();
        p.network(net);
        let env = [(
            OsString::from("HTTPS_PROXY"),
            OsString::from("http://elsewhere"),
        )];
        p.resolve(&[]).unwrap().bwrap_argv_with_env(
            Path::new("/usr/bin/bwrap"),
            &env,
            &["/bin/true".into()],
        )
    }

    fn at(a: &[OsString], x: &str) -> Vec<usize> {
        a.iter()
            .enumerate()
            .filter(|(_, s)| *s == x)
            .map(|(i, _)| i)
            .collect()
    }

    #[test]
    fn the_host_network_adds_nothing() {
        let a = argv(SandboxNet::Host);
        assert!(at(&a, "--unshare-net").is_empty());
        assert_eq!(a[a.len() - 2..], ["--".into(), OsString::from("/bin/true")]);
    }

    #[test]
    fn a_proxy_unshares_binds_sets_its_variables_last_and_runs_the_forwarder_first() {
        let a = argv(SandboxNet::Proxy {
            socket: "/state/sessions/s1/net.sock".into(),
            forwarder: "/opt/relay/relay-host".into(),
            inside: ProxyInside {
                socket: SANDBOX_SOCKET.into(),
                forwarder: SANDBOX_FORWARDER.into(),
                port: 3128,
            },
        });
        assert_eq!(at(&a, "--unshare-net").len(), 1);
        let bind = at(&a, "/state/sessions/s1/net.sock")[0];
        assert_eq!(a[bind - 1], "--ro-bind");
        assert_eq!(a[bind + 1], SANDBOX_SOCKET);
        // The request's HTTPS_PROXY comes first, the proxy's after it (bwrap: the last wins).
        let https = at(&a, "HTTPS_PROXY");
        assert_eq!(https.len(), 2);
        assert_eq!(a[https[0] + 1], "http://elsewhere");
        assert_eq!(a[https[1] + 1], "http://127.0.0.1:3128");
        let tail: Vec<&OsString> = a.iter().rev().take(6).rev().collect();
        assert_eq!(
            tail,
            [
                "--",
                SANDBOX_FORWARDER,
                "3128",
                SANDBOX_SOCKET,
                "--",
                "/bin/true"
            ]
            .map(OsString::from)
            .iter()
            .collect::<Vec<_>>()
        );
    }

    #[test]
    fn none_unshares_without_a_proxy() {
        let a = argv(SandboxNet::Loopback);
        assert_eq!(at(&a, "--unshare-net").len(), 1);
        assert!(at(&a, SANDBOX_FORWARDER).is_empty());
        assert!(at(&a, "HTTPS_PROXY").len() == 1);
    }
}
