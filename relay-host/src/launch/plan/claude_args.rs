//! A token launch's `extra_args`, parsed once with Claude Code's own grammar, then checked.
//!
//! The grammar is Claude Code 2.1.332's (commander's): an option takes nothing, one value (the
//! next argument, whatever it starts with, or `--opt=value`), an optional value (the next
//! argument unless it starts with `-`) or one value or more (every following argument up to
//! one starting with `-`: `--allowedTools Bash Write Edit`); `--` ends the options; what is
//! left is the prompt, for the terminal UI or, after `-p`/`--print`, for print mode. Each
//! option is classified in [`crate::launch::plan::claude_flags`]: allowed with its value checked, or refused
//! with the reason the refusal prints.
//!
//! Claude Code's command line also names subcommands (`mcp add-json`, `plugin install`,
//! `install`, hidden ones such as `edit-hook`) which write its configuration with the token in
//! hand; a later session would obey what they wrote. Every subcommand is refused but the
//! read-only `auth status` (alone, `--json` or `--text`).
//!
//! A prompt of one word runs as a prompt, never as a subcommand. Measured with the pinned CLI
//! (scratch `HOME`, a loopback stand-in for the API): with `-p`/`--print` given as an option,
//! Claude Code runs no subcommand, so `claude -p mcp`, `claude -p doctor`,
//! `claude -p -- mcp` and `claude -p --allowedTools Bash Write -- doctor` each send the word to
//! the API as the user's prompt; relay passes print mode's prompt as it is. Without `-p`, the
//! first word that is not an option or an option's value is looked up as a subcommand, `--` or
//! not: `claude mcp`, `claude -- mcp` and `claude --allowedTools Bash Write -- doctor` run the
//! subcommand, while `claude " mcp"` opens the terminal UI and sends `" mcp"`, since no command
//! name holds a space. So a word that names a listed subcommand is refused as one (that is what
//! Claude Code would run), and relay hands any other one-word UI prompt to Claude with one
//! space before it ([`for_claude`]): a hidden or later command of that name can never run.
//!
//! Claude Code also reads words of its command line beside its grammar (measured with the
//! pinned CLI, each in `tests/tests/e2e/claude_args.rs`): the first word, before it looks for `-p`
//! (`claude remote-control -p` starts Remote Control, `claude self-hosted-runner -p` its
//! runner), so a one-word prompt written first gets the space in print mode too; `--bare`,
//! `--handle-uri` (a deep link, which opens a terminal) and `--tmux` with `-w` (a worktree in
//! tmux) wherever they stand, even as another option's value (`-p -n --bare hi` runs bare), so
//! an option's value or a prompt written as an option is refused; and `import` after options,
//! followed by `codex`, `gemini` or `cursor`, as its `import` command, even as a value
//! (`-p --model import codex`), refused as a subcommand.

use std::fmt;

use crate::launch::plan::claude_flags::{self, Takes, Value, Verdict};

/// Why one argument is refused.
///
/// ```
/// use relay_host::launch::plan::{claude_flags::Value, request::ArgRule};
/// let rule = ArgRule::BadValue { flag: "--model", takes: Value::Model };
/// assert_eq!(rule.to_string(), "--model takes a model name");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgRule {
    /// An option relay refuses, and why.
    Refused {
        /// The option as written (without `=value`).
        flag: &'static str,
        /// The reason, from `claude_flags::FLAGS`.
        why: &'static str,
    },
    /// Not an option of the pinned Claude Code.
    Unknown,
    /// An option's value missing or not of the form it takes.
    BadValue {
        /// The option.
        flag: &'static str,
        /// The form its value must have.
        takes: Value,
    },
    /// An option that takes nothing, written `--flag=value`.
    NoValue,
    /// Short options run together or with a value attached (`-pc`, `-nname`).
    Cluster,
    /// A Claude Code subcommand (the first word of the terminal UI's command line).
    Subcommand,
    /// A second prompt.
    SecondPrompt,
    /// An option's value or a prompt written as an option (`-n --bare`, `-- --handle-uri`).
    OptionAsValue,
}

impl fmt::Display for ArgRule {
    /// The rule in words, as the refusal says it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgRule::Refused { flag, why } => write!(f, "{flag} is refused: it {why}"),
            ArgRule::Unknown => f.write_str(
                "not an option of Claude Code 2.1.332 that relay knows, so a launch that carries \
                 the token may not pass it",
            ),
            ArgRule::BadValue { flag, takes } => write!(f, "{flag} takes {}", takes.words()),
            ArgRule::NoValue => f.write_str("this option takes no value"),
            ArgRule::Cluster => f.write_str(
                "write each short option on its own, and its value as the next argument",
            ),
            ArgRule::Subcommand => f.write_str(
                "a Claude Code subcommand, which a launch that carries the token may not run \
                 (only auth status may); to send the word as a prompt, write -p before it",
            ),
            ArgRule::SecondPrompt => f.write_str(
                "a second prompt: Claude Code takes one, so quote a prompt of several words as \
                 one argument",
            ),
            ArgRule::OptionAsValue => f.write_str(
                "written as an option: Claude Code reads some options wherever they stand \
                 (--bare, --handle-uri, --tmux with -w), even as another option's value or a \
                 prompt, so a launch that carries the token may not pass one there",
            ),
        }
    }
}

/// A launch's arguments as Claude Code reads them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Parsed {
    /// `-p`/`--print` given as an option (not as another option's value): print mode.
    pub print: bool,
    /// The prompt's index, if there is one.
    pub prompt: Option<usize>,
    /// The arguments are `auth status` (with `--json` or `--text`).
    pub auth_status: bool,
    /// What the first `-r`/`--resume ID` or `-c`/`--continue` resumes: one conversation, or
    /// all of them (`--continue`, which picks the newest).
    pub resumes: Option<Option<String>>,
}

/// Parses a token launch's `extra_args` with Claude Code's grammar and checks each option and
/// value; the error is the index of the refused argument and why.
pub(crate) fn parse(args: &[String]) -> Result<Parsed, (usize, ArgRule)> {
    if is_auth_status(args) {
        return Ok(Parsed {
            auth_status: true,
            ..Parsed::default()
        });
    }
    if let Some(at) = rewritten_to_import(args) {
        return Err((at, ArgRule::Subcommand));
    }
    let mut parsed = Parsed::default();
    let mut operands = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            if let Some(at) = (i + 1..args.len()).find(|&j| option_shaped(&args[j])) {
                return Err((at, ArgRule::OptionAsValue));
            }
            operands.extend(i + 1..args.len());
            break;
        }
        if !is_option(a) {
            // What follows a subcommand is its own: refused at its name, unread.
            if operands.is_empty() && !parsed.print && claude_flags::SUBCOMMANDS.contains(&a) {
                return Err((i, ArgRule::Subcommand));
            }
            operands.push(i);
            i += 1;
            continue;
        }
        i = option(args, i, &mut parsed)?;
    }
    prompt(args, &operands, &mut parsed)?;
    Ok(parsed)
}

/// [`parse`], keeping only the verdict.
pub(crate) fn check(args: &[String]) -> Result<(), (usize, ArgRule)> {
    parse(args).map(|_| ())
}

/// True when checked arguments name `--add-dir`. Claude Code 2.1.332 loads the agents, commands
/// and skills of an added folder's `.claude/` unless the launch reads the user settings only
/// (`--setting-sources user`), so a token launch that adds a folder always reads only those,
/// also in a project the operator trusts (measured: with it, nothing of the folder loads).
pub(crate) fn adds_dirs(args: &[String]) -> bool {
    // A checked command line holds no option-shaped value or prompt, so a word that is the
    // option is the option.
    args.iter()
        .any(|a| a == "--add-dir" || a.starts_with("--add-dir="))
}

/// The arguments as relay hands them to Claude Code: as given, except that a prompt of one word
/// (no whitespace) for the terminal UI, or written first, gets one space before it, so Claude
/// Code never looks it up as a subcommand (see the module's notes). Arguments [`parse`]
/// refuses pass unchanged.
pub(crate) fn for_claude(args: &[String]) -> Vec<String> {
    let mut out = args.to_vec();
    if let Ok(Parsed {
        print,
        prompt: Some(i),
        ..
    }) = parse(args)
    {
        if print && i > 0 {
            return out;
        }
        let word = &out[i];
        if !word.is_empty() && !word.contains(char::is_whitespace) {
            out[i] = format!(" {word}");
        }
    }
    out
}

/// A word written as an option: `-` and more, with no whitespace before any `=` (`--bare`,
/// `-w`, `--settings={}`; not `-be terse-`). Claude Code looks some of these up anywhere in
/// its command line, before its grammar: `--bare` and `--tmux` with `-w` before `--`,
/// `--handle-uri`, `--ignore-persisted-trust` and `--agent-teams` anywhere.
fn option_shaped(a: &str) -> bool {
    let name = a.split_once('=').map_or(a, |(n, _)| n);
    is_option(a) && !name.contains(char::is_whitespace)
}

/// Where Claude Code rewrites its command line into its `import` command: the first `import`,
/// after nothing or after options and their values (no `--`, help or version), followed by
/// `codex`, `gemini`, `cursor`, `--dry-run` or `--yes` only (something, after options). It
/// does this wherever `import` stands, an option's value too (`-p --model import codex`).
fn rewritten_to_import(args: &[String]) -> Option<usize> {
    let at = args.iter().position(|a| a == "import")?;
    let (before, after) = (&args[..at], &args[at + 1..]);
    let stops = ["--", "-h", "--help", "-v", "-V", "--version"];
    let options = before
        .iter()
        .enumerate()
        .all(|(i, a)| a.starts_with('-') || i > 0 && before[i - 1].starts_with('-'));
    let words = ["codex", "gemini", "cursor", "--dry-run", "--yes"];
    let rest = after
        .iter()
        .all(|a| words.contains(&a.as_str()) || a.starts_with("--yes="));
    let rewrites = !before.iter().any(|a| stops.contains(&a.as_str()))
        && (before.is_empty() || !after.is_empty())
        && options
        && rest;
    rewrites.then_some(at)
}

/// Claude Code's test for an option (commander's): more than `-`, starting with `-`.
fn is_option(a: &str) -> bool {
    a.len() > 1 && a.starts_with('-')
}

/// Reads the option at `at` and its values, checked; returns the index after them.
fn option(args: &[String], at: usize, parsed: &mut Parsed) -> Result<usize, (usize, ArgRule)> {
    let a = args[at].as_str();
    let (name, inline) = match a.split_once('=') {
        Some((n, v)) if n.starts_with("--") => (n, Some(v)),
        _ => (a, None),
    };
    let Some(flag) = claude_flags::find(name) else {
        let cluster = !a.starts_with("--") && a.len() > 2;
        return Err((
            at,
            if cluster {
                ArgRule::Cluster
            } else {
                ArgRule::Unknown
            },
        ));
    };
    let spelled = flag.names.iter().copied().find(|n| *n == name);
    let spelled = spelled.unwrap_or(flag.names[0]);
    if let Verdict::Refused(why) = flag.verdict {
        let rule = ArgRule::Refused { flag: spelled, why };
        return Err((at, rule));
    }
    parsed.print |= flag.names.contains(&"--print");
    if parsed.resumes.is_none() {
        parsed.resumes = match flag.names {
            n if n.contains(&"--continue") => Some(None),
            n if n.contains(&"--resume") => {
                let id = inline.or_else(|| args.get(at + 1).map(String::as_str));
                Some(id.map(String::from))
            }
            _ => None,
        };
    }
    let bad = |i: usize, takes: Value| {
        (
            i,
            ArgRule::BadValue {
                flag: spelled,
                takes,
            },
        )
    };
    let fits = |i: usize, v: Value| match args.get(i) {
        Some(w) if v == Value::Text && option_shaped(w) => Err((i, ArgRule::OptionAsValue)),
        Some(w) if v.fits(w) => Ok(()),
        _ => Err(bad(i, v)),
    };
    match (flag.takes, inline) {
        (Takes::Nothing, None) => Ok(at + 1),
        (Takes::Nothing, Some(_)) => Err((at, ArgRule::NoValue)),
        (Takes::One(v) | Takes::Optional(v) | Takes::Many(v), Some(w)) => {
            if v.fits(w) {
                Ok(at + 1)
            } else {
                Err(bad(at, v))
            }
        }
        (Takes::One(v) | Takes::Many(v), None) if at + 1 >= args.len() => Err(bad(at, v)),
        (Takes::One(v), None) => fits(at + 1, v).map(|()| at + 2),
        (Takes::Optional(v), None) => match args.get(at + 1) {
            Some(w) if !is_option(w) => fits(at + 1, v).map(|()| at + 2),
            _ => Ok(at + 1),
        },
        (Takes::Many(v), None) => {
            // The first value is taken whatever it starts with, the rest up to an option.
            let mut i = at + 1;
            fits(i, v)?;
            while args.get(i + 1).is_some_and(|w| !is_option(w)) {
                i += 1;
                fits(i, v)?;
            }
            Ok(i + 1)
        }
    }
}

/// The words left once the options are read: none, or one prompt. In the terminal UI the
/// first is looked up as a subcommand, so a listed one is refused as one.
fn prompt(
    args: &[String],
    operands: &[usize],
    parsed: &mut Parsed,
) -> Result<(), (usize, ArgRule)> {
    let Some(&first) = operands.first() else {
        return Ok(());
    };
    if !parsed.print && claude_flags::SUBCOMMANDS.contains(&args[first].as_str()) {
        return Err((first, ArgRule::Subcommand));
    }
    if let Some(&second) = operands.get(1) {
        return Err((second, ArgRule::SecondPrompt));
    }
    parsed.prompt = Some(first);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    fn run(a: &[&str]) -> Result<(), (usize, ArgRule)> {
        check(&args(a))
    }

    /// Claude Code's own ways of writing a command line (each refused before the grammar).
    #[test]
    fn claudes_own_command_lines_pass() {
        for ok in [
            &["explain this repo"][..],
            &["-p", "hi"],
            &["-p", "mcp"],
            &["--print", "--", "doctor"],
            &["hi"],
            &["--allowedTools", "Bash", "Write", "Edit"],
            &["--allowed-tools", "Bash(git *)", "Edit", "-p", "fix it"],
            &[
                "--disallowedTools",
                "Bash",
                "WebFetch",
                "--",
                "explain this repo",
            ],
            &["--disallowed-tools=Bash"],
            &["--version"],
            &["-v"],
            &["--help"],
            &["-h"],
            &["--append-system-prompt", "Be brief.", "explain this repo"],
            &["--system-prompt", "-be terse-", "-p", "go on"],
            &["--add-dir", "/srv/docs", "../lib", "--model", "opus"],
            &["-n", "review", "--effort", "high", "--verbose"],
            &["--prompt-suggestions", "--brief"],
            &["--prompt-suggestions", "off", "hi"],
            &["--tools", "Read", "Grep", "--safe-mode", "--restricted"],
            &["-p", "--max-budget-usd", "0.5", "--json-schema", "{}", "go"],
        ] {
            assert_eq!(run(ok), Ok(()), "{ok:?}");
        }
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
    fn the_grammar_finds_the_prompt_and_print_mode() {
        let p = |a: &[&str]| parse(&args(a)).map(|p| (p.print, p.prompt));
        // A variadic option takes every word up to the next option: no prompt here.
        assert_eq!(
            p(&["--allowedTools", "Bash", "explain this"]),
            Ok((false, None))
        );
        assert_eq!(
            p(&["--allowedTools", "Bash", "--", "explain this"]),
            Ok((false, Some(3)))
        );
        assert_eq!(
            p(&["--allowedTools=Bash", "explain this"]),
            Ok((false, Some(1)))
        );
        // `-p` as another option's value is not print mode; a value written as an option is
        // refused (Claude Code reads some, such as `--bare`, wherever they stand).
        assert_eq!(
            p(&["--append-system-prompt", "-p x", "hi"]),
            Ok((false, Some(2)))
        );
        assert_eq!(
            p(&["--append-system-prompt", "-p", "hi"]),
            Err((1, ArgRule::OptionAsValue))
        );
        assert_eq!(p(&["hi", "--print"]), Ok((true, Some(0))));
        // An optional value is not taken when the next word is an option.
        assert_eq!(
            p(&["--prompt-suggestions", "-p", "yes"]),
            Ok((true, Some(2)))
        );
        assert_eq!(p(&["auth", "status", "--json"]), Ok((false, None)));
    }

    #[test]
    fn parse_finds_what_is_resumed() {
        let r = |a: &[&str]| parse(&args(a)).map(|p| p.resumes);
        assert_eq!(
            r(&["-r", "s-1", "-p", "go on"]),
            Ok(Some(Some("s-1".into())))
        );
        assert_eq!(r(&["--resume=x1"]), Ok(Some(Some("x1".into()))));
        assert_eq!(r(&["--continue", "--model", "opus"]), Ok(Some(None)));
        assert_eq!(r(&["-c", "-r", "x2"]), Ok(Some(None)));
        assert_eq!(r(&["--model", "opus", "hi"]), Ok(None));
        assert_eq!(r(&["auth", "status"]), Ok(None));
    }

    #[test]
    fn parse_finds_print_mode_and_the_prompt_and_refuses_a_subcommand() {
        let p = parse(&args(&["--allowedTools", "Bash", "Write", "-p", "hi"])).unwrap();
        assert_eq!((p.print, p.prompt), (true, Some(4)));
        assert_eq!(
            parse(&args(&["mcp", "add-json", "x", "{}"])),
            Err((0, ArgRule::Subcommand))
        );
    }

    #[test]
    fn check_passes_a_print_a_ui_prompt_and_auth_status_and_refuses_a_cluster() {
        assert!(check(&args(&["-p", "--output-format", "json", "fix the test"])).is_ok());
        assert!(check(&args(&["explain this repo"])).is_ok());
        assert!(check(&args(&["auth", "status", "--json"])).is_ok());
        assert_eq!(check(&args(&["-pc"])), Err((0, ArgRule::Cluster)));
    }

    #[test]
    fn an_added_folder_is_seen_as_an_option_only() {
        assert!(adds_dirs(&args(&["-p", "hi", "--add-dir", "/srv/docs"])));
        assert!(adds_dirs(&args(&["--add-dir=/srv/docs", "-p", "hi"])));
        assert!(!adds_dirs(&args(&["-p", "add a --add-dir flag"])));
    }

    #[test]
    fn a_one_word_ui_prompt_gets_a_space_and_nothing_else_changes() {
        for (given, handed) in [
            (&["mcp-ish"][..], &[" mcp-ish"][..]),
            (&["--verbose", "--", "hi"], &["--verbose", "--", " hi"]),
            (&["-p", "hi"], &["-p", "hi"]),
            (&["explain this repo"], &["explain this repo"]),
            (
                &["--allowedTools", "Bash", "Write"],
                &["--allowedTools", "Bash", "Write"],
            ),
            (&["auth", "status"], &["auth", "status"]),
            (&[""], &[""]),
            (&["mcp"], &["mcp"]),
            (&["rc", "-p"], &[" rc", "-p"]),
            (&["-p", "rc"], &["-p", "rc"]),
            (&["sync now", "-p"], &["sync now", "-p"]),
        ] {
            assert_eq!(for_claude(&args(given)), args(handed), "{given:?}");
        }
    }

    #[test]
    fn for_claude_spaces_a_one_word_ui_prompt_only() {
        let a = |a: &[&str]| args(a);
        assert_eq!(
            for_claude(&a(&["--verbose", "hi"])),
            a(&["--verbose", " hi"])
        );
        assert_eq!(for_claude(&a(&["-p", "hi"])), a(&["-p", "hi"]));
        assert_eq!(for_claude(&a(&["explain this"])), a(&["explain this"]));
    }

    #[test]
    fn subcommands_refused_flags_and_bad_values_are_refused_by_index() {
        use ArgRule::*;
        let refused = |flag| Refused {
            flag,
            why: match claude_flags::find(flag).unwrap().verdict {
                Verdict::Refused(why) => why,
                Verdict::Allowed => unreachable!("{flag} is allowed"),
            },
        };
        let bad = |flag, takes| BadValue { flag, takes };
        for (bad_args, want) in [
            (
                &["mcp", "add-json", "-s", "user", "x", "{}"][..],
                (0, Subcommand),
            ),
            (&["plugin", "install", "x"], (0, Subcommand)),
            (&["--verbose", "config", "x"], (2, SecondPrompt)),
            (&["--", "mcp"], (1, Subcommand)),
            (&["--verbose", "doctor"], (1, Subcommand)),
            (&["hello", "there"], (1, SecondPrompt)),
            (&["-p", "mcp", "add-json"], (2, SecondPrompt)),
            (&["--settings", "{}"], (0, refused("--settings"))),
            (&["--mcp-config=x"], (0, refused("--mcp-config"))),
            (
                &["--dangerously-skip-permissions"],
                (0, refused("--dangerously-skip-permissions")),
            ),
            (&["-d"], (0, refused("-d"))),
            (&["--agents", "{}"], (0, refused("--agents"))),
            (&["--no-such-flag"], (0, Unknown)),
            (&["-pc"], (0, Cluster)),
            (&["-nname"], (0, Cluster)),
            (
                &["--output-format", "yaml"],
                (
                    1,
                    bad(
                        "--output-format",
                        Value::OneOf(&["text", "json", "stream-json"]),
                    ),
                ),
            ),
            (&["--resume"], (0, bad("--resume", Value::SessionId))),
            (&["-r", "../x"], (1, bad("-r", Value::SessionId))),
            (
                &["--model", "--settings"],
                (1, bad("--model", Value::Model)),
            ),
            (
                &["--max-turns", "-1"],
                (1, bad("--max-turns", Value::Number)),
            ),
            (
                &["--allowedTools", "--settings"],
                (1, bad("--allowedTools", Value::Tools)),
            ),
            (&["--add-dir"], (0, bad("--add-dir", Value::Folder))),
            (&["--print=yes"], (0, NoValue)),
            (&["auth", "login"], (0, Subcommand)),
            (&["-p", "-n", "--bare", "hi"], (2, OptionAsValue)),
            (&["--json-schema", "--settings={}"], (1, OptionAsValue)),
            (&["-p", "--", "-w"], (2, OptionAsValue)),
            (&["import"], (0, Subcommand)),
            (
                &["--add-dir", "import", "cursor", "--dry-run"],
                (1, Subcommand),
            ),
            (&["-p", "--model", "import", "codex"], (2, Subcommand)),
            (&["auth", "status", "--json", "x"], (0, Subcommand)),
        ] {
            assert_eq!(run(bad_args), Err(want), "{bad_args:?}");
        }
    }

    #[test]
    fn a_refusal_names_the_flag_and_why() {
        let words = |a: &[&str]| run(a).unwrap_err().1.to_string();
        assert_eq!(
            words(&["--permission-mode", "bypassPermissions"]),
            "--permission-mode takes one of acceptEdits, auto, manual, dontAsk, plan"
        );
        assert_eq!(
            words(&["--plugin-dir=d"]),
            "--plugin-dir is refused: it loads a plugin, whose hooks, MCP servers and commands \
             run beside the token"
        );
        assert_eq!(
            words(&["mcp", "list"]),
            "a Claude Code subcommand, which a launch that carries the token may not run (only \
             auth status may); to send the word as a prompt, write -p before it"
        );
    }

    #[test]
    fn a_refused_settings_option_is_said_with_its_reason() {
        let (_, rule) = check(&args(&["--settings={}"])).unwrap_err();
        assert_eq!(
            rule.to_string(),
            "--settings is refused: it loads settings (a base URL, hooks, apiKeyHelper) from a \
             file or JSON"
        );
    }
}
