//! A stand-in launch's part (the template's `token_mode: "stand_in"`): the real token goes to
//! the session's own `relay-stand-in` ([`crate::stand_in::program`]), which runs the
//! session's allow-list proxy; the launch hands the stand-in that program made on fd 5 instead,
//! and writes the session CA's certificate into the session folder, for the sandbox to show
//! read-only. relay-host itself holds no TLS code: the program is started for stand-in
//! sessions only, and ended with the session. The program's command line, descriptors and
//! report lines are [`crate::stand_in::protocol`]'s, which the program uses too.

use std::path::{Path, PathBuf};

use relay_token::ClaudeToken;

use crate::launch::network::stand_in_proxy::StandInProxy;
use crate::launch::prepare::Prepared;
#[cfg(target_os = "linux")]
use crate::launch::spawn_error::spawn_err;
use crate::launch::spawn_error::SpawnError;
#[cfg(target_os = "linux")]
use crate::settings::Settings;
use crate::settings::SettingsError;
#[cfg(target_os = "linux")]
use crate::state::State;

/// The CA certificate's file name in the session folder.
#[cfg(target_os = "linux")]
const CA_FILE: &str = "ca.pem";

/// What stand-in mode makes for a launch: the session's `relay-stand-in`, the stand-in the
/// launch hands over on fd 5 in place of the token, and the session CA's certificate in the
/// session folder, which the sandbox shows read-only.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) struct StandIn {
    /// The running program, ended with the session.
    pub proxy: StandInProxy,
    /// The stand-in token.
    pub token: ClaudeToken,
    /// The session CA's certificate.
    pub ca_file: PathBuf,
}

/// Starts stand-in mode for `launch`, which runs in it ([`crate::launch::prepare::token_mode::TokenMode::StandIn`]):
/// the `real` token is handed to `relay-stand-in` (and dropped here), which listens at
/// `socket` (a stale one is removed first). The program's reports go to `state`'s events and
/// log.
#[cfg(target_os = "linux")]
pub(crate) fn begin(
    launch: &Prepared,
    program: &Path,
    real: ClaudeToken,
    cx: &crate::launch::context::Launch,
    socket: &Path,
) -> Result<StandIn, StandInError> {
    let trust = upstream_trust(launch, &cx.settings, &cx.host.config_dir)?;
    let what = format!("stand-in mode: {}", program.display());
    let fail = |e: std::io::Error| spawn_err(&what)(e);
    let _ = std::fs::remove_file(socket);
    let (mut child, report) = spawn(program, launch, socket, &real, &trust).map_err(fail)?;
    drop(real);
    let mut report = report;
    // The line holds the stand-in: read into a buffer that is wiped when dropped (no buffered
    // reader keeps a copy), it lives on in the token handed over only.
    let ready =
        read_ready_line(&mut report).and_then(|(line, after)| ready(&line).map(|r| (r, after)));
    let ((handed, ca), after) = match ready {
        Ok(r) => r,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(fail(e).into());
        }
    };
    let (id, dir) = (launch.v.session_id(), launch.folder.dir());
    // The reports read with the ready line come first.
    let report = std::io::BufReader::new(std::io::Read::chain(std::io::Cursor::new(after), report));
    let proxy = StandInProxy::new(child, reports(report, &cx.state, id, dir));
    let ca_file = launch.folder.dir().join(CA_FILE);
    write_ca(&ca_file, &ca).map_err(spawn_err(format_args!("{}", ca_file.display())))?;
    Ok(StandIn {
        proxy,
        token: handed,
        ca_file,
    })
}

/// No stand-in mode on this system: the settings refuse the setting, so it is never asked for.
#[cfg(not(target_os = "linux"))]
pub(crate) fn begin(
    _launch: &Prepared,
    program: &Path,
    _real: ClaudeToken,
    _cx: &crate::launch::context::Launch,
    _socket: &Path,
) -> Result<StandIn, StandInError> {
    let source = std::io::Error::from(std::io::ErrorKind::Unsupported);
    Err(crate::launch::spawn_error::spawn_err(program.display())(source).into())
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
) -> Result<Trust, StandInError> {
    use crate::reach::{read_system_ca, read_upstream_ca, UpstreamCaError};
    let grants = &launch.programs.rw_grants;
    let refused = |e: UpstreamCaError| {
        let message = e.to_string();
        let path = std::path::PathBuf::new();
        StandInError::Settings(match e {
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
    use crate::stand_in::protocol::{Args, CA_FD, REPORT_FD, SYSTEM_CA_FD, TOKEN_FD};
    use std::os::fd::AsFd;
    let template = launch.v.template();
    let mut allow = Vec::new();
    let network = launch.v.network();
    if let Some(list) = crate::net::network_rules(network).proxied {
        allow = list.entries().to_vec();
    }
    let args = Args {
        socket: socket.to_path_buf(),
        api: template.api_hosts(),
        allow,
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(args.to_args());
    cmd.env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    crate::launch::tie::tie_to_host(&mut cmd, false);
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

/// The most bytes the first report line may hold (the stand-in and the session CA's
/// certificate take about 1.5 KiB).
#[cfg(target_os = "linux")]
const READY_LINE_MAX: usize = 64 << 10;

/// The program's first report line, and what was read after it (the next reports' start),
/// read in pieces into one allocation made up front and wiped when dropped: the line holds the
/// stand-in. The program writes the line in one `write`, so this is a read or two, not one a
/// byte (about 700 of them); the line stops at [`READY_LINE_MAX`] bytes.
#[cfg(target_os = "linux")]
fn read_ready_line(
    report: &mut std::fs::File,
) -> std::io::Result<(zeroize::Zeroizing<String>, Vec<u8>)> {
    use std::io::Read;
    let mut buf = zeroize::Zeroizing::new(vec![0u8; READY_LINE_MAX]);
    let mut len = 0;
    while len < READY_LINE_MAX && !buf[..len].contains(&b'\n') {
        match report.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let (line, after) = match buf[..len].iter().position(|&b| b == b'\n') {
        Some(nl) => (nl, buf[nl + 1..len].to_vec()),
        // No end of line: the program ended, or the line reached its limit.
        None => (len, Vec::new()),
    };
    let mut text = zeroize::Zeroizing::new(Vec::with_capacity(line));
    text.extend_from_slice(&buf[..line]);
    match String::from_utf8(std::mem::take(&mut *text)) {
        Ok(text) => Ok((zeroize::Zeroizing::new(text), after)),
        Err(e) => {
            zeroize::Zeroize::zeroize(&mut e.into_bytes());
            Err(std::io::Error::other("its first report is not UTF-8"))
        }
    }
}

/// The `ready` report's stand-in and CA certificate, or the program's `error`, as an error.
#[cfg(target_os = "linux")]
fn ready(line: &str) -> std::io::Result<(relay_token::ClaudeToken, String)> {
    use crate::stand_in::protocol::Report;
    let not_ready = || std::io::Error::other("ended before it was ready");
    match Report::parse(line) {
        Ok(Report::Error(e)) => Err(std::io::Error::other(e)),
        Ok(Report::Ready { mut stand_in, ca }) => {
            let handed = relay_token::ClaudeToken::from_bytes(stand_in.as_bytes());
            zeroize::Zeroize::zeroize(&mut stand_in);
            Ok((handed.ok_or_else(not_ready)?, ca))
        }
        _ => Err(not_ready()),
    }
}

/// Writes each report of the running program to the events and the log, until it ends (a
/// refusal once per cause: host, port, status and reason, however often Claude retries); counts
/// the API use into the session folder `dir` ([`crate::launch::network::api_use`]), and writes it as the
/// `stand_in_use` event at the end.
#[cfg(target_os = "linux")]
fn reports(
    report: impl std::io::BufRead + Send + 'static,
    state: &State,
    session_id: &str,
    dir: &std::path::Path,
) -> std::thread::JoinHandle<()> {
    let events = State::open(state.path()).ok();
    if let Some(e) = &events {
        // A refused host is the session's text: it may spell the token.
        e.set_redactor(state.redactor().clone());
    }
    let id = session_id.to_string();
    let dir = dir.to_path_buf();
    std::thread::spawn(move || {
        let Some(events) = events else { return };
        let Ok(noted) = State::open(events.path()) else {
            return;
        };
        noted.set_redactor(events.redactor().clone());
        let notes = crate::launch::network::deny_notes::DenyNotes::new(noted, &id);
        let mut used = crate::launch::network::api_use::ApiUse::default();
        // Each refusal's cause is noted once: Claude retries a refused request many times.
        let mut refusals = std::collections::HashSet::new();
        for line in report.lines().map_while(Result::ok) {
            use crate::launch::network::note_refused;
            use crate::stand_in::protocol::Report;
            match Report::parse(&line) {
                Ok(Report::Denied {
                    host,
                    port,
                    reason,
                    allow_with,
                }) => notes.denied(&host, port.into(), &reason, &allow_with),
                Ok(Report::Refused {
                    host,
                    port,
                    status,
                    reason,
                }) => {
                    if refusals.insert((host.clone(), port, status, reason.clone())) {
                        note_refused(&events, &id, &host, port.into(), status.into(), &reason);
                    }
                }
                Ok(Report::Used {
                    status,
                    sent,
                    received,
                    ..
                }) => {
                    use crate::launch::network::token_refused;
                    if token_refused::refuses(status) && used.refused() == 0 {
                        token_refused::note(&events, &id, status);
                    }
                    used.add(status, sent, received);
                    let _ = used.write(&dir);
                }
                // Only the first line is `ready` or `error`; a line that is no report is not
                // the program's (it writes none).
                Ok(Report::Ready { .. } | Report::Error(_)) | Err(_) => {}
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

/// Why stand-in mode could not start for a launch: its upstream trust cannot be used (the
/// settings' `upstream_ca_file` or the system's bundle), or `relay-stand-in` could not be
/// started or did not report ready.
#[derive(Debug)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) enum StandInError {
    /// The upstream trust is refused (`settings_invalid`, or `sandbox_unavailable` when a
    /// session could write it).
    Settings(SettingsError),
    /// `relay-stand-in` or the session's CA file could not be made (`spawn_failed`).
    Spawn(SpawnError),
}

impl From<SpawnError> for StandInError {
    fn from(e: SpawnError) -> Self {
        StandInError::Spawn(e)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A pipe's read end, `bytes` written into it by a thread (more than a pipe holds may be
    /// asked for).
    fn pipe_with(bytes: &[u8]) -> std::fs::File {
        let (r, w) = relay_token::sys::pipe2_cloexec().unwrap();
        let bytes = bytes.to_vec();
        std::thread::spawn(move || {
            let _ = std::fs::File::from(w).write_all(&bytes);
        });
        std::fs::File::from(r)
    }

    /// The first report line comes alone; the reports read with it, then those still in the
    /// pipe, are the reports' reader's, whole and in order.
    #[test]
    fn the_ready_line_is_read_alone() {
        let mut r = pipe_with(b"{\"ready\": 1}\n{\"denied\": 2}\n{\"denied\": 3}\n");
        let (line, after) = read_ready_line(&mut r).unwrap();
        assert_eq!(line.as_str(), "{\"ready\": 1}");
        let mut rest = String::new();
        std::io::Cursor::new(after)
            .chain(r)
            .read_to_string(&mut rest)
            .unwrap();
        assert_eq!(rest, "{\"denied\": 2}\n{\"denied\": 3}\n");
    }

    /// Claude retries a refused request many times: the events hold one `stand_in_refused` row
    /// per cause (host, port, status, reason), not one per attempt.
    #[test]
    fn one_stand_in_refused_row_per_cause() {
        use crate::stand_in::protocol::Report;
        let refused = |reason: &str| Report::Refused {
            host: "api.anthropic.com".into(),
            port: 443,
            status: 502,
            reason: reason.into(),
        };
        let mut lines = String::new();
        for _ in 0..16 {
            lines += &refused("its certificate is from an unknown issuer").line();
        }
        lines += &refused("another cause").line();
        lines += &refused("another cause").line();
        let dir = tempfile::tempdir().unwrap();
        let state = State::open(&dir.path().join("state")).unwrap();
        let session = dir.path().join("session");
        std::fs::create_dir(&session).unwrap();
        let report = std::io::BufReader::new(pipe_with(lines.as_bytes()));
        reports(report, &state, "s1", &session).join().unwrap();
        let events = std::fs::read_to_string(
            dir.path()
                .join("state")
                .join(crate::state::folder::EVENTS_FILE),
        )
        .unwrap();
        let rows: Vec<serde_json::Value> = events
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|e: &serde_json::Value| e["event"] == "stand_in_refused")
            .collect();
        let reasons: Vec<&str> = rows.iter().map(|e| e["reason"].as_str().unwrap()).collect();
        assert_eq!(
            reasons,
            ["its certificate is from an unknown issuer", "another cause"],
            "{rows:?}"
        );
    }

    /// A line longer than the limit stops at it; bytes that are not UTF-8 are an error.
    #[test]
    fn the_ready_line_is_bounded_and_text() {
        let mut r = pipe_with(&vec![b'a'; READY_LINE_MAX + 10]);
        assert_eq!(read_ready_line(&mut r).unwrap().0.len(), READY_LINE_MAX);
        // A line cut short by the program's end is what it wrote.
        assert_eq!(
            read_ready_line(&mut pipe_with(b"{\"error\""))
                .unwrap()
                .0
                .as_str(),
            "{\"error\""
        );
        let e = read_ready_line(&mut pipe_with(b"\xff\xfe\n")).unwrap_err();
        assert_eq!(e.to_string(), "its first report is not UTF-8");
    }
}
