//! `relay-host audit` and `relay-host events`: the state folder's logs for people (times in
//! RFC 3339, UTC) or as stored (`--json`), filtered by time and session, optionally followed.
//! Reading never creates the state folder.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

/// Which rows to print.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Query {
    /// Only rows at or after this time (seconds since the epoch); rows without a time pass.
    pub(crate) since: Option<u64>,
    /// Only rows of this session.
    pub(crate) session: Option<String>,
    /// Keep printing rows as they are appended.
    pub(crate) follow: bool,
}

impl Query {
    /// True when `row` passes the filters.
    pub(crate) fn matches(&self, row: &Value) -> bool {
        let time_ok = match (self.since, row.get("ts").and_then(Value::as_u64)) {
            (Some(s), Some(t)) => t >= s,
            _ => true,
        };
        let session_ok = match &self.session {
            Some(id) => row.get("session_id").and_then(Value::as_str) == Some(id),
            None => true,
        };
        time_ok && session_ok
    }
}

/// Seconds since the epoch as RFC 3339 in UTC (`2026-12-02T19:48:13Z`).
pub(crate) fn rfc3339(secs: u64) -> String {
    super::time::rfc3339(secs)
}

/// A `--since` value that is neither a time, a date nor an age (the value as given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadSince(pub String);

impl std::fmt::Display for BadSince {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--since {:?}: give a time (2026-12-02T19:00:00Z), a date (2026-12-02) or an age \
             (30m, 2h, 7d)",
            self.0
        )
    }
}

impl std::error::Error for BadSince {}

/// Parses a `--since` value: RFC 3339 (`2026-12-02T19:00:00Z`, or with an offset), a date
/// (`2026-12-02`, its start in UTC),
/// or an age (`30s`, `15m`, `2h`, `7d`) counted back from `now`.
pub(crate) fn parse_since(value: &str, now: u64) -> Result<u64, BadSince> {
    let bad = || BadSince(value.to_string());
    if let Some(unit) = value.chars().last().filter(|c| "smhd".contains(*c)) {
        let n: u64 = value[..value.len() - 1].parse().map_err(|_| bad())?;
        let per = match unit {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => 86400,
        };
        return Ok(now.saturating_sub(n.saturating_mul(per)));
    }
    let secs = match value.parse::<jiff::civil::Date>() {
        // A date alone: its start, in UTC. jiff refuses a day the month does not have.
        Ok(date) if !value.contains(['T', 't', ' ']) => date
            .to_zoned(jiff::tz::TimeZone::UTC)
            .map_err(|_| bad())?
            .timestamp()
            .as_second(),
        _ => value
            .parse::<jiff::Timestamp>()
            .map_err(|_| bad())?
            .as_second(),
    };
    u64::try_from(secs).map_err(|_| bad())
}

/// One row for a person: the time first (RFC 3339), then `key=value` pairs.
pub(crate) fn text_line(row: &Value) -> String {
    let Value::Object(m) = row else {
        return row.to_string();
    };
    let mut parts: Vec<String> = Vec::new();
    if let Some(t) = m.get("ts").and_then(Value::as_u64) {
        parts.push(rfc3339(t));
    }
    for (k, v) in m.iter().filter(|(k, _)| *k != "ts") {
        match v {
            Value::String(s) => parts.push(format!("{k}={s}")),
            other => parts.push(format!("{k}={other}")),
        }
    }
    parts.join(" ")
}

/// Prints the rows of `dir/name` that match `query` (as stored with `json`, else as text
/// lines); with `follow`, keeps printing rows as they are appended. A missing folder or file
/// prints nothing and creates nothing.
pub(crate) fn print(dir: &Path, name: &str, json: bool, query: &Query) -> io::Result<()> {
    let path = dir.join(name);
    let mut offset = 0u64;
    loop {
        offset = print_from(&path, offset, json, query)?;
        if !query.follow {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Prints the whole lines from byte `offset` on; returns the offset after the last one.
fn print_from(path: &Path, offset: u64, json: bool, query: &Query) -> io::Result<u64> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(offset),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    // A log that shrank was replaced: start again from its beginning.
    let start = if len < offset { 0 } else { offset };
    f.seek(SeekFrom::Start(start))?;
    let mut reader = BufReader::new(f);
    let mut at = start;
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader.read_line(&mut line)?;
        if n == 0 || !line.ends_with('\n') {
            return Ok(at);
        }
        at += n as u64;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        let row = serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.into()));
        if !query.matches(&row) {
            continue;
        }
        // A closed stdout ends the printing (and `--follow`) with the write's error.
        if json {
            try_outln!("{text}")?;
        } else {
            try_outln!("{}", text_line(&row))?;
        }
    }
}

#[cfg(test)]
mod tests {
    /// `Query`'s example.
    #[test]
    fn query_doc_example() {
        let q = crate::state::logs::Query {
            since: Some(0),
            session: None,
            follow: false,
        };
        assert!(q.matches(&serde_json::json!({"ts": 5})));
    }

    /// `matches`'s example.
    #[test]
    fn matches_doc_example() {
        use crate::state::logs::Query;
        let q = Query {
            since: Some(10),
            session: Some("s-1".into()),
            follow: false,
        };
        assert!(q.matches(&serde_json::json!({"ts": 10, "session_id": "s-1"})));
        assert!(!q.matches(&serde_json::json!({"ts": 9, "session_id": "s-1"})));
        assert!(!q.matches(&serde_json::json!({"ts": 10, "session_id": "s-2"})));
    }

    /// `rfc3339`'s example.
    #[test]
    fn rfc3339_doc_example() {
        use crate::state::logs::rfc3339;
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_154_493), "2026-12-01T19:48:13Z");
    }

    /// `BadSince`'s example.
    #[test]
    fn bad_since_doc_example() {
        let e = crate::state::logs::parse_since("soon", 0).unwrap_err();
        assert!(e.to_string().starts_with("--since \"soon\": give a time"));
    }

    /// `parse_since`'s example.
    #[test]
    fn parse_since_doc_example() {
        use crate::state::logs::parse_since;
        assert_eq!(parse_since("1970-01-02", 0), Ok(86400));
        assert_eq!(parse_since("1970-01-01T01:00:00Z", 0), Ok(3600));
        assert_eq!(parse_since("2h", 10_000), Ok(10_000 - 7200));
        assert!(parse_since("yesterday", 0).is_err());
        assert!(parse_since("2026-02-31", 0).is_err(), "no such day");
        assert!(
            parse_since("2026-02-28T25:00:00Z", 0).is_err(),
            "no such hour"
        );
    }

    /// `text_line`'s example.
    #[test]
    fn text_line_doc_example() {
        let row = serde_json::json!({"event": "session_launch", "ts": 0, "outcome": "ok"});
        assert_eq!(
            crate::state::logs::text_line(&row),
            "1970-01-01T00:00:00Z event=session_launch outcome=ok"
        );
    }

    #[test]
    fn a_missing_log_prints_nothing_and_makes_nothing_and_an_unreadable_one_is_an_error() {
        use crate::state::logs::{print, Query};
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        print(&state, "audit.jsonl", false, &Query::default()).unwrap();
        assert!(!state.exists());
        std::fs::create_dir(&state).unwrap();
        std::fs::write(state.join("audit.jsonl"), "{\"ts\": 5}\n").unwrap();
        print(&state, "audit.jsonl", false, &Query::default()).unwrap();
        std::fs::create_dir(state.join("events.jsonl")).unwrap();
        assert!(print(&state, "events.jsonl", true, &Query::default()).is_err());
    }
}
