//! The token assertions: on disk (the logs among the files), in an output, on fd 5 (by hash).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::base::{World, VAR};
use crate::run::Out;
use crate::sha256_hex;

/// The token assertions.
impl World {
    /// No regular file under the world's root (state folder and its logs, the project, HOME,
    /// the config folder), the token file and `skip` aside, holds any token this world wrote
    /// or its random part; the scan is not blind: it sees the current token (and only it) in
    /// the token file, and it read a file under each of `must_see` (where the session wrote).
    /// Returns the files it read.
    pub fn assert_no_token_on_disk(&self, skip: &[PathBuf], must_see: &[&Path]) -> Vec<PathBuf> {
        let tokens = self.tokens();
        assert!(!tokens.is_empty(), "the world wrote no token");
        let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
        let scan = crate::scan_for_tokens_skipping(&self.root, &self.token_file, &tokens, skip);
        scan.assert_clean(tokens.len() - 1);
        for dir in must_see {
            assert!(
                scan.files.iter().any(|f| f.starts_with(dir)),
                "no file under {}: the scan proves nothing there",
                dir.display()
            );
        }
        scan.files
    }

    /// Neither stream of `out` holds a token this world wrote or its random part
    /// ([`crate::assert_no_token`]; `what` names the run).
    pub fn assert_no_token_in(&self, out: &Out, what: &str) {
        for t in self.tokens() {
            crate::assert_no_token(&format!("{what}'s stdout"), out.stdout.as_bytes(), &t);
            crate::assert_no_token(&format!("{what}'s stderr"), out.stderr.as_bytes(), &t);
        }
    }
}

/// Asserts a fake agent's start line got `token` on fd 5: the variable names 5, the hash and
/// length match, and the descriptors are exactly 0, 1, 2 and 5.
///
/// ```
/// let t = relay_tests::fake_token();
/// let rec = serde_json::json!({"token_fd_var": "5", "env": {relay_tests::world::VAR: "5"},
///     "token_sha256": relay_tests::sha256_hex(t.as_bytes()), "token_bytes": t.len(),
///     "fds": [0, 1, 2, 5]});
/// relay_tests::world::assert_got_token(&rec, &t);
/// ```
pub fn assert_got_token(rec: &Value, token: &str) {
    assert_eq!(rec["token_fd_var"], "5", "{rec}");
    assert_eq!(rec["env"][VAR], "5");
    assert_eq!(rec["token_sha256"], sha256_hex(token.as_bytes()), "{rec}");
    assert_eq!(rec["token_bytes"], token.len());
    assert_eq!(rec["fds"], json!([0, 1, 2, 5]), "{rec}");
}

/// Asserts a start line got a stand-in for `token` on fd 5 (stand-in mode): the descriptor and
/// its variable, a setup token's length at least, never the token's hash.
pub fn assert_got_stand_in(rec: &Value, token: &str) {
    crate::install::assert_fd5_as_shipped(rec, token);
    assert_eq!(rec["env"][VAR], "5");
    assert_eq!(rec["fds"], json!([0, 1, 2, 5]), "{rec}");
}

/// Asserts a start line got no token: no hash, no descriptor 5 (and the variable as `var`).
///
/// ```
/// let rec = serde_json::json!({"env": {}, "fds": [0, 1, 2]});
/// relay_tests::world::assert_no_token_fd(&rec, None);
/// ```
pub fn assert_no_token_fd(rec: &Value, var: Option<&str>) {
    match var {
        Some(v) => assert_eq!(rec["token_fd_var"], v, "{rec}"),
        None => {
            assert!(rec.get("token_fd_var").is_none(), "{rec}");
            assert!(rec["env"].get(VAR).is_none(), "{rec}");
        }
    }
    assert!(rec.get("token_sha256").is_none(), "{rec}");
    assert!(rec.get("token_bytes").is_none(), "{rec}");
    assert!(!rec["fds"].as_array().unwrap().contains(&json!(5)), "{rec}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An output of `stdout` and `stderr`.
    fn out(stdout: String, stderr: String) -> Out {
        Out {
            code: Some(0),
            signal: None,
            killed: false,
            stdout,
            stderr,
        }
    }

    /// Whether `f` panics (the assertion can fail).
    fn fails(f: impl FnOnce()) -> bool {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err()
    }

    #[test]
    fn an_output_holding_a_token_or_its_random_part_fails() {
        let w = World::new();
        let t = w.token.clone();
        let random = crate::token_random_part(&t).to_owned();
        w.assert_no_token_in(&out("clean".into(), "clean".into()), "a clean run");
        assert!(fails(
            || w.assert_no_token_in(&out(format!("<{t}>"), String::new()), "a")
        ));
        assert!(fails(
            || w.assert_no_token_in(&out(String::new(), random), "b")
        ));
        // A token written later is looked for too.
        let later = w.fresh_token();
        assert!(fails(
            || w.assert_no_token_in(&out(later, String::new()), "c")
        ));
    }

    #[test]
    fn a_copy_of_any_token_on_disk_fails_and_the_scan_must_see_where_told() {
        let w = World::new();
        let old = w.token.clone();
        let files = w.assert_no_token_on_disk(&[], &[]);
        assert!(
            files.contains(&w.token_file),
            "the scan read the token file"
        );
        let empty = w.root.join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert!(fails(|| {
            w.assert_no_token_on_disk(&[], &[&empty]);
        }));
        // The token replaced: the old one in a log fails the scan, unless skipped.
        w.replace_token();
        w.assert_no_token_on_disk(&[], &[]);
        let log = w.project.join("log");
        std::fs::write(&log, format!("seen {old}\n")).unwrap();
        assert!(fails(|| {
            w.assert_no_token_on_disk(&[], &[]);
        }));
        w.assert_no_token_on_disk(&[log], &[]);
    }
}
