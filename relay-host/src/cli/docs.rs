//! Shell completions and man pages, generated at run time from the clap definitions (no build
//! script): `relay-host completions SHELL`, `relay-host man [--out-dir DIR]`.

use std::path::Path;

use clap::CommandFactory;

use super::args::Cli;

/// Prints the completion script for `shell`.
pub(crate) fn completions(shell: clap_complete::Shell) -> i32 {
    let mut cmd = Cli::command();
    // Into memory first: `generate` panics on a failed write (a closed stdout).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "relay-host", &mut script);
    let _ = crate::human::write_out(format_args!("{}", String::from_utf8_lossy(&script)));
    0
}

/// Prints `relay-host.1`, or writes it and one page per command into `out_dir`.
pub(crate) fn man(out_dir: Option<&Path>) -> i32 {
    let cmd = Cli::command();
    let result = match out_dir {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd).render(&mut page).and_then(|()| {
                crate::human::write_out(format_args!("{}", String::from_utf8_lossy(&page)))
            })
        }
        Some(dir) => std::fs::create_dir_all(dir)
            .and_then(|()| clap_mangen::generate_to(cmd, dir))
            .and_then(|()| {
                crate::human::write_out(format_args!("man pages written to {}\n", dir.display()))
            }),
    };
    match result {
        Ok(()) => 0,
        // A closed stdout: said by the caller (`human::stdout_error`).
        Err(_) if crate::human::stdout_error().is_some() => {
            relay_shim::exit::ExitCode::Internal.code()
        }
        Err(e) => {
            crate::human::print_error(&format!("man: {e}"));
            relay_shim::exit::ExitCode::Internal.code()
        }
    }
}
