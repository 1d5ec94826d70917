//! Claude Code's configuration folder of one launch, out of every session's reach.
//!
//! A launch's `{claude_config}` (its grant and its `CLAUDE_CONFIG_DIR`) is a fresh folder in its
//! own session folder (`launch_dir`), never the relay-owned persistent folder in the state
//! folder, which no sandbox sees. At launch it is seeded from the operator's `claude-seed/`
//! (vetted, outside every grant), relay's answers (onboarding done for a launch with the token
//! or behind a gateway, the operator's project trusted) laid over the
//! persistent folder's named state only; when the session ends, only named state is carried
//! back (`carry_back`):
//!
//! - `.claude.json`: the keys of [`STATE_KEYS`] and, for the launch's own project only
//!   ([`scoped`]), of [`PROJECT_KEYS`], each of its expected type, parsed and written again
//!   (never `mcpServers`, `env`, hooks, helpers);
//! - conversation transcripts of the launch's own project, `projects/<folder>/<id>.jsonl`
//!   ([`transcript_folder`]), for a later `--resume` or `--continue` (copied into a launch of
//!   that project only when it resumes), counted by the blocks they hold within a total per
//!   session, a refusal logged.
//!
//! Nothing else a session writes there (`settings*.json`, `CLAUDE.md`, `commands/`, `agents/`,
//! `skills/`, `plugins/`, `output-styles/`, `.credentials.json`, a project's `memory/`) reaches
//! a later session. Files are read without following links (regular files only, size-capped);
//! the persistent folder is written by new files renamed into place, under its lock.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::state::{self, CLAUDE_STATE_FILE};

/// The launch's Claude config folder in its session folder.
const LAUNCH_DIR: &str = "claude";
/// Claude Code's transcripts folder in a config folder.
const PROJECTS: &str = "projects";
/// The largest `.claude.json` read.
const MAX_STATE_BYTES: u64 = 4 << 20;
/// The largest transcript carried.
const MAX_TRANSCRIPT_BYTES: u64 = 256 << 20;
/// The most project entries (and transcripts per project folder) carried.
const MAX_ENTRIES: usize = 10_000;
/// The most bytes of transcripts one session carries back, all together.
const MAX_SESSION_BYTES: u64 = 256 << 20;
/// The file in the session folder (beside the launch's Claude config folder, out of the
/// session's reach) naming the launch's project, for a carry-back after a lost host (`gc`).
pub(crate) const PROJECT_FILE: &str = "claude-project";
/// The longest string value carried.
const MAX_STRING: usize = 256;

/// The type a carried key must have.
#[derive(Clone, Copy)]
enum Kind {
    Bool,
    Number,
    Text,
}

/// The top-level keys of `.claude.json` carried between sessions: first-run state only.
const STATE_KEYS: &[&str] = &[
    "hasCompletedOnboarding",
    "lastOnboardingVersion",
    "numStartups",
    "firstStartTime",
    "userID",
];

const STATE_KINDS: [Kind; 5] = [Kind::Bool, Kind::Text, Kind::Number, Kind::Text, Kind::Text];

/// The keys of a `projects.<path>` entry carried between sessions: the trust answer and the
/// project's onboarding.
const PROJECT_KEYS: &[&str] = &[
    "hasTrustDialogAccepted",
    "hasCompletedProjectOnboarding",
    "projectOnboardingSeenCount",
];

const PROJECT_KINDS: [Kind; 3] = [Kind::Bool, Kind::Bool, Kind::Number];

/// The launch's Claude config folder inside its session folder.
pub(crate) fn launch_dir(session_dir: &Path) -> PathBuf {
    session_dir.join(LAUNCH_DIR)
}

/// `.claude.json`'s named state: [`STATE_KEYS`] and, per project (an absolute path),
/// [`PROJECT_KEYS`], each only of its type (a string of at most 256 bytes); everything else
/// (`mcpServers`, a project's `mcpServers`, `allowedTools`, `enabledMcpjsonServers`, ...) is left
/// out.
pub(crate) fn named_state(v: &Value) -> Value {
    let mut out = pick(v, STATE_KEYS, &STATE_KINDS);
    let projects: Map<String, Value> = (v["projects"].as_object().into_iter().flatten())
        .filter(|(p, _)| p.starts_with('/') && p.len() <= 4096)
        .take(MAX_ENTRIES)
        .map(|(p, e)| (p.clone(), pick(e, PROJECT_KEYS, &PROJECT_KINDS)))
        .filter(|(_, e)| e.as_object().is_some_and(|o| !o.is_empty()))
        .collect();
    if !projects.is_empty() {
        out["projects"] = Value::Object(projects);
    }
    out
}

/// The keys of `v` named in `keys`, each only of its kind.
fn pick(v: &Value, keys: &[&str], kinds: &[Kind]) -> Value {
    let mut out = Map::new();
    for (k, kind) in keys.iter().zip(kinds) {
        let ok = match (kind, &v[*k]) {
            (Kind::Bool, Value::Bool(_)) | (Kind::Number, Value::Number(_)) => true,
            (Kind::Text, Value::String(s)) => s.len() <= MAX_STRING,
            _ => false,
        };
        if ok {
            out.insert(k.to_string(), v[*k].clone());
        }
    }
    Value::Object(out)
}

/// `over`'s named state laid over `base`'s (per project, key by key).
fn merged(base: Value, over: Value) -> Value {
    let mut out = base;
    let Value::Object(over) = over else {
        return out;
    };
    for (k, v) in over {
        match (k.as_str(), v, out.get_mut("projects")) {
            ("projects", Value::Object(ps), Some(Value::Object(have))) => {
                for (p, e) in ps {
                    let old = have.remove(&p).unwrap_or(Value::Null);
                    have.insert(p, merged(old, e));
                }
            }
            (_, v, _) => {
                if !out.is_object() {
                    out = Value::Object(Map::new());
                }
                out[k] = v;
            }
        }
    }
    out
}

/// What a launch reads of the persistent folder.
pub(crate) struct Seed<'a> {
    /// Relay's config folder (its `claude-seed/`).
    pub config_dir: &'a Path,
    /// The relay-owned persistent Claude config folder.
    pub persistent: &'a Path,
    /// Onboarding marked done (a Claude launch with the token, a template behind a gateway).
    pub onboard: bool,
    /// The transcripts to copy in: none, one conversation (`Some(Some(id))`), or all
    /// (`Some(None)`, for `--continue`).
    pub resume: Option<Option<&'a str>>,
    /// The project to mark trusted ([`crate::settings::Template::trusts_project`]), if any.
    pub trust: Option<&'a Path>,
    /// The launch's project: the only one whose per-project state and transcripts it gets.
    pub project: Option<&'a Path>,
}

/// Makes the launch's folder afresh (whatever a previous launch of this session id left there
/// is removed, links not followed) and seeds it: the operator's `claude-seed/`, the persistent
/// folder's named state, onboarding, the transcripts a resume needs.
pub(crate) fn seed(launch: &Path, s: &Seed<'_>) -> io::Result<()> {
    match fs::symlink_metadata(launch) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(launch)?,
        Ok(_) => fs::remove_file(launch)?,
        Err(_) => {}
    }
    state::private_dir(launch)?;
    record_project(launch, s.project)?;
    state::seed_claude_config(s.config_dir, launch);
    // The persistent folder's named state, with relay's answers to Claude Code's first-run
    // questions laid over it, written once.
    let carried = read_state(&s.persistent.join(CLAUDE_STATE_FILE));
    let mut answer = Value::Object(Map::new());
    if s.onboard {
        answer = merged(answer, onboarded());
    }
    if let Some(project) = s.trust {
        answer = merged(answer, trusted(project));
    }
    let answered = answer.as_object().is_some_and(|m| !m.is_empty());
    if carried.is_some() || answered {
        let base = carried
            .map(|v| scoped(named_state(&v), s.project))
            .filter(Value::is_object)
            .unwrap_or_else(|| Value::Object(Map::new()));
        write_new(&launch.join(CLAUDE_STATE_FILE), &merged(base, answer))?;
    }
    if let (Some(which), Some(project)) = (s.resume, s.project) {
        let want = |name: &str| which.is_none_or(|id| name == format!("{id}.jsonl"));
        let (from, to) = (s.persistent.join(PROJECTS), launch.join(PROJECTS));
        let only = Only {
            folder: &transcript_folder(project),
            want: &want,
        };
        copy_transcripts(&from, &to, &only, &mut Budget::unlimited())?;
    }
    Ok(())
}

/// What marks `project` trusted in the launch folder's `.claude.json` (`projects.<project>.
/// hasTrustDialogAccepted`), laid over what the file holds.
fn trusted(project: &Path) -> Value {
    let key = project.to_string_lossy().into_owned();
    serde_json::json!({"projects": {key: {"hasTrustDialogAccepted": true}}})
}

/// What marks Claude Code's first-run onboarding done in the launch folder's `.claude.json`
/// (`hasCompletedOnboarding`, whatever a session's carried-back copy said): onboarding would
/// check Anthropic's `hello` endpoints and ask for a login that the token on fd 5 already is.
fn onboarded() -> Value {
    serde_json::json!({"hasCompletedOnboarding": true})
}

/// After the session: carries the launch folder's named state back into the persistent folder
/// (under its lock): `.claude.json`'s named state of the session's own project ([`scoped`])
/// laid over the persistent one's, and the transcripts of that project's folder that are new or
/// changed, within [`MAX_SESSION_BYTES`] of blocks actually written. Nothing else is read.
/// Returns what was refused (a sparse or oversized transcript, the session's total), each a
/// line for the state log: the user's history is never cut short silently.
pub(crate) fn carry_back(launch: &Path, persistent: &Path) -> io::Result<Vec<String>> {
    if !fs::symlink_metadata(launch).is_ok_and(|m| m.is_dir()) {
        return Ok(Vec::new());
    }
    let project = recorded_project(launch);
    state::private_dir(persistent)?;
    let lock = open_dir(persistent)?;
    // SAFETY: flock on a folder descriptor we own; it waits for another session's carry-back.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut result = Ok(());
    if let Some(new) = read_state(&launch.join(CLAUDE_STATE_FILE)) {
        let path = persistent.join(CLAUDE_STATE_FILE);
        let old = read_state(&path).map(|v| named_state(&v));
        let new = scoped(named_state(&new), project.as_deref());
        let want = merged(old.clone().unwrap_or(Value::Null), new);
        if old.as_ref() != Some(&want) {
            result = replace(&path, &mut serde_json::to_vec(&want)?.as_slice(), None);
        }
    }
    let mut budget = Budget::session();
    if let Some(project) = &project {
        let all = |_: &str| true;
        let only = Only {
            folder: &transcript_folder(project),
            want: &all,
        };
        let (from, to) = (launch.join(PROJECTS), persistent.join(PROJECTS));
        result = result.and(copy_transcripts(&from, &to, &only, &mut budget));
    }
    result.map(|_| budget.refused)
}

/// Before `gc` removes the folders of sessions that no host supervises (a host lost with
/// `kill -9`, whose shim kept the launch's Claude config folder for its conversation): their
/// named state and transcripts carried back, as the end of the session would have (what was
/// refused said on stderr).
pub(crate) fn carry_back_unsupervised(state_dir: &Path) {
    let persistent = state_dir.join(state::CLAUDE_CONFIG_DIR);
    let sessions = state_dir.join(state::SESSIONS_DIR);
    for e in fs::read_dir(sessions).into_iter().flatten().flatten() {
        if !state::session_locked(&e.path()) {
            let refused = carry_back(&launch_dir(&e.path()), &persistent).unwrap_or_default();
            for r in refused {
                eprintln!(
                    "relay-host: session {}: {r}",
                    e.file_name().to_string_lossy()
                );
            }
        }
    }
}

/// `v`'s per-project state for `project` only (none without a project): a session answers no
/// question (the trust dialog's) for another project, nor for a folder above its own.
pub(crate) fn scoped(mut v: Value, project: Option<&Path>) -> Value {
    let key = project.map(|p| p.to_string_lossy().into_owned());
    if let Some(Value::Object(ps)) = v.get_mut("projects") {
        ps.retain(|k, _| Some(k) == key.as_ref());
        if ps.is_empty() {
            v.as_object_mut().map(|o| o.remove("projects"));
        }
    }
    v
}

/// The folder of Claude Code 2.1.332's `projects/` holding `project`'s transcripts, exactly as
/// Claude names it: every UTF-16 unit of the path but an ASCII letter or digit made `-`; a name
/// over 200 characters is cut there and followed by `-` and Claude's hash of the path
/// ([`claude_hash`]). Carry-back and resume match this name exactly, never a prefix: two
/// projects whose paths share their first 200 characters have two folders.
pub(crate) fn transcript_folder(project: &Path) -> String {
    const CUT: usize = 200;
    let path = project.to_string_lossy();
    let name: String = path
        .encode_utf16()
        .map(|u| match char::from_u32(u32::from(u)) {
            Some(c) if c.is_ascii_alphanumeric() => c,
            _ => '-',
        })
        .collect();
    if name.len() <= CUT {
        return name;
    }
    format!("{}-{}", &name[..CUT], claude_hash(&path))
}

/// Claude Code's hash of a path for a long folder name: the 32-bit `h * 31 + unit` over its
/// UTF-16 units, its absolute value written in base 36.
fn claude_hash(path: &str) -> String {
    let mut h: i32 = 0;
    for u in path.encode_utf16() {
        h = h.wrapping_shl(5).wrapping_sub(h).wrapping_add(i32::from(u));
    }
    let mut n = i64::from(h).unsigned_abs();
    let mut digits = Vec::new();
    loop {
        digits.push(b"0123456789abcdefghijklmnopqrstuvwxyz"[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

/// True when the folder `name` in `projects/` is `folder` ([`transcript_folder`]'s name).
fn folder_matches(name: &str, folder: &str) -> bool {
    name == folder
}

/// Writes the launch's project into [`PROJECT_FILE`] beside the launch folder `launch` (in the
/// session folder, which no sandbox reaches); nothing without a project.
fn record_project(launch: &Path, project: Option<&Path>) -> io::Result<()> {
    let Some(file) = launch.parent().map(|d| d.join(PROJECT_FILE)) else {
        return Ok(());
    };
    let _ = fs::remove_file(&file);
    let Some(p) = project else {
        return Ok(());
    };
    use std::os::unix::ffi::OsStrExt;
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(file)?;
    f.write_all(p.as_os_str().as_bytes())
}

/// The project [`record_project`] wrote for the launch folder `launch`.
fn recorded_project(launch: &Path) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let file = launch.parent()?.join(PROJECT_FILE);
    let (f, _) = open_regular(&file, 4096).ok()?;
    let mut bytes = Vec::new();
    f.take(4096).read_to_end(&mut bytes).ok()?;
    let p = PathBuf::from(std::ffi::OsString::from_vec(bytes));
    p.is_absolute().then_some(p)
}

/// Which transcripts a copy takes: those in the project's `folder`, named as `want` says.
struct Only<'a> {
    folder: &'a str,
    want: &'a dyn Fn(&str) -> bool,
}

/// What a carry-back may still write, counted in bytes actually stored (a transcript's blocks,
/// not its length: a sparse file is refused, since copying it would write its holes out), and
/// what it refused.
struct Budget {
    left: u64,
    refused: Vec<String>,
}

impl Budget {
    fn session() -> Budget {
        Budget {
            left: MAX_SESSION_BYTES,
            refused: Vec::new(),
        }
    }

    fn unlimited() -> Budget {
        Budget {
            left: u64::MAX,
            refused: Vec::new(),
        }
    }

    /// Takes `meta`'s size from what is left; false (and a line in `refused`) when the file is
    /// sparse, over [`MAX_TRANSCRIPT_BYTES`], or over what is left.
    fn take(&mut self, name: &str, meta: &fs::Metadata) -> bool {
        let stored = meta.blocks().saturating_mul(512);
        // A file's last block may be partly used: anything more than a block short is a hole.
        let why = if stored.saturating_add(4096) < meta.len() {
            "sparse (its holes would be written out in full)"
        } else if meta.len() > MAX_TRANSCRIPT_BYTES {
            "over the size a transcript may have"
        } else if meta.len() > self.left {
            "over what one session may carry back"
        } else {
            self.left -= meta.len();
            return true;
        };
        self.refused.push(format!(
            "transcript {name} ({} bytes, {stored} stored) not carried back: {why}",
            meta.len()
        ));
        false
    }
}

/// `path`'s JSON when it is a regular file (not followed when a link) of at most 4 MiB.
fn read_state(path: &Path) -> Option<Value> {
    let (f, _) = open_regular(path, MAX_STATE_BYTES).ok()?;
    let mut bytes = Vec::new();
    f.take(MAX_STATE_BYTES).read_to_end(&mut bytes).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Opens a regular file of at most `max` bytes, never through a link.
fn open_regular(path: &Path, max: u64) -> io::Result<(File, fs::Metadata)> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    regular(f, max)
}

/// `f` when it is a regular file of at most `max` bytes.
fn regular(f: File, max: u64) -> io::Result<(File, fs::Metadata)> {
    let meta = f.metadata()?;
    if !meta.is_file() || meta.len() > max {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    Ok((f, meta))
}

/// Opens a folder, never through a link.
fn open_dir(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_DIRECTORY)
        .open(path)
}

/// Opens `name` in the opened folder `dir` for reading, never through a link (`openat` with
/// `O_NOFOLLOW`, so a folder swapped for a link after it was opened leads nowhere).
fn open_in(dir: &File, name: &str, flags: libc::c_int) -> io::Result<File> {
    let c = std::ffi::CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    let flags = flags | libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: `dir` is an open folder descriptor and `c` a NUL-terminated name, both alive for
    // the call; the descriptor returned is owned by the `File` made of it.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened by this call and is owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// The names in `path` (at most [`MAX_ENTRIES`]; each is opened with [`open_in`]).
fn names(path: &Path) -> io::Result<Vec<String>> {
    let mut out = Vec::new();
    for e in fs::read_dir(path)?.take(MAX_ENTRIES) {
        if let Ok(name) = e?.file_name().into_string() {
            out.push(name);
        }
    }
    Ok(out)
}

/// Copies `from/<folder>/<name>.jsonl` of the folder `only` names (real folders and regular
/// files only, named as it wants) into `to/<folder>/`, unless the copy there has the same size
/// and time already; each file within `budget` (else refused and left).
fn copy_transcripts(
    from: &Path,
    to: &Path,
    only: &Only<'_>,
    budget: &mut Budget,
) -> io::Result<()> {
    let Ok(top) = open_dir(from) else {
        return Ok(());
    };
    for folder in names(from)? {
        if !folder_matches(&folder, only.folder) {
            continue;
        }
        let Ok(sub) = open_in(&top, &folder, libc::O_DIRECTORY) else {
            continue;
        };
        for name in names(&from.join(&folder))? {
            if !name.ends_with(".jsonl") || !(only.want)(&name) {
                continue;
            }
            let opened = open_in(&sub, &name, 0).and_then(|f| regular(f, u64::MAX));
            let Ok((src, meta)) = opened else {
                continue;
            };
            let dest = to.join(&folder).join(&name);
            if fs::symlink_metadata(&dest)
                .is_ok_and(|d| d.len() == meta.len() && d.mtime() == meta.mtime())
            {
                continue;
            }
            if !budget.take(&format!("{folder}/{name}"), &meta) {
                continue;
            }
            state::private_dir(&to.join(&folder))?;
            let mtime = meta.modified().ok();
            replace(&dest, &mut src.take(meta.len()), mtime)?;
        }
    }
    Ok(())
}

/// Writes `path` as a new 0600 file (never through an existing name) holding `v`.
fn write_new(path: &Path, v: &Value) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    f.write_all(&serde_json::to_vec(v)?)
}

/// Replaces `path` by what `from` holds: a new 0600 file beside it, renamed over it (with
/// `mtime` when given).
fn replace(
    path: &Path,
    from: &mut dyn Read,
    mtime: Option<std::time::SystemTime>,
) -> io::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.{}.new", std::process::id()));
    let _ = fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    let done = io::copy(from, &mut f).and_then(|_| match mtime {
        Some(t) => f.set_modified(t),
        None => Ok(()),
    });
    match done.and_then(|_| fs::rename(&tmp, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn steering_keys_are_never_carried() {
        let planted = json!({
            "hasCompletedOnboarding": "yes",
            "numStartups": 3,
            "env": {"ANTHROPIC_BASE_URL": "http://x"},
            "hooks": {}, "apiKeyHelper": "x", "mcpServers": {},
            "projects": {"/p": {
                "hasTrustDialogAccepted": true, "mcpServers": {}, "allowedTools": ["Bash"],
                "enabledMcpjsonServers": ["x"], "enableAllProjectMcpServers": true,
            }},
        });
        let kept = named_state(&planted);
        assert_eq!(
            kept,
            json!({"numStartups": 3, "projects": {"/p": {"hasTrustDialogAccepted": true}}})
        );
    }

    #[test]
    fn named_state_keeps_onboarding_and_a_projects_trust_only() {
        let planted = json!({
            "hasCompletedOnboarding": true,
            "mcpServers": {"x": {"command": "/bin/sh"}},
            "projects": {"/p": {"hasTrustDialogAccepted": true, "mcpServers": {}}, "rel": {}},
        });
        let kept = json!({"hasCompletedOnboarding": true,
            "projects": {"/p": {"hasTrustDialogAccepted": true}}});
        assert_eq!(named_state(&planted), kept);
    }

    /// `seed` into a fresh launch folder from a persistent folder holding `carried` as its
    /// `.claude.json` (none when `None`); returns the launch folder's `.claude.json`, if any.
    fn seeded(carried: Option<Value>, onboard: bool, trust: bool) -> Option<Value> {
        let dir = tempfile::tempdir().unwrap();
        let persistent = dir.path().join("persistent");
        fs::create_dir(&persistent).unwrap();
        if let Some(v) = carried {
            fs::write(persistent.join(CLAUDE_STATE_FILE), v.to_string()).unwrap();
        }
        let project = Path::new("/work/p");
        let launch = dir.path().join("launch");
        let s = Seed {
            config_dir: dir.path(),
            persistent: &persistent,
            onboard,
            resume: None,
            trust: trust.then_some(project),
            project: Some(project),
        };
        seed(&launch, &s).unwrap();
        let names: Vec<_> = fs::read_dir(&launch)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(names.iter().all(|n| n == CLAUDE_STATE_FILE), "{names:?}");
        let bytes = fs::read(launch.join(CLAUDE_STATE_FILE)).ok()?;
        Some(serde_json::from_slice(&bytes).unwrap())
    }

    #[test]
    fn trust_is_seeded_for_the_project() {
        let v = seeded(None, false, true).unwrap();
        assert_eq!(
            v,
            json!({"projects": {"/work/p": {"hasTrustDialogAccepted": true}}})
        );
    }

    #[test]
    fn onboarding_is_laid_over_what_the_persistent_file_holds() {
        let carried = json!({"hasCompletedOnboarding": false,
            "projects": {"/work/p": {"hasTrustDialogAccepted": true}, "/other": {}}});
        let v = seeded(Some(carried), true, false).unwrap();
        assert_eq!(
            v,
            json!({"hasCompletedOnboarding": true,
                "projects": {"/work/p": {"hasTrustDialogAccepted": true}}})
        );
    }

    #[test]
    fn nothing_carried_and_nothing_answered_writes_no_state_file() {
        assert_eq!(seeded(None, false, false), None);
        let carried = json!({"hasCompletedOnboarding": true});
        assert_eq!(seeded(Some(carried.clone()), false, false), Some(carried));
    }

    #[test]
    fn a_session_gets_its_own_projects_state_only() {
        let v = json!({"numStartups": 2, "projects": {
            "/a": {"hasTrustDialogAccepted": true}, "/b": {"hasTrustDialogAccepted": true}}});
        let a = json!({"numStartups": 2, "projects": {"/a": {"hasTrustDialogAccepted": true}}});
        assert_eq!(scoped(v, Some("/a".as_ref())), a);
    }

    #[test]
    fn a_transcript_folder_is_the_path_with_dashes() {
        assert_eq!(transcript_folder("/work/my_p.1".as_ref()), "-work-my-p-1");
    }

    /// Claude Code's long folder names: the first 200 characters, `-` and Claude's hash of the
    /// path (the values Claude's own function gives for these paths); only that exact name
    /// matches, not another project's that shares the first 200 characters.
    #[test]
    fn long_project_folders_match_by_their_exact_name() {
        let long = format!("/{}", "a".repeat(250));
        let folder = transcript_folder(Path::new(&long));
        assert_eq!(folder, format!("-{}-feo44x", "a".repeat(199)));
        let wide = format!("/work/{}/x{}", "\u{e9}".repeat(120), "b".repeat(100));
        assert!(transcript_folder(Path::new(&wide)).ends_with("bbbb-sm04rs"));
        let other = transcript_folder(Path::new(&format!("{long}x")));
        assert_ne!(other, folder);
        assert!(!folder_matches(&other, &folder));
        assert!(!folder_matches(
            &format!("{}-1x2y", &folder[..200]),
            &folder
        ));
        assert!(folder_matches(&folder, &folder));
        assert!(folder_matches("-p", "-p") && !folder_matches("-p-q", "-p"));
    }

    #[test]
    fn a_session_state_is_laid_over_the_persistent_one() {
        let base = json!({"numStartups": 1, "projects": {"/a": {"hasTrustDialogAccepted": true}}});
        let over = json!({"numStartups": 2, "projects": {"/b": {"hasTrustDialogAccepted": true}}});
        assert_eq!(
            merged(base, over),
            json!({"numStartups": 2, "projects": {
                "/a": {"hasTrustDialogAccepted": true}, "/b": {"hasTrustDialogAccepted": true}}})
        );
        assert_eq!(merged(Value::Null, json!({"a": 1})), json!({"a": 1}));
    }

    #[test]
    fn only_transcripts_come_back_and_links_are_not_followed() {
        let (session, persistent) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let l = &launch_dir(session.path());
        fs::create_dir_all(l.join("projects/-p/memory")).unwrap();
        record_project(l, Some(Path::new("/p"))).unwrap();
        fs::write(l.join("projects/-p/a.jsonl"), "{}\n").unwrap();
        fs::write(l.join("projects/-p/memory/MEMORY.md"), "obey\n").unwrap();
        fs::write(l.join("settings.json"), "{\"hooks\": {}}").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", l.join("projects/-p/b.jsonl")).unwrap();
        std::os::unix::fs::symlink("/etc", l.join("projects/-q")).unwrap();
        fs::write(
            l.join(".claude.json"),
            "{\"mcpServers\": {}, \"numStartups\": 2}",
        )
        .unwrap();
        assert!(carry_back(l, persistent.path()).unwrap().is_empty());
        let p = persistent.path();
        assert_eq!(
            fs::read_to_string(p.join("projects/-p/a.jsonl")).unwrap(),
            "{}\n"
        );
        assert!(!p.join("projects/-p/b.jsonl").exists());
        assert!(!p.join("projects/-p/memory").exists());
        assert!(!p.join("projects/-q").exists());
        assert!(!p.join("settings.json").exists());
        let state = fs::read_to_string(p.join(".claude.json")).unwrap();
        assert_eq!(state, "{\"numStartups\":2}");
    }
}
