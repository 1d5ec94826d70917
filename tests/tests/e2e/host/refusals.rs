//! Launches the host must refuse, and what a refusal leaves behind.

use std::fs;
use std::os::unix::fs::{chown, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use serde_json::json;

use super::*;

/// Issue 5 (8): a missing token file refuses a sandboxed Claude launch with
/// `sandbox_unavailable` (78) naming the path; no start line, an `error` audit row, no session
/// folder.
#[test]
fn a_missing_token_file_refuses_the_launch() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    fs::remove_file(&fx.token_file).unwrap();
    let out = fx.launch(&json!({"kind": "claude", "session_id": "m1", "project": fx.project}));
    let msg = assert_refused(&fx, &out, 78, "sandbox_unavailable");
    assert_eq!(
        msg,
        format!(
            "read claude_token_file {}: no such file or directory",
            fx.token_file.display()
        )
    );
    let audit = fx.log("audit.jsonl").pop().unwrap();
    assert_eq!(audit["message"], msg);
    assert_eq!(audit["session_id"], "m1");
    assert_nothing_started(&fx, "m1");
    assert_only_logs_left(&fx);
    // `status` says the same, naming the setting as stored.
    let out = fx.host(&["status", "--json"]);
    assert_eq!(out.code, Some(78), "an unusable token file: {}", out.stderr);
    let status: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(status["claude_token_file"], SETTING);
    assert_eq!(status["token"]["ok"], false, "{status}");
    assert_eq!(status["token"]["error"], msg);
}

/// Issue 5 (9): a token file relay-host cannot read (it runs as uid 65534, the file is root's
/// 0600) refuses the same way; the message and the audit row hold the path, never the token.
#[test]
fn an_unreadable_token_file_refuses_the_launch() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    // Folders the unprivileged host can use; the token stays root's, 0600.
    let nobody = Some(65534);
    fs::create_dir(&fx.state).unwrap();
    fs::set_permissions(&fx.state, fs::Permissions::from_mode(0o700)).unwrap();
    chown(&fx.state, nobody, nobody).unwrap();
    chown(&fx.project, nobody, nobody).unwrap();
    assert_eq!(
        fs::metadata(&fx.token_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let req =
        fx.request_file(&json!({"kind": "claude", "session_id": "n1", "project": fx.project}));
    let mut cmd = fx.host_cmd();
    let host_args: Vec<std::ffi::OsString> = cmd.get_args().map(|a| a.to_owned()).collect();
    let mut wrapped = Command::new("setpriv");
    wrapped
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(cmd.get_program())
        .args(host_args)
        .arg("launch")
        .arg(&req);
    wrapped.env_clear();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            wrapped.env(k, v);
        }
    }
    wrapped.process_group(0);
    cmd = wrapped;
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = finish(cmd.spawn().unwrap(), TIMEOUT);
    let msg = assert_refused(&fx, &out, 78, "sandbox_unavailable");
    assert_eq!(
        msg,
        format!(
            "read claude_token_file {}: permission denied",
            fx.token_file.display()
        )
    );
    let audit = fx.log("audit.jsonl").pop().unwrap();
    assert_eq!(audit["message"], msg);
    assert_no_token("stderr", out.stderr.as_bytes(), &fx.token);
    assert_no_token(
        "audit",
        &fs::read(fx.state.join("audit.jsonl")).unwrap(),
        &fx.token,
    );
    assert_nothing_started(&fx, "n1");
    // The refusal was written by the unprivileged host itself.
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        fs::metadata(fx.state.join("audit.jsonl")).unwrap().uid(),
        65534
    );
}

/// Issue 5 (12): a request carrying `claude_token`, an unknown key, a bad session id, or kind
/// `pi` with the claude-code template is `invalid_spec` (64), and starts nothing.
#[test]
fn bad_requests_are_invalid_spec() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let p = fx.project.clone();
    let cases = [
        (
            json!({"kind": "claude", "project": p, "claude_token": "sk-ant-oat01-x"}),
            "claude_token",
        ),
        (
            json!({"kind": "claude", "project": p, "colour": "blue"}),
            "colour",
        ),
        (
            json!({"kind": "claude", "project": p, "session_id": "../escape"}),
            "session_id",
        ),
        (
            json!({"kind": "claude", "project": p, "session_id": ""}),
            "session_id",
        ),
        (
            json!({"kind": "claude", "project": p, "session_id": "--pass-token"}),
            "session_id",
        ),
        (
            json!({"kind": "claude", "project": p, "resume": "-x"}),
            "resume",
        ),
        (
            json!({"kind": "pi", "template": "claude-code", "project": p}),
            "pi",
        ),
    ];
    for (req, word) in cases {
        let out = fx.launch(&req);
        let msg = assert_refused(&fx, &out, 64, "invalid_spec");
        assert!(msg.contains(word), "{msg:?} should name {word:?}");
        assert!(!msg.contains("sk-ant-oat01-x"), "{msg:?} echoes the value");
        assert!(fx.records().is_empty());
    }
    let sessions = fx.state.join("sessions");
    let left = fs::read_dir(&sessions).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "session folders left behind");
}

/// A token path that crosses a symlink a sandboxed session could have made (here in the
/// home, which a `shell` that writes the home grants read-write) refuses the launch, naming
/// the link.
#[test]
fn a_token_path_through_a_makeable_symlink_refuses_the_launch() {
    let fx = world();
    let shell = relay_tests::home_writing_shell();
    fx.with_token(vec![claude_template(&[], json!({}), &[]), shell]);
    let real = fx.home.join("real-ltt");
    fs::rename(fx.token_file.parent().unwrap(), &real).unwrap();
    let link = fx.home.join(".config/acme-ltt");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = fx.launch(&json!({"kind": "claude", "session_id": "l1", "project": fx.project}));
    let msg = assert_refused(&fx, &out, 78, "sandbox_unavailable");
    assert!(
        msg.contains(&format!("follows symlink \"{}\"", link.display())),
        "{msg}"
    );
    assert_no_token("stderr", out.stderr.as_bytes(), &fx.token);
    assert_nothing_started(&fx, "l1");
    assert_only_logs_left(&fx);
}

/// The allow-list's forwarder `exec`s the session's program with the token's descriptor, so
/// one a session could have replaced refuses the launch as a planted `relay-shim` does:
/// relay-host installed with its `relay-net-forward` in `~/tools`, inside the read-write grant
/// of `~` of a `shell` that writes the home (relay-shim from a folder outside every grant).
#[test]
fn a_forwarder_a_session_could_have_planted_refuses_the_launch() {
    let fx = world();
    let shell = relay_tests::home_writing_shell();
    fx.with_token(vec![claude_template(&[], json!({}), &[]), shell]);
    let tools = fx.home.join("tools");
    let out = launch_installed(&fx, &tools, &["relay-host", "relay-net-forward"], "f1");
    let msg = assert_refused(&fx, &out, 78, "sandbox_unavailable");
    assert_planted(&msg, "relay-net-forward", &tools);
    assert_no_token("stderr", out.stderr.as_bytes(), &fx.token);
    assert_nothing_started(&fx, "f1");
}

/// A stand-in session's `relay-stand-in` is handed the real token, so one a session could have
/// replaced refuses the launch as a planted forwarder does: relay-host installed with its
/// programs in `~/tools`, inside the read-write grant of `~` of a `shell` that writes the home,
/// and a template in stand-in mode. The real token never reaches the planted program: nothing
/// runs.
#[test]
fn a_stand_in_program_a_session_could_have_planted_refuses_the_launch() {
    let fx = world();
    fx.with_token(vec![stand_in_template(), relay_tests::home_writing_shell()]);
    let tools = fx.home.join("tools");
    let programs = ["relay-host", "relay-net-forward", "relay-stand-in"];
    let out = launch_installed(&fx, &tools, &programs, "f2");
    let msg = assert_refused(&fx, &out, 78, "sandbox_unavailable");
    assert_planted(&msg, "relay-stand-in", &tools);
    assert_no_token("stderr", out.stderr.as_bytes(), &fx.token);
    assert_nothing_started(&fx, "f2");
}

/// relay-host holds none of stand-in mode's TLS code: without `relay-stand-in` beside it, a
/// launch of the `claude-code` template that leaves `token_mode` out (stand-in mode, the
/// built-in's default on Linux) is refused, naming the path it looked at and, on a terminal, how
/// to install it or opt out; nothing starts, and it never falls back to the real token.
#[test]
fn a_stand_in_launch_without_its_program_is_refused_naming_it() {
    let fx = world();
    fx.with_token(vec![in_the_default_mode(claude_template(
        &[],
        json!({}),
        &[],
    ))]);
    let safe = fx.root.join("safe-bin");
    let programs = ["relay-host", "relay-net-forward", "relay-shim"];
    let out = launch_installed(&fx, &safe, &programs, "f3");
    let msg = assert_refused(&fx, &out, 71, "spawn_failed");
    let program = safe.join("relay-stand-in");
    assert_eq!(
        msg,
        format!("stand-in mode needs {}: not found", program.display())
    );
    // `relay-host run` tells the person how to install it, or how to opt out: never a silent
    // fall back to the real token.
    let hint = relay_host::human::hint(&msg).unwrap_or_default();
    assert!(
        hint.starts_with(
            "install relay-stand-in beside relay-host (`cargo install --locked --path \
             relay-host` installs both"
        ) && hint.ends_with(
            "or give the template \"token_mode\": \"pipe\" to hand its sessions \
             the real token on fd 5 instead"
        ),
        "{hint}"
    );
    assert_no_token("stderr", out.stderr.as_bytes(), &fx.token);
    assert_nothing_started(&fx, "f3");
    // A person is told how to install it, or how to opt out.
    let cmd = installed_launch(&fx, &safe, &programs, "f4");
    let (code, shown) = super::operator::on_a_terminal(cmd);
    assert_eq!(code, 71, "{shown}");
    for words in [
        "hint: install relay-stand-in beside relay-host (`cargo install --locked --path \
         relay-host` installs both",
        "or give the template \"token_mode\": \"pipe\"",
    ] {
        assert!(shown.contains(words), "{shown}");
    }
    assert_no_token("the terminal", shown.as_bytes(), &fx.token);
    assert_nothing_started(&fx, "f4");
    // `status` says so before any launch: a failed check naming the template and the path,
    // with the hint a launch gives.
    let mut cmd = Command::new(safe.join("relay-host"));
    fx.host_setup(&mut cmd, &fx.state)
        .args(["status", "--json"]);
    let out = cmd.output().unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let want = format!(
        "template \"claude-code\" is in stand-in mode, which needs {}: not found",
        program.display()
    );
    let check = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "relay-stand-in")
        .unwrap_or_else(|| panic!("no relay-stand-in check: {r}"));
    assert_eq!(check["ok"], false, "{check}");
    assert_eq!(check["detail"], json!(want), "{check}");
    assert!(
        check["hint"]
            .as_str()
            .is_some_and(|h| h.starts_with("install relay-stand-in beside relay-host")),
        "{check}"
    );
    assert_eq!(r["problems"], json!([]), "a check, not a problem: {r}");
    assert_eq!(out.status.code(), Some(78), "{r}");
}

/// The test template in stand-in mode, with an allow-list.
fn stand_in_template() -> serde_json::Value {
    let mut t = claude_template(&[], json!({}), &[]);
    t["token_mode"] = json!("stand_in");
    t["network"] = json!({"allow": ["api.anthropic.com:443"]});
    t
}

/// [`installed_launch`] run: what it printed and how it ended.
fn launch_installed(fx: &World, dir: &std::path::Path, programs: &[&str], id: &str) -> Out {
    let mut cmd = installed_launch(fx, dir, programs, id);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    finish(cmd.spawn().unwrap(), TIMEOUT)
}

/// relay-host installed in `dir` with `programs` (file names of the build) beside it, relay-shim
/// from `<root>/safe-bin` (outside every grant) when it is not among them, launching session
/// `id` in the project.
fn installed_launch(fx: &World, dir: &std::path::Path, programs: &[&str], id: &str) -> Command {
    let safe = fx.root.join("safe-bin");
    fs::create_dir_all(dir).unwrap();
    fs::create_dir_all(&safe).unwrap();
    let built = relay_tests::relay_host().parent().unwrap().to_path_buf();
    for p in programs {
        relay_tests::copy_program(&built.join(p), &dir.join(p));
    }
    if !programs.contains(&"relay-shim") {
        relay_tests::copy_program(&built.join("relay-shim"), &safe.join("relay-shim"));
    }
    let req = fx.request_file(&json!({"kind": "claude", "session_id": id, "project": fx.project}));
    let mut cmd = Command::new(dir.join("relay-host"));
    fx.host_setup(&mut cmd, &fx.state)
        .env("PATH", format!("{}:/usr/bin:/bin", safe.display()))
        .arg("launch")
        .arg(&req);
    cmd
}

/// `msg` is the refusal of `program` in `dir`, a folder a session could write.
fn assert_planted(msg: &str, program: &str, dir: &std::path::Path) {
    let path = dir.join(program).display().to_string();
    let want = format!("{program} {path:?} lies inside the read-write grant");
    assert!(msg.starts_with(&want), "{msg}");
}

/// The complaint of the test doubles of bwrap below, on the session's stderr.
const FAKE_COMPLAINT: &str = "fake-bwrap: cannot set up the sandbox";

/// A stand-in for bwrap at `<root>/<name>` whose text names the three options a bwrap that
/// reports its start has (so it is not probed before a launch). Each run appends its first two
/// arguments as one line to the returned log, then runs `body`.
fn fake_bwrap(fx: &World, name: &str, body: &str) -> (PathBuf, PathBuf) {
    let path = fx.root.join(name);
    let log = fx.root.join(format!("{name}.log"));
    fs::write(
        &path,
        format!(
            "#!/bin/sh\n# A test double of bubblewrap: --bind-fd, --ro-bind-fd, --json-status-fd\n\
             if [ \"$1\" = --args ]; then tr '\\0' '\\n' < /proc/self/fd/$2 | head -n 2 \
             | paste -sd ' ' >> '{log}'; else echo \"$1 $2\" >> '{log}'; fi\n{body}\n",
            log = log.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    (path, log)
}

/// Asserts a launch refused with `sandbox_unavailable` after the shim ran bwrap: exit 78;
/// stderr is bwrap's complaint (the session's stderr), then the answer, which is the last event
/// and the only one of `id` (no 201); one `error` audit row with the same message, `token` `fd`
/// (the token pipe went to the shim, and with it to bwrap, which never started the session);
/// nothing started, nothing left but the logs, the token nowhere. Returns the message.
fn assert_refused_after_spawn(fx: &World, out: &Out, id: &str) -> String {
    assert_eq!(out.code, Some(78), "stderr: {}", out.stderr);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{:?}", out.stderr);
    assert_eq!(lines[0], FAKE_COMPLAINT);
    let answer: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(answer["event"], "launch");
    assert_eq!(answer["error"], "sandbox_unavailable", "{answer}");
    assert_eq!(answer["status"], 400);
    assert_eq!(answer["session_id"], id);
    let of_id: Vec<serde_json::Value> = fx
        .log("events.jsonl")
        .into_iter()
        .filter(|e| e["session_id"] == id)
        .collect();
    assert_eq!(
        of_id,
        std::slice::from_ref(&answer),
        "the refusal is the only event"
    );
    assert!(
        !fs::read_to_string(fx.state.join("events.jsonl"))
            .unwrap()
            .contains("\"status\":201"),
        "a 201 answer was written"
    );
    let message = answer["message"].as_str().unwrap().to_owned();
    let rows: Vec<serde_json::Value> = fx
        .log("audit.jsonl")
        .into_iter()
        .filter(|r| r["session_id"] == id)
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["event"], "session_launch");
    assert_eq!(rows[0]["outcome"], "error");
    assert_eq!(rows[0]["message"], message.as_str());
    assert_eq!(rows[0]["token"], "fd", "{}", rows[0]);
    assert_nothing_started(fx, id);
    assert_only_logs_left(fx);
    assert_no_token("stdout", out.stdout.as_bytes(), &fx.token);
    assert_no_token("stderr", out.stderr.as_bytes(), &fx.token);
    for f in relay_tests::files_under(&fx.state) {
        assert_no_token(&f.display().to_string(), &fs::read(&f).unwrap(), &fx.token);
    }
    message
}

/// The words of a bwrap that fails its probe (`bwrap --unshare-user ... --ro-bind / / -- true`).
fn probe_failed(bwrap: &std::path::Path, detail: &str) -> String {
    format!(
        "bwrap {:?} does not work: sandboxed launches are refused; install a working bubblewrap \
         with `apt-get install bubblewrap`, with user namespaces allowed; its test run said: \
         {detail}",
        bwrap.display().to_string()
    )
}

/// A `bwrap` setting that names a program without the start report (`/bin/false`) is probed
/// before the launch; the probe fails, the launch is refused `sandbox_unavailable` with the
/// probe's words (how to install bubblewrap), and nothing is spawned.
#[test]
fn a_bwrap_that_fails_its_probe_refuses_before_anything_starts() {
    let fx = world();
    fx.settings(json!({"claude_token_file": SETTING, "bwrap": "/bin/false",
                       "templates": [claude_template(&[], json!({}), &[])]}));
    let out = fx.launch(&json!({"kind": "claude", "session_id": "f1", "project": fx.project}));
    let msg = assert_refused(&fx, &out, 78, "sandbox_unavailable");
    assert_eq!(
        msg,
        probe_failed("/bin/false".as_ref(), "a test run failed: exit status: 1")
    );
    assert!(msg.contains("apt-get install bubblewrap"));
    assert_no_token("stderr", out.stderr.as_bytes(), &fx.token);
    assert_nothing_started(&fx, "f1");
    assert_only_logs_left(&fx);
}

/// A bwrap that reports its start is not probed before the launch; one that ends before the
/// sandbox exists (here: it passes the probe, fails the launch) refuses the launch
/// `sandbox_unavailable` with its status, pointing at the session's stderr, where its complaint
/// is. The shim never says `started`, so no 201 answer.
#[test]
fn a_bwrap_that_ends_before_the_sandbox_starts_refuses_the_launch() {
    let fx = world();
    let (bwrap, log) = fake_bwrap(
        &fx,
        "fake-bwrap",
        &format!(
            "case \" $* \" in *' --ro-bind / / -- true '*) exit 0;; esac\n\
             echo '{FAKE_COMPLAINT}' >&2\nsleep 0.3\nexit 1"
        ),
    );
    fx.settings(json!({"claude_token_file": SETTING, "bwrap": bwrap,
                       "templates": [claude_template(&[], json!({}), &[])]}));
    let out = fx.launch(&json!({"kind": "claude", "session_id": "e1", "project": fx.project}));
    let msg = assert_refused_after_spawn(&fx, &out, "e1");
    assert_eq!(
        msg,
        format!(
            "bwrap {:?} ended with status 1 before the sandbox started; its message is on the \
             session's stderr",
            bwrap.display().to_string()
        )
    );
    // The launch ran first (`--json-status-fd 6` first of the options it reads from its
    // `--args` file), unprobed; the probe came only after it failed.
    assert_eq!(
        fs::read_to_string(&log).unwrap(),
        "--json-status-fd 6\n--unshare-user --unshare-pid\n"
    );
}

/// The same with a bwrap that fails even the probe run after the launch: the refusal gives the
/// probe's words, how to install bubblewrap.
#[test]
fn a_bwrap_that_never_works_is_named_by_its_probe_after_the_launch() {
    let fx = world();
    let (bwrap, log) = fake_bwrap(
        &fx,
        "broken-bwrap",
        &format!("echo '{FAKE_COMPLAINT}' >&2\nsleep 0.3\nexit 1"),
    );
    fx.settings(json!({"claude_token_file": SETTING, "bwrap": bwrap,
                       "templates": [claude_template(&[], json!({}), &[])]}));
    let out = fx.launch(&json!({"kind": "claude", "session_id": "e2", "project": fx.project}));
    let msg = assert_refused_after_spawn(&fx, &out, "e2");
    assert_eq!(
        msg,
        probe_failed(
            &bwrap,
            &format!("a test run failed: exit status: 1: {FAKE_COMPLAINT}")
        )
    );
    assert_eq!(
        fs::read_to_string(&log).unwrap(),
        "--json-status-fd 6\n--unshare-user --unshare-pid\n"
    );
}

/// What the start report cannot catch: a mount bwrap fails to make after it reported the
/// sandbox's namespaces (here the real bwrap, handed one extra bind of a missing source first).
/// The launch was answered (201, `started`) by then; the session ends with bwrap's status 1,
/// its message on the session's stderr, and the `exit` event says so. The agent never ran, so
/// the token reached nothing, and nothing of it is printed or left.
#[test]
fn a_mount_bwrap_fails_after_its_start_report_ends_the_answered_session() {
    let fx = world();
    let missing = fx.root.join("no-such-source");
    let (bwrap, log) = fake_bwrap(
        &fx,
        "late-failing-bwrap",
        &format!(
            "exec /usr/bin/bwrap --ro-bind '{}' /mnt/relay-missing \"$@\"",
            missing.display()
        ),
    );
    fx.settings(json!({"claude_token_file": SETTING, "bwrap": bwrap,
                       "templates": [claude_template(&[], json!({}), &[])]}));
    let out = fx.launch(&json!({"kind": "claude", "session_id": "late1", "project": fx.project}));
    assert_eq!(out.code, Some(1), "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "bwrap: Can't find source path {}",
            missing.display()
        )),
        "{}",
        out.stderr
    );
    let of_id: Vec<serde_json::Value> = fx
        .log("events.jsonl")
        .into_iter()
        .filter(|e| e["session_id"] == "late1")
        .collect();
    let answer = of_id
        .iter()
        .find(|e| e["event"] == "launch")
        .expect("the launch answer");
    assert_eq!(answer["status"], 201, "{of_id:?}");
    let exit = of_id.last().unwrap();
    assert_eq!(
        (&exit["event"], &exit["code"], &exit["status"]),
        (&json!("exit"), &json!(1), &json!(1)),
        "{of_id:?}"
    );
    // Launched once, unprobed.
    assert_eq!(fs::read_to_string(&log).unwrap(), "--json-status-fd 6\n");
    assert!(fx.records().is_empty(), "the agent ran: {:?}", fx.records());
    assert_no_token("stdout", out.stdout.as_bytes(), &fx.token);
    assert_no_token("stderr", out.stderr.as_bytes(), &fx.token);
    for f in relay_tests::files_under(&fx.state) {
        assert_no_token(&f.display().to_string(), &fs::read(&f).unwrap(), &fx.token);
    }
}

/// Issue 31: a gateway reached by plain `http://` on a host other than this machine's
/// loopback is refused when the settings are read, naming the key and saying to use https:
/// every request carries the token. `status` shows it and exits 78; a launch is refused with
/// the same words and nothing starts. An `http://` gateway on the loopback is accepted.
#[test]
fn a_plain_http_gateway_off_the_loopback_is_refused_when_settings_are_read() {
    let fx = world();
    let url = "http://192.0.2.10:8080";
    let mut t = claude_template(&[], json!({}), &[]);
    t["api_base_url"] = json!(url);
    fx.with_token(vec![t.clone()]);
    let words = format!(
        "api_base_url {url:?}: plain http:// would send the token in clear text; use https:// \
         (http:// only to a loopback host: 127.0.0.0/8, ::1, localhost)"
    );
    let out = fx.host(&["status", "--json"]);
    assert_eq!(out.code, Some(78), "{}", out.stderr);
    let status: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let settings = fx.config.join("settings.json");
    let error = status["settings_error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!(
            "{}: templates[0].api_base_url: {words}",
            settings.display()
        )),
        "{error}"
    );
    let out = fx.launch(&fx.claude_req("gw"));
    let msg = assert_refused(&fx, &out, 78, "settings_invalid");
    assert!(msg.contains(&words), "{msg}");
    assert_nothing_started(&fx, "gw");
    // The loopback is this machine: plain http:// to it is accepted (while no template shares
    // the host's network: the test below).
    t["api_base_url"] = json!("http://127.0.0.1:8080");
    fx.with_token(vec![t, json!({"id": "shell", "network": "none"})]);
    let out = fx.host(&["status", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(status["settings_error"].is_null(), "{status}");
}

/// Issue 42: a plain `http://` gateway on the loopback is refused while a template shares the
/// host's network (the built-in `shell`'s `"host"`): such a session could listen on the port
/// while the gateway is down and receive the token. The words name both templates and the
/// fix; a launch is refused and nothing starts. With `shell` given a network of its own, the
/// same gateway is accepted.
#[test]
fn a_loopback_http_gateway_is_refused_while_a_session_could_listen_in_its_place() {
    let fx = world();
    let url = "http://127.0.0.1:8080";
    let mut t = claude_template(&[], json!({}), &[]);
    t["api_base_url"] = json!(url);
    let id = t["id"].as_str().unwrap().to_string();
    fx.with_token(vec![t.clone()]);
    let words = format!(
        "template {id:?}: api_base_url {url:?} is plain http:// on this machine's loopback, where \
         a session of template \"shell\" (it shares the host's network) could listen in the \
         gateway's place and receive the token; give template \"shell\" \"network\": \"none\" \
         or an allow-list, or use an https:// gateway"
    );
    let out = fx.host(&["status", "--json"]);
    assert_eq!(out.code, Some(78), "{}", out.stderr);
    let status: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let error = status["settings_error"].as_str().unwrap_or_default();
    assert!(error.ends_with(&words), "{status}");
    let out = fx.launch(&fx.claude_req("gw"));
    let msg = assert_refused(&fx, &out, 78, "settings_invalid");
    assert!(msg.contains(&words), "{msg}");
    assert_nothing_started(&fx, "gw");
    fx.with_token(vec![t, json!({"id": "shell", "network": "none"})]);
    let out = fx.host(&["status", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(status["settings_error"].is_null(), "{status}");
}
