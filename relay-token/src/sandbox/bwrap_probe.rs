//! Finding a `bwrap` that works: the setting or `PATH`, then a probe that runs `true` in a
//! sandbox with the namespace flags, and what that `bwrap` can do.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::SandboxError;

use super::bwrap::NAMESPACE_FLAGS;

/// How long the probe of [`find_bwrap`] may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Finds a `bwrap` that works: the `bwrap` setting when given, else `bwrap` on `PATH`; then
/// probes it by running `true` in a sandbox with the namespace flags (stdio closed, 5 s at most).
/// Missing or not working is an error that says how to install it; there is no unsandboxed
/// fallback.
///
/// ```no_run
/// let bwrap = relay_token::sandbox::find_bwrap(None)?;
/// println!("using {}", bwrap.display());
/// # Ok::<(), relay_token::sandbox::SandboxError>(())
/// ```
pub fn find_bwrap(setting: Option<&Path>) -> Result<PathBuf, SandboxError> {
    let path = locate(setting)?;
    probe(&path)?;
    Ok(path)
}

/// The `bwrap` to use, without running it: the `bwrap` setting when given (it must be an
/// executable file), else `bwrap` on `PATH`. Exported as `sandbox::locate_bwrap`.
///
/// ```no_run
/// let bwrap = relay_token::sandbox::locate_bwrap(None)?;
/// # Ok::<(), relay_token::sandbox::SandboxError>(())
/// ```
pub fn locate(setting: Option<&Path>) -> Result<PathBuf, SandboxError> {
    match setting {
        Some(p) if crate::which::is_executable(p) => Ok(p.to_path_buf()),
        Some(p) => Err(SandboxError::BwrapNotFound {
            looked: format!("the bwrap setting {p:?} is not an executable file"),
        }),
        None => crate::which::find_program("bwrap").ok_or_else(|| SandboxError::BwrapNotFound {
            looked: "no bwrap on PATH and no bwrap setting".into(),
        }),
    }
}

/// What a `bwrap` can do beyond the options every version in use has, read from the program
/// file itself (bwrap's option names are in it as text), without running it.
///
/// ```no_run
/// let f = relay_token::sandbox::BwrapFeatures::of(std::path::Path::new("/usr/bin/bwrap"));
/// println!("binds by descriptor: {}", f.bind_fd);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BwrapFeatures {
    /// `--bind-fd` and `--ro-bind-fd` (bubblewrap 0.10 and later, and Debian's 0.8.0): sources
    /// can be bound by descriptor ([`Resolved::bind_by_fd`](super::Resolved::bind_by_fd)).
    pub bind_fd: bool,
    /// `--json-status-fd` (older releases lack it): bwrap says on a descriptor when the
    /// sandbox's namespaces exist (`child-pid`), so a broken bwrap shows without a probe.
    pub json_status: bool,
}

impl BwrapFeatures {
    /// Reads the options out of the program at `bwrap` (at most 8 MiB of it); an unreadable
    /// file has none of them.
    ///
    /// ```
    /// let none = relay_token::sandbox::BwrapFeatures::of(std::path::Path::new("/nonexistent"));
    /// assert_eq!(none, Default::default());
    /// ```
    pub fn of(bwrap: &Path) -> BwrapFeatures {
        let mut bytes: Vec<u8> = Vec::new();
        if let Ok(f) = std::fs::File::open(bwrap) {
            let _ = f.take(8 << 20).read_to_end(&mut bytes);
        }
        // One pass over the places where an option can start ("--"), not a window per byte.
        let mut f = BwrapFeatures::default();
        let (mut bind, mut ro_bind) = (false, false);
        let mut at = 0;
        while let Some(i) = bytes[at..].iter().position(|&b| b == b'-') {
            let rest = &bytes[at + i..];
            bind |= rest.starts_with(b"--bind-fd");
            ro_bind |= rest.starts_with(b"--ro-bind-fd");
            f.json_status |= rest.starts_with(b"--json-status-fd");
            at += i + 1;
        }
        f.bind_fd = bind && ro_bind;
        f
    }
}

/// Runs `bwrap <flags> --ro-bind / / -- true` and waits for a clean exit. Exported as
/// `sandbox::probe_bwrap`.
///
/// ```no_run
/// relay_token::sandbox::probe_bwrap("/usr/bin/bwrap".as_ref())?;
/// # Ok::<(), relay_token::sandbox::SandboxError>(())
/// ```
pub fn probe(bwrap: &Path) -> Result<(), SandboxError> {
    let broken = |detail: String| SandboxError::BwrapBroken {
        path: bwrap.to_path_buf(),
        detail,
    };
    let mut cmd = Command::new(bwrap);
    cmd.args(NAMESPACE_FLAGS)
        .args(["--ro-bind", "/", "/", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // Only 0, 1 and 2: nothing this process inherited reaches the probe.
    let mut child = crate::FdMap::new()
        .spawn(&mut cmd)
        .map_err(|e| broken(format!("cannot run it: {}", super::io_words(&e))))?;
    // Wait for the end of its stderr (it closes when bwrap and `true` are gone) with poll(2),
    // so the answer comes as soon as the test run ends, then reap it.
    let deadline = Instant::now() + PROBE_TIMEOUT;
    let mut err = child.stderr.take().expect("stderr is piped");
    let mut text: Vec<u8> = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut pfd = libc::pollfd {
            fd: err.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid pollfd for the duration of the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if rc < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if rc <= 0 {
            let _ = child.kill();
            let _ = child.wait();
            return Err(broken(format!(
                "a test run did not finish within {} s",
                PROBE_TIMEOUT.as_secs()
            )));
        }
        let mut buf = [0u8; 512];
        match err.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) if text.len() < 512 => text.extend_from_slice(&buf[..n]),
            Ok(_) => {}
        }
    }
    let status = child.wait().map_err(|e| broken(super::io_words(&e)))?;
    if status.success() {
        return Ok(());
    }
    let said: String = String::from_utf8_lossy(&text)
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    Err(broken(if said.is_empty() {
        format!("a test run failed: {status}")
    } else {
        format!("a test run failed: {status}: {said}")
    }))
}
