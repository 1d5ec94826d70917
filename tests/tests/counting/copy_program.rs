//! `copy_program` under fork churn: a program copied while another thread of the test process
//! keeps forking runs at once, every time (no `ETXTBSY`). With `std::fs::copy` in its place the
//! same loop fails with "Text file busy" within a few hundred rounds on a busy machine; that is
//! how the README walkthrough test once failed.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Copies `/bin/true` 500 times while a thread spawns children without pause, and runs each
/// copy at once: none may fail to start.
#[test]
fn a_copied_program_runs_at_once_while_another_thread_forks() {
    // Alone: the churn's children would show up in the other tests' counts.
    let _turn = super::alone();
    let dir = tempfile::tempdir().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut spawned = 0u32;
            while !stop.load(Ordering::Relaxed) {
                if let Ok(mut c) = Command::new("/bin/true").spawn() {
                    let _ = c.wait();
                    spawned += 1;
                }
            }
            spawned
        })
    };
    let mut failures = Vec::new();
    for i in 0..500 {
        let to = dir.path().join(format!("true-{i}"));
        relay_tests::copy_program(std::path::Path::new("/bin/true"), &to);
        assert_ne!(
            std::fs::metadata(&to).unwrap().permissions().mode() & 0o111,
            0
        );
        if let Err(e) = Command::new(&to).status() {
            failures.push(format!("round {i}: {e}"));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let spawned = churn.join().unwrap();
    assert!(spawned > 0, "the churn thread never spawned");
    assert!(
        failures.is_empty(),
        "{} of 500 copies could not run: {:?}",
        failures.len(),
        &failures[..failures.len().min(3)]
    );
}
