//! A session's refused destinations, noted within bounds: a session that opens thousands of
//! connections the allow-list refuses must not grow the operator's `events.jsonl` and host log
//! without limit. The first [`PER_DESTINATION`] refusals of each `host:port` and at most
//! [`PER_SESSION`] in all are written (the `network_denied` event and the log line, as
//! before); the rest are counted, and once the session's proxy ends one
//! `network_denied_suppressed` event (and log line) says how many were left out, of how many
//! destinations, and (`more`, keyed `host:port`) how many more each destination with rows of its
//! own had, so its count is told whole after the session.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::json;

use crate::state::State;

/// Refusals written for one destination (`host:port`) of a session.
pub(crate) const PER_DESTINATION: u64 = 3;

/// Refusals written for one session in all.
pub(crate) const PER_SESSION: u64 = 100;

/// The refusals of one session, written within the bounds above.
pub(crate) struct DenyNotes {
    events: State,
    id: String,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    /// Refusals per destination.
    per_destination: HashMap<(String, u64), u64>,
    /// Refusals written.
    written: u64,
    /// Refusals counted and not written.
    suppressed: u64,
    /// The count was told ([`DenyNotes::finish`]).
    told: bool,
}

impl DenyNotes {
    /// The notes of session `id`, written to `events`.
    pub(crate) fn new(events: State, id: &str) -> DenyNotes {
        DenyNotes {
            events,
            id: id.to_string(),
            seen: Mutex::new(Seen::default()),
        }
    }

    /// One refusal of `host:port` ([`note_denied`]'s fields): written when within the
    /// bounds, else counted.
    pub(crate) fn denied(&self, host: &str, port: u64, reason: &str, allow_with: &str) {
        if self.admit(host, port) {
            note_denied(&self.events, &self.id, host, port, reason, allow_with);
        }
    }

    /// True when the refusal of `host:port` is to be written; counts it either way.
    fn admit(&self, host: &str, port: u64) -> bool {
        let mut s = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let n = s
            .per_destination
            .entry((host.to_string(), port))
            .or_insert(0);
        *n += 1;
        let first = *n <= PER_DESTINATION;
        if first && s.written < PER_SESSION {
            s.written += 1;
            return true;
        }
        s.suppressed += 1;
        false
    }

    /// The refusals counted and not written, and the destinations refused.
    #[cfg(test)]
    fn left_out(&self) -> (u64, usize) {
        let s = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        (s.suppressed, s.per_destination.len())
    }
}

impl DenyNotes {
    /// The session's proxy ended: tells how many refusals were left out, once (nothing when
    /// none was).
    pub(crate) fn finish(&self) {
        let (suppressed, destinations, more) = {
            let mut s = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            if std::mem::replace(&mut s.told, true) {
                return;
            }
            // The refusals left out of each destination that has rows of its own (at most
            // PER_SESSION of them), so its count can be told whole.
            let mut more = serde_json::Map::new();
            for ((host, port), n) in &s.per_destination {
                if *n > PER_DESTINATION && more.len() < PER_SESSION as usize {
                    let entry = crate::net::destination(host, *port);
                    more.insert(entry, json!(n - PER_DESTINATION));
                }
            }
            (s.suppressed, s.per_destination.len(), more)
        };
        if suppressed == 0 {
            return;
        }
        let _ = self.events.event(&json!({
            "event": "network_denied_suppressed",
            "session_id": self.id,
            "suppressed": suppressed,
            "destinations": destinations,
            "more": more,
        }));
        self.events.log(&format!(
            "session {}: {suppressed} more refused connections not written (to {destinations} \
             destinations in all; at most {PER_DESTINATION} a destination and {PER_SESSION} a \
             session are)",
            self.id
        ));
    }
}

impl Drop for DenyNotes {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A destination the allow-list refused: the `network_denied` event (the session, host, port,
/// reason and what would allow it) and the log line.
fn note_denied(events: &State, id: &str, host: &str, port: u64, reason: &str, allow_with: &str) {
    let _ = events.event(&json!({
        "event": "network_denied",
        "session_id": id,
        "host": host,
        "port": port,
        "reason": reason,
        "allow_with": allow_with,
    }));
    events.log(&format!(
        "session {id}: network refused {host}:{port} ({reason}); to allow it, {allow_with}"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three refusals of one destination are written, the fourth counted; a session's hundredth
    /// written refusal is its last; the count is told once, when the notes end.
    #[test]
    fn refusals_are_written_within_bounds_and_the_rest_counted() {
        let dir = tempfile::tempdir().unwrap();
        let state = State::open(dir.path()).unwrap();
        let notes = DenyNotes::new(State::open(dir.path()).unwrap(), "s1");
        for _ in 0..5 {
            notes.denied("a.example", 443, "not on the list", "add it");
        }
        for i in 0..200 {
            notes.denied(&format!("h{i}.example"), 443, "not on the list", "add it");
        }
        assert_eq!(notes.left_out(), (2 + 103, 201));
        drop(notes);
        let text = std::fs::read_to_string(state.path().join("events.jsonl")).unwrap();
        let rows: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let denied = rows.iter().filter(|r| r["event"] == "network_denied");
        assert_eq!(denied.count(), PER_SESSION as usize);
        let last = rows.last().unwrap();
        assert_eq!(last["event"], "network_denied_suppressed");
        assert_eq!(
            (last["suppressed"].as_u64(), last["destinations"].as_u64()),
            (Some(105), Some(201))
        );
    }
}
