//! What a launch leaves for the operator: its answers (`answer`), its audit row
//! (`audit_row`), the record of a running session for `ps` (`sessions`), `stop` (`stop`), and
//! the terminal left as found (`terminal`).

pub(crate) mod answer;
pub(crate) mod audit_row;
pub(crate) mod sessions;
pub(crate) mod started;
pub(crate) mod stop;
pub(crate) mod terminal;
