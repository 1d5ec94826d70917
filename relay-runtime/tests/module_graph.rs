//! No import circle between the host's modules: each file of `src/host/` names the modules it
//! uses (`super::NAME`, `super::{A, B}`, `crate::host::NAME`, outside comments), and the graph
//! they make has no cycle. Run: `cargo test -p relay-runtime --features host --test module_graph`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The modules `text` (one file of `src/host/`) uses, among `mods`.
fn uses(text: &str, mods: &BTreeSet<String>) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    for prefix in ["super::", "crate::host::"] {
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

#[test]
fn the_host_modules_import_no_circle() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/host");
    let mut files = BTreeMap::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if p.extension().is_some_and(|x| x == "rs") && name != "mod" {
            files.insert(name, std::fs::read_to_string(&p).unwrap());
        }
    }
    assert!(files.len() > 10, "read {} host modules", files.len());
    let mods: BTreeSet<String> = files.keys().cloned().collect();
    let graph: BTreeMap<String, BTreeSet<String>> = files
        .iter()
        .map(|(m, text)| {
            let mut u = uses(text, &mods);
            u.remove(m);
            (m.clone(), u)
        })
        .collect();
    // The checker sees an edge it should: launch.rs uses confine.rs.
    assert!(graph["launch"].contains("confine"), "{graph:?}");
    for m in graph.keys() {
        if let Some(c) = cycle_from(&graph, &mut vec![m.clone()]) {
            panic!("import circle: {}", c.join(" -> "));
        }
    }
}

#[test]
fn the_checker_finds_a_circle() {
    let mods: BTreeSet<String> = ["a", "b"].map(String::from).into();
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), uses("use super::{b, Host};", &mods)),
        (
            "b".to_string(),
            uses("let x = super::a::f(); // super::b", &mods),
        ),
    ]
    .into();
    assert_eq!(
        cycle_from(&graph, &mut vec!["a".into()]),
        Some(["a", "b", "a"].map(String::from).to_vec())
    );
}
