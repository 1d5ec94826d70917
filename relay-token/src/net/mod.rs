//! What a sandboxed session may talk to: a template's [`Network`] (`"host"`, `"none"`, or an
//! [`AllowList`]) and an API [`Gateway`]. The moving parts (a checking proxy on the host and a
//! forwarder inside the sandbox) are the launcher's; the profile binds them
//! ([`SandboxNet`](crate::sandbox::SandboxNet)).
//!
//! A session with `"none"` or an allow-list runs in a network namespace of its own (only a
//! loopback). With an allow-list, relay-host listens on a Unix socket in the session folder;
//! the sandbox sees that socket and a forwarder that listens on a port of `127.0.0.1` inside
//! the namespace and hands each connection over.
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

/// A template's network.
///
/// ```
/// use relay_token::net::Network;
/// assert_eq!(serde_json::from_str::<Network>(r#""none""#).unwrap(), Network::None);
/// assert_eq!(serde_json::to_string(&Network::Host).unwrap(), r#""host""#);
/// assert!(serde_json::from_str::<Network>(r#""open""#).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
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
