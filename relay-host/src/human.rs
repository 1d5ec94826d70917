//! How refusals and errors reach a person. On a terminal (stderr is a tty) a refusal prints one
//! plain sentence and, where one is known, a `hint:` line that says what to do; elsewhere, and
//! whenever `--json` was given, it prints the answer as one JSON line, exactly as the event log
//! stores it.

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use serde_json::Value;

use relay_token::Redactor;

static FORCE_JSON: AtomicBool = AtomicBool::new(false);

/// A path as a JSON string for a report: as it is when it is UTF-8, else with each byte that is
/// not replaced by U+FFFD (serde's own conversion of a path fails, and `json!` would panic).
pub(crate) fn path_json(path: &std::path::Path) -> Value {
    Value::String(path.to_string_lossy().into_owned())
}

/// [`path_json`] of each path.
pub(crate) fn paths_json(paths: &[std::path::PathBuf]) -> Value {
    Value::Array(paths.iter().map(|p| path_json(p)).collect())
}

/// The `errno` of the first failed write to stdout (0: none failed).
static STDOUT_ERRNO: AtomicI32 = AtomicI32::new(0);

/// Writes `args` to stdout as they are (no newline added) and returns the write's result. A
/// failed write (stdout a closed pipe: `EPIPE`) never panics: it is remembered for
/// [`stdout_error`], and the command's later writes fail the same way.
pub(crate) fn write_out(args: fmt::Arguments<'_>) -> io::Result<()> {
    let result = io::stdout().lock().write_fmt(args);
    if let Err(e) = &result {
        let errno = e.raw_os_error().unwrap_or(libc::EIO);
        let _ = STDOUT_ERRNO.compare_exchange(0, errno, Ordering::Relaxed, Ordering::Relaxed);
    }
    result
}

/// Writes `args` to stderr as they are; a failed write (a closed pipe) is dropped, since there
/// is nowhere left to say it.
pub(crate) fn write_err(args: fmt::Arguments<'_>) {
    let _ = io::stderr().lock().write_fmt(args);
}

/// The error of the first write to stdout that failed in this process, if one did: the command's
/// report did not reach its reader.
pub(crate) fn stdout_error() -> Option<io::Error> {
    match STDOUT_ERRNO.load(Ordering::Relaxed) {
        0 => None,
        errno => Some(io::Error::from_raw_os_error(errno)),
    }
}

/// Makes every refusal print JSON, also on a terminal (`--json`).
pub(crate) fn set_json(on: bool) {
    FORCE_JSON.store(on, Ordering::Relaxed);
}

/// True when `--json` was given: `launch` then writes its answers to stdout too.
pub(crate) fn json_answers() -> bool {
    FORCE_JSON.load(Ordering::Relaxed)
}

/// True when errors are for a person: stderr is a terminal and `--json` was not given.
pub(crate) fn for_person() -> bool {
    // SAFETY: isatty takes an integer and touches no memory of ours.
    !FORCE_JSON.load(Ordering::Relaxed) && unsafe { libc::isatty(2) } == 1
}

/// The make-a-token advice, said once for every place that needs it.
pub(crate) const MAKE_TOKEN: &str =
    "make one with `claude setup-token`, then store it with `relay-host token import`";

/// How to install Claude Code, for a `claude` that is not found (by `status` and at a launch).
pub(crate) const INSTALL_CLAUDE: &str =
    "install Claude Code (`npm install -g @anthropic-ai/claude-code`, or the native installer), \
     or set the claude-code template's command to its path";

/// `s` as one word of a POSIX shell command: as it is when it holds only characters no shell
/// treats specially, else in single quotes (a `'` inside as `'\''`).
///
/// ```
/// use relay_host::human::sh_quote;
/// assert_eq!(sh_quote("/home/me/src/app"), "/home/me/src/app");
/// assert_eq!(sh_quote("/home/me/my app"), "'/home/me/my app'");
/// assert_eq!(sh_quote("it's"), "'it'\\''s'");
/// ```
pub fn sh_quote(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:=@%~".contains(c);
    if !s.is_empty() && s.chars().all(plain) && !s.starts_with('~') {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The hint for a project that does not exist, from the message `project "P": no such file or
/// directory`: how to make the folder, and, when its last component has a space in it (it may
/// be Claude's `-p` prompt given to relay's `-p`, which is `--project`), the prompt after `--`.
fn missing_project_hint(message: &str) -> Option<String> {
    let rest = message.strip_prefix("project \"")?;
    let path = rest.strip_suffix("\": no such file or directory")?;
    if path.contains('\\') || path.contains('"') {
        return None;
    }
    let last = path.rsplit('/').next().unwrap_or(path);
    let make = format!(
        "there is no folder {}: make it (`mkdir -p {}`), or name an existing one",
        sh_quote(path),
        sh_quote(path)
    );
    Some(if last.contains(' ') {
        format!(
            "{make}; or, for a prompt: relay's -p is --project, the folder to work in, and \
             Claude's -p goes after --: `relay-host run -- -p {}`",
            sh_quote(last)
        )
    } else {
        format!("{make} (`relay-host run --project DIR`)")
    })
}

/// Hints by what the message says, first match wins. Each entry: the fragments that must all
/// occur in the message, and the hint.
const HINTS: &[(&[&str], &str)] = &[
    (
        &["claude_token_file", "no such file or directory"],
        "the token file is missing: make one with `claude setup-token`, then store it with \
         `relay-host token import`",
    ),
    (
        &["claude_token_file", "not a token"],
        "the token file must hold the token alone (the one `sk-ant-…` line `claude setup-token` \
         printed): replace it with `relay-host token import` and paste that output",
    ),
    (
        &["claude_token_file", ": empty"],
        "the token file is empty: paste the output of `claude setup-token` into \
         `relay-host token import`",
    ),
    (
        &["claude_token_file", "hard links"],
        "another name links to the token file: remove it, or write a fresh file with \
         `relay-host token import`",
    ),
    (
        &["claude_token_file", "lets others read it"],
        "the token file must be readable by its owner alone: `chmod 600` it (a launch refuses it \
         until then)",
    ),
    (
        &["claude_token_file", "permission denied"],
        "relay-host cannot read the token file: see its owner and mode with \
         `relay-host token check`",
    ),
    (
        &["claude_token_file", "must be absolute"],
        "set claude_token_file to `~/.config/claude-ltt/token`, an absolute path, or \
         `$CREDENTIALS_DIRECTORY/NAME`",
    ),
    (
        &["CREDENTIALS_DIRECTORY", "not set"],
        "run relay-host as a systemd service with LoadCredential= (see docs/systemd.md), or set \
         claude_token_file to the file's own path",
    ),
    (
        &["lies inside the read-write grant"],
        "a session could have rewritten that file: keep the settings file itself in the config \
         folder (not a link into a grant), then check with `relay-host status`",
    ),
    (
        &["settings.json: "],
        "fix the settings file where the message points (`relay-host status` checks it again; \
         `relay-host templates` prints the built-in templates to copy from, also while the \
         settings do not load)",
    ),
    (
        &["settings.toml: "],
        "fix the settings file where the message points (`relay-host status` checks it again; \
         `relay-host templates` prints the built-in templates to copy from, also while the \
         settings do not load)",
    ),
    (
        &["claude_token_file", "owned by uid", "not by the user"],
        "the token file belongs to another user: store your own with `relay-host token import` \
         (it replaces the file), or have root `chown` it to the user relay-host runs as",
    ),
    (
        &["state folder", "(os error"],
        "relay-host keeps its logs and session folders in its state folder: set HOME to your home \
         folder, or name a folder you can write with --state-dir or RELAY_STATE_DIR",
    ),
    (
        &["relay's own folder"],
        "the current folder is the cause: `run` takes it as the project, and it holds the relay's \
         own folders (as ~ does); run from a project folder or name one: \
         `relay-host run -p ~/src/app`",
    ),
    (
        &["project", "no grant"],
        "the template's grants do not show the project: pass a project inside a grant \
         (`relay-host run -p DIR`), or add `{project}` to the template's read_write grants",
    ),
    (
        &["stand-in mode", "relay-stand-in", "not found"],
        "install relay-stand-in beside relay-host (`cargo install --locked --path relay-host` \
         installs both, as the release tarball holds both), or give the template \
         \"token_mode\": \"pipe\" to hand its sessions the real token on fd 5 instead",
    ),
    (
        &["relay-shim not found"],
        "install relay-shim beside relay-host (`cargo install --locked --path relay-shim`), or set \
         \"shim\" in the settings to its path",
    ),
    (
        &["bwrap not found"],
        "install bubblewrap (`apt-get install bubblewrap` on Debian and Ubuntu, `dnf install \
         bubblewrap` on Fedora), or set \"bwrap\" in the settings to its path",
    ),
    (
        &["claude_token_file", "not a regular file"],
        "the token path names a folder (or a device), not a file: set claude_token_file to the \
         token file itself (`~/.config/claude-ltt/token`), or store one there with \
         `relay-host token import`",
    ),
    (
        &["command \"claude\" not found or not executable"],
        INSTALL_CLAUDE,
    ),
    (
        &["not found or not executable"],
        "install the template's program, or put its folder on PATH",
    ),
];

/// The hint for an error message, if one is known.
///
/// ```
/// use relay_host::human::hint;
/// let h = hint("read claude_token_file /h/.config/claude-ltt/token: no such file or directory");
/// assert!(h.unwrap().contains("claude setup-token"));
/// let h = hint(r#"project "/src/explain this repo": no such file or directory"#);
/// assert!(h.unwrap().ends_with("`relay-host run -- -p 'explain this repo'`"));
/// assert_eq!(hint("something else"), None);
/// ```
pub fn hint(message: &str) -> Option<String> {
    if message.contains("bwrap") && message.contains("does not work") {
        // By the cause found on this machine, each with its own fix.
        return Some(crate::userns::cause().fix().to_string());
    }
    if let Some(h) = missing_project_hint(message) {
        return Some(h);
    }
    HINTS
        .iter()
        .find(|(parts, _)| parts.iter().all(|p| message.contains(p)))
        .map(|(_, h)| h.to_string())
}

/// The text a person reads for a refused launch: one sentence, then the hint line if any.
pub(crate) fn refusal_text(code: &str, message: &str) -> String {
    let mut text = format!("relay-host: the launch was refused: {message} ({code})");
    if let Some(h) = hint(message) {
        text.push_str("\nhint: ");
        text.push_str(&h);
    }
    text
}

/// Prints a refused launch's answer to stderr, through `redactor`: as a sentence and a hint for
/// a person, else as the JSON line the event log holds.
pub(crate) fn print_refusal(answer: &Value, redactor: &Redactor) {
    let text = if for_person() {
        let s = |k: &str| answer[k].as_str().unwrap_or_default().to_string();
        refusal_text(&s("error"), &s("message"))
    } else {
        answer.to_string()
    };
    errln!("{}", redactor.redact(&text));
}

/// Prints an error that is not a launch's answer (a command that failed): `relay-host: MESSAGE`
/// and the hint line for a person; `{"error": MESSAGE, "hint": ...}` otherwise. The message
/// passes the `sk-ant-...`/`Bearer ...` redaction first (a token pasted as a setting's value).
pub(crate) fn print_error(message: &str) {
    print_error_as_is(&Redactor::default().redact(message));
}

/// [`print_error`] without the redaction, for a message built from fixed words and counts only
/// (one that names the `sk-ant-oat01-` prefix, which the redaction would hide).
pub(crate) fn print_error_as_is(message: &str) {
    let h = hint(message);
    if for_person() {
        match h {
            Some(h) => errln!("relay-host: {message}\nhint: {h}"),
            None => errln!("relay-host: {message}"),
        }
    } else {
        let mut line = serde_json::json!({ "error": message });
        if let Some(h) = h {
            line["hint"] = h.into();
        }
        errln!("{line}");
    }
}

/// Says on stderr, to a person, that a Claude launch will start without the token (the setting
/// is empty, or the launch is unsandboxed): Claude Code then uses its own login, or asks for one.
/// Says nothing for other launches, for one that carries the token, and off a terminal.
pub(crate) fn note_token(claude: bool, sandboxed: bool, carries_token: bool) {
    if !claude || carries_token || !for_person() {
        return;
    }
    let why = if sandboxed {
        "claude_token_file is not set"
    } else {
        "an unsandboxed launch never gets it"
    };
    errln!(
        "relay-host: this Claude session gets no token ({why}); it uses its own login, or asks \
         for /login"
    );
}

#[cfg(test)]
mod tests {
    /// `path_json`'s example.
    #[test]
    fn path_json_doc_example() {
        use crate::human::path_json;
        use std::os::unix::ffi::OsStrExt;
        assert_eq!(path_json("/a/b".as_ref()), "/a/b");
        let odd = std::path::Path::new(std::ffi::OsStr::from_bytes(b"/a/\xff"));
        assert_eq!(path_json(odd), "/a/\u{fffd}");
    }

    /// `paths_json`'s example.
    #[test]
    fn paths_json_doc_example() {
        let v = crate::human::paths_json(&["/a".into()]);
        assert_eq!(v, serde_json::json!(["/a"]));
    }

    /// `write_out`'s example.
    #[test]
    fn write_out_doc_example() {
        let result = (|| {
            use crate::human::write_out;
            write_out(format_args!("{} folder(s)\n", 2))?;
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `stdout_error`'s example.
    #[test]
    fn stdout_error_doc_example() {
        assert!(crate::human::stdout_error().is_none());
    }

    /// `set_json`'s and `json_answers`' example (one test: they share the process's flag).
    #[test]
    fn set_json_doc_example() {
        crate::human::set_json(true);
        assert!(crate::human::json_answers());
        assert!(!crate::human::for_person());
    }

    /// `refusal_text`'s example.
    #[test]
    fn refusal_text_doc_example() {
        let text = crate::human::refusal_text("sandbox_unavailable", "bwrap not found (on PATH)");
        assert!(text.starts_with("relay-host: the launch was refused: bwrap not found (on PATH)"));
        assert!(text.contains("\nhint: install bubblewrap"));
    }
}
