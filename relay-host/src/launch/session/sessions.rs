//! The running sessions: each launch writes a record in its session folder once its session
//! started ([`Record`]); `relay-host ps` (`crate::cli::ps`) lists the records of the sessions that still run ([`running`]), and a
//! Claude launch in a project where a Claude session already runs is warned, refused or let be
//! ([`SameProject`]).
//!
//! A record alone proves nothing (a host killed with `kill -9` leaves its record behind): a
//! session runs while its folder's lock is held and its shim's process is alive.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::human::path_json;
use crate::launch::plan::error::RequestError;
use crate::launch::plan::LaunchPlan;
use crate::launch::prepare::token_mode::TokenMode;
use crate::settings::SameProject;
use crate::state::{self, SESSIONS_DIR};

/// The record's file name in a session folder.
const RECORD_FILE: &str = "session.json";

/// What `ps` shows of one session, written once its session started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The session id.
    pub id: String,
    /// The template's id.
    pub template: String,
    /// The request's kind (`claude`, `terminal`, ...).
    pub kind: String,
    /// The project folder (its real path), if any.
    pub project: Option<PathBuf>,
    /// The session's program (sandboxed: bwrap, which runs it), as the shim reported it.
    pub pid: i64,
    /// The shim's pid.
    pub shim_pid: u32,
    /// The supervising host's pid.
    pub host_pid: u32,
    /// When the session started, RFC 3339 in UTC.
    pub started: String,
    /// True when the session was handed the token (or a stand-in for it) on fd 5.
    pub token: bool,
    /// What fd 5 carried: `stand_in`, `pipe` (the real token) or `none` (a record written
    /// before this field: `pipe` or `none`, from `token`).
    #[serde(default)]
    pub token_mode: Option<String>,
    /// The session's network: `host`, `none` or `allow-list`.
    pub network: String,
}

impl Record {
    /// The record of a launch that started: its request, its program's and shim's pids, whether
    /// it carries the token.
    pub(crate) fn of(v: &LaunchPlan, pid: i64, shim_pid: u32, token_mode: &TokenMode) -> Record {
        let network = if v.sandboxed() {
            v.network().word()
        } else {
            "host"
        };
        Record {
            id: v.session_id().to_string(),
            template: v.template().id.clone(),
            kind: v.kind().as_str().to_string(),
            project: v.project().map(Path::to_path_buf),
            pid,
            shim_pid,
            host_pid: std::process::id(),
            started: crate::state::time::now_rfc3339(),
            token: token_mode.carries_token(),
            token_mode: Some(token_mode.word().to_string()),
            network: network.to_string(),
        }
    }

    /// What fd 5 carried: `stand_in`, `pipe` or `none`.
    pub(crate) fn token_mode(&self) -> &str {
        match (&self.token_mode, self.token) {
            (Some(m), _) => m,
            (None, true) => TokenMode::Pipe.word(),
            (None, false) => TokenMode::None.word(),
        }
    }

    /// True for a Claude session (kind `claude`, or the `claude-code` template).
    fn claude(&self) -> bool {
        self.kind == "claude" || self.template == crate::launch::plan::request::CLAUDE_TEMPLATE
    }

    /// Writes the record into the session folder `dir` (0600).
    pub(crate) fn write(&self, dir: &Path) -> std::io::Result<()> {
        use std::io::Write;
        let text = serde_json::to_string(self).map_err(std::io::Error::other)?;
        let path = dir.join(RECORD_FILE);
        let _ = std::fs::remove_file(&path);
        state::append_private(&path)?.write_all(text.as_bytes())
    }

    /// The record as JSON for `ps --json`, with a stand-in session's API use so far.
    pub(crate) fn to_json(&self, state_dir: &Path) -> serde_json::Value {
        let mut v = json!({"id": self.id, "template": self.template, "kind": self.kind,
               "project": self.project.as_deref().map(path_json), "pid": self.pid,
               "shim_pid": self.shim_pid, "host_pid": self.host_pid, "started": self.started,
               "token": self.token, "token_mode": self.token_mode(), "network": self.network});
        if let Some(u) = self.api_use(state_dir) {
            v["token_refused"] = json!(u.refused());
            v["api_use"] = serde_json::to_value(u).unwrap_or_default();
        }
        if self.network == "allow-list" {
            v["network_denied"] = json!(self.denied(state_dir));
        }
        v
    }

    /// How many connections the session's allow-list refused so far.
    pub(crate) fn denied(&self, state_dir: &Path) -> u64 {
        crate::launch::session::denied::refused(state_dir, &self.id)
            .iter()
            .map(|r| r.count)
            .sum()
    }

    /// A stand-in session's API use so far (nothing yet: none counted).
    pub(crate) fn api_use(
        &self,
        state_dir: &Path,
    ) -> Option<crate::launch::network::api_use::ApiUse> {
        if self.token_mode() != crate::settings::TokenMode::StandIn.word() {
            return None;
        }
        let dir = state_dir.join(SESSIONS_DIR).join(&self.id);
        Some(crate::launch::network::api_use::ApiUse::read(&dir).unwrap_or_default())
    }
}

/// True while `pid` names a process that is not a zombie.
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        // No procfs (macOS): signal 0 asks the kernel.
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: kill with signal 0 sends nothing; it takes integers only.
        return pid > 0
            && (unsafe { libc::kill(pid, 0) } == 0
                || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM));
    };
    stat.rfind(')')
        .is_some_and(|i| !stat[i + 1..].trim_start().starts_with('Z'))
}

/// The sessions of this state folder that run now: a record, the folder's lock held, the shim
/// alive. Sorted by start time, then id.
pub(crate) fn running(state_dir: &Path) -> Vec<Record> {
    let mut out: Vec<Record> = std::fs::read_dir(state_dir.join(SESSIONS_DIR))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|d| state::session_locked(d))
        .filter_map(|d| std::fs::read_to_string(d.join(RECORD_FILE)).ok())
        .filter_map(|t| serde_json::from_str::<Record>(&t).ok())
        .filter(|r| alive(r.shim_pid))
        .collect();
    out.sort_by(|a, b| (&a.started, &a.id).cmp(&(&b.started, &b.id)));
    out
}

/// The lock of the project whose Claude launch is being checked: taken before
/// [`check_same_project`] reads the running sessions, held until the launch's record exists
/// ([`release_project`]), so two launches started at the same moment are checked one after the
/// other and the second sees the first.
static PROJECT_LOCK: std::sync::Mutex<Option<std::fs::File>> = std::sync::Mutex::new(None);

/// Takes `project`'s lock (an exclusive `flock` on the project folder itself, waiting for a
/// launch that holds it) and keeps it until [`release_project`]. A lock that cannot be taken is
/// logged: the check then runs unguarded.
fn lock_project(state: &state::State, project: &Path) {
    match state::lock_dir(project) {
        Ok(f) => *PROJECT_LOCK.lock().unwrap_or_else(|e| e.into_inner()) = Some(f),
        Err(e) => {
            state.log(&format!("project lock for {}: {e}", project.display()));
        }
    }
}

/// Lets the next launch in the project be checked: this launch's record exists, or it ended.
pub(crate) fn release_project() {
    PROJECT_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
}

/// Before a launch is prepared: refuses one whose session id's session still runs (its folder
/// is locked), then checks its project ([`check_same_project`]).
pub(crate) fn check_launch(state: &state::State, v: &LaunchPlan) -> Result<(), RequestError> {
    if crate::state::session_locked(&state.session_dir(v.session_id())) {
        let session_id = v.session_id().to_string();
        return Err(RequestError::SessionRunning { session_id });
    }
    check_same_project(state, v)
}

/// Before a Claude launch: the Claude sessions already running in its project, by the
/// template's `same_project` rule. Refuses, or prints the warning (and logs it), or says
/// nothing. Takes the project's lock first (see [`PROJECT_LOCK`]).
fn check_same_project(state: &state::State, v: &LaunchPlan) -> Result<(), RequestError> {
    let rule = v.template().same_project.unwrap_or_default();
    let (Some(project), true, false) = (v.project(), v.claude(), rule == SameProject::Allow) else {
        return Ok(());
    };
    lock_project(state, project);
    let others: Vec<Record> = running(state.path())
        .into_iter()
        .filter(|r| r.claude() && r.project.as_deref() == Some(project))
        .collect();
    let Some(first) = others.first() else {
        return Ok(());
    };
    if rule == SameProject::Refuse {
        return Err(RequestError::ProjectBusy {
            project: project.to_path_buf(),
            session_id: first.id.clone(),
        });
    }
    let text = format!(
        "warning: a Claude session already runs in {} (session {}, pid {}): both share Claude's \
         state; `relay-host ps` lists the sessions (the template's \"same_project\": \"refuse\" \
         refuses such a launch)",
        project.display(),
        first.id,
        first.pid
    );
    state.log(&text);
    if crate::human::for_person() {
        errln!("relay-host: {text}");
    } else {
        errln!("{}", json!({"warning": text}));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as an older host wrote it: without `token_mode`.
    fn record(token: bool) -> Record {
        let text = format!(
            r#"{{"id":"s1","template":"shell","kind":"terminal","project":null,"pid":7,
                "shim_pid":6,"host_pid":5,"started":"2026-01-02T03:04:05Z","token":{token},
                "network":"host"}}"#
        );
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn a_record_reads_as_an_older_host_wrote_it() {
        assert_eq!(record(false).id, "s1");
    }

    #[test]
    fn a_record_without_its_token_mode_reads_it_from_token() {
        assert_eq!(record(true).token_mode(), "pipe");
        assert_eq!(record(false).token_mode(), "none");
    }

    #[test]
    fn no_session_runs_in_a_state_folder_without_sessions() {
        assert!(running("/nonexistent".as_ref()).is_empty());
    }
}
