//! Runs the built `ltt` and `embed` examples against a probe: a `/bin/sh -c` script standing in
//! for `claude` that reports what it received (never the token itself).
//!
//! The examples are not built by this test target: `cargo build -p relay-examples --examples`
//! (which `cargo test` also does) puts them in `target/<profile>/examples/`.

use std::collections::BTreeSet;
use std::fs;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};

const TOKEN: &str = "sk-ant-oat01-relay-examples-TEST-7f3a9c";

/// Reports, one `key=value` per line, the variable and the hash and length of what it read from
/// the descriptor the variable names; then its environment block, its argv and its own open
/// descriptors, each section after a header line. `ls` lists the shell's fds (`$$`), not its own;
/// it runs as a plain command, so the shell holds no pipe of a substitution while it lists.
const PROBE: &str = r#"v=$CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR
echo "var=${v-unset}"
x=$(cat "/dev/fd/$v"; echo .); x=${x%.}
echo "len=${#x}"
printf %s "$x" | sha256sum | sed 's/ .*//; s/^/sha=/'
echo env:
tr '\0' '\n' </proc/$$/environ
echo argv:
tr '\0' '\n' </proc/$$/cmdline
echo fds:
ls /proc/$$/fd
"#;

/// `target/debug/deps/examples-HASH` → `target/debug/examples/NAME`.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let path = profile_dir.join("examples").join(name);
    assert!(
        path.is_file(),
        "{} is missing: run cargo build -p relay-examples --examples",
        path.display()
    );
    path
}

/// A folder holding `token` with `contents`, private (0600), as `claude setup-token`'s token
/// is kept.
fn token_dir(contents: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    write_private(&path, contents);
    (dir, path)
}

/// Writes `contents` to `path` with mode 0600.
fn write_private(path: &Path, contents: &str) {
    fs::write(path, contents).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
}

/// `ltt --token-file PATH --claude /bin/sh -c PROBE probe`: `-c` is the first argument ltt does
/// not know, so it and everything after it go to the program.
fn ltt_probe(token_file: &Path) -> Command {
    let mut cmd = Command::new(example("ltt"));
    cmd.arg("--token-file").arg(token_file);
    cmd.args(["--claude", "/bin/sh", "-c", PROBE, "probe"]);
    cmd
}

/// Gives the spawned process `src` at `dst` as an inherited (not close-on-exec) descriptor.
fn inherit_fd(cmd: &mut Command, src: RawFd, dst: RawFd) {
    // SAFETY: dup2 and fcntl are async-signal-safe; the closure allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            let rc = if src == dst {
                libc::fcntl(dst, libc::F_SETFD, 0) // dup2 would leave close-on-exec set
            } else {
                libc::dup2(src, dst)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("spawn the example")
}

struct Report {
    var: String,
    len: usize,
    sha: String,
    env: Vec<String>,
    argv: Vec<String>,
    fds: BTreeSet<RawFd>,
}

fn report(out: &Output) -> Report {
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stdout}\n{stderr}", out.status);
    assert!(
        !stdout.contains(TOKEN),
        "the probe's report holds the token"
    );
    assert!(!stderr.contains(TOKEN), "stderr holds the token");
    let mut r = Report {
        var: String::new(),
        len: 0,
        sha: String::new(),
        env: Vec::new(),
        argv: Vec::new(),
        fds: BTreeSet::new(),
    };
    let mut section = "";
    for line in stdout.lines() {
        match (section, line) {
            (_, "env:" | "argv:" | "fds:") => section = line,
            ("", _) => match line.split_once('=') {
                Some(("var", v)) => r.var = v.to_string(),
                Some(("len", v)) => r.len = v.parse().unwrap(),
                Some(("sha", v)) => r.sha = v.to_string(),
                _ => panic!("unexpected probe line {line:?}"),
            },
            ("env:", _) => r.env.push(line.to_string()),
            ("argv:", _) => r.argv.push(line.to_string()),
            ("fds:", _) => {
                r.fds.insert(line.parse().unwrap());
            }
            _ => unreachable!(),
        }
    }
    r
}

/// The child read exactly the token from the descriptor the variable names, which is 5; the
/// token is in neither its environment nor its argv; it holds fds 0, 1, 2 and 5 only.
fn assert_received_token(r: &Report) {
    let want = format!("{:x}", Sha256::digest(TOKEN.as_bytes()));
    assert_eq!(r.var, "5");
    assert_eq!(r.len, TOKEN.len());
    assert_eq!(r.sha, want);
    assert!(
        r.env.iter().any(|l| l.starts_with("PATH=")),
        "empty env dump"
    );
    assert!(r.env.iter().all(|l| !l.contains(TOKEN)), "token in the env");
    assert_eq!(r.argv.first().map(String::as_str), Some("/bin/sh"));
    assert!(r.argv.iter().all(|a| !a.contains(TOKEN)), "token in argv");
    assert_eq!(r.fds, BTreeSet::from([0, 1, 2, 5]));
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

#[test]
fn ltt_hands_the_token_on_fd_5() {
    let (_dir, path) = token_dir(&format!("{TOKEN}\n")); // trailing newline is trimmed
    let out = run(&mut ltt_probe(&path));
    let r = report(&out);
    assert_received_token(&r);
    // argv as ltt got it after its own options (the dump splits the script at its newlines).
    assert_eq!(
        r.argv.join("\n"),
        ["/bin/sh", "-c", PROBE, "probe"].join("\n")
    );
    assert_eq!(stderr(&out), "");
}

#[test]
fn ltt_child_inherits_none_of_ltts_descriptors() {
    let (dir, path) = token_dir(TOKEN);
    // ltt itself starts with a decoy at fd 5 (as the old `exec 5<file` script left it) and a
    // stray descriptor at 7: the child must get the token at 5 and nothing at 7.
    let decoy_path = dir.path().join("decoy");
    fs::write(&decoy_path, "decoy").unwrap();
    let decoy = fs::File::open(&decoy_path).unwrap();
    let mut cmd = ltt_probe(&path);
    inherit_fd(&mut cmd, decoy.as_raw_fd(), 5);
    inherit_fd(&mut cmd, decoy.as_raw_fd(), 7);
    assert_received_token(&report(&run(&mut cmd)));
}

#[test]
fn ltt_scrubs_credentials_from_the_child_env() {
    let (_dir, path) = token_dir(TOKEN);
    let out = run(ltt_probe(&path)
        .env("ANTHROPIC_API_KEY", "sk-ant-api-MARKER-1")
        .env("ANTHROPIC_AUTH_TOKEN", "MARKER-2")
        .env("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-MARKER-3")
        .env("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR", "9")
        .env("CLAUDECODE", "1")
        .env("CLAUDE_CONFIG_DIR", "/keep/config")
        .env("LTT_TEST_KEEP", "kept"));
    let r = report(&out);
    assert_received_token(&r);
    for gone in [
        "ANTHROPIC_API_KEY=",
        "ANTHROPIC_AUTH_TOKEN=",
        "CLAUDE_CODE_OAUTH_TOKEN=",
        "CLAUDECODE=",
    ] {
        assert!(
            !r.env.iter().any(|l| l.starts_with(gone)),
            "{gone} reached the child"
        );
    }
    assert!(r.env.iter().all(|l| !l.contains("MARKER")));
    let claude_code: Vec<_> = r
        .env
        .iter()
        .filter(|l| l.starts_with("CLAUDE_CODE_"))
        .collect();
    assert_eq!(claude_code, ["CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5"]);
    assert!(r
        .env
        .contains(&"CLAUDE_CONFIG_DIR=/keep/config".to_string()));
    assert!(r.env.contains(&"LTT_TEST_KEEP=kept".to_string()));
}

#[test]
fn ltt_reads_the_default_token_file_under_home() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join(".config/claude-ltt");
    fs::create_dir_all(&dir).unwrap();
    write_private(&dir.join("token"), TOKEN);
    let mut cmd = Command::new(example("ltt"));
    cmd.env("HOME", home.path()).env("LTT_CLAUDE", "/bin/sh");
    cmd.args(["-c", PROBE, "probe"]);
    assert_received_token(&report(&run(&mut cmd)));

    // `--token-file ~/...` goes through claude_token_path too.
    fs::rename(dir.join("token"), home.path().join("other")).unwrap();
    let mut cmd = ltt_probe(Path::new("~/other"));
    cmd.env("HOME", home.path());
    assert_received_token(&report(&run(&mut cmd)));
}

#[test]
fn ltt_missing_token_file_exits_78_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent");
    let out = run(&mut ltt_probe(&path));
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(
        stderr(&out),
        format!(
            "ltt: read claude_token_file {}: no such file or directory\n",
            path.display()
        )
    );
    assert!(out.stdout.is_empty(), "the probe ran");
}

#[test]
fn ltt_refuses_a_non_token_without_echoing_it() {
    let (_dir, path) = token_dir("sk-ant-oat01 MARKER-inner-space-91c2\n");
    let out = run(&mut ltt_probe(&path));
    assert_eq!(out.status.code(), Some(78));
    let err = stderr(&out);
    assert_eq!(
        err,
        format!(
            "ltt: read claude_token_file {}: not a token: holds whitespace or control bytes\n",
            path.display()
        )
    );
    assert!(!err.contains("MARKER") && !err.contains("sk-ant-oat01"));
    assert!(out.stdout.is_empty(), "the probe ran");
}

#[test]
fn ltt_usage_errors_exit_64() {
    let out = run(Command::new(example("ltt")).args(["--token-file", "./token"]));
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("\"./token\": must be absolute or start with ~/"));

    let out = run(Command::new(example("ltt")).arg("--token-file"));
    assert_eq!(out.status.code(), Some(64));
    assert_eq!(
        stderr(&out),
        "ltt: --token-file needs a value (see ltt --help)\n"
    );
}

#[test]
fn ltt_help_prints_usage() {
    let out = run(Command::new(example("ltt")).arg("--help"));
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with("usage: ltt [--token-file PATH] [--claude PROGRAM] [--]"));
    assert!(out.stderr.is_empty());
}

#[test]
fn ltt_exits_with_the_childs_status() {
    let (_dir, path) = token_dir(TOKEN);
    let ltt = |script: &str| {
        let mut cmd = Command::new(example("ltt"));
        cmd.arg("--token-file").arg(&path);
        cmd.args(["--claude", "/bin/sh", "--", "-c", script]);
        run(&mut cmd)
    };
    assert_eq!(ltt("exit 3").status.code(), Some(3));
    // ltt became the program: a signal that kills it is seen as such, not as 128 + N.
    assert_eq!(ltt("kill -TERM $$").status.signal(), Some(libc::SIGTERM));
}

#[test]
fn ltt_becomes_the_program() {
    // exec, as the shell launcher did: the program runs under ltt's own pid, so signals and the
    // terminal reach it directly and no supervisor is left behind.
    let (_dir, path) = token_dir(TOKEN);
    let mut cmd = Command::new(example("ltt"));
    cmd.arg("--token-file").arg(&path);
    cmd.args(["--claude", "/bin/sh", "-c", "echo $$"]);
    cmd.stdout(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), pid.to_string());
}

#[test]
fn ltt_spawn_failures_exit_127_and_126() {
    let (dir, path) = token_dir(TOKEN);
    let missing = dir.path().join("no-such-claude");
    let out = run(Command::new(example("ltt"))
        .arg("--token-file")
        .arg(&path)
        .env("LTT_CLAUDE", &missing));
    assert_eq!(out.status.code(), Some(127));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!("ltt: cannot run {}: ", missing.display())),
        "{err}"
    );

    let not_executable = dir.path().join("claude");
    fs::write(&not_executable, "#!/bin/sh\n").unwrap();
    fs::set_permissions(&not_executable, fs::Permissions::from_mode(0o644)).unwrap();
    let out = run(Command::new(example("ltt"))
        .arg("--token-file")
        .arg(&path)
        .arg("--claude")
        .arg(&not_executable));
    assert_eq!(out.status.code(), Some(126), "{}", stderr(&out));
}

#[test]
fn embed_hands_the_token_on_fd_5() {
    let (_dir, path) = token_dir(&format!("{TOKEN}\n"));
    let out = run(Command::new(example("embed"))
        .arg(&path)
        .args(["/bin/sh", "-c", PROBE, "probe"])
        .env("ANTHROPIC_API_KEY", "MARKER")
        .env("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR", "9"));
    let r = report(&out);
    assert_received_token(&r);
    assert!(r.env.iter().all(|l| !l.contains("MARKER")));
    assert_eq!(stderr(&out), "");
}

#[test]
fn tokio_spawn_gets_exactly_0_1_2_and_the_token_at_5() {
    let (dir, path) = token_dir(&format!("{TOKEN}\n"));
    // The launcher starts with a decoy at 5 and strays at 7 and 251, all inheritable: through
    // tokio the child must still hold the token at 5 and nothing else above 2.
    let decoy_path = dir.path().join("decoy");
    fs::write(&decoy_path, "decoy").unwrap();
    let decoy = fs::File::open(&decoy_path).unwrap();
    let mut cmd = Command::new(example("tokio"));
    cmd.arg(&path)
        .args(["/bin/sh", "-c", PROBE, "probe"])
        .env("ANTHROPIC_API_KEY", "MARKER")
        .env("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR", "9");
    for n in [5, 7, 251] {
        inherit_fd(&mut cmd, decoy.as_raw_fd(), n);
    }
    let out = run(&mut cmd);
    let r = report(&out);
    assert_received_token(&r);
    assert!(r.env.iter().all(|l| !l.contains("MARKER")));
    assert_eq!(stderr(&out), "");
}

#[test]
fn tokio_missing_program_fails_cleanly() {
    let (_dir, path) = token_dir(TOKEN);
    let out = run(Command::new(example("tokio"))
        .arg(&path)
        .arg("/nonexistent/relay-examples-no-such-program"));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "tokio: No such file or directory (os error 2)\n"
    );
}

#[test]
fn embed_errors_name_the_path_not_the_bytes() {
    let (_dir, path) = token_dir("MARKER with spaces");
    let out = run(Command::new(example("embed")).arg(&path).arg("/bin/true"));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!(
            "embed: read claude_token_file {}: not a token: holds whitespace or control bytes\n",
            path.display()
        )
    );

    let out = run(Command::new(example("embed")).arg(&path));
    assert_eq!(out.status.code(), Some(64));
    assert_eq!(stderr(&out), "usage: embed TOKEN_FILE PROGRAM [ARGS...]\n");
}

/// The code of README's "The library" block, of relay-token's README and of relay-token's top
/// rustdoc example: each is `examples/library.rs`, byte for byte, so running that example runs
/// what an embedder copies.
#[test]
fn the_copied_library_snippets_are_examples_library_rs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let example = fs::read_to_string(root.join("examples/library.rs")).unwrap();
    let block = |text: &str, fence: &str, heading: &str| -> String {
        let at = text
            .find(heading)
            .unwrap_or_else(|| panic!("no {heading:?}"));
        let start = text[at..].find(fence).unwrap() + at + fence.len();
        let end = text[start..].find("```\n").unwrap() + start;
        text[start..end].to_string()
    };
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    assert_eq!(block(&readme, "```rust\n", "## The library"), example);
    let crate_readme = fs::read_to_string(root.join("relay-token/README.md")).unwrap();
    assert_eq!(block(&crate_readme, "```rust\n", "# relay-token"), example);
    let lib = fs::read_to_string(root.join("relay-token/src/lib.rs")).unwrap();
    let doc: String = lib
        .lines()
        .map_while(|l| l.strip_prefix("//!"))
        .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
        .collect();
    assert_eq!(block(&doc, "```no_run\n", "relay-token"), example);
}

/// The pinned Claude Code CLI: `$RELAY_TEST_CLAUDE`, else the workspace's `.tools/claude-code`
/// (the rule of `relay_tests::claude_cli`, which this crate does not depend on: examples build
/// their dev-dependencies, and `cargo install --example ltt` must not build the test harness).
fn claude_cli() -> PathBuf {
    let path = match std::env::var_os("RELAY_TEST_CLAUDE").filter(|v| !v.is_empty()) {
        Some(p) => std::path::absolute(PathBuf::from(p)).unwrap(),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../.tools/claude-code/node_modules/.bin/claude"),
    };
    assert!(
        path.is_file(),
        "the Claude Code CLI is missing: {}",
        path.display()
    );
    path
}

/// A `claude` first on PATH that records its environment (names, and whether the token's
/// variable is 5) in `report`, then execs the real CLI.
fn claude_wrapper(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    fs::create_dir(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\nenv | sed 's/=.*//' | sort >'{}'\nexec '{}' \"$@\"\n",
        dir.join("report").display(),
        claude_cli().display()
    );
    let path = bin.join("claude");
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// Runs `cmd` (an example that ends in `claude auth status --json`) with a home holding the
/// token at `~/.config/claude-ltt/token` and the credentials a launcher may carry inherited;
/// returns Claude's `authMethod` (or the API key's source when it names one) and the names
/// Claude's environment held.
fn auth_method_with_inherited_credentials(cmd: &mut Command) -> (String, Vec<String>) {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join(".config/claude-ltt");
    fs::create_dir_all(&dir).unwrap();
    write_private(&dir.join("token"), &format!("{TOKEN}\n"));
    let bin = claude_wrapper(home.path());
    let path = format!("{}:/usr/bin:/bin", bin.display());
    cmd.env("HOME", home.path())
        .env("PATH", path)
        .env("ANTHROPIC_API_KEY", "sk-ant-api03-inherited-MARKER")
        .env("ANTHROPIC_AUTH_TOKEN", "inherited-MARKER")
        .env("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-inherited-MARKER")
        .env("CLAUDECODE", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    let out = run(cmd);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?}\n{stdout}\n{}",
        out.status,
        stderr(&out)
    );
    let status: serde_json::Value = serde_json::from_str(&stdout).expect("auth status JSON");
    // The settings variable reached Claude: it reports analytics off.
    assert_eq!(status["analyticsDisabled"], true, "{stdout}");
    let names = fs::read_to_string(home.path().join("report")).unwrap();
    let names = names.lines().map(str::to_string).collect();
    // With `ANTHROPIC_AUTH_TOKEN` beside an API key Claude says `oauth_token` and still names
    // the key's source: a source named at all means a credential other than fd 5 is in play.
    let method = match status.get("apiKeySource") {
        Some(source) => format!("api key from {source}"),
        None => status["authMethod"].as_str().unwrap_or("").to_string(),
    };
    (method, names)
}

fn assert_only_the_descriptor(method: &str, names: &[String]) {
    assert_eq!(
        method, "oauth_token",
        "an inherited credential won over fd 5"
    );
    for gone in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDECODE",
    ] {
        assert!(!names.iter().any(|n| n == gone), "{gone} reached Claude");
    }
    assert!(names
        .iter()
        .any(|n| n == "CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR"));
}

#[test]
fn readme_and_rustdoc_library_example_wins_over_inherited_credentials() {
    let (method, names) =
        auth_method_with_inherited_credentials(&mut Command::new(example("library")));
    assert_only_the_descriptor(&method, &names);
}

#[test]
fn embed_and_tokio_win_over_inherited_credentials_against_the_real_claude() {
    for name in ["embed", "tokio"] {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        fs::write(&token, TOKEN).unwrap();
        let mut cmd = Command::new(example(name));
        cmd.arg(&token).args(["claude", "auth", "status", "--json"]);
        let (method, names) = auth_method_with_inherited_credentials(&mut cmd);
        assert_only_the_descriptor(&method, &names);
    }
}

/// The operator's shell "007", as faithful as it is small: the token file on fd 5, the
/// variable, and claude exec'd with the environment as it is.
const SHELL_007: &str = r#"#!/bin/sh
TOKEN_FILE="${TOKEN_FILE:-$HOME/.config/claude-ltt/token}"
exec 5<"$TOKEN_FILE" || exit 78
CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=5 exec "${LTT_CLAUDE:-claude}" "$@"
"#;

/// Runs `launcher` (the shell 007 or ltt) on the same inputs: the token at the default path
/// under a home of its own, `env` and nothing else, the probe as claude with `args`.
fn side_by_side(launcher: &Path, env: &[(&str, &str)], args: &[&str]) -> Report {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join(".config/claude-ltt");
    fs::create_dir_all(&dir).unwrap();
    write_private(&dir.join("token"), TOKEN); // no newline: the shell hands the file as it is
    let mut cmd = Command::new(launcher);
    cmd.env_clear()
        .env("HOME", "/home/op")
        .envs(env.iter().copied())
        .env("LTT_CLAUDE", "/bin/sh")
        .args(["-c", PROBE, "probe"])
        .args(args);
    // The same HOME string for both: a symlink at a fixed place would be shared, so the token
    // path is given to each the way it reads it.
    cmd.env("HOME", home.path()).current_dir(home.path());
    report(&run(&mut cmd))
}

#[test]
fn ltt_gives_claude_what_the_shell_007_gives_it_less_the_rival_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let shell = dir.path().join("007");
    fs::write(&shell, SHELL_007).unwrap();
    fs::set_permissions(&shell, fs::Permissions::from_mode(0o755)).unwrap();
    let settings = [
        ("PATH", "/usr/bin:/bin"),
        ("LANG", "C.UTF-8"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "4096"),
        ("CLAUDE_CONFIG_DIR", "/home/op/.claude-work"),
        ("ANTHROPIC_BASE_URL", "https://gateway.invalid"),
    ];
    let args = ["-p", "hello", "--model", "opus"];
    let from_shell = side_by_side(&shell, &settings, &args);
    let from_ltt = side_by_side(&example("ltt"), &settings, &args);
    // The shell hands Claude every descriptor it had (its script's, the caller's): ltt only
    // 0, 1, 2 and 5. The token is the same.
    assert_received_token(&from_ltt);
    assert_eq!(
        (from_shell.var.as_str(), from_shell.len),
        ("5", TOKEN.len())
    );
    let sorted = |r: &Report| {
        let mut env: Vec<String> = (r.env.iter())
            .filter(|l| !l.starts_with("HOME=") && !l.starts_with("PWD="))
            .cloned()
            .collect();
        env.sort();
        env
    };
    assert_eq!(
        sorted(&from_ltt),
        sorted(&from_shell),
        "the environment Claude gets"
    );
    assert_eq!(from_ltt.argv, from_shell.argv);
    assert_eq!(from_ltt.sha, from_shell.sha);

    // With the credentials a shell may carry, ltt hands Claude the same less those alone.
    let mut with_credentials = settings.to_vec();
    with_credentials.extend([
        ("ANTHROPIC_API_KEY", "sk-ant-api03-MARKER"),
        ("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-MARKER"),
    ]);
    let from_shell = side_by_side(&shell, &with_credentials, &args);
    let from_ltt = side_by_side(&example("ltt"), &with_credentials, &args);
    let shell_less: Vec<String> = sorted(&from_shell)
        .into_iter()
        .filter(|l| !l.contains("MARKER"))
        .collect();
    assert_eq!(sorted(&from_ltt), shell_less);
}

#[test]
fn ltt_takes_token_file_equals_path_and_claude_equals_program() {
    let (_dir, path) = token_dir(TOKEN);
    let mut cmd = Command::new(example("ltt"));
    cmd.arg(format!("--token-file={}", path.display()))
        .arg("--claude=/bin/sh")
        .args(["-c", PROBE, "probe", "--token-file=/elsewhere"]);
    let r = report(&run(&mut cmd));
    assert_received_token(&r);
    // Claude's own arguments pass as they are, ltt's options do not.
    assert_eq!(
        r.argv.last().map(String::as_str),
        Some("--token-file=/elsewhere")
    );
    assert!(!r.argv.iter().any(|a| a.starts_with("--claude")));
}

#[test]
fn ltt_refuses_a_token_file_others_can_read_as_relay_host_does() {
    let (_dir, path) = token_dir(TOKEN);
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    let out = run(&mut ltt_probe(&path));
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(
        stderr(&out),
        format!(
            "ltt: read claude_token_file {}: mode 0644 lets others read it; chmod 600 it\n",
            path.display()
        )
    );
    assert!(out.stdout.is_empty(), "the probe ran");
}

#[test]
fn ltt_keeps_claudes_settings_and_wins_over_inherited_credentials_with_the_real_claude() {
    let mut cmd = Command::new(example("ltt"));
    cmd.args(["auth", "status", "--json"]);
    let (method, names) = auth_method_with_inherited_credentials(&mut cmd);
    assert_only_the_descriptor(&method, &names);
}
