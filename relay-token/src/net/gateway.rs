//! A template's API gateway (`api_base_url`): where the operator points Claude Code instead of
//! Anthropic's API, and the one allow-list entry that address needs.
//!
//! Only settings name a gateway, never a request or a file a session can write: the URL is
//! where every request of the session, with the token as its `Authorization`, is sent.
//!
//! ```
//! use relay_token::net::Gateway;
//! let g = Gateway::parse("https://llm.corp.example/anthropic")?;
//! assert_eq!(g.allow_entry(), "llm.corp.example:443");
//! let local = Gateway::parse("http://127.0.0.1:8080")?;
//! assert_eq!(local.allow_entry(), "127.0.0.1:8080");
//! # Ok::<(), relay_token::net::GatewayError>(())
//! ```

use std::fmt;

use super::AllowEntry;

/// A parsed `api_base_url`: `https://`, or `http://` to this machine's loopback (127.0.0.0/8,
/// `::1`, `localhost`), a host (a name or an IP literal), an optional port and path; no user
/// name, query or fragment. Plain `http://` to any other host is refused: the token rides in
/// every request's `Authorization` and would cross the network in clear text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gateway {
    url: String,
    entry: AllowEntry,
    written: String,
}

/// Why an `api_base_url` is refused.
///
/// ```
/// let e = relay_token::net::Gateway::parse("ftp://x").unwrap_err();
/// assert_eq!(e.to_string(), r#"api_base_url "ftp://x": not an http:// or https:// URL"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GatewayError {
    /// The scheme is neither `http` nor `https`.
    Scheme(String),
    /// A user name, a query, a fragment, spaces or control characters.
    Form(String),
    /// The host and port do not make an allow-list entry.
    Host(String),
    /// Plain `http://` to a host that is not this machine's loopback.
    PlainHttp(String),
}

impl fmt::Display for GatewayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GatewayError::Scheme(u) => {
                write!(f, "api_base_url {u:?}: not an http:// or https:// URL")
            }
            GatewayError::Form(u) => write!(
                f,
                "api_base_url {u:?}: holds a user name, a query, a fragment or spaces"
            ),
            GatewayError::Host(u) => write!(f, "api_base_url {u:?}: no valid host and port"),
            GatewayError::PlainHttp(u) => write!(
                f,
                "api_base_url {u:?}: plain http:// would send the token in clear text; use \
                 https:// (http:// only to a loopback host: 127.0.0.0/8, ::1, localhost)"
            ),
        }
    }
}

impl std::error::Error for GatewayError {}

impl Gateway {
    /// Parses an `api_base_url`.
    ///
    /// ```
    /// use relay_token::net::Gateway;
    /// assert!(Gateway::parse("https://user@llm.example").is_err());
    /// assert!(Gateway::parse("https://llm.example:0").is_err());
    /// assert!(Gateway::parse("https://[::1]:8443/v").is_ok());
    /// assert!(Gateway::parse("http://localhost:8080").is_ok());
    /// assert!(Gateway::parse("http://192.0.2.10:8080").is_err());
    /// ```
    pub fn parse(url: &str) -> Result<Gateway, GatewayError> {
        let (rest, default_port) = if let Some(r) = url.strip_prefix("https://") {
            (r, 443)
        } else if let Some(r) = url.strip_prefix("http://") {
            (r, 80)
        } else {
            return Err(GatewayError::Scheme(url.to_string()));
        };
        if rest
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "@?#\\".contains(c))
        {
            return Err(GatewayError::Form(url.to_string()));
        }
        let authority = rest.split('/').next().unwrap_or("");
        let has_port = match authority.rfind(']') {
            Some(close) => authority[close..].contains(':'),
            None => authority.contains(':'),
        };
        let entry = if has_port {
            authority.to_string()
        } else {
            format!("{authority}:{default_port}")
        };
        let parsed = AllowEntry::parse(&entry).map_err(|_| GatewayError::Host(url.to_string()))?;
        if entry.starts_with("*.") {
            return Err(GatewayError::Host(url.to_string()));
        }
        if default_port == 80 && !parsed.is_loopback() {
            return Err(GatewayError::PlainHttp(url.to_string()));
        }
        Ok(Gateway {
            url: url.to_string(),
            written: parsed.to_string(),
            entry: parsed,
        })
    }

    /// The URL as written (Claude Code's `ANTHROPIC_BASE_URL`).
    ///
    /// ```
    /// let g = relay_token::net::Gateway::parse("https://llm.example/v1/")?;
    /// assert_eq!(g.url(), "https://llm.example/v1/");
    /// # Ok::<(), relay_token::net::GatewayError>(())
    /// ```
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The allow-list entry for the gateway: `host:port`, the scheme's port when none is given.
    ///
    /// ```
    /// let g = relay_token::net::Gateway::parse("http://LocalHost")?;
    /// assert_eq!(g.allow_entry(), "localhost:80");
    /// # Ok::<(), relay_token::net::GatewayError>(())
    /// ```
    pub fn allow_entry(&self) -> &str {
        &self.written
    }

    /// The allow-list entry, parsed.
    ///
    /// ```
    /// let g = relay_token::net::Gateway::parse("https://llm.example")?;
    /// assert_eq!(g.entry().to_string(), "llm.example:443");
    /// # Ok::<(), relay_token::net::GatewayError>(())
    /// ```
    pub fn entry(&self) -> &AllowEntry {
        &self.entry
    }
}

impl serde::Serialize for Gateway {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.url)
    }
}

impl<'de> serde::Deserialize<'de> for Gateway {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Gateway, D::Error> {
        let url = String::deserialize(d)?;
        Gateway::parse(&url).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_malformed_url_is_refused_by_kind() {
        let kind = |u: &str| Gateway::parse(u).unwrap_err();
        assert!(matches!(kind("llm.example"), GatewayError::Scheme(_)));
        assert!(matches!(kind("https://a@b.example"), GatewayError::Form(_)));
        assert!(matches!(
            kind("https://b.example/?x=1"),
            GatewayError::Form(_)
        ));
        assert!(matches!(
            kind("https://b.example/#f"),
            GatewayError::Form(_)
        ));
        assert!(matches!(kind("https://b.example /"), GatewayError::Form(_)));
        assert!(matches!(kind("https://"), GatewayError::Host(_)));
        assert!(matches!(kind("https://*.b.example"), GatewayError::Host(_)));
        assert!(matches!(
            kind("https://b.example:99999"),
            GatewayError::Host(_)
        ));
    }

    #[test]
    fn plain_http_reaches_only_the_loopback() {
        for ok in [
            "http://127.0.0.1:8080",
            "http://127.9.8.7",
            "http://[::1]:9/v1",
            "http://localhost:8080",
            "http://LOCALHOST./x",
            "http://[::ffff:127.0.0.1]:80",
        ] {
            assert!(Gateway::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://192.0.2.10:8080",
            "http://gateway.internal:8080",
            "http://localhost.example",
            "http://[::2]",
            "http://0.0.0.0:80",
        ] {
            assert_eq!(
                Gateway::parse(bad),
                Err(GatewayError::PlainHttp(bad.to_string())),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_entry_names_the_port_the_scheme_implies() {
        let e = |u: &str| Gateway::parse(u).unwrap().allow_entry().to_string();
        assert_eq!(e("https://b.example"), "b.example:443");
        assert_eq!(e("https://b.example/anthropic/"), "b.example:443");
        assert_eq!(e("https://b.example:8080/x"), "b.example:8080");
        assert_eq!(e("http://[::1]:8443"), "[::1]:8443");
        assert_eq!(e("http://[::1]"), "[::1]:80");
    }
}
