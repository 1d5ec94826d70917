//! The folders of a throwaway `relay-host` installation ([`crate::world::World`] is made of
//! them): a root-owned 0755 folder under `/var/tmp` (not `/tmp`, which is private inside the
//! sandbox) holding a home with the token's folder, a config folder, a state folder and a
//! project folder that the sandbox binds read-write. Also the process checks the endurance runs
//! need: children, zombies, leftovers.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How a test's folder tree is laid out: where its root goes, how open its home and config
/// folders are, and where the token file and the project lie. See [`Folders::new`].
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// The folder the root is made in: `/var/tmp` (not `/tmp`, which is private inside the
    /// sandbox), or `/tmp` for the tests about grants under `/tmp`.
    pub parent: &'static str,
    /// The root's name prefix (which test made it).
    pub prefix: &'static str,
    /// The mode of the home, its `.config`, the token's folder and the config folder (0o755,
    /// or 0o700 for a home only its owner may enter).
    pub mode: u32,
    /// The token file's folder, relative to the home.
    pub token_dir: &'static str,
    /// The config folder, relative to the root.
    pub config: &'static str,
    /// The project folder (0755), relative to the root (`home/proj` puts it inside the home).
    pub project: &'static str,
}

impl Layout {
    /// The layout of a fake-agent installation: everything 0755 under `/var/tmp`, the token at
    /// `~/.config/acme-ltt/token`, `config` and `project` beside the home.
    ///
    /// ```
    /// let l = relay_tests::fixture::Layout::agent("relay-x.");
    /// assert_eq!((l.parent, l.mode, l.token_dir), ("/var/tmp", 0o755, ".config/acme-ltt"));
    /// ```
    pub fn agent(prefix: &'static str) -> Layout {
        Layout {
            parent: "/var/tmp",
            prefix,
            mode: 0o755,
            token_dir: ".config/acme-ltt",
            config: "config",
            project: "project",
        }
    }

    /// The layout of a Claude Code installation: as [`Layout::agent`], but the home, the
    /// token's folder and the config folder 0700 and the token at `~/.config/claude-ltt/token`.
    ///
    /// ```
    /// let l = relay_tests::fixture::Layout::claude("relay-x.");
    /// assert_eq!((l.mode, l.token_dir), (0o700, ".config/claude-ltt"));
    /// ```
    pub fn claude(prefix: &'static str) -> Layout {
        Layout {
            mode: 0o700,
            token_dir: ".config/claude-ltt",
            ..Layout::agent(prefix)
        }
    }
}

/// One test's folder tree under a root-owned 0755 root: a home holding the token's folder, a
/// config folder, a project folder, and the state folder's path (not made: `relay-host` makes
/// it). Every fixture of the end-to-end tests is made of one. Dropping it removes the tree.
#[derive(Debug)]
pub struct Folders {
    _dir: tempfile::TempDir,
    /// The root folder (0755).
    pub root: PathBuf,
    /// `HOME` for `relay-host`.
    pub home: PathBuf,
    /// `--config-dir`.
    pub config: PathBuf,
    /// `--state-dir` (not made).
    pub state: PathBuf,
    /// The project folder (0755).
    pub project: PathBuf,
    /// The token file's path (not written).
    pub token_file: PathBuf,
}

impl Folders {
    /// Makes the tree `layout` describes.
    ///
    /// ```
    /// use relay_tests::fixture::{Folders, Layout};
    /// let f = Folders::new(Layout::agent("relay-doc."));
    /// assert!(f.home.join(".config/acme-ltt").is_dir() && f.project.is_dir());
    /// assert!(!f.state.exists() && !f.token_file.exists());
    /// ```
    pub fn new(layout: Layout) -> Folders {
        let dir = tempfile::Builder::new()
            .prefix(layout.prefix)
            .tempdir_in(layout.parent)
            .unwrap_or_else(|e| panic!("a folder in {}: {e}", layout.parent));
        let root = dir.path().to_path_buf();
        mkdir(&root, 0o755);
        let home = root.join("home");
        let config = root.join(layout.config);
        let project = root.join(layout.project);
        let token_dir = home.join(layout.token_dir);
        for d in [&home, &home.join(".config"), &token_dir, &config] {
            mkdir(d, layout.mode);
        }
        mkdir(&project, 0o755);
        Folders {
            _dir: dir,
            state: root.join("state"),
            token_file: token_dir.join("token"),
            root,
            home,
            config,
            project,
        }
    }
}

impl Folders {
    /// The rows of the state log `name` (`audit.jsonl`, `events.jsonl`), one JSON value a
    /// line; empty when the log does not exist yet (see [`crate::read_records`]).
    ///
    /// ```
    /// use relay_tests::fixture::{Folders, Layout};
    /// let f = Folders::new(Layout::agent("relay-doc."));
    /// assert!(f.log("audit.jsonl").is_empty());
    /// ```
    pub fn log(&self, name: &str) -> Vec<serde_json::Value> {
        crate::read_records(&self.state.join(name))
    }

    /// Readies `cmd` (a `relay-host`, or a program such as `setpriv` that runs one with the
    /// arguments that follow) to run on these folders: a cleared environment but `PATH`
    /// ([`HOST_PATH`]), `HOME` and `LANG=C.UTF-8`; `--config-dir` and `--state-dir STATE`;
    /// stdin `/dev/null`; a process group of its own, so a deadline can kill the host and its
    /// shim together; the signals a test sends at their default action
    /// ([`crate::run::default_signals`]). The caller adds the command and sets stdout and stderr.
    ///
    /// ```no_run
    /// use relay_tests::fixture::{Folders, Layout};
    /// let f = Folders::new(Layout::agent("relay-doc."));
    /// let mut cmd = std::process::Command::new(relay_tests::relay_host());
    /// f.host_setup(&mut cmd, &f.state).arg("status");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn host_setup<'c>(&self, cmd: &'c mut Command, state: &Path) -> &'c mut Command {
        crate::run::default_signals(cmd)
            .env_clear()
            .env("PATH", HOST_PATH)
            .env("HOME", &self.home)
            .env("LANG", "C.UTF-8")
            .arg("--config-dir")
            .arg(&self.config)
            .arg("--state-dir")
            .arg(state)
            .stdin(Stdio::null())
            .process_group(0)
    }
}

/// The `PATH` `relay-host` runs with in the end-to-end tests (see [`Folders::host_setup`]).
pub const HOST_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

/// Makes `p` (and its parents) and sets its mode.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// relay_tests::fixture::mkdir(&dir.path().join("a/b"), 0o700);
/// assert!(dir.path().join("a/b").is_dir());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn mkdir(p: &Path, mode: u32) {
    std::fs::create_dir_all(p).unwrap_or_else(|e| panic!("mkdir {}: {e}", p.display()));
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `(pid, ppid, state)` of every process in `/proc`.
fn processes() -> Vec<(i32, i32, char)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) S ppid ...`: comm may hold spaces and parentheses; split after the last ')'.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let state = f.next().and_then(|s| s.chars().next()).unwrap_or('?');
        let ppid = f.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        out.push((pid, ppid, state));
    }
    out
}

/// The pids whose parent is `pid` (zombies included).
///
/// ```
/// assert!(relay_tests::fixture::children_of(std::process::id() as i32).is_empty());
/// ```
pub fn children_of(pid: i32) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|&(_, p, _)| p == pid)
        .map(|(c, _, _)| c)
        .collect()
}

/// `pid` and all its descendants now (at most 1,000).
///
/// ```
/// let me = std::process::id() as i32;
/// assert_eq!(relay_tests::fixture::descendants(me), [me]);
/// ```
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() && all.len() < 1000 {
        all.extend(children_of(all[i]));
        i += 1;
    }
    all
}

/// True while `pid` exists and is not a zombie.
///
/// ```
/// assert!(relay_tests::fixture::alive(std::process::id() as i32));
/// ```
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .map(|i| s[i + 1..].trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

/// The zombie children of `pid`.
///
/// ```
/// assert!(relay_tests::fixture::zombies_of(std::process::id() as i32).is_empty());
/// ```
pub fn zombies_of(pid: i32) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|&(_, p, s)| p == pid && s == 'Z')
        .map(|(c, _, _)| c)
        .collect()
}

/// The processes whose environment holds `needle` (such as a fixture's record path, which
/// `relay-host`, `relay-shim`, `bwrap` and the fake agent all inherit): leftovers of a run.
///
/// ```
/// assert!(relay_tests::fixture::processes_with_env("no-such-needle-1f2e").is_empty());
/// ```
pub fn processes_with_env(needle: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    processes()
        .into_iter()
        .filter(|&(pid, _, _)| pid != me)
        .filter(|&(pid, _, _)| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.windows(needle.len()).any(|w| w == needle.as_bytes()))
                .unwrap_or(false)
        })
        .map(|(pid, _, _)| pid)
        .collect()
}

/// How many descriptors `pid` has open (`/proc/<pid>/fd`), or `None` when it is gone.
///
/// ```
/// assert!(relay_tests::fixture::open_fds(std::process::id() as i32).unwrap() >= 3);
/// ```
pub fn open_fds(pid: i32) -> Option<usize> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()
        .map(|d| d.count())
}

/// The first child of `pid` (from `/proc/<pid>/task/<pid>/children`), waiting up to `timeout`.
///
/// ```no_run
/// let shim = relay_tests::fixture::wait_child(1234, std::time::Duration::from_secs(5));
/// # drop(shim);
/// ```
pub fn wait_child(pid: i32, timeout: std::time::Duration) -> Option<i32> {
    let start = std::time::Instant::now();
    loop {
        if let Some(c) = children_of(pid).first() {
            return Some(*c);
        }
        if start.elapsed() > timeout {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
