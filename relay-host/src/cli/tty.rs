//! Echo off on a terminal while a secret is pasted, restored however the read ends.

use std::os::fd::RawFd;
use std::sync::OnceLock;

/// The terminal settings to restore, kept where a signal handler can reach them.
static SAVED: OnceLock<(RawFd, libc::termios)> = OnceLock::new();

/// Terminal echo turned off on a descriptor; dropped, it is turned back on. A SIGINT, SIGTERM or
/// SIGHUP meanwhile restores it too, then ends the process as the signal would.
pub(crate) struct EchoOff {
    fd: RawFd,
    saved: libc::termios,
}

extern "C" fn restore_and_die(sig: libc::c_int) {
    if let Some((fd, t)) = SAVED.get() {
        // SAFETY: tcsetattr, signal and raise are async-signal-safe; `t` is a valid termios.
        unsafe { libc::tcsetattr(*fd, libc::TCSANOW, t) };
    }
    // SAFETY: as above.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

impl EchoOff {
    /// Turns echo off on `fd` when it is a terminal; `None` when it is not (or cannot be set).
    pub(crate) fn new(fd: RawFd) -> Option<EchoOff> {
        // SAFETY: isatty takes an integer.
        if unsafe { libc::isatty(fd) } != 1 {
            return None;
        }
        // SAFETY: termios is plain old data; tcgetattr fills it.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: `saved` is a valid, writable termios.
        if unsafe { libc::tcgetattr(fd, &mut saved) } != 0 {
            return None;
        }
        let _ = SAVED.set((fd, saved));
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: the handler only makes async-signal-safe calls.
            unsafe { libc::signal(sig, restore_and_die as *const () as libc::sighandler_t) };
        }
        let mut quiet = saved;
        quiet.c_lflag &= !(libc::ECHO | libc::ECHONL);
        // SAFETY: `quiet` is a valid termios.
        if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &quiet) } != 0 {
            return None;
        }
        Some(EchoOff { fd, saved })
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        // SAFETY: `saved` is the valid termios read from this descriptor.
        unsafe { libc::tcsetattr(self.fd, libc::TCSANOW, &self.saved) };
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: restores the default action.
            unsafe { libc::signal(sig, libc::SIG_DFL) };
        }
    }
}

#[cfg(test)]
mod tests {
    /// `new`'s example.
    #[test]
    fn new_doc_example() {
        let result = (|| {
            let dev_null = std::fs::File::open("/dev/null")?;
            use std::os::fd::AsRawFd;
            assert!(crate::cli::tty::EchoOff::new(dev_null.as_raw_fd()).is_none());
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// Whether echo is on for the terminal at `fd`.
    #[cfg(target_os = "linux")]
    fn echoes(fd: std::os::fd::RawFd) -> bool {
        // SAFETY: termios is plain old data; tcgetattr fills it.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: `t` is a valid, writable termios.
        assert_eq!(unsafe { libc::tcgetattr(fd, &mut t) }, 0);
        t.c_lflag & libc::ECHO != 0
    }

    /// A fresh pseudo-terminal's two ends (the test's own terminal, never the caller's).
    #[cfg(target_os = "linux")]
    fn pty() -> (std::os::fd::OwnedFd, std::fs::File) {
        use std::os::fd::{AsRawFd, FromRawFd};
        use std::os::unix::fs::OpenOptionsExt;
        // SAFETY: posix_openpt takes flags and returns a new descriptor or -1.
        let fd = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) };
        assert!(fd >= 0, "{}", std::io::Error::last_os_error());
        // SAFETY: `fd` was just opened and is owned here alone.
        let master = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let mut name = [0 as libc::c_char; 128];
        // SAFETY: `master` is a pseudo-terminal master; `name` is writable for its length.
        unsafe {
            assert_eq!(libc::grantpt(master.as_raw_fd()), 0);
            assert_eq!(libc::unlockpt(master.as_raw_fd()), 0);
            assert_eq!(
                libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()),
                0
            );
        }
        // SAFETY: ptsname_r wrote a NUL-terminated name into `name`.
        let path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) };
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(path.to_str().unwrap())
            .unwrap();
        (master, slave)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn echo_is_off_on_a_terminal_until_the_guard_is_dropped() {
        use std::os::fd::AsRawFd;
        let (_master, slave) = pty();
        let fd = slave.as_raw_fd();
        assert!(echoes(fd));
        let guard = crate::cli::tty::EchoOff::new(fd).expect("a terminal");
        assert!(!echoes(fd));
        drop(guard);
        assert!(echoes(fd));
    }
}
