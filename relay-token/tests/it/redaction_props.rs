//! Property tests: no Debug, Display or redacted text ever holds a token's (or a token file's)
//! bytes.

use std::io::Write;

use proptest::prelude::*;
use relay_token::{read_claude_token, ClaudeToken};
use relay_token::{Redactor, MASK};

/// A token's fixed `Debug` form.
const REDACTED_DEBUG: &str = "ClaudeToken([REDACTED])";

/// A random token: the characters a bearer token holds (letters, digits and `-._~+/`), long
/// enough that finding it by chance is not a match.
fn token_bytes() -> impl Strategy<Value = Vec<u8>> {
    let byte = || {
        let bytes: Vec<u8> = (0x21u8..=0x7e)
            .filter(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(b))
            .collect();
        proptest::sample::select(bytes)
    };
    prop_oneof![
        8 => proptest::collection::vec(byte(), 12..=200),
        1 => proptest::collection::vec(byte(), 3000..=4096),
    ]
}

/// True when some 12-byte window of `file` that is text appears in `message`.
fn leaks(file: &[u8], message: &str) -> Option<String> {
    file.windows(12)
        .filter_map(|w| std::str::from_utf8(w).ok())
        .find(|w| message.contains(w))
        .map(str::to_string)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn token_debug_is_fixed(bytes in token_bytes()) {
        let token = ClaudeToken::from_bytes(&bytes).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        prop_assert_eq!(format!("{token:?}"), REDACTED_DEBUG);
        prop_assert_eq!(format!("{token:#?}"), REDACTED_DEBUG);
        let wrapped = format!("{:?}", Some(&token));
        prop_assert!(!wrapped.contains(&text));
    }

    #[test]
    fn token_read_from_a_file_debug_is_fixed(bytes in token_bytes(), pre in "[ \t\r\n]{0,3}", post in "[ \t\r\n]{0,3}") {
        prop_assume!(pre.len() + bytes.len() + post.len() <= 4096);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        let mut f = std::fs::File::create(&p).unwrap();
        f.write_all(pre.as_bytes()).unwrap();
        f.write_all(&bytes).unwrap();
        f.write_all(post.as_bytes()).unwrap();
        drop(f);
        let token = read_claude_token(&p).unwrap();
        prop_assert_eq!(token.expose_bytes(), &bytes[..]);
        prop_assert_eq!(format!("{token:?}"), REDACTED_DEBUG);
    }

    #[test]
    fn errors_never_hold_file_bytes(body in proptest::collection::vec(any::<u8>(), 0..5000)) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        std::fs::write(&p, &body).unwrap();
        if let Err(e) = read_claude_token(&p) {
            for text in [e.to_string(), format!("{e:?}"), format!("{e:#?}")] {
                prop_assert!(leaks(&body, &text).is_none(), "{:?} leaked in {}", leaks(&body, &text), text);
            }
        }
    }

    #[test]
    fn errors_never_hold_a_planted_secret(
        secret in "[A-Za-z0-9_-]{16,64}",
        pre in proptest::collection::vec(any::<u8>(), 0..64),
        inner in prop_oneof![Just(" "), Just("\0"), Just("\t"), Just("\x7f"), Just("\u{e9}")],
        big in any::<bool>(),
    ) {
        // A file that is never a token: a byte inside that is not printable ASCII, or too big.
        let mut body = pre.clone();
        body.extend_from_slice(b"x");
        body.extend_from_slice(secret.as_bytes());
        body.extend_from_slice(inner.as_bytes());
        body.extend_from_slice(secret.as_bytes());
        if big {
            body.resize(4097 + pre.len(), b'q');
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        std::fs::write(&p, &body).unwrap();
        let e = read_claude_token(&p).unwrap_err();
        for text in [e.to_string(), format!("{e:?}")] {
            prop_assert!(!text.contains(&secret), "{}", text);
        }
    }

    #[test]
    fn redactor_removes_the_token_from_text_around_it(
        bytes in token_bytes(),
        pre in any::<String>(),
        mid in any::<String>(),
        post in any::<String>(),
    ) {
        let token = ClaudeToken::from_bytes(&bytes).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        let r = Redactor::new(Some(&token));
        let line = format!("{pre}{text}{mid}{text}{post}");
        let out = r.redact(&line);
        prop_assert!(!out.contains(&text), "token survived in {:?}", out);
        prop_assert!(out.contains(MASK));
        let debug = format!("{r:?}");
        prop_assert!(!debug.contains(&text));
        // Text without the token keeps what is not secret-shaped.
        if !pre.contains("sk-ant-") && !pre.contains("Bearer ") && !pre.contains(&text) {
            prop_assert_eq!(r.redact(&pre), pre.clone());
        }
    }
}
