//! A small, always-on endurance run (the timed one is `bench-launch --endurance`): sequential
//! and concurrent sandboxed launches, each with its own freshly written token. Asserts
//! correctness only: every session got its own token (by hash in the fake agent's record), every
//! `relay-host` exits 0, and nothing is left behind (no zombie or other child under this test,
//! no process of the run still alive, this process's descriptors back to their count).
//!
//! Build the binaries first: `cargo build --workspace --bins`.

use std::process::Child;
use std::time::Duration;

use relay_tests::fixture::{children_of, open_fds, processes_with_env, zombies_of};
use relay_tests::world::World;
use relay_tests::{fake_agent, read_records, sha256_hex};

const SEQUENTIAL: usize = 50;
const CONCURRENT: usize = 8;

fn my_children() -> Vec<i32> {
    children_of(std::process::id() as i32)
}

/// Nothing left: no process of the run, no zombie, children and descriptors at their count.
fn assert_clean(needles: &[&str], fds0: usize, kids0: usize) {
    let me = std::process::id() as i32;
    for n in needles {
        let left = settle(n);
        assert!(left.is_empty(), "processes left over: {left:?}");
    }
    assert!(zombies_of(me).is_empty(), "zombies: {:?}", zombies_of(me));
    assert_eq!(my_children().len(), kids0, "children back to their count");
    assert_eq!(
        open_fds(me).unwrap(),
        fds0,
        "descriptors back to their count"
    );
}

/// Waits a little for processes of the run to be reaped and gone.
fn settle(needle: &str) -> Vec<i32> {
    for _ in 0..100 {
        let left = processes_with_env(needle);
        if left.is_empty() {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    processes_with_env(needle)
}

#[test]
fn sequential_launches_each_get_their_own_token_and_leave_nothing() {
    // Each runs alone, so it may count this process's descriptors and children.
    let _turn = super::alone();
    let fx = World::agent(&fake_agent());
    let req = fx.request("seq", true, "seq", &[]);
    let me = std::process::id() as i32;
    let (fds0, kids0) = (open_fds(me).unwrap(), my_children().len());
    for i in 0..SEQUENTIAL {
        let token = fx.fresh_token();
        fx.clear_record();
        let status = fx.launch_cmd(&req).status().expect("run relay-host");
        assert!(status.success(), "launch {i}: {status}");
        let recs = read_records(&fx.record);
        assert_own_token(&recs, token.as_str(), i);
    }
    assert_clean(&[fx.record.to_str().unwrap()], fds0, kids0);
}

#[test]
fn concurrent_launches_each_get_their_own_token_and_leave_nothing() {
    // Each runs alone, so it may count this process's descriptors and children.
    let _turn = super::alone();
    let me = std::process::id() as i32;
    let (fds0, kids0) = (open_fds(me).unwrap(), my_children().len());
    let fixtures: Vec<World> = (0..CONCURRENT)
        .map(|_| World::agent(&fake_agent()))
        .collect();
    let tokens: Vec<String> = fixtures.iter().map(World::fresh_token).collect();
    let hosts: Vec<Child> = fixtures
        .iter()
        .enumerate()
        .map(|(i, fx)| {
            // A short sleep so the sessions overlap.
            fx.set_agent_args(&["--sleep", "0.5"]);
            let req = fx.request("conc", true, &format!("conc-{i}"), &[]);
            fx.launch_cmd(&req).spawn().expect("spawn relay-host")
        })
        .collect();
    for (i, mut h) in hosts.into_iter().enumerate() {
        let status = h.wait().unwrap();
        assert!(status.success(), "launch {i}: {status}");
    }
    for (i, (fx, token)) in fixtures.iter().zip(&tokens).enumerate() {
        let recs = read_records(&fx.record);
        assert_own_token(&recs, token.as_str(), i);
    }
    let needles: Vec<&str> = fixtures
        .iter()
        .map(|f| f.record.to_str().unwrap())
        .collect();
    assert_clean(&needles, fds0, kids0);
}

/// Launch `i` left one record, and it read its own token.
fn assert_own_token(recs: &[serde_json::Value], token: &str, i: usize) {
    assert_eq!(recs.len(), 1, "launch {i}: one record");
    assert_eq!(
        recs[0]["token_sha256"],
        sha256_hex(token.as_bytes()),
        "launch {i} got its own token: {}",
        recs[0]
    );
}
