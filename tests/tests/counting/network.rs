//! A session's network, end to end with the real binaries: a token session with an allow-list
//! reaches a listed listener (A) only through the proxy; an unlisted one (B), a direct
//! connection, an abstract Unix socket of the host and a raw address outside the list all fail,
//! and B receives nothing. `"none"` leaves only a loopback; `"host"` is today's network and a
//! token launch gets it only when the settings say so. Concurrent sessions each end with their
//! proxy.
//!
//! Build the binaries first: `cargo build --workspace --bins`. Linux only (bwrap's namespaces).
#![cfg(target_os = "linux")]

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use relay_tests::fake_agent;
use relay_tests::fixture::{children_of, open_fds, processes_with_env, zombies_of};
use relay_tests::listener::{Listener, HELLO};
use relay_tests::world::{World, SCRIPT_TIMEOUT, SETTING};
use serde_json::{json, Value};

/// The settings of a probe: the token file, and a `claude-code` template running `/bin/sh
/// SCRIPT` with the project read-write and `network` as given, in pipe mode (the probes see the
/// real token on fd 5 and relay-host's own proxy); `extra` merged in.
fn probe_settings(script: &Path, network: Value, extra: Value) -> Value {
    let mut s = json!({
        "claude_token_file": SETTING,
        "templates": [{
            "id": "claude-code",
            "command": ["/bin/sh", script],
            "sandbox": {"read_write": ["{project}"]},
            "network": network,
            "token_mode": "pipe",
        }],
    });
    if let (Value::Object(m), Value::Object(x)) = (&mut s, extra) {
        m.extend(x);
    }
    s
}

/// Leaves `token_mode` out of the settings' template: the built-in's default (stand-in mode).
fn in_the_default_mode(fx: &World) {
    fx.edit_settings(|s| {
        s["templates"][0]
            .as_object_mut()
            .unwrap()
            .remove("token_mode");
    });
}

/// The probe's result lines, `NAME HTTP_CODE EXIT...`, in order.
fn results(fx: &World) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(fx.project.join("out.txt")).unwrap_or_default();
    text.lines()
        .map(|l| {
            let mut f = l.split(' ').filter(|x| !x.is_empty()).map(str::to_string);
            (
                f.next().unwrap_or_default(),
                f.next().unwrap_or_default(),
                f.collect::<Vec<_>>().join(" "),
            )
        })
        .collect()
}

fn result<'a>(r: &'a [(String, String, String)], name: &str) -> (&'a str, &'a str) {
    let (_, code, exit) = r
        .iter()
        .find(|(n, _, _)| n == name)
        .unwrap_or_else(|| panic!("no result {name}: {r:?}"));
    (code, exit)
}

/// A probe script: each `curl` line appends `NAME HTTP_CODE EXIT` to `out.txt`.
fn probe(fx: &World, checks: &[(&str, String)]) -> PathBuf {
    let out = fx.project.join("out.txt");
    let _ = std::fs::remove_file(&out);
    let mut s = String::from("#!/bin/sh\n");
    for (name, args) in checks {
        s.push_str(&format!(
            "code=$(curl -s -o /dev/null -m 5 -w '%{{http_code}}' {args}); echo \"{name} $code $?\" >> {}\n",
            out.display()
        ));
    }
    s.push_str(&format!(
        "echo \"ifaces $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ,) 0\" >> {}\n",
        out.display()
    ));
    s.push_str(&format!(
        "echo \"proxyvars $(env | grep -ci _proxy) 0\" >> {}\n",
        out.display()
    ));
    // The session waits (5 s at most) while the test looks at the forwarder from the host:
    // inside, a token session's processes are not dumpable, so no session can list them.
    s.push_str(&format!(
        "touch {ready}; i=0; while [ ! -e {seen} ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done\n",
        ready = fx.project.join("fwd-ready").display(),
        seen = fx.project.join("fwd-seen").display(),
    ));
    let path = fx.project.join("probe.sh");
    std::fs::write(&path, s).unwrap();
    path
}

/// Waits (30 s at most) until the probe says it is waiting, then counts, as the host sees them,
/// the descriptors of each forwarder process (cmdline `/run/relay/relay-net-forward ...`): all,
/// those on `/dev/null`, the sockets. Then lets the probe end.
fn forwarder_fds_from_the_host(fx: &World) -> Vec<(usize, usize, usize)> {
    let ready = fx.project.join("fwd-ready");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !ready.exists() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // This test's own forwarder: other runs on the machine may have theirs.
    let ours = relay_tests::fixture::descendants(std::process::id() as i32);
    let mut found = Vec::new();
    for pid in ours {
        let p = PathBuf::from(format!("/proc/{pid}"));
        let cmd = std::fs::read(p.join("cmdline")).unwrap_or_default();
        if !cmd.starts_with(b"/run/relay/relay-net-forward\0") {
            continue;
        }
        let links: Vec<PathBuf> = std::fs::read_dir(p.join("fd"))
            .map(|d| {
                d.flatten()
                    .filter_map(|f| std::fs::read_link(f.path()).ok())
                    .collect()
            })
            .unwrap_or_default();
        let on = |pred: &dyn Fn(&str) -> bool| {
            links.iter().filter(|l| pred(&l.to_string_lossy())).count()
        };
        found.push((
            links.len(),
            on(&|l| l == "/dev/null"),
            on(&|l| l.starts_with("socket:")),
        ));
    }
    std::fs::write(fx.project.join("fwd-seen"), "").unwrap();
    found
}

/// The tests take turns (one counts this process's descriptors and children): each runs alone.
fn turn() -> std::sync::RwLockWriteGuard<'static, ()> {
    super::alone()
}

fn events(fx: &World) -> Vec<Value> {
    fx.log("events.jsonl")
}

#[test]
fn allow_list_session_reaches_only_the_listed_listener_through_the_proxy() {
    let _turn = turn();
    let fx = World::agent(&fake_agent());
    let (a, b) = (Listener::start(HELLO), Listener::start(HELLO));
    let name = format!("relay-net-test-{}", std::process::id());
    let abstract_sock =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
    abstract_sock.set_nonblocking(true).unwrap();
    let checks = [
        ("proxy_a", format!("http://127.0.0.1:{}/via-proxy", a.port)),
        ("tunnel_a", format!("-p http://127.0.0.1:{}/tunnel", a.port)),
        ("proxy_b", format!("http://127.0.0.1:{}/b", b.port)),
        ("tunnel_b", format!("-p http://127.0.0.1:{}/b", b.port)),
        (
            "direct_a",
            format!("--noproxy '*' http://127.0.0.1:{}/", a.port),
        ),
        (
            "direct_b",
            format!("--noproxy '*' http://127.0.0.1:{}/", b.port),
        ),
        ("proxy_ip", "http://192.0.2.1/".to_string()),
        ("direct_ip", "--noproxy '*' http://192.0.2.1/".to_string()),
        (
            "abstract",
            format!("--abstract-unix-socket {name} http://x/"),
        ),
        ("localhost", format!("http://localhost:{}/", a.port)),
        // The session spells the token it holds into a host name: refused, and never logged.
        ("leak", "-p \"http://$(cat <&5).example/\"".to_string()),
    ];
    let script = probe(&fx, &checks);
    let network = json!({"allow": [format!("127.0.0.1:{}", a.port)]});
    fx.settings(probe_settings(&script, network, json!({})));
    let (out, fwd) = std::thread::scope(|scope| {
        let session = scope.spawn(|| fx.launch_for(&fx.claude_req("allow"), SCRIPT_TIMEOUT));
        let fwd = forwarder_fds_from_the_host(&fx);
        (session.join().unwrap(), fwd)
    });
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let r = results(&fx);

    assert_eq!(result(&r, "proxy_a"), ("200", "0"), "{r:?}");
    assert_eq!(result(&r, "tunnel_a"), ("200", "0"), "{r:?}");
    assert_eq!(result(&r, "proxy_b"), ("403", "0"), "{r:?}");
    assert_ne!(result(&r, "tunnel_b").1, "0", "{r:?}");
    for name in ["direct_a", "direct_b", "direct_ip", "abstract"] {
        let (code, exit) = result(&r, name);
        assert_eq!((code, exit), ("000", "7"), "{name}: {r:?}");
    }
    assert_eq!(result(&r, "proxy_ip"), ("403", "0"), "{r:?}");
    // A name is not an address: localhost is not on the list, though 127.0.0.1 is.
    assert_eq!(result(&r, "localhost"), ("403", "0"), "{r:?}");
    assert_eq!(result(&r, "ifaces").0, "lo,", "{r:?}");
    assert_eq!(result(&r, "proxyvars").0, "6", "{r:?}");
    // One serving process: stdio on /dev/null and its listener, nothing else (no token pipe).
    assert_eq!(
        fwd,
        [(4, 3, 1)],
        "the forwarder's descriptors (all, /dev/null, sockets)"
    );

    // A got both requests, the plain one in origin-form; B and the abstract socket nothing.
    let heads = a.heads();
    assert_eq!(a.connections(), 2, "{heads:?}");
    assert!(
        heads
            .iter()
            .any(|h| h.starts_with("GET /via-proxy HTTP/1.1\r\n")),
        "{heads:?}"
    );
    assert!(
        heads
            .iter()
            .any(|h| h.starts_with("GET /tunnel HTTP/1.1\r\n")),
        "{heads:?}"
    );
    assert_eq!(b.connections(), 0, "B was reached: {:?}", b.heads());
    assert!(
        abstract_sock.accept().is_err(),
        "the abstract socket was reached"
    );

    // Each refusal is an event naming the session, host and port, why, and the setting that
    // would allow it: nothing else.
    let denied: Vec<Value> = events(&fx)
        .into_iter()
        .filter(|e| e["event"] == "network_denied")
        .collect();
    let b_port = u64::from(b.port);
    for (host, port) in [
        ("127.0.0.1", b_port),
        ("127.0.0.1", b_port),
        ("192.0.2.1", 80),
    ] {
        assert!(
            denied
                .iter()
                .any(|e| e["host"] == host && e["port"] == port && e["session_id"] == "allow"),
            "no event for {host}:{port} among {} (not printed: one may hold the token)",
            denied.len()
        );
    }
    for e in &denied {
        let keys: Vec<&String> = e.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "allow_with",
                "event",
                "host",
                "port",
                "reason",
                "session_id",
                "ts"
            ]
        );
    }
    assert_ne!(result(&r, "leak").1, "0", "{r:?}");
    assert!(
        denied.iter().any(|e| e["host"] == "[REDACTED].example"),
        "no redacted refusal among {} events (not printed: one may hold the token)",
        denied.len()
    );
    let token = std::fs::read(&fx.token_file).unwrap();
    for f in relay_tests::files_under(&fx.state) {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !bytes.windows(token.len()).any(|w| w == token.as_slice()),
            "{} holds the token",
            f.display()
        );
    }
    // The proxy ended with the session: its socket is gone.
    assert!(!fx.state.join("sessions/allow/net.sock").exists());

    // Control: the same probe with the host's network (allowed for a token launch by the
    // setting) reaches B directly, so the checks above can fail.
    fx.settings(probe_settings(
        &script,
        json!("host"),
        json!({"token_network": "host"}),
    ));
    std::fs::remove_file(fx.project.join("out.txt")).unwrap();
    let out = fx.launch_for(&fx.claude_req("host"), SCRIPT_TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let r = results(&fx);
    assert_eq!(result(&r, "direct_b"), ("200", "0"), "{r:?}");
    // The abstract socket takes the connection (and never answers: curl times out).
    assert_eq!(result(&r, "abstract"), ("000", "28"), "{r:?}");
    assert_eq!(result(&r, "proxyvars").0, "0", "{r:?}");
    assert!(b.connections() > 0);
}

#[test]
fn network_none_leaves_only_a_loopback() {
    let _turn = turn();
    let fx = World::agent(&fake_agent());
    let a = Listener::start(HELLO);
    let checks = [(
        "direct_a",
        format!("--noproxy '*' http://127.0.0.1:{}/", a.port),
    )];
    let script = probe(&fx, &checks);
    fx.settings(probe_settings(&script, json!("none"), json!({})));
    let out = fx.launch_for(&fx.claude_req("none"), SCRIPT_TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let r = results(&fx);
    assert_eq!(result(&r, "ifaces").0, "lo,", "{r:?}");
    assert_eq!(result(&r, "proxyvars").0, "0", "{r:?}");
    assert_eq!(result(&r, "direct_a"), ("000", "7"), "{r:?}");
    assert_eq!(a.connections(), 0);
}

#[test]
fn token_launch_with_the_host_network_needs_the_setting() {
    let _turn = turn();
    let fx = World::agent(&fake_agent());
    let script = probe(&fx, &[]);
    fx.settings(probe_settings(&script, json!("host"), json!({})));
    let out = fx.launch_for(&fx.claude_req("refused"), SCRIPT_TIMEOUT);
    assert_eq!(out.code, Some(78), "{}", out.describe());
    let err = &out.stderr;
    assert!(
        err.contains("sandbox_unavailable") && err.contains("\\\"token_network\\\": \\\"host\\\""),
        "{err}"
    );
    assert!(!fx.project.join("out.txt").exists(), "the session ran");

    // Allowed by the setting; `status` warns about it.
    fx.settings(probe_settings(
        &script,
        json!("host"),
        json!({"token_network": "host"}),
    ));
    assert!(
        fx.launch_for(&fx.claude_req("allowed"), SCRIPT_TIMEOUT)
            .code
            == Some(0)
    );
    let status = fx.host(&["status", "--json"]);
    let v: Value = serde_json::from_str(&status.stdout).unwrap();
    let warnings = v["warnings"].as_array().cloned().unwrap_or_default();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap_or("").contains("token_network")),
        "{v}"
    );

    // The default mode (stand-in) has no proxy on the host's network to add the real token:
    // refused even with the setting, naming the opt-out; nothing runs.
    std::fs::remove_file(fx.project.join("out.txt")).unwrap();
    in_the_default_mode(&fx);
    let out = fx.launch_for(&fx.claude_req("default"), SCRIPT_TIMEOUT);
    assert_eq!(out.code, Some(78), "{}", out.describe());
    let err = &out.stderr;
    assert!(
        err.contains("settings_invalid")
            && err.contains("needs a sandboxed template with a network allow-list")
            && err.contains("\\\"token_mode\\\": \\\"pipe\\\""),
        "{err}"
    );
    assert!(!fx.project.join("out.txt").exists(), "the session ran");
}

/// Writes `probe.sh` into the project: `prelude`, then a curl of the listener `a` (at most
/// `secs` seconds) whose HTTP code goes to `out.txt` by `redirect` (`>` or `>>`); and settings
/// whose template runs it with `a` alone on the allow-list. Returns the path of `out.txt`.
fn curl_session(fx: &World, a: &Listener, prelude: &str, secs: u32, redirect: &str) -> PathBuf {
    let out = fx.project.join("out.txt");
    let script = fx.project.join("probe.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n{prelude}curl -s -o /dev/null -w '%{{http_code}}\\n' -m {secs} http://127.0.0.1:{}/ {redirect} {}\n",
            a.port,
            out.display()
        ),
    )
    .unwrap();
    fx.settings(probe_settings(
        &script,
        json!({"allow": [format!("127.0.0.1:{}", a.port)]}),
        json!({}),
    ));
    out
}

#[test]
fn concurrent_allow_list_sessions_each_end_with_their_proxy() {
    const SESSIONS: usize = 32;
    let _turn = turn();
    let fx = World::agent(&fake_agent());
    let a = Listener::start(HELLO);
    let out = curl_session(&fx, &a, "", 10, ">>");
    let me = std::process::id() as i32;
    let (fds0, kids0) = (open_fds(me).unwrap(), children_of(me).len());
    let mut running = Vec::new();
    for i in 0..SESSIONS {
        let id = format!("c{i}");
        let req = fx.request(&id, true, &id, &[]);
        running.push(fx.launch_cmd(&req).spawn().unwrap());
    }
    for mut c in running {
        assert!(c.wait().unwrap().success());
    }
    let codes = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        codes.lines().filter(|l| *l == "200").count(),
        SESSIONS,
        "{codes}"
    );
    assert_eq!(a.connections(), SESSIONS);
    // Nothing left: no process of the run (the forwarders inherit the record path), no socket.
    let needle = fx.record.to_string_lossy().into_owned();
    let mut left = processes_with_env(&needle);
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        thread::sleep(Duration::from_millis(50));
        left = processes_with_env(&needle);
    }
    assert!(left.is_empty(), "processes left over: {left:?}");
    assert!(zombies_of(me).is_empty());
    assert_eq!(children_of(me).len(), kids0);
    assert_eq!(open_fds(me).unwrap(), fds0);
    for i in 0..SESSIONS {
        assert!(!fx.state.join(format!("sessions/c{i}/net.sock")).exists());
    }
    let unix = std::fs::read_to_string("/proc/net/unix").unwrap();
    assert!(
        !unix.contains(fx.state.to_str().unwrap()),
        "a proxy socket still listens"
    );
}

#[test]
fn an_allow_list_without_a_proxy_is_refused_never_run_on_the_host_network() {
    let _turn = turn();
    let fx = World::agent(&fake_agent());
    let script = probe(&fx, &[]);
    fx.settings(probe_settings(
        &script,
        json!({"allow": ["api.anthropic.com"]}),
        json!({}),
    ));
    // A state folder so deep that the proxy's socket path exceeds what a Unix socket takes:
    // refused alike in pipe mode (relay-host's proxy) and the default, stand-in mode
    // (`relay-stand-in`'s), before anything starts.
    let deep = fx.root.join("s".repeat(60)).join("t".repeat(60));
    for mode in ["pipe", "stand_in"] {
        if mode == "stand_in" {
            in_the_default_mode(&fx);
        }
        let req = fx.request("deep", true, "deep", &[]);
        let out = Command::new(&fx.host)
            .arg("--config-dir")
            .arg(&fx.config)
            .arg("--state-dir")
            .arg(&deep)
            .arg("launch")
            .arg(&req)
            .env("HOME", &fx.home)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(78), "{mode}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("sandbox_unavailable")
                && err.contains("needs a proxy, which cannot be set up: socket ")
                && err.contains("path must be shorter than SUN_LEN"),
            "{mode}: {err}"
        );
        assert!(!fx.project.join("out.txt").exists(), "the session ran");
        assert!(
            !deep.join("sessions/deep").exists(),
            "{mode}: the session folder stayed"
        );
    }
}

/// A Ctrl-C reaches the session's whole process group (the shim forwards SIGINT to it): the
/// session survives it (here: `sh` ignores it), and so must its way out.
#[test]
fn the_forwarder_outlives_an_interrupt_of_the_session() {
    let _turn = turn();
    let fx = World::agent(&fake_agent());
    let a = Listener::start(HELLO);
    let out = curl_session(&fx, &a, "trap '' INT\nkill -INT 0\nsleep 0.2\n", 5, ">");
    assert!(fx.launch_for(&fx.claude_req("intr"), SCRIPT_TIMEOUT).code == Some(0));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "200\n");
    assert_eq!(a.connections(), 1);
}

/// The raw request a session sends through its proxy for [`a_header_with_a_bare_lf_never_reaches_the_upstream`]:
/// a header value holding a bare LF, so an upstream that splits lines on LF alone reads a
/// second `Host` the proxy never checked.
const SMUGGLED: &str = "GET http://127.0.0.1:PORT/ HTTP/1.1\\r\\nHost: 127.0.0.1:PORT\\r\\n\
                        X-A: a\\nHost: other.example\\r\\n\\r\\n";

/// Issue 31: a request head holding a bare LF is refused by the proxy (400) and the upstream,
/// listed on the allow-list, never sees a connection. The session sends the bytes itself
/// (perl, to the proxy named in its `http_proxy`); a clean request on the same path reaches
/// the upstream, so the check can fail.
#[test]
fn a_header_with_a_bare_lf_never_reaches_the_upstream() {
    let _turn = turn();
    let fx = World::agent(&fake_agent());
    let a = Listener::start(HELLO);
    let out = fx.project.join("out.txt");
    let send = |name: &str, head: &str| {
        format!(
            "perl -MIO::Socket::INET -e '($h, $p) = $ENV{{http_proxy}} =~ m{{//([^:/]+):(\\d+)}}; \
             $s = IO::Socket::INET->new(\"$h:$p\") or die; print $s \"{head}\"; $r = <$s>; \
             print \"{name} $r\"' >> {out}\n",
            head = head.replace("PORT", &a.port.to_string()),
            out = out.display(),
        )
    };
    let clean = "GET http://127.0.0.1:PORT/clean HTTP/1.1\\r\\nX-A: a\\r\\n\\r\\n";
    let script = fx.project.join("probe.sh");
    let text = format!(
        "#!/bin/sh\n{}{}",
        send("smuggled", SMUGGLED),
        send("clean", clean)
    );
    std::fs::write(&script, text).unwrap();
    let network = json!({"allow": [format!("127.0.0.1:{}", a.port)]});
    fx.settings(probe_settings(&script, network, json!({})));
    let done = fx.launch_for(&fx.claude_req("lf"), SCRIPT_TIMEOUT);
    assert_eq!(done.code, Some(0), "{}", done.describe());
    let answers = std::fs::read_to_string(&out).unwrap();
    assert!(
        answers.contains("smuggled HTTP/1.1 400 Bad Request\r\n"),
        "{answers:?}"
    );
    assert!(answers.contains("clean HTTP/1.1 200 OK\r\n"), "{answers:?}");
    let heads = a.heads();
    assert_eq!(a.connections(), 1, "the upstream saw: {heads:?}");
    assert!(heads[0].starts_with("GET /clean HTTP/1.1\r\n"), "{heads:?}");
}
