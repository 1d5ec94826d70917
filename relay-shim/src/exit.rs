//! The one table of exit codes `relay-host` and `relay-shim` use besides a session's own (the
//! `sysexits.h` numbers, and the shell's 126/127 for a program that cannot run).
//!
//! ```
//! use relay_shim::exit::ExitCode;
//! assert_eq!(ExitCode::Unavailable.code(), 78);
//! ```

/// Why a relay program ended without a session's own status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
#[non_exhaustive]
pub enum ExitCode {
    /// 1: a check ran and found a fault (`relay-host demo`, its probe).
    Failed = 1,
    /// 64: a request or command line that cannot be used as written (`invalid_spec`).
    Usage = 64,
    /// 70: an internal error; for `relay-shim` also a usage error (nothing was started).
    Internal = 70,
    /// 71: the session could not be started (`spawn_failed`).
    SpawnFailed = 71,
    /// 78: the launch cannot be made safe (`sandbox_unavailable`), the settings do not load
    /// (`settings_invalid`: the configuration error of `sysexits.h`), or the shim's launch
    /// identity failed; nothing was started.
    Unavailable = 78,
    /// 126: the program was found but could not be run.
    CannotExec = 126,
    /// 127: the program was not found.
    NotFound = 127,
}

impl ExitCode {
    /// The number.
    ///
    /// ```
    /// assert_eq!(relay_shim::exit::ExitCode::NotFound.code(), 127);
    /// ```
    pub const fn code(self) -> i32 {
        self as i32
    }
}
