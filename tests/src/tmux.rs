//! A tmux server of a test's own, for the terminal-UI turns: a pane of a fixed size running one
//! command, its text read back.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A tmux server of the test's own (its socket in the test's folder), one session `turn`;
/// killed when dropped.
pub struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// Starts the server at `socket` with a 160x50 pane running `shell_line` in `dir`.
    ///
    /// ```no_run
    /// let t = relay_tests::tmux::Tmux::start("/var/tmp/x/tmux.sock".as_ref(), "/".as_ref(), "sleep 5");
    /// assert!(t.screen().is_empty());
    /// ```
    pub fn start(socket: &Path, dir: &Path, shell_line: &str) -> Tmux {
        Tmux::start_with(socket, dir, shell_line, &|_| {})
    }

    /// As [`Tmux::start`], the command that starts the server made ready by `prepare` first
    /// (the server and its pane inherit what it sets up: [`crate::fake_internet`]'s
    /// namespaces, say).
    ///
    /// ```no_run
    /// let t = relay_tests::tmux::Tmux::start_with(
    ///     "/var/tmp/x/tmux.sock".as_ref(), "/".as_ref(), "sleep 5", &|c| { c.env("X", "1"); });
    /// # drop(t);
    /// ```
    pub fn start_with(
        socket: &Path,
        dir: &Path,
        shell_line: &str,
        prepare: &dyn Fn(&mut Command),
    ) -> Tmux {
        let t = Tmux {
            socket: socket.to_path_buf(),
        };
        let mut cmd = t.command(&[
            "new-session",
            "-d",
            "-s",
            "turn",
            "-x",
            "160",
            "-y",
            "50",
            "-c",
            dir.to_str().expect("a UTF-8 folder"),
            shell_line,
        ]);
        prepare(&mut cmd);
        let out = cmd.output().expect("run tmux");
        assert!(out.status.success(), "tmux new-session: {out:?}");
        t
    }

    /// `tmux -f /dev/null -S SOCKET ARGS` (no user configuration), its output.
    ///
    /// ```no_run
    /// # let t = relay_tests::tmux::Tmux::start("/var/tmp/x/tmux.sock".as_ref(), "/".as_ref(), "sleep 5");
    /// t.run(&["send-keys", "-t", "turn", "Enter"]);
    /// ```
    pub fn run(&self, args: &[&str]) -> std::process::Output {
        self.command(args).output().expect("run tmux")
    }

    /// The command [`Tmux::run`] runs.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.args(["-f", "/dev/null", "-S"])
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    /// The pane's text now.
    ///
    /// ```no_run
    /// # let t = relay_tests::tmux::Tmux::start("/var/tmp/x/tmux.sock".as_ref(), "/".as_ref(), "sleep 5");
    /// let text = t.screen();
    /// ```
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "turn"]).stdout)
            .into_owned()
    }

    /// Polls the pane every 200 ms until `done(screen)` or `timeout`; returns the last screen
    /// and whether `done` held.
    ///
    /// ```no_run
    /// # let t = relay_tests::tmux::Tmux::start("/var/tmp/x/tmux.sock".as_ref(), "/".as_ref(), "sleep 5");
    /// let (_, seen) = t.wait(std::time::Duration::from_secs(1), &|s| s.contains("x"));
    /// ```
    pub fn wait(&self, timeout: Duration, done: &dyn Fn(&str) -> bool) -> (String, bool) {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if done(&screen) {
                return (screen, true);
            }
            if start.elapsed() > timeout {
                return (screen, false);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits up to `timeout` for the session to end (its command exited); true when it did.
    ///
    /// ```no_run
    /// # let t = relay_tests::tmux::Tmux::start("/var/tmp/x/tmux.sock".as_ref(), "/".as_ref(), "sleep 5");
    /// assert!(t.gone(std::time::Duration::from_secs(10)));
    /// ```
    pub fn gone(&self, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if !self.run(&["has-session", "-t", "turn"]).status.success() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// True when Claude Code's terminal UI shows its prompt, ready for input.
///
/// ```
/// assert!(relay_tests::tmux::at_prompt("\u{276f} \n? for shortcuts"));
/// ```
pub fn at_prompt(screen: &str) -> bool {
    screen.contains('\u{276f}')
        && (screen.contains("shift+tab") || screen.contains("for shortcuts"))
}
