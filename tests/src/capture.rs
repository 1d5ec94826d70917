//! The bwrap command line `relay-host` builds, captured from a real launch and replayed without
//! the host: what `bench-launch` and `bench-scale` time as "bwrap replaying relay's argv".
//!
//! `relay-host` hands bwrap its options in a file (`bwrap --args 9 -- COMMAND`). The capture
//! runs a launch whose `bwrap` setting is a small wrapper script: it copies the options file
//! (reopened through `/proc/self/fd/9`, so bwrap still reads it from the start) and the command
//! line into a folder, then `exec`s the real bwrap. The wrapper names bwrap's options in a
//! comment, so the host reads the same features from it as from bwrap itself. The same kind of
//! wrapper can start bwrap late ([`late_wrapper`]), for the tests of that moment.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// `O_PATH` where it exists (bwrap, and so a replay, is Linux only).
#[cfg(target_os = "linux")]
const O_PATH: i32 = libc::O_PATH;
#[cfg(not(target_os = "linux"))]
const O_PATH: i32 = 0;

/// Where `relay-host` hands bwrap its options (`--args 9`).
pub const ARGS_FD: i32 = 9;

/// A captured bwrap launch: its options (from the `--args` file) and what follows `--`.
#[derive(Debug, Clone)]
pub struct Captured {
    /// The real bwrap.
    pub bwrap: PathBuf,
    /// bwrap's options, as the `--args` file held them.
    pub options: Vec<OsString>,
    /// The sandboxed command (after `--`).
    pub command: Vec<OsString>,
    /// Where the options are kept as a file (reopened for each replay).
    pub options_file: PathBuf,
    /// bwrap's environment, `NAME=VALUE` each ([`session_wrapper`] only; else empty).
    pub env: Vec<OsString>,
}

/// Writes the capturing wrapper into `dir` (a folder outside every grant) and returns its path;
/// it records into `dir` and runs `bwrap`.
///
/// ```no_run
/// let dir = tempfile::tempdir()?;
/// let w = relay_tests::capture::wrapper(dir.path(), "/usr/bin/bwrap".as_ref());
/// assert!(w.is_file());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn wrapper(dir: &Path, bwrap: &Path) -> PathBuf {
    write_wrapper(&dir.join("bwrap-capture"), &keep_command_line(dir), bwrap)
}

/// The wrapper's lines that keep bwrap's options and command line in `dir`.
fn keep_command_line(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "cat /proc/self/fd/{ARGS_FD} > '{d}/options' 2>/dev/null\n\
         printf '%s\\0' \"$@\" > '{d}/argv'"
    )
}

/// [`wrapper`], which also keeps what a replay of a session that has ended needs: its
/// environment (`env`, as bwrap gets it) and a copy of its session folder as it stands when the
/// sandbox starts (`session/`, the folder holding `CLAUDE_CONFIG_DIR`: the files relay places
/// in the sandbox, the Claude config folder and the temp folder). `bench-turn` replays a real
/// Claude Code turn in relay's profile with it ([`Captured::moved_to`]).
///
/// ```no_run
/// let dir = tempfile::tempdir()?;
/// let w = relay_tests::capture::session_wrapper(dir.path(), "/usr/bin/bwrap".as_ref());
/// assert!(w.is_file());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn session_wrapper(dir: &Path, bwrap: &Path) -> PathBuf {
    let d = dir.display();
    let first = format!(
        "{}\nenv -0 > '{d}/env'\ncp -a \"$(dirname \"$CLAUDE_CONFIG_DIR\")\" '{d}/session'",
        keep_command_line(dir)
    );
    write_wrapper(&dir.join("bwrap-session"), &first, bwrap)
}

/// Writes into `dir` a wrapper that starts the real `bwrap` `seconds` late, and returns its
/// path: the moment between relay's spawn of its shim and the sandbox's start, made long.
///
/// ```no_run
/// let dir = tempfile::tempdir()?;
/// let w = relay_tests::capture::late_wrapper(dir.path(), "/usr/bin/bwrap".as_ref(), 1);
/// assert!(w.is_file());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn late_wrapper(dir: &Path, bwrap: &Path, seconds: u32) -> PathBuf {
    write_wrapper(&dir.join("bwrap-late"), &format!("sleep {seconds}"), bwrap)
}

/// A script at `path` that runs `first`, then `exec`s `bwrap` with its arguments. It names
/// bwrap's options in a comment, so the host reads the same features from it as from bwrap.
fn write_wrapper(path: &Path, first: &str, bwrap: &Path) -> PathBuf {
    let script = format!(
        "#!/bin/sh\n# a wrapper of bwrap; bwrap's options: --bind-fd --ro-bind-fd \
         --json-status-fd\n{first}\nexec '{}' \"$@\"\n",
        bwrap.display()
    );
    std::fs::write(path, script).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

/// Writes `args` to `path`, each ended by a NUL (what [`split_nul`] reads back).
fn write_nul(path: &Path, args: &[OsString]) {
    let mut bytes = Vec::new();
    for a in args {
        bytes.extend_from_slice(a.as_bytes());
        bytes.push(0);
    }
    std::fs::write(path, bytes).unwrap();
}

/// The arguments of a list each ended by a NUL, empty ones kept (a `--setenv NAME ""` is three
/// arguments).
fn split_nul(bytes: &[u8]) -> Vec<OsString> {
    let body = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    if body.is_empty() {
        return Vec::new();
    }
    body.split(|&b| b == 0)
        .map(|a| OsStr::from_bytes(a).to_os_string())
        .collect()
}

/// What the wrapper in `dir` recorded (panics when it recorded nothing).
///
/// ```no_run
/// let c = relay_tests::capture::read(std::path::Path::new("/var/tmp/x"), "/usr/bin/bwrap".as_ref());
/// assert!(!c.options.is_empty());
/// ```
pub fn read(dir: &Path, bwrap: &Path) -> Captured {
    let argv = split_nul(&std::fs::read(dir.join("argv")).expect("the wrapper ran"));
    let options_file = dir.join("options");
    let mut options = split_nul(&std::fs::read(&options_file).unwrap_or_default());
    let dashes = argv
        .iter()
        .position(|a| a == "--")
        .expect("-- in bwrap's argv");
    // Options given on the command line itself (none but `--args N` today) come first.
    let mut inline: Vec<OsString> = argv[..dashes].to_vec();
    if let Some(i) = inline.iter().position(|a| a == "--args") {
        inline.drain(i..i + 2);
    }
    inline.append(&mut options);
    write_nul(&options_file, &inline);
    Captured {
        bwrap: bwrap.to_path_buf(),
        options: inline,
        command: argv[dashes + 1..].to_vec(),
        options_file,
        env: split_nul(&std::fs::read(dir.join("env")).unwrap_or_default()),
    }
}

impl Captured {
    /// The descriptors the options name: `--bind-fd N DEST` / `--ro-bind-fd N DEST` (the
    /// source is DEST itself, but `session_tmp` for `/tmp`), opened `O_PATH`, and
    /// `--json-status-fd N` (`/dev/null`, written to and never read).
    pub fn numbered_fds(&self, session_tmp: &Path) -> Vec<(OwnedFd, i32)> {
        use std::os::unix::fs::OpenOptionsExt;
        let a = &self.options;
        let mut out = Vec::new();
        for (i, o) in a.iter().enumerate() {
            let n = || -> i32 { a[i + 1].to_str().unwrap().parse().unwrap() };
            if o == "--bind-fd" || o == "--ro-bind-fd" {
                let dest = Path::new(&a[i + 2]);
                let src = if dest == Path::new("/tmp") {
                    session_tmp
                } else {
                    dest
                };
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(O_PATH)
                    .open(src)
                    .unwrap_or_else(|e| panic!("{}: {e}", src.display()));
                out.push((f.into(), n()));
            } else if o == "--json-status-fd" {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/null")
                    .unwrap();
                out.push((f.into(), n()));
            }
        }
        out
    }

    /// The capture with every path below `from` (a session folder) moved below `to` (its
    /// copy), in the options, the options file and the environment.
    pub fn moved_to(&self, from: &Path, to: &Path) -> Captured {
        let (from, to) = (from.as_os_str().as_bytes(), to.as_os_str().as_bytes());
        let move_one = |a: &OsString| -> OsString {
            let b = a.as_bytes();
            match b.windows(from.len()).position(|w| w == from) {
                Some(i) if b[i + from.len()..].first().is_none_or(|c| *c == b'/') => {
                    let mut out = b[..i].to_vec();
                    out.extend_from_slice(to);
                    out.extend_from_slice(&b[i + from.len()..]);
                    OsStr::from_bytes(&out).to_os_string()
                }
                _ => a.clone(),
            }
        };
        let options: Vec<OsString> = self.options.iter().map(move_one).collect();
        let options_file = self.options_file.with_extension("moved");
        write_nul(&options_file, &options);
        Captured {
            bwrap: self.bwrap.clone(),
            options,
            command: self.command.clone(),
            options_file,
            env: self.env.iter().map(move_one).collect(),
        }
    }

    /// `bwrap --args 9 -- COMMAND`: this capture's bwrap with its options file (at
    /// [`options_fd`](Self::options_fd)'s number) running `command` (nothing else set).
    pub fn bwrap_command(&self, command: &[OsString]) -> Command {
        let mut c = Command::new(&self.bwrap);
        c.args(["--args", &ARGS_FD.to_string(), "--"]).args(command);
        c
    }

    /// The options file opened afresh, with the number bwrap reads it at ([`ARGS_FD`]).
    pub fn options_fd(&self) -> (OwnedFd, i32) {
        let f = std::fs::File::open(&self.options_file).unwrap();
        (f.into(), ARGS_FD)
    }

    /// Replays the capture: `bwrap --args 9 -- COMMAND`, the options file at 9, `fds` (from
    /// [`numbered_fds`](Self::numbered_fds)) and `extra` at their numbers, stdio on `/dev/null`,
    /// `env` set.
    pub fn spawn(
        &self,
        fds: &[(OwnedFd, i32)],
        extra: &[(std::os::fd::BorrowedFd<'_>, i32)],
        env: &[(&str, &OsStr)],
    ) -> Child {
        let (options, at) = self.options_fd();
        let mut c = self.bwrap_command(&self.command);
        c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(
            if std::env::var_os("CAPTURE_STDERR").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            },
        );
        for (k, v) in env {
            c.env(k, v);
        }
        let mut all: Vec<(std::os::fd::BorrowedFd<'_>, i32)> = vec![(options.as_fd(), at)];
        all.extend(fds.iter().map(|(fd, n)| (fd.as_fd(), *n)));
        all.extend_from_slice(extra);
        crate::spawn_with_fds(&mut c, &all).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty argument stays one (relay sets `RELAY_GIT_LINKED` to ""): dropping it shifted
    /// every option after it, and a replay ran with `PATH` and more unset.
    #[test]
    fn an_empty_argument_is_kept() {
        let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            split_nul(b"--setenv\0A\0\0--setenv\0B\0b\0"),
            os(&["--setenv", "A", "", "--setenv", "B", "b"])
        );
        assert_eq!(split_nul(b"a\0"), os(&["a"]));
        assert!(split_nul(b"").is_empty());
        let dir = tempfile::tempdir().unwrap();
        let (file, args) = (dir.path().join("options"), os(&["--setenv", "A", "", "-x"]));
        write_nul(&file, &args);
        assert_eq!(split_nul(&std::fs::read(&file).unwrap()), args);
    }
}
