//! Bad input for the fault battery: a small seeded generator ([`Rng`], xorshift64*, so every run
//! makes the same cases) and the mutations it applies to valid documents: random bytes, flipped,
//! inserted, deleted and repeated spans, NUL bytes, deep nesting, huge strings, duplicated keys.
//! Offline and without a dependency; a failing case is reproduced by its seed and index.

/// A seeded pseudo-random generator (xorshift64*). Not for secrets.
///
/// ```
/// let mut a = relay_tests::mutate::Rng::new(7);
/// let mut b = relay_tests::mutate::Rng::new(7);
/// assert_eq!(a.next(), b.next());
/// assert!(a.below(10) < 10);
/// ```
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is replaced by a fixed odd number).
    ///
    /// ```
    /// let _ = relay_tests::mutate::Rng::new(0).next();
    /// ```
    pub fn new(seed: u64) -> Rng {
        Rng(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    /// The next 64 bits.
    ///
    /// ```
    /// assert_ne!(relay_tests::mutate::Rng::new(1).next(), 0);
    /// ```
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n` > 0).
    ///
    /// ```
    /// assert_eq!(relay_tests::mutate::Rng::new(3).below(1), 0);
    /// ```
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// One of `items`.
    ///
    /// ```
    /// assert_eq!(*relay_tests::mutate::Rng::new(3).pick(&[5]), 5);
    /// ```
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// `n` random bytes.
    ///
    /// ```
    /// assert_eq!(relay_tests::mutate::Rng::new(3).bytes(4).len(), 4);
    /// ```
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// A name of `len` lower-case letters and digits.
    ///
    /// ```
    /// let w = relay_tests::mutate::Rng::new(3).word(6);
    /// assert!(w.len() == 6 && w.bytes().all(|b| b.is_ascii_alphanumeric()));
    /// ```
    pub fn word(&mut self, len: usize) -> String {
        const ABC: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        (0..len).map(|_| *self.pick(ABC) as char).collect()
    }
}

/// Pieces of JSON and TOML syntax a mutation splices in.
const PIECES: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ",",
    ":",
    "=",
    "\\",
    "\\u0000",
    "\\ud800",
    "\0",
    "\n",
    "null",
    "true",
    "1e999",
    "-0",
    "18446744073709551616",
    "\"\"",
    "[[",
    "]]",
    "#",
    "'",
    "\u{fffd}",
    "\u{202e}",
    "\"kind\"",
    "\"claude\"",
    "\"terminal\"",
    "\"project\"",
    "\"template\"",
    "\"sandbox\"",
    "\"env\"",
    "\"templates\"",
    "\"command\"",
    "\"id\"",
];

/// One mutation of `doc`: a byte flipped, a piece or random bytes inserted, a span deleted or
/// repeated, the document cut short, or a NUL put in.
///
/// ```
/// use relay_tests::mutate::{mutate, Rng};
/// let doc = br#"{"kind": "claude"}"#;
/// // The same seed, the same mutation.
/// assert_eq!(mutate(&mut Rng::new(5), doc), mutate(&mut Rng::new(5), doc));
/// ```
pub fn mutate(rng: &mut Rng, doc: &[u8]) -> Vec<u8> {
    let mut d = doc.to_vec();
    let at = rng.below(d.len() + 1);
    match rng.below(7) {
        0 if !d.is_empty() => {
            let i = at.min(d.len() - 1);
            d[i] ^= 1 << rng.below(8);
        }
        1 => {
            let p = rng.pick(PIECES).as_bytes().to_vec();
            d.splice(at..at, p);
        }
        2 => {
            let n = rng.below(8) + 1;
            let b = rng.bytes(n);
            d.splice(at..at, b);
        }
        3 => {
            let end = (at + rng.below(16) + 1).min(d.len());
            d.drain(at..end);
        }
        4 => {
            let end = (at + rng.below(32) + 1).min(d.len());
            let span = d[at..end].to_vec();
            let times = rng.below(4) + 1;
            for _ in 0..times {
                d.splice(end..end, span.iter().copied());
            }
        }
        5 => d.truncate(at),
        _ => d.insert(at, 0),
    }
    d
}

/// `depth` nested arrays (`[[[...]]]`), as JSON (and TOML after `key = `).
///
/// ```
/// assert_eq!(relay_tests::mutate::nested(2), "[[]]");
/// ```
pub fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// A JSON object with the first `"key": value` member of `doc` (an object) written twice.
///
/// ```
/// let d = relay_tests::mutate::duplicate_first_key(r#"{"a": 1, "b": 2}"#);
/// assert_eq!(d, r#"{"a":1,"a":1,"b":2}"#);
/// ```
pub fn duplicate_first_key(doc: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(doc).expect("a JSON object");
    let map = v.as_object().expect("a JSON object");
    let mut members: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{}:{v}", serde_json::Value::from(k.as_str())))
        .collect();
    if let Some(first) = members.first().cloned() {
        members.insert(0, first);
    }
    format!("{{{}}}", members.join(","))
}

/// `doc` with its first `"claude"` or `"/bin/sh"` string replaced by `len` letters (or the
/// letters appended, when it has neither).
///
/// ```
/// assert_eq!(relay_tests::mutate::huge_string(r#"["/bin/sh"]"#, 2), r#"["aa"]"#);
/// ```
pub fn huge_string(doc: &str, len: usize) -> String {
    let big = format!("\"{}\"", "a".repeat(len));
    for s in ["\"claude\"", "\"/bin/sh\""] {
        if doc.contains(s) {
            return doc.replacen(s, &big, 1);
        }
    }
    format!("{doc}{big}")
}

/// The cases one run tries on `seeds`: `n` documents, each a seed mutated one to eight times,
/// and among them random bytes, deep nesting (up to 100,000 levels), a huge string (up to
/// 2 MiB), NUL bytes and duplicated keys.
///
/// ```
/// let cases = relay_tests::mutate::cases(1, &[r#"{"kind": "claude"}"#], 20);
/// assert_eq!(cases.len(), 20);
/// ```
pub fn cases(seed: u64, seeds: &[&str], n: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|i| {
            let base = *rng.pick(seeds);
            match i % 10 {
                0 => {
                    let len = rng.below(512);
                    rng.bytes(len)
                }
                1 => {
                    let depth = *rng.pick(&[64, 127, 128, 129, 1000, 100_000]);
                    format!("{{\"kind\": {}}}", nested(depth)).into_bytes()
                }
                2 => {
                    let len = *rng.pick(&[4096, 65_536, 1 << 20, 2 << 20]);
                    huge_string(base, len).into_bytes()
                }
                3 if base.trim_start().starts_with('{') => duplicate_first_key(base).into_bytes(),
                _ => {
                    let mut d = base.as_bytes().to_vec();
                    for _ in 0..rng.below(8) + 1 {
                        d = mutate(&mut rng, &d);
                    }
                    d
                }
            }
        })
        .collect()
}
