//! The allow-list: entries `host`, `host:port`, `*.domain`, `*.domain:port`, an IP literal
//! (`127.0.0.1:8080`, `[::1]:8080`). An entry without a port allows the default port of the
//! request: 443 for `CONNECT`, 80 for a plain `http://` request. `*.domain` matches every name
//! below `domain`, not `domain` itself. A name never matches an IP literal: an address is
//! reached only when it is listed as one.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

/// One parsed entry.
///
/// ```
/// use relay_token::net::AllowEntry;
/// let e = AllowEntry::parse("*.Example.com.:8443")?;
/// assert_eq!(e.to_string(), "*.example.com:8443");
/// assert!(AllowEntry::parse("*").is_err());
/// # Ok::<(), relay_token::net::AllowError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowEntry {
    host: Pattern,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// An exact name, lower case, no trailing dot.
    Name(String),
    /// `*.domain`: holds `.domain`.
    Below(String),
    /// An address.
    Ip(IpAddr),
}

impl fmt::Display for AllowEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Pattern::Name(n) => f.write_str(n)?,
            Pattern::Below(d) => write!(f, "*{d}")?,
            Pattern::Ip(IpAddr::V6(a)) => write!(f, "[{a}]")?,
            Pattern::Ip(a) => write!(f, "{a}")?,
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

impl AllowEntry {
    /// Parses one entry; the error names the entry and what is wrong.
    ///
    /// ```
    /// use relay_token::net::AllowEntry;
    /// assert!(AllowEntry::parse("[::1]:8080").is_ok());
    /// assert!(AllowEntry::parse("api.anthropic.com:0").is_err());
    /// assert!(AllowEntry::parse("http://x").is_err());
    /// ```
    pub fn parse(entry: &str) -> Result<AllowEntry, AllowError> {
        let bad = |kind| {
            Err(AllowError {
                entry: entry.to_string(),
                kind,
            })
        };
        if entry.is_empty() || entry.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return bad(AllowErrorKind::Blank);
        }
        let (host, port) = match split_host_port(entry) {
            Some(hp) => hp,
            None => return bad(AllowErrorKind::Form),
        };
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => Some(n),
                _ => return bad(AllowErrorKind::Port),
            },
        };
        let host = if let Some(domain) = host.strip_prefix("*.") {
            match normal_name(domain) {
                Some(d) => Pattern::Below(format!(".{d}")),
                None => return bad(AllowErrorKind::Wildcard),
            }
        } else if let Some(ip) = parse_ip(host) {
            Pattern::Ip(ip)
        } else {
            match normal_name(host) {
                Some(n) => Pattern::Name(n),
                None => return bad(AllowErrorKind::Name),
            }
        };
        Ok(AllowEntry { host, port })
    }

    /// True when this entry lets a request reach `host` (as the request names it, already
    /// normalised by [`normal_host`]) on `port`, `default_port` being the request's own
    /// (443 for `CONNECT`, 80 for `http://`).
    fn allows(&self, host: &Host, port: u16, default_port: u16) -> bool {
        if self.port.unwrap_or(default_port) != port {
            return false;
        }
        match (&self.host, host) {
            (Pattern::Ip(a), Host::Ip(b)) => a == b,
            (Pattern::Name(a), Host::Name(b)) => a == b,
            (Pattern::Below(d), Host::Name(b)) => b.ends_with(d.as_str()) && b.len() > d.len(),
            (Pattern::Ip(_), Host::Name(_))
            | (Pattern::Name(_) | Pattern::Below(_), Host::Ip(_)) => false,
        }
    }

    /// True when this entry names this machine's loopback: `localhost` or an address in
    /// 127.0.0.0/8 or `::1` (an IPv4-mapped one taken as IPv4).
    pub(super) fn is_loopback(&self) -> bool {
        match &self.host {
            Pattern::Name(n) => n == "localhost",
            Pattern::Ip(ip) => ip.is_loopback(),
            Pattern::Below(_) => false,
        }
    }

    /// The address this entry names, if it names one (so a name that resolves to it is not
    /// needed).
    fn ip(&self) -> Option<IpAddr> {
        match self.host {
            Pattern::Ip(ip) => Some(ip),
            Pattern::Name(_) | Pattern::Below(_) => None,
        }
    }

    /// True when this entry covers names other than the one it spells (`*.domain`), which a
    /// launch with the token may reach only with the operator's word.
    fn is_wildcard(&self) -> bool {
        match self.host {
            Pattern::Below(_) => true,
            Pattern::Name(_) | Pattern::Ip(_) => false,
        }
    }
}

/// Why an allow-list entry is refused: the entry as written and what is wrong with it.
///
/// ```
/// use relay_token::net::{AllowEntry, AllowErrorKind};
/// let e = AllowEntry::parse("api.anthropic.com:0").unwrap_err();
/// assert_eq!(e.kind(), AllowErrorKind::Port);
/// assert_eq!(
///     e.to_string(),
///     r#"network allow entry "api.anthropic.com:0": the port must be a number from 1 to 65535"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowError {
    entry: String,
    kind: AllowErrorKind,
}

/// What is wrong with an allow-list entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AllowErrorKind {
    /// Empty, or holds spaces or control characters.
    Blank,
    /// Not `host`, `host:port`, `[v6]:port` or `*.domain[:port]`.
    Form,
    /// A port that is not a number from 1 to 65535.
    Port,
    /// A wildcard that is not `*.domain`.
    Wildcard,
    /// A host that is not a name (letters, digits, `-`, `_` and dots).
    Name,
}

impl AllowError {
    /// What is wrong.
    ///
    /// ```
    /// let e = relay_token::net::AllowEntry::parse("a b").unwrap_err();
    /// assert_eq!(e.kind(), relay_token::net::AllowErrorKind::Blank);
    /// ```
    pub fn kind(&self) -> AllowErrorKind {
        self.kind
    }
}

impl fmt::Display for AllowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.kind {
            AllowErrorKind::Blank => "empty, or holds spaces or control characters",
            AllowErrorKind::Form => "not host, host:port, [v6]:port or *.domain[:port]",
            AllowErrorKind::Port => "the port must be a number from 1 to 65535",
            AllowErrorKind::Wildcard => "a wildcard must be *.domain",
            AllowErrorKind::Name => "not a host name (letters, digits, '-', '_' and dots)",
        };
        write!(f, "network allow entry {:?}: {why}", self.entry)
    }
}

impl std::error::Error for AllowError {}

/// A destination as a request names it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Host {
    /// A host name, lower case, no trailing dot.
    Name(String),
    /// An IP literal (IPv4-mapped IPv6 taken as IPv4).
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(a) => write!(f, "{a}"),
        }
    }
}

/// A request's host (`Example.COM.`, `127.0.0.1`, `[::1]`) in the form entries compare with;
/// `None` when it is neither a name nor an address.
///
/// ```
/// use relay_token::net::allow::{normal_host, Host};
/// assert_eq!(normal_host("Example.COM."), Some(Host::Name("example.com".into())));
/// assert_eq!(normal_host("[::ffff:127.0.0.1]"), Some(Host::Ip("127.0.0.1".parse().unwrap())));
/// assert_eq!(normal_host("a b"), None);
/// ```
pub fn normal_host(host: &str) -> Option<Host> {
    if let Some(ip) = parse_ip(host) {
        return Some(Host::Ip(ip));
    }
    normal_name(host).map(Host::Name)
}

/// The allow-list of a template: its entries as written, and parsed.
///
/// ```
/// use relay_token::net::AllowList;
/// let list = AllowList::parse(&["127.0.0.1:8080".to_string()])?;
/// assert!(list.allows("127.0.0.1", 8080, 80));
/// assert!(!list.allows("localhost", 8080, 80));
/// # Ok::<(), relay_token::net::AllowError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowList {
    written: Vec<String>,
    entries: Vec<AllowEntry>,
}

impl AllowList {
    /// Parses every entry; the first bad one is the error. An empty list is allowed (every
    /// destination is refused, as with `"none"`, but the session still gets the proxy).
    ///
    /// ```
    /// assert!(relay_token::net::AllowList::parse(&["".to_string()]).is_err());
    /// ```
    pub fn parse(entries: &[String]) -> Result<AllowList, AllowError> {
        let parsed = entries
            .iter()
            .map(|e| AllowEntry::parse(e))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AllowList {
            written: entries.to_vec(),
            entries: parsed,
        })
    }

    /// This list with `entry` added at its end (unless the list already names it).
    ///
    /// ```
    /// use relay_token::net::{AllowEntry, AllowList};
    /// let list = AllowList::parse(&["a.example".to_string()])?;
    /// let more = list.including(&AllowEntry::parse("b.example:8443")?);
    /// assert_eq!(more.entries(), ["a.example", "b.example:8443"]);
    /// assert!(more.allows("b.example", 8443, 443));
    /// # Ok::<(), relay_token::net::AllowError>(())
    /// ```
    pub fn including(&self, entry: &AllowEntry) -> AllowList {
        let mut list = self.clone();
        if !list.entries.contains(entry) {
            list.written.push(entry.to_string());
            list.entries.push(entry.clone());
        }
        list
    }

    /// The entries as written.
    ///
    /// ```
    /// let list = relay_token::net::AllowList::parse(&["a.example".to_string()])?;
    /// assert_eq!(list.entries(), ["a.example"]);
    /// # Ok::<(), relay_token::net::AllowError>(())
    /// ```
    pub fn entries(&self) -> &[String] {
        &self.written
    }

    /// The wildcard entries (`*.domain`), as written: each covers hosts the operator may not
    /// control.
    ///
    /// ```
    /// let list = relay_token::net::AllowList::parse(&["a.example".into(), "*.b.example".into()])?;
    /// assert_eq!(list.wildcards(), ["*.b.example"]);
    /// # Ok::<(), relay_token::net::AllowError>(())
    /// ```
    pub fn wildcards(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| e.is_wildcard())
            .map(|e| e.to_string())
            .collect()
    }

    /// True when a request for `host:port` (`default_port`: 443 for `CONNECT`, 80 for
    /// `http://`) is allowed.
    ///
    /// ```
    /// let list = relay_token::net::AllowList::parse(&["*.example.com".to_string()])?;
    /// assert!(list.allows("a.b.example.com", 443, 443));
    /// assert!(!list.allows("example.com", 443, 443));
    /// assert!(!list.allows("badexample.com", 443, 443));
    /// # Ok::<(), relay_token::net::AllowError>(())
    /// ```
    pub fn allows(&self, host: &str, port: u16, default_port: u16) -> bool {
        normal_host(host).is_some_and(|h| self.allows_host(&h, port, default_port))
    }

    /// [`AllowList::allows`] for a host already normalised.
    ///
    /// ```
    /// use relay_token::net::{allow::Host, AllowList};
    /// let list = AllowList::parse(&["10.0.0.1:80".to_string()])?;
    /// assert!(list.allows_host(&Host::Ip("10.0.0.1".parse().unwrap()), 80, 80));
    /// # Ok::<(), relay_token::net::AllowError>(())
    /// ```
    pub fn allows_host(&self, host: &Host, port: u16, default_port: u16) -> bool {
        self.entries
            .iter()
            .any(|e| e.allows(host, port, default_port))
    }

    /// True when `ip` is listed as an address (on any port): a name that resolves to a local
    /// address is refused unless that address is listed.
    ///
    /// ```
    /// let list = relay_token::net::AllowList::parse(&["127.0.0.1:9".to_string()])?;
    /// assert!(list.lists_ip("127.0.0.1".parse().unwrap()));
    /// # Ok::<(), relay_token::net::AllowError>(())
    /// ```
    pub fn lists_ip(&self, ip: IpAddr) -> bool {
        self.entries
            .iter()
            .any(|e| e.ip() == Some(canonical_ip(ip)))
    }
}

/// `host[:port]`, `[v6][:port]`, or a bare IPv6 address (no port).
fn split_host_port(s: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        return match after {
            "" => Some((inside, None)),
            p => Some((inside, Some(p.strip_prefix(':')?))),
        };
    }
    if s.parse::<Ipv6Addr>().is_ok() {
        return Some((s, None));
    }
    match s.split_once(':') {
        None => Some((s, None)),
        Some((h, p)) if !h.is_empty() && !p.contains(':') => Some((h, Some(p))),
        _ => None,
    }
}

/// An address in its one canonical form: IPv4-mapped IPv6 as IPv4.
fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

fn parse_ip(s: &str) -> Option<IpAddr> {
    let inner = s
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .unwrap_or(s);
    inner.parse::<IpAddr>().ok().map(canonical_ip)
}

/// A host name lower-cased, its trailing dot dropped; `None` unless it is made of labels of
/// letters, digits, `-` and `_`, and is not all digits and dots (`2130706433` would resolve to
/// an address without naming one).
fn normal_name(s: &str) -> Option<String> {
    let s = s.strip_suffix('.').unwrap_or(s).to_ascii_lowercase();
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let numeric = s.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let hexish = s.starts_with("0x");
    (s.len() <= 253 && !numeric && !hexish && s.split('.').all(label_ok)).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry of each host pattern, each once; `expected` names each pattern (one added later
    /// does not compile until it is decided there; list an entry of it here too).
    const EVERY_PATTERN: [&str; 3] = ["a.example", "*.b.example", "10.0.0.1"];

    /// What each pattern should decide: (a wildcard, the address it names, reaches
    /// `x.b.example`, reaches `10.0.0.1`).
    fn expected(p: &Pattern) -> (bool, Option<IpAddr>, bool, bool) {
        match p {
            Pattern::Name(_) => (false, None, false, false),
            Pattern::Below(_) => (true, None, true, false),
            Pattern::Ip(ip) => (false, Some(*ip), false, true),
        }
    }

    #[test]
    fn every_host_pattern_gets_its_own_decisions() {
        for written in EVERY_PATTERN {
            let e = AllowEntry::parse(written).unwrap();
            let (wildcard, ip, below, address) = expected(&e.host);
            assert_eq!(e.is_wildcard(), wildcard, "{written}");
            assert_eq!(e.ip(), ip, "{written}");
            let one = list(&[written]);
            assert_eq!(one.wildcards().len(), usize::from(wildcard), "{written}");
            assert_eq!(one.allows("x.b.example", 443, 443), below, "{written}");
            assert_eq!(one.allows("10.0.0.1", 443, 443), address, "{written}");
            assert_eq!(
                one.lists_ip("10.0.0.1".parse().unwrap()),
                address,
                "{written}"
            );
        }
    }

    fn list(e: &[&str]) -> AllowList {
        AllowList::parse(&e.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn default_ports_follow_the_request() {
        let l = list(&["api.example.com"]);
        assert!(l.allows("api.example.com", 443, 443));
        assert!(l.allows("api.example.com", 80, 80));
        assert!(!l.allows("api.example.com", 80, 443));
        assert!(!l.allows("api.example.com", 8443, 443));
    }

    #[test]
    fn names_never_match_addresses_and_back() {
        let l = list(&["localhost:8080", "10.1.2.3:80"]);
        assert!(!l.allows("127.0.0.1", 8080, 80));
        assert!(l.allows("10.1.2.3", 80, 80));
        assert!(l.allows("[::ffff:10.1.2.3]", 80, 80));
        assert!(!l.allows("2130706433", 8080, 80));
        assert!(!l.allows("0x7f000001", 8080, 80));
    }

    #[test]
    fn wildcards_cover_subdomains_only() {
        let l = list(&["*.example.com:8443"]);
        assert!(l.allows("A.Example.com.", 8443, 443));
        assert!(!l.allows("example.com", 8443, 443));
        assert!(!l.allows("evil-example.com", 8443, 443));
        assert!(!l.allows("a.example.com", 443, 443));
    }

    #[test]
    fn bad_entries_are_refused_with_their_text() {
        for bad in [
            "",
            "*",
            "*.",
            "a b",
            "h:x",
            "h:65536",
            "[::1",
            "a:b:c",
            "https://a",
        ] {
            let err = AllowEntry::parse(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
        assert_eq!(AllowEntry::parse("[::1]:9").unwrap().to_string(), "[::1]:9");
        assert_eq!(AllowEntry::parse("::1").unwrap().to_string(), "[::1]");
    }
}
