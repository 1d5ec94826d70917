//! Parsed command line → the library's command functions → exit code.

use std::ffi::OsString;

use super::{demo, status};
use crate::cli as cmd;
use crate::state::logs::{parse_since, Query};
use crate::state::{AUDIT_FILE, EVENTS_FILE};
use crate::{human, Host};
use clap::Parser;
use relay_shim::exit::ExitCode;

use super::args::{Cli, Command, LogArgs, TokenCommand};

/// Parses `argv` (program name first) and runs the command.
pub(crate) fn main(argv: Vec<OsString>) -> i32 {
    let cli = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                ExitCode::Usage.code()
            } else {
                0
            };
            let _ = e.print();
            return code;
        }
    };
    human::set_json(cli.json);
    // The host's threads (a session's proxy, the Hello's bridge) allocate little: one arena
    // keeps each from adding its own to the memory a session costs.
    relay_shim::heap::one_arena();
    if let Err(e) = crate::harden_process() {
        human::print_error(&format!("cannot harden the process (prctl/setrlimit): {e}"));
        return ExitCode::Internal.code();
    }
    match cli.command {
        Command::Completions { shell } => return stdout_checked(super::docs::completions(shell)),
        Command::Man { out_dir } => return stdout_checked(super::docs::man(out_dir.as_deref())),
        Command::Demo => return stdout_checked(demo::run(cli.json)),
        _ => {}
    }
    let host = match Host::locate(cli.config_dir, cli.state_dir) {
        Ok(h) => h,
        Err(e) => {
            human::print_error(&e.to_string());
            return if e.kind() == std::io::ErrorKind::InvalidInput {
                ExitCode::Usage.code()
            } else {
                ExitCode::Internal.code()
            };
        }
    };
    let code = run(&host, cli.command, cli.json);
    stdout_checked(code)
}

/// `code`, or 70 when the command's report could not be written to stdout (a closed pipe) and
/// the command would have exited 0; the failure is said on stderr (when that is open).
fn stdout_checked(code: i32) -> i32 {
    match human::stdout_error() {
        Some(e) => {
            human::print_error(&format!("cannot write to stdout: {e}"));
            if code == 0 {
                ExitCode::Internal.code()
            } else {
                code
            }
        }
        None => code,
    }
}

fn run(host: &Host, command: Command, json: bool) -> i32 {
    match command {
        Command::Launch { request } => cmd::launch_file(host, &request),
        Command::Run(a) => cmd::run(host, a),
        Command::Status => status::print(host, json),
        Command::Ps => crate::cli::ps::print(host, json),
        Command::Stop { id, all, now } => {
            crate::launch::session::stop::stop(host, id.as_deref(), all, now, json)
        }
        Command::Templates { toml } => {
            use super::templates_cmd::{print, Format};
            let format = (toml.then_some(Format::Toml)).or(json.then_some(Format::Json));
            print(host, format)
        }
        Command::Token { action } => match action {
            TokenCommand::Import { file } => cmd::token_import(host, file.as_deref(), json),
            TokenCommand::Check { online, template } => {
                cmd::token_check(host, json, online.then_some(template.as_str()))
            }
        },
        Command::Audit(a) => log(host, AUDIT_FILE, json, a),
        Command::Events(a) => log(host, EVENTS_FILE, json, a),
        Command::Gc { keep_days } => cmd::gc(host, keep_days, json),
        Command::Demo | Command::Completions { .. } | Command::Man { .. } => {
            unreachable!("handled before the folders are located")
        }
    }
}

fn log(host: &Host, name: &str, json: bool, a: LogArgs) -> i32 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let since = match a.since.as_deref().map(|s| parse_since(s, now)).transpose() {
        Ok(s) => s,
        Err(e) => {
            human::print_error(&e.to_string());
            return ExitCode::Usage.code();
        }
    };
    let query = Query {
        since,
        session: a.session,
        follow: a.follow,
    };
    cmd::print_log(host, name, json, &query)
}
