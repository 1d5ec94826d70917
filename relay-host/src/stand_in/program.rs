//! `relay-stand-in`: a stand-in session's proxy as a program of its own, started by relay-host
//! for that session only. All of stand-in mode's TLS code (rustls, ring, rcgen, webpki's roots)
//! lives in this program, so every other launch runs a relay-host without it.
//!
//! ```text
//! relay-stand-in SOCKET [--api HOST:PORT]... -- [ENTRY]...
//! ```
//!
//! Its command line, descriptors and report lines are [`super::protocol`]'s, which the launch
//! (its network step's `stand_in.rs`) uses too.
//!
//! - fd 3: the real token, read to its end, then closed.
//! - fd 5: the extra CA certificates trusted upstream (PEM: the bytes of `upstream_ca_file` as
//!   relay-host read and checked them; empty when none), read to its end, then closed.
//! - fd 6: the system trust store's bundle (PEM, as relay-host read and checked it: what Claude
//!   Code trusts; empty when the system has none, and then webpki's roots stand in for it),
//!   read to its end, then closed. This program never opens a path for its trust.
//! - fd 4: what it tells the host, one [`Report`] a line, never a byte of the real token:
//!   `ready` once the allow-list proxy listens at SOCKET (the stand-in, for fd 5 of the
//!   session, and the session CA's certificate); or `error` and exit 78 when it cannot start;
//!   then, while it runs, `denied` for each destination the allow-list refused, `refused` for
//!   each request refused on an intercepted connection, and `used` for each answer an API host
//!   gave (counts only).
//! - It ends on SIGTERM (the host's, or its parent-death signal when the host is gone): the
//!   proxy stops and the real token is wiped. It is not dumpable, and in a session of its own,
//!   so a terminal's Ctrl-C does not reach it.

use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use relay_token::ClaudeToken;
use zeroize::Zeroizing;

use super::protocol::{Args, Report, UsageError, CA_FD, REPORT_FD, SYSTEM_CA_FD, TOKEN_FD};
use super::{StandIn, StandInError};
use crate::net::proxy::{Denied, Proxy};
use crate::net::{AllowError, AllowList};

/// The largest CA certificates read from fd 5 or fd 6.
const MAX_CA: usize = 4 << 20;

/// The exit code when it cannot start (after an `error` line).
pub(super) const CANNOT_START: i32 = 78;

/// The largest token read from fd 3.
const MAX_TOKEN: usize = 64 * 1024;

/// Why `relay-stand-in` cannot start: the text of its `error` report.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum StartError {
    /// The process could not be made undumpable.
    Harden(io::Error),
    /// The termination signals could not be held.
    Signals(io::Error),
    /// A command line other than the synopsis.
    Usage(UsageError),
    /// An inherited descriptor is not open, or could not be read.
    Fd {
        /// The descriptor.
        fd: i32,
        /// The error.
        source: io::Error,
    },
    /// An inherited descriptor held more than it may.
    TooLong {
        /// The descriptor.
        fd: i32,
        /// The most it may hold.
        max: usize,
    },
    /// The token descriptor held no token.
    NotAToken,
    /// The stand-in session could not be made.
    StandIn(StandInError),
    /// An allow-list entry does not parse.
    AllowList(AllowError),
    /// The proxy could not listen at its socket.
    Socket {
        /// The socket.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Harden(e) => write!(f, "cannot harden the process: {e}"),
            StartError::Signals(e) => write!(f, "signals: {e}"),
            StartError::Usage(e) => write!(f, "{e}"),
            StartError::Fd { fd, source } => write!(f, "fd {fd}: {source}"),
            StartError::TooLong { fd, max } => write!(f, "fd {fd}: more than {max} bytes"),
            StartError::NotAToken => write!(f, "fd {TOKEN_FD}: not a token"),
            StartError::StandIn(e) => write!(f, "stand-in mode: {e}"),
            StartError::AllowList(e) => write!(f, "allow-list: {e}"),
            StartError::Socket { path, source } => {
                write!(f, "socket {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Harden(e) | StartError::Signals(e) => Some(e),
            StartError::Fd { source, .. } | StartError::Socket { source, .. } => Some(source),
            StartError::Usage(e) => Some(e),
            StartError::StandIn(e) => Some(e),
            StartError::AllowList(e) => Some(e),
            StartError::TooLong { .. } | StartError::NotAToken => None,
        }
    }
}

/// A stand-in session's proxy, `relay-stand-in` without `--check` (`args` without the program
/// name); returns its exit code.
///
/// # Safety
///
/// Called once, from `main`, before any other thread runs: this process owns descriptors 3 to
/// 6 it inherited, and nothing else in it uses them.
///
/// ```no_run
/// // SAFETY: from main, owning fds 3 to 6.
/// let code = unsafe { relay_host::stand_in::program::run(std::env::args_os().skip(1).collect()) };
/// std::process::exit(code);
/// ```
pub unsafe fn run(args: Vec<OsString>) -> i32 {
    // SAFETY: forwarded from this function's contract.
    let report = match unsafe { claim(REPORT_FD) } {
        Ok(fd) => Reporter(Arc::new(Mutex::new(File::from(fd)))),
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
            report.send(&Report::Error(e.to_string()));
            CANNOT_START
        }
    }
}

/// Everything up to the listening proxy: the process hardened and set apart, signals held for
/// [`wait_for_term`], the token read, the stand-in session made, the proxy started (its
/// refusals told on `report`). Returns the proxy and the `ready` report.
///
/// # Safety
///
/// As [`run`]'s (descriptors 3, 5 and 6).
unsafe fn start(args: Vec<OsString>, report: &Reporter) -> Result<(Proxy, Report), StartError> {
    crate::harden_process().map_err(StartError::Harden)?;
    // SAFETY: setsid takes no arguments; a freshly spawned child is no group leader.
    unsafe { libc::setsid() };
    hold_signals().map_err(StartError::Signals)?;
    let opts = Args::parse(args).map_err(StartError::Usage)?;
    // SAFETY: forwarded from this function's contract.
    let real = unsafe { read_token() }?;
    // SAFETY: as above (descriptor 5).
    let ca = unsafe { read_ca(CA_FD) }?;
    let ca = (!ca.is_empty()).then_some(ca.as_slice());
    // SAFETY: as above (descriptor 6).
    let system = unsafe { read_ca(SYSTEM_CA_FD) }?;
    let system = (!system.is_empty()).then_some(system.as_slice());
    let (stand_in, handed) =
        StandIn::with_roots(real, &opts.api, system, ca).map_err(StartError::StandIn)?;
    let list = AllowList::parse(&opts.allow).map_err(StartError::AllowList)?;
    stand_in.on_refuse(report.refusals());
    stand_in.on_use(report.uses());
    let ca_pem = stand_in.ca_pem().to_string();
    let proxy = Proxy::start_with(&opts.socket, list, report.denials(), Some(stand_in)).map_err(
        |source| StartError::Socket {
            path: opts.socket.clone(),
            source,
        },
    )?;
    let stand_in = String::from_utf8_lossy(handed.expose_bytes()).into_owned();
    let ready = Report::Ready {
        stand_in,
        ca: ca_pem,
    };
    Ok((proxy, ready))
}

/// The real token from fd 3 (then closed).
///
/// # Safety
///
/// As [`run`]'s (descriptor 3).
pub(super) unsafe fn read_token() -> Result<ClaudeToken, StartError> {
    // SAFETY: forwarded.
    let bytes = unsafe { read_fd(TOKEN_FD, MAX_TOKEN) }?;
    ClaudeToken::from_bytes(&bytes).ok_or(StartError::NotAToken)
}

/// The CA certificates on inherited descriptor `fd` (PEM, public), at most [`MAX_CA`] bytes.
///
/// # Safety
///
/// As [`claim`]'s: the caller owns `fd`, and nothing else in this process uses it.
/// Read into a buffer that grows with what comes (public bytes: nothing to wipe), never one of
/// the limit's size.
pub(super) unsafe fn read_ca(fd: i32) -> Result<Vec<u8>, StartError> {
    use std::io::Read;
    let failed = |source| StartError::Fd { fd, source };
    // SAFETY: forwarded.
    let owned = unsafe { claim(fd) }.map_err(failed)?;
    let mut bytes = Vec::new();
    File::from(owned)
        .take(MAX_CA as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    if bytes.len() > MAX_CA {
        return Err(StartError::TooLong { fd, max: MAX_CA });
    }
    Ok(bytes)
}

/// Everything on inherited descriptor `fd` to its end, at most `max` bytes (then closed).
///
/// # Safety
///
/// As [`claim`]'s: the caller owns `fd`, and nothing else in this process uses it.
unsafe fn read_fd(fd: i32, max: usize) -> Result<Zeroizing<Vec<u8>>, StartError> {
    let failed = |source| StartError::Fd { fd, source };
    // SAFETY: forwarded.
    let owned = unsafe { claim(fd) }.map_err(failed)?;
    let mut bytes = Zeroizing::new(vec![0u8; max + 1]);
    let mut len = 0;
    loop {
        let n = relay_token::sys::read(&owned, &mut bytes[len..]).map_err(failed)?;
        if n == 0 {
            break;
        }
        len += n;
        if len > max {
            return Err(StartError::TooLong { fd, max });
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
pub(super) unsafe fn claim(fd: i32) -> io::Result<OwnedFd> {
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
struct Reporter(Arc<Mutex<File>>);

impl Reporter {
    fn send(&self, r: &Report) {
        let line = r.line();
        let mut f = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let _ = f.write_all(line.as_bytes());
    }

    fn denials(&self) -> crate::net::proxy::OnDeny {
        let me = self.clone();
        Box::new(move |d: &Denied| {
            me.send(&Report::Denied {
                host: d.host.clone(),
                port: d.port,
                reason: d.reason.to_string(),
                allow_with: d.allow_with(),
            });
        })
    }

    fn uses(&self) -> super::OnUse {
        let me = self.clone();
        Box::new(move |u| {
            me.send(&Report::Used {
                host: u.host.clone(),
                port: u.port,
                status: u.status,
                sent: u.sent,
                received: u.received,
            });
        })
    }

    fn refusals(&self) -> super::OnRefuse {
        let me = self.clone();
        Box::new(move |r| {
            me.send(&Report::Refused {
                host: r.host.clone(),
                port: r.port,
                status: r.status,
                reason: r.reason.to_string(),
            });
        })
    }
}

#[cfg(test)]
mod tests {
    /// `StartError`'s example.
    #[test]
    fn start_error_doc_example() {
        use crate::stand_in::program::StartError;
        let e = StartError::TooLong { fd: 5, max: 4 };
        assert_eq!(e.to_string(), "fd 5: more than 4 bytes");
    }

    /// A pipe that a thread fills with `bytes`, then closes: the read end's descriptor, owned
    /// by the caller.
    fn pipe_of(bytes: &[u8]) -> i32 {
        let (r, mut w) = std::io::pipe().unwrap();
        let bytes = bytes.to_vec();
        std::thread::spawn(move || {
            let _ = std::io::Write::write_all(&mut w, &bytes);
        });
        std::os::fd::IntoRawFd::into_raw_fd(r)
    }

    /// A CA bundle is read into a buffer of its own size, not one of the 4 MiB limit: the
    /// limit's pages were touched twice per launch (once zeroed, once zeroized), about 8 MiB
    /// and a few milliseconds before `relay-stand-in` said it was ready. What is over the limit
    /// is still refused.
    #[test]
    fn a_ca_bundle_is_read_into_a_buffer_of_its_size() {
        let pem = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".repeat(4000);
        // SAFETY: the test owns the descriptor it made.
        let got = unsafe { super::read_ca(pipe_of(&pem)) }.unwrap();
        assert_eq!(&got[..], &pem[..]);
        assert!(
            got.capacity() < 2 * pem.len(),
            "capacity {}",
            got.capacity()
        );
        // SAFETY: as above.
        let empty = unsafe { super::read_ca(pipe_of(b"")) }.unwrap();
        assert!(empty.is_empty() && empty.capacity() < 64 * 1024);
        let fd = pipe_of(&vec![b'x'; super::MAX_CA + 1]);
        // SAFETY: as above.
        let e = unsafe { super::read_ca(fd) }.unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("fd {fd}: more than {} bytes", super::MAX_CA)
        );
    }
}
