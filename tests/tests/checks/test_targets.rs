//! `scripts/test` runs the harnesses of the libraries and of the test targets only
//! (`cargo test --lib --test ...`): the programs (relay-host's, relay-shim's, the test tools) say
//! `test = false` in their manifests, as examples are by default, and none holds a test, so no
//! harness of theirs starts only to run nothing (20 of a run's 37 did). A test written in one of them would never run: this check refuses it.

use std::path::{Path, PathBuf};

/// Every file of a program or example target of the workspace, and what it holds of a test.
fn tests_in_programs(root: &Path) -> Vec<String> {
    let mut files: Vec<PathBuf> = vec![
        root.join("relay-host/src/main.rs"),
        root.join("relay-shim/src/main.rs"),
    ];
    // The programs' folders whole; the examples' files at the top (the examples crate's
    // `tests/` is a test target).
    for (dir, deep) in [
        ("relay-host/src/bin", true),
        ("tests/src/bin", true),
        ("examples", false),
        ("relay-token/examples", true),
    ] {
        collect_rs(&root.join(dir), deep, &mut files);
    }
    let mut found = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let l = line.trim();
            if l.starts_with("#[test]") || l.starts_with("#[cfg(test)]") {
                let rel = f.strip_prefix(root).unwrap_or(&f).display().to_string();
                found.push(format!("{rel}:{}: {l}", n + 1));
            }
        }
    }
    found
}

fn collect_rs(dir: &Path, deep: bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if deep {
                collect_rs(&p, deep, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn no_program_or_example_holds_a_test() {
    let found = tests_in_programs(&root());
    assert!(
        found.is_empty(),
        "tests in a target scripts/test does not run (move them to the crate's library or \
         tests/):\n{}",
        found.join("\n")
    );
}

#[test]
fn scripts_test_runs_no_program_or_example_harness() {
    let script = std::fs::read_to_string(root().join("scripts/test")).unwrap();
    let line = script
        .lines()
        .find(|l| l.contains("cargo test --workspace --no-fail-fast --lib"))
        .expect("the main test step");
    for flag in ["--bins", "--examples", "--benches", "--all-targets"] {
        assert!(
            !line.split_whitespace().any(|w| w == flag),
            "{flag} in {line:?}"
        );
    }
    for manifest in ["relay-host", "relay-shim", "tests"] {
        let text = std::fs::read_to_string(root().join(manifest).join("Cargo.toml")).unwrap();
        let bins = text.matches("[[bin]]").count();
        let off = text.matches("test = false").count();
        assert!(
            bins > 0 && off >= bins,
            "{manifest}: {bins} programs, {off} say test = false"
        );
    }
}

/// The check sees a test planted in a program.
#[test]
fn the_check_finds_a_test_in_a_program() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("tests/src/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(
        bin.join("tool.rs"),
        "fn main() {}\n#[cfg(test)]\nmod t {}\n",
    )
    .unwrap();
    assert_eq!(
        tests_in_programs(dir.path()),
        ["tests/src/bin/tool.rs:2: #[cfg(test)]"]
    );
}
