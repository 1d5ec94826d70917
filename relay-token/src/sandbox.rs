//! The sandbox profile and its renderings (bubblewrap on Linux, SBPL on macOS).
//!
//! (Under construction.)
