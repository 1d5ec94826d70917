//! `--cleanup DIR`: the host's cleanup, done by the shim when the host was lost (`kill -9`)
//! before the session ended. The host ties the shim to its life (`PR_SET_PDEATHSIG`): the shim
//! forwards that signal to the session, and once the session ended it finds its parent changed
//! and does what the host would have done at the end: the session's `exit` row (with
//! `"outcome":"host_lost"`), the session folder (its temp folder and sockets), and the write-deny
//! placeholders once no other session of the state folder runs, and the terminal's settings as
//! the shim found them. Nothing here reads the token.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use relay_token::sandbox::write_deny::{Placeholders, PLACEHOLDERS_FILE};

use super::StatusEvent;

/// The `outcome` of the `exit` row a lost host's session gets.
pub const HOST_LOST: &str = "host_lost";

/// What the shim cleans up if its host is lost: the session folder, and the parent it started
/// under.
pub(crate) struct Cleanup {
    session_dir: PathBuf,
    parent: libc::pid_t,
    /// The terminal's settings as the shim found them (the first of fds 0, 1, 2 that is a
    /// terminal): a lost host cannot write them back, so the shim does.
    terminal: Option<(libc::c_int, libc::termios)>,
}

impl Cleanup {
    /// Armed by `--cleanup DIR`; remembers the parent (the host) the shim started under.
    pub(crate) fn new(session_dir: Option<&Path>) -> Option<Cleanup> {
        Some(Cleanup {
            session_dir: session_dir?.to_path_buf(),
            // SAFETY: getppid has no preconditions and cannot fail.
            parent: unsafe { libc::getppid() },
            terminal: terminal_found(),
        })
    }

    /// After the session ended with `end`: when the host is gone, its cleanup; else nothing
    /// (the host does it).
    pub(crate) fn after(&self, end: StatusEvent) {
        if !host_gone(self.parent) || !self.session_dir.is_dir() {
            return;
        }
        if let Some((fd, t)) = &self.terminal {
            restore_terminal(*fd, t);
        }
        let (Some(sessions), Some(id)) = (self.session_dir.parent(), self.session_dir.file_name())
        else {
            return;
        };
        let Some(state) = sessions.parent() else {
            return;
        };
        let id = id.to_string_lossy();
        let _ = record_loss(state, &id, end);
        let kept = self.session_dir.join("keep").exists();
        let _ = append(&self.session_dir.join("ended"), b"");
        if !kept && holds_transcripts(&self.session_dir) {
            // The conversation is carried back by relay-host (`gc`), which knows what may be:
            // everything else goes now.
            remove_all_but(&self.session_dir, &[CLAUDE_DIR, CLAUDE_PROJECT, "ended"]);
        } else if !kept {
            let _ = std::fs::remove_dir_all(&self.session_dir);
        }
        let _ = release_placeholders(state);
    }
}

/// The settings of the first of fds 0, 1 and 2 that is a terminal.
fn terminal_found() -> Option<(libc::c_int, libc::termios)> {
    (0..=2).find_map(|fd| {
        // SAFETY: termios is plain old data; tcgetattr fills it (isatty takes an integer).
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: `t` is a valid, writable termios.
        (unsafe { libc::isatty(fd) == 1 && libc::tcgetattr(fd, &mut t) == 0 }).then_some((fd, t))
    })
}

/// Writes the terminal settings `t` back to `fd`, SIGTTOU held back (the shim need not be in
/// the terminal's foreground group).
fn restore_terminal(fd: libc::c_int, t: &libc::termios) {
    // SAFETY: the sigsets are plain old data, filled before use; tcsetattr takes a valid termios
    // read from this descriptor; the old mask is restored after.
    unsafe {
        let mut ttou: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut ttou);
        libc::sigaddset(&mut ttou, libc::SIGTTOU);
        libc::sigprocmask(libc::SIG_BLOCK, &ttou, &mut old);
        libc::tcsetattr(fd, libc::TCSANOW, t);
        libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

/// Whether the host `parent` is gone or going: this shim was reparented away from it, or (Linux)
/// its main thread has exited. A host killed with `kill -9` reparents its children only when its
/// last thread is gone, so for a moment after its death signal reached the shim (sent as the
/// main thread exits) `getppid` still names it; the session may end within that moment.
fn host_gone(parent: libc::pid_t) -> bool {
    // SAFETY: getppid has no preconditions and cannot fail.
    if unsafe { libc::getppid() } != parent {
        return true;
    }
    #[cfg(target_os = "linux")]
    {
        // Still our parent, so the number is not reused: its main thread's state.
        match std::fs::read_to_string(format!("/proc/{parent}/stat")) {
            Err(_) => return true,
            Ok(stat) => {
                let state = stat
                    .rfind(')')
                    .and_then(|i| stat[i + 1..].trim_start().chars().next());
                return matches!(state, Some('Z' | 'X'));
            }
        }
    }
    #[allow(unreachable_code)]
    false
}

/// The launch's Claude config folder in a session folder (relay-host's `claude_config`).
const CLAUDE_DIR: &str = "claude";

/// The file naming the launch's project beside it (relay-host's `claude_config::PROJECT_FILE`):
/// only that project's transcripts are carried back.
const CLAUDE_PROJECT: &str = "claude-project";

/// True when the session's Claude config folder holds a conversation transcript
/// (`claude/projects/<folder>/<id>.jsonl`).
fn holds_transcripts(session_dir: &Path) -> bool {
    std::fs::read_dir(session_dir.join(CLAUDE_DIR).join("projects"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|p| std::fs::read_dir(p.path()).ok())
        .flat_map(|f| f.flatten())
        .any(|f| f.path().extension().is_some_and(|x| x == "jsonl"))
}

/// Removes every entry of `dir` but those named `keep` (links not followed).
fn remove_all_but(dir: &Path, keep: &[&str]) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if keep.iter().any(|k| e.file_name() == *k) {
            continue;
        }
        let p = e.path();
        let _ = match e.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&p),
            _ => std::fs::remove_file(&p),
        };
    }
}

/// Appends `bytes` to `path` (created 0600, never through a link) in one write.
fn append(path: &Path, bytes: &[u8]) -> io::Result<()> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?
        .write_all(bytes)
}

/// The session's `exit` row in `STATE/events.jsonl`: no host exit code (`"code":null`), the
/// session's own status or signal, `"outcome":"host_lost"`.
fn record_loss(state: &Path, id: &str, end: StatusEvent) -> io::Result<()> {
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut row = serde_json::json!({"event": "exit", "session_id": id, "code": null,
                                      "outcome": HOST_LOST, "ts": ts});
    match end {
        StatusEvent::Exited { status } => row["status"] = status.into(),
        StatusEvent::Signaled { signal } => row["signal"] = signal.into(),
        _ => {}
    }
    append(&state.join("events.jsonl"), format!("{row}\n").as_bytes())
}

/// Removes the placeholders under the state folder's lock, unless a session of the state folder
/// still holds its folder's lock (its placeholders are in use).
fn release_placeholders(state: &Path) -> io::Result<()> {
    if !state.join(PLACEHOLDERS_FILE).exists() {
        return Ok(());
    }
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(state)?;
    flock(&dir, libc::LOCK_EX)?;
    let running = std::fs::read_dir(state.join("sessions"))
        .map(|rd| rd.flatten().any(|e| locked(&e.path().join("lock"))))
        .unwrap_or(false);
    if !running {
        Placeholders::open(state)?.remove_all()?;
    }
    Ok(())
}

/// True when another process holds the lock file `lock`.
fn locked(lock: &Path) -> bool {
    File::open(lock).is_ok_and(|f| flock(&f, libc::LOCK_SH | libc::LOCK_NB).is_err())
}

/// `flock(f, op)`, retried when a signal interrupts it.
fn flock(f: &File, op: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
