//! The context of one launch: what every step reads (the host, the settings as read once when the
//! launch was accepted, the state folder).

use crate::settings::Settings;
use crate::state::State;
use crate::Host;

/// One accepted launch's context, passed to each step of [`crate::launch::run`]. What the
/// launch must undo is its guard's ([`crate::launch::guard`]).
pub(crate) struct Launch<'a> {
    /// Where the host keeps its settings and its state.
    pub host: &'a Host,
    /// The settings, read once when the launch was accepted: every step sees the same.
    pub settings: Settings,
    /// The state folder: logs, session folders, and the redactor that knows the token once read.
    pub state: State,
}

impl<'a> Launch<'a> {
    /// The context of a launch accepted with `settings`.
    pub(crate) fn new(host: &'a Host, settings: Settings, state: State) -> Launch<'a> {
        Launch {
            host,
            settings,
            state,
        }
    }
}
