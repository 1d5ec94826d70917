//! The signals the shim forwards to its target's process group, on the one forwarder
//! ([`crate::forwarder`]): queued while no target runs yet.

use std::io;

use crate::forwarder::Forwarder;

/// The signals the shim forwards to the target's process group.
pub const FORWARDED_SIGNALS: [libc::c_int; 4] =
    [libc::SIGHUP, libc::SIGINT, libc::SIGTERM, libc::SIGQUIT];

/// The shim's forwarding: [`FORWARDED_SIGNALS`] to the target's group, a terminal's SIGINT too
/// (the target may run in a process group of its own, away from the terminal's).
const TO_THE_TARGET: Forwarder = Forwarder {
    signals: &FORWARDED_SIGNALS,
    to_group: true,
    drop_terminal_sigint: false,
    keep_ignored: true,
};

/// Installs the forwarding for each of [`FORWARDED_SIGNALS`], except those that were ignored on
/// entry: they stay ignored (and the target inherits that, as from a shell).
pub(super) fn install_forwarders() -> io::Result<()> {
    TO_THE_TARGET.install()
}
