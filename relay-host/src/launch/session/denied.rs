//! The destinations a session's allow-list refused (its `network_denied` events, and once its
//! proxy ended the `network_denied_suppressed` count of those left out of them): counted for
//! `ps` while it runs (at most three a destination until then), and named once it ended by `relay-host run`, each once with its count and
//! the setting that would allow it, where the person looks (a client prints only "403").

use std::io::BufRead;
use std::path::Path;

use serde_json::Value;

/// One refused destination of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    /// `host:port` (an IPv6 address in brackets), as the allow-list takes it.
    pub entry: String,
    /// How many times it was refused.
    pub count: u64,
    /// What would allow it, in the proxy's words (the event's `allow_with`).
    pub allow_with: String,
}

impl Refused {
    /// The line `relay-host run` prints for it.
    pub(crate) fn line(&self) -> String {
        let times = match self.count {
            1 => "once".to_string(),
            n => format!("{n} times"),
        };
        format!(
            "relay-host: the allow-list refused {} {times} in this session; to allow it, {}",
            self.entry, self.allow_with
        )
    }
}

/// The destinations refused to session `id`, in the order first refused, from the state
/// folder's `events.jsonl` (nothing when it cannot be read).
pub(crate) fn refused(state_dir: &Path, id: &str) -> Vec<Refused> {
    let Ok(f) = std::fs::File::open(state_dir.join(crate::state::EVENTS_FILE)) else {
        return Vec::new();
    };
    let mut out: Vec<Refused> = Vec::new();
    let rows = std::io::BufReader::new(f).lines().map_while(Result::ok);
    for row in rows.filter(|l| l.contains("\"network_denied") && l.contains(id)) {
        let Ok(v) = serde_json::from_str::<Value>(&row) else {
            continue;
        };
        if v["session_id"] != id {
            continue;
        }
        // The count of the refusals left out of the rows, once the session's proxy ended.
        if v["event"] == "network_denied_suppressed" {
            for (entry, n) in v["more"].as_object().into_iter().flatten() {
                if let Some(r) = out.iter_mut().find(|r| &r.entry == entry) {
                    r.count += n.as_u64().unwrap_or(0);
                }
            }
            continue;
        }
        if v["event"] != "network_denied" {
            continue;
        }
        let entry = crate::net::destination(
            v["host"].as_str().unwrap_or("?"),
            v["port"].as_u64().unwrap_or(0),
        );
        match out.iter_mut().find(|r| r.entry == entry) {
            Some(r) => r.count += 1,
            None => out.push(Refused {
                entry,
                count: 1,
                allow_with: v["allow_with"].as_str().unwrap_or_default().to_string(),
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_destination_is_named_once_with_its_count() {
        let state = tempfile::tempdir().unwrap();
        let row = |id: &str, host: &str, port: u16| {
            format!(
                "{{\"event\":\"network_denied\",\"session_id\":\"{id}\",\"host\":\"{host}\",\
                 \"port\":{port},\"reason\":\"r\",\"allow_with\":\"add it\"}}\n"
            )
        };
        let text = [
            row("s1", "a.example", 443),
            row("s2", "a.example", 443),
            row("s1", "::1", 80),
            row("s1", "a.example", 443),
        ]
        .concat();
        std::fs::write(state.path().join("events.jsonl"), text).unwrap();
        let got = refused(state.path(), "s1");
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0].line(),
            "relay-host: the allow-list refused a.example:443 2 times in this session; to allow \
             it, add it"
        );
        assert_eq!(got[1].entry, "[::1]:80");
        assert_eq!(got[1].count, 1);
        // Once the proxy ended: the refusals left out of the rows are counted in.
        let more = "{\"event\":\"network_denied_suppressed\",\"session_id\":\"s1\",\
                    \"suppressed\":40,\"destinations\":2,\"more\":{\"a.example:443\":40}}\n";
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(state.path().join("events.jsonl"))
            .unwrap();
        std::io::Write::write_all(&mut f, more.as_bytes()).unwrap();
        assert_eq!(refused(state.path(), "s1")[0].count, 42);
        assert_eq!(refused(state.path(), "s2")[0].count, 1);
    }
}
