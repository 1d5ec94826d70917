//! Real agent turns, end to end: the pinned Claude Code CLI, launched sandboxed by the real
//! `relay-host launch` with the token on fd 5, plays a scripted turn against the local Messages
//! API fixture (`relay_tests::messages_api`) in a project that is a git repository. Its Bash,
//! Write, Read and Edit tools run inside relay's sandbox; the outcomes are checked on the host,
//! the credential by hash only.
//!
//! What users run is what these tests run: the operator's settings hold the built-in
//! `claude-code` template exactly as shipped, its environment included, with only
//! `api_base_url` (the documented gateway setting) pointed at the fixture, which also adds the
//! fixture's address to the built-in allow-list; every other host Claude Code tries is refused
//! by the proxy and shows as a `network_denied` event. A turn whose settings' templates differ
//! from the built-in ones in anything else fails before it runs
//! (`relay_tests::install::assert_as_shipped`). Claude Code is installed by npm or in the native
//! installer's layout, and relay-host runs as root or as an unprivileged user.
//!
//! Needs the binaries (`cargo build -p relay-host -p relay-shim -p relay-tests --bins`) and the
//! CLI: `$RELAY_TEST_CLAUDE`, else `<workspace>/.tools/claude-code/node_modules/.bin/claude`
//! (which `scripts/test` installs). A missing CLI fails the tests.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use relay_tests::agent::{results_at, Setup, FINAL, NOBODY};
use relay_tests::install::Install;
use relay_tests::listener::{Listener, HELLO};
use relay_tests::messages_api::Step;
use relay_tests::sha256_hex;
use relay_tests::tmux::at_prompt;
use serde_json::{json, Value};

/// The Bash command of a shipped turn: `git status`, a file written by the shell, `git add`
/// and `git commit`, the number of commits.
const BASH_WORK: &str =
    "git status --short && printf 'made by bash\\n' > bash-made.txt && git add \
                         bash-made.txt && git -c user.name=Relay -c user.email=relay@test.invalid \
                         commit -q -m 'commit from the Bash tool' && git log --oneline | wc -l";

/// The Bash command that asks the session's Claude Code whether it would update itself.
const DOCTOR: &str = "\"$CLAUDE_CODE_EXECPATH\" doctor 2>&1 | grep -m 1 'Auto-updates'";

/// The script of a shipped turn: the Bash command ([`BASH_WORK`]); `claude doctor`'s
/// auto-update line ([`DOCTOR`]); Write makes a new file; Read and Edit change the committed
/// `notes.txt`.
fn work_script(project: &Path) -> Vec<Step> {
    let mut steps = vec![Step::bash(BASH_WORK), Step::bash(DOCTOR)];
    steps.extend(relay_tests::agent::file_steps(project));
    steps.push(Step::text(FINAL));
    steps
}

/// One shipped turn: the built-in `claude-code` template as shipped (only `api_base_url` at the
/// fixture), Claude Code installed by `install`, relay-host run as `user`. Bash, Write, Read and
/// Edit work; the commit is in the project's history on the host; the project holds only what
/// the turn wrote (its entries before and after, `.git/` included); a second token launch in
/// the same project is accepted and runs; the token reached only the API, and no file holds it.
fn shipped_turn(install: Install, user: Option<u32>) {
    let s = Setup::with(install, user, |project, _| work_script(project));
    let before = s.entries();
    let turn = s.turn("Do the scripted work.");
    s.report("shipped_turn");
    s.assert_completed(&turn, 5);
    let read = |name: &str| std::fs::read_to_string(s.project.join(name)).unwrap();
    assert_eq!(read("bash-made.txt"), "made by bash\n");
    assert_eq!(read("written.txt"), "written by the Write tool\n");
    assert_eq!(read("notes.txt"), "colour: blue\nsize: small\n");
    let log = s.git(&["log", "--format=%s"]);
    assert_eq!(
        String::from_utf8_lossy(&log.stdout),
        "commit from the Bash tool\nfirst\n",
        "{log:?}"
    );
    let results = results_at(&s.api.main_requests(), 1);
    assert!(
        results.iter().any(|r| r.trim() == "2"),
        "the Bash tool's output did not come back: {results:?}"
    );
    // The auto-updater is off by the template's own variable, whatever managed settings say.
    let doctor = results_at(&s.api.main_requests(), 2);
    assert_eq!(
        doctor.iter().map(|r| r.trim()).collect::<Vec<_>>(),
        ["Auto-updates: disabled (set by env: DISABLE_AUTOUPDATER)"],
        "{doctor:?}"
    );
    s.assert_left_only(&before, &["bash-made.txt", "written.txt"]);

    let again = s.turn("Do it again.");
    assert_eq!(
        again.code,
        Some(0),
        "the second launch: {}",
        again.describe()
    );
    assert_eq!(again.result()["result"], FINAL, "{}", again.describe());
    let launches: Vec<Value> = s
        .log("events.jsonl")
        .into_iter()
        .filter(|e| e["event"] == "launch")
        .collect();
    assert_eq!(launches.len(), 2, "{launches:?}");
    assert!(launches.iter().all(|e| e["status"] == 201), "{launches:?}");
    s.assert_bearer_everywhere();
    s.assert_no_token_on_disk();
}

/// [`shipped_turn`] with Claude Code from npm, relay-host as root.
#[test]
fn shipped_turn_npm_as_root() {
    shipped_turn(Install::Npm, None);
}

/// [`shipped_turn`] with Claude Code from npm, relay-host as an unprivileged user.
#[test]
fn shipped_turn_npm_as_a_user() {
    shipped_turn(Install::Npm, Some(NOBODY));
}

/// [`shipped_turn`] with Claude Code in the native installer's layout, relay-host as root.
#[test]
fn shipped_turn_native_as_root() {
    shipped_turn(Install::Native, None);
}

/// [`shipped_turn`] with Claude Code in the native installer's layout, relay-host as an
/// unprivileged user.
#[test]
fn shipped_turn_native_as_a_user() {
    shipped_turn(Install::Native, Some(NOBODY));
}

/// [`shipped_turn`] with Claude Code installed by `npm install -g` into a system prefix (the
/// layout of `/usr/local`, outside the home), relay-host as root.
#[test]
fn shipped_turn_npm_system_prefix_as_root() {
    shipped_turn(Install::NpmSystemPrefix, None);
}

/// [`shipped_turn`] with Claude Code installed by `npm install -g` into a user prefix in the
/// home (`~/.npm-global`, inside the built-in `shell` template's read-write grant), relay-host
/// as an unprivileged user.
#[test]
fn shipped_turn_npm_user_prefix_as_a_user() {
    shipped_turn(Install::NpmUserPrefix, Some(NOBODY));
}

/// A test template that differs from the built-in one in anything but `api_base_url` fails the
/// turn before it runs: the tests cannot drift from what users run.
#[test]
#[should_panic(expected = "is not the built-in one as shipped")]
fn a_template_not_as_shipped_fails_the_test() {
    let s = Setup::new(|_, _| vec![Step::text(FINAL)]);
    let mut settings = relay_tests::install::shipped_settings(&s.api.base_url());
    settings["templates"][0]["env"]["CLAUDE_CODE_SUBPROCESS_ENV_SCRUB"] = json!("1");
    s.settings(settings);
    s.turn("Never runs.");
}

/// The tools'-view probe, run by the Bash tool as `sh tools-view.sh HASH CONTROL_HASH`. It
/// never prints a token: it finds every `sk-ant-oat01-` + 32 hex digits string in what it looks
/// at, hashes each, and says `present` when one hashes to `HASH`. It looks at its own
/// environment, the environment and memory (its `rw-p` mappings, at most 256 of them and
/// 64 MiB of each, 5 s each) of the nearest ancestor whose executable is Claude Code, the contents of each of its own descriptors that can be opened again by path (read at
/// most 1 MiB, 1 s each; regular files and pipes above 2 only), and Claude Code's own
/// descriptors alike; and says whether fd 5 is open in
/// the tool and in Claude Code. `control` runs the same search on a made-up token whose hash
/// is `CONTROL_HASH`: it must say `present`, or the search is blind.
const TOOLS_VIEW: &str = r#"want="$1"; control_hash="$2"
found() {
  grep -a -o 'sk-ant-oat01-[0-9a-f]\{32\}' 2>/dev/null | while read -r c; do
    [ "$(printf %s "$c" | sha256sum | cut -d' ' -f1)" = "$want" ] && echo hit
  done | head -n 1
}
verdict() { if [ -n "$1" ]; then echo present; else echo absent; fi; }
real_want="$want"; want="$control_hash"
echo "control=$(verdict "$(printf 'x %s y' "sk-ant-oat01-00000000000000000000000000000000" | found)")"
want="$real_want"
echo "tool_env=$(verdict "$(tr '\0' '\n' < /proc/$$/environ | found)")"
hits=""
for f in /proc/$$/fd/*; do
  n=${f##*/}
  [ "$n" -le 2 ] 2>/dev/null && continue
  [ -f "$f" ] || [ -p "$f" ] || continue
  h=$(timeout 1 head -c 1048576 "$f" 2>/dev/null | found)
  [ -n "$h" ] && hits="$hits $n"
done
echo "tool_fds=$(verdict "$hits")"
if [ -e /proc/$$/fd/5 ]; then echo "tool_fd5=open"; else echo "tool_fd5=closed"; fi
pid=$$; claude=""; i=0
while [ "$i" -lt 30 ]; do
  pid=$(awk '/^PPid:/ {print $2}' /proc/$pid/status 2>/dev/null)
  [ -z "$pid" ] || [ "$pid" -le 0 ] && break
  case "$(tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null)" in *claude*) claude=$pid; break;; esac
  i=$((i + 1))
done
if [ -z "$claude" ]; then echo "claude=none"; exit 0; fi
echo "claude=found"
if cat /proc/$claude/environ > /dev/null 2>&1; then
  echo "claude_environ=$(verdict "$(tr '\0' '\n' < /proc/$claude/environ | found)")"
  if tr '\0' '\n' < /proc/$claude/environ | grep -q '^CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR='; then
    echo "claude_environ_names_fd=yes"; else echo "claude_environ_names_fd=no"; fi
else echo "claude_environ=unreadable"; fi
start=$(grep -m1 ' r' /proc/$claude/maps 2>/dev/null | cut -d- -f1)
if [ -n "$start" ] && dd if=/proc/$claude/mem of=/dev/null bs=1 count=1 skip=$((0x$start)) status=none 2>/dev/null; then
  echo "claude_mem=readable"
  hit=$(grep ' rw-p ' /proc/$claude/maps | head -n 256 | while read -r range rest; do
    s=$((0x${range%-*})); e=$((0x${range#*-})); n=$((e - s))
    [ "$n" -gt 67108864 ] && n=67108864
    timeout 5 dd if=/proc/$claude/mem bs=1M iflag=skip_bytes,count_bytes skip=$s count=$n status=none 2>/dev/null
  done | found)
  echo "claude_mem_token=$(verdict "$hit")"
else echo "claude_mem=unreadable"; fi
if ls /proc/$claude/fd > /dev/null 2>&1; then
  if [ -e /proc/$claude/fd/5 ]; then echo "claude_fd5=open"; else echo "claude_fd5=closed"; fi
  hits=""
  for f in /proc/$claude/fd/*; do
    n=${f##*/}
    [ "$n" -le 2 ] 2>/dev/null && continue
    [ -f "$f" ] || [ -p "$f" ] || continue
    h=$(timeout 1 head -c 1048576 "$f" 2>/dev/null | found)
    [ -n "$h" ] && hits="$hits ${f##*/}"
  done
  echo "claude_fds=$(verdict "$hits")"
else echo "claude_fd5=unreadable"; echo "claude_fds=unreadable"; fi
"#;

/// The made-up token of the probe's control.
const CONTROL_TOKEN: &str = "sk-ant-oat01-00000000000000000000000000000000";

/// The probe's `key=value` lines.
fn parse_view(text: &str) -> std::collections::BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// What the tools see: the turn's Bash tool runs the probe (`TOOLS_VIEW`). The token (by
/// hash) is not in the tool's environment, not on any descriptor it holds, not in Claude Code's
/// environment (or that cannot be read), not on Claude Code's descriptors (or those cannot be
/// read); fd 5 is closed in the tool; Claude Code's `/proc/PID/mem` cannot be read (relay's
/// preload makes it non-dumpable; before it, the tool read it and found the token there). The
/// probe finds Claude Code by its command line, which stays readable. Controls: the probe finds
/// its made-up token, and run on the host with the token in its environment it says `present`.
#[test]
fn tools_view_turn() {
    let s = Setup::new(|project, hash| {
        let probe = project.join("tools-view.sh");
        let view = project.join("tools-view.txt");
        let command = format!(
            "sh {} {hash} {} > {} 2>&1; cat {}",
            probe.display(),
            sha256_hex(CONTROL_TOKEN.as_bytes()),
            view.display(),
            view.display()
        );
        vec![Step::bash(&command), Step::text(FINAL)]
    });
    std::fs::write(s.project.join("tools-view.sh"), TOOLS_VIEW).unwrap();
    let hash = sha256_hex(s.token.as_bytes());

    // Control on the host: the probe sees the token in an environment that holds it.
    let control = Command::new("sh")
        .arg(s.project.join("tools-view.sh"))
        .arg(&hash)
        .arg(sha256_hex(CONTROL_TOKEN.as_bytes()))
        .env("SOME_VARIABLE", &s.token)
        .stdin(Stdio::null())
        .output()
        .expect("run the probe on the host");
    let on_host = parse_view(&String::from_utf8_lossy(&control.stdout));
    assert_eq!(
        on_host.get("control").map(String::as_str),
        Some("present"),
        "{on_host:?}"
    );
    assert_eq!(
        on_host.get("tool_env").map(String::as_str),
        Some("present"),
        "{on_host:?}"
    );

    let turn = s.turn("Run the scripted probe.");
    s.report("tools_view_turn");
    s.assert_completed(&turn, 1);
    let text = std::fs::read_to_string(s.project.join("tools-view.txt"))
        .expect("the probe wrote its report");
    assert!(!text.contains(&s.token));
    let view = parse_view(&text);
    eprintln!("tools' view: {view:#?}");
    let results = results_at(&s.api.main_requests(), 1);
    assert!(
        results.iter().any(|r| r.contains("tool_env=")),
        "the probe's report did not come back to the API: {results:?}"
    );
    let get = |k: &str| view.get(k).map(String::as_str).unwrap_or("missing");
    assert_eq!(get("control"), "present", "the probe is blind: {view:?}");
    assert_eq!(get("tool_env"), "absent", "{view:?}");
    assert_eq!(get("tool_fds"), "absent", "{view:?}");
    assert_eq!(get("tool_fd5"), "closed", "{view:?}");
    assert_eq!(
        get("claude"),
        "found",
        "the probe did not find Claude Code: {view:?}"
    );
    assert!(
        ["absent", "unreadable"].contains(&get("claude_environ")),
        "{view:?}"
    );
    assert!(
        ["absent", "unreadable"].contains(&get("claude_fds")),
        "{view:?}"
    );
    assert_eq!(get("claude_mem"), "unreadable", "{view:?}");
    s.assert_bearer_everywhere();
    s.assert_no_token_on_disk();
}

/// A turn whose script asks the Bash tool to `curl` an unlisted host (a second listener on
/// `127.0.0.1`): the proxy refuses it (`403`, a `network_denied` event naming its port), the
/// listener receives nothing, and the turn still ends. The refusal reaches the person: the
/// `403`'s text names relay, the host and the setting that would allow it, and so does the
/// event, which `relay-host events` prints.
#[test]
fn unlisted_host_turn() {
    let other = Listener::start(HELLO);
    let port = other.port;
    let s = Setup::new(move |_, _| {
        let command = format!(
            "curl -s -m 10 -w '\\nhttp=%{{http_code}}\\n' http://127.0.0.1:{port}/; \
             echo curl_exit=$?"
        );
        vec![Step::bash(&command), Step::text(FINAL)]
    });
    let turn = s.turn("Fetch the scripted page.");
    s.report("unlisted_host_turn");
    s.assert_completed(&turn, 1);
    assert_eq!(other.connections(), 0, "the unlisted listener was reached");
    let denied = s.denied();
    assert!(
        denied.contains(&format!("127.0.0.1:{port}")),
        "no refusal of 127.0.0.1:{port}: {denied:?}"
    );
    let allow = format!(
        "to allow it, add \"127.0.0.1:{port}\" to the template's network allow-list \
         (\"network\": {{\"allow\": [...]}}) in relay-host's settings"
    );
    let results = results_at(&s.api.main_requests(), 1);
    let said = format!("relay: 127.0.0.1:{port} refused by relay's network allow-list");
    assert!(
        results
            .iter()
            .any(|r| r.contains("http=403") && r.contains(&said) && r.contains(&allow)),
        "curl did not get the proxy's 403 with its text: {results:?}"
    );
    let events = s.host(&["events"]).output().expect("relay-host events");
    let text = String::from_utf8_lossy(&events.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("network_denied") && l.contains(&format!("127.0.0.1:{port}\""))),
        "relay-host events does not show the refusal with what would allow it:\n{text}"
    );
    s.assert_bearer_everywhere();
    s.assert_no_token_on_disk();
}

/// The Bash turn through `relay-host run --template claude-code` (the project is the current
/// folder): the file the tool wrote is on the host, the Bearer token reached the stand-in (by
/// hash), the audit row is a sandboxed launch with the token on a descriptor.
#[test]
fn bash_turn_by_run() {
    let s = Setup::new(|_, _| {
        vec![
            Step::bash("printf 'run turn\\n' > by-run.txt && git status --short"),
            Step::text(FINAL),
        ]
    });
    let turn = s.turn_by_run("Run the scripted command.");
    s.report("bash_turn_by_run");
    s.assert_completed(&turn, 1);
    assert_eq!(
        std::fs::read_to_string(s.project.join("by-run.txt")).unwrap(),
        "run turn\n"
    );
    let rows = s.log("audit.jsonl");
    let row = rows.last().expect("an audit row");
    assert_eq!(row["outcome"], "ok", "{row}");
    assert_eq!(row["sandbox"], true, "{row}");
    assert_eq!(row["token"], "fd", "{row}");
    s.assert_bearer_everywhere();
    s.assert_no_token_on_disk();
}

/// A gateway named by `api_base_url` alone, and a fresh Claude config (never seeded by the
/// test): the turn runs, the fixture got the Bearer token (by hash), relay marked onboarding
/// done (its check would go to api.anthropic.com, which the allow-list does not reach), and
/// the audit row shows the allow-list with the gateway's address.
#[test]
fn gateway_turn_on_a_fresh_claude_config() {
    let s = Setup::fresh(|_, _| {
        vec![
            Step::bash("printf 'gateway turn\\n' > gateway.txt"),
            Step::text(FINAL),
        ]
    });
    assert!(!s.claude_config().join(".claude.json").exists());
    let turn = s.turn_by_run("Run the scripted command.");
    s.report("gateway_turn_on_a_fresh_claude_config");
    s.assert_completed(&turn, 1);
    assert_eq!(
        std::fs::read_to_string(s.project.join("gateway.txt")).unwrap(),
        "gateway turn\n"
    );
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(s.claude_config().join(".claude.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["hasCompletedOnboarding"], true, "{state}");
    s.assert_bearer_everywhere();
    s.assert_no_token_on_disk();
}

/// A terminal-UI turn: `relay-host run --template claude-code` in a tmux pane (the relay-owned
/// Claude config seeded past onboarding), the prompt typed in; the Bash tool's file is on the
/// host, the stand-in walked the script with the Bearer token (by hash), the final text is on
/// the screen, no file holds the token.
#[test]
fn tui_turn() {
    let s = Setup::new(|_, _| {
        vec![
            Step::bash("printf 'tui turn\\n' > by-tui.txt"),
            Step::text(FINAL),
        ]
    });
    let tmux = s.start_tui();
    let (screen, ready) = tmux.wait(Duration::from_secs(60), &at_prompt);
    assert!(ready, "the terminal UI did not reach its prompt:\n{screen}");
    assert!(!screen.contains(&s.token));
    let out = tmux.run(&["send-keys", "-t", "turn", "-l", "Run the scripted command."]);
    assert!(out.status.success(), "{out:?}");
    std::thread::sleep(Duration::from_millis(300));
    tmux.run(&["send-keys", "-t", "turn", "Enter"]);
    let file = s.project.join("by-tui.txt");
    let (screen, done) = tmux.wait(Duration::from_secs(60), &|t| {
        t.contains(FINAL) && file.is_file()
    });
    s.report("tui_turn");
    assert!(done, "the turn did not finish on screen:\n{screen}");
    assert!(!screen.contains(&s.token));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "tui turn\n");
    let steps: Vec<Option<usize>> = s.api.main_requests().iter().map(|r| r.step).collect();
    assert!(
        steps.contains(&Some(0)) && steps.contains(&Some(1)),
        "the main conversation did not walk the script: {steps:?}"
    );
    // Leave the UI and wait for relay-host to end (and clean up) before the scan.
    tmux.run(&["send-keys", "-t", "turn", "-l", "/exit"]);
    std::thread::sleep(Duration::from_millis(300));
    tmux.run(&["send-keys", "-t", "turn", "Enter"]);
    assert!(
        tmux.gone(Duration::from_secs(20)),
        "relay-host did not end after /exit:\n{}",
        tmux.screen()
    );
    drop(tmux);
    s.assert_bearer_everywhere();
    s.assert_no_token_on_disk();
}

/// SIGTERM to `relay-host` while the real Claude Code runs a `-p` turn (`--output-format
/// stream-json`) whose Bash tool is busy (`tail -f /dev/null`): the signal reaches Claude Code's
/// process group inside the sandbox (the tool's process with it), and Claude Code, alive after
/// the signal, still prints the tool's result line before it ends with 143 (its own exit on
/// SIGTERM); nothing of the session is left. Before, bwrap's death took the sandbox down with
/// SIGKILL and Claude Code printed nothing after the signal. The direct control (the same Claude
/// Code, script and signal to its pid, no relay) prints a tool result line and exits 143 too;
/// the tool's own status differs (143 through relay, whose signal reaches the whole group; 137
/// directly, where Claude Code kills its tool itself).
#[test]
fn sigterm_to_the_host_reaches_claude_which_ends_its_own_way() {
    let s = Setup::new(|_, _| vec![Step::bash(BUSY), Step::text(FINAL)]);
    relay_tests::install::assert_as_shipped(&s.config);
    let req = s.root.join("request.json");
    let body = json!({
        "kind": "terminal",
        "template": "claude-code",
        "project": s.project,
        "extra_args": stream_args("Run the scripted command."),
    });
    std::fs::write(&req, body.to_string()).unwrap();
    let start = std::time::Instant::now();
    let host = s
        .host(&["launch", req.to_str().unwrap()])
        .spawn()
        .expect("spawn relay-host");
    let pid = host.id() as i32;
    // The tool's process, found among all processes (Claude Code may spawn off its main
    // thread, whose children the main threads' lists do not show).
    let busy = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c == b"tail\x00-f\x00/dev/null\x00")
        })
    };
    if !relay_tests::wait_until(Duration::from_secs(90), &busy) {
        // SAFETY: kill takes integers only; the group is our own child's.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        let turn = relay_tests::agent::Turn::wait(host, start);
        panic!("the turn's `{BUSY}` never ran: {}", turn.describe());
    }
    let session = relay_tests::fixture::descendants(pid);
    // SAFETY: kill takes integers only; the pid is our own child, not yet reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let turn = relay_tests::agent::Turn::wait(host, start);
    assert!(!turn.killed, "{}", turn.describe());
    assert!(
        !turn.stdout.contains(&s.token) && !turn.stderr.contains(&s.token),
        "the turn's output holds the token"
    );
    assert!(
        has_tool_result(&turn.stdout),
        "Claude Code printed no result of the tool after the signal: {}",
        turn.describe()
    );
    assert_eq!(turn.code, Some(143), "{}", turn.describe());
    // The direct control: the same Claude Code, API script and signal, no relay.
    let direct = direct_sigterm_turn();
    assert!(
        has_tool_result(&direct.stdout),
        "the control printed no tool result either: {}",
        direct.describe()
    );
    assert_eq!(direct.code, turn.code, "{}", direct.describe());
    let gone = relay_tests::wait_until(Duration::from_secs(5), &|| {
        session
            .iter()
            .all(|p| !std::path::Path::new(&format!("/proc/{p}/cmdline")).exists())
    });
    assert!(gone, "processes of the session left");
}

/// True when a `stream-json` output holds the result line of a tool call (the script's one).
fn has_tool_result(stdout: &str) -> bool {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|l| l["type"] == "user" && l["message"]["content"][0]["type"] == "tool_result")
}

/// The control of [`sigterm_to_the_host_reaches_claude_which_ends_its_own_way`]: Claude Code run
/// directly (its own setup: the API script starts afresh) on the same `-p` turn, the token in
/// its environment, SIGTERM sent to its pid once the tool runs.
fn direct_sigterm_turn() -> relay_tests::agent::Turn {
    let s = Setup::new(|_, _| vec![Step::bash(BUSY), Step::text(FINAL)]);
    let mut cmd = Command::new(&s.installed.claude);
    cmd.args(stream_args("Run the scripted command."))
        .env_clear()
        .env("PATH", &s.path)
        .env("HOME", &s.home)
        .env("CLAUDE_CONFIG_DIR", s.claude_config())
        .env("ANTHROPIC_BASE_URL", s.api.base_url())
        .env("CLAUDE_CODE_OAUTH_TOKEN", &s.token)
        .current_dir(&s.project)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    relay_tests::run::default_signals(&mut cmd);
    let start = std::time::Instant::now();
    let child = cmd.spawn().expect("spawn claude");
    let pid = child.id() as i32;
    let busy = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c == b"tail\x00-f\x00/dev/null\x00")
        })
    };
    let ran = relay_tests::wait_until(Duration::from_secs(90), &busy);
    // SAFETY: kill takes integers only; the pid is our own child, not yet reaped.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let turn = relay_tests::agent::Turn::wait(child, start);
    assert!(ran, "the control's `{BUSY}` never ran: {}", turn.describe());
    assert!(
        !turn.stdout.contains(&s.token) && !turn.stderr.contains(&s.token),
        "the control's output holds the token"
    );
    turn
}

/// The busy Bash command of [`sigterm_to_the_host_reaches_claude_which_ends_its_own_way`]
/// (Claude Code refuses a long `sleep`).
const BUSY: &str = "tail -f /dev/null";

/// [`relay_tests::agent::print_args`] with the output as a stream of JSON lines.
fn stream_args(prompt: &str) -> Vec<String> {
    let mut args = relay_tests::agent::print_args(prompt);
    let last = args.len() - 1;
    args[last] = "stream-json".into();
    args.push("--verbose".into());
    args
}
