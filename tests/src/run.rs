//! Waiting for a spawned command under a deadline and collecting its output: the one way the
//! end-to-end tests finish a `relay-host` they started. And the signal dispositions a test sets
//! in the programs it starts.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// What a finished (or killed) command left: the one output type of the end-to-end tests.
#[derive(Debug)]
pub struct Out {
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it, if any.
    pub signal: Option<i32>,
    /// True when it was killed here (deadline or stop condition), false when it ended by itself.
    pub killed: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Out {
    /// Exit, signal and both streams, for a failure message.
    ///
    /// ```no_run
    /// # let out: relay_tests::run::Out = unimplemented!();
    /// assert_eq!(out.code, Some(0), "{}", out.describe());
    /// ```
    pub fn describe(&self) -> String {
        format!(
            "exit {:?} signal {:?} killed {}\nstdout: {}\nstderr: {}",
            self.code, self.signal, self.killed, self.stdout, self.stderr
        )
    }

    /// The last stderr line that parses as JSON (a refusal's answer); panics when there is none.
    ///
    /// ```no_run
    /// # let out: relay_tests::run::Out = unimplemented!();
    /// assert_eq!(out.answer()["status"], 400);
    /// ```
    pub fn answer(&self) -> Value {
        self.stderr
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
            .unwrap_or_else(|| panic!("no JSON answer on stderr: {}", self.describe()))
    }

    /// Stdout as one JSON value; panics, naming `what` and showing both streams, when it is not.
    ///
    /// ```no_run
    /// # let out: relay_tests::run::Out = unimplemented!();
    /// assert_eq!(out.json("status --json")["shim"]["ok"], true);
    /// ```
    pub fn json(&self, what: &str) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "{what}: stdout is not one JSON value ({e}); {}",
                self.describe()
            )
        })
    }
}

/// Waits for `child` (which leads its own process group) until it ends, `stop()` holds, or
/// `timeout` passes; in the last two cases kills the whole group. Both streams are read on
/// threads and joined under the same deadline (at least 2 s after the end), so a descendant
/// that keeps a pipe open gives an empty stream instead of a hung test.
///
/// ```no_run
/// use std::os::unix::process::CommandExt;
/// use std::time::Duration;
/// let child = std::process::Command::new("true").process_group(0).spawn()?;
/// let f = relay_tests::run::finish_with(child, Duration::from_secs(5), &|| false);
/// assert!(!f.killed);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn finish_with(mut child: Child, timeout: Duration, stop: &dyn Fn() -> bool) -> Out {
    let start = Instant::now();
    let reader = |r: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            let _ = tx.send(buf);
        });
        rx
    };
    let out_rx = reader(child.stdout.take().map(|s| Box::new(s) as _));
    let err_rx = reader(child.stderr.take().map(|s| Box::new(s) as _));
    let mut killed = false;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > timeout || stop() {
            // SAFETY: kill takes integers only; the group is the one this child leads.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.kill();
            killed = true;
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if killed {
        // Whatever the group left behind dies with it; no stray member holds a pipe.
        // SAFETY: as above.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    }
    let left = timeout
        .saturating_sub(start.elapsed())
        .max(Duration::from_secs(2));
    let text = |rx: mpsc::Receiver<Vec<u8>>| {
        let buf = rx.recv_timeout(left).unwrap_or_default();
        String::from_utf8_lossy(&buf).into_owned()
    };
    Out {
        code: status.code(),
        signal: status.signal(),
        killed,
        stdout: text(out_rx),
        stderr: text(err_rx),
    }
}

/// The signals the end-to-end tests send to the programs they run (directly, or through the
/// host's forwarding and its shim's parent-death signal).
pub const SENT_SIGNALS: [libc::c_int; 4] =
    [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM];

/// Gives [`SENT_SIGNALS`] their default action, unblocked, in the child `cmd` starts, whatever
/// this test process inherited: `nohup`, a non-interactive shell's `&` (SIGINT and SIGQUIT) and
/// `trap ''` leave signals ignored, and a child inherits that (std clears only the mask). A test
/// that signals a program it started relies on this; the fixtures' host and shim commands set it.
///
/// ```
/// use std::os::unix::process::ExitStatusExt;
/// // This process ignores SIGINT, as a non-interactive shell's `&` leaves it.
/// // SAFETY: signal takes two integers; nothing in this example handles SIGINT.
/// unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
/// let mut cmd = std::process::Command::new("sh");
/// cmd.args(["-c", "kill -INT $$; echo survived"]);
/// relay_tests::run::default_signals(&mut cmd);
/// assert_eq!(cmd.output()?.status.signal(), Some(libc::SIGINT));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn default_signals(cmd: &mut Command) -> &mut Command {
    signals_in_child(cmd, &SENT_SIGNALS, libc::SIG_DFL)
}

/// Sets `action` (`SIG_DFL` or `SIG_IGN`) for each of `signals` in the child `cmd` starts, and
/// unblocks them there. Hooks run in the order they were added: a later call wins.
///
/// ```
/// let mut cmd = std::process::Command::new("sh");
/// cmd.args(["-c", "kill -TERM $$; echo alive"]);
/// relay_tests::run::signals_in_child(&mut cmd, &[libc::SIGTERM], libc::SIG_IGN);
/// assert_eq!(cmd.output()?.stdout, b"alive\n");
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn signals_in_child<'c>(
    cmd: &'c mut Command,
    signals: &'static [libc::c_int],
    action: libc::sighandler_t,
) -> &'c mut Command {
    // SAFETY: the hook runs between fork and exec and makes raw calls only (sigemptyset,
    // sigaddset, sigaction, sigprocmask) on stack values; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = action;
            libc::sigemptyset(&mut act.sa_mask);
            for &sig in signals {
                if libc::sigaction(sig, &act, std::ptr::null_mut()) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::sigaddset(&mut set, sig);
            }
            if libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}
