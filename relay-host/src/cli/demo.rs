//! `relay-host demo`: the main job on an embedded default, for a person on a fresh machine.
//!
//! It makes a throwaway home, config and state folder, a generated demo token in
//! `~/.config/claude-ltt/token`, and launches a sandboxed probe (this very executable in a hidden
//! mode) through the ordinary launch path, with a template that grants the whole throwaway home
//! read-write. The probe reports, by hash and length only, what it got on fd 5, the variable,
//! whether its environment or argv hold the token, and what happened when it opened the token
//! file by path. Where bwrap is missing the demo says how to install it and shows the
//! unsandboxed half (the pipe and the variable). It removes everything it made.

use relay_shim::exit::ExitCode;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use zeroize::Zeroizing;

use crate::launch::plan::request::{Kind, Request};
use crate::launch::{launch, Stdin};
use crate::settings::{Grants, Sandbox, Settings, Template};
use crate::state::digest::sha256_hex;
use crate::Host;
use relay_token::ChildEnv;
use relay_token::{sandbox, ClaudeToken, TokenPipe, TOKEN_FD_VAR};

/// Where the demo's token lives, relative to its throwaway home (the recommended place).
pub(crate) const DEMO_TOKEN_SETTING: &str = "~/.config/claude-ltt/token";

/// The hidden command that runs the probe.
pub(crate) const PROBE_COMMAND: &str = "__probe";

/// A throwaway folder removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn scratch_dir() -> std::io::Result<Scratch> {
    // /var/tmp rather than /tmp: the sandbox lays a private /tmp, and the demo must show the
    // token masked where the sandbox *could* see it, not hidden by accident.
    let base = Path::new("/var/tmp");
    let base = if base.is_dir() {
        base.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let name = format!(
        "relay-demo-{}",
        crate::launch::plan::request::new_session_id()
    );
    let dir = base.join(name);
    fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    Ok(Scratch(dir))
}

use std::os::unix::fs::DirBuilderExt;

fn demo_token() -> ClaudeToken {
    let mut raw = Zeroizing::new([0u8; 24]);
    if relay_token::sys::random_bytes(&mut raw[..]).is_err() {
        let t = crate::state::now_secs().to_le_bytes();
        raw[..8].copy_from_slice(&t);
    }
    // Its final size up front: a growing String would free copies it never wiped.
    let mut text = Zeroizing::new(String::with_capacity(18 + 2 * 24));
    text.push_str("sk-ant-oat01-demo-");
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for b in raw.iter() {
        text.push(HEX[(b >> 4) as usize] as char);
        text.push(HEX[(b & 15) as usize] as char);
    }
    ClaudeToken::from_bytes(text.as_bytes()).expect("hex is a token")
}

/// Runs the demo; prints the report (or JSON with `json`); returns 0 when every check held.
pub(crate) fn run(json_out: bool) -> i32 {
    match run_inner() {
        Ok(report) => {
            let ok = report["ok"] == json!(true);
            if json_out {
                outln!("{report}");
            } else {
                print_report(&report);
            }
            if ok {
                0
            } else {
                ExitCode::Failed.code()
            }
        }
        Err(e) => {
            errln!("relay-host demo: {e}");
            ExitCode::Internal.code()
        }
    }
}

fn run_inner() -> Result<Value, DemoError> {
    let scratch = scratch_dir().map_err(io_err("cannot make a throwaway folder"))?;
    let root = scratch.0.clone();
    let home = root.join("home");
    let config = root.join("config");
    let state = root.join("state");
    let token_dir = home.join(".config/claude-ltt");
    for d in [&token_dir, &config, &state] {
        crate::state::private_dir(d).map_err(io_err(d.display()))?;
    }
    let token_path = token_dir.join("token");
    let token = demo_token();
    let expected_sha = sha256_hex(token.expose_bytes());
    let expected_len = token.len();
    {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&token_path)
            .map_err(io_err(token_path.display()))?;
        f.write_all(token.expose_bytes())
            .and_then(|_| f.write_all(b"\n"))
            .map_err(io_err(token_path.display()))?;
    }
    let exe = std::env::current_exe().map_err(io_err("cannot find this executable"))?;
    let report_name = "probe.json";
    let bwrap = sandbox::find_bwrap(None);

    let mut report = json!({
        "token_file": crate::human::path_json(&token_path),
        "expected": {"sha256": expected_sha, "bytes": expected_len},
        // The demo's probe is handed the token itself; a session of the built-in template gets
        // what its mode hands.
        "token_mode": {
            "demo": crate::settings::TokenMode::Pipe.word(),
            "claude_code": crate::settings::TokenMode::builtin_claude_code().word(),
        },
    });
    let probe: Value = match &bwrap {
        Ok(bwrap_path) => {
            report["sandbox"] = json!({"bwrap": crate::human::path_json(bwrap_path)});
            drop(token);
            sandboxed_probe(&exe, &home, &config, &state, &token_path, report_name)?
        }
        Err(e) => {
            report["sandbox"] = json!({
                "unavailable": e.to_string(),
                "install": "apt-get install bubblewrap (Debian, Ubuntu), dnf install bubblewrap (Fedora)",
            });
            unsandboxed_probe(&exe, token, &root, &token_path, report_name)?
        }
    };
    let got_sha = probe["token_sha256"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let checks = json!({
        "hash_matches": got_sha == expected_sha,
        "length_matches": probe["token_bytes"].as_u64() == Some(expected_len as u64),
        "variable_is_5": probe["token_fd_var"] == json!("5"),
        "environ_clean": probe["token_in_environ"] == json!(false),
        "argv_clean": probe["token_in_argv"] == json!(false),
        "open_denied": probe["open_token_file"]["ok"] == json!(false),
    });
    let ok = checks
        .as_object()
        .map(|m| {
            m.iter()
                .all(|(k, v)| v == &json!(true) || (k == "open_denied" && bwrap.is_err()))
        })
        .unwrap_or(false);
    report["probe"] = probe;
    report["checks"] = checks;
    report["ok"] = json!(ok);
    drop(scratch);
    report["left_behind"] = json!(root.exists());
    Ok(report)
}

fn sandboxed_probe(
    exe: &Path,
    home: &Path,
    config: &Path,
    state: &Path,
    token_path: &Path,
    report_name: &str,
) -> Result<Value, DemoError> {
    // The probe runs as the claude-code template would, with the whole home granted read-write:
    // the token file sits inside a grant, and the sandbox must still hide it.
    let settings = Settings {
        claude_token_file: DEMO_TOKEN_SETTING.into(),
        templates: vec![Template {
            id: crate::launch::plan::request::CLAUDE_TEMPLATE.into(),
            command: vec![
                exe.to_string_lossy().into_owned(),
                PROBE_COMMAND.into(),
                token_path.to_string_lossy().into_owned(),
                format!("/tmp/{report_name}"),
            ],
            env: BTreeMap::new(),
            sandbox: Sandbox::Grants(Grants {
                read: vec![],
                read_write: vec!["~/".into()],
            }),
            request_env: vec![],
            network: None,
            api_base_url: None,
            same_project: None,
            trust_project: None,
            token_mode: Default::default(),
            // The seed's case: a template that writes the whole home (so opted in) still
            // cannot read the token file in it.
            writes_home: Some(true),
        }],
        bwrap: None,
        shim: Some(shim_for(exe, state)?),
        ..Settings::default()
    };
    fs::write(config.join("settings.json"), settings.to_json())
        .map_err(io_err("write the demo settings"))?;
    let host = Host {
        config_dir: config.to_path_buf(),
        state_dir: state.to_path_buf(),
        home: home.to_path_buf(),
    };
    let session = "demo";
    let request = Request {
        kind: Kind::Claude,
        template: None,
        session_id: Some(session.into()),
        resume: None,
        continue_last: false,
        project: None,
        extra_args: vec![],
        env: BTreeMap::new(),
        sandbox: true,
        host: None,
        keep: true,
    };
    // The demo's own report is its answer: the probe's launch prints none of its own.
    let json = crate::human::json_answers();
    crate::human::set_json(false);
    let code = launch(&host, request, Stdin::Null);
    crate::human::set_json(json);
    let path = state
        .join("sessions")
        .join(session)
        .join("tmp")
        .join(report_name);
    let text = fs::read_to_string(&path).map_err(io_err(format!(
        "the sandboxed probe left no report (launch exit code {code})"
    )))?;
    serde_json::from_str(&text).map_err(DemoError::Report)
}

/// A `relay-shim` for the demo: the real one beside this executable or on PATH, else this
/// executable under the name `relay-shim` (it acts as the shim when called so), so that
/// `cargo run -p relay-host -- demo` works where no relay-shim was built.
fn shim_for(exe: &Path, state: &Path) -> Result<PathBuf, DemoError> {
    let probe_host = Host {
        config_dir: PathBuf::new(),
        state_dir: PathBuf::new(),
        home: PathBuf::from("/"),
    };
    if let Ok(p) = probe_host.find_shim(&Settings::default()) {
        return Ok(p);
    }
    let link = state.join("relay-shim");
    std::os::unix::fs::symlink(exe, &link).map_err(io_err(link.display()))?;
    Ok(link)
}

fn unsandboxed_probe(
    exe: &Path,
    token: ClaudeToken,
    root: &Path,
    token_path: &Path,
    report_name: &str,
) -> Result<Value, DemoError> {
    let report = root.join(report_name);
    let pipe = TokenPipe::new(&token).map_err(io_err("token pipe"))?;
    drop(token);
    let mut cmd = Command::new(exe);
    cmd.arg(PROBE_COMMAND).arg(token_path).arg(&report);
    ChildEnv::from_current(&BTreeMap::new(), true).apply(&mut cmd);
    cmd.stdin(Stdio::null());
    let status = pipe
        .spawn(&mut cmd)
        .and_then(|mut c| c.wait())
        .map_err(io_err("spawn the probe"))?;
    let text = fs::read_to_string(&report)
        .map_err(io_err(format!("the probe left no report ({status})")))?;
    serde_json::from_str(&text).map_err(DemoError::Report)
}

fn print_report(r: &Value) {
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mark = |b: &Value| if b == &json!(true) { "yes" } else { "NO" };
    outln!("relay-token demo: a generated token handed to a child on fd 5");
    outln!("  token file       {}", s(&r["token_file"]));
    match r["sandbox"].get("bwrap") {
        Some(b) => outln!("  sandbox          bwrap at {}", s(b)),
        None => {
            outln!(
                "  sandbox          unavailable: {}",
                s(&r["sandbox"]["unavailable"])
            );
            outln!(
                "                   install it: {}",
                s(&r["sandbox"]["install"])
            );
            outln!("                   (showing the unsandboxed half: pipe and variable)");
        }
    }
    outln!(
        "  token mode       {} here (the probe gets the token itself); the built-in claude-code \
         template: {}",
        s(&r["token_mode"]["demo"]),
        s(&r["token_mode"]["claude_code"])
    );
    let p = &r["probe"];
    outln!(
        "  child read fd 5  {} bytes, sha256 {}",
        s(&p["token_bytes"]),
        s(&p["token_sha256"])
    );
    outln!(
        "  expected         {} bytes, sha256 {}",
        s(&r["expected"]["bytes"]),
        s(&r["expected"]["sha256"])
    );
    let c = &r["checks"];
    outln!("  hash matches     {}", mark(&c["hash_matches"]));
    outln!("  {TOKEN_FD_VAR} = {}", s(&p["token_fd_var"]));
    let absent = |b: &Value| if b == &json!(false) { "no" } else { "YES" };
    outln!("  token in environ {}", absent(&p["token_in_environ"]));
    outln!("  token in argv    {}", absent(&p["token_in_argv"]));
    let open = &p["open_token_file"];
    if r["sandbox"].get("bwrap").is_some() {
        outln!(
            "  open token file  {}",
            if open["ok"] == json!(false) {
                format!("denied ({})", s(&open["error"]))
            } else {
                "OPENED: the sandbox did not hide it".into()
            }
        );
    }
    outln!("  child's fds      {}", s(&p["fds"]));
    outln!(
        "  result           {}",
        if r["ok"] == json!(true) {
            "ok"
        } else {
            "FAILED"
        }
    );
    outln!(
        "  left behind      {}",
        if r["left_behind"] == json!(false) {
            "nothing"
        } else {
            "SOMETHING"
        }
    );
}

/// The demo's probe (`relay-host __probe TOKEN_PATH REPORT_PATH`), run inside the sandbox. It
/// writes a JSON report: the length and sha256 of what fd 5 holds, the variable, whether the
/// bytes appear in its environment or argv, its open fds, and what opening the token file by
/// path gave. The bytes themselves are never written. It runs as the `claude-code` template's
/// command, so it takes (and ignores) the Claude Code flags a token launch adds after its own
/// arguments.
pub(crate) fn probe(args: Vec<OsString>) -> i32 {
    let [token_path, report_path, ..] = args.as_slice() else {
        errln!("usage: relay-host __probe TOKEN_PATH REPORT_PATH");
        return ExitCode::Usage.code();
    };
    let var = std::env::var(TOKEN_FD_VAR).ok();
    // Room for the whole cap up front: a growing Vec would free copies it never wiped.
    let mut bytes = Zeroizing::new(Vec::with_capacity(65536));
    let mut token_error = None;
    if let Some(fd) = var.as_deref().and_then(|v| v.parse::<i32>().ok()) {
        let mut buf = Zeroizing::new([0u8; 8192]);
        if let Err(e) = relay_token::sys::fd_flags(fd) {
            token_error = Some(e.to_string());
        }
        while token_error.is_none() {
            // SAFETY: the number is open (checked above) and this process, a throwaway probe,
            // neither closes nor reuses it while the borrow lives.
            let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            match relay_token::sys::read(borrowed, &mut buf[..]) {
                Ok(0) => break,
                Ok(n) if bytes.len() + n <= 65536 => bytes.extend_from_slice(&buf[..n]),
                Ok(_) => break,
                Err(e) => {
                    token_error = Some(e.to_string());
                    break;
                }
            }
        }
    }
    // Either whether the bytes are in this process's own file, or why that cannot be told: a
    // missing /proc must show as a failed check, never as a pass.
    let found_in = |name: &'static str| match proc_self(name) {
        Ok(hay) => {
            json!(!bytes.is_empty() && hay.windows(bytes.len()).any(|w| w == &bytes[..]))
        }
        Err(e) => json!({ "error": e.to_string() }),
    };
    let open = match fs::File::open(token_path) {
        Ok(_) => json!({"ok": true}),
        Err(e) => json!({"ok": false, "error": e.to_string()}),
    };
    let fds = relay_token::open_fds().unwrap_or_default();
    let report = json!({
        "token_fd_var": var,
        "token_sha256": if bytes.is_empty() { Value::Null } else { json!(sha256_hex(&bytes)) },
        "token_bytes": bytes.len(),
        "token_error": token_error,
        "token_in_environ": found_in("environ"),
        "token_in_argv": found_in("cmdline"),
        "open_token_file": open,
        "fds": fds,
    });
    let written = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(report_path)
        .and_then(|mut f| f.write_all(report.to_string().as_bytes()));
    match written {
        Ok(()) => {
            let _ = fs::set_permissions(report_path, fs::Permissions::from_mode(0o600));
            0
        }
        Err(e) => {
            errln!("probe: write {}: {e}", Path::new(report_path).display());
            ExitCode::Failed.code()
        }
    }
}

/// `/proc/self/NAME`, wiped on drop. Where there is no `/proc` (macOS) it says so: the probe
/// cannot tell what its environment or argv hold there.
fn proc_self(name: &'static str) -> Result<Zeroizing<Vec<u8>>, DemoError> {
    if cfg!(target_os = "linux") {
        let path = format!("/proc/self/{name}");
        fs::read(&path).map(Zeroizing::new).map_err(io_err(path))
    } else {
        Err(DemoError::NoProc { name })
    }
}

/// Why the demo (or its probe's look at `/proc/self`) could not go on.
#[derive(Debug)]
enum DemoError {
    /// A file, folder, pipe or child of the demo.
    Io {
        /// What was being done, with its path.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The probe's report is not JSON.
    Report(serde_json::Error),
    /// This system has no `/proc/self/NAME` (Linux only).
    NoProc {
        /// The file's name.
        name: &'static str,
    },
}

/// How a [`DemoError::Io`] for `what` is made from an `io::Error`.
fn io_err(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> DemoError {
    let what = what.to_string();
    move |source| DemoError::Io { what, source }
}

impl std::fmt::Display for DemoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DemoError::Io { what, source } => write!(f, "{what}: {source}"),
            DemoError::Report(e) => write!(f, "probe report: {e}"),
            DemoError::NoProc { name } => {
                write!(f, "unsupported: /proc/self/{name} exists on Linux only")
            }
        }
    }
}

impl std::error::Error for DemoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DemoError::Io { source, .. } => Some(source),
            DemoError::Report(e) => Some(e),
            DemoError::NoProc { .. } => None,
        }
    }
}
