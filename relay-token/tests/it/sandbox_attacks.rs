//! The sandbox against a real `bwrap`: attacks on the token from inside, as root and as uid 65534.
//!
//! Each fixture lives under a root-owned 0755 folder in /var/tmp (not the sticky /tmp, whose
//! links a session could have made). The token is readable by the sandbox user without the
//! deny (see `control_without_deny_the_token_is_readable`), so every attack below can fail.

use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd, RawFd};
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use relay_token::sandbox::{
    expand_grant, find_bwrap, BwrapFeatures, Profile, Resolved, SandboxError,
};
use relay_token::FdMap;

const NOBODY: u32 = 65534;

#[derive(Clone, Copy, Debug, PartialEq)]
enum User {
    /// Whoever runs the tests (root on the test machine).
    Me,
    /// uid/gid 65534 through `setpriv`.
    Nobody,
}

fn users() -> Vec<User> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        vec![User::Me, User::Nobody]
    } else {
        vec![User::Me]
    }
}

fn chown_r(p: &Path, uid: u32) {
    let st = Command::new("chown")
        .arg("-R")
        .arg(format!("{uid}:{uid}"))
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success());
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A fresh root-owned 0755 folder under a root-owned 0755 base in /var/tmp.
fn root_dir() -> tempfile::TempDir {
    let base = Path::new("/var/tmp/relay-token-sandbox-tests");
    std::fs::create_dir_all(base).unwrap();
    chmod(base, 0o755);
    let dir = tempfile::Builder::new()
        .prefix("t")
        .tempdir_in(base)
        .unwrap();
    chmod(dir.path(), 0o755);
    dir
}

struct Fx {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    config: PathBuf,
    token_dir: PathBuf,
    token: PathBuf,
    secret: String,
    tmp: PathBuf,
    state: PathBuf,
}

fn secret() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("sk-ant-oat01-SANDBOXTEST{nanos:x}p{}", std::process::id())
}

/// `<root>/home/.config/acme-ltt/token`, plus a session temp folder and a state folder.
/// For `User::Nobody` the home and temp folder belong to 65534 and the token is mode 0644, so
/// only the sandbox stands between that user and the token.
fn fixture(user: User) -> Fx {
    let dir = root_dir();
    let root = dir.path().to_path_buf();
    let home = root.join("home");
    let config = home.join(".config");
    let token_dir = config.join("acme-ltt");
    let token = token_dir.join("token");
    std::fs::create_dir_all(&token_dir).unwrap();
    // 0755 whatever the umask: a group-writable folder is one a session could have written.
    for d in [&home, &config, &token_dir] {
        chmod(d, 0o755);
    }
    let secret = secret();
    std::fs::write(&token, format!("{secret}\n")).unwrap();
    chmod(&token, 0o644);
    std::fs::write(home.join("notes.txt"), "hello\n").unwrap();
    let tmp = root.join("session-tmp");
    std::fs::create_dir(&tmp).unwrap();
    let state = root.join("state");
    std::fs::create_dir(&state).unwrap();
    // 0711: bwrap, run as 65534 here, must reach the mask file in it by path.
    chmod(&state, 0o711);
    if user == User::Nobody {
        chown_r(&home, NOBODY);
        chown_r(&tmp, NOBODY);
    }
    Fx {
        _dir: dir,
        root,
        home,
        config,
        token_dir,
        token,
        secret,
        tmp,
        state,
    }
}

impl Fx {
    /// `<home>` read-write, `<home>/.config` read, the token denied.
    fn profile(&self) -> Profile {
        let mut p = Profile::new();
        p.read_write(self.home.clone())
            .read(self.config.clone())
            .deny(self.token.clone())
            .project(self.home.clone())
            .tmp(self.tmp.clone())
            .command_dir(PathBuf::from("/usr/bin"))
            .state_dir(self.state.clone());
        p
    }

    fn resolve(&self, p: &Profile) -> Resolved {
        p.resolve(std::slice::from_ref(&self.home)).unwrap()
    }
}

fn bwrap() -> PathBuf {
    find_bwrap(None).expect("bwrap must be installed and working for these tests")
}

/// `/bin/sh -c SCRIPT`.
fn sh(script: &str) -> [OsString; 3] {
    [
        OsString::from("/bin/sh"),
        OsString::from("-c"),
        OsString::from(script),
    ]
}

fn command(user: User, r: &Resolved, script: &str) -> Command {
    command_argv(user, &r.bwrap_argv(&bwrap(), &sh(script)))
}

/// `argv` (bwrap first) run as `user`, stdin `/dev/null`, stdout and stderr piped.
fn command_argv(user: User, argv: &[OsString]) -> Command {
    let mut cmd = match user {
        User::Me => Command::new(&argv[0]),
        User::Nobody => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&argv[0]);
            c
        }
    };
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn output_text(out: &Output) -> (i32, String) {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn run(user: User, r: &Resolved, script: &str) -> (i32, String) {
    output_text(&command(user, r, script).output().unwrap())
}

/// Runs `script` in the sandbox of `r`, which binds by descriptor (`bind_by_fd` called): bwrap
/// gets each of `r.bind_fds()` at its number and each of `extra` at its number, through
/// `FdMap` (nothing else above 2), and with `status` `--json-status-fd N` right after its name
/// (as the host does).
fn run_by_fd(
    user: User,
    r: &Resolved,
    script: &str,
    extra: &[(BorrowedFd<'_>, RawFd)],
    status: Option<RawFd>,
) -> (i32, String) {
    let mut argv = r.bwrap_argv(&bwrap(), &sh(script));
    if let Some(n) = status {
        argv.splice(
            1..1,
            [OsString::from("--json-status-fd"), n.to_string().into()],
        );
    }
    let binds = r.bind_fds();
    assert!(!binds.is_empty(), "a sandbox bound by descriptor");
    let mut map = FdMap::new();
    for &(fd, n) in binds.iter().chain(extra) {
        map.place(fd, n).unwrap();
    }
    // The other tests' threads open and close descriptors at these numbers too: `FdMap` then
    // refuses the spawn (`EAGAIN`, nothing ran) rather than place whatever sits there now. Its
    // callers try again, with a fresh command.
    for _ in 0..20 {
        match map.spawn(&mut command_argv(user, &argv)) {
            Ok(child) => return output_text(&child.wait_with_output().unwrap()),
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => continue,
            Err(e) => panic!("spawn bwrap: {e}"),
        }
    }
    panic!("spawn bwrap: EAGAIN 20 times");
}

/// Asserts an attack's outcome: a non-zero exit, no token in what it printed, the token file
/// on the host untouched.
fn assert_attack_failed(fx: &Fx, user: User, name: &str, (code, text): (i32, String)) {
    assert!(
        !text.contains(&fx.secret),
        "{name} as {user:?}: the token leaked:\n{text}"
    );
    assert_ne!(code, 0, "{name} as {user:?}: the attack succeeded:\n{text}");
    assert_eq!(
        std::fs::read_to_string(&fx.token).unwrap(),
        format!("{}\n", fx.secret),
        "{name} as {user:?}: the token file changed"
    );
}

/// Runs `script`; it must exit non-zero and nothing printed may hold the token.
fn attack_fails(fx: &Fx, user: User, r: &Resolved, name: &str, script: &str) {
    assert_attack_failed(fx, user, name, run(user, r, script));
}

/// Every file under the fixture except the token itself is free of the token's bytes.
fn no_copy_on_host(fx: &Fx) {
    fn walk(p: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(p).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                walk(&e.path(), out);
            } else if t.is_file() {
                out.push(e.path());
            }
        }
    }
    let mut files = Vec::new();
    walk(&fx.root, &mut files);
    for f in files {
        if f == fx.token {
            continue;
        }
        let bytes = std::fs::read(&f).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(&fx.secret),
            "{f:?} holds a copy of the token"
        );
    }
}

#[test]
fn control_without_deny_the_token_is_readable() {
    // Proves the attacks below can fail: the same sandbox minus the deny shows the token.
    for user in users() {
        let fx = fixture(user);
        let mut p = Profile::new();
        p.read_write(fx.home.clone())
            .read(fx.config.clone())
            .project(fx.home.clone())
            .tmp(fx.tmp.clone());
        let r = fx.resolve(&p);
        let (code, text) = run(user, &r, &format!("cat '{}'", fx.token.display()));
        assert_eq!(code, 0, "{user:?}: {text}");
        assert!(text.contains(&fx.secret), "{user:?}: {text}");
    }
}

#[test]
fn attacks_on_a_token_in_a_dedicated_folder() {
    for user in users() {
        let fx = fixture(user);
        let r = fx.resolve(&fx.profile());
        assert_eq!(r.masked(), vec![fx.token_dir.clone()]);
        let (t, d, c, h) = (
            fx.token.display().to_string(),
            fx.token_dir.display().to_string(),
            fx.config.display().to_string(),
            fx.home.display().to_string(),
        );
        let attacks = [
            ("cat", format!("cat '{t}'")),
            ("ls folder", format!("ls -la '{d}'")),
            (
                "symlink made inside",
                format!("ln -s '{t}' '{h}/lnk' && cat '{h}/lnk'"),
            ),
            ("cp", format!("cp '{t}' '{h}/copy' && cat '{h}/copy'")),
            (
                "hard link",
                format!("ln '{t}' '{h}/hard' && cat '{h}/hard'"),
            ),
            (
                "mv token",
                format!("mv '{t}' '{h}/moved' && cat '{h}/moved'"),
            ),
            (
                "mv folder",
                format!("mv '{d}' '{h}/dmoved' && cat '{h}/dmoved/token'"),
            ),
            ("rmdir folder", format!("rmdir '{d}'")),
            (
                "mv .config",
                format!("mv '{c}' '{h}/cmoved' && cat '{h}/cmoved/acme-ltt/token'"),
            ),
            ("rmdir .config", format!("rmdir '{c}'")),
            ("umount", format!("umount '{d}'; cat '{t}'")),
            (
                "umount -l",
                format!("umount -l '{d}'; umount -l '{c}'; cat '{t}'"),
            ),
            (
                "nested unshare",
                format!("unshare -Urm sh -c \"umount -l '{d}'; umount -l '{c}'; cat '{t}'\""),
            ),
            ("/proc/1/root", format!("cat '/proc/1/root{t}'")),
            ("/proc/self/root", format!("cat '/proc/self/root{t}'")),
            ("chmod mask", format!("chmod 755 '{d}' ; cat '{t}'")),
        ];
        for (name, script) in &attacks {
            attack_fails(&fx, user, &r, name, script);
        }
        no_copy_on_host(&fx);
    }
}

#[test]
fn writes_elsewhere_in_home_still_work() {
    for user in users() {
        let fx = fixture(user);
        let r = fx.resolve(&fx.profile());
        let h = fx.home.display();
        let (code, text) = run(
            user,
            &r,
            &format!(
                "echo written > '{h}/new.txt' && mkdir '{h}/newdir' && mv '{h}/notes.txt' \
                 '{h}/newdir/notes.txt' && cat '{h}/newdir/notes.txt' && echo tmp > /tmp/x && \
                 test \"$(pwd)\" = '{h}'"
            ),
        );
        assert_eq!(code, 0, "{user:?}: {text}");
        assert_eq!(text, "hello\n");
        assert_eq!(
            std::fs::read_to_string(fx.home.join("new.txt")).unwrap(),
            "written\n"
        );
        assert!(fx.home.join("newdir/notes.txt").exists());
        // The private /tmp is the session's temp folder.
        assert_eq!(std::fs::read_to_string(fx.tmp.join("x")).unwrap(), "tmp\n");
    }
}

#[test]
fn decoy_config_cannot_be_planted() {
    for user in users() {
        let fx = fixture(user);
        // Only the home is granted: `.config` is guarded by a bind onto itself.
        let mut p = Profile::new();
        p.read_write(fx.home.clone())
            .deny(fx.token.clone())
            .project(fx.home.clone())
            .tmp(fx.tmp.clone());
        for prof in [p, fx.profile()] {
            let r = fx.resolve(&prof);
            let (c, h) = (fx.config.display(), fx.home.display());
            let (code, text) = run(
                user,
                &r,
                &format!("mv '{c}' '{h}/aside' || exit 3; mkdir -p '{c}/acme-ltt' && echo planted"),
            );
            assert_eq!(code, 3, "{user:?}: the move worked: {text}");
            assert!(!text.contains("planted"));
            assert!(!fx.home.join("aside").exists());
            assert_eq!(
                std::fs::read_to_string(&fx.token).unwrap(),
                format!("{}\n", fx.secret)
            );
            // The token's folder cannot be moved aside either.
            let d = fx.token_dir.display();
            let (code, text) = run(user, &r, &format!("mv '{d}' '{c}/aside' || exit 3"));
            assert_eq!(code, 3, "{user:?}: {text}");
        }
    }
}

#[test]
fn a_token_replaced_by_rename_stays_hidden() {
    for user in users() {
        let fx = fixture(user);
        let r = fx.resolve(&fx.profile());
        let t = fx.token.display();
        let script = format!(
            "touch /tmp/ready; i=0; while [ ! -e /tmp/go ] && [ $i -lt 1500 ]; \
             do sleep 0.02; i=$((i + 1)); done; cat '{t}'; echo rc=$?"
        );
        let child = command(user, &r, &script).spawn().unwrap();
        let start = Instant::now();
        while !fx.tmp.join("ready").exists() {
            assert!(start.elapsed() < Duration::from_secs(10), "never started");
            std::thread::sleep(Duration::from_millis(10));
        }
        // The host writes a new token beside the old one and renames it into place.
        let new_secret = format!("{}NEW", secret());
        let staged = fx.token_dir.join("token.new");
        std::fs::write(&staged, format!("{new_secret}\n")).unwrap();
        chmod(&staged, 0o644);
        std::fs::rename(&staged, &fx.token).unwrap();
        std::fs::write(fx.tmp.join("go"), "").unwrap();
        let out = child.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains(&new_secret), "{user:?}: {text}");
        assert!(!text.contains(&fx.secret), "{user:?}: {text}");
        assert!(text.contains("rc=1"), "{user:?}: {text}");
    }
}

#[test]
fn a_token_in_a_shared_folder_is_masked_as_a_file() {
    for user in users() {
        let fx = fixture(user);
        // Another file beside the token: the file alone is masked.
        std::fs::write(fx.token_dir.join("other.txt"), "other\n").unwrap();
        if user == User::Nobody {
            chown_r(&fx.token_dir, NOBODY);
        }
        let r = fx.resolve(&fx.profile());
        assert_eq!(r.masked(), vec![fx.token.clone()]);
        let mask = fx.state.join(relay_token::sandbox::MASK_FILE_NAME);
        let meta = std::fs::metadata(&mask).unwrap();
        assert_eq!((meta.len(), meta.permissions().mode() & 0o7777), (0, 0));

        let (t, d, h) = (
            fx.token.display().to_string(),
            fx.token_dir.display().to_string(),
            fx.home.display().to_string(),
        );
        let (code, text) = run(user, &r, &format!("cat '{d}/other.txt'"));
        assert_eq!((code, text.as_str()), (0, "other\n"), "{user:?}");
        let attacks = [
            ("cat", format!("cat '{t}'")),
            ("cp", format!("cp '{t}' '{h}/copy' && cat '{h}/copy'")),
            (
                "hard link",
                format!("ln '{t}' '{h}/hard' && cat '{h}/hard'"),
            ),
            (
                "mv token",
                format!("mv '{t}' '{h}/moved' && cat '{h}/moved'"),
            ),
            (
                "rm token",
                format!("rm -f '{t}' && echo x > '{t}' && cat '{t}'"),
            ),
            ("chmod", format!("chmod 644 '{t}'; cat '{t}'")),
            (
                "mv folder",
                format!("mv '{d}' '{h}/dmoved' && cat '{h}/dmoved/token'"),
            ),
            ("umount", format!("umount -l '{t}'; cat '{t}'")),
            (
                "nested unshare",
                format!("unshare -Urm sh -c \"umount -l '{t}'; cat '{t}'\""),
            ),
            ("/proc/1/root", format!("cat '/proc/1/root{t}'")),
        ];
        for (name, script) in &attacks {
            attack_fails(&fx, user, &r, name, script);
        }
        no_copy_on_host(&fx);
    }
}

#[test]
fn a_shared_folder_without_a_state_folder_is_refused() {
    let fx = fixture(User::Me);
    std::fs::write(fx.token_dir.join("other.txt"), "other\n").unwrap();
    let mut p = Profile::new();
    p.read_write(fx.home.clone()).deny(fx.token.clone());
    let err = p.resolve(std::slice::from_ref(&fx.home)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "deny {:?}: its folder holds other files, and no state folder was given for the \
             empty file that masks it",
            fx.token
        )
    );
    // A state folder inside a read-write grant is refused: a session could swap the mask.
    p.state_dir(fx.home.clone());
    let err = p.resolve(std::slice::from_ref(&fx.home)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "state folder {:?}: lies inside a read-write grant, where a session could replace \
             the mask",
            fx.home
        )
    );
}

fn link_refused(fx: &Fx, deny: &Path, link: &Path) {
    let mut p = Profile::new();
    p.read_write(fx.home.clone()).deny(deny.to_path_buf());
    let err = p.resolve(std::slice::from_ref(&fx.home)).unwrap_err();
    assert_eq!(
        err,
        SandboxError::DenyFollowsLink {
            path: deny.to_path_buf(),
            link: link.to_path_buf()
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "deny \"{}\" follows symlink \"{}\", which a sandboxed session could have made",
            deny.display(),
            link.display()
        )
    );
}

#[test]
fn links_a_session_could_have_made_are_refused() {
    let fx = fixture(User::Me);
    // 1. In a folder inside a read-write grant (root-owned 0755, so only the grant counts).
    let link = fx.home.join("cfg");
    symlink(&fx.config, &link).unwrap();
    link_refused(&fx, &link.join("acme-ltt/token"), &link);

    // ... also when the grant belongs to another template only.
    let other = fx.root.join("other-template");
    std::fs::create_dir(&other).unwrap();
    chmod(&other, 0o755);
    let link2 = other.join("cfg");
    symlink(&fx.config, &link2).unwrap();
    let mut p = Profile::new();
    p.read(fx.home.clone()).deny(link2.join("acme-ltt/token"));
    let err = p.resolve(std::slice::from_ref(&other)).unwrap_err();
    assert!(matches!(err, SandboxError::DenyFollowsLink { ref link, .. } if *link == link2));
    // ... and the same link is accepted when no template can write there.
    let r = p.resolve(&[]).unwrap();
    assert_eq!(r.masked(), vec![fx.token_dir.clone()]);

    // 2. In a folder not owned by root.
    let theirs = fx.root.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    chown_r(&theirs, NOBODY);
    let link = theirs.join("cfg");
    symlink(&fx.config, &link).unwrap();
    link_refused(&fx, &link.join("acme-ltt/token"), &link);

    // 3. In a root-owned folder writable by group, or by others.
    for (i, mode) in [0o775, 0o757, 0o1777].into_iter().enumerate() {
        let open = fx.root.join(format!("open{i}"));
        std::fs::create_dir(&open).unwrap();
        chmod(&open, mode);
        let link = open.join("cfg");
        symlink(&fx.config, &link).unwrap();
        link_refused(&fx, &link.join("acme-ltt/token"), &link);
    }

    // 4. The token file itself is a link in a folder a session could write.
    let tok_link = fx.home.join("tok");
    symlink(&fx.token, &tok_link).unwrap();
    link_refused(&fx, &tok_link, &tok_link);

    // 5. A link met after another link: a safe link to a link in the sticky /tmp itself.
    let in_tmp = PathBuf::from(format!("/tmp/relay-sbx-{}", secret()));
    symlink(&fx.config, &in_tmp).unwrap();
    let safe = fx.root.join("safe");
    std::fs::create_dir(&safe).unwrap();
    chmod(&safe, 0o755);
    let hop = safe.join("hop");
    symlink(&in_tmp, &hop).unwrap();
    let result = std::panic::catch_unwind(|| {
        link_refused(&fx, &hop.join("acme-ltt/token"), &in_tmp);
    });
    std::fs::remove_file(&in_tmp).unwrap();
    result.unwrap();
    // A link in a root-owned 0700 folder under /tmp is judged by that folder: accepted.
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    chmod(dir.path(), 0o700); // tempfile leaves the mode to the umask
    let in_private = dir.path().join("cfg");
    symlink(&fx.config, &in_private).unwrap();
    let mut p = Profile::new();
    p.deny(in_private.join("acme-ltt/token"));
    assert_eq!(p.resolve(&[]).unwrap().masked(), vec![fx.token_dir.clone()]);
}

#[test]
fn a_link_in_a_root_owned_folder_outside_every_grant_is_followed() {
    for user in users() {
        let fx = fixture(user);
        let safe = fx.root.join("safe");
        std::fs::create_dir(&safe).unwrap();
        chmod(&safe, 0o755);
        let link = safe.join("ltt");
        symlink(&fx.token_dir, &link).unwrap();
        let via_link = link.join("token");

        let mut p = Profile::new();
        p.read_write(fx.home.clone())
            .read(safe.clone())
            .deny(via_link.clone())
            .project(fx.home.clone())
            .tmp(fx.tmp.clone());
        let r = p.resolve(std::slice::from_ref(&fx.home)).unwrap();
        assert_eq!(r.masked(), vec![fx.token_dir.clone()]);
        assert_eq!(r.denied_real_paths(), vec![fx.token.clone()]);
        assert_eq!(r.denied_paths(), vec![via_link.clone()]);
        attack_fails(
            &fx,
            user,
            &r,
            "through the link",
            &format!("cat '{}'", via_link.display()),
        );
        attack_fails(
            &fx,
            user,
            &r,
            "the real path",
            &format!("cat '{}'", fx.token.display()),
        );
    }
}

#[test]
fn bad_grants_are_refused() {
    let home = Path::new("/home/op");
    for (value, msg) in [
        (
            "/",
            r#"grant "/": granting the whole file system is refused"#,
        ),
        (
            "/usr/..",
            r#"grant "/usr/..": granting the whole file system is refused"#,
        ),
        (
            "src/app",
            r#"grant "src/app": must be absolute, or start with ~/ or {project}"#,
        ),
        (
            "~op/x",
            r#"grant "~op/x": ~user/ is not supported: must be absolute, or start with ~/ or {project}"#,
        ),
        (
            "/srv/a\nb",
            r#"grant "/srv/a\nb": holds control characters"#,
        ),
        (
            "/srv/a\u{1b}[2J",
            r#"grant "/srv/a\u{1b}[2J": holds control characters"#,
        ),
    ] {
        let err = expand_grant(value, home, None).unwrap_err();
        assert_eq!(err.to_string(), msg);
    }
    // `~` alone is the home folder (the built-in `shell` template's grant, as written).
    assert_eq!(expand_grant("~", home, None).unwrap(), home);

    // At resolve time: a grant that is a link to `/`, a relative one, a real path with a
    // control character.
    let fx = fixture(User::Me);
    let to_root = fx.root.join("to-root");
    symlink("/", &to_root).unwrap();
    let mut p = Profile::new();
    p.read(to_root.clone());
    assert_eq!(
        p.resolve(&[]).unwrap_err().to_string(),
        format!(
            "grant {:?}: granting the whole file system is refused",
            to_root.display().to_string()
        )
    );
    let mut p = Profile::new();
    p.read_write(PathBuf::from("relative"));
    assert_eq!(
        p.resolve(&[]).unwrap_err().to_string(),
        r#"grant "relative": must be an absolute path"#
    );
    let odd = fx.root.join("a\nb");
    std::fs::create_dir(&odd).unwrap();
    let mut p = Profile::new();
    p.read(odd.clone());
    assert_eq!(
        p.resolve(&[]).unwrap_err().to_string(),
        format!("grant {odd:?}: holds control characters")
    );
    let link = fx.root.join("plain");
    symlink(&odd, &link).unwrap();
    let mut p = Profile::new();
    p.read(link.clone());
    assert_eq!(
        p.resolve(&[]).unwrap_err().to_string(),
        format!("grant {link:?}: its real path {odd:?} holds control characters")
    );
}

#[test]
fn denies_that_cannot_be_honoured_are_refused() {
    let fx = fixture(User::Me);
    let missing = fx.home.join("nope/token");
    let mut p = Profile::new();
    p.deny(missing.clone());
    assert_eq!(
        p.resolve(&[]).unwrap_err().to_string(),
        format!(
            "deny {missing:?}: {:?}: no such file or directory",
            fx.home.join("nope")
        )
    );
    let mut p = Profile::new();
    p.deny(PathBuf::from("/srv/a\nb/token"));
    assert_eq!(
        p.resolve(&[]).unwrap_err().to_string(),
        r#"deny "/srv/a\nb/token": holds control characters"#
    );
    let mut p = Profile::new();
    p.deny(PathBuf::from("token"));
    assert_eq!(
        p.resolve(&[]).unwrap_err().to_string(),
        r#"deny "token": must be an absolute path"#
    );
    let mut p = Profile::new();
    p.deny(fx.home.join("notes.txt/token"));
    assert_eq!(
        p.resolve(&[]).unwrap_err().to_string(),
        format!(
            "deny {:?}: {:?}: not a directory",
            fx.home.join("notes.txt/token"),
            fx.home.join("notes.txt")
        )
    );
}

fn strs(v: &[&str]) -> Vec<OsString> {
    v.iter().map(OsString::from).collect()
}

/// The bwrap part of an argv, up to and including the first `--` (the mount check and the
/// command follow it).
fn bwrap_part(argv: &[OsString]) -> &[OsString] {
    let sep = argv.iter().position(|a| a == "--").unwrap();
    &argv[..=sep]
}

/// What follows bwrap's `--`: `/bin/sh -c CHECK relay-sandbox-check EXPECTED PATHS` (one
/// `DEV:INO` and one path per line) then the command. Returns the checked paths.
fn checked_paths(argv: &[OsString], command: &[&str]) -> Vec<OsString> {
    let rest = &argv[bwrap_part(argv).len()..];
    assert_eq!(rest[..2], strs(&["/bin/sh", "-c"])[..]);
    assert_eq!(rest[3], "relay-sandbox-check");
    assert_eq!(rest[6..], strs(command)[..]);
    let expected = rest[4].to_str().unwrap().lines().count();
    let paths: Vec<OsString> = rest[5]
        .to_str()
        .unwrap()
        .lines()
        .map(OsString::from)
        .collect();
    assert_eq!(expected, paths.len(), "one DEV:INO per path");
    paths
}

#[test]
fn without_a_deny_the_argv_is_the_same_minus_the_deny_part() {
    let fx = fixture(User::Me);
    let bw = Path::new("/usr/bin/bwrap");
    let cmd = strs(&["/bin/true"]);
    let with = fx.resolve(&fx.profile()).bwrap_argv(bw, &cmd);
    let mut p = Profile::new();
    p.read_write(fx.home.clone())
        .read(fx.config.clone())
        .project(fx.home.clone())
        .tmp(fx.tmp.clone())
        .command_dir(PathBuf::from("/usr/bin"));
    let without = fx.resolve(&p).bwrap_argv(bw, &cmd);
    let d = fx.token_dir.to_str().unwrap();
    let deny_part = strs(&["--perms", "000", "--tmpfs", d, "--remount-ro", d]);
    let at = without.iter().position(|a| a == "--chdir").unwrap();
    let mut expect = without[..at].to_vec();
    expect.extend(deny_part);
    expect.extend_from_slice(&without[at..]);
    assert_eq!(with, expect);
    // The mounts checked inside before the command runs: each bind, and the private /tmp.
    let mut checked = checked_paths(&without, &["/bin/true"]);
    checked.sort();
    let mut want_checked = vec![
        fx.home.clone().into_os_string(),
        fx.config.clone().into_os_string(),
        OsString::from("/tmp"),
    ];
    want_checked.sort();
    assert_eq!(checked, want_checked);

    // The whole argv, exactly: baseline, /dev, /proc, private /tmp, grants shallow first.
    let (h, c, t) = (
        fx.home.to_str().unwrap(),
        fx.config.to_str().unwrap(),
        fx.tmp.to_str().unwrap(),
    );
    let mut want = system_part("/usr/bin/bwrap");
    want.extend(strs(&[
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--bind",
        t,
        "/tmp",
        "--bind",
        h,
        h,
        "--ro-bind",
        c,
        c,
        "--chdir",
        h,
        "--",
    ]));
    assert_eq!(bwrap_part(&without), want);
}

#[test]
fn folders_between_a_grant_and_the_mask_are_bound_onto_themselves() {
    let fx = fixture(User::Me);
    let bw = Path::new("/usr/bin/bwrap");
    let mut p = Profile::new();
    p.read_write(fx.home.clone()).deny(fx.token.clone());
    let argv = fx.resolve(&p).bwrap_argv(bw, &strs(&["/bin/true"]));
    let (c, d) = (fx.config.to_str().unwrap(), fx.token_dir.to_str().unwrap());
    let tail = strs(&[
        "--bind",
        c,
        c,
        "--perms",
        "000",
        "--tmpfs",
        d,
        "--remount-ro",
        d,
        "--",
    ]);
    let argv = bwrap_part(&argv);
    assert_eq!(argv[argv.len() - tail.len()..], tail[..]);

    // Read-only grant: the guard keeps read-only.
    let mut p = Profile::new();
    p.read(fx.home.clone()).deny(fx.token.clone());
    let argv = fx.resolve(&p).bwrap_argv(bw, &strs(&["/bin/true"]));
    let argv = bwrap_part(&argv);
    assert_eq!(
        argv[argv.len() - tail.len()..argv.len() - tail.len() + 3],
        strs(&["--ro-bind", c, c])[..]
    );
}

#[test]
fn the_private_tmp_comes_before_grants_under_tmp() {
    for user in users() {
        let fx = fixture(user);
        let shared = tempfile::tempdir_in("/tmp").unwrap();
        chmod(shared.path(), 0o755);
        std::fs::write(shared.path().join("f"), "shared\n").unwrap();
        chmod(&shared.path().join("f"), 0o644);
        let mut p = fx.profile();
        p.read(shared.path().to_path_buf());
        let r = fx.resolve(&p);
        let argv = r.bwrap_argv(Path::new("bwrap"), &[]);
        let tmp_at = argv
            .windows(3)
            .position(|w| w[0] == "--bind" && w[2] == "/tmp");
        let grant_at = argv.iter().position(|a| a == shared.path().as_os_str());
        assert!(tmp_at.unwrap() < grant_at.unwrap());
        let (code, text) = run(
            user,
            &r,
            &format!("cat '{}/f' && touch /tmp/mine", shared.path().display()),
        );
        assert_eq!((code, text.as_str()), (0, "shared\n"), "{user:?}");
        assert!(fx.tmp.join("mine").exists());
    }
}

#[test]
fn find_bwrap_probes_and_says_how_to_install() {
    let found = bwrap();
    assert!(found.is_absolute());
    assert_eq!(find_bwrap(Some(&found)).unwrap(), found);

    let err = find_bwrap(Some(Path::new("/nonexistent/bwrap"))).unwrap_err();
    assert!(
        err.to_string().contains("apt-get install bubblewrap"),
        "{err}"
    );

    // An executable that is not a working bwrap.
    let dir = root_dir();
    let fake = dir.path().join("bwrap");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'bwrap: no user namespaces' >&2\nexit 1\n",
    )
    .unwrap();
    chmod(&fake, 0o755);
    let err = find_bwrap(Some(&fake)).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("bwrap: no user namespaces"), "{msg}");
    assert!(msg.contains("apt-get install bubblewrap"), "{msg}");
    assert!(matches!(err, SandboxError::BwrapBroken { .. }));
}

#[test]
fn two_denies_do_not_uncover_each_other() {
    for user in users() {
        let fx = fixture(user);
        // A second token, in a folder beside the first: its guard (`.config` bound onto itself)
        // must not be laid over the first token's mask.
        let second_dir = fx.config.join("other-ltt");
        std::fs::create_dir(&second_dir).unwrap();
        let second = second_dir.join("token");
        let second_secret = format!("{}TWO", secret());
        std::fs::write(&second, format!("{second_secret}\n")).unwrap();
        chmod(&second, 0o644);
        if user == User::Nobody {
            chown_r(&fx.config, NOBODY);
        }
        let mut p = Profile::new();
        p.read_write(fx.home.clone())
            .deny(fx.token.clone())
            .deny(second.clone())
            .project(fx.home.clone())
            .tmp(fx.tmp.clone());
        let r = fx.resolve(&p);
        let argv = r.bwrap_argv(Path::new("bwrap"), &[]);
        let c = fx.config.as_os_str();
        let argv = bwrap_part(&argv);
        assert_eq!(argv.iter().filter(|a| *a == c).count(), 2, "one guard");
        for t in [&fx.token, &second] {
            let (code, text) = run(user, &r, &format!("cat '{}'", t.display()));
            assert_ne!(code, 0, "{user:?}: {text}");
            assert!(!text.contains(&fx.secret) && !text.contains(&second_secret));
        }
    }
}

/// The race of the two tests below: `<root>/work/proj` (holding a `marker` file) is granted
/// read-write and resolved, with `<root>/work` another template's read-write grant; `prepare`
/// sees the resolved profile; then a concurrent session's move, after the check and before the
/// mount: the grant is renamed to `proj.real` and replaced by a relative symlink to the token's
/// folder. Returns the profile and the grant's path.
fn resolve_then_swap_grant(
    fx: &Fx,
    user: User,
    prepare: impl FnOnce(&mut Resolved),
) -> (Resolved, PathBuf) {
    let work = fx.root.join("work");
    let proj = work.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(proj.join("marker"), "the checked grant\n").unwrap();
    chmod(&proj.join("marker"), 0o644);
    if user == User::Nobody {
        chown_r(&work, NOBODY);
    }
    let mut p = Profile::new();
    p.read_write(proj.clone())
        .deny(fx.token.clone())
        .project(proj.clone())
        .tmp(fx.tmp.clone())
        .state_dir(fx.state.clone());
    let mut r = p.resolve(&[work.clone(), fx.home.clone()]).unwrap();
    prepare(&mut r);
    std::fs::rename(&proj, work.join("proj.real")).unwrap();
    symlink("../home/.config/acme-ltt", &proj).unwrap();
    (r, proj)
}

#[test]
fn a_grant_swapped_for_a_symlink_after_the_check_is_refused_inside() {
    // TOCTOU: the host checks real paths, bwrap binds by path later. A session that can write
    // the folder holding a grant (here `<root>/work`, another template's read-write grant)
    // swaps the grant for a relative symlink to the token's folder between the two: bwrap
    // follows it and binds the token folder at the grant's place, outside every mask.
    for user in users() {
        let fx = fixture(user);
        let (r, proj) = resolve_then_swap_grant(&fx, user, |_| {});
        attack_fails(
            &fx,
            user,
            &r,
            "grant swapped for a symlink",
            &format!("cat '{}/token'", proj.display()),
        );
        attack_fails(
            &fx,
            user,
            &r,
            "grant swapped for a symlink, write",
            &format!("echo planted > '{}/planted'", proj.display()),
        );
        assert!(
            !fx.token_dir.join("planted").exists(),
            "{user:?}: wrote into the token folder"
        );
    }
}

/// `bwrap`, the namespace flags and the system baseline as this machine has it: the start of
/// every argv.
fn system_part(bw: &str) -> Vec<OsString> {
    let mut want = strs(&[
        bw,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]);
    for base in [
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
    ] {
        let p = Path::new(base);
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_symlink() => {
                want.push("--symlink".into());
                want.push(std::fs::read_link(p).unwrap().into());
                want.push(base.into());
            }
            Ok(m) if m.is_dir() => want.extend(strs(&["--ro-bind", base, base])),
            _ => {}
        }
    }
    want
}

/// `(device, inode)` of what a descriptor holds.
fn fd_ident(fd: BorrowedFd<'_>) -> (u64, u64) {
    let m = std::fs::File::from(fd.try_clone_to_owned().unwrap())
        .metadata()
        .unwrap();
    (m.dev(), m.ino())
}

fn path_ident(p: &Path) -> (u64, u64) {
    let m = std::fs::metadata(p).unwrap();
    (m.dev(), m.ino())
}

#[test]
fn bound_by_descriptor_the_argv_names_numbers_and_runs_no_check() {
    let fx = fixture(User::Me);
    let bw = "/usr/bin/bwrap";
    let mut r = fx.resolve(&fx.profile());
    // Before `bind_by_fd`: no descriptors, the path form with its check inside.
    assert!(r.bind_fds().is_empty());
    let by_path = r.bwrap_argv(Path::new(bw), &strs(&["/bin/true"]));
    assert!(by_path.iter().any(|a| a == "relay-sandbox-check"));

    r.bind_by_fd(10);
    let argv = r.bwrap_argv(Path::new(bw), &strs(&["/bin/true"]));
    let (h, c, d) = (
        fx.home.to_str().unwrap(),
        fx.config.to_str().unwrap(),
        fx.token_dir.to_str().unwrap(),
    );
    // The whole argv: the grants (shallow first) and the private /tmp by number; the mask, a
    // folder of the host's making, by path; the command right after `--`, no check before it.
    let mut want = system_part(bw);
    want.extend(strs(&[
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--bind-fd",
        "12",
        "/tmp",
        "--bind-fd",
        "10",
        h,
        "--ro-bind-fd",
        "11",
        c,
        "--perms",
        "000",
        "--tmpfs",
        d,
        "--remount-ro",
        d,
        "--chdir",
        h,
        "--",
        "/bin/true",
    ]));
    assert_eq!(argv, want);
    for a in ["relay-sandbox-check", "/bin/sh", "--bind", "--ro-bind"] {
        let after_baseline = &argv[system_part(bw).len()..];
        assert!(
            !after_baseline.iter().any(|x| x == a),
            "{a} in {after_baseline:?}"
        );
    }

    // The descriptors: numbered from the first, each the very object the host checked.
    let fds = r.bind_fds();
    let numbers: Vec<RawFd> = fds.iter().map(|&(_, n)| n).collect();
    assert_eq!(numbers, [10, 11, 12]);
    let idents: Vec<(u64, u64)> = fds.iter().map(|&(fd, _)| fd_ident(fd)).collect();
    assert_eq!(
        idents,
        [
            path_ident(&fx.home),
            path_ident(&fx.config),
            path_ident(&fx.tmp)
        ]
    );
    // Never the token's folder (masked) nor the token.
    assert!(!idents.contains(&path_ident(&fx.token_dir)));
    assert!(!idents.contains(&path_ident(&fx.token)));

    // Another first number shifts them all.
    r.bind_by_fd(40);
    let numbers: Vec<RawFd> = r.bind_fds().iter().map(|&(_, n)| n).collect();
    assert_eq!(numbers, [40, 41, 42]);
    let argv = r.bwrap_argv(Path::new(bw), &strs(&["/bin/true"]));
    assert!(argv
        .windows(3)
        .any(|w| w == strs(&["--bind-fd", "42", "/tmp"])));
    assert!(argv
        .windows(3)
        .any(|w| w == strs(&["--ro-bind-fd", "41", c])));

    // Without a temp folder /tmp is an empty tmpfs, and no descriptor is made for it.
    let mut p = Profile::new();
    p.read(fx.config.clone());
    let mut r = p.resolve(&[]).unwrap();
    r.bind_by_fd(10);
    let argv = r.bwrap_argv(Path::new(bw), &strs(&["/bin/true"]));
    assert!(argv.windows(2).any(|w| w == strs(&["--tmpfs", "/tmp"])));
    assert_eq!(r.bind_fds().len(), 1);
    let tail = strs(&["--ro-bind-fd", "10", c, "--", "/bin/true"]);
    assert_eq!(argv[argv.len() - tail.len()..], tail[..]);
}

#[test]
fn bwrap_features_are_read_from_the_program_file() {
    // Debian's bubblewrap 0.8.0 has all three options.
    let real = BwrapFeatures::of(&bwrap());
    assert_eq!(
        real,
        BwrapFeatures {
            bind_fd: true,
            json_status: true
        }
    );
    let dir = root_dir();
    let file = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        BwrapFeatures::of(&p)
    };
    assert_eq!(
        file("none", "#!/bin/sh\nexit 0\n"),
        BwrapFeatures::default()
    );
    assert_eq!(
        file("status", "# --json-status-fd\n"),
        BwrapFeatures {
            bind_fd: false,
            json_status: true
        }
    );
    // Both bind options are needed.
    assert!(!file("rw-only", "# --bind-fd\n").bind_fd, "--bind-fd alone");
    assert!(
        !file("ro-only", "# --ro-bind-fd\n").bind_fd,
        "--ro-bind-fd alone"
    );
    assert_eq!(
        file("both", "# --ro-bind-fd --bind-fd\n"),
        BwrapFeatures {
            bind_fd: true,
            json_status: false
        }
    );
}

#[test]
fn a_grant_swapped_for_a_symlink_after_the_check_is_bound_as_checked_by_descriptor() {
    // The race of `a_grant_swapped_for_a_symlink_after_the_check_is_refused_inside`, with the
    // grant bound by the descriptor the host checked: bwrap mounts the folder that was checked
    // (now renamed), never what the symlink points at, and the session runs.
    for user in users() {
        let fx = fixture(user);
        let (r, proj) = resolve_then_swap_grant(&fx, user, |r| {
            r.bind_by_fd(10);
        });
        let work = fx.root.join("work");
        let pd = proj.display();
        let (code, text) = run_by_fd(
            user,
            &r,
            &format!("cat '{pd}/marker' && ls -A '{pd}' && test \"$(pwd)\" = '{pd}'"),
            &[],
            None,
        );
        assert_eq!(
            (code, text.as_str()),
            (0, "the checked grant\nmarker\n"),
            "{user:?}"
        );
        assert_attack_failed(
            &fx,
            user,
            "grant swapped for a symlink, read by descriptor",
            run_by_fd(user, &r, &format!("cat '{pd}/token'"), &[], None),
        );
        // A write lands in the checked folder, not in the token's.
        let (code, text) = run_by_fd(
            user,
            &r,
            &format!("echo planted > '{pd}/planted'"),
            &[],
            None,
        );
        assert_eq!((code, text.as_str()), (0, ""), "{user:?}");
        assert_eq!(
            std::fs::read_to_string(work.join("proj.real/planted")).unwrap(),
            "planted\n"
        );
        assert!(
            !fx.token_dir.join("planted").exists(),
            "{user:?}: wrote into the token folder"
        );
        no_copy_on_host(&fx);
    }
}

/// Prints `fds: N N ...`, the descriptors open in the sandboxed shell itself (`[` is the shell's
/// own builtin, so nothing else is opened to look), then runs `rest`.
fn list_fds_then(rest: &str) -> String {
    format!(
        "n=0; l=''; while [ $n -lt 1024 ]; do if [ -L /proc/self/fd/$n ]; then l=\"$l $n\"; \
         fi; n=$((n + 1)); done; echo \"fds:$l\"; {rest}"
    )
}

#[test]
fn bound_by_descriptor_the_session_holds_only_stdio_and_the_token_fd() {
    for user in users() {
        let fx = fixture(user);
        let mut r = fx.resolve(&fx.profile());
        r.bind_by_fd(10);
        assert_eq!(r.bind_fds().len(), 3);
        // bwrap holds the three bind descriptors; the session none of them: 0, 1, 2 only.
        let (code, text) = run_by_fd(user, &r, &list_fds_then("true"), &[], None);
        assert_eq!((code, text.as_str()), (0, "fds: 0 1 2\n"), "{user:?}");

        // With bwrap's start report at 6 and a token pipe at 5 (a fake token).
        let fake = format!("acme-fake-token-{}", std::process::id());
        let token = relay_token::TokenPipe::new(
            &relay_token::ClaudeToken::from_bytes(fake.as_bytes()).unwrap(),
        )
        .unwrap()
        .into_fd();
        let (status_r, status_w) = std::io::pipe().unwrap();
        let (code, text) = run_by_fd(
            user,
            &r,
            &list_fds_then("sha256sum <&5"),
            &[(token.as_fd(), 5), (status_w.as_fd(), 6)],
            Some(6),
        );
        drop(status_w);
        use sha2::Digest;
        let hash: String = sha2::Sha256::digest(fake.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            (code, text.as_str()),
            (0, format!("fds: 0 1 2 5\n{hash}  -\n").as_str()),
            "{user:?}"
        );
        // bwrap did report on 6: the sandbox's pid, then its exit.
        let mut said = String::new();
        std::io::Read::read_to_string(&mut &status_r, &mut said).unwrap();
        assert!(said.contains("\"child-pid\""), "{user:?}: {said:?}");
        assert!(said.contains("\"exit-code\": 0"), "{user:?}: {said:?}");
    }
}
