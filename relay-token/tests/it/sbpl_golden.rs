//! SBPL text for macOS `sandbox-exec`, checked as text against golden files in `tests/golden/`.
//! The golden files are rendered from synthetic profiles (paths taken as they are, see
//! `sbpl/mod.rs`), so they are the same on Linux and on a Mac. Run with `UPDATE_GOLDEN=1` to
//! rewrite them, then read the diff. One test per bypass the profile must stop names it.

use super::sbpl;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use relay_token::sandbox::{Profile, Resolved};
use sbpl::{filter_values, find, parse, paths, rules, synthetic, Rule, HOME};

fn golden(name: &str, text: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        // Tests share golden files and run in parallel: write, never read back a half-written one.
        std::fs::write(&path, text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text, want, "{name} differs from its golden file");
}

/// The rendering of a synthetic profile, checked against its golden file, and its rules.
fn rendered(name: &str, mask: Option<bool>) -> (String, Vec<Rule>) {
    let text = synthetic(HOME, mask, true).sbpl();
    golden(name, &text);
    let rules = rules(&parse(&text).unwrap()).unwrap();
    (text, rules)
}

/// The deny rules whose operations include all of `ops` and that name `(kind path)`.
fn denied(rules: &[Rule], ops: &[&str], kind: &str, path: &Path) -> bool {
    rules.iter().any(|r| {
        !r.allow
            && ops.iter().all(|o| r.ops.iter().any(|x| x == o))
            && paths(r).iter().any(|(k, p)| *k == kind && p == path)
    })
}

#[test]
fn no_token() {
    let (text, _) = rendered("no-token.sb", None);
    assert!(!text.contains("(deny file-read*"));
    assert!(!text.contains("file-clone (literal"));
}

#[test]
fn token_in_a_dedicated_folder() {
    let (text, rules) = rendered("dedicated.sb", Some(true));
    let masked = Path::new(HOME).join(".config/claude-ltt");
    assert!(denied(
        &rules,
        &["file-read*", "file-write*"],
        "subpath",
        &masked
    ));
    // The same as without the token, plus the denies at the end.
    let without = synthetic(HOME, None, true).sbpl();
    let cut = without.find("(deny file-write* (subpath").unwrap();
    assert!(text.starts_with(&without[..cut]));
}

#[test]
fn token_in_a_shared_folder() {
    let (_, rules) = rendered("shared.sb", Some(false));
    let masked = Path::new(HOME).join(".config/claude-ltt/token");
    assert!(denied(
        &rules,
        &["file-read*", "file-write*"],
        "literal",
        &masked
    ));
    // The token's own folder is an ancestor: it cannot be renamed away or cloned.
    let folder = masked.parent().unwrap();
    assert!(denied(&rules, &["file-write-unlink"], "literal", folder));
}

#[test]
fn a_path_that_needs_quoting() {
    let home = r#"/Users/we "ird\ op"#;
    let text = synthetic(home, Some(true), false).sbpl();
    golden("quoting.sb", &text);
    assert!(text.contains(r#"(subpath "/Users/we \"ird\\ op/.config/claude-ltt"))"#));
    let rules = rules(&parse(&text).unwrap()).unwrap();
    let masked = Path::new(home).join(".config/claude-ltt");
    assert!(denied(&rules, &["file-read*"], "subpath", &masked));
}

/// The host's state folder, shown by a grant, is masked whole, yet the session's temp folder
/// inside it stays the session's (under bwrap it is bound at `/tmp`, out of the mask's way).
#[test]
fn the_temp_folder_stays_open_inside_the_masked_state_folder() {
    let home = Path::new(HOME);
    let state = home.join(".local/state/relay");
    let tmp = state.join("sessions/s1/tmp");
    let r = Resolved::unchecked_for_sbpl(
        &[(home.to_path_buf(), true)],
        Some(tmp.clone()),
        &[
            (home.join(".config/claude-ltt"), true),
            (state.clone(), true),
        ],
        &[],
    );
    let text = r.sbpl();
    golden("state-folder.sb", &text);
    let want = format!(
        "(deny file-read* file-write* file-clone file-link (require-all (subpath {:?}) \
         (require-not (subpath {:?}))))",
        state, tmp
    );
    assert!(text.lines().any(|l| l == want), "missing {want}");
    // The token's own mask has no hole.
    let token = home.join(".config/claude-ltt");
    let rules = rules(&parse(&text).unwrap()).unwrap();
    assert!(denied(
        &rules,
        &["file-read*", "file-clone"],
        "subpath",
        &token
    ));
    assert_eq!(text.matches("require-not").count(), 1);
}

/// Bypass 1: `clonefile` of a folder above the token, where writing is denied, gives a
/// readable copy of the token inside the clone.
#[test]
fn bypass_1_clone_of_a_folder_above_the_token() {
    let (_, rules) = rendered("dedicated.sb", Some(true));
    for a in ["/", "/Users", HOME, "/Users/op/.config"] {
        assert!(
            denied(&rules, &["file-clone"], "literal", Path::new(a)),
            "{a}"
        );
    }
    let masked = Path::new(HOME).join(".config/claude-ltt");
    assert!(denied(&rules, &["file-clone"], "subpath", &masked));
}

/// Bypass 2: a hard link of the token into a writable grant is a second, unmasked path.
#[test]
fn bypass_2_hard_link_of_the_token() {
    let (_, rules) = rendered("dedicated.sb", Some(true));
    let masked = Path::new(HOME).join(".config/claude-ltt");
    assert!(denied(&rules, &["file-link"], "subpath", &masked));
    let (_, rules) = rendered("shared.sb", Some(false));
    assert!(denied(
        &rules,
        &["file-link"],
        "literal",
        &masked.join("token")
    ));
}

/// Bypass 3: any Unix socket (Docker's starts a container that reads the token).
#[test]
fn bypass_3_unix_sockets_by_path_only() {
    let (text, rules) = rendered("no-token.sb", None);
    assert!(!text.contains("network*"), "network* reaches every socket");
    let tmp = format!("{HOME}/.local/state/relay/sessions/s1/tmp");
    for r in rules
        .iter()
        .filter(|r| r.ops.iter().any(|o| o.starts_with("network")))
    {
        assert!(r.allow);
        let form = format!("{:?}", r.filters);
        let ok = form.contains(r#"Atom("ip"), Str("*:*")"#)
            || form.contains(r#"Str("/private/var/run/mDNSResponder")"#)
            || form.contains(r#"Str("/private/var/run/syslog")"#)
            || form.contains(&format!(r#"Atom("subpath"), Str({tmp:?})"#));
        assert!(ok, "a network rule beyond IP and the listed sockets: {r:?}");
    }
}

/// Bypass 4: Mach services that start code outside the sandbox (launchservicesd) or serve the
/// keychain (SecurityServer).
#[test]
fn bypass_4_mach_services_by_name() {
    let (_, rules) = rendered("no-token.sb", None);
    let lookups: Vec<&Rule> = rules
        .iter()
        .filter(|r| r.ops.contains(&"mach-lookup".to_string()))
        .collect();
    assert_eq!(lookups.len(), 1);
    assert!(!lookups[0].filters.is_empty(), "mach-lookup unrestricted");
    let names = filter_values(lookups[0], "global-name");
    assert_eq!(
        names.len(),
        lookups[0].filters.len(),
        "a filter that is not a name"
    );
    assert!(names.contains(&"com.apple.trustd.agent"));
    for bad in [
        "com.apple.coreservices.launchservicesd",
        "com.apple.SecurityServer",
    ] {
        assert!(!names.contains(&bad), "{bad}");
    }
}

/// Bypass 5: a session signals relay-host (or any process outside its sandbox).
#[test]
fn bypass_5_signals_stay_in_the_sandbox() {
    let (text, rules) = rendered("no-token.sb", None);
    let signal = find(&rules, true, "signal").unwrap();
    assert_eq!(signal.ops, ["signal"]);
    assert_eq!(
        format!("{:?}", signal.filters),
        r#"[List([Atom("target"), Atom("same-sandbox")])]"#
    );
    assert_eq!(text.matches("signal").count(), 1);
    let info = find(&rules, true, "process-info*").unwrap();
    assert_eq!(
        format!("{:?}", info.filters),
        format!("{:?}", signal.filters)
    );
}

/// Bypass 6: `kern.procargs2` shows every process's argv and environment.
#[test]
fn bypass_6_sysctl_by_name() {
    let (_, rules) = rendered("no-token.sb", None);
    let reads: Vec<&Rule> = rules
        .iter()
        .filter(|r| r.ops.contains(&"sysctl-read".to_string()))
        .collect();
    assert_eq!(reads.len(), 1);
    assert!(!reads[0].filters.is_empty(), "sysctl-read unrestricted");
    let names = filter_values(reads[0], "sysctl-name");
    let prefixes = filter_values(reads[0], "sysctl-name-prefix");
    assert_eq!(names.len() + prefixes.len(), reads[0].filters.len());
    assert!(names.contains(&"hw.ncpu"));
    for secret in ["kern.procargs2", "kern.procargs", "kern.proc.all"] {
        assert!(!names.contains(&secret), "{secret}");
        assert!(!prefixes.iter().any(|p| secret.starts_with(p)), "{secret}");
    }
}

/// Bypass 7: TIOCSTI on `/dev/tty` types commands into the operator's shell.
#[test]
fn bypass_7_no_ioctl_on_the_controlling_terminal() {
    let (text, rules) = rendered("no-token.sb", None);
    let ioctl: Vec<&Rule> = rules
        .iter()
        .filter(|r| r.ops.contains(&"file-ioctl".to_string()))
        .collect();
    assert_eq!(ioctl.len(), 1);
    assert!(!ioctl[0].filters.is_empty(), "file-ioctl unrestricted");
    assert!(!text.contains(r#""/dev/tty""#), "/dev/tty is granted");
    assert!(filter_values(ioctl[0], "literal").contains(&"/dev/ptmx"));
}

/// Not a bypass: what Claude Code needs and both references allow.
#[test]
fn bypass_8_what_claude_code_needs() {
    let (text, _) = rendered("no-token.sb", None);
    for want in [
        "(allow process-info* (target same-sandbox))",
        "(allow mach-host*)",
        "(allow ipc-posix-shm ipc-posix-sem)",
        "(allow user-preference-read)",
        r#"(allow file-read-data file-write-data (subpath "/dev/fd"))"#,
        r#"  (literal "/dev/ptmx")"#,
        r##"  (regex #"^/dev/ttys[0-9]+$"))"##,
        r#"(allow file-read* file-write* (subpath "/private/var/folders"))"#,
    ] {
        assert!(text.contains(want), "missing {want}");
    }
}

/// Bypass 9: a deny spelled differently from the disk (`.Config` for `.config`) matches
/// nothing on macOS. Every path comes from `Profile::resolve`, which takes the on-disk
/// spelling; here on a case-sensitive Linux file system that is the path as resolved.
#[test]
fn bypass_9_paths_in_their_on_disk_spelling() {
    let (fx, home) = fixture("home", false);
    let r = profile(&fx, &home, true);
    let masked = r.masked();
    let rules = rules(&parse(&r.sbpl()).unwrap()).unwrap();
    assert!(denied(&rules, &["file-read*"], "subpath", &masked[0]));
    assert_eq!(
        masked[0],
        std::fs::canonicalize(home.join(".config/acme-ltt")).unwrap()
    );
    // A case-insensitive volume (a Mac's default) also finds the token as `.CONFIG/ACME-LTT`;
    // the deny must still name `.config/acme-ltt`.
    let shouted = home.join(".CONFIG/ACME-LTT/token");
    if shouted.exists() {
        let mut p = Profile::new();
        p.read_write(home.clone()).deny(shouted);
        let r = p.resolve(std::slice::from_ref(&home)).unwrap();
        assert_eq!(r.masked(), masked);
        assert!(!r.sbpl().contains("ACME-LTT"));
    }
}

struct Fx {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

/// A real folder (resolved by `Profile::resolve` on this machine), for the tests that need
/// the file system; their text depends on the machine, so it is checked by shape only.
fn fixture(home_name: &str, shared: bool) -> (Fx, PathBuf) {
    let base = Path::new("/var/tmp/relay-token-sbpl-tests");
    std::fs::create_dir_all(base).unwrap();
    let dir = tempfile::Builder::new()
        .prefix("g")
        .tempdir_in(base)
        .unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let home = root.join(home_name);
    let token_dir = home.join(".config/acme-ltt");
    std::fs::create_dir_all(&token_dir).unwrap();
    std::fs::write(token_dir.join("token"), "sk-ant-oat01-GOLDEN\n").unwrap();
    if shared {
        std::fs::write(token_dir.join("other"), "x\n").unwrap();
    }
    for d in ["bin", "tmp", "state"] {
        std::fs::create_dir(root.join(d)).unwrap();
    }
    std::fs::set_permissions(root.join("state"), std::fs::Permissions::from_mode(0o700)).unwrap();
    (Fx { _dir: dir, root }, home)
}

fn profile(fx: &Fx, home: &Path, deny: bool) -> Resolved {
    let mut p = Profile::new();
    p.read_write(home.to_path_buf())
        .read(home.join(".config"))
        .project(home.to_path_buf())
        .tmp(fx.root.join("tmp"))
        .command_dir(fx.root.join("bin"))
        .state_dir(fx.root.join("state"));
    if deny {
        p.deny(home.join(".config/acme-ltt/token"));
    }
    p.resolve(&[home.to_path_buf()]).unwrap()
}

#[test]
fn written_with_mode_0600() {
    let (fx, home) = fixture("home", false);
    let r = profile(&fx, &home, true);
    let path = fx.root.join("state/profile.sb");
    std::fs::write(&path, "old and longer than nothing").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    r.write_sbpl(&path).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), r.sbpl());
    // A symlink in its place is refused.
    let link = fx.root.join("state/link.sb");
    std::os::unix::fs::symlink(fx.root.join("state/elsewhere"), &link).unwrap();
    assert!(r.write_sbpl(&link).is_err());
    assert!(!fx.root.join("state/elsewhere").exists());
}

/// Not a test: `scripts/macos-live-check` runs it (`--ignored`) to write the profile it attacks.
/// In `$RELAY_LIVE_CHECK_DIR` (made by the script): `home` granted read-write, `home/docs`
/// read-only, the token `home/.config/claude-ltt/token` denied (every folder above it lies in
/// the read-write grant), `tmp` the session's temp folder, `state` the host's folder; the
/// profile goes to `state/profile.sb`, mode 0600. `$RELAY_LIVE_CHECK_READ` (folders joined by
/// `:`) adds read-only grants, for the folders Claude Code runs from.
#[test]
#[ignore = "run by scripts/macos-live-check"]
fn live_check_profile() {
    let dir =
        PathBuf::from(std::env::var_os("RELAY_LIVE_CHECK_DIR").expect("RELAY_LIVE_CHECK_DIR"));
    let home = dir.join("home");
    let mut p = Profile::new();
    p.read_write(home.clone())
        .read(home.join("docs"))
        .deny(home.join(".config/claude-ltt/token"))
        .project(home.join("work"))
        .tmp(dir.join("tmp"))
        .state_dir(dir.join("state"));
    let extra = std::env::var_os("RELAY_LIVE_CHECK_READ").unwrap_or_default();
    for folder in std::env::split_paths(&extra).filter(|f| f.is_absolute()) {
        p.read(folder);
    }
    let r = p.resolve(std::slice::from_ref(&home)).unwrap();
    r.write_sbpl(&dir.join("state/profile.sb")).unwrap();
}
