//! The command line of the real `relay-host`, driven from files: each `tests/cli/*.case` holds a
//! `$ relay-host ARGS` line, a `? CODE` line, then `--- stdout` and `--- stderr` sections with
//! the exact output. `RELAY_CLI_BLESS=1 cargo test -p relay-tests --test e2e -- cli::` rewrites
//! the sections from what the binary printed (review the diff).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

struct Case {
    args: Vec<String>,
    code: i32,
    stdout: String,
    stderr: String,
}

fn parse(text: &str) -> Case {
    let mut case = Case {
        args: Vec::new(),
        code: 0,
        stdout: String::new(),
        stderr: String::new(),
    };
    let mut section: Option<&str> = None;
    for line in text.split_inclusive('\n') {
        match (section, line.trim_end()) {
            (None, l) if l.starts_with("$ relay-host") => {
                case.args = l["$ relay-host".len()..]
                    .split_whitespace()
                    .map(String::from)
                    .collect();
            }
            (None, l) if l.starts_with("? ") => case.code = l[2..].parse().expect("? CODE"),
            (_, "--- stdout") => section = Some("stdout"),
            (_, "--- stderr") => section = Some("stderr"),
            (Some("stdout"), _) => case.stdout.push_str(line),
            (Some("stderr"), _) => case.stderr.push_str(line),
            _ => {}
        }
    }
    assert!(
        !case.args.is_empty() || text.contains("$ relay-host"),
        "no command line"
    );
    case
}

fn render(c: &Case) -> String {
    let mut args = String::from("$ relay-host");
    for a in &c.args {
        args.push(' ');
        args.push_str(a);
    }
    format!(
        "{args}\n? {}\n--- stdout\n{}--- stderr\n{}",
        c.code, c.stdout, c.stderr
    )
}

fn run(args: &[String], home: &Path) -> Case {
    let out = Command::new(relay_tests::relay_host())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run relay-host");
    Case {
        args: args.to_vec(),
        code: out.status.code().expect("an exit code"),
        stdout: String::from_utf8(out.stdout).expect("UTF-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("UTF-8 stderr"),
    }
}

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("cli");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "case"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_case_file_matches_the_binary() {
    let home = tempfile::tempdir().unwrap();
    let bless = std::env::var_os("RELAY_CLI_BLESS").is_some();
    let files = cases();
    assert!(files.len() >= 14, "{} case files", files.len());
    let mut failed = Vec::new();
    for f in &files {
        let want = parse(&fs::read_to_string(f).unwrap());
        let got = run(&want.args, home.path());
        if bless {
            fs::write(f, render(&got)).unwrap();
        } else if render(&got) != render(&want) {
            failed.push(format!("{}:\n{}", f.display(), render(&got)));
        }
    }
    assert!(failed.is_empty(), "cases differ:\n{}", failed.join("\n"));
    // Reading the help created nothing in the home folder.
    assert_eq!(fs::read_dir(home.path()).unwrap().count(), 0);
}

/// Completions for bash, zsh and fish, and the man page, come from the same definitions: each
/// names every command.
#[test]
fn completions_and_the_man_page_name_every_command() {
    let home = tempfile::tempdir().unwrap();
    let commands = [
        "launch", "run", "status", "ps", "stop", "token", "audit", "events", "gc", "demo",
    ];
    for shell in ["bash", "zsh", "fish"] {
        let out = run(&["completions".into(), shell.into()], home.path());
        assert_eq!(out.code, 0, "{shell}: {}", out.stderr);
        for c in commands {
            assert!(out.stdout.contains(c), "{shell} completions lack {c}");
        }
    }
    let man = run(&["man".into()], home.path());
    assert_eq!(man.code, 0);
    assert!(
        man.stdout.starts_with(".ie \\n(.g .ds Aq"),
        "{}",
        &man.stdout[..40]
    );
    assert!(man.stdout.contains(".TH relay-host 1"), "no .TH line");
    for c in commands {
        assert!(man.stdout.contains(c), "the man page lacks {c}");
    }
    let dir = home.path().join("man");
    let out = run(
        &["man".into(), format!("--out-dir={}", dir.display())],
        home.path(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(dir.join("relay-host.1").is_file());
    assert!(dir.join("relay-host-token-import.1").is_file());
}
