//! A structural lint of every SBPL profile the crate renders: the golden files, the synthetic
//! profiles, and profiles resolved on this machine. It checks that the text reads (balanced
//! parentheses, closed strings), that every operation and filter is one the public references
//! use, that every deny comes after every allow, and that every masked path and every folder
//! above it is covered against clone, hard link and unlink. It also proves it can fail.

use super::sbpl;

use std::path::{Path, PathBuf};

use relay_token::sandbox::Profile;
use sbpl::{head, parse, paths, rules, synthetic, Rule, Sexp, HOME};

/// Operation names, as Anthropic's sandbox-runtime (`src/sandbox/macos-sandbox-utils.ts`) and
/// codex's seatbelt policies (`codex-rs/core/src/seatbelt_*.sbpl`) spell them; `file-link` and
/// `file-clone` as the relay app's `sandbox.go` and other published profiles do. Left out on
/// purpose: `network*`, which reaches every Unix socket.
const OPERATIONS: &[&str] = &[
    "default",
    "file-clone",
    "file-ioctl",
    "file-link",
    "file-map-executable",
    "file-read*",
    "file-read-data",
    "file-read-metadata",
    "file-test-existence",
    "file-write*",
    "file-write-data",
    "file-write-unlink",
    "iokit-get-properties",
    "iokit-open",
    "ipc-posix-sem",
    "ipc-posix-shm",
    "mach-host*",
    "mach-lookup",
    "mach-priv-task-port",
    "network-bind",
    "network-inbound",
    "network-outbound",
    "process-exec",
    "process-fork",
    "process-info*",
    "pseudo-tty",
    "signal",
    "sysctl-read",
    "sysctl-write",
    "system-socket",
    "user-preference-read",
];

/// Filter names the same references use.
const FILTERS: &[&str] = &[
    "extension",
    "global-name",
    "iokit-registry-entry-class",
    "literal",
    "local",
    "path-literal",
    "regex",
    "remote",
    "require-all",
    "require-any",
    "require-not",
    "socket-domain",
    "socket-protocol",
    "subpath",
    "sysctl-name",
    "sysctl-name-prefix",
    "target",
    "vnode-type",
];

/// What a masked path must deny, and what each folder above it must.
const ON_MASKED: &[&str] = &["file-read*", "file-write*", "file-clone", "file-link"];
const ON_ANCESTOR: &[&str] = &["file-write-unlink", "file-clone", "file-link"];

/// Lints `text` and returns the paths it masks (those a `file-read*` deny names), for the
/// caller to compare with the paths it knows are masked.
fn lint(text: &str) -> Result<Vec<PathBuf>, String> {
    let forms = parse(text)?;
    let head_forms: Vec<String> = forms.iter().take(2).map(|f| format!("{f:?}")).collect();
    let want = [
        r#"List([Atom("version"), Atom("1")])"#,
        r#"List([Atom("deny"), Atom("default")])"#,
    ];
    if head_forms != want {
        return Err(format!(
            "must open with (version 1) (deny default): {head_forms:?}"
        ));
    }
    let rules = rules(&forms[2..])?;
    for r in &rules {
        if let Some(op) = r.ops.iter().find(|o| !OPERATIONS.contains(&o.as_str())) {
            return Err(format!("unknown operation {op}"));
        }
        for f in &r.filters {
            check_filter(f)?;
        }
    }
    let last_allow = rules.iter().rposition(|r| r.allow);
    let first_deny = rules.iter().position(|r| !r.allow);
    if let (Some(a), Some(d)) = (last_allow, first_deny) {
        if d < a {
            return Err(format!("deny {:?} before allow {:?}", rules[d], rules[a]));
        }
    }
    let masked: Vec<PathBuf> = rules
        .iter()
        .filter(|r| !r.allow && r.ops.iter().any(|o| o == "file-read*"))
        .flat_map(|r| paths(r).into_iter().map(|(_, p)| p))
        .collect();
    for m in &masked {
        if !covers(&rules, ON_MASKED, &["subpath", "literal"], m) {
            return Err(format!("{m:?} is not denied {ON_MASKED:?}"));
        }
        for a in m.ancestors().skip(1) {
            if !covers(&rules, ON_ANCESTOR, &["literal"], a) {
                return Err(format!("{a:?} above {m:?} is not denied {ON_ANCESTOR:?}"));
            }
        }
    }
    Ok(masked)
}

/// Every filter head, nested ones included, is known.
fn check_filter(f: &Sexp) -> Result<(), String> {
    let Sexp::List(items) = f else {
        return Ok(());
    };
    match head(f) {
        Some(h) if FILTERS.contains(&h) => {}
        other => return Err(format!("unknown filter {other:?} in {f:?}")),
    }
    for item in &items[1..] {
        if let Sexp::List(_) = item {
            check_filter(item)?;
        }
    }
    Ok(())
}

/// Some deny rule names `path` with one of `kinds` and denies every one of `ops`, each op in
/// one rule or another.
fn covers(rules: &[Rule], ops: &[&str], kinds: &[&str], path: &Path) -> bool {
    ops.iter().all(|op| {
        rules.iter().any(|r| {
            !r.allow
                && r.ops.iter().any(|o| o == op)
                && paths(r).iter().any(|(k, p)| kinds.contains(k) && p == path)
        })
    })
}

#[test]
fn every_golden_file_passes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        lint(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        seen += 1;
    }
    assert!(seen >= 4, "only {seen} golden files");
}

#[test]
fn synthetic_profiles_pass_and_mask_what_they_say() {
    let folder = Path::new(HOME).join(".config/claude-ltt");
    for (mask, want) in [
        (None, vec![]),
        (Some(true), vec![folder.clone()]),
        (Some(false), vec![folder.join("token")]),
    ] {
        let found = lint(&synthetic(HOME, mask, true).sbpl()).unwrap();
        assert_eq!(found, want);
    }
}

#[test]
fn profiles_resolved_on_this_machine_pass() {
    for shared in [false, true] {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        let token = home.join(".config/acme-ltt/token");
        std::fs::create_dir_all(token.parent().unwrap()).unwrap();
        std::fs::write(&token, "x\n").unwrap();
        if shared {
            std::fs::write(home.join(".config/acme-ltt/other"), "y\n").unwrap();
        }
        std::fs::create_dir(root.join("state")).unwrap();
        let mut p = Profile::new();
        p.read_write(home.clone())
            .read(home.join(".config"))
            .deny(token.clone())
            .state_dir(root.join("state"));
        let r = p.resolve(std::slice::from_ref(&home)).unwrap();
        assert_eq!(lint(&r.sbpl()).unwrap(), r.masked());
    }
}

/// The lint is not vacuous: each kind of broken profile is refused.
#[test]
fn broken_profiles_are_refused() {
    let good = synthetic(HOME, Some(true), false).sbpl();
    let masked = format!("{HOME}/.config/claude-ltt");
    let broken = [
        (
            good.replacen("(allow pseudo-tty)", "(allow pseudo-tty", 1),
            "unclosed",
        ),
        (
            good.replacen("(allow pseudo-tty)", "(allow pseudo-tty))", 1),
            "unbalanced",
        ),
        (
            good.replacen("(allow pseudo-tty)", "(allow pseudo-tty \"x)", 1),
            "unterminated",
        ),
        (
            good.replacen("pseudo-tty", "pseudo-teletype", 1),
            "unknown operation",
        ),
        (
            good.replacen("(target same-sandbox)", "(targets same-sandbox)", 1),
            "unknown filter",
        ),
        (good.replacen("(version 1)\n", "", 1), "must open"),
        (
            format!("{good}(allow file-read* (subpath \"/x\"))\n"),
            "before allow",
        ),
        (
            good.replace(
                &format!(
                    "(deny file-read* file-write* file-clone file-link (subpath \"{masked}\"))"
                ),
                &format!("(deny file-read* file-write* (subpath \"{masked}\"))"),
            ),
            "is not denied",
        ),
        (
            good.replace(
                "(deny file-write-unlink file-clone file-link (literal \"/Users\"))",
                "(deny file-write-unlink file-link (literal \"/Users\"))",
            ),
            "\"/Users\" above",
        ),
    ];
    for (text, why) in broken {
        assert_ne!(text, good, "{why}: the mutation did not apply");
        let err = lint(&text).expect_err(why);
        assert!(err.contains(why), "{why}: {err}");
    }
}
