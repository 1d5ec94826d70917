//! How a world runs `relay-host`: to the end, in the background, a copied host.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use super::base::{World, TIMEOUT, VAR};
use crate::run::Out;

/// Running `relay-host`.
impl World {
    /// A `relay-host` command on the world's folders ([`Folders::host_setup`]: a cleared
    /// environment, stdin `/dev/null`, a process group of its own) with [`World::host_env`]
    /// added, stdout and stderr piped; as [`World::user`] (through `setpriv`, the whole tree
    /// handed to that user first with [`World::hand_over`]), under umask 0 with
    /// [`World::umask0`].
    pub fn host_cmd(&self) -> Command {
        let mut cmd = match self.user {
            None => Command::new(&self.host),
            Some(id) => {
                if self.hand_over_each_run {
                    self.hand_over(id);
                }
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={id}"))
                    .arg(format!("--regid={id}"))
                    .args(["--clear-groups", "--"])
                    .arg(&self.host);
                c
            }
        };
        self.host_setup(&mut cmd, &self.state)
            .envs(&self.host_env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if self.umask0 {
            // SAFETY: umask is async-signal-safe and touches no memory.
            unsafe {
                cmd.pre_exec(|| {
                    libc::umask(0);
                    Ok(())
                });
            }
        }
        cmd
    }

    /// Hands the whole tree to `id` (`chown -R`).
    pub fn hand_over(&self, id: u32) {
        let ok = Command::new("chown")
            .arg("-R")
            .arg(format!("{id}:{id}"))
            .arg(&self.root)
            .status()
            .expect("run chown");
        assert!(ok.success(), "chown -R {id} {}", self.root.display());
    }

    /// Writes a request file (0644, so an unprivileged host can read it too).
    pub fn request_file(&self, req: &Value) -> PathBuf {
        let n = self.n.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let p = self.root.join(format!("req-{n}.json"));
        std::fs::write(&p, req.to_string()).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        p
    }

    /// A kind `claude` request for the project with session id `id` (sandboxed, the default).
    pub fn claude_req(&self, id: &str) -> Value {
        json!({"kind": "claude", "session_id": id, "project": self.project})
    }

    /// A kind `terminal` request of `template` for the project with `extra_args`.
    pub fn terminal_req(&self, template: &str, extra_args: &[&str]) -> Value {
        json!({"kind": "terminal", "template": template, "project": self.project,
               "extra_args": extra_args})
    }

    /// `relay-host launch REQ.json` ([`World::host_cmd`]), to the end under [`TIMEOUT`]
    /// ([`World::finish`]).
    pub fn launch(&self, req: &Value) -> Out {
        self.launch_for(req, TIMEOUT)
    }

    /// [`World::launch`] under `timeout`.
    pub fn launch_for(&self, req: &Value, timeout: Duration) -> Out {
        let p = self.request_file(req);
        let mut cmd = self.host_cmd();
        cmd.arg("launch").arg(&p);
        self.finish(cmd, timeout)
    }

    /// Runs `cmd` (a [`World::host_cmd`]) to its end under `timeout` ([`finish`]); neither
    /// stream holds a token this world wrote ([`World::assert_no_token_in`]).
    pub fn finish(&self, cmd: Command, timeout: Duration) -> Out {
        ended(self.finish_until(cmd, timeout, &|| false), timeout)
    }

    /// Runs `cmd` until it ends, `timeout` passes or `stop` says so (its process group killed
    /// then: [`crate::run::finish_with`]); neither stream holds a token this world wrote.
    pub fn finish_until(
        &self,
        mut cmd: Command,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Out {
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {:?}: {e}", cmd.get_program()));
        let out = crate::run::finish_with(child, timeout, stop);
        self.assert_no_token_in(&out, "relay-host");
        out
    }

    /// `relay-host launch REQ.json`, left running (its process group is killed if the test ends
    /// before [`Running::finish`]).
    pub fn launch_bg(&self, req: &Value) -> Running {
        self.launch_bg_with(req, |_| {})
    }

    /// [`World::launch_bg`] with `setup` applied to the host's command last (a signal ignored
    /// in it, say).
    pub fn launch_bg_with(&self, req: &Value, setup: impl FnOnce(&mut Command)) -> Running {
        let p = self.request_file(req);
        let mut cmd = self.host_cmd();
        cmd.arg("launch").arg(&p);
        setup(&mut cmd);
        Running(Some(cmd.spawn().unwrap()))
    }

    /// `relay-host ARGS`, to the end under [`TIMEOUT`].
    pub fn host(&self, args: &[&str]) -> Out {
        let mut cmd = self.host_cmd();
        cmd.args(args);
        self.finish(cmd, TIMEOUT)
    }

    /// Writes a `kind: claude` request for the project folder to `<root>/<name>.json` and
    /// returns its path. `extra` goes to the agent (`--sleep 2`, say).
    pub fn request(&self, name: &str, sandbox: bool, session_id: &str, extra: &[&str]) -> PathBuf {
        let req = json!({
            "kind": "claude",
            "project": self.project,
            "sandbox": sandbox,
            "session_id": session_id,
            "extra_args": extra,
        });
        let path = self.root.join(format!("{name}.json"));
        std::fs::write(&path, req.to_string()).unwrap();
        path
    }

    /// `relay-host --config-dir C --state-dir S launch REQ` with the test's environment but
    /// `HOME` and `FAKE_AGENT_RECORD` set (and the token variable removed), stdio on
    /// `/dev/null` (change it on the returned command if wanted) and the signals a test sends
    /// at their default action ([`crate::run::default_signals`]): what the benchmarks and the
    /// fault tests drive themselves.
    pub fn launch_cmd(&self, request: &Path) -> Command {
        let mut cmd = Command::new(&self.host);
        crate::run::default_signals(&mut cmd)
            .arg("--config-dir")
            .arg(&self.config)
            .arg("--state-dir")
            .arg(&self.state)
            .arg("launch")
            .arg(request)
            .env("HOME", &self.home)
            .env("FAKE_AGENT_RECORD", &self.record)
            .env_remove(VAR)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }

    /// A sandboxed `claude` request for session `id` with `extra` ([`World::request`]) run
    /// through [`World::launch_cmd`] (the test's environment, the fake agent's record
    /// variable), to its end under `timeout`, both streams captured ([`World::finish`]).
    pub fn launch_session(&self, id: &str, extra: &[&str], timeout: Duration) -> Out {
        self.launch_file(&self.request(id, true, id, extra), timeout)
    }

    /// The request file `req` run through [`World::launch_cmd`] to its end under `timeout`,
    /// both streams captured ([`World::finish`]).
    pub fn launch_file(&self, req: &Path, timeout: Duration) -> Out {
        let mut cmd = self.launch_cmd(req);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        self.finish(cmd, timeout)
    }

    /// The fake agent's records (start lines).
    pub fn records(&self) -> Vec<Value> {
        crate::read_records(&self.record)
    }

    /// Waits for `n` start lines (under [`TIMEOUT`]).
    pub fn wait_records(&self, n: usize) -> Vec<Value> {
        crate::wait_for_records(&self.record, n, TIMEOUT)
    }

    /// Removes the record file (before a launch whose record is checked alone).
    pub fn clear_record(&self) {
        let _ = std::fs::remove_file(&self.record);
    }

    /// The session folder of `id`.
    pub fn session_dir(&self, id: &str) -> PathBuf {
        self.state.join("sessions").join(id)
    }

    /// A copy of the built `relay-host` named `name` in the new folder `<root>/<folder>`, where
    /// no `relay-shim` stands beside it.
    pub fn lone_host(&self, folder: &str, name: &str) -> PathBuf {
        let dir = self.root.join(folder);
        std::fs::create_dir(&dir).unwrap();
        let host = dir.join(name);
        crate::copy_program(&crate::relay_host(), &host);
        host
    }

    /// `HOST --config-dir C --state-dir S launch REQ` for a copied host (see
    /// [`World::lone_host`]) with `PATH` of `/usr/bin:/bin` only (no `relay-shim` on it),
    /// stdout and stderr piped.
    pub fn lone_launch(&self, host: &Path, req: &Path) -> Command {
        let mut cmd = Command::new(host);
        self.host_setup(&mut cmd, &self.state)
            .env("PATH", "/usr/bin:/bin")
            .arg("launch")
            .arg(req)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }
}

/// A background `relay-host`; dropped unfinished (a failed assertion), its process group is
/// killed so no session outlives the test.
pub struct Running(Option<Child>);

impl Running {
    /// `child` (a `relay-host` leading its own process group) as a background host.
    pub fn new(child: Child) -> Running {
        Running(Some(child))
    }

    /// The host's pid.
    pub fn id(&self) -> u32 {
        self.0.as_ref().unwrap().id()
    }

    /// Waits for the end under `timeout` (see [`finish`]).
    pub fn finish(mut self, timeout: Duration) -> Out {
        finish(self.0.take().unwrap(), timeout)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            // SAFETY: kill takes integers only; the group is the one this child leads.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}

/// Waits for `child` under `timeout` (killed with its process group, and a panic, when it
/// overruns), collecting its output; a descendant that keeps a pipe open fails the test instead
/// of hanging it.
pub fn finish(child: Child, timeout: Duration) -> Out {
    ended(crate::run::finish_with(child, timeout, &|| false), timeout)
}

/// `out` of a relay-host that ended by itself within `timeout`: neither killed for overrunning
/// it nor ended by a signal.
fn ended(out: Out, timeout: Duration) -> Out {
    assert!(!out.killed, "relay-host did not finish within {timeout:?}");
    assert!(
        out.code.is_some(),
        "relay-host killed by signal {:?}",
        out.signal
    );
    out
}
