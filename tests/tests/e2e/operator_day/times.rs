//! Times: RFC 3339 in the human form of both logs and in `relay-host.log`; `--since` refuses a
//! day that does not exist.

use super::*;

/// True when `s` starts with an RFC 3339 time in UTC (`2026-12-02T19:00:00Z`).
fn starts_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'Z'
        && s[..4].parse::<u32>().is_ok_and(|y| y >= 2024)
}

#[test]
fn every_log_line_carries_an_rfc3339_time_and_since_refuses_impossible_dates() {
    let fx = world();
    let out = finish(host(&fx, &["launch"]).arg(claude_req(&fx, "t1")));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    for log in ["events", "audit"] {
        let out = fx.host(&[log]);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert!(!lines.is_empty(), "{log}: no rows");
        for l in &lines {
            assert!(starts_rfc3339(l), "{log}: a row without its time: {l}");
        }
    }
    let log = std::fs::read_to_string(fx.state.join("relay-host.log")).unwrap();
    for l in log.lines() {
        assert!(starts_rfc3339(l), "relay-host.log: {l}");
    }
    // --since: a day the month does not have is refused; a real one filters.
    let out = fx.host(&["events", "--since", "2026-02-31"]);
    assert_eq!(out.code, Some(64), "{}", out.stdout);
    assert!(
        out.stderr.contains("--since \\\"2026-02-31\\\"")
            || out.stderr.contains("--since \"2026-02-31\""),
        "{}",
        out.stderr
    );
    let out = fx.host(&["events", "--since", "2026-02-28T24:30:00Z"]);
    assert_eq!(out.code, Some(64), "an hour past 24: {}", out.stdout);
    let out = fx.host(&["events", "--since", "2099-01-01"]);
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (Some(0), ""),
        "events carry a time to filter on"
    );
    let out = fx.host(&["events", "--since", "1h"]);
    assert!(
        out.stdout.lines().count() >= 2,
        "launch and exit: {}",
        out.stdout
    );
}
