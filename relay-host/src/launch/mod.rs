//! One launch, from a request to a supervised session, one module per step: the request and its
//! validation ([`request`], [`claude_args`] with [`claude_flags`], [`project`]), the token (`token`), the programs
//! (`programs`), the session folder (`session_folder`), the network ([`network`]), the
//! sandbox (`confine`), the shim's wiring and command ([`wiring`], `shim_command`,
//! [`bridge`]), the start (`start`) and the running sessions ([`sessions`]). [`run`] chains
//! them in order; each step makes the next `stage`; [`error`] says why a launch was refused.

pub mod answer;
pub mod api_use;
pub(crate) mod argv;
pub(crate) mod audit_row;
pub mod bridge;
pub mod claude_args;
pub mod claude_config;
pub mod claude_flags;
pub(crate) mod confine;
pub(crate) mod context;
pub mod error;
#[cfg(not(target_os = "macos"))]
pub(crate) mod git_binds;
pub(crate) mod invalid_spec;
pub mod network;
#[cfg(not(target_os = "macos"))]
pub(crate) mod own_config;
pub(crate) mod placeholders;
pub(crate) mod programs;
pub mod project;
pub mod request;
pub mod run;
pub(crate) mod session_folder;
pub mod sessions;
pub(crate) mod shim_command;
pub(crate) mod signals;
pub(crate) mod stage;
pub(crate) mod stand_in;
pub(crate) mod stand_in_proxy;
pub(crate) mod start;
pub mod stop;
pub(crate) mod tie;
pub(crate) mod token;
pub mod wiring;

pub use run::{launch, refuse_early, LaunchError, Stdin, SSH_CONFIG, START_TIMEOUT};
