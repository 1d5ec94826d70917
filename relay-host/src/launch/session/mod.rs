//! What a launch leaves for the operator: its answers (`answer`), its audit row
//! (`audit_row`), the hosts its allow-list refused (`denied`), the record of a running session for `ps` (`sessions`), `stop` (`stop`), and
//! the terminal left as found (`terminal`).

pub(crate) mod answer;
pub(crate) mod audit_row;
pub(crate) mod denied;
pub(crate) mod sessions;
pub(crate) mod started;
pub(crate) mod stop;
pub(crate) mod terminal;
