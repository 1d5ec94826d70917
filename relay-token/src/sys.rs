//! Thin wrappers over the raw system calls the crate makes, each named for the call it makes.
//!
//! Everything here returns `io::Result` built from `errno` ([`io::Error::last_os_error`]), which
//! allocates nothing, and retries `EINTR` where a retry is the right answer. Descriptors are
//! taken as `BorrowedFd`/`OwnedFd`; only [`fd_flags`] takes a number, because it asks whether
//! that number is open at all.
//!
//! Public so that a launcher built on the crate (relay's own `relay-host` and `relay-shim`
//! among them) makes each of these calls the one way the crate does, rather than again. Each
//! wrapper says which call it makes; none allocates on the success path but
//! [`errno_words`], so those that take no allocation are fit for a `pre_exec` hook.
//!
//! Linux and macOS differ here only: `pipe2` (macOS: `pipe`, then `FD_CLOEXEC`), the errno slot
//! (`__errno_location` / `__error`) and the random source (`getrandom` / `arc4random_buf`).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// `open(path, flags | O_CLOEXEC)`, retried on `EINTR`.
///
/// ```
/// let fd = relay_token::sys::open(c"/dev/null", libc::O_RDONLY)?;
/// assert_eq!(relay_token::sys::read(&fd, &mut [0u8; 8])?, 0);
/// # Ok::<(), std::io::Error>(())
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

/// `openat2(AT_FDCWD, path, {flags | O_CLOEXEC, RESOLVE_NO_SYMLINKS})`, retried on `EINTR`:
/// the kernel refuses (`ELOOP`) any symbolic link on the way, but a final one opened with
/// `O_PATH | O_NOFOLLOW`, which yields the link itself. `ENOSYS` (before Linux 5.6) or `EPERM`
/// (a seccomp filter that refuses the call) tell the caller to do without it.
///
/// ```
/// match relay_token::sys::open_no_symlinks(c"/proc/self/exe", libc::O_RDONLY) {
///     Err(e) => assert!(matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOSYS | libc::EPERM))),
///     Ok(_) => panic!("/proc/self/exe is a link"),
/// }
/// ```
#[cfg(all(target_os = "linux", feature = "sandbox"))]
pub fn open_no_symlinks(path: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `open_how` is plain old data; all-zero is valid (no mode, no flags).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS;
    loop {
        // SAFETY: `path` is a valid NUL-terminated string and `how` a valid `open_how` of the
        // size passed, both alive for the duration of the call.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                libc::AT_FDCWD,
                path.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd >= 0 {
            // SAFETY: `openat2` returned a fresh descriptor that nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
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
/// let fd = relay_token::sys::open(c"/dev/null", libc::O_RDONLY)?;
/// assert_eq!(relay_token::sys::fstat(&fd)?.st_mode & libc::S_IFMT, libc::S_IFCHR);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn fstat(fd: impl AsFd) -> io::Result<libc::stat> {
    // SAFETY: `stat` is plain old data; an all-zero value is valid and is overwritten by fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable `stat`; the descriptor is borrowed for the call.
    let rc = unsafe { libc::fstat(fd.as_fd().as_raw_fd(), &mut st) };
    if rc == 0 {
        Ok(st)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `fstatvfs(fd)`: the file system's free space and flags.
///
/// ```
/// let fd = relay_token::sys::open(c"/", libc::O_RDONLY)?;
/// assert!(relay_token::sys::fstatvfs(&fd)?.f_bsize > 0);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn fstatvfs(fd: impl AsFd) -> io::Result<libc::statvfs> {
    // SAFETY: `statvfs` is plain old data; an all-zero value is valid and is overwritten.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable `statvfs`; the descriptor is borrowed for the call.
    let rc = unsafe { libc::fstatvfs(fd.as_fd().as_raw_fd(), &mut st) };
    if rc == 0 {
        Ok(st)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `read(fd, buf)`, retried on `EINTR`. Returns the count read (0 at end of file).
///
/// ```
/// let (r, w) = relay_token::sys::pipe2_cloexec()?;
/// relay_token::sys::write_all(&w, b"hi")?;
/// drop(w);
/// let mut buf = [0u8; 4];
/// assert_eq!(relay_token::sys::read(&r, &mut buf)?, 2);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn read(fd: impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
    let raw = fd.as_fd().as_raw_fd();
    loop {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
        let n = unsafe { libc::read(raw, buf.as_mut_ptr().cast(), buf.len()) };
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
/// let fd = relay_token::sys::open(c"/dev/null", libc::O_WRONLY)?;
/// relay_token::sys::write_all(&fd, b"nothing to see")?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn write_all(fd: impl AsFd, mut buf: &[u8]) -> io::Result<()> {
    let raw = fd.as_fd().as_raw_fd();
    while !buf.is_empty() {
        // SAFETY: `buf` is valid for reads of `buf.len()` bytes.
        let n = unsafe { libc::write(raw, buf.as_ptr().cast(), buf.len()) };
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

/// A close-on-exec pipe: `(read end, write end)`. `pipe2(O_CLOEXEC)` where the system has it;
/// elsewhere (macOS) `pipe`, then `FD_CLOEXEC` on both ends under the crate's spawn lock, so no
/// spawn through [`FdMap`](crate::FdMap) forks between the two calls.
///
/// ```
/// use std::os::fd::{AsFd, AsRawFd};
/// let (r, _w) = relay_token::sys::pipe2_cloexec()?;
/// let flags = relay_token::sys::fd_flags(r.as_fd().as_raw_fd())?;
/// assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn pipe2_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1 as RawFd; 2];
    #[cfg(not(target_vendor = "apple"))]
    {
        // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 succeeded and returned two fresh descriptors that nothing else owns.
        Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
    }
    #[cfg(target_vendor = "apple")]
    {
        let _serial = spawn_lock();
        // SAFETY: `fds` is a valid array of two ints for pipe to fill.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe succeeded and returned two fresh descriptors that nothing else owns.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        set_cloexec(r.as_fd(), true)?;
        set_cloexec(w.as_fd(), true)?;
        Ok((r, w))
    }
}

/// `bytes` in a close-on-exec in-memory file (`memfd_create`, named `name`), read from its
/// start: how a program is handed data on a descriptor (a file of any size, unlike a pipe
/// nobody reads yet).
///
/// ```
/// use std::io::Read;
/// let fd = relay_token::sys::memfd_with(c"doc", b"abc")?;
/// let mut text = Vec::new();
/// std::fs::File::from(fd).read_to_end(&mut text)?;
/// assert_eq!(text, b"abc");
/// # Ok::<(), std::io::Error>(())
/// ```
#[cfg(target_os = "linux")]
pub fn memfd_with(name: &CStr, bytes: &[u8]) -> io::Result<OwnedFd> {
    // SAFETY: the name is NUL-terminated; the flags are valid.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by memfd_create and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    write_all(&fd, bytes)?;
    // SAFETY: lseek on a descriptor we own.
    if unsafe { libc::lseek(fd.as_raw_fd(), 0, libc::SEEK_SET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// `fcntl(fd, F_GETFD)`: the descriptor flags, or `EBADF` when `fd` is not open. It takes a bare
/// number because it asks whether that number is open at all; it changes nothing.
///
/// ```
/// use std::os::fd::AsRawFd;
/// let (r, _w) = relay_token::sys::pipe2_cloexec()?;
/// assert_ne!(relay_token::sys::fd_flags(r.as_raw_fd())? & libc::FD_CLOEXEC, 0);
/// let e = relay_token::sys::fd_flags(-1).unwrap_err();
/// assert_eq!(e.raw_os_error(), Some(libc::EBADF));
/// # Ok::<(), std::io::Error>(())
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
/// use std::os::fd::{AsFd, AsRawFd};
/// let (r, _w) = relay_token::sys::pipe2_cloexec()?;
/// relay_token::sys::set_cloexec(r.as_fd(), false)?;
/// assert_eq!(relay_token::sys::fd_flags(r.as_raw_fd())? & libc::FD_CLOEXEC, 0);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn set_cloexec(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    let flags = if on { libc::FD_CLOEXEC } else { 0 };
    // SAFETY: F_SETFD takes an int argument and touches only the descriptor's flags.
    let rc = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, flags) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `fcntl(fd, F_DUPFD_CLOEXEC, min)`: a close-on-exec duplicate at the lowest free number `>= min`.
///
/// ```
/// use std::os::fd::{AsFd, AsRawFd};
/// let (r, _w) = relay_token::sys::pipe2_cloexec()?;
/// let high = relay_token::sys::dup_cloexec_at_least(r.as_fd(), 100)?;
/// assert!(high.as_raw_fd() >= 100);
/// # Ok::<(), std::io::Error>(())
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
/// let info = relay_token::sys::waitid(child.id() as libc::pid_t, libc::WEXITED)?;
/// // SAFETY: waitid filled `info` for an exited child, so its status field is set.
/// assert_eq!(unsafe { info.si_status() }, 0);
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

/// This thread's `errno` slot, for a signal handler that must leave `errno` as it found it.
///
/// ```
/// let slot = relay_token::sys::errno_slot();
/// // SAFETY: the slot is this thread's errno, valid for the thread's life.
/// let saved = unsafe { *slot };
/// // SAFETY: as above.
/// unsafe { *slot = saved };
/// ```
pub fn errno_slot() -> *mut libc::c_int {
    #[cfg(target_vendor = "apple")]
    // SAFETY: __error takes no argument and returns this thread's errno slot.
    return unsafe { libc::__error() };
    #[cfg(not(target_vendor = "apple"))]
    // SAFETY: __errno_location takes no argument and returns this thread's errno slot.
    return unsafe { libc::__errno_location() };
}

/// Fills `buf` from the system's random source: `getrandom` on Linux (retried on `EINTR`),
/// `arc4random_buf` on macOS (which cannot fail). The one random source of the crate.
///
/// ```
/// let mut a = [0u8; 16];
/// relay_token::sys::random_bytes(&mut a)?;
/// assert_ne!(a, [0u8; 16]);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    #[cfg(target_vendor = "apple")]
    {
        // SAFETY: `buf` is writable for its length; arc4random_buf fills exactly that many bytes.
        unsafe { libc::arc4random_buf(buf.as_mut_ptr().cast(), buf.len()) };
        Ok(())
    }
    #[cfg(not(target_vendor = "apple"))]
    {
        let mut filled = 0;
        while filled < buf.len() {
            let rest = &mut buf[filled..];
            // SAFETY: `rest` is writable for its length; getrandom fills at most that many bytes.
            let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
            if n < 0 {
                let err = io::Error::last_os_error();
                if err.kind() != io::ErrorKind::Interrupted {
                    return Err(err);
                }
                continue;
            }
            filled += n as usize;
        }
        Ok(())
    }
}

/// The `strerror` text of an errno, in lower case as a sentence part
/// (`ENOENT` → `no such file or directory`).
///
/// ```
/// assert_eq!(relay_token::sys::errno_words(libc::ENOENT), "no such file or directory");
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

/// Serializes spawns through [`FdMap`](crate::FdMap) in this process, so one spawn's parked guard is never
/// taken for a shield by another spawn that then outlives it.
static SPAWN_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds the crate's spawn lock: for descriptor churn (the token pipe's write end, its read end
/// after a spawn, a caller's own descriptor that a spawn relies on being busy), which must not
/// free a number while a spawn through [`FdMap`](crate::FdMap) relies on it being busy.
///
/// ```
/// let fd = std::fs::File::open("/dev/null")?;
/// let _serial = relay_token::spawn_lock();
/// drop(fd); // closed while no spawn of this process is between its fork and exec
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn spawn_lock() -> std::sync::MutexGuard<'static, ()> {
    SPAWN_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_words_are_lower_case_sentence_parts() {
        assert_eq!(errno_words(libc::ENOENT), "no such file or directory");
        assert_eq!(errno_words(libc::EACCES), "permission denied");
    }

    #[test]
    fn pipe_ends_are_close_on_exec_and_carry_bytes() {
        let (r, w) = pipe2_cloexec().unwrap();
        assert_eq!(fd_flags(r.as_raw_fd()).unwrap(), libc::FD_CLOEXEC);
        assert_eq!(fd_flags(w.as_raw_fd()).unwrap(), libc::FD_CLOEXEC);
        write_all(&w, b"hi").unwrap();
        drop(w);
        let mut buf = [0u8; 4];
        assert_eq!(read(&r, &mut buf).unwrap(), 2);
        assert_eq!(read(&r, &mut buf).unwrap(), 0);
    }

    #[test]
    fn set_cloexec_clears_and_sets() {
        let fd = open(c"/dev/null", libc::O_RDONLY).unwrap();
        set_cloexec(fd.as_fd(), false).unwrap();
        assert_eq!(fd_flags(fd.as_raw_fd()).unwrap(), 0);
        set_cloexec(fd.as_fd(), true).unwrap();
        assert_eq!(fd_flags(fd.as_raw_fd()).unwrap(), libc::FD_CLOEXEC);
        assert_eq!(fd_flags(-1).unwrap_err().raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn dup_lands_at_or_above_the_floor() {
        let fd = open(c"/dev/null", libc::O_RDONLY).unwrap();
        let dup = dup_cloexec_at_least(fd.as_fd(), 100).unwrap();
        assert!(dup.as_raw_fd() >= 100);
        assert_eq!(fstat(&dup).unwrap().st_mode & libc::S_IFMT, libc::S_IFCHR);
    }

    #[test]
    fn random_bytes_fill_the_whole_buffer() {
        // 4096 zero bytes out of a random source has probability 2^-32768.
        let mut buf = [0u8; 4096];
        random_bytes(&mut buf).unwrap();
        assert!(buf.iter().any(|&b| b != 0));
    }
}
