//! Not a semver surface. The internals that `relay-runtime` (relay-host's and relay-shim's own
//! code, in this workspace, not published) builds on: the system-call wrappers, descriptor
//! placement's post-fork parts, the one `PATH` lookup and the token rules the host enforces
//! when it stores a token. An embedder uses the crate's documented API instead.

/// System-call wrappers.
pub mod sys {
    pub use crate::sys::*;
}

/// Descriptor placement's internals.
pub mod fds {
    pub use crate::fds::*;
}

/// The one `PATH` lookup.
pub mod which {
    pub use crate::which::*;
}

/// The token rules.
pub mod token {
    pub use crate::token::*;
}

/// The token path rules.
pub mod path {
    pub use crate::path::*;
}

/// The pipe's spawn helper.
pub mod pipe {
    pub use crate::pipe::*;
}

/// Log-line redaction.
pub mod redact {
    pub use crate::redact::*;
}

/// The child environment.
pub mod env {
    pub use crate::env::*;
}

/// The strict reader.
pub mod read {
    pub use crate::read::*;
}
