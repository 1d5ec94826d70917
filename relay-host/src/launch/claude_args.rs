//! A token launch's `extra_args`: an allow-list of Claude Code flags, never a subcommand.
//!
//! Claude Code's command line also names subcommands (`mcp add-json`, `plugin install`,
//! `config set`, `install`, `update`, and hidden ones such as `edit-hook`), which write its
//! configuration with the token in hand; a later session would obey what they wrote. So a
//! request that rides with the token passes only the flags listed here, each value checked, and
//! at most one prompt, after `-p`/`--print` (Claude Code runs the first word that is neither a
//! flag nor a flag's value as a subcommand). The one command a request may run is the
//! read-only `auth status` (with `--json` or `--text`): it prints the login state and writes
//! nothing. The list follows Claude Code 2.1.332's `--help`.

/// What a flag takes after it.
#[derive(Clone, Copy)]
enum Takes {
    /// Nothing.
    Nothing,
    /// One of these words.
    OneOf(&'static [&'static str]),
    /// A session id (`[A-Za-z0-9._-]`, 1 to 64, not starting with `.` or `-`).
    SessionId,
    /// A model name: letters, digits and `.`, `_`, `-`, `:`, `/`, `@`, `[`, `]`.
    Model,
    /// A count: 1 to 6 digits.
    Count,
    /// Tool names or rules (`Bash(git *),Edit`): printable, not starting with `-`.
    Tools,
}

/// The flags a token launch's request may pass, with what each takes.
const ALLOWED: &[(&[&str], Takes)] = &[
    (&["-p", "--print"], Takes::Nothing),
    (&["-c", "--continue"], Takes::Nothing),
    (&["--verbose"], Takes::Nothing),
    (&["--fork-session"], Takes::Nothing),
    (&["--include-partial-messages"], Takes::Nothing),
    (
        &["--output-format"],
        Takes::OneOf(&["text", "json", "stream-json"]),
    ),
    (&["--input-format"], Takes::OneOf(&["text", "stream-json"])),
    (
        &["--effort"],
        Takes::OneOf(&["low", "medium", "high", "xhigh", "max"]),
    ),
    (&["-r", "--resume"], Takes::SessionId),
    (&["--session-id"], Takes::SessionId),
    (&["--model", "--fallback-model"], Takes::Model),
    (&["--max-turns"], Takes::Count),
    (
        &["--permission-mode"],
        Takes::OneOf(&["acceptEdits", "auto", "manual", "dontAsk", "plan"]),
    ),
    (
        &[
            "--allowedTools",
            "--allowed-tools",
            "--disallowedTools",
            "--disallowed-tools",
        ],
        Takes::Tools,
    ),
];

/// Why one argument is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgRule {
    /// A flag that is not on the list.
    NotAllowed,
    /// A flag's value missing or not of the form it takes.
    BadValue,
    /// A flag that takes nothing, written `--flag=value`.
    NoValue,
    /// A word that is not a flag: a prompt is one argument, after `-p`/`--print`.
    Positional,
    /// A prompt shaped like a command name (one lowercase word), which Claude Code would run
    /// as a subcommand.
    CommandLike,
}

impl ArgRule {
    /// The rule in words, as the refusal says it.
    ///
    /// ```
    /// use relay_host::launch::claude_args::ArgRule;
    /// assert!(ArgRule::NotAllowed.words().starts_with("not a flag"));
    /// ```
    pub fn words(self) -> &'static str {
        match self {
            ArgRule::NotAllowed => {
                "not a flag a launch that carries the token may pass (allowed: -p, --print, -c, \
                 --continue, --verbose, --fork-session, --include-partial-messages, \
                 --output-format, --input-format, --effort, -r, --resume, --session-id, --model, \
                 --fallback-model, --max-turns, --permission-mode, --allowedTools, \
                 --disallowedTools)"
            }
            ArgRule::BadValue => "its value is missing or not one this flag takes",
            ArgRule::NoValue => "this flag takes no value",
            ArgRule::Positional => {
                "a launch that carries the token takes no subcommand and at most one prompt, \
                 after -p or --print"
            }
            ArgRule::CommandLike => {
                "a one-word lowercase prompt would run as a Claude Code subcommand; write the \
                 prompt in more than one word"
            }
        }
    }
}

/// Checks a token launch's `extra_args`; the error is the index of the refused argument and why.
///
/// ```
/// use relay_host::launch::claude_args::{check, ArgRule};
/// let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
/// assert!(check(&args(&["-p", "--output-format", "json", "fix the test"])).is_ok());
/// assert!(check(&args(&["auth", "status", "--json"])).is_ok());
/// assert_eq!(check(&args(&["mcp", "add-json", "x", "{}"])), Err((0, ArgRule::Positional)));
/// assert_eq!(check(&args(&["-p", "mcp"])), Err((1, ArgRule::CommandLike)));
/// assert_eq!(check(&args(&["--settings={}"])), Err((0, ArgRule::NotAllowed)));
/// ```
pub fn check(args: &[String]) -> Result<(), (usize, ArgRule)> {
    if is_auth_status(args) {
        return Ok(());
    }
    let (mut print, mut prompt) = (false, false);
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        // A prompt: one argument after `-p`/`--print`, never shaped like a command.
        if !a.starts_with('-') || a == "-" || a == "--" {
            if !print || prompt || a == "--" {
                return Err((i, ArgRule::Positional));
            }
            if command_like(a) {
                return Err((i, ArgRule::CommandLike));
            }
            prompt = true;
            i += 1;
            continue;
        }
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (a, None),
        };
        let Some(&(names, takes)) = ALLOWED.iter().find(|(n, _)| n.contains(&flag)) else {
            return Err((i, ArgRule::NotAllowed));
        };
        print |= names.contains(&"--print");
        let at = i;
        i += 1;
        let value = match (takes, inline) {
            (Takes::Nothing, None) => continue,
            (Takes::Nothing, Some(_)) => return Err((at, ArgRule::NoValue)),
            (_, Some(v)) => Some(v),
            (_, None) => {
                i += 1;
                args.get(at + 1).map(String::as_str)
            }
        };
        if !value.is_some_and(|v| value_ok(takes, v)) {
            return Err((at, ArgRule::BadValue));
        }
    }
    Ok(())
}

/// `auth status`, alone or with `--json` or `--text`: Claude Code's read-only login report.
fn is_auth_status(args: &[String]) -> bool {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    matches!(
        a.as_slice(),
        ["auth", "status"] | ["auth", "status", "--json" | "--text"]
    )
}

/// True for one word of lowercase letters, digits, `-` and `:`: the shape of every Claude Code
/// command name, listed or hidden, today's or a later version's.
fn command_like(a: &str) -> bool {
    a.starts_with(|c: char| c.is_ascii_lowercase())
        && a.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b':')
}

fn value_ok(takes: Takes, v: &str) -> bool {
    match takes {
        Takes::Nothing => false,
        Takes::OneOf(words) => words.contains(&v),
        Takes::SessionId => relay_shim::SessionId::parse(v).is_some(),
        Takes::Model => {
            (1..=200).contains(&v.len())
                && !v.starts_with('-')
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-:/@[]".contains(&b))
        }
        Takes::Count => (1..=6).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_digit()),
        Takes::Tools => {
            (1..=4096).contains(&v.len())
                && !v.starts_with('-')
                && v.bytes().all(|b| (b' '..=b'~').contains(&b))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(a: &[&str]) -> Result<(), (usize, ArgRule)> {
        check(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn allowed_flags_and_one_prompt_pass() {
        for ok in [
            &[][..],
            &["-p", "say hi"],
            &[
                "--print",
                "--output-format=stream-json",
                "--verbose",
                "Fix it",
            ],
            &[
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
            ],
            &["--resume", "s-1", "-p", "go on please"],
            &["-r", "s-1"],
            &["--model", "claude-opus-4-1[1m]", "--max-turns", "3", "-c"],
            &[
                "--effort",
                "high",
                "--fork-session",
                "--session-id",
                "abc-1",
            ],
            &["auth", "status"],
            &["auth", "status", "--text"],
            &[
                "-p",
                "Fix it",
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                "Bash(git *),Edit",
            ],
        ] {
            assert_eq!(run(ok), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn subcommands_unlisted_flags_and_bad_values_are_refused_by_index() {
        use ArgRule::*;
        for (bad, want) in [
            (
                &["mcp", "add-json", "-s", "user", "x", "{}"][..],
                (0, Positional),
            ),
            (&["plugin", "install", "x"], (0, Positional)),
            (&["-p", "mcp"], (1, CommandLike)),
            (&["-p", "edit-hook"], (1, CommandLike)),
            (&["-p", "--", "mcp"], (1, Positional)),
            (&["--verbose", "config"], (1, Positional)),
            (&["hello there"], (0, Positional)),
            (&["-p", "One", "two"], (2, Positional)),
            (&["--settings", "{}"], (0, NotAllowed)),
            (&["--mcp-config=x"], (0, NotAllowed)),
            (&["--add-dir", "/"], (0, NotAllowed)),
            (&["--dangerously-skip-permissions"], (0, NotAllowed)),
            (&["-pc"], (0, NotAllowed)),
            (&["--output-format", "yaml"], (0, BadValue)),
            (&["--resume"], (0, BadValue)),
            (&["--resume", "../x"], (0, BadValue)),
            (&["--model", "--settings"], (0, BadValue)),
            (&["--max-turns", "-1"], (0, BadValue)),
            (&["--permission-mode", "bypassPermissions"], (0, BadValue)),
            (&["--allowedTools", "--settings"], (0, BadValue)),
            (&["--print=yes"], (0, NoValue)),
            (&["auth", "login"], (0, Positional)),
            (&["auth", "status", "--json", "x"], (0, Positional)),
        ] {
            assert_eq!(run(bad), Err(want), "{bad:?}");
        }
    }
}
