//! The logic of `relay-host`.
//!
//! (Under construction.)
