//! Acceptance tests for the `claude_token_file` value → path rules.

use std::path::{Path, PathBuf};

use relay_token::{claude_token_path, claude_token_path_in, TokenPathError, TokenPathReason};

/// The settings key every error names.
const SETTING_KEY: &str = "claude_token_file";

const HOME: &str = "/home/op";

fn ok(value: &str) -> Option<PathBuf> {
    claude_token_path_in(value, Some(Path::new(HOME)))
        .unwrap_or_else(|e| panic!("{value:?} must be accepted: {e}"))
}

fn err(value: &str) -> TokenPathError {
    claude_token_path_in(value, Some(Path::new(HOME))).expect_err(value)
}

#[test]
fn empty_means_no_token() {
    assert_eq!(ok(""), None);
    assert_eq!(claude_token_path("").unwrap(), None);
}

#[test]
fn tilde_slash_is_home_based() {
    assert_eq!(ok("~/x"), Some(PathBuf::from("/home/op/x")));
    assert_eq!(
        ok("~/.config/claude-ltt/token"),
        Some(PathBuf::from("/home/op/.config/claude-ltt/token"))
    );
    // Cleaned after expansion.
    assert_eq!(ok("~/a/./b//../c"), Some(PathBuf::from("/home/op/a/c")));
    // Against the real $HOME through the public entry point.
    let home = std::env::var_os("HOME").expect("HOME set for the tests");
    assert_eq!(
        claude_token_path("~/x").unwrap(),
        claude_token_path_in("~/x", Some(Path::new(&home))).unwrap()
    );
}

#[test]
fn refused_values_name_the_key_and_the_value() {
    let cases: &[(&str, TokenPathReason, &str)] = &[
        (
            "~",
            TokenPathReason::NotAbsolute,
            r#"claude_token_file "~": must be absolute or start with ~/"#,
        ),
        (
            "~root/x",
            TokenPathReason::OtherUsersHome,
            r#"claude_token_file "~root/x": ~user/ is not supported: must be absolute or start with ~/"#,
        ),
        (
            "x",
            TokenPathReason::NotAbsolute,
            r#"claude_token_file "x": must be absolute or start with ~/"#,
        ),
        (
            "./x",
            TokenPathReason::NotAbsolute,
            r#"claude_token_file "./x": must be absolute or start with ~/"#,
        ),
        (
            "../x",
            TokenPathReason::NotAbsolute,
            r#"claude_token_file "../x": must be absolute or start with ~/"#,
        ),
        (
            "a\0b",
            TokenPathReason::NulByte,
            r#"claude_token_file "a\0b": holds a NUL byte"#,
        ),
        (
            "/a\0b",
            TokenPathReason::NulByte,
            r#"claude_token_file "/a\0b": holds a NUL byte"#,
        ),
    ];
    for &(value, reason, msg) in cases {
        let e = err(value);
        assert_eq!(e.value, value);
        assert_eq!(e.reason, reason, "{value:?}");
        assert_eq!(e.to_string(), msg);
        assert!(e.to_string().starts_with(SETTING_KEY));
        // The public entry point says the same, whatever $HOME is.
        assert_eq!(claude_token_path(value).unwrap_err(), e);
    }
}

#[test]
fn tilde_without_a_home_is_refused() {
    for home in [None, Some(Path::new("relative/home"))] {
        let e = claude_token_path_in("~/x", home).unwrap_err();
        assert_eq!(e.reason, TokenPathReason::NoHome);
        assert_eq!(
            e.to_string(),
            r#"claude_token_file "~/x": starts with ~/ but HOME is not set to an absolute path"#
        );
    }
    // An absolute value needs no home.
    assert_eq!(
        claude_token_path_in("/t", None).unwrap(),
        Some(PathBuf::from("/t"))
    );
}

#[test]
fn absolute_paths_are_lexically_cleaned() {
    for (value, want) in [
        ("/a/../b//c", "/b/c"),
        ("/a/./b/", "/a/b"),
        ("//a//b", "/a/b"),
        ("/..", "/"),
        ("/../../etc/x", "/etc/x"),
        ("/a/b/../../..", "/"),
    ] {
        assert_eq!(ok(value), Some(PathBuf::from(want)), "{value}");
    }
}
