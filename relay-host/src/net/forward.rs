//! The forwarder inside the sandbox: `relay-net-forward PORT SOCKET -- PROGRAM [ARGS...]`.
//!
//! It is `relay-host` itself, bound read-only into the sandbox under the name
//! `relay-net-forward` (`FORWARDER_NAME`). It listens on `127.0.0.1:PORT` (the session's own
//! loopback), leaves a detached process (its parent is the sandbox's init, so it ends with the
//! sandbox) that hands each connection to the host's proxy at `SOCKET`, and then `exec`s
//! PROGRAM: same pid, PROGRAM's own argv, the listener already open when PROGRAM starts. The
//! detached process keeps no descriptor but the listener (stdio on `/dev/null`; the token's
//! descriptor, if any, is closed in it).

use std::ffi::OsString;
use std::io;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::thread;

/// Runs the forwarder with its arguments (after the program name); returns an exit code only
/// when it fails (126 for a usage or listen error, 127 when PROGRAM cannot be run).
///
/// ```no_run
/// let code = relay_host::net::forward::run(
///     ["3128", "/run/relay/net.sock", "--", "/bin/true"].map(Into::into).to_vec(),
/// );
/// std::process::exit(code);
/// ```
pub fn run(args: Vec<OsString>) -> i32 {
    let fail = |msg: String| {
        eprintln!("relay-net-forward: {msg}");
        relay_shim::exit::ExitCode::CannotExec.code()
    };
    let Some((port, socket, program)) = parse(args) else {
        return fail(USAGE.to_string());
    };
    let listener = match TcpListener::bind(("127.0.0.1", port)) {
        Ok(l) => l,
        Err(e) => return fail(format!("listen on 127.0.0.1:{port}: {e}")),
    };
    if let Err(e) = detach(&listener, &socket) {
        return fail(format!("start: {e}"));
    }
    drop(listener);
    let err = std::process::Command::new(&program[0])
        .args(&program[1..])
        .exec();
    eprintln!("relay-net-forward: run {:?}: {err}", program[0]);
    relay_shim::exit::ExitCode::NotFound.code()
}

/// What `relay-net-forward` says to a command line that is not its own.
const USAGE: &str = "usage: relay-net-forward PORT SOCKET -- PROGRAM [ARGS...]";

/// The port, the socket and the program of the command line; `None` when it is not
/// [`USAGE`]'s.
fn parse(args: Vec<OsString>) -> Option<(u16, PathBuf, Vec<OsString>)> {
    let mut it = args.into_iter();
    let port = it
        .next()
        .and_then(|p| p.to_str().and_then(|s| s.parse::<u16>().ok()))?;
    let socket = PathBuf::from(it.next()?);
    if !matches!(it.next(), Some(d) if d == "--") {
        return None;
    }
    let program: Vec<OsString> = it.collect();
    (!program.is_empty()).then_some((port, socket, program))
}

/// Forks twice: the grandchild serves (reparented to the sandbox's init), the child exits at
/// once and is reaped here, so PROGRAM never sees a child it did not make.
fn detach(listener: &TcpListener, socket: &std::path::Path) -> io::Result<()> {
    // SAFETY: this process is single-threaded here (the forwarder runs nothing before), so the
    // child may allocate and take locks freely.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(io::Error::last_os_error());
    }
    if child == 0 {
        // Before the second fork, so both are done when the parent's wait returns and the
        // program starts: a session of its own (the terminal's and the shim's signals to the
        // session's process group, a Ctrl-C included, do not reach it), stdio on `/dev/null`,
        // no descriptor but the listener.
        // SAFETY: setsid takes no arguments; this fresh child is not a group leader.
        unsafe { libc::setsid() };
        keep_only(listener.as_raw_fd());
        // SAFETY: as above, still single-threaded.
        let grandchild = unsafe { libc::fork() };
        if grandchild == 0 {
            serve(listener, socket);
        }
        // SAFETY: _exit ends the intermediate process without running this process's atexit
        // handlers or flushing buffers the parent owns.
        unsafe { libc::_exit(if grandchild < 0 { 1 } else { 0 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child this function forked; `status` is a valid int.
    if unsafe { libc::waitpid(child, &mut status, 0) } < 0 || status != 0 {
        return Err(io::Error::other("the forwarding process did not start"));
    }
    Ok(())
}

/// The detached process: one thread per connection. Never returns.
fn serve(listener: &TcpListener, socket: &std::path::Path) -> ! {
    for conn in listener.incoming() {
        let Ok(tcp) = conn else { continue };
        let socket = socket.to_path_buf();
        let _ = thread::Builder::new().spawn(move || {
            if let Ok(unix) = UnixStream::connect(&socket) {
                let _ = super::splice(unix, tcp);
            }
        });
    }
    // SAFETY: ends this process; nothing of the parent's is flushed.
    unsafe { libc::_exit(0) }
}

/// Points 0, 1, 2 at `/dev/null` and closes every descriptor above 2 but `keep`.
fn keep_only(keep: i32) {
    // SAFETY: plain descriptor calls on numbers this process owns; open's path is a valid C
    // string.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
    }
    let open: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default();
    for fd in open.into_iter().filter(|&fd| fd > 2 && fd != keep) {
        // SAFETY: closes a descriptor number this process holds (the read_dir's own is gone
        // already, and closing a stale number is harmless here: nothing else runs).
        unsafe { libc::close(fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_checked() {
        let a = |v: &[&str]| parse(v.iter().map(OsString::from).collect());
        assert!(a(&["3128", "/s", "--", "/bin/true"]).is_some());
        assert!(a(&["3128", "/s", "/bin/true"]).is_none());
        assert!(a(&["x", "/s", "--", "/bin/true"]).is_none());
        assert!(a(&["3128", "/s", "--"]).is_none());
    }
}
