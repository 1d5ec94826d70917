//! No import circle between sibling modules, in every folder of every crate of the workspace.
//! Each use of a path (`crate::a::b`, `super::x`, `super::{A, B}`, a folder's `mod.rs` naming its
//! own child) is resolved to the module that defines it, through the re-exports of `lib.rs` and
//! each `mod.rs`; an edge joins the two modules' ancestors where their paths part, so a file of
//! `launch/` that uses `crate::cli::human` is an edge `launch -> cli` among the crate root's
//! children. A crate's `lib.rs` and each folder's `mod.rs` are a node of their folder (`mod`): an
//! item defined there (not re-exported from a child) is an edge to it, so a circle between a
//! folder's own file and one of its children is seen too. Line and function
//! lengths are checked below, in [`policies`] that every policy on a kind names each variant,
//! and in [`launch_shape`] that `launch/run.rs` is the chain alone and the token mode is
//! decided once.
//! Run: `cargo test -p relay-tests --test checks`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[path = "module_graph/policies.rs"]
mod policies;

#[path = "module_graph/launch_shape.rs"]
mod launch_shape;

/// A module path inside a crate (`["launch", "stage"]`); a folder's own file is `[.., "mod"]`.
type ModPath = Vec<String>;

/// Text with `//` comments removed, and everything from a `#[cfg(test)] mod` on.
fn code_of(text: &str) -> String {
    code_lines(text)
        .iter()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The identifier at the start of `s`.
fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The paths after each `prefix` in `code`, as segment lists (a `{..}` group gives one each).
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices(prefix) {
        if code[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[i + prefix.len()..];
        let items: Vec<&str> = match rest.strip_prefix('{') {
            Some(g) => g[..g.find('}').unwrap_or(g.len())].split(',').collect(),
            None => vec![rest],
        };
        for item in items {
            let segs: Vec<String> = item
                .trim()
                .split("::")
                .map(ident)
                .take_while(|s| !s.is_empty())
                .map(String::from)
                .collect();
            if !segs.is_empty() {
                out.push(segs);
            }
        }
    }
    out
}

/// One crate's modules: each source file by module path, and each folder's re-exports.
struct Crate {
    /// Module path -> code (a folder's `mod.rs` and the crate's `lib.rs` at `[.., "mod"]`).
    files: BTreeMap<ModPath, String>,
    /// Folder path -> the names it declares as modules.
    children: BTreeMap<ModPath, BTreeSet<String>>,
    /// Folder path -> item name -> the child module it is re-exported from.
    reexports: BTreeMap<ModPath, BTreeMap<String, String>>,
}

/// The names a module file defines publicly (for a `pub use child::*`).
fn pub_items(code: &str) -> Vec<String> {
    let kinds = [
        "fn ", "struct ", "enum ", "const ", "static ", "type ", "trait ", "mod ",
    ];
    code.lines()
        .filter_map(|l| l.trim_start().strip_prefix("pub "))
        .filter_map(|l| kinds.iter().find_map(|k| l.strip_prefix(k)))
        .map(|l| ident(l).to_string())
        .collect()
}

impl Crate {
    /// Reads `src` of one crate.
    fn read(src: &Path) -> Crate {
        let mut c = Crate {
            files: BTreeMap::new(),
            children: BTreeMap::new(),
            reexports: BTreeMap::new(),
        };
        c.read_folder(src, Vec::new());
        c.index_reexports();
        c
    }

    fn read_folder(&mut self, dir: &Path, at: ModPath) {
        let kids = self.children.entry(at.clone()).or_default();
        let mut sub = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                kids.insert(name.clone());
                sub.push((p, name));
            } else if p.extension().is_some_and(|x| x == "rs") && name != "main" {
                let own = ["mod", "lib"].contains(&&*name);
                if !own {
                    kids.insert(name.clone());
                }
                let key = [at.clone(), vec![if own { "mod".into() } else { name }]].concat();
                self.files
                    .insert(key, code_of(&std::fs::read_to_string(&p).unwrap()));
            }
        }
        for (p, name) in sub {
            self.read_folder(&p, [at.clone(), vec![name]].concat());
        }
    }

    /// Each folder's `use child::..` and `pub use child::..` names, by the child they come from.
    fn index_reexports(&mut self) {
        for (folder, kids) in &self.children {
            let own = [folder.clone(), vec!["mod".into()]].concat();
            let Some(code) = self.files.get(&own) else {
                continue;
            };
            let mut map = BTreeMap::new();
            let statements: Vec<String> = code
                .split(';')
                .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
                .collect();
            let uses = statements.iter().map(|s| s.as_str()).filter_map(|l| {
                l.strip_prefix("pub use ")
                    .or_else(|| l.strip_prefix("pub(crate) use "))
                    .or_else(|| l.strip_prefix("use "))
            });
            for line in uses {
                let child = ident(line).to_string();
                if !kids.contains(&child) {
                    continue;
                }
                let rest = &line[child.len()..];
                let names: Vec<String> = if rest.starts_with("::*") {
                    let file = [folder.clone(), vec![child.clone()]].concat();
                    self.files
                        .get(&file)
                        .map(|t| pub_items(t))
                        .unwrap_or_default()
                } else {
                    paths_after(line, &format!("{child}::"))
                        .into_iter()
                        .filter_map(|s| s.last().cloned())
                        .collect()
                };
                map.extend(names.into_iter().map(|n| (n, child.clone())));
            }
            self.reexports.insert(folder.clone(), map);
        }
    }

    /// The module a used path lands in: the deepest module it names, through re-exports; an item
    /// of a folder's own file lands in `[.., "mod"]`.
    fn land(&self, path: &[String]) -> ModPath {
        let mut at: ModPath = Vec::new();
        for seg in path {
            let Some(kids) = self.children.get(&at) else {
                return at;
            };
            if kids.contains(seg) {
                at.push(seg.clone());
                continue;
            }
            return match self.reexports.get(&at).and_then(|r| r.get(seg)) {
                Some(child) => [at.clone(), vec![child.clone()]].concat(),
                None => [at, vec!["mod".into()]].concat(),
            };
        }
        at
    }

    /// The folder-local edges: (folder, from, to) for each use that crosses between siblings.
    fn edges(&self) -> BTreeSet<(ModPath, String, String)> {
        let mut out = BTreeSet::new();
        for (file, code) in &self.files {
            let own = file.last().is_some_and(|n| n == "mod");
            let folder = &file[..file.len() - 1];
            let mut used: Vec<Vec<String>> = paths_after(code, "crate::");
            let parent = if own {
                folder.split_last().map_or(&[][..], |p| p.1)
            } else {
                folder
            };
            for p in paths_after(code, "super::") {
                // `super::super::x`: each further `super` is one folder up.
                let ups = p.iter().take_while(|s| *s == "super").count();
                let base = &parent[..parent.len().saturating_sub(ups)];
                used.push([base.to_vec(), p[ups..].to_vec()].concat());
            }
            if own {
                for kid in self.children.get(folder).into_iter().flatten() {
                    for p in paths_after(code, &format!("{kid}::")) {
                        used.push([folder.to_vec(), vec![kid.clone()], p].concat());
                    }
                }
            }
            for u in used {
                let to = self.land(&u);
                let d = file.iter().zip(&to).take_while(|(a, b)| a == b).count();
                if d < file.len() && d < to.len() {
                    out.insert((file[..d].to_vec(), file[d].clone(), to[d].clone()));
                }
            }
        }
        out
    }
}

/// The first cycle found from `start`, as the path that closes it.
fn cycle_from(
    graph: &BTreeMap<String, BTreeSet<String>>,
    path: &mut Vec<String>,
) -> Option<Vec<String>> {
    let last = path.last().cloned()?;
    for next in graph.get(&last).into_iter().flatten() {
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

/// The first import circle of a crate, as "folder: a -> b -> a".
fn circle_in(krate: &Crate) -> Option<String> {
    circles_in(krate).into_iter().next()
}

/// Every node's first import circle in a crate, as "folder: a -> b -> a".
fn circles_in(krate: &Crate) -> Vec<String> {
    let mut out = Vec::new();
    let mut graphs: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (folder, from, to) in krate.edges() {
        graphs
            .entry(folder)
            .or_default()
            .entry(from)
            .or_default()
            .insert(to);
    }
    for (folder, graph) in &graphs {
        for m in graph.keys() {
            if let Some(c) = cycle_from(graph, &mut vec![m.clone()]) {
                out.push(format!("{}: {}", folder.join("/"), c.join(" -> ")));
            }
        }
    }
    out
}

const CRATES: [&str; 3] = ["relay-token", "relay-shim", "relay-host"];

fn crate_src(krate: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(krate)
        .join("src")
}

/// Every source folder of the workspace's crates.
fn source_folders() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for krate in CRATES {
        let mut stack = vec![crate_src(krate)];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                }
            }
            out.push(dir);
        }
    }
    out
}

#[test]
fn no_crate_of_the_workspace_has_an_import_circle() {
    let mut seen = 0;
    for krate in CRATES {
        let c = Crate::read(&crate_src(krate));
        seen += c.files.len();
        let circles = circles_in(&c);
        assert!(
            circles.is_empty(),
            "import circles in {krate}/src:\n{}",
            circles.join("\n")
        );
    }
    assert!(seen > 80, "read {seen} modules");
    // The checker sees the edges it should: a launch step uses another, and the command line
    // uses the launch (across folders).
    let host = Crate::read(&crate_src("relay-host"));
    let edges = host.edges();
    let has = |f: &[&str], a: &str, b: &str| {
        edges.contains(&(
            f.iter().map(|s| s.to_string()).collect(),
            a.into(),
            b.into(),
        ))
    };
    assert!(has(&["launch"], "run", "sandbox"), "{edges:?}");
    // Each step of a launch refuses with its own error, beside it: none reaches for the
    // launch-wide one, which carries them all.
    for step in ["plan", "prepare", "network", "sandbox", "shim"] {
        assert!(
            !has(&["launch"], step, "error"),
            "launch/{step} uses launch/error.rs"
        );
    }
    assert!(has(&[], "cli", "launch"), "{edges:?}");
}

/// Builds a crate from (path, code) pairs, as if read from disk.
fn crate_of(files: &[(&str, &str)]) -> Crate {
    let mut c = Crate {
        files: BTreeMap::new(),
        children: BTreeMap::new(),
        reexports: BTreeMap::new(),
    };
    for (path, code) in files {
        let segs: ModPath = path.split('/').map(String::from).collect();
        for d in 0..segs.len() - 1 {
            c.children
                .entry(segs[..d].to_vec())
                .or_default()
                .insert(segs[d].clone());
        }
        if segs.last().is_some_and(|n| n != "mod") {
            let (last, folder) = segs.split_last().unwrap();
            c.children
                .entry(folder.to_vec())
                .or_default()
                .insert(last.clone());
        }
        c.files.insert(segs, code_of(code));
    }
    c.index_reexports();
    c
}

#[test]
fn the_checker_finds_circles_across_folders_and_through_mod_rs() {
    // Siblings in one folder.
    let c = crate_of(&[
        ("a", "use crate::{b, Host};"),
        ("b", "let x = crate::a::f(); // crate::b"),
    ]);
    assert_eq!(circle_in(&c).as_deref(), Some(": a -> b -> a"));
    // Across folders: x/one uses y, y/two uses x (through x's re-export).
    let c = crate_of(&[
        ("x/mod", "mod one;\npub use one::Thing;"),
        ("x/one", "use crate::y::two::f;"),
        ("y/mod", "mod two;"),
        ("y/two", "use crate::x::Thing;"),
    ]);
    assert_eq!(circle_in(&c).as_deref(), Some(": x -> y -> x"));
    // `super::super::` climbs two folders: no edge to the folder's own file.
    let c = crate_of(&[
        ("x/mod", "mod y;\nfn f() { y::z::g() }"),
        ("x/y/mod", "mod z;\nfn f() { z::h() }"),
        ("x/y/z", "use super::super::w::W;"),
        ("x/w", "pub struct W;"),
    ]);
    assert_eq!(circle_in(&c), None);
    // A mod.rs that holds code, and its child that uses it.
    let c = crate_of(&[
        ("x/mod", "mod one;\npub struct Host;\nfn f() { one::g() }"),
        ("x/one", "use super::Host;"),
    ]);
    assert_eq!(circle_in(&c).as_deref(), Some("x: mod -> one -> mod"));
    // No circle: a folder that only re-exports.
    let c = crate_of(&[
        ("x/mod", "mod one;\npub use one::Thing;"),
        ("x/one", "pub struct Thing;"),
        ("z", "use crate::x::Thing;"),
    ]);
    assert_eq!(circle_in(&c), None);
}

/// The code lines of a source file: up to its `#[cfg(test)] mod` or `#[cfg(all(test, ..))] mod`
/// (unit tests are not counted).
fn code_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            (lines[i].starts_with("#[cfg(test)]") || lines[i].starts_with("#[cfg(all(test"))
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

/// The `.rs` files of `dir` by module name (crate roots and `mod.rs` too).
fn folder_files(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "rs") {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            out.insert(name, std::fs::read_to_string(&p).unwrap());
        }
    }
    out
}

#[test]
fn no_file_over_700_lines_no_function_over_80_in_library_or_binary_code() {
    let mut long = Vec::new();
    let mut counted = 0;
    for dir in source_folders() {
        for (name, text) in folder_files(&dir) {
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
