//! `scripts/release`: a tarball for a machine without a checkout, with relay's four programs
//! (relay-host, relay-shim, relay-net-forward, relay-stand-in), the licence files, the
//! completions and the man pages, and a `SHA256SUMS` file for it beside it.

use super::*;

#[test]
fn the_release_tarball_holds_both_binaries_completions_and_man_pages() {
    let out_dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/release");
    let bins = relay_tests::relay_host().parent().unwrap().to_path_buf();
    let out = Command::new(&script)
        .arg("--from")
        .arg(&bins)
        .arg("--out")
        .arg(out_dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tarball = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let unpacked = tempfile::tempdir().unwrap();
    let tar = Command::new("tar")
        .args(["-xzf", &tarball, "--strip-components=1", "-C"])
        .arg(unpacked.path())
        .status()
        .unwrap();
    assert!(tar.success());
    for f in [
        "bin/relay-host",
        "bin/relay-shim",
        "bin/relay-net-forward",
        "bin/relay-stand-in",
        "share/man/man1/relay-host.1",
        "share/man/man1/relay-host-ps.1",
        "share/bash-completion/completions/relay-host",
        "share/zsh/site-functions/_relay-host",
        "share/fish/vendor_completions.d/relay-host.fish",
        "share/doc/relay/LICENSE-MIT",
        "share/doc/relay/LICENSE-APACHE",
    ] {
        assert!(
            unpacked.path().join(f).is_file(),
            "{f} missing from {tarball}"
        );
    }
    // The licence files are the checkout's own.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for f in ["LICENSE-MIT", "LICENSE-APACHE"] {
        let packed = std::fs::read(unpacked.path().join("share/doc/relay").join(f)).unwrap();
        assert_eq!(packed, std::fs::read(root.join(f)).unwrap(), "{f}");
    }
    // SHA256SUMS beside the tarball names it, and its sum checks.
    let sums = std::fs::read_to_string(out_dir.path().join("SHA256SUMS")).unwrap();
    let name = Path::new(&tarball).file_name().unwrap().to_str().unwrap();
    assert_eq!(sums.lines().count(), 1, "{sums}");
    assert!(sums.trim_end().ends_with(&format!("  {name}")), "{sums}");
    let check = Command::new("sha256sum")
        .args(["--check", "--strict", "SHA256SUMS"])
        .current_dir(out_dir.path())
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let v = Command::new(unpacked.path().join("bin/relay-host"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(v.status.success() && String::from_utf8_lossy(&v.stdout).starts_with("relay-host "));
    let bash = std::fs::read_to_string(
        unpacked
            .path()
            .join("share/bash-completion/completions/relay-host"),
    )
    .unwrap();
    assert!(
        bash.contains("templates") && bash.contains("ps"),
        "completions know the commands"
    );
}
