//! The plan of a launch: the request as `relay-host launch` reads it ([`request`]), checked
//! rule by rule (`invalid_spec`), Claude's own command line parsed with its grammar
//! (`claude_args`, [`claude_flags`]) and the project folder (`project`), resolved against
//! the settings and the host into a `LaunchPlan` (`launch_plan`).

pub(crate) mod claude_args;
pub mod claude_flags;
pub(crate) mod error;
pub(crate) mod invalid_spec;
mod launch_plan;
pub(crate) mod project;
pub mod request;

pub(crate) use launch_plan::LaunchPlan;
