//! Descriptor placement in a child: [`FdMap`].
//!
//! A child spawned through an [`FdMap`] holds exactly fds 0, 1, 2 and the descriptors placed on
//! purpose; every other descriptor it inherited is closed at `exec`. The part that runs between
//! `fork` and `exec` (a `pre_exec` hook) makes raw system calls only: no allocation, no locks, no
//! `io::Error::new`, so it is async-signal-safe.
//!
//! Two traps are handled in the parent, before the fork:
//! - std's exec-error channel is a close-on-exec pipe opened just before the fork. If a target
//!   number (fd 5, say) is free it can land there and be overwritten by our `dup2`, so a failed
//!   `exec` would look like a child that aborted. Every free target number is *parked* with a
//!   close-on-exec `/dev/null` for the duration of the spawn.
//! - The hook never closes descriptors itself (it might close std's channel, making a failed
//!   `exec` look like a success); it marks them close-on-exec (`close_range(..,
//!   CLOSE_RANGE_CLOEXEC)`, or `fcntl` one by one where that call is missing) and lets `exec`
//!   close them.
//! - Threads: spawns through this module (and the token pipe's own descriptor churn) are
//!   serialized by one lock, so one spawn's guard never shields another. Other threads still open
//!   and close descriptors at will: a target number found busy may hold another thread's file,
//!   closed a moment later. The parent records what each target number holds (a number freed
//!   while it looks is parked instead, never reported as `EBADF`; a number another thread's
//!   `open` has reserved and not yet filled is looked at again until that thread has run on);
//!   if that changed by the time
//!   the child runs, std's channel may sit there, so the hook fails with `EAGAIN` instead of
//!   overwriting it, and [`FdMap::spawn`] parks and records again and spawns anew. A failed
//!   `exec` is never taken for a success, and another thread's churn never refuses a spawn.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::sys;
pub use crate::sys::spawn_lock;

/// The descriptor number a Claude Code child reads its token from.
pub const TOKEN_FD: RawFd = 5;

/// The most descriptors `relay-shim --pass-fds` hands on to its program: bwrap's arguments file
/// and one bind descriptor per source of a sandbox (three bwrap arguments per bind make
/// bubblewrap's own limit of 9,000 arguments come first).
///
/// ```
/// assert_eq!(relay_token::MAX_PASS_FDS, 3000);
/// ```
pub const MAX_PASS_FDS: usize = 3000;

/// The most descriptors one [`FdMap`] places: the token, a status pipe or two, and the
/// descriptors a sandbox launch hands to bwrap ([`MAX_PASS_FDS`]).
pub(crate) const MAX_PLACED: usize = MAX_PASS_FDS + 16;

/// Descriptors to place in a child at fixed numbers; everything else above 2 is closed at exec.
///
/// ```
/// use std::process::Command;
/// use relay_token::FdMap;
///
/// // A child with only 0, 1 and 2, whatever the parent has open.
/// let status = FdMap::new().spawn(&mut Command::new("true"))?.wait()?;
/// assert!(status.success());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct FdMap<'fd> {
    placed: Vec<(BorrowedFd<'fd>, RawFd)>,
}

/// Why [`FdMap::place`] refused a descriptor.
///
/// ```
/// let e: std::io::Error = relay_token::PlaceError::Taken(5).into();
/// assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
/// assert_eq!(e.to_string(), "fd 5 is placed already");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlaceError {
    /// The number is 0, 1 or 2 (stdio, which std sets up itself).
    Stdio(RawFd),
    /// The number is placed already (two sources for one number).
    Taken(RawFd),
    /// More than [`MAX_PASS_FDS`] + 16 descriptors.
    TooMany,
}

impl std::fmt::Display for PlaceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlaceError::Stdio(n) => write!(f, "fd {n} is stdio; place descriptors above 2"),
            PlaceError::Taken(n) => write!(f, "fd {n} is placed already"),
            PlaceError::TooMany => write!(f, "at most {MAX_PLACED} placed descriptors"),
        }
    }
}

impl std::error::Error for PlaceError {}

impl From<PlaceError> for io::Error {
    fn from(e: PlaceError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, e)
    }
}

/// The plan as the hook sees it: plain integers, allocated by the parent before the fork and
/// moved into the closure, so the hook only reads them. (A fixed array of [`MAX_PLACED`] pairs
/// was copied onto the stack several times a spawn: 72 KiB of stack that stayed dirty in every
/// host and shim.)
struct Plan {
    pairs: Box<[(RawFd, RawFd)]>,
}

/// What the hook of an armed spawn shares with the parent: whether it is still armed, and
/// `(st_dev, st_ino)` of what each target number held (in the plan's order) when the parent last
/// looked, renewed before each attempt. Atomics only: the child reads them without a lock.
struct Shared {
    armed: AtomicBool,
    held: Box<[(AtomicU64, AtomicU64)]>,
}

/// How many times [`FdMap::spawn`] spawns again after the child refused (`EAGAIN`) because a
/// target number that another thread's descriptor held changed before the fork.
const SPAWN_RETRIES: u32 = 100;

/// Before a retry, how many times a target held by another thread's descriptor is looked at
/// again (yielding between looks) in the hope of finding it free and parking it: a number that
/// flips between busy and free is then ours for the attempt; one held for good stays a shield.
const INSIST: u32 = 32;

impl<'fd> FdMap<'fd> {
    /// An empty map: the child keeps 0, 1 and 2 only.
    ///
    /// ```
    /// let map = relay_token::FdMap::new();
    /// # drop(map);
    /// ```
    pub fn new() -> Self {
        FdMap { placed: Vec::new() }
    }

    /// Places `src` in the child at number `dst` (above 2). The parent's `src` is left as it is;
    /// closing it after the spawn is the caller's business.
    ///
    /// Refuses (and places nothing) when `dst` is 0, 1 or 2, when `dst` is placed already, or
    /// past 3,016 placed descriptors: a caller's mistake is an error, never a panic (an
    /// `io::Error` of kind `InvalidInput` through `?`).
    ///
    /// ```
    /// use std::os::fd::AsFd;
    /// use relay_token::{FdMap, PlaceError};
    /// let devnull = std::fs::File::open("/dev/null")?;
    /// let mut map = FdMap::new();
    /// map.place(devnull.as_fd(), 3)?;
    /// assert_eq!(map.place(devnull.as_fd(), 3).unwrap_err(), PlaceError::Taken(3));
    /// assert_eq!(map.place(devnull.as_fd(), 1).unwrap_err(), PlaceError::Stdio(1));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn place(&mut self, src: BorrowedFd<'fd>, dst: RawFd) -> Result<&mut Self, PlaceError> {
        if dst <= 2 {
            return Err(PlaceError::Stdio(dst));
        }
        if self.placed.iter().any(|&(_, d)| d == dst) {
            return Err(PlaceError::Taken(dst));
        }
        if self.placed.len() >= MAX_PLACED {
            return Err(PlaceError::TooMany);
        }
        self.placed.push((src, dst));
        Ok(self)
    }

    /// The numbers this map places in the child, in the order given.
    ///
    /// ```
    /// let devnull = std::fs::File::open("/dev/null")?;
    /// # use std::os::fd::AsFd;
    /// let mut map = relay_token::FdMap::new();
    /// map.place(devnull.as_fd(), 5)?;
    /// assert_eq!(map.targets(), vec![5]);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn targets(&self) -> Vec<RawFd> {
        self.placed.iter().map(|&(_, d)| d).collect()
    }

    /// Step 1 of a spawn or exec: no source may sit on another entry's target number, or an
    /// earlier dup2 in the child would overwrite it before it is placed; nor on 0..=2, which
    /// std's stdio setup rewrites before the hook runs. Such sources are moved above every
    /// target; the duplicates are returned to be held until the spawn returns.
    fn plan(&self) -> io::Result<(Plan, Vec<OwnedFd>)> {
        let max_target = self.placed.iter().map(|&(_, d)| d).max().unwrap_or(2);
        let mut moved: Vec<OwnedFd> = Vec::new();
        let mut pairs = vec![(-1, -1); self.placed.len()];
        for (i, &(src, dst)) in self.placed.iter().enumerate() {
            let raw = src.as_raw_fd();
            let clashes = raw <= 2 || (raw != dst && self.placed.iter().any(|&(_, d)| d == raw));
            let raw = if clashes {
                let dup = sys::dup_cloexec_at_least(src, max_target + 1)?;
                let r = dup.as_raw_fd();
                moved.push(dup);
                r
            } else {
                raw
            };
            pairs[i] = (raw, dst);
        }
        // Sorted by target here, so the hook walks the gaps between targets in one pass.
        pairs.sort_unstable_by_key(|&(_, dst)| dst);
        let pairs = pairs.into_boxed_slice();
        Ok((Plan { pairs }, moved))
    }

    /// Replaces this process with `cmd`, holding the placed descriptors and nothing else above
    /// 2 (the shell's `exec 5<file; exec program`). Returns only on failure; by then this
    /// process's descriptors have been rearranged (the placed numbers hold their sources, every
    /// other descriptor above 2 is close-on-exec), so the caller should report and exit.
    ///
    /// No parking is needed: `exec` in place opens no error channel.
    ///
    /// ```no_run
    /// use std::process::Command;
    /// let err = relay_token::FdMap::new().exec(&mut Command::new("true"));
    /// eprintln!("exec failed: {err}");
    /// ```
    pub fn exec(&self, cmd: &mut Command) -> io::Error {
        let (plan, moved) = match self.plan() {
            Ok(p) => p,
            Err(e) => return e,
        };
        // SAFETY: with `exec` the hook runs in this process just before execve, after std has
        // set up stdio; it only reads the plan, allocated before, and makes only raw system
        // calls. Nothing is parked, and nothing can change, so nothing is checked.
        unsafe {
            cmd.pre_exec(move || child_apply(&plan, &[]));
        }
        let err = cmd.exec();
        drop(moved);
        err
    }

    /// Spawns `cmd` with the placed descriptors and nothing else above 2.
    ///
    /// The hook it installs is armed for this one spawn: spawning the same `Command` again fails
    /// with `EBADF` rather than placing whatever then holds the old numbers.
    ///
    /// Other threads may open and close descriptors meanwhile. A target number that another
    /// thread's descriptor holds can be freed at any moment, and std's exec-error channel could
    /// then be opened there; the child checks, refuses, and the spawn is tried again (at most
    /// 100 times), so a spawn is never refused, nor a failed `exec` taken for a success, because
    /// of another thread.
    ///
    /// ```
    /// use std::process::Command;
    /// let out = relay_token::FdMap::new()
    ///     .spawn(Command::new("ls").arg("/dev/fd").stdout(std::process::Stdio::piped()))?
    ///     .wait_with_output()?;
    /// assert!(out.status.success());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn(&self, cmd: &mut Command) -> io::Result<Child> {
        let serial = spawn_lock();
        let mut armed = self.arm(cmd)?;
        let mut retries = 0;
        let result = loop {
            match cmd.spawn() {
                Err(e) if armed.may_retry(&e) && retries < SPAWN_RETRIES => {
                    retries += 1;
                    armed.hold(INSIST)?;
                }
                result => break result,
            }
        };
        drop(armed);
        drop(serial);
        result
    }

    /// Prepares `cmd` without spawning it: moves clashing sources, parks a close-on-exec
    /// `/dev/null` on every free target number (so std's exec-error channel cannot be opened
    /// there), records what each target holds, and installs the hook. The hook stays armed while
    /// the returned [`Armed`] lives; the caller spawns, then drops it.
    ///
    /// Should a target number that another thread's descriptor held change before the fork,
    /// std's channel may sit there; the hook then refuses (`EAGAIN`) rather than overwrite it.
    pub(crate) fn arm(&self, cmd: &mut Command) -> io::Result<Armed> {
        let (plan, moved) = self.plan()?;
        let targets: Vec<Target> = plan
            .pairs
            .iter()
            .map(|&(_, dst)| Target {
                dst,
                // A source of this map sitting on the number: the caller's, open for `'fd`.
                own: self.placed.iter().any(|&(src, _)| src.as_raw_fd() == dst),
                guard: None,
            })
            .collect();
        let shared = Arc::new(Shared {
            armed: AtomicBool::new(true),
            held: targets.iter().map(|_| Default::default()).collect(),
        });
        let mut armed = Armed {
            shared: Arc::clone(&shared),
            targets,
            _moved: moved,
        };
        armed.hold(0)?;
        // SAFETY: the closure runs in the child between fork and exec. It only reads the plan and
        // the atomics, both allocated by the parent before the fork (the child never drops
        // them), and makes only raw system calls (fstat, fcntl,
        // dup2, close_range, getrlimit); it neither allocates nor takes locks, and builds errors
        // with `from_raw_os_error` or `last_os_error`, which do not allocate.
        unsafe {
            cmd.pre_exec(move || {
                if !shared.armed.load(Ordering::SeqCst) {
                    return Err(io::Error::from_raw_os_error(libc::EBADF));
                }
                child_apply(&plan, &shared.held)
            });
        }
        Ok(armed)
    }
}

/// One target number of an armed spawn, as the parent holds it.
struct Target {
    dst: RawFd,
    /// One of the map's own sources sits on it (it stays open until the spawn returns).
    own: bool,
    /// The parked `/dev/null`, when the number was free.
    guard: Option<OwnedFd>,
}

/// A prepared spawn's parent side: the state shared with the hook, the targets with their parked
/// guards, and the moved sources. Dropping it disarms the hook (a later spawn of the same
/// `Command` fails with `EBADF`), then closes the guards and the moved copies.
pub(crate) struct Armed {
    shared: Arc<Shared>,
    targets: Vec<Target>,
    _moved: Vec<OwnedFd>,
}

impl Armed {
    /// Parks every target number that is free and records what each one holds, for the hook's
    /// check. A number another thread holds is looked at `insist` more times in the hope of
    /// parking it (0: take it as it is). A guard parked earlier is kept.
    fn hold(&mut self, insist: u32) -> io::Result<()> {
        let mut devnull: Option<OwnedFd> = None;
        for (t, held) in self.targets.iter_mut().zip(self.shared.held.iter()) {
            if t.guard.is_none() {
                let insist = if t.own { 0 } else { insist };
                let (guard, id) = hold_target(t.dst, insist, &mut devnull)?;
                t.guard = guard;
                held.0.store(id.0, Ordering::SeqCst);
                held.1.store(id.1, Ordering::SeqCst);
            }
        }
        Ok(())
    }

    /// Whether a failed spawn is the hook's refusal over a target that another thread's
    /// descriptor held (so may change): `EAGAIN` while such a target exists. Only those can
    /// change before the fork; a parked guard or one of the map's sources cannot.
    fn may_retry(&self, err: &io::Error) -> bool {
        err.raw_os_error() == Some(libc::EAGAIN)
            && self.targets.iter().any(|t| t.guard.is_none() && !t.own)
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        self.shared.armed.store(false, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for Armed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Armed")
            .field("armed", &self.shared.armed.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

/// How long [`hold_target`] keeps looking at a number that neither parks nor holds a file: one
/// another thread's `open` (or `pipe`, `dup`, `accept`) has reserved and not yet filled. Such a
/// number is taken for `dup` and empty for `fstat` (`EBADF`) until that thread runs on, which
/// under load (the thread preempted inside its `open`) can take a scheduler's time slice or
/// more: `hold_target` yields, then sleeps a little, meanwhile. A count of tries was spent in
/// microseconds and failed the spawn with `EBADF`.
const RESERVED_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Tries at a reserved number before [`hold_target`] sleeps between them instead of yielding.
const RESERVED_SPINS: u32 = 64;

/// Holds target number `fd` for one attempt: parks it when free (the guard is returned), or
/// records what another descriptor there is. Returns the guard and `(st_dev, st_ino)` of what the
/// number holds.
///
/// A number held by another thread's descriptor may be freed between the look that found it busy
/// and the `fstat` (`EBADF`): it is then parked. It may also be reserved by another thread's
/// `open` that has not yet put its file there (`EBADF` too, and busy to `park`): it is looked at
/// again, yielding and then sleeping, until that thread has run on ([`RESERVED_PATIENCE`]). With
/// `insist` above 0, a busy number is looked at that many more times, yielding between looks, in
/// the hope of finding it free.
fn hold_target(
    fd: RawFd,
    insist: u32,
    devnull: &mut Option<OwnedFd>,
) -> io::Result<(Option<OwnedFd>, (u64, u64))> {
    let (mut busy, mut empty) = (0, 0u32);
    let start = std::time::Instant::now();
    loop {
        if let Some(guard) = park(fd, devnull)? {
            let id = file_id(&sys::fstat(&guard)?);
            return Ok((Some(guard), id));
        }
        // SAFETY: only borrowed for one fstat; a number freed since `park` gives EBADF.
        match sys::fstat(unsafe { BorrowedFd::borrow_raw(fd) }) {
            Ok(st) if busy >= insist => return Ok((None, file_id(&st))),
            Ok(_) => {
                busy += 1;
                std::thread::yield_now();
            }
            Err(e)
                if e.raw_os_error() == Some(libc::EBADF) && start.elapsed() < RESERVED_PATIENCE =>
            {
                empty += 1;
                if empty < RESERVED_SPINS {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// `(st_dev, st_ino)`: which open file a descriptor refers to.
// The casts are no-ops on Linux only: macOS's `st_dev` is an `i32`.
#[allow(clippy::unnecessary_cast)]
fn file_id(st: &libc::stat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino as u64)
}

/// If `fd` is free in this process, occupies it with a close-on-exec `/dev/null` and returns the
/// guard; if it is busy, returns `None`.
///
/// Race-free: it asks for the lowest free number `>= fd` and keeps the result only if it is `fd`,
/// so it never replaces a descriptor another thread has just opened.
fn park(fd: RawFd, devnull: &mut Option<OwnedFd>) -> io::Result<Option<OwnedFd>> {
    if devnull.is_none() {
        *devnull = Some(sys::open(c"/dev/null", libc::O_RDONLY)?);
    }
    let src = devnull.as_ref().map(|d| d.as_fd()).expect("opened above");
    if src.as_raw_fd() == fd {
        // `/dev/null` itself was opened on the free target (the lowest free number): keep it
        // there as the guard. Closing it with the spare would leave the target free.
        return Ok(devnull.take());
    }
    let dup = sys::dup_cloexec_at_least(src, fd)?;
    Ok((dup.as_raw_fd() == fd).then_some(dup))
}

/// Runs in the child after fork: checks that each target number still holds what the parent
/// recorded in `held` (in the plan's order; empty: no check), places each pair, then marks
/// everything else above 2 close-on-exec. Async-signal-safe.
fn child_apply(plan: &Plan, held: &[(AtomicU64, AtomicU64)]) -> io::Result<()> {
    for (&(_, dst), held) in plan.pairs.iter().zip(held) {
        // SAFETY: `stat` is plain old data; fstat fills it. No allocation.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is a valid, writable stat; fstat on an int fd.
        let rc = unsafe { libc::fstat(dst, &mut st) };
        let want = (held.0.load(Ordering::SeqCst), held.1.load(Ordering::SeqCst));
        if rc != 0 || file_id(&st) != want {
            return Err(io::Error::from_raw_os_error(libc::EAGAIN));
        }
    }
    for &(src, dst) in plan.pairs.iter() {
        if src == dst {
            // SAFETY: fcntl(F_SETFD, 0) on an int fd; it clears close-on-exec and touches no memory.
            if unsafe { libc::fcntl(dst, libc::F_SETFD, 0) } < 0 {
                return Err(io::Error::last_os_error());
            }
        } else {
            // SAFETY: dup2 on two int fds; the result at `dst` has close-on-exec cleared.
            if unsafe { libc::dup2(src, dst) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    // Keep 0..=2 and the targets (sorted by the parent); mark every gap close-on-exec.
    let mut lo: RawFd = 3;
    for &(_, next) in plan.pairs.iter() {
        if next > lo {
            cloexec_range(lo as u32, (next - 1) as u32)?;
        }
        lo = next + 1;
    }
    cloexec_range(lo as u32, u32::MAX)
}

/// Marks `lo..=hi` close-on-exec: `close_range(lo, hi, CLOSE_RANGE_CLOEXEC)` on Linux, or,
/// where that call is missing (before Linux 5.11, and on macOS), `fcntl(F_SETFD, FD_CLOEXEC)` on
/// each number up to the soft `RLIMIT_NOFILE`. Async-signal-safe.
fn cloexec_range(lo: u32, hi: u32) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: close_range takes three integers and touches only the descriptor table.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                lo as libc::c_uint,
                hi as libc::c_uint,
                libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::ENOSYS) | Some(libc::EINVAL) => {}
            _ => return Err(err),
        }
    }
    // SAFETY: `rlimit` is plain old data; getrlimit writes into it.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: `lim` is a valid, writable rlimit.
    let max = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur.min(1 << 20) as u32
    } else {
        1024
    };
    let mut fd = lo;
    while fd <= hi && fd < max {
        // SAFETY: fcntl(F_SETFD) on an int fd; EBADF for a closed number is ignored.
        unsafe { libc::fcntl(fd as RawFd, libc::F_SETFD, libc::FD_CLOEXEC) };
        fd += 1;
    }
    Ok(())
}

/// The descriptors this process holds open, from `/proc/self/fd` (or `/dev/fd`), sorted. For a
/// report (relay's demo prints what its child holds); it allocates, so never after fork.
///
/// ```
/// let fds = relay_token::open_fds()?;
/// assert!(fds.windows(2).all(|w| w[0] < w[1]));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn open_fds() -> io::Result<Vec<RawFd>> {
    let dir = std::fs::read_dir("/proc/self/fd").or_else(|_| std::fs::read_dir("/dev/fd"))?;
    let mut fds: Vec<RawFd> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    // read_dir's own descriptor was listed too; drop numbers no longer open.
    fds.retain(|&fd| sys::fd_flags(fd).is_ok());
    fds.sort_unstable();
    Ok(fds)
}
