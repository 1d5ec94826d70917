//! The terminal a session runs in, left as it was found: its settings are read before the
//! session starts and written back once it ended, whatever ended it (its own exit, Ctrl-C, a
//! signal to relay-host, `relay-host stop`), so a program killed while it held the terminal raw
//! (Claude Code's UI) does not leave it unusable.

use std::os::fd::RawFd;
use std::sync::Mutex;

/// The terminal's descriptor and its settings, as found before the session started.
static FOUND: Mutex<Option<(RawFd, libc::termios)>> = Mutex::new(None);

/// Reads the settings of the first of fds 0, 1 and 2 that is a terminal, to [`restore`] once the
/// session ended; nothing when none is.
pub(crate) fn save() {
    for fd in 0..=2 {
        // SAFETY: termios is plain old data; tcgetattr fills it (isatty takes an integer).
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: `t` is a valid, writable termios.
        if unsafe { libc::isatty(fd) == 1 && libc::tcgetattr(fd, &mut t) == 0 } {
            *FOUND.lock().unwrap_or_else(|e| e.into_inner()) = Some((fd, t));
            return;
        }
    }
}

/// Writes back the settings [`save`] read (once). SIGTTOU is held back meanwhile: relay-host may
/// not be in the terminal's foreground group, and the write must not stop it.
pub(crate) fn restore() {
    let Some((fd, t)) = FOUND.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return;
    };
    // SAFETY: the sigsets are plain old data, filled before use; tcsetattr takes the valid
    // termios read from this descriptor; the old mask is restored after.
    unsafe {
        let mut ttou: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut ttou);
        libc::sigaddset(&mut ttou, libc::SIGTTOU);
        libc::pthread_sigmask(libc::SIG_BLOCK, &ttou, &mut old);
        libc::tcsetattr(fd, libc::TCSANOW, &t);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}
