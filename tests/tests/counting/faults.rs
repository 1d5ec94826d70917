//! The fault battery (issue 24): the host's own failures and its operators' mistakes, with the
//! real binaries in throwaway folders under `/var/tmp`. Every loop is bounded in count and time.
//! Build the binaries first: `cargo build -p relay-host -p relay-shim -p relay-tests --bins`.
//! Linux only (bwrap). `docs/RELIABILITY.md` lists each fault and its test.
#![cfg(target_os = "linux")]

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use relay_tests::fixture::{alive, descendants};
use relay_tests::paths_under;
use relay_tests::run::{finish_with, Out};
use relay_tests::wait_until;
use relay_tests::world::World;

// The load tests count this process's descriptors and children: they run alone; every other
// test shares its turn with the others of this file.
use super::{alone, shared};

/// The deadline of one `relay-host` command.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A `relay-host` command on the fixture's folders with a small fixed environment, in its own
/// process group (so a deadline kills it with its children), stdio on `/dev/null`.
fn host_cmd(fx: &World) -> Command {
    host_cmd_in(fx, &fx.state)
}

/// [`host_cmd`] with another state folder.
fn host_cmd_in(fx: &World, state: &std::path::Path) -> Command {
    let mut cmd = Command::new(&fx.host);
    fx.host_setup(&mut cmd, state)
        .env("FAKE_AGENT_RECORD", &fx.record)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// Runs `cmd` to its end under [`TIMEOUT`]; panics when the deadline killed it.
fn finish(cmd: &mut Command) -> Out {
    let f = finish_with(cmd.spawn().unwrap(), TIMEOUT, &|| false);
    assert!(!f.killed, "relay-host did not finish within {TIMEOUT:?}");
    f
}

/// A pipe whose read end is already closed: the write end, as a `Stdio`.
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 just made both; each is owned once, here.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Stdio::from(write)
}

/// Some rows in both logs, so `audit` and `events` have lines to print (a refused launch writes
/// one of each; a few make the output longer than one write).
fn fill_logs(fx: &World) {
    let bad = fx.root.join("bad.json");
    std::fs::write(&bad, r#"{"kind": "claude", "no_such_field": 1}"#).unwrap();
    for _ in 0..3 {
        let f = finish(host_cmd(fx).arg("launch").arg(&bad));
        assert_eq!(f.code, Some(64), "a refused launch: {}", f.stderr);
    }
}

#[test]
fn a_closed_stdout_or_stderr_pipe_never_panics_the_host() {
    let _turn = shared();
    let fx = World::agent(&relay_tests::fake_agent());
    fill_logs(&fx);
    let commands: [&[&str]; 6] = [
        &["--json", "audit"],
        &["audit"],
        &["--json", "events"],
        &["events"],
        &["--json", "status"],
        &["status"],
    ];
    for args in commands {
        let plain = finish(host_cmd(&fx).args(args));
        assert_eq!(
            plain.code,
            Some(0),
            "{args:?} on /dev/null: {}",
            plain.stderr
        );
        // stdout a closed pipe: the report cannot be written; the command says so on stderr
        // and exits 70 (an internal error), without a panic or a signal.
        let mut cmd = host_cmd(&fx);
        cmd.args(args).stdout(closed_pipe()).stderr(Stdio::piped());
        let f = finish(&mut cmd);
        assert_eq!(f.signal, None, "{args:?}: killed by a signal");
        assert!(!f.stderr.contains("panicked"), "{args:?}: {}", f.stderr);
        assert_eq!(f.code, Some(70), "{args:?}: stderr {}", f.stderr);
        assert!(
            f.stderr.contains("cannot write to stdout") && f.stderr.contains("Broken pipe"),
            "{args:?}: {}",
            f.stderr
        );
        // stderr a closed pipe as well: nothing can be said, and still no abort.
        let mut cmd = host_cmd(&fx);
        cmd.args(args).stdout(closed_pipe()).stderr(closed_pipe());
        let f = finish(&mut cmd);
        assert_eq!(f.signal, None, "{args:?}: killed by a signal (both closed)");
        assert_eq!(f.code, Some(70), "{args:?}: both closed");
    }
    // A refusal whose stderr is a closed pipe keeps its own exit code.
    let bad = fx.root.join("bad.json");
    let mut cmd = host_cmd(&fx);
    cmd.arg("launch").arg(&bad).stderr(closed_pipe());
    let f = finish(&mut cmd);
    assert_eq!(f.signal, None, "launch refusal: killed by a signal");
    assert_eq!(f.code, Some(64), "launch refusal with stderr closed");
}

#[test]
fn a_nul_byte_in_the_project_is_refused_with_a_reason() {
    let _turn = shared();
    let fx = World::agent(&relay_tests::fake_agent());
    let req = fx.root.join("nul.json");
    // `\u0000` in JSON: a NUL inside the project path.
    let project = format!("{}/a\\u0000b", fx.project.display());
    std::fs::write(
        &req,
        format!(r#"{{"kind": "claude", "project": "{project}", "sandbox": true}}"#),
    )
    .unwrap();
    let mut cmd = host_cmd(&fx);
    cmd.args(["--json", "launch"])
        .arg(&req)
        .stderr(Stdio::piped());
    let f = finish(&mut cmd);
    assert_eq!(f.code, Some(64), "{}", f.stderr);
    let line: serde_json::Value = serde_json::from_str(f.stderr.trim()).unwrap();
    assert_eq!(line["error"], "invalid_spec", "{line}");
    assert_eq!(
        line["message"],
        format!(
            "project {:?}: holds a NUL byte, which no path can",
            format!("{}/a\0b", fx.project.display())
        ),
        "{line}"
    );
    assert!(
        relay_tests::read_records(&fx.record).is_empty(),
        "nothing started"
    );
}

/// Settings with a `shell` template: `/bin/sh`, sandboxed, home and project read-write (so the
/// launch makes write-deny placeholders in both).
fn shell_settings(fx: &World) {
    shell_settings_with(fx, serde_json::json!("none"));
}

/// [`shell_settings`] with this `network` (an allow-list starts a proxy in the session folder).
fn shell_settings_with(fx: &World, network: serde_json::Value) {
    let settings = serde_json::json!({
        "templates": [{
            "id": "shell",
            "command": ["/bin/sh"],
            "network": network,
            "sandbox": {"read_write": ["~/", "{project}"]},
            "writes_home": true,
        }],
    });
    std::fs::write(fx.config.join("settings.json"), settings.to_string()).unwrap();
}

/// Starts a sandboxed `shell` session running `sleep 30` and waits for the `sleep`; returns the
/// host and every process of the session (the host first).
fn start_sleeping_shell(fx: &World) -> (std::process::Child, Vec<i32>) {
    shell_settings(fx);
    start_sleeping(fx)
}

/// [`start_sleeping_shell`] on the settings already written.
fn start_sleeping(fx: &World) -> (std::process::Child, Vec<i32>) {
    start_script(fx, "sleep 30")
}

/// Starts a sandboxed `shell` session running `sh -c script` on the settings already written
/// and waits for a `sleep` in it; returns the host and every process of the session (the host
/// first).
fn start_script(fx: &World, script: &str) -> (std::process::Child, Vec<i32>) {
    let host = spawn_script(fx, script);
    let pid = host.id() as i32;
    assert!(
        wait_until(TIMEOUT, &|| runs_below(pid, "sleep")),
        "the session's sleep never ran"
    );
    (host, descendants(pid))
}

/// True when a process named `comm` runs below `pid` (or is `pid`).
fn runs_below(pid: i32, comm: &str) -> bool {
    descendants(pid)
        .iter()
        .any(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == comm))
}

/// Spawns the host launching a sandboxed `shell` session running `sh -c script` on the settings
/// already written.
fn spawn_script(fx: &World, script: &str) -> std::process::Child {
    let req = fx.root.join("shell.json");
    let request = serde_json::json!({
        "kind": "terminal",
        "template": "shell",
        "project": fx.project,
        "sandbox": true,
        "extra_args": ["-c", script],
    });
    std::fs::write(&req, request.to_string()).unwrap();
    host_cmd(fx).arg("launch").arg(&req).spawn().unwrap()
}

#[test]
fn after_kill_9_of_the_host_and_shim_gc_removes_the_placeholders_and_the_session_folder() {
    let _turn = shared();
    let fx = World::agent(&relay_tests::fake_agent());
    let (home_before, project_before) = (paths_under(&fx.home), paths_under(&fx.project));
    // An allow-list: the session folder holds the proxy's socket too.
    shell_settings_with(&fx, serde_json::json!({"allow": ["127.0.0.1:9"]}));
    let (mut host, session) = start_sleeping(&fx);
    assert!(
        session.len() >= 3,
        "host, shim, bwrap, sh/sleep: {session:?}"
    );
    let placeholders = fx.state.join("placeholders");
    assert!(placeholders.is_file(), "the launch made placeholders");
    assert_ne!(
        paths_under(&fx.project),
        project_before,
        "placeholders in the project"
    );

    // The host and its shim both killed at once (a power cut, the OOM killer): nobody is left to
    // clean up. (`kill -9` of the host alone: its shim cleans up, see
    // `tests/tests/e2e/operator_day/crash.rs`.)
    // The shim is stopped first: killed only after the host, it could take the host's death
    // signal in between and do the host's cleanup (it did, once in a full run: the session
    // folder was gone), which is the other test's case, not this one's.
    let shims = relay_tests::fixture::children_of(host.id() as i32);
    for &s in &shims {
        // SAFETY: kill takes integers only; the host's own children, of this test.
        unsafe { libc::kill(s, libc::SIGSTOP) };
    }
    // SAFETY: as above; the pid is our own child, not yet reaped.
    assert_eq!(unsafe { libc::kill(host.id() as i32, libc::SIGKILL) }, 0);
    for s in shims {
        // SAFETY: as above.
        unsafe { libc::kill(s, libc::SIGKILL) };
    }
    let killed_at = std::time::Instant::now();
    let _ = host.wait();
    let ended = wait_until(Duration::from_secs(10), &|| {
        !session.iter().any(|&p| alive(p))
    });
    eprintln!(
        "kill -9: the session's processes ended within {:?}",
        killed_at.elapsed()
    );
    let left: Vec<i32> = session.iter().copied().filter(|&p| alive(p)).collect();
    for &p in &left {
        // SAFETY: as above; a leftover of this test only.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    assert!(
        ended,
        "processes of the session outlived the host: {left:?}"
    );

    // What kill -9 leaves: the placeholders (listed), the session folder.
    assert!(placeholders.is_file());
    let sessions = fx.state.join("sessions");
    assert_eq!(std::fs::read_dir(&sessions).unwrap().count(), 1);
    let socket = std::fs::read_dir(&sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("net.sock");
    assert!(socket.exists(), "kill -9 leaves the proxy's socket");

    // status says so, and removes nothing.
    let mut status = host_cmd(&fx);
    status.args(["--json", "status"]).stdout(Stdio::piped());
    let f = finish(&mut status);
    let r: serde_json::Value = serde_json::from_str(&f.stdout).unwrap();
    let listed = r["leftovers"]["placeholders"]
        .as_array()
        .expect("leftovers listed");
    assert!(
        listed.iter().any(|p| p
            .as_str()
            .unwrap()
            .starts_with(fx.project.to_str().unwrap())),
        "{r}"
    );
    assert_eq!(
        r["leftovers"]["session_folders"].as_array().unwrap().len(),
        1,
        "{r}"
    );
    assert!(
        r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("relay-host gc")),
        "{r}"
    );
    assert!(placeholders.is_file(), "status removed nothing");
    // The session's end was never recorded: status names it, gc writes its exit row.
    let id = r["leftovers"]["session_folders"][0]
        .as_str()
        .and_then(|p| p.rsplit('/').next())
        .unwrap()
        .to_string();
    assert_eq!(
        r["leftovers"]["lost_sessions"],
        serde_json::json!([id]),
        "{r}"
    );
    assert!(exit_rows(&fx).is_empty(), "no exit row after kill -9");

    let mut gc = host_cmd(&fx);
    gc.args(["--json", "gc"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let f = finish(&mut gc);
    assert_eq!(f.code, Some(0), "{}", f.stderr);
    let r: serde_json::Value = serde_json::from_str(&f.stdout).unwrap();
    assert_eq!(r["removed"], 1, "{r}");
    assert_eq!(r["placeholders_removed"], listed.len(), "{r}");
    assert_eq!(r["host_lost"], 1, "{r}");
    let exits = exit_rows(&fx);
    assert_eq!(exits.len(), 1, "{exits:?}");
    assert_eq!(exits[0]["session_id"], id.as_str(), "{exits:?}");
    assert_eq!(exits[0]["outcome"], "host_lost", "{exits:?}");
    assert_eq!(exits[0]["code"], serde_json::Value::Null, "{exits:?}");
    // Written once: a second gc finds nothing.
    let f = finish(host_cmd(&fx).arg("gc"));
    assert_eq!(f.code, Some(0));
    assert_eq!(exit_rows(&fx).len(), 1);
    assert!(!placeholders.exists(), "the placeholders list is gone");
    assert_eq!(
        std::fs::read_dir(&sessions).unwrap().count(),
        0,
        "the session folder is gone"
    );
    assert!(!socket.exists(), "the proxy's socket is gone");
    assert_eq!(
        paths_under(&fx.home),
        home_before,
        "a placeholder stayed in the home"
    );
    assert_eq!(
        paths_under(&fx.project),
        project_before,
        "a placeholder stayed in the project"
    );
}

/// `cmd` run as `nobody` (uid and gid 65534, no groups) through `setpriv`: everything here runs
/// as root, and root ignores modes.
fn as_nobody(cmd: &Command) -> Command {
    let mut wrapped = Command::new("setpriv");
    wrapped
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .env_clear()
        .envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    wrapped
}

#[test]
fn a_config_folder_the_host_cannot_search_is_an_error_naming_it() {
    let _turn = shared();
    use std::os::unix::fs::PermissionsExt;
    let fx = World::agent(&relay_tests::fake_agent());
    // Readable, not searchable: settings.json inside cannot even be looked up.
    std::fs::set_permissions(&fx.config, std::fs::Permissions::from_mode(0o644)).unwrap();
    // A state folder `nobody` owns, so a launch gets as far as the settings.
    std::fs::create_dir(&fx.state).unwrap();
    // SAFETY: chown takes a NUL-terminated path that lives across the call, and integers.
    let c = std::ffi::CString::new(fx.state.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
    std::fs::set_permissions(&fx.state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let want = format!(
        "read {}: Permission denied (os error 13)",
        fx.config.display()
    );

    let mut status = host_cmd(&fx);
    status.args(["--json", "status"]);
    let f = finish_with(as_nobody(&status).spawn().unwrap(), TIMEOUT, &|| false);
    assert!(!f.killed);
    assert_eq!(f.code, Some(78), "stderr {}", f.stderr);
    let r: serde_json::Value = serde_json::from_str(&f.stdout).unwrap();
    assert_eq!(r["settings_error"], want.as_str(), "{r}");

    let req = fx.root.join("sh.json");
    std::fs::write(
        &req,
        r#"{"kind": "terminal", "template": "shell", "sandbox": false}"#,
    )
    .unwrap();
    std::fs::set_permissions(&req, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut launch = host_cmd(&fx);
    launch.args(["--json", "launch"]).arg(&req);
    let f = finish_with(as_nobody(&launch).spawn().unwrap(), TIMEOUT, &|| false);
    assert!(!f.killed);
    assert_eq!(f.code, Some(78), "stderr {}", f.stderr);
    let line: serde_json::Value = serde_json::from_str(f.stderr.trim()).unwrap();
    assert_eq!(line["error"], "settings_invalid", "{line}");
    assert_eq!(line["message"], want.as_str(), "{line}");
}

/// SIGINT, SIGTERM or SIGHUP sent to the host alone (not its group, as a supervisor's
/// `kill PID` does, off a terminal) while a sandboxed session runs: each ends the session the
/// normal way. The host forwards it to the shim, the shim to the session, and the host exits with
/// the session's status (128 + the signal), its processes gone, its `exit` event written, no
/// placeholder and no session folder left.
#[test]
fn sigint_sigterm_sighup_to_the_host_alone_end_the_session() {
    let _turn = shared();
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let fx = World::agent(&relay_tests::fake_agent());
        let (home_before, project_before) = (paths_under(&fx.home), paths_under(&fx.project));
        let (host, session) = start_sleeping_shell(&fx);
        // SAFETY: kill takes integers only; the pid is our own child, not yet reaped.
        assert_eq!(unsafe { libc::kill(host.id() as i32, sig) }, 0);
        ended_by_the_signal(&fx, sig, host, &session, (home_before, project_before));
    }
}

/// The host signalled with `sig` ends within 15 s with the session's status (128 + `sig`, not
/// killed by it), the `session`'s processes gone, one `exit` event, no placeholder nor session
/// folder left, and the home and the project as `before`.
fn ended_by_the_signal(
    fx: &World,
    sig: i32,
    host: std::process::Child,
    session: &[i32],
    before: (Vec<String>, Vec<String>),
) {
    let f = finish_with(host, Duration::from_secs(15), &|| false);
    assert!(
        !f.killed,
        "signal {sig}: the session did not end within 15 s"
    );
    assert_eq!(
        (f.code, f.signal),
        (Some(128 + sig), None),
        "signal {sig}: the host's own end; stderr {}",
        f.stderr
    );
    let ended = wait_until(Duration::from_secs(5), &|| {
        !session.iter().any(|&p| alive(p))
    });
    assert!(ended, "signal {sig}: processes of the session left");
    assert_eq!(exit_rows(fx).len(), 1, "signal {sig}: one exit event");
    assert!(!fx.state.join("placeholders").exists(), "signal {sig}");
    let sessions = std::fs::read_dir(fx.state.join("sessions"))
        .unwrap()
        .count();
    assert_eq!(sessions, 0, "signal {sig}: the session folder stayed");
    assert_eq!(paths_under(&fx.home), before.0, "signal {sig}");
    assert_eq!(paths_under(&fx.project), before.1, "signal {sig}");
}

/// SIGTERM or SIGHUP sent to the host alone in the moment its shim exists and the session is not
/// yet supervised (bwrap here starts a second late, and the host is stopped in that moment,
/// signalled, and let go on): the signal waits for the session's forwarding, then ends the
/// session the normal way, with the session's status. It never takes the host down by its
/// default action, which left the session without its `exit` row until `gc` (seen once in CI,
/// where a machine under load stretched that moment).
#[test]
fn a_signal_while_the_sandbox_starts_waits_for_the_forwarding_and_ends_the_session() {
    let _turn = shared();
    for sig in [libc::SIGTERM, libc::SIGHUP] {
        let fx = World::agent(&relay_tests::fake_agent());
        shell_settings(&fx);
        let bwrap = relay_tests::settings_bwrap().unwrap_or_else(|| "/usr/bin/bwrap".into());
        fx.set_bwrap(&relay_tests::capture::late_wrapper(&fx.root, &bwrap, 1));
        let before = (paths_under(&fx.home), paths_under(&fx.project));
        let host = spawn_script(&fx, "sleep 30");
        let pid = host.id() as i32;
        assert!(
            wait_until(TIMEOUT, &|| runs_below(pid, "relay-shim")),
            "signal {sig}: no shim"
        );
        // SAFETY: kill takes integers only; the pid is our own child, not yet reaped.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        assert!(
            !catches(pid, sig),
            "signal {sig}: the host was stopped after the forwarding began; the test missed the \
             moment it is about"
        );
        // SAFETY: as above.
        unsafe {
            assert_eq!(libc::kill(pid, sig), 0);
            assert_eq!(libc::kill(pid, libc::SIGCONT), 0);
        }
        let session = descendants(pid);
        ended_by_the_signal(&fx, sig, host, &session, before);
    }
}

/// True when process `pid` has a handler for `sig` (its `SigCgt` in `/proc`).
fn catches(pid: i32, sig: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .unwrap();
    mask & (1 << (sig - 1)) != 0
}

/// SIGTERM, SIGHUP or SIGINT sent to the host alone reaches the sandboxed program itself (its
/// process group inside the sandbox), not only bwrap: a program that traps it does its own
/// shutdown work (here: writes which signal came, then exits 9), and the host exits with the
/// program's own status.
#[test]
fn a_signal_to_the_host_reaches_the_sandboxed_program_which_ends_its_own_way() {
    let _turn = shared();
    for (sig, name) in [
        (libc::SIGTERM, "TERM"),
        (libc::SIGHUP, "HUP"),
        (libc::SIGINT, "INT"),
    ] {
        let fx = World::agent(&relay_tests::fake_agent());
        shell_settings(&fx);
        let said = fx.project.join("trapped");
        let script = format!(
            "for s in TERM HUP INT; do trap \"echo $s > {0}; exit 9\" $s; done; sleep 30 & wait",
            said.display()
        );
        let (host, session) = start_script(&fx, &script);
        // SAFETY: kill takes integers only; the pid is our own child, not yet reaped.
        assert_eq!(unsafe { libc::kill(host.id() as i32, sig) }, 0);
        let f = finish_with(host, Duration::from_secs(20), &|| false);
        assert!(!f.killed, "{name}: the session did not end within 20 s");
        let trapped = std::fs::read_to_string(&said).unwrap_or_default();
        assert_eq!(
            trapped.trim(),
            name,
            "{name}: the program's trap did not run"
        );
        assert_eq!(f.code, Some(9), "{name}: stderr {}", f.stderr);
        let ended = wait_until(Duration::from_secs(5), &|| {
            !session.iter().any(|&p| alive(p))
        });
        assert!(ended, "{name}: processes of the session left");
        assert_eq!(exit_rows(&fx).len(), 1, "{name}");
    }
}

/// A sandboxed program that traps SIGTERM and goes on running is killed once the grace period
/// has passed: the signal reached it (its trap wrote), then the session ended with 137 (SIGKILL),
/// every process of it gone and its `exit` row written.
#[test]
fn a_program_that_outlives_the_grace_period_is_killed() {
    let _turn = shared();
    let fx = World::agent(&relay_tests::fake_agent());
    shell_settings(&fx);
    let said = fx.project.join("trapped");
    let script = format!(
        "trap \"echo TERM >> {0}\" TERM; while :; do sleep 1; done",
        said.display()
    );
    let (host, session) = start_script(&fx, &script);
    // SAFETY: kill takes integers only; the pid is our own child, not yet reaped.
    assert_eq!(unsafe { libc::kill(host.id() as i32, libc::SIGTERM) }, 0);
    let f = finish_with(host, Duration::from_secs(30), &|| false);
    assert!(!f.killed, "the session outlived 30 s");
    let trapped = std::fs::read_to_string(&said).unwrap_or_default();
    assert_eq!(trapped, "TERM\n", "the program's trap ran once");
    assert_eq!(f.code, Some(137), "stderr {}", f.stderr);
    let ended = wait_until(Duration::from_secs(5), &|| {
        !session.iter().any(|&p| alive(p))
    });
    assert!(ended, "processes of the session left");
    assert_eq!(exit_rows(&fx).len(), 1);
}

/// A `relay-host run` in a terminal (a tmux pane) whose program makes the terminal raw, then runs
/// `rest`; the pane saves `stty -g` before and after the run and prints the run's `exit=N`.
struct TerminalRun {
    tmux: relay_tests::tmux::Tmux,
    /// `stty -g` before and after the run.
    before: std::path::PathBuf,
    after: std::path::PathBuf,
    /// The file the program's SIGTERM trap writes.
    trapped: std::path::PathBuf,
}

impl TerminalRun {
    /// Starts the run and waits until its program has made the terminal raw.
    fn start(fx: &World, rest: &str) -> TerminalRun {
        TerminalRun::start_with(fx, rest, "")
    }

    /// [`TerminalRun::start`], the pane running `pause` after the run and before it reads the
    /// terminal's settings back.
    fn start_with(fx: &World, rest: &str, pause: &str) -> TerminalRun {
        let (ready, trapped) = (fx.project.join("ready"), fx.project.join("trapped"));
        let (before, after) = (fx.root.join("stty-before"), fx.root.join("stty-after"));
        let program = format!(
            "stty raw -echo; trap 'echo TERM > {t}; exit 5' TERM; : > {r}; {rest}",
            t = trapped.display(),
            r = ready.display()
        );
        let script = fx.root.join("pane.sh");
        let line = format!(
            "env -i PATH={path} HOME={home} LANG=C.UTF-8 {host} --config-dir {config} \
             --state-dir {state} run --template shell --project {project} -- -c \"{program}\"",
            path = relay_tests::fixture::HOST_PATH,
            home = fx.home.display(),
            host = fx.host.display(),
            config = fx.config.display(),
            state = fx.state.display(),
            project = fx.project.display(),
        );
        // tmux may still set up the new pane's terminal as its shell starts: the settings are
        // read once it has settled, as the operator's terminal is when relay-host starts. Each
        // file appears whole (written aside, then renamed): `> file` makes it before `stty`
        // has written a byte, and a test that saw it then read "" (under load, in fresh-clone
        // runs of the whole suite, this case's failures).
        let text = format!(
            "sleep 1\nstty -g > {b}.new && mv {b}.new {b}\n{line}\necho \"exit=$?\"\n{pause}\n\
             stty -g > {a}.new && mv {a}.new {a}\nsleep 60\n",
            b = before.display(),
            a = after.display()
        );
        std::fs::write(&script, text).unwrap();
        let tmux = relay_tests::tmux::Tmux::start(
            &fx.root.join("tmux.sock"),
            &fx.project,
            &format!("sh {}", script.display()),
        );
        assert!(
            wait_until(TIMEOUT, &|| ready.exists()),
            "the session never ran: {}",
            tmux.screen()
        );
        TerminalRun {
            tmux,
            before,
            after,
            trapped,
        }
    }

    /// Waits for the run's end; checks that it exited `code` and left the terminal as found;
    /// returns the pane's text.
    fn ended(&self, code: i32, what: &str) -> String {
        let (screen, ended) = self.tmux.wait(TIMEOUT, &|s| s.contains("exit="));
        assert!(ended, "{what}: the run did not end: {screen}");
        assert!(screen.contains(&format!("exit={code}")), "{what}: {screen}");
        assert!(wait_until(TIMEOUT, &|| self.after.exists()), "{what}");
        assert_eq!(
            std::fs::read_to_string(&self.after).unwrap(),
            std::fs::read_to_string(&self.before).unwrap(),
            "{what}: the terminal was not left as found: {screen}"
        );
        screen
    }

    /// What the program's SIGTERM trap wrote.
    fn trapped(&self) -> String {
        std::fs::read_to_string(&self.trapped).unwrap_or_default()
    }
}

/// The one running session's id (`relay-host ps --json`).
fn running_id(fx: &World) -> String {
    let ps = finish(host_cmd(fx).args(["--json", "ps"]).stdout(Stdio::piped()));
    let list: serde_json::Value = serde_json::from_str(&ps.stdout).unwrap();
    list[0]["id"]
        .as_str()
        .expect("one running session")
        .to_string()
}

/// `relay-host stop ID` of a `relay-host run` in a terminal whose program made the terminal raw
/// and traps SIGTERM: the program gets SIGTERM first (its trap writes and exits 5), the `run`
/// restores the terminal settings it found (`stty -g` before and after are equal), says on
/// stderr that `relay-host stop` stopped the session (by uid, at a time), and exits with the
/// session's own status (5).
#[test]
fn stop_is_gentle_and_the_stopped_run_leaves_the_terminal_as_found() {
    let _turn = shared();
    let fx = World::agent(&relay_tests::fake_agent());
    shell_settings(&fx);
    let run = TerminalRun::start(&fx, "sleep 30 & wait");
    let id = running_id(&fx);
    let stop = finish(host_cmd(&fx).args(["stop", &id]).stdout(Stdio::piped()));
    assert_eq!(stop.code, Some(0), "stop: {}", stop.stderr);
    let screen = run.ended(5, "stop");
    assert_eq!(run.trapped(), "TERM\n", "no SIGTERM first: {screen}");
    let said = format!("session {id} was stopped by `relay-host stop` (uid 0, at ");
    assert!(screen.contains(&said), "{screen}");
    let exits = exit_rows(&fx);
    assert_eq!(exits[0]["stopped_by"]["uid"], 0, "{exits:?}");
}

/// `relay-host stop --now`: the program is killed at once (no SIGTERM reaches its trap), the run
/// exits 137, says who stopped it, and leaves the terminal as found. `stop` with neither an id
/// nor `--all` is a usage error that names `--all`.
#[test]
fn stop_now_kills_at_once_and_the_terminal_is_left_as_found() {
    let _turn = shared();
    let fx = World::agent(&relay_tests::fake_agent());
    shell_settings(&fx);
    let bare = finish(host_cmd(&fx).arg("stop").stderr(Stdio::piped()));
    assert_eq!(bare.code, Some(64), "{}", bare.stderr);
    assert!(bare.stderr.contains("--all"), "{}", bare.stderr);
    let run = TerminalRun::start(&fx, "sleep 30 & wait");
    let id = running_id(&fx);
    let stop = finish(host_cmd(&fx).args(["stop", "--now", &id]));
    assert_eq!(stop.code, Some(0));
    let screen = run.ended(137, "stop --now");
    assert_eq!(run.trapped(), "", "{screen}");
    assert!(
        screen.contains("was stopped by `relay-host stop`"),
        "{screen}"
    );
}

/// Every other end of a terminal session leaves the terminal as found too: SIGTERM to
/// relay-host (the program's trap runs, exit 5), and the program's own exit (3) with the
/// terminal still raw.
#[test]
fn a_signal_or_the_program_s_own_exit_leaves_the_terminal_as_found() {
    let _turn = shared();
    let fx = World::agent(&relay_tests::fake_agent());
    shell_settings(&fx);
    let run = TerminalRun::start(&fx, "sleep 30 & wait");
    let host = running_host(&fx);
    // SAFETY: kill takes integers only; the pid is the running session's host.
    assert_eq!(unsafe { libc::kill(host, libc::SIGTERM) }, 0);
    let screen = run.ended(5, "SIGTERM to relay-host");
    assert_eq!(run.trapped(), "TERM\n", "{screen}");
    assert!(!screen.contains("stopped by"), "{screen}");
    drop(run);

    let fx = World::agent(&relay_tests::fake_agent());
    shell_settings(&fx);
    let run = TerminalRun::start(&fx, "exit 3");
    run.ended(3, "the program's own exit");
}

/// `kill -9` of relay-host while its session holds the terminal raw: the shim, which outlives
/// its host, writes the terminal's settings back once the session ended (its host cannot). The
/// pane reads the settings back once the shim is gone (the test then writes `go`).
#[test]
fn a_host_killed_with_kill_9_leaves_the_terminal_as_found() {
    let _turn = shared();
    let fx = World::agent(&relay_tests::fake_agent());
    shell_settings(&fx);
    let go = fx.root.join("go");
    let pause = format!("while [ ! -e {} ]; do sleep 0.1; done", go.display());
    let run = TerminalRun::start_with(&fx, "sleep 30 & wait", &pause);
    let ps = finish(host_cmd(&fx).args(["--json", "ps"]).stdout(Stdio::piped()));
    let list: serde_json::Value = serde_json::from_str(&ps.stdout).unwrap();
    let host = list[0]["host_pid"].as_i64().expect("one running session") as i32;
    let shim = list[0]["shim_pid"].as_i64().unwrap() as i32;
    // SAFETY: kill takes integers only; the pid is the running session's host.
    assert_eq!(unsafe { libc::kill(host, libc::SIGKILL) }, 0);
    assert!(
        wait_until(TIMEOUT, &|| !alive(shim)),
        "the shim outlived 30 s"
    );
    std::fs::write(&go, "").unwrap();
    let screen = run.ended(137, "kill -9 of relay-host");
    assert_eq!(run.trapped(), "TERM\n", "{screen}");
}

/// The running session's host pid (`relay-host ps --json`).
fn running_host(fx: &World) -> i32 {
    let ps = finish(host_cmd(fx).args(["--json", "ps"]).stdout(Stdio::piped()));
    let list: serde_json::Value = serde_json::from_str(&ps.stdout).unwrap();
    list[0]["host_pid"].as_i64().expect("one running session") as i32
}

/// A host the allow-list refused is named where the person looks: while the session runs,
/// `ps` counts the refusals (`network_denied`); once it ended, `relay-host run` prints each
/// refused host once, with its count and the exact setting that allows it.
#[test]
fn a_refused_host_is_named_after_the_session_and_counted_in_ps() {
    let _turn = shared();
    let fx = World::agent(&relay_tests::fake_agent());
    shell_settings_with(&fx, serde_json::json!({"allow": ["127.0.0.1:9"]}));
    let ready = fx.project.join("ready");
    let script = format!(
        "for u in http://192.0.2.1/ http://192.0.2.1/again https://example.com/; do \
         curl -s -o /dev/null -m 5 $u; done; : > {}; sleep 30 & wait",
        ready.display()
    );
    let mut run = host_cmd(&fx);
    run.args(["run", "--template", "shell", "--project"])
        .arg(&fx.project)
        .args(["--", "-c", &script])
        .stderr(Stdio::piped());
    let host = run.spawn().unwrap();
    let pid = host.id() as i32;
    assert!(
        wait_until(TIMEOUT, &|| ready.exists()),
        "the curls never ran"
    );
    let ps = finish(host_cmd(&fx).args(["--json", "ps"]).stdout(Stdio::piped()));
    let list: serde_json::Value = serde_json::from_str(&ps.stdout).unwrap();
    assert_eq!(list[0]["network_denied"], 3, "{list}");
    // SAFETY: kill takes integers only; the pid is our own child, not yet reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let f = finish_with(host, TIMEOUT, &|| false);
    let allow = |entry: &str| {
        format!(
            "to allow it, add \"{entry}\" to the template's network allow-list \
             (\"network\": {{\"allow\": [...]}}) in relay-host's settings"
        )
    };
    let lines: Vec<&str> = f.stderr.lines().filter(|l| l.contains("refused")).collect();
    assert_eq!(
        lines,
        [
            format!(
                "relay-host: the allow-list refused 192.0.2.1:80 2 times in this session; {}",
                allow("192.0.2.1:80")
            ),
            format!(
                "relay-host: the allow-list refused example.com:443 once in this session; {}",
                allow("example.com:443")
            ),
        ],
        "{}",
        f.stderr
    );
}

/// The `exit` rows of `events.jsonl`.
fn exit_rows(fx: &World) -> Vec<serde_json::Value> {
    fx.log("events.jsonl")
        .into_iter()
        .filter(|e| e["event"] == "exit")
        .collect()
}

/// `kill -9` of `relay-shim` while a sandboxed allow-list session runs: bwrap dies with its
/// parent (and the sandbox's processes with bwrap), the host sees the shim end, writes its `exit`
/// event (code 137), removes the placeholders, the proxy socket and the session folder, exits 137.
#[test]
fn kill_9_of_the_shim_ends_the_session_and_the_host_cleans_up() {
    let _turn = shared();
    let fx = World::agent(&relay_tests::fake_agent());
    let (home_before, project_before) = (paths_under(&fx.home), paths_under(&fx.project));
    shell_settings_with(&fx, serde_json::json!({"allow": ["127.0.0.1:9"]}));
    let (host, session) = start_sleeping(&fx);
    let socket = fx.state.join("sessions");
    let sock_dir = std::fs::read_dir(&socket)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(sock_dir.join("net.sock").exists(), "the proxy's socket");
    let shim = relay_tests::fixture::children_of(host.id() as i32)
        .into_iter()
        .find(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim() == "relay-shim")
        })
        .expect("the shim is the host's child");
    // SAFETY: kill takes integers only; the shim is a descendant of this test's child.
    assert_eq!(unsafe { libc::kill(shim, libc::SIGKILL) }, 0);
    let f = finish_with(host, Duration::from_secs(10), &|| false);
    assert!(
        !f.killed,
        "the host did not end within 10 s of the shim's kill"
    );
    assert_eq!(f.code, Some(137), "stderr {}", f.stderr);
    let ended = wait_until(Duration::from_secs(5), &|| {
        !session.iter().any(|&p| alive(p))
    });
    let left: Vec<i32> = session.iter().copied().filter(|&p| alive(p)).collect();
    for &p in &left {
        // SAFETY: as above; a leftover of this test only.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    assert!(
        ended,
        "processes of the session outlived the shim: {left:?}"
    );
    let exits = exit_rows(&fx);
    assert_eq!(exits.len(), 1, "{exits:?}");
    assert_eq!(exits[0]["code"], 137, "{exits:?}");
    assert!(!fx.state.join("placeholders").exists());
    assert!(
        !sock_dir.exists(),
        "the session folder (and its socket) stayed"
    );
    let unix = std::fs::read_to_string("/proc/net/unix").unwrap();
    assert!(
        !unix.contains(fx.state.to_str().unwrap()),
        "a proxy socket still listens"
    );
    assert_eq!(paths_under(&fx.home), home_before);
    assert_eq!(paths_under(&fx.project), project_before);
}

/// What one run in an odd environment ended with: no signal (no abort), no panic, and the
/// stderr's last line parsed when it is JSON.
fn no_panic(what: &str, f: &Out) {
    assert!(!f.killed, "{what}: did not finish");
    assert_eq!(f.signal, None, "{what}: killed by a signal");
    assert!(
        !f.stderr.contains("panicked") && f.code != Some(101),
        "{what}: {}",
        f.stderr
    );
}

/// The refusal a launch printed on stderr (one JSON line, stderr not a terminal).
fn refusal(f: &Out) -> serde_json::Value {
    let line = f.stderr.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: stderr {}", f.stderr))
}

/// Runs `cmd` with stderr (and stdout) captured under [`TIMEOUT`].
fn captured(mut cmd: Command) -> Out {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    finish_with(cmd.spawn().unwrap(), TIMEOUT, &|| false)
}

/// The launch's record (the fake agent's) got the token file's token, whole.
fn assert_launch_got_token(what: &str, fx: &World, f: &Out) {
    assert_eq!(f.code, Some(0), "{what}: stderr {}", f.stderr);
    let want = relay_tests::sha256_hex(&std::fs::read(&fx.token_file).unwrap());
    let records = relay_tests::read_records(&fx.record);
    assert_eq!(records.len(), 1, "{what}: {records:?}");
    assert_eq!(records[0]["token_sha256"], want.as_str(), "{what}");
    fx.clear_record();
}

/// `HOME` unset, relative or not UTF-8, `PATH` empty, a non-UTF-8 locale or variable, stdin
/// closed, non-UTF-8 folders, `--help` to a closed pipe: each a clear error or a normal launch,
/// never a panic (exit 101) or an abort (134).
#[test]
fn odd_environments_give_a_clear_error_or_a_normal_launch_never_a_panic() {
    let _turn = shared();
    use std::os::unix::ffi::OsStrExt;
    let fx = World::agent(&relay_tests::fake_agent());
    let req = fx.request("odd", true, "odd", &[]);
    let launch = |edit: &dyn Fn(&mut Command)| {
        let mut cmd = host_cmd(&fx);
        cmd.args(["--json", "launch"]).arg(&req);
        edit(&mut cmd);
        captured(cmd)
    };

    // The baseline, then a non-UTF-8 locale, then a variable that is not UTF-8: normal launches.
    let f = launch(&|_| {});
    no_panic("plain", &f);
    assert_launch_got_token("plain", &fx, &f);
    let f = launch(&|c| {
        c.env("LANG", "xx_XX.ISO-8859-1").env("LC_ALL", "C");
    });
    no_panic("locale", &f);
    assert_launch_got_token("locale", &fx, &f);
    let f = launch(&|c| {
        c.env("ODD", std::ffi::OsStr::from_bytes(b"\xff\xfe"));
    });
    no_panic("non-UTF-8 variable", &f);
    assert_launch_got_token("non-UTF-8 variable", &fx, &f);

    // stdin closed (`<&-`): the request comes from a file, so a normal launch; from stdin
    // (`launch -`), a refusal that says the request is not JSON (the runtime puts /dev/null at
    // a closed 0).
    let close_stdin = |c: &mut Command| {
        // SAFETY: the hook only closes descriptor 0 (an async-signal-safe call).
        unsafe {
            c.pre_exec(|| {
                libc::close(0);
                Ok(())
            });
        }
    };
    let f = launch(&close_stdin);
    no_panic("stdin closed", &f);
    assert_launch_got_token("stdin closed", &fx, &f);
    let mut cmd = host_cmd(&fx);
    cmd.args(["--json", "launch", "-"]);
    close_stdin(&mut cmd);
    let f = captured(cmd);
    no_panic("stdin closed, launch -", &f);
    assert_eq!(f.code, Some(64), "{}", f.stderr);
    assert!(refusal(&f)["message"]
        .as_str()
        .unwrap()
        .starts_with("request is not valid JSON"));

    // HOME unset, relative or empty: the password database's home (the token file is looked
    // for there, so the launch is refused naming that path, unless it holds one).
    for (what, home) in [
        ("HOME unset", None),
        ("HOME relative", Some("home")),
        ("HOME empty", Some("")),
    ] {
        let f = launch(&|c| {
            c.env_remove("HOME").current_dir(&fx.root);
            if let Some(h) = home {
                c.env("HOME", h);
            }
        });
        no_panic(what, &f);
        if f.code == Some(0) {
            continue;
        }
        assert_eq!(f.code, Some(78), "{what}: {}", f.stderr);
        let m = refusal(&f)["message"].as_str().unwrap().to_string();
        assert!(
            m.starts_with("read claude_token_file /")
                && m.contains("/.config/acme-ltt/token")
                && !m.contains(fx.home.to_str().unwrap()),
            "{what}: {m}"
        );
    }
    // HOME not UTF-8: the token file under it is missing, said with the path.
    let f = launch(&|c| {
        c.env("HOME", std::ffi::OsStr::from_bytes(b"/var/tmp/\xff-none"));
    });
    no_panic("HOME not UTF-8", &f);
    assert_eq!(f.code, Some(78), "{}", f.stderr);
    assert!(refusal(&f)["message"]
        .as_str()
        .unwrap()
        .contains("/.config/acme-ltt/token: no such file"));

    // PATH empty: no bwrap to find, said so (exit 78); nothing started.
    let f = launch(&|c| {
        c.env("PATH", "");
    });
    no_panic("PATH empty", &f);
    assert_eq!(f.code, Some(78), "{}", f.stderr);
    assert!(refusal(&f)["message"]
        .as_str()
        .unwrap()
        .starts_with("bwrap not found"));
    assert!(relay_tests::read_records(&fx.record).is_empty());

    // Folders whose names are not UTF-8: status reports them (U+FFFD for the odd byte).
    let odd = fx.root.join(std::ffi::OsStr::from_bytes(b"st\xffte"));
    let mut cmd = host_cmd_in(&fx, &odd);
    cmd.args(["--json", "status"]);
    let f = captured(cmd);
    no_panic("non-UTF-8 state folder", &f);
    assert_eq!(f.code, Some(0), "{}", f.stderr);
    let r: serde_json::Value = serde_json::from_str(&f.stdout).unwrap();
    assert!(
        r["state_dir"].as_str().unwrap().ends_with("st\u{fffd}te"),
        "{r}"
    );
    for args in [&["gc"][..], &["audit"], &["events"], &["token", "check"]] {
        let mut cmd = host_cmd_in(&fx, &odd);
        cmd.args(args);
        let f = captured(cmd);
        no_panic(&format!("{args:?}, non-UTF-8 state folder"), &f);
        assert_eq!(f.code, Some(0), "{args:?}: {}", f.stderr);
    }

    // --help and --version to a closed pipe: exit 0, no panic.
    for flag in ["--help", "--version"] {
        let mut cmd = host_cmd(&fx);
        cmd.arg(flag).stdout(closed_pipe()).stderr(Stdio::piped());
        let f = finish_with(cmd.spawn().unwrap(), TIMEOUT, &|| false);
        no_panic(flag, &f);
        assert_eq!(f.code, Some(0), "{flag}: {}", f.stderr);
    }
}

/// A tmpfs of `size` bytes mounted at a folder (made when missing) for one test; unmounted
/// (lazily) when dropped, a failing test included.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &std::path::Path, size: usize) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount a tmpfs at {}", dir.display());
        Tmpfs(dir.to_path_buf())
    }

    /// Remounts it read-only (`ro: true`) or read-write.
    fn remount(&self, ro: bool) {
        let opt = if ro { "remount,ro" } else { "remount,rw" };
        // Busy while a session just ended still has a file open there: retried, at most 5 s.
        let ok = wait_until(Duration::from_secs(5), &|| {
            Command::new("mount")
                .args(["-o", opt])
                .arg(&self.0)
                .stderr(Stdio::null())
                .status()
                .unwrap()
                .success()
        });
        assert!(ok, "{opt} {}", self.0.display());
    }

    /// Writes a filler file until the file system is full (bounded: at most `size / 4 KiB + 64`
    /// writes of 4 KiB); returns its path.
    fn fill(&self, size: usize) -> std::path::PathBuf {
        use std::io::Write;
        let path = self.0.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let chunk = [0u8; 4096];
        for _ in 0..size / 4096 + 64 {
            if f.write_all(&chunk).and_then(|_| f.flush()).is_err() {
                return path;
            }
        }
        panic!("{} never filled up", self.0.display());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The `session_launch` rows of `audit.jsonl` with `outcome` `ok`.
fn ok_audit_rows(fx: &World) -> usize {
    fx.log("audit.jsonl")
        .iter()
        .filter(|r| r["outcome"] == "ok")
        .count()
}

/// The state folder on a small tmpfs, full, then read-only: each launch is refused before
/// anything starts (exit 71, the folder named), so no session runs without its audit row; with
/// space again, launches run and are recorded.
#[test]
fn a_full_or_read_only_state_folder_refuses_the_launch_naming_it() {
    let _turn = shared();
    const SIZE: usize = 4 << 20;
    let fx = World::agent(&relay_tests::fake_agent());
    let disk = Tmpfs::mount(&fx.state, SIZE);
    let req = fx.request("full", true, "full", &[]);
    // Unsandboxed: no placeholders to write, so nothing else on the disk stops it.
    let plain_req = fx.request("plain", false, "plain", &[]);
    let launch_req = |req: &std::path::Path| {
        let mut cmd = host_cmd(&fx);
        cmd.args(["--json", "launch"]).arg(req);
        captured(cmd)
    };
    let launch = || launch_req(&req);
    let refused = |what: &str, f: &Out, words: &str| {
        no_panic(what, f);
        assert_eq!(f.code, Some(71), "{what}: {}", f.stderr);
        let r = refusal(f);
        assert_eq!(r["error"], "spawn_failed", "{what}: {r}");
        let m = r["message"].as_str().unwrap();
        assert!(
            m.starts_with(&format!("state folder {}: ", fx.state.display())) && m.contains(words),
            "{what}: {m}"
        );
    };

    let filler = disk.fill(SIZE);
    let f = launch();
    refused("full", &f, "is full");
    let f = launch_req(&plain_req);
    refused("full, unsandboxed", &f, "is full");
    assert!(
        relay_tests::read_records(&fx.record).is_empty(),
        "a session ran"
    );
    assert_eq!(ok_audit_rows(&fx), 0);

    std::fs::remove_file(&filler).unwrap();
    let f = launch();
    no_panic("space again", &f);
    assert_launch_got_token("space again", &fx, &f);
    assert_eq!(ok_audit_rows(&fx), 1, "the session's audit row");

    disk.remount(true);
    let f = launch();
    refused("read-only", &f, "Read-only file system");
    let f = launch_req(&plain_req);
    refused("read-only, unsandboxed", &f, "Read-only file system");
    assert!(
        relay_tests::read_records(&fx.record).is_empty(),
        "a session ran"
    );
    // status still reports; gc says what it could not do.
    let mut cmd = host_cmd(&fx);
    cmd.args(["--json", "status"]);
    let f = captured(cmd);
    no_panic("status, read-only", &f);
    assert_eq!(f.code, Some(0), "{}", f.stderr);
    disk.remount(false);
    assert_eq!(ok_audit_rows(&fx), 1, "one session, one row");
}

/// `token import` whose token folder is on a full tmpfs: refused (exit 70) naming the file; the
/// old token is intact (the new one goes to a temp file renamed over it) and no temp file stays.
#[test]
fn token_import_on_a_full_disk_leaves_the_old_token_intact() {
    let _turn = shared();
    use std::io::Write;
    const SIZE: usize = 256 << 10;
    let fx = World::agent(&relay_tests::fake_agent());
    let old = std::fs::read(&fx.token_file).unwrap();
    let folder = fx.token_file.parent().unwrap().to_path_buf();
    let disk = Tmpfs::mount(&folder, SIZE);
    std::fs::write(&fx.token_file, &old).unwrap();
    std::fs::set_permissions(
        &fx.token_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    disk.fill(SIZE);
    let import = || {
        let mut cmd = host_cmd(&fx);
        cmd.args(["--json", "token", "import"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let new = relay_tests::claude_fake_token();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(new.as_bytes())
            .unwrap();
        (finish_with(child, TIMEOUT, &|| false), new)
    };
    let (f, _) = import();
    no_panic("import, full", &f);
    assert_eq!(f.code, Some(70), "{}", f.stderr);
    assert!(
        f.stderr
            .contains(&format!("write {}", fx.token_file.display()))
            && f.stderr.contains("No space left on device"),
        "{}",
        f.stderr
    );
    assert_eq!(std::fs::read(&fx.token_file).unwrap(), old, "the old token");
    let mut names: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["filler", "token"], "a temp file stayed");
    // With room again the import replaces it, whole.
    std::fs::remove_file(folder.join("filler")).unwrap();
    let (f, new) = import();
    assert_eq!(f.code, Some(0), "{}", f.stderr);
    assert_eq!(
        std::fs::read_to_string(&fx.token_file).unwrap().trim_end(),
        new
    );
    drop(disk);
}

/// The token file replaced (a new token renamed over it) every few milliseconds while 50
/// sandboxed launches run: each session gets one of the tokens written, whole (by hash), or the
/// launch is refused with a reason; never a mix, a part or an empty token.
#[test]
fn a_token_rotated_during_launches_reaches_each_session_whole() {
    let _turn = shared();
    use std::collections::HashSet;
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    const LAUNCHES: usize = 50;
    const MAX_RENAMES: usize = 100_000;
    let fx = World::agent(&relay_tests::fake_agent());
    let first = std::fs::read(&fx.token_file).unwrap();
    let written = Arc::new(Mutex::new(HashSet::from([relay_tests::sha256_hex(&first)])));
    let stop = Arc::new(AtomicBool::new(false));
    let rotator = {
        let (written, stop) = (written.clone(), stop.clone());
        let path = fx.token_file.clone();
        std::thread::spawn(move || {
            let tmp = path.with_file_name(".token.rotate");
            let start = std::time::Instant::now();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed)
                && n < MAX_RENAMES
                && start.elapsed() < Duration::from_secs(120)
            {
                let token = relay_tests::claude_fake_token();
                written
                    .lock()
                    .unwrap()
                    .insert(relay_tests::sha256_hex(token.as_bytes()));
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&tmp)
                    .unwrap();
                std::io::Write::write_all(&mut f, token.as_bytes()).unwrap();
                drop(f);
                std::fs::rename(&tmp, &path).unwrap();
                n += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            n
        })
    };
    let req = fx.request("rot", true, "rot", &[]);
    let (mut got, mut refused) = (0, Vec::new());
    for i in 0..LAUNCHES {
        let mut cmd = host_cmd(&fx);
        cmd.args(["--json", "launch"]).arg(&req);
        let f = captured(cmd);
        no_panic(&format!("launch {i}"), &f);
        match f.code {
            Some(0) => got += 1,
            Some(78) => refused.push(refusal(&f)["message"].as_str().unwrap().to_string()),
            other => panic!("launch {i}: exit {other:?}: {}", f.stderr),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let renames = rotator.join().unwrap();
    eprintln!(
        "{renames} renames during {LAUNCHES} launches; {} refused: {refused:?}",
        refused.len()
    );
    assert!(renames >= LAUNCHES, "the token changed during the launches");
    let written = written.lock().unwrap();
    let records = relay_tests::read_records(&fx.record);
    assert_eq!(records.len(), got, "one record per launch that ran");
    for r in &records {
        let sha = r["token_sha256"].as_str().unwrap();
        assert!(written.contains(sha), "a token never written whole: {r}");
    }
    for m in &refused {
        assert!(m.starts_with("read claude_token_file "), "{m}");
    }
    let distinct: HashSet<&str> = records
        .iter()
        .map(|r| r["token_sha256"].as_str().unwrap())
        .collect();
    assert!(distinct.len() > 1, "the sessions saw the rotation");
}

/// True when the long form of the battery was asked for (`RELAY_FAULTS_LONG=1`).
fn long_form() -> bool {
    std::env::var_os("RELAY_FAULTS_LONG").is_some_and(|v| v == "1")
}

/// `short`, or ten times as many in the long form.
fn count(short: usize) -> usize {
    if long_form() {
        short * 10
    } else {
        short
    }
}

/// Valid requests the mutations start from.
const REQUEST_SEEDS: &[&str] = &[
    r#"{"kind": "claude"}"#,
    r#"{"kind": "claude", "sandbox": true, "session_id": "f1"}"#,
    r#"{"kind": "terminal", "template": "claude-code", "sandbox": false, "keep": false}"#,
    r#"{"kind": "claude", "env": {"A": "b"}, "resume": "r1", "sandbox": true}"#,
];

/// Valid settings (JSON) the mutations start from.
const SETTINGS_JSON_SEEDS: &[&str] = &[
    r#"{"claude_token_file": "~/.config/acme-ltt/token"}"#,
    r#"{"templates": [{"id": "shell", "command": ["/bin/sh"], "sandbox": {"read_write": ["{project}"], "read": ["~/x"]}, "env": {"A": "b"}, "network": "none"}]}"#,
    r#"{"write_deny": ["~/.bashrc"], "trusted_projects": ["~/p"], "token_network": "host", "token_wildcards": true}"#,
    r#"{"templates": [{"id": "t", "command": ["/bin/sh"], "network": {"allow": ["example.com:443"]}, "request_env": ["A"]}]}"#,
];

/// Valid settings (TOML) the mutations start from.
const SETTINGS_TOML_SEEDS: &[&str] = &[
    "claude_token_file = \"~/.config/acme-ltt/token\"\n",
    "[[templates]]\nid = \"shell\"\ncommand = [\"/bin/sh\"]\nnetwork = \"none\"\n[templates.sandbox]\nread_write = [\"{project}\"]\n[templates.env]\nA = \"b\"\n",
    "write_deny = [\"~/.bashrc\"]\ntoken_wildcards = true\n",
];

/// Runs `f` on a thread and waits at most `limit` for it: a hang fails the test instead of
/// stopping it.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("no answer within {limit:?}: a hang (or a panic above)"))
}

/// The cases of one parser that panicked: `(index, first bytes)`.
fn panics_of(cases: &[Vec<u8>], parse: &dyn Fn(&str)) -> Vec<(usize, String)> {
    let mut bad = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let text = String::from_utf8_lossy(c);
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parse(&text))).is_err() {
            bad.push((i, text.chars().take(120).collect()));
        }
    }
    bad
}

/// The request and settings parsers on mutated documents, random bytes, deep nesting, huge
/// strings, NUL bytes and duplicate keys (fixed seeds: the same cases every run; 3,000 of each,
/// 30,000 with `RELAY_FAULTS_LONG=1`): no panic, no hang. An unknown field, anywhere it can go,
/// stays refused by name.
#[test]
fn fuzzed_requests_and_settings_never_panic_the_parsers() {
    let _turn = shared();
    use relay_host::launch::plan::request::Request;
    use relay_host::settings::Settings;
    let n = count(3000);
    let limit = Duration::from_secs(if long_form() { 1200 } else { 120 });
    let bad = within(limit, move || {
        let settings = Settings::from_json(SETTINGS_JSON_SEEDS[1]).unwrap();
        let requests = relay_tests::mutate::cases(24, REQUEST_SEEDS, n);
        let json = relay_tests::mutate::cases(25, SETTINGS_JSON_SEEDS, n);
        // The TOML parser takes about 0.1 s per MiB in a debug build: its huge strings stop at
        // 64 KiB here (the run through the binaries gives it whole ones).
        let toml: Vec<Vec<u8>> = relay_tests::mutate::cases(26, SETTINGS_TOML_SEEDS, n)
            .into_iter()
            .map(|mut c| {
                c.truncate(64 << 10);
                c
            })
            .collect();
        let mut bad = panics_of(&requests, &|t| {
            if let Ok(r) = Request::from_json(t) {
                let _ = r.validate(&settings);
            }
        });
        bad.extend(panics_of(&json, &|t| drop(Settings::from_json(t))));
        bad.extend(panics_of(&toml, &|t| drop(Settings::from_toml(t))));
        bad
    });
    assert!(bad.is_empty(), "panicked on: {bad:?}");

    // Unknown fields, each with a random name and value, are refused naming the field.
    let mut rng = relay_tests::mutate::Rng::new(27);
    for _ in 0..count(200) {
        let name = format!("x_{}", rng.word(6));
        let value = rng.pick(&["1", "null", "\"v\"", "[]", "{}"]).to_string();
        let named = |e: String| {
            assert!(
                e.contains(&format!("unknown field `{name}`")),
                "{name}: {e}"
            )
        };
        let seed = rng.pick(REQUEST_SEEDS);
        let doc = seed.replacen('{', &format!("{{\"{name}\": {value}, "), 1);
        named(Request::from_json(&doc).unwrap_err().to_string());
        let doc = SETTINGS_JSON_SEEDS[1].replacen('{', &format!("{{\"{name}\": {value}, "), 1);
        named(Settings::from_json(&doc).unwrap_err().to_string());
        let doc =
            SETTINGS_JSON_SEEDS[1].replacen("\"id\"", &format!("\"{name}\": {value}, \"id\""), 1);
        named(Settings::from_json(&doc).unwrap_err().to_string());
        let doc = SETTINGS_JSON_SEEDS[1].replacen(
            "\"read_write\"",
            &format!("\"{name}\": {value}, \"read_write\""),
            1,
        );
        named(Settings::from_json(&doc).unwrap_err().to_string());
        let toml_value = rng.pick(&["1", "\"v\"", "[]", "{}"]).to_string();
        let doc = format!("{name} = {toml_value}\n{}", SETTINGS_TOML_SEEDS[1]);
        named(Settings::from_toml(&doc).unwrap_err().to_string());
        let doc =
            SETTINGS_TOML_SEEDS[1].replacen("id = ", &format!("{name} = {toml_value}\nid = "), 1);
        named(Settings::from_toml(&doc).unwrap_err().to_string());
    }
}

/// Exit codes a launch may end with here: the fake agent's 0, or a refusal's.
const LAUNCH_CODES: [i32; 5] = [0, 64, 70, 71, 78];

/// Mutated launch requests through `relay-host launch`, mutated settings (JSON and TOML) through
/// `relay-host status`, mutated `relay-shim` command lines (120, 60, 60 and 150; ten times as
/// many with `RELAY_FAULTS_LONG=1`): each run ends by itself, without a signal or a panic, with a
/// documented exit code; a refusal is one JSON line naming a known error.
#[test]
fn fuzzed_requests_settings_and_shim_arguments_give_only_documented_exit_codes() {
    let _turn = shared();
    let fx = World::agent(&relay_tests::fake_agent());
    let run = |what: &str, mut cmd: Command, codes: &[i32]| -> Out {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let f = finish_with(cmd.spawn().unwrap(), Duration::from_secs(20), &|| false);
        no_panic(what, &f);
        assert!(
            f.code.is_some_and(|c| codes.contains(&c)),
            "{what}: exit {:?}: {}",
            f.code,
            f.stderr.chars().take(400).collect::<String>()
        );
        f
    };
    let req = fx.root.join("fuzz.json");
    let started = std::time::Instant::now();
    for (i, case) in relay_tests::mutate::cases(34, REQUEST_SEEDS, count(120))
        .iter()
        .enumerate()
    {
        std::fs::write(&req, case).unwrap();
        let mut cmd = host_cmd(&fx);
        // The fake agent's record goes to stderr: a session without the project cannot write
        // the record file.
        cmd.args(["--json", "launch"])
            .arg(&req)
            .env("FAKE_AGENT_RECORD", "");
        let what = format!(
            "request {i}: {}",
            String::from_utf8_lossy(case)
                .chars()
                .take(120)
                .collect::<String>()
        );
        let f = run(&what, cmd, &LAUNCH_CODES);
        if f.code != Some(0) {
            let r = refusal(&f);
            assert!(
                [
                    "invalid_spec",
                    "sandbox_unavailable",
                    "settings_invalid",
                    "spawn_failed"
                ]
                .contains(&r["error"].as_str().unwrap_or_default()),
                "{what}: {r}"
            );
        }
    }
    eprintln!("fuzzed requests: {:?}", started.elapsed());
    let settings_json = fx.config.join("settings.json");
    let settings_toml = fx.config.join("settings.toml");
    std::fs::remove_file(&settings_json).unwrap();
    let kinds = [
        (35, SETTINGS_JSON_SEEDS, &settings_json),
        (36, SETTINGS_TOML_SEEDS, &settings_toml),
    ];
    for (seed, seeds, file) in kinds {
        for (i, case) in relay_tests::mutate::cases(seed, seeds, count(60))
            .iter()
            .enumerate()
        {
            std::fs::write(file, case).unwrap();
            let mut cmd = host_cmd(&fx);
            cmd.args(["--json", "status"]);
            let what = format!(
                "{} {i}: {}",
                file.display(),
                String::from_utf8_lossy(case)
                    .chars()
                    .take(120)
                    .collect::<String>()
            );
            let f = run(&what, cmd, &[0, 78]);
            let r: serde_json::Value = serde_json::from_str(&f.stdout)
                .unwrap_or_else(|e| panic!("{what}: status report {e}: {}", f.stdout));
            if !r["settings_error"].is_null() {
                assert_eq!(f.code, Some(78), "{what}: {r}");
            }
            std::fs::remove_file(file).unwrap();
        }
    }
    eprintln!("fuzzed settings: {:?}", started.elapsed());
    let mut rng = relay_tests::mutate::Rng::new(37);
    for i in 0..count(150) {
        let argv = shim_argv(&mut rng);
        let mut cmd = Command::new(relay_tests::relay_shim());
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .args(&argv)
            .stdin(Stdio::null())
            .process_group(0);
        // The shim's own codes, and /bin/false's 1.
        run(
            &format!("shim {i}: {argv:?}"),
            cmd,
            &[0, 1, 70, 78, 126, 127],
        );
    }
    eprintln!("fuzzed shim arguments: {:?}", started.elapsed());
}

/// A `relay-shim` command line: a valid one, changed one to four times (an argument dropped,
/// repeated, swapped, or replaced by an option, a number, a huge or non-UTF-8 word).
fn shim_argv(rng: &mut relay_tests::mutate::Rng) -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStringExt;
    let seeds: [&[&str]; 8] = [
        &["--", "/bin/true"],
        &["--pass-token", "--", "/bin/true"],
        &[
            "--status-fd",
            "3",
            "--session-id",
            "s1",
            "--",
            "/bin/echo",
            "x",
        ],
        &["--pass-fds", "6-7", "--", "/bin/true"],
        &["--sandbox-status-fd", "9", "--", "/bin/true"],
        &["--identity", "--session-id", "s1", "--", "/bin/true"],
        &["--pty", "--", "/bin/false"],
        &["--sandbox-profile", "/x", "--", "/bin/true"],
    ];
    let words = [
        "--",
        "-",
        "",
        "--pass-token",
        "--status-fd",
        "--pass-fds",
        "--session-id",
        "--sandbox-status-fd",
        "--identity",
        "--pty",
        "--sandbox-profile",
        "3",
        "0",
        "1",
        "2",
        "5",
        "-1",
        "99999999999999999999",
        "5-4",
        "3-",
        "6-",
        "/nonexistent",
        "/bin/false",
        "s.1",
        ".s",
        "a/b",
    ];
    let mut argv: Vec<std::ffi::OsString> = rng
        .pick(&seeds)
        .iter()
        .map(std::ffi::OsString::from)
        .collect();
    for _ in 0..rng.below(4) + 1 {
        let at = rng.below(argv.len().max(1));
        let word: std::ffi::OsString = match rng.below(10) {
            0 => "a".repeat(100_000).into(),
            1 => std::ffi::OsString::from_vec(rng.bytes(6)),
            _ => rng.pick(&words).into(),
        };
        match rng.below(4) {
            0 if !argv.is_empty() => drop(argv.remove(at)),
            1 if !argv.is_empty() => argv.insert(at, argv[at].clone()),
            2 if argv.len() > 1 => {
                let other = rng.below(argv.len());
                argv.swap(at, other)
            }
            _ => argv.insert(at.min(argv.len()), word),
        }
    }
    // A NUL cannot be in an argument: the random bytes lose theirs.
    argv.into_iter()
        .map(|a| {
            std::ffi::OsString::from_vec(a.into_vec().into_iter().filter(|&b| b != 0).collect())
        })
        .collect()
}

/// Every line of the state folder's log `name`, parsed: one JSON object a line, or the test
/// fails naming the line (an interleaved or cut write).
fn log_rows(fx: &World, name: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(fx.state.join(name))
        .unwrap()
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let v: serde_json::Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{name} line {}: {e}: {l:?}", i + 1));
            assert!(v.is_object(), "{name} line {}: {l}", i + 1);
            v
        })
        .collect()
}

/// What a load run must leave: every launch one `ok` audit row and one `launch` (201) and one
/// `exit` (code 0) event, no session folder, no placeholders, no proxy socket, no process of the
/// run, no zombie, this process's children and descriptors at their count.
fn assert_load_clean(fx: &World, launches: usize, fds0: usize, kids0: usize) {
    let audit = log_rows(fx, "audit.jsonl");
    assert_eq!(audit.len(), launches, "one audit row per launch");
    assert!(audit.iter().all(|r| r["outcome"] == "ok"), "all ok");
    let events = log_rows(fx, "events.jsonl");
    let of = |kind: &str| events.iter().filter(|e| e["event"] == kind).count();
    assert_eq!(of("launch"), launches, "one launch event per launch");
    assert!(events
        .iter()
        .filter(|e| e["event"] == "launch")
        .all(|e| e["status"] == 201));
    assert_eq!(of("exit"), launches, "one exit event per launch");
    assert!(events
        .iter()
        .filter(|e| e["event"] == "exit")
        .all(|e| e["code"] == 0));
    assert_eq!(
        std::fs::read_dir(fx.state.join("sessions"))
            .unwrap()
            .count(),
        0
    );
    assert!(!fx.state.join("placeholders").exists());
    let unix = std::fs::read_to_string("/proc/net/unix").unwrap();
    assert!(
        !unix.contains(fx.state.to_str().unwrap()),
        "a proxy socket listens"
    );
    let me = std::process::id() as i32;
    let needle = fx.record.to_string_lossy().into_owned();
    assert!(
        wait_until(Duration::from_secs(5), &|| {
            relay_tests::fixture::processes_with_env(&needle).is_empty()
        }),
        "processes of the run left"
    );
    assert!(relay_tests::fixture::zombies_of(me).is_empty());
    assert_eq!(relay_tests::fixture::children_of(me).len(), kids0);
    assert_eq!(
        relay_tests::fixture::open_fds(me).unwrap(),
        fds0,
        "descriptors"
    );
}

/// The `q` quantile (0..=1) of `ms`, sorted here.
fn quantile(ms: &[f64], q: f64) -> f64 {
    let mut v = ms.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Concurrent sandboxed launches with an allow-list (a proxy each): 30 at once (300 with
/// `RELAY_FAULTS_LONG=1`), each answered (exit 0), each session the token whole by hash, each
/// logged once, one JSON object per line, nothing left. While all run (the agents sleep), every
/// host holds the same number of descriptors: none grows with the sessions beside it.
#[test]
fn concurrent_allow_list_launches_are_each_answered_logged_and_cleaned_up() {
    let _turn = alone();
    let n = count(30);
    let fx = World::agent(&relay_tests::fake_agent());
    fx.set_network(serde_json::json!({"allow": ["127.0.0.1:9"]}));
    let want = relay_tests::sha256_hex(&std::fs::read(&fx.token_file).unwrap());
    let me = std::process::id() as i32;
    let (fds0, kids0) = (
        relay_tests::fixture::open_fds(me).unwrap(),
        relay_tests::fixture::children_of(me).len(),
    );
    let started = std::time::Instant::now();
    // Long enough for every session to have started before the first ends.
    let sleep = format!("{}", 3 + n / 10);
    fx.set_agent_args(&["--sleep", &sleep]);
    let running: Vec<_> = (0..n)
        .map(|i| {
            let id = format!("c{i}");
            let req = fx.request(&id, true, &id, &[]);
            let mut cmd = host_cmd(&fx);
            cmd.arg("launch").arg(&req).stderr(Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    let limit = Duration::from_secs(60 + n as u64);
    // Whole lines only: a record being appended may be read half written.
    let recorded = || {
        std::fs::read_to_string(&fx.record)
            .map(|t| t.matches('\n').count())
            .unwrap_or(0)
            >= n
    };
    assert!(
        wait_until(limit, &recorded),
        "the sessions did not all start"
    );
    // An agent records before its host has read the shim's `started` and let go of bwrap's
    // descriptors: each host is counted once it is past its start, which on a busy machine may
    // be a moment after its agent ran.
    let counts = || {
        let mut fds: Vec<usize> = running
            .iter()
            .filter_map(|h| relay_tests::fixture::open_fds(h.id() as i32))
            .collect();
        assert_eq!(fds.len(), n, "every host still runs its session");
        fds.sort();
        fds.dedup();
        fds
    };
    wait_until(Duration::from_secs(2), &|| counts().len() == 1);
    let fds = counts();
    eprintln!("descriptors of each host mid-session: {fds:?}");
    assert_eq!(fds.len(), 1, "hosts differ in their descriptors: {fds:?}");
    for (i, host) in running.into_iter().enumerate() {
        let left = limit
            .saturating_sub(started.elapsed())
            .max(Duration::from_secs(1));
        let f = finish_with(host, left, &|| false);
        no_panic(&format!("launch c{i}"), &f);
        assert_eq!(f.code, Some(0), "launch c{i}: {}", f.stderr);
    }
    eprintln!(
        "{n} concurrent allow-list launches: {:?}",
        started.elapsed()
    );
    let records = relay_tests::read_records(&fx.record);
    assert_eq!(records.len(), n, "one record per session");
    let mut ids: Vec<&str> = records
        .iter()
        .map(|r| r["session_id"].as_str().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "each session once");
    assert!(records.iter().all(|r| r["token_sha256"] == want.as_str()));
    assert_load_clean(&fx, n, fds0, kids0);
}

/// Sequential sandboxed launches, a fresh token before each: 100 (1,000 with
/// `RELAY_FAULTS_LONG=1`), each answered, each session its own token by hash, each logged once,
/// nothing left. Each launch is followed by one on a reference installation whose state folder is
/// removed first (so nothing of it ages): growth of the host's own shows as the aged series
/// slowing against the reference, while the machine's noise moves both. Prints p50/p99 and the
/// first tenth's median against the last tenth's, for both (the figures of
/// docs/PERFORMANCE.md; times are printed, never asserted).
#[test]
fn sequential_launches_are_each_answered_logged_and_cleaned_up() {
    let _turn = alone();
    let n = count(100);
    let fx = World::agent(&relay_tests::fake_agent());
    let req = fx.request("seq", true, "seq", &[]);
    let me = std::process::id() as i32;
    let (fds0, kids0) = (
        relay_tests::fixture::open_fds(me).unwrap(),
        relay_tests::fixture::children_of(me).len(),
    );
    let fresh = World::agent(&relay_tests::fake_agent());
    let fresh_req = fresh.request("seq", true, "seq", &[]);
    let (mut ms, mut ref_ms) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let token = fx.fresh_token();
        let t = std::time::Instant::now();
        let f = finish(host_cmd(&fx).arg("launch").arg(&req).stderr(Stdio::piped()));
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let _ = std::fs::remove_dir_all(&fresh.state);
        let t = std::time::Instant::now();
        let r = finish(host_cmd(&fresh).arg("launch").arg(&fresh_req));
        ref_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(r.code, Some(0), "reference launch {i}");
        no_panic(&format!("launch {i}"), &f);
        assert_eq!(f.code, Some(0), "launch {i}: {}", f.stderr);
        let records = relay_tests::read_records(&fx.record);
        assert_eq!(records.len(), 1, "launch {i}");
        assert_eq!(
            records[0]["token_sha256"],
            relay_tests::sha256_hex(token.as_bytes()).as_str(),
            "launch {i}: its own token"
        );
        fx.clear_record();
    }
    let tenth = (n / 10).max(1);
    let growth = |v: &[f64]| quantile(&v[n - tenth..], 0.5) / quantile(&v[..tenth], 0.5);
    for (what, v) in [("aged", &ms), ("reference", &ref_ms)] {
        eprintln!(
            "{n} sequential launches, {what}: p50 {:.1} ms, p99 {:.1} ms; median of the first \
             {tenth} {:.1} ms, of the last {tenth} {:.1} ms ({:.2}x)",
            quantile(v, 0.5),
            quantile(v, 0.99),
            quantile(&v[..tenth], 0.5),
            quantile(&v[n - tenth..], 0.5),
            growth(v)
        );
    }
    eprintln!(
        "growth of the aged series against the reference: {:.2}x",
        growth(&ms) / growth(&ref_ms)
    );
    assert_load_clean(&fx, n, fds0, kids0);
}

/// SIGTERM (and SIGKILL) to the host at once or a few milliseconds after it was started, while
/// it still prepares the launch: whatever point it reached, no process of the session outlives
/// it, `gc` afterwards leaves no session folder and no placeholders list, and a launch that was
/// answered has its `exit` row (the host's own, or `gc`'s `host_lost`). After SIGTERM (held back
/// until the launch is answered or refused) the home and the project are as they were; a SIGKILL
/// between making a placeholder and recording it can leave that one (docs/RELIABILITY.md).
#[test]
fn a_host_signalled_while_it_prepares_the_launch_leaves_nothing_after_gc() {
    let _turn = shared();
    for sig in [libc::SIGTERM, libc::SIGKILL] {
        for delay_ms in [0u64, 1, 3, 6, 10, 20, 40, 80] {
            let what = format!("signal {sig} after {delay_ms} ms");
            let fx = World::agent(&relay_tests::fake_agent());
            let (home_before, project_before) = (paths_under(&fx.home), paths_under(&fx.project));
            shell_settings(&fx);
            let req = fx.root.join("shell.json");
            let request = serde_json::json!({
                "kind": "terminal", "template": "shell", "project": fx.project,
                "sandbox": true, "extra_args": ["-c", "sleep 30"],
            });
            std::fs::write(&req, request.to_string()).unwrap();
            let host = host_cmd(&fx).arg("launch").arg(&req).spawn().unwrap();
            let pid = host.id() as i32;
            std::thread::sleep(Duration::from_millis(delay_ms));
            let session = descendants(pid);
            // SAFETY: kill takes integers only; the pid is our own child, not yet reaped.
            unsafe { libc::kill(pid, sig) };
            let f = finish_with(host, Duration::from_secs(15), &|| false);
            assert!(!f.killed, "{what}: the host did not end");
            let needle = fx.record.to_string_lossy().into_owned();
            let gone = wait_until(Duration::from_secs(10), &|| {
                relay_tests::fixture::processes_with_env(&needle).is_empty()
                    && !session.iter().any(|&p| alive(p))
            });
            let left: Vec<String> = relay_tests::fixture::processes_with_env(&needle)
                .into_iter()
                .chain(session.iter().copied().filter(|&p| alive(p)))
                .map(|p| {
                    let comm =
                        std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
                    // SAFETY: as above; a leftover of this test only.
                    unsafe { libc::kill(p, libc::SIGKILL) };
                    format!("{p} {}", comm.trim())
                })
                .collect();
            assert!(
                gone,
                "{what}: processes of the session outlived the host: {left:?} (host {:?})",
                (f.code, f.signal)
            );
            let gc = finish(host_cmd(&fx).arg("gc").stderr(Stdio::piped()));
            assert_eq!(gc.code, Some(0), "{what}: {}", gc.stderr);
            if sig == libc::SIGTERM {
                assert_eq!(paths_under(&fx.home), home_before, "{what}: the home");
                assert_eq!(
                    paths_under(&fx.project),
                    project_before,
                    "{what}: the project"
                );
            }
            let sessions = fx.state.join("sessions");
            let left = std::fs::read_dir(&sessions).map(|d| d.count()).unwrap_or(0);
            assert_eq!(left, 0, "{what}: a session folder stayed");
            assert!(!fx.state.join("placeholders").exists(), "{what}");
            let events = std::fs::read_to_string(fx.state.join("events.jsonl")).unwrap_or_default();
            let count = |kind: &str| events.lines().filter(|l| l.contains(kind)).count();
            let answered = count(r#""status":201"#);
            let exits = count(r#""event":"exit""#);
            assert!(exits <= 1 && answered <= exits, "{what}: {events}");
        }
    }
}
