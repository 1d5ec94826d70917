//! Acceptance tests for `read_claude_token` (the read rules): every refusal case, its exact message,
//! and that no message holds a byte of the file.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use relay_token::{read_claude_token, TokenFileError, TokenFileReason};

/// A string planted in token files so a test can assert it never reaches an error.
const MARKER: &str = "PLANTEDmarker7f3a";

/// The environment variable that turns one test of this binary into the unprivileged reader.
const PROBE_VAR: &str = "RT_TEST_READ_PROBE";

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    let mut f = fs::File::create(&p).unwrap();
    f.write_all(bytes).unwrap();
    p
}

/// Reads `path`, expects a refusal with exactly `reason`, and checks that neither Display nor
/// Debug holds the marker (or any of `forbidden`).
fn refused(path: &Path, reason: &str, forbidden: &[&[u8]]) -> TokenFileError {
    let err = read_claude_token(path).expect_err(&format!("{} must be refused", path.display()));
    let display = err.to_string();
    let debug = format!("{err:?}");
    assert_eq!(
        display,
        format!("read claude_token_file {}: {reason}", path.display())
    );
    assert_eq!(err.path, path);
    for text in [&display, &debug] {
        assert!(!text.contains(MARKER), "marker leaked: {text}");
        for f in forbidden {
            let f = String::from_utf8_lossy(f);
            assert!(!text.contains(&*f), "file bytes {f:?} leaked: {text}");
        }
    }
    err
}

fn accepted(path: &Path, want: &[u8]) {
    let token = read_claude_token(path)
        .unwrap_or_else(|e| panic!("{} must be accepted: {e}", path.display()));
    assert_eq!(token.expose_bytes(), want);
    assert_eq!(token.len(), want.len());
}

#[test]
fn missing() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("nope");
    let e = refused(&p, "no such file or directory", &[]);
    assert_eq!(e.reason, TokenFileReason::Os(libc::ENOENT));
}

#[test]
fn directory() {
    let dir = tempfile::tempdir().unwrap();
    let e = refused(dir.path(), "not a regular file", &[]);
    assert_eq!(e.reason, TokenFileReason::NotRegular);
}

#[test]
fn fifo_without_writer_returns_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("fifo");
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (tx, rx) = mpsc::channel();
    let p2 = p.clone();
    // A regression that blocks in open or read parks this thread, not the test.
    std::thread::spawn(move || {
        let _ = tx.send(read_claude_token(&p2).map(|_| ()));
    });
    let got = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("read_claude_token blocked on a FIFO with no writer");
    assert_eq!(got.unwrap_err().reason, TokenFileReason::NotRegular);
    refused(&p, "not a regular file", &[]);
}

#[test]
fn character_device() {
    refused(Path::new("/dev/zero"), "not a regular file", &[]);
    refused(Path::new("/dev/null"), "not a regular file", &[]);
}

#[test]
fn procfs_file_is_refused() {
    // Regular by fstat, size 0, yet read returns bytes (this process's environment).
    let p = Path::new("/proc/self/environ");
    let environ = fs::read(p).unwrap();
    let err = read_claude_token(p).unwrap_err();
    let display = err.to_string();
    assert!(
        display.starts_with("read claude_token_file /proc/self/environ: "),
        "{display}"
    );
    match err.reason {
        TokenFileReason::SizeMismatch { stat_size: 0, read } => {
            assert!(read > 0);
            assert_eq!(
                display,
                format!(
                    "read claude_token_file /proc/self/environ: read {read} bytes but its size is 0 (not a plain file, or it changed while read)"
                )
            );
        }
        // An environment above 4096 bytes is refused for its size first.
        TokenFileReason::TooLarge => assert!(environ.len() > 4096),
        other => panic!("unexpected reason {other:?}"),
    }
    // No environment entry (PATH=..., HOME=...) shows up in the message.
    for entry in environ.split(|&b| b == 0).filter(|e| e.len() > 4) {
        let entry = String::from_utf8_lossy(entry);
        assert!(!display.contains(&*entry), "{entry} leaked");
        assert!(!format!("{err:?}").contains(&*entry), "{entry} leaked");
    }
}

#[test]
fn symlink_to_valid_token_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let tok = write(dir.path(), "token", b"sk-ant-oat01-abc\n");
    let link = dir.path().join("link");
    symlink(&tok, &link).unwrap();
    accepted(&link, b"sk-ant-oat01-abc");
}

#[test]
fn symlink_loop() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    symlink(&b, &a).unwrap();
    symlink(&a, &b).unwrap();
    let e = refused(&a, "too many levels of symbolic links", &[]);
    assert_eq!(e.reason, TokenFileReason::Os(libc::ELOOP));
}

#[test]
fn empty() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "t", b"");
    assert_eq!(refused(&p, "empty", &[]).reason, TokenFileReason::Empty);
}

#[test]
fn whitespace_only() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "t", b" \t\r\n \n\x0c ");
    assert_eq!(refused(&p, "empty", &[]).reason, TokenFileReason::Empty);
}

#[test]
fn exactly_4096_bytes_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let body: Vec<u8> = (0..4096).map(|i| b'A' + (i % 26) as u8).collect();
    let p = write(dir.path(), "t", &body);
    accepted(&p, &body);
}

#[test]
fn exactly_4096_bytes_with_whitespace_is_accepted_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    let mut body = vec![b'x'; 4094];
    body.extend_from_slice(b"\r\n");
    let p = write(dir.path(), "t", &body);
    accepted(&p, &body[..4094]);
}

#[test]
fn bytes_4097() {
    let dir = tempfile::tempdir().unwrap();
    let mut body = MARKER.as_bytes().to_vec();
    body.resize(4097, b'z');
    let p = write(dir.path(), "t", &body);
    let e = refused(&p, "larger than 4096 bytes", &[]);
    assert_eq!(e.reason, TokenFileReason::TooLarge);
    // Also when the extra byte is whitespace that would be trimmed: the file is judged first.
    let mut body = vec![b'y'; 4096];
    body.push(b'\n');
    let p = write(dir.path(), "t2", &body);
    refused(&p, "larger than 4096 bytes", &[]);
}

#[test]
fn inner_space() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "t", format!("{MARKER} tail").as_bytes());
    let e = refused(
        &p,
        "not a token: holds whitespace or control bytes",
        &[b"tail"],
    );
    assert_eq!(e.reason, TokenFileReason::NotAToken);
}

#[test]
fn inner_nul() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "t", format!("{MARKER}\0tail\n").as_bytes());
    refused(
        &p,
        "not a token: holds whitespace or control bytes",
        &[b"tail"],
    );
}

#[test]
fn compact_json_is_not_a_token_whatever_its_spacing() {
    // Printable ASCII throughout, so the byte rule alone lets these through.
    let dir = tempfile::tempdir().unwrap();
    let docs = [
        r#"{"a":"b"}"#.to_string(),
        format!(r#"{{"claudeAiOauth":{{"accessToken":"{MARKER}"}}}}"#),
        format!(r#"["{MARKER}"]"#),
        format!(r#""sk-ant-oat01-{MARKER}""#),
        format!("\n{{\"accessToken\":\"{MARKER}\"}}\n"),
    ];
    for (i, doc) in docs.iter().enumerate() {
        let p = write(dir.path(), &format!("t{i}"), doc.as_bytes());
        let e = refused(
            &p,
            "not a token: a JSON document",
            &[b"accessToken", b"claudeAi"],
        );
        assert_eq!(e.reason, TokenFileReason::Json);
    }
    // What `claude setup-token` prints passes.
    let p = write(dir.path(), "ok", b"sk-ant-oat01-AbC_d-9\n");
    accepted(&p, b"sk-ant-oat01-AbC_d-9");
}

#[test]
fn a_name_equals_value_line_is_not_a_token_whatever_the_name() {
    // A `.env` habit: the variable's name, `=`, the token. Printable ASCII throughout.
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        format!("CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-{MARKER}\n"),
        format!("TOKEN=sk-ant-oat01-{MARKER}"),
        format!("_x9={MARKER}"),
        format!("CLAUDE_CODE_OAUTH_TOKEN='sk-ant-oat01-{MARKER}'\n"),
    ];
    for (i, line) in lines.iter().enumerate() {
        let p = write(dir.path(), &format!("t{i}"), line.as_bytes());
        let e = refused(
            &p,
            "not a token: a NAME=value line, not the token alone",
            &[b"CLAUDE_CODE", b"TOKEN=", b"_x9"],
        );
        assert_eq!(e.reason, TokenFileReason::Assignment);
    }
}

#[test]
fn anything_but_a_bearer_token_is_not_a_token() {
    // Printable ASCII that no `Authorization: Bearer` token holds (RFC 6750's b64token:
    // letters, digits and -._~+/, then `=` only at the end).
    let dir = tempfile::tempdir().unwrap();
    for (i, body) in [
        format!("{MARKER}:tail"),
        format!("sk-ant-oat01-{MARKER}=tail"),
        format!("<{MARKER}>"),
        format!("{MARKER};"),
        format!("={MARKER}"),
    ]
    .iter()
    .enumerate()
    {
        let p = write(dir.path(), &format!("t{i}"), body.as_bytes());
        let e = refused(
            &p,
            "not a token: holds a character no token holds (a token is letters, digits and \
             -._~+/, with = only at its end)",
            &[b"tail"],
        );
        assert_eq!(e.reason, TokenFileReason::NotBearer);
    }
    // Every character a token may hold, and padding at its end, passes.
    let body = b"sk-ant-oat01-Az09-._~+/==";
    let p = write(dir.path(), "ok", body);
    accepted(&p, body);
}

#[test]
fn pretty_json_credentials_file_is_not_a_token() {
    // A pretty-printed credentials file holds whitespace inside.
    let dir = tempfile::tempdir().unwrap();
    let pretty = format!("{{\n  \"accessToken\": \"{MARKER}\"\n}}\n");
    let p = write(dir.path(), "t", pretty.as_bytes());
    refused(
        &p,
        "not a token: holds whitespace or control bytes",
        &[b"accessToken"],
    );
}

#[test]
fn trailing_crlf_is_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "t", b"sk-ant-oat01-xyz\r\n");
    accepted(&p, b"sk-ant-oat01-xyz");
    let p = write(dir.path(), "t2", b"\n\t  sk-ant-oat01-xyz \r\n");
    accepted(&p, b"sk-ant-oat01-xyz");
}

#[test]
fn two_hard_links() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "t", format!("{MARKER}\n").as_bytes());
    let other = dir.path().join("elsewhere");
    fs::hard_link(&p, &other).unwrap();
    let e = refused(&p, "has 2 hard links", &[]);
    assert_eq!(e.reason, TokenFileReason::HardLinks(2));
    refused(&other, "has 2 hard links", &[]);
    fs::remove_file(&other).unwrap();
    accepted(&p, MARKER.as_bytes());
}

#[test]
fn read_afresh_each_call() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "t", b"first-token");
    accepted(&p, b"first-token");
    write(dir.path(), "t", b"second-token");
    accepted(&p, b"second-token");
}

#[test]
fn path_with_nul_is_refused_without_panic() {
    use std::os::unix::ffi::OsStrExt;
    let p = Path::new(std::ffi::OsStr::from_bytes(b"/tmp/a\0b"));
    let e = read_claude_token(p).unwrap_err();
    assert_eq!(e.reason, TokenFileReason::Os(libc::EINVAL));
}

/// Not a test of its own: the unprivileged reader a test runs through `setpriv` (`--ignored
/// --exact read::probe_reader`, with [`PROBE_VAR`] naming the file); it prints what
/// `read_claude_token` said. Ignored in a plain run, and failing when run without the
/// variable, so it never passes by doing nothing.
#[test]
#[ignore = "a subprocess probe: permission_denied_for_an_unprivileged_reader runs it as a child"]
fn probe_reader() {
    let Some(path) = std::env::var_os(PROBE_VAR) else {
        panic!("probe_reader runs only as the child of a test ({PROBE_VAR} set)");
    };
    match read_claude_token(Path::new(&path)) {
        Ok(_) => println!("PROBE-RESULT ok"),
        Err(e) => println!("PROBE-RESULT {e}\nPROBE-DEBUG {e:?}"),
    }
}

#[test]
fn permission_denied_for_an_unprivileged_reader() {
    // The folder is open to all, the file is 0600 root-owned: the EACCES comes from the file.
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let p = write(dir.path(), "t", format!("{MARKER}\n").as_bytes());
    fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root to drop to 65534"
    );
    accepted(&p, MARKER.as_bytes()); // root reads it: the file itself is fine

    // The unprivileged reader runs a copy of this test binary from the open folder: the
    // checkout itself may sit in a home folder closed to uid 65534 (`/root` is 0700).
    let exe = dir.path().join("probe");
    // Copied by `cp`, never in this process: a descriptor of the new file open here for writing
    // would pass to any child another test thread forks meanwhile, and running the copy would
    // fail with ETXTBSY.
    let cp = Command::new("cp")
        .arg("--")
        .arg(std::env::current_exe().unwrap())
        .arg(&exe)
        .status();
    assert!(cp.unwrap().success(), "cp the test binary");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&exe)
        .args([
            "--ignored",
            "--exact",
            "read::probe_reader",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PROBE_VAR, &p)
        .output()
        .expect("run setpriv");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "probe failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result = stdout
        .lines()
        .find_map(|l| l.split_once("PROBE-RESULT ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no probe result in {stdout}"));
    assert_eq!(
        result,
        format!("read claude_token_file {}: permission denied", p.display())
    );
    assert!(!stdout.contains(MARKER));
}

#[test]
fn private_read_refuses_what_others_may_read_or_own() {
    use relay_token::read_private_claude_token;
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "t", b"sk-ant-oat01-private\n");
    for mode in [0o644, 0o640, 0o604, 0o620] {
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
        let e = read_private_claude_token(&p).unwrap_err();
        assert_eq!(e.reason, TokenFileReason::Mode(mode));
        assert_eq!(
            e.to_string(),
            format!(
                "read claude_token_file {}: mode {mode:04o} lets others read it; chmod 600 it",
                p.display()
            )
        );
        // The plain reader leaves the judgement to its caller.
        assert!(read_claude_token(&p).is_ok());
    }
    fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(
        read_private_claude_token(&p).unwrap().expose_bytes(),
        b"sk-ant-oat01-private"
    );
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(&p, Some(65534), None).unwrap();
        let e = read_private_claude_token(&p).unwrap_err();
        assert_eq!(e.reason, TokenFileReason::Owner { uid: 65534, me: 0 });
    }
}
