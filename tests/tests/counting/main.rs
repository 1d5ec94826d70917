//! The tests that count this process's descriptors and children, or churn them, in one binary:
//! the fault battery (`faults`), a session's network (`network`), the endurance run
//! (`endurance`) and `copy_program` under fork churn. A test that counts, or churns, runs
//! alone ([`alone`]); every other test shares its turn with the others ([`shared`]). Run one
//! area as `cargo test -p relay-tests --test counting -- MODULE::`.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

mod copy_program;
mod endurance;
mod faults;
mod network;

static TURN: RwLock<()> = RwLock::new(());

/// A turn shared with the other tests that do not count (never beside one that does).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn shared() -> RwLockReadGuard<'static, ()> {
    TURN.read().unwrap_or_else(|e| e.into_inner())
}

/// A turn alone: no other test of this binary runs meanwhile.
fn alone() -> RwLockWriteGuard<'static, ()> {
    TURN.write().unwrap_or_else(|e| e.into_inner())
}
