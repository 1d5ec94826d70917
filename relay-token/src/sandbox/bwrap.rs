//! Rendering a resolved profile as a `bwrap` argv (finding a `bwrap` is in `bwrap_probe`).

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, RawFd};
use std::path::{Path, PathBuf};

use super::baseline::Base;
use super::{Ident, Mask, Resolved};

/// The namespace and privilege flags every sandbox gets (and the probe of [`find_bwrap`](super::find_bwrap) runs
/// with): user, pid, IPC and UTS namespaces (no SysV message queue, semaphore or shared
/// memory segment is shared with another session or the host, a channel around any network
/// allow-list), a cgroup namespace where the kernel has one, dies with its parent, a new
/// session (no terminal injection), every capability dropped (bwrap keeps them for a root
/// caller otherwise).
///
/// ```
/// assert!(relay_token::sandbox::NAMESPACE_FLAGS.ends_with(&["--cap-drop", "ALL"]));
/// ```
pub const NAMESPACE_FLAGS: &[&str] = &[
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
];

impl Resolved {
    /// The full `bwrap` command line: `bwrap` itself, the sandbox, `--`, then `command`. In
    /// order (the same list is in [DESIGN.md](https://github.com/relay-token/relay-token/blob/main/docs/DESIGN.md)):
    ///
    /// 1. the namespace flags ([`NAMESPACE_FLAGS`]: `--unshare-user --unshare-pid
    ///    --unshare-ipc --unshare-uts --unshare-cgroup-try --die-with-parent --new-session
    ///    --cap-drop ALL`), and `--unshare-net` unless the
    ///    network is the host's ([`SandboxNet`](super::SandboxNet));
    /// 2. the system baseline read-only (`/usr`, `/etc`, the `/lib*`, `/bin`, `/sbin`; a symlink
    ///    such as Debian's `/bin -> usr/bin` as `--symlink`), then `--dev /dev`, `--proc /proc`;
    /// 3. the private `/tmp` (the temp folder bound there, else an empty tmpfs), before any grant
    ///    that lives under `/tmp`;
    ///
    ///    Every source the host identified (the temp folder in step 3, the grants, guards and
    ///    protected paths of step 4) is bound by path (`--bind SRC DEST`), or after
    ///    [`bind_by_fd`](Self::bind_by_fd) by the descriptor the host checked (`--bind-fd N
    ///    DEST`, `--ro-bind-fd N DEST`);
    /// 4. the grants, the command's folder, the paths kept read-only by
    ///    [`Profile::protect`](super::Profile::protect) and, for every deny and protected path,
    ///    the folders between a grant and it, each bound onto itself, all together shallow
    ///    first: a guard never turns a deeper read-only grant read-write, and all come before
    ///    any mask, so none uncovers another deny's mask;
    /// 5. the masks (`--perms 000 --tmpfs DIR --remount-ro DIR` for a folder, `--ro-bind EMPTY
    ///    FILE` for a file);
    /// 6. the network's binds (its socket and forwarder), `--chdir` the project folder, then
    ///    `--setenv` for each variable (the network's last, so they win);
    /// 7. after `--`, when bound by path, `/bin/sh -c CHECK relay-sandbox-check EXPECTED PATHS`
    ///    (one `DEV:INO` and one path per line): inside the sandbox one `stat` compares each bind
    ///    (and the private `/tmp`) with the object [`Profile::resolve`](super::Profile::resolve)
    ///    identified, refuses with exit 126 when one was swapped for a symlink meanwhile, and
    ///    `exec`s the rest otherwise (bound by descriptor, nothing can have been swapped: no
    ///    check); then the network's forwarder, if any, then the command.
    ///
    /// ```no_run
    /// use std::ffi::OsString;
    /// use std::path::Path;
    /// let r = relay_token::sandbox::Profile::new().resolve(&[])?;
    /// let argv = r.bwrap_argv(Path::new("/usr/bin/bwrap"), &[OsString::from("/bin/true")]);
    /// let status = std::process::Command::new(&argv[0]).args(&argv[1..]).status()?;
    /// assert!(status.success());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bwrap_argv(&self, bwrap: &Path, command: &[OsString]) -> Vec<OsString> {
        self.bwrap_argv_with_env(bwrap, &[], command)
    }

    /// [`bwrap_argv`](Self::bwrap_argv), plus `--setenv NAME VALUE` for each of `setenv`, laid
    /// just before the command: variables that reach the sandboxed program only, never bwrap
    /// itself or the processes around it (a request's `env` may name `LD_PRELOAD`).
    ///
    /// ```no_run
    /// use std::ffi::OsString;
    /// use std::path::Path;
    /// let r = relay_token::sandbox::Profile::new().resolve(&[])?;
    /// let env = [(OsString::from("A"), OsString::from("1"))];
    /// let argv = r.bwrap_argv_with_env(Path::new("/usr/bin/bwrap"), &env, &[OsString::from("/bin/true")]);
    /// assert!(argv.windows(3).any(|w| w == ["--setenv", "A", "1"]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bwrap_argv_with_env(
        &self,
        bwrap: &Path,
        setenv: &[(OsString, OsString)],
        command: &[OsString],
    ) -> Vec<OsString> {
        let mut a = vec![bwrap.as_os_str().to_os_string()];
        a.extend(self.bwrap_options(setenv));
        a.push("--".into());
        a.extend(self.bwrap_command(command));
        a
    }

    /// bwrap's options alone, steps 1 to 6 of [`bwrap_argv`](Self::bwrap_argv) (no `bwrap`, no
    /// `--`): what a host hands bwrap in a file (`--args FD`) instead of on its command line.
    ///
    /// ```no_run
    /// let r = relay_token::sandbox::Profile::new().resolve(&[])?;
    /// assert_eq!(r.bwrap_options(&[])[0], "--unshare-user");
    /// # Ok::<(), relay_token::sandbox::SandboxError>(())
    /// ```
    pub fn bwrap_options(&self, setenv: &[(OsString, OsString)]) -> Vec<OsString> {
        let mut a = Argv(Vec::new());
        let layered = self.layered();
        let checks = self.mount_checks(&layered);
        let by_fd = self.fd_numbers(&checks);
        self.push_system(&mut a, &by_fd);
        let number: std::collections::HashMap<&Path, RawFd> =
            by_fd.iter().map(|(p, n)| (p.as_path(), *n)).collect();
        for b in &layered {
            match number.get(b.path.as_path()) {
                Some(n) => a.three(
                    if b.rw { "--bind-fd" } else { "--ro-bind-fd" },
                    n.to_string(),
                    &b.path,
                ),
                None => a.three(if b.rw { "--bind" } else { "--ro-bind" }, &b.path, &b.path),
            }
        }
        self.push_masks(&mut a);
        a.0.extend(self.net.binds());
        for (src, dest) in &self.placed {
            a.three("--ro-bind", src, dest);
        }
        for dest in &self.empty {
            a.two("--tmpfs", dest);
            a.two("--remount-ro", dest);
        }
        if let Some(p) = &self.project {
            a.two("--chdir", p);
        }
        // The network's variables last: they win over a request's.
        for (k, v) in setenv.iter().chain(&self.net.env()) {
            a.three("--setenv", k, v);
        }
        a.0
    }

    /// What follows bwrap's `--`, step 7 of [`bwrap_argv`](Self::bwrap_argv): the in-sandbox
    /// check when bound by path, the network's forwarder, then `command`.
    ///
    /// ```no_run
    /// use std::ffi::OsString;
    /// let r = relay_token::sandbox::Profile::new().resolve(&[])?;
    /// assert_eq!(r.bwrap_command(&[OsString::from("/bin/true")]), ["/bin/true"]);
    /// # Ok::<(), relay_token::sandbox::SandboxError>(())
    /// ```
    pub fn bwrap_command(&self, command: &[OsString]) -> Vec<OsString> {
        let mut a = Argv(Vec::new());
        if self.fd_base.is_none() {
            let layered = self.layered();
            let checks = self.mount_checks(&layered);
            self.push_mount_check(&mut a, &checks);
        }
        a.0.extend(self.net.command_prefix());
        a.0.extend(command.iter().cloned());
        a.0
    }

    /// Binds every source the host checked by the very descriptor it checked (bwrap's
    /// `--ro-bind-fd FD DEST` / `--bind-fd FD DEST`, numbered from `first` in the order of
    /// [`bind_fds`](Self::bind_fds)) instead of by path: what bwrap mounts *is* what the host
    /// checked, so no window is left between the check and the mount, and the command line
    /// needs no check inside the sandbox (no `/bin/sh`, no `stat`). Needs a bwrap with those
    /// options ([`BwrapFeatures::bind_fd`](super::BwrapFeatures::bind_fd)); the caller places each descriptor of
    /// [`bind_fds`](Self::bind_fds) at its number in bwrap, and no other (bwrap hands descriptors
    /// its command line does not name on to the sandboxed program; it closes each bind descriptor
    /// once used).
    ///
    /// ```no_run
    /// use std::ffi::OsString;
    /// use std::path::{Path, PathBuf};
    /// let mut p = relay_token::sandbox::Profile::new();
    /// p.read_write(PathBuf::from("/srv/app"));
    /// let mut r = p.resolve(&[PathBuf::from("/srv/app")])?;
    /// r.bind_by_fd(10);
    /// let argv = r.bwrap_argv(Path::new("/usr/bin/bwrap"), &[OsString::from("/bin/true")]);
    /// assert!(argv.windows(3).any(|w| w == ["--bind-fd", "10", "/srv/app"]));
    /// assert_eq!(r.bind_fds()[0].1, 10);
    /// # Ok::<(), relay_token::sandbox::SandboxError>(())
    /// ```
    pub fn bind_by_fd(&mut self, first: RawFd) -> &mut Self {
        self.fd_base = Some(first);
        self
    }

    /// The descriptors [`bind_by_fd`](Self::bind_by_fd) binds, each with the number it must
    /// have in bwrap (consecutive from the first); empty unless `bind_by_fd` was called.
    ///
    /// ```no_run
    /// # use std::path::PathBuf;
    /// let mut r = relay_token::sandbox::Profile::new().tmp(PathBuf::from("/var/tmp/s1")).resolve(&[])?;
    /// assert!(r.bind_fds().is_empty());
    /// r.bind_by_fd(10);
    /// assert_eq!(r.bind_fds().len(), 1);
    /// # Ok::<(), relay_token::sandbox::SandboxError>(())
    /// ```
    pub fn bind_fds(&self) -> Vec<(BorrowedFd<'_>, RawFd)> {
        let layered = self.layered();
        let checks = self.mount_checks(&layered);
        self.fd_numbers(&checks)
            .into_iter()
            .zip(&checks)
            .map(|((_, n), (_, ident))| (ident.fd.as_fd(), n))
            .collect()
    }

    /// Each checked mount point with its descriptor's number, when binding by descriptor.
    fn fd_numbers(&self, checks: &[(PathBuf, &Ident)]) -> Vec<(PathBuf, RawFd)> {
        let Some(first) = self.fd_base else {
            return Vec::new();
        };
        (first..)
            .zip(checks)
            .map(|(n, (p, _))| (p.clone(), n))
            .collect()
    }

    /// Steps 1 to 3: the namespace flags, the baseline, `/dev`, `/proc` and the private `/tmp`.
    fn push_system(&self, a: &mut Argv, by_fd: &[(PathBuf, RawFd)]) {
        for f in NAMESPACE_FLAGS.iter().chain(self.net.unshare_flags()) {
            a.push(f);
        }
        for b in &self.baseline {
            match b {
                Base::Dir(p) => a.three("--ro-bind", p, p),
                Base::Link { path, target } => a.three("--symlink", target, path),
            }
        }
        a.two("--dev", "/dev");
        a.two("--proc", "/proc");
        let tmp_fd = by_fd.iter().find(|(p, _)| p == Path::new("/tmp"));
        match (&self.tmp, tmp_fd) {
            (Some(_), Some((_, n))) => a.three("--bind-fd", n.to_string(), "/tmp"),
            (Some(t), None) => a.three("--bind", t, "/tmp"),
            (None, _) => a.two("--tmpfs", "/tmp"),
        }
    }

    /// Step 5: each mask once, skipping one an equal or enclosing folder mask already hides.
    fn push_masks(&self, a: &mut Argv) {
        let folders = self.folder_masks();
        let mut done: Vec<&Path> = Vec::new();
        for d in &self.denies {
            let path = d.mask.path();
            let covered = folders.iter().any(|f| path.starts_with(f) && path != *f);
            if covered || done.contains(&path) {
                continue;
            }
            done.push(path);
            match &d.mask {
                Mask::Folder(dir) => {
                    a.two("--perms", "000");
                    a.two("--tmpfs", dir);
                    a.two("--remount-ro", dir);
                }
                Mask::File { path, empty } => a.three("--ro-bind", empty, path),
            }
        }
    }

    /// Step 7, with an older bwrap that binds by path only: bwrap binds each source by path,
    /// after the host checked it: a session that can write a folder above a grant could swap the
    /// grant for a symlink in between, and bwrap would bind whatever it points at (the token's
    /// folder) outside every mask. So the sandbox first checks that each mount holds the object
    /// the host identified, then runs the command in its place (`exec`, same pid, same argv). One
    /// `stat` for every mount (a process each would cost a millisecond apiece); paths hold no
    /// control characters (refused when the profile was resolved).
    fn push_mount_check(&self, a: &mut Argv, checks: &[(PathBuf, &Ident)]) {
        if checks.is_empty() {
            return;
        }
        let mut expected = OsString::new();
        let mut paths = OsString::new();
        for (i, (p, ident)) in checks.iter().enumerate() {
            if i > 0 {
                expected.push("\n");
                paths.push("\n");
            }
            let (dev, ino) = ident.id;
            expected.push(format!("{dev}:{ino}"));
            paths.push(p);
        }
        a.push("/bin/sh");
        a.push("-c");
        a.push(CHECK_SCRIPT.replace("STAT", stat_program()));
        a.push("relay-sandbox-check");
        a.push(expected);
        a.push(paths);
    }

    /// Each rendered bind no mask hides, and the private `/tmp`, with the source the host
    /// identified: what is bound by descriptor, or checked inside.
    fn mount_checks(&self, layered: &[super::Bind]) -> Vec<(PathBuf, &Ident)> {
        let masked = |p: &Path| {
            self.denies.iter().any(|d| match &d.mask {
                Mask::Folder(dir) => p.starts_with(dir),
                Mask::File { path, .. } => p == path,
            })
        };
        let idents: std::collections::HashMap<&Path, &Ident> =
            self.idents.iter().map(|i| (i.path.as_path(), i)).collect();
        let ident_of = |p: &Path| idents.get(p).copied();
        let mut checks: Vec<(PathBuf, &Ident)> = Vec::new();
        for b in layered {
            if let (false, Some(id)) = (masked(&b.path), ident_of(&b.path)) {
                checks.push((b.path.clone(), id));
            }
        }
        if let Some(t) = &self.tmp {
            let tmp = Path::new("/tmp");
            if let (false, false, Some(id)) = (
                layered.iter().any(|b| b.path == tmp),
                masked(tmp),
                ident_of(t),
            ) {
                checks.push((tmp.to_path_buf(), id));
            }
        }
        checks
    }

    /// The folders masked whole.
    fn folder_masks(&self) -> Vec<&Path> {
        self.denies
            .iter()
            .filter_map(|d| match &d.mask {
                Mask::Folder(dir) => Some(dir.as_path()),
                Mask::File { .. } => None,
            })
            .collect()
    }

    /// Grants, protected paths and guards, in the order they are mounted.
    ///
    /// Grants and guards together, shallow first: a guard (a folder between a grant and a mask,
    /// bound onto itself so it cannot be renamed) laid after a deeper grant would hide it,
    /// turning a read-only grant beneath it read-write. Every guard still comes before every
    /// mask: a guard binds the host's folder, which carries no mask, so a guard laid after
    /// another deny's mask beneath it would uncover that token.
    fn layered(&self) -> Vec<super::Bind> {
        let folders = self.folder_masks();
        let inside_folder_mask = |p: &Path| folders.iter().any(|f| p.starts_with(f));
        let mut layered: Vec<super::Bind> = self.binds.clone();
        // A protected path is read-only, even where a grant names it read-write. One a placed
        // file stands over (a repository's configuration, shown as relay's copy) is not bound
        // itself: the copy, bound last and read-only, is all the sandbox sees there. Its guards
        // stay.
        let placed_over = |p: &Path| self.placed.iter().any(|(_, dest)| dest == p);
        for p in self.protects.iter().filter(|p| !placed_over(&p.path)) {
            match layered.iter_mut().find(|b| b.path == p.path) {
                Some(b) => b.rw = false,
                None => layered.push(super::Bind {
                    path: p.path.clone(),
                    rw: false,
                }),
            }
        }
        let guards = self
            .denies
            .iter()
            .flat_map(|d| &d.guards)
            .chain(self.protects.iter().flat_map(|p| &p.guards));
        let mut have: std::collections::HashSet<PathBuf> =
            layered.iter().map(|b| b.path.clone()).collect();
        for g in guards {
            if !inside_folder_mask(&g.path) && have.insert(g.path.clone()) {
                layered.push(g.clone());
            }
        }
        // A stable sort: among equal depths the grants keep their order and come first.
        layered.sort_by_key(|b| crate::path::depth(&b.path));
        layered
    }

    /// Every path mounted inside the sandbox other than the baseline, `/dev`, `/proc` and `/tmp`
    /// itself, with whether it is a folder: what bwrap needs a mount point for. A host uses it
    /// to make the mount points under `/tmp` itself, with private modes.
    ///
    /// ```no_run
    /// let r = relay_token::sandbox::Profile::new().resolve(&[])?;
    /// assert!(r.mount_targets().is_empty());
    /// # Ok::<(), relay_token::sandbox::SandboxError>(())
    /// ```
    pub fn mount_targets(&self) -> Vec<(PathBuf, bool)> {
        let mut out: Vec<(PathBuf, bool)> = self
            .layered()
            .into_iter()
            .map(|b| {
                let dir = std::fs::metadata(&b.path).map_or(true, |m| m.is_dir());
                (b.path, dir)
            })
            .collect();
        for d in &self.denies {
            match &d.mask {
                Mask::Folder(dir) => out.push((dir.clone(), true)),
                Mask::File { path, .. } => out.push((path.clone(), false)),
            }
        }
        out
    }
}

/// Run by `/bin/sh` inside the sandbox before the command: `$1` the expected `DEV:INO` lines,
/// `$2` the mounts' paths, one per line; each mount must be the object the host identified. Then
/// `exec` the command (the remaining arguments): same pid, same argv.
const CHECK_SCRIPT: &str = r#"exp=$1; paths=$2; shift 2
IFS='
'
set -f
got=$(STAT -c %d:%i -- $paths 2>/dev/null)
if [ "$got" != "$exp" ]; then
echo "relay-token: sandbox: a mount is not what the host checked (swapped during the launch); refusing to run" >&2
exit 126
fi
exec "$@""#;

/// The `stat` of the system baseline (coreutils on Debian).
fn stat_program() -> &'static str {
    ["/usr/bin/stat", "/bin/stat"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("/usr/bin/stat")
}

/// An argv under construction.
struct Argv(Vec<OsString>);

impl Argv {
    fn push(&mut self, s: impl AsRef<OsStr>) {
        self.0.push(s.as_ref().to_os_string());
    }
    fn two(&mut self, flag: &str, x: impl AsRef<OsStr>) {
        self.push(flag);
        self.push(x);
    }
    fn three(&mut self, flag: &str, x: impl AsRef<OsStr>, y: impl AsRef<OsStr>) {
        self.push(flag);
        self.push(x);
        self.push(y);
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::sandbox::write_deny::{plan, Placeholders, Role};
    use crate::sandbox::Profile;

    /// A project that is a repository (`.git` with `config`, `hooks/`, `info/`) and `n` other
    /// read-write grants that are none, with the write-deny list laid as a launch lays it (what
    /// exists kept read-only, a missing entry the list holds made as a placeholder first), bound
    /// by descriptor from 10: the rendered argv.
    fn argv_for(n: usize) -> (Vec<OsString>, PathBuf) {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (project, tmp) = (root.join("p"), root.join("tmp"));
        for d in [
            project.join(".git/hooks"),
            project.join(".git/info"),
            tmp.clone(),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(project.join(".git/config"), "").unwrap();
        std::fs::write(project.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        let mut profile = Profile::new();
        profile.read_write(project.clone()).project(project.clone());
        profile.tmp(tmp);
        let mut folders = vec![(project.clone(), Role::Project)];
        for i in 0..n {
            let g = root.join(format!("g/{i:03}"));
            std::fs::create_dir_all(&g).unwrap();
            profile.read_write(g.clone());
            folders.push((g, Role::Grant));
        }
        let state = root.join("state");
        std::fs::create_dir(&state).unwrap();
        let mut ph = Placeholders::open(&state).unwrap();
        for l in plan(&folders, true, &[]) {
            let there = std::fs::symlink_metadata(&l.path).is_ok();
            if there || (l.hold && ph.ensure(&l.path, l.dir || l.folder_placeholder).unwrap()) {
                profile.protect(l.path);
            }
        }
        let mut r = profile.resolve(&[]).unwrap();
        r.bind_by_fd(10);
        let argv = r.bwrap_argv(Path::new("/usr/bin/bwrap"), &[OsString::from("/bin/true")]);
        // Keep the folder alive only as long as the paths are compared, not the mounts.
        let root_kept = root.clone();
        drop(dir);
        (argv, root_kept)
    }

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    /// The exact argv for 0, 1, 10 and 100 grants: the grants add three arguments each (one
    /// `--bind-fd`), and nothing of the write-deny list (the grants are no repositories); the
    /// project's repository entries appear once.
    #[test]
    fn exact_argv_for_n_grants() {
        for n in [0usize, 1, 10, 100] {
            let (argv, root) = argv_for(n);
            let p = |rel: &str| root.join(rel).into_os_string();
            let mut want: Vec<OsString> = os(&["/usr/bin/bwrap"]);
            want.extend(os(NAMESPACE_FLAGS));
            for b in super::super::baseline::baseline() {
                match b {
                    Base::Dir(d) => want.extend([
                        "--ro-bind".into(),
                        d.clone().into_os_string(),
                        d.into_os_string(),
                    ]),
                    Base::Link { path, target } => want.extend([
                        "--symlink".into(),
                        target.into_os_string(),
                        path.into_os_string(),
                    ]),
                }
            }
            want.extend(os(&["--dev", "/dev", "--proc", "/proc"]));
            // Mounted shallow first: the project; the grants, its entries and the guards
            // `.claude` and `.git` above deeper ones; those; /tmp's descriptor is the last one.
            let mut mounts: Vec<(&str, OsString)> = vec![("--bind-fd", p("p"))];
            for i in 0..n {
                mounts.push(("--bind-fd", p(&format!("g/{i:03}"))));
            }
            for e in ["p/.gitmodules", "p/.mcp.json", "p/.vscode", "p/.idea"] {
                mounts.push(("--ro-bind-fd", p(e)));
            }
            mounts.push(("--bind-fd", p("p/.claude")));
            mounts.push(("--bind-fd", p("p/.git")));
            for e in [
                ".claude/commands",
                ".claude/agents",
                ".git/config",
                ".git/config.worktree",
                ".git/hooks",
            ] {
                mounts.push(("--ro-bind-fd", p(&format!("p/{e}"))));
            }
            for e in ["p/.git/info", "p/.git/modules", "p/.git/worktrees"] {
                mounts.push(("--ro-bind-fd", p(e)));
            }
            let tmp_fd = 10 + mounts.len();
            want.extend(os(&["--bind-fd", &tmp_fd.to_string(), "/tmp"]));
            for (i, (flag, path)) in mounts.into_iter().enumerate() {
                want.extend([flag.into(), (10 + i).to_string().into(), path]);
            }
            want.extend(["--chdir".into(), p("p")]);
            want.extend(os(&["--", "/bin/true"]));
            assert_eq!(argv, want, "{n} grants");
            assert_eq!(argv.len(), want.len());
        }
    }

    /// A protected path a placed file stands over is mounted once, by the placed file (read-only,
    /// last); the folder above it stays guarded, and the other protected paths are bound as ever.
    #[test]
    fn a_protected_path_under_a_placed_file_is_bound_once() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let root = dir.path().canonicalize().unwrap();
        let project = root.join("p");
        std::fs::create_dir_all(project.join(".git/hooks")).unwrap();
        std::fs::write(project.join(".git/config"), "").unwrap();
        let copy = root.join("copy");
        std::fs::write(&copy, "").unwrap();
        let (config, hooks) = (project.join(".git/config"), project.join(".git/hooks"));
        let mut profile = Profile::new();
        profile.read_write(project.clone());
        profile.protect(config.clone()).protect(hooks.clone());
        let bare = profile.resolve(&[]).unwrap();
        profile.place_file(copy.clone(), config.clone());
        let mut r = profile.resolve(&[]).unwrap();
        let mounted_at = |argv: &[OsString], at: &Path| {
            argv.windows(3)
                .filter(|w| w[0].to_string_lossy().contains("bind") && w[2] == at)
                .map(|w| (w[0].clone(), w[1].clone()))
                .collect::<Vec<_>>()
        };
        let before = bare.bwrap_argv(Path::new("bwrap"), &[OsString::from("true")]);
        assert_eq!(
            mounted_at(&before, &config),
            [("--ro-bind".into(), config.clone().into())]
        );
        r.bind_by_fd(10);
        let argv = r.bwrap_argv(Path::new("bwrap"), &[OsString::from("true")]);
        assert_eq!(
            mounted_at(&argv, &config),
            [("--ro-bind".into(), copy.into())]
        );
        assert_eq!(mounted_at(&argv, &hooks)[0].0, "--ro-bind-fd");
        assert_eq!(mounted_at(&argv, &project.join(".git"))[0].0, "--bind-fd");
        let by_fd = argv
            .iter()
            .filter(|a| a.to_string_lossy().ends_with("-fd"))
            .count();
        assert_eq!(r.bind_fds().len(), by_fd);
    }
}
