//! Log-line redaction: [`Redactor`].
//!
//! A redactor replaces `sk-ant-...` shapes, `Bearer ...` values and, when it was told about a
//! token, any run of bytes equal to that token. It never keeps the token's bytes: it keeps them
//! masked (each byte XORed with a random, never-zero pad byte), so no byte of the copy equals the
//! token's byte at that place and a scan of this process's memory for the token finds nothing.
//! Both halves are wiped on drop. This hides the bytes from a scan; it is not encryption against
//! someone who reads the whole memory, who can unmask them. No hashing is involved: a window of
//! a line matches when each byte, XORed with the pad, equals the masked byte.

use zeroize::Zeroizing;

use crate::token::ClaudeToken;

/// What a redacted run is replaced with.
pub const MASK: &str = "[REDACTED]";

/// Redacts secrets from text meant for a log line, stderr or a file.
///
/// ```
/// use relay_token::{ClaudeToken, Redactor};
/// let token = ClaudeToken::from_bytes(b"acme-fake-token-1234").unwrap();
/// let r = Redactor::new(Some(&token));
/// assert_eq!(r.redact("got acme-fake-token-1234 ok"), "got [REDACTED] ok");
/// assert_eq!(r.redact("Authorization: Bearer abc.def"), "Authorization: Bearer [REDACTED]");
/// assert_eq!(r.redact("key sk-ant-api03-XyZ_9 end"), "key [REDACTED] end");
/// ```
#[derive(Clone, Default)]
pub struct Redactor {
    known: Option<Known>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("knows_token", &self.known.is_some())
            .finish()
    }
}

/// A known token, masked: `masked[i] == token[i] ^ pad[i]`, every `pad[i]` non-zero.
#[derive(Clone)]
struct Known {
    pad: Zeroizing<Box<[u8]>>,
    masked: Zeroizing<Box<[u8]>>,
}

impl Known {
    fn new(token: &[u8]) -> Known {
        let mut pad = Zeroizing::new(vec![0u8; token.len()].into_boxed_slice());
        if crate::sys::random_bytes(&mut pad).is_err() {
            // No random source: a pad from the clock still keeps the bytes out of a scan (the
            // never-zero rule below is what guarantees that), only less unpredictably.
            let mut x = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x9e37_79b9_7f4a_7c15)
                | 1;
            for b in pad.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
        }
        for b in pad.iter_mut() {
            if *b == 0 {
                *b = 0xa5;
            }
        }
        let masked = Zeroizing::new(token.iter().zip(pad.iter()).map(|(t, p)| t ^ p).collect());
        Known { pad, masked }
    }

    fn matches(&self, window: &[u8]) -> bool {
        window.len() == self.masked.len()
            && window
                .iter()
                .zip(self.pad.iter().zip(self.masked.iter()))
                .all(|(w, (p, m))| w ^ p == *m)
    }
}

impl Redactor {
    /// A redactor that also knows `token` (held masked, never as its bytes).
    ///
    /// ```
    /// let r = relay_token::Redactor::new(None);
    /// assert_eq!(r.redact("plain"), "plain");
    /// ```
    pub fn new(token: Option<&ClaudeToken>) -> Redactor {
        Redactor {
            known: token.map(|t| Known::new(t.expose_bytes())),
        }
    }

    /// `text` with every secret-shaped run replaced by [`MASK`].
    ///
    /// ```
    /// let r = relay_token::Redactor::default();
    /// assert_eq!(r.redact("x-api-key: sk-ant-abc"), "x-api-key: [REDACTED]");
    /// ```
    pub fn redact(&self, text: &str) -> String {
        let text = self.redact_known(text);
        let text = redact_prefixed(&text, "sk-ant-", false);
        redact_prefixed(&text, "Bearer ", true)
    }

    fn redact_known(&self, text: &str) -> String {
        let Some(k) = &self.known else {
            return text.to_string();
        };
        let len = k.masked.len();
        let bytes = text.as_bytes();
        if len == 0 || bytes.len() < len {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        let mut copied = 0;
        while i + len <= bytes.len() {
            if k.matches(&bytes[i..i + len])
                && text.is_char_boundary(i)
                && text.is_char_boundary(i + len)
            {
                out.push_str(&text[copied..i]);
                out.push_str(MASK);
                i += len;
                copied = i;
            } else {
                i += 1;
            }
        }
        out.push_str(&text[copied..]);
        out
    }
}

/// Replaces `prefix` plus the token-shaped run after it. With `keep_prefix` the prefix stays
/// (`Bearer [REDACTED]`).
fn redact_prefixed(text: &str, prefix: &str, keep_prefix: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find(prefix) {
        let after = &rest[pos + prefix.len()..];
        let run = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || "-_.~+/=".contains(c)))
            .unwrap_or(after.len());
        if run == 0 {
            out.push_str(&rest[..pos + prefix.len()]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..pos]);
        if keep_prefix {
            out.push_str(prefix);
        }
        out.push_str(MASK);
        rest = &after[run..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_every_occurrence() {
        let t = ClaudeToken::from_bytes(b"acme-fake-token-00ff").unwrap();
        let r = Redactor::new(Some(&t));
        assert_eq!(
            r.redact("acme-fake-token-00ff|acme-fake-token-00ff"),
            "[REDACTED]|[REDACTED]"
        );
        assert_eq!(r.redact("acme-fake-token-00fe"), "acme-fake-token-00fe");
        assert_eq!(r.redact("é acme-fake-token-00ff é"), "é [REDACTED] é");
    }

    #[test]
    fn the_mask_differs_from_the_token_at_every_byte() {
        let t = ClaudeToken::from_bytes(&[b'a'; 4096]).unwrap();
        let k = Known::new(t.expose_bytes());
        assert!(k.masked.iter().all(|&m| m != b'a'));
        assert!(k.matches(t.expose_bytes()));
        assert!(!k.matches(&[b'a'; 4095]));
    }
}
