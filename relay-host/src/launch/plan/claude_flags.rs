//! Every option of Claude Code 2.1.332's command line, as its `--help` lists it, classified for
//! a launch that carries the token: allowed (its value checked) or refused with the reason the
//! refusal prints. What only changes how Claude behaves inside the sandbox passes; what loads
//! code or configuration, reaches beyond the sandbox or leaves the launch's control stays
//! refused. `claude_args` parses a launch's arguments with this grammar; a refusal's
//! [`ArgRule`](crate::launch::plan::request::ArgRule) names the form a value must have
//! ([`Value`]).

/// What an option takes after it, in Claude Code's grammar (commander's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Takes {
    /// Nothing (`--verbose`).
    Nothing,
    /// One value (`<model>`): the next argument, whatever it starts with, or `--opt=value`.
    One(Value),
    /// An optional value (`[value]`): the next argument unless it starts with `-`.
    Optional(Value),
    /// One value or more (`<tools...>`): every following argument up to one starting with `-`.
    Many(Value),
}

/// The form a value must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// One of these words.
    OneOf(&'static [&'static str]),
    /// A session id (`[A-Za-z0-9._-]`, 1 to 64, not starting with `.` or `-`).
    SessionId,
    /// A model name: letters, digits and `.`, `_`, `-`, `:`, `/`, `@`, `[`, `]`.
    Model,
    /// A count or an amount: 1 to 12 digits and `.`.
    Number,
    /// Tool names or rules (`Bash(git *),Edit`): printable, not starting with `-`.
    Tools,
    /// A folder path, not starting with `-`: the sandbox decides what Claude sees there.
    Folder,
    /// Any text (a prompt, a name, a JSON schema): it only reaches the model.
    Text,
    /// Anything: the option is refused before its value counts.
    Any,
}

impl Value {
    /// What the value must be, as a refusal says it.
    pub(crate) fn words(self) -> String {
        match self {
            Value::OneOf(w) => format!("one of {}", w.join(", ")),
            Value::SessionId => "a session id (1 to 64 of A-Z a-z 0-9 . _ -)".into(),
            Value::Model => "a model name".into(),
            Value::Number => "a number".into(),
            Value::Tools => "tool names or rules, not starting with -".into(),
            Value::Folder => "a folder, not starting with -".into(),
            Value::Text | Value::Any => "a value".into(),
        }
    }

    /// True when `v` has this form.
    pub(crate) fn fits(self, v: &str) -> bool {
        let printable = |v: &str| v.bytes().all(|b| (b' '..=b'~').contains(&b));
        match self {
            Value::OneOf(words) => words.contains(&v),
            Value::SessionId => relay_shim::SessionId::parse(v).is_some(),
            Value::Model => {
                (1..=200).contains(&v.len())
                    && !v.starts_with('-')
                    && v.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._-:/@[]".contains(&b))
            }
            Value::Number => {
                (1..=12).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            }
            Value::Tools => (1..=4096).contains(&v.len()) && !v.starts_with('-') && printable(v),
            Value::Folder => !v.is_empty() && !v.starts_with('-'),
            Value::Text | Value::Any => true,
        }
    }
}

/// Whether a launch that carries the token may pass an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It may (its values checked).
    Allowed,
    /// It may not, for this reason.
    Refused(&'static str),
}

/// One option: its names (long, alias, short), what it takes, and the verdict.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flag {
    /// Every spelling Claude Code accepts.
    pub names: &'static [&'static str],
    /// What follows it.
    pub takes: Takes,
    /// Allowed or refused, and why.
    pub verdict: Verdict,
}

use Takes::{Many, Nothing, One, Optional};
use Value::*;
use Verdict::{Allowed, Refused};

const fn ok(names: &'static [&'static str], takes: Takes) -> Flag {
    Flag {
        names,
        takes,
        verdict: Allowed,
    }
}

const fn no(names: &'static [&'static str], takes: Takes, why: &'static str) -> Flag {
    Flag {
        names,
        takes,
        verdict: Refused(why),
    }
}

const BOOL: &[&str] = &["true", "false", "1", "0", "yes", "no", "on", "off"];

/// The permission modes a request may choose: all but `bypassPermissions`.
const MODES: &[&str] = &["acceptEdits", "auto", "manual", "dontAsk", "plan"];

/// Every option of Claude Code 2.1.332's `--help` (and `--max-turns`, which it accepts
/// unlisted), in its order. A test compares it with the pinned CLI's `--help`.
pub(crate) const FLAGS: &[Flag] = &[
    ok(&["--add-dir"], Many(Folder)),
    no(&["--agent"], One(Any), "runs an agent definition from the settings or the project, which can carry hooks and MCP servers"),
    no(&["--agents"], One(Any), "defines agents from JSON or a file, and an agent can carry hooks and MCP servers"),
    no(&["--allow-dangerously-skip-permissions"], Nothing, "lets the session bypass every permission check: the operator's choice, not a request's"),
    ok(&["--allowedTools", "--allowed-tools"], Many(Tools)),
    ok(&["--append-system-prompt"], One(Text)),
    ok(&["--autocompact"], One(Model)),
    ok(&["--ax-screen-reader"], Nothing),
    no(&["--bg", "--background"], Nothing, "starts a background session that outlives the launch"),
    no(&["--bare"], Nothing, "reads no OAuth token, so the session would not log in with the relay's token"),
    no(&["--betas"], Many(Any), "adds beta headers for API-key users; a token launch logs in with OAuth"),
    ok(&["--brief"], Nothing),
    no(&["--chrome"], Nothing, "connects to Claude in Chrome, outside the sandbox"),
    no(&["--cloud"], Optional(Any), "creates or attaches a cloud session, elsewhere"),
    ok(&["-c", "--continue"], Nothing),
    no(&["--dangerously-skip-permissions"], Nothing, "bypasses every permission check: the operator's choice, not a request's"),
    no(&["-d", "--debug"], Optional(Any), "writes debug logs, which can hold request details, into the Claude config folder"),
    no(&["--debug-file"], One(Any), "writes debug logs to a path the request names"),
    no(&["--desktop"], Nothing, "opens the session in the Claude Desktop app, outside the sandbox"),
    ok(&["--disable-slash-commands"], Nothing),
    ok(&["--disallowedTools", "--disallowed-tools"], Many(Tools)),
    ok(&["--effort"], One(OneOf(&["low", "medium", "high", "xhigh", "max"]))),
    no(&["--environment"], One(Any), "creates a cloud session on another environment"),
    ok(&["--exclude-dynamic-system-prompt-sections"], Nothing),
    ok(&["--fallback-model"], One(Model)),
    no(&["--file"], Many(Any), "downloads files at startup"),
    ok(&["--fork-session"], Nothing),
    ok(&["--forward-subagent-text"], Nothing),
    no(&["--from-pr"], Optional(Any), "looks a pull request up on a code host"),
    ok(&["-h", "--help"], Nothing),
    no(&["--ide"], Nothing, "connects to an IDE outside the sandbox"),
    ok(&["--include-hook-events"], Nothing),
    ok(&["--include-partial-messages"], Nothing),
    ok(&["--input-format"], One(OneOf(&["text", "stream-json"]))),
    ok(&["--json-schema"], One(Text)),
    ok(&["--max-budget-usd"], One(Number)),
    ok(&["--max-turns"], One(Number)),
    no(&["--mcp-config"], Many(Any), "starts the MCP servers it names: programs or connections beside the token"),
    ok(&["--model"], One(Model)),
    ok(&["-n", "--name"], One(Text)),
    ok(&["--no-chrome"], Nothing),
    ok(&["--no-session-persistence"], Nothing),
    ok(&["--output-format"], One(OneOf(&["text", "json", "stream-json"]))),
    ok(&["--permission-mode"], One(OneOf(MODES))),
    ok(&["--permission-prompts"], One(OneOf(&["host", "none"]))),
    no(&["--plugin-dir"], One(Any), "loads a plugin, whose hooks, MCP servers and commands run beside the token"),
    no(&["--plugin-url"], One(Any), "downloads a plugin and loads it"),
    ok(&["-p", "--print"], Nothing),
    ok(&["--prompt-suggestions"], Optional(OneOf(BOOL))),
    no(&["--remote-control"], Optional(Any), "lets a client elsewhere drive the session"),
    no(&["--remote-control-session-name-prefix"], One(Any), "names Remote Control sessions, which a launch that carries the token does not start"),
    ok(&["--replay-user-messages"], Nothing),
    ok(&["--restricted"], Nothing),
    // `[value]` in Claude Code; a request names the session (relay reads it as the one resumed).
    ok(&["-r", "--resume"], One(SessionId)),
    ok(&["--safe-mode"], Nothing),
    ok(&["--session-id"], One(SessionId)),
    no(&["--setting-sources"], One(Any), "chooses which settings files load, which relay decides"),
    no(&["--settings"], One(Any), "loads settings (a base URL, hooks, apiKeyHelper) from a file or JSON"),
    ok(&["--strict-mcp-config"], Nothing),
    ok(&["--system-prompt"], One(Text)),
    ok(&["--system-prompt-snapshot"], One(OneOf(&["on", "off"]))),
    no(&["--teleport"], Optional(Any), "resumes a session from elsewhere"),
    no(&["--tmux"], Nothing, "starts tmux for a worktree, outside the launch's terminal"),
    ok(&["--tools"], Many(Tools)),
    ok(&["--verbose"], Nothing),
    ok(&["-v", "--version"], Nothing),
    no(&["-w", "--worktree"], Optional(Any), "makes a git worktree, running the repository's and the settings' worktree hooks"),
];

/// Claude Code's subcommands (`--help` lists them; `help` is commander's own), refused in a
/// launch that carries the token, except `auth status`.
pub(crate) const SUBCOMMANDS: &[&str] = &[
    "agents",
    "attach",
    "auth",
    "auto-mode",
    "doctor",
    "gateway",
    "help",
    "import",
    "install",
    "kill",
    "logs",
    "mcp",
    "plugin",
    "plugins",
    "purge",
    "respawn",
    "rm",
    "setup-token",
    "stop",
    "ultrareview",
    "update",
    "upgrade",
];

/// The option of that name (any of its spellings).
pub(crate) fn find(name: &str) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.names.contains(&name))
}

/// True when relay classifies `name`: an option (any spelling) or a subcommand of the pinned
/// Claude Code.
///
/// ```
/// use relay_host::launch::plan::claude_flags::classified;
/// assert!(classified("--disallowed-tools") && classified("mcp"));
/// assert!(!classified("--made-up"));
/// ```
pub fn classified(name: &str) -> bool {
    find(name).is_some() || SUBCOMMANDS.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_option_is_found_by_any_of_its_spellings() {
        assert_eq!(find("--allowed-tools").unwrap().names[0], "--allowedTools");
        assert!(matches!(
            find("--settings").unwrap().verdict,
            Verdict::Refused(_)
        ));
        assert!(find("--no-such-flag").is_none());
    }
}
