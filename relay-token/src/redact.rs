//! Log-line redaction: [`Redactor`].
//!
//! A redactor replaces `sk-ant-...` shapes, `Bearer ...` values and, when it was told about a
//! token, any run of bytes equal to that token. It never keeps the token itself: it keeps the
//! token's length and a keyed rolling hash of it, and compares windows of a line by hash and
//! then by a second hash, so a scan of this process's memory finds no copy.

use crate::token::ClaudeToken;

/// What a redacted run is replaced with.
pub const MASK: &str = "[REDACTED]";

/// Redacts secrets from text meant for a log line, stderr or a file.
///
/// ```
/// use relay_token::{redact::Redactor, ClaudeToken};
/// let token = ClaudeToken::from_bytes(b"acme-fake-token-1234").unwrap();
/// let r = Redactor::new(Some(&token));
/// assert_eq!(r.redact("got acme-fake-token-1234 ok"), "got [REDACTED] ok");
/// assert_eq!(r.redact("Authorization: Bearer abc.def"), "Authorization: Bearer [REDACTED]");
/// assert_eq!(r.redact("key sk-ant-api03-XyZ_9 end"), "key [REDACTED] end");
/// ```
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    known: Option<Known>,
}

#[derive(Debug, Clone, Copy)]
struct Known {
    len: usize,
    key: [u64; 2],
    hash: [u64; 2],
}

const MOD: u64 = (1 << 61) - 1;

fn mulmod(a: u64, b: u64) -> u64 {
    let p = (a as u128) * (b as u128);
    let lo = (p as u64) & MOD;
    let hi = (p >> 61) as u64;
    let s = lo + hi;
    if s >= MOD {
        s - MOD
    } else {
        s
    }
}

fn poly(bytes: &[u8], base: u64) -> u64 {
    bytes
        .iter()
        .fold(0u64, |h, &b| (mulmod(h, base) + b as u64 + 1) % MOD)
}

fn random_key() -> [u64; 2] {
    let mut buf = [0u8; 16];
    // SAFETY: `buf` is writable for its length; getrandom fills at most that many bytes.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n != buf.len() as isize {
        // Fall back on the clock and the pid: the key only needs to be unpredictable enough to
        // avoid accidental matches, not secret.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        buf[..8].copy_from_slice(&t.to_le_bytes());
        buf[8..].copy_from_slice(&(std::process::id() as u64 ^ t.rotate_left(17)).to_le_bytes());
    }
    let a = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes")) % (MOD - 257) + 257;
    let b = u64::from_le_bytes(buf[8..].try_into().expect("8 bytes")) % (MOD - 257) + 257;
    [a, b]
}

impl Redactor {
    /// A redactor that also knows `token` (by length and keyed hash only).
    ///
    /// ```
    /// let r = relay_token::redact::Redactor::new(None);
    /// assert_eq!(r.redact("plain"), "plain");
    /// ```
    pub fn new(token: Option<&ClaudeToken>) -> Redactor {
        let known = token.map(|t| {
            let key = random_key();
            let bytes = t.expose_bytes();
            Known {
                len: bytes.len(),
                key,
                hash: [poly(bytes, key[0]), poly(bytes, key[1])],
            }
        });
        Redactor { known }
    }

    /// `text` with every secret-shaped run replaced by [`MASK`].
    ///
    /// ```
    /// let r = relay_token::redact::Redactor::default();
    /// assert_eq!(r.redact("x-api-key: sk-ant-abc"), "x-api-key: [REDACTED]");
    /// ```
    pub fn redact(&self, text: &str) -> String {
        let text = self.redact_known(text);
        let text = redact_prefixed(&text, "sk-ant-", false);
        redact_prefixed(&text, "Bearer ", true)
    }

    fn redact_known(&self, text: &str) -> String {
        let Some(k) = self.known else {
            return text.to_string();
        };
        let bytes = text.as_bytes();
        if k.len == 0 || bytes.len() < k.len {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        let mut copied = 0;
        while i + k.len <= bytes.len() {
            let w = &bytes[i..i + k.len];
            if poly(w, k.key[0]) == k.hash[0]
                && poly(w, k.key[1]) == k.hash[1]
                && text.is_char_boundary(i)
                && text.is_char_boundary(i + k.len)
            {
                out.push_str(&text[copied..i]);
                out.push_str(MASK);
                i += k.len;
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
}
