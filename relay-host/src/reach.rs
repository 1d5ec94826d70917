//! What sessions can write, and the checks that keep a later launch out of their reach.
//!
//! A session without the token must not change what a later launch runs, reads as
//! configuration, or talks to. The launch and `relay-host status` share these checks: the
//! programs that later hold the token, the `PATH` folders they are found in, the settings file
//! and the token file itself.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::settings::{grants, Settings};
use relay_token::sandbox::write_deny;

/// Every template's read-write grants (built-in and configured), expanded against the home
/// folder `home`, `project` and the relay-owned Claude config folder, each with its real path too.
/// A `{project}` grant is left out without a project.
pub(crate) fn rw_grants(
    home: &Path,
    settings: &Settings,
    project: Option<&Path>,
    claude_config: &Path,
) -> Vec<PathBuf> {
    rw_grants_in(
        home,
        settings,
        project,
        claude_config,
        &relay_token::sandbox::Realpaths::default(),
    )
}

/// [`rw_grants`] with the launch's real-path cache: each folder holding grants is made
/// canonical once, a grant in it costs one `lstat` (a template the launch does not use costs a
/// look at each of its read-write grants, no walk of each one's path).
pub(crate) fn rw_grants_in(
    home: &Path,
    settings: &Settings,
    project: Option<&Path>,
    claude_config: &Path,
    real_of: &relay_token::sandbox::Realpaths,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut seen: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    for t in settings.all_templates() {
        let Some(g) = t.sandbox.grants() else {
            continue;
        };
        for value in &g.read_write {
            let Ok(Some(p)) = grants::expand(value, home, project, claude_config) else {
                continue;
            };
            let real = real_of.of(&p).ok();
            for q in [Some(p), real].into_iter().flatten() {
                if seen.insert(q.clone()) {
                    out.push(q);
                }
            }
        }
    }
    out
}

/// The grant among `grants` that holds `path`, if any.
fn holder<'a>(grants: &'a [PathBuf], path: &Path) -> Option<&'a PathBuf> {
    grants.iter().find(|g| path.starts_with(g))
}

/// The folders every sandbox keeps read-only where a grant shows them: the write-deny list's
/// folders under the home folder `home`, and the `PATH` folders that can be kept so (not a symlink a
/// session could replace). A program inside a read-write grant is safe only in one of these.
pub(crate) fn guarded_folders(home: &Path, grants: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = write_deny::HOME
        .iter()
        .filter(|e| matches!(e, write_deny::Entry::Dir(_)))
        .map(|e| home.join(e.rel()))
        .collect();
    out.extend(kept_path_folders(grants));
    out
}

/// The `PATH` folders every sandbox keeps read-only (each one [`path_folder_problem`] finds
/// nothing wrong with) and, beside each `<prefix>/bin` among them, the npm prefix's
/// `<prefix>/lib/node_modules` when it exists: `npm install -g` links `<prefix>/bin/claude` to
/// the package it puts there (a user prefix such as `~/.npm-global`, or nvm's node folders).
pub(crate) fn kept_path_folders(grants: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in relay_token::which::path_folders() {
        if path_folder_problem(&d, grants).is_some() {
            continue;
        }
        if let Some(m) = npm_modules_beside(&d) {
            if path_folder_problem(&m, grants).is_none() {
                out.push(m);
            }
        }
        out.push(d);
    }
    out
}

/// The npm prefix's `lib/node_modules` beside the `PATH` folder `bin` (`<prefix>/bin`), when it
/// is a folder (not a link).
pub(crate) fn npm_modules_beside(bin: &Path) -> Option<PathBuf> {
    if bin.file_name()? != "bin" {
        return None;
    }
    let m = bin.parent()?.join("lib/node_modules");
    std::fs::symlink_metadata(&m)
        .is_ok_and(|md| md.is_dir())
        .then_some(m)
}

/// What a session could reach that a later launch relies on: each check's finding, with the
/// paths it names. Its text is the refusal's or the warning's.
///
/// ```
/// use relay_host::reach::Exposure;
/// let e = Exposure::TokenMode { path: "/t".into(), mode: 0o644 };
/// assert_eq!(e.to_string(), "read claude_token_file /t: mode 0644 lets others read it; chmod 600 it");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exposure {
    /// A `PATH` folder passes through a symlink inside a read-write grant.
    PathFolderLink {
        /// The `PATH` folder.
        folder: PathBuf,
        /// The symlink on its way.
        link: PathBuf,
        /// The read-write grant that holds it.
        grant: PathBuf,
    },
    /// A program (`what`: `relay-shim`, `command`, `bwrap`, `ssh`) lies inside a read-write
    /// grant, outside every folder every sandbox keeps read-only.
    Program {
        /// Which program.
        what: &'static str,
        /// Its path (as found, or its real path).
        path: PathBuf,
        /// The read-write grant that holds it.
        grant: PathBuf,
    },
    /// The settings file's real path lies inside a read-write grant.
    Settings {
        /// Its real path.
        real: PathBuf,
        /// The read-write grant that holds it.
        grant: PathBuf,
    },
    /// The token file is readable or writable by group or others.
    TokenMode {
        /// The token file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The token file is owned by neither the host's user nor root.
    TokenOwner {
        /// The token file.
        path: PathBuf,
        /// Its owner.
        uid: u32,
        /// The user relay-host runs as.
        me: u32,
    },
    /// `upstream_ca_file`, a symlink on its way, or its real path lies inside a read-write
    /// grant: a session could put a CA of its own there.
    CaFileReach {
        /// The setting's path, as written.
        path: PathBuf,
        /// The path inside the grant (the file, a link on the way, or the real path).
        reached: PathBuf,
        /// The read-write grant that holds it.
        grant: PathBuf,
    },
    /// `upstream_ca_file` is writable by group or others.
    CaFileMode {
        /// The setting's path, as written.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// `upstream_ca_file` is owned by neither the host's user nor root.
    CaFileOwner {
        /// The setting's path, as written.
        path: PathBuf,
        /// Its owner.
        uid: u32,
        /// The user relay-host runs as.
        me: u32,
    },
}

impl std::fmt::Display for Exposure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let q = |p: &Path| p.display().to_string();
        match self {
            Exposure::PathFolderLink {
                folder,
                link,
                grant,
            } => write!(
                f,
                "PATH folder {:?} passes through the symlink {:?} inside the read-write grant \
                 {:?}: it cannot be kept read-only, so it is skipped",
                q(folder),
                q(link),
                q(grant)
            ),
            Exposure::Program { what, path, grant } => write!(
                f,
                "{what} {:?} lies inside the read-write grant {:?}, where a session could have \
                 replaced it; install it outside every read-write grant or in a folder every \
                 sandbox keeps read-only (~/.local/bin, ~/bin, ~/.local/share/claude, a PATH \
                 folder or its npm prefix's lib/node_modules)",
                q(path),
                q(grant)
            ),
            Exposure::Settings { real, grant } => write!(
                f,
                "its real path {:?} lies inside the read-write grant {:?}, where a session could \
                 rewrite it; keep the settings file itself in the config folder",
                q(real),
                q(grant)
            ),
            Exposure::TokenMode { path, mode } => write!(
                f,
                "read claude_token_file {}: mode {mode:04o} lets others read it; chmod 600 it",
                path.display()
            ),
            Exposure::TokenOwner { path, uid, me } => write!(
                f,
                "read claude_token_file {}: owned by uid {uid}, not by the user relay-host runs \
                 as (uid {me})",
                path.display()
            ),
            Exposure::CaFileReach {
                path,
                reached,
                grant,
            } => write!(
                f,
                "upstream_ca_file {}: {} lies inside the read-write grant {}, where a session \
                 could add a CA of its own; keep the file (and every symlink on its way) \
                 outside every read-write grant (the config folder is)",
                path.display(),
                reached.display(),
                grant.display()
            ),
            Exposure::CaFileMode { path, mode } => write!(
                f,
                "upstream_ca_file {}: mode {mode:04o} lets others write it; chmod go-w it",
                path.display()
            ),
            Exposure::CaFileOwner { path, uid, me } => write!(
                f,
                "upstream_ca_file {}: owned by uid {uid}, not by the user relay-host runs as \
                 (uid {me}) or root",
                path.display()
            ),
        }
    }
}

impl std::error::Error for Exposure {}

/// Why a `PATH` folder inside a read-write grant cannot be kept read-only (it is, or passes
/// through, a symlink a session could replace), or `None`.
pub(crate) fn path_folder_problem(folder: &Path, grants: &[PathBuf]) -> Option<Exposure> {
    let g = holder(grants, folder)?;
    let mut p = g.clone();
    for c in folder.strip_prefix(g).ok()?.components() {
        p.push(c);
        if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
            return Some(Exposure::PathFolderLink {
                folder: folder.to_path_buf(),
                link: p,
                grant: g.clone(),
            });
        }
    }
    None
}

/// Why `program` (as found) could have been planted by a session, or `None`: its path or real
/// path lies inside a read-write grant, outside every folder that every sandbox keeps
/// read-only (`guarded`). A guarded folder keeps everything beneath it read-only (Claude Code's
/// native installer's `~/.local/share/claude/versions/<version>`), unless a read-write grant
/// lies deeper still.
pub(crate) fn program_problem(
    what: &'static str,
    program: &Path,
    grants: &[PathBuf],
    guarded: &[PathBuf],
) -> Option<Exposure> {
    let real = program
        .canonicalize()
        .unwrap_or_else(|_| program.to_path_buf());
    for p in [program, real.as_path()] {
        let Some(g) = holder(grants, p) else {
            continue;
        };
        // A guarded folder is kept read-only whole, so a program anywhere beneath it is safe
        // (the native installer's `~/.local/share/claude/versions/<v>`, an npm package).
        let folder = p.parent().unwrap_or(p);
        let below_every_grant = |d: &PathBuf| {
            grants
                .iter()
                .filter(|g| p.starts_with(g))
                .all(|g| d.starts_with(g))
        };
        if guarded
            .iter()
            .any(|d| folder.starts_with(d) && below_every_grant(d))
        {
            continue;
        }
        return Some(Exposure::Program {
            what,
            path: p.to_path_buf(),
            grant: g.clone(),
        });
    }
    None
}

/// Why the settings file cannot be trusted, or `None`: its real path leaves the config folder
/// (which every sandbox masks) for a read-write grant, through a symlink: a session could
/// rewrite it there.
pub(crate) fn settings_problem(
    file: &Path,
    config_dir: &Path,
    grants: &[PathBuf],
) -> Option<Exposure> {
    let real = file.canonicalize().unwrap_or_else(|_| file.to_path_buf());
    let config = config_dir
        .canonicalize()
        .unwrap_or_else(|_| config_dir.to_path_buf());
    if real.starts_with(&config) {
        return None;
    }
    let grant = holder(grants, &real)?.clone();
    Some(Exposure::Settings { real, grant })
}

/// Why the token file is exposed, or `None`: readable or writable by group or others, or owned
/// by neither the user relay-host runs as nor root.
pub(crate) fn token_file_problem(path: &Path) -> Option<Exposure> {
    let m = std::fs::metadata(path).ok()?;
    if !m.is_file() {
        // A folder or a device: the read says "not a regular file", which is the cause.
        return None;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let path = path.to_path_buf();
    // The rule is the library's (`ltt` applies it too); the words are the host's.
    match relay_token::token_file_exposure(m.mode(), m.uid(), me)? {
        relay_token::TokenFileReason::Mode(mode) => Some(Exposure::TokenMode { path, mode }),
        relay_token::TokenFileReason::Owner { uid, me } => {
            Some(Exposure::TokenOwner { path, uid, me })
        }
        _ => None,
    }
}

/// What is wrong with a file's owner or mode.
enum Ownership {
    /// Permission bits in the mask are set (the bits given).
    Mode(u32),
    /// Owned by neither the user relay-host runs as (`me`) nor root.
    Owner { uid: u32, me: u32 },
}

/// The rule for the other files relay-host trusts (`upstream_ca_file`): none of the permission
/// bits in `mask`, and owned by the user relay-host runs as or by root.
fn ownership(m: &std::fs::Metadata, mask: u32) -> Option<Ownership> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if m.mode() & mask != 0 {
        return Some(Ownership::Mode(m.mode() & 0o7777));
    }
    if m.uid() != me && m.uid() != 0 {
        let uid = m.uid();
        return Some(Ownership::Owner { uid, me });
    }
    None
}

#[path = "reach_ca.rs"]
mod ca;
#[cfg(target_os = "linux")]
pub(crate) use ca::read_system_ca;
pub(crate) use ca::{read_upstream_ca, UpstreamCaError};

#[cfg(test)]
mod tests {
    /// `rw_grants`'s example.
    #[test]
    fn rw_grants_doc_example() {
        let result = (|| {
            use crate::{reach::rw_grants, Host};
            let host = Host::from_dirs("/c".into(), "/s".into())?;
            let grants = rw_grants(
                &host.home,
                &Default::default(),
                None,
                std::path::Path::new("/s/claude"),
            );
            // The built-in templates write their project (none here) and the launch's own
            // Claude config folder, never the home.
            assert!(grants.contains(&std::path::PathBuf::from("/s/claude")));
            assert!(!grants.contains(&host.home));
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `guarded_folders`'s example.
    #[test]
    fn guarded_folders_doc_example() {
        let result = (|| {
            use crate::{reach::guarded_folders, Host};
            let host = Host::from_dirs("/c".into(), "/s".into())?;
            assert!(guarded_folders(&host.home, &[]).contains(&host.home.join(".local/bin")));
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `kept_path_folders`'s example.
    #[test]
    fn kept_path_folders_doc_example() {
        let result = (|| {
            let dir = tempfile::tempdir()?;
            std::fs::create_dir_all(dir.path().join("lib/node_modules"))?;
            let kept = crate::reach::npm_modules_beside(&dir.path().join("bin"));
            assert_eq!(kept, Some(dir.path().join("lib/node_modules")));
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `npm_modules_beside`'s example.
    #[test]
    fn npm_modules_beside_doc_example() {
        assert_eq!(
            crate::reach::npm_modules_beside(std::path::Path::new("/nonexistent/bin")),
            None
        );
    }

    /// `path_folder_problem`'s example.
    #[test]
    fn path_folder_problem_doc_example() {
        use std::path::{Path, PathBuf};
        let grants = [PathBuf::from("/nonexistent-home")];
        assert!(crate::reach::path_folder_problem(Path::new("/usr/bin"), &grants).is_none());
    }

    /// `program_problem`'s example.
    #[test]
    fn program_problem_doc_example() {
        use crate::reach::program_problem;
        use std::path::{Path, PathBuf};
        let grants = [PathBuf::from("/home/me")];
        let guarded = [
            PathBuf::from("/home/me/.local/bin"),
            PathBuf::from("/home/me/.local/share/claude"),
        ];
        assert!(program_problem(
            "claude",
            Path::new("/home/me/.local/bin/claude"),
            &grants,
            &guarded
        )
        .is_none());
        let native = Path::new("/home/me/.local/share/claude/versions/2.1.332");
        assert!(program_problem("claude", native, &grants, &guarded).is_none());
        let e = program_problem("bwrap", Path::new("/home/me/x/bwrap"), &grants, &guarded).unwrap();
        assert!(e.to_string().starts_with(
            "bwrap \"/home/me/x/bwrap\" lies inside the read-write grant \"/home/me\""
        ));
    }

    /// `settings_problem`'s example.
    #[test]
    fn settings_problem_doc_example() {
        use std::path::{Path, PathBuf};
        let grants = [PathBuf::from("/home/me")];
        let file = Path::new("/home/me/dotfiles/relay.json");
        let e = crate::reach::settings_problem(file, Path::new("/home/me/.config/relay"), &grants);
        assert!(e
            .unwrap()
            .to_string()
            .contains("lies inside the read-write grant"));
    }

    /// `token_file_problem`'s example.
    #[test]
    fn token_file_problem_doc_example() {
        let result = (|| {
            let dir = tempfile::tempdir()?;
            let f = dir.path().join("token");
            std::fs::write(&f, "x")?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644))?;
            let e = crate::reach::token_file_problem(&f).unwrap();
            assert!(e
                .to_string()
                .ends_with("mode 0644 lets others read it; chmod 600 it"));
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }
}
