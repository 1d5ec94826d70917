//! The shim's environment table (docs/DESIGN.md, "The child's environment"): the variable only
//! with its descriptor, and with `--pass-token` no credential that Claude Code prefers over the
//! descriptor unless the launcher keeps it with `--keep-env NAME`. The real `relay-shim` with
//! the fake agent as its target, which records its whole environment.

use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Command, Stdio};

use relay_tests::shim::{record_dir, token_pipe, ShimRun};
use relay_tests::{fake_agent_arg, fake_token, read_records, relay_shim, sha256_hex};
use serde_json::Value;

/// What a launcher may carry in its environment: the credentials and markers the rule names,
/// a settings variable, a variable of its own, and the token's variable naming a descriptor.
const INHERITED: &[(&str, &str)] = &[
    ("ANTHROPIC_API_KEY", "sk-ant-api03-MARKER"),
    ("ANTHROPIC_AUTH_TOKEN", "MARKER-auth"),
    ("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-MARKER"),
    ("CLAUDE_CODE_OAUTH_REFRESH_TOKEN", "MARKER-refresh"),
    ("CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR", "7"),
    ("CLAUDECODE", "1"),
    ("CLAUDE_PID", "4242"),
    ("CLAUDE_EFFORT", "high"),
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ("ANTHROPIC_BASE_URL", "https://gateway.invalid"),
    ("SHIM_ENV_KEEP", "kept"),
    ("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR", "5"),
];

/// Names `--pass-token` drops: every one of [`INHERITED`] that
/// `ChildEnv::drops_beside_token` names (the token's variable is then set anew, to 5).
const DROPPED: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_REFRESH_TOKEN",
    "CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR",
    "CLAUDECODE",
    "CLAUDE_PID",
    "CLAUDE_EFFORT",
];

fn shim(record: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(relay_shim());
    cmd.args(args)
        .env("FAKE_AGENT_RECORD", record)
        .envs(INHERITED.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// The target's record of one run, the shim having fd 5 holding `token` when given one.
fn target_env(args: &[&str], token: Option<&str>) -> (ShimRun, Value) {
    let (_d, record) = record_dir();
    let pipe = token.map(token_pipe);
    let fds: Vec<_> = pipe.iter().map(|p| (p.as_fd(), 5)).collect();
    let run = relay_tests::shim::run(shim(&record, args), 3, &fds);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let rec = read_records(&record).remove(0);
    (run, rec)
}

#[test]
fn without_pass_token_the_variable_goes_with_the_descriptor() {
    // The launcher's CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5 with no descriptor handed on:
    // Claude 2.1.332 would read its own stdout. The shim removes the variable.
    for token in [None, Some(fake_token())] {
        let (_, rec) = target_env(&["--", &fake_agent_arg()], token.as_deref());
        assert_eq!(rec["fds"], serde_json::json!([0, 1, 2]));
        assert_eq!(
            rec["env"]["CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR"],
            Value::Null
        );
        // Nothing else is the shim's business without a token: the rest passes as it came.
        for (k, v) in INHERITED
            .iter()
            .filter(|(k, _)| !k.ends_with("_FILE_DESCRIPTOR"))
        {
            assert_eq!(rec["env"][k], *v, "{k}");
        }
    }
}

#[test]
fn pass_token_drops_every_credential_that_outranks_the_descriptor() {
    let token = fake_token();
    let (_, rec) = target_env(&["--pass-token", "--", &fake_agent_arg()], Some(&token));
    assert_eq!(rec["token_sha256"], sha256_hex(token.as_bytes()));
    assert_eq!(rec["env"]["CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR"], "5");
    for k in DROPPED {
        assert_eq!(rec["env"][k], Value::Null, "{k} reached the target");
    }
    assert!(!rec["env"].to_string().contains("MARKER"));
    // Settings and the launcher's own variables stay.
    for k in [
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "ANTHROPIC_BASE_URL",
        "SHIM_ENV_KEEP",
    ] {
        let want = INHERITED.iter().find(|(n, _)| n == &k).unwrap().1;
        assert_eq!(rec["env"][k], want, "{k}");
    }
    // The rule is the library's: every dropped name is one ChildEnv::drops_beside_token names.
    for (k, _) in INHERITED {
        let dropped = DROPPED.contains(k);
        assert_eq!(
            relay_token::ChildEnv::drops_beside_token(k),
            dropped || k.ends_with("TOKEN_FILE_DESCRIPTOR"),
            "{k}"
        );
    }
}

#[test]
fn keep_env_keeps_what_the_launcher_names() {
    let token = fake_token();
    let args = [
        "--pass-token",
        "--keep-env",
        "ANTHROPIC_AUTH_TOKEN",
        "--keep-env=CLAUDE_EFFORT",
        "--",
        &fake_agent_arg(),
    ];
    let (_, rec) = target_env(&args, Some(&token));
    assert_eq!(rec["env"]["ANTHROPIC_AUTH_TOKEN"], "MARKER-auth");
    assert_eq!(rec["env"]["CLAUDE_EFFORT"], "high");
    assert_eq!(rec["env"]["ANTHROPIC_API_KEY"], Value::Null);
    assert_eq!(rec["env"]["CLAUDE_CODE_OAUTH_TOKEN"], Value::Null);
    assert_eq!(rec["env"]["CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR"], "5");
}

#[test]
fn keep_env_usage_errors_exit_70() {
    let (_d, record) = record_dir();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--pass-token", "--keep-env", "CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR", "--", "true"],
            "relay-shim: --keep-env \"CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR\": must name a variable (no = or NUL), and not CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR with --pass-token",
        ),
        (
            &["--pass-token", "--keep-env", "A=B", "--", "true"],
            "relay-shim: --keep-env \"A=B\": must name a variable (no = or NUL), and not CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR with --pass-token",
        ),
    ];
    for (args, want) in cases {
        let out = shim(&record, args).output().unwrap();
        assert_eq!(out.status.code(), Some(70), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().next(), Some(*want), "{args:?}");
    }
}
