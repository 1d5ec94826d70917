//! The packaged crate stands on its own: it ships a readme, names its repository and its
//! documentation, and its rustdoc links to what a reader of the package can reach.

use std::process::Command;

const DESIGN_URL: &str = "https://github.com/relay-token/relay-token/blob/main/docs/DESIGN.md";

/// The files `cargo package` puts in the crate.
fn packaged_files() -> Vec<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "package",
            "-p",
            "relay-token",
            "--list",
            "--allow-dirty",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo package --list");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_package_has_a_readme_a_repository_and_documentation() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
    let manifest = manifest.unwrap();
    for key in [
        "readme = \"README.md\"",
        "repository = \"https://github.com/relay-token/relay-token\"",
        "documentation = \"https://docs.rs/relay-token\"",
    ] {
        assert!(manifest.lines().any(|l| l == key), "Cargo.toml lacks {key}");
    }
    assert!(packaged_files().iter().any(|f| f == "README.md"));
}

#[test]
fn shipped_docs_name_design_md_only_by_its_url() {
    // The package holds no docs/DESIGN.md: every mention must be the link to the repository's.
    let files = packaged_files();
    assert!(!files.iter().any(|f| f.ends_with("DESIGN.md")));
    let docs = files.iter().filter(|f| !f.starts_with("tests/"));
    for f in docs.filter(|f| f.ends_with(".rs") || f.ends_with(".md")) {
        let text = std::fs::read_to_string(format!("{}/{f}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let bare = text
            .replace(&format!("[DESIGN.md]({DESIGN_URL})"), "")
            .replace(DESIGN_URL, "");
        assert!(
            !bare.contains("DESIGN.md"),
            "{f} names DESIGN.md other than by its URL"
        );
    }
}
