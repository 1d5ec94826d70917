//! The secret type: [`ClaudeToken`].
//!
//! The bytes live in a [`secrecy::SecretString`] built with an exact-size allocation, so no
//! reallocation leaves a copy behind, and are zeroized when the token is dropped. `Debug` prints a
//! fixed redacted form; there is no `Display`, no `Serialize` and no `Clone`. Exposing the bytes is
//! one explicit call, [`ClaudeToken::expose_bytes`], used by the pipe writer.

use std::fmt;

use secrecy::{ExposeSecret, SecretString};
use zeroize::Zeroize;

/// A Claude Code OAuth token held in memory that is wiped on drop.
///
/// Made by [`crate::read_claude_token`] (or [`ClaudeToken::from_bytes`] for a token that is
/// already in memory, such as a generated demo token).
///
/// ```
/// use relay_token::ClaudeToken;
///
/// let token = ClaudeToken::from_bytes(b"sk-ant-oat01-example").unwrap();
/// assert_eq!(format!("{token:?}"), "ClaudeToken([REDACTED])");
/// assert_eq!(token.len(), 20);
/// ```
pub struct ClaudeToken(SecretString);

/// The largest token accepted, in bytes (after trimming nothing: the file itself).
///
/// ```
/// assert_eq!(relay_token::MAX_TOKEN_BYTES, 4096);
/// ```
pub const MAX_TOKEN_BYTES: usize = 4096;

/// The token's fixed `Debug` form.
pub const REDACTED_DEBUG: &str = "ClaudeToken([REDACTED])";

impl ClaudeToken {
    /// Builds a token from bytes that are already a clean token: non-empty, at most 4096 bytes,
    /// each printable ASCII (0x21..=0x7E). Returns `None` otherwise. The caller's buffer is not
    /// touched; wiping it is the caller's business.
    ///
    /// ```
    /// use relay_token::ClaudeToken;
    ///
    /// assert!(ClaudeToken::from_bytes(b"abc").is_some());
    /// assert!(ClaudeToken::from_bytes(b"a c").is_none());
    /// assert!(ClaudeToken::from_bytes(b"").is_none());
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Option<ClaudeToken> {
        if bytes.is_empty() || bytes.len() > MAX_TOKEN_BYTES || !is_token_bytes(bytes) {
            return None;
        }
        // `to_vec` allocates exactly `bytes.len()`; `into_boxed_str` keeps that allocation since
        // capacity equals length, so the bytes are copied once into their final home.
        let vec = bytes.to_vec();
        let string = match String::from_utf8(vec) {
            Ok(s) => s,
            Err(e) => {
                // Unreachable for printable ASCII; wipe the copy all the same.
                e.into_bytes().zeroize();
                return None;
            }
        };
        Some(ClaudeToken(SecretString::from(string)))
    }

    /// The token's bytes. This is the one way to see them; keep each use short-lived.
    ///
    /// ```
    /// use relay_token::ClaudeToken;
    ///
    /// let token = ClaudeToken::from_bytes(b"tok").unwrap();
    /// assert_eq!(token.expose_bytes(), b"tok");
    /// ```
    pub fn expose_bytes(&self) -> &[u8] {
        self.0.expose_secret().as_bytes()
    }

    /// The token's length in bytes (not secret: it is also the pipe's content length).
    ///
    /// ```
    /// # use relay_token::ClaudeToken;
    /// assert_eq!(ClaudeToken::from_bytes(b"tok").unwrap().len(), 3);
    /// ```
    #[allow(clippy::len_without_is_empty)] // a token is never empty
    pub fn len(&self) -> usize {
        self.0.expose_secret().len()
    }
}

impl fmt::Debug for ClaudeToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED_DEBUG)
    }
}

/// True when every byte is printable, non-space ASCII (0x21..=0x7E).
pub fn is_token_bytes(bytes: &[u8]) -> bool {
    bytes.iter().all(|b| (0x21..=0x7e).contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_is_fixed() {
        let t = ClaudeToken::from_bytes(b"sk-ant-secret").unwrap();
        assert_eq!(format!("{t:?}"), REDACTED_DEBUG);
        assert_eq!(format!("{t:#?}"), REDACTED_DEBUG);
    }

    #[test]
    fn rejects_non_tokens() {
        assert!(ClaudeToken::from_bytes(b"a\0b").is_none());
        assert!(ClaudeToken::from_bytes(b"a\x7f").is_none());
        assert!(ClaudeToken::from_bytes(&[b'a'; 4097]).is_none());
        assert!(ClaudeToken::from_bytes(&[b'a'; 4096]).is_some());
    }
}
