//! One launch, from a request to a supervised session: `run` chains the steps in order and holds
//! nothing else; each step's body is in its folder, with the stage it makes and the error it
//! refuses with:
//!
//! | step | folder | makes |
//! |---|---|---|
//! | the plan: the request checked and resolved against the settings | [`plan`] | `plan::LaunchPlan` |
//! | the token, the token mode, the programs, the session folder and Claude's config (`prepare::token`, `prepare::prepare`) | `prepare` | `prepare::Prepared` (and the token, which moves on) |
//! | the network: none, the host's, or an allow-list proxy (stand-in mode's `relay-stand-in`) (`network::connect`) | `network` | `network::Networked` |
//! | the sandbox: its profile, what it keeps out of reach, the `bwrap` command line (`sandbox::confine::confine`) | `sandbox` | `sandbox::SessionArgv` |
//! | the shim: its wiring, its command, its start (`shim::shim_command::command`, `shim::start::spawn`) | `shim` | `shim::ShimCommand`, `shim::Spawned`, `shim::Session` |
//!
//! `session` holds what a started or refused launch leaves for the operator (its answer, its
//! audit row, its refusal recorded, its record for `ps`, its supervision, and `stop`). `guard`
//! owns, from the launch's start to its end, the signals it holds back and what a refused
//! launch must undo (the folders made, the session's lock, the write-deny placeholders, the
//! proxy) until its session starts. `context` is what every
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
pub use run::{launch, LaunchError, Stdin};
pub use session::refused::refuse_early;
