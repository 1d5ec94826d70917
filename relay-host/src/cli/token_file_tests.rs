use super::*;

fn picked(input: &str) -> Vec<u8> {
    pick_token(input.as_bytes())
        .map(|t| t.expose_bytes().to_vec())
        .unwrap_or_default()
}

#[test]
fn picks_across_colours_and_wrapping() {
    let want = b"sk-ant-oat01-AAAA_bbbb-CCCCdddd".to_vec();
    assert_eq!(picked("sk-ant-oat01-AAAA_bbbb-CCCCdddd"), want);
    assert_eq!(picked("  sk-ant-oat01-AAAA_bbbb-CCCCdddd  \n"), want);
    assert_eq!(
        picked("\x1b[33msk-ant-oat01-AAAA_bb\x1b[39m\r\n\x1b[33mbb-CCCCdddd\x1b[39m\r\n\r\nStore it.\n"),
        want
    );
    // A line of words after the token is not part of it.
    assert_eq!(
        picked("sk-ant-oat01-AAAA_bbbb-CCCCdddd\nStore this token\n"),
        want
    );
    // `export CLAUDE_CODE_OAUTH_TOKEN=<token>` is no second token.
    assert_eq!(
        picked("sk-ant-oat01-AAAA_bbbb-CCCCdddd\nexport CLAUDE_CODE_OAUTH_TOKEN=<token>\n"),
        want
    );
}

#[test]
fn counts_what_it_refuses() {
    let n = |input: &str| match pick_token(input.as_bytes()) {
        Err(ImportError::Several(n)) => n,
        Err(ImportError::NoToken { other_keys }) => 100 + other_keys,
        _ => 0,
    };
    assert_eq!(n("sk-ant-oat01-aaaa\nsk-ant-oat01-bbbb\n"), 2);
    assert_eq!(
        n("sk-ant-oat01-aaaa sk-ant-oat01-aaaa"),
        0,
        "the same token twice"
    );
    assert_eq!(n("nothing here"), 100);
    assert_eq!(n("sk-ant-oat01-"), 100, "a prefix alone");
    assert_eq!(n("sk-ant-api03-xyz"), 101);
    assert_eq!(n("xsk-ant-oat01-aaaa"), 100, "inside a longer word");
}

#[test]
fn edits_keep_everything_else() {
    assert_eq!(edit_json("{}", "/t"), "{\"claude_token_file\": \"/t\"}");
    assert_eq!(
        edit_json("{\"a\":1}", "/t"),
        "{\"claude_token_file\": \"/t\", \"a\":1}"
    );
    assert_eq!(
        edit_json("{\n}\n", "/t"),
        "{\n  \"claude_token_file\": \"/t\"\n}\n"
    );
    assert_eq!(edit_toml("", "/t"), "claude_token_file = \"/t\"\n");
    // A key of the same name inside a table is not the top-level one.
    assert_eq!(
        edit_toml("[x]\nclaude_token_file = \"\"\n", "/t"),
        "claude_token_file = \"/t\"\n[x]\nclaude_token_file = \"\"\n"
    );
}

/// `ImportError`'s example.
#[test]
fn import_error_doc_example() {
    use crate::cli::token_file::ImportError;
    assert_eq!(
        ImportError::Several(2).to_string(),
        "the input holds 2 different sk-ant-oat01- tokens; paste one"
    );
}

/// `exit_code`'s example.
#[test]
fn exit_code_doc_example() {
    use crate::cli::token_file::ImportError;
    use relay_shim::exit::ExitCode;
    assert_eq!(ImportError::TooLarge.exit_code(), ExitCode::Usage);
}

/// `echoes_nothing`'s example.
#[test]
fn echoes_nothing_doc_example() {
    use crate::cli::token_file::ImportError;
    assert!(ImportError::Several(2).echoes_nothing());
}

/// `pick_token`'s example.
#[test]
fn pick_token_doc_example() {
    use crate::cli::token_file::pick_token;
    let out = b"Your OAuth token (valid for 1 year):\n\nsk-ant-oat01-abc_DEF-123\n\nStore this token securely.\n";
    assert_eq!(
        pick_token(out).unwrap().len(),
        "sk-ant-oat01-abc_DEF-123".len()
    );
    assert!(pick_token(b"hello").is_err());
}

/// `Imported`'s example.
#[test]
fn imported_doc_example() {
    let done = crate::cli::token_file::Imported {
        path: "/t".into(),
        replaced: false,
        settings_updated: None,
    };
    assert!(!done.replaced);
}

/// `write_atomically`'s example.
#[test]
fn write_atomically_doc_example() {
    let result = (|| {
        let dir = tempfile::tempdir()?;
        let p = dir.path().join("f");
        crate::cli::token_file::write_atomically(&p, b"x\n", 0o600, false)?;
        assert_eq!(std::fs::read(&p)?, b"x\n");
        Ok::<(), std::io::Error>(())
    })();
    result.unwrap();
}

/// `check`'s example.
#[test]
fn check_doc_example() {
    let report = crate::cli::token_file::check("/nonexistent/token".as_ref());
    assert_eq!(report["ok"], false);
    assert!(report["hint"]
        .as_str()
        .unwrap()
        .contains("claude setup-token"));
}

/// `ConfiguredPathError`'s example.
#[test]
fn configured_path_error_doc_example() {
    use crate::cli::token_file::ConfiguredPathError;
    let e = relay_token::claude_token_path_in("relative/token", None).unwrap_err();
    assert_eq!(
        ConfiguredPathError::TokenPath(e.clone()).to_string(),
        e.to_string()
    );
}
