//! The strict reader: [`read_claude_token`].
//!
//! One open, one `fstat`, at most two reads into a fixed zeroized buffer, one close. The file is
//! read afresh at every call; nothing is cached. Errors name the path and never hold a byte of
//! the file.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

use crate::sys;
use crate::token::{is_token_bytes, ClaudeToken};

pub use crate::token::MAX_TOKEN_BYTES;

/// A token file that could not be read as a token.
///
/// `Display` reads exactly `read claude_token_file <path>: <reason>`.
///
/// ```
/// let err = relay_token::read_claude_token("/nonexistent/token".as_ref()).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "read claude_token_file /nonexistent/token: no such file or directory"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenFileError {
    /// The path that was read.
    pub path: PathBuf,
    /// Why it is not a usable token.
    pub reason: TokenFileReason,
}

/// Why a token file was refused. None of these holds a byte of the file.
///
/// ```
/// use relay_token::TokenFileReason;
/// assert_eq!(TokenFileReason::TooLarge.to_string(), "larger than 4096 bytes");
/// assert_eq!(TokenFileReason::Os(libc::EACCES).to_string(), "permission denied");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenFileReason {
    /// A system call failed with this errno (`open`, `fstat` or `read`).
    Os(i32),
    /// Not a regular file (a folder, a FIFO, a device, a socket).
    NotRegular,
    /// The file has more than one hard link: another name could be read through a grant.
    HardLinks(u64),
    /// More than [`MAX_TOKEN_BYTES`] bytes.
    TooLarge,
    /// The bytes read differ from the size `fstat` reports (a procfs or sysfs file, or a file
    /// that changed while it was read).
    SizeMismatch {
        /// The size `fstat` reported.
        stat_size: u64,
        /// The bytes actually read.
        read: u64,
    },
    /// Nothing but whitespace.
    Empty,
    /// A byte outside printable ASCII after trimming (whitespace inside, a control byte, a
    /// credentials file spread over lines...).
    NotAToken,
    /// A JSON document (an object, an array, a string), whatever its spacing: a credentials
    /// file, not a token. A token holds none of `"`, `{`, `}`, `[`, `]` (`claude setup-token`
    /// prints `sk-ant-oat01-` and base64url characters).
    Json,
    /// A `NAME=value` line (`CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-...`, a `.env` habit), whatever
    /// the name: the whole line would be sent as the token.
    Assignment,
    /// Printable ASCII, but a character no `Authorization: Bearer` token holds: a token is
    /// letters, digits and `-._~+/`, with `=` only at its end (RFC 6750's `b64token`).
    NotBearer,
    /// Read with [`read_private_claude_token`]: group or others may read or write the file.
    Mode(u32),
    /// Read with [`read_private_claude_token`]: owned by neither this process's user nor root.
    Owner {
        /// The file's owner.
        uid: u32,
        /// This process's effective user.
        me: u32,
    },
}

/// The one rule of who may hold a token file, by its `st_mode` and `st_uid`: no permission bit
/// for group or others (`0o077`), and owned by `me` (the effective user) or root. `relay-host`
/// and `ltt` both apply it.
///
/// ```
/// use relay_token::{token_file_exposure, TokenFileReason};
/// assert_eq!(token_file_exposure(0o100600, 1000, 1000), None);
/// assert_eq!(token_file_exposure(0o100644, 1000, 1000), Some(TokenFileReason::Mode(0o644)));
/// assert_eq!(token_file_exposure(0o100400, 0, 1000), None);
/// assert_eq!(
///     token_file_exposure(0o100600, 7, 1000),
///     Some(TokenFileReason::Owner { uid: 7, me: 1000 })
/// );
/// ```
pub fn token_file_exposure(st_mode: u32, st_uid: u32, me: u32) -> Option<TokenFileReason> {
    if st_mode & 0o077 != 0 {
        return Some(TokenFileReason::Mode(st_mode & 0o7777));
    }
    if st_uid != me && st_uid != 0 {
        return Some(TokenFileReason::Owner { uid: st_uid, me });
    }
    None
}

impl TokenFileReason {
    /// The errno behind an [`Os`](TokenFileReason::Os) reason.
    ///
    /// ```
    /// use relay_token::TokenFileReason;
    /// assert_eq!(TokenFileReason::Os(libc::ENOENT).errno(), Some(libc::ENOENT));
    /// assert_eq!(TokenFileReason::Empty.errno(), None);
    /// ```
    pub fn errno(&self) -> Option<i32> {
        match self {
            TokenFileReason::Os(e) => Some(*e),
            _ => None,
        }
    }
}

impl fmt::Display for TokenFileReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenFileReason::Os(errno) => f.write_str(&sys::errno_words(*errno)),
            TokenFileReason::NotRegular => f.write_str("not a regular file"),
            TokenFileReason::HardLinks(n) => write!(f, "has {n} hard links"),
            TokenFileReason::TooLarge => write!(f, "larger than {MAX_TOKEN_BYTES} bytes"),
            TokenFileReason::SizeMismatch { stat_size, read } => write!(
                f,
                "read {read} bytes but its size is {stat_size} (not a plain file, or it changed while read)"
            ),
            TokenFileReason::Empty => f.write_str("empty"),
            TokenFileReason::NotAToken => {
                f.write_str("not a token: holds whitespace or control bytes")
            }
            TokenFileReason::Json => f.write_str("not a token: a JSON document"),
            TokenFileReason::Assignment => {
                f.write_str("not a token: a NAME=value line, not the token alone")
            }
            TokenFileReason::NotBearer => f.write_str(
                "not a token: holds a character no token holds (a token is letters, digits and \
                 -._~+/, with = only at its end)",
            ),
            TokenFileReason::Mode(mode) => {
                write!(f, "mode {mode:04o} lets others read it; chmod 600 it")
            }
            TokenFileReason::Owner { uid, me } => write!(
                f,
                "owned by uid {uid}, not by the user reading it (uid {me})"
            ),
        }
    }
}

impl fmt::Display for TokenFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "read claude_token_file {}: {}",
            self.path.display(),
            self.reason
        )
    }
}

impl std::error::Error for TokenFileError {}

/// Reads the token file at `path` with these read rules (the repository's
/// [DESIGN.md](https://github.com/relay-token/relay-token/blob/main/docs/DESIGN.md) lists them too).
///
/// Opens with `O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC` (a FIFO never blocks), refuses
/// anything but a regular file with one link, reads at most 4097 bytes into a zeroized buffer,
/// requires the count to match `st_size`, trims ASCII whitespace at both ends and requires what
/// is left to be a token alone ([`token_shape`]): a JSON document (a credentials file) and a
/// `NAME=value` line are refused by name, anything else that is not a token as such.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("relay-token-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("token");
/// std::fs::write(&path, r#"{"claudeAiOauth":{"accessToken":"x"}}"#)?;
/// let err = relay_token::read_claude_token(&path).unwrap_err();
/// assert_eq!(err.to_string(), format!("read claude_token_file {}: not a token: a JSON document", path.display()));
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// ```no_run
/// let token = relay_token::read_claude_token("/home/me/.config/claude-ltt/token".as_ref())?;
/// println!("{} bytes", token.len());
/// # Ok::<(), relay_token::TokenFileError>(())
/// ```
pub fn read_claude_token(path: &Path) -> Result<ClaudeToken, TokenFileError> {
    read_token_file(path, false)
}

/// [`read_claude_token`], and the file must also be private ([`token_file_exposure`]), judged
/// on the opened descriptor's `fstat`: what a launcher that reads the operator's token for
/// them (`ltt`) refuses, as `relay-host` does.
///
/// ```
/// # use std::os::unix::fs::PermissionsExt;
/// let dir = std::env::temp_dir().join(format!("relay-token-private-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("token");
/// std::fs::write(&path, "sk-ant-oat01-x")?;
/// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
/// let err = relay_token::read_private_claude_token(&path).unwrap_err();
/// assert!(err.to_string().ends_with(": mode 0644 lets others read it; chmod 600 it"));
/// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
/// assert!(relay_token::read_private_claude_token(&path).is_ok());
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn read_private_claude_token(path: &Path) -> Result<ClaudeToken, TokenFileError> {
    read_token_file(path, true)
}

fn read_token_file(path: &Path, private: bool) -> Result<ClaudeToken, TokenFileError> {
    let fail = |reason| TokenFileError {
        path: path.to_path_buf(),
        reason,
    };
    let os = |e: io::Error| fail(TokenFileReason::Os(e.raw_os_error().unwrap_or(libc::EIO)));

    let cpath =
        crate::path::to_cstring(path).ok_or_else(|| fail(TokenFileReason::Os(libc::EINVAL)))?;
    let fd = sys::open(&cpath, libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY).map_err(os)?;
    let st = sys::fstat(&fd).map_err(os)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(fail(TokenFileReason::NotRegular));
    }
    if st.st_nlink > 1 {
        return Err(fail(TokenFileReason::HardLinks(st.st_nlink as u64)));
    }
    if private {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if let Some(reason) = token_file_exposure(st.st_mode as u32, st.st_uid, me) {
            return Err(fail(reason));
        }
    }
    let stat_size = st.st_size as u64;
    if stat_size > MAX_TOKEN_BYTES as u64 {
        return Err(fail(TokenFileReason::TooLarge));
    }

    let mut buf = Zeroizing::new([0u8; MAX_TOKEN_BYTES + 1]);
    let mut len = 0;
    while len < buf.len() {
        let n = sys::read(&fd, &mut buf[len..]).map_err(os)?;
        if n == 0 {
            break;
        }
        len += n;
    }
    drop(fd);
    if len > MAX_TOKEN_BYTES {
        return Err(fail(TokenFileReason::TooLarge));
    }
    if len as u64 != stat_size {
        return Err(fail(TokenFileReason::SizeMismatch {
            stat_size,
            read: len as u64,
        }));
    }
    let trimmed = buf[..len].trim_ascii();
    if let Some(reason) = token_shape(trimmed) {
        return Err(fail(reason));
    }
    ClaudeToken::from_bytes(trimmed).ok_or_else(|| fail(TokenFileReason::NotAToken))
}

/// The one rule of what a token file holds once trimmed of ASCII whitespace: a token alone, in
/// the form `Authorization: Bearer` carries it (RFC 6750's `b64token`: letters, digits and
/// `-._~+/`, then `=` only at the end; what `claude setup-token` prints, `sk-ant-oat01-` and
/// base64url, is one). `None` for a token; else why not, in this order: [`Empty`], whitespace or
/// control bytes inside ([`NotAToken`]), a JSON document ([`Json`]), a `NAME=value` line
/// whatever the name ([`Assignment`]), any other character ([`NotBearer`]). The reason holds no
/// byte of `bytes`.
///
/// [`Empty`]: TokenFileReason::Empty
/// [`NotAToken`]: TokenFileReason::NotAToken
/// [`Json`]: TokenFileReason::Json
/// [`Assignment`]: TokenFileReason::Assignment
/// [`NotBearer`]: TokenFileReason::NotBearer
///
/// ```
/// use relay_token::{token_shape, TokenFileReason};
/// assert_eq!(token_shape(b"sk-ant-oat01-AbC_d-9"), None);
/// assert_eq!(token_shape(b"abc+/def=="), None);
/// assert_eq!(token_shape(b""), Some(TokenFileReason::Empty));
/// assert_eq!(token_shape(b"sk-ant oat01"), Some(TokenFileReason::NotAToken));
/// assert_eq!(token_shape(br#"{"accessToken":"x"}"#), Some(TokenFileReason::Json));
/// assert_eq!(
///     token_shape(b"CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-x"),
///     Some(TokenFileReason::Assignment)
/// );
/// assert_eq!(token_shape(b"sk-ant:oat01"), Some(TokenFileReason::NotBearer));
/// ```
pub fn token_shape(bytes: &[u8]) -> Option<TokenFileReason> {
    if bytes.is_empty() {
        return Some(TokenFileReason::Empty);
    }
    if !is_token_bytes(bytes) {
        return Some(TokenFileReason::NotAToken);
    }
    let body = bytes.len() - bytes.iter().rev().take_while(|&&b| b == b'=').count();
    let bearer_byte = |b: &u8| b.is_ascii_alphanumeric() || b"-._~+/".contains(b);
    if body > 0 && bytes[..body].iter().all(bearer_byte) {
        return None;
    }
    if bytes.iter().any(|b| b"\"{}[]".contains(b)) {
        return Some(TokenFileReason::Json);
    }
    let name = bytes
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
        .count();
    if name > 0 && !bytes[0].is_ascii_digit() && bytes.get(name) == Some(&b'=') {
        return Some(TokenFileReason::Assignment);
    }
    Some(TokenFileReason::NotBearer)
}
