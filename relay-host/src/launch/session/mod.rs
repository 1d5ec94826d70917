//! What a launch leaves for the operator: its answers (`answer`), its audit row
//! (`audit_row`), a refusal recorded (`refused`), the hosts its allow-list refused (`denied`),
//! the record of a running session for `ps` (`sessions`), its start recorded (`started`), the
//! session supervised until it ends (`supervise`), `stop` (`stop`), and the terminal left as
//! found (`terminal`).

pub(crate) mod answer;
pub(crate) mod audit_row;
pub(crate) mod denied;
pub(crate) mod refused;
pub(crate) mod sessions;
pub(crate) mod started;
pub(crate) mod stop;
pub(crate) mod supervise;
pub(crate) mod terminal;
