//! The end-to-end tests that share one test binary (one link of relay-host instead of one per
//! file): each module is one area's tests, run as `cargo test -p relay-tests --test e2e --
//! MODULE::`: the real binaries around the fake agent and the real Claude Code, the host's
//! launches and refusals (`host`), the operator's day (`operator_day`) and the built-in templates
//! as shipped (`as_shipped`, which `scripts/test` runs beside the rest).
//!
//! relay-tests has four other test binaries, each for a reason:
//! - `counting`: tests that count this process's descriptors and children, or churn them (the
//!   fault battery, the network, the endurance run, `copy_program`); a test that counts runs
//!   alone there, which it could not among this binary's threads;
//! - `shim`: the shim's descriptor tests (one of them, spawning the shim through the library's
//!   placement, failed with `EBADF` once in this binary, among the other modules' threads, and
//!   never on its own);
//! - `arming`: the arming attacks, which `scripts/test` runs once per bubblewrap (the system's
//!   and upstream's), beside the rest;
//! - `checks`: the checks of the source and the docs, which read files and run nothing.

mod agent_turn;
mod as_shipped;
mod claude_args;
mod claude_code;
mod claude_config;
mod cli;
mod demo;
mod first_run;
mod git_guard;
mod git_work;
mod git_worktrees;
mod host;
mod installs;
mod launcher_acceptance;
mod leftovers;
mod memory_hygiene;
mod operator_day;
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
