//! The checks `status` runs: each that a launch would make, with its own hint. Its exit code
//! says whether a Claude session would start logged in: every check that a Claude launch needs
//! passes.

use std::path::Path;

use serde_json::{json, Value};

use crate::settings::{Settings, SettingsError};
use crate::{launch::plan::request, userns, Host};
use relay_token::sandbox;

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Check {
    /// What was checked (`settings`, `token`, `bwrap`, `user namespaces`, `relay-shim`,
    /// `template claude-code`, ...).
    pub(crate) name: String,
    /// True when it passed.
    pub(crate) ok: bool,
    /// What was found.
    pub(crate) detail: String,
    /// What to do, for a failed check.
    pub(crate) hint: Option<String>,
    /// True when a Claude launch needs it (it counts for `status`'s exit code).
    pub(crate) claude: bool,
}

impl Check {
    /// A passed check.
    pub(crate) fn ok(name: &str, detail: impl Into<String>, claude: bool) -> Check {
        Check {
            name: name.into(),
            ok: true,
            detail: detail.into(),
            hint: None,
            claude,
        }
    }

    /// A failed check with its hint.
    pub(crate) fn failed(
        name: &str,
        detail: impl Into<String>,
        hint: Option<String>,
        claude: bool,
    ) -> Check {
        Check {
            name: name.into(),
            ok: false,
            detail: detail.into(),
            hint,
            claude,
        }
    }

    /// The check as JSON (`name`, `ok`, `detail`, `hint`, `claude`).
    pub(crate) fn to_json(&self) -> Value {
        json!({"name": self.name, "ok": self.ok, "detail": self.detail, "hint": self.hint,
               "claude": self.claude})
    }
}

/// Every check, in order: the settings, the token, bwrap, user namespaces, relay-shim, for a
/// template in stand-in mode `relay-stand-in` and the trust store it verifies the API against,
/// each template's command. `settings` are the loaded ones, or the error that kept them from loading.
pub(crate) fn run(host: &Host, settings: Result<&Settings, &SettingsError>) -> Vec<Check> {
    let s = match settings {
        Ok(s) => s,
        Err(e) => return vec![failed_with_hint("settings", e.to_string(), true)],
    };
    let mut out = vec![Check::ok("settings", "loaded", true), token(host, s)];
    out.extend(bwrap(s));
    out.push(match host.find_shim(s) {
        Ok(p) => Check::ok("relay-shim", p.display().to_string(), true),
        Err(e) => failed_with_hint("relay-shim", e.to_string(), true),
    });
    out.extend(stand_in(host, s));
    out.extend(s.all_templates().iter().map(command));
    out
}

/// For settings with a template in stand-in mode: that template's id and `relay-stand-in` (the
/// session's proxy, which the launch needs), `Ok` when it is there and runnable, `Err` (the path
/// looked at) when not.
pub(crate) fn stand_in_program(
    settings: &Settings,
) -> Option<(String, Result<std::path::PathBuf, std::path::PathBuf>)> {
    let t = settings
        .all_templates()
        .into_iter()
        .find(|t| t.token_mode.hands_stand_in())?;
    let p = crate::net::stand_in_program().ok()?;
    let found = match relay_token::which::is_executable(&p) {
        true => Ok(p),
        false => Err(p),
    };
    Some((t.id.clone(), found))
}

/// For a template in stand-in mode: `relay-stand-in` found, and the trust store it verifies the
/// API hosts against (the system bundle's path and its number of certificates, and
/// `upstream_ca_file`'s), read as a launch reads it. Counted for a Claude session's verdict when
/// the template is `claude-code`.
fn stand_in(host: &Host, s: &Settings) -> Vec<Check> {
    let Some((id, program)) = stand_in_program(s) else {
        return vec![];
    };
    let claude = id == request::CLAUDE_TEMPLATE;
    let mut out = vec![match program {
        Ok(p) => Check::ok("relay-stand-in", p.display().to_string(), claude),
        Err(p) => failed_with_hint(
            "relay-stand-in",
            format!(
                "template {id:?} is in stand-in mode, which needs {}: not found",
                p.display()
            ),
            claude,
        ),
    }];
    out.extend(trust_store(host, s, claude));
    out
}

/// The trust store check (Linux: stand-in mode runs there only).
#[cfg(target_os = "linux")]
fn trust_store(host: &Host, s: &Settings, claude: bool) -> Option<Check> {
    let certificates = |pem: &[u8]| {
        String::from_utf8_lossy(pem)
            .matches("-----BEGIN CERTIFICATE-----")
            .count()
    };
    let claude_config = host.state_dir.join(crate::state::CLAUDE_CONFIG_DIR);
    let grants = crate::reach::rw_grants(&host.home, s, None, &claude_config);
    let mut detail = match crate::reach::read_system_ca(&host.config_dir, &grants) {
        Ok(Some((path, pem))) => {
            format!("{}: {} certificates", path.display(), certificates(&pem))
        }
        Ok(None) => "no system bundle: relay-stand-in's built-in roots (webpki-roots)".to_string(),
        Err(e) => return Some(failed_with_hint("trust store", e.to_string(), claude)),
    };
    if let Some(extra) = s.upstream_ca_file.as_deref() {
        match crate::reach::read_upstream_ca(extra, &host.config_dir, &grants) {
            Ok(pem) => {
                detail += &format!(
                    ", and upstream_ca_file {}: {} certificates",
                    extra.display(),
                    certificates(&pem)
                )
            }
            Err(e) => return Some(failed_with_hint("trust store", e.to_string(), claude)),
        }
    }
    Some(Check::ok("trust store", detail, claude))
}

#[cfg(not(target_os = "linux"))]
fn trust_store(_: &Host, _: &Settings, _: bool) -> Option<Check> {
    None
}

/// A failed check whose hint is the one `human::hint` knows for its message.
fn failed_with_hint(name: &str, message: String, claude: bool) -> Check {
    let hint = crate::human::hint(&message);
    Check::failed(name, message, hint, claude)
}

/// The token: set, and read as a token.
fn token(host: &Host, s: &Settings) -> Check {
    let path = match relay_token::claude_token_path_in(&s.claude_token_file, Some(&host.home)) {
        Ok(Some(p)) => p,
        Ok(None) => {
            let hint = Some(crate::human::MAKE_TOKEN.to_string());
            return Check::failed("token", "claude_token_file is not set", hint, true);
        }
        Err(e) => return failed_with_hint("token", e.to_string(), true),
    };
    let r = super::token_file::check(&path);
    if r["ok"] == json!(true) {
        return Check::ok(
            "token",
            format!("{} reads as a token", path.display()),
            true,
        );
    }
    let error = r["error"].as_str().unwrap_or_default().to_string();
    let hint = r["hint"].as_str().map(str::to_string);
    Check::failed("token", error, hint, true)
}

/// bwrap found and working; user namespaces, by cause when bwrap cannot make them.
fn bwrap(s: &Settings) -> Vec<Check> {
    if cfg!(target_os = "macos") {
        return vec![];
    }
    match sandbox::find_bwrap(s.bwrap.as_deref()) {
        Ok(p) => vec![
            Check::ok("bwrap", format!("{} works", p.display()), true),
            Check::ok("user namespaces", "bwrap's test run made them", true),
        ],
        Err(e @ sandbox::SandboxError::BwrapBroken { .. }) => {
            let cause = userns::cause();
            vec![
                Check::failed("bwrap", e.to_string(), Some(cause.fix().into()), true),
                Check::failed(
                    "user namespaces",
                    cause.words(),
                    Some(cause.fix().into()),
                    true,
                ),
            ]
        }
        Err(e) => vec![failed_with_hint("bwrap", e.to_string(), true)],
    }
}

/// A template's command: found on `PATH` (or at its path) and runnable (a script's interpreter
/// found too).
fn command(t: &crate::settings::Template) -> Check {
    let name = format!("template {}", t.id);
    let claude = t.id == request::CLAUDE_TEMPLATE;
    let program = &t.command[0];
    let Some(path) = relay_token::which::find_program(program) else {
        let detail = format!("command {program:?} not found or not executable (PATH)");
        let hint = match claude {
            true => crate::human::INSTALL_CLAUDE.to_string(),
            false => format!("install {program:?}, or put its folder on PATH"),
        };
        return Check::failed(&name, detail, Some(hint), claude);
    };
    match interpreter_missing(&path) {
        Some(i) => Check::failed(
            &name,
            format!(
                "command {} is a script for {i:?}, which is not found",
                path.display()
            ),
            Some(format!(
                "install {i:?} (Claude Code's npm package needs node)"
            )),
            claude,
        ),
        None => Check::ok(&name, format!("command {}", path.display()), claude),
    }
}

/// The interpreter a script's `#!` line names when it cannot be found (`/usr/bin/env NAME`: NAME
/// on `PATH`).
fn interpreter_missing(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = String::from_utf8_lossy(line.split(|&b| b == b'\n').next()?).into_owned();
    let mut words = line.split_whitespace();
    let first = words.next()?.to_string();
    let wanted = match (Path::new(&first).file_name(), words.next()) {
        (Some(n), Some(arg)) if n == "env" && !arg.starts_with('-') => arg.to_string(),
        _ => first,
    };
    relay_token::which::find_program(&wanted)
        .is_none()
        .then_some(wanted)
}

#[cfg(test)]
mod tests {
    /// `Check`'s example.
    #[test]
    fn check_doc_example() {
        let c = crate::cli::checks::Check::ok("bwrap", "/usr/bin/bwrap works", true);
        assert!(c.ok && c.hint.is_none());
    }

    /// `ok`'s example.
    #[test]
    fn ok_doc_example() {
        assert!(crate::cli::checks::Check::ok("x", "fine", false).ok);
    }

    /// `failed`'s example.
    #[test]
    fn failed_doc_example() {
        let c = crate::cli::checks::Check::failed("x", "broken", Some("fix it".into()), true);
        assert!(!c.ok);
    }

    /// `to_json`'s example.
    #[test]
    fn to_json_doc_example() {
        let c = crate::cli::checks::Check::ok("bwrap", "works", true);
        assert_eq!(c.to_json()["ok"], true);
    }

    /// `run`'s example.
    #[test]
    fn run_doc_example() {
        let result = (|| {
            let host = crate::Host::from_dirs("/nonexistent/c".into(), "/nonexistent/s".into())?;
            let bad = crate::settings::Settings::from_json("{").unwrap_err();
            let checks = crate::cli::checks::run(&host, Err(&bad));
            assert_eq!((checks.len(), checks[0].ok), (1, false));
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }
}
