//! The host itself: where it keeps its settings and its state ([`Host`]), how it finds
//! `relay-shim`, how it hardens its own process, and how a child's status becomes its exit code.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use crate::reach;
use crate::settings::{Settings, SettingsError};
use crate::state;

/// Where the host keeps its settings and its state.
///
/// ```
/// let host = relay_host::Host::from_dirs("/tmp/cfg".into(), "/tmp/state".into())?;
/// assert_eq!(host.config_dir, std::path::Path::new("/tmp/cfg"));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Host {
    /// The config folder (`settings.json` or `settings.toml`).
    pub config_dir: PathBuf,
    /// The state folder (logs, session folders, the Claude config folder).
    pub state_dir: PathBuf,
    /// The home folder grants and `~/` values expand against.
    pub home: PathBuf,
}

/// The home folder: `$HOME` when absolute, else the password database's entry.
fn home_dir() -> Option<PathBuf> {
    if let Some(h) = std::env::var_os("HOME").map(PathBuf::from) {
        if h.is_absolute() {
            return Some(h);
        }
    }
    // SAFETY: getpwuid returns a pointer into static storage or null; it is read at once and
    // this process does not call getpw* from other threads.
    unsafe {
        let pw = libc::getpwuid(libc::getuid());
        if pw.is_null() || (*pw).pw_dir.is_null() {
            return None;
        }
        let dir = std::ffi::CStr::from_ptr((*pw).pw_dir);
        Some(PathBuf::from(
            std::ffi::OsStr::from_encoded_bytes_unchecked(dir.to_bytes()),
        ))
    }
}

impl Host {
    /// A host with these folders and the caller's home.
    ///
    /// ```
    /// let host = relay_host::Host::from_dirs("/c".into(), "/s".into())?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_dirs(config_dir: PathBuf, state_dir: PathBuf) -> std::io::Result<Host> {
        let home = home_dir().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, "no home folder: set HOME")
        })?;
        Ok(Host {
            config_dir,
            state_dir,
            home,
        })
    }

    /// The folders from the flags (a relative one taken from the current folder), else
    /// `$RELAY_CONFIG_DIR` / `$RELAY_STATE_DIR` (which must be absolute), else
    /// `$XDG_CONFIG_HOME/relay` / `$XDG_STATE_HOME/relay` (when absolute), else
    /// `~/.config/relay` and `~/.local/state/relay`. Nothing is created.
    ///
    /// ```
    /// let host = relay_host::Host::locate(Some("/c".into()), None)?;
    /// assert_eq!(host.config_dir, std::path::Path::new("/c"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn locate(
        config_dir: Option<PathBuf>,
        state_dir: Option<PathBuf>,
    ) -> std::io::Result<Host> {
        let home = home_dir().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, "no home folder: set HOME")
        })?;
        Ok(Host {
            config_dir: pick_dir(
                config_dir,
                "RELAY_CONFIG_DIR",
                "XDG_CONFIG_HOME",
                &home,
                ".config",
            )?,
            state_dir: pick_dir(
                state_dir,
                "RELAY_STATE_DIR",
                "XDG_STATE_HOME",
                &home,
                ".local/state",
            )?,
            home,
        })
    }

    /// The settings, read afresh from the config folder.
    ///
    /// ```
    /// let host = relay_host::Host::from_dirs("/nonexistent".into(), "/s".into())?;
    /// assert_eq!(host.settings().unwrap(), Default::default());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn settings(&self) -> Result<Settings, SettingsError> {
        let (settings, file) = Settings::load_with_path(&self.config_dir)?;
        if let Some(file) = file {
            let claude_config = self.state_dir.join(state::CLAUDE_CONFIG_DIR);
            let grants = reach::rw_grants(&self.home, &settings, None, &claude_config);
            if let Some(message) = reach::settings_problem(&file, &self.config_dir, &grants) {
                return Err(SettingsError::Reachable {
                    path: file,
                    message: message.to_string(),
                });
            }
            if let Some(message) = ca_file_problem(&settings, &self.config_dir, &grants) {
                return Err(SettingsError::Reachable {
                    path: file,
                    message,
                });
            }
        }
        Ok(settings)
    }

    /// Finds `relay-shim`: beside this executable, else on `PATH`, else the `shim` setting, else
    /// this executable itself when it is `relay-host` (started under the name `relay-shim`, it
    /// acts as the shim: a lone `cargo install --locked --path relay-host` runs sessions). The
    /// error says where it looked.
    pub(crate) fn find_shim(&self, settings: &Settings) -> Result<PathBuf, ShimNotFound> {
        let mut looked = Vec::new();
        if let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf))
        {
            let p = dir.join("relay-shim");
            if relay_token::which::is_executable(&p) {
                return Ok(p);
            }
            looked.push(p.display().to_string());
        }
        match relay_token::which::find_program("relay-shim") {
            Some(p) => return Ok(p),
            None => looked.push("relay-shim on PATH".into()),
        }
        match &settings.shim {
            Some(p) if relay_token::which::is_executable(p) => return Ok(p.clone()),
            Some(p) => looked.push(format!("{} (the shim setting)", p.display())),
            None => looked.push("the shim setting (not set)".into()),
        }
        if let Some(me) = std::env::current_exe()
            .ok()
            .filter(|e| e.file_name().is_some_and(|n| n == "relay-host"))
        {
            return Ok(me);
        }
        Err(ShimNotFound { looked })
    }
}

/// Why `upstream_ca_file` cannot be trusted, or `None`: it, a symlink on its way or its real
/// path lies inside a read-write grant, where a session could put a CA of its own in it and so
/// read the real token on its way upstream (stand-in mode); or its owner or mode is not the
/// host's. (A stand-in launch checks it again with its project's grants, when it reads it.)
fn ca_file_problem(settings: &Settings, config_dir: &Path, grants: &[PathBuf]) -> Option<String> {
    let ca = settings.upstream_ca_file.as_deref()?;
    match reach::read_upstream_ca(ca, config_dir, grants) {
        Err(e @ reach::UpstreamCaError::Reach(_)) => Some(e.to_string()),
        _ => None,
    }
}

/// `relay-shim` was found nowhere `Host::find_shim` looks; the places it looked, in order.
///
/// ```
/// let e = relay_host::ShimNotFound { looked: vec!["/opt/relay/relay-shim".into()] };
/// assert_eq!(e.to_string(), "relay-shim not found: looked at /opt/relay/relay-shim");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShimNotFound {
    /// Each place looked at, as said in the message.
    pub looked: Vec<String>,
}

impl std::fmt::Display for ShimNotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "relay-shim not found: looked at {}",
            self.looked.join(", ")
        )
    }
}

impl std::error::Error for ShimNotFound {}

/// A child's exit status as an exit code: its own code, or 128 + the signal that killed it.
///
/// ```
/// use std::os::unix::process::ExitStatusExt;
/// let s = std::process::ExitStatus::from_raw(9); // killed by SIGKILL
/// assert_eq!(relay_host::exit_code_of(s), 137);
/// ```
pub fn exit_code_of(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => relay_shim::exit::ExitCode::Internal.code(),
    }
}

/// A folder from its flag, else its relay variable (absolute only), else `$XDG_*/relay` (when
/// absolute, as the XDG spec asks), else `~/DEFAULT/relay`.
fn pick_dir(
    flag: Option<PathBuf>,
    var: &str,
    xdg: &str,
    home: &Path,
    default: &str,
) -> std::io::Result<PathBuf> {
    if let Some(f) = flag {
        return Ok(if f.is_absolute() {
            f
        } else {
            std::env::current_dir()?.join(f)
        });
    }
    let env = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(v) = env(var) {
        if !v.is_absolute() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{var} {:?} is relative: set it to an absolute path",
                    v.display().to_string()
                ),
            ));
        }
        return Ok(v);
    }
    Ok(env(xdg)
        .filter(|x| x.is_absolute())
        .unwrap_or_else(|| home.join(default))
        .join("relay"))
}

#[cfg(test)]
mod tests {
    /// `home_dir`'s example.
    #[test]
    fn home_dir_doc_example() {
        assert!(super::home_dir().is_some());
    }
}
