//! `ltt`: start Claude Code logged in with a long-term token, handed over on fd 5.
//!
//! The operator's "007" launcher, rewritten on `relay-token`. It used to be a shell script:
//!
//! ```sh
//! exec 5<"$TOKEN_FILE"
//! CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5 exec claude "$@"
//! ```
//!
//! This does the same job with the library's checks, a drop-in for the script. At each launch
//! it reads the token file (made by `claude setup-token`) strictly, as `relay-host` does: a
//! regular file with one link, private (no permission for group or others, owned by you or
//! root), at most 4096 bytes, printable ASCII once trimmed, not a JSON document. It writes the
//! bytes into a pipe, closes the write end, wipes its own copy, and runs `claude` with the read
//! end at fd 5, `CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5`, no other descriptor above 2, and
//! your environment as it is (Claude Code's settings variables such as
//! `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC` included) less the credentials that would outrank
//! the descriptor (`ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`, `CLAUDE_CODE_OAUTH_TOKEN`, ...)
//! and a parent Claude session's markers (`ChildEnv::drops_beside_token`). The token is never put in an environment, in
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
//! Options take `--opt VALUE` or `--opt=VALUE`. Install it as the `007` it replaces:
//!
//! ```sh
//! cargo install --locked --path examples --example ltt   # ~/.cargo/bin/ltt
//! ln -s ~/.cargo/bin/ltt ~/.local/bin/007
//! ```
//!
//! Exit status: claude's own (ltt is replaced by it); 64 usage; 78 the token file is unusable;
//! 127 PROGRAM not found; 126 PROGRAM could not be run; 71 an internal error.

use std::ffi::OsString;
use std::io::ErrorKind;
use std::process::Command;

use relay_token::{claude_token_path, read_private_claude_token, TokenPipe};

const USAGE: &str = "\
usage: ltt [--token-file PATH] [--claude PROGRAM] [--] [CLAUDE ARGS...]

Runs PROGRAM (default: $LTT_CLAUDE, else claude) logged in with the long-term token read from
PATH (default: ~/.config/claude-ltt/token; absolute or ~/...; private: chmod 600), handed over
on fd 5. ltt's options (--opt VALUE or --opt=VALUE) come first; the first other argument, or
everything after --, goes to PROGRAM.
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
        let text = arg.to_str().unwrap_or_default();
        let (name, inline) = match text.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(OsString::from(v))),
            _ => (text, None),
        };
        let slot = match name {
            "-h" | "--help" if inline.is_none() => {
                print!("{USAGE}");
                return 0;
            }
            "--token-file" => &mut token_file,
            "--claude" => &mut program,
            "--" if inline.is_none() => break,
            _ => {
                claude_args.push(arg);
                break;
            }
        };
        match inline.or_else(|| args.next()) {
            Some(value) => *slot = value,
            None => return usage(&format!("{name} needs a value")),
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
    // Read afresh at each launch, private or refused (relay-host's rule). The error names the
    // path, never a byte of the file.
    let token = match read_private_claude_token(&path) {
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
    // Places the pipe at fd 5 and sets the variable together, drops the inherited credentials
    // that would outrank it (the rest of the environment passes, as from the script), marks
    // every other descriptor above 2 close-on-exec, and replaces this process with claude. It
    // returns only on failure.
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
