//! `status` runs the checks a launch would, and its exit code says whether a Claude session
//! would start logged in.

use super::*;

/// `status --json` with `PATH` of `/usr/bin:/bin` (no `claude` there): its exit code and report.
fn status(fx: &Fixture) -> (Option<i32>, Value) {
    let out = finish(host(fx, &["--json", "status"]).env("PATH", "/usr/bin:/bin"));
    (out.code, out.json("status --json"))
}

/// The check named `name` in a report.
fn check<'a>(r: &'a Value, name: &str) -> &'a Value {
    (r["checks"].as_array().unwrap().iter())
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {r}"))
}

#[test]
fn status_exits_non_zero_when_a_claude_session_would_not_start_logged_in() {
    let fx = Fixture::new(&relay_tests::fake_agent());
    // The fixture's claude-code runs the fake agent, and the token is set: ready.
    let (code, r) = status(&fx);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["claude_ready"], true, "{r}");
    for name in [
        "settings",
        "token",
        "bwrap",
        "user namespaces",
        "relay-shim",
    ] {
        assert_eq!(check(&r, name)["ok"], true, "{name}: {r}");
    }

    // `claude` not installed (the built-in command, not on PATH).
    settings(
        &fx,
        &json!({"claude_token_file": "~/.config/acme-ltt/token"}),
    );
    let (code, r) = status(&fx);
    assert_eq!(code, Some(78), "{r}");
    let c = check(&r, "template claude-code");
    assert_eq!(c["ok"], false, "{r}");
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .contains("\"claude\" not found"),
        "{c}"
    );
    assert!(
        c["hint"].as_str().unwrap().contains("install Claude Code"),
        "{c}"
    );
    assert_eq!(
        check(&r, "token")["ok"],
        true,
        "only the command fails: {r}"
    );

    // Found, but a script whose interpreter is missing.
    let bin = fx.root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::write(&claude, "#!/usr/bin/env no-such-node\n").unwrap();
    std::fs::set_permissions(&claude, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let t = json!({"id": "claude-code", "command": [claude]});
    settings(
        &fx,
        &json!({"claude_token_file": "~/.config/acme-ltt/token", "templates": [t]}),
    );
    let (code, r) = status(&fx);
    assert_eq!(code, Some(78), "{r}");
    let c = check(&r, "template claude-code");
    assert!(
        c["detail"].as_str().unwrap().contains("\"no-such-node\""),
        "{c}"
    );

    // No token set, on a fresh config: not logged in.
    let agent = relay_tests::fake_agent_arg();
    settings(
        &fx,
        &json!({"templates": [{"id": "claude-code", "command": [agent]}]}),
    );
    let (code, r) = status(&fx);
    assert_eq!(code, Some(78), "{r}");
    let c = check(&r, "token");
    assert_eq!(c["detail"], "claude_token_file is not set", "{c}");
    assert!(
        c["hint"].as_str().unwrap().contains("claude setup-token"),
        "{c}"
    );
    // A template other than claude-code with a missing command fails its check, not the code.
    let t = json!({"id": "pi", "command": ["no-such-pi"]});
    let claude_code = json!({"id": "claude-code", "command": [agent]});
    settings(
        &fx,
        &json!({"claude_token_file": "~/.config/acme-ltt/token", "templates": [claude_code, t]}),
    );
    let (code, r) = status(&fx);
    assert_eq!(check(&r, "template pi")["ok"], false, "{r}");
    assert_eq!(code, Some(0), "{r}");
    // The human form: one line per check, the failed one's hint under it.
    let out = finish(host(&fx, &["status"]).env("PATH", "/usr/bin:/bin"));
    assert!(
        out.stdout
            .contains("check:             FAIL template pi: command \"no-such-pi\""),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("a Claude session would start logged in"),
        "{}",
        out.stdout
    );
}
