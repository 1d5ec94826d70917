//! Why a launch was refused: one error per stage of a launch, each with its typed source, from
//! which the answer's `error` and `status` and the host's exit code derive ([`Refusal`]). Every
//! step's error a [`LaunchError`] carries is named here, beside it; the rules a request breaks
//! ([`InvalidSpec`]) beside the request.

use std::error::Error;
use std::fmt;
use std::io;

use crate::launch::network::connect::ConnectError;
use crate::launch::network::stand_in::StandInError;
pub use crate::launch::network::NetworkError;
use crate::launch::plan::error::PlanError;
pub use crate::launch::plan::error::RequestError;
use crate::launch::plan::request::InvalidSpec;
use crate::launch::prepare::error::PrepareError;
pub use crate::launch::prepare::error::{ProgramError, TokenError};
pub use crate::launch::refusal::Refusal;
pub use crate::launch::sandbox::error::ConfineError;
use crate::launch::sandbox::error::SandboxStepError;
pub use crate::launch::shim::bridge::BridgeError;
use crate::launch::shim::error::ShimError;
pub use crate::launch::shim::error::StartError;
pub use crate::launch::shim::wiring::IdentityRefused;
use crate::launch::spawn_error::SpawnError;
use crate::settings::SettingsError;
use relay_shim::exit::ExitCode;
use relay_token::sandbox::SandboxError;

/// Why a launch was refused, by the stage that refused it. Its text is `code: message`; the
/// message names paths only, never a token byte.
///
/// ```
/// use relay_host::{launch::error::LaunchError, launch::plan::request::Request};
/// let e = LaunchError::from(Request::from_json("[]").unwrap_err());
/// assert_eq!((e.code(), e.exit_code().code(), e.status()), ("invalid_spec", 64, 400));
/// assert!(e.message().starts_with("request: must be one JSON object"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum LaunchError {
    /// The state folder cannot take the launch's audit row (`spawn_failed`).
    State(io::Error),
    /// The settings cannot be read (`settings_invalid`) or trusted (`sandbox_unavailable`).
    Settings(SettingsError),
    /// The request cannot be launched as written (`invalid_spec`).
    Request(RequestError),
    /// The token file cannot be resolved, read or trusted (`sandbox_unavailable`).
    Token(TokenError),
    /// A program the launch runs cannot be found or trusted.
    Program(ProgramError),
    /// The session's network cannot be made as the template asks (`sandbox_unavailable`).
    Network(NetworkError),
    /// The sandbox program or the sandbox's profile (`sandbox_unavailable`).
    Sandbox(SandboxError),
    /// What the sandbox must keep read-only or mask (`sandbox_unavailable`, but see
    /// [`ConfineError::NoDump`]).
    Confine(ConfineError),
    /// A file, folder or pipe of the launch could not be made (`spawn_failed`).
    Spawn {
        /// What was being made, with its path.
        what: String,
        /// The error.
        source: io::Error,
    },
    /// The shim did not start the session.
    Start(StartError),
}

impl From<SpawnError> for LaunchError {
    fn from(SpawnError { what, source }: SpawnError) -> Self {
        LaunchError::Spawn { what, source }
    }
}

impl From<PrepareError> for LaunchError {
    fn from(e: PrepareError) -> Self {
        match e {
            PrepareError::Request(e) => LaunchError::Request(e),
            PrepareError::Token(e) => LaunchError::Token(e),
            PrepareError::Program(e) => LaunchError::Program(e),
            PrepareError::Sandbox(e) => LaunchError::Sandbox(e),
            PrepareError::Spawn(e) => e.into(),
        }
    }
}

impl From<PlanError> for LaunchError {
    fn from(e: PlanError) -> Self {
        match e {
            PlanError::Request(e) => LaunchError::Request(e),
            PlanError::Grant(e) => LaunchError::Sandbox(e.into_source()),
        }
    }
}

impl From<ShimError> for LaunchError {
    fn from(e: ShimError) -> Self {
        match e {
            ShimError::Start(e) => LaunchError::Start(e),
            ShimError::Sandbox(e) => LaunchError::Sandbox(e),
            ShimError::Spawn(e) => e.into(),
        }
    }
}

impl From<SandboxStepError> for LaunchError {
    fn from(e: SandboxStepError) -> Self {
        match e {
            SandboxStepError::Confine(e) => LaunchError::Confine(e),
            SandboxStepError::Sandbox(e) => LaunchError::Sandbox(e),
            SandboxStepError::Spawn(e) => e.into(),
        }
    }
}

impl From<ConnectError> for LaunchError {
    fn from(e: ConnectError) -> Self {
        match e {
            ConnectError::Network(e) => LaunchError::Network(e),
            ConnectError::StandIn(e) => e.into(),
        }
    }
}

impl From<StandInError> for LaunchError {
    fn from(e: StandInError) -> Self {
        match e {
            StandInError::Settings(e) => LaunchError::Settings(e),
            StandInError::Spawn(e) => e.into(),
        }
    }
}

impl LaunchError {
    /// Which answer the refusal gets.
    ///
    /// ```
    /// use relay_host::launch::error::{LaunchError, Refusal, StartError};
    /// assert_eq!(LaunchError::Start(StartError::ShimEnded).refusal(), Refusal::SpawnFailed);
    /// ```
    pub fn refusal(&self) -> Refusal {
        match self {
            LaunchError::Request(_) => Refusal::InvalidSpec,
            LaunchError::Settings(e) if !e.unsafe_place() => Refusal::SettingsInvalid,
            LaunchError::Settings(_)
            | LaunchError::Token(_)
            | LaunchError::Network(_)
            | LaunchError::Sandbox(_) => Refusal::SandboxUnavailable,
            LaunchError::State(_) | LaunchError::Spawn { .. } => Refusal::SpawnFailed,
            LaunchError::Program(e) => e.refusal(),
            LaunchError::Confine(e) => e.refusal(),
            LaunchError::Start(e) => e.refusal(),
        }
    }

    /// The answer's `error` field.
    ///
    /// ```
    /// # use relay_host::launch::error::{LaunchError, StartError};
    /// assert_eq!(LaunchError::Start(StartError::ShimEnded).code(), "spawn_failed");
    /// ```
    pub fn code(&self) -> &'static str {
        self.refusal().code()
    }

    /// The answer's `status` field.
    ///
    /// ```
    /// # use relay_host::launch::error::{LaunchError, StartError};
    /// assert_eq!(LaunchError::Start(StartError::ShimEnded).status(), 500);
    /// ```
    pub fn status(&self) -> u16 {
        self.refusal().status()
    }

    /// The host's exit code for this refusal.
    ///
    /// ```
    /// # use relay_host::launch::error::{LaunchError, StartError};
    /// assert_eq!(LaunchError::Start(StartError::ShimEnded).exit_code().code(), 71);
    /// ```
    pub fn exit_code(&self) -> ExitCode {
        self.refusal().exit_code()
    }

    /// The message: the text after `code: ` (paths only, never a token byte).
    ///
    /// ```
    /// # use relay_host::launch::error::{LaunchError, StartError};
    /// let e = LaunchError::Start(StartError::ShimEnded);
    /// assert_eq!(e.message(), "relay-shim ended before the session started");
    /// ```
    pub fn message(&self) -> String {
        match self {
            LaunchError::State(e) => e.to_string(),
            LaunchError::Settings(e) => e.to_string(),
            LaunchError::Request(e) => e.to_string(),
            LaunchError::Token(e) => e.to_string(),
            LaunchError::Program(e) => e.to_string(),
            LaunchError::Network(e) => e.to_string(),
            LaunchError::Sandbox(e) => e.to_string(),
            LaunchError::Confine(e) => e.to_string(),
            LaunchError::Spawn { what, source } => format!("{what}: {source}"),
            LaunchError::Start(e) => e.to_string(),
        }
    }
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code(), self.message())
    }
}

impl Error for LaunchError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(match self {
            LaunchError::State(e) => e,
            LaunchError::Settings(e) => e,
            LaunchError::Request(e) => e,
            LaunchError::Token(e) => e,
            LaunchError::Program(e) => e,
            LaunchError::Network(e) => e,
            LaunchError::Sandbox(e) => e,
            LaunchError::Confine(e) => e,
            LaunchError::Spawn { source, .. } => source,
            LaunchError::Start(e) => e,
        })
    }
}

macro_rules! from_stage {
    ($($ty:ty => $variant:ident),* $(,)?) => {$(
        impl From<$ty> for LaunchError {
            fn from(e: $ty) -> Self {
                LaunchError::$variant(e)
            }
        }
    )*};
}

from_stage! {
    SettingsError => Settings,
    RequestError => Request,
    TokenError => Token,
    ProgramError => Program,
    NetworkError => Network,
    SandboxError => Sandbox,
    ConfineError => Confine,
    StartError => Start,
}

impl From<InvalidSpec> for LaunchError {
    fn from(e: InvalidSpec) -> Self {
        LaunchError::Request(RequestError::Invalid(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal keeps what refused it: its source is the typed error (a sandbox error with its
    /// own code, the system call's errno), and its words are that error's.
    #[test]
    fn a_refusal_keeps_its_typed_source_and_its_words() {
        let sandbox = SandboxError::BwrapNotFound {
            looked: "PATH".into(),
        };
        let e = LaunchError::from(sandbox.clone());
        let source = e.source().and_then(|s| s.downcast_ref::<SandboxError>());
        assert_eq!(source, Some(&sandbox));
        assert_eq!(e.code(), "sandbox_unavailable");
        assert_eq!(e.to_string(), format!("sandbox_unavailable: {sandbox}"));

        let e = LaunchError::from(crate::launch::spawn_error::spawn_err("status pipe")(
            io::Error::from_raw_os_error(libc::EMFILE),
        ));
        let errno = e
            .source()
            .and_then(|s| s.downcast_ref::<io::Error>())
            .and_then(io::Error::raw_os_error);
        assert_eq!(errno, Some(libc::EMFILE));
        assert_eq!((e.code(), e.status()), ("spawn_failed", 500));
        assert!(e.message().starts_with("status pipe: "), "{e}");

        let e = LaunchError::from(ConfineError::NoDump {
            dir: "/s".into(),
            source: io::Error::from_raw_os_error(libc::EACCES),
        });
        assert_eq!(
            (e.code(), e.exit_code()),
            ("sandbox_unavailable", ExitCode::Unavailable)
        );
        assert!(e.source().and_then(|s| s.source()).is_some());
    }
}
