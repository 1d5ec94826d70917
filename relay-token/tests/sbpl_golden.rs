//! SBPL text for macOS `sandbox-exec`, checked as text against golden files in `tests/golden/`
//! (no Mac here). The fixture's folder is written `@ROOT@` in the golden files. Run with
//! `UPDATE_GOLDEN=1` to rewrite them, then read the diff.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use relay_token::sandbox::{Profile, Resolved};

struct Fx {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

/// A root-owned 0755 folder under /var/tmp (links are not crossed here, but keep to the same
/// ground as the attack tests).
fn fixture(home_name: &str, shared: bool) -> (Fx, PathBuf) {
    let base = Path::new("/var/tmp/relay-token-sbpl-tests");
    std::fs::create_dir_all(base).unwrap();
    let dir = tempfile::Builder::new()
        .prefix("g")
        .tempdir_in(base)
        .unwrap();
    let root = dir.path().to_path_buf();
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

fn golden(name: &str, fx: &Fx, text: &str) {
    let root = fx.root.to_str().unwrap();
    let text = text.replace(root, "@ROOT@");
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text, want, "{name} differs from its golden file");
}

/// Every deny comes after every allow, and every ancestor of `masked` (from `/` down) has its
/// `file-write-unlink` denied.
fn check_shape(text: &str, masked: &Path) {
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(&lines[..2], ["(version 1)", "(deny default)"]);
    let last_allow = lines.iter().rposition(|l| l.starts_with("(allow")).unwrap();
    let first_deny = lines
        .iter()
        .position(|l| l.starts_with("(deny file-read* file-write*"))
        .unwrap();
    assert!(first_deny > last_allow, "a deny before a grant:\n{text}");
    for a in masked.ancestors().skip(1) {
        let q = a
            .to_str()
            .unwrap()
            .replace('\\', "\\\\")
            .replace('"', "\\\"");
        let want = format!("(deny file-write-unlink (literal \"{q}\"))");
        assert!(lines.contains(&want.as_str()), "missing {want}:\n{text}");
    }
}

#[test]
fn no_token() {
    let (fx, home) = fixture("home", false);
    let r = profile(&fx, &home, false);
    let text = r.sbpl();
    assert!(!text.contains("(deny file-read*"));
    assert!(!text.contains("file-write-unlink"));
    golden("no-token.sb", &fx, &text);
}

#[test]
fn token_in_a_dedicated_folder() {
    let (fx, home) = fixture("home", false);
    let r = profile(&fx, &home, true);
    let text = r.sbpl();
    let masked = home.join(".config/acme-ltt");
    assert!(text.contains(&format!(
        "(deny file-read* file-write* (subpath \"{}\"))",
        masked.display()
    )));
    check_shape(&text, &masked);
    // The same as without the token, plus the denies at the end.
    let without = profile(&fx, &home, false).sbpl();
    assert!(text.starts_with(&without));
    golden("dedicated.sb", &fx, &text);
}

#[test]
fn token_in_a_shared_folder() {
    let (fx, home) = fixture("home", true);
    let r = profile(&fx, &home, true);
    let text = r.sbpl();
    let masked = home.join(".config/acme-ltt/token");
    assert!(text.contains(&format!(
        "(deny file-read* file-write* (literal \"{}\"))",
        masked.display()
    )));
    check_shape(&text, &masked);
    golden("shared.sb", &fx, &text);
}

#[test]
fn a_path_that_needs_quoting() {
    let (fx, home) = fixture(r#"we "ird\ home"#, false);
    let r = profile(&fx, &home, true);
    let text = r.sbpl();
    assert!(text.contains(r#"/we \"ird\\ home/.config/acme-ltt"))"#));
    check_shape(&text, &home.join(".config/acme-ltt"));
    golden("quoting.sb", &fx, &text);
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
