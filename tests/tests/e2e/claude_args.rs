//! A token launch's Claude Code arguments follow Claude Code's own grammar: every option of the
//! pinned CLI's `--help` is classified by relay; the command lines Claude Code's users write
//! (a prompt without `-p`, a one-word prompt, a space-separated tool list, `--version`) reach
//! the session; a refused option is refused naming it and why.

use std::path::Path;
use std::process::{Command, Stdio};

use relay_host::launch::plan::claude_flags;
use relay_tests::world::{World, SCRIPT_TIMEOUT};
use serde_json::Value;

/// The option names and aliases (`--allowedTools, --allowed-tools`, `-p, --print`) and the
/// command names (`plugin|plugins`) of a `--help` text: its `Options:` and `Commands:` lines
/// indented by two spaces, up to the column where the description starts.
fn help_names(help: &str) -> (Vec<String>, Vec<String>) {
    let (mut options, mut commands, mut section) = (Vec::new(), Vec::new(), "");
    for line in help.lines() {
        if !line.starts_with(' ') {
            section = line.trim_end_matches(':');
            continue;
        }
        if line.starts_with("   ") {
            continue;
        }
        let head = line.trim_start().split("  ").next().unwrap_or_default();
        match section {
            "Options" => options.extend(
                head.split([' ', ','])
                    .filter(|w| w.starts_with('-'))
                    .map(String::from),
            ),
            "Commands" => {
                let name = head.split(' ').next().unwrap_or_default();
                commands.extend(name.split('|').map(String::from));
            }
            _ => {}
        }
    }
    (options, commands)
}

/// Every option (each spelling) and every command of the pinned Claude Code's `--help` is in
/// relay's classification, so a new flag of a later CLI fails here until it is decided.
#[test]
fn every_option_and_command_of_the_pinned_claude_is_classified() {
    let scratch = tempfile::tempdir().unwrap();
    let out = Command::new(relay_tests::claude_cli())
        .arg("--help")
        .env("HOME", scratch.path())
        .env("CLAUDE_CONFIG_DIR", scratch.path().join(".claude"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "claude --help: {out:?}");
    let (options, commands) = help_names(&String::from_utf8_lossy(&out.stdout));
    // The extraction itself: Claude Code 2.1.332 lists 77 spellings and 22 command names.
    assert!(options.len() >= 70, "{options:?}");
    assert!(commands.len() >= 20, "{commands:?}");
    for needed in ["--allowed-tools", "-p", "--print", "--add-dir", "-v"] {
        assert!(options.iter().any(|o| o == needed), "{needed}: {options:?}");
    }
    let unclassified: Vec<&String> = options
        .iter()
        .chain(&commands)
        .filter(|n| !claude_flags::classified(n))
        .collect();
    assert!(
        unclassified.is_empty(),
        "not classified in relay-host's launch::plan::claude_flags: {unclassified:?}"
    );
}

/// The arguments the session's program last received, after the program.
fn last_argv(record: &Path) -> Vec<String> {
    let recs = relay_tests::read_records(record);
    let last = recs.last().expect("the agent ran and recorded");
    let argv: Vec<String> = serde_json::from_value(last["argv"].clone()).unwrap();
    argv[1..].to_vec()
}

/// Claude Code's own ways of writing its command line, each refused before (exit 64): a
/// prompt without `-p`, `-p` with a one-word prompt, a space-separated `--allowedTools` list,
/// `--version`. Each is launched and reaches the session as written, but for a one-word
/// terminal UI prompt, which gets a space before it (Claude Code would look the bare word up
/// as a subcommand). `relay-host run -- "explain this repo"` runs too.
#[test]
fn claudes_own_command_lines_reach_the_session() {
    let fx = World::agent(&relay_tests::fake_agent());
    let cases: [(&[&str], &[&str]); 6] = [
        (&["explain this repo"], &["explain this repo"]),
        (&["-p", "hi"], &["-p", "hi"]),
        (&["-p", "mcp"], &["-p", "mcp"]),
        (&["hi"], &[" hi"]),
        (
            &["--allowedTools", "Bash", "Write", "Edit"],
            &["--allowedTools", "Bash", "Write", "Edit"],
        ),
        (&["--version"], &["--version"]),
    ];
    for (i, (given, handed)) in cases.into_iter().enumerate() {
        let out = fx.launch_session(&format!("s-{i}"), given, SCRIPT_TIMEOUT);
        let stderr = &out.stderr;
        assert_eq!(out.code, Some(0), "{given:?}: {stderr}");
        let argv = last_argv(&fx.record);
        assert!(
            argv.ends_with(&handed.iter().map(|a| a.to_string()).collect::<Vec<_>>()),
            "{given:?}: the session got {argv:?}"
        );
    }
    let mut run = Command::new(&fx.host);
    relay_tests::run::default_signals(&mut run)
        .arg("--config-dir")
        .arg(&fx.config)
        .arg("--state-dir")
        .arg(&fx.state)
        .args(["run", "--", "explain this repo"])
        .current_dir(&fx.project)
        .env("HOME", &fx.home)
        .env("FAKE_AGENT_RECORD", &fx.record)
        .env_remove("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR")
        .stdin(Stdio::null());
    let out = run.output().expect("relay-host run");
    assert_eq!(out.status.code(), Some(0), "run: {out:?}");
    assert_eq!(last_argv(&fx.record).last().unwrap(), "explain this repo");
}

/// A refused option is refused `invalid_spec` (64) with a message naming the argument, the
/// option and why; a subcommand is refused naming it; no program runs.
#[test]
fn a_refused_option_is_named_with_its_reason() {
    let fx = World::agent(&relay_tests::fake_agent());
    let cases: [(&[&str], &str); 3] = [
        (
            &["--settings={}"],
            "extra_args[0] \"--settings={}\": --settings is refused: it loads settings (a base \
             URL, hooks, apiKeyHelper) from a file or JSON",
        ),
        (
            &["-p", "hi", "--dangerously-skip-permissions"],
            "extra_args[2] \"--dangerously-skip-permissions\": --dangerously-skip-permissions is \
             refused: it bypasses every permission check: the operator's choice, not a request's",
        ),
        (
            &["--verbose", "--", "mcp", "add-json", "x", "{}"],
            "extra_args[2] \"mcp\": a Claude Code subcommand, which a launch that carries the \
             token may not run (only auth status may); to send the word as a prompt, write -p \
             before it",
        ),
    ];
    for (i, (args, message)) in cases.into_iter().enumerate() {
        let out = fx.launch_session(&format!("r-{i}"), args, SCRIPT_TIMEOUT);
        assert_eq!(out.code, Some(64), "{args:?}: {out:?}");
        let line: Value = serde_json::from_str(out.stderr.trim()).unwrap();
        assert_eq!(line["error"], "invalid_spec", "{line}");
        assert_eq!(line["message"], message, "{args:?}");
    }
    assert!(!fx.record.exists(), "a refused launch ran the program");
}

/// The message a refusal of a value or prompt written as an option gives.
const OPTION_AS_VALUE: &str = "written as an option: Claude Code reads some options wherever \
     they stand (--bare, --handle-uri, --tmux with -w), even as another option's value or a \
     prompt, so a launch that carries the token may not pass one there";

/// The message a refused subcommand gives.
const SUBCOMMAND: &str = "a Claude Code subcommand, which a launch that carries the token may \
     not run (only auth status may); to send the word as a prompt, write -p before it";

/// Claude Code reads some words of its command line before (and beside) its grammar: `--bare`,
/// `--handle-uri`, `--tmux` with `-w` wherever they stand, even as another option's value; the
/// word `import` after options, followed by `codex`, `gemini` or `cursor`, as its `import`
/// command. Measured with the pinned CLI ([`claude_itself_reads_these_words_beyond_its_grammar`]):
/// each of these ran something other than a prompt. relay refuses them.
#[test]
fn words_claude_reads_beyond_its_grammar_are_refused() {
    let fx = World::agent(&relay_tests::fake_agent());
    let cases: [(&[&str], &str); 6] = [
        (&["-p", "-n", "--bare", "hi"], "extra_args[2] \"--bare\""),
        (
            &["-p", "-n", "--handle-uri", "claude-cli://open?q=hi"],
            "extra_args[2] \"--handle-uri\"",
        ),
        (
            &["-n", "--tmux", "--system-prompt", "-w", "-p", "hi"],
            "extra_args[1] \"--tmux\"",
        ),
        (
            &["-p", "--", "--ignore-persisted-trust"],
            "extra_args[2] \"--ignore-persisted-trust\"",
        ),
        (
            &["-p", "--model", "import", "codex"],
            "extra_args[2] \"import\"",
        ),
        (
            &["--allowedTools", "Bash", "import", "gemini"],
            "extra_args[2] \"import\"",
        ),
    ];
    for (i, (args, at)) in cases.into_iter().enumerate() {
        let out = fx.launch_session(&format!("w-{i}"), args, SCRIPT_TIMEOUT);
        assert_eq!(out.code, Some(64), "{args:?}: {out:?}");
        let line: Value = serde_json::from_str(out.stderr.trim()).unwrap();
        assert_eq!(line["error"], "invalid_spec", "{line}");
        let why = if at.ends_with("\"import\"") {
            SUBCOMMAND
        } else {
            OPTION_AS_VALUE
        };
        assert_eq!(line["message"], format!("{at}: {why}"), "{args:?}");
    }
    assert!(!fx.record.exists(), "a refused launch ran the program");
}

/// Claude Code looks the first word of its command line up as a command of its own before it
/// reads `-p` (`claude remote-control -p` starts Remote Control), so a one-word prompt written
/// first gets a space before it in print mode too; elsewhere print mode's prompt is as written.
#[test]
fn a_first_word_prompt_gets_a_space_in_print_mode_too() {
    let fx = World::agent(&relay_tests::fake_agent());
    let cases: [(&[&str], &[&str]); 4] = [
        (&["remote-control", "-p"], &[" remote-control", "-p"]),
        (
            &["self-hosted-runner", "--print"],
            &[" self-hosted-runner", "--print"],
        ),
        (&["-p", "remote-control"], &["-p", "remote-control"]),
        (&["-p", "cc://127.0.0.1:9/x"], &["-p", "cc://127.0.0.1:9/x"]),
    ];
    for (i, (given, handed)) in cases.into_iter().enumerate() {
        let out = fx.launch_session(&format!("f-{i}"), given, SCRIPT_TIMEOUT);
        let stderr = &out.stderr;
        assert_eq!(out.code, Some(0), "{given:?}: {stderr}");
        let argv = last_argv(&fx.record);
        assert!(
            argv.ends_with(&handed.iter().map(|a| a.to_string()).collect::<Vec<_>>()),
            "{given:?}: the session got {argv:?}"
        );
    }
}

/// Claude Code loads the agents, commands and skills of an `--add-dir` folder's `.claude/` unless
/// it reads the user settings only: a token launch that adds a folder gets
/// `--setting-sources user` also in a project the operator trusts, where it otherwise gets none.
#[test]
fn an_added_folder_reads_no_settings_even_in_a_trusted_project() {
    let fx = World::agent(&relay_tests::fake_agent());
    let file = fx.config.join("settings.json");
    let mut settings: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    settings["trusted_projects"] = serde_json::json!([fx.project]);
    std::fs::write(&file, settings.to_string()).unwrap();
    let sources = |argv: &[String]| {
        argv.windows(2)
            .any(|w| w[0] == "--setting-sources" && w[1] == "user")
    };
    let out = fx.launch_session("trusted", &["-p", "hi there"], SCRIPT_TIMEOUT);
    assert_eq!(out.code, Some(0), "{out:?}");
    let argv = last_argv(&fx.record);
    assert!(
        !sources(&argv),
        "a trusted project read the user settings only: {argv:?}"
    );
    let out = fx.launch_session(
        "added",
        &["-p", "hi there", "--add-dir", "/usr/share"],
        SCRIPT_TIMEOUT,
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    let argv = last_argv(&fx.record);
    assert!(sources(&argv), "--add-dir in a trusted project: {argv:?}");
}

/// What the pinned CLI itself does with each attempt above, run in a scratch `HOME` inside the
/// fake internet's network namespace (nothing leaves the machine; each exits before any
/// request): none of them is a prompt.
#[test]
#[cfg(target_os = "linux")]
fn claude_itself_reads_these_words_beyond_its_grammar() {
    let net = relay_tests::fake_internet::FakeInternet::start();
    let cases: [(&[&str], &str); 5] = [
        (
            &["-p", "--model", "import", "codex"],
            "`claude import` is not yet available in this build",
        ),
        (
            &["--allowedTools", "Bash", "import", "gemini"],
            "`claude import` is not yet available in this build",
        ),
        (
            &["-p", "-n", "--handle-uri", "claude-cli://open?q=hi"],
            "Couldn't open a terminal",
        ),
        (
            &["-n", "--tmux", "--system-prompt", "-w", "-p", "hi"],
            "retry with --worktree",
        ),
        (
            &["remote-control", "-p"],
            "Remote Control is only available",
        ),
    ];
    for (args, said) in cases {
        let scratch = tempfile::tempdir().unwrap();
        let project = scratch.path().join("project");
        std::fs::create_dir(&project).unwrap();
        let mut cmd = Command::new(relay_tests::claude_cli());
        cmd.args(args)
            .current_dir(&project)
            .env("HOME", scratch.path())
            .env("CLAUDE_CONFIG_DIR", scratch.path().join(".claude"))
            .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
            .env_remove("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR")
            .stdin(Stdio::null());
        net.enter(&mut cmd);
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
}
