//! Spawns through [`FdMap`] and [`TokenPipe`] while other threads of the same process open and
//! close descriptors, as the threads of a test binary or of an embedder's server do.
//!
//! A target number (3, 5) is often held by another thread's file when the spawn looks at it, and
//! freed a moment later. The spawn must neither fail on that (`EBADF` from looking at a number
//! that was just freed, `EAGAIN` from the child's check that the number changed) nor place the
//! wrong descriptor: every child here reads its own bytes at 3 and the token at 5.
//!
//! A process of its own (this file): the churning threads would disturb the descriptor scenes of
//! the other test files.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use relay_token::{ClaudeToken, FdMap, TokenPipe};

/// Spawns per test: enough for the churn to hit the window many times on an idle 2-core machine
/// (without the fix, `EBADF` or `EAGAIN` within the first hundred or so).
const SPAWNS: usize = 200;

/// Threads that open and close `/dev/null` as fast as they can: the lowest free numbers (3, 4,
/// 5, ...) flip between busy and free all the time.
fn churn(threads: usize) -> (Arc<AtomicBool>, Vec<std::thread::JoinHandle<u64>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let handles = (0..threads)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut opened = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let f = File::open("/dev/null").unwrap();
                    std::hint::black_box(&f);
                    drop(f);
                    opened += 1;
                }
                opened
            })
        })
        .collect();
    (stop, handles)
}

fn stop_churn(stop: Arc<AtomicBool>, handles: Vec<std::thread::JoinHandle<u64>>) -> u64 {
    stop.store(true, Ordering::Relaxed);
    handles.into_iter().map(|h| h.join().unwrap()).sum()
}

/// One spawn of `sh` that prints what it reads at 3, then at 5, through a map with a file holding
/// `marker` at 3 and the token at 5. Returns the child's output or the spawn's error.
fn spawn_once(token: &ClaudeToken, marker: &str) -> std::io::Result<String> {
    let mut r3 = tempfile::tempfile()?;
    r3.write_all(marker.as_bytes())?;
    r3.seek(SeekFrom::Start(0))?;
    let mut extra = FdMap::new();
    extra.place(r3.as_fd(), 3).unwrap();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "cat <&3; echo; cat <&5"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let child = TokenPipe::new(token)?.spawn_with(&mut cmd, extra)?;
    drop(r3);
    let out = child.wait_with_output()?;
    assert!(out.status.success(), "{marker}: {:?}", out.status);
    Ok(String::from_utf8(out.stdout).unwrap())
}

#[test]
fn spawns_beside_threads_that_churn_descriptors_all_succeed_with_the_right_fds() {
    let token = ClaudeToken::from_bytes(b"sk-ant-oat01-CHURN_0123456789abcdef-xyz").unwrap();
    let (stop, handles) = churn(3);
    let mut errors: Vec<String> = Vec::new();
    for i in 0..SPAWNS {
        let marker = format!("spawn-{i}");
        match spawn_once(&token, &marker) {
            Ok(out) => {
                let mut want = marker.clone();
                want.push('\n');
                want.push_str("sk-ant-oat01-CHURN_0123456789abcdef-xyz");
                assert!(
                    out == want,
                    "spawn {i}: the child read the wrong descriptors"
                );
            }
            Err(e) => errors.push(format!("spawn {i}: {e}")),
        }
    }
    let opened = stop_churn(stop, handles);
    assert!(opened > 1000, "the churn ran: {opened} opens");
    assert!(
        errors.is_empty(),
        "{} of {SPAWNS} spawns failed beside the churn: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
}

#[test]
fn a_missing_program_beside_the_churn_is_not_found_every_time() {
    // The exec-error channel must never be mistaken: a missing program is NotFound, never Ok
    // (the channel overwritten) and never a refused spawn.
    let token = ClaudeToken::from_bytes(b"sk-ant-oat01-CHURN_missing").unwrap();
    let (stop, handles) = churn(3);
    let mut wrong: Vec<String> = Vec::new();
    for i in 0..SPAWNS {
        let mut cmd = Command::new("relay-token-test-no-such-program-churn");
        match TokenPipe::new(&token).unwrap().spawn(&mut cmd) {
            Ok(mut child) => {
                let _ = child.wait();
                wrong.push(format!("spawn {i}: Ok"));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => wrong.push(format!("spawn {i}: {e}")),
        }
    }
    stop_churn(stop, handles);
    assert!(
        wrong.is_empty(),
        "{} of {SPAWNS}: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}

/// Threads that make pipes and close them (each end a new open file, unlike `/dev/null`), and
/// threads that spawn `true` with std alone (its own exec-error and stdio pipes opened and closed
/// beside ours, unserialized): the descriptors another thread of a server opens.
fn churn_pipes_and_spawns(stop: &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<u64>> {
    let mut handles = Vec::new();
    for kind in 0..2 {
        let stop = Arc::clone(stop);
        handles.push(std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if kind == 0 {
                    let p = relay_token::sys::pipe2_cloexec().unwrap();
                    std::hint::black_box(&p);
                } else {
                    let out = Command::new("true")
                        .stdin(Stdio::null())
                        .stdout(Stdio::piped())
                        .output()
                        .unwrap();
                    assert!(out.status.success());
                }
                n += 1;
            }
            n
        }));
    }
    handles
}

/// `spawners` threads each spawning through [`FdMap`] (and [`TokenPipe`]) `each` times, beside
/// the `/dev/null` churn, pipe churn and std's own spawns: every spawn's error and every child
/// that read the wrong descriptors, as text.
fn spawn_from_many_threads(spawners: usize, each: usize) -> (Vec<String>, u64) {
    let (stop, mut handles) = churn(3);
    handles.extend(churn_pipes_and_spawns(&stop));
    let token = ClaudeToken::from_bytes(b"sk-ant-oat01-MANY_0123456789abcdef-xyz").unwrap();
    let token = Arc::new(token);
    let workers: Vec<_> = (0..spawners)
        .map(|t| {
            let token = Arc::clone(&token);
            std::thread::spawn(move || {
                let mut wrong = Vec::new();
                for i in 0..each {
                    let marker = format!("thread-{t}-spawn-{i}");
                    match spawn_once(&token, &marker) {
                        Ok(out) if out == format!("{marker}\n{}", token_text(&token)) => {}
                        Ok(_) => wrong.push(format!("{marker}: the wrong descriptors")),
                        Err(e) => wrong.push(format!("{marker}: {e} ({:?})", e.raw_os_error())),
                    }
                }
                wrong
            })
        })
        .collect();
    let wrong: Vec<String> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    (wrong, stop_churn(stop, handles))
}

fn token_text(t: &ClaudeToken) -> String {
    String::from_utf8(t.expose_bytes().to_vec()).unwrap()
}

/// Four threads spawn through [`FdMap`] at once beside threads that open and close descriptors
/// (`/dev/null`, pipes) and spawn with std alone: no spawn fails and every child reads its own
/// descriptors. Bounded for the normal suite (4 × 40 spawns); `many_threads_stress` is the long
/// run.
#[test]
fn spawns_from_many_threads_beside_the_churn_all_succeed_with_the_right_fds() {
    let (wrong, opened) = spawn_from_many_threads(4, 40);
    assert!(opened > 1000, "the churn ran: {opened}");
    assert!(
        wrong.is_empty(),
        "{} of 160: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}

/// The long run of the test above: `RELAY_FD_CHURN_ROUNDS` rounds (default 25) of 8 threads ×
/// 100 spawns. `cargo test -p relay-token --test fd_churn -- --ignored many_threads_stress`.
#[test]
#[ignore = "a stress run of minutes; the bounded test above runs in the normal suite"]
fn many_threads_stress() {
    let rounds: usize = std::env::var("RELAY_FD_CHURN_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25);
    let mut all = Vec::new();
    for round in 0..rounds {
        let (wrong, _) = spawn_from_many_threads(8, 100);
        eprintln!("round {round}: {} of 800 wrong", wrong.len());
        all.extend(wrong);
    }
    assert!(
        all.is_empty(),
        "{} of {}: {:?}",
        all.len(),
        rounds * 800,
        &all[..all.len().min(10)]
    );
}
