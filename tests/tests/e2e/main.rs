//! The end-to-end tests that share one test binary (one link of relay-host instead of one per
//! file): each module is one area's tests, run as `cargo test -p relay-tests --test e2e --
//! MODULE::`. Tests that count this process's descriptors or children (`network.rs`,
//! `endurance.rs`, `faults.rs`), the fork-churn test (`copy_program.rs`), the shim's descriptor tests (`shim.rs`: one of them, spawning the shim
//! through the library's placement, failed with `EBADF` once in this binary, among the other modules'
//! threads, and never on its own), the slow ones
//! `scripts/test` runs beside the rest (`as_shipped.rs`, `arming.rs` with `upstream_bwrap.rs`,
//! once per bubblewrap) and the docs' own checks keep their own binaries.

mod agent_turn;
mod claude_args;
mod claude_code;
mod claude_config;
mod cli;
mod demo;
mod first_run;
mod git_guard;
mod git_work;
mod git_worktrees;
mod installs;
mod launcher_acceptance;
mod leftovers;
mod memory_hygiene;
mod own_folders;
mod protocol_doc;
mod scaling;
mod shim_env;
mod shim_identity;
mod stand_in;
mod stand_in_inputs;
mod stand_in_launch;
mod steering;
mod writes;
