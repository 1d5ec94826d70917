//! No import circle between sibling modules, in every crate of the workspace: each file of each
//! source folder names the sibling modules it uses (`super::NAME`, `super::{A, B}`, and at a
//! crate's root `crate::NAME`, outside comments), and the graph they make has no cycle. A crate
//! root (`lib.rs`, `main.rs`) and a folder's `mod.rs` only declare and re-export: they are not
//! nodes. Run: `cargo test -p relay-tests --test module_graph`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The modules `text` (one file of a folder) uses, among `mods` (its siblings); `root` when the
/// folder is a crate's `src`, where `crate::NAME` is a sibling too.
fn uses(text: &str, mods: &BTreeSet<String>, root: bool) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    let prefixes: &[&str] = if root {
        &["super::", "crate::"]
    } else {
        &["super::"]
    };
    for prefix in prefixes {
        for (i, _) in code.match_indices(prefix) {
            let rest = &code[i + prefix.len()..];
            let names: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => group[..group.find('}').unwrap_or(group.len())]
                    .split(',')
                    .map(|n| n.trim().split("::").next().unwrap_or(""))
                    .collect(),
                None => vec![rest
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or("")],
            };
            out.extend(
                names
                    .into_iter()
                    .filter(|n| mods.contains(*n))
                    .map(String::from),
            );
        }
    }
    out
}

/// The first cycle found from `start`, as the path that closes it.
fn cycle_from(
    graph: &BTreeMap<String, BTreeSet<String>>,
    path: &mut Vec<String>,
) -> Option<Vec<String>> {
    let last = path.last().cloned()?;
    for next in &graph[&last] {
        if let Some(at) = path.iter().position(|p| p == next) {
            let mut c = path[at..].to_vec();
            c.push(next.clone());
            return Some(c);
        }
        path.push(next.clone());
        if let Some(c) = cycle_from(graph, path) {
            return Some(c);
        }
        path.pop();
    }
    None
}

/// The `.rs` files of `dir` by module name (roots left out), and its sub-folders.
fn folder(dir: &Path) -> (BTreeMap<String, String>, Vec<std::path::PathBuf>) {
    let (mut files, mut subdirs) = (BTreeMap::new(), Vec::new());
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            subdirs.push(p);
            continue;
        }
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if p.extension().is_some_and(|x| x == "rs") && !["mod", "lib", "main"].contains(&&*name) {
            files.insert(name, std::fs::read_to_string(&p).unwrap());
        }
    }
    (files, subdirs)
}

/// The sibling-module graph of one folder (`root`: the folder is a crate's `src`, where
/// `crate::NAME` names a sibling too).
fn graph_of(dir: &Path, root: bool) -> BTreeMap<String, BTreeSet<String>> {
    let (files, subdirs) = folder(dir);
    let mut mods: BTreeSet<String> = files.keys().cloned().collect();
    mods.extend(
        subdirs
            .iter()
            .map(|d| d.file_name().unwrap().to_string_lossy().into_owned()),
    );
    files
        .iter()
        .map(|(m, text)| {
            let mut u = uses(text, &mods, root);
            u.remove(m);
            (m.clone(), u)
        })
        .collect()
}

/// Every source folder of the workspace's crates.
fn source_folders() -> Vec<(std::path::PathBuf, bool)> {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut out = Vec::new();
    for krate in ["relay-token", "relay-shim", "relay-host"] {
        let mut stack = vec![(top.join(krate).join("src"), true)];
        while let Some((dir, root)) = stack.pop() {
            stack.extend(folder(&dir).1.into_iter().map(|d| (d, false)));
            out.push((dir, root));
        }
    }
    out
}

#[test]
fn no_crate_of_the_workspace_has_an_import_circle() {
    let folders = source_folders();
    assert!(folders.len() >= 5, "read {} folders", folders.len());
    let mut seen = 0;
    for (dir, root) in folders {
        let graph = graph_of(&dir, root);
        seen += graph.len();
        for m in graph.keys() {
            if let Some(c) = cycle_from(&graph, &mut vec![m.clone()]) {
                panic!("import circle in {}: {}", dir.display(), c.join(" -> "));
            }
        }
    }
    assert!(seen > 60, "read {seen} modules");
    // The checker sees an edge it should: the host's launch uses its confine step.
    let host = Path::new(env!("CARGO_MANIFEST_DIR")).join("../relay-host/src");
    assert!(graph_of(&host, true)["launch"].contains("confine"));
}

#[test]
fn the_checker_finds_a_circle() {
    let mods: BTreeSet<String> = ["a", "b"].map(String::from).into();
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), uses("use super::{b, Host};", &mods, false)),
        (
            "b".to_string(),
            uses("let x = super::a::f(); // super::b", &mods, false),
        ),
    ]
    .into();
    assert_eq!(
        cycle_from(&graph, &mut vec!["a".into()]),
        Some(["a", "b", "a"].map(String::from).to_vec())
    );
}

/// The code lines of a source file: up to its `#[cfg(test)] mod` (unit tests are not counted).
fn code_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            lines[i].starts_with("#[cfg(test)]")
                && lines.get(i + 1).is_some_and(|l| l.starts_with("mod "))
        })
        .unwrap_or(lines.len());
    lines[..end].to_vec()
}

/// Each `fn` of `lines` with its length in lines, from its signature to the `}` at its indent.
fn functions<'a>(lines: &[&'a str]) -> Vec<(&'a str, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        let body = l.trim_start();
        let indent = &l[..l.len() - body.len()];
        let is_fn = body.split("fn ").next().is_some_and(|pre| {
            pre.split_whitespace().all(|w| {
                w.starts_with("pub") || ["const", "unsafe", "async", "extern", "\"C\""].contains(&w)
            })
        }) && body.contains("fn ")
            && !body.starts_with("//");
        if is_fn && !body.ends_with(';') {
            let close = format!("{indent}}}");
            let end = (i..lines.len())
                .find(|&j| lines[j].trim_end() == close)
                .unwrap_or(lines.len() - 1);
            out.push((l, end - i + 1));
            i = end;
        }
        i += 1;
    }
    out
}

#[test]
fn no_file_over_700_lines_no_function_over_80_in_library_or_binary_code() {
    let mut long = Vec::new();
    let mut counted = 0;
    for (dir, _) in source_folders() {
        for (name, text) in folder(&dir).0 {
            let lines = code_lines(&text);
            if lines.len() > 700 {
                long.push(format!(
                    "{}/{name}.rs: {} lines",
                    dir.display(),
                    lines.len()
                ));
            }
            for (sig, n) in functions(&lines) {
                counted += 1;
                if n > 80 {
                    long.push(format!(
                        "{}/{name}.rs: {n} lines: {}",
                        dir.display(),
                        sig.trim()
                    ));
                }
            }
        }
    }
    assert!(counted > 300, "saw {counted} functions");
    assert!(long.is_empty(), "too long:\n{}", long.join("\n"));
}

#[test]
fn the_length_check_sees_a_long_function() {
    let body = format!("pub fn f() {{\n{}}}\n", "    x();\n".repeat(90));
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(functions(&lines), [("pub fn f() {", 92)]);
}
