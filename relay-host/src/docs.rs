//! Shell completions and man pages, generated at run time from the clap definitions (no build
//! script): `relay-host completions SHELL`, `relay-host man [--out-dir DIR]`.

use std::path::Path;

use clap::CommandFactory;

use crate::args::Cli;

/// Prints the completion script for `shell`.
pub fn completions(shell: clap_complete::Shell) -> i32 {
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "relay-host", &mut std::io::stdout());
    0
}

/// Prints `relay-host.1`, or writes it and one page per command into `out_dir`.
pub fn man(out_dir: Option<&Path>) -> i32 {
    let cmd = Cli::command();
    let result = match out_dir {
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout()),
        Some(dir) => std::fs::create_dir_all(dir)
            .and_then(|()| clap_mangen::generate_to(cmd, dir))
            .map(|()| println!("man pages written to {}", dir.display())),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            relay_token::host::human::print_error(&format!("man: {e}"));
            relay_token::host::cli::EXIT_INTERNAL
        }
    }
}
