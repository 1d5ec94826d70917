//! The pieces that keep a session from arming a later launch, tested on their own: the
//! no-`ptrace` filter (with the real `strace`), and the write-deny placeholders (made without
//! following a planted symlink, removed only while still what was made).
#![cfg(target_os = "linux")]

use std::os::unix::process::CommandExt;
use std::process::Command;

use relay_token::sandbox::{seccomp, write_deny::Placeholders};

/// `strace true` with and without the filter: the control traces, the filtered one gets EPERM
/// from `ptrace` and cannot.
#[test]
fn the_filter_refuses_ptrace_and_allows_the_rest() {
    let strace = ["/usr/bin/strace", "/bin/strace"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("strace is installed by scripts/test");
    let control = Command::new(strace)
        .args(["-o", "/dev/null", "true"])
        .output()
        .unwrap();
    assert!(control.status.success(), "control: {control:?}");
    let mut cmd = Command::new(strace);
    cmd.args(["-o", "/dev/null", "true"]);
    // SAFETY: install_no_tracing makes two prctl calls on static data; it allocates nothing.
    unsafe {
        cmd.pre_exec(seccomp::install_no_tracing);
    }
    let out = cmd.output().unwrap();
    assert!(
        !out.status.success(),
        "strace ran under the filter: {out:?}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Operation not permitted"), "{err}");
    // Everything else still runs under it.
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", "echo ok"]);
    // SAFETY: as above.
    unsafe {
        cmd.pre_exec(seccomp::install_no_tracing);
    }
    let out = cmd.output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");
}

/// A symlink planted where a placeholder's parent would go is never followed: nothing is made
/// at the link's target, and the walk reports it could not make the path.
#[test]
fn a_placeholder_never_follows_a_planted_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (home, victim, state) = (root.join("home"), root.join("victim"), root.join("state"));
    for d in [&home, &victim, &state] {
        std::fs::create_dir(d).unwrap();
    }
    std::os::unix::fs::symlink(&victim, home.join(".claude")).unwrap();
    let mut ph = Placeholders::open(&state).unwrap();
    assert!(!ph.ensure(&home.join(".claude/commands"), true).unwrap());
    assert_eq!(
        std::fs::read_dir(&victim).unwrap().count(),
        0,
        "made through the link"
    );
    ph.remove_all().unwrap();
    assert!(std::fs::symlink_metadata(home.join(".claude"))
        .unwrap()
        .is_symlink());
}

/// Placeholders are removed deepest first, and only while they are still what was made: a file
/// someone filled in, and a folder someone put a file in, stay.
#[test]
fn placeholders_are_removed_only_while_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (home, state) = (root.join("home"), root.join("state"));
    std::fs::create_dir(&home).unwrap();
    std::fs::create_dir(&state).unwrap();
    let mut ph = Placeholders::open(&state).unwrap();
    for (p, d) in [
        (".git/hooks", true),
        (".git/config", false),
        (".bashrc", false),
        (".ssh", true),
    ] {
        assert!(ph.ensure(&home.join(p), d).unwrap(), "{p}");
    }
    let meta = std::fs::metadata(home.join(".bashrc")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.len(), 0);
    std::fs::write(home.join(".bashrc"), "export A=1\n").unwrap();
    std::fs::write(home.join(".ssh/known_hosts"), "x\n").unwrap();
    // A second host process reads the record the first one wrote.
    let mut again = Placeholders::open(&state).unwrap();
    again.remove_all().unwrap();
    let mut left: Vec<String> = std::fs::read_dir(&home)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, [".bashrc", ".ssh"]);
    assert!(!state.join("placeholders").exists());
}
