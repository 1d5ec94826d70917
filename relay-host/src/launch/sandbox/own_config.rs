//! What a token session's tools read as configuration from outside the project: only what the
//! operator wrote, never a file a session could have written.
//!
//! A sandboxed session that sees the home folder (the `shell` template, or one whose project is
//! `~`) can write everything there that the write-deny list does not name. Instead of naming
//! one more file each round, a token session's sandbox does not consult the user's per-user
//! configuration at all, by variables set last (after a request's and the template's):
//!
//! - `XDG_CONFIG_HOME` names an empty read-only folder, [`SANDBOX_CONFIG_HOME`] (a tmpfs the
//!   sandbox mounts there read-only: no folder on the host): everything that follows the XDG
//!   rule (git's `config`, `attributes` and `ignore`, gh, pip's user file, fish, ...) finds
//!   nothing there, and no session can put anything there;
//! - `GIT_CONFIG_GLOBAL` names a file relay wrote, shown read-only at [`SANDBOX_GITCONFIG`],
//!   holding only the operator's `user.name` and `user.email` (read on the host from the
//!   operator's git configuration, [`identity`]): git reads neither `~/.gitconfig` nor the XDG
//!   file, and a commit by Claude still carries the operator's name;
//! - npm's user and global configuration files (`NPM_CONFIG_USERCONFIG`,
//!   `NPM_CONFIG_GLOBALCONFIG`) are missing files in that empty folder, pip's (`PIP_CONFIG_FILE`)
//!   is `/dev/null` (pip then reads no file at all), and Python adds no user site folder
//!   (`PYTHONNOUSERSITE`), whose `.pth` files it would run.
//!
//! What cannot be moved by a variable stays on the write-deny list: the shells' start-up files,
//! `~/.ssh`, the folders programs are installed to. Other launches are left as they are.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::launch::spawn_error::{spawn_err, SpawnError};

/// Where a token session sees its (empty, read-only) `XDG_CONFIG_HOME`.
pub(crate) const SANDBOX_CONFIG_HOME: &str = "/run/relay/config";

/// Where a token session sees the git configuration relay wrote (`GIT_CONFIG_GLOBAL`).
pub(crate) const SANDBOX_GITCONFIG: &str = "/run/relay/gitconfig";

/// The variables that point each tool's per-user configuration away from the home folder,
/// beside the two that name [`SANDBOX_CONFIG_HOME`] and [`SANDBOX_GITCONFIG`].
/// npm's two files name two paths in the empty folder (npm refuses one file loaded twice), which
/// stay missing: no session can write there.
pub(crate) const PINNED: &[(&str, &str)] = &[
    ("NPM_CONFIG_USERCONFIG", "/run/relay/config/npmrc"),
    ("NPM_CONFIG_GLOBALCONFIG", "/run/relay/config/npm-globalrc"),
    ("PIP_CONFIG_FILE", "/dev/null"),
    ("PYTHONNOUSERSITE", "1"),
];

/// For a launch that gets the token: the variables naming [`SANDBOX_CONFIG_HOME`],
/// [`SANDBOX_GITCONFIG`] and [`PINNED`]'s, added last to `env` (each replacing one set
/// before). The sandbox step's plan calls this; [`place`] makes what they name.
pub(crate) fn pin_env(env: &mut Vec<(OsString, OsString)>) {
    let names = [
        ("XDG_CONFIG_HOME", SANDBOX_CONFIG_HOME),
        ("GIT_CONFIG_GLOBAL", SANDBOX_GITCONFIG),
    ];
    for (k, v) in names.iter().chain(PINNED) {
        env.retain(|(name, _)| name != k);
        env.push((k.into(), v.into()));
    }
}

/// The git configuration written into the session folder `dir`, with where the sandbox shows
/// it read-only; the operator's identity is read from git's files under `home`. The empty
/// configuration folder is the sandbox's own ([`SANDBOX_CONFIG_HOME`], placed empty by the
/// caller).
pub(crate) fn place(dir: &Path, home: &Path) -> Result<(PathBuf, &'static str), SpawnError> {
    let gitconfig = write_into(dir, &identity(home)).map_err(spawn_err(format_args!(
        "configuration in {}",
        dir.display()
    )))?;
    Ok((gitconfig, SANDBOX_GITCONFIG))
}

/// Where a token session sees its (empty, read-only) `HOME` when a template writes the home
/// ([`pin_home`]).
pub(crate) const SANDBOX_HOME: &str = "/run/relay/home";

/// For a token launch beside a template that writes the home (`"writes_home": true`): `HOME`
/// set to [`SANDBOX_HOME`], an empty read-only folder the sandbox shows (placed empty by the
/// caller), last in `env` (replacing one set before), so the token session's shells (Claude
/// Code's shell snapshot, a login `bash`, an interactive one) source no start-up file, nor
/// anything such a file would source, that a session could have written in the real home.
pub(crate) fn pin_home(env: &mut Vec<(OsString, OsString)>) {
    env.retain(|(name, _)| name != "HOME");
    env.push(("HOME".into(), SANDBOX_HOME.into()));
}

/// Writes `gitconfig` (0600, [`gitconfig_text`]) in the session folder `dir`, which no sandbox
/// reaches, and returns its path. A kept session launched again finds it from its last launch:
/// it is written afresh.
fn write_into(dir: &Path, who: &Identity) -> std::io::Result<PathBuf> {
    let gitconfig = dir.join("gitconfig");
    match std::fs::remove_file(&gitconfig) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&gitconfig)?
        .write_all(gitconfig_text(who).as_bytes())?;
    Ok(gitconfig)
}

/// The operator's `user.name` and `user.email`, as git on the host would find them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    pub name: Option<String>,
    pub email: Option<String>,
}

/// The operator's identity from git's per-user files on the host, in git's order (a later one
/// wins): `$GIT_CONFIG_GLOBAL` alone when set, else `$XDG_CONFIG_HOME/git/config` (or
/// `~/.config/git/config`), then `~/.gitconfig`. Only the `[user]` section's `name` and
/// `email` are read, as plain values (no `include` is followed): nothing else of these files
/// reaches a session.
pub(crate) fn identity(home: &Path) -> Identity {
    let files: Vec<PathBuf> = match std::env::var_os("GIT_CONFIG_GLOBAL") {
        Some(g) => vec![PathBuf::from(g)],
        None => {
            let xdg = std::env::var_os("XDG_CONFIG_HOME")
                .filter(|x| !x.is_empty())
                .map_or_else(|| home.join(".config"), PathBuf::from);
            vec![xdg.join("git/config"), home.join(".gitconfig")]
        }
    };
    let mut who = Identity::default();
    for f in files {
        if let Ok(text) = std::fs::read_to_string(f) {
            read_user(&text, &mut who);
        }
    }
    who
}

/// Sets `who`'s name and email from the `[user]` section(s) of the git configuration `text`.
fn read_user(text: &str, who: &mut Identity) {
    let mut in_user = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            let section = header.split(']').next().unwrap_or("").trim();
            in_user = section.eq_ignore_ascii_case("user");
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if !in_user {
            continue;
        }
        let value = config_value(value);
        match key.trim().to_ascii_lowercase().as_str() {
            "name" => who.name = Some(value),
            "email" => who.email = Some(value),
            _ => {}
        }
    }
}

/// A git configuration value: quotes removed, `\"`, `\\`, `\t` and `\n` unescaped, and an
/// unquoted `#` or `;` starting a comment; surrounding blanks trimmed.
fn config_value(raw: &str) -> String {
    let (mut out, mut quoted, mut chars) = (String::new(), false, raw.trim().chars());
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some('t') => out.push('\t'),
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => {}
            },
            '#' | ';' if !quoted => break,
            c => out.push(c),
        }
    }
    out.trim().to_string()
}

/// The git configuration a token session reads as its global one: the operator's identity
/// only, each value quoted; a value holding a line break or a NUL is left out.
fn gitconfig_text(who: &Identity) -> String {
    let mut text = String::from(
        "# Written by relay-host for one session: the operator's identity only.\n[user]\n",
    );
    for (key, value) in [("name", &who.name), ("email", &who.email)] {
        let Some(v) = value.as_deref().filter(|v| !v.contains(['\n', '\r', '\0'])) else {
            continue;
        };
        let escaped = v.replace('\\', "\\\\").replace('"', "\\\"");
        text.push_str(&format!("\t{key} = \"{escaped}\"\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `[user]` section's values, unquoted and unescaped; other sections and comments not.
    #[test]
    fn reads_the_user_section_only() {
        let text = "[core]\n\tname = no\n[user]\n\tname = \"A \\\"B\\\" C\" # comment\n\
                    \tEmail = a@b.c ; more\n[user \"x\"]\n\temail = nope\n";
        let mut who = Identity::default();
        read_user(text, &mut who);
        assert_eq!(who.name.as_deref(), Some("A \"B\" C"));
        assert_eq!(who.email.as_deref(), Some("a@b.c"));
    }

    /// What is written reads back the same, and a value with a line break is left out.
    #[test]
    fn written_identity_reads_back() {
        let who = Identity {
            name: Some("O'Neil \"x\" \\ y".into()),
            email: Some("bad\n[core]\n\tfsmonitor = evil".into()),
        };
        let text = gitconfig_text(&who);
        let mut back = Identity::default();
        read_user(&text, &mut back);
        assert_eq!(back.name, who.name);
        assert_eq!(back.email, None);
        assert!(!text.contains("fsmonitor"), "{text}");
    }
}
