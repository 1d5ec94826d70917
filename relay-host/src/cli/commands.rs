//! `relay-host`'s commands, one function each: the binary parses the command line and calls
//! these with what it parsed. Each returns the process's exit code.

use std::path::Path;

use serde_json::json;

use super::token_file;
use crate::human::{path_json, print_error};
use crate::launch::network::token_refused;
use crate::launch::plan::request::{Kind, Request};
use crate::launch::session::denied::refused;
use crate::launch::{launch, refuse_early, LaunchError, Stdin};
use crate::state::logs::Query;
use crate::Host;
use relay_shim::exit::ExitCode;

/// `relay-host launch REQUEST|-`: one session from a JSON request file (`-`: stdin, and the
/// session's stdin is then `/dev/null`).
pub(crate) fn launch_file(host: &Host, request: &Path) -> i32 {
    let (text, stdin) = if request.as_os_str() == "-" {
        (
            crate::launch::plan::request::read_request(std::io::stdin()),
            Stdin::Null,
        )
    } else {
        match std::fs::File::open(request) {
            Ok(f) => (
                crate::launch::plan::request::read_request(f),
                Stdin::Inherit,
            ),
            Err(e) => {
                print_error(&format!("read the request {}: {e}", request.display()));
                return ExitCode::Usage.code();
            }
        }
    };
    match text.and_then(|t| Request::from_json(&t)) {
        Ok(r) => launch(host, r, stdin),
        Err(e) => refuse_early(host, &LaunchError::from(e)),
    }
}

pub(crate) use super::args::RunArgs;

/// `relay-host run`: a terminal launch built from flags, in the caller's terminal.
pub(crate) fn run(host: &Host, args: RunArgs) -> i32 {
    let cwd = std::env::current_dir().ok();
    let project = match (args.project, &cwd) {
        (Some(p), Some(c)) if !p.is_absolute() => Some(c.join(p)),
        (Some(p), _) => Some(p),
        (None, c) => c.clone(),
    };
    let claude = args.template == crate::launch::plan::request::CLAUDE_TEMPLATE;
    let request = Request {
        kind: Kind::Terminal,
        template: Some(args.template),
        session_id: None,
        resume: args.resume,
        continue_last: args.continue_last,
        project: project.map(|p| relay_token::clean_path(&p)),
        extra_args: args.args,
        env: Default::default(),
        sandbox: !args.no_sandbox,
        host: None,
        keep: args.keep,
    };
    let project = request.project.clone();
    let started = std::time::SystemTime::now();
    let (code, id) = crate::launch::launch_session(host, request, Stdin::Inherit);
    // Each host the allow-list refused, where the person looks (a client printed only "403").
    for r in id
        .as_deref()
        .map_or(Vec::new(), |id| refused(&host.state_dir, id))
    {
        errln!("{}", r.line());
    }
    // A refused token: the fix, and no "logged in" resume line (the login is what failed).
    let token_refused =
        (id.as_deref()).and_then(|id| token_refused::in_session(&host.state_dir, id));
    if let Some(status) = token_refused {
        errln!("{}", token_refused::line(status));
    }
    if claude && token_refused.is_none() {
        super::resume::say_how_to_resume(host, project.as_deref(), started);
    }
    code
}

/// `relay-host audit` / `relay-host events`: the log `name` of the state folder.
pub(crate) fn print_log(host: &Host, name: &str, json: bool, query: &Query) -> i32 {
    match crate::state::logs::print(&host.state_dir, name, json, query) {
        Ok(()) => 0,
        // The report could not be written: the binary says so (`human::stdout_error`).
        Err(_) if crate::human::stdout_error().is_some() => ExitCode::Internal.code(),
        Err(e) => {
            print_error(&format!(
                "read {}: {e}",
                host.state_dir.join(name).display()
            ));
            ExitCode::Internal.code()
        }
    }
}

/// `relay-host token import [--file PATH]`: reads stdin (echo off on a terminal), picks the one
/// token, stores it, sets `claude_token_file` when empty. Prints what it did, never the token.
pub(crate) fn token_import(host: &Host, file: Option<&Path>, json: bool) -> i32 {
    let done = token_file::read_stdin_secret()
        .and_then(|input| token_file::pick_token(&input))
        .and_then(|token| token_file::import(host, &token, file));
    match done {
        Ok(d) => {
            if json {
                outln!(
                    "{}",
                    json!({"path": path_json(&d.path), "replaced": d.replaced,
                           "settings_updated": d.settings_updated.as_deref().map(path_json)})
                );
            } else {
                let verb = if d.replaced { "replaced" } else { "stored" };
                outln!("token {verb}: {} (mode 0600)", d.path.display());
                if let Some(s) = d.settings_updated {
                    outln!("claude_token_file set in {}", s.display());
                }
            }
            0
        }
        Err(e) => {
            if e.echoes_nothing() {
                // Fixed words and counts: nothing of the input.
                crate::human::print_error_as_is(&e.to_string());
            } else {
                print_error(&e.to_string());
            }
            e.exit_code().code()
        }
    }
}

/// `relay-host token check`: the token file's health; exit 0 when it reads as a token, 78 when
/// not (or when `claude_token_file` is not set).
pub(crate) fn token_check(host: &Host, json: bool, online: Option<&str>) -> i32 {
    let path = match token_file::configured_path(host) {
        Ok(Some(p)) => p,
        Ok(None) => {
            let msg = format!("claude_token_file is not set; {}", crate::human::MAKE_TOKEN);
            if json {
                outln!(
                    "{}",
                    json!({"configured": false, "ok": false, "error": msg})
                );
            } else {
                print_error(&msg);
            }
            return ExitCode::Unavailable.code();
        }
        Err(e) => {
            print_error(&e.to_string());
            return ExitCode::Unavailable.code();
        }
    };
    let mut r = token_file::check(&path);
    let file_ok = r["ok"] == json!(true);
    let online = match online {
        Some(template) if file_ok => Some(online_check(host, template, &path)),
        _ => None,
    };
    if let Some(o) = &online {
        r["online"] = o.1.clone();
    }
    if json {
        outln!("{r}");
    } else {
        let _ = crate::human::write_out(format_args!("{}", super::status::token_text(&r)));
        for line in online.iter().flat_map(|o| &o.0) {
            outln!("{line}");
        }
    }
    match (file_ok, online) {
        (false, _) => ExitCode::Unavailable.code(),
        (true, Some((_, _, code))) => code,
        (true, None) => 0,
    }
}

/// `token check --online`'s request for `template` with the token file at `path`: its lines,
/// its JSON and its exit code ([`super::token_online`]).
#[cfg(target_os = "linux")]
fn online_check(host: &Host, template: &str, path: &Path) -> (Vec<String>, serde_json::Value, i32) {
    let Ok(token) = crate::launch::prepare::token::read_usable(path) else {
        let why = "the token file changed while it was read";
        return (
            vec![format!("online: {why}")],
            json!({"ok": false, "error": why}),
            ExitCode::Unavailable.code(),
        );
    };
    let o = super::token_online::check(host, template, &token);
    (o.lines, o.json, o.code)
}

/// No stand-in mode, hence no TLS code, on this system.
#[cfg(not(target_os = "linux"))]
fn online_check(_: &Host, _: &str, _: &Path) -> (Vec<String>, serde_json::Value, i32) {
    let why = "--online is Linux only (relay-stand-in's TLS)";
    (
        vec![format!("online: {why}")],
        json!({"ok": false, "error": why}),
        ExitCode::Unavailable.code(),
    )
}

/// `relay-host gc [--keep-days N]`: removes ended sessions' folders (kept ones once older than
/// the retention) and, when no session of the state folder runs, the write-deny placeholders a
/// killed host left (as the end of a session would have); a session whose host was lost gets its
/// `exit` row (`"outcome": "host_lost"`). A missing state folder is left missing.
pub(crate) fn gc(host: &Host, keep_days: u64, json: bool) -> i32 {
    let sessions = host.state_dir.join(crate::state::SESSIONS_DIR);
    let retention = std::time::Duration::from_secs(keep_days.saturating_mul(86400));
    crate::launch::prepare::claude_config::carry_back_unsupervised(&host.state_dir);
    match crate::state::gc_sessions(&sessions, retention) {
        Ok(r) => {
            // The placeholders a killed host left, once no session runs (under their lock).
            let released = crate::launch::placeholders::release(&host.state_dir);
            let (placeholders, leftovers) = (released.placeholders, released.leftovers);
            if json {
                outln!(
                    "{}",
                    json!({"removed": r.removed, "kept": r.kept, "running": r.running,
                           "placeholders_removed": placeholders,
                           "sandbox_leftovers_removed": leftovers, "host_lost": r.lost})
                );
            } else {
                outln!(
                    "removed {} session folder(s), {placeholders} leftover placeholder(s) and \
                     {leftovers} empty mount point(s) of Claude Code's own sandbox; kept {} \
                     (younger than {keep_days} days), {} running; {} session(s) whose host was \
                     lost got their exit row",
                    r.removed,
                    r.kept,
                    r.running,
                    r.lost
                );
            }
            0
        }
        Err(e) => {
            print_error(&format!("gc {}: {e}", sessions.display()));
            ExitCode::Internal.code()
        }
    }
}

#[cfg(test)]
#[path = "commands_tests.rs"]
mod tests;
