//! The filled pipe: [`TokenPipe`], and the one function that attaches a token descriptor to a
//! child together with its variable, [`place_token`].

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::{Child, Command};

use crate::env::ChildEnv;
use crate::fds::{Armed, FdMap, TOKEN_FD};
use crate::sys;
use crate::token::ClaudeToken;

/// The variable that tells Claude Code which descriptor holds its token.
pub const TOKEN_FD_VAR: &str = "CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR";

/// A pipe that holds a token, its write end already closed, so a reader gets the bytes and then
/// EOF. The write never blocks: a token is at most 4096 bytes, below every pipe's capacity.
///
/// A pipe, never a socketpair: Claude Code up to 2.1.252 reopens `/proc/self/fd/N`, which fails
/// on a socket.
///
/// ```
/// use std::process::{Command, Stdio};
/// use relay_token::{ClaudeToken, TokenPipe};
///
/// let token = ClaudeToken::from_bytes(b"sk-ant-oat01-demo").unwrap();
/// let pipe = TokenPipe::new(&token)?;
/// let out = pipe
///     .spawn(Command::new("sh").args(["-c", "cat <&5; echo \" $CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR\""]).stdout(Stdio::piped()))?
///     .wait_with_output()?;
/// assert_eq!(out.stdout, b"sk-ant-oat01-demo 5\n");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct TokenPipe {
    read: OwnedFd,
}

impl TokenPipe {
    /// `pipe2(O_CLOEXEC)`, writes every byte of the token, closes the write end.
    ///
    /// ```
    /// # use relay_token::{ClaudeToken, TokenPipe};
    /// let pipe = TokenPipe::new(&ClaudeToken::from_bytes(b"tok").unwrap())?;
    /// # drop(pipe);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new(token: &ClaudeToken) -> io::Result<TokenPipe> {
        let (read, write) = sys::pipe2_cloexec()?;
        // Under the spawn lock: the write end may sit on a number (5, say) that a concurrent
        // spawn found busy and so did not park; it must not be closed under that spawn.
        let _serial = crate::fds::spawn_lock();
        sys::write_all(&write, token.expose_bytes())?;
        drop(write);
        Ok(TokenPipe { read })
    }

    /// Spawns `cmd` with the read end at fd 5 and `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5`,
    /// nothing else above 2. The read end is closed in this process once the spawn returns,
    /// success or not.
    ///
    /// The environment: the child inherits what `cmd` would give it, less every name of
    /// [`ChildEnv::drops_beside_token`] that it would inherit (`ANTHROPIC_API_KEY`,
    /// `CLAUDE_CODE_OAUTH_TOKEN` and the other credentials Claude Code prefers over the
    /// descriptor, a parent session's markers), so the token on fd 5 is the one Claude uses.
    /// Claude Code's settings variables pass; a variable set on `cmd` itself stays (the caller's
    /// choice). For the relay's fully scrubbed environment apply a [`ChildEnv`] to `cmd` first.
    /// The same holds for [`spawn_with`](Self::spawn_with), [`exec`](Self::exec),
    /// [`attach`](Self::attach) and [`spawn_with_token_fd`].
    ///
    /// ```
    /// # use std::process::{Command, Stdio};
    /// # use relay_token::{ClaudeToken, TokenPipe};
    /// // SAFETY: this example's process runs no other thread that reads the environment.
    /// unsafe { std::env::set_var("ANTHROPIC_API_KEY", "sk-ant-api03-inherited") };
    /// let pipe = TokenPipe::new(&ClaudeToken::from_bytes(b"tok").unwrap())?;
    /// let script = "test \"$(cat <&5)\" = tok && echo \"${ANTHROPIC_API_KEY-dropped}\"";
    /// let out = pipe.spawn(Command::new("sh").args(["-c", script]).stdout(Stdio::piped()))?;
    /// assert_eq!(out.wait_with_output()?.stdout, b"dropped\n");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn(self, cmd: &mut Command) -> io::Result<Child> {
        self.spawn_with(cmd, FdMap::new())
    }

    /// [`spawn`](Self::spawn) with more descriptors placed on purpose (such as a status pipe at 3).
    ///
    /// ```
    /// # use std::process::Command;
    /// # use std::os::fd::AsFd;
    /// # use relay_token::{ClaudeToken, FdMap, TokenPipe};
    /// let devnull = std::fs::File::open("/dev/null")?;
    /// let mut extra = FdMap::new();
    /// extra.place(devnull.as_fd(), 3)?;
    /// let pipe = TokenPipe::new(&ClaudeToken::from_bytes(b"tok").unwrap())?;
    /// let status = pipe.spawn_with(Command::new("sh").args(["-c", "test -e /dev/fd/3"]), extra)?.wait()?;
    /// assert!(status.success());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn_with(self, cmd: &mut Command, extra: FdMap<'_>) -> io::Result<Child> {
        let result = spawn_with_token_fd(cmd, self.read.as_fd(), extra);
        let _serial = crate::fds::spawn_lock();
        drop(self.read);
        result
    }

    /// Replaces this process with `cmd`, the read end at fd 5 and
    /// `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5`, nothing else above 2, the environment less
    /// the inherited credentials (as [`spawn`](Self::spawn)): the shell launcher's
    /// `exec 5<"$TOKEN_FILE"; exec claude "$@"`, with the checks of the reader. Returns only on
    /// failure (see [`FdMap::exec`]).
    ///
    /// ```no_run
    /// # use std::process::Command;
    /// # use relay_token::{read_claude_token, TokenPipe};
    /// let token = read_claude_token("/home/me/.config/claude-ltt/token".as_ref())?;
    /// let pipe = TokenPipe::new(&token)?;
    /// drop(token);
    /// let err = pipe.exec(&mut Command::new("claude"));
    /// eprintln!("claude: {err}");
    /// std::process::exit(if err.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn exec(self, cmd: &mut Command) -> io::Error {
        let mut map = FdMap::new();
        if let Err(e) = place_token(cmd, &mut map, self.read.as_fd()) {
            return e;
        }
        map.exec(cmd)
    }

    /// Prepares `cmd` without spawning it, for callers that spawn by other means (such as
    /// `tokio::process::Command::from(cmd)`): the child gets the read end at fd 5 with
    /// `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5`, nothing else above 2 and the environment less
    /// the inherited credentials, exactly as with [`spawn`](Self::spawn). Keep the returned [`AttachedToken`] until the spawn returns, then
    /// drop it: that closes this process's read end. A spawn after the guard is dropped fails
    /// with `EBADF`; the command spawns once.
    ///
    /// Unlike [`spawn`](Self::spawn) this holds no lock across the caller's spawn. Should
    /// another thread close and reuse descriptor 5 meanwhile, the child refuses to start
    /// (`EAGAIN`) rather than run with the wrong descriptor.
    ///
    /// ```
    /// use std::process::{Command, Stdio};
    /// use relay_token::{ClaudeToken, TokenPipe};
    ///
    /// let pipe = TokenPipe::new(&ClaudeToken::from_bytes(b"tok").unwrap())?;
    /// let mut cmd = Command::new("sh");
    /// cmd.args(["-c", "cat <&5"]).stdout(Stdio::piped());
    /// let guard = pipe.attach(&mut cmd)?;
    /// // With tokio: `tokio::process::Command::from(cmd).spawn()?`.
    /// let child = cmd.spawn();
    /// drop(guard);
    /// assert_eq!(child?.wait_with_output()?.stdout, b"tok");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn attach(self, cmd: &mut Command) -> io::Result<AttachedToken> {
        let mut map = FdMap::new();
        place_token(cmd, &mut map, self.read.as_fd())?;
        let armed = map.arm(cmd)?;
        Ok(AttachedToken {
            armed: Some(armed),
            read: Some(self.read),
        })
    }

    /// The raw read end, for callers that spawn by other means. They must place it at fd 5 and
    /// set `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5` themselves, both or neither.
    ///
    /// ```
    /// # use relay_token::{ClaudeToken, TokenPipe};
    /// let fd: std::os::fd::OwnedFd = TokenPipe::new(&ClaudeToken::from_bytes(b"tok").unwrap())?.into_fd();
    /// let mut s = String::new();
    /// std::io::Read::read_to_string(&mut std::fs::File::from(fd), &mut s)?;
    /// assert_eq!(s, "tok");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn into_fd(self) -> OwnedFd {
        self.read
    }
}

/// A [`TokenPipe`] attached to a `Command` by [`TokenPipe::attach`]: it keeps the read end open
/// and the command's hook armed until the spawn. Drop it once the spawn returns, success or not.
///
/// ```
/// # use std::process::Command;
/// # use relay_token::{ClaudeToken, TokenPipe};
/// let mut cmd = Command::new("true");
/// let guard = TokenPipe::new(&ClaudeToken::from_bytes(b"tok").unwrap())?.attach(&mut cmd)?;
/// drop(guard);
/// // Disarmed: the command no longer spawns with a descriptor that is gone.
/// assert_eq!(cmd.spawn().unwrap_err().raw_os_error(), Some(libc::EBADF));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct AttachedToken {
    armed: Option<Armed>,
    read: Option<OwnedFd>,
}

impl Drop for AttachedToken {
    fn drop(&mut self) {
        // Disarm first, then close the read end under the spawn lock (as `spawn_with` does).
        drop(self.armed.take());
        let _serial = crate::fds::spawn_lock();
        drop(self.read.take());
    }
}

/// Spawns `cmd` with `token_fd` at fd 5 and `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5`, plus the
/// descriptors of `extra`; nothing else above 2; the inherited names of
/// [`ChildEnv::drops_beside_token`] dropped (as [`TokenPipe::spawn`]). `token_fd` is only borrowed: the caller closes
/// its copy after the spawn, success or not. For a program that hands on a token descriptor it
/// inherited (relay-shim) rather than one it filled itself ([`TokenPipe`]).
///
/// ```no_run
/// use std::os::fd::BorrowedFd;
/// use std::process::Command;
/// // SAFETY: this process inherited fd 5 (the token) and nothing else in it uses that number.
/// let inherited = unsafe { BorrowedFd::borrow_raw(5) };
/// let child = relay_token::spawn_with_token_fd(
///     &mut Command::new("claude"),
///     inherited,
///     relay_token::FdMap::new(),
/// )?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn spawn_with_token_fd<'fd>(
    cmd: &mut Command,
    token_fd: BorrowedFd<'fd>,
    mut extra: FdMap<'fd>,
) -> io::Result<Child> {
    place_token(cmd, &mut extra, token_fd)?;
    extra.spawn(cmd)
}

/// The one place the variable is set: beside the placement of its descriptor, last, so it wins
/// over a value already on `cmd`, and never without the descriptor. What `cmd` would inherit of
/// [`ChildEnv::drops_beside_token`]'s names is removed here too, so no inherited credential
/// outranks the descriptor; a variable the caller set on `cmd` itself stays.
/// A caller's map that places something at 5 already is refused before anything is set.
fn place_token<'fd>(
    cmd: &mut Command,
    map: &mut FdMap<'fd>,
    token_fd: BorrowedFd<'fd>,
) -> io::Result<()> {
    map.place(token_fd, TOKEN_FD)?;
    drop_inherited_rivals(cmd);
    cmd.env(TOKEN_FD_VAR, TOKEN_FD.to_string());
    Ok(())
}

/// Removes from what `cmd` inherits (this process's environment, unless the caller cleared it)
/// every name of [`ChildEnv::drops_beside_token`] that the caller did not set on `cmd` itself.
fn drop_inherited_rivals(cmd: &mut Command) {
    let set_by_caller: Vec<OsString> = cmd
        .get_envs()
        .filter(|(_, value)| value.is_some())
        .map(|(name, _)| name.to_os_string())
        .collect();
    for (name, _) in std::env::vars_os() {
        if ChildEnv::drops_beside_token(&name) && !set_by_caller.contains(&name) {
            cmd.env_remove(&name);
        }
    }
}
