//! The command line, as clap definitions: the one source of `--help`, the completions and the
//! man page.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const AFTER_HELP: &str = "\
Exit codes: the session's own; 64 invalid_spec or usage, 71 spawn_failed, 78 sandbox_unavailable
or an unusable configuration, 70 internal error (demo: 1 when a check failed).
Folders: --config-dir, else $RELAY_CONFIG_DIR, else $XDG_CONFIG_HOME/relay, else ~/.config/relay;
--state-dir, else $RELAY_STATE_DIR, else $XDG_STATE_HOME/relay, else ~/.local/state/relay.";

const RUN_EXAMPLES: &str = "\
Examples:
  relay-host run --project ~/src/app            Claude Code in ~/src/app, sandboxed, logged in
  relay-host run -- -p \"explain this repo\"      one prompt in the current folder (Claude's -p, after --)
  relay-host run -p ~/src/app -- --model opus   relay's -p is --project; Claude's arguments go after --
  relay-host run --continue                     the project's latest conversation, in the sandbox
  relay-host run --resume ID                    a conversation by its id (Claude printed it at its end)";

/// Launch sandboxed Claude Code sessions that start logged in, with a long-term token handed on
/// file descriptor 5.
#[derive(Debug, Parser)]
#[command(name = "relay-host", version, after_help = AFTER_HELP)]
pub(crate) struct Cli {
    /// The config folder (settings.json or settings.toml)
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) config_dir: Option<PathBuf>,
    /// The state folder (logs, session folders, the Claude config folder)
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) state_dir: Option<PathBuf>,
    /// Print JSON: reports on stdout, errors and refusals as one JSON line on stderr
    #[arg(long, global = true)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Launch one session from a JSON request (a file, or - for stdin)
    Launch {
        /// The request file, or - to read it from stdin (the session's stdin is then /dev/null)
        #[arg(value_name = "REQUEST")]
        request: PathBuf,
    },
    /// Launch a session in this terminal (default template claude-code)
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// Folders, settings, the token file's health, bwrap and relay-shim; exit 78 when one is
    /// not usable
    Status,
    /// List the running sessions: id, template, pid, start time, token mode, network, project (and a stand-in session's API use)
    #[command(visible_aliases = ["ls", "sessions"])]
    Ps,
    /// End a running session (its program, and a stand-in session's proxy with it), or every
    /// running session with --all: SIGTERM to the program, then SIGKILL to what is left after a
    /// 5 s grace period (--now: SIGKILL at once)
    Stop {
        /// The session id (relay-host ps lists them)
        #[arg(value_name = "ID", conflicts_with = "all")]
        id: Option<String>,
        /// Every running session of this state folder
        #[arg(long)]
        all: bool,
        /// Kill at once (SIGKILL), without the grace period
        #[arg(long)]
        now: bool,
    },
    /// Print the effective templates (built-in ones included) in the settings' format, to copy
    /// from
    Templates {
        /// Print TOML (settings.toml's format); --json prints JSON; else the settings file's
        #[arg(long)]
        toml: bool,
    },
    /// Store or check the token file
    Token {
        #[command(subcommand)]
        action: TokenCommand,
    },
    /// Print the audit log (times in RFC 3339, UTC)
    Audit(LogArgs),
    /// Print the event log
    Events(LogArgs),
    /// Remove the folders of ended sessions (kept ones once older than the retention)
    Gc {
        /// Keep a kept session's folder this many days after its session ended
        #[arg(long, value_name = "DAYS", default_value_t = crate::state::DEFAULT_RETENTION_DAYS)]
        keep_days: u64,
    },
    /// Show the main job on a throwaway config, with a generated token
    Demo,
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write one page per command into a folder
    Man {
        /// Write relay-host.1 and relay-host-COMMAND.1 pages into this folder
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

/// What `relay-host run` was given: its options, parsed once by clap and read by
/// [`cli::run`](crate::cli::run).
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub(crate) struct RunArgs {
    /// The template to launch
    #[arg(short, long, value_name = "ID", default_value = "claude-code")]
    pub(crate) template: String,
    /// The project folder (default: the current folder)
    #[arg(short, long, value_name = "DIR")]
    pub(crate) project: Option<PathBuf>,
    /// Run without the sandbox (a Claude session then gets no token)
    #[arg(long)]
    pub(crate) no_sandbox: bool,
    /// Keep the session folder (the session's /tmp) after the session ends; gc removes it after
    /// the retention. Not needed to resume a conversation
    #[arg(long)]
    pub(crate) keep: bool,
    /// Resume this Claude conversation, in the sandbox with the token (Claude's --resume)
    #[arg(short, long, value_name = "ID", conflicts_with = "continue_last")]
    pub(crate) resume: Option<String>,
    /// Continue the project's most recent Claude conversation (Claude's --continue)
    #[arg(short, long = "continue")]
    pub(crate) continue_last: bool,
    /// Arguments for the session's program, after --. With the token they are read as Claude Code
    /// reads them: a prompt with or without -p, options that change Claude only inside the
    /// sandbox (--allowedTools Bash Edit, --add-dir, --model, --append-system-prompt, --version,
    /// ...); options that load settings, plugins, servers or agents, or reach elsewhere, and
    /// subcommands (but auth status) are refused, naming the option and why
    #[arg(last = true, value_name = "ARGS")]
    pub(crate) args: Vec<String>,
}

/// `relay-host token ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum TokenCommand {
    /// Store a token from stdin: the output of `claude setup-token`, or the token alone (not
    /// echoed on a terminal); sets claude_token_file when it is empty
    Import {
        /// Write the token here instead of the claude_token_file path (default
        /// ~/.config/claude-ltt/token)
        #[arg(long, value_name = "PATH")]
        file: Option<PathBuf>,
    },
    /// The token file's path, mode, owner, link count, size, shape and age; exit 78 when it does
    /// not read as a token; --online also asks the API whether it accepts the token
    #[command(after_help = TOKEN_CHECK_HELP)]
    Check {
        /// Make one authenticated request to the template's API host (through relay-stand-in,
        /// verified as stand-in mode verifies it) and say whether it accepts the token
        #[arg(long)]
        online: bool,
        /// The template whose API host --online asks (its https:// api_base_url, else
        /// api.anthropic.com)
        #[arg(
            short,
            long,
            value_name = "ID",
            default_value = "claude-code",
            requires = "online"
        )]
        template: String,
    },
}

const TOKEN_CHECK_HELP: &str = "\
--online sends exactly one request: GET /api/claude_code/policy_limits (what Claude Code fetches
at each start) with the token and Claude Code's anthropic-beta header, over TLS verified against
the system trust store and upstream_ca_file. The token is handed to relay-stand-in on a pipe and
is never printed. Without --online nothing is sent: in pipe mode relay cannot see the API's
answers to a session, so --online is how to learn whether the API still accepts the token.
Exit codes: 0 accepted, 77 refused (401/403: make one with `claude setup-token`, then
`relay-host token import`), 76 the API host's TLS failed, 69 unreachable or no verdict,
78 the token file or the trust store is not usable, 71 relay-stand-in could not start.";

/// `audit` and `events` options.
#[derive(Debug, Args)]
pub(crate) struct LogArgs {
    /// Only rows from this time on: 2026-12-02T19:00:00Z, 2026-12-02, or an age (30m, 2h, 7d)
    #[arg(long, value_name = "TIME")]
    pub(crate) since: Option<String>,
    /// Only rows of this session
    #[arg(long, value_name = "ID")]
    pub(crate) session: Option<String>,
    /// Keep printing rows as they are appended
    #[arg(short, long)]
    pub(crate) follow: bool,
}

#[cfg(test)]
mod tests {
    /// `RunArgs`'s example.
    #[test]
    fn run_args_doc_example() {
        let args = super::RunArgs {
            template: "shell".into(),
            project: None,
            no_sandbox: false,
            keep: false,
            resume: None,
            continue_last: false,
            args: vec![],
        };
        assert_eq!(args.template, "shell");
    }
}
