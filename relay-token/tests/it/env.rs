//! Acceptance tests for the child's environment, as tables and end to end
//! through `TokenPipe::spawn` with `ChildEnv::apply`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::process::{Command, Stdio};

use relay_token::ChildEnv;
use relay_token::{ClaudeToken, FdMap, TokenPipe, TOKEN_FD_VAR};

fn parent(vars: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    vars.iter().map(|(k, v)| (k.into(), v.into())).collect()
}

/// Names that are never inherited, with or without a token.
const ALWAYS_DROPPED: &[(&str, &str)] = &[
    ("CLAUDECODE", "1"),
    ("CLAUDE_PID", "123"),
    ("CLAUDE_EFFORT", "high"),
    ("CLAUDE_CODE_ENTRYPOINT", "cli"),
    ("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-leak"),
    ("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR", "7"),
    ("CLAUDE_CODE_SSE_PORT", ""),
    ("CLAUDE_CODE_", "bare prefix"),
    ("RELAY_HOST_TOKEN", "s1"),
    ("RELAY_SHIM_TOKEN", ""),
    ("RELAY_A_B_TOKEN", "s2"),
    ("RELAY_LAUNCH_FD", "9"),
];

/// Names that always pass.
const KEPT: &[(&str, &str)] = &[
    ("PATH", "/usr/bin:/bin"),
    ("HOME", "/home/op"),
    ("CLAUDECODE_EXTRA", "x"),
    ("CLAUDE_CONFIG_DIR", "/home/op/.claude"),
    ("CLAUDE_CODEX", "near miss"),
    ("ANTHROPIC_BASE_URL", "https://example.invalid"),
    ("RELAY_CONFIG_DIR", "/etc/relay"),
    ("RELAY_TOKENS", "no _TOKEN suffix"),
    ("EMPTY", ""),
];

const CREDENTIALS: &[(&str, &str)] = &[("ANTHROPIC_AUTH_TOKEN", "a"), ("ANTHROPIC_API_KEY", "k")];

fn all_vars() -> Vec<(OsString, OsString)> {
    parent(&[ALWAYS_DROPPED, KEPT, CREDENTIALS].concat())
}

fn as_map(env: &ChildEnv) -> BTreeMap<String, String> {
    env.iter()
        .map(|(k, v)| {
            (
                k.to_str().unwrap().to_string(),
                v.to_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn map(vars: &[(&str, &str)]) -> BTreeMap<String, String> {
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn without_a_token() {
    let env = ChildEnv::new(all_vars(), &BTreeMap::new(), false);
    // Exactly the kept names and the credentials: the descriptor is not used, so the person's
    // own credentials stay.
    assert_eq!(as_map(&env), map(&[KEPT, CREDENTIALS].concat()));
}

#[test]
fn with_a_token() {
    let env = ChildEnv::new(all_vars(), &BTreeMap::new(), true);
    assert_eq!(as_map(&env), map(KEPT));
    for (k, _) in ALWAYS_DROPPED.iter().chain(CREDENTIALS) {
        assert_eq!(env.get(k), None, "{k}");
    }
}

#[test]
fn each_dropped_name_alone_and_empty() {
    for carries in [false, true] {
        for (k, v) in ALWAYS_DROPPED {
            for value in [*v, ""] {
                let env = ChildEnv::new(parent(&[(k, value)]), &BTreeMap::new(), carries);
                assert_eq!(env.iter().count(), 0, "{k}={value:?} carries={carries}");
            }
        }
        for (k, v) in CREDENTIALS {
            let env = ChildEnv::new(parent(&[(k, v)]), &BTreeMap::new(), carries);
            assert_eq!(env.get(k).is_some(), !carries, "{k} carries={carries}");
        }
    }
}

#[test]
fn template_env_is_applied_after_the_scrub() {
    let template = map(&[("PATH", "/opt/bin"), (TOKEN_FD_VAR, "9"), ("NEW", "n")]);
    let env = ChildEnv::new(all_vars(), &template, false);
    assert_eq!(env.get("PATH"), Some("/opt/bin".as_ref()));
    assert_eq!(env.get("NEW"), Some("n".as_ref()));
    // Without a token the template's value passes unchanged.
    assert_eq!(env.get(TOKEN_FD_VAR), Some("9".as_ref()));
    // ChildEnv never sets the variable itself: only the spawn that attaches fd 5 does.
    let env = ChildEnv::new(all_vars(), &BTreeMap::new(), true);
    assert_eq!(env.get(TOKEN_FD_VAR), None);
}

/// Runs `/usr/bin/env` with `env` applied, through `spawn`, and returns what it printed.
fn child_env(
    env: &ChildEnv,
    spawn: impl FnOnce(&mut Command) -> std::process::Child,
) -> BTreeMap<String, String> {
    let mut cmd = Command::new("/usr/bin/env");
    cmd.stdout(Stdio::piped());
    env.apply(&mut cmd);
    let out = spawn(&mut cmd).wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect()
}

#[test]
fn end_to_end_template_value_kept_without_token_overridden_with_one() {
    let template = map(&[(TOKEN_FD_VAR, "9"), ("NEW", "n")]);

    // No token: a plain spawn (no descriptor), the template's 9 passes unchanged.
    let env = ChildEnv::new(all_vars(), &template, false);
    let got = child_env(&env, |cmd| FdMap::new().spawn(cmd).unwrap());
    let mut want = map(&[KEPT, CREDENTIALS].concat());
    want.extend(map(&[(TOKEN_FD_VAR, "9"), ("NEW", "n")]));
    assert_eq!(got, want);

    // With a token: the spawn that attaches fd 5 sets the variable last, over the template.
    let env = ChildEnv::new(all_vars(), &template, true);
    let token = ClaudeToken::from_bytes(b"sk-ant-oat01-ENVTEST").unwrap();
    let pipe = TokenPipe::new(&token).unwrap();
    let got = child_env(&env, |cmd| pipe.spawn(cmd).unwrap());
    let mut want = map(KEPT);
    want.extend(map(&[(TOKEN_FD_VAR, "5"), ("NEW", "n")]));
    assert_eq!(got, want);
    assert!(got.values().all(|v| !v.contains("ENVTEST")));
}

#[test]
fn from_current_scrubs_this_process_environment() {
    let env = ChildEnv::from_current(&BTreeMap::new(), true);
    for (k, v) in env.iter() {
        // Each name left is one a token launch keeps.
        let alone = ChildEnv::new([(k.into(), v.into())], &BTreeMap::new(), true);
        assert_eq!(alone.get(k), Some(v), "{k:?}");
    }
    assert_eq!(env.get("PATH"), std::env::var_os("PATH").as_deref());
}
