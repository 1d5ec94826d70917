//! The logic of `relay-shim`.
//!
//! (Under construction.)
