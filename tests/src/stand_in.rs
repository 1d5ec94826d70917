//! Stand-in mode's test harness, over [`crate::agent::Setup`], written against relay-host's
//! settings keys (not its Rust types): the template's `token_mode` (`"stand_in"`, the built-in
//! `claude-code`'s default on Linux, or `"pipe"`) and the top-level `upstream_ca_file`.
//!
//! - [`settings`](crate::stand_in::settings) (written with [`crate::world::World::settings`]):
//!   the built-in `claude-code` template as shipped, `api_base_url` at the fixture, `token_mode`
//!   as asked, `upstream_ca_file` at the test CA;
//!   [`assert_as_shipped_in`](crate::stand_in::assert_as_shipped_in) fails a turn whose template
//!   differs from the built-in one in anything else.
//! - [`Fd5Recorder`](crate::stand_in::Fd5Recorder): what fd 5 carried into each launch, recorded by
//!   a wrapper that Claude Code in the native installer's layout is reached through
//!   (`~/.local/bin/claude` -> `versions/claude-fd5`, a shell script beside the real binary): it
//!   reads fd 5, appends the SHA-256 of what it read (and, for the replay tests only, the value
//!   itself) to a file in the project, puts the same bytes on a fresh fd 5 and `exec`s the real
//!   binary. The template, its environment and relay's launch are untouched; only the `claude`
//!   found on `PATH` differs.
//! - [`launch`](crate::stand_in::launch): a token launch of `claude-code` (a `-p` turn, or `auth
//!   status`) started in the background ([`Running`](crate::stand_in::Running)), so a test can act
//!   while the session still runs.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::agent::{Setup, Turn};
use crate::install::shipped_settings;

/// `token_mode` for stand-in mode.
pub const STAND_IN: &str = "stand_in";

/// What every Claude OAuth token (and so every stand-in) starts with.
pub const TOKEN_PREFIX: &str = "sk-ant-oat01-";

/// The operator's settings of a stand-in test: [`shipped_settings`] at `gateway`, the template's
/// `token_mode` set to `mode` (`None`: `"pipe"`, the control; the built-in's default on Linux
/// is stand-in mode), `upstream_ca_file` at `ca_file` (if any), and `extra` merged in: its `template` object's keys into the template (`network`), its other keys
/// at the top (`trusted_projects`).
///
/// ```
/// let s = relay_tests::stand_in::settings("https://127.0.0.1:9", Some("stand_in"),
///     Some(std::path::Path::new("/ca.pem")), serde_json::json!({}));
/// assert_eq!(s["templates"][0]["token_mode"], "stand_in");
/// assert_eq!(s["upstream_ca_file"], "/ca.pem");
/// let pipe = relay_tests::stand_in::settings("https://127.0.0.1:9", None, None, serde_json::json!({}));
/// assert_eq!(pipe["templates"][0]["token_mode"], "pipe");
/// ```
pub fn settings(gateway: &str, mode: Option<&str>, ca_file: Option<&Path>, extra: Value) -> Value {
    let mut s = shipped_settings(gateway);
    s["templates"][0]["token_mode"] = json!(mode.unwrap_or("pipe"));
    if let Some(ca) = ca_file {
        s["upstream_ca_file"] = json!(ca);
    }
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        if k == "template" {
            for (tk, tv) in v.as_object().cloned().unwrap_or_default() {
                s["templates"][0][tk] = tv;
            }
        } else {
            s[k] = v;
        }
    }
    s
}

/// Panics unless every template of the settings file in `config` is the built-in one of its id
/// as shipped, compared as JSON: only `api_base_url`, `network` and `token_mode` may differ,
/// and the template's effective `token_mode` (its own, else the built-in's, else `"pipe"`) must
/// be `mode` (`None`: `"pipe"`, the control).
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let s = relay_tests::stand_in::settings("https://127.0.0.1:9", Some("stand_in"), None, serde_json::json!({}));
/// std::fs::write(dir.path().join("settings.json"), s.to_string())?;
/// relay_tests::stand_in::assert_as_shipped_in(dir.path(), Some("stand_in"));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn assert_as_shipped_in(config: &Path, mode: Option<&str>) {
    let text = std::fs::read_to_string(config.join("settings.json")).expect("the settings");
    let v: Value = serde_json::from_str(&text).expect("settings JSON");
    let strip = |t: &Value| {
        let mut t = t.clone();
        if let Some(o) = t.as_object_mut() {
            for k in ["api_base_url", "network", "token_mode"] {
                o.remove(k);
            }
        }
        t
    };
    for t in v["templates"].as_array().expect("templates") {
        let id = t["id"].as_str().expect("an id");
        let built_in = serde_json::to_value(crate::install::shipped(id)).unwrap();
        let effective = t.get("token_mode").unwrap_or(&built_in["token_mode"]);
        assert_eq!(
            effective.as_str().unwrap_or("pipe"),
            mode.unwrap_or("pipe"),
            "template {id:?}: token_mode"
        );
        assert_eq!(
            strip(t),
            strip(&built_in),
            "the test's template {id:?} is not the built-in one as shipped (only api_base_url, \
             network and token_mode may differ)"
        );
    }
}

/// How long a [`wait_step`] waits for the test at most (below the Bash tool's 2 minutes).
pub const WAIT_SECONDS: u32 = 100;

/// A Bash step that says `ready` by creating `.sync/NAME.ready` in the project, then waits
/// until the test creates `.sync/NAME.go` (at most [`WAIT_SECONDS`]); writes `went-on` (or
/// `timed-out`) to `.sync/NAME.verdict`. A test acts (scans) while the session waits there.
///
/// ```
/// let step = relay_tests::stand_in::wait_step("scan");
/// # drop(step);
/// ```
pub fn wait_step(name: &str) -> crate::messages_api::Step {
    crate::messages_api::Step::bash(&format!(
        "mkdir -p .sync && touch .sync/{name}.ready && i=0 && \
         while [ ! -e .sync/{name}.go ] && [ $i -lt {} ]; do sleep 0.2; i=$((i+1)); done; \
         if [ -e .sync/{name}.go ]; then v=went-on; else v=timed-out; fi; \
         echo $v > .sync/{name}.verdict; echo $v",
        WAIT_SECONDS * 5
    ))
}

/// What fd 5 carried into each launch of a setup (see the module).
#[derive(Debug)]
pub struct Fd5Recorder {
    dir: PathBuf,
}

impl Fd5Recorder {
    /// Puts the wrapper in front of the native layout's binary of `s` (which must be installed
    /// as [`crate::install::Install::Native`]); `keep_values`: the wrapper also keeps each value
    /// (the replay tests copy the stand-in out this way; never with the real token in play).
    ///
    /// ```no_run
    /// use relay_tests::agent::Setup;
    /// use relay_tests::install::Install;
    /// let s = Setup::with(Install::Native, None, |_, _| vec![]);
    /// let fd5 = relay_tests::stand_in::Fd5Recorder::install(&s, false);
    /// assert!(fd5.hashes().is_empty());
    /// ```
    pub fn install(s: &Setup, keep_values: bool) -> Fd5Recorder {
        let link = &s.installed.claude;
        let real = std::fs::read_link(link).expect("the native layout's claude link");
        let dir = s.project.join(".fd5");
        std::fs::create_dir_all(&dir).unwrap();
        let keep = if keep_values {
            format!("printf '%s\\n' \"$t\" >> '{}/values'\n", dir.display())
        } else {
            String::new()
        };
        let script = format!(
            "#!/bin/bash\n\
             t=$(cat <&5)\n\
             printf '%s' \"$t\" | sha256sum | cut -c1-64 >> '{dir}/sha256'\n\
             if [[ \"${{t:13}}\" =~ ^[A-Za-z0-9_-]+$ ]]; then a=ok; else a=other; fi\n\
             printf '%s %s %s\\n' \"${{#t}}\" \"${{t:0:13}}\" \"$a\" >> '{dir}/shape'\n\
             {keep}\
             exec 5< <(printf '%s' \"$t\")\n\
             t=''\n\
             exec '{real}' \"$@\"\n",
            dir = dir.display(),
            real = real.display(),
        );
        let wrapper = real.with_file_name("claude-fd5");
        std::fs::write(&wrapper, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_file(link).unwrap();
        std::os::unix::fs::symlink(&wrapper, link).unwrap();
        Fd5Recorder { dir }
    }

    /// The SHA-256 of what fd 5 carried, one per launch so far, in order.
    ///
    /// ```no_run
    /// # let fd5: relay_tests::stand_in::Fd5Recorder = unimplemented!();
    /// assert!(fd5.hashes().iter().all(|h| h.len() == 64));
    /// ```
    pub fn hashes(&self) -> Vec<String> {
        self.lines("sha256")
    }

    /// The shape of what fd 5 carried, one per launch so far: its length, its first 13 bytes
    /// (`sk-ant-oat01-` for a token) and `ok` when the rest is all `[A-Za-z0-9_-]`, else
    /// `other`.
    ///
    /// ```no_run
    /// # let fd5: relay_tests::stand_in::Fd5Recorder = unimplemented!();
    /// assert!(fd5.shapes().iter().all(|s| s.contains(" sk-ant-oat01- ")));
    /// ```
    pub fn shapes(&self) -> Vec<String> {
        self.lines("shape")
    }

    /// What fd 5 carried, one per launch so far (only when installed with `keep_values`).
    ///
    /// ```no_run
    /// # let fd5: relay_tests::stand_in::Fd5Recorder = unimplemented!();
    /// let copied = fd5.values();
    /// # drop(copied);
    /// ```
    pub fn values(&self) -> Vec<String> {
        self.lines("values")
    }

    fn lines(&self, name: &str) -> Vec<String> {
        std::fs::read_to_string(self.dir.join(name))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// A `relay-host launch` running in the background.
pub struct Running {
    child: Option<Child>,
    start: Instant,
    token: String,
}

/// A token launch of template `claude-code` in the project of `s` with `extra_args` (a `-p`
/// turn's, or `auth status --json`), in the background, once the settings are checked to be
/// as shipped in `mode` ([`assert_as_shipped_in`]).
///
/// ```no_run
/// use relay_tests::agent::{print_args, Setup};
/// let s = Setup::new(|_, _| vec![]);
/// let mut run = relay_tests::stand_in::launch(&s, None, &print_args("Go."));
/// let turn = run.finish();
/// assert_eq!(turn.code, Some(0));
/// ```
pub fn launch(s: &Setup, mode: Option<&str>, extra_args: &[String]) -> Running {
    assert_as_shipped_in(&s.config, mode);
    launch_as_configured(s, extra_args)
}

/// [`launch`] on whatever settings were written (a benchmark's series that differs from the
/// shipped template on purpose).
///
/// ```no_run
/// use relay_tests::agent::{print_args, Setup};
/// let s = Setup::new(|_, _| vec![]);
/// let turn = relay_tests::stand_in::launch_as_configured(&s, &print_args("Go.")).finish();
/// # drop(turn);
/// ```
pub fn launch_as_configured(s: &Setup, extra_args: &[String]) -> Running {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let req = s.root.join(format!("request-{n}.json"));
    let body = json!({
        "kind": "terminal",
        "template": "claude-code",
        "project": s.project,
        "extra_args": extra_args,
    });
    std::fs::write(&req, body.to_string()).unwrap();
    let child = s
        .host(&["launch", req.to_str().unwrap()])
        .spawn()
        .expect("spawn relay-host");
    Running {
        child: Some(child),
        start: Instant::now(),
        token: s.token.clone(),
    }
}

/// [`launch`] to its end.
///
/// ```no_run
/// use relay_tests::agent::Setup;
/// let s = Setup::new(|_, _| vec![]);
/// let status = ["auth", "status", "--json"].map(String::from);
/// let out = relay_tests::stand_in::turn(&s, None, &status);
/// assert_eq!(out.code, Some(0));
/// ```
pub fn turn(s: &Setup, mode: Option<&str>, extra_args: &[String]) -> Turn {
    launch(s, mode, extra_args).finish()
}

impl Running {
    /// relay-host's pid.
    ///
    /// ```no_run
    /// # let run: relay_tests::stand_in::Running = unimplemented!();
    /// let inside = relay_tests::scan::sandbox_pids(run.pid());
    /// # drop(inside);
    /// ```
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Waits until `path` exists (a step of the script made it), or panics after `timeout` or
    /// when the launch ended first.
    ///
    /// ```no_run
    /// # let mut run: relay_tests::stand_in::Running = unimplemented!();
    /// run.wait_for("/var/tmp/x/project/.sync/scan.ready".as_ref(), std::time::Duration::from_secs(60));
    /// ```
    pub fn wait_for(&mut self, path: &Path, timeout: Duration) {
        let start = Instant::now();
        while !path.exists() {
            let ended = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = ended {
                let turn = self.finish();
                panic!(
                    "the launch ended ({status}) before {} appeared: {}",
                    path.display(),
                    turn.describe()
                );
            }
            assert!(
                start.elapsed() < timeout,
                "{} did not appear within {timeout:?}",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the end (killing the group after [`crate::agent::TURN_TIMEOUT`]); checks that neither stream
    /// holds the token.
    ///
    /// ```no_run
    /// # let mut run: relay_tests::stand_in::Running = unimplemented!();
    /// let turn = run.finish();
    /// eprintln!("{}", turn.describe());
    /// ```
    pub fn finish(&mut self) -> Turn {
        let child = self.child.take().expect("finished once");
        let turn = Turn::wait(child, self.start);
        assert!(
            !turn.stdout.contains(&self.token) && !turn.stderr.contains(&self.token),
            "the launch's output holds the token"
        );
        eprintln!("launch took {:?}, exit {:?}", turn.took, turn.code);
        turn
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill with the group of a child this process spawned and has not reaped.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}
