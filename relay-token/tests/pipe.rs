//! Acceptance tests for `TokenPipe` and fd placement.
//!
//! Every test here that spawns or touches descriptors holds [`LOCK`]: they rearrange fds 3..=9
//! of this process, and the exec-error-channel trap depends on which numbers are free.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use relay_token::{ClaudeToken, FdMap, TokenPipe, TOKEN_FD, TOKEN_FD_VAR};
use sha2::{Digest, Sha256};

/// The raw calls these tests make on descriptor numbers (the library keeps its own private).
mod sys {
    use std::io;
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

    fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(rc)
        }
    }

    pub fn fd_flags(n: RawFd) -> io::Result<libc::c_int> {
        // SAFETY: F_GETFD takes no pointer; any number may be asked about.
        check(unsafe { libc::fcntl(n, libc::F_GETFD) })
    }

    pub fn set_cloexec(n: RawFd, on: bool) -> io::Result<libc::c_int> {
        let flags = if on { libc::FD_CLOEXEC } else { 0 };
        // SAFETY: F_SETFD takes an int and touches only the descriptor's flags.
        check(unsafe { libc::fcntl(n, libc::F_SETFD, flags) })
    }

    pub fn dup_cloexec_at_least(fd: BorrowedFd<'_>, min: RawFd) -> io::Result<OwnedFd> {
        // SAFETY: F_DUPFD_CLOEXEC takes an int and returns a fresh descriptor or -1.
        let raw = check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) })?;
        // SAFETY: fcntl just made `raw`; nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(raw) })
    }

    pub fn fstat(fd: impl AsFd) -> io::Result<libc::stat> {
        // SAFETY: `stat` is plain old data; fstat overwrites it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is valid and writable; the descriptor is borrowed for the call.
        check(unsafe { libc::fstat(fd.as_fd().as_raw_fd(), &mut st) })?;
        Ok(st)
    }

    pub fn read(fd: impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for writes of its length.
        let n = unsafe { libc::read(fd.as_fd().as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

/// The descriptors below 1024 this process holds open, in order (the tests use fewer than 400).
fn open_fds() -> std::io::Result<Vec<RawFd>> {
    Ok((0..1024).filter(|&n| sys::fd_flags(n).is_ok()).collect())
}

static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Set in a child: this test binary then acts as the probe in [`probe_child`].
const PROBE_VAR: &str = "RT_TEST_PIPE_PROBE";

const MISSING: &str = "relay-token-test-no-such-program-3b9f";

fn token() -> ClaudeToken {
    ClaudeToken::from_bytes(b"sk-ant-oat01-PIPETEST_0123456789abcdef-xyz").unwrap()
}

fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Not a test of its own: the probe the tests run as a child (`--ignored --exact
/// probe_child`, with [`PROBE_VAR`] set); it reports the descriptors this process was started
/// with, the token variable, and what fd 5 holds (by hash and length), then EOF. Ignored in a
/// plain run, and failing when run without the variable, so it never passes by doing nothing.
#[test]
#[ignore = "a subprocess probe: the tests of this file run it as a child"]
fn probe_child() {
    assert!(
        std::env::var_os(PROBE_VAR).is_some(),
        "probe_child runs only as the child of this file's tests ({PROBE_VAR} set)"
    );
    // First, before this probe opens anything of its own.
    let fds = open_fds().unwrap();
    let var = std::env::var(TOKEN_FD_VAR).unwrap_or_else(|_| "unset".into());
    let (mut sha, mut len, mut eof) = ("none".to_string(), 0, "none");
    if fds.contains(&5) {
        // Reopen by path, as Claude Code does.
        let mut bytes = Vec::new();
        File::open("/dev/fd/5")
            .unwrap()
            .read_to_end(&mut bytes)
            .unwrap();
        sha = sha_hex(&bytes);
        len = bytes.len();
        // read_to_end returned, so a reader saw EOF; fd 5 itself is drained too.
        let mut one = [0u8; 1];
        // SAFETY: fd 5 is open (listed above); it is only borrowed for one read.
        let five = unsafe { std::os::fd::BorrowedFd::borrow_raw(5) };
        eof = match sys::read(five, &mut one) {
            Ok(0) => "yes",
            _ => "no",
        };
    }
    let fds: Vec<String> = fds.iter().map(|f| f.to_string()).collect();
    println!(
        "\nPROBE fds={} var={var} len={len} sha={sha} eof={eof}",
        fds.join(",")
    );
}

#[derive(Debug, PartialEq)]
struct Probe {
    fds: String,
    var: String,
    len: usize,
    sha: String,
    eof: String,
}

fn probe_command() -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--ignored",
        "--exact",
        "probe_child",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(PROBE_VAR, "1")
    .stdout(Stdio::piped());
    cmd
}

/// Waits for `child` with a timeout (a leaked write end would make the probe hang).
fn finish(child: Child) -> std::process::Output {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("child did not finish within 30 s (a write end left open?)")
        .unwrap()
}

fn parse_probe(out: std::process::Output) -> Probe {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "probe failed: {stdout}");
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("PROBE ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no probe line in {stdout:?}"));
    let field = |k: &str| {
        line.split(' ')
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("{k} missing in {line}"))
            .to_string()
    };
    Probe {
        fds: field("fds"),
        var: field("var"),
        len: field("len").parse().unwrap(),
        sha: field("sha"),
        eof: field("eof"),
    }
}

fn expected_probe(t: &ClaudeToken) -> Probe {
    Probe {
        fds: "0,1,2,5".into(),
        var: "5".into(),
        len: t.len(),
        sha: sha_hex(t.expose_bytes()),
        eof: "yes".into(),
    }
}

/// Rearranges fds 3..=9 of this process for one test and puts everything back on drop.
struct Scene {
    saved: Vec<(RawFd, Option<(OwnedFd, libc::c_int)>)>,
    devnull: File,
}

impl Scene {
    /// Occupies every number in `nums` with a `/dev/null` that is NOT close-on-exec.
    fn occupy(nums: &[RawFd]) -> Scene {
        // Kept far above the numbers a scene arranges.
        let low = File::open("/dev/null").unwrap();
        let devnull = File::from(sys::dup_cloexec_at_least(low.as_fd(), 300).unwrap());
        drop(low);
        let mut scene = Scene {
            saved: Vec::new(),
            devnull,
        };
        for &n in nums {
            scene.save(n);
            // SAFETY: dup2 onto a number this scene owns until drop.
            assert_eq!(unsafe { libc::dup2(scene.devnull.as_raw_fd(), n) }, n);
            assert_eq!(
                sys::fd_flags(n).unwrap() & libc::FD_CLOEXEC,
                0,
                "fd {n} must be inheritable"
            );
        }
        scene
    }

    fn save(&mut self, n: RawFd) {
        if self.saved.iter().any(|(m, _)| *m == n) {
            return;
        }
        let old = sys::fd_flags(n).ok().map(|flags| {
            // SAFETY: `n` is open (F_GETFD succeeded) and stays open while borrowed.
            let b = unsafe { std::os::fd::BorrowedFd::borrow_raw(n) };
            (sys::dup_cloexec_at_least(b, 200).unwrap(), flags)
        });
        self.saved.push((n, old));
    }

    /// Frees each number in `nums` (closing what this scene put there).
    fn free(&mut self, nums: &[RawFd]) {
        for &n in nums {
            self.save(n);
            // SAFETY: the number is this scene's to close (its old holder was saved).
            unsafe { libc::close(n) };
            assert!(sys::fd_flags(n).is_err(), "fd {n} must be free");
        }
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        for (n, old) in self.saved.drain(..).rev() {
            match old {
                Some((fd, flags)) => {
                    // SAFETY: restores the descriptor that held `n` before the scene.
                    unsafe { libc::dup2(fd.as_raw_fd(), n) };
                    let _ = sys::set_cloexec(n, flags & libc::FD_CLOEXEC != 0);
                }
                // SAFETY: `n` was free before the scene; close what the scene left there.
                None => unsafe {
                    libc::close(n);
                },
            }
        }
    }
}

#[test]
fn child_gets_exactly_0_1_2_and_the_token_at_5() {
    let _g = lock();
    let t = token();
    // Extra inheritable descriptors at 3, 4, 6 and 9; 5 free. The pipe's read end is made while
    // 5 is busy, so it lands elsewhere and is moved to 5 by dup2.
    let mut scene = Scene::occupy(&[3, 4, 5, 6, 9]);
    let pipe = TokenPipe::new(&t).unwrap();
    scene.free(&[5]);
    let before = open_fds().unwrap();
    let got = parse_probe(finish(pipe.spawn(&mut probe_command()).unwrap()));
    assert_eq!(got, expected_probe(&t));
    // The parent's read end is closed once the spawn returned.
    assert_eq!(open_fds().unwrap(), before_without_one(&before));
    drop(scene);
}

/// `before` held the pipe's read end (the highest new number); after the spawn it is gone.
fn before_without_one(before: &[RawFd]) -> Vec<RawFd> {
    let now = open_fds().unwrap();
    let gone: Vec<RawFd> = before
        .iter()
        .copied()
        .filter(|f| !now.contains(f))
        .collect();
    assert_eq!(gone.len(), 1, "exactly the read end is closed: {gone:?}");
    before
        .iter()
        .copied()
        .filter(|f| !gone.contains(f))
        .collect()
}

#[test]
fn child_gets_the_token_when_the_read_end_already_is_5() {
    let _g = lock();
    let t = token();
    // 5 is the lowest free number, so pipe2 puts the read end there (src == dst: the hook only
    // clears close-on-exec).
    let mut scene = Scene::occupy(&[3, 4, 6, 9]);
    scene.free(&[5]);
    let pipe = TokenPipe::new(&t).unwrap();
    assert_eq!(
        sys::fd_flags(5).unwrap() & libc::FD_CLOEXEC,
        libc::FD_CLOEXEC,
        "the read end sits on 5, close-on-exec"
    );
    let got = parse_probe(finish(pipe.spawn(&mut probe_command()).unwrap()));
    assert_eq!(got, expected_probe(&t));
    assert!(sys::fd_flags(5).is_err(), "the parent closed its read end");
    drop(scene);
}

#[test]
fn probe_baseline_has_only_stdio() {
    // The probe itself opens nothing before it lists: a child with no token lists 0, 1, 2.
    let _g = lock();
    let scene = Scene::occupy(&[3, 4, 5, 6, 9]);
    let mut cmd = probe_command();
    let got = parse_probe(finish(FdMap::new().spawn(&mut cmd).unwrap()));
    assert_eq!(got.fds, "0,1,2");
    assert_eq!(got.var, "unset");
    drop(scene);
}

#[test]
fn raw_into_fd_form() {
    let _g = lock();
    let t = token();
    // In-process: a pipe (never a socket), close-on-exec, the bytes then EOF.
    let fd: OwnedFd = TokenPipe::new(&t).unwrap().into_fd();
    let st = sys::fstat(&fd).unwrap();
    assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFIFO);
    assert_eq!(
        sys::fd_flags(fd.as_raw_fd()).unwrap() & libc::FD_CLOEXEC,
        libc::FD_CLOEXEC
    );
    let mut bytes = Vec::new();
    File::from(fd).read_to_end(&mut bytes).unwrap();
    assert_eq!(bytes, t.expose_bytes());

    // Through a spawn by other means, with extra inheritable fds about.
    let scene = Scene::occupy(&[3, 4, 6, 9]);
    let fd = TokenPipe::new(&t).unwrap().into_fd();
    let mut cmd = probe_command();
    cmd.env(TOKEN_FD_VAR, "5");
    let child = FdMap::new()
        .place(fd.as_fd(), 5)
        .unwrap()
        .spawn(&mut cmd)
        .unwrap();
    drop(fd);
    assert_eq!(parse_probe(finish(child)), expected_probe(&t));
    drop(scene);
}

#[test]
fn attach_prepares_a_command_that_spawns_like_spawn() {
    let _g = lock();
    let t = token();
    // Inheritable descriptors about, fd 5 free: the guard parks it, so a spawn by other means
    // gets the same table as `spawn`.
    let mut scene = Scene::occupy(&[3, 4, 5, 6, 9]);
    let pipe = TokenPipe::new(&t).unwrap();
    scene.free(&[5]);
    let mut cmd = probe_command();
    let guard = pipe.attach(&mut cmd).unwrap();
    assert!(
        sys::fd_flags(5).is_ok(),
        "the guard holds fd 5 until the spawn"
    );
    let child = cmd.spawn();
    drop(guard);
    assert!(
        sys::fd_flags(5).is_err(),
        "fd 5 is free again once the guard is dropped"
    );
    assert_eq!(parse_probe(finish(child.unwrap())), expected_probe(&t));
    // Spawned once: the hook is disarmed with the guard.
    assert_eq!(cmd.spawn().unwrap_err().raw_os_error(), Some(libc::EBADF));
    drop(scene);
}

#[test]
fn attach_then_missing_program_is_not_found() {
    let _g = lock();
    // 3 busy, 4 and 5 free: the exec-error channel would land on (4, 5) but for the guard.
    let mut scene = Scene::occupy(&[3, 4, 5, 6, 7, 8, 9]);
    let pipe = TokenPipe::new(&token()).unwrap();
    scene.free(&[4, 5]);
    let mut cmd = Command::new(MISSING);
    let guard = pipe.attach(&mut cmd).unwrap();
    let result = cmd.spawn();
    drop(guard);
    match result {
        Ok(mut child) => panic!("a missing program spawned (child ended {:?})", child.wait()),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}"),
    }
    drop(scene);
}

/// Spawns a missing program through `TokenPipe::spawn`; it must fail with `NotFound`.
fn assert_missing_is_not_found(layout: &str) {
    let pipe = TokenPipe::new(&token()).unwrap();
    match pipe.spawn(&mut Command::new(MISSING)) {
        Ok(mut child) => {
            let status = child.wait();
            panic!(
                "{layout}: spawning a missing program returned Ok (child ended {status:?}): \
                 std's exec-error channel was clobbered at fd 5"
            );
        }
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{layout}: {e}"),
    }
}

#[test]
fn missing_program_is_not_found_with_fd_5_free() {
    let _g = lock();
    // 3 busy, 4 and 5 free: without parking, std's exec-error pipe would be (4, 5), its write
    // end on 5, overwritten by the dup2 of the token; a failed exec would then look like success.
    let mut scene = Scene::occupy(&[3, 4, 5, 6, 7, 8, 9]);
    let pipe = TokenPipe::new(&token()).unwrap();
    scene.free(&[4, 5]);
    match pipe.spawn(&mut Command::new(MISSING)) {
        Ok(mut child) => {
            let status = child.wait();
            panic!("spawn of a missing program returned Ok (child ended {status:?})");
        }
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}"),
    }
    assert!(sys::fd_flags(5).is_err(), "fd 5 is free again afterwards");
    assert!(sys::fd_flags(4).is_err(), "fd 4 is free again afterwards");
    drop(scene);
}

#[test]
fn missing_program_is_not_found_with_fd_5_busy() {
    let _g = lock();
    let scene = Scene::occupy(&[5]);
    let before = open_fds().unwrap();
    assert_missing_is_not_found("fd 5 busy");
    // The parent's own fd 5 is untouched.
    assert_eq!(open_fds().unwrap(), before);
    assert_eq!(sys::fd_flags(5).unwrap() & libc::FD_CLOEXEC, 0);
    let st = sys::fstat(&scene.devnull).unwrap();
    // SAFETY: fd 5 is open (checked above) and only borrowed.
    let st5 = sys::fstat(unsafe { std::os::fd::BorrowedFd::borrow_raw(5) }).unwrap();
    assert_eq!((st.st_dev, st.st_ino), (st5.st_dev, st5.st_ino));
    drop(scene);
}

#[test]
fn missing_program_is_not_found_in_every_layout_of_3_to_8() {
    let _g = lock();
    for mask in 0u32..64 {
        let busy: Vec<RawFd> = (3..=8).filter(|n| mask & (1 << (n - 3)) != 0).collect();
        let free: Vec<RawFd> = (3..=8).filter(|n| mask & (1 << (n - 3)) == 0).collect();
        let mut scene = Scene::occupy(&(3..=9).collect::<Vec<_>>());
        let pipe = TokenPipe::new(&token()).unwrap();
        scene.free(&free);
        let layout = format!("busy {busy:?}, free {free:?}");
        match pipe.spawn(&mut Command::new(MISSING)) {
            Ok(mut child) => {
                let status = child.wait();
                panic!("{layout}: missing program returned Ok (child ended {status:?})");
            }
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{layout}: {e}"),
        }
        drop(scene);
    }
}

/// With fd 5 free in the parent, a hook that runs in the child before the placement sees fd 5
/// holding the parked `/dev/null` (std's exec-error channel could not land there).
#[test]
fn free_fd_5_is_parked_during_the_spawn() {
    let _g = lock();
    for mask in 0u32..64 {
        let busy: Vec<RawFd> = (3..=8)
            .filter(|&n| n != 5 && mask & (1 << (n - 3)) != 0)
            .collect();
        if mask & (1 << 2) != 0 {
            continue; // 5 busy: not this test's case
        }
        let free: Vec<RawFd> = (3..=8).filter(|n| !busy.contains(n)).collect();
        let mut scene = Scene::occupy(&(3..=9).collect::<Vec<_>>());
        let pipe = TokenPipe::new(&token()).unwrap();
        scene.free(&free);
        let mut cmd = Command::new("/bin/true");
        // SAFETY: readlink into a stack buffer and a byte compare: async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                let mut buf = [0u8; 64];
                let n = libc::readlink(
                    c"/proc/self/fd/5".as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                );
                if n >= 0 && &buf[..n as usize] == b"/dev/null" {
                    Ok(())
                } else {
                    Err(std::io::Error::from_raw_os_error(libc::EXDEV))
                }
            });
        }
        let layout = format!("busy {busy:?}, free {free:?}");
        let status = pipe
            .spawn(&mut cmd)
            .unwrap_or_else(|e| panic!("{layout}: fd 5 was not parked in the child: {e}"))
            .wait()
            .unwrap();
        assert!(status.success(), "{layout}");
        drop(scene);
    }
}

#[test]
fn second_spawn_of_the_same_command_fails() {
    let _g = lock();
    let mut cmd = Command::new("/bin/true");
    let status = TokenPipe::new(&token())
        .unwrap()
        .spawn(&mut cmd)
        .unwrap()
        .wait()
        .unwrap();
    assert!(status.success());
    // A plain second spawn: the hook is disarmed, so nothing is placed at a stale number.
    let e = cmd.spawn().expect_err("a second spawn must fail");
    assert_eq!(e.raw_os_error(), Some(libc::EBADF), "{e}");
    // Also with a fresh pipe: the first, disarmed hook still refuses.
    let e = TokenPipe::new(&token())
        .unwrap()
        .spawn(&mut cmd)
        .expect_err("a second TokenPipe::spawn of the same Command must fail");
    assert_eq!(e.raw_os_error(), Some(libc::EBADF), "{e}");
}

#[test]
fn spawn_closes_the_parent_read_end_on_failure_too() {
    let _g = lock();
    let before = open_fds().unwrap();
    let pipe = TokenPipe::new(&token()).unwrap();
    assert_eq!(open_fds().unwrap().len(), before.len() + 1);
    assert!(pipe.spawn(&mut Command::new(MISSING)).is_err());
    assert_eq!(open_fds().unwrap(), before);
    let pipe = TokenPipe::new(&token()).unwrap();
    pipe.spawn(&mut Command::new("/bin/true"))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(open_fds().unwrap(), before);
}

#[test]
fn variable_is_set_last_over_a_caller_value() {
    let _g = lock();
    let t = token();
    let mut cmd = probe_command();
    cmd.env(TOKEN_FD_VAR, "9");
    let got = parse_probe(finish(TokenPipe::new(&t).unwrap().spawn(&mut cmd).unwrap()));
    assert_eq!(got, expected_probe(&t));
    assert_eq!(TOKEN_FD, 5);
}

#[test]
fn pipe_holds_exactly_the_token_and_no_writer() {
    let _g = lock();
    let t = token();
    let fd = TokenPipe::new(&t).unwrap().into_fd();
    // Non-blocking read after draining: EOF (0), not EAGAIN, so no write end is open anywhere.
    let mut f = File::from(fd);
    let mut buf = vec![0u8; 8192];
    let n = f.read(&mut buf).unwrap();
    assert_eq!(&buf[..n], t.expose_bytes());
    // SAFETY: sets O_NONBLOCK on our own descriptor.
    unsafe {
        let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    assert_eq!(f.read(&mut buf).unwrap(), 0);
}

#[test]
fn concurrent_spawns_of_a_missing_program_all_fail_not_found() {
    // Spawns from several threads at once: one thread's parked guard on 5 must not stand in for
    // another's, or a guard dropped early leaves 5 free for the other's exec-error channel.
    let _g = lock();
    let mut scene = Scene::occupy(&(3..=9).collect::<Vec<_>>());
    scene.free(&[4, 5, 6, 7, 8, 9]);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(|| {
                let mut wrong = 0;
                for _ in 0..300 {
                    let pipe = TokenPipe::new(&token()).unwrap();
                    match pipe.spawn(&mut Command::new(MISSING)) {
                        Ok(mut child) => {
                            let _ = child.wait();
                            wrong += 1;
                        }
                        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}"),
                    }
                }
                wrong
            })
        })
        .collect();
    let wrong: i32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(wrong, 0, "{wrong} spawns of a missing program returned Ok");
    drop(scene);
}

#[test]
fn hook_refuses_when_fd_5_changed_since_the_parent_looked() {
    // Simulates fd 5 changing between the parent's look and the fork (another thread closing
    // its descriptor there): an earlier hook closes 5 in the child. The placement must refuse
    // (EAGAIN) rather than dup2 over whatever might now sit there.
    let _g = lock();
    for busy in [false, true] {
        let scene = Scene::occupy(if busy { &[5][..] } else { &[][..] });
        let mut cmd = Command::new("/bin/true");
        // SAFETY: close(2) on an int fd is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::close(5);
                Ok(())
            });
        }
        let e = TokenPipe::new(&token())
            .unwrap()
            .spawn(&mut cmd)
            .expect_err("must refuse");
        assert_eq!(e.raw_os_error(), Some(libc::EAGAIN), "busy={busy}: {e}");
        drop(scene);
    }
}

/// A caller's map that already places a descriptor at 5 is refused with an error naming the
/// number (as command-fds does on a collision), never a panic, and the child never runs.
#[test]
fn a_callers_map_with_fd_5_taken_is_an_error_not_a_panic() {
    let devnull = std::fs::File::open("/dev/null").unwrap();
    let mut extra = FdMap::new();
    extra.place(devnull.as_fd(), 5).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let pipe = TokenPipe::new(&ClaudeToken::from_bytes(b"tok").unwrap()).unwrap();
    let mut cmd = std::process::Command::new("touch");
    cmd.arg(&ran);
    let err = pipe.spawn_with(&mut cmd, extra).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(err.to_string(), "fd 5 is placed already");
    assert!(!ran.exists(), "the child ran");
}

/// A spawn through `FdMap` fits on a small thread stack: its plan lives on the heap. (It was a
/// fixed array of 3,016 pairs copied onto the stack a few times a spawn, 72 KiB in a release
/// build, more in a debug one, which stayed dirty in every host and shim; on this 64 KiB stack
/// the thread overflowed and the test process aborted.)
#[test]
fn a_spawn_fits_on_a_64_kib_stack() {
    let _l = lock();
    let devnull = File::open("/dev/null").unwrap();
    let status = std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || {
            let mut map = FdMap::new();
            map.place(devnull.as_fd(), 7).unwrap();
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "test -e /dev/fd/7"]);
            map.spawn(&mut cmd).unwrap().wait().unwrap()
        })
        .unwrap()
        .join()
        .unwrap();
    assert!(
        status.success(),
        "the child got its descriptor at 7: {status}"
    );
}
