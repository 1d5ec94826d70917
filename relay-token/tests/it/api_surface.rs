//! The published library neither prints nor decides a process's exit: no code line of
//! `relay-token/src` (doc examples aside) writes to stdout or stderr, exits, or returns an exit
//! code. Those are the programs' business, in the `relay-host` and `relay-shim` crates.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("src is readable") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            out.extend(sources(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

#[test]
fn no_library_code_prints_or_exits() {
    const BANNED: [&str; 7] = [
        "println!",
        "eprintln!",
        "print!(",
        "eprint!(",
        "process::exit",
        "ExitCode",
        "-> i32",
    ];
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = sources(&src);
    assert!(files.len() > 20, "found the sources: {files:?}");
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("source is UTF-8");
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for b in BANNED {
                if code.contains(b) {
                    found.push(format!("{}:{}: {b}", f.display(), n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "library code that prints or exits:\n{}",
        found.join("\n")
    );
}
