//! Where each entry applies: the paths the list names for one session, by the role of each
//! folder (the home folder, the project, another read-write grant) and the repository it
//! belongs to.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::list::{Entry, CLAUDE, HOME, NO_TOKEN, PROJECT, REPOSITORY};

/// What a folder of the list is to the launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Role {
    /// The home folder.
    Home,
    /// The launch's project folder.
    Project,
    /// Any other read-write grant.
    Grant,
}

/// One path the list names for a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The absolute path.
    pub path: PathBuf,
    /// A folder (else a file).
    pub dir: bool,
    /// When missing, held by a placeholder; when false, kept read-only only if it exists.
    pub hold: bool,
    /// The placeholder is an empty folder even for a file (an empty folder is invisible to
    /// `git status`).
    pub folder_placeholder: bool,
    /// Writable again inside a read-only entry (a linked worktree's or a submodule's git
    /// folder); kept so only if it exists.
    pub writable: bool,
}

/// The paths the list names for one session, by the rule of this module: the entries of each
/// `(folder, role)` and of the repository each belongs to, then `extra` (the operator's
/// additions and the `PATH` folders, each `(path, is_folder)`), held when missing. Every path
/// once, in order. `token`: the session gets the token ([`NO_TOKEN`] does not apply).
///
/// ```
/// use std::path::{Path, PathBuf};
/// use relay_token::sandbox::write_deny::{plan, Role};
/// let dir = tempfile::tempdir()?;
/// let (home, grant) = (dir.path().join("home"), dir.path().join("cache"));
/// std::fs::create_dir_all(grant.join(".git"))?;
/// std::fs::write(grant.join(".git/HEAD"), "ref: refs/heads/main\n")?;
/// std::fs::create_dir_all(&home)?;
/// let all = plan(&[(home.clone(), Role::Home), (grant.clone(), Role::Grant)], false, &[]);
/// let has = |p: PathBuf| all.iter().any(|l| l.path == p);
/// assert!(has(home.join(".ssh")) && has(home.join(".claude/settings.json")));
/// assert!(has(home.join(".git"))); // the home belongs to no repository here
/// assert!(has(grant.join(".git/config")) && !has(grant.join(".bashrc")));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn plan(folders: &[(PathBuf, Role)], token: bool, extra: &[(PathBuf, bool)]) -> Vec<Listed> {
    let mut out = Out::default();
    for (at, role) in folders {
        lay(&mut out, at, *role, token);
    }
    for (p, dir) in extra {
        out.add(p.clone(), *dir, true, false);
    }
    out.list
}

/// A list under construction, each path once.
#[derive(Default)]
struct Out {
    list: Vec<Listed>,
    seen: HashSet<PathBuf>,
}

impl Out {
    fn add(&mut self, path: PathBuf, dir: bool, hold: bool, folder_placeholder: bool) {
        if self.seen.insert(path.clone()) {
            self.list.push(Listed {
                path,
                dir,
                hold,
                folder_placeholder,
                writable: false,
            });
        }
    }

    /// A linked worktree's or a submodule's git folder, writable again, and its steering
    /// entries read-only.
    fn reopen(&mut self, git_dir: PathBuf) {
        for s in crate::sandbox::git_dirs::STEERING {
            self.add(git_dir.join(s.rel), s.dir, s.hold, false);
        }
        let fresh = !self.seen.contains(&git_dir);
        self.add(git_dir, true, false, false);
        if let (true, Some(l)) = (fresh, self.list.last_mut()) {
            l.writable = true;
        }
    }

    fn entries(&mut self, at: &Path, entries: &[Entry], hold: bool, folder_placeholder: bool) {
        for e in entries {
            let fp = folder_placeholder && !e.is_dir();
            self.add(at.join(e.rel()), e.is_dir(), hold, fp);
        }
    }
}

/// The entries of one folder of the list, by its role.
fn lay(out: &mut Out, at: &Path, role: Role, token: bool) {
    match role {
        Role::Home => {
            out.entries(at, HOME, true, false);
            out.entries(at, PROJECT, true, false);
            out.entries(at, CLAUDE, true, false);
            if !token {
                out.entries(at, NO_TOKEN, true, false);
            }
        }
        Role::Project => {
            out.entries(at, HOME, false, false);
            out.entries(at, PROJECT, true, true);
            if token {
                out.entries(at, CLAUDE, true, false);
            } else {
                out.add(at.join(".claude"), true, true, false);
            }
        }
        Role::Grant => {}
    }
    let repo = repository_of(at);
    if role != Role::Grant {
        // Every folder git would look in before the repository it uses (or all the way up):
        // a `.git` a session made in one would be found first. Held there (an empty read-only
        // folder); the caller keeps only those inside a read-write grant.
        let top = repo.as_ref().map(|(t, _)| t.as_path());
        for a in at.ancestors().take_while(|a| Some(*a) != top) {
            out.add(a.join(".git"), true, true, false);
        }
    }
    match repo {
        Some((top, true)) => lay_repository(out, &top),
        Some((top, false)) => {
            out.add(top.join(".git"), false, false, false);
            if let Some(owner) = crate::sandbox::git_dirs::owner_of_git_file(&top.join(".git")) {
                lay_repository(out, &owner);
            }
        }
        None => {}
    }
}

/// A repository's entries (`top` holds its `.git` folder) and its linked git folders'.
fn lay_repository(out: &mut Out, top: &Path) {
    out.entries(top, REPOSITORY, true, false);
    for g in crate::sandbox::git_dirs::linked(&top.join(".git")) {
        out.reopen(g);
    }
}

/// The folder holding the `.git` git would use for `at` (the first found walking up), and
/// whether that `.git` is a folder (else a file: a linked worktree or a submodule). A `.git`
/// folder without `HEAD` is no repository to git, which looks further up: so does this (an
/// empty one is what a placeholder of another session's looks like).
fn repository_of(at: &Path) -> Option<(PathBuf, bool)> {
    for dir in at.ancestors() {
        let git = dir.join(".git");
        match fs::symlink_metadata(&git) {
            Ok(m) if m.is_dir() && fs::symlink_metadata(git.join("HEAD")).is_err() => continue,
            Ok(m) => return Some((dir.to_path_buf(), m.is_dir())),
            Err(_) => continue,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rels(list: &[Listed], under: &Path) -> Vec<String> {
        list.iter()
            .filter_map(|l| l.path.strip_prefix(under).ok())
            .map(|p| p.display().to_string())
            .collect()
    }

    /// Grants that are no repository add nothing; a grant that is one adds its git folder's
    /// entries once, also when nested in the project; a nested grant inside the project's
    /// repository adds nothing; a `.git` file is kept itself.
    #[test]
    fn grants_add_only_their_repository() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (p, plain, repo, wt) = (
            root.join("p"),
            root.join("plain"),
            root.join("repo"),
            root.join("wt"),
        );
        for d in [
            p.join(".git"),
            plain.clone(),
            repo.join(".git"),
            p.join("sub"),
        ] {
            fs::create_dir_all(d).unwrap();
        }
        fs::create_dir_all(&wt).unwrap();
        fs::write(wt.join(".git"), "gitdir: /elsewhere\n").unwrap();
        for r in [&p, &repo] {
            fs::write(r.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        }
        let folders = [
            (p.clone(), Role::Project),
            (plain.clone(), Role::Grant),
            (repo.clone(), Role::Grant),
            (p.join("sub"), Role::Grant),
            (wt.clone(), Role::Grant),
        ];
        let list = plan(&folders, true, &[]);
        assert!(rels(&list, &plain).is_empty());
        let git: Vec<String> = REPOSITORY.iter().map(|e| e.rel().to_string()).collect();
        assert_eq!(rels(&list, &repo), git);
        assert!(rels(&list, &p.join("sub")).is_empty());
        assert_eq!(rels(&list, &wt), [".git"]);
        let every = list.iter().map(|l| &l.path).collect::<HashSet<_>>();
        assert_eq!(every.len(), list.len(), "a path laid twice");
        // The project: its entries (a missing file held by a folder), its repository's, and no
        // `.git` placeholder (it has one); a missing home entry there is not held.
        let proj = rels(&list, &p);
        assert!(proj.contains(&".git/config".to_string()), "{proj:?}");
        assert!(!proj.contains(&".git".to_string()), "{proj:?}");
        let mcp = list.iter().find(|l| l.path == p.join(".mcp.json")).unwrap();
        assert!(mcp.hold && mcp.folder_placeholder);
        let rc = list.iter().find(|l| l.path == p.join(".bashrc")).unwrap();
        assert!(!rc.hold);
    }

    /// Without the token the project's `.claude` is one entry, whole; with it, its commands and
    /// agents. A project in no repository gets one `.git` folder, held.
    #[test]
    fn claude_folder_and_missing_repository() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().canonicalize().unwrap().join("p");
        fs::create_dir_all(&p).unwrap();
        let no_token = plan(&[(p.clone(), Role::Project)], false, &[]);
        let r = rels(&no_token, &p);
        assert!(r.contains(&".claude".to_string()) && !r.iter().any(|e| e.starts_with(".claude/")));
        let git = no_token.iter().find(|l| l.path == p.join(".git")).unwrap();
        assert!(git.dir && git.hold);
        assert!(!r.iter().any(|e| e.starts_with(".git/")), "{r:?}");
        let token = rels(&plan(&[(p.clone(), Role::Project)], true, &[]), &p);
        assert!(token.contains(&".claude/commands".to_string()));
        assert!(!token.contains(&".claude".to_string()));
        // Every folder above, up to the root, gets its `.git` held too (the caller keeps those
        // a grant makes writable).
        let up = p.parent().unwrap().join(".git");
        assert!(
            no_token.iter().any(|l| l.path == up && l.hold),
            "{no_token:?}"
        );
        assert!(no_token.iter().any(|l| l.path == Path::new("/.git")));
        // An empty `.git` (another session's placeholder) is no repository: still one entry.
        fs::create_dir(p.join(".git")).unwrap();
        let again = rels(&plan(&[(p.clone(), Role::Project)], true, &[]), &p);
        assert!(again.contains(&".git".to_string()), "{again:?}");
        assert!(!again.iter().any(|e| e.starts_with(".git/")), "{again:?}");
    }

    /// A worktree's and a submodule's git folder are writable again inside the read-only
    /// `worktrees/` and `modules/`, with their steering entries read-only.
    #[test]
    fn linked_git_folders_are_reopened() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().canonicalize().unwrap();
        let git = p.join(".git");
        for d in [git.join("worktrees/wt"), git.join("modules/sub")] {
            fs::create_dir_all(d).unwrap();
        }
        fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        fs::write(git.join("modules/sub/HEAD"), "ref: refs/heads/main\n").unwrap();
        let list = plan(&[(p.clone(), Role::Project)], true, &[]);
        let get = |rel: &str| list.iter().find(|l| l.path == p.join(rel)).unwrap();
        for rel in [".git/worktrees", ".git/modules", ".git/modules/sub/config"] {
            assert!(!get(rel).writable, "{rel}");
        }
        assert!(get(".git/worktrees/wt").writable && get(".git/modules/sub").writable);
        assert!(get(".git/worktrees/wt/config.worktree").hold);
        assert!(!get(".git/modules/sub/commondir").hold);
    }
}
