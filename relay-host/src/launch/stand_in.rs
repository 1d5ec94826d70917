//! A stand-in launch's part (the template's `token_mode: "stand_in"`): the real token goes to
//! the session's own `relay-stand-in` ([`crate::stand_in_program`]), which runs the
//! session's allow-list proxy; the launch hands the stand-in that program made on fd 5 instead,
//! and writes the session CA's certificate into the session folder, for the sandbox to show
//! read-only. relay-host itself holds no TLS code: the program is started for stand-in
//! sessions only, and ended with the session.

use super::error::LaunchError;
use super::stage::Prepared;
use super::stand_in_proxy::StandInProxy;
#[cfg(target_os = "linux")]
use crate::settings::Settings;
#[cfg(target_os = "linux")]
use crate::state::State;

/// The CA certificate's file name in the session folder.
#[cfg(target_os = "linux")]
const CA_FILE: &str = "ca.pem";

/// Starts stand-in mode for `launch` when it runs in it ([`super::programs::stand_in_mode`]):
/// the real token is handed to `relay-stand-in`, which listens at `socket` (a stale one is
/// removed first); its stand-in replaces the token the launch hands over. Any other launch:
/// `None`, nothing changed. The program's reports go to `state`'s events and log.
#[cfg(target_os = "linux")]
pub(crate) fn begin(
    launch: &mut Prepared,
    cx: &super::context::Launch,
    socket: &std::path::Path,
) -> Result<Option<StandInProxy>, LaunchError> {
    use std::io::BufRead;
    let Some(program) = launch.programs.stand_in.clone() else {
        return Ok(None);
    };
    if !launch.carries_token() {
        return Ok(None);
    }
    let trust = upstream_trust(launch, &cx.settings, &cx.host.config_dir)?;
    let Some(real) = launch.token.take() else {
        return Ok(None);
    };
    let what = format!("stand-in mode: {}", program.display());
    let fail = |e: std::io::Error| super::error::spawn_err(&what)(e);
    let _ = std::fs::remove_file(socket);
    let (mut child, report) = spawn(&program, launch, socket, &real, &trust).map_err(fail)?;
    drop(real);
    let mut report = std::io::BufReader::new(report);
    let mut line = String::new();
    let ready = report.read_line(&mut line).map(|_| ready(&line));
    let (handed, ca) = match ready {
        Ok(Ok(r)) => r,
        Ok(Err(e)) | Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(fail(e));
        }
    };
    let (id, dir) = (launch.v.session_id.as_str(), launch.folder.dir());
    let proxy = StandInProxy::new(child, reports(report, &cx.state, id, dir));
    launch.token.hand_instead(handed);
    let file = launch.folder.dir().join(CA_FILE);
    write_ca(&file, &ca).map_err(super::error::spawn_err(format_args!("{}", file.display())))?;
    launch.ca_file = Some(file);
    Ok(Some(proxy))
}

/// No stand-in mode on this system: the settings refuse the setting, so nothing to start.
#[cfg(not(target_os = "linux"))]
pub(crate) fn begin(
    launch: &mut Prepared,
    _cx: &super::context::Launch,
    _socket: &std::path::Path,
) -> Result<Option<StandInProxy>, LaunchError> {
    let _ = (&launch.programs.stand_in, &launch.ca_file);
    Ok(None)
}

/// What `relay-stand-in` trusts upstream, as bytes: the system trust store's bundle (what
/// Claude Code trusts; empty when the system has none) and `upstream_ca_file`'s certificates
/// (empty when none).
#[cfg(target_os = "linux")]
struct Trust {
    system: Vec<u8>,
    extra: Vec<u8>,
}

/// The upstream trust of this launch, each file read once here and checked against every
/// template's read-write grants with this launch's project ([`crate::reach::read_system_ca`],
/// [`crate::reach::read_upstream_ca`]): `relay-stand-in` is handed the bytes, never a path, so
/// nothing a session writes later reaches its trust.
#[cfg(target_os = "linux")]
fn upstream_trust(
    launch: &Prepared,
    settings: &Settings,
    config_dir: &std::path::Path,
) -> Result<Trust, LaunchError> {
    use crate::reach::{read_system_ca, read_upstream_ca, UpstreamCaError};
    use crate::settings::SettingsError;
    let grants = &launch.programs.rw_grants;
    let refused = |e: UpstreamCaError| {
        let message = e.to_string();
        let path = std::path::PathBuf::new();
        LaunchError::Settings(match e {
            UpstreamCaError::Reach(_) => SettingsError::Reachable { path, message },
            _ => SettingsError::Invalid { path, message },
        })
    };
    let system = read_system_ca(config_dir, grants).map_err(refused)?;
    let extra = match settings.upstream_ca_file.as_deref() {
        Some(path) => read_upstream_ca(path, config_dir, grants).map_err(refused)?,
        None => Vec::new(),
    };
    let system = system.map(|(_, bytes)| bytes).unwrap_or_default();
    Ok(Trust { system, extra })
}

/// Spawns `relay-stand-in` for `launch`: its socket, API hosts and allow-list on its command
/// line, the real token in a pipe at fd 3, its report pipe at fd 4, the extra upstream CA
/// certificates in an in-memory file at fd 5 and the system bundle in one at fd 6 (`trust`);
/// tied to this host's life as the shim is.
/// Returns the child and the report pipe's read end.
#[cfg(target_os = "linux")]
fn spawn(
    program: &std::path::Path,
    launch: &Prepared,
    socket: &std::path::Path,
    real: &relay_token::ClaudeToken,
    trust: &Trust,
) -> std::io::Result<(std::process::Child, std::fs::File)> {
    use crate::stand_in_program::{CA_FD, REPORT_FD, SYSTEM_CA_FD, TOKEN_FD};
    use std::os::fd::AsFd;
    let template = &launch.v.template;
    let mut cmd = std::process::Command::new(program);
    cmd.arg(socket);
    for h in template.api_hosts() {
        cmd.args(["--api", &h]);
    }
    cmd.arg("--");
    let network = template.network();
    if let Some(list) = crate::net::network_rules(&network).proxied {
        cmd.args(list.entries());
    }
    cmd.env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    super::tie::tie_to_host(&mut cmd, false);
    let token = relay_token::TokenPipe::new(real)?.into_fd();
    let (report, report_w) = relay_token::sys::pipe2_cloexec()?;
    let ca = relay_token::sys::memfd_with(c"relay-upstream-ca", &trust.extra)?;
    let system = relay_token::sys::memfd_with(c"relay-system-ca", &trust.system)?;
    let mut map = relay_token::FdMap::new();
    map.place(token.as_fd(), TOKEN_FD)?;
    map.place(report_w.as_fd(), REPORT_FD)?;
    map.place(ca.as_fd(), CA_FD)?;
    map.place(system.as_fd(), SYSTEM_CA_FD)?;
    let child = map.spawn(&mut cmd)?;
    Ok((child, std::fs::File::from(report)))
}

/// The `ready` line's stand-in and CA certificate, or the program's `error`, as an error.
#[cfg(target_os = "linux")]
fn ready(line: &str) -> std::io::Result<(relay_token::ClaudeToken, String)> {
    let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
    if let Some(e) = v["error"].as_str() {
        return Err(std::io::Error::other(e.to_string()));
    }
    let r = &v["ready"];
    let handed = r["stand_in"]
        .as_str()
        .and_then(|s| relay_token::ClaudeToken::from_bytes(s.as_bytes()));
    match (handed, r["ca"].as_str()) {
        (Some(h), Some(ca)) => Ok((h, ca.to_string())),
        _ => Err(std::io::Error::other("ended before it was ready")),
    }
}

/// Writes each report of the running program to the events and the log, until it ends; counts
/// the API use into the session folder `dir` ([`super::api_use`]), and writes it as the
/// `stand_in_use` event at the end.
#[cfg(target_os = "linux")]
fn reports(
    report: std::io::BufReader<std::fs::File>,
    state: &State,
    session_id: &str,
    dir: &std::path::Path,
) -> std::thread::JoinHandle<()> {
    use std::io::BufRead;
    let events = State::open(state.path()).ok();
    if let Some(e) = &events {
        // A refused host is the session's text: it may spell the token.
        e.set_redactor(state.redactor().clone());
    }
    let id = session_id.to_string();
    let dir = dir.to_path_buf();
    std::thread::spawn(move || {
        let Some(events) = events else { return };
        let mut used = super::api_use::ApiUse::default();
        for line in report.lines().map_while(Result::ok) {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            let port = |r: &serde_json::Value| r["port"].as_u64().unwrap_or(0);
            let text = |r: &serde_json::Value, k: &str| r[k].as_str().unwrap_or("").to_string();
            if let Some(d) = v.get("denied") {
                let (host, reason) = (text(d, "host"), text(d, "reason"));
                let allow_with = text(d, "allow_with");
                super::network::note_denied(&events, &id, &host, port(d), &reason, &allow_with);
            } else if let Some(r) = v.get("refused") {
                let (host, reason) = (text(r, "host"), text(r, "reason"));
                let status = r["status"].as_u64().unwrap_or(0);
                super::network::note_refused(&events, &id, &host, port(r), status, &reason);
            } else if let Some(u) = v.get("used") {
                let count = |k: &str| u[k].as_u64().unwrap_or(0);
                let status = u16::try_from(count("status")).unwrap_or(0);
                used.add(status, count("sent"), count("received"));
                let _ = used.write(&dir);
            }
        }
        if used.requests > 0 {
            let mut e = serde_json::json!({"event": "stand_in_use", "session_id": id});
            e["api_use"] = serde_json::to_value(&used).unwrap_or_default();
            let _ = events.event(&e);
        }
    })
}

/// Writes the certificate afresh (a kept session's folder may hold an earlier one), `0644`:
/// a certificate is no secret.
#[cfg(target_os = "linux")]
fn write_ca(file: &std::path::Path, pem: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(file)?;
    f.write_all(pem.as_bytes())
}
