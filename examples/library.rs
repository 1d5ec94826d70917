use relay_token::{claude_token_path, read_claude_token, TokenPipe};
use std::process::Command;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = claude_token_path("~/.config/claude-ltt/token")?.ok_or("no token file")?;
    let token = read_claude_token(&path)?; // strict, read afresh; errors name the path only
    let pipe = TokenPipe::new(&token)?; // pipe2(O_CLOEXEC), every byte written, write end closed
    drop(token); // zeroized: the bytes now live only in the pipe

    // fd 5 + the variable; inherited credentials that would outrank them (ANTHROPIC_API_KEY,
    // CLAUDE_CODE_OAUTH_TOKEN, ...) are dropped, Claude's settings variables kept.
    let mut claude = Command::new("claude");
    claude.args(["auth", "status", "--json"]);
    let status = pipe.spawn(&mut claude)?.wait()?;
    std::process::exit(status.code().unwrap_or(1));
}
