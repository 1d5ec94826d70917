//! `relay-stand-in`: a stand-in session's proxy as a program of its own, started by relay-host
//! for that session only. All of stand-in mode's TLS code (rustls, ring, rcgen, webpki's roots)
//! lives in this program, so every other launch runs a relay-host without it.
//!
//! ```text
//! relay-stand-in SOCKET [--api HOST:PORT]... -- [ALLOW_ENTRY]...
//! ```
//!
//! - fd 3: the real token, read to its end, then closed.
//! - fd 5: the extra CA certificates trusted upstream (PEM: the bytes of `upstream_ca_file` as
//!   relay-host read and checked them; empty when none), read to its end, then closed.
//! - fd 6: the system trust store's bundle (PEM, as relay-host read and checked it: what Claude
//!   Code trusts; empty when the system has none, and then webpki's roots stand in for it),
//!   read to its end, then closed. This program never opens a path for its trust.
//! - fd 4: what it tells the host, one JSON object a line, never a byte of the real token:
//!   `{"ready":{"stand_in":S,"ca":PEM}}` once the allow-list proxy listens at SOCKET (the
//!   stand-in, for fd 5 of the session, and the session CA's certificate); or
//!   `{"error":MESSAGE}` and exit 78 when it cannot start; then, while it runs,
//!   `{"denied":{"host","port","reason","allow_with"}}` for each destination the allow-list
//!   refused and `{"refused":{"host","port","status","reason"}}` for each request refused on an
//!   intercepted connection, and `{"used":{"host","port","status","sent","received"}}` for each
//!   answer an API host gave (counts only).
//! - It ends on SIGTERM (the host's, or its parent-death signal when the host is gone): the
//!   proxy stops and the real token is wiped. It is not dumpable, and in a session of its own,
//!   so a terminal's Ctrl-C does not reach it.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use relay_token::ClaudeToken;
use serde_json::{json, Value};
use zeroize::Zeroizing;

use crate::net::proxy::{Denied, Proxy};
use crate::net::stand_in::StandIn;
use crate::net::AllowList;

/// The descriptor the real token arrives on.
pub const TOKEN_FD: i32 = 3;

/// The descriptor the helper reports on.
pub const REPORT_FD: i32 = 4;

/// The descriptor the extra upstream CA certificates arrive on.
pub const CA_FD: i32 = 5;

/// The descriptor the system trust store's bundle arrives on.
pub const SYSTEM_CA_FD: i32 = 6;

/// The largest CA certificates read from fd 5 or fd 6.
const MAX_CA: usize = 4 << 20;

/// The exit code when it cannot start (after an `error` line).
const CANNOT_START: i32 = 78;

/// The largest token read from fd 3.
const MAX_TOKEN: usize = 64 * 1024;

/// The whole of `relay-stand-in` (`args` without the program name); returns its exit code.
///
/// # Safety
///
/// Called once, from `main`, before any other thread runs: this process owns descriptors 3 to
/// 6 it inherited, and nothing else in it uses them.
///
/// ```no_run
/// // SAFETY: from main, owning fds 3 to 6.
/// let code = unsafe { relay_host::stand_in_program::run(std::env::args_os().skip(1).collect()) };
/// std::process::exit(code);
/// ```
pub unsafe fn run(args: Vec<OsString>) -> i32 {
    // SAFETY: forwarded from this function's contract.
    let report = match unsafe { claim(REPORT_FD) } {
        Ok(fd) => Report(Arc::new(Mutex::new(File::from(fd)))),
        Err(e) => {
            eprintln!("relay-stand-in: fd {REPORT_FD}: {e}");
            return CANNOT_START;
        }
    };
    // SAFETY: as above.
    match unsafe { start(args, &report) } {
        Ok((proxy, ready)) => {
            report.send(&ready);
            wait_for_term();
            drop(proxy);
            0
        }
        Err(e) => {
            report.send(&json!({ "error": e }));
            CANNOT_START
        }
    }
}

/// Everything up to the listening proxy: the process hardened and set apart, signals held for
/// [`wait_for_term`], the token read, the stand-in session made, the proxy started (its
/// refusals told on `report`). Returns the proxy and the `ready` line.
///
/// # Safety
///
/// As [`run`]'s (descriptors 3, 5 and 6).
unsafe fn start(args: Vec<OsString>, report: &Report) -> Result<(Proxy, Value), String> {
    crate::harden_process().map_err(|e| format!("cannot harden the process: {e}"))?;
    // SAFETY: setsid takes no arguments; a freshly spawned child is no group leader.
    unsafe { libc::setsid() };
    hold_signals().map_err(|e| format!("signals: {e}"))?;
    let opts = Options::parse(args)?;
    // SAFETY: forwarded from this function's contract.
    let real = unsafe { read_token() }?;
    // SAFETY: as above (descriptor 5).
    let ca = unsafe { read_fd(CA_FD, MAX_CA) }?;
    let ca = (!ca.is_empty()).then_some(ca.as_slice());
    // SAFETY: as above (descriptor 6).
    let system = unsafe { read_fd(SYSTEM_CA_FD, MAX_CA) }?;
    let system = (!system.is_empty()).then_some(system.as_slice());
    let (stand_in, handed) = StandIn::with_roots(real, &opts.api, system, ca)
        .map_err(|e| format!("stand-in mode: {e}"))?;
    let list = AllowList::parse(&opts.allow).map_err(|e| format!("allow-list: {e}"))?;
    stand_in.on_refuse(report.refusals());
    stand_in.on_use(report.uses());
    let ca_pem = stand_in.ca_pem().to_string();
    let proxy = Proxy::start_with(&opts.socket, list, report.denials(), Some(stand_in))
        .map_err(|e| format!("socket {}: {e}", opts.socket.display()))?;
    let handed = String::from_utf8_lossy(handed.expose_bytes()).into_owned();
    let ready = json!({ "ready": { "stand_in": handed, "ca": ca_pem } });
    Ok((proxy, ready))
}

/// The command line.
struct Options {
    socket: PathBuf,
    api: Vec<String>,
    allow: Vec<String>,
}

impl Options {
    fn parse(args: Vec<OsString>) -> Result<Options, String> {
        let usage =
            || "usage: relay-stand-in SOCKET [--api HOST:PORT]... -- [ENTRY]...".to_string();
        let mut it = args.into_iter();
        let socket = PathBuf::from(it.next().ok_or_else(usage)?);
        let (mut api, mut allow) = (Vec::new(), Vec::new());
        let text = |v: Option<OsString>| v.and_then(|s| s.into_string().ok()).ok_or_else(usage);
        loop {
            match it.next().and_then(|a| a.into_string().ok()).as_deref() {
                Some("--api") => api.push(text(it.next())?),
                Some("--") => break,
                _ => return Err(usage()),
            }
        }
        for entry in it {
            allow.push(text(Some(entry))?);
        }
        Ok(Options { socket, api, allow })
    }
}

/// The real token from fd 3 (then closed).
///
/// # Safety
///
/// As [`run`]'s (descriptor 3).
unsafe fn read_token() -> Result<ClaudeToken, String> {
    // SAFETY: forwarded.
    let bytes = unsafe { read_fd(TOKEN_FD, MAX_TOKEN) }?;
    ClaudeToken::from_bytes(&bytes).ok_or_else(|| format!("fd {TOKEN_FD}: not a token"))
}

/// Everything on inherited descriptor `fd` to its end, at most `max` bytes (then closed).
///
/// # Safety
///
/// As [`claim`]'s: the caller owns `fd`, and nothing else in this process uses it.
unsafe fn read_fd(fd: i32, max: usize) -> Result<Zeroizing<Vec<u8>>, String> {
    // SAFETY: forwarded.
    let owned = unsafe { claim(fd) }.map_err(|e| format!("fd {fd}: {e}"))?;
    let mut bytes = Zeroizing::new(vec![0u8; max + 1]);
    let mut len = 0;
    loop {
        let n = relay_token::sys::read(&owned, &mut bytes[len..])
            .map_err(|e| format!("fd {fd}: {e}"))?;
        if n == 0 {
            break;
        }
        len += n;
        if len > max {
            return Err(format!("fd {fd}: more than {max} bytes"));
        }
    }
    bytes.truncate(len);
    Ok(bytes)
}

/// Takes an inherited descriptor, after checking it is open.
///
/// # Safety
///
/// The caller owns `fd`, and nothing else in this process uses it.
unsafe fn claim(fd: i32) -> io::Result<OwnedFd> {
    relay_token::sys::fd_flags(fd)?;
    // SAFETY: open (checked above) and owned by the caller (this function's contract).
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    relay_token::sys::set_cloexec(std::os::fd::AsFd::as_fd(&owned), true)?;
    Ok(owned)
}

/// Blocks SIGTERM, SIGINT and SIGHUP in this thread and every thread it starts after:
/// [`wait_for_term`] takes SIGTERM; the other two (a terminal's, which setsid keeps away
/// anyway) stay pending and harmless.
fn hold_signals() -> io::Result<()> {
    let set = term_set();
    // SAFETY: a valid, initialised set; the old mask is not wanted.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    match rc {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Waits for SIGTERM.
fn wait_for_term() {
    let set = term_set();
    let mut sig = 0;
    loop {
        // SAFETY: a valid set and a valid place for the signal number.
        if unsafe { libc::sigwait(&set, &mut sig) } == 0 && sig == libc::SIGTERM {
            return;
        }
    }
}

fn term_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it, sigaddset adds valid signals.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// The report descriptor, shared by the proxy's threads: one whole line a `write`.
#[derive(Clone)]
struct Report(Arc<Mutex<File>>);

impl Report {
    fn send(&self, v: &Value) {
        let mut line = v.to_string();
        line.push('\n');
        let mut f = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let _ = f.write_all(line.as_bytes());
    }

    fn denials(&self) -> crate::net::proxy::OnDeny {
        let me = self.clone();
        Box::new(move |d: &Denied| {
            me.send(&json!({ "denied": {
                "host": d.host, "port": d.port, "reason": d.reason, "allow_with": d.allow_with(),
            }}));
        })
    }

    fn uses(&self) -> crate::net::stand_in::OnUse {
        let me = self.clone();
        Box::new(move |u| {
            me.send(&json!({ "used": {
                "host": u.host, "port": u.port, "status": u.status,
                "sent": u.sent, "received": u.received,
            }}));
        })
    }

    fn refusals(&self) -> crate::net::stand_in::OnRefuse {
        let me = self.clone();
        Box::new(move |r| {
            me.send(&json!({ "refused": {
                "host": r.host, "port": r.port, "status": r.status, "reason": r.reason,
            }}));
        })
    }
}
