//! `scripts/release`: a tarball for a machine without a checkout, with relay's four programs
//! (relay-host, relay-shim, relay-net-forward, relay-stand-in), the licence files, the
//! completions and the man pages, and a `SHA256SUMS` file for it beside it. Built by anyone,
//! it is safe to unpack as root (every entry 0:0, modes without group or other write), and two
//! builds of the same programs give one `SHA256SUMS`.

use std::os::unix::fs::MetadataExt;

use super::*;

/// The uid and gid of the unprivileged builder (`nobody`).
const NOBODY: u32 = 65534;

/// `scripts/release --from BINS --out OUT --target TRIPLE` (the target named, as `rustc` is not
/// on nobody's `PATH`) run through `wrap` (empty: as this
/// process's user, root) with `SOURCE_DATE_EPOCH` set to `epoch` (`None`: unset); the tarball's
/// path it printed.
fn release(wrap: &[&str], out: &Path, epoch: Option<&str>) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/release");
    let bins = relay_tests::relay_host().parent().unwrap().to_path_buf();
    let mut cmd = match wrap.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(&script);
            c
        }
        None => Command::new(&script),
    };
    cmd.arg("--from")
        .arg(&bins)
        .arg("--out")
        .arg(out)
        .arg("--target")
        .arg(format!("{}-unknown-linux-gnu", std::env::consts::ARCH));
    match epoch {
        Some(e) => cmd.env("SOURCE_DATE_EPOCH", e),
        None => cmd.env_remove("SOURCE_DATE_EPOCH"),
    };
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

/// Every entry of `tarball` as `tar -tvz --numeric-owner` lists it: (mode, "uid/gid", mtime
/// seconds, path).
fn entries(tarball: &str) -> Vec<(String, String, i64, String)> {
    let o = Command::new("tar")
        .args(["-tvzf", tarball, "--numeric-owner", "--full-time", "--utc"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let when = utc_seconds(f[3], f[4]);
            (f[0].to_string(), f[1].to_string(), when, f[5..].join(" "))
        })
        .collect()
}

/// `YYYY-MM-DD` `HH:MM:SS` (UTC) as seconds since the epoch, by `date`.
fn utc_seconds(day: &str, time: &str) -> i64 {
    let o = Command::new("date")
        .args(["-u", "-d", &format!("{day} {time}"), "+%s"])
        .output()
        .unwrap();
    String::from_utf8(o.stdout).unwrap().trim().parse().unwrap()
}

#[test]
fn a_release_built_by_nobody_unpacks_as_root_owned_by_root_and_two_builds_give_one_sum() {
    let nobody = NOBODY.to_string();
    let (reuid, regid) = (format!("--reuid={nobody}"), format!("--regid={nobody}"));
    let wrap = ["setpriv", &reuid, &regid, "--clear-groups"];
    // Two builds by nobody, each in a folder it owns, a second apart (so a time of the build
    // would differ), with one SOURCE_DATE_EPOCH.
    let epoch = "1700000000";
    let mut sums = Vec::new();
    let mut tarballs = Vec::new();
    let outs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    for (i, out) in outs.iter().enumerate() {
        std::os::unix::fs::chown(out.path(), Some(NOBODY), Some(NOBODY)).unwrap();
        if i > 0 {
            std::thread::sleep(Duration::from_millis(1100));
        }
        let tarball = release(&wrap, out.path(), Some(epoch));
        assert_eq!(
            std::fs::metadata(&tarball).unwrap().uid(),
            NOBODY,
            "nobody built it"
        );
        sums.push(std::fs::read_to_string(out.path().join("SHA256SUMS")).unwrap());
        tarballs.push(tarball);
    }
    assert_eq!(sums[0], sums[1], "two builds of the same programs, one sum");
    // Every entry: owned 0:0, the epoch's mtime, no group or other write, sorted by name.
    let listed = entries(&tarballs[0]);
    assert!(listed.len() > 10, "{listed:?}");
    for (mode, owner, mtime, path) in &listed {
        assert_eq!(owner, "0/0", "{path}");
        assert_eq!(mtime.to_string(), epoch, "{path}");
        assert_eq!(&mode[5..6], "-", "group write on {path}: {mode}");
        assert_eq!(&mode[8..9], "-", "other write on {path}: {mode}");
    }
    let names: Vec<&String> = listed.iter().map(|e| &e.3).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "entries sorted by name");
    // The gzip header holds no time (bytes 4..8, MTIME) and no file name (FLG's FNAME bit).
    let gz = std::fs::read(&tarballs[0]).unwrap();
    assert_eq!(&gz[4..8], &[0, 0, 0, 0], "gzip MTIME");
    assert_eq!(gz[3] & 0x08, 0, "gzip FNAME");

    // Unpacked as root into a root-owned prefix that already has bin/, share/ and share/man/,
    // both with the README's line (`--no-same-owner`) and without it: every file and folder is
    // root's, and the folders that were there keep their owner and mode.
    for extra in [&["--no-same-owner"][..], &[][..]] {
        let prefix = tempfile::tempdir().unwrap();
        for d in ["bin", "share", "share/man"] {
            std::fs::create_dir(prefix.path().join(d)).unwrap();
            std::fs::set_permissions(
                prefix.path().join(d),
                std::os::unix::fs::PermissionsExt::from_mode(0o755),
            )
            .unwrap();
        }
        let tar = Command::new("tar")
            .args(["-xzf", &tarballs[0]])
            .args(extra)
            .args(["-C"])
            .arg(prefix.path())
            .arg("--strip-components=1")
            .status()
            .unwrap();
        assert!(tar.success());
        let mut n = 0;
        let mut stack = vec![prefix.path().to_path_buf()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let path = e.unwrap().path();
                let m = std::fs::symlink_metadata(&path).unwrap();
                assert_eq!((m.uid(), m.gid()), (0, 0), "{extra:?}: {}", path.display());
                assert_eq!(
                    m.mode() & 0o022,
                    0,
                    "{extra:?}: group or other write on {}",
                    path.display()
                );
                if m.is_dir() {
                    stack.push(path);
                }
                n += 1;
            }
        }
        assert!(n > 10, "{n} entries unpacked");
        for d in ["bin", "share", "share/man"] {
            let m = std::fs::metadata(prefix.path().join(d)).unwrap();
            assert_eq!(
                (m.uid(), m.gid(), m.mode() & 0o7777),
                (0, 0, 0o755),
                "{extra:?}: {d}"
            );
        }
    }
}

#[test]
fn without_source_date_epoch_the_entries_carry_the_last_commits_time() {
    let out = tempfile::tempdir().unwrap();
    let tarball = release(&[], out.path(), None);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let git = Command::new("git")
        .args(["log", "-1", "--format=%ct"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(git.status.success());
    let commit: i64 = String::from_utf8(git.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for (_, _, mtime, path) in entries(&tarball) {
        assert_eq!(mtime, commit, "{path}");
    }
}

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
        "share/doc/relay/relay-host.md",
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
