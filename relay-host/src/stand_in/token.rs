//! The stand-in itself: `sk-ant-oat01-` and fresh random of the real token's length, in the
//! alphabet of setup tokens (base64url: `A-Z a-z 0-9 - _`), so relay's own token check and
//! Claude Code take it as a setup token.

use std::io;

use relay_token::ClaudeToken;
use zeroize::Zeroizing;

/// The prefix of a setup token (`claude setup-token`).
const PREFIX: &[u8] = b"sk-ant-oat01-";

/// The fewest random characters a stand-in has (192 bits), whatever the real token's length.
const MIN_RANDOM: usize = 32;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A fresh stand-in for `real`: `sk-ant-oat01-` and as many random base64url characters as the
/// real token has after its prefix (at least 32), never equal to `real`.
pub(crate) fn stand_in_for(real: &ClaudeToken) -> io::Result<ClaudeToken> {
    let r = real.expose_bytes();
    let rest = r.strip_prefix(PREFIX).unwrap_or(r).len().max(MIN_RANDOM);
    loop {
        let mut random = Zeroizing::new(vec![0u8; rest]);
        relay_token::sys::random_bytes(&mut random)?;
        let mut text = Zeroizing::new(Vec::with_capacity(PREFIX.len() + rest));
        text.extend_from_slice(PREFIX);
        // 64 characters: the low six bits of each byte pick one, uniformly.
        text.extend(random.iter().map(|b| ALPHABET[usize::from(b & 63)]));
        if text.as_slice() != r {
            return ClaudeToken::from_bytes(&text)
                .ok_or_else(|| io::Error::other("a stand-in that is not a token"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stand_in_is_fresh_and_shaped_like_the_real_token() {
        let real = ClaudeToken::from_bytes(b"sk-ant-oat01-short").unwrap();
        let a = stand_in_for(&real).unwrap();
        let b = stand_in_for(&real).unwrap();
        assert_ne!(a.expose_bytes(), b.expose_bytes(), "fresh per call");
        assert_eq!(
            a.len(),
            PREFIX.len() + MIN_RANDOM,
            "never shorter than 32 random"
        );
        let rest = &a.expose_bytes()[PREFIX.len()..];
        assert!(rest.iter().all(|c| ALPHABET.contains(c)), "base64url only");
        let long = ClaudeToken::from_bytes(&[b'x'; 200]).unwrap();
        assert_eq!(stand_in_for(&long).unwrap().len(), PREFIX.len() + 200);
    }

    /// `stand_in_for`'s example.
    #[test]
    fn stand_in_for_doc_example() {
        let result = (|| {
            use relay_token::ClaudeToken;
            let real = ClaudeToken::from_bytes(
                b"sk-ant-oat01-0123456789abcdefghijklmnopqrstuvwxyzABCD-_AA",
            )
            .unwrap();
            let s = crate::stand_in::stand_in_for(&real)?;
            assert_eq!(s.len(), real.len());
            assert!(s.expose_bytes().starts_with(b"sk-ant-oat01-"));
            assert_ne!(s.expose_bytes(), real.expose_bytes());
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }
}
