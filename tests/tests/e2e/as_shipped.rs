//! The headline command as a new user runs it: the built-in `claude-code` template exactly as
//! shipped (no gateway), only `claude_token_file` set, a fresh state folder, the real Claude Code
//! in a fake Anthropic internet ([`relay_tests::fake_internet`]): `api.anthropic.com` is the
//! Messages API fixture, the other hosts Claude Code's first run reaches answer onboarding's
//! checks. The terminal UI reaches its prompt logged in and runs a Bash tool call, on the first
//! launch and the next; for root and `nobody`, npm's layout and the native installer's, in
//! stand-in mode (the default on Linux) and pipe mode (the opt-out). The token (by hash) reaches only `api.anthropic.com`, only as
//! `Authorization: Bearer`.
//!
//! Needs the binaries (`cargo build -p relay-host -p relay-shim -p relay-tests --bins`), the CLI
//! (see `agent_turn.rs`), root, `ip` and tmux.
#![cfg(target_os = "linux")]

use std::sync::Mutex;
use std::time::{Duration, Instant};

use relay_tests::agent::{print_args, Setup, FINAL, NOBODY};
use relay_tests::fake_internet::{FakeInternet, API};
use relay_tests::install::Install;
use relay_tests::messages_api::Step;
use relay_tests::scan::{sandbox_pids, scan_memory_and_shapes};
use relay_tests::stand_in::{wait_step, Fd5Recorder, STAND_IN, TOKEN_PREFIX};
use relay_tests::tmux::{at_prompt, Tmux};
use relay_tests::{sha256_hex, token_random_part};

/// One terminal UI at a time: each costs a few seconds of both cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The file each launch's Bash tool call appends a line to.
const RUNS: &str = "runs.txt";

/// The script: one Bash tool call appending to [`RUNS`], then the final text.
fn script() -> Vec<Step> {
    vec![
        Step::bash(&format!("echo launched >> {RUNS}")),
        Step::text(FINAL),
    ]
}

/// How Claude Code 2.1.332 says its first run failed or stopped short of the prompt.
fn stuck(screen: &str) -> bool {
    ["Unable to connect", "Select login method", "No, exit"]
        .iter()
        .any(|w| screen.contains(w))
}

/// The lines in the project's [`RUNS`].
fn runs(s: &Setup) -> usize {
    std::fs::read_to_string(s.project.join(RUNS)).map_or(0, |t| t.lines().count())
}

/// The fake internet of `s`.
fn net(s: &Setup) -> &FakeInternet {
    s.internet.as_ref().expect("a setup in the fake internet")
}

/// One launch of the terminal UI (`relay-host run`): it reaches its prompt (how long that took
/// is returned), a typed prompt runs the script's Bash call (the `n`th line of [`RUNS`]), and
/// `/exit` ends relay-host.
fn tui_launch(s: &Setup, what: &str, n: usize) -> Duration {
    let start = Instant::now();
    let tmux = s.start_tui();
    let gone = |t: &Tmux| !t.run(&["has-session", "-t", "turn"]).status.success();
    let (screen, _) = tmux.wait(Duration::from_secs(90), &|t| {
        at_prompt(t) || stuck(t) || gone(&tmux)
    });
    let to_prompt = start.elapsed();
    let hits = net(s).report(start);
    assert!(
        at_prompt(&screen) && !stuck(&screen),
        "{what}: the terminal UI did not reach its prompt after {to_prompt:?}:\n{screen}\n\
         the fake internet saw:\n{hits}\nrelay refused {:?}",
        s.denied()
    );
    eprintln!("{what}: at the prompt after {to_prompt:?}; the fake internet saw:\n{hits}");
    tmux.run(&["send-keys", "-t", "turn", "-l", "Run the scripted command."]);
    std::thread::sleep(Duration::from_millis(300));
    tmux.run(&["send-keys", "-t", "turn", "Enter"]);
    let (screen, done) = tmux.wait(Duration::from_secs(90), &|t| {
        t.contains(FINAL) && runs(s) == n
    });
    assert!(done, "{what}: the turn did not finish on screen:\n{screen}");
    tmux.run(&["send-keys", "-t", "turn", "-l", "/exit"]);
    std::thread::sleep(Duration::from_millis(300));
    tmux.run(&["send-keys", "-t", "turn", "Enter"]);
    assert!(
        tmux.gone(Duration::from_secs(20)),
        "{what}: relay-host did not end after /exit"
    );
    to_prompt
}

/// The first launch and the next of the terminal UI as shipped, with `install` as `user`, in
/// pipe mode (`"token_mode": "pipe"`) and as shipped, in stand-in mode (each in a setup of its
/// own); the token only to the API.
fn first_and_next(install: Install, user: Option<u32>) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Builds the binaries first (when under `cargo test`), out of the timings.
    relay_tests::relay_host();
    for stand_in in [false, true] {
        let what = format!("{install:?} as {user:?}, stand-in {stand_in}");
        let s = Setup::as_shipped(install, user, |_, _| script());
        let start = Instant::now();
        let fd5 = (stand_in && install == Install::Native).then(|| Fd5Recorder::install(&s, false));
        if !stand_in {
            // Stand-in mode is the default: nothing set. Pipe mode is the explicit opt-out.
            s.write_settings_with(serde_json::json!({"token_mode": "pipe"}));
        }
        s.hand_over();
        let first = tui_launch(&s, &format!("{what}, first launch"), 1);
        let next = tui_launch(&s, &format!("{what}, next launch"), 2);
        eprintln!("{what}: to the prompt {first:?} first, {next:?} next");
        let token = sha256_hex(s.token.as_bytes());
        net(&s).assert_only_bearer_to_api(&token);
        assert_every_api_credential_is(&s, &token);
        if let Some(fd5) = fd5 {
            let got = fd5.hashes();
            assert_eq!(got.len(), 2, "{what}: fd 5 of each launch: {got:?}");
            assert!(
                got.iter().all(|h| *h != token),
                "{what}: the session got the token"
            );
        }
        eprintln!(
            "{what}: the fake internet saw:\n{}\nrelay refused {:?}",
            net(&s).report(start),
            s.denied()
        );
        assert_only_the_api(&s);
        s.assert_no_token_on_disk();
    }
}

/// With onboarding answered, nothing but `api.anthropic.com` was reached: not
/// `platform.claude.com` (onboarding's other check), nor a host the allow-list refuses.
fn assert_only_the_api(s: &Setup) {
    let elsewhere: Vec<String> = (net(s).hits().iter())
        .filter(|h| h.host != API)
        .map(|h| format!("{} {} {}", h.host, h.method, h.path))
        .collect();
    assert!(elsewhere.is_empty(), "reached {elsewhere:?}");
}

/// Every credential that reached the API is the real token: in stand-in mode the session's
/// stand-in never got there (its proxy put the token in its place), in pipe mode nothing else
/// was sent.
fn assert_every_api_credential_is(s: &Setup, token: &str) {
    for h in net(s).hits().iter().filter(|h| h.host == API) {
        for c in &h.credentials {
            assert_eq!(c.sha256, token, "{} {}: not the token", h.method, h.path);
        }
    }
}

#[test]
fn first_run_as_shipped_npm_as_root() {
    first_and_next(Install::Npm, None);
}

#[test]
fn first_run_as_shipped_native_as_root() {
    first_and_next(Install::Native, None);
}

#[test]
fn first_run_as_shipped_npm_as_a_user() {
    first_and_next(Install::Npm, Some(NOBODY));
}

#[test]
fn first_run_as_shipped_native_as_a_user() {
    first_and_next(Install::Native, Some(NOBODY));
}

/// A print-mode turn as shipped (stand-in mode, the default) with no `upstream_ca_file`: the
/// fake CA is trusted only
/// through the system bundle, which `relay-stand-in` trusts as Claude Code does. The session's
/// fd 5 held a stand-in; every credential that reached the API was the token.
#[test]
fn stand_in_print_mode_trusts_the_system_store() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    relay_tests::relay_host();
    let s = Setup::as_shipped(Install::Native, None, |_, _| script());
    let fd5 = Fd5Recorder::install(&s, false);
    // As shipped: stand-in mode by default, no `upstream_ca_file`.
    let settings = std::fs::read_to_string(s.config.join("settings.json")).unwrap();
    assert!(!settings.contains("upstream_ca_file"), "{settings}");
    assert!(!settings.contains("token_mode"), "{settings}");
    s.hand_over();
    let start = Instant::now();
    let turn = s.turn_by_run("Run the scripted command.");
    eprintln!(
        "stand-in print mode: {:?}; the fake internet saw:\n{}\nrelay refused {:?}",
        turn.took,
        net(&s).report(start),
        s.denied()
    );
    s.assert_completed(&turn, 1);
    let token = sha256_hex(s.token.as_bytes());
    let got = fd5.hashes();
    assert_eq!(got.len(), 1, "fd 5 of the launch: {got:?}");
    assert_ne!(got[0], token, "the session got the token");
    net(&s).assert_only_bearer_to_api(&token);
    assert_every_api_credential_is(&s, &token);
}

/// As shipped, when `relay-stand-in` does not trust `api.anthropic.com`'s certificate (the
/// fake internet's CA taken out of the system bundle relay-host hands it, as a TLS proxy's
/// unknown CA would be): the print-mode turn fails naming the cause and
/// `upstream_ca_file`, no request reaches the API, and Claude Code gives up on each of its
/// requests at the first refusal: each is one attempt to reach the host (one connection the
/// fixture accepts, its TLS then refused by relay), not one per retry. Seen red with the
/// refusal answered `502`: 15 attempts and 21 s (its start-up fetches of the policy limits and the
/// managed settings retry every 5xx five times, `x-should-retry` or not); answered `421`: 4 or 5.
#[test]
fn stand_in_with_an_untrusted_api_certificate_gives_up_at_the_first_refusal() {
    /// The most connections Claude Code 2.1.332's print mode makes to `api.anthropic.com` when
    /// none of its requests is retried: its start-up fetches (the policy limits' may be sent
    /// twice, hedged, when the first is slow), the message, and room for one more (4 and 5
    /// seen). Each retried fetch alone makes six.
    const MAX_ATTEMPTS: usize = 8;
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    relay_tests::relay_host();
    let s = Setup::as_shipped(Install::Native, None, |_, _| script());
    // The machine's own bundle, without the fake internet's CA, in its place.
    let own = std::fs::read("/etc/ssl/certs/ca-certificates.crt").unwrap_or_default();
    std::fs::write(net(&s).bundle_file(), own).unwrap();
    s.hand_over();
    let start = Instant::now();
    let turn = s.turn_by_run("Run the scripted command.");
    let attempts = s.api.connections();
    eprintln!(
        "untrusted: {:?}, {attempts} attempts; the fake internet saw:\n{}\nrelay refused {:?}",
        turn.took,
        net(&s).report(start),
        s.denied()
    );
    let out = format!("{}{}", turn.stdout, turn.stderr);
    assert!(!turn.killed && turn.code != Some(0), "{}", turn.describe());
    assert!(
        out.contains("from an unknown issuer"),
        "{}",
        turn.describe()
    );
    assert!(out.contains("upstream_ca_file"), "{}", turn.describe());
    assert!(s.api.seen().is_empty(), "a request reached the API");
    assert!(attempts >= 1, "no attempt reached the fixture");
    assert!(
        attempts <= MAX_ATTEMPTS,
        "{attempts} attempts to reach api.anthropic.com (at most {MAX_ATTEMPTS}): Claude Code \
         retried relay's refusal: {}",
        turn.describe()
    );
}

/// As shipped (stand-in mode, nothing set) the real token never enters the sandbox: while a
/// print-mode turn waits in its Bash call, a scan of every process of the session's sandbox finds
/// neither the token nor its random part, and is not blind: Claude Code's memory holds a
/// token-shaped string hashing to what fd 5 carried (the stand-in). Every credential that
/// reached the API was the token. The pipe-mode control (the same scan finds the token):
/// `tests/tests/e2e/stand_in.rs::in_pipe_mode_the_scan_finds_the_real_token_in_the_sandbox`.
#[test]
fn as_shipped_no_process_of_the_sandbox_holds_the_real_token() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    relay_tests::relay_host();
    let s = Setup::as_shipped(Install::Native, None, |_, _| {
        vec![wait_step("scan"), Step::text(FINAL)]
    });
    let fd5 = Fd5Recorder::install(&s, false);
    let mut run = relay_tests::stand_in::launch(&s, Some(STAND_IN), &print_args("Go on."));
    let sync = |what: &str| s.project.join(format!(".sync/scan.{what}"));
    run.wait_for(&sync("ready"), Duration::from_secs(120));
    let pids = sandbox_pids(run.pid());
    let random = token_random_part(&s.token).as_bytes();
    let shape = Some((TOKEN_PREFIX.as_bytes(), random.len()));
    let scan = scan_memory_and_shapes(&pids, &[s.token.as_bytes(), random], shape);
    std::fs::write(sync("go"), "").unwrap();
    let turn = run.finish();
    eprintln!("the sandbox's processes:\n{}", scan.summary());
    s.assert_completed(&turn, 1);
    let verdict = std::fs::read_to_string(sync("verdict")).unwrap_or_default();
    assert_eq!(
        verdict.trim(),
        "went-on",
        "the session did not wait for the scan"
    );
    assert!(pids.len() >= 2, "too few sandbox processes found: {pids:?}");
    let token = sha256_hex(s.token.as_bytes());
    let got = fd5.hashes();
    assert_eq!(got.len(), 1, "fd 5 of the launch: {got:?}");
    assert_ne!(got[0], token, "the session got the token");
    assert!(
        scan.shaped.contains_key(&got[0]),
        "the scan is blind: no stand-in in the sandbox's memory ({} shaped)",
        scan.shaped.len()
    );
    assert_eq!(
        scan.total(0),
        0,
        "the real token is in the sandbox's memory"
    );
    assert_eq!(
        scan.total(1),
        0,
        "its random part is in the sandbox's memory"
    );
    assert!(!scan.shaped.contains_key(&token));
    net(&s).assert_only_bearer_to_api(&token);
    assert_every_api_credential_is(&s, &token);
}

/// A print-mode turn (`relay-host run -- -p ...`) as shipped runs the script; then
/// `relay-host run --continue` resumes that conversation (the fixture sees its earlier turns).
#[test]
fn print_mode_and_continue_as_shipped() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = Setup::as_shipped(Install::Npm, None, |_, _| script());
    relay_tests::relay_host();
    let start = Instant::now();
    let turn = s.turn_by_run("Run the scripted command.");
    eprintln!(
        "print mode: {:?}; the fake internet saw:\n{}",
        turn.took,
        net(&s).report(start)
    );
    s.assert_completed(&turn, 1);
    assert_eq!(runs(&s), 1);

    // The conversation goes on where it ended: its two answers come back to the fixture, which
    // answers past the script's end.
    let mut args = vec!["run", "--template", "claude-code", "--continue", "--"];
    let extra = print_args("Go on.");
    args.extend(extra.iter().map(String::as_str));
    let turn = s.finish(s.host(&args));
    assert_eq!(turn.code, Some(0), "{}", turn.describe());
    assert_eq!(
        turn.result()["result"],
        "The scripted turn is over.",
        "{}",
        turn.describe()
    );
    let last = s.api.main_requests().pop().expect("a main request");
    assert_eq!(
        last.step,
        Some(2),
        "the continued conversation did not come back: {last:?}"
    );
    assert_eq!(runs(&s), 1, "the continued turn ran the script again");
    let token = sha256_hex(s.token.as_bytes());
    net(&s).assert_only_bearer_to_api(&token);
    assert_only_the_api(&s);
}
