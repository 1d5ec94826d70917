//! A stand-in session's use of its API hosts, counted from `relay-stand-in`'s `used` reports:
//! requests, answers by status, bytes each way, never a byte of content. The launch's host
//! keeps it in the session folder while the session runs (`relay-host ps` shows it) and writes
//! it as the `stand_in_use` event when the session ends.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The file in the session folder.
const USE_FILE: &str = "api_use.json";

/// A stand-in session's API use so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ApiUse {
    /// Requests that got an answer from an API host.
    pub requests: u64,
    /// Those answers by status (`"200"`: count).
    pub statuses: BTreeMap<String, u64>,
    /// Bytes of the requests sent on (heads and bodies).
    pub sent: u64,
    /// Bytes of the answers sent back (heads and bodies).
    pub received: u64,
}

impl ApiUse {
    /// Counts one answer (`relay-stand-in`'s reports, on Linux).
    #[cfg(any(test, target_os = "linux"))]
    pub(crate) fn add(&mut self, status: u16, sent: u64, received: u64) {
        self.requests += 1;
        *self.statuses.entry(status.to_string()).or_default() += 1;
        self.sent += sent;
        self.received += received;
    }

    /// How many answers refused the token (`401`, `403`).
    pub(crate) fn refused(&self) -> u64 {
        (self.statuses.iter())
            .filter(|(s, _)| {
                s.parse()
                    .is_ok_and(crate::launch::network::token_refused::refuses)
            })
            .map(|(_, n)| n)
            .sum()
    }

    /// The use in words, as `ps` shows it.
    pub(crate) fn words(&self) -> String {
        let answers: Vec<String> = (self.statuses.iter())
            .map(|(s, n)| format!("{s}×{n}"))
            .collect();
        let answers = match answers.is_empty() {
            true => "none".to_string(),
            false => answers.join(" "),
        };
        format!(
            "{} requests; answers {answers}; {} bytes sent, {} received",
            self.requests, self.sent, self.received
        )
    }

    /// Writes it into the session folder `dir` (a new file renamed over the old, `0600`).
    #[cfg(target_os = "linux")]
    pub(crate) fn write(&self, dir: &Path) -> std::io::Result<()> {
        use std::io::Write;
        let text = serde_json::to_string(self).map_err(std::io::Error::other)?;
        let tmp = dir.join(format!("{USE_FILE}.new"));
        let _ = std::fs::remove_file(&tmp);
        crate::state::append_private(&tmp)?.write_all(text.as_bytes())?;
        std::fs::rename(&tmp, dir.join(USE_FILE))
    }

    /// The use written in the session folder `dir`, if any.
    pub(crate) fn read(dir: &Path) -> Option<ApiUse> {
        let text = std::fs::read_to_string(dir.join(USE_FILE)).ok()?;
        serde_json::from_str(&text).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_use_is_counted_and_said_in_words() {
        let mut u = ApiUse::default();
        u.add(200, 800, 4000);
        u.add(429, 700, 100);
        assert_eq!(
            u.words(),
            "2 requests; answers 200×1 429×1; 1500 bytes sent, 4100 received"
        );
    }

    #[test]
    fn no_use_is_read_from_a_folder_without_its_file() {
        assert_eq!(ApiUse::read("/nonexistent".as_ref()), None);
    }
}
