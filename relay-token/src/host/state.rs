//! The state folder: `audit.jsonl`, `events.jsonl`, `relay-host.log` and the session folders.
//!
//! The folder is mode 0700 and every file in it 0600, whatever the umask. Every line written to
//! the log passes through the [`Redactor`].

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::redact::Redactor;

/// The audit log's file name.
pub const AUDIT_FILE: &str = "audit.jsonl";
/// The event log's file name.
pub const EVENTS_FILE: &str = "events.jsonl";
/// The host log's file name.
pub const LOG_FILE: &str = "relay-host.log";
/// The folder of session folders.
pub const SESSIONS_DIR: &str = "sessions";
/// The relay-owned Claude config folder (`CLAUDE_CONFIG_DIR` of the `claude-code` template).
pub const CLAUDE_CONFIG_DIR: &str = "claude";

/// The host's state folder.
#[derive(Debug)]
pub struct State {
    dir: PathBuf,
    redactor: Redactor,
}

/// Creates `dir` (and missing parents) with mode 0700 and makes sure it is 0700.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let meta = fs::metadata(dir)?;
    if meta.permissions().mode() & 0o777 != 0o700 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Opens `path` for appending, creating it with mode 0600 (and fixing the mode of an older file).
pub fn append_private(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)?;
    if f.metadata()?.permissions().mode() & 0o777 != 0o600 {
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
    }
    Ok(f)
}

impl State {
    /// Opens (creating when missing) the state folder.
    pub fn open(dir: &Path) -> io::Result<State> {
        private_dir(dir)?;
        Ok(State {
            dir: dir.to_path_buf(),
            redactor: Redactor::default(),
        })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Replaces the redactor used for every line written from now on (one that knows the
    /// token, once it is read).
    pub fn set_redactor(&mut self, redactor: Redactor) {
        self.redactor = redactor;
    }

    /// The redactor in use.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    fn append_line(&self, name: &str, line: &str) -> io::Result<()> {
        let mut text = self.redactor.redact(line);
        text.push('\n');
        // One write per line: O_APPEND keeps concurrent writers' lines whole.
        append_private(&self.dir.join(name))?.write_all(text.as_bytes())
    }

    /// Appends one JSON line to `events.jsonl`.
    pub fn event(&self, value: &Value) -> io::Result<()> {
        self.append_line(EVENTS_FILE, &value.to_string())
    }

    /// Appends one JSON line to `audit.jsonl`, with a `ts` field (seconds since the epoch).
    pub fn audit(&self, mut row: Value) -> io::Result<()> {
        if let Value::Object(map) = &mut row {
            map.insert("ts".into(), Value::from(now_secs()));
        }
        self.append_line(AUDIT_FILE, &row.to_string())
    }

    /// Appends one line to `relay-host.log` (redacted, with a timestamp) and returns the redacted
    /// text, for a caller that also prints it.
    pub fn log(&self, line: &str) -> String {
        let redacted = self.redactor.redact(line);
        // A log that cannot be written must not stop a launch; the line still reaches stderr
        // through the caller.
        let _ = self.append_line(LOG_FILE, &format!("{} {redacted}", now_secs()));
        redacted
    }

    /// The folder of one session.
    pub fn session_dir(&self, id: &str) -> PathBuf {
        self.dir.join(SESSIONS_DIR).join(id)
    }

    /// The relay-owned Claude config folder.
    pub fn claude_config_dir(&self) -> PathBuf {
        self.dir.join(CLAUDE_CONFIG_DIR)
    }

    /// The lines of one of the logs (`audit.jsonl` or `events.jsonl`), each parsed as JSON; a
    /// missing file is empty.
    pub fn read_jsonl(&self, name: &str) -> io::Result<Vec<Value>> {
        let text = match fs::read_to_string(self.dir.join(name)) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| Value::String(l.to_string())))
            .collect())
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn folders_are_0700_and_files_0600() {
        let dir = tempfile::tempdir().unwrap();
        private_dir(&dir.path().join("a/b")).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.path().join("a/b")), 0o700);
        drop(append_private(&dir.path().join("x.log")).unwrap());
        assert_eq!(mode(&dir.path().join("x.log")), 0o600);
    }

    #[test]
    fn lines_are_redacted_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = State::open(&dir.path().join("state")).unwrap();
        assert_eq!(state.path(), dir.path().join("state"));
        assert!(state.read_jsonl(AUDIT_FILE).unwrap().is_empty());
        state.event(&serde_json::json!({"event": "hello"})).unwrap();
        assert_eq!(
            fs::read_to_string(state.path().join(EVENTS_FILE)).unwrap(),
            "{\"event\":\"hello\"}\n"
        );
        state
            .audit(serde_json::json!({"event": "session_launch"}))
            .unwrap();
        assert!(state.read_jsonl(AUDIT_FILE).unwrap()[0]["ts"].is_u64());
        state.set_redactor(Redactor::default());
        assert_eq!(state.redactor().redact("Bearer x"), "Bearer [REDACTED]");
        assert_eq!(
            state.log("refused: Bearer abc"),
            "refused: Bearer [REDACTED]"
        );
        let log = fs::read_to_string(state.path().join(LOG_FILE)).unwrap();
        assert!(log.ends_with(" refused: Bearer [REDACTED]\n"), "{log}");
        assert!(state.session_dir("s1").ends_with("sessions/s1"));
        assert!(state.claude_config_dir().ends_with("claude"));
    }
}
