//! The state folder: `audit.jsonl`, `events.jsonl`, `relay-host.log` and the session folders.
//!
//! The folder is mode 0700 and every file in it 0600, whatever the umask. Every line written to
//! the log passes through the [`Redactor`].

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::Value;

use relay_token::Redactor;

/// The audit log's file name.
pub(crate) const AUDIT_FILE: &str = "audit.jsonl";
/// The event log's file name.
pub(crate) const EVENTS_FILE: &str = "events.jsonl";
/// The host log's file name.
pub(crate) const LOG_FILE: &str = "relay-host.log";
/// The folder of session folders.
pub(crate) const SESSIONS_DIR: &str = "sessions";
/// The relay-owned Claude config folder (`CLAUDE_CONFIG_DIR` of the `claude-code` template).
pub(crate) const CLAUDE_CONFIG_DIR: &str = "claude";

/// The free space a launch needs in the state folder's file system: its logs' rows, the session
/// folder and what the session writes to the relay-owned Claude config folder.
pub(crate) const MIN_FREE_BYTES: u64 = 1 << 20;

/// The host's state folder.
#[derive(Debug)]
pub(crate) struct State {
    dir: PathBuf,
    /// The redactor before the launch has read a token (it knows every token's shape).
    before_token: Redactor,
    /// The redactor that knows the launch's token, once the launch has read it.
    learned: std::sync::OnceLock<Redactor>,
}

/// Creates `dir` (and missing parents) with mode 0700 and makes sure it is 0700.
pub(crate) fn private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let meta = fs::metadata(dir)?;
    if meta.permissions().mode() & 0o777 != 0o700 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// An exclusive `flock` on the folder `dir` itself (no lock file is left behind), waiting for
/// whoever holds it; held until the returned descriptor is closed (close-on-exec: no child
/// inherits it).
pub(crate) fn lock_dir(dir: &Path) -> io::Result<File> {
    use std::os::fd::AsRawFd;
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)?;
    loop {
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(f);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Opens `path` for appending, creating it with mode 0600 (and fixing the mode of an older file).
pub(crate) fn append_private(path: &Path) -> io::Result<File> {
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
    pub(crate) fn open(dir: &Path) -> io::Result<State> {
        private_dir(dir)?;
        Ok(State {
            dir: dir.to_path_buf(),
            before_token: Redactor::default(),
            learned: std::sync::OnceLock::new(),
        })
    }

    /// Checks, before a launch, that the session's rows can be written: the folder's file system
    /// is not read-only and has at least [`MIN_FREE_BYTES`] free, and both logs open for
    /// appending (they are created when missing). The error names the folder.
    pub(crate) fn check_writable(&self) -> io::Result<()> {
        let named = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("state folder {}: {e}", self.dir.display()),
            )
        };
        let st =
            relay_token::sys::fstatvfs(File::open(&self.dir).map_err(named)?).map_err(named)?;
        if st.f_flag & libc::ST_RDONLY != 0 {
            return Err(named(io::Error::from_raw_os_error(libc::EROFS)));
        }
        // The field types differ between systems (u32 on macOS).
        #[allow(clippy::useless_conversion)]
        let free = u64::from(st.f_bavail).saturating_mul(u64::from(st.f_frsize));
        if free < MIN_FREE_BYTES {
            return Err(io::Error::new(
                io::Error::from_raw_os_error(libc::ENOSPC).kind(),
                format!(
                    "state folder {}: its file system is full ({free} bytes free; a launch \
                     needs {MIN_FREE_BYTES} for its logs and session folder)",
                    self.dir.display()
                ),
            ));
        }
        for name in [AUDIT_FILE, EVENTS_FILE] {
            append_private(&self.dir.join(name)).map_err(|e| {
                io::Error::new(e.kind(), format!("{}: {e}", self.dir.join(name).display()))
            })?;
        }
        Ok(())
    }

    /// The folder.
    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    /// Sets the redactor used for every line written from now on: one that knows the launch's
    /// token, once it is read. Set once (a launch reads one token); a later call changes nothing
    /// and returns `false`. Through `&self`, so a launch's steps share the state unchanged.
    pub(crate) fn set_redactor(&self, redactor: Redactor) -> bool {
        self.learned.set(redactor).is_ok()
    }

    /// The redactor in use.
    pub(crate) fn redactor(&self) -> &Redactor {
        self.learned.get().unwrap_or(&self.before_token)
    }

    fn append_line(&self, name: &str, line: &str) -> io::Result<()> {
        let mut text = self.redactor().redact(line);
        text.push('\n');
        // One write per line: O_APPEND keeps concurrent writers' lines whole.
        append_private(&self.dir.join(name))?.write_all(text.as_bytes())
    }

    /// Appends one JSON line to `events.jsonl`, with a `ts` field (seconds since the epoch)
    /// unless it has one.
    pub(crate) fn event(&self, value: &Value) -> io::Result<()> {
        let mut row = value.clone();
        if let Value::Object(map) = &mut row {
            map.entry("ts").or_insert_with(|| Value::from(now_secs()));
        }
        self.append_line(EVENTS_FILE, &row.to_string())
    }

    /// Appends one JSON line to `audit.jsonl`, with a `ts` field (seconds since the epoch).
    pub(crate) fn audit(&self, mut row: Value) -> io::Result<()> {
        if let Value::Object(map) = &mut row {
            map.insert("ts".into(), Value::from(now_secs()));
        }
        self.append_line(AUDIT_FILE, &row.to_string())
    }

    /// Appends one line to `relay-host.log` (redacted, with a timestamp) and returns the redacted
    /// text, for a caller that also prints it.
    pub(crate) fn log(&self, line: &str) -> String {
        let redacted = self.redactor().redact(line);
        // A log that cannot be written must not stop a launch; the line still reaches stderr
        // through the caller.
        let _ = self.append_line(
            LOG_FILE,
            &format!("{} {redacted}", super::time::now_rfc3339()),
        );
        redacted
    }

    /// The folder of one session.
    pub(crate) fn session_dir(&self, id: &str) -> PathBuf {
        self.dir.join(SESSIONS_DIR).join(id)
    }

    /// The relay-owned Claude config folder.
    pub(crate) fn claude_config_dir(&self) -> PathBuf {
        self.dir.join(CLAUDE_CONFIG_DIR)
    }

    /// The lines of one of the logs (`audit.jsonl` or `events.jsonl`), each parsed as JSON; a
    /// missing file is empty.
    #[cfg(test)]
    pub(crate) fn read_jsonl(&self, name: &str) -> io::Result<Vec<Value>> {
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

/// The mark a session folder holds when its request asked to keep it (`"keep": true`) for a
/// later `resume`; a kept folder outlives its session until `gc` finds it older than the
/// retention.
pub(crate) const KEEP_MARK: &str = "keep";

/// The mark the host writes in a session folder once the session's `exit` event is written (just
/// before the folder is removed, or for a kept folder, kept). An unlocked folder without it is a
/// session whose host was lost (`kill -9`, a crash, a power cut): no `exit` row was written, and
/// `gc` writes one with `"outcome": "host_lost"`.
pub(crate) const ENDED_MARK: &str = "ended";

/// The `outcome` of the `exit` row `gc` writes for a session whose host was lost.
pub(crate) const HOST_LOST: &str = "host_lost";

/// How long `gc` keeps a kept session folder after its session ended, by default.
pub(crate) const DEFAULT_RETENTION_DAYS: u64 = 7;

/// What [`gc_sessions`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GcReport {
    /// Session folders removed.
    pub(crate) removed: usize,
    /// Kept folders younger than the retention, left in place.
    pub(crate) kept: usize,
    /// Folders of running sessions, left in place.
    pub(crate) running: usize,
    /// Sessions whose host was lost before it wrote their `exit` row: `gc` wrote one each
    /// (`"outcome": "host_lost"`).
    pub(crate) lost: usize,
}

/// True while a session holds its folder's lock.
pub(crate) fn session_locked(dir: &Path) -> bool {
    match File::open(dir.join("lock")) {
        // SAFETY: flock on a descriptor we own; LOCK_NB never blocks.
        Ok(f) => unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&f),
                libc::LOCK_SH | libc::LOCK_NB,
            ) != 0
        },
        Err(_) => false,
    }
}

impl State {
    /// Marks the session's folder as kept (the request said `"keep": true`).
    pub(crate) fn mark_kept(&self, id: &str) -> io::Result<()> {
        append_private(&self.session_dir(id).join(KEEP_MARK)).map(drop)
    }

    /// Called when a session ends: removes its folder unless it is kept, in which case the
    /// mark's time becomes the end of the session (the retention counts from there).
    pub(crate) fn end_session(&self, id: &str) {
        let dir = self.session_dir(id);
        // First the mark: a folder that cannot be removed is not taken for a lost session.
        let _ = append_private(&dir.join(ENDED_MARK));
        let mark = dir.join(KEEP_MARK);
        if mark.exists() {
            let _ = File::options()
                .append(true)
                .open(&mark)
                .and_then(|f| f.set_modified(std::time::SystemTime::now()));
        } else if let Err(e) = fs::remove_dir_all(&dir) {
            if e.kind() != io::ErrorKind::NotFound {
                self.log(&format!("session {id}: remove {}: {e}", dir.display()));
            }
        }
    }
}

/// Removes the session folders in `sessions` (which may be missing: then nothing is done or
/// made) that no running session holds: unkept ones (a host killed before it could remove them)
/// at once, kept ones once their session ended more than `retention` ago. A session whose host
/// was lost gets its `exit` row first ([`HOST_LOST`]), in the `events.jsonl` beside `sessions`.
pub(crate) fn gc_sessions(sessions: &Path, retention: std::time::Duration) -> io::Result<GcReport> {
    let mut report = GcReport::default();
    let entries = match fs::read_dir(sessions) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(report),
        Err(e) => return Err(e),
    };
    let now = std::time::SystemTime::now();
    for entry in entries {
        let dir = entry?.path();
        if !dir.is_dir() || session_locked(&dir) {
            report.running += usize::from(dir.is_dir());
            continue;
        }
        if host_lost(&dir) {
            record_host_lost(sessions, &dir)?;
            report.lost += 1;
        }
        let kept_for = fs::metadata(dir.join(KEEP_MARK))
            .and_then(|m| m.modified())
            .map(|t| now.duration_since(t).unwrap_or_default());
        match kept_for {
            Ok(age) if age <= retention => report.kept += 1,
            _ => {
                fs::remove_dir_all(&dir)?;
                report.removed += 1;
            }
        }
    }
    Ok(report)
}

/// True when `dir` is the folder of a session no host supervises and none ended: no lock held,
/// no [`ENDED_MARK`].
pub(crate) fn host_lost(dir: &Path) -> bool {
    dir.is_dir() && !session_locked(dir) && fs::symlink_metadata(dir.join(ENDED_MARK)).is_err()
}

/// Writes the `exit` row of the lost session in `dir` to the `events.jsonl` beside `sessions`
/// (`"code": null, "outcome": "host_lost"`), then marks the folder ended, so the row is written
/// once even when the folder is kept.
fn record_host_lost(sessions: &Path, dir: &Path) -> io::Result<()> {
    let state = State::open(sessions.parent().unwrap_or(sessions))?;
    let id = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    state.event(&serde_json::json!({
        "event": "exit",
        "session_id": id,
        "code": null,
        "outcome": HOST_LOST,
        "ts": now_secs(),
    }))?;
    state.log(&format!(
        "session {}: its host was lost before the session's end was recorded; exit row written \
         by gc",
        id.unwrap_or_default()
    ));
    append_private(&dir.join(ENDED_MARK)).map(drop)
}

/// The folder in the config folder whose files seed the relay-owned Claude config folder.
pub(crate) const CLAUDE_SEED_DIR: &str = "claude-seed";

/// The files a seed may hold.
pub(crate) const CLAUDE_SEED_FILES: [&str; 2] = ["settings.json", "CLAUDE.md"];

/// The largest seed file copied.
const MAX_SEED_BYTES: u64 = 1 << 20;

/// Copies the operator's `settings.json` and `CLAUDE.md` from `config_dir/claude-seed/` into the
/// relay-owned Claude config folder where it has none yet (a fresh folder, on the first run).
/// Copied, never linked: each seed file must be a regular file (not followed when a link), and
/// is written as a new 0600 file that an existing name (a link a session planted included) is
/// never written through. A file that cannot be copied is left out.
pub(crate) fn seed_claude_config(config_dir: &Path, claude_config: &Path) {
    let seed = config_dir.join(CLAUDE_SEED_DIR);
    for name in CLAUDE_SEED_FILES {
        let _ = copy_seed(&seed.join(name), &claude_config.join(name));
    }
}

/// Claude Code's state file in its config folder.
pub(crate) const CLAUDE_STATE_FILE: &str = ".claude.json";

/// A new 0600 file at `path`; an existing name (a link a session planted included) is an
/// error, never written through.
fn create_private_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

fn copy_seed(from: &Path, to: &Path) -> io::Result<()> {
    let src = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(from)?;
    let meta = src.metadata()?;
    if !meta.is_file() || meta.len() > MAX_SEED_BYTES {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    let mut dst = create_private_new(to)?;
    io::copy(&mut io::Read::take(src, MAX_SEED_BYTES), &mut dst)?;
    Ok(())
}

/// Takes the session folder's lock (`dir/lock`, exclusive, not waiting): `WouldBlock` when a
/// session holds it.
pub(crate) fn lock_session(dir: &Path) -> io::Result<File> {
    let f = append_private(&dir.join("lock"))?;
    // SAFETY: flock on a descriptor we own; LOCK_NB never blocks.
    if unsafe {
        libc::flock(
            std::os::fd::AsRawFd::as_raw_fd(&f),
            libc::LOCK_EX | libc::LOCK_NB,
        )
    } != 0
    {
        return Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "is already running",
        ));
    }
    Ok(f)
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
        let state = State::open(&dir.path().join("state")).unwrap();
        assert_eq!(state.path(), dir.path().join("state"));
        assert!(state.read_jsonl(AUDIT_FILE).unwrap().is_empty());
        state.event(&serde_json::json!({"event": "hello"})).unwrap();
        let events = state.read_jsonl(EVENTS_FILE).unwrap();
        assert_eq!(events[0]["event"], "hello");
        assert!(events[0]["ts"].is_u64(), "an event carries its time");
        state
            .audit(serde_json::json!({"event": "session_launch"}))
            .unwrap();
        assert!(state.read_jsonl(AUDIT_FILE).unwrap()[0]["ts"].is_u64());
        let secret = "zq7-not-shaped-like-a-token";
        assert_eq!(state.log(&format!("k {secret}")), format!("k {secret}"));
        let token = relay_token::ClaudeToken::from_bytes(secret.as_bytes()).unwrap();
        assert!(state.set_redactor(Redactor::new(Some(&token))));
        assert!(!state.set_redactor(Redactor::default()), "set once");
        assert_eq!(state.redactor().redact("Bearer x"), "Bearer [REDACTED]");
        // Every line written from now on knows the token: the log, the events, the audit.
        assert_eq!(state.log(&format!("k {secret}")), "k [REDACTED]");
        state
            .event(&serde_json::json!({"event": "x", "m": secret}))
            .unwrap();
        assert!(!fs::read_to_string(state.path().join(EVENTS_FILE))
            .unwrap()
            .contains(secret));
        assert_eq!(
            state.log("refused: Bearer abc"),
            "refused: Bearer [REDACTED]"
        );
        let log = fs::read_to_string(state.path().join(LOG_FILE)).unwrap();
        assert!(
            log.ends_with("Z refused: Bearer [REDACTED]\n"),
            "RFC 3339 first: {log}"
        );
        assert!(state.session_dir("s1").ends_with("sessions/s1"));
        assert!(state.claude_config_dir().ends_with("claude"));
    }

    /// `check_writable`'s example.
    #[test]
    fn check_writable_doc_example() {
        let result = (|| {
            let dir = tempfile::tempdir()?;
            let state = crate::state::State::open(dir.path())?;
            state.check_writable()?;
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `GcReport`'s example.
    #[test]
    fn gc_report_doc_example() {
        let r = super::GcReport::default();
        assert_eq!((r.removed, r.kept, r.running), (0, 0, 0));
    }

    /// `session_locked`'s example.
    #[test]
    fn session_locked_doc_example() {
        let result = (|| {
            let dir = tempfile::tempdir()?;
            assert!(!crate::state::session_locked(dir.path()));
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `mark_kept`'s example.
    #[test]
    fn mark_kept_doc_example() {
        let result = (|| {
            let dir = tempfile::tempdir()?;
            let state = crate::state::State::open(dir.path())?;
            crate::state::private_dir(&state.session_dir("s1"))?;
            state.mark_kept("s1")?;
            assert!(state.session_dir("s1").join("keep").exists());
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `end_session`'s example.
    #[test]
    fn end_session_doc_example() {
        let result = (|| {
            let dir = tempfile::tempdir()?;
            let state = crate::state::State::open(dir.path())?;
            crate::state::private_dir(&state.session_dir("s1"))?;
            state.end_session("s1");
            assert!(!state.session_dir("s1").exists());
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `State::gc`'s example, now on `gc_sessions`: a folder no session holds is removed.
    #[test]
    fn gc_sessions_removes_an_unheld_folder() {
        let result = (|| {
            let dir = tempfile::tempdir()?;
            let state = crate::state::State::open(dir.path())?;
            crate::state::private_dir(&state.session_dir("old"))?;
            let week = std::time::Duration::from_secs(7 * 86400);
            let report = crate::state::gc_sessions(&dir.path().join(super::SESSIONS_DIR), week)?;
            assert_eq!(report.removed, 1);
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `gc_sessions`'s example.
    #[test]
    fn gc_sessions_doc_example() {
        let result = (|| {
            let dir = tempfile::tempdir()?;
            let r = crate::state::gc_sessions(&dir.path().join("sessions"), Default::default())?;
            assert_eq!(r.removed, 0);
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `host_lost`'s example.
    #[test]
    fn host_lost_doc_example() {
        let result = (|| {
            let dir = tempfile::tempdir()?;
            assert!(crate::state::host_lost(dir.path()));
            std::fs::write(dir.path().join("ended"), "")?;
            assert!(!crate::state::host_lost(dir.path()));
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `seed_claude_config`'s example.
    #[test]
    fn seed_claude_config_doc_example() {
        let result = (|| {
            let cfg = tempfile::tempdir()?;
            let claude = tempfile::tempdir()?;
            std::fs::create_dir(cfg.path().join("claude-seed"))?;
            std::fs::write(cfg.path().join("claude-seed/CLAUDE.md"), "Be brief.\n")?;
            crate::state::seed_claude_config(cfg.path(), claude.path());
            assert_eq!(
                std::fs::read_to_string(claude.path().join("CLAUDE.md"))?,
                "Be brief.\n"
            );
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `now_secs`'s example.
    #[test]
    fn now_secs_doc_example() {
        assert!(crate::state::now_secs() > 0);
    }
}
