//! `relay-host demo`, run as a person on a fresh machine would: the report says ok, the
//! child got the token on fd 5 (by hash and length), the variable names 5, its environment and
//! argv are clean, opening the token file by path was denied, no token reaches the output, and
//! nothing is left behind. Also from a lone `relay-host` with no `relay-shim` anywhere.
//!
//! Needs the built `relay-host` (`cargo build --workspace --bins`) and a working `bwrap`
//! (`scripts/test` installs it).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The demo's token prefix; the rest is random hex and must never be printed.
const DEMO_PREFIX: &str = "sk-ant-oat01-demo-";

/// Where the demo makes its throwaway folders.
const SCRATCH_BASE: &str = "/var/tmp";

/// One demo at a time in this process, so the count of throwaway folders is ours to compare.
fn lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn demo(host: &Path, args: &[&str]) -> Output {
    Command::new(host)
        .arg("demo")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run relay-host demo")
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Fails when `DEMO_PREFIX` followed by a hex digit appears in `text`.
fn assert_no_demo_token(what: &str, text: &str) {
    for (at, _) in text.match_indices(DEMO_PREFIX) {
        let next = text[at + DEMO_PREFIX.len()..].chars().next();
        assert!(
            !next.is_some_and(|c| c.is_ascii_hexdigit()),
            "{what} holds the demo token at byte {at}"
        );
    }
}

/// The throwaway folders in /var/tmp right now.
fn scratch_dirs() -> BTreeSet<PathBuf> {
    std::fs::read_dir(SCRATCH_BASE)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("relay-demo-"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// The demo's throwaway root, from its token file path (`<root>/home/.config/claude-ltt/token`).
fn root_of(token_file: &str) -> PathBuf {
    let p = Path::new(token_file);
    let root = p.ancestors().nth(4).expect("a root above the token file");
    assert!(
        root.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("relay-demo-")),
        "unexpected token file path {token_file}"
    );
    root.to_path_buf()
}

fn json_report(out: &Output) -> Value {
    let (stdout, stderr) = text(out);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!("demo --json printed no JSON ({e}): stdout {stdout:?}, stderr {stderr:?}")
    })
}

#[test]
fn demo_prints_the_report_and_exits_0() {
    let _g = lock();
    let out = demo(&relay_tests::relay_host(), &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout {stdout}\nstderr {stderr}"
    );
    for line in [
        "relay-token demo: a generated token handed to a child on fd 5",
        "  sandbox          bwrap at ",
        "  token mode       pipe here (the probe gets the token itself); the built-in \
         claude-code template: stand_in",
        "  hash matches     yes",
        "  CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR = 5",
        "  token in environ no",
        "  token in argv    no",
        "  open token file  denied (",
        "  child's fds      [0,1,2,5]",
        "  result           ok",
        "  left behind      nothing",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    // The two hashes printed are the same.
    let hash = |prefix: &str| -> String {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{stdout}"));
        line.rsplit(' ').next().unwrap().to_string()
    };
    let got = hash("  child read fd 5");
    assert_eq!(got.len(), 64, "{got}");
    assert_eq!(got, hash("  expected"));
}

#[test]
fn demo_json_reports_every_check() {
    let _g = lock();
    let out = demo(&relay_tests::relay_host(), &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let r = json_report(&out);
    assert_eq!(r["ok"], json!(true), "{r:#}");
    assert!(r["sandbox"]["bwrap"].is_string(), "bwrap is needed: {r:#}");
    for check in [
        "hash_matches",
        "length_matches",
        "variable_is_5",
        "environ_clean",
        "argv_clean",
        "open_denied",
    ] {
        assert_eq!(r["checks"][check], json!(true), "{check}: {r:#}");
    }
    let p = &r["probe"];
    let sha = p["token_sha256"].as_str().expect("a sha256");
    assert_eq!(sha.len(), 64);
    assert_eq!(p["token_sha256"], r["expected"]["sha256"]);
    assert_eq!(p["token_bytes"], r["expected"]["bytes"]);
    // The demo token: the prefix and 48 hex digits.
    assert_eq!(r["expected"]["bytes"], json!(DEMO_PREFIX.len() + 48));
    assert_eq!(p["token_fd_var"], json!("5"));
    assert_eq!(p["token_error"], Value::Null);
    assert_eq!(p["token_in_environ"], json!(false));
    assert_eq!(p["token_in_argv"], json!(false));
    assert_eq!(p["open_token_file"]["ok"], json!(false), "{r:#}");
    assert_eq!(p["fds"], json!([0, 1, 2, 5]));
    assert_eq!(r["left_behind"], json!(false));
    let modes = json!({"demo": "pipe", "claude_code": "stand_in"});
    assert_eq!(r["token_mode"], modes);
}

#[test]
fn demo_output_holds_no_token() {
    let _g = lock();
    let host = relay_tests::relay_host();
    for args in [&[][..], &["--json"][..]] {
        let out = demo(&host, args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {:?}", text(&out));
        let (stdout, stderr) = text(&out);
        assert_no_demo_token(&format!("demo {args:?} stdout"), &stdout);
        assert_no_demo_token(&format!("demo {args:?} stderr"), &stderr);
    }
    // The check itself can fail.
    let planted = format!("x {DEMO_PREFIX}0a1b y");
    let caught = std::panic::catch_unwind(|| assert_no_demo_token("planted", &planted));
    assert!(
        caught.is_err(),
        "the token check must catch a planted token"
    );
}

#[test]
fn demo_leaves_nothing_behind() {
    let _g = lock();
    let before = scratch_dirs();
    let out = demo(&relay_tests::relay_host(), &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let r = json_report(&out);
    let root = root_of(r["token_file"].as_str().expect("token_file"));
    assert!(!root.exists(), "{} is left behind", root.display());
    // Nothing else new either; a demo run elsewhere at the same moment gets a few seconds to end.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let new: Vec<PathBuf> = scratch_dirs().difference(&before).cloned().collect();
        if new.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "left behind in {SCRATCH_BASE}: {new:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn demo_runs_from_a_lone_relay_host() {
    let _g = lock();
    // A fresh clone's `cargo run -p relay-host -- demo` builds relay-host alone: copy it into an
    // empty folder, with a PATH that holds bwrap but no relay-shim.
    let dir = tempfile::tempdir().unwrap();
    let host = dir.path().join("relay-host");
    relay_tests::copy_program(&relay_tests::relay_host(), &host);
    let path = "/usr/local/bin:/usr/bin:/bin";
    for d in std::env::split_paths(path) {
        assert!(
            !d.join("relay-shim").exists(),
            "{} holds a relay-shim",
            d.display()
        );
    }
    assert!(!dir.path().join("relay-shim").exists());
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    let out = Command::new(&host)
        .args(["demo"])
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout {stdout}\nstderr {stderr}"
    );
    assert!(stdout.contains("  result           ok"), "{stdout}");
    assert!(stdout.contains("  open token file  denied ("), "{stdout}");
    assert!(stdout.contains("  left behind      nothing"), "{stdout}");
    assert_no_demo_token("lone demo stdout", &stdout);
    assert_no_demo_token("lone demo stderr", &stderr);
    // It made no relay-shim beside itself.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from("relay-host")]);
}
