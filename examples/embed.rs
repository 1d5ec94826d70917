//! The smallest correct embedding: `embed TOKEN_FILE PROGRAM [ARGS...]` runs PROGRAM with the
//! token from TOKEN_FILE on fd 5 and `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5`, and exits
//! with its status. PROGRAM, and whatever it runs, can read the token.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{exit, Command};

use relay_token::{read_claude_token, TokenPipe};

fn main() {
    let mut args = std::env::args_os().skip(1);
    let (Some(path), Some(program)) = (args.next(), args.next()) else {
        eprintln!("usage: embed TOKEN_FILE PROGRAM [ARGS...]");
        exit(64);
    };
    let run = || -> Result<_, Box<dyn std::error::Error>> {
        let token = read_claude_token(Path::new(&path))?; // errors name the path, not the bytes
        let pipe = TokenPipe::new(&token)?;
        drop(token); // wiped; the bytes now live only in the pipe
        let mut cmd = Command::new(&program);
        cmd.args(args);
        // fd 5 + the variable, together; the inherited credentials that would outrank them
        // (ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN, ...) dropped, the rest kept.
        Ok(pipe.spawn(&mut cmd)?.wait()?)
    };
    match run() {
        Ok(status) => exit(
            status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        ),
        Err(e) => {
            eprintln!("embed: {e}");
            exit(1);
        }
    }
}
