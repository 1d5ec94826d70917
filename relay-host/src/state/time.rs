//! Times as people and logs read them: RFC 3339 in UTC, through the `jiff` crate.

/// A time in seconds since the Unix epoch as RFC 3339 in UTC (`2026-12-02T19:00:00Z`).
pub(crate) fn rfc3339(secs: u64) -> String {
    i64::try_from(secs)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map_or_else(|| secs.to_string(), |t| t.to_string())
}

/// Now, as [`rfc3339`] (whole seconds).
pub(crate) fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    rfc3339(now.map_or(0, |d| d.as_secs()))
}

#[cfg(test)]
mod tests {
    /// `rfc3339`'s example.
    #[test]
    fn rfc3339_doc_example() {
        assert_eq!(crate::state::time::rfc3339(0), "1970-01-01T00:00:00Z");
    }

    /// `now_rfc3339`'s example.
    #[test]
    fn now_rfc3339_doc_example() {
        assert!(crate::state::time::now_rfc3339().ends_with('Z'));
    }
}
