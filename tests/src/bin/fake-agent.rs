//! `fake-agent`: a test double for Claude Code that records what it received, never the token.
//!
//! On each start it appends ONE JSON line (one `write` on an `O_APPEND` descriptor, so concurrent
//! agents never interleave) to the file named by `FAKE_AGENT_RECORD`, or to stderr when that
//! variable is unset or empty:
//!
//! ```json
//! {"argv":[...],"env":{...},"session_id":"..."|null,"pid":N,"ppid":N,"fds":[0,1,2,5],
//!  "token_fd_var":"5","token_sha256":"<hex>","token_bytes":N}
//! ```
//!
//! `fds` is the list of its open descriptors taken first thing (from `/proc/self/fd`, without the
//! descriptor used for the listing). `token_fd_var`, and then either `token_sha256` +
//! `token_bytes` (what it read from `/dev/fd/<n>` to EOF, at most 64 KiB, `token_truncated` when
//! more was there) or `token_error`, appear only when `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR`
//! is set. The bytes themselves are hashed and dropped.
//!
//! Options (anything else is only recorded in `argv`):
//! - `--no-read`: do not open or read the token descriptor (`token_read: false` is recorded);
//! - `--record-signal FILE`: before recording, installs a SIGTERM/SIGINT/SIGHUP/SIGQUIT handler
//!   that writes the signal number and a newline to FILE and exits with 128 + the signal;
//! - `--sleep SECS`: sleeps (after recording) that many seconds (a decimal is fine);
//! - `--wait-for FILE`: after recording and sleeping, waits until FILE exists (a test makes it
//!   once it has looked at the running session), polling every 10 ms, at most 300 s;
//! - `--sh CMD`: runs `/bin/sh -c CMD` after recording and sleeping, with inherited stdio, and
//!   exits with its status (128 + signal when it was killed);
//! - `--exit N`: exit status when there is no `--sh` (default 0);
//! - `--ptrace-init`: before recording, tries `ptrace(PTRACE_ATTACH, 1)` (the sandbox's init)
//!   and records `ptrace_init_errno` (0 when the attach succeeded).

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicPtr, Ordering};

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

const TOKEN_FD_VAR: &str = "CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR";
const TOKEN_CAP: usize = 64 * 1024;

/// The NUL-terminated path of `--record-signal`, leaked once, read by the handler.
static SIGNAL_FILE: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());

fn main() {
    // First thing, before this process opens anything of its own.
    let fds = open_fds();

    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let Opts {
        no_read,
        sleep,
        wait_for,
        sh,
        exit_code,
        record_signal,
        ptrace_init,
    } = Opts::parse(&argv);

    if let Some(file) = &record_signal {
        let c = CString::new(file.as_bytes()).expect("--record-signal FILE holds a NUL");
        SIGNAL_FILE.store(c.into_raw(), Ordering::SeqCst);
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
            // SAFETY: installs an async-signal-safe handler (open, write, close, _exit).
            unsafe {
                libc::signal(
                    sig,
                    on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
                )
            };
        }
    }

    let mut env = Map::new();
    for (k, v) in std::env::vars_os() {
        env.insert(
            k.to_string_lossy().into_owned(),
            Value::String(v.to_string_lossy().into_owned()),
        );
    }
    let mut record = json!({
        "argv": argv,
        "env": env,
        "session_id": std::env::var("RELAY_SESSION_ID").ok(),
        "pid": std::process::id(),
        "ppid": std::os::unix::process::parent_id(),
        "fds": fds,
    });
    if ptrace_init {
        record["ptrace_init_errno"] = json!(attach_init());
    }
    if let Some(var) = std::env::var_os(TOKEN_FD_VAR) {
        let var = var.to_string_lossy().into_owned();
        record["token_fd_var"] = json!(var);
        if no_read {
            record["token_read"] = json!(false);
        } else {
            match read_token(&var) {
                Ok((sha, n, truncated)) => {
                    record["token_sha256"] = json!(sha);
                    record["token_bytes"] = json!(n);
                    if truncated {
                        record["token_truncated"] = json!(true);
                    }
                }
                Err(e) => record["token_error"] = json!(e),
            }
        }
    }
    let mut line = record.to_string();
    line.push('\n');
    write_record(line.as_bytes());

    if let Some(secs) = sleep {
        std::thread::sleep(std::time::Duration::from_secs_f64(secs.max(0.0)));
    }
    if let Some(file) = wait_for {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        while !std::path::Path::new(&file).exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    if let Some(cmd) = sh {
        let status = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(cmd)
            .status()
            .expect("fake-agent: cannot run /bin/sh");
        let code = status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        std::process::exit(code);
    }
    std::process::exit(exit_code);
}

/// The options (see the module); anything else is only recorded.
#[derive(Default)]
struct Opts {
    no_read: bool,
    sleep: Option<f64>,
    wait_for: Option<String>,
    sh: Option<String>,
    exit_code: i32,
    record_signal: Option<String>,
    ptrace_init: bool,
}

impl Opts {
    fn parse(argv: &[String]) -> Opts {
        let mut o = Opts::default();
        let mut i = 1;
        while i < argv.len() {
            let next = argv.get(i + 1).cloned();
            let mut takes_value = true;
            match argv[i].as_str() {
                "--no-read" => (o.no_read, takes_value) = (true, false),
                "--ptrace-init" => (o.ptrace_init, takes_value) = (true, false),
                "--sleep" => o.sleep = next.as_deref().and_then(|s| s.parse().ok()),
                "--wait-for" => o.wait_for = next,
                "--sh" => o.sh = next,
                "--exit" => o.exit_code = next.as_deref().and_then(|s| s.parse().ok()).unwrap_or(0),
                "--record-signal" => o.record_signal = next,
                _ => takes_value = false,
            }
            i += if takes_value { 2 } else { 1 };
        }
        o
    }
}

/// The open descriptors, sorted, without the one `read_dir` used.
fn open_fds() -> Vec<i32> {
    let names: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .expect("fake-agent: /proc/self/fd")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    // The listing's own descriptor is closed now: keep only what is still open.
    let mut fds: Vec<i32> = names
        .into_iter()
        // SAFETY: F_GETFD takes no pointer; any number may be asked about.
        .filter(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0)
        .collect();
    fds.sort_unstable();
    fds
}

/// `ptrace(PTRACE_ATTACH, 1)`: 0 when it succeeded, else the errno (`ENOSYS` off Linux).
#[cfg(not(target_os = "linux"))]
fn attach_init() -> i32 {
    libc::ENOSYS
}

/// `ptrace(PTRACE_ATTACH, 1)`: 0 when it succeeded, else the errno.
#[cfg(target_os = "linux")]
fn attach_init() -> i32 {
    let null = std::ptr::null_mut::<libc::c_void>();
    // SAFETY: PTRACE_ATTACH takes a pid and ignores both pointers.
    let r = unsafe { libc::ptrace(libc::PTRACE_ATTACH, 1 as libc::pid_t, null, null) };
    if r == 0 {
        0
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
    }
}

/// Reads `/dev/fd/<var>` to EOF (at most 64 KiB): (sha256 hex, count, truncated).
fn read_token(var: &str) -> Result<(String, usize, bool), String> {
    let path = format!("/dev/fd/{var}");
    let mut f = std::fs::File::open(&path).map_err(|e| format!("open {path}: {e}"))?;
    let mut buf = vec![0u8; TOKEN_CAP + 1];
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("read {path}: {e}")),
        }
    }
    let truncated = n > TOKEN_CAP;
    let n = n.min(TOKEN_CAP);
    let sha = Sha256::digest(&buf[..n]);
    buf.iter_mut().for_each(|b| *b = 0);
    Ok((hex(&sha), n, truncated))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One append write of the whole record, to `$FAKE_AGENT_RECORD` or stderr.
fn write_record(line: &[u8]) {
    match std::env::var_os("FAKE_AGENT_RECORD").filter(|p| !p.is_empty()) {
        Some(path) => {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .open(&path)
                .unwrap_or_else(|e| panic!("fake-agent: open {:?}: {e}", path.as_bytes()));
            let n = f.write(line).expect("fake-agent: write record");
            assert_eq!(n, line.len(), "fake-agent: short write of the record");
        }
        None => {
            let mut e = std::io::stderr().lock();
            let _ = e.write_all(line);
        }
    }
}

/// SIGTERM and friends with `--record-signal`: write the number to the file, exit 128 + sig.
extern "C" fn on_signal(sig: libc::c_int) {
    let path = SIGNAL_FILE.load(Ordering::SeqCst);
    let mut buf = [0u8; 8];
    let mut len = 0;
    let mut digits = [0u8; 4];
    let mut d = 0;
    let mut v = sig;
    loop {
        digits[d] = b'0' + (v % 10) as u8;
        d += 1;
        v /= 10;
        if v == 0 || d == digits.len() {
            break;
        }
    }
    while d > 0 {
        d -= 1;
        buf[len] = digits[d];
        len += 1;
    }
    buf[len] = b'\n';
    len += 1;
    if !path.is_null() {
        // SAFETY: `path` is a leaked, NUL-terminated CString; open/write/close are
        // async-signal-safe and touch only `buf`.
        unsafe {
            let fd = libc::open(
                path,
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
                0o600,
            );
            if fd >= 0 {
                libc::write(fd, buf.as_ptr().cast(), len);
                libc::close(fd);
            }
        }
    }
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(128 + sig) };
}
