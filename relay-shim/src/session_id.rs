//! The session id rule: the one check of a session's name, for the shim's `--session-id` and a
//! request's `session_id` and `resume` alike.

/// A session id: 1 to 64 bytes of `[A-Za-z0-9._-]`, not starting with `.` (no hidden or parent
/// folder) nor `-` (never read as an option where it is passed on). The one rule, for
/// `--session-id` and for a request's `session_id` and `resume` alike.
///
/// ```
/// use relay_shim::SessionId;
/// assert_eq!(SessionId::parse("s-42.a_b").unwrap().as_str(), "s-42.a_b");
/// assert!(SessionId::parse("").is_none());
/// assert!(SessionId::parse("a b").is_none());
/// assert!(SessionId::parse(&"x".repeat(65)).is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionId(String);

impl SessionId {
    /// The id, if `s` follows the rule.
    ///
    /// ```
    /// use relay_shim::SessionId;
    /// assert!(SessionId::parse("abc").is_some());
    /// assert!(SessionId::parse("-rf").is_none());
    /// assert!(SessionId::parse(".hidden").is_none());
    /// ```
    pub fn parse(s: &str) -> Option<SessionId> {
        let ok = (1..=64).contains(&s.len())
            && !s.starts_with(['.', '-'])
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        ok.then(|| SessionId(s.to_owned()))
    }

    /// The id as text.
    ///
    /// ```
    /// assert_eq!(relay_shim::SessionId::parse("abc").unwrap().as_str(), "abc");
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }
}
