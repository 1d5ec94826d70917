//! `relay-host token import` and `relay-host token check`: storing the token file and reading its
//! health. Neither ever prints, logs or returns a byte of the token.
//!
//! Import takes what `claude setup-token` printed (or the token alone), picks out the one
//! `sk-ant-oat01-...` token, writes it atomically (a temp file in the same folder, `fsync`,
//! `rename`, mode 0600 in a 0700 folder) and sets `claude_token_file` when it was empty, keeping
//! the settings file's other content and format.

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use zeroize::Zeroizing;

pub(crate) use super::settings_edit::{edit_json, edit_toml};
use crate::settings::{Settings, SettingsError};
use crate::Host;
use relay_shim::exit::ExitCode;
use relay_token::claude_token_path_in;
use relay_token::sandbox::SandboxError;
use relay_token::TokenPathError;
use relay_token::{sys, ClaudeToken};

/// The setting `token import` writes when `claude_token_file` was empty: the recommended place,
/// a folder that holds nothing but the token.
pub(crate) const DEFAULT_TOKEN_SETTING: &str = "~/.config/claude-ltt/token";

/// What a `claude setup-token` token starts with.
pub(crate) const TOKEN_PREFIX: &str = "sk-ant-oat01-";

/// The most input `token import` reads.
pub(crate) const MAX_INPUT: usize = 65536;

/// Age past which `token check` warns (setup-token tokens last one year).
pub(crate) const OLD_AFTER_DAYS: u64 = 330;

/// Why an import was refused. No variant holds a byte of the input.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum ImportError {
    /// No `sk-ant-oat01-` token in the input; the count of other `sk-ant-` keys seen.
    NoToken {
        /// `sk-ant-` keys of another kind (an API key, say).
        other_keys: usize,
    },
    /// More than one different token.
    Several(usize),
    /// More than [`MAX_INPUT`] bytes.
    TooLarge,
    /// Reading the input, the settings, or writing a file failed.
    Io {
        /// What was being done, with the path.
        what: String,
        /// The error.
        source: io::Error,
    },
    /// The settings cannot be read.
    Settings(SettingsError),
    /// The settings' `claude_token_file` names no usable path.
    TokenPath(TokenPathError),
    /// The settings file could not be given the `claude_token_file` the import wrote.
    SettingByHand {
        /// The settings file.
        file: PathBuf,
        /// The value to set by hand.
        value: String,
    },
    /// The way to the token file crosses a symlink a sandboxed session could have made.
    Reachable(SandboxError),
}

impl ImportError {
    /// The exit code of `relay-host token import` for this error: 64 for input that holds no
    /// single token, 70 for a failed read or write, 78 for settings that cannot take it.
    pub(crate) fn exit_code(&self) -> ExitCode {
        match self {
            ImportError::NoToken { .. } | ImportError::Several(_) | ImportError::TooLarge => {
                ExitCode::Usage
            }
            ImportError::Io { .. } => ExitCode::Internal,
            ImportError::Settings(_)
            | ImportError::TokenPath(_)
            | ImportError::SettingByHand { .. }
            | ImportError::Reachable(_) => ExitCode::Unavailable,
        }
    }

    /// True for an error of fixed words and counts, which holds nothing of the input and is
    /// printed as it is.
    pub(crate) fn echoes_nothing(&self) -> bool {
        matches!(
            self,
            ImportError::NoToken { .. } | ImportError::Several(_) | ImportError::TooLarge
        )
    }
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImportError::NoToken { other_keys: 0 } => write!(
                f,
                "the input holds no {TOKEN_PREFIX} token; paste what `claude setup-token` printed"
            ),
            ImportError::NoToken { other_keys } => write!(
                f,
                "the input holds no {TOKEN_PREFIX} token, but {other_keys} other sk-ant- key(s), \
                 which Claude Code cannot take on a descriptor; paste what `claude setup-token` printed"
            ),
            ImportError::Several(n) => write!(
                f,
                "the input holds {n} different {TOKEN_PREFIX} tokens; paste one"
            ),
            ImportError::TooLarge => write!(f, "the input is larger than {MAX_INPUT} bytes"),
            ImportError::Io { what, source } => write!(f, "{what}: {source}"),
            ImportError::Settings(e) => write!(f, "{e}; fix the settings first"),
            ImportError::TokenPath(e) => write!(f, "{e}"),
            ImportError::SettingByHand { file, value } => write!(
                f,
                "could not add claude_token_file to {}: set it to {value:?} by hand",
                file.display()
            ),
            ImportError::Reachable(e) => write!(f, "{e}; nothing was written"),
        }
    }
}

impl std::error::Error for ImportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ImportError::Io { source, .. } => Some(source),
            ImportError::Settings(e) => Some(e),
            ImportError::TokenPath(e) => Some(e),
            ImportError::Reachable(e) => Some(e),
            _ => None,
        }
    }
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> ImportError {
    let what = what.into();
    move |source| ImportError::Io { what, source }
}

/// True for a byte that may be part of a pasted `sk-ant-oat01-` token (base64url): a byte
/// before the prefix that is not one (the `=` of `CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-...`, a
/// quote, a space) starts the token, and one after ends it. Every such byte is one the token
/// file's rule ([`relay_token::token_shape`]) takes, so what `token import` writes a launch
/// reads.
fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// The input without ANSI CSI sequences and carriage returns (a terminal's colours and line
/// ends), in a buffer sized once.
fn plain(input: &[u8]) -> Zeroizing<Vec<u8>> {
    let mut out = Zeroizing::new(Vec::with_capacity(input.len()));
    let mut i = 0;
    while i < input.len() {
        match input[i] {
            0x1b if input.get(i + 1) == Some(&b'[') => {
                i += 2;
                while i < input.len() && !(0x40..=0x7e).contains(&input[i]) {
                    i += 1;
                }
            }
            b'\r' => {}
            b => out.push(b),
        }
        i += 1;
    }
    out
}

/// The token starting at `start` (at its prefix), joined across line breaks where the next line
/// is nothing but token characters (a terminal wraps the long token of `setup-token`).
fn token_at(text: &[u8], start: usize) -> Zeroizing<Vec<u8>> {
    let mut tok = Zeroizing::new(Vec::with_capacity(text.len() - start));
    let mut i = start;
    loop {
        while i < text.len() && token_byte(text[i]) {
            tok.push(text[i]);
            i += 1;
        }
        if text.get(i) != Some(&b'\n') {
            return tok;
        }
        let line_start = i + 1;
        let mut j = line_start;
        while j < text.len() && text[j] == b' ' {
            j += 1;
        }
        let end = text[j..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(text.len(), |p| j + p);
        let line = &text[j..end];
        if line.is_empty() || !line.iter().all(|&b| token_byte(b)) || line.starts_with(b"sk-ant-") {
            return tok;
        }
        i = j;
    }
}

/// Picks the one `sk-ant-oat01-` token out of `input` (`setup-token`'s whole output, colours and
/// line wrapping included, or the token alone). Zero or several different tokens are refused,
/// naming how many.
pub(crate) fn pick_token(input: &[u8]) -> Result<ClaudeToken, ImportError> {
    let text = plain(input);
    let prefix = TOKEN_PREFIX.as_bytes();
    let mut found: Vec<Zeroizing<Vec<u8>>> = Vec::new();
    let mut other_keys = 0;
    let mut i = 0;
    while let Some(p) = find(&text[i..], b"sk-ant-") {
        let at = i + p;
        let before_ok = at == 0 || !token_byte(text[at - 1]);
        if before_ok && text[at..].starts_with(prefix) {
            let tok = token_at(&text, at);
            if tok.len() > prefix.len() && !found.iter().any(|f| f[..] == tok[..]) {
                found.push(tok);
            }
        } else if before_ok {
            other_keys += 1;
        }
        i = at + 1;
    }
    match found.len() {
        0 => Err(ImportError::NoToken { other_keys }),
        1 => ClaudeToken::from_bytes(&found[0]).ok_or(ImportError::TooLarge),
        n => Err(ImportError::Several(n)),
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads all of stdin (at most [`MAX_INPUT`] bytes) into a wiped buffer. On a terminal it asks
/// for the paste on stderr and turns echo off while it reads (restored on return and on
/// SIGINT/SIGTERM/SIGHUP), so the token never shows on screen.
pub(crate) fn read_stdin_secret() -> Result<Zeroizing<Vec<u8>>, ImportError> {
    let stdin = io::stdin();
    let fd = stdin.as_raw_fd();
    let _echo = match super::tty::EchoOff::new(fd) {
        Some(guard) => {
            errln!(
                "Paste the output of `claude setup-token` (or the token alone), then press \
                 Enter and Ctrl-D. Nothing is shown while you paste."
            );
            Some(guard)
        }
        None => None,
    };
    let mut input = Zeroizing::new(Vec::with_capacity(MAX_INPUT + 1));
    let mut buf = Zeroizing::new([0u8; 4096]);
    loop {
        let n = sys::read(&stdin, &mut buf[..]).map_err(io_err("read stdin"))?;
        if n == 0 {
            return Ok(input);
        }
        if input.len() + n > MAX_INPUT {
            return Err(ImportError::TooLarge);
        }
        input.extend_from_slice(&buf[..n]);
    }
}

/// What an import did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Imported {
    /// The token file written.
    pub(crate) path: PathBuf,
    /// True when it replaced an older file.
    pub(crate) replaced: bool,
    /// The settings file that now names it (when `claude_token_file` was empty).
    pub(crate) settings_updated: Option<PathBuf>,
}

/// Stores `token`: at `file` when given, else where `claude_token_file` points, else at
/// [`DEFAULT_TOKEN_SETTING`]; sets `claude_token_file` when it was empty.
pub(crate) fn import(
    host: &Host,
    token: &ClaudeToken,
    file: Option<&Path>,
) -> Result<Imported, ImportError> {
    let (settings, settings_file) =
        Settings::load_with_path(&host.config_dir).map_err(ImportError::Settings)?;
    let (path, setting) = match file {
        Some(f) if f.is_absolute() => {
            (relay_token::clean_path(f), f.to_string_lossy().into_owned())
        }
        Some(f) => {
            let cwd = std::env::current_dir().map_err(io_err("the current folder"))?;
            let p = relay_token::clean_path(&cwd.join(f));
            let s = p.to_string_lossy().into_owned();
            (p, s)
        }
        None if !settings.claude_token_file.is_empty() => {
            let p = claude_token_path_in(&settings.claude_token_file, Some(&host.home))
                .map_err(ImportError::TokenPath)?
                .expect("a set value names a path");
            (p, settings.claude_token_file.clone())
        }
        None => (
            host.home.join(".config/claude-ltt/token"),
            DEFAULT_TOKEN_SETTING.to_string(),
        ),
    };
    let claude_config = host.state_dir.join(crate::state::CLAUDE_CONFIG_DIR);
    let grants = crate::reach::rw_grants(&host.home, &settings, None, &claude_config);
    relay_token::sandbox::check_write_path(&path, &grants).map_err(ImportError::Reachable)?;
    let replaced = path.exists();
    let mut bytes = Zeroizing::new(Vec::with_capacity(token.len() + 1));
    bytes.extend_from_slice(token.expose_bytes());
    bytes.push(b'\n');
    write_atomically(&path, &bytes, 0o600, true)
        .map_err(io_err(format!("write {}", path.display())))?;
    let settings_updated = if settings.claude_token_file.is_empty() {
        Some(set_token_setting(host, settings_file, &setting)?)
    } else {
        None
    };
    Ok(Imported {
        path,
        replaced,
        settings_updated,
    })
}

/// Writes `bytes` to `path` atomically: a fresh temp file in the same folder (mode `mode`),
/// `fsync`, `rename` over `path`, `fsync` of the folder. A missing folder is made 0700 (with
/// `private_folder`, an existing one is made 0700 too). A reader sees the old file or the new
/// one, never a part.
pub(crate) fn write_atomically(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    private_folder: bool,
) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no folder"))?;
    if !dir.is_dir() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    } else if private_folder && fs::metadata(dir)?.permissions().mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    let mut name = OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(
        ".{}.tmp",
        crate::launch::plan::request::new_session_id()
    ));
    let tmp = dir.join(name);
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        io::Write::write_all(&mut f, bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Sets `claude_token_file` to `value` in the settings file (made as `settings.json` when there
/// is none), editing only that key's text so the rest keeps its content, order, comments and
/// format; the edit is checked by parsing both versions.
fn set_token_setting(
    host: &Host,
    file: Option<PathBuf>,
    value: &str,
) -> Result<PathBuf, ImportError> {
    let path = file.unwrap_or_else(|| host.config_dir.join(crate::settings::FILE_NAMES[0]));
    let (old, mode) = match fs::read_to_string(&path) {
        Ok(t) => (
            t,
            fs::metadata(&path)
                .map(|m| m.mode() & 0o777)
                .unwrap_or(0o600),
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => (String::new(), 0o600),
        Err(e) => return Err(io_err(format!("read {}", path.display()))(e)),
    };
    let toml = path.extension().is_some_and(|e| e == "toml");
    let new = if toml {
        edit_toml(&old, value)
    } else {
        edit_json(&old, value)
    };
    let parse = |t: &str| {
        if toml {
            Settings::from_toml(t)
        } else if t.trim().is_empty() {
            Ok(Settings::default())
        } else {
            Settings::from_json(t)
        }
    };
    let by_hand = || ImportError::SettingByHand {
        file: path.to_path_buf(),
        value: value.to_string(),
    };
    let (Ok(before), Ok(mut after)) = (parse(&old), parse(&new)) else {
        return Err(by_hand());
    };
    if after.claude_token_file != value {
        return Err(by_hand());
    }
    after.claude_token_file.clear();
    if after != before {
        return Err(by_hand());
    }
    write_atomically(&path, new.as_bytes(), mode, false)
        .map_err(io_err(format!("write {}", path.display())))?;
    Ok(path)
}

/// The token file's health as JSON: path, mode, owner, link count, size, age, whether a launch
/// would hand it over, and warnings (a shape other than `sk-ant-oat01-`, an age past
/// [`OLD_AFTER_DAYS`] days, a folder open to others). `ok` is false when a launch would refuse
/// it (the reader refuses it, others may read it, another user owns it), with that refusal as
/// `error`, and `hint` says what to do.
pub(crate) fn check(path: &Path) -> Value {
    let mut r = json!({"path": crate::human::path_json(path)});
    let mut warnings: Vec<String> = Vec::new();
    if let Ok(m) = fs::symlink_metadata(path) {
        let mode = m.mode() & 0o7777;
        r["mode"] = json!(format!("{mode:04o}"));
        r["owner"] = json!(owner_name(m.uid()));
        r["uid"] = json!(m.uid());
        r["links"] = json!(m.nlink());
        r["size"] = json!(m.size());
        let age = std::time::SystemTime::now()
            .duration_since(m.modified().unwrap_or(std::time::UNIX_EPOCH))
            .map(|d| d.as_secs() / 86400)
            .unwrap_or(0);
        r["age_days"] = json!(age);
        // SAFETY: geteuid takes no arguments and cannot fail.
        if m.uid() != unsafe { libc::geteuid() } {
            warnings.push(format!(
                "owned by {}, not by the user relay-host runs as",
                owner_name(m.uid())
            ));
        }
        if age > OLD_AFTER_DAYS {
            warnings.push(format!(
                "written {age} days ago: setup-token tokens last one year; {}",
                crate::human::MAKE_TOKEN
            ));
        }
    }
    if let Some(d) = path.parent().and_then(|d| fs::metadata(d).ok()) {
        if d.mode() & 0o077 != 0 && !path.starts_with(credentials_dir().unwrap_or_default()) {
            warnings.push(format!(
                "its folder is mode {:04o}: keep the token alone in a 0700 folder",
                d.mode() & 0o7777
            ));
        }
    }
    // What a launch would say: the mode and the owner are its refusals, not warnings.
    match crate::launch::prepare::token::read_usable(path) {
        Ok(t) => {
            r["ok"] = json!(true);
            r["bytes"] = json!(t.len());
            if !t.expose_bytes().starts_with(TOKEN_PREFIX.as_bytes()) {
                // Said without the whole prefix, which the redaction of reports would mask.
                warnings.push(
                    "does not start as a `claude setup-token` token does (sk-ant- then oat01-)"
                        .to_string(),
                );
            }
        }
        Err(e) => {
            let msg = e.to_string();
            r["ok"] = json!(false);
            r["hint"] = json!(crate::human::hint(&msg));
            r["error"] = json!(msg);
        }
    }
    r["warnings"] = json!(warnings);
    r
}

/// `$CREDENTIALS_DIRECTORY` when set and absolute.
fn credentials_dir() -> Option<PathBuf> {
    std::env::var_os("CREDENTIALS_DIRECTORY")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// A user's name from the password database, else `uid N`.
fn owner_name(uid: u32) -> String {
    // SAFETY: getpwuid returns a pointer into static storage or null; it is read at once and this
    // process does not call getpw* from other threads.
    unsafe {
        let pw = libc::getpwuid(uid);
        if pw.is_null() || (*pw).pw_name.is_null() {
            return format!("uid {uid}");
        }
        let name = std::ffi::CStr::from_ptr((*pw).pw_name).to_string_lossy();
        format!("{name} (uid {uid})")
    }
}

/// The token file the settings name, resolved; `Ok(None)` when `claude_token_file` is empty.
pub(crate) fn configured_path(host: &Host) -> Result<Option<PathBuf>, ConfiguredPathError> {
    let settings = host.settings().map_err(ConfiguredPathError::Settings)?;
    claude_token_path_in(&settings.claude_token_file, Some(&host.home))
        .map_err(ConfiguredPathError::TokenPath)
}

/// Why [`configured_path`] names no token file: the settings or their `claude_token_file`.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum ConfiguredPathError {
    /// The settings cannot be read or trusted.
    Settings(SettingsError),
    /// `claude_token_file` names no usable path.
    TokenPath(TokenPathError),
}

impl fmt::Display for ConfiguredPathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfiguredPathError::Settings(e) => write!(f, "{e}"),
            ConfiguredPathError::TokenPath(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ConfiguredPathError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfiguredPathError::Settings(e) => Some(e),
            ConfiguredPathError::TokenPath(e) => Some(e),
        }
    }
}

#[cfg(test)]
#[path = "token_file_tests.rs"]
mod tests;
