//! The launch's shape: `launch/run.rs` is the chain of the steps and nothing else (each step's
//! body is in its step's folder), and the session's token mode is decided in one place
//! (`launch/prepare/token_mode.rs`), which the answer, the record, the audit row and the log
//! read.

use std::path::{Path, PathBuf};

use super::{code_lines, code_of, crate_src, functions, source_folders};

/// The functions `launch/run.rs` may define: the public entry, the launch under its guard, the
/// acceptance and the chain of steps. A function beyond these is a step's body (or a
/// refusal's, or the supervision's), which belongs in its folder.
const CHAIN: &[&str] = &[
    "launch",
    "launch_session",
    "launch_guarded",
    "accept",
    "start_session",
    "spawn_shim",
];

/// The most lines `launch/run.rs` may hold, its comments and examples included.
const RUN_LINES: usize = 200;

/// The name of each function defined in `lines`.
fn fn_names(lines: &[&str]) -> Vec<String> {
    functions(lines)
        .into_iter()
        .filter_map(|(sig, _)| sig.split("fn ").nth(1))
        .map(|rest| super::ident(rest).to_string())
        .collect()
}

/// What is wrong with `run.rs`'s text, if anything.
fn run_problems(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() > RUN_LINES {
        out.push(format!(
            "launch/run.rs has {} lines, over {RUN_LINES}: it is the chain alone",
            lines.len()
        ));
    }
    for name in fn_names(&code_lines(text)) {
        if !CHAIN.contains(&name.as_str()) {
            out.push(format!(
                "launch/run.rs defines `fn {name}`, not one of the chain's {CHAIN:?}: a step's \
                 body belongs in its step's folder"
            ));
        }
    }
    out
}

#[test]
fn run_rs_is_the_chain_of_the_steps_alone() {
    let run = crate_src("relay-host").join("launch").join("run.rs");
    let text = std::fs::read_to_string(&run).unwrap();
    // The checker sees what it checks: the chain's functions are there.
    let names = fn_names(&code_lines(&text));
    assert!(
        names.iter().any(|n| n == "spawn_shim"),
        "saw no chain: {names:?}"
    );
    let problems = run_problems(&text);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_run_rs_check_sees_a_steps_body_and_a_long_file() {
    let body = "pub fn launch() {\n    chain();\n}\n\nfn connect(cx: &Launch) {\n    x();\n}\n";
    assert_eq!(
        run_problems(body),
        [
            "launch/run.rs defines `fn connect`, not one of the chain's [\"launch\", \
          \"launch_session\", \"launch_guarded\", \"accept\", \"start_session\", \
          \"spawn_shim\"]: a step's body belongs in its step's folder"
        ]
    );
    let long = "// x\n".repeat(RUN_LINES + 1);
    assert_eq!(run_problems(&long).len(), 1);
}

/// The one place the session's token mode is decided.
const TOKEN_MODE_FILE: &str = "launch/prepare/token_mode.rs";

/// The setting's own file: its words (`pipe`, `stand_in`) and what each mode needs.
const SETTING_FILE: &str = "settings/token_mode.rs";

/// What deciding the token mode looks like, each with the files it may appear in: the
/// setting's words spelled out, the template's setting read, a program's presence taken for
/// the mode.
const DECISIONS: &[(&str, &[&str])] = &[
    ("\"stand_in\"", &[TOKEN_MODE_FILE, SETTING_FILE]),
    ("\"pipe\"", &[TOKEN_MODE_FILE, SETTING_FILE]),
    ("template().token_mode", &[TOKEN_MODE_FILE]),
    ("template.token_mode", &[TOKEN_MODE_FILE]),
    ("stand_in.is_some()", &[]),
    ("stand_in.is_none()", &[]),
    ("programs.stand_in", &[]),
];

/// Where `code` (of the file at `rel`, relative to the crate's `src/`) decides the token mode
/// outside its place.
fn decisions_in(rel: &str, code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        for (needle, allowed) in DECISIONS {
            if line.contains(needle) && !allowed.contains(&rel) {
                out.push(format!("{rel}:{}: `{needle}` in `{}`", n + 1, line.trim()));
            }
        }
    }
    out
}

/// Every source file of relay-host's launch, settings and command line, relative to `src/`.
fn host_files() -> Vec<(String, PathBuf)> {
    let src = crate_src("relay-host");
    let mut out = Vec::new();
    for dir in source_folders() {
        let Ok(rel_dir) = dir.strip_prefix(&src) else {
            continue;
        };
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "rs") {
                let rel = rel_path(rel_dir, &p);
                out.push((rel, p));
            }
        }
    }
    out
}

fn rel_path(rel_dir: &Path, file: &Path) -> String {
    let name = file.file_name().unwrap().to_string_lossy();
    match rel_dir.as_os_str().is_empty() {
        true => name.into_owned(),
        false => format!("{}/{name}", rel_dir.display()),
    }
}

#[test]
fn the_token_mode_is_decided_in_one_place() {
    let files = host_files();
    assert!(
        files.iter().any(|(rel, _)| rel == TOKEN_MODE_FILE),
        "no {TOKEN_MODE_FILE} among {} files",
        files.len()
    );
    let mut found = Vec::new();
    for (rel, path) in files {
        // A Debug field of the stand-in's protocol is named `stand_in`: its folder holds the
        // proxy, not the launch's decision.
        if rel.starts_with("stand_in/") {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(path).unwrap());
        found.extend(decisions_in(&rel, &code));
    }
    assert!(
        found.is_empty(),
        "the token mode decided outside {TOKEN_MODE_FILE} (read `Prepared::token_mode` and its \
         `word()` instead):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_token_mode_check_sees_a_second_decision() {
    let code = code_of(
        "let w = if launch.programs.stand_in.is_some() { \"stand_in\" } else { \"pipe\" };\n\
         // \"pipe\" in a comment is no decision\n",
    );
    let found = decisions_in("launch/session/answer.rs", &code);
    assert_eq!(found.len(), 4, "{found:?}");
    assert!(decisions_in(TOKEN_MODE_FILE, "TokenMode::Pipe => \"pipe\",").is_empty());
}

/// The one place a launch makes its template's network (the plan, once per launch).
const PLAN_FILE: &str = "launch/plan/launch_plan.rs";

/// Where `code` (of the launch's file at `rel`) makes the template's network again instead of
/// reading the plan's.
fn network_made_in(rel: &str, code: &str) -> Vec<String> {
    let made = |l: &str| l.contains("template().network()") || l.contains("template.network()");
    (code.lines().enumerate())
        .filter(|(_, l)| rel.starts_with("launch/") && rel != PLAN_FILE && made(l))
        .map(|(n, l)| format!("{rel}:{}: `{}`", n + 1, l.trim()))
        .collect()
}

#[test]
fn a_launch_s_network_is_made_once_in_its_plan() {
    let mut found = Vec::new();
    let files = host_files();
    assert!(
        files.iter().any(|(rel, _)| rel == PLAN_FILE),
        "no {PLAN_FILE}"
    );
    for (rel, path) in files {
        let code = code_of(&std::fs::read_to_string(path).unwrap());
        found.extend(network_made_in(&rel, &code));
    }
    assert!(
        found.is_empty(),
        "a launch step makes its template's network again (read `LaunchPlan::network`):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_network_check_sees_a_second_making() {
    let code = "let n = launch.v.template().network();\nlet m = v.network();\n";
    assert_eq!(network_made_in("launch/network/connect.rs", code).len(), 1);
    assert!(network_made_in(PLAN_FILE, code).is_empty());
    assert!(network_made_in("cli/status.rs", code).is_empty());
}
