//! The docs name real things: every test that `docs/FEATURES.md`, `docs/THREAT-MODEL.md` and
//! `docs/RELIABILITY.md` name as `path::test_function` exists in that file, every FEATURES row
//! names one and one of the [`AREAS`], every area has a row; and the README's CLI text, settings
//! and request examples match the code.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The areas of `docs/FEATURES.md`'s first column, each of which must have a row.
const AREAS: [&str; 11] = [
    "token",
    "token file",
    "descriptor",
    "environment",
    "sandbox",
    "shim",
    "host",
    "disclosure",
    "docs",
    "commands",
    "embedding",
];

/// A self-signed CA certificate (P-256, valid to 2126) for `upstream_ca_file`.
const TEST_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBojCCAUegAwIBAgIUX+hFR5vbg7IubNyf40vL6U/LeiIwCgYIKoZIzj0EAwIw
JTEjMCEGA1UEAwwacmVsYXkgZmVhdHVyZXNfZG9jIHRlc3QgQ0EwIBcNMjYxMjA0
MDgyOTI2WhgPMjEyNjExMTAwODI5MjZaMCUxIzAhBgNVBAMMGnJlbGF5IGZlYXR1
cmVzX2RvYyB0ZXN0IENBMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEOO2mRH2j
rT6Uuo+285JjNSZ/Yg5y1DpZAUXhBREZtESH+zeBsfw4G9oDCgTpw32pXQgVZVtH
HD5FbUHkGCKlsaNTMFEwHQYDVR0OBBYEFK9VZ5vf5BwyUPbjemsYre96/3oAMB8G
A1UdIwQYMBaAFK9VZ5vf5BwyUPbjemsYre96/3oAMA8GA1UdEwEB/wQFMAMBAf8w
CgYIKoZIzj0EAwIDSQAwRgIhALqf9C8Ds2dn6FW4K4zQQGLJfzDs0Y56+0ii/bp9
XU9UAiEA4bE5HlWYuhDO0cOkYzcTH8GJdFKHij5dA4uKbc8me88=
-----END CERTIFICATE-----
";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

/// Every `` `some/path.rs::name` `` in `text`, in order.
fn test_refs(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for chunk in text.split('`').skip(1).step_by(2) {
        if let Some((path, name)) = chunk.split_once(".rs::") {
            out.push((format!("{path}.rs"), name.to_string()));
        }
    }
    out
}

/// True when `source` defines `fn name` (a word boundary after the name).
fn defines_fn(source: &str, name: &str) -> bool {
    let needle = format!("fn {name}");
    source.match_indices(&needle).any(|(at, _)| {
        let after = source[at + needle.len()..].chars().next();
        !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// The problems with `refs`: a missing file, a name that is not an identifier, a missing `fn`.
fn problems(doc: &str, refs: &[(String, String)]) -> Vec<String> {
    let mut bad = Vec::new();
    for (path, name) in refs {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            bad.push(format!("{doc}: {path}::{name}: not a function name"));
            continue;
        }
        match std::fs::read_to_string(root().join(path)) {
            Ok(src) if defines_fn(&src, name) => {}
            Ok(_) => bad.push(format!("{doc}: {path} has no `fn {name}`")),
            Err(e) => bad.push(format!("{doc}: {path}: {e}")),
        }
    }
    bad
}

#[test]
fn every_named_test_exists() {
    let features = read("docs/FEATURES.md");
    let mut bad = Vec::new();
    let mut areas = BTreeSet::new();
    let rows: Vec<&str> = features
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(2) // the header and its rule
        .collect();
    assert!(
        rows.len() > 20,
        "FEATURES.md has too few rows: {}",
        rows.len()
    );
    for row in &rows {
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 3, "a row has three cells: {row}");
        if AREAS.contains(&cells[0]) {
            areas.insert(cells[0]);
        } else {
            bad.push(format!("FEATURES.md: {:?} is not an area: {row}", cells[0]));
        }
        let refs = test_refs(cells[2]);
        if refs.is_empty() {
            bad.push(format!("FEATURES.md: a row names no test: {row}"));
        }
        bad.extend(problems("FEATURES.md", &refs));
    }
    for area in AREAS {
        if !areas.contains(area) {
            bad.push(format!("FEATURES.md: no row for the area {area:?}"));
        }
    }
    let threat = read("docs/THREAT-MODEL.md");
    let refs = test_refs(&threat);
    assert!(refs.len() > 10, "THREAT-MODEL.md names too few tests");
    bad.extend(problems("THREAT-MODEL.md", &refs));
    let reliability = read("docs/RELIABILITY.md");
    let refs = test_refs(&reliability);
    assert!(refs.len() >= 5, "RELIABILITY.md names too few tests");
    bad.extend(problems("RELIABILITY.md", &refs));
    assert!(bad.is_empty(), "\n{}", bad.join("\n"));
}

#[test]
fn the_checker_catches_a_wrong_row() {
    let src = "fn alpha() {}\nfn alpha_beta() {}\n";
    assert!(defines_fn(src, "alpha"));
    assert!(defines_fn(src, "alpha_beta"));
    assert!(!defines_fn(src, "alph"));
    assert!(!defines_fn(src, "beta"));
    let refs = test_refs("| token file | x | `relay-token/tests/it/read.rs::no_such_test_here` |");
    assert_eq!(refs.len(), 1);
    assert_eq!(problems("t", &refs).len(), 1);
    let refs = test_refs("`relay-token/tests/nope.rs::missing`");
    assert_eq!(problems("t", &refs).len(), 1);
}

/// The fenced block that follows the first line starting with `marker`, with that language.
fn block_after(text: &str, marker: &str, lang: &str) -> String {
    let at = text.find(marker).unwrap_or_else(|| panic!("no {marker:?}"));
    let open = format!("```{lang}\n");
    let start = text[at..]
        .find(&open)
        .unwrap_or_else(|| panic!("no ```{lang} block after {marker:?}"))
        + at
        + open.len();
    let end = text[start..].find("```").expect("a closed block") + start;
    text[start..end].to_string()
}

#[test]
fn readme_matches_the_binaries() {
    let readme = read("README.md");
    // The reference the README links: docs/relay-host.md.
    let reference = read("docs/relay-host.md");
    assert!(readme.contains("[docs/relay-host.md](docs/relay-host.md)"));
    // The CLI sections are the binaries' own help texts.
    let host_help = block_after(&reference, "## `relay-host`", "text");
    let out = std::process::Command::new(relay_tests::relay_host())
        .arg("--help")
        .output()
        .expect("run relay-host --help");
    assert_eq!(
        host_help.trim_end(),
        String::from_utf8_lossy(&out.stdout).trim_end()
    );
    let shim_help = block_after(&reference, "## `relay-shim`", "text");
    assert_eq!(shim_help.trim_end(), relay_shim::USAGE);

    // The settings examples load, and say the same thing where they overlap.
    let json =
        relay_host::settings::Settings::from_json(&block_after(&reference, "### Settings", "json"))
            .expect("README's JSON settings");
    let toml =
        relay_host::settings::Settings::from_toml(&block_after(&reference, "### Settings", "toml"))
            .expect("README's TOML settings");
    assert_eq!(json.claude_token_file, "~/.config/claude-ltt/token");
    assert_eq!(toml.claude_token_file, json.claude_token_file);
    assert_eq!(toml.templates[0], json.templates[0]);
    assert_eq!(
        toml.bwrap.as_deref(),
        Some(Path::new("/usr/bin/bwrap")),
        "the TOML example sets bwrap"
    );

    // The built-in templates are the code's, as `relay-host templates --json` prints them.
    assert_eq!(
        block_after(&reference, "### Built-in templates", "json"),
        relay_host::cli::templates_cmd::builtins_json(),
        "docs/relay-host.md's built-in templates: paste `relay-host templates --json` (on empty settings)"
    );

    // The request example is a valid request (by the code and by its schema); the answer
    // lines hold the answers' schema.
    let request = block_after(&reference, "### Requests", "json");
    let r = relay_host::launch::plan::request::Request::from_json(request.trim()).expect("request");
    r.validate(&json).expect("the example request validates");
    let request: serde_json::Value = serde_json::from_str(request.trim()).unwrap();
    relay_tests::schema::Schema::load("launch-request.schema.json").assert_valid(&request);
    let answers = relay_tests::schema::Schema::load("launch-answer.schema.json");
    for line in block_after(&reference, "### Answers", "json").lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("an answer line");
        answers.assert_valid(&v);
    }

    // The library example makes the calls the README describes.
    let lib = block_after(&readme, "## The library", "rust");
    for call in [
        "read_claude_token(",
        "TokenPipe::new(&token)",
        "drop(token);",
        "pipe.spawn(",
    ] {
        assert!(lib.contains(call), "README's library example lacks {call}");
    }
}

/// The reference's settings table is a true table (every line a row of two cells, no paragraph
/// inside) with a row for every key the settings take; the README's install section names the
/// route that works today first (a checkout's `cargo install --locked --path relay-host`, not
/// crates.io, where the crates are not published) and the release script, which exists.
#[test]
fn readme_settings_table_has_a_row_per_key_and_the_install_section_a_script() {
    let readme = read("README.md");
    let reference = read("docs/relay-host.md");
    let at = reference
        .find("\n| key | value |\n")
        .expect("the settings table")
        + 1;
    let rows: Vec<&str> = reference[at..]
        .lines()
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    let mut keys = Vec::new();
    for row in &rows {
        assert!(
            row.starts_with("| `") && row.ends_with(" |"),
            "not a row: {row:?}"
        );
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").collect();
        assert_eq!(cells.len(), 2, "a row of two cells: {row}");
        keys.push(cells[0].trim().trim_matches('`').to_string());
    }
    // `upstream_ca_file` is read when the settings are: a CA certificate in a file of its own.
    let ca_dir = tempfile::tempdir().unwrap();
    let ca = ca_dir.path().join("ca.pem");
    std::fs::write(&ca, TEST_CA).unwrap();
    let all = serde_json::json!({"claude_token_file": "~/t", "templates": [], "bwrap": "/b",
        "shim": "/s", "write_deny": ["~/x"], "trusted_projects": ["~/p"], "token_network": "host",
        "token_wildcards": true, "upstream_ca_file": ca});
    relay_host::settings::Settings::from_json(&all.to_string()).expect("every key");
    let want: Vec<String> = all.as_object().unwrap().keys().cloned().collect();
    let mut got = keys.clone();
    got.sort();
    assert_eq!(got, want, "one row per settings key");
    let install = &readme[readme.find("## Install").expect("an install section")..];
    let install = &install[..install[3..].find("\n## ").expect("a next section") + 3];
    assert!(install.contains("scripts/release"), "{install}");
    assert!(install.contains("--no-same-owner"), "{install}");
    let first = install.find("cargo install").expect("a cargo install line");
    assert!(
        install[first..].starts_with("cargo install --locked --path relay-host"),
        "the first route is a checkout's: {install}"
    );
    let script = root().join("scripts/release");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&script).unwrap().permissions());
    assert!(mode & 0o111 != 0, "scripts/release is executable");
}

/// The commands the README gives to copy: its first command is the first line of the "Two
/// commands" block (what `scripts/test` runs, as printed); every `cargo run -p PKG` picks one
/// binary of PKG (its only one, or its `default-run`); every `cargo install` line uses
/// `--locked`, and a `--path` one names a package of this workspace.
#[test]
fn readme_cargo_lines_work_as_written() {
    let readme = read("README.md");
    let first = block_after(&readme, "## Two commands", "sh");
    let first = first.lines().next().expect("a first command");
    assert!(
        first.starts_with("cargo run --release -p relay-host -- demo"),
        "{first}"
    );
    let meta = std::process::Command::new(std::env::var_os("CARGO").unwrap_or("cargo".into()))
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .current_dir(root())
        .output()
        .expect("run cargo metadata");
    assert!(
        meta.status.success(),
        "{}",
        String::from_utf8_lossy(&meta.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&meta.stdout).expect("cargo metadata");
    let package = |name: &str| {
        (meta["packages"].as_array().unwrap().iter())
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no package {name}"))
            .clone()
    };
    // Each command as a person copies it: a code line of a block, or a `...` span of the text,
    // of the README and of the reference it links.
    let docs = readme + &read("docs/relay-host.md");
    let mut commands: Vec<String> = docs.lines().map(str::to_string).collect();
    commands.extend(docs.split('`').skip(1).step_by(2).map(str::to_string));
    let mut seen = 0;
    for c in commands
        .iter()
        .map(|c| c.split(" #").next().unwrap().trim())
    {
        let words: Vec<&str> = c.split_whitespace().collect();
        let value = |flag: &str| words.windows(2).find(|w| w[0] == flag).map(|w| w[1]);
        if c.starts_with("cargo run") && !c.contains("--example") {
            seen += 1;
            let p = package(value("-p").unwrap_or_else(|| panic!("{c}: names no package")));
            let bins = (p["targets"].as_array().unwrap().iter())
                .filter(|t| t["kind"] == serde_json::json!(["bin"]))
                .count();
            assert!(
                bins == 1 || p["default_run"].is_string(),
                "{c}: {} has {bins} binaries and no default-run",
                p["name"]
            );
        } else if c.starts_with("cargo install") {
            seen += 1;
            assert!(words.contains(&"--locked"), "{c}: without --locked");
            if let Some(dir) = value("--path") {
                let manifest = root().join(dir).join("Cargo.toml");
                assert!(manifest.is_file(), "{c}: no {}", manifest.display());
            }
        }
    }
    assert!(seen >= 3, "the README's cargo lines: {seen}");
}

/// The README's first screen is the operator's: within its first 60 lines what it is, the
/// install route, the quick start and the two commands of a checkout; the whole README stays
/// under 250 lines, the reference living in docs/relay-host.md.
#[test]
fn readme_first_screen_is_the_operators() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(lines < 250, "README.md has {lines} lines");
    let first: String = readme.lines().take(60).collect::<Vec<_>>().join("\n");
    for part in [
        "## Install",
        "cargo install --locked --path relay-host",
        "sha256sum --check SHA256SUMS",
        "## Quick start",
        "relay-host token import",
        "relay-host status",
        "relay-host run --project ~/src/app",
        "relay-host run -- -p ",
        "relay-host ps",
        "## Two commands",
        "cargo run --release -p relay-host -- demo",
        "scripts/test ",
        "~/.config/claude-ltt/token",
        "~/.config/relay/",
        "~/.local/state/relay/",
    ] {
        assert!(first.contains(part), "the first screen lacks {part:?}");
    }
    let install = first.find("## Install").unwrap();
    assert!(install < first.find("## Two commands").unwrap());
}
