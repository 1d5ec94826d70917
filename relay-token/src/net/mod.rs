//! What a sandboxed session may talk to: a template's [`Network`] (`"host"`, `"none"`, or an
//! [`AllowList`]) and the names a sandbox uses to reach relay-host's checking proxy (the proxy and
//! the in-sandbox forwarder that bridges the session's loopback to it run in relay-host).
//!
//! A session with `"none"` or an allow-list runs in a network namespace of its own (only a
//! loopback). With an allow-list, `relay-host` listens on a Unix socket in the session folder;
//! the sandbox sees that socket and a forwarder (`relay-host` itself, under another name) that
//! listens on `127.0.0.1:`[`PROXY_PORT`] inside the namespace and hands each connection over.
//! The session's `HTTPS_PROXY`/`HTTP_PROXY` point there; the proxy allows a `CONNECT` (or a
//! plain `http://` request) only to a listed host and port, resolving the name once and
//! connecting to the address it checked.
//!
//! ```
//! use relay_token::net::Network;
//! let n: Network = serde_json::from_str(r#"{"allow": ["api.anthropic.com", "*.example.com:8443"]}"#)?;
//! let Network::Allow(list) = &n else { panic!() };
//! assert!(list.allows("api.anthropic.com", 443, 443));
//! assert!(!list.allows("api.anthropic.com", 80, 443));
//! assert!(list.allows("a.example.com", 8443, 443));
//! # Ok::<(), serde_json::Error>(())
//! ```

pub mod allow;
pub mod gateway;

use std::fmt;

pub use allow::{AllowEntry, AllowError, AllowErrorKind, AllowList};
pub use gateway::{Gateway, GatewayError};

pub use crate::sandbox::{PROXY_PORT, SANDBOX_FORWARDER, SANDBOX_SOCKET};

/// The name `relay-host` answers to as the forwarder (the file name of [`SANDBOX_FORWARDER`]).
pub const FORWARDER_NAME: &str = "relay-net-forward";

/// A template's network.
///
/// ```
/// use relay_token::net::Network;
/// assert_eq!(serde_json::from_str::<Network>(r#""none""#).unwrap(), Network::None);
/// assert_eq!(serde_json::to_string(&Network::Host).unwrap(), r#""host""#);
/// assert!(serde_json::from_str::<Network>(r#""open""#).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Network {
    /// The host's network, shared (no namespace of its own).
    Host,
    /// A network namespace with only a loopback.
    None,
    /// A loopback namespace whose traffic leaves only through the checking proxy.
    Allow(AllowList),
}

impl Network {
    /// The word for messages and the audit: `host`, `none` or `allow-list`.
    ///
    /// ```
    /// assert_eq!(relay_token::net::Network::None.word(), "none");
    /// ```
    pub fn word(&self) -> &'static str {
        match self {
            Network::Host => "host",
            Network::None => "none",
            Network::Allow(_) => "allow-list",
        }
    }
}

impl serde::Serialize for Network {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Network::Host => s.serialize_str("host"),
            Network::None => s.serialize_str("none"),
            Network::Allow(list) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("allow", &list.entries())?;
                m.end()
            }
        }
    }
}

impl<'de> serde::Deserialize<'de> for Network {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Network, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Network;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#""host", "none" or {"allow": [...]}"#)
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Network, E> {
                match v {
                    "host" => Ok(Network::Host),
                    "none" => Ok(Network::None),
                    other => Err(E::custom(format!(
                        "network {other:?}: use \"host\", \"none\" or {{\"allow\": [...]}}"
                    ))),
                }
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Network, A::Error> {
                let mut allow: Option<Vec<String>> = None;
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "allow" if allow.is_none() => allow = Some(map.next_value()?),
                        "allow" => return Err(serde::de::Error::duplicate_field("allow")),
                        other => return Err(serde::de::Error::unknown_field(other, &["allow"])),
                    }
                }
                let entries = allow.ok_or_else(|| serde::de::Error::missing_field("allow"))?;
                AllowList::parse(&entries)
                    .map(Network::Allow)
                    .map_err(serde::de::Error::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// The setting that lets a token launch share the host's network: `"token_network": "host"`.
///
/// ```
/// use relay_token::net::TokenNetwork;
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

/// The hosts the built-in `claude-code` template may reach: Anthropic's API only, which a
/// logged-in Claude Code uses for every model call and for its start-up checks of the account.
/// Claude Code's telemetry, error reports and feature flags (`statsig.anthropic.com`,
/// `sentry.io` and its customer subdomains, in the firewall script of Claude Code's own
/// development container) are switched off by the template's environment
/// (`CLAUDE_CODE_ENV` in relay-host's settings) instead of allowed: those services
/// take data from anyone, so a session could post the token there.
///
/// ```
/// assert_eq!(relay_token::net::CLAUDE_CODE_HOSTS, ["api.anthropic.com"]);
/// ```
pub const CLAUDE_CODE_HOSTS: &[&str] = &["api.anthropic.com"];

/// The built-in `claude-code` template's network: [`CLAUDE_CODE_HOSTS`].
///
/// ```
/// let n = relay_token::net::claude_code_network();
/// assert_eq!(n.word(), "allow-list");
/// ```
pub fn claude_code_network() -> Network {
    let entries: Vec<String> = CLAUDE_CODE_HOSTS.iter().map(|s| s.to_string()).collect();
    Network::Allow(AllowList::parse(&entries).expect("the built-in list parses"))
}

/// Whether a launch's network may carry the token: `"host"` needs the operator's
/// `"token_network": "host"`.
///
/// ```
/// use relay_token::net::{token_network_allowed, Network};
/// let err = token_network_allowed(&Network::Host, true, None).unwrap_err();
/// assert!(err.to_string().contains("token_network"));
/// assert!(token_network_allowed(&Network::None, true, None).is_ok());
/// ```
pub fn token_network_allowed(
    network: &Network,
    carries_token: bool,
    setting: Option<TokenNetwork>,
) -> Result<(), HostNetworkRefused> {
    match (network, carries_token, setting) {
        (Network::Host, true, None) => Err(HostNetworkRefused),
        _ => Ok(()),
    }
}

/// A launch with the token on the host's network without the operator's
/// `"token_network": "host"`.
///
/// ```
/// let m = relay_token::net::HostNetworkRefused.to_string();
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
