//! A token the API refused, said to the person: in stand-in mode relay sees the API's answers,
//! and a `401` or `403` from an API host means the token was refused (revoked, expired, not
//! allowed). The first of a session is a `token_refused` event and a mark in the state folder;
//! `ps` counts them (`token_refused`), `relay-host run` says so after the session with the fix
//! (not Claude's `/login`, whose hosts the allow-list refuses), and `status` warns until the
//! token file changes. Pipe mode cannot see the answers.

use std::path::Path;

use serde_json::json;

use crate::state::State;

/// The mark in the state folder: the last refusal (its session and status); newer than the
/// token file while that token is the refused one.
const MARK: &str = "token-refused.json";

/// True for an API host's answer that refuses the token: `401` (`authentication_error`) or `403`
/// (`permission_error`).
pub(crate) fn refuses(status: u16) -> bool {
    matches!(status, 401 | 403)
}

/// Notes the first refusal of session `id`: the `token_refused` event and the state folder's
/// mark. Stand-in mode's reports call it (Linux).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn note(events: &State, id: &str, status: u16) {
    let _ = events.event(&json!({"event": "token_refused", "session_id": id, "status": status}));
    let mark = json!({"session_id": id, "status": status, "at": crate::state::time::now_rfc3339()});
    let _ = std::fs::write(events.path().join(MARK), mark.to_string());
}

/// The status with which the API refused the token in session `id`, if it did (its
/// `token_refused` event).
pub(crate) fn in_session(state_dir: &Path, id: &str) -> Option<u64> {
    use std::io::BufRead;
    let f = std::fs::File::open(state_dir.join(crate::state::EVENTS_FILE)).ok()?;
    std::io::BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .filter(|l| l.contains("\"token_refused\"") && l.contains(id))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .find(|v| v["event"] == "token_refused" && v["session_id"] == id)
        .and_then(|v| v["status"].as_u64())
}

/// The line `relay-host run` prints after a session whose token the API refused.
pub(crate) fn line(status: u64) -> String {
    format!(
        "relay-host: the API refused the token ({status}) in this session: {}",
        crate::human::MAKE_TOKEN
    )
}

/// `status`'s warning while the token file `token` is the one the API last refused (the mark is
/// newer than the file).
pub(crate) fn warning(state_dir: &Path, token: &Path) -> Option<String> {
    let mark = std::fs::metadata(state_dir.join(MARK))
        .ok()?
        .modified()
        .ok()?;
    let file = std::fs::metadata(token).ok()?.modified().ok()?;
    if file > mark {
        return None;
    }
    let text = std::fs::read_to_string(state_dir.join(MARK)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(format!(
        "the API refused the token ({}) in session {} at {}; {}",
        v["status"],
        v["session_id"].as_str().unwrap_or("?"),
        v["at"].as_str().unwrap_or("?"),
        crate::human::MAKE_TOKEN
    ))
}
