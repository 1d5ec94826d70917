//! Stand-in mode's launch wiring, end to end with the real binaries and no Claude: a token
//! launch whose template says `token_mode: "stand_in"` hands the session a stand-in on fd 5
//! (shaped like a setup token, not the real one), shows the session CA's certificate at
//! `/run/relay/ca.pem` named by `NODE_EXTRA_CA_CERTS`, and its proxy terminates TLS for the API
//! host with a leaf that CA signed (curl trusting it gets through to the proxy; without it, it
//! refuses the certificate); each refusal is a `stand_in_refused` event. The same template in pipe mode hands the real token and sets no
//! CA. The operator sees the mode and a stand-in session's API use in `ps`, and `stop` ends the
//! session with its proxy. The real token's path to the API is `relay-host/src/stand_in/proxy_tests.rs`'s; real Claude
//! Code's is `tests/e2e/stand_in.rs`'s.
//!
//! Run: `cargo test -p relay-tests --test e2e -- stand_in_launch::`. Linux only (bwrap's namespaces).
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Stdio;

use relay_tests::fake_agent;
use relay_tests::world::{World, SCRIPT_TIMEOUT};
use serde_json::json;

/// The session: what fd 5 held (its hash, length and first 13 bytes), `NODE_EXTRA_CA_CERTS`,
/// a copy of the CA certificate, and curl to the API host with and without that CA.
fn script(fx: &World, port: u16) -> std::path::PathBuf {
    let p = fx.project.display();
    let url = format!("https://127.0.0.1:{port}/v1/messages");
    let text = format!(
        "#!/bin/sh\n\
         t=$(cat <&5)\n\
         printf '%s' \"$t\" | sha256sum | cut -d' ' -f1 > {p}/fd5.sha\n\
         printf '%s' \"$t\" | wc -c | tr -d ' ' > {p}/fd5.len\n\
         printf '%s' \"$t\" | cut -c1-13 > {p}/fd5.prefix\n\
         echo \"${{NODE_EXTRA_CA_CERTS:-unset}}\" > {p}/ca.var\n\
         cp /run/relay/ca.pem {p}/ca.pem 2>/dev/null\n\
         c=$(curl -s -o /dev/null -m 10 -w '%{{http_code}}' --cacert /run/relay/ca.pem \
             -H \"Authorization: Bearer $t\" {url}); echo \"$c $?\" > {p}/with-ca\n\
         c=$(curl -s -o /dev/null -m 10 -w '%{{http_code}}' {url}); echo \"$c $?\" > {p}/without-ca\n"
    );
    let path = fx.project.join("probe.sh");
    std::fs::write(&path, text).unwrap();
    path
}

fn settings(fx: &World, script: &Path, port: u16, mode: &str) {
    let s = json!({
        "claude_token_file": "~/.config/acme-ltt/token",
        "templates": [{
            "id": "claude-code",
            "command": ["/bin/sh", script],
            "sandbox": {"read_write": ["{project}"]},
            "network": {"allow": []},
            "api_base_url": format!("https://127.0.0.1:{port}"),
            "token_mode": mode,
        }],
    });
    fx.settings(s);
}

fn read(fx: &World, name: &str) -> String {
    std::fs::read_to_string(fx.project.join(name))
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
fn a_stand_in_session_gets_the_stand_in_and_its_ca_and_pipe_mode_the_real_token() {
    let fx = World::agent(&fake_agent());
    let real = fx.fresh_token();
    // An "API" that takes each connection and closes it: the proxy's upstream TLS to it fails
    // (421), after the session's TLS with the proxy succeeded.
    let api = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = api.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&seen);
    std::thread::spawn(move || {
        for mut c in api.incoming().flatten() {
            let mut first = [0u8; 4096];
            let n = std::io::Read::read(&mut c, &mut first).unwrap_or(0);
            log.lock().unwrap().extend_from_slice(&first[..n]);
        }
    });
    let probe = script(&fx, port);
    settings(&fx, &probe, port, "stand_in");
    let out = fx.launch_session("standin", &[], SCRIPT_TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let sha = read(&fx, "fd5.sha");
    assert_eq!(sha.len(), 64, "fd 5 was read");
    assert_ne!(
        sha,
        relay_tests::sha256_hex(real.as_bytes()),
        "not the real token"
    );
    assert_eq!(read(&fx, "fd5.prefix"), "sk-ant-oat01-");
    let len: usize = read(&fx, "fd5.len").parse().unwrap();
    assert_eq!(
        len,
        "sk-ant-oat01-".len() + real.len(),
        "the real token's length of random"
    );
    assert_eq!(read(&fx, "ca.var"), "/run/relay/ca.pem");
    assert!(read(&fx, "ca.pem").starts_with("-----BEGIN CERTIFICATE-----"));
    assert_eq!(
        read(&fx, "with-ca"),
        "421 0",
        "TLS with the proxy, then no upstream TLS"
    );
    assert_eq!(
        read(&fx, "without-ca"),
        "000 60",
        "the leaf is the session CA's"
    );
    let got = seen.lock().unwrap().clone();
    assert!(
        got.starts_with(&[0x16, 0x03]),
        "a TLS ClientHello, no clear text: {got:?}"
    );
    // Both refusals are events: the upstream's TLS (421), the session's handshake (curl
    // without the CA: status 0).
    let refused: Vec<(u64, String)> = fx
        .log("events.jsonl")
        .iter()
        .filter(|e| e["event"] == "stand_in_refused" && e["session_id"] == "standin")
        .map(|e| {
            (
                e["status"].as_u64().unwrap(),
                e["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let statuses: Vec<u64> = refused.iter().map(|r| r.0).collect();
    assert_eq!(statuses, [421, 0], "{refused:?}");
    // Pipe mode (the default): the real token on fd 5, no CA.
    let _ = std::fs::remove_file(fx.project.join("ca.pem"));
    settings(&fx, &probe, port, "pipe");
    let out = fx.launch_session("pipe", &[], SCRIPT_TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    assert_eq!(
        read(&fx, "fd5.sha"),
        relay_tests::sha256_hex(real.as_bytes())
    );
    // (Whatever the host's own environment says: relay sets nothing.)
    assert_ne!(read(&fx, "ca.var"), "/run/relay/ca.pem");
    assert_eq!(read(&fx, "ca.pem"), "");
    // The audit rows say what fd 5 carried.
    let modes: Vec<(String, String, String)> = (fx.log("audit.jsonl").iter())
        .filter(|r| r["outcome"] == "ok")
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (s("session_id"), s("token"), s("token_mode"))
        })
        .collect();
    let want = |id: &str, mode: &str| (id.to_string(), "fd".to_string(), mode.to_string());
    assert!(modes.contains(&want("standin", "stand_in")), "{modes:?}");
    assert!(modes.contains(&want("pipe", "pipe")), "{modes:?}");
}

/// A stand-in session's allow-list is `relay-stand-in`'s: a destination off it is refused there
/// and reported on the program's report descriptor, and relay-host writes it as the same
/// `network_denied` event a pipe-mode session's refusal is (session, host, port, why, the
/// setting that would allow it, nothing else); the destination never sees a connection.
#[test]
fn a_stand_in_sessions_refused_destination_is_a_network_denied_event() {
    let fx = World::agent(&fake_agent());
    fx.fresh_token();
    let off = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let off_port = off.local_addr().unwrap().port();
    off.set_nonblocking(true).unwrap();
    let p = fx.project.display();
    let script = fx.project.join("off-list.sh");
    let text = format!(
        "#!/bin/sh\n\
         c=$(curl -s -o /dev/null -m 10 -w '%{{http_connect}}' https://127.0.0.1:{off_port}/)\n\
         echo \"$c $?\" > {p}/off-list\n"
    );
    std::fs::write(&script, text).unwrap();
    // The API host is another port: only it is let through besides the (empty) allow-list.
    settings(&fx, &script, 9, "stand_in");
    let out = fx.launch_session("denied", &[], SCRIPT_TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    assert_eq!(read(&fx, "off-list"), "403 56", "the proxy's refusal");
    assert!(off.accept().is_err(), "the destination was reached");
    let denied: Vec<serde_json::Value> = fx
        .log("events.jsonl")
        .into_iter()
        .filter(|e| e["event"] == "network_denied")
        .collect();
    assert_eq!(denied.len(), 1, "{denied:?}");
    let e = &denied[0];
    let want = json!({
        "session_id": "denied",
        "host": "127.0.0.1",
        "port": off_port,
        "reason": "not on the allow-list",
        "allow_with": format!(
            "add \"127.0.0.1:{off_port}\" to the template's network allow-list \
             (\"network\": {{\"allow\": [...]}}) in relay-host's settings"
        ),
    });
    for (k, v) in want.as_object().unwrap() {
        assert_eq!(&e[k], v, "{k}");
    }
    let keys: Vec<&String> = e.as_object().unwrap().keys().collect();
    let all = [
        "allow_with",
        "event",
        "host",
        "port",
        "reason",
        "session_id",
        "ts",
    ];
    assert_eq!(keys, all);
    let log = std::fs::read_to_string(fx.state.join("relay-host.log")).unwrap_or_default();
    assert!(
        log.contains(&format!(
            "session denied: network refused 127.0.0.1:{off_port}"
        )),
        "the log line"
    );
}

/// The `relay-stand-in` processes of `fx`'s sessions (its socket, in the command line, lies in
/// `fx`'s state folder): pids.
fn stand_in_programs(fx: &World) -> Vec<u32> {
    let state = fx.state.display().to_string();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let args: Vec<String> = (cmdline.split(|b| *b == 0))
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args[0].ends_with("relay-stand-in") && args.iter().any(|a| a.starts_with(&state)) {
            found.push(pid);
        }
    }
    found
}

/// How long the test waits for a session to come up, or a process to go.
const TEN_S: std::time::Duration = std::time::Duration::from_secs(10);

/// A stand-in session's `relay-stand-in` (which holds the real token) ends with its session, and
/// with its host: none of this fixture's is left once relay-host has exited, nor after a
/// `kill -9` of relay-host while the session runs (its parent-death signal).
#[test]
fn the_stand_in_program_ends_with_its_session_and_with_a_killed_host() {
    let fx = World::agent(&fake_agent());
    fx.fresh_token();
    let p = fx.project.display();
    let script = fx.project.join("wait.sh");
    let text = format!("#!/bin/sh\ntouch {p}/up\nwhile [ ! -e {p}/go ]; do sleep 0.05; done\n");
    std::fs::write(&script, text).unwrap();
    settings(&fx, &script, 9, "stand_in");
    for (id, kill) in [("ends", false), ("killed", true)] {
        let _ = std::fs::remove_file(fx.project.join("up"));
        let _ = std::fs::remove_file(fx.project.join("go"));
        let req = fx.request(id, true, id, &[]);
        let mut host = fx
            .launch_cmd(&req)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert!(
            relay_tests::wait_until(TEN_S, &|| fx.project.join("up").exists()),
            "{id}: up"
        );
        assert_eq!(stand_in_programs(&fx).len(), 1, "{id}: it runs");
        if kill {
            host.kill().unwrap();
        } else {
            std::fs::write(fx.project.join("go"), "").unwrap();
        }
        let st = host.wait().unwrap();
        assert_eq!(st.success(), !kill, "{id}: {st}");
        if !kill {
            assert_eq!(
                stand_in_programs(&fx),
                [0u32; 0],
                "{id}: gone with the host"
            );
        }
        let gone = relay_tests::wait_until(TEN_S, &|| stand_in_programs(&fx).is_empty());
        std::fs::write(fx.project.join("go"), "").unwrap();
        assert!(gone, "{id}: relay-stand-in outlived its host");
    }
}

/// `relay-host ARGS` for `fx`: (exit code, stdout).
fn host(fx: &World, args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(&fx.host)
        .arg("--config-dir")
        .arg(&fx.config)
        .arg("--state-dir")
        .arg(&fx.state)
        .args(args)
        .env("HOME", &fx.home)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The operator's view of a stand-in session: `ps` says its mode and its API use so far (2
/// requests, both answered 200, bytes each way: counts, no content); `relay-host stop ID` ends
/// it at once, and with it its `relay-stand-in`; the audit row says `token_mode: stand_in`
/// and the `stand_in_use` event has the totals; `stop --all` ends every running session.
#[test]
fn ps_shows_a_stand_in_session_s_mode_and_api_use_and_stop_ends_it_with_its_proxy() {
    let fx = World::agent(&fake_agent());
    fx.fresh_token();
    let ca = relay_tests::tls::TestCa::new();
    let api = relay_tests::tls::OkApi::start(&ca);
    let port = api.port();
    let p = fx.project.display();
    let url = format!("https://127.0.0.1:{port}/v1/messages");
    let text = format!(
        "#!/bin/sh\nt=$(cat <&5)\n\
         for i in 1 2; do curl -s -o /dev/null -m 10 --cacert /run/relay/ca.pem \
             -H \"Authorization: Bearer $t\" {url}; done\n\
         touch {p}/up\nwhile :; do sleep 1; done\n"
    );
    let script = fx.project.join("use.sh");
    std::fs::write(&script, text).unwrap();
    settings(&fx, &script, port, "stand_in");
    let ca_file = fx.root.join("ca.pem");
    ca.write_pem(&ca_file);
    let path = fx.config.join("settings.json");
    let mut s: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    s["upstream_ca_file"] = json!(ca_file);
    std::fs::write(&path, s.to_string()).unwrap();
    let req = fx.request("use", true, "use", &[]);
    let mut session = fx.launch_cmd(&req).spawn().unwrap();
    let up = relay_tests::wait_until(std::time::Duration::from_secs(30), &|| {
        fx.project.join("up").exists()
    });
    assert!(up, "the session made its requests");
    let (code, out) = host(&fx, &["--json", "ps"]);
    assert_eq!(code, Some(0), "{out}");
    let ps: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = &ps[0];
    assert_eq!(row["token_mode"], "stand_in", "{ps}");
    let used = &row["api_use"];
    assert_eq!(used["requests"], 2, "{ps}");
    assert_eq!(used["statuses"], json!({"200": 2}), "{ps}");
    assert!(used["sent"].as_u64().unwrap() > 100, "{ps}");
    assert!(used["received"].as_u64().unwrap() >= 2 * 40, "{ps}");
    let (_, out) = host(&fx, &["ps"]);
    assert!(out.contains(" stand_in "), "{out}");
    assert!(out.contains("  api: 2 requests; answers 200×2; "), "{out}");
    assert_eq!(stand_in_programs(&fx).len(), 1);
    let asked = std::time::Instant::now();
    let (code, out) = host(&fx, &["stop", "use"]);
    assert_eq!((code, out.trim()), (Some(0), "stopped use"));
    let deadline = std::time::Instant::now() + TEN_S;
    while session.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "the launch ended");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        stand_in_programs(&fx).is_empty(),
        "relay-stand-in went with it"
    );
    assert!(
        asked.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    let rows = fx.log("audit.jsonl");
    let row = rows
        .iter()
        .find(|r| r["session_id"] == "use" && r["outcome"] == "ok")
        .unwrap();
    assert_eq!(
        (&row["token"], &row["token_mode"]),
        (&json!("fd"), &json!("stand_in"))
    );
    let used: Vec<serde_json::Value> = (fx.log("events.jsonl").into_iter())
        .filter(|e| e["event"] == "stand_in_use" && e["session_id"] == "use")
        .collect();
    assert_eq!(used.len(), 1, "{used:?}");
    assert_eq!(used[0]["api_use"]["requests"], 2);
    let (code, _) = host(&fx, &["stop", "use"]);
    assert_eq!(code, Some(64), "no such session any more");
    // `stop --all` ends every running session.
    let _ = std::fs::remove_file(fx.project.join("up"));
    let mut two = Vec::new();
    for id in ["all-a", "all-b"] {
        let req = fx.request(id, true, id, &[]);
        two.push(fx.launch_cmd(&req).spawn().unwrap());
        let up = relay_tests::wait_until(std::time::Duration::from_secs(30), &|| {
            fx.project.join("up").exists()
        });
        assert!(up, "{id} runs");
        std::fs::remove_file(fx.project.join("up")).unwrap();
    }
    assert_eq!(stand_in_programs(&fx).len(), 2);
    let (code, out) = host(&fx, &["--json", "stop", "--all"]);
    let stopped: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(stopped["stopped"], json!(["all-a", "all-b"]), "{out}");
    for mut c in two {
        assert!(!c.wait().unwrap().success(), "ended by stop");
    }
    assert!(
        stand_in_programs(&fx).is_empty(),
        "both relay-stand-in went"
    );
}

/// `/voice`'s websocket as Claude Code 2.1.332 opens it: `GET
/// /api/ws/speech_to_text/voice_stream` on the API host with `Upgrade: websocket` and the
/// session's token in `Authorization: Bearer`. Through a stand-in session's proxy it is refused
/// `400` and nothing reaches the API host, so the real token never rides an upgraded connection
/// (whose frames the proxy could not read); in pipe mode the same upgrade is tunnelled and
/// reaches the API host with the real token, which the session holds.
#[test]
fn in_stand_in_mode_a_websocket_upgrade_to_the_api_host_never_carries_the_real_token() {
    let fx = World::agent(&fake_agent());
    let real = relay_tests::sha256_hex(fx.fresh_token().as_bytes());
    let ca = relay_tests::tls::TestCa::new();
    let api = relay_tests::tls::OkApi::start(&ca);
    let port = api.port();
    ca.write_pem(&fx.project.join("test-ca.pem"));
    let p = fx.project.display();
    let url =
        format!("https://127.0.0.1:{port}/api/ws/speech_to_text/voice_stream?encoding=linear16");
    let text = format!(
        "#!/bin/sh\nt=$(cat <&5)\nca={p}/test-ca.pem\n[ -e /run/relay/ca.pem ] && ca=/run/relay/ca.pem\n\
         c=$(curl -s -o /dev/null -m 10 -w '%{{http_code}}' --http1.1 --cacert \"$ca\" \
             -H \"Authorization: Bearer $t\" -H 'Connection: Upgrade' -H 'Upgrade: websocket' \
             -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' \
             {url}); echo \"$c\" > {p}/voice\n"
    );
    let script = fx.project.join("voice.sh");
    std::fs::write(&script, text).unwrap();
    let ca_file = fx.root.join("ca.pem");
    ca.write_pem(&ca_file);
    for mode in ["stand_in", "pipe"] {
        settings(&fx, &script, port, mode);
        let path = fx.config.join("settings.json");
        let mut s: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        s["upstream_ca_file"] = json!(ca_file);
        std::fs::write(&path, s.to_string()).unwrap();
        let _ = std::fs::remove_file(fx.project.join("voice"));
        let out = fx.launch_session(mode, &[], SCRIPT_TIMEOUT);
        assert_eq!(out.code, Some(0), "{}", out.describe());
        let voice: Vec<_> = (api.seen().into_iter())
            .filter(|r| {
                r.line
                    .starts_with("GET /api/ws/speech_to_text/voice_stream")
            })
            .collect();
        if mode == "stand_in" {
            assert_eq!(read(&fx, "voice"), "400", "the proxy refused the upgrade");
            assert!(voice.is_empty(), "reached the API host: {voice:?}");
            assert!(
                api.seen()
                    .iter()
                    .all(|r| r.authorization_sha256.as_ref() != Some(&real)),
                "the real token reached the API host"
            );
        } else {
            assert_eq!(read(&fx, "voice"), "200", "tunnelled to the API host");
            assert_eq!(voice.len(), 1, "{voice:?}");
            assert!(voice[0].upgrade, "{voice:?}");
            assert_eq!(voice[0].authorization_sha256.as_ref(), Some(&real));
        }
    }
}

/// A stand-in session whose API host refuses the token (`401 authentication_error`): `ps` shows
/// the refusals while it runs (`token_refused`), the refusal is a `token_refused` event, and
/// after the session `relay-host run` says on stderr, once, that the API refused the token and
/// how to make and store a new one; `status` warns until the token file changes.
#[test]
fn a_token_the_api_refuses_is_named_with_its_fix() {
    let fx = World::agent(&fake_agent());
    fx.fresh_token();
    let ca = relay_tests::tls::TestCa::new();
    let api = relay_tests::tls::OkApi::answering(&ca, relay_tests::tls::TOKEN_REFUSED);
    let port = api.port();
    let p = fx.project.display();
    let url = format!("https://127.0.0.1:{port}/v1/messages");
    let text = format!(
        "#!/bin/sh\nt=$(cat <&5)\n\
         for i in 1 2; do curl -s -o /dev/null -m 10 --cacert /run/relay/ca.pem \
             -H \"Authorization: Bearer $t\" {url}; done\n\
         touch {p}/up\nsleep 30 & wait\n"
    );
    let script = fx.project.join("use.sh");
    std::fs::write(&script, text).unwrap();
    settings(&fx, &script, port, "stand_in");
    let ca_file = fx.root.join("ca.pem");
    ca.write_pem(&ca_file);
    fx.edit_settings(|s| s["upstream_ca_file"] = json!(ca_file));
    let mut run = fx.host_cmd();
    run.current_dir(&fx.project)
        .args(["run", "--template", "claude-code"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let session = run.spawn().unwrap();
    let up = relay_tests::wait_until(std::time::Duration::from_secs(30), &|| {
        fx.project.join("up").exists()
    });
    assert!(up, "the session made its requests");
    let (code, out) = host(&fx, &["--json", "ps"]);
    assert_eq!(code, Some(0), "{out}");
    let ps: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(ps[0]["token_refused"], 2, "{ps}");
    // SAFETY: kill takes integers only; the pid is our own child, not yet reaped.
    unsafe { libc::kill(session.id() as i32, libc::SIGTERM) };
    let f = relay_tests::run::finish_with(session, std::time::Duration::from_secs(30), &|| false);
    let said: Vec<&str> = f
        .stderr
        .lines()
        .filter(|l| l.contains("refused the token"))
        .collect();
    assert_eq!(
        said,
        [
            "relay-host: the API refused the token (401) in this session: make one with \
          `claude setup-token`, then store it with `relay-host token import`"
        ],
        "{}",
        f.stderr
    );
    assert!(!f.stderr.contains("logged in"), "{}", f.stderr);
    let events = std::fs::read_to_string(fx.state.join("events.jsonl")).unwrap();
    assert_eq!(events.matches("\"token_refused\"").count(), 1, "{events}");
    let (_, status) = host(&fx, &["status"]);
    assert!(status.contains("the API refused the token"), "{status}");
    std::thread::sleep(std::time::Duration::from_millis(20));
    fx.replace_token();
    let (_, status) = host(&fx, &["status"]);
    assert!(!status.contains("the API refused the token"), "{status}");
}

/// The Messages API's answer to a token without the scope it needs (`403 permission_error`).
const TOKEN_FORBIDDEN: &[u8] = b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\n\
Content-Length: 96\r\n\r\n{\"type\":\"error\",\"error\":{\"type\":\"permission_error\",\
\"message\":\"OAuth token lacks a scope\"}}";

/// A world for `relay-host token check --online`: a fake-agent installation with a fresh token,
/// a test CA (trusted through `upstream_ca_file` when asked) and an API host of the caller's.
struct Online {
    fx: World,
    real: String,
    ca: relay_tests::tls::TestCa,
    ca_file: std::path::PathBuf,
    script: std::path::PathBuf,
}

impl Online {
    fn new() -> Online {
        let fx = World::agent(&fake_agent());
        let real = fx.fresh_token();
        let ca = relay_tests::tls::TestCa::new();
        let ca_file = fx.root.join("ca.pem");
        ca.write_pem(&ca_file);
        let script = fx.project.join("none.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        Online {
            fx,
            real,
            ca,
            ca_file,
            script,
        }
    }

    /// `token check --online` against `127.0.0.1:port` in `mode`: its exit code, its
    /// `online:` lines and its stderr; panics when the token is in its output.
    fn check(&self, port: u16, mode: &str, trusted: bool) -> (Option<i32>, Vec<String>, String) {
        let fx = &self.fx;
        settings(fx, &self.script, port, mode);
        if trusted {
            fx.edit_settings(|s| s["upstream_ca_file"] = json!(self.ca_file));
        }
        let out = std::process::Command::new(&fx.host)
            .arg("--config-dir")
            .arg(&fx.config)
            .arg("--state-dir")
            .arg(&fx.state)
            .args(["token", "check", "--online"])
            .env("HOME", &fx.home)
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(
            !stdout.contains(self.real.as_str()) && !stderr.contains(self.real.as_str()),
            "the token was printed"
        );
        let online: Vec<String> = (stdout.lines())
            .filter(|l| l.starts_with("online: "))
            .map(str::to_string)
            .collect();
        (out.status.code(), online, stderr)
    }
}

/// `relay-host token check --online` makes one request with the token to the template's API
/// host, verified as stand-in mode verifies it: accepted (0). The token is in no output; the API
/// host saw its hash only, on the one `GET` Claude Code itself sends at start.
#[test]
fn token_check_online_says_the_api_accepts_the_token() {
    let w = Online::new();
    let api = relay_tests::tls::OkApi::start(&w.ca);
    let port = api.port();
    let (code, online, err) = w.check(port, "stand_in", true);
    let verified = format!("online: 127.0.0.1:{port}: TLS verified");
    let accepted = "online: the API accepted the token (GET /api/claude_code/policy_limits: 200)";
    assert_eq!(online, [verified.as_str(), accepted], "{err}");
    assert_eq!(code, Some(0), "{err}");
    let seen = api.seen();
    assert_eq!(seen.len(), 1, "one request: {seen:?}");
    assert_eq!(seen[0].line, "GET /api/claude_code/policy_limits HTTP/1.1");
    let real_sha = relay_tests::sha256_hex(w.real.as_bytes());
    assert_eq!(
        seen[0].authorization_sha256.as_deref(),
        Some(real_sha.as_str())
    );
}

/// A token the API refuses with 401 or 403 is said with the fix (77), in either token mode.
#[test]
fn token_check_online_says_the_api_refuses_the_token_with_the_fix() {
    let w = Online::new();
    let fix = "make one with `claude setup-token`, then store it with `relay-host token import`";
    for (answer, mode, said) in [
        (
            relay_tests::tls::TOKEN_REFUSED,
            "stand_in",
            "401 authentication_error",
        ),
        (TOKEN_FORBIDDEN, "pipe", "403 permission_error"),
    ] {
        let api = relay_tests::tls::OkApi::answering(&w.ca, answer);
        let port = api.port();
        let (code, online, err) = w.check(port, mode, true);
        let verified = format!("online: 127.0.0.1:{port}: TLS verified");
        let refused = format!("online: the API refused the token ({said}): {fix}");
        assert_eq!(online, [verified, refused], "{err}");
        assert_eq!(code, Some(77), "{err}");
        assert_eq!(api.seen().len(), 1, "{:?}", api.seen());
    }
}

/// An API host whose certificate is from an issuer relay does not trust: the cause named (76),
/// nothing sent; nothing listening: unreachable (69).
#[test]
fn token_check_online_says_an_untrusted_or_unreachable_api_host() {
    let w = Online::new();
    let api = relay_tests::tls::OkApi::start(&w.ca);
    let port = api.port();
    let (code, online, err) = w.check(port, "stand_in", false);
    let untrusted = format!(
        "online: 127.0.0.1:{port}: the API host's TLS failed: its certificate is from an unknown \
         issuer (a TLS proxy on the way? put its CA in the system trust store or in relay-host's \
         upstream_ca_file setting)"
    );
    assert_eq!(online, [untrusted], "{err}");
    assert_eq!(code, Some(76), "{err}");
    assert!(api.seen().is_empty(), "sent over TLS it did not verify");

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let (code, online, err) = w.check(port, "stand_in", true);
    let unreachable = format!(
        "online: 127.0.0.1:{port}: unreachable: cannot connect: Connection refused (os error 111)"
    );
    assert_eq!(online, [unreachable], "{err}");
    assert_eq!(code, Some(69), "{err}");
}
