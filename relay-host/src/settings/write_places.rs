//! Where no session writes: the places whose files the operator's own programs, a later
//! session or the host run or read as configuration. A sandboxed template's read-write grants
//! (its `{project}` grant with the launch's project filled in) are checked against this one
//! rule before anything starts ([`refused_write`]); writes are granted by an allow-list, and
//! this rule keeps the allow-list from naming such a place.
//!
//! - **The home folder itself, and every folder above it**: a grant there holds the shells'
//!   start-up files and every file they source (`~/.cargo/env`, `~/.bash_aliases`, ...), which
//!   no list can name in full.
//! - **The home's configuration and program folders**: each entry of the home whose name
//!   starts with `.` (`~/.config`, `~/.local`, `~/.cargo`, `~/.ssh`, the shells' files, ...)
//!   and `~/bin`, and everything inside them.
//! - **System folders** the host runs code or reads configuration from ([`SYSTEM`]).
//!
//! A template that really must write the home says so with `"writes_home": true`
//! ([`Template::writes_home`](super::Template::writes_home)), which lifts the first two rules
//! for it, and `relay-host status` warns of each such template. No setting lifts the third.

use std::fmt;
use std::path::{Component, Path, PathBuf};

/// System folders (and everything inside them) that no session writes: the host runs code or
/// reads configuration from each (`/var/spool` holds crontabs, `/var/lib` services' state,
/// `/run` the services' sockets and the users' runtime folders with their systemd units).
pub(crate) const SYSTEM: &[&str] = &[
    "/etc",
    "/usr",
    "/bin",
    "/sbin",
    "/boot",
    "/dev",
    "/proc",
    "/sys",
    "/opt",
    "/run",
    "/var/run",
    "/var/spool",
    "/var/lib",
    "/var/cache",
    "/var/local",
    "/var/opt",
    "/var/mail",
];

/// Why a session may not write a place.
///
/// ```
/// use relay_host::settings::WritePlace;
/// assert!(WritePlace::System("/var/spool".into()).to_string().contains("system folder"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WritePlace {
    /// The home folder itself.
    Home,
    /// A folder the home folder lies in.
    AboveHome,
    /// One of the home's configuration or program folders (the entry named, e.g. `.cargo`).
    HomeConfig(String),
    /// A system folder (the one named, e.g. `/var/spool`).
    System(String),
}

impl WritePlace {
    /// True when `"writes_home": true` lifts the rule.
    pub(crate) fn in_home(&self) -> bool {
        match self {
            WritePlace::Home | WritePlace::AboveHome | WritePlace::HomeConfig(_) => true,
            WritePlace::System(_) => false,
        }
    }
}

impl fmt::Display for WritePlace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WritePlace::Home => f.write_str(
                "it is the home folder, whose shells' start-up files (and every file they \
                 source) the operator's own shell runs",
            ),
            WritePlace::AboveHome => f.write_str(
                "the home folder lies inside it, with the shells' start-up files (and every file \
                 they source) the operator's own shell runs",
            ),
            WritePlace::HomeConfig(entry) => write!(
                f,
                "it is in the home's {entry:?}, where the operator's programs read configuration \
                 or find programs to run"
            ),
            WritePlace::System(dir) => write!(
                f,
                "it is in {dir:?}, a system folder the host runs code or reads configuration from"
            ),
        }
    }
}

/// Why a session may not write `path` (absolute; as expanded, and again as its real path
/// `real` where it exists), with the home folder `home` (as given, and `home_real`); `None`
/// when it may.
pub(crate) fn refused_write(
    path: &Path,
    real: Option<&Path>,
    home: &Path,
    home_real: Option<&Path>,
) -> Option<WritePlace> {
    let paths = [Some(normal(path)), real.map(normal)];
    let homes = [Some(normal(home)), home_real.map(normal)];
    for p in paths.iter().flatten() {
        for h in homes.iter().flatten() {
            if let Some(why) = in_home(p, h) {
                return Some(why);
            }
        }
        if let Some(dir) = SYSTEM.iter().find(|s| p.starts_with(s)) {
            return Some(WritePlace::System(dir.to_string()));
        }
        let top_lib = (p.components().nth(1))
            .and_then(|c| c.as_os_str().to_str())
            .filter(|n| n.starts_with("lib"));
        if let Some(lib) = top_lib {
            return Some(WritePlace::System(format!("/{lib}")));
        }
    }
    None
}

/// The home rules for `p` against the home `h` (both lexically normal).
fn in_home(p: &Path, h: &Path) -> Option<WritePlace> {
    if p == h {
        return Some(WritePlace::Home);
    }
    if h.starts_with(p) {
        return Some(WritePlace::AboveHome);
    }
    let entry = p.strip_prefix(h).ok()?.components().next()?;
    let name = entry.as_os_str().to_string_lossy();
    (name.starts_with('.') || name == "bin").then(|| WritePlace::HomeConfig(name.into_owned()))
}

/// `p` without `.` components and with each `..` taken back (no link is followed).
fn normal(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// The real path of `p`: its own where it exists, else its nearest existing folder's with the
/// rest appended (a grant may name a folder not made yet).
pub(crate) fn real_path(p: &Path) -> Option<PathBuf> {
    let p = normal(p);
    let mut rest = Vec::new();
    let mut at = p.as_path();
    loop {
        if let Ok(real) = at.canonicalize() {
            let mut out = real;
            out.extend(rest.iter().rev());
            return Some(out);
        }
        rest.push(at.file_name()?.to_os_string());
        at = at.parent()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(p: &str) -> Option<WritePlace> {
        refused_write(Path::new(p), None, Path::new("/home/me"), None)
    }

    /// The three rules, each with a place it refuses and one beside it it allows.
    #[test]
    fn the_home_its_dot_entries_and_system_folders_are_refused() {
        assert_eq!(why("/home/me/src/app"), None);
        assert_eq!(why("/home/me/proj"), None);
        assert_eq!(why("/var/tmp/x"), None);
        assert_eq!(why("/tmp/x"), None);
        assert_eq!(why("/srv/data"), None);
        assert_eq!(why("/home/me"), Some(WritePlace::Home));
        assert_eq!(why("/home/me/"), Some(WritePlace::Home));
        assert_eq!(why("/home/me/src/.."), Some(WritePlace::Home));
        assert_eq!(why("/home"), Some(WritePlace::AboveHome));
        assert_eq!(why("/"), Some(WritePlace::AboveHome));
        for (p, e) in [
            ("/home/me/.cargo", ".cargo"),
            ("/home/me/.cargo/bin", ".cargo"),
            ("/home/me/.bash_aliases", ".bash_aliases"),
            ("/home/me/.config/systemd/user", ".config"),
            ("/home/me/.local/share", ".local"),
            ("/home/me/bin", "bin"),
        ] {
            assert_eq!(why(p), Some(WritePlace::HomeConfig(e.into())), "{p}");
        }
        for (p, s) in [
            ("/var/spool/cron/crontabs", "/var/spool"),
            ("/var/lib/x", "/var/lib"),
            ("/run/user/1000/systemd", "/run"),
            ("/etc", "/etc"),
            ("/usr/local/bin", "/usr"),
            ("/lib64", "/lib64"),
        ] {
            assert_eq!(why(p), Some(WritePlace::System(s.into())), "{p}");
        }
        assert!(why("/home/me/.ssh").unwrap().in_home());
        assert!(!why("/etc/ssh").unwrap().in_home());
    }

    /// A grant that leads into a refused place by a link is refused by its real path, and a
    /// home given through a link by the home's real path.
    #[test]
    fn real_paths_are_checked_too() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".config")).unwrap();
        let link = dir.path().join("innocent");
        std::os::unix::fs::symlink(home.join(".config"), &link).unwrap();
        let real = real_path(&link.join("systemd/user")).unwrap();
        let home_real = home.canonicalize().unwrap();
        assert_eq!(
            refused_write(&link, Some(&real), &home, Some(&home_real)),
            Some(WritePlace::HomeConfig(".config".into()))
        );
        assert_eq!(
            real_path(&home.join("missing/deeper")),
            Some(home_real.join("missing/deeper"))
        );
    }

    /// Each reason names the place and why it matters.
    #[test]
    fn each_reason_reads_as_a_sentence() {
        assert_eq!(
            WritePlace::HomeConfig(".cargo".into()).to_string(),
            "it is in the home's \".cargo\", where the operator's programs read configuration or \
             find programs to run"
        );
        assert_eq!(
            WritePlace::System("/var/spool".into()).to_string(),
            "it is in \"/var/spool\", a system folder the host runs code or reads configuration \
             from"
        );
    }
}
