//! Launches that start: who gets the token, on which descriptor, and who does not.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use relay_tests::run::signals_in_child;
use serde_json::json;

use super::*;

fn terminal_req(fx: &World, id: &str) -> serde_json::Value {
    json!({"kind": "terminal", "template": "claude-code", "session_id": id, "project": fx.project})
}

/// Issue 5 (1): with the setting empty the template's value passes unchanged (9, no hash, no
/// fd 5) for a `claude` and a `claude-code` terminal launch; with the template's env empty too,
/// neither has the variable.
#[test]
fn no_setting_leaves_the_template_value_and_passes_no_token() {
    let fx = world();
    fx.settings(json!({"templates": [claude_template(&[], json!({VAR: "9"}), &[])]}));
    for (i, req) in [fx.claude_req("a1"), terminal_req(&fx, "a2")]
        .iter()
        .enumerate()
    {
        let out = fx.launch(req);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let rec = &fx.wait_records(i + 1)[i];
        assert_no_token_fd(rec, Some("9"));
        assert_eq!(rec["env"][VAR], "9");
    }
    assert_started(&fx, "a1", "none");
    assert_started(&fx, "a2", "none");

    fx.settings(json!({"templates": [claude_template(&[], json!({}), &[])]}));
    for (i, req) in [fx.claude_req("b1"), terminal_req(&fx, "b2")]
        .iter()
        .enumerate()
    {
        let out = fx.launch(req);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let rec = &fx.wait_records(i + 3)[i + 2];
        assert_eq!(rec["session_id"], ["b1", "b2"][i]);
        assert_no_token_fd(rec, None);
    }
}

/// Issue 5 (2): a sandboxed claude session answers 201; its start line has the variable 5, the
/// token's hash (the file's trailing newline trimmed) and exactly fds 0, 1, 2, 5.
#[test]
fn sandboxed_claude_session_gets_the_token_on_fd_5() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let out = fx.launch(&fx.claude_req("c1"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let recs = fx.wait_records(1);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["session_id"], "c1");
    assert_got_token(&recs[0], &fx.token);
    assert_started(&fx, "c1", "fd");
}

/// Issue 5 (3): the same for a sandboxed terminal launch of `claude-code`, by `launch` and by
/// `run` (its default template).
#[test]
fn sandboxed_terminal_claude_code_gets_the_token_by_launch_and_run() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let out = fx.launch(&terminal_req(&fx, "t1"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let rec = &fx.wait_records(1)[0];
    assert_got_token(rec, &fx.token);
    assert_started(&fx, "t1", "fd");

    let out = fx.host(&["run", "--project", fx.project.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let recs = fx.wait_records(2);
    assert_eq!(recs.len(), 2);
    assert_got_token(&recs[1], &fx.token);
    let id = recs[1]["session_id"].as_str().unwrap().to_owned();
    assert_ne!(id, "t1");
    assert_started(&fx, &id, "fd");
}

/// Issue 5 (4): the file is read afresh at each launch and each resume, with no restart.
#[test]
fn a_rewritten_token_is_read_at_the_next_launch_and_resume() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let first = fx.token.clone();
    assert_eq!(fx.launch(&fx.claude_req("r1")).code, Some(0));
    let second = relay_tests::fake_token();
    fx.write_token(&second);
    assert_eq!(fx.launch(&fx.claude_req("r2")).code, Some(0));
    let third = relay_tests::fake_token();
    fx.write_token(&third);
    let resume =
        json!({"kind": "claude", "session_id": "r3", "resume": "r1", "project": fx.project});
    assert_eq!(fx.launch(&resume).code, Some(0));
    let recs = fx.wait_records(3);
    assert_got_token(&recs[0], &first);
    assert_got_token(&recs[1], &second);
    assert_got_token(&recs[2], &third);
    // Outside a trusted project a token launch reads the relay-owned user settings only.
    let argv = recs[2]["argv"].as_array().unwrap();
    assert_eq!(
        argv[1..],
        [
            json!("--setting-sources"),
            json!("user"),
            json!("--resume"),
            json!("r1")
        ],
        "{argv:?}"
    );
}

/// Issue 5 (6): a `claude-code` session that also reads `~/.config` cannot `cat` the token
/// file, and its output holds no token (while it did get the token on fd 5).
#[test]
fn a_claude_session_cannot_read_the_token_file_through_a_grant() {
    let fx = world();
    let cat = format!("cat '{}'; echo \"rc=$?\"", fx.token_file.display());
    fx.with_token(vec![claude_template(
        &["--sh", &cat],
        json!({}),
        &["~/.config"],
    )]);
    let out = fx.launch(&fx.claude_req("g1"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let last = out.stdout.lines().last().unwrap_or_default();
    let rc = last
        .strip_prefix("rc=")
        .expect("the shell ran and printed rc=");
    assert_ne!(rc, "0", "cat of the token file succeeded");
    assert_got_token(&fx.wait_records(1)[0], &fx.token);
    assert_no_token("stdout", out.stdout.as_bytes(), &fx.token);
    assert_no_token("stderr", out.stderr.as_bytes(), &fx.token);
}

/// Issue 5 (7): the built-in `shell` template (read-write `~`, sandboxed) cannot read the token
/// either: `cat` fails, and neither its output file nor any log holds the token.
#[test]
fn a_sandboxed_shell_cannot_read_the_token_file() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let script = format!(
        "cat '{}' > \"$TMPDIR/out\" 2>&1; echo $? > \"$TMPDIR/rc\"; \
         echo \"${{{VAR}-unset}}\" > \"$TMPDIR/var\"; \
         if [ -e /proc/$$/fd/5 ]; then echo open; else echo closed; fi > \"$TMPDIR/fd5\"",
        fx.token_file.display()
    );
    let req = json!({"kind": "terminal", "template": "shell", "session_id": "sh1", "keep": true,
                     "extra_args": ["-c", script]});
    let out = fx.launch(&req);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_started(&fx, "sh1", "none");
    let tmp = fx.session_dir("sh1").join("tmp");
    let rc = fs::read_to_string(tmp.join("rc")).expect("the shell ran and wrote rc");
    assert_ne!(rc.trim(), "0", "cat of the token file succeeded");
    // Not a Claude launch: no token descriptor, no variable.
    assert_eq!(fs::read_to_string(tmp.join("var")).unwrap(), "unset\n");
    assert_eq!(fs::read_to_string(tmp.join("fd5")).unwrap(), "closed\n");
    let shown = fs::read(tmp.join("out")).unwrap();
    assert_no_token("the shell's out", &shown, &fx.token);
    for f in ["audit.jsonl", "events.jsonl", "relay-host.log"] {
        assert_no_token(f, &fs::read(fx.state.join(f)).unwrap(), &fx.token);
    }
    assert_no_token("stdout", out.stdout.as_bytes(), &fx.token);
    assert_no_token("stderr", out.stderr.as_bytes(), &fx.token);
}

/// Issue 5 (10): with the setting set, the host's 5 wins over a template's 9.
#[test]
fn the_setting_wins_over_a_template_value() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({VAR: "9"}), &[])]);
    let out = fx.launch(&terminal_req(&fx, "w1"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_got_token(&fx.wait_records(1)[0], &fx.token);
}

/// Issue 5 (11): with the setting set, an unsandboxed launch (by `launch` and by
/// `run --no-sandbox`) and an ssh (`host`) launch get no variable, no descriptor, no hash.
#[test]
fn unsandboxed_and_ssh_launches_get_no_token() {
    let mut fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let req =
        json!({"kind": "claude", "session_id": "u1", "project": fx.project, "sandbox": false});
    let out = fx.launch(&req);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let rec = &fx.wait_records(1)[0];
    assert_no_token_fd(rec, None);
    assert_eq!(rec["fds"], json!([0, 1, 2]));
    assert_started(&fx, "u1", "none");

    // `run --no-sandbox` too.
    let out = fx.host(&[
        "run",
        "--no-sandbox",
        "--project",
        fx.project.to_str().unwrap(),
    ]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let rec = &fx.wait_records(2)[1];
    assert_no_token_fd(rec, None);
    assert_eq!(rec["fds"], json!([0, 1, 2]));

    // A stand-in `ssh` on the host's PATH: the fake agent under that name.
    let bin = fx.root.join("bin");
    fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(relay_tests::fake_agent(), bin.join("ssh")).unwrap();
    fx.host_env.insert(
        "PATH".into(),
        format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
    );
    let req = json!({"kind": "claude", "session_id": "u2", "project": fx.project,
                     "host": "build.example"});
    let out = fx.launch(&req);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let rec = &fx.wait_records(3)[2];
    let argv: Vec<&str> = rec["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    // ssh found once, by its absolute path, with the relay-owned (here: empty) configuration:
    // a `~/.ssh/config` a session may have written is never read.
    assert_eq!(argv[0], bin.join("ssh").to_str().unwrap(), "{argv:?}");
    assert_eq!(
        argv[1..6],
        ["-F", "/dev/null", "-t", "--", "build.example"],
        "{argv:?}"
    );
    assert_eq!(argv[6], fake_agent_arg());
    assert_no_token_fd(rec, None);
    assert_eq!(rec["fds"], json!([0, 1, 2]));
    assert_started(&fx, "u2", "none");
}

/// Issue 5 (13): token variables in relay-host's own environment never reach the session; the
/// variable it sees is the host's 5.
#[test]
fn token_variables_in_the_hosts_environment_never_reach_the_session() {
    let mut fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    for (k, v) in [
        ("ANTHROPIC_AUTH_TOKEN", "sk-ant-host-auth"),
        ("ANTHROPIC_API_KEY", "sk-ant-host-key"),
        ("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-host"),
        (VAR, "7"),
    ] {
        fx.host_env.insert(k.into(), v.into());
    }
    let out = fx.launch(&fx.claude_req("e1"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let rec = &fx.wait_records(1)[0];
    assert_got_token(rec, &fx.token);
    let env = rec["env"].as_object().unwrap();
    for k in [
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_API_KEY",
        "CLAUDE_CODE_OAUTH_TOKEN",
    ] {
        assert!(!env.contains_key(k), "{k} reached the session");
    }
    assert_eq!(env[VAR], "5");
    assert_eq!(env["RELAY_SESSION_ID"], "e1");
    assert_eq!(env["TMPDIR"], "/tmp");

    // Without a token (unsandboxed) the host's 7 is still dropped and no variable is set; the
    // person's own Anthropic login stays (the environment rules drop it only when a token is passed).
    let req =
        json!({"kind": "claude", "session_id": "e2", "project": fx.project, "sandbox": false});
    let out = fx.launch(&req);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let rec = &fx.wait_records(2)[1];
    assert_no_token_fd(rec, None);
    let env = rec["env"].as_object().unwrap();
    assert!(!env.contains_key("CLAUDE_CODE_OAUTH_TOKEN"));
    assert_eq!(env["ANTHROPIC_AUTH_TOKEN"], "sk-ant-host-auth");
}

/// The host exits with the session's own code, and 128 + the signal that killed it.
#[test]
fn the_host_exits_with_the_sessions_code() {
    let fx = world();
    fx.with_token(vec![claude_template(&["--exit", "3"], json!({}), &[])]);
    let out = fx.launch(&fx.claude_req("x3"));
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    fx.with_token(vec![claude_template(
        &["--sh", "kill -TERM $PPID"],
        json!({}),
        &[],
    )]);
    let out = fx.launch(&fx.claude_req("x4"));
    assert_eq!(out.code, Some(128 + 15), "{}", out.stderr);
    let exits: Vec<_> = fx
        .log("events.jsonl")
        .into_iter()
        .filter(|e| e["event"] == "exit")
        .map(|e| e["code"].clone())
        .collect();
    assert_eq!(exits, [json!(3), json!(143)]);
    assert_eq!(fx.records().len(), 2);
}

/// The state folder is 0700 and every folder in it 0700, every file 0600, with relay-host
/// run under umask 0 (it sets the modes itself), for a kept session in the default mode (stand-in
/// mode): its `ca.pem` alone is 0644, the session CA's certificate (shown to the session; its
/// key stays in `relay-stand-in`'s memory), holding no key and no token.
#[test]
fn the_state_folder_is_private() {
    let mut fx = world();
    fx.umask0 = true;
    fx.with_token(vec![in_the_default_mode(claude_template(
        &[],
        json!({}),
        &[],
    ))]);
    let mut kept = fx.claude_req("p1");
    kept["keep"] = json!(true);
    assert_eq!(fx.launch(&kept).code, Some(0));
    let refused = json!({"kind": "claude", "session_id": "bad id"});
    assert_eq!(fx.launch(&refused).code, Some(64));
    let (mut seen, mut certificates) = (0, 0);
    let mut stack = vec![fx.state.clone()];
    while let Some(d) = stack.pop() {
        let mode = fs::symlink_metadata(&d).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700, "{}", d.display());
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = fs::symlink_metadata(e.path()).unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                assert!(m.is_file(), "{} is not a file", e.path().display());
                // The one program the host places in a session folder: git's wrapper.
                let own_program = e.file_name() == "git";
                let certificate = e.file_name() == "ca.pem";
                let want = match (own_program, certificate) {
                    (true, _) => 0o700,
                    (_, true) => 0o644,
                    _ => 0o600,
                };
                assert_eq!(
                    m.permissions().mode() & 0o7777,
                    want,
                    "{}",
                    e.path().display()
                );
                if certificate {
                    assert_only_a_certificate(&e.path(), &fx.token);
                    certificates += 1;
                }
                seen += 1;
            }
        }
    }
    // audit, events, log and the kept session's lock and mark at least.
    assert!(seen >= 4, "{seen} files");
    assert_eq!(certificates, 1, "the kept stand-in session's ca.pem");
}

/// `file` holds one PEM certificate and nothing else: no private key, no token.
fn assert_only_a_certificate(file: &std::path::Path, token: &str) {
    let text = fs::read_to_string(file).unwrap();
    let blocks: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("-----BEGIN "))
        .collect();
    assert_eq!(blocks, ["-----BEGIN CERTIFICATE-----"], "{text}");
    assert!(
        text.trim_end().ends_with("-----END CERTIFICATE-----"),
        "{text}"
    );
    assert!(!text.contains("PRIVATE"), "{text}");
    assert_no_token("ca.pem", text.as_bytes(), token);
}

/// A request read from stdin (`launch -`) gives the session `/dev/null` as its stdin, and
/// the session still gets the token.
#[test]
fn a_request_on_stdin_leaves_the_session_dev_null() {
    let fx = world();
    fx.with_token(vec![claude_template(
        &["--sh", "readlink /proc/self/fd/0"],
        json!({}),
        &[],
    )]);
    let mut cmd = fx.host_cmd();
    cmd.args(["launch", "-"])
        .stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(fx.claude_req("in1").to_string().as_bytes())
            .unwrap();
        // Closed: the host reads the request to EOF. A session given this pipe would name it.
    }
    let out = finish(child, TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "/dev/null\n");
    assert_got_token(&fx.wait_records(1)[0], &fx.token);
}

/// A request's `env` reaches the sandboxed program only: never relay-shim or bwrap, which run
/// outside the sandbox while the token's descriptor is open (a request may name `LD_PRELOAD`).
/// Read from `/proc/PID/environ` of the shim and of bwrap while the session runs.
#[test]
fn a_requests_env_reaches_only_the_sandboxed_program() {
    let fx = world();
    // The agent runs until the environments have been read.
    let done = fx.project.join(".read");
    let mut template = claude_template(&["--wait-for", done.to_str().unwrap()], json!({}), &[]);
    template["request_env"] = json!(["REQ_VAR", "LD_PRELOAD"]);
    fx.with_token(vec![template]);
    let req = json!({"kind": "claude", "session_id": "v1", "project": fx.project,
                     "env": {"REQ_VAR": "seen"}});
    let running = fx.launch_bg(&req);
    let rec = fx.wait_records(1)[0].clone();
    assert_got_token(&rec, &fx.token);
    assert_eq!(rec["env"]["REQ_VAR"], "seen");
    let shim = relay_tests::fixture::children_of(running.id() as i32);
    assert_eq!(shim.len(), 1, "the host's children: {shim:?}");
    let bwrap = relay_tests::fixture::children_of(shim[0]);
    assert_eq!(bwrap.len(), 1, "the shim's children: {bwrap:?}");
    for (what, pid) in [("relay-shim", shim[0]), ("bwrap", bwrap[0])] {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        let text = String::from_utf8_lossy(&environ);
        assert!(!text.contains("REQ_VAR="), "{what} got the request's env");
        assert!(
            !text.contains("LD_PRELOAD="),
            "{what} got the request's LD_PRELOAD"
        );
    }
    fs::write(&done, "").unwrap();
    let out = running.finish(TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.stderr);

    // A request may not name the token descriptor itself, nor (on a launch that carries the
    // token) a variable the template does not list, nor a loader variable even when listed.
    let before = fx.records().len();
    for (var, want) in [
        (VAR, format!("env {VAR:?}: only the host names a token descriptor, beside the descriptor")),
        ("OTHER", "env \"OTHER\": not in the template's request_env list, so a launch that carries the token may not set it".to_string()),
        ("LD_PRELOAD", "env \"LD_PRELOAD\": a launch that carries the token may not set LD_* variables".to_string()),
    ] {
        let req = json!({"kind": "claude", "session_id": "v2", "project": fx.project,
                         "env": {var: "5"}});
        let out = fx.launch(&req);
        let msg = assert_refused(&fx, &out, 64, "invalid_spec");
        assert_eq!(msg, want);
    }
    assert_eq!(fx.records().len(), before, "nothing started");
}

/// A host that dies (SIGKILL, so it cannot forward anything) takes its session with it: the shim
/// gets SIGTERM from the kernel (its parent-death signal) and forwards it; bwrap's
/// `--die-with-parent` ends the sandbox. No process of the session is left. Also when the host
/// was started with SIGTERM ignored (`trap '' TERM` in its parent): the shim, which keeps an
/// inherited ignored signal ignored, must still act on its parent-death signal.
#[test]
fn a_session_ends_when_its_host_is_killed() {
    for term_ignored in [false, true] {
        session_ends_when_its_host_is_killed(term_ignored);
    }
}

fn session_ends_when_its_host_is_killed(term_ignored: bool) {
    let fx = world();
    let mark = format!("RELAY_KILL_TEST={}", sha256_hex(fx.token.as_bytes()));
    let (k, v) = mark.split_once('=').unwrap();
    fx.with_token(vec![claude_template(
        &["--sleep", "20"],
        json!({ k: v }),
        &[],
    )]);
    let req = json!({"kind": "claude", "session_id": "k1", "project": fx.project});
    let running = fx.launch_bg_with(&req, |cmd| {
        if term_ignored {
            signals_in_child(cmd, &[libc::SIGTERM], libc::SIG_IGN);
        }
    });
    fx.wait_records(1);
    let before = relay_tests::fixture::processes_with_env(&mark);
    assert!(
        before.len() >= 3,
        "shim, bwrap and the agent carry the mark: {before:?}"
    );
    // SAFETY: kill takes two integers; the pid is our own child, not yet reaped.
    assert_eq!(unsafe { libc::kill(running.id() as i32, libc::SIGKILL) }, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut left = relay_tests::fixture::processes_with_env(&mark);
    while !left.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        left = relay_tests::fixture::processes_with_env(&mark);
    }
    assert!(
        left.is_empty(),
        "SIGTERM ignored {term_ignored}: processes of the session outlived the host: {left:?}"
    );
}

/// A wrapper of the real `/usr/bin/bwrap` at `<root>/<name>`: each run appends to `<name>.fds`
/// one line with the descriptors it was handed (those not close-on-exec in it, read from
/// `/proc/PID/fdinfo` by a child shell, so the looking opens nothing in it) and to
/// `<name>.args` `--- N` then its N arguments, each ended by a NUL byte; then it execs bwrap. With
/// `features` its text names the options of a bwrap that binds by descriptor and reports its
/// start (`BwrapFeatures` reads them from the file); without, it reads as an older bwrap.
fn bwrap_wrapper(fx: &World, name: &str, features: bool) -> PathBuf {
    let path = fx.root.join(name);
    let comment = if features {
        "# wraps a bubblewrap with --bind-fd, --ro-bind-fd and --json-status-fd"
    } else {
        "# wraps bubblewrap"
    };
    let fds = fx.root.join(format!("{name}.fds"));
    let args = fx.root.join(format!("{name}.args"));
    let script = format!(
        r#"#!/bin/sh
{comment}
/bin/sh -c 'l=""; for f in /proc/$PPID/fdinfo/*; do fl=$(sed -n "s/^flags:[[:space:]]*//p" "$f" 2>/dev/null); [ -n "$fl" ] || continue; if [ $((fl & 02000000)) -eq 0 ]; then l="$l ${{f##*/}}"; fi; done; echo "$l" >> "$0"' '{fds}'
if [ "$1" = --args ]; then
  f=/proc/self/fd/$2; a=$2; shift 2
  n=$(tr -cd '\000' < "$f" | wc -c)
  {{ printf '%s\0' "--- $((n + $#))"; cat "$f"; printf '%s\0' "$@"; }} >> '{args}'
  exec /usr/bin/bwrap --args "$a" "$@"
fi
printf '%s\0' "--- $#" "$@" >> '{args}'
exec /usr/bin/bwrap "$@"
"#,
        fds = fds.display(),
        args = args.display(),
    );
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// What each run of [`bwrap_wrapper`] `name` was handed: its descriptors (sorted) and its
/// arguments (the options of its `--args` file in place of `--args N`).
fn wrapper_runs(fx: &World, name: &str) -> Vec<(Vec<i32>, Vec<String>)> {
    let fds = fs::read_to_string(fx.root.join(format!("{name}.fds"))).unwrap();
    let fds: Vec<Vec<i32>> = fds
        .lines()
        .map(|l| {
            let mut v: Vec<i32> = l.split_whitespace().map(|n| n.parse().unwrap()).collect();
            v.sort_unstable();
            v
        })
        .collect();
    let text = fs::read_to_string(fx.root.join(format!("{name}.args"))).unwrap();
    let mut lines = text.split_terminator('\0');
    let mut args = Vec::new();
    while let Some(head) = lines.next() {
        let n: usize = head.strip_prefix("--- ").unwrap().parse().unwrap();
        args.push(
            lines
                .by_ref()
                .take(n)
                .map(str::to_owned)
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(fds.len(), args.len());
    fds.into_iter().zip(args).collect()
}

/// With a bwrap that binds by descriptor and reports its start (Debian's 0.8.0, the real
/// `/usr/bin/bwrap` behind a wrapper that records what it is handed), a sandboxed launch runs
/// bwrap once, unprobed: its options in a file (`--args 9`), `--json-status-fd 6` first, each
/// checked source as `--bind-fd N` / `--ro-bind-fd N` numbered from 10 (the private `/tmp`
/// among them), no check inside the sandbox; bwrap holds exactly 0, 1, 2, the token at 5, the
/// status pipe at 6, the options file at 9 and the bind descriptors, and the session exactly 0,
/// 1, 2 and 5, with the token.
#[test]
fn a_sandboxed_launch_binds_by_descriptor_and_the_session_holds_only_0_1_2_5() {
    let fx = world();
    // The real bwrap named directly: the session's descriptors.
    let mut settings = json!({"claude_token_file": SETTING, "bwrap": "/usr/bin/bwrap",
                              "templates": [claude_template(&[], json!({}), &[])]});
    fx.settings(settings.clone());
    let out = fx.launch(&fx.claude_req("d1"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_got_token(&fx.wait_records(1)[0], &fx.token);
    assert_started(&fx, "d1", "fd");

    let wrapper = bwrap_wrapper(&fx, "bwrap-fd", true);
    settings["bwrap"] = json!(wrapper);
    fx.settings(settings);
    let out = fx.launch(&fx.claude_req("d2"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let rec = &fx.wait_records(2)[1];
    assert_eq!(rec["session_id"], "d2");
    assert_got_token(rec, &fx.token);
    assert_eq!(rec["fds"], json!([0, 1, 2, 5]));
    assert_started(&fx, "d2", "fd");

    let runs = wrapper_runs(&fx, "bwrap-fd");
    assert_eq!(runs.len(), 1, "one run, no probe: {runs:?}");
    let (fds, args) = &runs[0];
    assert_eq!(args[..2], ["--json-status-fd", "6"]);
    let mut numbers: Vec<i32> = Vec::new();
    let mut dests: Vec<&str> = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if a == "--bind-fd" || a == "--ro-bind-fd" {
            numbers.push(args[i + 1].parse().unwrap());
            dests.push(&args[i + 2]);
        }
        assert!(
            a != "--bind" && a != "--json-status-fd" || i == 0,
            "{a} at {i}"
        );
    }
    assert!(
        numbers.len() >= 3,
        "the project, the Claude config and /tmp at least: {args:?}"
    );
    let want: Vec<i32> = (10..10 + numbers.len() as i32).collect();
    let mut sorted = numbers.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, want, "{args:?}");
    assert!(dests.contains(&"/tmp"), "{dests:?}");
    assert!(dests.contains(&fx.project.to_str().unwrap()), "{dests:?}");
    assert!(!args.iter().any(|a| a == "relay-sandbox-check"), "{args:?}");
    // After `--` the network's forwarder and the agent, no shell before them.
    let sep = args.iter().position(|a| a == "--").unwrap();
    assert!(!args[sep..].iter().any(|a| a == "/bin/sh"), "{args:?}");
    assert!(args[sep..].contains(&fake_agent_arg()), "{args:?}");
    let mut want_fds = vec![0, 1, 2, 5, 6, 9];
    want_fds.extend(want);
    assert_eq!(fds, &want_fds, "what bwrap was handed");
    assert_no_token("bwrap's arguments", args.join("\n").as_bytes(), &fx.token);
}

/// With a bwrap whose file names neither option (an older one; here the same real bwrap behind a
/// wrapper), the launch keeps the old form: bwrap is probed first, binds by path, checks each
/// mount inside before the program runs, and is handed no descriptor but 0, 1, 2, the token and
/// its options file.
#[test]
fn an_older_bwrap_is_probed_and_binds_by_path_with_the_check_inside() {
    let fx = world();
    let wrapper = bwrap_wrapper(&fx, "bwrap-old", false);
    fx.settings(json!({"claude_token_file": SETTING, "bwrap": wrapper,
                       "templates": [claude_template(&[], json!({}), &[])]}));
    let out = fx.launch(&fx.claude_req("o1"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_got_token(&fx.wait_records(1)[0], &fx.token);
    assert_started(&fx, "o1", "fd");
    let runs = wrapper_runs(&fx, "bwrap-old");
    assert_eq!(runs.len(), 2, "the probe, then the launch: {runs:?}");
    let mut probe: Vec<String> = relay_token::sandbox::NAMESPACE_FLAGS
        .iter()
        .map(|s| s.to_string())
        .collect();
    probe.extend(["--ro-bind", "/", "/", "--", "true"].map(String::from));
    assert_eq!(runs[0].1, probe);
    // (The probe is a plain child of the host: it also inherits whatever the host inherited.)
    assert!(
        !runs[0].0.contains(&5),
        "the probe got a token fd: {:?}",
        runs[0].0
    );
    let (fds, args) = &runs[1];
    assert_eq!(fds, &[0, 1, 2, 5, 9], "the token and the options file");
    for a in ["--json-status-fd", "--bind-fd", "--ro-bind-fd"] {
        assert!(!args.iter().any(|x| x == a), "{a} in {args:?}");
    }
    assert!(args.iter().any(|a| a == "relay-sandbox-check"), "{args:?}");
    assert!(
        args.windows(3).any(|w| w[0] == "--bind" && w[2] == "/tmp"),
        "{args:?}"
    );
}

/// A kept session launched again under its id, resuming its conversation (the documented way
/// back to a kept session), starts with the token: relay's git wrapper in the kept session
/// folder is written afresh, and whatever stands at its place (here a link to a file outside)
/// is replaced, never followed.
#[test]
fn a_kept_session_launches_again_under_its_id() {
    let fx = world();
    fx.with_token(vec![claude_template(&[], json!({}), &[])]);
    let first = json!({"kind": "claude", "session_id": "k1", "project": fx.project, "keep": true});
    assert_eq!(fx.launch(&first).code, Some(0));
    let wrapper = fx.session_dir("k1").join("git");
    assert!(
        wrapper.is_file(),
        "the token launch ran git through the wrapper"
    );
    let again = json!({"kind": "claude", "session_id": "k1", "resume": "k1",
                       "project": fx.project, "keep": true});
    let out = fx.launch(&again);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let victim = fx.root.join("victim");
    fs::write(&victim, "not relay's\n").unwrap();
    fs::remove_file(&wrapper).unwrap();
    std::os::unix::fs::symlink(&victim, &wrapper).unwrap();
    let out = fx.launch(&again);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(fs::read_to_string(&victim).unwrap(), "not relay's\n");
    let meta = fs::symlink_metadata(&wrapper).unwrap();
    assert!(meta.is_file(), "the link was replaced by a file");
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    assert_eq!(
        fs::read_to_string(&wrapper).unwrap(),
        relay_token::sandbox::git_guard::WRAPPER
    );
    for rec in fx.wait_records(3) {
        assert_eq!(rec["session_id"], "k1");
        assert_got_token(&rec, &fx.token);
    }
}
