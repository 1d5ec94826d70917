//! `relay-host ps`: the running sessions' records
//! (`crate::launch::session::sessions`), as a table or one JSON array.

use crate::launch::session::sessions::running;

/// `relay-host ps`: the running sessions, as a table or (`--json`) one JSON array. Returns 0.
pub(crate) fn print(host: &crate::Host, json: bool) -> i32 {
    let list = running(&host.state_dir);
    if json {
        let rows: Vec<serde_json::Value> =
            list.iter().map(|r| r.to_json(&host.state_dir)).collect();
        outln!("{}", serde_json::Value::Array(rows));
        return 0;
    }
    if list.is_empty() {
        outln!(
            "no session runs (state folder {})",
            host.state_dir.display()
        );
        return 0;
    }
    outln!(
        "{:<24} {:<12} {:>8} {:<20} {:<8} {:<10} PROJECT",
        "ID",
        "TEMPLATE",
        "PID",
        "STARTED",
        "TOKEN",
        "NETWORK"
    );
    for r in &list {
        let project = r
            .project
            .as_deref()
            .map_or("-".into(), |p| p.display().to_string());
        outln!(
            "{:<24} {:<12} {:>8} {:<20} {:<8} {:<10} {project}",
            r.id,
            r.template,
            r.pid,
            r.started,
            r.token_mode(),
            r.network
        );
        if let Some(u) = r.api_use(&host.state_dir) {
            outln!("  api: {}", u.words());
            if u.refused() > 0 {
                outln!(
                    "  token: refused by the API {} times; {}",
                    u.refused(),
                    crate::human::MAKE_TOKEN
                );
            }
        }
        let denied = (r.network == "allow-list").then(|| r.denied(&host.state_dir));
        if let Some(n @ 1..) = denied {
            outln!("  network: {n} refused by the allow-list (relay-host events lists them)");
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ps_json_answers_0_with_no_session_running() {
        let state = tempfile::tempdir().unwrap();
        let host = crate::Host::from_dirs("/nonexistent".into(), state.path().into()).unwrap();
        assert_eq!(print(&host, true), 0);
    }
}
