//! `ltt`: start Claude Code logged in with a long-term token, handed over on fd 5.
//!
//! The operator's "007" launcher, rewritten on `relay-token`. It used to be a shell script:
//!
//! ```sh
//! exec 5<"$TOKEN_FILE"
//! CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5 exec claude "$@"
//! ```
//!
//! This does the same job with the library's checks. At each launch it reads the token file
//! (made by `claude setup-token`) strictly: a regular file with one link, at most 4096 bytes,
//! printable ASCII once trimmed. It writes the bytes into a pipe, closes the write end, wipes its
//! own copy, and runs `claude` with the read end at fd 5,
//! `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5`, no other descriptor above 2, and an environment
//! without `CLAUDECODE`, `CLAUDE_CODE_*` or the `ANTHROPIC_API_KEY` / `ANTHROPIC_AUTH_TOKEN`
//! credentials that would outrank the descriptor. The token is never put in an environment, in
//! argv or in an error message. Like the script, ltt then *becomes* claude (`exec`): same pid, so
//! signals, the terminal and the exit status are claude's own, and nothing is left to supervise.
//!
//! The limit: claude, and every tool it runs, can read the token; handing it over is the point.
//! ltt runs claude unsandboxed, so they can also open the token file itself. To keep sessions
//! away from the file, run them in a sandbox (`relay-host`).
//!
//! ```text
//! ltt [--token-file PATH] [--claude PROGRAM] [--] [CLAUDE ARGS...]
//! ```
//!
//! Exit status: claude's own (ltt is replaced by it); 64 usage; 78 the token file is unusable;
//! 127 PROGRAM not found; 126 PROGRAM could not be run; 71 an internal error.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::ErrorKind;
use std::process::Command;

use relay_token::ChildEnv;
use relay_token::{claude_token_path, read_claude_token, TokenPipe};

const USAGE: &str = "\
usage: ltt [--token-file PATH] [--claude PROGRAM] [--] [CLAUDE ARGS...]

Runs PROGRAM (default: $LTT_CLAUDE, else claude) logged in with the long-term token read from
PATH (default: ~/.config/claude-ltt/token; absolute or ~/...), handed over on fd 5.
ltt's options come first; the first other argument, or everything after --, goes to PROGRAM.
";

fn main() {
    std::process::exit(run());
}

fn run() -> i32 {
    let mut token_file = OsString::from("~/.config/claude-ltt/token");
    let mut program = std::env::var_os("LTT_CLAUDE")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "claude".into());
    let mut args = std::env::args_os().skip(1);
    let mut claude_args = Vec::new();
    while let Some(arg) = args.next() {
        let slot = match arg.to_str() {
            Some("-h" | "--help") => {
                print!("{USAGE}");
                return 0;
            }
            Some("--token-file") => &mut token_file,
            Some("--claude") => &mut program,
            Some("--") => break,
            _ => {
                claude_args.push(arg);
                break;
            }
        };
        match args.next() {
            Some(value) => *slot = value,
            None => return usage(&format!("{} needs a value", arg.to_string_lossy())),
        }
    }
    claude_args.extend(args);

    // `~/` is expanded against $HOME, a relative path is refused, an absolute one cleaned.
    let path = match token_file.to_str().map(claude_token_path) {
        Some(Ok(Some(path))) => path,
        Some(Ok(None)) => return usage("--token-file needs a path"),
        Some(Err(e)) => return usage(&format!("--token-file {:?}: {}", e.value, e.reason)),
        None => return usage("--token-file: not valid UTF-8"),
    };
    // Read afresh at each launch. The error names the path, never a byte of the file.
    let token = match read_claude_token(&path) {
        Ok(token) => token,
        Err(e) => return fail(78, &e.to_string()),
    };
    let pipe = match TokenPipe::new(&token) {
        Ok(pipe) => pipe,
        Err(e) => return fail(71, &format!("token pipe: {e}")),
    };
    drop(token); // wiped: from here on the bytes live only in the pipe

    let mut cmd = Command::new(&program);
    cmd.args(&claude_args);
    ChildEnv::from_current(&BTreeMap::new(), true).apply(&mut cmd);
    // Places the pipe at fd 5 and sets the variable together, marks every other descriptor
    // above 2 close-on-exec, and replaces this process with claude. It returns only on failure.
    let e = pipe.exec(&mut cmd);
    let code = if e.kind() == ErrorKind::NotFound {
        127
    } else {
        126
    };
    fail(
        code,
        &format!("cannot run {}: {e}", program.to_string_lossy()),
    )
}

fn usage(message: &str) -> i32 {
    fail(64, &format!("{message} (see ltt --help)"))
}

fn fail(code: i32, message: &str) -> i32 {
    eprintln!("ltt: {message}");
    code
}
