//! `relay-host`'s command line.

use std::ffi::OsString;
use std::path::PathBuf;

use super::launch::{launch, Stdin};
use super::request::{Kind, Request, CLAUDE_TEMPLATE};
use super::state::{State, AUDIT_FILE, EVENTS_FILE};
use super::Host;

/// The usage text.
pub const USAGE: &str = "\
usage: relay-host [--config-dir DIR] [--state-dir DIR] COMMAND
commands:
  launch REQUEST|-         launch one session from a JSON request (a file, or - for stdin)
  run [--template ID] [--project DIR] [--no-sandbox] [-- ARGS...]
                           launch a session in this terminal (default template claude-code)
  status [--json]          folders, settings, the token file's health, bwrap and relay-shim
  audit [--json]           print the audit log
  events [--json]          print the event log
  demo [--json]            show the main job on a throwaway config
exit codes: the session's own; 64 invalid_spec or usage, 71 spawn_failed, 78 sandbox_unavailable,
            70 internal error (demo: 1 when a check failed)";

/// A parsed command line.
///
/// ```
/// use relay_token::host::cli::{parse, Command};
/// let (_, _, cmd) = parse(vec!["status".into(), "--json".into()]).unwrap();
/// assert_eq!(cmd, Command::Status { json: true });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `launch REQUEST|-`.
    Launch {
        /// The request file, or `-`.
        request: PathBuf,
    },
    /// `run ...`.
    Run {
        /// The template id.
        template: String,
        /// The project folder.
        project: Option<PathBuf>,
        /// `--no-sandbox`.
        no_sandbox: bool,
        /// Arguments after `--`.
        args: Vec<String>,
    },
    /// `status`.
    Status {
        /// `--json`.
        json: bool,
    },
    /// `audit`.
    Audit {
        /// `--json`.
        json: bool,
    },
    /// `events`.
    Events {
        /// `--json`.
        json: bool,
    },
    /// `demo`.
    Demo {
        /// `--json`.
        json: bool,
    },
    /// `help`, `--help`, `-h`.
    Help,
    /// A hidden mode: act as `relay-shim` (lets `demo` work from `cargo run -p relay-host`
    /// alone, where no `relay-shim` was built).
    Shim(Vec<OsString>),
    /// A hidden mode: the demo's probe, run inside the sandbox.
    Probe(Vec<OsString>),
}

/// Parses the arguments (without the program name): global folders, then the command.
///
/// ```
/// use relay_token::host::cli::parse;
/// assert!(parse(vec!["bogus".into()]).is_err());
/// ```
pub fn parse(args: Vec<OsString>) -> Result<(Option<PathBuf>, Option<PathBuf>, Command), String> {
    let mut config = None;
    let mut state = None;
    let mut it = args.into_iter();
    let mut rest: Vec<OsString> = Vec::new();
    let mut command: Option<String> = None;
    while let Some(a) = it.next() {
        let s = a.to_string_lossy().into_owned();
        match s.as_str() {
            "--config-dir" | "--state-dir" => {
                let v = it.next().ok_or_else(|| format!("{s} needs a folder"))?;
                if s == "--config-dir" {
                    config = Some(PathBuf::from(v));
                } else {
                    state = Some(PathBuf::from(v));
                }
            }
            _ if command.is_none() => {
                if s == "__shim" || s == "__probe" {
                    let hidden: Vec<OsString> = it.collect();
                    let cmd = if s == "__shim" {
                        Command::Shim(hidden)
                    } else {
                        Command::Probe(hidden)
                    };
                    return Ok((config, state, cmd));
                }
                command = Some(s);
            }
            "--" => {
                rest.push(a);
                rest.extend(it.by_ref());
            }
            _ => rest.push(a),
        }
    }
    let Some(command) = command else {
        return Err("no command given".into());
    };
    let flag_json = |rest: &[OsString], name: &str| -> Result<bool, String> {
        match rest {
            [] => Ok(false),
            [f] if f == "--json" => Ok(true),
            _ => Err(format!("{name} takes only --json")),
        }
    };
    let cmd = match command.as_str() {
        "launch" => match rest.as_slice() {
            [r] => Command::Launch {
                request: PathBuf::from(r),
            },
            _ => return Err("launch takes one REQUEST (a file, or - for stdin)".into()),
        },
        "run" => {
            let mut template = CLAUDE_TEMPLATE.to_string();
            let mut project = None;
            let mut no_sandbox = false;
            let mut args = Vec::new();
            let mut r = rest.into_iter();
            while let Some(a) = r.next() {
                match a.to_str() {
                    Some("--template") => {
                        template = r
                            .next()
                            .and_then(|v| v.into_string().ok())
                            .ok_or("--template needs an id")?
                    }
                    Some("--project") => {
                        project = Some(PathBuf::from(r.next().ok_or("--project needs a folder")?))
                    }
                    Some("--no-sandbox") => no_sandbox = true,
                    Some("--") => {
                        for x in r.by_ref() {
                            args.push(x.into_string().map_err(|_| "arguments must be UTF-8")?);
                        }
                    }
                    _ => {
                        return Err(format!(
                            "run: unexpected {:?} (put the session's arguments after --)",
                            a
                        ))
                    }
                }
            }
            Command::Run {
                template,
                project,
                no_sandbox,
                args,
            }
        }
        "status" => Command::Status {
            json: flag_json(&rest, "status")?,
        },
        "audit" => Command::Audit {
            json: flag_json(&rest, "audit")?,
        },
        "events" => Command::Events {
            json: flag_json(&rest, "events")?,
        },
        "demo" => Command::Demo {
            json: flag_json(&rest, "demo")?,
        },
        "help" | "--help" | "-h" => Command::Help,
        other => return Err(format!("unknown command {other:?}")),
    };
    Ok((config, state, cmd))
}

/// Runs a command line; returns the exit code.
///
/// ```no_run
/// let code = relay_token::host::cli::run(vec!["status".into()]);
/// ```
pub fn run(args: Vec<OsString>) -> i32 {
    let (config, state, cmd) = match parse(args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("relay-host: {e}\n{USAGE}");
            return 64;
        }
    };
    match cmd {
        Command::Help => {
            println!("{USAGE}");
            return 0;
        }
        Command::Shim(args) => {
            // SAFETY: reached straight from the entry point, before anything else opens or uses
            // a descriptor: this process owns the fd 5 and status fd it inherited.
            return unsafe { crate::shim::run_cli(args) };
        }
        Command::Probe(args) => return super::demo::probe(args),
        _ => {}
    }
    let host = match Host::locate(config, state) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("relay-host: {e}");
            return 70;
        }
    };
    match cmd {
        Command::Launch { request } => {
            let (text, stdin) = if request.as_os_str() == "-" {
                (super::request::read_request(std::io::stdin()), Stdin::Null)
            } else {
                match std::fs::File::open(&request) {
                    Ok(f) => (super::request::read_request(f), Stdin::Inherit),
                    Err(e) => {
                        eprintln!("relay-host: read the request {}: {e}", request.display());
                        return 64;
                    }
                }
            };
            match text.and_then(|t| Request::from_json(&t)) {
                Ok(r) => launch(&host, r, stdin),
                Err(e) => super::launch::refuse_early(
                    &host,
                    &super::launch::LaunchError::InvalidSpec(e.to_string()),
                ),
            }
        }
        Command::Run {
            template,
            project,
            no_sandbox,
            args,
        } => {
            let project = match project {
                Some(p) => Some(p),
                None => std::env::current_dir().ok(),
            };
            let project = project.map(|p| {
                if p.is_absolute() {
                    p
                } else {
                    std::env::current_dir().map(|c| c.join(&p)).unwrap_or(p)
                }
            });
            let request = Request {
                kind: Kind::Terminal,
                template: Some(template),
                session_id: None,
                resume: None,
                project: project.map(|p| crate::path::clean(&p)),
                extra_args: args,
                env: Default::default(),
                sandbox: !no_sandbox,
                host: None,
            };
            launch(&host, request, Stdin::Inherit)
        }
        Command::Status { json } => super::status::print(&host, json),
        Command::Audit { json } => print_log(&host, AUDIT_FILE, json),
        Command::Events { json } => print_log(&host, EVENTS_FILE, json),
        Command::Demo { json } => super::demo::run(json),
        Command::Help | Command::Shim(_) | Command::Probe(_) => unreachable!("handled above"),
    }
}

fn print_log(host: &Host, name: &str, json: bool) -> i32 {
    let state = match State::open(&host.state_dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("relay-host: state folder {}: {e}", host.state_dir.display());
            return 70;
        }
    };
    let rows = match state.read_jsonl(name) {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "relay-host: read {}: {e}",
                state.path().join(name).display()
            );
            return 70;
        }
    };
    for row in rows {
        if json {
            println!("{row}");
        } else if let serde_json::Value::Object(m) = &row {
            let line: Vec<String> = m
                .iter()
                .map(|(k, v)| match v {
                    serde_json::Value::String(s) => format!("{k}={s}"),
                    other => format!("{k}={other}"),
                })
                .collect();
            println!("{}", line.join(" "));
        } else {
            println!("{row}");
        }
    }
    0
}
