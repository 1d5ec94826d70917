//! One launch, from a request to a supervised session: `run` chains the steps in order, one
//! folder per step, each with the stage it makes and the error it refuses with:
//!
//! | step | folder | makes |
//! |---|---|---|
//! | the plan: the request checked and resolved against the settings | [`plan`] | `plan::LaunchPlan` |
//! | the token, the programs, the session folder and Claude's config | `prepare` | `prepare::Prepared` (and the launch's `guard::Guard`) |
//! | the network: none, the host's, or an allow-list proxy (stand-in mode's `relay-stand-in`) | `network` | `network::Networked` |
//! | the sandbox: its profile, what it keeps out of reach, the `bwrap` command line | `sandbox` | `sandbox::SessionArgv` |
//! | the shim: its wiring, its command, its start | `shim` | `shim::ShimCommand`, `shim::Spawned`, `shim::Session` |
//!
//! `session` holds what a started or refused launch leaves for the operator (its answer, its
//! audit row, its record for `ps`, and `stop`). `guard` owns what a refused launch must undo
//! (the session folder, its lock, the proxy) until its session starts. `context` is what every
//! step reads, [`error`] how a refusal of any step is answered, `signals` and `tie` the host's
//! signals and the tie of what it spawns to its life.
//!
//! What an embedder or the binaries use is public, the rest is the crate's own: [`launch`] and
//! [`refuse_early`] with their [`Stdin`] and [`LaunchError`] (every error a refusal carries is
//! in [`error`]), and the request they take ([`plan::request::Request`]).

pub(crate) mod context;
pub mod error;
pub(crate) mod guard;
pub(crate) mod network;
pub(crate) mod placeholders;
pub mod plan;
pub(crate) mod prepare;
pub(crate) mod refusal;
pub(crate) mod run;
pub(crate) mod sandbox;
pub(crate) mod session;
pub(crate) mod shim;
pub(crate) mod signals;
pub(crate) mod spawn_error;
pub(crate) mod tie;

pub(crate) use run::launch_session;
pub use run::{launch, refuse_early, LaunchError, Stdin};
