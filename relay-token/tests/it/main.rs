//! relay-token's integration tests, one binary (one link instead of one per file): each module
//! is one area's tests, run as `cargo test -p relay-token --test it -- MODULE::`. Two files keep
//! binaries of their own, because they rearrange this process's descriptors, which tests running
//! beside them on other threads would hold: `pipe.rs` (it places descriptors at 3..=9 and counts
//! the open ones) and `fd_churn.rs` (it opens and closes descriptors from many threads on
//! purpose).

mod api_surface;
mod default_features;
mod env;
mod later_launch;
mod packaging;
mod path;
mod read;
mod redaction_props;
mod sandbox_attacks;
mod sbpl;
mod sbpl_golden;
mod sbpl_lint;
