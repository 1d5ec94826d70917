//! A tokio launcher: `tokio TOKEN_FILE PROGRAM [ARGS...]` runs PROGRAM through
//! `tokio::process::Command` with the token from TOKEN_FILE on fd 5 and
//! `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5`, and exits with its status.
//!
//! `TokenPipe::attach` prepares a `std::process::Command` without spawning it; tokio then spawns
//! it with the same guarantees as `TokenPipe::spawn`: the child holds fds 0, 1, 2 and 5 only,
//! whatever this process (and its runtime) has open. Keep the guard until the spawn returns, then
//! drop it, which closes this process's read end.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{exit, Command};

use relay_token::{read_claude_token, TokenPipe};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args_os().skip(1);
    let (Some(path), Some(program)) = (args.next(), args.next()) else {
        eprintln!("usage: tokio TOKEN_FILE PROGRAM [ARGS...]");
        exit(64);
    };
    let run = async {
        let token = read_claude_token(Path::new(&path))?;
        let pipe = TokenPipe::new(&token)?;
        drop(token); // wiped; the bytes now live only in the pipe
        let mut cmd = Command::new(&program);
        cmd.args(args);
        // fd 5 + the variable, together; inherited credentials that would outrank them dropped.
        let guard = pipe.attach(&mut cmd)?;
        let child = tokio::process::Command::from(cmd).spawn();
        drop(guard); // spawned (or failed): close the read end here
        Ok::<_, Box<dyn std::error::Error>>(child?.wait().await?)
    };
    match run.await {
        Ok(status) => exit(
            status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        ),
        Err(e) => {
            eprintln!("tokio: {e}");
            exit(1);
        }
    }
}
