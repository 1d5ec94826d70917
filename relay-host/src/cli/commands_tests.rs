//! The commands run against a temporary host (its own config, state and home folders): their
//! exit codes and the files they make or remove.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::state::digest::sha256_hex;

/// A host whose three folders are fresh and its own; the config folder holds `settings`, when
/// given, as `settings.json`.
fn temp_host(settings: Option<&str>) -> (tempfile::TempDir, Host) {
    let root = tempfile::tempdir().unwrap();
    let host = Host {
        config_dir: root.path().join("config"),
        state_dir: root.path().join("state"),
        home: root.path().join("home"),
    };
    for dir in [&host.config_dir, &host.state_dir, &host.home] {
        fs::create_dir(dir).unwrap();
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).unwrap();
    }
    if let Some(s) = settings {
        fs::write(host.config_dir.join("settings.json"), s).unwrap();
    }
    (root, host)
}

/// A made-up token of the shape `claude setup-token` prints (never a real one).
const FAKE_TOKEN: &str = "sk-ant-oat01-AAAAbbbbCCCCddddEEEEffffGGGGhhhhIIIIjjjjKKKKllll_mmmm-nnnn";

fn audit(host: &Host) -> String {
    fs::read_to_string(host.state_dir.join(crate::state::AUDIT_FILE)).unwrap_or_default()
}

#[test]
fn launch_of_a_missing_request_file_is_a_usage_error() {
    let (_root, host) = temp_host(None);
    let missing = host.config_dir.join("no-such-request.json");
    assert_eq!(launch_file(&host, &missing), ExitCode::Usage.code());
    assert_eq!(audit(&host), "", "nothing was launched or refused");
}

#[test]
fn launch_of_a_request_with_an_unknown_key_is_refused_as_invalid_spec() {
    let (_root, host) = temp_host(None);
    let request = host.config_dir.join("req.json");
    fs::write(&request, r#"{"kind": "terminal", "no_such_key": 1}"#).unwrap();
    assert_eq!(launch_file(&host, &request), ExitCode::Usage.code());
    let row: serde_json::Value = serde_json::from_str(audit(&host).trim_end()).unwrap();
    assert_eq!(
        (row["event"].as_str(), row["outcome"].as_str()),
        (Some("session_launch"), Some("error"))
    );
    let message = row["message"].as_str().unwrap();
    assert!(message.contains("unknown field `no_such_key`"), "{message}");
    assert!(!host.state_dir.join(crate::state::SESSIONS_DIR).exists());
}

#[test]
fn run_with_a_template_the_settings_lack_is_refused_before_any_session() {
    let (_root, host) = temp_host(None);
    let args = RunArgs {
        template: "no-such-template".into(),
        project: Some(host.home.clone()),
        no_sandbox: false,
        keep: false,
        resume: None,
        continue_last: false,
        args: vec![],
    };
    assert_eq!(run(&host, args), ExitCode::Usage.code());
    let rows = audit(&host);
    assert!(rows.contains("no-such-template"), "{rows}");
    let sessions = host.state_dir.join(crate::state::SESSIONS_DIR);
    assert_eq!(fs::read_dir(&sessions).map(|d| d.count()).unwrap_or(0), 0);
}

#[test]
fn a_log_is_printed_and_a_missing_one_is_not_made() {
    let (_root, host) = temp_host(None);
    let log = host.state_dir.join("audit.jsonl");
    assert_eq!(print_log(&host, "audit.jsonl", true, &Query::default()), 0);
    assert!(!log.exists(), "printing a missing log makes none");
    fs::write(&log, "{\"event\":\"launch\",\"status\":201}\n").unwrap();
    assert_eq!(print_log(&host, "audit.jsonl", true, &Query::default()), 0);
}

#[test]
fn a_log_that_cannot_be_read_is_an_internal_error() {
    let (_root, host) = temp_host(None);
    fs::create_dir(host.state_dir.join("audit.jsonl")).unwrap();
    let code = print_log(&host, "audit.jsonl", false, &Query::default());
    assert_eq!(code, ExitCode::Internal.code());
}

#[test]
fn token_check_without_a_token_file_set_is_unavailable() {
    let (_root, host) = temp_host(None);
    assert_eq!(token_check(&host, true, None), ExitCode::Unavailable.code());
}

#[test]
fn token_check_passes_a_private_token_file_and_refuses_one_others_may_read() {
    let (_root, host) = temp_host(Some(r#"{"claude_token_file": "~/token"}"#));
    let token = host.home.join("token");
    fs::write(&token, format!("{FAKE_TOKEN}\n")).unwrap();
    fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(token_check(&host, true, None), 0);
    fs::set_permissions(&token, fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(token_check(&host, true, None), ExitCode::Unavailable.code());
}

#[test]
fn gc_removes_an_ended_sessions_folder_and_leaves_a_missing_state_folder_missing() {
    let (_root, host) = temp_host(None);
    let state = crate::state::State::open(&host.state_dir).unwrap();
    crate::state::private_dir(&state.session_dir("old")).unwrap();
    assert_eq!(gc(&host, 7, true), 0);
    assert!(!state.session_dir("old").exists());
    let gone = Host {
        state_dir: host.state_dir.join("never-made"),
        ..host.clone()
    };
    assert_eq!(gc(&gone, 7, true), 0);
    assert!(!gone.state_dir.exists());
}

#[test]
fn an_imported_token_is_stored_0600_and_named_in_the_settings() {
    let (_root, host) = temp_host(None);
    let token = token_file::pick_token(FAKE_TOKEN.as_bytes()).unwrap();
    let done = token_file::import(&host, &token, None).unwrap();
    let want = host.home.join(".config/claude-ltt/token");
    assert_eq!(
        (done.path.as_path(), done.replaced),
        (want.as_path(), false)
    );
    let meta = fs::metadata(&want).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let stored = fs::read(&want).unwrap();
    assert_eq!(
        sha256_hex(&stored),
        sha256_hex(format!("{FAKE_TOKEN}\n").as_bytes())
    );
    assert_eq!(
        done.settings_updated,
        Some(host.config_dir.join("settings.json"))
    );
    assert_eq!(
        token_file::configured_path(&host).unwrap(),
        Some(want.clone())
    );
    let again = token_file::import(&host, &token, None).unwrap();
    assert_eq!((again.replaced, again.settings_updated), (true, None));
}

#[test]
fn no_token_file_is_configured_until_the_settings_name_one() {
    let (_root, host) = temp_host(None);
    assert_eq!(token_file::configured_path(&host).unwrap(), None);
    let (_root, host) = temp_host(Some(r#"{"claude_token_file": "~/t"}"#));
    let got = token_file::configured_path(&host).unwrap();
    assert_eq!(got, Some(host.home.join("t")));
}

#[test]
fn status_answers_0_only_when_a_claude_session_would_start_logged_in() {
    let (_root, host) = temp_host(None);
    assert_eq!(crate::cli::status::print(&host, true), 78);
}

#[test]
fn templates_print_answers_0_and_a_broken_settings_file_is_unavailable() {
    let (_root, host) = temp_host(None);
    assert_eq!(crate::cli::templates_cmd::print(&host, None), 0);
    fs::write(host.config_dir.join("settings.json"), "{not json").unwrap();
    assert_eq!(
        crate::cli::templates_cmd::print(&host, None),
        ExitCode::Unavailable.code()
    );
}
