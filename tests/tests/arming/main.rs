//! The arming attacks (`arming`: no session arms the next) and the checks against upstream
//! bubblewrap (`upstream_bwrap`), in one binary. `scripts/test` runs `arming::` once with the
//! system's bubblewrap and once more, with `upstream_bwrap::`, with `RELAY_TEST_BWRAP` set to
//! upstream bubblewrap.

mod arming;
mod upstream_bwrap;
