//! The signals the shim forwards to its target's process group, on the one forwarder
//! ([`crate::forwarder`]): queued while no target runs yet.

use std::io;

use crate::forwarder::Forwarder;

/// The signals the shim forwards to the target's process group.
pub const FORWARDED_SIGNALS: [libc::c_int; 4] =
    [libc::SIGHUP, libc::SIGINT, libc::SIGTERM, libc::SIGQUIT];

/// Seconds from the first SIGTERM, SIGHUP or SIGINT the shim forwards until it kills what is
/// left of the session (the sandbox's init, and with it every process of the sandbox; the
/// target's group): the program's grace period to end its own way.
pub const GRACE_SECS: u32 = 5;

/// The shim's forwarding: [`FORWARDED_SIGNALS`] to the target's group, a terminal's SIGINT too
/// (the target may run in a process group of its own, away from the terminal's); after an ending
/// signal, [`GRACE_SECS`] until the kill.
const TO_THE_TARGET: Forwarder = Forwarder {
    signals: &FORWARDED_SIGNALS,
    to_group: true,
    drop_terminal_sigint: false,
    keep_ignored: true,
    kill_after: GRACE_SECS,
};

/// Installs the forwarding for each of [`FORWARDED_SIGNALS`], except those that were ignored on
/// entry: they stay ignored (and the target inherits that, as from a shell).
pub(super) fn install_forwarders() -> io::Result<()> {
    TO_THE_TARGET.install()
}
