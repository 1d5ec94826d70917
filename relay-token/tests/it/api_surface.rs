//! The published library's surface: it neither prints nor decides a process's exit (no code line
//! of `relay-token/src`, doc examples aside, writes to stdout or stderr, exits, or returns an
//! exit code: those are the programs' business, in the `relay-host` and `relay-shim` crates),
//! and docs/DESIGN.md lists exactly what its crate root exports.

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

/// The names `src/lib.rs` exports at the crate root without a feature and without
/// `#[doc(hidden)]`: its `pub use` items.
fn documented_exports() -> std::collections::BTreeSet<String> {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let text = std::fs::read_to_string(lib).expect("lib.rs");
    let mut names = std::collections::BTreeSet::new();
    let mut attrs = String::new();
    let mut item = String::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with("//") {
            continue;
        }
        if item.is_empty() && line.starts_with("#[") {
            attrs.push_str(line);
            continue;
        }
        if item.is_empty() && !line.starts_with("pub use ") {
            attrs.clear();
            continue;
        }
        item.push_str(line);
        if !line.ends_with(';') {
            continue;
        }
        let hidden = attrs.contains("doc(hidden)") || attrs.contains("feature");
        let list = match (item.find('{'), item.rfind('}')) {
            (Some(a), Some(b)) => item[a + 1..b].to_string(),
            _ => item
                .rsplit("::")
                .next()
                .unwrap()
                .trim_end_matches(';')
                .to_string(),
        };
        if !hidden {
            names.extend(
                list.split(',')
                    .map(|n| n.trim().rsplit(' ').next().unwrap().to_string())
                    .filter(|n| !n.is_empty()),
            );
        }
        attrs.clear();
        item.clear();
    }
    names
}

/// The names docs/DESIGN.md lists as the core's documented exports.
fn design_lists() -> std::collections::BTreeSet<String> {
    let design = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/DESIGN.md");
    let text = std::fs::read_to_string(design).expect("docs/DESIGN.md");
    let start = text
        .find("Its documented exports, and no others")
        .expect("DESIGN.md lists the core's exports");
    let end = start + text[start..].find("\n- ").expect("the next rule");
    text[start..end]
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| !w.contains('/') && !w.contains('.'))
        .map(str::to_string)
        .collect()
}

#[test]
fn design_md_lists_exactly_the_crate_s_documented_exports() {
    let exported = documented_exports();
    assert!(
        exported.contains("TokenPipe"),
        "parsed lib.rs: {exported:?}"
    );
    let listed = design_lists();
    let unlisted: Vec<_> = exported.difference(&listed).collect();
    let gone: Vec<_> = listed.difference(&exported).collect();
    assert!(
        unlisted.is_empty() && gone.is_empty(),
        "docs/DESIGN.md's list of the core's exports differs from src/lib.rs: exported but not \
         listed {unlisted:?}, listed but not exported {gone:?}"
    );
}
