//! Issue 5 (5): the token is disclosed nowhere a process, a file or an answer could show it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;

/// Every process below `pid` (itself included), from `/proc/*/stat`.
fn tree(pid: u32) -> Vec<u32> {
    let mut parent: BTreeMap<u32, u32> = BTreeMap::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: comm may hold spaces and parentheses.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid: u32 = after.split(' ').nth(1).unwrap().parse().unwrap();
        parent.insert(p, ppid);
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let me = out[i];
        out.extend(parent.iter().filter(|&(_, &pp)| pp == me).map(|(&c, _)| c));
        i += 1;
    }
    out
}

/// The argv of a process, as its `cmdline` NUL-separated bytes.
fn cmdline(pid: u32) -> Vec<u8> {
    fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default()
}

/// Scans the environ and cmdline of the host `pid` and all its descendants while they run;
/// checks it saw the host, the shim and the agent, and read each one's environment.
fn scan_processes(host_pid: u32, token: &str) {
    let pids = tree(host_pid);
    let mut saw_shim = false;
    let mut saw_agent = false;
    for &p in &pids {
        let argv = cmdline(p);
        let environ = fs::read(format!("/proc/{p}/environ"))
            .unwrap_or_else(|e| panic!("read /proc/{p}/environ: {e}"));
        assert!(!argv.is_empty(), "pid {p} has no cmdline (gone too soon?)");
        assert!(!environ.is_empty(), "pid {p}: empty environ");
        assert_no_token(&format!("/proc/{p}/cmdline"), &argv, token);
        assert_no_token(&format!("/proc/{p}/environ"), &environ, token);
        let arg0 = argv.split(|&b| b == 0).next().unwrap();
        let arg0 = String::from_utf8_lossy(arg0);
        if arg0.ends_with("/relay-shim") {
            saw_shim = true;
        }
        if arg0 == fake_agent_arg() {
            saw_agent = true;
            let needle = format!("{VAR}=5\0");
            assert!(
                environ
                    .windows(needle.len())
                    .any(|w| w == needle.as_bytes()),
                "the agent's environ (pid {p}) lacks {needle:?}: not the session's"
            );
        }
    }
    assert!(
        String::from_utf8_lossy(&cmdline(host_pid)).contains("relay-host"),
        "{host_pid} is not relay-host"
    );
    assert!(saw_shim, "no relay-shim below the host: {pids:?}");
    assert!(saw_agent, "no agent below the host: {pids:?}");
}

/// The readable memory of `pid` (from `/proc/PID/maps` and `/proc/PID/mem`), region by region;
/// a region the kernel will not read (such as `[vvar]`) is skipped.
fn memory(pid: u32) -> Vec<u8> {
    relay_tests::process_memory(pid)
        .into_iter()
        .flat_map(|(_, bytes)| bytes)
        .collect()
}

/// Scans the memory of relay-host and relay-shim once the session has its token: no copy.
/// The state folder's path (in both argvs) is the control that the scan reads real memory.
fn scan_memory(host_pid: u32, fx: &World) {
    let shim_path = relay_tests::relay_shim();
    let shim = tree(host_pid)
        .into_iter()
        .find(|&p| {
            cmdline(p).split(|&b| b == 0).next() == Some(shim_path.to_str().unwrap().as_bytes())
        })
        .expect("relay-shim below the host");
    let control = fx.state.to_str().unwrap().as_bytes();
    for (name, pid) in [("relay-host", host_pid), ("relay-shim", shim)] {
        let m = memory(pid);
        assert!(
            m.windows(control.len()).any(|w| w == control),
            "{name}'s memory scan ({} bytes) misses the control string",
            m.len()
        );
        assert_no_token(&format!("the memory of {name} (pid {pid})"), &m, &fx.token);
    }
}

/// Every regular file under `dir` but `skip`, read; returns how many.
fn scan_files(dir: &Path, skip: &Path, token: &str, seen: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let m = fs::symlink_metadata(&p).unwrap();
        if m.is_dir() {
            scan_files(&p, skip, token, seen);
        } else if p == skip {
            continue;
        } else if m.is_file() {
            assert_no_token(&p.display().to_string(), &fs::read(&p).unwrap(), token);
            seen.push(p);
        } else if m.file_type().is_symlink() {
            let target = fs::read_link(&p).unwrap();
            assert_no_token(
                &p.display().to_string(),
                target.as_os_str().as_encoded_bytes(),
                token,
            );
        }
    }
}

/// The file the agent waits for (`--wait-for`) before it exits: made once the scans are done.
fn scanned(fx: &World) -> PathBuf {
    fx.project.join(".scanned")
}

/// Runs `req` in the background, scans the process tree while the agent waits, lets the agent
/// end, then waits.
fn launch_and_scan(fx: &World, req: &serde_json::Value, n: usize) -> Out {
    let child = fx.launch_bg(req);
    let pid = child.id();
    let recs = fx.wait_records(n);
    assert_got_token(&recs[n - 1], &fx.token);
    scan_processes(pid, &fx.token);
    scan_memory(pid, fx);
    fs::write(scanned(fx), "").unwrap();
    let out = child.finish(TIMEOUT);
    fs::remove_file(scanned(fx)).unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    out
}

/// After a session turn, a terminal launch and a refused launch (one refused after the token
/// was read), the token is in no process's environ or cmdline (host, shim, sandbox, target,
/// read while they run), not in the memory of relay-host or relay-shim while the session runs, no file under the config, state (with the sessions' temp folders),
/// home and project folders but the token file, no output of any command, and no answer of
/// `status`, `audit` or `events`.
#[test]
fn the_token_is_never_disclosed() {
    let fx = world();
    let wait = scanned(&fx);
    fx.with_token(vec![claude_template(
        &["--wait-for", wait.to_str().unwrap()],
        json!({}),
        &[],
    )]);
    let mut outs = Vec::new();
    outs.push(launch_and_scan(
        &fx,
        &json!({"kind": "claude", "session_id": "d1", "project": fx.project, "keep": true}),
        1,
    ));
    outs.push(launch_and_scan(
        &fx,
        &json!({"kind": "terminal", "template": "claude-code", "session_id": "d2",
                "project": fx.project}),
        2,
    ));
    // Refused after the token was read: a token file others may read is refused once read.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&fx.token_file, fs::Permissions::from_mode(0o640)).unwrap();
    let out = fx.launch(&json!({"kind": "claude", "session_id": "d3", "project": fx.project}));
    let msg = assert_refused(&fx, &out, 78, "sandbox_unavailable");
    assert!(
        msg.ends_with("mode 0640 lets others read it; chmod 600 it"),
        "{msg}"
    );
    fs::set_permissions(&fx.token_file, fs::Permissions::from_mode(0o600)).unwrap();
    outs.push(out);
    // A refusal before it: a missing file.
    let keep = fx.token.clone();
    fs::remove_file(&fx.token_file).unwrap();
    let out = fx.launch(&json!({"kind": "claude", "session_id": "d4", "project": fx.project}));
    assert_refused(&fx, &out, 78, "sandbox_unavailable");
    outs.push(out);
    fx.write_token(&keep);
    for args in [
        &["status", "--json"][..],
        &["status"],
        &["audit", "--json"],
        &["audit"],
        &["events", "--json"],
        &["events"],
    ] {
        let out = fx.host(args);
        assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
        assert!(!out.stdout.is_empty(), "{args:?} printed nothing");
        outs.push(out);
    }
    // `status` did read the file (it reports its health), so the scan above means something.
    let status: serde_json::Value = serde_json::from_str(&outs[4].stdout).unwrap();
    assert_eq!(status["token"]["ok"], true, "{status}");
    assert_eq!(status["token"]["bytes"], fx.token.len());
    for (i, o) in outs.iter().enumerate() {
        assert_no_token(
            &format!("stdout of command {i}"),
            o.stdout.as_bytes(),
            &fx.token,
        );
        assert_no_token(
            &format!("stderr of command {i}"),
            o.stderr.as_bytes(),
            &fx.token,
        );
    }
    let mut seen = Vec::new();
    scan_files(&fx.root, &fx.token_file, &fx.token, &mut seen);
    for must in [
        fx.state.join("audit.jsonl"),
        fx.state.join("events.jsonl"),
        fx.state.join("relay-host.log"),
        fx.config.join("settings.json"),
        fx.record.clone(),
    ] {
        assert!(seen.contains(&must), "{} was not scanned", must.display());
    }
    assert!(fx.session_dir("d1").join("tmp").is_dir());
    assert_eq!(fx.records().len(), 2);
}

/// A token pasted into `claude_token_file` instead of its path: a launch refuses with the value
/// redacted (`sk-ant-...`), and `status` (both forms) must not print it either.
#[test]
fn a_token_pasted_as_the_setting_is_redacted_by_status_too() {
    let fx = world();
    let pasted = "sk-ant-oat01-PASTEDINSTEADOFAPATH0123456789";
    fx.settings(json!({"claude_token_file": pasted}));
    let out = fx.launch(&json!({"kind": "claude", "session_id": "p1", "project": fx.project}));
    assert_refused(&fx, &out, 78, "sandbox_unavailable");
    assert!(!out.stderr.contains(pasted), "{}", out.stderr);
    for args in [&["status", "--json"][..], &["status"]] {
        let out = fx.host(args);
        assert_eq!(
            out.code,
            Some(78),
            "{args:?}: an unusable token file: {}",
            out.stderr
        );
        assert!(
            !out.stdout.contains(pasted) && !out.stderr.contains(pasted),
            "{args:?} printed the pasted token:\n{}{}",
            out.stdout,
            out.stderr
        );
    }
    let status: serde_json::Value =
        serde_json::from_str(&fx.host(&["status", "--json"]).stdout).unwrap();
    assert_eq!(status["token"]["ok"], false, "{status}");
}
