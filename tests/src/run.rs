//! Waiting for a spawned command under a deadline and collecting its output: the one way the
//! end-to-end tests finish a `relay-host` they started.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::Child;
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
