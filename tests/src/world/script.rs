//! A script in place of the agent in a token session.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::base::{World, SCRIPT_TIMEOUT};

/// Where a [`TokenScript`] and the `seen.txt` it writes lie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptAt {
    /// In the project folder: `script.sh` and `seen.txt` (a body writes `>> seen.txt`).
    Project,
    /// In `<root>/out`, granted read-write beside the template's grants: out of the project's
    /// git status, and reachable from any project the request names.
    Beside,
}

/// A script a token session runs in place of the agent (the way Claude Code runs its tools),
/// for [`World::run_token_script`]. It runs `/bin/sh` with `$seen` set to its `seen.txt`, in
/// the request's project, the prelude before the body.
#[derive(Debug, Clone)]
pub struct TokenScript {
    body: String,
    prelude: String,
    at: ScriptAt,
    project: Option<PathBuf>,
    sandbox: Value,
    writes_home: bool,
    beside: Vec<Value>,
}

impl TokenScript {
    /// `body` in the project, the project read-write ([`ScriptAt::Project`]).
    ///
    /// ```
    /// let s = relay_tests::world::TokenScript::new("git status; echo \"rc=$?\" >> seen.txt");
    /// # drop(s);
    /// ```
    pub fn new(body: &str) -> TokenScript {
        TokenScript {
            body: body.to_owned(),
            prelude: String::new(),
            at: ScriptAt::Project,
            project: None,
            sandbox: json!({"read_write": ["{project}"]}),
            writes_home: false,
            beside: Vec::new(),
        }
    }

    /// Another template in the settings beside the token session's (a `shell` that writes the
    /// home, say).
    pub fn beside(mut self, template: Value) -> TokenScript {
        self.beside.push(template);
        self
    }

    /// The template says `"writes_home": true`: the operator accepts that its sessions write
    /// the home folder (a grant of `~/` is refused without it).
    pub fn writes_home(mut self) -> TokenScript {
        self.writes_home = true;
        self
    }

    /// Where the script and its `seen.txt` lie.
    pub fn at(mut self, at: ScriptAt) -> TokenScript {
        self.at = at;
        self
    }

    /// The template's `sandbox` (default: `{project}` read-write).
    pub fn sandbox(mut self, sandbox: Value) -> TokenScript {
        self.sandbox = sandbox;
        self
    }

    /// The request's project (default: the world's).
    pub fn project(mut self, project: &Path) -> TokenScript {
        self.project = Some(project.to_path_buf());
        self
    }

    /// Lines run before the body (after `cd`).
    pub fn prelude(mut self, prelude: &str) -> TokenScript {
        self.prelude = prelude.to_owned();
        self
    }
}

/// Token sessions running a script.
impl World {
    /// A token launch (kind `claude`, sandboxed) of a `claude-code` template running
    /// `/bin/sh SCRIPT` with the script's grants and no network (`{"allow": []}`), as
    /// [`World::user`], under [`SCRIPT_TIMEOUT`]; panics unless it exited 0. Returns what the
    /// script wrote into its `seen.txt` (removed afterwards, so the next run starts empty).
    pub fn run_token_script(&self, s: &TokenScript) -> String {
        let project = s.project.clone().unwrap_or_else(|| self.project.clone());
        let mut sandbox = s.sandbox.clone();
        let dir = match s.at {
            ScriptAt::Project => self.project.clone(),
            ScriptAt::Beside => {
                let out = self.root.join("out");
                crate::fixture::mkdir(&out, 0o755);
                let rw = sandbox["read_write"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                sandbox["read_write"] =
                    json!(rw.into_iter().chain([json!(out)]).collect::<Vec<_>>());
                out
            }
        };
        let (script, seen) = (dir.join("script.sh"), dir.join("seen.txt"));
        let text = format!(
            "#!/bin/sh\nseen={}\ncd {}\n{}{}",
            seen.display(),
            project.display(),
            s.prelude,
            s.body
        );
        std::fs::write(&script, text).unwrap();
        let mut template = json!({
            "id": "claude-code",
            "command": ["/bin/sh", script],
            "sandbox": sandbox,
            "network": {"allow": []},
        });
        if s.writes_home {
            template["writes_home"] = json!(true);
        }
        let mut templates = vec![template];
        templates.extend(s.beside.iter().cloned());
        self.with_token(templates);
        let req = json!({"kind": "claude", "project": project, "sandbox": true,
                         "session_id": "script"});
        let out = self.launch_for(&req, SCRIPT_TIMEOUT);
        let text = std::fs::read_to_string(&seen).unwrap_or_default();
        assert_eq!(out.code, Some(0), "{}\n{text}", out.describe());
        let _ = std::fs::remove_file(&seen);
        text
    }
}
