//! `status` runs the checks a launch would, and its exit code says whether a Claude session
//! would start logged in.

use super::*;

/// `status --json` with `PATH` of `/usr/bin:/bin` (no `claude` there): its exit code and report.
fn status(fx: &World) -> (Option<i32>, Value) {
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
    let fx = world();
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
    fx.settings(json!({"claude_token_file": "~/.config/acme-ltt/token"}));
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
    fx.settings(json!({"claude_token_file": "~/.config/acme-ltt/token", "templates": [t]}));
    let (code, r) = status(&fx);
    assert_eq!(code, Some(78), "{r}");
    let c = check(&r, "template claude-code");
    assert!(
        c["detail"].as_str().unwrap().contains("\"no-such-node\""),
        "{c}"
    );

    // No token set, on a fresh config: not logged in.
    let agent = relay_tests::fake_agent_arg();
    fx.settings(json!({"templates": [{"id": "claude-code", "command": [agent]}]}));
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
    fx.settings(
        json!({"claude_token_file": "~/.config/acme-ltt/token", "templates": [claude_code, t]}),
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

/// One verdict: a token file that others may read (0644) is refused by a launch, so `status`
/// says not ready in both forms, naming the path and the mode rule (never the content), exits
/// 78, and `run` refuses with the same reason; at 0600 all three say ready.
#[test]
fn a_token_file_others_may_read_makes_status_and_run_agree() {
    use std::os::unix::fs::PermissionsExt;
    let fx = world();
    let mode = |m: u32| {
        std::fs::set_permissions(&fx.token_file, std::fs::Permissions::from_mode(m)).unwrap()
    };
    let rule = format!(
        "read claude_token_file {}: mode 0644 lets others read it; chmod 600 it",
        fx.token_file.display()
    );
    mode(0o644);
    let (code, r) = status(&fx);
    assert_eq!(code, Some(78), "{r}");
    assert_eq!(r["claude_ready"], false, "{r}");
    let c = check(&r, "token");
    assert_eq!(
        (&c["ok"], c["detail"].as_str()),
        (&json!(false), Some(&*rule)),
        "{c}"
    );
    let text = finish(host(&fx, &["status"]).env("PATH", "/usr/bin:/bin"));
    assert_eq!(text.code, Some(78));
    assert!(
        text.stdout
            .contains(&format!("check:             FAIL token: {rule}")),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("a Claude session would not start logged in"),
        "{}",
        text.stdout
    );
    let token = std::fs::read_to_string(&fx.token_file).unwrap();
    relay_tests::assert_no_token("status", text.stdout.as_bytes(), token.trim());
    relay_tests::assert_no_token("status --json", r.to_string().as_bytes(), token.trim());
    // The fixture's token is not of the `sk-ant-oat01-` shape: the warning saying so is readable.
    assert!(!format!("{r}{}", text.stdout).contains("[REDACTED]"), "{r}");
    let project = fx.project.to_str().unwrap();
    let refused = fx.host(&["--json", "run", "--project", project]);
    assert_eq!(refused.code, Some(78), "{}", refused.stderr);
    assert!(refused.stderr.contains(&rule), "{}", refused.stderr);

    mode(0o600);
    let (code, r) = status(&fx);
    assert_eq!((code, &r["claude_ready"]), (Some(0), &json!(true)), "{r}");
    assert_eq!(check(&r, "token")["ok"], true, "{r}");
    let ran = fx.host(&["run", "--project", project]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
}

/// With a template in stand-in mode, `status` names the trust store `relay-stand-in` verifies
/// the API against: the system bundle's path and how many certificates it holds (and the
/// `upstream_ca_file`'s); and it leads with the checks, the verdict its last line.
#[test]
fn status_names_the_trust_store_stand_in_mode_verifies_against_and_leads_with_the_checks() {
    let fx = world();
    let mut s: Value =
        serde_json::from_str(&std::fs::read_to_string(fx.config.join("settings.json")).unwrap())
            .unwrap();
    s["templates"][0]["token_mode"] = json!("stand_in");
    s["templates"][0]["network"] = json!({"allow": ["api.anthropic.com:443"]});
    fx.settings(s);
    let bundle = "/etc/ssl/certs/ca-certificates.crt";
    let n = std::fs::read_to_string(bundle)
        .unwrap_or_else(|e| panic!("{bundle}: {e}"))
        .matches("-----BEGIN CERTIFICATE-----")
        .count();
    assert!(n > 0);
    let (_, r) = status(&fx);
    let trust = check(&r, "trust store");
    assert_eq!(trust["ok"], true, "{trust}");
    assert_eq!(
        trust["detail"],
        json!(format!("{bundle}: {n} certificates")),
        "{trust}"
    );
    let out = finish(host(&fx, &["status"]).env("PATH", "/usr/bin:/bin"));
    let first = out.stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("check:"),
        "status leads with the checks: {}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains(&format!("trust store: {bundle}: {n} certificates")),
        "{}",
        out.stdout
    );
    let last = out.stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with("a Claude session would"), "{}", out.stdout);
}
