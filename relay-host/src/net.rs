//! The network allow-list's moving parts: the host-side `proxy` that checks each destination
//! and the in-sandbox [`forward`]er that bridges a session's loopback to it. What a template may
//! reach ([`Network`], [`AllowList`]) is `relay_token::net`'s, re-exported here.

pub mod forward;
pub(crate) mod head;
pub(crate) mod proxy;

use std::fmt;
use std::path::Path;

pub(crate) use relay_token::net::*;
pub use relay_token::net::{AllowList, Network};
use relay_token::sandbox::ProxyInside;

/// The port the in-sandbox forwarder listens on (`127.0.0.1`, inside the session's own network
/// namespace, so it clashes with nothing on the host).
pub(crate) const PROXY_PORT: u16 = 3128;

/// What the proxy of a stand-in session intercepts ([`crate::stand_in::StandIn`], Linux only; on
/// other systems there is none). A trait object, so that a proxy without one (every proxy
/// relay-host runs itself) reaches none of stand-in mode's TLS code.
#[cfg(target_os = "linux")]
pub(crate) type Intercept = std::sync::Arc<dyn Interceptor>;

/// What the proxy of a stand-in session intercepts: nothing on this system.
#[cfg(not(target_os = "linux"))]
pub(crate) type Intercept = std::convert::Infallible;

/// What the allow-list proxy hands an intercepted `CONNECT` to: [`crate::stand_in::StandIn`].
#[cfg(target_os = "linux")]
pub(crate) trait Interceptor: Send + Sync + std::fmt::Debug {
    /// True when a `CONNECT` to `host`:`port` is intercepted.
    fn intercepts(&self, host: &allow::Host, port: u16) -> bool;
    /// Serves an intercepted `CONNECT` (already answered `200`): `client` is the session's
    /// side, `upstream` the connection to the destination, `early` what the session sent right
    /// after the `CONNECT` head.
    fn serve(
        &self,
        client: std::os::unix::net::UnixStream,
        upstream: std::net::TcpStream,
        host: &allow::Host,
        port: u16,
        early: &[u8],
    ) -> std::io::Result<()>;
    /// Ends the interception (the proxy is dropped): nothing is swapped after.
    fn end(&self);
}

/// Where the sandbox sees the host's proxy socket.
pub(crate) const SANDBOX_SOCKET: &str = "/run/relay/net.sock";

/// Where the sandbox sees the forwarder (`relay-host`, bound read-only under this name).
pub(crate) const SANDBOX_FORWARDER: &str = "/run/relay/relay-net-forward";

/// The name `relay-host` answers to as the forwarder (the file name of [`SANDBOX_FORWARDER`]).
pub(crate) const FORWARDER_NAME: &str = "relay-net-forward";

/// The program bound into an allow-list sandbox as its forwarder: `relay-net-forward` beside
/// relay-host's real path when it is there (`cargo install` puts it there), else relay-host
/// itself, which runs the forwarder when started under [`FORWARDER_NAME`]. The launch refuses
/// either when a session could have planted it, as it does `relay-shim`: the forwarder `exec`s
/// the session's program, descriptors and all.
pub(crate) fn forwarder_program() -> std::io::Result<std::path::PathBuf> {
    let me = std::env::current_exe()?.canonicalize()?;
    let small = me.with_file_name(FORWARDER_NAME);
    Ok(match relay_token::which::is_executable(&small) {
        true => small,
        false => me,
    })
}

/// The program that runs a stand-in session's proxy: `relay-stand-in` beside relay-host's real
/// path (`cargo install` puts it there). Unlike the forwarder there is no fall back to
/// relay-host itself, which holds none of stand-in mode's TLS code: without it a stand-in
/// launch is refused, naming the path. The launch refuses it, too, when a session could have
/// planted it: it is handed the real token.
pub(crate) fn stand_in_program() -> std::io::Result<std::path::PathBuf> {
    let me = std::env::current_exe()?.canonicalize()?;
    Ok(me.with_file_name(STAND_IN_NAME))
}

/// The file name of [`stand_in_program`].
pub(crate) const STAND_IN_NAME: &str = "relay-stand-in";

/// Where a session sees relay's proxy socket and forwarder: [`SANDBOX_SOCKET`],
/// [`SANDBOX_FORWARDER`] and [`PROXY_PORT`].
pub(crate) fn relay_inside() -> ProxyInside {
    ProxyInside {
        socket: Path::new(SANDBOX_SOCKET).to_path_buf(),
        forwarder: Path::new(SANDBOX_FORWARDER).to_path_buf(),
        port: PROXY_PORT,
    }
}

/// Copies both ways between a Unix-socket connection and a TCP one until each side has ended,
/// closing each write side as its reader ends: the proxy (session to upstream) and the
/// in-sandbox forwarder (program to the host's proxy) both bridge this way.
pub(crate) fn splice(
    unix: std::os::unix::net::UnixStream,
    tcp: std::net::TcpStream,
) -> std::io::Result<()> {
    use std::net::Shutdown;
    let (mut from_unix, mut to_tcp) = (unix.try_clone()?, tcp.try_clone()?);
    let up = std::thread::Builder::new()
        .name("relay-net-splice".into())
        .stack_size(proxy::THREAD_STACK)
        .spawn(move || {
            let _ = std::io::copy(&mut from_unix, &mut to_tcp);
            let _ = to_tcp.shutdown(Shutdown::Write);
        })?;
    let (mut from_tcp, mut to_unix) = (tcp, unix);
    let _ = std::io::copy(&mut from_tcp, &mut to_unix);
    let _ = to_unix.shutdown(Shutdown::Write);
    let _ = up.join();
    Ok(())
}

/// relay's own short plain-text answer to a session's proxy request (a refusal or a failure),
/// after which the connection is closed: the status line, `Connection: close`, and
/// `relay: MSG` as the body.
pub(crate) fn plain_answer(code: u16, msg: &str) -> String {
    let reason = match code {
        400 => "Bad Request",
        403 => "Forbidden",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        502 => "Bad Gateway",
        504 => "Gateway Timeout",
        _ => "Service Unavailable",
    };
    let body = format!("relay: {msg}\n");
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
}

/// The setting that lets a token launch share the host's network: `"token_network": "host"`.
///
/// ```
/// use relay_host::net::TokenNetwork;
/// assert_eq!(serde_json::from_str::<TokenNetwork>(r#""host""#).unwrap(), TokenNetwork::Host);
/// assert!(serde_json::from_str::<TokenNetwork>(r#""none""#).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum TokenNetwork {
    /// A token launch may run with `network: "host"`.
    Host,
}

/// Anthropic's API host, spelled once: the built-in template's one host
/// ([`CLAUDE_CODE_HOSTS`]) and, with its port, where a stand-in session's token is swapped
/// ([`crate::stand_in::ANTHROPIC_API`]). A macro, so that both are constants made from it.
macro_rules! anthropic_api_host {
    () => {
        "api.anthropic.com"
    };
}
// Stand-in mode, the other user, is Linux's.
#[cfg(target_os = "linux")]
pub(crate) use anthropic_api_host;

/// The hosts the built-in `claude-code` template may reach: Anthropic's API only, which a
/// logged-in Claude Code uses for every model call and for its start-up checks of the account.
/// Claude Code's telemetry, error reports and feature flags (`statsig.anthropic.com`,
/// `sentry.io` and its customer subdomains, in the firewall script of Claude Code's own
/// development container) are switched off by the template's environment
/// (`CLAUDE_CODE_ENV` in `settings/template.rs`) instead of allowed: those services
/// take data from anyone, so a session could post the token there.
pub(crate) const CLAUDE_CODE_HOSTS: &[&str] = &[anthropic_api_host!()];

/// The built-in `claude-code` template's network: [`CLAUDE_CODE_HOSTS`].
pub(crate) fn claude_code_network() -> Network {
    let entries: Vec<String> = CLAUDE_CODE_HOSTS.iter().map(|s| s.to_string()).collect();
    Network::Allow(AllowList::parse(&entries).expect("the built-in list parses"))
}

/// What a template's network kind decides for a launch. Every policy that looks at a network's
/// kind asks [`network_rules`], whose match names each kind: a kind added later does not
/// compile until it is decided there, and nothing else matches on the kind with a catch-all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NetworkRules<'a> {
    /// The session shares the host's network: no namespace of its own (the only kind on a
    /// system without network namespaces), its loopback is the host's (it can listen where a
    /// gateway on this machine listens), and a launch with the token on it needs the
    /// operator's `"token_network": "host"`.
    pub(crate) shares_host: bool,
    /// The allow-list that the checking proxy (or a stand-in session's `relay-stand-in`)
    /// enforces, reached through the forwarder inside the sandbox.
    pub(crate) proxied: Option<&'a AllowList>,
    /// Anything outside the session is reachable at all (a gateway, for one).
    pub(crate) reaches_out: bool,
}

/// The rules of `network`'s kind ([`NetworkRules`]).
pub(crate) fn network_rules(network: &Network) -> NetworkRules<'_> {
    match network {
        Network::Host => NetworkRules {
            shares_host: true,
            proxied: None,
            reaches_out: true,
        },
        Network::None => NetworkRules {
            shares_host: false,
            proxied: None,
            reaches_out: false,
        },
        Network::Allow(list) => NetworkRules {
            shares_host: false,
            proxied: Some(list),
            reaches_out: true,
        },
    }
}

/// Whether a launch's network may carry the token: one that shares the host's network
/// (`"host"`) needs the operator's `"token_network": "host"`.
pub(crate) fn token_network_allowed(
    network: &Network,
    carries_token: bool,
    setting: Option<TokenNetwork>,
) -> Result<(), HostNetworkRefused> {
    let allowed_by_setting = match setting {
        Some(TokenNetwork::Host) => true,
        None => false,
    };
    match network_rules(network).shares_host && carries_token && !allowed_by_setting {
        true => Err(HostNetworkRefused),
        false => Ok(()),
    }
}

/// A launch with the token on the host's network without the operator's
/// `"token_network": "host"`.
///
/// ```
/// let m = relay_host::net::HostNetworkRefused.to_string();
/// assert!(m.starts_with("a launch with the token runs with network \"host\" only"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostNetworkRefused;

impl fmt::Display for HostNetworkRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "a launch with the token runs with network \"host\" only when the settings say \
             \"token_network\": \"host\"; give the template a network allow-list (or \"none\")",
        )
    }
}

impl std::error::Error for HostNetworkRefused {}

/// A destination as the allow-list takes it and relay names it: `host:port`, an IPv6 address
/// in brackets.
pub(crate) fn destination(host: &str, port: u64) -> String {
    match host.parse::<std::net::Ipv6Addr>() {
        Ok(a) => format!("[{a}]:{port}"),
        Err(_) => format!("{host}:{port}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::network::{check, NetworkError};
    use crate::settings::Settings;

    /// Every network kind, each once. A kind added later fails to compile in `expected` until
    /// it is decided there; list it here too.
    fn every_network() -> [Network; 3] {
        let list = AllowList::parse(&["*.example.com".to_string()]).unwrap();
        [Network::Host, Network::None, Network::Allow(list)]
    }

    /// What each kind should decide: (shares the host's network, proxied, reaches out, a token
    /// launch needs `token_network`).
    fn expected(n: &Network) -> (bool, bool, bool, bool) {
        match n {
            Network::Host => (true, false, true, true),
            Network::None => (false, false, false, false),
            Network::Allow(_) => (false, true, true, false),
        }
    }

    #[test]
    fn every_network_kind_gets_its_own_decisions() {
        let all = every_network();
        let words: Vec<&str> = all.iter().map(Network::word).collect();
        assert_eq!(words, ["host", "none", "allow-list"]);
        for n in &all {
            let (shares_host, proxied, reaches_out, needs_word) = expected(n);
            let r = network_rules(n);
            assert_eq!(r.shares_host, shares_host, "{}", n.word());
            assert_eq!(r.proxied.is_some(), proxied, "{}", n.word());
            assert_eq!(r.reaches_out, reaches_out, "{}", n.word());
            let refused = token_network_allowed(n, true, None).is_err();
            assert_eq!(refused, needs_word, "{}", n.word());
            assert!(token_network_allowed(n, true, Some(TokenNetwork::Host)).is_ok());
            assert!(token_network_allowed(n, false, None).is_ok());
        }
    }

    #[test]
    fn a_token_launch_is_checked_on_every_network_kind() {
        let settings = Settings::default();
        for n in &every_network() {
            let (shares_host, proxied, _, _) = expected(n);
            let got = check(n, true, &settings);
            match (cfg!(target_os = "linux"), shares_host, proxied) {
                (false, false, _) => {
                    assert!(matches!(got, Err(NetworkError::NeedsNamespace { .. })))
                }
                (_, true, _) => assert!(matches!(got, Err(NetworkError::HostNetwork(_)))),
                (true, false, true) => {
                    assert!(
                        matches!(got, Err(NetworkError::Wildcards { ref hosts }) if hosts == &["*.example.com"])
                    )
                }
                (true, false, false) => assert!(got.is_ok(), "{}", n.word()),
            }
            let opted_in = Settings {
                token_network: Some(TokenNetwork::Host),
                token_wildcards: true,
                ..Settings::default()
            };
            let namespaced = cfg!(target_os = "linux") || shares_host;
            assert_eq!(
                check(n, true, &opted_in).is_ok(),
                namespaced,
                "{}",
                n.word()
            );
            assert_eq!(
                check(n, false, &settings).is_ok(),
                namespaced,
                "{}",
                n.word()
            );
        }
    }

    /// `forwarder_program`'s example.
    #[test]
    fn forwarder_program_doc_example() {
        let result = (|| {
            let p = crate::net::forwarder_program()?;
            assert!(p.is_absolute());
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `stand_in_program`'s example.
    #[test]
    fn stand_in_program_doc_example() {
        let result = (|| {
            let p = crate::net::stand_in_program()?;
            assert!(p.ends_with("relay-stand-in"));
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `relay_inside`'s example.
    #[test]
    fn relay_inside_doc_example() {
        assert_eq!(crate::net::relay_inside().url(), "http://127.0.0.1:3128");
    }

    /// `claude_code_network`'s example.
    #[test]
    fn claude_code_network_doc_example() {
        let n = crate::net::claude_code_network();
        assert_eq!(n.word(), "allow-list");
    }

    /// `token_network_allowed`'s example.
    #[test]
    fn token_network_allowed_doc_example() {
        use crate::net::{token_network_allowed, Network, TokenNetwork};
        let err = token_network_allowed(&Network::Host, true, None).unwrap_err();
        assert!(err.to_string().contains("token_network"));
        assert!(token_network_allowed(&Network::Host, true, Some(TokenNetwork::Host)).is_ok());
        assert!(token_network_allowed(&Network::None, true, None).is_ok());
    }
}
