//! Thin wrappers over the raw system calls the crate makes, each named for the call it makes.
//!
//! Everything here returns `io::Result` built from `errno` ([`io::Error::last_os_error`]), which
//! allocates nothing, and retries `EINTR` where a retry is the right answer.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// `open(path, flags | O_CLOEXEC)`.
///
/// ```
/// use relay_token::sys;
/// let fd = sys::open(c"/dev/null", libc::O_RDONLY).unwrap();
/// # drop(fd);
/// ```
pub fn open(path: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    loop {
        // SAFETY: `path` is a valid NUL-terminated string for the duration of the call.
        let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
        if fd >= 0 {
            // SAFETY: `open` returned a fresh descriptor that nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// `fstat(fd)`.
///
/// ```
/// use relay_token::sys;
/// let fd = sys::open(c"/dev/null", libc::O_RDONLY).unwrap();
/// let st = sys::fstat(&fd).unwrap();
/// assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFCHR);
/// ```
pub fn fstat(fd: &impl AsRawFd) -> io::Result<libc::stat> {
    // SAFETY: `stat` is plain old data; an all-zero value is valid and is overwritten by fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable `stat`; the descriptor is borrowed for the call.
    let rc = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
    if rc == 0 {
        Ok(st)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `read(fd, buf)`, retried on `EINTR`. Returns the count read (0 at end of file).
///
/// ```
/// use relay_token::sys;
/// let fd = sys::open(c"/dev/null", libc::O_RDONLY).unwrap();
/// let mut buf = [0u8; 8];
/// assert_eq!(sys::read(&fd, &mut buf).unwrap(), 0);
/// ```
pub fn read(fd: &impl AsRawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// `write(fd, buf)` until every byte is written, retried on `EINTR`.
///
/// ```
/// use relay_token::sys;
/// let (r, w) = sys::pipe2_cloexec().unwrap();
/// sys::write_all(&w, b"hi").unwrap();
/// drop(w);
/// let mut buf = [0u8; 4];
/// assert_eq!(sys::read(&r, &mut buf).unwrap(), 2);
/// ```
pub fn write_all(fd: &impl AsRawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is valid for reads of `buf.len()` bytes.
        let n = unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        buf = &buf[n as usize..];
    }
    Ok(())
}

/// `pipe2(O_CLOEXEC)`: returns `(read end, write end)`.
///
/// ```
/// let (r, w) = relay_token::sys::pipe2_cloexec().unwrap();
/// # drop((r, w));
/// ```
pub fn pipe2_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1 as RawFd; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded and returned two fresh descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `fcntl(fd, F_GETFD)`: the descriptor flags, or `EBADF` when `fd` is not open.
///
/// ```
/// use std::os::fd::AsRawFd;
/// let fd = relay_token::sys::open(c"/dev/null", libc::O_RDONLY).unwrap();
/// assert_eq!(relay_token::sys::fd_flags(fd.as_raw_fd()).unwrap(), libc::FD_CLOEXEC);
/// assert_eq!(relay_token::sys::fd_flags(-1).unwrap_err().raw_os_error(), Some(libc::EBADF));
/// ```
pub fn fd_flags(fd: RawFd) -> io::Result<libc::c_int> {
    // SAFETY: F_GETFD takes no pointer argument; any fd number is safe to ask about.
    let rc = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `fcntl(fd, F_SETFD, FD_CLOEXEC)` (or clears it when `on` is false).
///
/// ```
/// use std::os::fd::AsRawFd;
/// let fd = relay_token::sys::open(c"/dev/null", libc::O_RDONLY).unwrap();
/// relay_token::sys::set_cloexec(fd.as_raw_fd(), true).unwrap();
/// ```
pub fn set_cloexec(fd: RawFd, on: bool) -> io::Result<()> {
    let flags = if on { libc::FD_CLOEXEC } else { 0 };
    // SAFETY: F_SETFD takes an int argument and touches only the descriptor's flags.
    let rc = unsafe { libc::fcntl(fd, libc::F_SETFD, flags) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `fcntl(fd, F_DUPFD_CLOEXEC, min)`: a close-on-exec duplicate at the lowest free number `>= min`.
///
/// ```
/// use std::os::fd::AsRawFd;
/// let fd = relay_token::sys::open(c"/dev/null", libc::O_RDONLY).unwrap();
/// let dup = relay_token::sys::dup_cloexec_at_least(fd.as_fd(), 100).unwrap();
/// assert!(dup.as_raw_fd() >= 100);
/// # use std::os::fd::AsFd;
/// ```
pub fn dup_cloexec_at_least(fd: BorrowedFd<'_>, min: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC takes an int argument and returns a fresh descriptor or -1.
    let rc = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just created by fcntl and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(rc) })
}

/// `waitid(P_PID, pid, flags)`, retried on `EINTR`: the child's state change, as `siginfo_t`.
/// With `WNOWAIT` the child is left waitable (an exited child stays a zombie, so its pid cannot
/// be reused until the caller reaps it).
///
/// ```
/// let child = std::process::Command::new("true").spawn()?;
/// let info = relay_token::sys::waitid(child.id() as i32, libc::WEXITED | libc::WNOWAIT)?;
/// assert_eq!(info.si_code, libc::CLD_EXITED);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn waitid(pid: libc::pid_t, flags: libc::c_int) -> io::Result<libc::siginfo_t> {
    loop {
        // SAFETY: `siginfo_t` is plain old data; waitid fills it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is valid for writes; waitid touches nothing else.
        let rc = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
        if rc == 0 {
            return Ok(info);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// The `strerror` text of an errno, in lower case as a sentence part
/// (`ENOENT` → `no such file or directory`).
///
/// ```
/// assert_eq!(relay_token::sys::errno_words(libc::ENOENT), "no such file or directory");
/// assert_eq!(relay_token::sys::errno_words(libc::EACCES), "permission denied");
/// ```
pub fn errno_words(errno: i32) -> String {
    let mut buf = [0 as libc::c_char; 128];
    // SAFETY: `buf` is writable for its length; the XSI strerror_r writes a NUL-terminated string.
    let rc = unsafe { libc::strerror_r(errno, buf.as_mut_ptr(), buf.len()) };
    let text = if rc == 0 {
        // SAFETY: strerror_r succeeded, so `buf` holds a NUL-terminated string.
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    } else {
        format!("os error {errno}")
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text,
    }
}
