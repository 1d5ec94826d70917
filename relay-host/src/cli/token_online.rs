//! `relay-host token check --online`: one authenticated request to the API host a template's
//! sessions talk to, made by `relay-stand-in --check` ([`crate::stand_in::check`]) so that the
//! host is verified exactly as a stand-in session's proxy verifies it (the system trust store
//! and `upstream_ca_file`, handed over as bytes, read and checked as a launch reads them) and
//! relay-host links no TLS code. The token goes to that program on a pipe at fd 3, never on its
//! command line or in its environment; no output names it.
//!
//! | outcome | exit code |
//! |---|---|
//! | the API accepted the token (a `2xx`) | 0 |
//! | the API host could not be reached, sent no answer, or answered neither yes nor no | 69 |
//! | the API host's TLS failed or was not verified | 76 |
//! | the API refused the token (`401`, `403`) | 77 |
//! | the token file, the trust store or the template is not usable | 78 |
//! | `relay-stand-in` could not be started | 71 |

use relay_token::ClaudeToken;
use serde_json::{json, Value};

use crate::stand_in::check::{CheckReport, CHECK_PATH};
use crate::Host;

/// The exit code when the API host could not be reached or gave no verdict.
pub(crate) const UNREACHABLE: i32 = 69;
/// The exit code when the API host's TLS failed.
pub(crate) const TLS_FAILED: i32 = 76;
/// The exit code when the API refused the token.
pub(crate) const REFUSED: i32 = 77;
/// The exit code when the check cannot be made (template, trust store).
const UNUSABLE: i32 = 78;
/// The exit code when `relay-stand-in` could not be started.
const SPAWN_FAILED: i32 = 71;

/// The most bytes of the program's report line read.
const REPORT_MAX: u64 = 64 << 10;

/// What the check found, as printed (`lines`, each a line of the text report) and as JSON
/// (`json`, the `online` field of `token check --json`), and the exit code.
pub(crate) struct Online {
    pub(crate) lines: Vec<String>,
    pub(crate) json: Value,
    pub(crate) code: i32,
}

/// The API host of `template_id` (its `https://` `api_base_url`, else Anthropic's) checked
/// with `token`: one request, its outcome.
pub(crate) fn check(host: &Host, template_id: &str, token: &ClaudeToken) -> Online {
    let unusable = |why: String| Online {
        lines: vec![format!("online: {why}")],
        json: json!({"ok": false, "error": why}),
        code: UNUSABLE,
    };
    let settings = match host.settings() {
        Ok(s) => s,
        Err(e) => return unusable(e.to_string()),
    };
    let Some(template) = settings.template(template_id) else {
        return unusable(format!("no template {template_id:?} is defined"));
    };
    let (host_port, path) = match api_host(&template) {
        Ok(hp) => hp,
        Err(why) => return unusable(why),
    };
    let trust = match trust(host, &settings) {
        Ok(t) => t,
        Err(why) => return unusable(why),
    };
    let report = match ask(&host_port, &path, token, &trust) {
        Ok(r) => r,
        Err(why) => {
            return Online {
                lines: vec![format!("online: {why}")],
                json: json!({"ok": false, "host": host_port, "error": why}),
                code: SPAWN_FAILED,
            }
        }
    };
    outcome(&host_port, &path, report)
}

/// The API host a template's sessions send the token to, as `host:port`, and its base URL's
/// path (`""` for none): the `https://` `api_base_url`, else Anthropic's API.
fn api_host(t: &crate::settings::Template) -> Result<(String, String), String> {
    let Some(g) = t.api_base_url.as_ref() else {
        return Ok((crate::stand_in::ANTHROPIC_API.to_string(), String::new()));
    };
    let Some(rest) = g.url().strip_prefix("https://") else {
        return Err(format!(
            "template {:?}'s api_base_url {} is not https://: only a TLS API host is checked",
            t.id,
            g.url()
        ));
    };
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    Ok((
        g.allow_entry().to_string(),
        path.trim_end_matches('/').to_string(),
    ))
}

/// The upstream trust as a launch reads it: the system bundle and `upstream_ca_file`'s bytes.
fn trust(host: &Host, s: &crate::settings::Settings) -> Result<(Vec<u8>, Vec<u8>), String> {
    let claude_config = host.state_dir.join(crate::state::CLAUDE_CONFIG_DIR);
    let grants = crate::reach::rw_grants(&host.home, s, None, &claude_config);
    let system = crate::reach::read_system_ca(&host.config_dir, &grants)
        .map_err(|e| e.to_string())?
        .map(|(_, bytes)| bytes)
        .unwrap_or_default();
    let extra = match s.upstream_ca_file.as_deref() {
        Some(p) => crate::reach::read_upstream_ca(p, &host.config_dir, &grants)
            .map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    Ok((system, extra))
}

/// Runs `relay-stand-in --check` with the token on a pipe at fd 3, the trust on fds 5 and 6,
/// and reads its report from fd 4.
fn ask(
    host_port: &str,
    path: &str,
    token: &ClaudeToken,
    (system, extra): &(Vec<u8>, Vec<u8>),
) -> Result<CheckReport, String> {
    use crate::stand_in::protocol::{CA_FD, REPORT_FD, SYSTEM_CA_FD, TOKEN_FD};
    use std::io::Read;
    use std::os::fd::AsFd;
    let program = crate::net::stand_in_program().map_err(|e| format!("relay-host's path: {e}"))?;
    let cannot = |e: std::io::Error| format!("cannot start {}: {e}", program.display());
    let mut cmd = std::process::Command::new(&program);
    cmd.args(crate::stand_in::check::args(host_port, path))
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    crate::launch::tie::tie_to_host(&mut cmd, false);
    let pipe = relay_token::TokenPipe::new(token)
        .map_err(cannot)?
        .into_fd();
    let (report, report_w) = relay_token::sys::pipe2_cloexec().map_err(cannot)?;
    let ca = relay_token::sys::memfd_with(c"relay-upstream-ca", extra).map_err(cannot)?;
    let sys = relay_token::sys::memfd_with(c"relay-system-ca", system).map_err(cannot)?;
    let mut child = {
        let mut map = relay_token::FdMap::new();
        let placed = [
            (pipe.as_fd(), TOKEN_FD),
            (report_w.as_fd(), REPORT_FD),
            (ca.as_fd(), CA_FD),
            (sys.as_fd(), SYSTEM_CA_FD),
        ];
        for (fd, at) in placed {
            map.place(fd, at).map_err(|e| cannot(e.into()))?;
        }
        map.spawn(&mut cmd).map_err(cannot)?
    };
    // Only the child holds the write end now: its end is the report's end.
    drop((pipe, report_w, ca, sys));
    let mut line = String::new();
    let read = std::fs::File::from(report)
        .take(REPORT_MAX)
        .read_to_string(&mut line);
    let status = child.wait().map_err(cannot)?;
    if let Err(e) = read {
        return Err(format!("{}: its report: {e}", program.display()));
    }
    match CheckReport::parse(&line) {
        Ok(CheckReport::Error(why)) => Err(format!("{}: {why}", program.display())),
        Ok(r) => Ok(r),
        Err(_) => Err(format!(
            "{} ended ({status}) without a report",
            program.display()
        )),
    }
}

/// What a report means to the person: the lines, the JSON and the exit code.
fn outcome(host_port: &str, path: &str, report: CheckReport) -> Online {
    let verified = format!("online: {host_port}: TLS verified");
    let (lines, json, code) = match report {
        CheckReport::Unreachable(why) => (
            vec![format!("online: {host_port}: unreachable: {why}")],
            json!({"tls": null, "token": null, "error": why}),
            UNREACHABLE,
        ),
        CheckReport::TlsFailed(why) => (
            vec![format!("online: {host_port}: {why}")],
            json!({"tls": "failed", "token": null, "error": why}),
            TLS_FAILED,
        ),
        CheckReport::NoAnswer(why) => (
            vec![verified, format!("online: no answer to the token: {why}")],
            json!({"tls": "verified", "token": null, "error": why}),
            UNREACHABLE,
        ),
        CheckReport::Answered { status, error_type } => {
            let kind = error_type
                .as_deref()
                .map_or(String::new(), |t| format!(" {t}"));
            let (said, token, code) = match status {
                200..=299 => (
                    format!(
                        "online: the API accepted the token (GET {path}{CHECK_PATH}: {status})"
                    ),
                    "accepted",
                    0,
                ),
                401 | 403 => (
                    format!(
                        "online: the API refused the token ({status}{kind}): {}",
                        crate::human::MAKE_TOKEN
                    ),
                    "refused",
                    REFUSED,
                ),
                _ => (
                    format!(
                        "online: the API answered {status}{kind}: neither accepted nor refused; \
                         try again later"
                    ),
                    "unknown",
                    UNREACHABLE,
                ),
            };
            (
                vec![verified, said],
                json!({"tls": "verified", "token": token, "status": status,
                       "error_type": error_type}),
                code,
            )
        }
        CheckReport::Error(why) => (
            vec![format!("online: {why}")],
            json!({"error": why}),
            UNUSABLE,
        ),
    };
    let mut json = json;
    json["host"] = json!(host_port);
    json["ok"] = json!(code == 0);
    json["exit"] = json!(code);
    Online { lines, json, code }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each report reads as its line and exit code, the refusal with its fix.
    #[test]
    fn each_outcome_has_its_line_and_exit_code() {
        let hp = "api.anthropic.com:443";
        let refused = CheckReport::Answered {
            status: 403,
            error_type: Some("permission_error".into()),
        };
        let o = outcome(hp, "", refused);
        assert_eq!(o.code, REFUSED);
        assert_eq!(
            o.lines,
            [
                "online: api.anthropic.com:443: TLS verified",
                "online: the API refused the token (403 permission_error): make one with \
                 `claude setup-token`, then store it with `relay-host token import`"
            ]
        );
        let ok = CheckReport::Answered {
            status: 200,
            error_type: None,
        };
        let o = outcome(hp, "/gw", ok);
        assert_eq!(
            (o.code, o.lines[1].as_str()),
            (
                0,
                "online: the API accepted the token (GET /gw/api/claude_code/policy_limits: 200)"
            )
        );
        let o = outcome(hp, "", CheckReport::Unreachable("x".into()));
        assert_eq!((o.code, o.json["ok"].clone()), (UNREACHABLE, json!(false)));
        let o = outcome(hp, "", CheckReport::TlsFailed("y".into()));
        assert_eq!(o.code, TLS_FAILED);
    }
}
